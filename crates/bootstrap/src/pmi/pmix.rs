//! Joining a job through a PMIx launcher: Slurm's `srun --mpi=pmix`, Open
//! MPI's `mpirun`, PRRTE's `prterun`. The launcher's PMIx library
//! ([`super::pmix_lib`]) does the talking; this is the [`Kvs`] on top.
//!
//! Owns: `PMIx_Init` and what it tells (rank, namespace), the job-level
//! facts fetched after it (size, local rank and size, host name), and the
//! key-value space: `put` is `PMIx_Put` (global scope), `fence` is
//! `PMIx_Commit` then `PMIx_Fence` over the namespace with data collection,
//! `get` is `PMIx_Get` from the rank encoded in the key. Must not: wait past
//! the bootstrap deadline: every call that can block runs on a helper thread
//! the session stops waiting for at the deadline (the call itself cannot be
//! cancelled; the job fails anyway), so a server that vanished or a rank
//! that never fences gives [`BootstrapError::Pmix`] naming the step, the rank
//! and the deadline, not a hang.

use std::sync::mpsc;
use std::time::Duration;

use super::pmix_lib::{self, Fetched, Library, Status, RANK_WILDCARD};
use super::Kvs;
use crate::error::{BootstrapError, Step};

/// What the environment says about a PMIx launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PmixPlan {
    /// `PMIX_RANK` as the launcher set it (checked against `PMIx_Init`).
    pub rank: u32,
    /// `PMIX_NAMESPACE`.
    pub namespace: String,
    /// `MW_PMIX_LIB`: the library to load instead of `libpmix.so.2`.
    pub library: Option<String>,
    /// `MW_HOST`, else the host name PMIx gives.
    pub host: Option<String>,
    /// `MW_JOB_KEY`, used by rank 0 instead of a random key when set.
    pub job_key: Option<[u8; 16]>,
    pub timeout: Duration,
}

/// A PMIx session: this process's identity and its job's shape.
#[derive(Debug)]
pub(crate) struct Pmix {
    lib: &'static Library,
    namespace: String,
    pub(crate) rank: u32,
    pub(crate) size: u32,
    /// `PMIX_LOCAL_RANK` and `PMIX_LOCAL_SIZE`, when the server has them.
    pub(crate) local: Option<(u32, u32)>,
    /// `PMIX_HOSTNAME` for this process, when the server has it.
    pub(crate) host: Option<String>,
    timeout: Duration,
    healthy: bool,
}

impl Pmix {
    /// Loads the library, initialises and learns the job's shape.
    pub(crate) fn init(plan: &PmixPlan) -> Result<Pmix, BootstrapError> {
        let lib = pmix_lib::load(plan.library.as_deref()).map_err(|why| BootstrapError::Pmix {
            detail: format!(
                "this process was started by a PMIx launcher (PMIX_RANK={}, PMIX_NAMESPACE={}), but the PMIx \
                 library cannot be loaded: {why}; install it (Debian: libpmix2) or name it with MW_PMIX_LIB",
                plan.rank, plan.namespace
            ),
        })?;
        let timeout = plan.timeout;
        let me = bounded(timeout, move || lib.init())
            .map_err(|e| failure(plan.rank, Step::Join, "PMIx_Init", e, timeout))?;
        let (namespace, rank) = (me.nspace(), me.rank());
        if (namespace.as_str(), rank) != (plan.namespace.as_str(), plan.rank) {
            return Err(BootstrapError::Pmix {
                detail: format!(
                    "PMIx_Init says rank {rank} of namespace {namespace}, but PMIX_RANK={} and PMIX_NAMESPACE={}",
                    plan.rank, plan.namespace
                ),
            });
        }
        let mut session = Pmix { lib, namespace, rank, size: 0, local: None, host: None, timeout, healthy: true };
        session.size = match session.number(RANK_WILDCARD, "pmix.job.size")? {
            Some(size) if size > rank => size,
            other => {
                return Err(session.fail(Step::Join, format!("PMIX_JOB_SIZE is {other:?}, not above this rank")));
            }
        };
        let local_rank = session.number(rank, "pmix.lrank").ok().flatten();
        let local_size = session.number(RANK_WILDCARD, "pmix.local.size").ok().flatten();
        session.local = match (local_rank, local_size) {
            (Some(r), Some(s)) if r < s && s <= session.size => Some((r, s)),
            _ => None,
        };
        session.host = match session.fetch(Step::Join, rank, "pmix.hname") {
            Ok(Fetched::Text(name)) if !name.is_empty() => Some(name),
            _ => None,
        };
        Ok(session)
    }

    /// A number the server holds for `rank` (or the job), at join.
    fn number(&mut self, rank: u32, key: &'static str) -> Result<Option<u32>, BootstrapError> {
        match self.fetch(Step::Join, rank, key)? {
            Fetched::Number(n) => Ok(Some(n)),
            Fetched::Text(_) | Fetched::Other(_) => Ok(None),
        }
    }

    /// `PMIx_Get` of `key` from `rank` (or the job), within the deadline.
    fn fetch(&mut self, step: Step, rank: u32, key: &'static str) -> Result<Fetched, BootstrapError> {
        let (lib, namespace) = (self.lib, self.namespace.clone());
        let result = bounded(self.timeout, move || lib.get(&namespace, rank, key));
        result.map_err(|e| self.failure(step, &format!("PMIx_Get {key} from rank {rank}"), e))
    }

