//! Allreduce (recursive doubling, reduce-scatter + allgather, ring) and
//! reduce to a root (binomial tree, ring reduce-scatter + gather).
//!
//! Every rank ends with bit-identical results: each block is combined in one
//! fixed order at one rank (or symmetrically, `a op b` on one side and
//! `b op a` on the other, which IEEE makes equal) and then copied.
//!
//! Owns: the reduction schedules and the rule that keeps results bit-identical.
//! Must not: choose among schedules (`tuning` does) or combine elements itself
//! (`kernel` does).

use super::kernel::{from_bytes, reduce_into, to_bytes};
use super::tree::{binomial_children, binomial_parent, block, pow2_floor};
use super::tuning::{pick_allreduce, pick_reduce, AllreduceAlgo, ReduceAlgo};
use super::{check_reduce, Area, DType, Element, ReduceOp, Team};
use crate::{Error, Result};

/// What a reduction combines.
#[derive(Clone, Copy)]
struct Red {
    dtype: DType,
    op: ReduceOp,
    es: usize,
    count: usize,
}

impl Red {
    /// Byte range of element blocks `a..b` out of `parts`.
    fn bytes(&self, parts: usize, a: usize, b: usize) -> std::ops::Range<usize> {
        if a >= b {
            let at = block(self.count, parts, a.min(parts - 1)).start * self.es;
            return at..at;
        }
        block(self.count, parts, a).start * self.es..block(self.count, parts, b - 1).end * self.es
    }
}

