//! Vector collectives: `allgatherv` and `alltoallv`, whose blocks differ in
//! length from member to member and sit anywhere in the caller's buffers
//! (MPI's counts and displacements, in bytes).
//!
//! Every call starts with one round of fixed-size headers (an allgather for
//! allgatherv, an alltoall for alltoallv, [`HEADER`] bytes per member or per
//! pair), which carries what the members must agree on and, when every
//! block is at most [`INLINE`] bytes, the blocks themselves: small calls
//! are that one round. Larger ones then move their blocks, with offsets and
//! an algorithm every member derives from the headers alone, so no member
//! waits for data that never comes:
//! - allgatherv: each header has a fingerprint of the sender's counts
//!   (which must be the same everywhere); any difference fails the call on
//!   every member.
//! - alltoallv: the header from s to r has what s sends r, what s expects
//!   from r, where in s's scratch area r's block must land, and the largest
//!   block and landing area s has: so both ends of a pair see whether their
//!   counts fit (a pair that does not moves nothing and both get
//!   `InvalidArgument`; other pairs complete), and everyone sees the largest
//!   block and area of the call.
//! - A member whose own arguments fail its checks says so in its headers:
//!   it reports its error, every other member "another team member passed
//!   invalid arguments", and nothing moves.
//!
//! Owns: checking the callers' counts and displacements, the headers, and
//! the two ways of moving the blocks that do not fit a header: an exchange
//! through the scratch areas (each block put straight into its
//! destination's area), or single-copy reads of the lent send buffers
//! (`direct.rs`'s exposure protocol). Must not: touch a byte of a caller's
//! buffer outside the blocks the caller described, put a block where its
//! receiver did not say it fits, or reuse the all-dependent area outside
//! the phase rule of `coll`'s module doc.

use std::ops::Range;

use super::tuning::{pick_vector, VectorAlgo};
use super::Team;
use crate::{Error, Result};

/// Bytes of a header: two cache lines.
const HEADER: usize = 128;
/// Header words in front of the inline data (allgatherv uses two of them).
const WORDS: usize = 6;
/// The largest block carried inside its header.
pub(crate) const INLINE: usize = HEADER - 8 * WORDS;

/// The verdict of a member whose own arguments failed its local checks,
/// for the others (it reports its own error).
const ANOTHER_MEMBER: Error = Error::InvalidArgument("another team member passed invalid arguments to this collective");
/// Both ends' verdict on an alltoallv pair whose counts differ.
const PAIR_MISMATCH: Error = Error::InvalidArgument(
    "alltoallv counts differ: a member sends a block of another length than its receiver expects",
);

/// Work buffers of the vector collectives (`Team::take_work`): the headers
/// this member sends, and those it receives.
const WORK_OUT: usize = 2;
const WORK_IN: usize = 3;

/// Bytes `displ .. displ + count` of a buffer of `len` bytes, if they lie
/// inside it.
fn block(displ: usize, count: usize, len: usize) -> Option<Range<usize>> {
    let end = displ.checked_add(count)?;
    (end <= len).then_some(displ..end)
}

/// Checks one side of a call: a count and a displacement per member, each
/// block inside a buffer of `len` bytes, and (`written`: the blocks are
/// received into) no two non-empty blocks overlapping.
fn check_blocks(p: usize, counts: &[usize], displs: &[usize], len: usize, written: bool) -> Result<()> {
    if counts.len() != p || displs.len() != p {
        return Err(Error::InvalidArgument("counts and displacements need one entry per team member"));
    }
    if counts.iter().zip(displs).any(|(&c, &d)| block(d, c, len).is_none()) {
        return Err(Error::InvalidArgument("a block (displacement + count) reaches past its buffer"));
    }
    if written {
        let mut blocks: Vec<(usize, usize)> =
            displs.iter().copied().zip(counts.iter().copied()).filter(|b| b.1 > 0).collect();
        blocks.sort_unstable();
        if blocks.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
            return Err(Error::InvalidArgument("receive blocks overlap"));
        }
    }
    Ok(())
}

/// One header: `WORDS` little-endian words, then inline data.
struct Header<'a>(&'a [u8]);

impl Header<'_> {
    fn word(&self, i: usize) -> usize {
        u64::from_le_bytes(self.0[8 * i..8 * i + 8].try_into().expect("8-byte word")) as usize
    }
    fn inline(&self, len: usize) -> &[u8] {
        &self.0[8 * WORDS..8 * WORDS + len]
    }
}

