//! A minimal PMI server, for tests only (there is no Slurm on the test
//! machines): it answers PMI-2 the way Slurm's `mpi/pmi2` plugin does
//! (left-padded frame lengths, `fullinit` must carry `pmijobid`, `pmirank`
//! and `threaded`) and PMI-1 the way Hydra does, over one socket per rank.
//!
//! Owns: a key-value space with fences, and a [`ServerReport`] of what the
//! ranks did. Must not: be used outside tests; it has no timeouts of its
//! own (a test's ranks do).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};

/// What the ranks did, for the test to check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerReport {
    /// Wire protocol each rank asked for in its init line (0: none).
    pub versions: Vec<u8>,
    /// Whether each rank finalized before hanging up.
    pub finalized: Vec<bool>,
    /// Completed fences (PMI-2 `kvs-fence`, PMI-1 `barrier_in`).
    pub fences: u64,
    /// Keys put by all ranks.
    pub puts: usize,
    /// `(rank, message)` of the first abort.
    pub aborted: Option<(u32, String)>,
    /// Requests the server refused, with the reason (a correct client makes none).
    pub refused: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    kvs: HashMap<String, String>,
    arrived: u32,
    epoch: u64,
    /// Set when a rank aborts or hangs up early: pending fences fail.
    failed: Option<String>,
    report: ServerReport,
}

#[derive(Debug)]
struct Shared {
    size: u32,
    jobid: String,
    state: Mutex<State>,
    fenced: Condvar,
}

/// Serves one rank per stream (`clients[r]` is rank r's socket) until every
/// rank has hung up; the handle yields the report.
pub fn serve(clients: Vec<UnixStream>, jobid: &str) -> JoinHandle<ServerReport> {
    let size = clients.len() as u32;
    let report =
        ServerReport { versions: vec![0; size as usize], finalized: vec![false; size as usize], ..Default::default() };
    let shared = Arc::new(Shared {
        size,
        jobid: jobid.to_owned(),
        state: Mutex::new(State { report, ..Default::default() }),
        fenced: Condvar::new(),
    });
    let workers: Vec<JoinHandle<()>> = clients
        .into_iter()
        .enumerate()
        .map(|(rank, stream)| {
            let shared = Arc::clone(&shared);
            thread::spawn(move || serve_rank(&shared, rank as u32, stream))
        })
        .collect();
    thread::spawn(move || {
        for worker in workers {
            let _ = worker.join();
        }
        let state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.report.clone()
    })
}

