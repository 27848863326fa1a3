//! How a memwire rank learns who it is and meets its peers.
//!
//! Owns: choosing the launch mode from the environment ([`Bootstrap::from_env`]),
//! the resulting [`JobInfo`] (rank, size, job key, placement on hosts), and the
//! out-of-band collectives a job needs a few times in its life (init, symmetric
//! allocation, finalize): [`Bootstrap::allgather`] and [`Bootstrap::barrier`].
//! Also owns the TCP rendezvous behind them: its wire format, the client, and
//! the [`RendezvousServer`] that `mwrun` runs (or rank 0 runs itself in plain
//! env mode).
//!
//! Must not: move data-path bytes, know memwire's protocol, or wait forever.
//! Every step is bounded by `MW_BOOTSTRAP_TIMEOUT` (default 60 s), and a rank
//! that dies is noticed by its connection closing, so others fail with
//! [`BootstrapError::RankLost`] instead of hanging. It is not a security
//! boundary: like PMI, the rendezvous is plain TCP; the job key only stops a
//! rank of another job from joining by mistake.
//!
//! # Launch modes, in the order `from_env` tries them
//!
//! 1. **MW rendezvous**: any of `MW_RANK`, `MW_SIZE`, `MW_BOOTSTRAP` is set.
//!    `MW_RANK` and `MW_SIZE` are then required, and `MW_BOOTSTRAP=host:port`
//!    too unless `MW_SIZE=1`.
//!    - With `MW_JOB_KEY` (32 hex digits; mwrun always sets it): a launcher
//!      serves the rendezvous and every rank is a client that proves the key.
//!    - Without `MW_JOB_KEY` (plain env mode): rank 0 listens on
//!      `MW_BOOTSTRAP` itself, makes a random key and hands it to the others
//!      as they join; they retry connecting until rank 0 is up. Rank 0 keeps
//!      serving after its own finalize until the others have left (at most
//!      the timeout), so it should be the last to exit.
//! 2. **PMI**: the PMI-1 (`PMI_FD`, `PMI_RANK`, `PMI_SIZE`; MPICH Hydra) and
//!    PMI-2 (Slurm `srun --mpi=pmi2`) launchers are recognised and refused with
//!    [`BootstrapError::UnsupportedLauncher`] until their clients land: they
//!    become further `Backend` variants in `lib.rs` and a step in
//!    `env::detect`, nothing else changes.
//! 3. **A job of one**: nothing set. Rank 0 of 1, collectives complete at once.
//!
//! The other variables are listed in [`env::VARS`].
//!
//! Joining is collective: it returns once every rank has joined, after one
//! allgather of host names (which gives `local_rank`/`local_size` when the
//! launcher did not set `MW_LOCAL_RANK`/`MW_LOCAL_SIZE`). All ranks must then
//! make the same sequence of `allgather`/`barrier` calls; a rank calling
//! `barrier` where another calls `allgather` fails the job with
//! [`BootstrapError::Mismatch`].
//!
//! ```no_run
//! # fn main() -> Result<(), mw_bootstrap::BootstrapError> {
//! let mut boot = mw_bootstrap::Bootstrap::from_env()?;
//! let me = boot.info().rank;
//! let all = boot.allgather(&me.to_le_bytes())?; // all[r] is rank r's blob
//! boot.barrier()?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod client;
pub mod env;
mod error;
mod job;
mod server;
mod wire;

use std::time::Duration;

pub use error::{BootstrapError, Step};
pub use job::{job_key_from_hex, job_key_to_hex, random_job_key, JobInfo};
pub use server::{RendezvousHandle, RendezvousServer, ServerSummary};

use client::RendezvousClient;
use env::{Launch, RendezvousPlan};

/// A rank's membership in its job: who it is, and the out-of-band
/// collectives. Dropping it leaves the job cleanly (a goodbye to the server).
#[derive(Debug)]
pub struct Bootstrap {
    info: JobInfo,
    backend: Backend,
}

/// Where the collectives go. PMI-1 and PMI-2 join here as variants.
#[derive(Debug)]
enum Backend {
    /// A job of one: collectives complete locally.
    Single,
    /// The TCP rendezvous, served by mwrun or by `hosted` (rank 0 in env mode).
    Rendezvous { client: RendezvousClient, hosted: Option<RendezvousHandle>, timeout: Duration },
    /// After `abort`: nothing left to say goodbye to.
    Closed,
}