/// Fills header `out` with `words` (the rest zero) and `inline` data.
fn write_header(out: &mut [u8], words: &[usize], inline: &[u8]) {
    out.fill(0);
    for (i, &w) in words.iter().enumerate() {
        out[8 * i..8 * i + 8].copy_from_slice(&(w as u64).to_le_bytes());
    }
    out[8 * WORDS..8 * WORDS + inline.len()].copy_from_slice(inline);
}

/// Word 0 of every header: whether its sender's arguments passed its checks.
const OK: usize = 0;
// alltoallv header words (from sender s to receiver r), after OK:
/// Bytes s sends r.
const SENDS: usize = 1;
/// Bytes s expects from r.
const EXPECTS: usize = 2;
/// Where in s's scratch area r's block lands (the exchange).
const LANDS_AT: usize = 3;
/// The largest block s sends anyone.
const LARGEST: usize = 4;
/// The landing area s needs (its receive counts summed).
const AREA: usize = 5;
// allgatherv header word, after OK:
/// Fingerprint of the sender's counts.
const FINGERPRINT: usize = 1;

/// What the headers decided, the same on every member: whether every
/// member's arguments passed its local checks.
fn verdict(local: Result<()>, all_ok: bool) -> Result<()> {
    match local {
        Err(e) => Err(e),
        Ok(()) if all_ok => Ok(()),
        Ok(()) => Err(ANOTHER_MEMBER),
    }
}

