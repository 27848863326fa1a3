//! The endpoint's error type: what a user of the library sees.
//!
//! One variant per distinct cause, each with a doc line. Remote failures carry
//! the status the target answered with; the C API maps these to `mw_status`
//! codes in exactly one table (crate capi).
//!
//! Owns: [`Error`], [`Result`] and the mapping from a target's wire [`Status`]
//! to a variant. Must not: hold C status codes (capi's table does), or lose the
//! cause: a distinct cause gets its own variant, details travel in its fields.

use mw_wire::op::Status;

/// Everything a memwire call can fail with.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The target rank is outside `0..size`.
    #[error("rank {rank} is out of range (job size {size})")]
    BadRank {
        /// Rank asked for.
        rank: u32,
        /// Number of ranks in the job.
        size: u32,
    },
    /// The peer stopped answering (or restarted); the operation may or may not
    /// have taken effect at the target.
    #[error("peer {rank} is unreachable")]
    PeerUnreachable {
        /// The unreachable rank.
        rank: u32,
    },
    /// The target does not know this region key (never registered, or deregistered).
    #[error("remote region key is not registered at the target")]
    BadKey,
    /// `offset + len` is outside the region (the target's memory is untouched).
    #[error("access outside the region's bounds")]
    OutOfBounds,
    /// The region does not grant the access the operation needs.
    #[error("the region does not permit this access")]
    NoPermission,
    /// An atomic operation's target is not aligned to its width.
    #[error("atomic target is not aligned to its width")]
    Misaligned,
    /// The target does not support the operation (e.g. unknown address register).
    #[error("operation not supported by the target")]
    Unsupported,
    /// No active-message handler is registered under that id at the target.
    #[error("no handler registered for that id at the target")]
    NoHandler,
    /// The receive buffer was smaller than the incoming data.
    #[error("message truncated: buffer too small")]
    Truncated,
    /// The operation would have to wait (a full FIFO, no credits) and the
    /// caller asked not to.
    #[error("operation would block")]
    WouldBlock,
    /// A caller-supplied argument is invalid (the message says which).
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// Waiting ran past its deadline (the caller's timeout, or
    /// `Config::op_timeout`).
    #[error("timed out")]
    Timeout,
    /// The receiver gave the message up before all of it arrived (its
    /// receive timed out or was dropped): the message was not delivered.
    #[error("the receiver cancelled the receive before the message was delivered")]
    Cancelled,
    /// The team (or the endpoint's own gather) is out of step with its
    /// other members: an earlier collective on it timed out on this rank.
    /// Every later collective on it fails so; free it (`Team::split` of a
    /// sound team makes a new one).
    #[error("a collective timed out on this team earlier: its members are out of step")]
    TeamBroken,
    /// Starting the job failed (bootstrap, address exchange).
    #[error("bootstrap failed: {0}")]
    Bootstrap(String),
    /// The operating system refused something (socket, memory).
    #[error("I/O error: {0}")]
    Io(String),
    /// The target answered with a status this build does not know.
    #[error("remote error (status {0})")]
    Remote(u8),
}

impl Error {
    /// The error a remote status code stands for; `None` for success.
    pub(crate) fn from_status(status: Status) -> Option<Error> {
        Some(match status {
            Status::Ok => return None,
            Status::BadKey => Error::BadKey,
            Status::OutOfBounds => Error::OutOfBounds,
            Status::NoPermission => Error::NoPermission,
            Status::Misaligned => Error::Misaligned,
            Status::Unsupported => Error::Unsupported,
            Status::NoHandler => Error::NoHandler,
            Status::Truncated => Error::Truncated,
            Status::WouldBlock => Error::WouldBlock,
            Status::BadArgument => Error::InvalidArgument("rejected by target"),
            Status::Cancelled => Error::Cancelled,
        })
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Error {
        Error::Io(err.to_string())
    }
}

/// Result alias for this crate.
pub type Result<T> = core::result::Result<T, Error>;
