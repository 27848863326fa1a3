//! Alltoall: pairwise exchange (every block straight to its destination)
//! and Bruck (ceil(log2 N) rounds of packed blocks, for small blocks).
//!
//! Owns: the two alltoall schedules. Must not: choose between them (`tuning`
//! does), or reuse a phase of the all-dependent area before the rule in
//! `coll`'s module doc allows it.

use super::tuning::{pick_alltoall, AlltoallAlgo};
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
        let (p, me) = (self.p(), self.me);
        if send.len() != recv.len() || send.len() % p != 0 {
            return Err(Error::InvalidArgument("alltoall buffers must be equal, team size × block"));
        }
        let n = send.len() / p;
        recv[me * n..(me + 1) * n].copy_from_slice(&send[me * n..(me + 1) * n]);
        if p == 1 {
            return self.begin();
        }
        match if algo == AlltoallAlgo::Auto { pick_alltoall(n, p) } else { algo } {
            AlltoallAlgo::Pairwise | AlltoallAlgo::Auto => self.alltoall_pairwise(n, send, recv),
            AlltoallAlgo::Bruck => self.alltoall_bruck(n, send, recv),
        }
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
        let (p, me) = (self.p(), self.me);
        let rounds: Vec<usize> = (0..).map(|k| 1usize << k).take_while(|&d| d < p).collect();
        let counts: Vec<usize> = rounds.iter().map(|&d| (0..p).filter(|i| i & d != 0).count()).collect();
        let offsets: Vec<usize> = counts.iter().scan(0, |acc, &c| Some(std::mem::replace(acc, *acc + c * n))).collect();
        let area = self.full_area(counts.iter().sum::<usize>() * n)?;
        self.begin()?;
        let mut tmp = vec![0u8; n * p];
        for i in 0..p {
            let j = (me + i) % p;
            tmp[i * n..(i + 1) * n].copy_from_slice(&send[j * n..(j + 1) * n]);
        }
        let mut packed = Vec::new();
        for (k, &d) in rounds.iter().enumerate() {
            packed.clear();
            for i in (0..p).filter(|i| i & d != 0) {
                packed.extend_from_slice(&tmp[i * n..(i + 1) * n]);
            }
            let round = k as u32 + 1;
            self.put_area(&area, (me + d) % p, offsets[k], &packed, round)?;
            self.wait_from((me + p - d) % p, round)?;
            self.read_area(&area, offsets[k], &mut packed);
            for (slot, i) in (0..p).filter(|i| i & d != 0).enumerate() {
                tmp[i * n..(i + 1) * n].copy_from_slice(&packed[slot * n..(slot + 1) * n]);
            }
        }
        for i in 1..p {
            let from = (me + p - i) % p;
            recv[from * n..(from + 1) * n].copy_from_slice(&tmp[i * n..(i + 1) * n]);
        }
        Ok(())
    }
}