impl Team<'_> {
    /// Collective: team rank j contributes `counts[j]` bytes (`send`, whose
    /// length must be `counts[me]`), and every member receives rank j's
    /// block at `displs[j]` of `recv`. `counts` and `displs` must be the
    /// same on every member (counts that differ fail the call on every
    /// member); receive blocks must not overlap. Blocks of zero bytes are
    /// allowed.
    pub fn allgatherv(&mut self, send: &[u8], recv: &mut [u8], counts: &[usize], displs: &[usize]) -> Result<()> {
        self.allgatherv_with(self.tuning.vector, send, recv, counts, displs)
    }

    /// [`allgatherv`](Self::allgatherv) by a named algorithm.
    pub fn allgatherv_with(
        &mut self,
        algo: VectorAlgo,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let local = check_blocks(p, counts, displs, recv.len(), true).and_then(|()| {
            if send.len() == counts[me] {
                Ok(())
            } else {
                Err(Error::InvalidArgument("allgatherv send length must be this member's count"))
            }
        });
        let fingerprint = if local.is_ok() { fingerprint(counts) } else { 0 };
        let largest = if local.is_ok() { counts.iter().copied().max().unwrap_or(0) } else { 0 };
        let mut mine = self.take_work(WORK_OUT, HEADER);
        let inline = if largest <= INLINE { send } else { &[] };
        write_header(&mut mine[..HEADER], &[usize::from(local.is_ok()), fingerprint as usize], inline);
        let mut all = self.take_work(WORK_IN, HEADER * p);
        let gathered = self.allgather_with(super::AllgatherAlgo::Auto, &mine[..HEADER], &mut all[..HEADER * p]);
        let result = gathered.and_then(|()| {
            let headers = || all[..HEADER * p].chunks_exact(HEADER).map(Header);
            verdict(local, headers().all(|h| h.word(OK) == 1))?;
            if headers().any(|h| h.word(FINGERPRINT) != fingerprint as usize) {
                return Err(Error::InvalidArgument("allgatherv called with different counts on different ranks"));
            }
            if largest > INLINE {
                return Ok(false);
            }
            for (j, h) in headers().enumerate() {
                recv[displs[j]..displs[j] + counts[j]].copy_from_slice(h.inline(counts[j]));
            }
            Ok(true)
        });
        self.put_work(WORK_OUT, mine);
        self.put_work(WORK_IN, all);
        if result? {
            return Ok(());
        }
        let recv_block = |j: usize| displs[j]..displs[j] + counts[j];
        match self.vector_algo(algo, largest) {
            VectorAlgo::Direct => {
                self.begin()?;
                for k in 1..p {
                    self.expose((me + k) % p, send)?;
                }
                recv[recv_block(me)].copy_from_slice(send);
                let mut read = Ok(());
                for k in 1..p {
                    let from = (me + p - k) % p;
                    read = read.and(self.read_exposed(from, 0, &mut recv[recv_block(from)]));
                }
                self.finish_direct(read)
            }
            VectorAlgo::Exchange | VectorAlgo::Auto => {
                // Packed in team order in every member's area.
                let at: Vec<usize> = counts.iter().scan(0, |sum, &c| Some(std::mem::replace(sum, *sum + c))).collect();
                let area = self.full_area(counts.iter().sum())?;
                self.begin()?;
                for k in 1..p {
                    self.put_area(&area, (me + k) % p, at[me], send, 1)?;
                }
                recv[recv_block(me)].copy_from_slice(send);
                for k in 1..p {
                    let from = (me + p - k) % p;
                    self.wait_from(from, 1)?;
                    self.read_area(&area, at[from], &mut recv[recv_block(from)]);
                }
                Ok(())
            }
        }
    }

    /// Collective: `send_counts[j]` bytes at `send_displs[j]` of `send` go
    /// to team rank j, which receives them at its `recv_displs[me]`; so
    /// `recv_counts[j]` here must equal `send_counts[me]` at rank j. A pair
    /// whose counts differ moves nothing and both of its members get
    /// `InvalidArgument` (the other pairs complete). Receive blocks must not
    /// overlap; blocks of zero bytes are allowed.
    pub fn alltoallv(
        &mut self,
        send: &[u8],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()> {
        self.alltoallv_with(self.tuning.vector, send, send_counts, send_displs, recv, recv_counts, recv_displs)
    }

    /// [`alltoallv`](Self::alltoallv) by a named algorithm.
    #[allow(clippy::too_many_arguments)] // MPI's signature: a buffer, counts and displacements per side
    pub fn alltoallv_with(
        &mut self,
        algo: VectorAlgo,
        send: &[u8],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let local = check_blocks(p, send_counts, send_displs, send.len(), false)
            .and_then(|()| check_blocks(p, recv_counts, recv_displs, recv.len(), true));
        let ok = local.is_ok();
        let send_block = |j: usize| send_displs[j]..send_displs[j] + send_counts[j];
        let recv_block = |j: usize| recv_displs[j]..recv_displs[j] + recv_counts[j];
        // Where each sender's block lands in this member's area: packed in
        // sender order by what this member expects.
        let lands_at = |j: usize| recv_counts[..j].iter().sum::<usize>();
        let (largest, area) =
            if ok { (send_counts.iter().copied().max().unwrap_or(0), recv_counts.iter().sum()) } else { (0, 0) };
        let mut out = self.take_work(WORK_OUT, HEADER * p);
        for j in 0..p {
            let header = &mut out[j * HEADER..(j + 1) * HEADER];
            if ok {
                let inline = if send_counts[j] <= INLINE { &send[send_block(j)] } else { &[] };
                let words = [1, send_counts[j], recv_counts[j], lands_at(j), largest, area];
                write_header(header, &words, inline);
            } else {
                write_header(header, &[0; WORDS], &[]);
            }
        }
        let mut inbox = self.take_work(WORK_IN, HEADER * p);
        let exchanged = self.alltoall_with(super::AlltoallAlgo::Auto, &out[..HEADER * p], &mut inbox[..HEADER * p]);
        // What the headers say, the same on every member: whether everyone's
        // arguments passed, and the call's largest block and landing area.
        // Then, for each peer j: whether the counts of j's block to this
        // member fit, and of this member's block to j (each seen by both
        // its ends), and where this member's block lands in j's area.
        let decided = exchanged.and_then(|()| {
            let header = |j: usize| Header(&inbox[j * HEADER..(j + 1) * HEADER]);
            verdict(local, (0..p).all(|j| header(j).word(OK) == 1))?;
            let from_fits: Vec<bool> = (0..p).map(|j| header(j).word(SENDS) == recv_counts[j]).collect();
            let to_fits: Vec<bool> = (0..p).map(|j| header(j).word(EXPECTS) == send_counts[j]).collect();
            let at_peer: Vec<usize> = (0..p).map(|j| header(j).word(LANDS_AT)).collect();
            let largest = (0..p).map(|j| header(j).word(LARGEST)).max().unwrap_or(0);
            let area = (0..p).map(|j| header(j).word(AREA)).max().unwrap_or(0);
            if largest <= INLINE {
                for j in (0..p).filter(|&j| from_fits[j]) {
                    recv[recv_block(j)].copy_from_slice(header(j).inline(recv_counts[j]));
                }
            }
            Ok((from_fits, to_fits, at_peer, largest, area))
        });
        self.put_work(WORK_OUT, out);
        self.put_work(WORK_IN, inbox);
        let (from_fits, to_fits, at_peer, largest, area) = decided?;
        let all_fit = || if from_fits.iter().chain(&to_fits).all(|&f| f) { Ok(()) } else { Err(PAIR_MISMATCH) };
        if largest <= INLINE {
            return all_fit();
        }
        // Blocks of pairs whose counts differ do not move: an empty block
        // keeps the steps of every pair the same.
        let outgoing = |j: usize| if to_fits[j] { &send[send_block(j)] } else { &[][..] };
        match self.vector_algo(algo, largest) {
            VectorAlgo::Direct => {
                self.begin()?;
                // Each reader is lent its own block only.
                for k in 1..p {
                    let to = (me + k) % p;
                    self.expose(to, outgoing(to))?;
                }
                if from_fits[me] && to_fits[me] {
                    recv[recv_block(me)].copy_from_slice(outgoing(me));
                }
                let mut read = Ok(());
                for k in 1..p {
                    let from = (me + p - k) % p;
                    if from_fits[from] {
                        read = read.and(self.read_exposed(from, 0, &mut recv[recv_block(from)]));
                    }
                }
                self.finish_direct(read)?;
                all_fit()
            }
            VectorAlgo::Exchange | VectorAlgo::Auto => {
                let area = self.full_area(area)?;
                self.begin()?;
                for k in 1..p {
                    let to = (me + k) % p;
                    self.put_area(&area, to, at_peer[to], outgoing(to), 1)?;
                }
                if from_fits[me] && to_fits[me] {
                    recv[recv_block(me)].copy_from_slice(outgoing(me));
                }
                for k in 1..p {
                    let from = (me + p - k) % p;
                    self.wait_from(from, 1)?;
                    if from_fits[from] {
                        self.read_area(&area, lands_at(from), &mut recv[recv_block(from)]);
                    }
                }
                all_fit()
            }
        }
    }

    /// The algorithm a vector collective runs, the same on every member
    /// (`largest_block` is agreed): a forced single-copy one falls back to
    /// the exchange where the team cannot run it.
    fn vector_algo(&self, algo: VectorAlgo, largest_block: usize) -> VectorAlgo {
        let direct = self.can_read_directly() && self.p() > 1;
        match algo {
            VectorAlgo::Auto => pick_vector(largest_block, direct && self.direct_pays(largest_block, false)),
            VectorAlgo::Direct if !direct => VectorAlgo::Exchange,
            a => a,
        }
    }
}