fn serve_rank(shared: &Shared, rank: u32, stream: UnixStream) {
    let Ok(writer) = stream.try_clone() else { return };
    let mut conn = ServerConn { reader: BufReader::new(stream), writer };
    let finalized = conn.run(shared, rank).unwrap_or(false);
    let mut state = shared.lock();
    state.report.finalized[rank as usize] = finalized;
    if !finalized && state.failed.is_none() {
        state.failed = Some(format!("rank {rank} hung up without finalize"));
        shared.fenced.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn refuse(&self, why: String) -> String {
        self.lock().report.refused.push(why.clone());
        why
    }

    /// Waits for every rank to reach the fence; `Err` if the job failed.
    fn fence(&self) -> Result<(), String> {
        let mut state = self.lock();
        if let Some(why) = &state.failed {
            return Err(why.clone());
        }
        let epoch = state.epoch;
        state.arrived += 1;
        if state.arrived == self.size {
            state.arrived = 0;
            state.epoch += 1;
            state.report.fences += 1;
            self.fenced.notify_all();
            return Ok(());
        }
        while state.epoch == epoch && state.failed.is_none() {
            state = self.fenced.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        match &state.failed {
            Some(why) if state.epoch == epoch => Err(why.clone()),
            _ => Ok(()),
        }
    }

    fn put(&self, key: &str, value: &str) -> Result<(), String> {
        if key.is_empty() || key.len() > 64 || value.len() > 1024 {
            return Err(self.refuse(format!("put of key {key:?} ({} bytes of value): bad length", value.len())));
        }
        let mut state = self.lock();
        if state.kvs.insert(key.to_owned(), value.to_owned()).is_some() {
            drop(state);
            return Err(self.refuse(format!("key {key:?} put twice")));
        }
        state.report.puts += 1;
        Ok(())
    }

    fn get(&self, key: &str) -> Option<String> {
        self.lock().kvs.get(key).cloned()
    }

    fn abort(&self, rank: u32, message: String) {
        let mut state = self.lock();
        state.report.aborted.get_or_insert((rank, message.clone()));
        state.failed.get_or_insert(format!("rank {rank} aborted: {message}"));
        self.fenced.notify_all();
    }
}

struct ServerConn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

/// Ends a rank's conversation: `Ok(true)` after finalize, `Ok(false)` on
/// hang-up or abort.
type Outcome = std::io::Result<bool>;

impl ServerConn {
    fn run(&mut self, shared: &Shared, rank: u32) -> Outcome {
        let Some(init) = self.read_line()? else { return Ok(false) };
        let init = parse(&init, ' ');
        let version = match (field(&init, "cmd"), field(&init, "pmi_version")) {
            (Some("init"), Some("1")) => 1,
            (Some("init"), Some("2")) => 2,
            _ => {
                shared.refuse(format!("rank {rank}: bad init {init:?}"));
                self.writer.write_all(b"cmd=response_to_init rc=-1 pmi_version=2 pmi_subversion=0\n")?;
                return Ok(false);
            }
        };
        shared.lock().report.versions[rank as usize] = version;
        if version == 2 {
            self.writer.write_all(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")?;
            self.run_v2(shared, rank)
        } else {
            self.writer.write_all(b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n")?;
            self.run_v1(shared, rank)
        }
    }

    fn run_v2(&mut self, shared: &Shared, rank: u32) -> Outcome {
        loop {
            let Some(body) = self.read_frame()? else { return Ok(false) };
            let req = parse(&body, ';');
            let get = |k: &str| field(&req, k).unwrap_or("").to_owned();
            match get("cmd").as_str() {
                "fullinit" => {
                    let ok = get("pmirank") == rank.to_string()
                        && get("pmijobid") == shared.jobid
                        && field(&req, "threaded").is_some();
                    if !ok {
                        shared.refuse(format!(
                            "rank {rank}: fullinit without the right pmijobid/pmirank/threaded: {req:?}"
                        ));
                    }
                    let rc = if ok { 0 } else { 3 };
                    self.send_v2(&format!(
                        "cmd=fullinit-response;rc={rc};pmi-version=2;pmi-subversion=0;rank={rank};size={};appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
                        shared.size
                    ))?;
                }
                "kvs-put" => {
                    let rc = if shared.put(&get("key"), &get("value")).is_ok() { 0 } else { 7 };
                    self.send_v2(&format!("cmd=kvs-put-response;rc={rc};"))?;
                }
                "kvs-fence" => match shared.fence() {
                    Ok(()) => self.send_v2("cmd=kvs-fence-response;rc=0;")?,
                    Err(why) => {
                        self.send_v2(&format!("cmd=kvs-fence-response;rc=14;errmsg={};", why.replace(';', "_")))?
                    }
                },
                "kvs-get" => match shared.get(&get("key")) {
                    Some(value) => self.send_v2(&format!("cmd=kvs-get-response;rc=0;found=TRUE;value={value};"))?,
                    None => self.send_v2("cmd=kvs-get-response;rc=0;found=FALSE;")?,
                },
                "finalize" => {
                    self.send_v2("cmd=finalize-response;rc=0;")?;
                    return Ok(true);
                }
                "abort" => {
                    shared.abort(rank, get("msg"));
                    return Ok(false);
                }
                other => {
                    let why = shared.refuse(format!("rank {rank}: unknown PMI-2 command {other:?}"));
                    self.send_v2(&format!("cmd={other}-response;rc=14;errmsg={why};"))?;
                }
            }
        }
    }

    fn run_v1(&mut self, shared: &Shared, rank: u32) -> Outcome {
        let kvsname = format!("kvs_{}", shared.jobid);
        loop {
            let Some(line) = self.read_line()? else { return Ok(false) };
            if line.len() > 1024 {
                shared.refuse(format!("rank {rank}: PMI-1 line of {} bytes", line.len()));
            }
            let req = parse(&line, ' ');
            let get = |k: &str| field(&req, k).unwrap_or("").to_owned();
            let answer = match get("cmd").as_str() {
                "get_maxes" => "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024".to_owned(),
                "get_my_kvsname" => format!("cmd=my_kvsname kvsname={kvsname}"),
                "put" if get("kvsname") == kvsname => match shared.put(&get("key"), &get("value")) {
                    Ok(()) => "cmd=put_result rc=0 msg=success".to_owned(),
                    Err(why) => format!("cmd=put_result rc=-1 msg={}", why.replace(' ', "_")),
                },
                "barrier_in" => match shared.fence() {
                    Ok(()) => "cmd=barrier_out".to_owned(),
                    Err(why) => format!("cmd=barrier_out rc=-1 msg={}", why.replace(' ', "_")),
                },
                "get" if get("kvsname") == kvsname => match shared.get(&get("key")) {
                    Some(value) => format!("cmd=get_result rc=0 msg=success value={value}"),
                    None => "cmd=get_result rc=-1 msg=key_not_found".to_owned(),
                },
                "finalize" => {
                    self.writer.write_all(b"cmd=finalize_ack\n")?;
                    return Ok(true);
                }
                "abort" => {
                    shared.abort(rank, format!("exitcode={}", get("exitcode")));
                    return Ok(false);
                }
                other => {
                    let why = shared.refuse(format!("rank {rank}: bad PMI-1 request {line:?}"));
                    format!("cmd={other}_result rc=-1 msg={}", why.replace(' ', "_"))
                }
            };
            self.writer.write_all(format!("{answer}\n").as_bytes())?;
        }
    }

    fn read_line(&mut self) -> std::io::Result<Option<String>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        Ok(Some(line.trim_end_matches('\n').to_owned()))
    }

    fn read_frame(&mut self) -> std::io::Result<Option<String>> {
        let mut header = [0u8; 6];
        if let Err(e) = self.reader.read_exact(&mut header) {
            return if e.kind() == std::io::ErrorKind::UnexpectedEof { Ok(None) } else { Err(e) };
        }
        let len: usize = String::from_utf8_lossy(&header)
            .trim()
            .parse()
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad PMI-2 frame length"))?;
        let mut body = vec![0u8; len];
        self.reader.read_exact(&mut body)?;
        Ok(Some(String::from_utf8_lossy(&body).into_owned()))
    }

    /// Slurm's framing: the length left-justified in 6 characters.
    fn send_v2(&mut self, body: &str) -> std::io::Result<()> {
        self.writer.write_all(format!("{:<6}{body}", body.len()).as_bytes())
    }
}

fn parse(text: &str, separator: char) -> Vec<(String, String)> {
    text.split(separator)
        .filter(|f| !f.is_empty())
        .map(|f| match f.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (f.to_owned(), String::new()),
        })
        .collect()
}

fn field<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}
