//! Gather and scatter: one block per member, straight between the root and
//! each member (per-writer slots with credits when a block fits a slot, the
//! large area otherwise).
//!
//! Owns: gather and scatter. Must not: wait on anything but the root's and the
//! members' own signal words, or write a slot before its credit came back.

use super::Team;
use crate::{Error, Result};

impl Team<'_> {
    /// Collective: `recv` at team rank `root` (team size × `send.len()`)
    /// receives every member's `send` in team order; `recv` is ignored
    /// elsewhere (pass an empty slice).
    pub fn gather(&mut self, root: u32, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let (p, me, n, root) = (self.p(), self.me, send.len(), root as usize);
        if root >= p {
            return Err(Error::InvalidArgument("gather root outside the team"));
        }
        if me == root {
            if recv.len() != n * p {
                return Err(Error::InvalidArgument("gather receive buffer must be team size × send length"));
            }
            recv[me * n..(me + 1) * n].copy_from_slice(send);
        }
        if p == 1 {
            return self.begin();
        }
        if n > self.lay.slot {
            let area = self.large_area(n * p)?;
            self.begin()?;
            if me != root {
                return self.put_area(&area, root, me * n, send, 1);
            }
            for k in 1..p {
                let from = (root + k) % p;
                self.wait_from(from, 1)?;
                self.read_area(&area, from * n, &mut recv[from * n..(from + 1) * n]);
            }
            return Ok(());
        }
        self.begin()?;
        let phase = self.rooted_phase();
        if me != root {
            return self.put_slot(phase, root, send, true);
        }
        for k in 1..p {
            let from = (root + k) % p;
            let slot = self.wait_slot(phase, from)?;
            self.read_area(&slot, 0, &mut recv[from * n..(from + 1) * n]);
            self.return_credit(phase, from)?;
        }
        Ok(())
    }

    /// Collective: block j of `send` at team rank `root` (team size equal
    /// blocks; ignored elsewhere) lands in `recv` of team rank j.
    pub fn scatter(&mut self, root: u32, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let (p, me, n, root) = (self.p(), self.me, recv.len(), root as usize);
        if root >= p {
            return Err(Error::InvalidArgument("scatter root outside the team"));
        }
        if me == root {
            if send.len() != n * p {
                return Err(Error::InvalidArgument("scatter send buffer must be team size × receive length"));
            }
            recv.copy_from_slice(&send[me * n..(me + 1) * n]);
        }
        if p == 1 {
            return self.begin();
        }
        if n > self.lay.slot {
            let area = self.large_area(n)?;
            self.begin()?;
            if me == root {
                for k in 1..p {
                    let to = (root + k) % p;
                    self.put_area(&area, to, 0, &send[to * n..(to + 1) * n], 1)?;
                }
                return Ok(());
            }
            self.wait_from(root, 1)?;
            self.read_area(&area, 0, recv);
            return Ok(());
        }
        self.begin()?;
        let phase = self.rooted_phase();
        if me == root {
            let sent = (1..p).try_for_each(|k| {
                let to = (root + k) % p;
                self.put_slot(phase, to, &send[to * n..(to + 1) * n], false)
            });
            self.wake_members((1..p).map(|k| (root + k) % p));
            return sent;
        }
        let slot = self.wait_slot(phase, root)?;
        self.read_area(&slot, 0, recv);
        self.return_credit(phase, root)
    }
}
