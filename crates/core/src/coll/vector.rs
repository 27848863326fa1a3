//! Vector collectives: `allgatherv` and `alltoallv`, whose blocks differ in
//! length from member to member and sit anywhere in the caller's buffers
//! (MPI's counts and displacements, in bytes).
//!
//! Nobody knows the others' counts beforehand, so every block travels with
//! a header, and one round moves most calls completely: every member sends
//! every other member a header in a slot of that member's scratch area
//! ([`SLOT`] bytes per writer), which also says how the block comes:
//! - **inline**: the block follows its header in the slot (blocks up to
//!   the slot's capacity, [`slot_capacity`]);
//! - **lent**: the header carries the address and length of the block in
//!   the sender's memory and the receiver copies it out in one copy (teams
//!   all on one host, blocks large enough for `direct_pays`), then says
//!   "done" (step 2); the sender returns only when every reader it lent to
//!   is done;
//! - **later**: too large for the slot and not lent (over UDP): it moves in
//!   a second round, through an area every member sizes from the headers.
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

/// Header words (after the slot's marker word).
const WORDS: usize = 10;
/// Bytes of a header in its slot: a marker word (set when a large inline
/// block has landed, before its header) and the header words; an inline
/// block follows at once.
const HEADER: usize = 8 + 8 * WORDS;
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

/// What a member's own checks decided, and the headers all members sent
/// decided together: every member reaches the same verdict (its own error
/// if it had one).
fn verdict(local: Result<()>, headers: &[[usize; WORDS]], me: usize) -> Result<()> {
    local?;
    if headers.iter().enumerate().all(|(j, h)| j == me || h[OK] == 1) {
        Ok(())
    } else {
        Err(ANOTHER_MEMBER)
    }
}

/// One member's sends of one round-1 collective, as the headers describe
/// them: per destination, its block and how it goes.
struct Plan<'b> {
    /// Per destination: the block (empty when nothing is sent) and its mode.
    blocks: Vec<(&'b [u8], usize)>,
    /// Whether any block comes later.
    later_any: bool,
}

