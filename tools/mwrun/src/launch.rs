//! Turning a rank's placement into the command that starts it: directly on
//! this host, or through ssh or a user-given remote-exec command elsewhere.
//!
//! Owns: each rank's environment (mwrun's `MW_*` over `-x` over the caller's),
//! the local command, and the ssh or `--launcher-exec` command line with its
//! shell quoting. Must not: start or watch processes (`supervise` does), or let
//! a remote word reach a shell unquoted.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use mw_bootstrap::env as vars;

use crate::hosts::Placement;

/// How ranks on other hosts are started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteExec {
    /// `ssh -o BatchMode=yes HOST 'env VAR=VAL... PROG ARGS...'`; ssh hands
    /// the command to the remote shell, so every word is quoted for it.
    Ssh,
    /// `CMD... HOST env VAR=VAL... PROG ARGS...`, words passed as they are.
    Exec(Vec<String>),
}

/// A `-x` option that cannot be honoured.
#[derive(Debug, thiserror::Error)]
pub enum EnvOptionError {
    /// `-x VAR` for a variable mwrun does not have.
    #[error("-x {0}: {0} is not set in mwrun's environment (use -x {0}=VALUE)")]
    Unset(String),
    /// `-x =VAL` or similar.
    #[error("-x {0:?}: expected VAR=VALUE or VAR")]
    Malformed(String),
}

/// Parses `-x VAR=VAL` / `-x VAR` options, reading bare names through `lookup`.
pub fn parse_env_options(
    options: &[String],
    lookup: impl Fn(&str) -> Option<OsString>,
) -> Result<Vec<(String, OsString)>, EnvOptionError> {
    options
        .iter()
        .map(|option| {
            let (name, value) = match option.split_once('=') {
                Some((name, value)) => (name, Some(OsString::from(value))),
                None => (option.as_str(), None),
            };
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(EnvOptionError::Malformed(option.clone()));
            }
            let value = value.or_else(|| lookup(name)).ok_or_else(|| EnvOptionError::Unset(name.to_owned()))?;
            Ok((name.to_owned(), value))
        })
        .collect()
}

/// Everything about the job that every rank's command shares.
#[derive(Debug)]
pub struct JobSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub size: u32,
    /// `host:port` of mwrun's rendezvous, as ranks should dial it.
    pub bootstrap_addr: String,
    pub job_key_hex: String,
    /// From `-x`.
    pub user_env: Vec<(String, OsString)>,
    /// The caller's own `MW_*` settings, which remote ranks do not inherit.
    pub passthrough_env: Vec<(String, OsString)>,
    pub remote: RemoteExec,
}

/// The caller's `MW_*` variables, minus the ones mwrun sets per rank.
pub fn passthrough_env(environment: impl Iterator<Item = (OsString, OsString)>) -> Vec<(String, OsString)> {
    environment
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value)))
        .filter(|(name, _)| name.starts_with("MW_") && !is_set_by_mwrun(name))
        .collect()
}

fn is_set_by_mwrun(name: &str) -> bool {
    [vars::RANK, vars::SIZE, vars::LOCAL_RANK, vars::LOCAL_SIZE, vars::HOST, vars::BOOTSTRAP, vars::JOB_KEY]
        .contains(&name)
}

impl JobSpec {
    /// The `MW_*` variables of one rank.
    pub fn rank_env(&self, rank: u32, placement: &Placement) -> Vec<(&'static str, String)> {
        vec![
            (vars::RANK, rank.to_string()),
            (vars::SIZE, self.size.to_string()),
            (vars::LOCAL_RANK, placement.local_rank.to_string()),
            (vars::LOCAL_SIZE, placement.local_size.to_string()),
            (vars::HOST, placement.host.clone()),
            (vars::BOOTSTRAP, self.bootstrap_addr.clone()),
            (vars::JOB_KEY, self.job_key_hex.clone()),
        ]
    }

    /// The command that starts `rank`: in its own process group (so that
    /// stopping it reaches whatever it started, and the terminal's ^C reaches
    /// only mwrun, which forwards it), stdin closed, output piped to mwrun.
    pub fn rank_command(&self, rank: u32, placement: &Placement, local: bool) -> Command {
        let mut command =
            if local { self.local_command(rank, placement) } else { self.remote_command(rank, placement) };
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        command
    }

