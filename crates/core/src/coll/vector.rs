//! Vector collectives: `allgatherv` and `alltoallv`, whose blocks differ in
//! length from member to member and sit anywhere in the caller's buffers
//! (MPI's counts and displacements, in bytes).
//!
//! Every call starts with one small allgather of what each member was
//! given (its counts, and for alltoallv its displacements), so that every
//! member sees the whole picture: the team agrees on the landing offsets
//! and the algorithm without further messages, and a call whose counts do
//! not fit together fails on every member with the same verdict instead of
//! leaving some of them waiting for data that never comes.
//!
//! Owns: checking the callers' counts and displacements, that agreement,
//! and the two ways of moving the blocks: an exchange through the scratch
//! areas (each block put straight into its destination's area at an offset
//! every member computes from the agreed counts, then copied out), or
//! single-copy reads of the lent send buffers (`direct.rs`'s exposure
//! protocol). Must not: touch a byte of a caller's buffer outside the
//! blocks the caller described, or reuse the all-dependent area outside
//! the phase rule of `coll`'s module doc.

use std::ops::Range;

use super::tuning::{pick_vector, VectorAlgo};
use super::Team;
use crate::{Error, Result};

/// The verdict of a member whose own arguments failed its local checks,
/// for the others (it reports its own error).
const ANOTHER_MEMBER: Error = Error::InvalidArgument("another team member passed invalid arguments to this collective");

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

/// Little-endian u64 words of an agreement record.
fn words(record: &[u8]) -> impl Iterator<Item = usize> + '_ {
    record.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("8-byte word")) as usize)
}

fn push_words(record: &mut Vec<u8>, values: impl IntoIterator<Item = usize>) {
    for v in values {
        record.extend_from_slice(&(v as u64).to_le_bytes());
    }
}

/// What the agreement decided, on every member alike: whether every
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
    /// same on every member; receive blocks must not overlap. Blocks of
    /// zero bytes are allowed.
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
        // The agreement: every member's verdict and a fingerprint of its
        // counts (which must be the same everywhere).
        let fingerprint = if local.is_ok() { fingerprint(counts) } else { 0 };
        let mut record = Vec::with_capacity(16);
        push_words(&mut record, [usize::from(local.is_ok()), fingerprint as usize]);
        let all = self.allgather_small(&record)?;
        let mut records = all.chunks_exact(16).map(|r| words(r).collect::<Vec<_>>());
        let all_ok = records.clone().all(|r| r[0] == 1);
        verdict(local, all_ok)?;
        if records.any(|r| r[1] != fingerprint as usize) {
            return Err(Error::InvalidArgument("allgatherv called with different counts on different ranks"));
        }
        let largest = counts.iter().copied().max().unwrap_or(0);
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
    /// `recv_counts[j]` here must equal `send_counts[me]` at rank j (checked:
    /// a mismatch anywhere fails the call on every member). Receive blocks
    /// must not overlap; blocks of zero bytes are allowed.
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
        // The agreement: every member's verdict, send counts, receive
        // counts and send displacements (the single-copy readers need them).
        let words_per = 1 + 3 * p;
        let mut record = Vec::with_capacity(8 * words_per);
        push_words(&mut record, [usize::from(local.is_ok())]);
        if local.is_ok() {
            push_words(&mut record, send_counts.iter().chain(recv_counts).chain(send_displs).copied());
        } else {
            push_words(&mut record, std::iter::repeat_n(0, 3 * p));
        }
        let all = self.allgather_small(&record)?;
        let table: Vec<usize> = words(&all).collect();
        let word = |member: usize, field: usize, j: usize| table[member * words_per + 1 + field * p + j];
        let (sent, received, displaced) = (0, 1, 2);
        let all_ok = (0..p).all(|m| table[m * words_per] == 1);
        verdict(local, all_ok)?;
        let pairs = || (0..p).flat_map(|s| (0..p).map(move |r| (s, r)));
        if pairs().any(|(s, r)| word(s, sent, r) != word(r, received, s)) {
            return Err(Error::InvalidArgument(
                "alltoallv counts differ: a member sends a block of another length than its receiver expects",
            ));
        }
        let largest = pairs().map(|(s, r)| word(s, sent, r)).max().unwrap_or(0);
        let send_block = |j: usize| send_displs[j]..send_displs[j] + send_counts[j];
        let recv_block = |j: usize| recv_displs[j]..recv_displs[j] + recv_counts[j];
        match self.vector_algo(algo, largest) {
            VectorAlgo::Direct => {
                self.begin()?;
                for k in 1..p {
                    self.expose((me + k) % p, send)?;
                }
                recv[recv_block(me)].copy_from_slice(&send[send_block(me)]);
                let mut read = Ok(());
                for k in 1..p {
                    let from = (me + p - k) % p;
                    let offset = word(from, displaced, me);
                    read = read.and(self.read_exposed(from, offset, &mut recv[recv_block(from)]));
                }
                self.finish_direct(read)
            }
            VectorAlgo::Exchange | VectorAlgo::Auto => {
                // In member r's area the blocks for r lie packed in sender
                // order; every member computes every offset the same way.
                let at = |r: usize, s: usize| (0..s).map(|s2| word(s2, sent, r)).sum::<usize>();
                let need = (0..p).map(|r| at(r, p)).max().unwrap_or(0);
                let area = self.full_area(need)?;
                self.begin()?;
                for k in 1..p {
                    let to = (me + k) % p;
                    self.put_area(&area, to, at(to, me), &send[send_block(to)], 1)?;
                }
                recv[recv_block(me)].copy_from_slice(&send[send_block(me)]);
                for k in 1..p {
                    let from = (me + p - k) % p;
                    self.wait_from(from, 1)?;
                    self.read_area(&area, at(me, from), &mut recv[recv_block(from)]);
                }
                Ok(())
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
