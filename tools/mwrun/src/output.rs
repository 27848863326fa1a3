//! Forwarding a rank's stdout and stderr to mwrun's, one whole line at a time.
//!
//! Each stream of each rank has a thread that reads lines and writes each one
//! with a single `write_all` while holding the lock of mwrun's stream, so
//! lines of different ranks never mix within a line.
//!
//! Owns: the forwarding threads and the optional `[rank] ` prefix. Must not:
//! buffer a rank's output without bound (a line is cut at a fixed maximum) or
//! stop the job when a stream closes (`supervise` decides).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::thread::{self, JoinHandle};

/// Longest piece forwarded as one line: a rank writing megabytes without a
/// newline must not make mwrun buffer them all.
const MAX_LINE: u64 = 64 * 1024;

/// Which of mwrun's streams a rank's stream goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    Stdout,
    Stderr,
}

/// Starts a thread forwarding `source` to `sink`, each line prefixed with
/// `prefix` (e.g. `[3] `) unless it is empty.
pub fn spawn_forwarder(source: impl Read + Send + 'static, prefix: String, sink: Sink) -> io::Result<JoinHandle<()>> {
    thread::Builder::new().name("mwrun-output".into()).spawn(move || {
        let write = |line: &[u8]| {
            // mwrun's own output may be gone (`mwrun ... | head`): keep
            // reading anyway, so the rank never blocks on a full pipe.
            let _ = match sink {
                Sink::Stdout => write_locked(&mut io::stdout().lock(), line),
                Sink::Stderr => write_locked(&mut io::stderr().lock(), line),
            };
        };
        forward_lines(BufReader::new(source), prefix.as_bytes(), write);
    })
}

fn write_locked(out: &mut impl Write, line: &[u8]) -> io::Result<()> {
    out.write_all(line)?;
    out.flush()
}

/// Reads `source` to its end and hands each line, prefix included, to
/// `write`. With a prefix, a last line lacking its newline gets one, so the
/// next rank's line starts on a line of its own; without one, bytes pass
/// through unchanged.
pub fn forward_lines(mut source: impl BufRead, prefix: &[u8], mut write: impl FnMut(&[u8])) {
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        line.extend_from_slice(prefix);
        match (&mut source).take(MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {
                if !prefix.is_empty() && line.last() != Some(&b'\n') {
                    line.push(b'\n');
                }
                write(&line);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarded(input: &[u8], prefix: &str) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        forward_lines(input, prefix.as_bytes(), |l| lines.push(l.to_vec()));
        lines
    }

    #[test]
    fn lines_get_the_prefix() {
        assert_eq!(forwarded(b"hi\nthere\n", "[1] "), [b"[1] hi\n".to_vec(), b"[1] there\n".to_vec()]);
    }

    #[test]
    fn an_unterminated_last_line_is_terminated_only_with_a_prefix() {
        assert_eq!(forwarded(b"a\nb", "[0] "), [b"[0] a\n".to_vec(), b"[0] b\n".to_vec()]);
        assert_eq!(forwarded(b"a\nb", ""), [b"a\n".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn huge_lines_are_cut_into_bounded_pieces() {
        let input = vec![b'x'; MAX_LINE as usize * 2 + 10];
        let lines = forwarded(&input, "");
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.len() <= MAX_LINE as usize));
        assert_eq!(lines.concat(), input);
    }

    #[test]
    fn empty_input_forwards_nothing() {
        assert!(forwarded(b"", "[0] ").is_empty());
    }
}
