//! Alltoall: pairwise exchange (every block straight to its destination)
//! and Bruck (ceil(log2 N) rounds of packed blocks, for small blocks).
//!
//! Owns: the two alltoall schedules. Must not: choose between them (`tuning`
//! does), or reuse a phase of the all-dependent area before the rule in
//! `coll`'s module doc allows it.

use super::trial::Trialed;
use super::tuning::{pick_alltoall, AllgatherAlgo, AlltoallAlgo};
use super::Team;
use crate::{Error, Result};

impl Team<'_> {
    /// Collective: block j of `send` (team size equal blocks) goes to team
    /// rank j, which receives it as block `me` of its `recv`.
    pub fn alltoall(&mut self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        self.alltoall_with(self.tuning.alltoall, send, recv)
    }

    /// Alltoall by a named algorithm.
    pub fn alltoall_with(&mut self, algo: AlltoallAlgo, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let p = self.p();
        if send.len() != recv.len() || send.len() % p != 0 {
            return Err(Error::InvalidArgument("alltoall buffers must be equal, team size × block"));
        }
        let n = send.len() / p;
        if algo == AlltoallAlgo::Auto && self.trials_decide(n) {
            let fixed = pick_alltoall(n, p, self.direct_pays(n, false));
            let other = if fixed == AlltoallAlgo::Direct { pick_alltoall(n, p, false) } else { AlltoallAlgo::Direct };
            return self
                .run_trialed(Trialed::Alltoall, n, |team, c| team.alltoall_run([fixed, other][c], n, send, recv));
        }
        let chosen = if algo == AlltoallAlgo::Auto { pick_alltoall(n, p, self.direct_pays(n, false)) } else { algo };
        self.alltoall_run(chosen, n, send, recv)
    }

    /// Alltoall of `n`-byte blocks by `chosen` (not `Auto`), or by the
    /// copying algorithm it falls back to where it cannot run.
    fn alltoall_run(&mut self, chosen: AlltoallAlgo, n: usize, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let direct = self.can_read_directly();
        let algo = match chosen {
            AlltoallAlgo::Direct if !direct || p == 1 => AlltoallAlgo::Pairwise,
            a => a,
        };
        // Direct copies its own block once its buffer is exposed (`read_every_exposed`).
        if algo != AlltoallAlgo::Direct {
            recv[me * n..(me + 1) * n].copy_from_slice(&send[me * n..(me + 1) * n]);
            if p == 1 {
                return self.begin();
            }
        }
        match algo {
            AlltoallAlgo::Direct => self.alltoall_direct(n, send, recv),
            AlltoallAlgo::Pairwise | AlltoallAlgo::Auto => self.alltoall_pairwise(n, send, recv),
            AlltoallAlgo::Bruck => self.alltoall_bruck(n, send, recv),
            AlltoallAlgo::Allgather => self.alltoall_allgather(n, send, recv),
        }
    }

    /// Allgather of every member's whole send buffer, then each member
    /// keeps block `me` of each: fewer, larger messages (allgather's
    /// log2 N rounds) for blocks so small that a message's fixed cost is
    /// all that counts.
    fn alltoall_allgather(&mut self, n: usize, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let mut all = self.take_work(1, p * p * n);
        let result = self.allgather_with(AllgatherAlgo::Auto, send, &mut all[..p * p * n]);
        if result.is_ok() {
            for (from, block) in recv.chunks_exact_mut(n.max(1)).enumerate().take(p) {
                let at = from * p * n + me * n;
                block.copy_from_slice(&all[at..at + n]);
            }
        }
        self.put_work(1, all);
        result
    }

    /// Step k sends to me+k and receives from me-k; blocks land at the
    /// sender's index, so all sends go out before any wait.
    fn alltoall_pairwise(&mut self, n: usize, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let area = self.full_area(n * p)?;
        self.begin()?;
        for k in 1..p {
            let to = (me + k) % p;
            self.put_area(&area, to, me * n, &send[to * n..(to + 1) * n], 1)?;
        }
        for k in 1..p {
            let from = (me + p - k) % p;
            self.wait_from(from, 1)?;
            self.read_area(&area, from * n, &mut recv[from * n..(from + 1) * n]);
        }
        Ok(())
    }

    /// Bruck: rotate so `tmp[i]` is the block for me+i; in round k send
    /// every block whose index has bit k set to me+2^k (packed), receive
    /// the same positions from me-2^k; at the end `tmp[i]` came from me-i.
    fn alltoall_bruck(&mut self, n: usize, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let p = self.p();
        let with_bit = |d: usize| (0..p).filter(move |i| i & d != 0);
        let total: usize =
            (0..usize::BITS).map(|k| 1usize << k).take_while(|&d| d < p).map(|d| with_bit(d).count()).sum();
        let area = self.full_area(total * n)?;
        self.begin()?;
        let mut tmp = self.take_work(0, n * p);
        let mut packed = self.take_work(1, 0);
        let result = self.alltoall_bruck_rounds(&area, n, send, recv, &mut tmp[..n * p], &mut packed);
        self.put_work(0, tmp);
        self.put_work(1, packed);
        result
    }

    fn alltoall_bruck_rounds(
        &mut self,
        area: &super::Area,
        n: usize,
        send: &[u8],
        recv: &mut [u8],
        tmp: &mut [u8],
        packed: &mut Vec<u8>,
    ) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let with_bit = |d: usize| (0..p).filter(move |i| i & d != 0);
        for i in 0..p {
            let j = (me + i) % p;
            tmp[i * n..(i + 1) * n].copy_from_slice(&send[j * n..(j + 1) * n]);
        }
        let (mut d, mut round, mut offset) = (1, 1, 0);
        while d < p {
            packed.clear();
            for i in with_bit(d) {
                packed.extend_from_slice(&tmp[i * n..(i + 1) * n]);
            }
            self.put_area(area, (me + d) % p, offset, packed, round)?;
            self.wait_from((me + p - d) % p, round)?;
            self.read_area(area, offset, packed);
            for (slot, i) in with_bit(d).enumerate() {
                tmp[i * n..(i + 1) * n].copy_from_slice(&packed[slot * n..(slot + 1) * n]);
            }
            offset += packed.len();
            d <<= 1;
            round += 1;
        }
        for i in 1..p {
            let from = (me + p - i) % p;
            recv[from * n..(from + 1) * n].copy_from_slice(&tmp[i * n..(i + 1) * n]);
        }
        Ok(())
    }
}
