//! [`BootstrapError`]: everything that can go wrong while a job starts up or
//! synchronises out of band.
//!
//! Owns: the variants, one per cause, and which startup [`Step`] each happened
//! in. Must not: hold the job key or other secrets in a message, or lose the
//! underlying I/O error (it is the `source`).

use std::fmt;
use std::io;
use std::time::Duration;

/// A collective step of the rendezvous, named in errors so a user can tell
/// which call of their program was waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Connecting to the rendezvous server and introducing this rank.
    Join,
    /// An allgather: the job's collective number `round`.
    Allgather {
        /// Collectives this rank made before this one, counting the host
        /// exchange inside join as the first (so a program's first call is 1).
        round: u64,
    },
    /// A barrier: the job's collective number `round`.
    Barrier {
        /// Collectives this rank made before this one, counting the host
        /// exchange inside join as the first (so a program's first call is 1).
        round: u64,
    },
    /// Telling the others that this rank aborts.
    Abort,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Join => f.write_str("join"),
            Step::Allgather { round } => write!(f, "allgather (collective #{round})"),
            Step::Barrier { round } => write!(f, "barrier (collective #{round})"),
            Step::Abort => f.write_str("abort"),
        }
    }
}

impl BootstrapError {
    /// Renames the step of an error that happened in the host exchange
    /// inside join, which the user knows as joining, not as a collective.
    pub(crate) fn during_join(self) -> BootstrapError {
        match self {
            BootstrapError::Timeout { after, .. } => BootstrapError::Timeout { step: Step::Join, after },
            BootstrapError::ServerClosed { .. } => BootstrapError::ServerClosed { step: Step::Join },
            BootstrapError::Io { source, .. } => BootstrapError::Io { step: Step::Join, source },
            other => other,
        }
    }
}

/// Why bootstrapping or a bootstrap collective failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BootstrapError {
    /// An environment variable is set but malformed or inconsistent.
    #[error("{var}={value:?}: {reason}")]
    InvalidEnv {
        /// The variable's name.
        var: &'static str,
        /// Its value as found.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A variable the selected launch mode needs is not set.
    #[error("{var} is not set, but {because}")]
    MissingEnv {
        /// The missing variable.
        var: &'static str,
        /// Why it is needed.
        because: String,
    },
    /// The process was started by a launcher this crate cannot talk to yet.
    #[error(
        "started by {launcher} ({evidence} is set), which mw-bootstrap does not support yet; \
         launch with mwrun, or set MW_RANK, MW_SIZE and MW_BOOTSTRAP"
    )]
    UnsupportedLauncher {
        /// The launcher recognised.
        launcher: &'static str,
        /// The variable that gave it away.
        evidence: &'static str,
    },
    /// The operating system's random source failed while making a job key.
    #[error("cannot draw a random job key: {0}")]
    Random(String),
    /// The rendezvous server could not listen on its address.
    #[error("cannot listen for the rendezvous on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The operating system's reason.
        source: io::Error,
    },
    /// The rendezvous address names no host that can be found.
    #[error("cannot resolve the rendezvous address {addr}: {source}")]
    Resolve {
        /// The address as given.
        addr: String,
        /// The resolver's reason.
        source: io::Error,
    },
    /// The rendezvous server could not be reached before the timeout.
    #[error("cannot reach the rendezvous server at {addr} within {after:?}: {source}")]
    Connect {
        /// The address tried.
        addr: String,
        /// How long connection attempts went on.
        after: Duration,
        /// The last attempt's failure.
        source: io::Error,
    },
    /// A step did not complete within `MW_BOOTSTRAP_TIMEOUT`.
    #[error(
        "{step} did not complete within {after:?}: some rank has not {} \
         (set MW_BOOTSTRAP_TIMEOUT to wait longer)",
        if *step == Step::Join { "joined" } else { "reached it" }
    )]
    Timeout {
        /// The step that was waiting.
        step: Step,
        /// The timeout in force.
        after: Duration,
    },
    /// The rendezvous server went away (mwrun, or rank 0 in env mode, exited).
    #[error("the rendezvous server closed the connection during {step}")]
    ServerClosed {
        /// The step that was under way.
        step: Step,
    },
    /// Reading or writing the rendezvous connection failed.
    #[error("rendezvous connection failed during {step}: {source}")]
    Io {
        /// The step that was under way.
        step: Step,
        /// The operating system's reason.
        source: io::Error,
    },
    /// A peer sent bytes that are not a valid rendezvous message.
    #[error("rendezvous protocol error: {0}")]
    Protocol(String),
    /// The server refused this rank's introduction (bad rank, size, key or
    /// version, or the rank joined twice).
    #[error("the rendezvous server rejected rank {rank}: {reason}")]
    Rejected {
        /// The rank that asked to join.
        rank: u32,
        /// The server's reason.
        reason: String,
    },
    /// Another rank's connection dropped without a goodbye: it most likely died.
    #[error("rank {rank} lost its rendezvous connection (did the process die?)")]
    RankLost {
        /// The rank that vanished.
        rank: u32,
    },
    /// Another rank finalized while this one still wanted a collective with it.
    #[error("rank {rank} has already left the job, so the collective cannot complete")]
    RankLeft {
        /// The rank that left.
        rank: u32,
    },
    /// Another rank (or this one) called [`Bootstrap::abort`](crate::Bootstrap::abort).
    #[error("rank {rank} aborted the job: {reason}")]
    Aborted {
        /// The rank that aborted.
        rank: u32,
        /// Its message.
        reason: String,
    },
    /// Ranks made different collective calls at the same point.
    #[error("ranks disagree on the collective call: {0}")]
    Mismatch(String),
    /// The PMI launcher (MPICH Hydra, Slurm) refused a request or answered
    /// something this client cannot use.
    #[error("PMI-{version} launcher: {detail}")]
    Pmi {
        /// The PMI wire protocol spoken, 1 or 2.
        version: u8,
        /// What went wrong, naming the request.
        detail: String,
    },
    /// The PMIx launcher (Slurm's `--mpi=pmix`, Open MPI's `mpirun`) or its
    /// library failed a call, did not answer in time, or cannot be loaded.
    #[error("PMIx launcher: {detail}")]
    Pmix {
        /// What went wrong: the rank, the call, the step and the cause.
        detail: String,
    },
    /// No local address could be found that the other ranks reach.
    #[error("cannot choose the local address for the data path: {0}")]
    Address(io::Error),
    /// An earlier failure left the connection in an unknown state.
    #[error("the bootstrap is unusable after an earlier error")]
    Poisoned,
}
