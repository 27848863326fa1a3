//! The PMI-1 client: the simple wire protocol of MPICH's Hydra (`mpiexec`),
//! one `cmd=NAME key=value ...` line per request and per answer.
//!
//! The conversation: `init` (version 1.1), `get_maxes` (key and value
//! limits), `get_my_kvsname`; then `put`s into that key-value space,
//! `barrier_in` (which also publishes the puts: Hydra's proxies hold them
//! until the barrier) and `get`s; finally `finalize`, or `abort`.
//!
//! Owns: this command sequence and the checks of each answer (the expected
//! `cmd`, `rc=0`, the key and value limits). Must not: touch the socket's bytes
//! directly (`conn` does), or keep going after a refused answer: the session is
//! poisoned and every later call fails.

use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::conn::{Conn, Reply};
use super::Kvs;
use crate::error::{BootstrapError, Step};

/// A PMI-1 session with the launcher.
#[derive(Debug)]
pub(crate) struct Pmi1 {
    conn: Conn,
    kvsname: String,
    keylen_max: usize,
    vallen_max: usize,
}

impl Pmi1 {
    /// Initialises the session on `stream`.
    pub(crate) fn init(stream: UnixStream, timeout: Duration) -> Result<Pmi1, BootstrapError> {
        let mut pmi =
            Pmi1 { conn: Conn::new(stream, 1, timeout), kvsname: String::new(), keylen_max: 0, vallen_max: 0 };
        let init = pmi.call(Step::Join, "cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init")?;
        if init.get("pmi_version").is_some_and(|v| v != "1") {
            return Err(pmi.fail(format!("the launcher answered init with PMI version {:?}", init.get("pmi_version"))));
        }
        let maxes = pmi.call(Step::Join, "cmd=get_maxes\n", "maxes")?;
        let limit = |key: &str| maxes.get(key).and_then(|v| v.parse::<usize>().ok());
        let (Some(keylen_max), Some(vallen_max)) = (limit("keylen_max"), limit("vallen_max")) else {
            return Err(pmi.fail(format!("get_maxes gave no usable limits: {:?}", maxes.pairs)));
        };
        pmi.keylen_max = keylen_max;
        pmi.vallen_max = vallen_max;
        let name = pmi.call(Step::Join, "cmd=get_my_kvsname\n", "my_kvsname")?;
        match name.get("kvsname") {
            Some(kvs) if !kvs.is_empty() && !kvs.contains(char::is_whitespace) => pmi.kvsname = kvs.to_owned(),
            _ => return Err(pmi.fail("get_my_kvsname gave no key-value space name".to_owned())),
        }
        Ok(pmi)
    }

    /// Sends `request` and reads the answer, which must be `cmd=expect`
    /// with `rc` 0 (or none).
    fn call(&mut self, step: Step, request: &str, expect: &str) -> Result<Reply, BootstrapError> {
        let deadline = self.conn.deadline();
        self.conn.send(step, request.as_bytes())?;
        let reply = Reply::parse_v1(&self.conn.read_line(step, deadline)?);
        if reply.cmd() != expect {
            return Err(self.fail(format!("expected cmd={expect} during {step}, got {:?}", reply.pairs)));
        }
        if reply.rc() != 0 {
            let what = request.split_ascii_whitespace().next().unwrap_or(request);
            return Err(self.fail(format!("{what} failed with rc={}: {}", reply.rc(), reply.message())));
        }
        Ok(reply)
    }

    fn fail(&mut self, detail: String) -> BootstrapError {
        self.conn.poison();
        self.conn.error(detail)
    }
}

impl Kvs for Pmi1 {
    fn error(&self, detail: String) -> BootstrapError {
        BootstrapError::Pmi { version: 1, detail }
    }

    /// A request line holds the command, the space name, the key and the
    /// value; simple PMI clients and servers cap lines at 1024 bytes.
    fn max_value_len(&self) -> usize {
        let overhead = "cmd=put kvsname= key= value=\n".len() + self.kvsname.len() + self.keylen_max;
        self.vallen_max.min(1024usize.saturating_sub(overhead)).max(16)
    }

    fn put(&mut self, step: Step, key: &str, value: &str) -> Result<(), BootstrapError> {
        let request = format!("cmd=put kvsname={} key={key} value={value}\n", self.kvsname);
        self.call(step, &request, "put_result").map(drop)
    }

    fn fence(&mut self, step: Step) -> Result<(), BootstrapError> {
        self.call(step, "cmd=barrier_in\n", "barrier_out").map(drop)
    }

    fn get(&mut self, step: Step, key: &str) -> Result<String, BootstrapError> {
        let request = format!("cmd=get kvsname={} key={key}\n", self.kvsname);
        let reply = self.call(step, &request, "get_result")?;
        match reply.get("value") {
            Some(value) => Ok(value.to_owned()),
            None => Err(self.fail(format!("get {key} during {step} returned no value"))),
        }
    }

    fn abort(&mut self, reason: &str) {
        // Hydra kills the whole job on abort and sends no answer; the
        // reason only reaches the launcher's log through stderr.
        eprintln!("memwire: aborting the job: {reason}");
        let _ = self.conn.send(Step::Abort, b"cmd=abort exitcode=1\n");
        self.conn.poison();
    }

    fn finalize(&mut self) {
        if self.conn.is_healthy() {
            let _ = self.call(Step::Join, "cmd=finalize\n", "finalize_ack");
        }
        self.conn.poison();
    }
}
