//! Vector collectives: `allgatherv` and `alltoallv`, whose blocks differ in
//! length from member to member and sit anywhere in the caller's buffers
//! (MPI's counts and displacements, in bytes).
//!
//! Nobody knows the others' counts beforehand, so every block travels with
//! a header, and one round moves most calls completely: every member sends
//! every other member a header in a slot of that member's scratch area
//! (`slot_len`: a team-size share of one all-dependent phase), which also
//! says how the block comes:
//! - **inline**: the block follows its header in the slot (blocks up to
//!   the slot's capacity, [`slot_capacity`]);
//! - **lent**: the header carries the address and length of the block in
//!   the sender's memory and the receiver copies it out in one copy (teams
//!   all on one host, blocks large enough for `direct_pays`), then says
//!   "done" (step 2); the sender returns only when every reader it lent to
//!   is done;
//! - **later**: too large for the slot and not lent (over UDP, or between
//!   processes on more members than CPUs): it moves in a second round,
//!   through an area every member sizes from the headers; that round hears
//!   from every member (an empty put where no block comes), so it is
//!   all-dependent like the first.
//!
//! The sender picks per block, from its own count; the receiver follows the
//! header, so no member needs the others' counts first. The headers also
//! carry the checks, decided before anything is copied out:
//! - allgatherv: a fingerprint of the sender's counts; counts that differ
//!   between members fail the call on every member;
//! - alltoallv: what s sends r and what s expects from r, so both ends of a
//!   direction see whether its counts fit; one that does not moves nothing
//!   and both of its ends get `InvalidArgument` (the other pairs complete);
//! - a member whose own arguments fail its checks says so: it reports its
//!   error, every other member "another team member passed invalid
//!   arguments", and no receive buffer is written.
//!
//! Owns: checking the callers' counts and displacements, the headers, and
//! the three ways a block moves. Must not: touch a byte of a caller's
//! buffer outside the blocks the caller described, copy a block its
//! receiver did not say fits, return while a reader may still copy from a
//! lent block, or reuse the all-dependent area outside the phase rule of
//! `coll`'s module doc.

use std::ops::Range;

use super::tuning::VectorAlgo;
use super::{Area, Team};
use crate::{Error, Result};

/// Header fields (the `usize` array a header is built from and read into).
const WORDS: usize = 10;
/// Words a header takes on the wire: the four small fields (`OK`, `MODE`,
/// `LATER_ANY`, `EXPECTS_LATER`) share one, so a header and an 8-byte block
/// fill one cache line.
const PACKED: usize = WORDS - 3;
/// Bytes of a header at the start of its slot; an inline block follows it.
const HEADER: usize = 8 * PACKED;
/// Inline blocks up to this size go out with their header in one put.
const WITH_HEADER: usize = 512;

/// The verdict of a member whose own arguments failed its local checks,
/// for the others (it reports its own error).
const ANOTHER_MEMBER: Error = Error::InvalidArgument("another team member passed invalid arguments to this collective");
/// Both ends' verdict on an alltoallv direction whose counts differ.
const PAIR_MISMATCH: Error = Error::InvalidArgument(
    "alltoallv counts differ: a member sends a block of another length than its receiver expects",
);

// Header words.
/// Whether the sender's arguments passed its checks (1) or not (0).
const OK: usize = 0;
/// How the block comes: one of the `MODE_*`.
const MODE: usize = 1;
/// Bytes the sender sends this member.
const SENDS: usize = 2;
/// alltoallv: bytes the sender expects from this member. allgatherv: the
/// fingerprint of the sender's counts.
const EXPECTS: usize = 3;
/// A lent block's address and length in the sender's memory.
const ADDR: usize = 4;
const LEN: usize = 5;
/// Whether the sender has any block that comes later (1), to anyone: then
/// every member runs the second round.
const LATER_ANY: usize = 6;
/// alltoallv, for the second round: where the receiver's block to the
/// sender lands in the sender's area, the size of that area, and whether
/// the sender expects that block in the second round at all (1).
const LANDS_AT: usize = 7;
const AREA: usize = 8;
const EXPECTS_LATER: usize = 9;

