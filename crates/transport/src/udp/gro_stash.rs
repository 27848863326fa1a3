//! Datagrams left over when `recv_one` receives a GRO buffer.
//!
//! `recv_one` scatters a receive into the caller's buffer first and a spill
//! buffer second, so the common, uncoalesced case costs no copy. When the
//! kernel coalesced several datagrams, the first is returned in place and the
//! rest — the tail of the caller's buffer (copied into `head`, since the
//! caller will reuse it) followed by the spill — are served from here, one
//! segment per call, by copying.
//!
//! Owns: one spill buffer (allocated once, when GRO is on) and the cursor over the
//! datagrams still in it. Must not: allocate after construction, or hand out a
//! segment longer than the kernel's GRO segment size.

use std::net::{Ipv4Addr, SocketAddr};

#[derive(Debug)]
pub(super) struct GroStash {
    /// Bytes that arrived in the caller's buffer after the first segment.
    head: Vec<u8>,
    /// The second scatter buffer of every GRO receive.
    spill: Vec<u8>,
    /// Bytes of `spill` that belong to the held datagrams.
    spill_len: usize,
    /// Offset of the next datagram within `head ++ spill[..spill_len]`.
    pos: usize,
    segment: usize,
    from: SocketAddr,
}

impl GroStash {
    pub(super) fn new(buffer_len: usize) -> Self {
        Self {
            head: Vec::with_capacity(buffer_len),
            spill: vec![0; buffer_len],
            spill_len: 0,
            pos: 0,
            segment: 0,
            from: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        }
    }

    /// The spill buffer to receive into. Only valid to overwrite while
    /// nothing is held (`pop_into` returned `None`).
    pub(super) fn spill_mut(&mut self) -> &mut [u8] {
        debug_assert_eq!(self.remaining(), 0, "receiving over held datagrams");
        &mut self.spill
    }

    /// Bytes of held datagrams not yet handed out.
    pub(super) fn remaining(&self) -> usize {
        self.head.len() + self.spill_len - self.pos
    }

    /// Holds the datagrams after the first one of a GRO receive: `head` is
    /// what followed it in the caller's buffer, `spill_len` bytes more are in
    /// the spill buffer, all of `segment` size (the last may be shorter).
    pub(super) fn load(&mut self, head: &[u8], spill_len: usize, segment: usize, from: SocketAddr) {
        debug_assert!(segment > 0 && spill_len <= self.spill.len());
        self.head.clear();
        self.head.extend_from_slice(head);
        self.spill_len = spill_len;
        self.pos = 0;
        self.segment = segment;
        self.from = from;
    }

    /// Copies the next held datagram into `out`. Datagrams longer than `out`
    /// are dropped and counted in `truncated`.
    pub(super) fn pop_into(&mut self, out: &mut [u8], truncated: &mut u64) -> Option<(usize, SocketAddr)> {
        while self.remaining() > 0 {
            let len = self.segment.min(self.remaining());
            let start = self.pos;
            self.pos += len;
            if len > out.len() {
                *truncated += 1;
                continue;
            }
            self.copy_range(start, &mut out[..len]);
            return Some((len, self.from));
        }
        None
    }

    /// Copies `out.len()` bytes starting at `start` of `head ++ spill`.
    fn copy_range(&self, start: usize, out: &mut [u8]) {
        let mut written = 0;
        if start < self.head.len() {
            written = (self.head.len() - start).min(out.len());
            out[..written].copy_from_slice(&self.head[start..start + written]);
        }
        let rest = out.len() - written;
        if rest > 0 {
            let from = start + written - self.head.len();
            out[written..].copy_from_slice(&self.spill[from..from + rest]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_straddling_head_and_spill_come_out_whole() {
        let from: SocketAddr = "127.0.0.1:7".parse().unwrap();
        let mut stash = GroStash::new(64);
        // Datagrams of 4 bytes: [1;4] [2;4] [3;4] [4;2]; the first 6 bytes
        // landed in the caller's buffer, the rest in the spill.
        stash.spill_mut()[..8].copy_from_slice(&[2, 2, 3, 3, 3, 3, 4, 4]);
        stash.load(&[2, 2], 8, 4, from);
        let mut out = [0u8; 16];
        let mut truncated = 0;
        let mut got = Vec::new();
        while let Some((len, addr)) = stash.pop_into(&mut out, &mut truncated) {
            assert_eq!(addr, from);
            got.push(out[..len].to_vec());
        }
        assert_eq!(got, vec![vec![2; 4], vec![3; 4], vec![4; 2]]);
        assert_eq!(truncated, 0);
    }

    #[test]
    fn datagrams_longer_than_the_buffer_are_counted_and_skipped() {
        let from: SocketAddr = "127.0.0.1:7".parse().unwrap();
        let mut stash = GroStash::new(64);
        stash.load(&[1; 10], 0, 4, from);
        let mut out = [0u8; 3];
        let mut truncated = 0;
        assert_eq!(stash.pop_into(&mut out, &mut truncated), Some((2, from)));
        assert_eq!(truncated, 2);
        assert_eq!(stash.remaining(), 0);
    }
}
