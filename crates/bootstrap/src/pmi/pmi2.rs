//! The PMI-2 client, as Slurm's `srun --mpi=pmi2` (and Hydra) speak it.
//!
//! The session opens with a PMI-1 style line, `cmd=init pmi_version=2
//! pmi_subversion=0`, answered by `cmd=response_to_init ... rc=0`. From then
//! on every message is a frame: its length as 6 decimal characters (Slurm
//! pads on the right, Hydra on the left), then `cmd=NAME;key=value;...;`.
//! Requests used: `fullinit` (with `pmijobid`, `pmirank`, `threaded`, all of
//! which Slurm requires), `kvs-put`, `kvs-fence` (publishes the puts and
//! waits for every rank), `kvs-get`, `finalize`, and `abort` (no answer).
//!
//! Owns: this command sequence and the checks of each answer (the expected
//! `cmd`, `rc=0`). Must not: touch the socket's bytes directly (`conn` does,
//! and reads frames with either padding), or keep going after a refused answer:
//! the session is poisoned and every later call fails.

use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::conn::{escape_v2, Conn, Reply};
use super::Kvs;
use crate::error::{BootstrapError, Step};

/// Values above this are refused by Slurm and Hydra (`PMI2_MAX_VALLEN`).
const MAX_VALUE: usize = 1024;

/// A PMI-2 session with the launcher.
#[derive(Debug)]
pub(crate) struct Pmi2 {
    conn: Conn,
}

/// What `fullinit` told us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FullInit {
    pub(crate) rank: u32,
    pub(crate) size: u32,
}

impl Pmi2 {
    /// Opens the session on `stream` as `rank` of job `jobid` (`PMI_JOBID`,
    /// when the launcher set one).
    pub(crate) fn init(
        stream: UnixStream,
        rank: u32,
        jobid: Option<&str>,
        timeout: Duration,
    ) -> Result<(Pmi2, FullInit), BootstrapError> {
        let mut pmi = Pmi2 { conn: Conn::new(stream, 2, timeout) };
        let step = Step::Join;
        let deadline = pmi.conn.deadline();
        pmi.conn.send(step, b"cmd=init pmi_version=2 pmi_subversion=0\n")?;
        let init = Reply::parse_v1(&pmi.conn.read_line(step, deadline)?);
        if init.cmd() != "response_to_init" || init.rc() != 0 || init.get("pmi_version") != Some("2") {
            return Err(pmi.fail(format!("the launcher refused PMI version 2.0: {:?}", init.pairs)));
        }
        let jobid = jobid.map(|id| format!("pmijobid={};", escape_v2(id))).unwrap_or_default();
        let reply =
            pmi.call(step, &format!("cmd=fullinit;{jobid}pmirank={rank};threaded=FALSE;"), "fullinit-response")?;
        let number = |key: &str| reply.get(key).and_then(|v| v.trim().parse::<u32>().ok());
        let (Some(rank), Some(size)) = (number("rank"), number("size")) else {
            return Err(pmi.fail(format!("fullinit-response lacks rank or size: {:?}", reply.pairs)));
        };
        Ok((pmi, FullInit { rank, size }))
    }

    /// Sends the frame `body` and reads the answer, which must be
    /// `cmd=expect` with `rc=0`.
    fn call(&mut self, step: Step, body: &str, expect: &str) -> Result<Reply, BootstrapError> {
        let deadline = self.conn.deadline();
        self.conn.send_frame(step, body)?;
        let reply = Reply::parse_v2(&self.conn.read_frame(step, deadline)?);
        if reply.cmd() != expect {
            return Err(self.fail(format!("expected cmd={expect} during {step}, got {:?}", reply.pairs)));
        }
        if reply.rc() != 0 {
            let what = body.split(';').next().unwrap_or(body);
            return Err(self.fail(format!("{what} failed with rc={}: {}", reply.rc(), reply.message())));
        }
        Ok(reply)
    }

    fn fail(&mut self, detail: String) -> BootstrapError {
        self.conn.poison();
        self.conn.error(detail)
    }
}

impl Kvs for Pmi2 {
    fn error(&self, detail: String) -> BootstrapError {
        BootstrapError::Pmi { version: 2, detail }
    }

    fn max_value_len(&self) -> usize {
        MAX_VALUE
    }

    fn put(&mut self, step: Step, key: &str, value: &str) -> Result<(), BootstrapError> {
        self.call(step, &format!("cmd=kvs-put;key={key};value={value};"), "kvs-put-response").map(drop)
    }

    fn fence(&mut self, step: Step) -> Result<(), BootstrapError> {
        self.call(step, "cmd=kvs-fence;", "kvs-fence-response").map(drop)
    }

    fn get(&mut self, step: Step, key: &str) -> Result<String, BootstrapError> {
        let reply = self.call(step, &format!("cmd=kvs-get;srcid=-1;key={key};"), "kvs-get-response")?;
        match (reply.get("found"), reply.get("value")) {
            (Some(found), Some(value)) if found.eq_ignore_ascii_case("TRUE") => Ok(value.to_owned()),
            _ => Err(self.fail(format!("kvs-get {key} during {step}: not found"))),
        }
    }

    fn abort(&mut self, reason: &str) {
        let body = format!("cmd=abort;isworld=TRUE;msg={};", escape_v2(reason));
        let _ = self.conn.send_frame(Step::Abort, &body);
        self.conn.poison();
    }

    fn finalize(&mut self) {
        if self.conn.is_healthy() {
            let _ = self.call(Step::Join, "cmd=finalize;", "finalize-response");
        }
        self.conn.poison();
    }
}