const MODE_INLINE: usize = 1;
const MODE_LENT: usize = 2;
const MODE_LATER: usize = 3;

/// A slot's bytes for `p` members: every writer's slot in one all-dependent
/// phase, line-aligned.
fn slot_len(phase: usize, p: usize) -> usize {
    phase / p.max(1) / 64 * 64
}

/// The largest block that travels inline in a slot of a team of `p`.
pub(crate) fn slot_capacity(phase: usize, p: usize) -> usize {
    slot_len(phase, p) - HEADER
}

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
    if written && overlap(counts, displs) {
        return Err(Error::InvalidArgument("receive blocks overlap"));
    }
    Ok(())
}

/// Whether two non-empty blocks (each inside its buffer, so no sum
/// overflows) overlap: pairwise for small teams (no allocation on every
/// call), by sorting beyond.
fn overlap(counts: &[usize], displs: &[usize]) -> bool {
    let range = |j: usize| displs[j]..displs[j] + counts[j];
    if counts.len() <= 16 {
        let p = counts.len();
        return (0..p).any(|a| {
            counts[a] > 0
                && (a + 1..p).any(|b| counts[b] > 0 && range(a).start < range(b).end && range(b).start < range(a).end)
        });
    }
    let mut blocks: Vec<(usize, usize)> =
        (0..counts.len()).filter(|&j| counts[j] > 0).map(|j| (displs[j], counts[j])).collect();
    blocks.sort_unstable();
    blocks.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0)
}

/// A header's fields as the words that go out (see [`PACKED`]).
fn pack(fields: &[usize; WORDS]) -> [u64; PACKED] {
    let flags = fields[OK] | fields[MODE] << 1 | fields[LATER_ANY] << 3 | fields[EXPECTS_LATER] << 4;
    [flags, fields[SENDS], fields[EXPECTS], fields[ADDR], fields[LEN], fields[LANDS_AT], fields[AREA]].map(|w| w as u64)
}

/// The fields of a header that arrived as `words`.
fn unpack(words: [u64; PACKED], fields: &mut [usize]) {
    let flags = words[0] as usize;
    fields[OK] = flags & 1;
    fields[MODE] = flags >> 1 & 3;
    fields[LATER_ANY] = flags >> 3 & 1;
    fields[EXPECTS_LATER] = flags >> 4 & 1;
    for (field, word) in [SENDS, EXPECTS, ADDR, LEN, LANDS_AT, AREA].into_iter().zip(&words[1..]) {
        fields[field] = *word as usize;
    }
}

/// What a member's own checks decided, and the headers all members sent
/// decided together: every member reaches the same verdict (its own error
/// if it had one).
fn verdict(local: Result<()>, headers: &Headers, p: usize, me: usize) -> Result<()> {
    local?;
    if (0..p).all(|j| j == me || headers.word(j, OK) == 1) {
        Ok(())
    } else {
        Err(ANOTHER_MEMBER)
    }
}

/// How this member sends a block, by its length (the sender decides; the
/// receiver follows the header): lent where the team can read it in one
/// copy and that pays (or `Direct` is forced), inline where it fits a slot,
/// later otherwise.
#[derive(Clone, Copy)]
struct Modes {
    algo: VectorAlgo,
    /// Single-copy reads possible between every two members.
    direct: bool,
    single_copy: Option<bool>,
    cpu_block: usize,
    /// The largest inline block.
    capacity: usize,
}

impl Modes {
    fn of(self, len: usize) -> usize {
        let direct = self.direct && len > 0;
        let lend = match self.algo {
            VectorAlgo::Direct => direct,
            VectorAlgo::Exchange => false,
            VectorAlgo::Auto => {
                let pays = super::tuning::single_copy_pays(self.single_copy, self.cpu_block, len, false);
                direct && super::tuning::pick_vector(len, pays) == VectorAlgo::Direct
            }
        };
        if lend {
            MODE_LENT
        } else if len <= self.capacity {
            MODE_INLINE
        } else {
            MODE_LATER
        }
    }
}

