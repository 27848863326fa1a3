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
//! [`BootstrapError::RankLost`] instead of hanging. Under a launcher, a step
//! that gets no answer in time (a rank that never joins or never reaches a
//! collective, a server that is gone) fails with an error naming this rank,
//! the step and the deadline. It is not a security
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
//! 2. **PMIx**: `PMIX_RANK` and `PMIX_NAMESPACE` are set, as Slurm's
//!    `srun --mpi=pmix`, Open MPI's `mpirun` and PRRTE set them. The launcher's
//!    PMIx library (`libpmix.so.2`, or `MW_PMIX_LIB`) is loaded at run time
//!    and does the talking: `PMIx_Init` gives the rank, `PMIx_Get` the job
//!    size, the local rank and size and the host name; the collectives are
//!    `PMIx_Put`, `PMIx_Commit`, `PMIx_Fence` (collecting data) and
//!    `PMIx_Get`. Without the library such a launch fails with a message
//!    saying so rather than running as single ranks.
//! 3. **PMI-2**: `PMI_FD`, `PMI_RANK`, `PMI_SIZE` and `PMI_JOBID` are set,
//!    as Slurm's `srun --mpi=pmi2` does. The rank speaks PMI-2 on the
//!    inherited socket `PMI_FD`: `fullinit`, then `kvs-put`/`kvs-fence`/
//!    `kvs-get` carry the collectives, `finalize` when the `Bootstrap` is
//!    dropped.
//! 4. **PMI-1**: `PMI_FD`, `PMI_RANK`, `PMI_SIZE` without `PMI_JOBID`, as
//!    MPICH's `mpiexec` (Hydra) sets them: the simple PMI-1 protocol, `put`,
//!    `barrier_in`, `get`. `MW_PMI=pmix|2|1` forces an interface, `MW_PMI=off`
//!    ignores the launcher. Under PMI, rank 0 draws the job key (or takes
//!    `MW_JOB_KEY`) and publishes it in the launcher's key-value space; the
//!    host name is the launcher's (`MPIR_CVAR_CH3_INTERFACE_HOSTNAME` from
//!    Hydra, `SLURMD_NODENAME` from Slurm, else `MW_HOST` or the kernel's).
//!    `PMI_RANK` without `PMI_FD` (Slurm's `--mpi=pmi1` library mode, or
//!    `PMI_PORT` launchers) is refused with
//!    [`BootstrapError::UnsupportedLauncher`] rather than ignored.
//! 5. **A job of one**: nothing set. Rank 0 of 1, collectives complete at once.
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
// Denied, not forbidden: adopting the launcher's PMI socket needs one
// `unsafe` call, allowed in `pmi/fd.rs`, and calling the PMIx library needs
// `dlopen` and foreign calls, allowed in `pmi/pmix_lib.rs`; nowhere else.
#![deny(unsafe_code)]

mod client;
pub mod env;
mod error;
mod job;
mod pmi;
mod route;
mod server;
mod wire;

use std::net::IpAddr;
use std::time::Duration;

pub use error::{BootstrapError, Step};
pub use job::{job_key_from_hex, job_key_to_hex, random_job_key, JobInfo};
pub use server::{RendezvousHandle, RendezvousServer, ServerSummary};

/// A minimal PMI-1/PMI-2 server for tests of malformed and refused answers
/// (the real Slurm runs in `make slurm-test`); only with the `testing` feature, which only dev-dependencies
/// enable, so it never ships in a program's build.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use pmi::testing as pmi_testing;

use client::RendezvousClient;
use env::{Launch, RendezvousPlan};
use pmi::PmiSession;

/// A rank's membership in its job: who it is, and the out-of-band
/// collectives. Dropping it leaves the job cleanly (a goodbye to the server).
#[derive(Debug)]
pub struct Bootstrap {
    info: JobInfo,
    backend: Backend,
}

/// Where the collectives go.
#[derive(Debug)]
enum Backend {
    /// A job of one: collectives complete locally.
    Single,
    /// The TCP rendezvous at `addr`, served by mwrun or by `hosted` (rank 0 in env mode).
    Rendezvous { client: RendezvousClient, hosted: Option<RendezvousHandle>, timeout: Duration, addr: String },
    /// A PMI-1, PMI-2 or PMIx launcher's key-value space.
    Pmi(PmiSession),
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
            Launch::Pmi(plan) => {
                let kvs = pmi::connect(&plan)?;
                let (session, info) = PmiSession::join(kvs, &plan.member())?;
                Ok(Bootstrap { info, backend: Backend::Pmi(session) })
            }
            Launch::Pmix(plan) => {
                let (kvs, member) = pmi::connect_pmix(&plan)?;
                let (session, info) = PmiSession::join(kvs, &member)?;
                Ok(Bootstrap { info, backend: Backend::Pmi(session) })
            }
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
        let backend = Backend::Rendezvous { client, hosted, timeout: plan.timeout, addr: plan.addr.clone() };
        let mut boot = Bootstrap { info, backend };
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
            Backend::Pmi(session) => session.allgather(my_blob),
            Backend::Closed => Err(BootstrapError::Poisoned),
        }
    }

    /// Returns once every rank has called `barrier` as its same-numbered
    /// collective.
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        match &mut self.backend {
            Backend::Single => Ok(()),
            Backend::Rendezvous { client, .. } => client.barrier(),
            Backend::Pmi(session) => session.barrier(),
            Backend::Closed => Err(BootstrapError::Poisoned),
        }
    }

    /// The local IP address the other ranks can reach this rank at: where
    /// the data path should bind. Loopback when the whole job is on this
    /// host; under mwrun, the address the kernel routes from toward mwrun's
    /// rendezvous; under PMI, the address this host's launcher-given name
    /// resolves to, else the one routed toward another rank's host. `MW_BIND`
    /// (read by the endpoint) overrides all of this.
    pub fn reachable_ip(&self) -> Result<IpAddr, BootstrapError> {
        let io = BootstrapError::Address;
        match &self.backend {
            Backend::Single => Ok(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
            Backend::Rendezvous { addr, .. } => route::toward_server(addr).map_err(io),
            Backend::Pmi(session) => route::among_hosts(&session.hosts, self.info.rank as usize).map_err(io),
            Backend::Closed => Err(BootstrapError::Poisoned),
        }
    }

    /// Fails the job for every rank with `reason`: their pending and later
    /// collectives return [`BootstrapError::Aborted`]. Returns once the
    /// others have been told (or that proved impossible). It does not exit
    /// the process; the caller should, with a non-zero status, and mwrun then
    /// stops the remaining ranks.
    pub fn abort(mut self, reason: &str) {
        match &mut self.backend {
            Backend::Rendezvous { client, .. } => client.abort(reason),
            Backend::Pmi(session) => session.abort(reason),
            Backend::Single | Backend::Closed => {}
        }
        self.backend = Backend::Closed;
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        if let Backend::Pmi(session) = &mut self.backend {
            session.finalize();
        }
        if let Backend::Rendezvous { client, hosted, timeout, .. } = &mut self.backend {
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
