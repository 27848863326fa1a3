//! [`RendezvousServer`]: the meeting point of a job's ranks, run by mwrun or,
//! in plain env mode, by rank 0 in a background thread.
//!
//! Threads: one accepts connections, one per connection reads frames, and one
//! coordinator owns all state and does all writing; the others only forward
//! what they read over a channel, so the state needs no lock. A thread per
//! rank is fine for the few hundred ranks of a bootstrap; a larger scale-out
//! would want a poll loop here, and nothing outside this module would change.
//!
//! Collectives are numbered: every rank's `k`-th call is round `k`. A round
//! completes when all ranks have contributed, and then every rank gets the
//! answer. The first failure (a rank vanishing, aborting, leaving early, or a
//! mismatch) is sticky: it is pushed to every connected rank at once and
//! answers every later request, so nobody waits for a round that cannot end.
//!
//! Must not: let a connection's thread touch the shared state (the coordinator
//! alone does), stall on a rank that stopped reading (writes have a timeout),
//! or admit a client before its `Hello` proved the job key (except keyless
//! joins, which plain env mode allows explicitly).

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use crate::error::BootstrapError;
use crate::wire::{read_frame, write_frame, ClientMsg, Failure, FailureKind, ServerMsg, VERSION};

/// How long a write to one rank may block before that rank counts as gone:
/// a rank that stops reading must not stall the whole job's rendezvous.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A rendezvous server bound to its address, not yet serving.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let key = mw_bootstrap::random_job_key()?;
/// let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", 4, key)?;
/// let addr = server.local_addr(); // hand this to the ranks as MW_BOOTSTRAP
/// let handle = server.spawn()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RendezvousServer {
    listener: TcpListener,
    size: u32,
    job_key: [u8; 16],
    allow_keyless_join: bool,
}

/// What a server saw, returned when every rank has left or vanished.
#[derive(Debug)]
#[non_exhaustive]
pub struct ServerSummary {
    /// Collective rounds that completed.
    pub rounds_completed: u64,
    /// The first failure of the job, if any.
    pub failure: Option<BootstrapError>,
}

/// A server running on a background thread.
#[derive(Debug)]
pub struct RendezvousHandle {
    local_addr: SocketAddr,
    done: mpsc::Receiver<ServerSummary>,
    summary: Option<ServerSummary>,
}

impl RendezvousServer {
    /// Listens on `addr` (`host:port`; port 0 picks a free one) for a job of
    /// `size` ranks with key `job_key`.
    pub fn bind(addr: &str, size: u32, job_key: [u8; 16]) -> Result<RendezvousServer, BootstrapError> {
        let listener =
            TcpListener::bind(addr).map_err(|source| BootstrapError::Bind { addr: addr.to_owned(), source })?;
        Ok(RendezvousServer { listener, size, job_key, allow_keyless_join: false })
    }

    /// Also admits ranks that present no key and hands them this server's
    /// key (plain env mode, where only the server knows it). A rank that does
    /// present a key must present the right one either way.
    pub fn allow_keyless_join(mut self, allow: bool) -> RendezvousServer {
        self.allow_keyless_join = allow;
        self
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has a local address")
    }

    /// Serves on a background thread until every rank has left or vanished.
    pub fn spawn(self) -> io::Result<RendezvousHandle> {
        let local_addr = self.local_addr();
        let (tx, done) = mpsc::channel();
        thread::Builder::new().name("mw-rendezvous".into()).spawn(move || {
            // The handle may be gone already; nobody wants the summary then.
            let _ = tx.send(self.run());
        })?;
        Ok(RendezvousHandle { local_addr, done, summary: None })
    }

