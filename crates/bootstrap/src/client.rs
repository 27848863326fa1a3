//! The rank's side of the TCP rendezvous: join, then numbered collectives,
//! one request and one answer at a time.
//!
//! Owns: the connection to the server, the round counter, and turning a
//! server's failure or a closed connection into a typed error (after which the
//! client is poisoned). Must not: wait past `MW_BOOTSTRAP_TIMEOUT` for any
//! step, retry a round, or hold job state beyond what it was told.

use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{BootstrapError, Step};
use crate::wire::{read_frame, write_frame, ClientMsg, Failure, FailureKind, ServerMsg, VERSION};

/// Longest pause between connection attempts while the server is not up yet.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// A joined rank's connection to the rendezvous server.
#[derive(Debug)]
pub(crate) struct RendezvousClient {
    stream: TcpStream,
    size: u32,
    timeout: Duration,
    /// Collectives this rank has completed; the next one's round number.
    next_round: u64,
    /// Set by any failure: the stream may hold half a frame, and the server
    /// has failed the job anyway.
    poisoned: bool,
}

impl RendezvousClient {
    /// Connects to `addr` (retrying until `timeout` while the server is not
    /// up yet) and introduces this rank. Returns the job key the server
    /// confirmed or handed out.
    pub(crate) fn join(
        addr: &str,
        rank: u32,
        size: u32,
        job_key: Option<[u8; 16]>,
        timeout: Duration,
    ) -> Result<(RendezvousClient, [u8; 16]), BootstrapError> {
        let deadline = Instant::now() + timeout;
        let stream = connect_with_retry(addr, timeout, deadline)?;
        let _ = stream.set_nodelay(true);
        let mut client = RendezvousClient { stream, size, timeout, next_round: 0, poisoned: false };
        client.send(Step::Join, &ClientMsg::Hello { version: VERSION, rank, size, job_key })?;
        match client.recv(Step::Join, deadline)? {
            ServerMsg::Welcome { version, .. } if version != VERSION => Err(client.poison(BootstrapError::Protocol(
                format!("the server speaks rendezvous protocol version {version}, this rank speaks {VERSION}"),
            ))),
            ServerMsg::Welcome { job_key: served, .. } => {
                if job_key.is_some_and(|mine| mine != served) {
                    return Err(client.poison(BootstrapError::Protocol("the server confirmed another job key".into())));
                }
                Ok((client, served))
            }
            other => Err(client.unexpected(Step::Join, &other)),
        }
    }