impl Bootstrap {
    /// Joins the job this process was started in, as described in the
    /// [crate docs](crate#launch-modes-in-the-order-from_env-tries-them).
    pub fn from_env() -> Result<Bootstrap, BootstrapError> {
        Bootstrap::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Bootstrap::from_env) with variables read through
    /// `lookup` instead of the process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Bootstrap, BootstrapError> {
        match env::detect(&lookup)? {
            Launch::Single { job_key, host } => {
                let job_key = match job_key {
                    Some(key) => key,
                    None => random_job_key()?,
                };
                Ok(Bootstrap::single(job_key, host.unwrap_or_else(job::kernel_hostname)))
            }
            Launch::Rendezvous(plan) => Bootstrap::join(plan),
        }
    }

    /// A job of one, with the given key, on `host`.
    pub fn single(job_key: [u8; 16], host: String) -> Bootstrap {
        Bootstrap { info: JobInfo::single(job_key, host), backend: Backend::Single }
    }

    fn join(plan: RendezvousPlan) -> Result<Bootstrap, BootstrapError> {
        let hosted = if plan.serves() {
            let server = RendezvousServer::bind(&plan.addr, plan.size, random_job_key()?)?.allow_keyless_join(true);
            let handle = server.spawn().map_err(|source| BootstrapError::Bind { addr: plan.addr.clone(), source })?;
            Some(handle)
        } else {
            None
        };
        let (client, job_key) = RendezvousClient::join(&plan.addr, plan.rank, plan.size, plan.job_key, plan.timeout)?;
        let host = plan.host.unwrap_or_else(job::kernel_hostname);
        let info = JobInfo { rank: plan.rank, size: plan.size, job_key, local_rank: 0, local_size: 1, host };
        let mut boot = Bootstrap { info, backend: Backend::Rendezvous { client, hosted, timeout: plan.timeout } };
        // Every rank exchanges host names, whether or not the launcher set the
        // local placement, so all ranks make the same collective calls.
        let my_host = boot.info.host.clone();
        let hosts = boot.allgather(my_host.as_bytes()).map_err(BootstrapError::during_join)?;
        let hosts: Vec<&[u8]> = hosts.iter().map(Vec::as_slice).collect();
        let (local_rank, local_size) = plan.local.unwrap_or_else(|| job::local_placement(&hosts, plan.rank));
        boot.info.local_rank = local_rank;
        boot.info.local_size = local_size;
        Ok(boot)
    }

    /// Who this rank is.
    pub fn info(&self) -> &JobInfo {
        &self.info
    }

    /// Every rank contributes `my_blob`; every rank gets all of them, indexed
    /// by rank. Blobs may differ in length.
    pub fn allgather(&mut self, my_blob: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        match &mut self.backend {
            Backend::Single => Ok(vec![my_blob.to_vec()]),
            Backend::Rendezvous { client, .. } => client.allgather(my_blob),
            Backend::Closed => Err(BootstrapError::Poisoned),
        }
    }

    /// Returns once every rank has called `barrier` as its same-numbered
    /// collective.
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        match &mut self.backend {
            Backend::Single => Ok(()),
            Backend::Rendezvous { client, .. } => client.barrier(),
            Backend::Closed => Err(BootstrapError::Poisoned),
        }
    }

    /// Fails the job for every rank with `reason`: their pending and later
    /// collectives return [`BootstrapError::Aborted`]. Returns once the
    /// others have been told (or that proved impossible). It does not exit
    /// the process; the caller should, with a non-zero status, and mwrun then
    /// stops the remaining ranks.
    pub fn abort(mut self, reason: &str) {
        if let Backend::Rendezvous { client, .. } = &mut self.backend {
            client.abort(reason);
        }
        self.backend = Backend::Closed;
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        if let Backend::Rendezvous { client, hosted, timeout } = &mut self.backend {
            let healthy = client.is_healthy();
            client.leave();
            // Rank 0 in env mode is the server: keep serving until the others
            // have left too, but never longer than a bootstrap step may take.
            // After a failure the others learn it from the server closing.
            if let (Some(server), true) = (hosted, healthy) {
                server.wait_timeout(*timeout);
            }
        }
    }
}

#[cfg(test)]
mod tests;