    fn local_command(&self, rank: u32, placement: &Placement) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        command.envs(self.user_env.iter().map(|(k, v)| (k, v)));
        command.envs(self.rank_env(rank, placement));
        command
    }

    /// `env VAR=VAL... PROG ARGS...`: the caller's MW_* first, then `-x`,
    /// then mwrun's own, so that the later (more specific) wins.
    fn remote_words(&self, rank: u32, placement: &Placement) -> Vec<OsString> {
        let assignment = |name: &str, value: &OsStr| {
            let mut word = OsString::from(name);
            word.push("=");
            word.push(value);
            word
        };
        let mut words = vec![OsString::from("env")];
        words.extend(self.passthrough_env.iter().map(|(k, v)| assignment(k, v)));
        words.extend(self.user_env.iter().map(|(k, v)| assignment(k, v)));
        words.extend(self.rank_env(rank, placement).iter().map(|(k, v)| assignment(k, OsStr::new(v))));
        words.push(self.program.clone());
        words.extend(self.args.iter().cloned());
        words
    }

    fn remote_command(&self, rank: u32, placement: &Placement) -> Command {
        let words = self.remote_words(rank, placement);
        match &self.remote {
            RemoteExec::Ssh => {
                let mut command = Command::new("ssh");
                let script: Vec<String> = words.iter().map(|w| shell_quote(&w.to_string_lossy())).collect();
                command.args(["-o", "BatchMode=yes", &placement.host]).arg(script.join(" "));
                command
            }
            RemoteExec::Exec(launcher) => {
                let mut command = Command::new(&launcher[0]);
                command.args(&launcher[1..]).arg(&placement.host).args(words);
                command
            }
        }
    }
}

/// Quotes `word` for a POSIX shell, leaving plainly safe words bare.
pub fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(remote: RemoteExec) -> JobSpec {
        JobSpec {
            program: "./app".into(),
            args: vec!["-v".into(), "it's".into()],
            size: 2,
            bootstrap_addr: "10.0.0.1:4000".into(),
            job_key_hex: "00".repeat(16),
            user_env: vec![("OMP_NUM_THREADS".into(), "2".into())],
            passthrough_env: vec![("MW_STATS".into(), "1".into())],
            remote,
        }
    }

    fn placement() -> Placement {
        Placement { host: "b".into(), local_rank: 0, local_size: 1 }
    }

    fn argv(command: &Command) -> Vec<String> {
        std::iter::once(command.get_program())
            .chain(command.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn exec_launcher_gets_the_host_first_then_env_and_the_program() {
        let spec = spec(RemoteExec::Exec(vec!["ip".into(), "netns".into(), "exec".into()]));
        let argv = argv(&spec.rank_command(1, &placement(), false));
        assert_eq!(argv[..6], ["ip", "netns", "exec", "b", "env", "MW_STATS=1"]);
        assert_eq!(argv[6], "OMP_NUM_THREADS=2");
        assert!(argv.contains(&"MW_RANK=1".to_owned()) && argv.contains(&"MW_BOOTSTRAP=10.0.0.1:4000".to_owned()));
        assert_eq!(argv[argv.len() - 3..], ["./app", "-v", "it's"]);
    }

    #[test]
    fn ssh_gets_one_quoted_remote_command() {
        let argv = argv(&spec(RemoteExec::Ssh).rank_command(0, &placement(), false));
        assert_eq!(argv[..4], ["ssh", "-o", "BatchMode=yes", "b"]);
        assert_eq!(argv.len(), 5);
        assert!(argv[4].starts_with("env MW_STATS=1 OMP_NUM_THREADS=2 MW_RANK=0 "), "{}", argv[4]);
        assert!(argv[4].ends_with(" ./app -v 'it'\\''s'"), "{}", argv[4]);
    }

    #[test]
    fn local_ranks_run_the_program_directly_with_their_env() {
        let command = spec(RemoteExec::Ssh).rank_command(1, &placement(), true);
        assert_eq!(argv(&command), ["./app", "-v", "it's"]);
        let env: Vec<_> = command.get_envs().map(|(k, v)| (k.to_owned(), v.map(OsStr::to_owned))).collect();
        assert!(env.contains(&("MW_RANK".into(), Some("1".into()))));
        assert!(env.contains(&("OMP_NUM_THREADS".into(), Some("2".into()))));
    }

    #[test]
    fn env_options_parse() {
        let lookup = |name: &str| (name == "HOME").then(|| OsString::from("/root"));
        let parsed = parse_env_options(&["A=1".into(), "B=x=y".into(), "HOME".into()], lookup).unwrap();
        assert_eq!(parsed, [("A".into(), "1".into()), ("B".into(), "x=y".into()), ("HOME".into(), "/root".into())]);
        let unset = parse_env_options(&["NOPE".into()], lookup).unwrap_err().to_string();
        assert_eq!(unset, "-x NOPE: NOPE is not set in mwrun's environment (use -x NOPE=VALUE)");
        assert!(parse_env_options(&["=1".into()], lookup).is_err());
    }

    #[test]
    fn passthrough_keeps_the_callers_settings_but_not_the_job_identity() {
        let env = [("MW_STATS", "1"), ("MW_RANK", "7"), ("PATH", "/bin"), ("MW_JOB_KEY", "x")]
            .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        assert_eq!(passthrough_env(env.into_iter()), [("MW_STATS".to_owned(), OsString::from("1"))]);
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("plain-word_1.2"), "plain-word_1.2");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
