//! Single-copy collectives for teams whose members all share this host:
//! instead of copying data into a peer's scratch region (which the peer
//! then copies out again), a member *exposes* its user buffer (its
//! address goes to the readers through their scratch region) and each
//! reader copies straight out of it with `process_vm_readv`, then says
//! it is done; the owner returns only when every reader is done, so its
//! buffer never changes under a reader. One copy per byte instead of two,
//! and the source's cache lines are only read, not taken over (MPI's
//! shared-memory transports do the same for large messages, with CMA).
//!
//! Whether every member may read every other member's memory (same user,
//! no ptrace restriction, `MW_SHM_COPY` not `ring`) is probed once, when
//! the team forms; teams that cannot run these algorithms fall back to
//! the copying ones, so forcing one is always safe.
//!
//! Owns: the exposure protocol (`Layout::exposed` words: address and
//! length of the lent buffer; steps: 1 = exposed, 2 = done reading).
//! Must not: expose a buffer beyond the call that lent it, or read past
//! the exposed length.

use super::tree::{binomial_children, binomial_parent, flat};
use super::Team;
use crate::{Error, Result};

/// Teams up to this size broadcast flat: every member reads the root's
/// buffer in the same round, instead of down the binomial tree (two rounds
/// of full copies at 3 or 4 members). The readers only read the root's
/// lines, so they share them rather than contend.
const FLAT_BCAST_UP_TO: usize = 4;

impl Team<'_> {
    /// The probe, collective over a team whose members all share memory:
    /// can this rank read every member's scratch region (at `bases`)?
    /// Agreed by an allgather of the answers.
    pub(super) fn probe_single_copy(&mut self, bases: &[u64]) -> Result<bool> {
        let cma = self.ep.shared.shm.as_ref().is_some_and(|shm| shm.cma);
        let mut word = [0u8; 8];
        let readable = cma
            && (0..self.p()).filter(|&j| j != self.me).all(|j| {
                self.pid(j).is_some_and(|pid| mw_transport::shm::vm_read(pid, bases[j], &mut word[..]).is_ok())
            });
        let all = self.allgather_small(&[u8::from(readable)])?;
        Ok(all.iter().all(|&ok| ok == 1))
    }

    /// Whether the single-copy algorithms run on this team.
    pub(super) fn can_read_directly(&self) -> bool {
        self.single_copy == Some(true)
    }

    /// The process id of team rank `j` (same-host members only).
    fn pid(&self, j: usize) -> Option<u32> {
        Some(self.ep.shared.shm.as_ref()?.link(self.ranks[j])?.pid)
    }

    /// Tells team rank `to` where `buf` is and how long (step 1 of this
    /// collective).
    fn expose(&self, to: usize, buf: &[u8]) -> Result<()> {
        let mut record = [0u8; 16];
        record[..8].copy_from_slice(&(buf.as_ptr() as u64).to_le_bytes());
        record[8..].copy_from_slice(&(buf.len() as u64).to_le_bytes());
        self.put_to(to, self.keys[to], self.lay.exposed(self.me), &record, 1)
    }

    /// Waits for team rank `from` to expose its buffer, then copies
    /// `out.len()` bytes from `offset` of it into `out`.
    fn read_exposed(&self, from: usize, offset: usize, out: &mut [u8]) -> Result<()> {
        self.wait_from(from, 1)?;
        let base = self.mem.load_u64(self.lay.exposed(from) as usize);
        let len = self.mem.load_u64(self.lay.exposed(from) as usize + 8);
        // The owner's buffer is all this call may read: a peer that passed
        // a shorter one called with a different size.
        if (offset + out.len()) as u64 > len {
            return Err(Error::InvalidArgument("collective called with different sizes on different ranks"));
        }
        if out.is_empty() {
            return Ok(());
        }
        let pid = self.pid(from).ok_or(Error::PeerUnreachable { rank: self.ranks[from] })?;
        mw_transport::shm::vm_read(pid, base + offset as u64, out)
            .map_err(|e| Error::Io(format!("single-copy read from rank {}: {e}", self.ranks[from])))
    }

    /// Broadcast down a tree (flat for small teams, see
    /// [`FLAT_BCAST_UP_TO`], binomial beyond): each member reads its
    /// parent's buffer, then exposes its own to its children.
    pub(super) fn bcast_direct(&mut self, root: usize, buf: &mut [u8]) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        self.begin()?;
        let (parent, children) = if p <= FLAT_BCAST_UP_TO {
            flat(me, root, p)
        } else {
            (binomial_parent(me, root, p), binomial_children(me, root, p))
        };
        let mut read = Ok(());
        if let Some(parent) = parent {
            read = self.read_exposed(parent, 0, buf);
            // Done either way: the parent must not wait forever.
            self.notify(parent, 2)?;
        }
        // The subtree is served even after a failed read (it then checks
        // sizes itself and reports), so no member waits forever.
        for &c in &children {
            self.expose(c, buf)?;
        }
        for &c in &children {
            self.wait_from(c, 2)?;
        }
        read
    }

    /// Allgather: every member exposes `send` and reads every other
    /// member's out of theirs (a buffer nobody writes during the call, so
    /// its cache lines are shared, not moved, as the readers copy them).
    pub(super) fn allgather_direct(&mut self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        self.read_every_exposed(send, recv, send.len(), 0)
    }

    /// Alltoall: every member exposes `send` and reads block `me` of every
    /// other member's.
    pub(super) fn alltoall_direct(&mut self, n: usize, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let mine = self.me * n;
        self.read_every_exposed(send, recv, n, mine)
    }

    /// Exposes `send` to every other member and reads `n` bytes at `offset`
    /// of each one's exposure into that member's block of `recv`.
    fn read_every_exposed(&mut self, send: &[u8], recv: &mut [u8], n: usize, offset: usize) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        self.begin()?;
        for k in 1..p {
            self.expose((me + k) % p, send)?;
        }
        let mut failed = Ok(());
        for k in 1..p {
            let from = (me + p - k) % p;
            let read = self.read_exposed(from, offset, &mut recv[from * n..(from + 1) * n]);
            failed = failed.and(read);
        }
        self.finish_direct(failed)
    }

    /// Tells every member this rank is done reading, then waits until every
    /// member is done reading this rank's buffer.
    fn finish_direct(&mut self, read: Result<()>) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        self.notify_each((1..p).map(|k| (me + k) % p), 2)?;
        for k in 1..p {
            self.wait_from((me + p - k) % p, 2)?;
        }
        read
    }
}
