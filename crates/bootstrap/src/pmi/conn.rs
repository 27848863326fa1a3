//! The byte level shared by the PMI-1 and PMI-2 clients: a socket to the
//! launcher with per-step deadlines, newline-terminated PMI-1 lines, PMI-2
//! frames (a 6-character decimal length, then `key=value;` pairs), and the
//! parsed [`Reply`].
//!
//! Must not: know which commands exist (the clients do) or wait past the
//! deadline it was given.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::error::{BootstrapError, Step};

/// Longest PMI-1 line or PMI-2 frame accepted from the launcher. Real ones
/// are at most a few KiB (values are capped at 1024 bytes).
const MAX_MESSAGE: usize = 64 << 10;

/// A connection to the PMI server, speaking wire protocol `version`.
#[derive(Debug)]
pub(crate) struct Conn {
    reader: BufReader<UnixStream>,
    pub(crate) version: u8,
    pub(crate) timeout: Duration,
    /// Set by any failure: the stream may hold half a message.
    poisoned: bool,
}

impl Conn {
    pub(crate) fn new(stream: UnixStream, version: u8, timeout: Duration) -> Conn {
        Conn { reader: BufReader::new(stream), version, timeout, poisoned: false }
    }

    /// A deadline for a step starting now.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    pub(crate) fn is_healthy(&self) -> bool {
        !self.poisoned
    }

    pub(crate) fn poison(&mut self) {
        self.poisoned = true;
    }

    pub(crate) fn error(&self, detail: String) -> BootstrapError {
        BootstrapError::Pmi { version: self.version, detail }
    }

    /// Writes `bytes` in one call (Slurm reads the init line with a single
    /// `read`, so it must not be split by us).
    pub(crate) fn send(&mut self, step: Step, bytes: &[u8]) -> Result<(), BootstrapError> {
        if self.poisoned {
            return Err(BootstrapError::Poisoned);
        }
        let result = self.reader.get_mut().write_all(bytes);
        result.map_err(|e| {
            self.poisoned = true;
            self.io_error(step, e)
        })
    }

    /// Sends one PMI-2 frame: the body's length as 6 characters, the body.
    pub(crate) fn send_frame(&mut self, step: Step, body: &str) -> Result<(), BootstrapError> {
        let frame = format!("{:<6}{body}", body.len());
        self.send(step, frame.as_bytes())
    }

    /// Reads one newline-terminated line (without the newline).
    pub(crate) fn read_line(&mut self, step: Step, deadline: Instant) -> Result<String, BootstrapError> {
        let result = self.read_line_inner(step, deadline);
        result.inspect_err(|_| self.poisoned = true)
    }

    fn read_line_inner(&mut self, step: Step, deadline: Instant) -> Result<String, BootstrapError> {
        self.arm(step, deadline)?;
        let mut line = Vec::new();
        let limit = MAX_MESSAGE as u64 + 1;
        let n = (&mut self.reader).take(limit).read_until(b'\n', &mut line).map_err(|e| self.io_error(step, e))?;
        if n == 0 {
            return Err(BootstrapError::ServerClosed { step });
        }
        if line.last() != Some(&b'\n') {
            return Err(if line.len() > MAX_MESSAGE {
                self.error(format!("a line longer than {MAX_MESSAGE} bytes during {step}"))
            } else {
                BootstrapError::ServerClosed { step }
            });
        }
        line.pop();
        String::from_utf8(line).map_err(|_| self.error(format!("a line that is not UTF-8 during {step}")))
    }

    /// Reads one PMI-2 frame and returns its body.
    pub(crate) fn read_frame(&mut self, step: Step, deadline: Instant) -> Result<String, BootstrapError> {
        let result = self.read_frame_inner(step, deadline);
        result.inspect_err(|_| self.poisoned = true)
    }

    fn read_frame_inner(&mut self, step: Step, deadline: Instant) -> Result<String, BootstrapError> {
        self.arm(step, deadline)?;
        let mut header = [0u8; 6];
        self.reader.read_exact(&mut header).map_err(|e| self.io_error(step, e))?;
        let len = std::str::from_utf8(&header)
            .ok()
            .and_then(|h| h.trim().parse::<usize>().ok())
            .filter(|&len| len <= MAX_MESSAGE)
            .ok_or_else(|| {
                self.error(format!("bad frame length {:?} during {step}", String::from_utf8_lossy(&header)))
            })?;
        let mut body = vec![0u8; len];
        self.reader.read_exact(&mut body).map_err(|e| self.io_error(step, e))?;
        String::from_utf8(body).map_err(|_| self.error(format!("a frame that is not UTF-8 during {step}")))
    }

    /// Bounds the next reads by `deadline`.
    fn arm(&mut self, step: Step, deadline: Instant) -> Result<(), BootstrapError> {
        if self.poisoned {
            return Err(BootstrapError::Poisoned);
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(BootstrapError::Timeout { step, after: self.timeout });
        }
        self.reader.get_ref().set_read_timeout(Some(remaining)).map_err(|e| self.io_error(step, e))
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
}

