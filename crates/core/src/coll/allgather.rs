//! Allgather: ring, recursive doubling, Bruck. Blocks land in the
//! all-dependent area at their final offsets and are copied out from there.
//!
//! Owns: the three allgather schedules over the team's scratch area. Must not:
//! choose among them (`tuning` does) or reuse the all-dependent area outside
//! the phase rule of `coll`'s module doc.

use super::trial::Trialed;
use super::tuning::{pick_allgather, AllgatherAlgo};
use super::Team;
use crate::{Error, Result};

impl Team<'_> {
    /// Collective: every member contributes `send` (same length everywhere);
    /// `recv` (team size × that length) receives all of them in team order.
    pub fn allgather(&mut self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        self.allgather_with(self.tuning.allgather, send, recv)
    }

    /// Allgather by a named algorithm.
    pub fn allgather_with(&mut self, algo: AllgatherAlgo, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let (p, n) = (self.p(), send.len());
        if recv.len() != n * p {
            return Err(Error::InvalidArgument("allgather receive buffer must be team size × send length"));
        }
        if algo == AllgatherAlgo::Auto && self.trials_decide(n) {
            let fixed = pick_allgather(n, p, self.direct_pays(n, false));
            let other =
                if fixed == AllgatherAlgo::Direct { pick_allgather(n, p, false) } else { AllgatherAlgo::Direct };
            return self
                .run_trialed(Trialed::Allgather, n, |team, c| team.allgather_run([fixed, other][c], send, recv));
        }
        let chosen = if algo == AllgatherAlgo::Auto { pick_allgather(n, p, self.direct_pays(n, false)) } else { algo };
        self.allgather_run(chosen, send, recv)
    }

    /// Allgather by `chosen` (not `Auto`), or by the copying algorithm it
    /// falls back to where it cannot run.
    fn allgather_run(&mut self, chosen: AllgatherAlgo, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let (p, me, n) = (self.p(), self.me, send.len());
        let direct = self.can_read_directly();
        let algo = match chosen {
            AllgatherAlgo::RecursiveDoubling if !p.is_power_of_two() => AllgatherAlgo::Bruck,
            AllgatherAlgo::Direct if !direct || p == 1 => AllgatherAlgo::Ring,
            a => a,
        };
        // Direct copies its own block once its buffer is exposed (`read_every_exposed`).
        if algo != AllgatherAlgo::Direct {
            recv[me * n..(me + 1) * n].copy_from_slice(send);
            if p == 1 {
                return self.begin();
            }
        }
        match algo {
            AllgatherAlgo::Direct => self.allgather_direct(send, recv),
            AllgatherAlgo::Ring | AllgatherAlgo::Auto => {
                let area = self.full_area(n * p)?;
                self.begin()?;
                self.ring_blocks(&area, recv, &|j| j * n..(j + 1) * n, 1, false)
            }
            AllgatherAlgo::RecursiveDoubling => self.allgather_rd(n, recv),
            AllgatherAlgo::Bruck => self.allgather_bruck(send, recv),
        }
    }

    /// Power-of-two teams: in round k, exchange the 2^k blocks gathered so
    /// far with rank `me ^ 2^k`; they are contiguous in team order.
    fn allgather_rd(&mut self, n: usize, recv: &mut [u8]) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let area = self.full_area(n * p)?;
        self.begin()?;
        let mut dist = 1;
        let mut round = 1;
        while dist < p {
            let partner = me ^ dist;
            let mine = (me / dist) * dist;
            let theirs = (partner / dist) * dist;
            self.put_area(&area, partner, mine * n, &recv[mine * n..(mine + dist) * n], round)?;
            self.wait_from(partner, round)?;
            self.read_area(&area, theirs * n, &mut recv[theirs * n..(theirs + dist) * n]);
            dist <<= 1;
            round += 1;
        }
        Ok(())
    }

    /// Bruck: blocks kept rotated (`tmp[i]` is rank me+i's block); in round
    /// k send `tmp[0..cnt]` to me-2^k, receive `tmp[2^k..2^k+cnt]` from me+2^k.
    fn allgather_bruck(&mut self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let (p, n) = (self.p(), send.len());
        let area = self.full_area(n * p)?;
        self.begin()?;
        let mut tmp = self.take_work(0, n * p);
        let result = self.bruck_rounds(&area, send, recv, &mut tmp[..n * p]);
        self.put_work(0, tmp);
        result
    }

    fn bruck_rounds(&mut self, area: &super::Area, send: &[u8], recv: &mut [u8], tmp: &mut [u8]) -> Result<()> {
        let (p, me, n) = (self.p(), self.me, send.len());
        tmp[..n].copy_from_slice(send);
        let mut dist = 1;
        let mut round = 1;
        while dist < p {
            let cnt = dist.min(p - dist);
            let to = (me + p - dist) % p;
            let from = (me + dist) % p;
            self.put_area(area, to, dist * n, &tmp[..cnt * n], round)?;
            self.wait_from(from, round)?;
            self.read_area(area, dist * n, &mut tmp[dist * n..(dist + cnt) * n]);
            dist <<= 1;
            round += 1;
        }
        for i in 1..p {
            let owner = (me + i) % p;
            recv[owner * n..(owner + 1) * n].copy_from_slice(&tmp[i * n..(i + 1) * n]);
        }
        Ok(())
    }
}