impl Team<'_> {
    /// How this member sends a block of `len` bytes: lent where the team
    /// can read it in one copy and that pays (or `Direct` is forced),
    /// inline where it fits a slot, later otherwise.
    fn vector_mode(&self, algo: VectorAlgo, len: usize) -> usize {
        let direct = self.can_read_directly() && self.p() > 1 && len > 0;
        let lend = match algo {
            VectorAlgo::Direct => direct,
            VectorAlgo::Exchange => false,
            VectorAlgo::Auto => {
                direct && super::tuning::pick_vector(len, self.direct_pays(len, false)) == VectorAlgo::Direct
            }
        };
        if lend {
            MODE_LENT
        } else if len <= slot_capacity(self.lay.full, self.p()) {
            MODE_INLINE
        } else {
            MODE_LATER
        }
    }

    /// Round 1: sends every other member its header (built by `words`) and
    /// inline block, then waits for every other member's header and returns
    /// them (own entry zero) with the round's area.
    fn exchange_headers(
        &mut self,
        plan: &Plan<'_>,
        words: impl Fn(usize) -> [usize; WORDS],
    ) -> Result<(Area, Vec<[usize; WORDS]>)> {
        let (p, me) = (self.p(), self.me);
        let slot = slot_len(self.lay.full, p);
        let area = self.full_area(slot * p)?;
        self.begin()?;
        let mut out = [0u8; HEADER - 8 + WITH_HEADER];
        let sent = (1..p).try_for_each(|k| {
            let to = (me + k) % p;
            let (data, mode) = plan.blocks[to];
            for (i, w) in words(to).iter().enumerate() {
                out[8 * i..8 * i + 8].copy_from_slice(&(*w as u64).to_le_bytes());
            }
            let at = area.base + (me * slot) as u64;
            let inline = if mode == MODE_INLINE { data } else { &[][..] };
            let mut len = HEADER - 8;
            if inline.len() <= WITH_HEADER {
                out[len..len + inline.len()].copy_from_slice(inline);
                len += inline.len();
            } else {
                // The block, signalling the slot's marker word (nobody waits
                // on it); the header's signal below follows it, and one
                // peer's operations land in issue order, so the block is in
                // when the member's signal is.
                self.put_scratch(to, at + HEADER as u64, inline, at, self.sig(1), false)?;
            }
            self.put_scratch(to, at + 8, &out[..len], self.lay.flag(me), self.sig(1), false)
        });
        // One wake-up fence for all of them (also after a failed put).
        self.wake_members((1..p).map(|k| (me + k) % p));
        sent?;
        let mut headers = vec![[0usize; WORDS]; p];
        // Members sharing this one's CPU first: waiting for one hands it the
        // CPU to send its own headers, while those on other CPUs are
        // usually done by then (4 processes on 2 CPUs, 8 B: 7.5 -> 5.5 us).
        let mut order: Vec<usize> = (1..p).map(|k| (me + p - k) % p).collect();
        order.sort_by_key(|&j| j / self.cpu_block != me / self.cpu_block);
        for from in order {
            self.wait_from(from, 1)?;
            let at = area.base as usize + from * slot + 8;
            let _guard = self.ep.lock();
            for (i, word) in headers[from].iter_mut().enumerate() {
                *word = area.mem.load_u64(at + 8 * i) as usize;
            }
        }
        Ok((area, headers))
    }

    /// Copies `from`'s block that `header` announced into `out` (inline
    /// from its slot of `area`, or out of its lent buffer), if `fits`.
    /// A lent block is answered "done" whether or not it was read.
    fn take_block(&self, area: &Area, from: usize, header: &[usize; WORDS], fits: bool, out: &mut [u8]) -> Result<()> {
        match header[MODE] {
            MODE_INLINE if fits => {
                let slot = slot_len(self.lay.full, self.p());
                self.read_area(area, from * slot + HEADER, out);
                Ok(())
            }
            MODE_LENT => {
                let read =
                    if fits { self.read_lent(from, header[ADDR] as u64, header[LEN] as u64, 0, out) } else { Ok(()) };
                self.notify(from, 2)?;
                read
            }
            _ => Ok(()),
        }
    }

    /// Waits until every member this one lent a block to is done reading it.
    fn wait_readers(&self, plan: &Plan<'_>) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        for k in 1..p {
            let to = (me + k) % p;
            if plan.blocks[to].1 == MODE_LENT {
                self.wait_from(to, 2)?;
            }
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
        let mode = if ok { self.vector_mode(algo, send.len()) } else { 0 };
        let mine = if ok && mode != MODE_LATER { send } else { &[] };
        let plan = Plan { blocks: vec![(mine, mode); p], later_any: mode == MODE_LATER && p > 1 };
        let words = |_: usize| {
            let lent = mode == MODE_LENT;
            let (addr, len) = if lent { (send.as_ptr() as usize, send.len()) } else { (0, 0) };
            [usize::from(ok), mode, send.len(), fingerprint as usize, addr, len, usize::from(plan.later_any), 0, 0, 0]
        };
        let (area, headers) = self.exchange_headers(&plan, words)?;
        let checked = verdict(local, &headers, me).and_then(|()| {
            if headers.iter().enumerate().any(|(j, h)| j != me && h[EXPECTS] != fingerprint as usize) {
                Err(Error::InvalidArgument("allgatherv called with different counts on different ranks"))
            } else {
                Ok(())
            }
        });
        let recv_block = |j: usize| displs[j]..displs[j] + counts[j];
        let mut taken = Ok(());
        for k in 1..p {
            let from = (me + p - k) % p;
            // Lent blocks are answered even when the call failed.
            let fits = checked.is_ok();
            let out = if fits { &mut recv[recv_block(from)] } else { &mut [][..] };
            taken = taken.and(self.take_block(&area, from, &headers[from], fits, out));
        }
        if checked.is_ok() {
            recv[recv_block(me)].copy_from_slice(send);
        }
        let later = checked.is_ok()
            && headers.iter().enumerate().any(|(j, h)| if j == me { plan.later_any } else { h[LATER_ANY] == 1 });
        let waited = self.wait_readers(&plan);
        checked?;
        taken?;
        waited?;
        if later {
            // The blocks that did not fit a slot (every member knows every
            // member's mode from its header), packed in team order in every
            // member's area.
            let mode_of = |j: usize| if j == me { mode } else { headers[j][MODE] };
            let later_len = |j: usize| if mode_of(j) == MODE_LATER { counts[j] } else { 0 };
            let at: Vec<usize> = (0..p).scan(0, |sum, j| Some(std::mem::replace(sum, *sum + later_len(j)))).collect();
            let area = self.full_area((0..p).map(later_len).sum())?;
            self.begin()?;
            if mode == MODE_LATER {
                for k in 1..p {
                    self.put_area(&area, (me + k) % p, at[me], send, 1)?;
                }
            }
            for k in 1..p {
                let from = (me + p - k) % p;
                if mode_of(from) == MODE_LATER {
                    self.wait_from(from, 1)?;
                    self.read_area(&area, at[from], &mut recv[recv_block(from)]);
                }
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
        let blocks: Vec<(&[u8], usize)> = (0..p)
            .map(|j| {
                if !ok {
                    return (&[][..], 0);
                }
                let mode = self.vector_mode(algo, send_counts[j]);
                (if mode == MODE_LATER { &[][..] } else { &send[send_block(j)] }, mode)
            })
            .collect();
        let later_any = (0..p).any(|j| j != me && blocks[j].1 == MODE_LATER);
        let plan = Plan { blocks, later_any };
        // Second round: which blocks this member expects then (those its
        // senders, counting as it does, send neither inline nor lent), where
        // each lands in its area (packed in sender order), and its size.
        let expected_later: Vec<bool> =
            (0..p).map(|j| ok && j != me && self.vector_mode(algo, recv_counts[j]) == MODE_LATER).collect();
        let expects_later = |j: usize| expected_later[j];
        let later_len = |j: usize| if expects_later(j) { recv_counts[j] } else { 0 };
        let lands_at = |j: usize| (0..j).map(later_len).sum::<usize>();
        let my_area = (0..p).map(later_len).sum::<usize>();
        let words = |to: usize| {
            if !ok {
                return [0; WORDS];
            }
            let (block, mode) = plan.blocks[to];
            let (addr, len) = if mode == MODE_LENT { (block.as_ptr() as usize, block.len()) } else { (0, 0) };
            let later = usize::from(plan.later_any);
            [
                1,
                mode,
                send_counts[to],
                recv_counts[to],
                addr,
                len,
                later,
                lands_at(to),
                my_area,
                usize::from(expects_later(to)),
            ]
        };
        let (area, headers) = self.exchange_headers(&plan, words)?;
        let checked = verdict(local, &headers, me);
        let good = checked.is_ok();
        // Whether the counts of `from`'s block to this member fit, and of
        // this member's block to `j` (each direction seen by both its ends).
        let from_fits = |j: usize| good && (j == me || headers[j][SENDS] == recv_counts[j]);
        let to_fits = |j: usize| good && (j == me || headers[j][EXPECTS] == send_counts[j]);
        let mut taken = Ok(());
        for k in 1..p {
            let from = (me + p - k) % p;
            let fits = from_fits(from);
            let out = if fits { &mut recv[recv_block(from)] } else { &mut [][..] };
            taken = taken.and(self.take_block(&area, from, &headers[from], fits, out));
        }
        let own_fits = good && send_counts[me] == recv_counts[me];
        if own_fits {
            recv[recv_block(me)].copy_from_slice(&send[send_block(me)]);
        }
        let later = good && (plan.later_any || headers.iter().any(|h| h[LATER_ANY] == 1));
        let waited = self.wait_readers(&plan);
        checked?;
        taken?;
        waited?;
        if later {
            // A block moves now when its sender sends it later and its
            // receiver expects it then (both ends know both) and its counts
            // fit; the area is the largest any member needs.
            let incoming = |j: usize| headers[j][MODE] == MODE_LATER && expects_later(j) && from_fits(j);
            let outgoing = |j: usize| plan.blocks[j].1 == MODE_LATER && headers[j][EXPECTS_LATER] == 1 && to_fits(j);
            let need = (0..p).map(|j| if j == me { my_area } else { headers[j][AREA] }).max().unwrap_or(0);
            let area = self.full_area(need)?;
            self.begin()?;
            for k in 1..p {
                let to = (me + k) % p;
                if outgoing(to) {
                    self.put_area(&area, to, headers[to][LANDS_AT], &send[send_block(to)], 1)?;
                }
            }
            for k in 1..p {
                let from = (me + p - k) % p;
                if incoming(from) {
                    self.wait_from(from, 1)?;
                    self.read_area(&area, lands_at(from), &mut recv[recv_block(from)]);
                }
            }
            // A block one end sends later and the other does not expect
            // then (members that chose different algorithms) did not move.
            let agreed = |j: usize| {
                (headers[j][MODE] == MODE_LATER) == expects_later(j)
                    && (plan.blocks[j].1 == MODE_LATER) == (headers[j][EXPECTS_LATER] == 1)
            };
            if !(0..p).filter(|&j| j != me).all(agreed) {
                return Err(Error::InvalidArgument("alltoallv called with different algorithms on different ranks"));
            }
        }
        if own_fits && (0..p).all(|j| from_fits(j) && to_fits(j)) {
            Ok(())
        } else {
            Err(PAIR_MISMATCH)
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
    use super::{check_blocks, fingerprint, slot_capacity};

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

    #[test]
    fn slots_hold_a_header_and_a_block_and_stay_in_one_phase() {
        for p in 1..=64 {
            let cap = slot_capacity(1 << 20, p);
            assert!((cap + super::HEADER) * p <= 1 << 20 && (cap + super::HEADER) % 64 == 0, "p {p}");
        }
        assert!(slot_capacity(1 << 20, 2) >= 500 << 10);
    }
}
