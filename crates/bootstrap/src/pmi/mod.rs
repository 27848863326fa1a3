//! Joining a job through a PMI launcher: MPICH's Hydra (`mpiexec`, PMI-1),
//! Slurm (`srun --mpi=pmi2`, PMI-2), or a PMIx one (`srun --mpi=pmix`,
//! Open MPI's `mpirun`).
//!
//! Owns: connecting to the launcher's socket (`PMI_FD`), the two wire
//! clients ([`pmi1`], [`pmi2`]) and the PMIx library's session ([`pmix`])
//! behind the [`Kvs`] trait, and the
//! [`PmiSession`] that builds the crate's collectives on a key-value space:
//! an allgather is a put of each rank's blob (hex, cut into values the
//! launcher accepts), a fence, and a get of every rank's; a barrier is a
//! fence. The job key is agreed the same way: rank 0 draws it (or takes
//! `MW_JOB_KEY`) and puts it before the first fence.
//!
//! Must not: wait past `MW_BOOTSTRAP_TIMEOUT` for any answer, or trust the
//! launcher's answers without checking them. Unlike the rendezvous, PMI
//! cannot tell a rank calling `barrier` from one calling `allgather`: a
//! program that mixes them up fails with a missing key or a timeout, not
//! with [`BootstrapError::Mismatch`].

mod conn;
mod fd;
mod pmi1;
mod pmi2;
pub(crate) mod pmix;
mod pmix_lib;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::fmt::Debug;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::error::{BootstrapError, Step};
use crate::job::{self, job_key_from_hex, job_key_to_hex, random_job_key, JobInfo};

/// KVS key under which rank 0 publishes the job key.
const JOB_KEY_KEY: &str = "mw-jobkey";

/// What the environment says about a PMI launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PmiPlan {
    /// Wire protocol: 1 (Hydra's default) or 2 (Slurm's `--mpi=pmi2`).
    pub version: u8,
    /// The launcher's socket, `PMI_FD`.
    pub fd: RawFd,
    /// `PMI_RANK`.
    pub rank: u32,
    /// `PMI_SIZE`.
    pub size: u32,
    /// `PMI_JOBID` (Slurm sets it; PMI-2 `fullinit` passes it on).
    pub jobid: Option<String>,
    /// The launcher's name for this host, when it gave one.
    pub host: Option<String>,
    /// `MW_JOB_KEY`, used by rank 0 instead of a random key when set.
    pub job_key: Option<[u8; 16]>,
    pub timeout: Duration,
}

/// A PMI key-value space with a fence, as both wire protocols offer it.
pub(crate) trait Kvs: Debug + Send {
    /// The error this launcher's client reports `detail` as.
    fn error(&self, detail: String) -> BootstrapError;
    /// Longest value this client may put.
    fn max_value_len(&self) -> usize;
    /// Stages `key=value`; other ranks see it after the next fence.
    fn put(&mut self, step: Step, key: &str, value: &str) -> Result<(), BootstrapError>;
    /// Publishes this rank's puts and returns once every rank has fenced.
    fn fence(&mut self, step: Step) -> Result<(), BootstrapError>;
    /// A value some rank put before the last fence.
    fn get(&mut self, step: Step, key: &str) -> Result<String, BootstrapError>;
    /// Asks the launcher to end the job.
    fn abort(&mut self, reason: &str);
    /// Ends the session politely (best effort).
    fn finalize(&mut self);
}

/// Connects to the launcher named by `plan` and opens the session.
pub(crate) fn connect(plan: &PmiPlan) -> Result<Box<dyn Kvs>, BootstrapError> {
    let stream = fd::adopt_pmi_fd(plan.fd).map_err(|detail| BootstrapError::Pmi { version: plan.version, detail })?;
    connect_stream(plan, stream)
}

/// [`connect`] over an already-open socket (tests use socket pairs).
pub(crate) fn connect_stream(
    plan: &PmiPlan,
    stream: std::os::unix::net::UnixStream,
) -> Result<Box<dyn Kvs>, BootstrapError> {
    if plan.version == 2 {
        let (pmi, init) = pmi2::Pmi2::init(stream, plan.rank, plan.jobid.as_deref(), plan.timeout)?;
        if (init.rank, init.size) != (plan.rank, plan.size) {
            return Err(BootstrapError::Pmi {
                version: 2,
                detail: format!(
                    "fullinit says rank {} of {}, but PMI_RANK={} and PMI_SIZE={}",
                    init.rank, init.size, plan.rank, plan.size
                ),
            });
        }
        Ok(Box::new(pmi))
    } else {
        Ok(Box::new(pmi1::Pmi1::init(stream, plan.timeout)?))
    }
}

/// Who a rank is, as its launcher says, before it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub rank: u32,
    pub size: u32,
    /// The launcher's name for this host, when it gave one.
    pub host: Option<String>,
    /// `MW_JOB_KEY`, used by rank 0 instead of a random key when set.
    pub job_key: Option<[u8; 16]>,
    /// `(local_rank, local_size)` when the launcher said; else computed
    /// from the host names.
    pub local: Option<(u32, u32)>,
}

impl PmiPlan {
    pub(crate) fn member(&self) -> Member {
        Member { rank: self.rank, size: self.size, host: self.host.clone(), job_key: self.job_key, local: None }
    }
}

/// Starts a PMIx session as `plan` says; returns it with who this rank is.
pub(crate) fn connect_pmix(plan: &pmix::PmixPlan) -> Result<(Box<dyn Kvs>, Member), BootstrapError> {
    let session = pmix::Pmix::init(plan)?;
    let member = Member {
        rank: session.rank,
        size: session.size,
        host: plan.host.clone().or_else(|| session.host.clone()),
        job_key: plan.job_key,
        local: session.local,
    };
    Ok((Box::new(session), member))
}