impl Team<'_> {
    /// Collective: `recv` on every member = element-wise `op` over all
    /// members' `send` (native-endian elements of `dtype`).
    pub fn allreduce(&mut self, dtype: DType, op: ReduceOp, send: &[u8], recv: &mut [u8]) -> Result<()> {
        self.allreduce_with(self.tuning.allreduce, dtype, op, send, recv)
    }

    /// Typed allreduce.
    pub fn allreduce_typed<T: Element>(&mut self, op: ReduceOp, send: &[T], recv: &mut [T]) -> Result<()> {
        if send.len() != recv.len() {
            return Err(Error::InvalidArgument("reduction send and receive buffers differ in length"));
        }
        let mut out = vec![0u8; send.len() * T::DTYPE.size()];
        self.allreduce(T::DTYPE, op, &to_bytes(send), &mut out)?;
        from_bytes(&out, recv);
        Ok(())
    }

    /// Allreduce by a named algorithm.
    pub fn allreduce_with(
        &mut self,
        algo: AllreduceAlgo,
        dtype: DType,
        op: ReduceOp,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        let count = check_reduce(dtype, op, send, recv.len())?;
        recv.copy_from_slice(send);
        let p = self.p();
        if p == 1 {
            return self.begin();
        }
        let red = Red { dtype, op, es: dtype.size(), count };
        match if algo == AllreduceAlgo::Auto { pick_allreduce(send.len(), p) } else { algo } {
            AllreduceAlgo::RecursiveDoubling | AllreduceAlgo::Auto => self.allreduce_rd(red, recv),
            AllreduceAlgo::ReduceScatterAllgather => self.allreduce_rsag(red, recv),
            AllreduceAlgo::Ring => {
                let maxb = count.div_ceil(p) * red.es;
                let area = self.full_area((p - 1) * maxb + recv.len())?;
                self.begin()?;
                let owned = self.ring_reduce_scatter(&area, red, maxb, recv)?;
                let ag = (p - 1) * maxb;
                let (me, right, left) = (self.me, (self.me + 1) % p, (self.me + p - 1) % p);
                debug_assert_eq!(owned, (me + 1) % p);
                for s in 0..p - 1 {
                    let send_j = (me + 1 + p - s) % p;
                    let step = (p + s) as u32;
                    let r = red.bytes(p, send_j, send_j + 1);
                    self.put_area(&area, right, ag + r.start, &recv[r], step)?;
                    let recv_j = (me + p - s) % p;
                    self.wait_from(left, step)?;
                    let r = red.bytes(p, recv_j, recv_j + 1);
                    self.read_area(&area, ag + r.start, &mut recv[r]);
                }
                Ok(())
            }
        }
    }

    /// Ring reduce-scatter on `acc` (p element blocks; RS slots of `maxb`
    /// bytes at the start of `area`, steps 1..p). Returns the block this
    /// rank now holds fully reduced: `(me + 1) % p`.
    fn ring_reduce_scatter(&mut self, area: &Area, red: Red, maxb: usize, acc: &mut [u8]) -> Result<usize> {
        let (p, me) = (self.p(), self.me);
        let (right, left) = ((me + 1) % p, (me + p - 1) % p);
        for s in 0..p - 1 {
            let send_j = (me + p - s) % p;
            let r = red.bytes(p, send_j, send_j + 1);
            self.put_area(area, right, s * maxb, &acc[r], s as u32 + 1)?;
            let recv_j = (me + 2 * p - s - 1) % p;
            self.wait_from(left, s as u32 + 1)?;
            let r = red.bytes(p, recv_j, recv_j + 1);
            let len = r.len();
            self.with_area(area, s * maxb, len, |src| reduce_into(red.dtype, red.op, &mut acc[r], src));
        }
        Ok((me + 1) % p)
    }

    /// The non-power-of-two fold: of the first 2·rem ranks, even ones hand
    /// their vector to the next odd one (step 1) and sit out. Returns this
    /// rank's core rank, if it has one.
    fn fold_in(&self, area: &Area, red: Red, acc: &mut [u8], rem: usize) -> Result<Option<usize>> {
        let me = self.me;
        if me >= 2 * rem {
            return Ok(Some(me - rem));
        }
        if me % 2 == 0 {
            self.put_area(area, me + 1, 0, acc, 1)?;
            return Ok(None);
        }
        self.wait_from(me - 1, 1)?;
        self.with_area(area, 0, acc.len(), |src| reduce_into(red.dtype, red.op, acc, src));
        Ok(Some(me / 2))
    }

    /// The fold's end: odd ranks give the result back (`slot` of the area).
    fn fold_out(&self, area: &Area, acc: &mut [u8], rem: usize, slot: usize, step: u32) -> Result<()> {
        let me = self.me;
        if me >= 2 * rem {
            return Ok(());
        }
        let at = slot * acc.len();
        if me % 2 == 1 {
            self.put_area(area, me - 1, at, acc, step)
        } else {
            self.wait_from(me + 1, step)?;
            self.read_area(area, at, acc);
            Ok(())
        }
    }

    fn allreduce_rd(&mut self, red: Red, acc: &mut [u8]) -> Result<()> {
        let p = self.p();
        let q = pow2_floor(p);
        let rem = p - q;
        let logq = q.trailing_zeros() as usize;
        let n = acc.len();
        let area = self.full_area((logq + 2) * n)?;
        self.begin()?;
        let real = |c: usize| if c < rem { 2 * c + 1 } else { c + rem };
        if let Some(c) = self.fold_in(&area, red, acc, rem)? {
            for k in 0..logq {
                let partner = real(c ^ (1 << k));
                let step = 2 + k as u32;
                self.put_area(&area, partner, (1 + k) * n, acc, step)?;
                self.wait_from(partner, step)?;
                self.with_area(&area, (1 + k) * n, n, |src| reduce_into(red.dtype, red.op, acc, src));
            }
        }
        self.fold_out(&area, acc, rem, logq + 1, 2 + logq as u32)
    }

    /// Rabenseifner: reduce-scatter by recursive halving, allgather by
    /// recursive doubling, on the power-of-two core.
    fn allreduce_rsag(&mut self, red: Red, acc: &mut [u8]) -> Result<()> {
        let p = self.p();
        let q = pow2_floor(p);
        let rem = p - q;
        let logq = q.trailing_zeros() as usize;
        let n = acc.len();
        let area = self.full_area((logq + 3) * n)?;
        self.begin()?;
        let real = |c: usize| if c < rem { 2 * c + 1 } else { c + rem };
        if let Some(c) = self.fold_in(&area, red, acc, rem)? {
            let (mut lo, mut hi) = (0, q);
            for k in 0..logq {
                let dist = q >> (k + 1);
                let partner = real(c ^ dist);
                let half = (hi - lo) / 2;
                let (keep, give) =
                    if c & dist == 0 { ((lo, lo + half), (lo + half, hi)) } else { ((lo + half, hi), (lo, lo + half)) };
                let step = 2 + k as u32;
                let g = red.bytes(q, give.0, give.1);
                self.put_area(&area, partner, (1 + k) * n + g.start, &acc[g], step)?;
                self.wait_from(partner, step)?;
                let kb = red.bytes(q, keep.0, keep.1);
                let len = kb.len();
                self.with_area(&area, (1 + k) * n + kb.start, len, |src| {
                    reduce_into(red.dtype, red.op, &mut acc[kb], src)
                });
                (lo, hi) = keep;
            }
            let ag = (1 + logq) * n;
            for (i, k) in (0..logq).rev().enumerate() {
                let dist = q >> (k + 1);
                let partner = real(c ^ dist);
                let step = 2 + (logq + i) as u32;
                let mine = red.bytes(q, lo, hi);
                self.put_area(&area, partner, ag + mine.start, &acc[mine], step)?;
                let size = hi - lo;
                let other = if c & dist == 0 { (hi, hi + size) } else { (lo - size, lo) };
                self.wait_from(partner, step)?;
                let ob = red.bytes(q, other.0, other.1);
                self.read_area(&area, ag + ob.start, &mut acc[ob]);
                (lo, hi) = (lo.min(other.0), hi.max(other.1));
            }
        }
        self.fold_out(&area, acc, rem, logq + 2, 2 + 2 * logq as u32)
    }

    /// Collective: `recv` at team rank `root` = element-wise `op` over all
    /// members' `send`; other members' `recv` is left untouched.
    pub fn reduce(&mut self, root: u32, dtype: DType, op: ReduceOp, send: &[u8], recv: &mut [u8]) -> Result<()> {
        self.reduce_with(self.tuning.reduce, root, dtype, op, send, recv)
    }

    /// Reduce by a named algorithm.
    #[allow(clippy::too_many_arguments)] // algorithm, root, type, op and the two buffers
    pub fn reduce_with(
        &mut self,
        algo: ReduceAlgo,
        root: u32,
        dtype: DType,
        op: ReduceOp,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        let count = check_reduce(dtype, op, send, recv.len())?;
        let (p, me, root) = (self.p(), self.me, root as usize);
        if root >= p {
            return Err(Error::InvalidArgument("reduce root outside the team"));
        }
        let red = Red { dtype, op, es: dtype.size(), count };
        if me == root {
            recv.copy_from_slice(send);
            return self.reduce_acc(algo, root, red, recv);
        }
        // Non-roots accumulate in a team scratch buffer (no allocation per call).
        let mut acc = self.take_work(0, send.len());
        acc[..send.len()].copy_from_slice(send);
        let result = self.reduce_acc(algo, root, red, &mut acc[..send.len()]);
        self.put_work(0, acc);
        result
    }

    /// Reduce with this rank's contribution in `acc` (at the root: `recv`).
    fn reduce_acc(&mut self, algo: ReduceAlgo, root: usize, red: Red, acc: &mut [u8]) -> Result<()> {
        let (p, me, count) = (self.p(), self.me, red.count);
        if p == 1 {
            return self.begin();
        }
        match if algo == ReduceAlgo::Auto { pick_reduce(acc.len(), self.lay.slot) } else { algo } {
            ReduceAlgo::Binomial | ReduceAlgo::Auto => self.reduce_binomial(red, root, acc),
            ReduceAlgo::ReduceScatterGather => {
                let maxb = count.div_ceil(p) * red.es;
                let gather = (p - 1) * maxb;
                let area = self.full_area(gather + acc.len())?;
                self.begin()?;
                let owned = self.ring_reduce_scatter(&area, red, maxb, acc)?;
                let step = p as u32;
                if me != root {
                    let r = red.bytes(p, owned, owned + 1);
                    return self.put_area(&area, root, gather + r.start, &acc[r], step);
                }
                for k in 1..p {
                    let from = (root + k) % p;
                    self.wait_from(from, step)?;
                    let j = (from + 1) % p;
                    let r = red.bytes(p, j, j + 1);
                    self.read_area(&area, gather + r.start, &mut acc[r]);
                }
                Ok(())
            }
        }
    }

    /// Children's partial results are combined into this rank's, then sent
    /// up. Small data: per-writer slots with credits; large: the large area,
    /// one slice per child position.
    fn reduce_binomial(&mut self, red: Red, root: usize, acc: &mut [u8]) -> Result<()> {
        let (p, me, n) = (self.p(), self.me, acc.len());
        let parent = binomial_parent(me, root, p);
        let children = binomial_children(me, root, p);
        if n > self.lay.slot {
            let depth = (p.next_power_of_two().trailing_zeros() as usize).max(1);
            let area = self.large_area(depth * n)?;
            self.begin()?;
            for (i, &c) in children.iter().enumerate() {
                self.wait_from(c, 1)?;
                self.with_area(&area, i * n, n, |src| reduce_into(red.dtype, red.op, acc, src));
            }
            if let Some(parent) = parent {
                let index = binomial_children(parent, root, p).iter().position(|&c| c == me).expect("a child");
                self.put_area(&area, parent, index * n, acc, 1)?;
            }
            return Ok(());
        }
        self.begin()?;
        let phase = self.rooted_phase();
        for &c in &children {
            let slot = self.wait_slot(phase, c)?;
            self.with_area(&slot, 0, n, |src| reduce_into(red.dtype, red.op, acc, src));
            self.return_credit(phase, c)?;
        }
        if let Some(parent) = parent {
            self.put_slot(phase, parent, acc, true)?;
        }
        Ok(())
    }
}
