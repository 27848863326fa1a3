//! The rendezvous wire format: length-prefixed binary messages over TCP.
//!
//! Every message is a frame: a `u32` payload length, then the payload, whose
//! first byte is the message tag. Integers are little-endian; byte strings are
//! a `u32` length then the bytes. The first message each way (`Hello`,
//! `Welcome`) starts with [`MAGIC`] and [`VERSION`], so that a stray client or
//! a server of another version is refused on its first message rather than
//! misread later. A version change replaces this format; there is no
//! negotiation.
//!
//! Decoding never panics and never allocates more than the frame it was
//! given; frames longer than [`MAX_FRAME_LEN`] are refused before reading.
//!
//! Owns: [`MAGIC`], [`VERSION`], the message enums and their encode/decode.
//! Must not: do I/O beyond reading and writing one frame, or allocate more than
//! the frame on decode.

use std::io::{self, Read, Write};

/// Opens `Hello` and `Welcome`.
pub(crate) const MAGIC: [u8; 4] = *b"MWBS";
/// The rendezvous protocol version spoken by this crate.
pub(crate) const VERSION: u16 = 1;
/// Largest payload accepted: bounds memory a bad peer can make us allocate
/// while still fitting an allgather of thousands of endpoint addresses.
pub(crate) const MAX_FRAME_LEN: usize = 256 << 20;

/// Placeholder rank in a [`Failure`] that concerns no particular rank.
const NO_RANK: u32 = u32::MAX;

/// Sent by a rank to the rendezvous server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClientMsg {
    /// First message: who I am, and the job key if I was given one.
    Hello { version: u16, rank: u32, size: u32, job_key: Option<[u8; 16]> },
    /// My contribution to collective `round`, an allgather.
    Allgather { round: u64, blob: Vec<u8> },
    /// My arrival at collective `round`, a barrier.
    Barrier { round: u64 },
    /// I give up; tell everyone. The server answers with the resulting failure.
    Abort { reason: String },
    /// I am done; my connection closing next is not a failure.
    Goodbye,
}

/// Sent by the rendezvous server to a rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerMsg {
    /// Answer to a valid `Hello`: the job key every rank uses.
    Welcome { version: u16, job_key: [u8; 16] },
    /// Every rank's blob of collective `round`, in rank order.
    AllgatherDone { round: u64, blobs: Vec<Vec<u8>> },
    /// Every rank reached barrier `round`.
    BarrierDone { round: u64 },
    /// The job (or this connection's `Hello`) failed; sticky for the job.
    Failure(Failure),
}

/// Why the server gave up on a connection or on the whole job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub kind: FailureKind,
    /// The rank concerned, when there is one.
    pub rank: Option<u32>,
    /// Human-readable detail.
    pub detail: String,
}

/// The kinds of [`Failure`], mapped one to one onto [`BootstrapError`]
/// variants by the client.
///
/// [`BootstrapError`]: crate::BootstrapError
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    Rejected = 1,
    RankLost = 2,
    RankLeft = 3,
    Aborted = 4,
    Mismatch = 5,
    Protocol = 6,
}

impl FailureKind {
    fn from_u8(v: u8) -> Option<FailureKind> {
        Some(match v {
            1 => FailureKind::Rejected,
            2 => FailureKind::RankLost,
            3 => FailureKind::RankLeft,
            4 => FailureKind::Aborted,
            5 => FailureKind::Mismatch,
            6 => FailureKind::Protocol,
            _ => return None,
        })
    }
}

/// Message tags; client and server tags are disjoint to catch crossed wires.
mod tag {
    pub const HELLO: u8 = 0x01;
    pub const ALLGATHER: u8 = 0x02;
    pub const BARRIER: u8 = 0x03;
    pub const ABORT: u8 = 0x04;
    pub const GOODBYE: u8 = 0x05;
    pub const WELCOME: u8 = 0x81;
    pub const ALLGATHER_DONE: u8 = 0x82;
    pub const BARRIER_DONE: u8 = 0x83;
    pub const FAILURE: u8 = 0x84;
}

/// A message that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct DecodeError(pub &'static str);