/// A joined rank's PMI session: the collectives of [`Bootstrap`](crate::Bootstrap).
#[derive(Debug)]
pub(crate) struct PmiSession {
    kvs: Box<dyn Kvs>,
    rank: u32,
    size: u32,
    /// Collectives made so far; the next one's round (keys are per round,
    /// since a PMI key may be put only once).
    next_round: u64,
    /// Every rank's host name, from the join.
    pub(crate) hosts: Vec<String>,
}

impl PmiSession {
    /// Joins: agrees on the job key and exchanges host names.
    pub(crate) fn join(kvs: Box<dyn Kvs>, plan: &Member) -> Result<(PmiSession, JobInfo), BootstrapError> {
        let mut session = PmiSession { kvs, rank: plan.rank, size: plan.size, next_round: 0, hosts: Vec::new() };
        let host = plan.host.clone().unwrap_or_else(job::kernel_hostname);
        if plan.rank == 0 {
            let key = match plan.job_key {
                Some(key) => key,
                None => random_job_key()?,
            };
            session.kvs.put(Step::Join, JOB_KEY_KEY, &job_key_to_hex(&key)).map_err(|e| session.named(e))?;
        }
        let hosts = session.allgather_in(Step::Join, host.as_bytes()).map_err(|e| session.named(e))?;
        let hex = session.kvs.get(Step::Join, JOB_KEY_KEY).map_err(|e| session.named(e))?;
        let job_key = job_key_from_hex(&hex).map_err(|_| session.protocol("rank 0 published a malformed job key"))?;
        let names: Vec<&[u8]> = hosts.iter().map(Vec::as_slice).collect();
        let (local_rank, local_size) = plan.local.unwrap_or_else(|| job::local_placement(&names, plan.rank));
        session.hosts = hosts.iter().map(|h| String::from_utf8_lossy(h).into_owned()).collect();
        let info = JobInfo { rank: plan.rank, size: plan.size, job_key, local_rank, local_size, host };
        Ok((session, info))
    }

    /// Every rank's blob, indexed by rank.
    pub(crate) fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let step = Step::Allgather { round: self.next_round };
        self.allgather_in(step, blob).map_err(|e| self.named(e))
    }

    /// [`allgather`](PmiSession::allgather) as the user knows it: `step`
    /// is what errors call it (the join's host exchange is "join").
    fn allgather_in(&mut self, step: Step, blob: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let round = self.next_round;
        let chunk = self.chunk_hex_len();
        let hex = to_hex(blob);
        let pieces: Vec<&str> = if hex.is_empty() {
            vec![""]
        } else {
            hex.as_bytes().chunks(chunk).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect()
        };
        for (i, piece) in pieces.iter().enumerate() {
            let value = if i == 0 { format!("{}:{piece}", pieces.len()) } else { (*piece).to_owned() };
            self.kvs.put(step, &key(round, self.rank, i), &value)?;
        }
        self.kvs.fence(step)?;
        let mut blobs = Vec::with_capacity(self.size as usize);
        for rank in 0..self.size {
            let first = self.kvs.get(step, &key(round, rank, 0))?;
            let (count, piece) = first.split_once(':').ok_or_else(|| self.protocol("malformed allgather value"))?;
            let count: usize = count.parse().map_err(|_| self.protocol("malformed allgather chunk count"))?;
            if count == 0 || count > crate::wire::MAX_FRAME_LEN / chunk {
                return Err(self.protocol("implausible allgather chunk count"));
            }
            let mut hex = piece.to_owned();
            for i in 1..count {
                hex.push_str(&self.kvs.get(step, &key(round, rank, i))?);
            }
            blobs.push(from_hex(&hex).ok_or_else(|| self.protocol("allgather value is not hex"))?);
        }
        self.next_round += 1;
        Ok(blobs)
    }

    pub(crate) fn barrier(&mut self) -> Result<(), BootstrapError> {
        let step = Step::Barrier { round: self.next_round };
        self.kvs.fence(step).map_err(|e| self.named(e))?;
        self.next_round += 1;
        Ok(())
    }

    pub(crate) fn abort(&mut self, reason: &str) {
        self.kvs.abort(reason);
    }

    pub(crate) fn finalize(&mut self) {
        self.kvs.finalize();
    }

    /// The wire clients' timeouts and lost connections, said as this
    /// launcher's error naming this rank, which the user sees once per rank.
    fn named(&self, error: BootstrapError) -> BootstrapError {
        let rank = self.rank;
        match error {
            BootstrapError::Timeout { step, after } => self.kvs.error(format!(
                "rank {rank}: {step} got no answer within {after:?}: some rank has not {}, or the launcher is \
                 gone (set MW_BOOTSTRAP_TIMEOUT to wait longer)",
                if step == Step::Join { "joined" } else { "reached it" }
            )),
            BootstrapError::ServerClosed { step } => self.kvs.error(format!(
                "rank {rank}: the launcher closed the PMI connection during {step} (did the launcher or its \
                 step daemon die?)"
            )),
            BootstrapError::Io { step, source } => {
                self.kvs.error(format!("rank {rank}: the PMI connection failed during {step}: {source}"))
            }
            other => other,
        }
    }

    /// Hex characters per value, leaving room for the `N:` count prefix.
    fn chunk_hex_len(&self) -> usize {
        (self.kvs.max_value_len().saturating_sub(12) & !1).max(2)
    }

    fn protocol(&self, what: &str) -> BootstrapError {
        self.kvs.error(what.to_owned())
    }
}

fn key(round: u64, rank: u32, chunk: usize) -> String {
    format!("mw-{round}-{rank}-{chunk}")
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    text.as_bytes().chunks_exact(2).map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()).collect()
}

#[cfg(test)]
mod tests;
