//! Multicast (Cenju-4's one-to-many put, seed 000 §5.4): the same bytes
//! put into a region of every team member, down a binomial tree rooted at
//! the sender and pipelined in chunks, each hop a put straight from the
//! parent's region into the child's.
//!
//! As on Cenju-4, the set of destinations is registered once
//! ([`Team::multicast_group`], the analogue of registering a multicast
//! header by system call); each member may name its own region (Cenju-4
//! used address registers for per-node addresses). Every member forwards in
//! software, so `multicast` is a collective call. IP multicast with Nack
//! repair is not implemented: the tree is always used.

use super::tree::{binomial_children, binomial_parent};
use super::Team;
use crate::memory::Region;
use crate::region::{RawMem, RegionKey};
use crate::{Error, Result};

/// Pipelining unit of a multicast down the tree.
const CHUNK: usize = 64 << 10;

/// A registered set of multicast destinations: one region per member.
#[derive(Debug)]
pub struct McastGroup<'r> {
    team: RegionKey,
    keys: Vec<RegionKey>,
    /// Smallest region length over the members.
    len: usize,
    mem: RawMem,
    _region: std::marker::PhantomData<&'r Region<'r>>,
}

impl McastGroup<'_> {
    /// Bytes usable at every member.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte is usable.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<'ep> Team<'ep> {
    /// Collective: registers `region` (this member's destination; it needs
    /// write access) as this member's part of a multicast group.
    pub fn multicast_group<'r>(&mut self, region: &'r Region<'ep>) -> Result<McastGroup<'r>> {
        let writable = self
            .ep
            .lock()
            .regions
            .get(region.key())
            .is_ok_and(|entry| entry.access.contains(crate::region::Access::WRITE));
        // Agreed by everyone, so all members fail alike instead of one hanging.
        let mut rec = [0u8; 16];
        rec[..8].copy_from_slice(&region.key().0.to_le_bytes());
        let usable = if writable { region.len() as u64 } else { u64::MAX };
        rec[8..].copy_from_slice(&usable.to_le_bytes());
        let all = self.allgather_small(&rec)?;
        if all.chunks_exact(16).any(|r| r[8..] == u64::MAX.to_le_bytes()) {
            return Err(Error::NoPermission);
        }
        let mut keys = Vec::with_capacity(self.p());
        let mut len = usize::MAX;
        for r in all.chunks_exact(16) {
            keys.push(RegionKey(u64::from_le_bytes(r[..8].try_into().expect("16-byte record"))));
            len = len.min(u64::from_le_bytes(r[8..].try_into().expect("16-byte record")) as usize);
        }
        Ok(McastGroup { team: self.scratch.key(), keys, len, mem: region.raw(), _region: std::marker::PhantomData })
    }

    /// Collective: bytes `offset..offset + len` of the root's group region
    /// are put into the same range of every member's group region. Each
    /// member announces that its range may be overwritten when it enters,
    /// so a range is never rewritten while a member still forwards it.
    pub fn multicast(&mut self, group: &McastGroup<'_>, root: u32, offset: usize, len: usize) -> Result<()> {
        let (p, me, root) = (self.p(), self.me, root as usize);
        if group.team != self.scratch.key() {
            return Err(Error::InvalidArgument("multicast group belongs to another team"));
        }
        if root >= p {
            return Err(Error::InvalidArgument("multicast root outside the team"));
        }
        if offset.checked_add(len).is_none_or(|end| end > group.len) {
            return Err(Error::OutOfBounds);
        }
        self.begin()?;
        if p == 1 {
            return Ok(());
        }
        let parent = binomial_parent(me, root, p);
        let children = binomial_children(me, root, p);
        if let Some(parent) = parent {
            self.notify(parent, 1)?;
        }
        for &c in &children {
            self.wait_from(c, 1)?;
        }
        let chunks = len.div_ceil(CHUNK).max(1);
        let mut buf = Vec::with_capacity(len.min(CHUNK));
        for i in 0..chunks {
            let start = offset + i * CHUNK;
            let this = (offset + len - start).min(CHUNK);
            let step = 2 + i as u32;
            if let Some(parent) = parent {
                self.wait_from(parent, step)?;
            }
            if children.is_empty() {
                continue;
            }
            buf.resize(this, 0);
            {
                let _guard = self.ep.lock();
                group.mem.read(start, &mut buf);
            }
            for &c in &children {
                self.put_to(c, group.keys[c], start as u64, &buf, step)?;
            }
        }
        Ok(())
    }
}