impl ClientMsg {
    /// Encodes as one frame (length prefix included).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = FrameWriter::new();
        match self {
            ClientMsg::Hello { version, rank, size, job_key } => {
                w.u8(tag::HELLO).raw(&MAGIC).u16(*version).u32(*rank).u32(*size);
                match job_key {
                    Some(key) => w.u8(1).raw(key),
                    None => w.u8(0),
                };
            }
            ClientMsg::Allgather { round, blob } => {
                w.u8(tag::ALLGATHER).u64(*round).bytes(blob);
            }
            ClientMsg::Barrier { round } => {
                w.u8(tag::BARRIER).u64(*round);
            }
            ClientMsg::Abort { reason } => {
                w.u8(tag::ABORT).bytes(reason.as_bytes());
            }
            ClientMsg::Goodbye => {
                w.u8(tag::GOODBYE);
            }
        }
        w.finish()
    }

    /// Decodes one frame's payload.
    pub(crate) fn decode(payload: &[u8]) -> Result<ClientMsg, DecodeError> {
        let mut r = Reader(payload);
        let msg = match r.u8()? {
            tag::HELLO => {
                r.magic()?;
                let version = r.u16()?;
                if version != VERSION {
                    // Later fields may be laid out differently: stop here and
                    // let the server refuse the version by name.
                    return Ok(ClientMsg::Hello { version, rank: 0, size: 0, job_key: None });
                }
                let rank = r.u32()?;
                let size = r.u32()?;
                let job_key = match r.u8()? {
                    0 => None,
                    1 => Some(r.array()?),
                    _ => return Err(DecodeError("bad job key flag")),
                };
                ClientMsg::Hello { version, rank, size, job_key }
            }
            tag::ALLGATHER => ClientMsg::Allgather { round: r.u64()?, blob: r.bytes()?.to_vec() },
            tag::BARRIER => ClientMsg::Barrier { round: r.u64()? },
            tag::ABORT => ClientMsg::Abort { reason: r.string()? },
            tag::GOODBYE => ClientMsg::Goodbye,
            _ => return Err(DecodeError("unknown client message tag")),
        };
        r.finish()?;
        Ok(msg)
    }
}

impl ServerMsg {
    /// Encodes as one frame (length prefix included).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = FrameWriter::new();
        match self {
            ServerMsg::Welcome { version, job_key } => {
                w.u8(tag::WELCOME).raw(&MAGIC).u16(*version).raw(job_key);
            }
            ServerMsg::AllgatherDone { round, blobs } => {
                w.u8(tag::ALLGATHER_DONE).u64(*round).u32(blobs.len() as u32);
                for blob in blobs {
                    w.bytes(blob);
                }
            }
            ServerMsg::BarrierDone { round } => {
                w.u8(tag::BARRIER_DONE).u64(*round);
            }
            ServerMsg::Failure(f) => {
                w.u8(tag::FAILURE).u8(f.kind as u8).u32(f.rank.unwrap_or(NO_RANK)).bytes(f.detail.as_bytes());
            }
        }
        w.finish()
    }

    /// Decodes one frame's payload.
    pub(crate) fn decode(payload: &[u8]) -> Result<ServerMsg, DecodeError> {
        let mut r = Reader(payload);
        let msg = match r.u8()? {
            tag::WELCOME => {
                r.magic()?;
                let version = r.u16()?;
                if version != VERSION {
                    return Ok(ServerMsg::Welcome { version, job_key: [0; 16] });
                }
                ServerMsg::Welcome { version, job_key: r.array()? }
            }
            tag::ALLGATHER_DONE => {
                let round = r.u64()?;
                let count = r.u32()? as usize;
                // Each blob takes at least its 4-byte length: a count larger
                // than that is a lie, refused before allocating for it.
                if count > r.0.len() / 4 {
                    return Err(DecodeError("blob count exceeds the frame"));
                }
                let mut blobs = Vec::with_capacity(count);
                for _ in 0..count {
                    blobs.push(r.bytes()?.to_vec());
                }
                ServerMsg::AllgatherDone { round, blobs }
            }
            tag::BARRIER_DONE => ServerMsg::BarrierDone { round: r.u64()? },
            tag::FAILURE => {
                let kind = FailureKind::from_u8(r.u8()?).ok_or(DecodeError("unknown failure kind"))?;
                let rank = Some(r.u32()?).filter(|&rank| rank != NO_RANK);
                ServerMsg::Failure(Failure { kind, rank, detail: r.string()? })
            }
            _ => return Err(DecodeError("unknown server message tag")),
        };
        r.finish()?;
        Ok(msg)
    }
}

/// Writes one already-encoded frame.
pub(crate) fn write_frame(w: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    w.write_all(frame)?;
    w.flush()
}