/// A parsed PMI message: its `key=value` pairs in order (`cmd` first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) pairs: Vec<(String, String)>,
}

impl Reply {
    /// Parses a PMI-1 line: `cmd=NAME key=value ...`, separated by spaces.
    pub(crate) fn parse_v1(line: &str) -> Reply {
        let pairs = line
            .split_ascii_whitespace()
            .map(|word| match word.split_once('=') {
                Some((k, v)) => (k.to_owned(), v.to_owned()),
                None => (word.to_owned(), String::new()),
            })
            .collect();
        Reply { pairs }
    }

    /// Parses a PMI-2 body: `cmd=NAME;key=value;...;`, where `;;` inside a
    /// value stands for a literal `;`.
    pub(crate) fn parse_v2(body: &str) -> Reply {
        let mut pairs = Vec::new();
        let mut field = String::new();
        let mut chars = body.chars().peekable();
        while let Some(c) = chars.next() {
            if c == ';' {
                if chars.peek() == Some(&';') {
                    chars.next();
                    field.push(';');
                    continue;
                }
                push_field(&mut pairs, &mut field);
            } else {
                field.push(c);
            }
        }
        push_field(&mut pairs, &mut field);
        Reply { pairs }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub(crate) fn cmd(&self) -> &str {
        self.get("cmd").unwrap_or("")
    }

    /// The `rc` field; absent counts as success (PMI-1 servers omit it).
    pub(crate) fn rc(&self) -> i64 {
        self.get("rc").and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    }

    /// The server's explanation of a failure, if it gave one.
    pub(crate) fn message(&self) -> String {
        self.get("msg").or_else(|| self.get("errmsg")).unwrap_or("no reason given").to_owned()
    }
}

fn push_field(pairs: &mut Vec<(String, String)>, field: &mut String) {
    if field.is_empty() {
        return;
    }
    let taken = std::mem::take(field);
    match taken.split_once('=') {
        Some((k, v)) => pairs.push((k.to_owned(), v.to_owned())),
        None => pairs.push((taken, String::new())),
    }
}

/// Escapes `;` for a PMI-2 value (values this crate writes never hold one,
/// but abort messages come from the user).
pub(crate) fn escape_v2(text: &str) -> String {
    text.replace(';', ";;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_lines_parse_into_pairs() {
        let r = Reply::parse_v1("cmd=get_result rc=-1 msg=key_not_found");
        assert_eq!((r.cmd(), r.rc(), r.message().as_str()), ("get_result", -1, "key_not_found"));
        assert_eq!(Reply::parse_v1("cmd=barrier_out").rc(), 0);
    }

    #[test]
    fn v2_bodies_parse_with_escaped_semicolons() {
        let r = Reply::parse_v2("cmd=kvs-get-response;rc=0;found=TRUE;value=a;;b=c;");
        assert_eq!(r.cmd(), "kvs-get-response");
        assert_eq!(r.get("found"), Some("TRUE"));
        assert_eq!(r.get("value"), Some("a;b=c"));
        assert_eq!(Reply::parse_v2(&format!("cmd=abort;msg={};", escape_v2("x;y"))).get("msg"), Some("x;y"));
        assert_eq!(Reply::parse_v2("").pairs, []);
    }

    #[test]
    fn frames_round_trip_and_bad_lengths_are_errors() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut tx = Conn::new(a, 2, Duration::from_secs(5));
        let mut rx = Conn::new(b, 2, Duration::from_secs(5));
        tx.send_frame(Step::Join, "cmd=kvs-fence;").unwrap();
        tx.send(Step::Join, b"   113").unwrap();
        assert_eq!(rx.read_frame(Step::Join, rx.deadline()).unwrap(), "cmd=kvs-fence;");
        // A right-justified header (Hydra writes those) parses too; the
        // body is then short, and the closed stream ends the read.
        drop(tx);
        let err = rx.read_frame(Step::Join, rx.deadline()).unwrap_err();
        assert!(matches!(err, BootstrapError::ServerClosed { .. }), "{err}");
        let (a, b) = UnixStream::pair().unwrap();
        let mut tx = Conn::new(a, 2, Duration::from_secs(5));
        let mut rx = Conn::new(b, 2, Duration::from_secs(5));
        tx.send(Step::Join, b"abcdefcmd=x;").unwrap();
        assert!(rx.read_frame(Step::Join, rx.deadline()).unwrap_err().to_string().contains("bad frame length"));
    }

    #[test]
    fn a_silent_server_times_out() {
        let (_keep, b) = UnixStream::pair().unwrap();
        let mut rx = Conn::new(b, 1, Duration::from_millis(50));
        let err = rx.read_line(Step::Join, rx.deadline()).unwrap_err();
        assert!(matches!(err, BootstrapError::Timeout { .. }), "{err}");
        assert!(matches!(rx.read_line(Step::Join, rx.deadline()), Err(BootstrapError::Poisoned)));
    }
}