    /// Serves on this thread until every rank has left or vanished. Ranks
    /// that never connect keep it waiting: the clients' timeouts, not the
    /// server, bound a job's start-up.
    pub fn run(self) -> ServerSummary {
        let (events, inbox) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let local_addr = self.local_addr();
        let acceptor = {
            let stop = Arc::clone(&stop);
            let events = events.clone();
            let listener = self.listener;
            thread::Builder::new()
                .name("mw-rendezvous-accept".into())
                .spawn(move || accept_loop(&listener, &stop, &events))
                .expect("cannot start the rendezvous accept thread")
        };
        drop(events);
        let mut coordinator = Coordinator::new(self.size, self.job_key, self.allow_keyless_join);
        while !coordinator.all_ranks_gone() {
            let Ok(event) = inbox.recv() else { break };
            coordinator.handle(event);
        }
        stop.store(true, Ordering::Release);
        // Wake the acceptor out of `accept` so it sees `stop` and drops the
        // listener, releasing the port. It is not joined: should the wake-up
        // connection fail, it ends at the next connection or with the process.
        let _ = TcpStream::connect_timeout(&wake_addr(local_addr), Duration::from_secs(1));
        drop(acceptor);
        coordinator.close_all();
        ServerSummary { rounds_completed: coordinator.next_round, failure: coordinator.failure.map(Into::into) }
    }
}

impl RendezvousHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits up to `timeout` for the server to finish, and returns its
    /// summary if it has.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<&ServerSummary> {
        if self.summary.is_none() {
            self.summary = self.done.recv_timeout(timeout).ok();
        }
        self.summary.as_ref()
    }
}

fn wake_addr(listening: SocketAddr) -> SocketAddr {
    match listening.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), listening.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), listening.port()),
        _ => listening,
    }
}

type ConnId = u64;

/// What the accept and reader threads tell the coordinator.
enum Event {
    Accepted { conn: ConnId, stream: TcpStream, peer: SocketAddr },
    Message { conn: ConnId, msg: ClientMsg },
    Malformed { conn: ConnId, reason: String },
    Closed { conn: ConnId },
}

fn accept_loop(listener: &TcpListener, stop: &AtomicBool, events: &mpsc::Sender<Event>) {
    for conn in 0.. {
        let accepted = listener.accept();
        if stop.load(Ordering::Acquire) {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            // Out of descriptors or a connection reset before accept: the
            // listener itself is fine, so keep serving after a pause.
            Err(_) => {
                thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        let Ok(reader) = stream.try_clone() else {
            continue;
        };
        if events.send(Event::Accepted { conn, stream, peer }).is_err() {
            return;
        }
        let reader_events = events.clone();
        let spawned = thread::Builder::new()
            .name("mw-rendezvous-conn".into())
            .spawn(move || read_loop(conn, reader, &reader_events));
        if spawned.is_err() {
            // No thread to read this connection: hang up, which the rank sees.
            let _ = events.send(Event::Closed { conn });
        }
    }
}

fn read_loop(conn: ConnId, mut stream: TcpStream, events: &mpsc::Sender<Event>) {
    let last = loop {
        match read_frame(&mut stream) {
            Ok(Some(payload)) => match ClientMsg::decode(&payload) {
                Ok(msg) => {
                    if events.send(Event::Message { conn, msg }).is_err() {
                        return;
                    }
                }
                Err(e) => break Event::Malformed { conn, reason: e.to_string() },
            },
            Ok(None) | Err(_) => break Event::Closed { conn },
        }
    };
    let _ = events.send(last);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Not connected yet.
    Waiting,
    /// Connected and introduced on this connection.
    Joined(ConnId),
    /// Said goodbye (or aborted): its connection closing is expected.
    Left,
    /// Its connection closed without a goodbye.
    Lost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoundKind {
    Allgather,
    Barrier,
}

impl fmt::Display for RoundKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RoundKind::Allgather => "allgather",
            RoundKind::Barrier => "barrier",
        })
    }
}

/// The collective under way: the first rank to arrive fixes its kind.
struct Round {
    kind: RoundKind,
    first_rank: u32,
    blobs: Vec<Option<Vec<u8>>>,
    arrived: u32,
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    rank: Option<u32>,
}

/// All rendezvous state; driven one event at a time.
struct Coordinator {
    size: u32,
    job_key: [u8; 16],
    allow_keyless_join: bool,
    conns: HashMap<ConnId, Conn>,
    slots: Vec<Slot>,
    round: Option<Round>,
    next_round: u64,
    failure: Option<Failure>,
    /// Connections whose write failed, closed after the current event.
    dead: Vec<ConnId>,
}