/// Reads one frame's payload. A clean end of stream before the first byte of
/// the length is `Ok(None)`; anything short of a whole frame after that is an
/// `UnexpectedEof` error.
pub(crate) fn read_frame(r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    let mut filled = 0;
    while filled < len.len() {
        match r.read(&mut len[filled..]) {
            Ok(0) if filled == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME_LEN {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("frame of {len} bytes exceeds the limit")));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(Some(payload))
}

/// Builds a frame: reserves the length prefix, patched in by `finish`.
struct FrameWriter(Vec<u8>);

impl FrameWriter {
    fn new() -> FrameWriter {
        FrameWriter(vec![0; 4])
    }
    fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.extend_from_slice(bytes);
        self
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.raw(&[v])
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32).raw(v)
    }
    fn finish(self) -> Vec<u8> {
        let mut frame = self.0;
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_le_bytes());
        frame
    }
}

/// A cursor over a payload; every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError("message truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        self.take(len)
    }
    fn string(&mut self) -> Result<String, DecodeError> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }
    fn magic(&mut self) -> Result<(), DecodeError> {
        if self.array::<4>()? != MAGIC {
            return Err(DecodeError("not a memwire rendezvous peer (bad magic)"));
        }
        Ok(())
    }
    fn finish(&self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes after message"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn payload(frame: &[u8]) -> &[u8] {
        let len = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        &frame[4..]
    }

    #[test]
    fn client_messages_round_trip() {
        let msgs = [
            ClientMsg::Hello { version: VERSION, rank: 3, size: 8, job_key: Some([7; 16]) },
            ClientMsg::Hello { version: VERSION, rank: 0, size: 1, job_key: None },
            ClientMsg::Allgather { round: 9, blob: b"10.0.0.1:4000".to_vec() },
            ClientMsg::Allgather { round: 0, blob: vec![] },
            ClientMsg::Barrier { round: u64::MAX },
            ClientMsg::Abort { reason: "out of memory".into() },
            ClientMsg::Goodbye,
        ];
        for msg in msgs {
            assert_eq!(ClientMsg::decode(payload(&msg.encode())).unwrap(), msg);
        }
    }

    #[test]
    fn server_messages_round_trip() {
        let msgs = [
            ServerMsg::Welcome { version: VERSION, job_key: [1; 16] },
            ServerMsg::AllgatherDone { round: 2, blobs: vec![b"a".to_vec(), vec![], b"ccc".to_vec()] },
            ServerMsg::BarrierDone { round: 5 },
            ServerMsg::Failure(Failure { kind: FailureKind::RankLost, rank: Some(4), detail: "gone".into() }),
            ServerMsg::Failure(Failure { kind: FailureKind::Protocol, rank: None, detail: String::new() }),
        ];
        for msg in msgs {
            assert_eq!(ServerMsg::decode(payload(&msg.encode())).unwrap(), msg);
        }
    }

    #[test]
    fn hello_fixture_bytes() {
        let frame = ClientMsg::Hello { version: 1, rank: 2, size: 4, job_key: None }.encode();
        let expected = [16, 0, 0, 0, 0x01, b'M', b'W', b'B', b'S', 1, 0, 2, 0, 0, 0, 4, 0, 0, 0, 0];
        assert_eq!(frame, expected);
    }

    #[test]
    fn another_version_decodes_far_enough_to_be_refused() {
        let mut frame = ClientMsg::Hello { version: VERSION, rank: 1, size: 2, job_key: None }.encode();
        frame[9] = 99; // version low byte
        frame.truncate(11); // a future layout may differ after the version
        let ClientMsg::Hello { version, .. } = ClientMsg::decode(&frame[4..]).unwrap() else { panic!() };
        assert_eq!(version, 99);
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(ClientMsg::decode(&[]).is_err());
        assert!(ClientMsg::decode(&[0x7f]).is_err());
        assert!(ClientMsg::decode(&[tag::HELLO, b'H', b'T', b'T', b'P']).is_err());
        assert!(ClientMsg::decode(&[tag::GOODBYE, 0]).is_err());
        assert!(ServerMsg::decode(&[tag::ALLGATHER_DONE, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255]).is_err());
        assert!(ServerMsg::decode(&[tag::FAILURE, 42, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn oversized_and_truncated_frames_are_refused() {
        let huge = ((MAX_FRAME_LEN + 1) as u32).to_le_bytes();
        assert_eq!(read_frame(&mut &huge[..]).unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert!(read_frame(&mut &[][..]).unwrap().is_none());
        assert_eq!(read_frame(&mut &[5, 0][..]).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(read_frame(&mut &[5, 0, 0, 0, 1][..]).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ClientMsg::decode(&bytes);
            let _ = ServerMsg::decode(&bytes);
        }
    }
}