/// The headers this member received in round 1 (its own entry zero).
struct Headers(Vec<usize>);

impl Headers {
    fn word(&self, from: usize, i: usize) -> usize {
        self.0[from * WORDS + i]
    }
}

impl Team<'_> {
    /// This team's rule for choosing a block's mode under `algo`.
    fn modes(&self, algo: VectorAlgo) -> Modes {
        Modes {
            algo,
            direct: self.can_read_directly() && self.p() > 1,
            single_copy: self.single_copy,
            cpu_block: self.cpu_block,
            capacity: slot_capacity(self.lay.full, self.p()),
        }
    }

    /// Round 1: sends every other member j its header (`words(j)`) and its
    /// block (`block(j)`: the bytes and their mode), then waits for every
    /// other member's header and returns them with the round's area.
    fn exchange_headers<'b>(
        &mut self,
        block: impl Fn(usize) -> (&'b [u8], usize),
        words: impl Fn(usize) -> [usize; WORDS],
    ) -> Result<(Area, Headers)> {
        let (p, me) = (self.p(), self.me);
        let slot = slot_len(self.lay.full, p);
        let area = self.full_area(slot * p)?;
        self.begin()?;
        let mut out = [0u8; HEADER + WITH_HEADER];
        let sent = (1..p).try_for_each(|k| {
            let to = (me + k) % p;
            let (data, mode) = block(to);
            for (i, w) in pack(&words(to)).iter().enumerate() {
                out[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
            }
            let at = area.base + (me * slot) as u64;
            let inline = if mode == MODE_INLINE { data } else { &[][..] };
            let mut len = HEADER;
            if inline.len() <= WITH_HEADER {
                out[len..len + inline.len()].copy_from_slice(inline);
                len += inline.len();
            } else {
                // The block first, signalling step 0 of this collective
                // (which nobody waits for): the header's step 1 follows, and
                // one peer's operations land in issue order, so the block is
                // in when the header is.
                self.put_scratch(to, at + HEADER as u64, inline, self.lay.flag(me), self.sig(0), false)?;
            }
            self.put_scratch(to, at, &out[..len], self.lay.flag(me), self.sig(1), false)
        });
        // One wake-up fence for all of them (also after a failed put).
        self.wake_members((1..p).map(|k| (me + k) % p));
        sent?;
        let mut headers = Headers(std::mem::take(&mut self.vector_words));
        headers.0.clear();
        headers.0.resize(p * WORDS, 0);
        // Members sharing this one's CPU first: waiting for one hands it the
        // CPU to send its own headers, while those on other CPUs are
        // usually done by then (4 processes on 2 CPUs, 8 B: 7.5 -> 5.5 us).
        let same_cpu = |j: usize| j / self.cpu_block == me / self.cpu_block;
        for same in [true, false] {
            for from in (1..p).map(|k| (me + p - k) % p).filter(|&j| same_cpu(j) == same) {
                let at = area.base as usize + from * slot;
                if let Err(e) = self.wait_from(from, 1) {
                    self.vector_words = headers.0;
                    return Err(e);
                }
                let _guard = self.ep.lock();
                let words = std::array::from_fn(|i| area.mem.load_u64(at + 8 * i));
                unpack(words, &mut headers.0[from * WORDS..(from + 1) * WORDS]);
            }
        }
        Ok((area, headers))
    }

    /// Copies `from`'s block that `header` announced into `out` (inline
    /// from its slot of `area`, or out of its lent buffer), if `fits`.
    /// A lent block is answered "done" whether or not it was read.
    fn take_block(&self, area: &Area, from: usize, headers: &Headers, fits: bool, out: &mut [u8]) -> Result<()> {
        let header = |i: usize| headers.word(from, i);
        match header(MODE) {
            MODE_INLINE if fits => {
                let slot = slot_len(self.lay.full, self.p());
                self.read_area(area, from * slot + HEADER, out);
                Ok(())
            }
            MODE_LENT => {
                let read =
                    if fits { self.read_lent(from, header(ADDR) as u64, header(LEN) as u64, 0, out) } else { Ok(()) };
                self.notify(from, 2)?;
                read
            }
            _ => Ok(()),
        }
    }

    /// Waits until every member this one lent a block to is done reading it,
    /// and keeps the headers' buffer for the next call.
    fn wait_readers(&mut self, headers: Headers, lent_to: impl Fn(usize) -> bool) -> Result<()> {
        self.vector_words = headers.0;
        let (p, me) = (self.p(), self.me);
        for to in (1..p).map(|k| (me + k) % p).filter(|&j| lent_to(j)) {
            self.wait_from(to, 2)?;
        }
        Ok(())
    }

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
        let ok = local.is_ok();
        let fingerprint = if ok { fingerprint(counts) } else { 0 };
        let modes = self.modes(algo);
        let mode = if ok { modes.of(send.len()) } else { 0 };
        let later_mine = mode == MODE_LATER && p > 1;
        let words = |_: usize| {
            let (addr, len) = if mode == MODE_LENT { (send.as_ptr() as usize, send.len()) } else { (0, 0) };
            [usize::from(ok), mode, send.len(), fingerprint as usize, addr, len, usize::from(later_mine), 0, 0, 0]
        };
        let (area, headers) = self.exchange_headers(|_| (send, mode), words)?;
        let checked = verdict(local, &headers, p, me).and_then(|()| {
            if (0..p).any(|j| j != me && headers.word(j, EXPECTS) != fingerprint as usize) {
                Err(Error::InvalidArgument("allgatherv called with different counts on different ranks"))
            } else {
                Ok(())
            }
        });
        let good = checked.is_ok();
        let recv_block = |j: usize| displs[j]..displs[j] + counts[j];
        let mut taken = Ok(());
        for k in 1..p {
            let from = (me + p - k) % p;
            // Lent blocks are answered even when the call failed.
            let out = if good { &mut recv[recv_block(from)] } else { &mut [][..] };
            taken = taken.and(self.take_block(&area, from, &headers, good, out));
        }
        if good {
            recv[recv_block(me)].copy_from_slice(send);
        }
        let later = good && (later_mine || (0..p).any(|j| j != me && headers.word(j, LATER_ANY) == 1));
        // The blocks that did not fit a slot, packed in team order in every
        // member's area (every member knows every member's mode): each
        // member's offset there, and the area's size.
        let later_at: Vec<usize> = if later {
            let mode_of = |j: usize| if j == me { mode } else { headers.word(j, MODE) };
            let later_len = |j: usize| if mode_of(j) == MODE_LATER { counts[j] } else { 0 };
            (0..=p).map(|j| (0..j).map(later_len).sum()).collect()
        } else {
            Vec::new()
        };
        let waited = self.wait_readers(headers, |_| mode == MODE_LENT);
        checked?;
        taken?;
        waited?;
        if !later {
            return Ok(());
        }
        let area = self.full_area(later_at[p])?;
        self.begin()?;
        // Every member hears from every member in this round too (an empty
        // put where no block comes): the round must be all-dependent, or a
        // member could leave it, start the next collective but one and
        // write into the first round's area while another still copies out
        // of it (`coll`'s phase rule).
        let mine = if later_mine { send } else { &[][..] };
        for k in 1..p {
            self.put_area(&area, (me + k) % p, later_at[me], mine, 1)?;
        }
        for k in 1..p {
            let from = (me + p - k) % p;
            self.wait_from(from, 1)?;
            if later_at[from + 1] > later_at[from] {
                self.read_area(&area, later_at[from], &mut recv[recv_block(from)]);
            }
        }
        Ok(())
    }

    /// Collective: `send_counts[j]` bytes at `send_displs[j]` of `send` go
    /// to team rank j, which receives them at its `recv_displs[me]`; so
    /// `recv_counts[j]` here must equal `send_counts[me]` at rank j. A
    /// direction whose counts differ moves nothing and both of its ends get
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
        let modes = self.modes(algo);
        let mode_to = |j: usize| if ok { modes.of(send_counts[j]) } else { 0 };
        let block = |j: usize| {
            let mode = mode_to(j);
            (if ok && mode != MODE_LATER { &send[send_block(j)] } else { &[][..] }, mode)
        };
        let later_mine = (0..p).any(|j| j != me && mode_to(j) == MODE_LATER);
        // Second round: which blocks this member expects then (those its
        // senders, deciding as it does, send neither inline nor lent), where
        // each lands in its area (packed in sender order), and its size.
        let expects_later = |j: usize| ok && j != me && modes.of(recv_counts[j]) == MODE_LATER;
        let later_len = |j: usize| if expects_later(j) { recv_counts[j] } else { 0 };
        let lands_at = |j: usize| (0..j).map(later_len).sum::<usize>();
        let my_area = lands_at(p);
        let words = |to: usize| {
            if !ok {
                return [0; WORDS];
            }
            let (data, mode) = block(to);
            let (addr, len) = if mode == MODE_LENT { (data.as_ptr() as usize, data.len()) } else { (0, 0) };
            let (sends, expects, later) = (send_counts[to], recv_counts[to], usize::from(later_mine));
            [1, mode, sends, expects, addr, len, later, lands_at(to), my_area, usize::from(expects_later(to))]
        };
        let (area, headers) = self.exchange_headers(block, words)?;
        let checked = verdict(local, &headers, p, me);
        let good = checked.is_ok();
        let header = |j: usize, i: usize| headers.word(j, i);
        // Whether the counts of `j`'s block to this member fit, and of this
        // member's block to `j` (each direction seen by both its ends).
        let from_fits = |j: usize| good && (j == me || header(j, SENDS) == recv_counts[j]);
        let to_fits = |j: usize| good && (j == me || header(j, EXPECTS) == send_counts[j]);
        let mut taken = Ok(());
        for k in 1..p {
            let from = (me + p - k) % p;
            let fits = from_fits(from);
            let out = if fits { &mut recv[recv_block(from)] } else { &mut [][..] };
            taken = taken.and(self.take_block(&area, from, &headers, fits, out));
        }
        let own_fits = good && send_counts[me] == recv_counts[me];
        if own_fits {
            recv[recv_block(me)].copy_from_slice(&send[send_block(me)]);
        }
        // A block one end sends later and the other does not expect then
        // (members that chose different algorithms) cannot move.
        let agreed = |j: usize| {
            j == me
                || ((header(j, MODE) == MODE_LATER) == expects_later(j)
                    && (mode_to(j) == MODE_LATER) == (header(j, EXPECTS_LATER) == 1))
        };
        let all_fit = own_fits && (0..p).all(|j| from_fits(j) && to_fits(j) && agreed(j));
        let later = good && (later_mine || (0..p).any(|j| j != me && header(j, LATER_ANY) == 1));
        // The second round's plan, read off the headers before they go back:
        // per peer, where this member's block lands at it (or none), whether
        // one comes from it, and the area every member sizes alike.
        let mut second: Vec<(Option<usize>, bool)> = Vec::new();
        let mut need = 0;
        if later {
            for j in 0..p {
                let outgoing = j != me && mode_to(j) == MODE_LATER && header(j, EXPECTS_LATER) == 1 && to_fits(j);
                let incoming = j != me && header(j, MODE) == MODE_LATER && expects_later(j) && from_fits(j);
                second.push((outgoing.then(|| header(j, LANDS_AT)), incoming));
                need = need.max(if j == me { my_area } else { header(j, AREA) });
            }
        }
        let waited = self.wait_readers(headers, |j| mode_to(j) == MODE_LENT);
        checked?;
        taken?;
        waited?;
        if later {
            let area = self.full_area(need)?;
            self.begin()?;
            // Every pair signals (an empty put where no block comes): the
            // round must be all-dependent (see allgatherv's second round).
            for k in 1..p {
                let to = (me + k) % p;
                match second[to] {
                    (Some(at), _) => self.put_area(&area, to, at, &send[send_block(to)], 1)?,
                    (None, _) => self.put_area(&area, to, 0, &[], 1)?,
                }
            }
            for k in 1..p {
                let from = (me + p - k) % p;
                self.wait_from(from, 1)?;
                if second[from].1 {
                    self.read_area(&area, lands_at(from), &mut recv[recv_block(from)]);
                }
            }
        }
        if all_fit {
            Ok(())
        } else {
            Err(PAIR_MISMATCH)
        }
    }
}

