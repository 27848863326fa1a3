//! Broadcast: binomial tree (small data, per-writer slots with credits) and
//! scatter + ring allgather (large data, all-dependent area).
//!
//! Owns: the two broadcast schedules, and the ring allgather of blocks
//! (`ring_blocks`) that the large one shares with allgather. Must not: choose
//! between them (`tuning` does) or write a member's slot before its credit came
//! back.

use super::tree::{binomial_children, binomial_parent};
use super::tuning::{pick_bcast, BcastAlgo};
use super::{Area, Team};
use crate::{Error, Result};

impl Team<'_> {
    /// Collective: `buf` of team rank `root` is copied into `buf` of every
    /// member (all pass buffers of the same length).
    pub fn broadcast(&mut self, root: u32, buf: &mut [u8]) -> Result<()> {
        self.broadcast_with(self.tuning.bcast, root, buf)
    }

    /// Broadcast by a named algorithm.
    pub fn broadcast_with(&mut self, algo: BcastAlgo, root: u32, buf: &mut [u8]) -> Result<()> {
        let p = self.p();
        let root = root as usize;
        if root >= p {
            return Err(Error::InvalidArgument("broadcast root outside the team"));
        }
        if p == 1 {
            return self.begin();
        }
        let direct = self.can_read_directly();
        let algo = if algo == BcastAlgo::Auto {
            pick_bcast(buf.len(), p, self.lay.slot, self.direct_pays(buf.len(), true))
        } else {
            algo
        };
        match algo {
            BcastAlgo::Direct if direct => self.bcast_direct(root, buf),
            BcastAlgo::Binomial | BcastAlgo::Direct | BcastAlgo::Auto => self.bcast_binomial(root, buf),
            BcastAlgo::ScatterAllgather => self.bcast_scatter_allgather(root, buf),
        }
    }

    fn bcast_binomial(&mut self, root: usize, buf: &mut [u8]) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let parent = binomial_parent(me, root, p);
        let children = binomial_children(me, root, p);
        if buf.len() > self.lay.slot {
            // Too big for a slot: the large region, after the synchronizing exchange.
            let area = self.large_area(buf.len())?;
            self.begin()?;
            if let Some(parent) = parent {
                self.wait_from(parent, 1)?;
                self.read_area(&area, 0, buf);
            }
            for &c in &children {
                self.put_area(&area, c, 0, buf, 1)?;
            }
            return Ok(());
        }
        self.begin()?;
        let phase = self.rooted_phase();
        if let Some(parent) = parent {
            let slot = self.wait_slot(phase, parent)?;
            self.read_area(&slot, 0, buf);
        }
        let sent = children.iter().try_for_each(|&c| self.put_slot(phase, c, buf, false));
        self.wake_members(children.iter().copied());
        sent?;
        if let Some(parent) = parent {
            self.return_credit(phase, parent)?;
        }
        Ok(())
    }

    /// Root puts block j to rank j, then a ring allgather of the blocks.
    /// Every rank waits for blocks that passed through every other rank, so
    /// this is all-dependent and needs no credits.
    fn bcast_scatter_allgather(&mut self, root: usize, buf: &mut [u8]) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let n = buf.len();
        let b = n.div_ceil(p);
        let range = |j: usize| (j * b).min(n)..((j + 1) * b).min(n);
        let area = self.full_area(b * p)?;
        self.begin()?;
        // Scatter (step 1), straight from the root's buffer.
        if me == root {
            for k in 1..p {
                let j = (root + k) % p;
                self.put_area(&area, j, range(j).start, &buf[range(j)], 1)?;
            }
        } else {
            self.wait_from(root, 1)?;
            let mine = range(me);
            self.read_area(&area, mine.start, &mut buf[mine]);
        }
        self.ring_blocks(&area, buf, &range, 2, me == root)
    }

    /// Ring allgather of blocks `range(j)` of `buf` (block j already present
    /// at rank j; the root, if `have_all`, has every block and only
    /// forwards). Messages use steps `first..first + p - 1`.
    pub(crate) fn ring_blocks(
        &mut self,
        area: &Area,
        buf: &mut [u8],
        range: &dyn Fn(usize) -> std::ops::Range<usize>,
        first: u32,
        have_all: bool,
    ) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let right = (me + 1) % p;
        let left = (me + p - 1) % p;
        for s in 0..p - 1 {
            let send = (me + p - s) % p;
            let step = first + s as u32;
            self.put_area(area, right, range(send).start, &buf[range(send)], step)?;
            let recv = (me + p - s - 1) % p;
            self.wait_from(left, step)?;
            if !have_all {
                let r = range(recv);
                self.read_area(area, r.start, &mut buf[r]);
            }
        }
        Ok(())
    }
}