    pub(crate) fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let round = self.next_round;
        let step = Step::Allgather { round };
        let deadline = self.start(step, &ClientMsg::Allgather { round, blob: blob.to_vec() })?;
        match self.recv(step, deadline)? {
            ServerMsg::AllgatherDone { round: r, blobs } if r == round && blobs.len() == self.size as usize => {
                self.next_round += 1;
                Ok(blobs)
            }
            other => Err(self.unexpected(step, &other)),
        }
    }

    pub(crate) fn barrier(&mut self) -> Result<(), BootstrapError> {
        let round = self.next_round;
        let step = Step::Barrier { round };
        let deadline = self.start(step, &ClientMsg::Barrier { round })?;
        match self.recv(step, deadline)? {
            ServerMsg::BarrierDone { round: r } if r == round => {
                self.next_round += 1;
                Ok(())
            }
            other => Err(self.unexpected(step, &other)),
        }
    }

    /// Tells the server this rank aborts and waits for it to have told the
    /// others (its acknowledgement is the job's failure). Best effort.
    pub(crate) fn abort(&mut self, reason: &str) {
        let Ok(deadline) = self.start(Step::Abort, &ClientMsg::Abort { reason: reason.to_owned() }) else {
            return;
        };
        let _ = self.recv(Step::Abort, deadline);
        self.poisoned = true;
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Says goodbye and hangs up. Best effort: the server treats a silent
    /// close as a lost rank, which only matters if others still want a
    /// collective.
    pub(crate) fn leave(&mut self) {
        if !self.poisoned {
            let _ = write_frame(&mut self.stream, &ClientMsg::Goodbye.encode());
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        // Drain anything the server pushed (a failure nobody asked about):
        // closing over unread bytes would reset the connection and could
        // destroy the goodbye before the server reads it.
        if self.stream.set_nonblocking(true).is_ok() {
            let mut sink = [0u8; 512];
            while matches!(self.stream.read(&mut sink), Ok(n) if n > 0) {}
        }
        self.poisoned = true;
    }

    /// False once any step has failed.
    pub(crate) fn is_healthy(&self) -> bool {
        !self.poisoned
    }

    /// Sends the request of a step; returns the step's deadline.
    fn start(&mut self, step: Step, msg: &ClientMsg) -> Result<Instant, BootstrapError> {
        if self.poisoned {
            return Err(BootstrapError::Poisoned);
        }
        let deadline = Instant::now() + self.timeout;
        self.send(step, msg)?;
        Ok(deadline)
    }

    fn send(&mut self, step: Step, msg: &ClientMsg) -> Result<(), BootstrapError> {
        write_frame(&mut self.stream, &msg.encode()).map_err(|e| {
            let err = self.io_error(step, e);
            self.poison(err)
        })
    }

    /// Reads the next message before `deadline`; a failure from the server
    /// becomes the matching error.
    fn recv(&mut self, step: Step, deadline: Instant) -> Result<ServerMsg, BootstrapError> {
        let result = self.recv_inner(step, deadline);
        result.map_err(|e| self.poison(e))
    }

    fn recv_inner(&mut self, step: Step, deadline: Instant) -> Result<ServerMsg, BootstrapError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(BootstrapError::Timeout { step, after: self.timeout });
        }
        self.stream.set_read_timeout(Some(remaining)).map_err(|e| self.io_error(step, e))?;
        let payload = match read_frame(&mut self.stream) {
            Ok(Some(payload)) => payload,
            Ok(None) => return Err(BootstrapError::ServerClosed { step }),
            Err(e) => return Err(self.io_error(step, e)),
        };
        match ServerMsg::decode(&payload) {
            Ok(ServerMsg::Failure(failure)) => Err(failure.into()),
            Ok(msg) => Ok(msg),
            Err(e) => Err(BootstrapError::Protocol(format!("bad message from the server during {step}: {e}"))),
        }
    }

    fn io_error(&self, step: Step, e: io::Error) -> BootstrapError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                BootstrapError::Timeout { step, after: self.timeout }
            }
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => BootstrapError::ServerClosed { step },
            _ => BootstrapError::Io { step, source: e },
        }
    }

    fn unexpected(&mut self, step: Step, msg: &ServerMsg) -> BootstrapError {
        self.poison(BootstrapError::Protocol(format!("unexpected answer during {step}: {msg:?}")))
    }

    fn poison(&mut self, err: BootstrapError) -> BootstrapError {
        self.poisoned = true;
        err
    }
}

/// Connects to `addr`, retrying with exponential backoff while nothing
/// listens there yet (ranks start in any order). A name that does not
/// resolve fails at once: waiting will not fix a typo.
fn connect_with_retry(addr: &str, timeout: Duration, deadline: Instant) -> Result<TcpStream, BootstrapError> {
    let targets: Vec<SocketAddr> =
        addr.to_socket_addrs().map_err(|source| BootstrapError::Resolve { addr: addr.to_owned(), source })?.collect();
    let mut backoff = Duration::from_millis(5);
    loop {
        let mut last_error = io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address");
        for target in &targets {
            let remaining = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            match TcpStream::connect_timeout(target, remaining.min(Duration::from_secs(2))) {
                Ok(stream) => return Ok(stream),
                Err(e) => last_error = e,
            }
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(BootstrapError::Connect { addr: addr.to_owned(), after: timeout, source: last_error });
        }
        thread::sleep(backoff.min(remaining));
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

impl From<Failure> for BootstrapError {
    fn from(f: Failure) -> BootstrapError {
        let rank = f.rank.unwrap_or(u32::MAX);
        match f.kind {
            FailureKind::Rejected => BootstrapError::Rejected { rank, reason: f.detail },
            FailureKind::RankLost => BootstrapError::RankLost { rank },
            FailureKind::RankLeft => BootstrapError::RankLeft { rank },
            FailureKind::Aborted => BootstrapError::Aborted { rank, reason: f.detail },
            FailureKind::Mismatch => BootstrapError::Mismatch(f.detail),
            FailureKind::Protocol => BootstrapError::Protocol(f.detail),
        }
    }
}
