//! What the examples share: a job whose ranks are threads of this process,
//! meeting at a rendezvous server that runs on a thread of its own.
//!
//! Owns: the job's bootstrap variables and its server. Must not: pick a
//! configuration (each example passes its own).

use std::collections::HashMap;

use mw_core::{Config, Endpoint};

/// A job of `size` ranks inside this process.
pub struct LocalJob {
    vars: HashMap<&'static str, String>,
    /// Keeps the rendezvous server's thread for as long as the job (in a
    /// mutex only so that ranks on scoped threads can share the job).
    _server: std::sync::Mutex<mw_bootstrap::RendezvousHandle>,
}

impl LocalJob {
    /// Starts the job's rendezvous server on a local port.
    pub fn new(size: u32) -> LocalJob {
        let key = mw_bootstrap::random_job_key().expect("job key");
        let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", size, key).expect("rendezvous");
        let vars = HashMap::from([
            ("MW_SIZE", size.to_string()),
            ("MW_BOOTSTRAP", server.local_addr().to_string()),
            ("MW_JOB_KEY", mw_bootstrap::job_key_to_hex(&key)),
        ]);
        LocalJob { vars, _server: std::sync::Mutex::new(server.spawn().expect("rendezvous thread")) }
    }

    /// Rank `rank`'s endpoint. Every rank of the job must call this at
    /// once, each on its own thread: they meet at the rendezvous.
    pub fn endpoint(&self, rank: u32, config: Config) -> Endpoint {
        let lookup = |name: &str| match name {
            "MW_RANK" => Some(rank.to_string()),
            other => self.vars.get(other).cloned(),
        };
        Endpoint::init_from_lookup(config, lookup).expect("endpoint")
    }
}