/// A hash of the counts, a word at a time: equal on members given equal
/// counts, and different, with overwhelming odds, on members given others.
fn fingerprint(counts: &[usize]) -> u64 {
    counts.iter().fold(0x9e37_79b9_7f4a_7c15u64 ^ counts.len() as u64, |hash, &c| {
        (hash.rotate_left(23) ^ c as u64).wrapping_mul(0x0100_0000_01b3_0001)
    })
}

#[cfg(test)]
mod tests {
    use super::{check_blocks, fingerprint, pack, slot_capacity, unpack, WORDS};

    #[test]
    fn blocks_must_fit_and_received_ones_must_not_overlap() {
        assert!(check_blocks(2, &[4, 4], &[0, 4], 8, true).is_ok());
        assert!(check_blocks(2, &[4, 4], &[0, 5], 8, true).is_err(), "past the end");
        assert!(check_blocks(2, &[4, 4], &[0, 2], 8, true).is_err(), "overlap");
        assert!(check_blocks(2, &[4, 4], &[0, 2], 8, false).is_ok(), "sends may overlap");
        assert!(check_blocks(2, &[0, 4], &[3, 2], 8, true).is_ok(), "an empty block overlaps nothing");
        assert!(check_blocks(2, &[4], &[0], 8, true).is_err(), "one entry per member");
        assert!(check_blocks(1, &[1], &[usize::MAX], 8, true).is_err(), "no overflow");
        // Beyond 16 members the check sorts: the same verdicts.
        let counts = vec![4; 20];
        let packed: Vec<usize> = (0..20).map(|j| 4 * j).collect();
        let mut shifted = packed.clone();
        shifted[19] = 73;
        assert!(check_blocks(20, &counts, &packed, 80, true).is_ok());
        assert!(check_blocks(20, &counts, &shifted, 80, true).is_err(), "overlap, sorted");
        assert!(check_blocks(20, &counts, &shifted, 80, false).is_ok());
    }