impl Coordinator {
    fn new(size: u32, job_key: [u8; 16], allow_keyless_join: bool) -> Coordinator {
        Coordinator {
            size,
            job_key,
            allow_keyless_join,
            conns: HashMap::new(),
            slots: vec![Slot::Waiting; size as usize],
            round: None,
            next_round: 0,
            failure: None,
            dead: Vec::new(),
        }
    }

    fn all_ranks_gone(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Left | Slot::Lost))
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Accepted { conn, stream, peer } => {
                let _ = stream.set_nodelay(true);
                let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
                self.conns.insert(conn, Conn { stream, peer, rank: None });
            }
            Event::Message { conn, msg } => {
                if self.conns.contains_key(&conn) {
                    self.handle_message(conn, msg);
                }
            }
            Event::Malformed { conn, reason } => self.refuse(conn, FailureKind::Protocol, None, reason),
            Event::Closed { conn } => self.close(conn),
        }
        while let Some(conn) = self.dead.pop() {
            self.close(conn);
        }
    }

    fn handle_message(&mut self, conn: ConnId, msg: ClientMsg) {
        let rank = self.conns[&conn].rank;
        match (msg, rank) {
            (ClientMsg::Hello { version, rank: claimed, size, job_key }, None) => {
                self.handle_hello(conn, version, claimed, size, job_key)
            }
            (ClientMsg::Allgather { round, blob }, Some(rank)) => {
                self.handle_collective(conn, rank, round, RoundKind::Allgather, blob)
            }
            (ClientMsg::Barrier { round }, Some(rank)) => {
                self.handle_collective(conn, rank, round, RoundKind::Barrier, Vec::new())
            }
            (ClientMsg::Abort { reason }, Some(rank)) => self.handle_abort(conn, rank, reason),
            (ClientMsg::Goodbye, Some(rank)) => self.handle_goodbye(rank),
            (ClientMsg::Hello { .. }, Some(_)) => {
                self.refuse(conn, FailureKind::Protocol, rank, "a second hello on one connection".into())
            }
            (_, None) => self.refuse(conn, FailureKind::Protocol, None, "a request before the hello".into()),
        }
    }

    fn handle_hello(&mut self, conn: ConnId, version: u16, rank: u32, size: u32, job_key: Option<[u8; 16]>) {
        let refusal = if version != VERSION {
            Some(format!("it speaks rendezvous protocol version {version}, this server speaks {VERSION}"))
        } else if size != self.size {
            Some(format!("it says the job has {size} ranks, but this rendezvous serves {}", self.size))
        } else if rank >= self.size {
            Some(format!("rank {rank} is out of range for a job of {} ranks", self.size))
        } else if job_key.is_some_and(|key| key != self.job_key) {
            Some("its job key does not match (a rank of another job?)".to_owned())
        } else if job_key.is_none() && !self.allow_keyless_join {
            Some("it presented no job key (MW_JOB_KEY)".to_owned())
        } else {
            match self.slots[rank as usize] {
                Slot::Waiting => None,
                Slot::Joined(other) => Some(format!("rank {rank} already joined from {}", self.conns[&other].peer)),
                Slot::Left | Slot::Lost => Some(format!("rank {rank} already joined and left")),
            }
        };
        if let Some(reason) = refusal {
            // A bad introduction is that connection's problem, not the job's:
            // the ranks already joined carry on.
            self.refuse(conn, FailureKind::Rejected, Some(rank), reason);
            return;
        }
        self.slots[rank as usize] = Slot::Joined(conn);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.rank = Some(rank);
        }
        self.send(conn, &ServerMsg::Welcome { version: VERSION, job_key: self.job_key });
        if let Some(failure) = &self.failure {
            let msg = ServerMsg::Failure(failure.clone());
            self.send(conn, &msg);
        }
    }

    fn handle_collective(&mut self, conn: ConnId, rank: u32, round: u64, kind: RoundKind, blob: Vec<u8>) {
        if let Some(failure) = &self.failure {
            let msg = ServerMsg::Failure(failure.clone());
            self.send(conn, &msg);
            return;
        }
        if let Some(left) = self.slots.iter().position(|s| *s == Slot::Left) {
            let detail = format!("rank {left} left before collective #{round}");
            self.fail_job(Failure { kind: FailureKind::RankLeft, rank: Some(left as u32), detail });
            return;
        }
        if round != self.next_round {
            let detail = format!("rank {rank} sent collective #{round}, but the job is at #{}", self.next_round);
            self.fail_job(Failure { kind: FailureKind::Protocol, rank: Some(rank), detail });
            return;
        }
        let size = self.size as usize;
        let current =
            self.round.get_or_insert_with(|| Round { kind, first_rank: rank, blobs: vec![None; size], arrived: 0 });
        if current.kind != kind {
            let detail = format!(
                "collective #{round}: rank {} called {} but rank {rank} called {kind}",
                current.first_rank, current.kind
            );
            self.fail_job(Failure { kind: FailureKind::Mismatch, rank: Some(rank), detail });
            return;
        }
        let contribution = &mut current.blobs[rank as usize];
        if contribution.is_some() {
            let detail = format!("rank {rank} contributed twice to collective #{round}");
            self.fail_job(Failure { kind: FailureKind::Protocol, rank: Some(rank), detail });
            return;
        }
        *contribution = Some(blob);
        current.arrived += 1;
        if current.arrived == self.size {
            let done = self.round.take().expect("the round just updated");
            let reply = match done.kind {
                RoundKind::Allgather => ServerMsg::AllgatherDone {
                    round,
                    blobs: done.blobs.into_iter().map(Option::unwrap_or_default).collect(),
                },
                RoundKind::Barrier => ServerMsg::BarrierDone { round },
            };
            self.next_round += 1;
            self.broadcast(&reply);
        }
    }

    fn handle_abort(&mut self, conn: ConnId, rank: u32, reason: String) {
        // Leave first so the broadcast reaches the others before the aborting
        // rank's acknowledgement: once it is acknowledged, rank 0 in env mode
        // may exit and take this server with it.
        self.slots[rank as usize] = Slot::Left;
        if self.failure.is_none() {
            self.fail_job(Failure { kind: FailureKind::Aborted, rank: Some(rank), detail: reason });
        }
        let ack = ServerMsg::Failure(self.failure.clone().expect("just set"));
        self.send(conn, &ack);
    }

    fn handle_goodbye(&mut self, rank: u32) {
        self.slots[rank as usize] = Slot::Left;
        if self.round.is_some() {
            let detail = format!("rank {rank} left while collective #{} was under way", self.next_round);
            self.fail_job(Failure { kind: FailureKind::RankLeft, rank: Some(rank), detail });
        }
    }

    /// Records the job's first failure and tells every connected rank.
    fn fail_job(&mut self, failure: Failure) {
        if self.failure.is_some() {
            return;
        }
        self.round = None;
        let msg = ServerMsg::Failure(failure.clone());
        self.failure = Some(failure);
        self.broadcast(&msg);
    }

    fn broadcast(&mut self, msg: &ServerMsg) {
        let frame = msg.encode();
        let joined: Vec<ConnId> =
            self.slots.iter().filter_map(|s| if let Slot::Joined(c) = s { Some(*c) } else { None }).collect();
        for conn in joined {
            self.send_frame(conn, &frame);
        }
    }

    fn send(&mut self, conn: ConnId, msg: &ServerMsg) {
        self.send_frame(conn, &msg.encode());
    }

    fn send_frame(&mut self, conn: ConnId, frame: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if write_frame(&mut c.stream, frame).is_err() {
            self.dead.push(conn);
        }
    }

    /// Answers a connection with a failure and hangs up on it.
    fn refuse(&mut self, conn: ConnId, kind: FailureKind, rank: Option<u32>, detail: String) {
        self.send(conn, &ServerMsg::Failure(Failure { kind, rank, detail }));
        self.close(conn);
    }

    /// Forgets a connection; a joined rank that had not said goodbye is lost,
    /// which fails the job.
    fn close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        let _ = c.stream.shutdown(Shutdown::Both);
        let Some(rank) = c.rank else { return };
        if self.slots[rank as usize] == Slot::Joined(conn) {
            self.slots[rank as usize] = Slot::Lost;
            let detail = format!("rank {rank} ({}) closed its connection without a goodbye", c.peer);
            self.fail_job(Failure { kind: FailureKind::RankLost, rank: Some(rank), detail });
        }
    }

    fn close_all(&mut self) {
        for (_, c) in self.conns.drain() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}
