//! Starting the ranks and watching them until the job ends: all succeed, one
//! fails (the others are stopped), mwrun is told to stop, or time runs out.
//!
//! One thread polls every few milliseconds: with a handful of ranks that is
//! cheaper and simpler than a SIGCHLD pipe, and the latency is invisible next
//! to a process start. Ranks are signalled by process group, and only while
//! not yet reaped, so a recycled pid is never hit.
//!
//! Owns: the job's processes, its exit status (the failed rank's status, 128+N
//! for signal N, 124 past the time limit) and the message naming the rank and
//! the cause. Must not: signal a process it has reaped, or return before every
//! process it started (the rank itself, or the ssh or launcher process of a
//! remote rank) has been reaped, killed after the grace period if need be.

use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::hosts::Placement;
use crate::launch::JobSpec;
use crate::output::{spawn_forwarder, Sink};
use crate::sys;

/// How often ranks are checked.
const POLL: Duration = Duration::from_millis(5);
/// How long to wait for a failed rank's last output before reporting it, so
/// its own error message comes before mwrun's.
const LAST_WORDS: Duration = Duration::from_millis(500);
/// How long to wait for output after all ranks exited: a process a rank left
/// behind may hold its pipe open forever.
const OUTPUT_DRAIN: Duration = Duration::from_secs(1);

/// A rank that could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start rank {rank}: cannot run {program:?}: {source}")]
pub struct StartError {
    pub rank: u32,
    /// The program that failed to start (the rank's or the launcher).
    pub program: String,
    pub source: io::Error,
}

impl StartError {
    /// The shell's convention: 127 for not found, 126 for found but not
    /// executable (no permission, or not a format the kernel runs).
    pub fn exit_code(&self) -> i32 {
        match self.source.kind() {
            io::ErrorKind::NotFound => 127,
            io::ErrorKind::PermissionDenied => 126,
            _ if self.source.raw_os_error() == Some(libc::ENOEXEC) => 126,
            _ => 1,
        }
    }
}

struct RankProcess {
    rank: u32,
    host: Option<String>,
    child: Child,
    status: Option<ExitStatus>,
    forwarders: Vec<JoinHandle<()>>,
}

impl RankProcess {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The running job.
pub struct Job {
    ranks: Vec<RankProcess>,
    grace: Duration,
}

impl Job {
    /// Starts every rank, each bound as `binding` says if it has an entry
    /// there. If one cannot start, those already started are stopped before
    /// the error is returned.
    pub fn start(
        spec: &JobSpec,
        placements: &[Placement],
        local: &[bool],
        binding: &[Option<crate::cpus::Binding>],
        prefix: bool,
        grace: Duration,
    ) -> Result<Job, StartError> {
        let mut job = Job { ranks: Vec::with_capacity(placements.len()), grace };
        for (rank, placement) in (0u32..).zip(placements) {
            let is_local = local[rank as usize];
            let mut command = spec.rank_command(rank, placement, is_local);
            if let Some(bound) = &binding[rank as usize] {
                sys::bind_before_exec(&mut command, bound.share);
                if let Some(list) = &bound.background {
                    command.env(crate::cpus::BACKGROUND_CPUS, list);
                }
            }
            let program = command.get_program().to_string_lossy().into_owned();
            let started = command.spawn().and_then(|mut child| {
                let label = if prefix { format!("[{rank}] ") } else { String::new() };
                let stdout = child.stdout.take().expect("stdout is piped");
                let stderr = child.stderr.take().expect("stderr is piped");
                let forwarders = spawn_forwarder(stdout, label.clone(), Sink::Stdout)
                    .and_then(|out| Ok(vec![out, spawn_forwarder(stderr, label, Sink::Stderr)?]));
                match forwarders {
                    Ok(forwarders) => {
                        let host = (!is_local).then(|| placement.host.clone());
                        Ok(RankProcess { rank, host, child, status: None, forwarders })
                    }
                    Err(e) => {
                        // Nobody would read its output: do not leave it running.
                        let _ = sys::signal_group(child.id(), sys::SIGKILL);
                        let _ = child.wait();
                        Err(e)
                    }
                }
            });
            match started {
                Ok(process) => job.ranks.push(process),
                Err(source) => {
                    job.stop(sys::SIGTERM);
                    return Err(StartError { rank, program, source });
                }
            }
        }
        Ok(job)
    }