    #[test]
    fn headers_unpack_to_what_was_packed() {
        let fields: [usize; WORDS] = [1, 3, usize::MAX, 7, 0x7fff_0000_1000, 1 << 40, 1, 123, 456, 1];
        let mut back = [0usize; WORDS];
        unpack(pack(&fields), &mut back);
        assert_eq!(back, fields);
        let fields: [usize; WORDS] = [0, 2, 0, 0, 0, 0, 0, 0, 0, 0];
        unpack(pack(&fields), &mut back);
        assert_eq!(back, fields);
    }

    #[test]
    fn fingerprints_tell_counts_apart() {
        assert_eq!(fingerprint(&[1, 2, 3]), fingerprint(&[1, 2, 3]));
        assert_ne!(fingerprint(&[1, 2, 3]), fingerprint(&[1, 3, 2]));
        assert_ne!(fingerprint(&[256]), fingerprint(&[1]));
        assert_ne!(fingerprint(&[0, 0]), fingerprint(&[0]));
        assert_ne!(fingerprint(&[1, 0]), fingerprint(&[0, 1]));
    }

    #[test]
    fn slots_hold_a_header_and_a_block_and_stay_in_one_phase() {
        for p in 1..=64 {
            let cap = slot_capacity(1 << 20, p);
            assert!((cap + super::HEADER) * p <= 1 << 20 && (cap + super::HEADER) % 64 == 0, "p {p}");
        }
        assert!(slot_capacity(1 << 20, 2) >= 500 << 10);
    }
}