/// FNV-1a over the counts: equal on members given equal counts.
fn fingerprint(counts: &[usize]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in counts.iter().flat_map(|&c| (c as u64).to_le_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::{check_blocks, fingerprint};

    #[test]
    fn blocks_must_fit_and_received_ones_must_not_overlap() {
        assert!(check_blocks(2, &[4, 4], &[0, 4], 8, true).is_ok());
        assert!(check_blocks(2, &[4, 4], &[0, 5], 8, true).is_err(), "past the end");
        assert!(check_blocks(2, &[4, 4], &[0, 2], 8, true).is_err(), "overlap");
        assert!(check_blocks(2, &[4, 4], &[0, 2], 8, false).is_ok(), "sends may overlap");
        assert!(check_blocks(2, &[0, 4], &[3, 2], 8, true).is_ok(), "an empty block overlaps nothing");
        assert!(check_blocks(2, &[4], &[0], 8, true).is_err(), "one entry per member");
        assert!(check_blocks(1, &[1], &[usize::MAX], 8, true).is_err(), "no overflow");
    }

    #[test]
    fn fingerprints_tell_counts_apart() {
        assert_eq!(fingerprint(&[1, 2, 3]), fingerprint(&[1, 2, 3]));
        assert_ne!(fingerprint(&[1, 2, 3]), fingerprint(&[1, 3, 2]));
        assert_ne!(fingerprint(&[256]), fingerprint(&[1]));
    }
}