    fn failure(&mut self, step: Step, call: &str, error: Waited) -> BootstrapError {
        if matches!(error, Waited::Gone) {
            self.healthy = false;
        }
        failure(self.rank, step, call, error, self.timeout)
    }

    fn fail(&mut self, step: Step, detail: String) -> BootstrapError {
        BootstrapError::Pmix { detail: format!("rank {} during {step}: {detail}", self.rank) }
    }
}

/// Why a bounded PMIx call did not succeed.
#[derive(Debug)]
enum Waited {
    /// The library answered with an error status.
    Refused(Status),
    /// No answer before the deadline.
    Gone,
}

fn failure(rank: u32, step: Step, call: &str, error: Waited, timeout: Duration) -> BootstrapError {
    let detail = match error {
        Waited::Refused(status) => {
            format!("rank {rank}: {call} during {step} failed: {} ({})", status.text, status.code)
        }
        Waited::Gone => format!(
            "rank {rank}: {call} during {step} got no answer within {timeout:?}: some rank has not reached \
             it, or the launcher's PMIx server is gone (set MW_BOOTSTRAP_TIMEOUT to wait longer)"
        ),
    };
    BootstrapError::Pmix { detail }
}

/// Runs `call` on a helper thread and waits for it at most `timeout`.
fn bounded<T: Send + 'static>(
    timeout: Duration,
    call: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Waited> {
    let (tx, rx) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new().name("mw-pmix".into()).spawn(move || {
        let _ = tx.send(call());
    });
    if spawned.is_err() {
        return Err(Waited::Refused(Status { code: -1, text: "cannot start a thread for the PMIx call".into() }));
    }
    match rx.recv_timeout(timeout) {
        Ok(result) => result.map_err(Waited::Refused),
        Err(_) => Err(Waited::Gone),
    }
}

/// The rank whose key `mw-ROUND-RANK-CHUNK` (or `mw-jobkey`, rank 0's) is.
fn owner(key: &str) -> u32 {
    key.strip_prefix("mw-").and_then(|rest| rest.split('-').nth(1)).and_then(|r| r.parse().ok()).unwrap_or(0)
}

impl Kvs for Pmix {
    fn error(&self, detail: String) -> BootstrapError {
        BootstrapError::Pmix { detail }
    }

    /// PMIx has no small value limit; this keeps each value modest.
    fn max_value_len(&self) -> usize {
        64 << 10
    }

    fn put(&mut self, step: Step, key: &str, value: &str) -> Result<(), BootstrapError> {
        // Puts are local to the client library: no server round trip.
        self.lib.put_text(key, value).map_err(|e| self.failure(step, &format!("PMIx_Put {key}"), Waited::Refused(e)))
    }

    fn fence(&mut self, step: Step) -> Result<(), BootstrapError> {
        let lib = self.lib;
        let result = bounded(self.timeout, move || {
            lib.commit()?;
            lib.fence_all()
        });
        result.map_err(|e| self.failure(step, "PMIx_Fence", e))
    }

    fn get(&mut self, step: Step, key: &str) -> Result<String, BootstrapError> {
        let (lib, namespace, owner, owned) = (self.lib, self.namespace.clone(), owner(key), key.to_owned());
        let result = bounded(self.timeout, move || lib.get(&namespace, owner, &owned));
        match result.map_err(|e| self.failure(step, &format!("PMIx_Get {key} from rank {owner}"), e))? {
            Fetched::Text(text) => Ok(text),
            other => Err(self.fail(step, format!("key {key} of rank {owner} holds {other:?}, not text"))),
        }
    }

    fn abort(&mut self, reason: &str) {
        eprintln!("memwire: rank {} aborting the job: {reason}", self.rank);
        if self.healthy {
            let lib = self.lib;
            let reason = reason.to_owned();
            // Bounded: the server that should kill the job may be gone.
            let _ = bounded(self.timeout, move || {
                lib.abort(1, &reason);
                Ok(())
            });
        }
        self.healthy = false;
    }

    fn finalize(&mut self) {
        if self.healthy {
            let lib = self.lib;
            let _ = bounded(self.timeout, move || {
                lib.finalize();
                Ok(())
            });
        }
        self.healthy = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_owner() {
        assert_eq!(owner("mw-3-17-0"), 17);
        assert_eq!(owner("mw-0-0-2"), 0);
        assert_eq!(owner("mw-jobkey"), 0);
    }

    #[test]
    fn a_call_that_never_answers_ends_at_the_deadline() {
        let start = std::time::Instant::now();
        let result = bounded(Duration::from_millis(50), || -> Result<(), Status> {
            std::thread::sleep(Duration::from_secs(5));
            Ok(())
        });
        assert!(matches!(result, Err(Waited::Gone)));
        assert!(start.elapsed() < Duration::from_secs(2));
        let err = failure(3, Step::Join, "PMIx_Fence", Waited::Gone, Duration::from_secs(2)).to_string();
        assert!(err.contains("rank 3") && err.contains("PMIx_Fence during join") && err.contains("no answer"), "{err}");
    }
}