    /// Watches the job to its end and returns mwrun's exit status: 0 if
    /// every rank succeeded, the first failed rank's status (128+N for
    /// signal N), 128+N if mwrun got signal N, or 124 past `time_limit`.
    pub fn supervise(mut self, time_limit: Option<Duration>) -> i32 {
        let started = Instant::now();
        loop {
            if let Some(signal) = sys::take_pending_signal() {
                report(&format!("received {}; stopping {} ranks", sys::signal_name(signal), self.running()));
                self.stop(signal);
                self.drain_output(OUTPUT_DRAIN);
                return 128 + signal;
            }
            if let Some(failed) = self.reap() {
                self.stop(sys::SIGTERM);
                self.drain_rank_output(failed, LAST_WORDS);
                let rank = &self.ranks[failed];
                let status = rank.status.expect("a failed rank has exited");
                report(&describe_exit(rank.rank, rank.pid(), rank.host.as_deref(), status));
                self.drain_output(OUTPUT_DRAIN);
                return exit_code(status);
            }
            if self.running() == 0 {
                self.drain_output(OUTPUT_DRAIN);
                return 0;
            }
            if let Some(limit) = time_limit.filter(|limit| started.elapsed() >= *limit) {
                report(&format!("time limit of {limit:?} reached; stopping {} ranks", self.running()));
                self.stop(sys::SIGTERM);
                self.drain_output(OUTPUT_DRAIN);
                return 124;
            }
            thread::sleep(POLL);
        }
    }

    fn running(&self) -> usize {
        self.ranks.iter().filter(|r| r.status.is_none()).count()
    }

    /// Collects exit statuses; returns the index of the first rank found
    /// failed by this call.
    fn reap(&mut self) -> Option<usize> {
        let mut failed = None;
        for (index, rank) in self.ranks.iter_mut().enumerate() {
            if rank.status.is_some() {
                continue;
            }
            if let Ok(Some(status)) = rank.child.try_wait() {
                rank.status = Some(status);
                if !status.success() && failed.is_none() {
                    failed = Some(index);
                }
            }
        }
        failed
    }

    /// Sends `signal` to every running rank's process group, then SIGKILL to
    /// those still running after the grace period (or at once if another
    /// termination signal arrives meanwhile), and reaps them all.
    fn stop(&mut self, signal: i32) {
        for rank in self.ranks.iter().filter(|r| r.status.is_none()) {
            let _ = sys::signal_group(rank.pid(), signal);
        }
        let deadline = Instant::now() + self.grace;
        while self.running() > 0 && Instant::now() < deadline && sys::take_pending_signal().is_none() {
            thread::sleep(POLL);
            self.reap();
        }
        for rank in self.ranks.iter_mut().filter(|r| r.status.is_none()) {
            let _ = sys::signal_group(rank.pid(), sys::SIGKILL);
            rank.status = rank.child.wait().ok();
        }
    }

    fn drain_rank_output(&mut self, index: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && !self.ranks[index].forwarders.iter().all(JoinHandle::is_finished) {
            thread::sleep(POLL);
        }
    }

    /// Waits (boundedly) for every forwarder to reach the end of its pipe.
    fn drain_output(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && !self.ranks.iter().flat_map(|r| &r.forwarders).all(JoinHandle::is_finished) {
            thread::sleep(POLL);
        }
        let _ = io::stdout().flush();
    }
}

/// mwrun's own messages: on stderr, prefixed, never interleaved mid-line.
pub fn report(message: &str) {
    let _ = writeln!(io::stderr().lock(), "mwrun: {message}");
}

/// `rank 2 (pid 1234) exited with status 3`, or `killed by signal 9 (SIGKILL)`.
pub fn describe_exit(rank: u32, pid: u32, host: Option<&str>, status: ExitStatus) -> String {
    let whom = match host {
        Some(host) => format!("rank {rank} (pid {pid}, launcher for host {host})"),
        None => format!("rank {rank} (pid {pid})"),
    };
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("{whom} exited with status {code}"),
        (None, Some(signal)) => {
            let core = if status.core_dumped() { ", core dumped" } else { "" };
            format!("{whom} killed by signal {signal} ({}){core}", sys::signal_name(signal))
        }
        (None, None) => format!("{whom} ended with {status}"),
    }
}

/// A failed rank's status as mwrun's: its exit code, or 128+signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_are_described_like_a_shell_would() {
        let exited = ExitStatus::from_raw(3 << 8);
        assert_eq!(describe_exit(2, 1234, None, exited), "rank 2 (pid 1234) exited with status 3");
        assert_eq!(exit_code(exited), 3);
        let killed = ExitStatus::from_raw(9);
        assert_eq!(describe_exit(1, 7, None, killed), "rank 1 (pid 7) killed by signal 9 (SIGKILL)");
        assert_eq!(exit_code(killed), 137);
        let remote = describe_exit(0, 5, Some("b"), exited);
        assert_eq!(remote, "rank 0 (pid 5, launcher for host b) exited with status 3");
    }

    #[test]
    fn start_errors_map_to_shell_exit_codes() {
        let err = |kind| StartError { rank: 0, program: "x".into(), source: io::Error::from(kind) };
        assert_eq!(err(io::ErrorKind::NotFound).exit_code(), 127);
        assert_eq!(err(io::ErrorKind::PermissionDenied).exit_code(), 126);
    }
}
