//! Single-copy collectives for teams whose members all share this host:
//! instead of copying data into a peer's scratch region (which the peer
//! then copies out again), a member *exposes* its user buffer (its
//! address goes to the readers through their scratch region) and each
//! reader copies straight out of it with `process_vm_readv` (a `memcpy`
//! when the owner is another thread of this process, see
//! `mw_transport::shm::read_lent`), then says it is done; the owner
//! returns only when every reader is done, so its buffer never changes
//! under a reader. One copy per byte instead of two,
//! and the source's cache lines are only read, not taken over (MPI's
//! shared-memory transports do the same for large messages, with CMA).
//!
//! Whether every member may read every other member's memory (same user,
//! no ptrace restriction, `MW_SHM_COPY` not `ring`) is probed once, when
//! the team forms; teams that cannot run these algorithms fall back to
//! the copying ones, so forcing one is always safe.
//!
//! On a team with more members than CPUs the broadcast mixes in pushes:
//! members that share a CPU with the one holding the data get it copied
//! into their slots instead of reading it, so nobody waits for a context
//! switch to a reader on its own CPU (`bcast_by_cpu_blocks`).
//!
//! Owns: the exposure protocol (`Layout::exposed` words: address and
//! length of the lent buffer; steps: 1 = exposed, 2 = done reading), and
//! the pushed slots' signal (the length plus one, or `PUSH_FAILED`).
//! Must not: expose a buffer beyond the call that lent it, or read past
//! the exposed length.

use super::tree::{binomial_children, binomial_parent, flat};
use super::{Team, STEP_BITS};
use crate::{Error, Result};

/// Teams up to this size broadcast flat: every member reads the root's
/// buffer in the same round, instead of down the binomial tree (two rounds
/// of full copies at 3 or 4 members). The readers only read the root's
/// lines, so they share them rather than contend.
const FLAT_BCAST_UP_TO: usize = 4;

/// The slot signal step a block leader sends its mates when it could not
/// read the root's buffer (other steps are the data's length plus one).
const PUSH_FAILED: u32 = (1 << STEP_BITS) - 1;

impl Team<'_> {
    /// The probe, collective over a team whose members all share memory:
    /// can this rank read every member's scratch region (at `bases`), and
    /// does the kernel's copy cost it more than two `memcpy`s (see
    /// [`mw_transport::shm::kernel_copy_is_costly`])? Agreed by an allgather of the answers:
    /// `Some(costly)` when every member can read every other, `costly` when
    /// any of them reads some member through a costly kernel copy.
    pub(super) fn probe_single_copy(&mut self, bases: &[u64]) -> Result<Option<bool>> {
        use mw_transport::shm::Far;
        let cma = self.ep.shared.shm.as_ref().is_some_and(|shm| shm.cma);
        let mut word = [0u8; 8];
        let others = || (0..self.p()).filter(|&j| j != self.me);
        let readable = cma
            && others().all(|j| {
                self.far(j).is_some_and(|far| match far {
                    Far::Process(pid) => mw_transport::shm::vm_read(pid, bases[j], &mut word[..]).is_ok(),
                    // Another thread of this process: read with a memcpy.
                    Far::Local => true,
                })
            });
        let through_kernel = others().any(|j| matches!(self.far(j), Some(Far::Process(_))));
        let answer = if !readable {
            0u8
        } else if through_kernel && self.ep.shared.shm.as_ref().is_some_and(|shm| shm.kernel_copy_is_costly()) {
            2
        } else {
            1
        };
        let all = self.allgather_small(&[answer])?;
        Ok(all.iter().all(|&a| a != 0).then(|| all.contains(&2)))
    }

    /// Whether the single-copy algorithms run on this team.
    pub(super) fn can_read_directly(&self) -> bool {
        self.single_copy.is_some()
    }

    /// Whether the automatic choice should take a single-copy algorithm
    /// for `bytes` per block (the `pick_*` functions then apply their own
    /// size threshold). Where the kernel's copy is costly (see
    /// [`mw_transport::shm::kernel_copy_is_costly`]): not on a team with more members than
    /// CPUs, where CPU time is what counts and two `memcpy`s through the
    /// slots take less of it (`oversubscribed_too` keeps it there for the
    /// broadcast, whose CPU-block form copies most bytes by `memcpy`
    /// anyway), and only from `tuning::COSTLY_DIRECT_FROM` otherwise.
    pub(super) fn direct_pays(&self, bytes: usize, oversubscribed_too: bool) -> bool {
        super::tuning::single_copy_pays(self.single_copy, self.cpu_block, bytes, oversubscribed_too)
    }

    /// Where team rank `j`'s lent buffers are copied from (same-host
    /// members only): its process, or this one.
    fn far(&self, j: usize) -> Option<mw_transport::shm::Far> {
        Some(self.ep.shared.shm.as_ref()?.link(self.ranks[j])?.far)
    }

    /// Tells team rank `to` where `buf` is and how long (step 1 of this
    /// collective).
    pub(super) fn expose(&self, to: usize, buf: &[u8]) -> Result<()> {
        let mut record = [0u8; 16];
        record[..8].copy_from_slice(&(buf.as_ptr() as u64).to_le_bytes());
        record[8..].copy_from_slice(&(buf.len() as u64).to_le_bytes());
        self.put_to(to, self.keys[to], self.lay.exposed(self.me), &record, 1)
    }

    /// Waits for team rank `from` to expose its buffer, then copies
    /// `out.len()` bytes from `offset` of it into `out`.
    pub(super) fn read_exposed(&self, from: usize, offset: usize, out: &mut [u8]) -> Result<()> {
        self.wait_from(from, 1)?;
        let base = self.mem.load_u64(self.lay.exposed(from) as usize);
        let len = self.mem.load_u64(self.lay.exposed(from) as usize + 8);
        self.read_lent(from, base, len, offset, out)
    }

    /// Copies `out.len()` bytes from `offset` of the buffer team rank `from`
    /// lent this rank for the current collective (`len` bytes at `base` in
    /// its memory, as it announced them), refusing to read past `len`. The
    /// caller must send `from` step 2 ("done reading") afterwards, whatever
    /// the outcome.
    pub(super) fn read_lent(&self, from: usize, base: u64, len: u64, offset: usize, out: &mut [u8]) -> Result<()> {
        // The owner's buffer is all this call may read: a peer that passed
        // a shorter one called with a different size.
        if (offset + out.len()) as u64 > len {
            return Err(Error::InvalidArgument("collective called with different sizes on different ranks"));
        }
        if out.is_empty() {
            return Ok(());
        }
        let far = self.far(from).ok_or(Error::PeerUnreachable { rank: self.ranks[from] })?;
        let len = out.len();
        // SAFETY: `offset + len` is within the lent length (checked
        // above), and the owner keeps its buffer allocated and unwritten
        // until this rank's "done reading" (step 2, which the caller sends
        // after this copy): it waits for that step from every reader it lent
        // to before it returns (`finish_direct`, `bcast_direct`,
        // `vector.rs`), giving up only on a reader declared dead, which a
        // rank that is a thread of this process is only for a corrupt ring.
        #[allow(unsafe_code)]
        let copied = unsafe { mw_transport::shm::read_lent(far, base + offset as u64, out, 0, len) };
        copied.map_err(|e| Error::Io(format!("single-copy read from rank {}: {e}", self.ranks[from])))
    }

    /// Broadcast down a tree (flat for small teams, see
    /// [`FLAT_BCAST_UP_TO`], binomial beyond): each member reads its
    /// parent's buffer, then exposes its own to its children.
    pub(super) fn bcast_direct(&mut self, root: usize, buf: &mut [u8]) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        let blocks = p.div_ceil(self.cpu_block);
        if self.cpu_block > 1 && blocks <= FLAT_BCAST_UP_TO && buf.len() <= self.lay.slot {
            return self.bcast_by_cpu_blocks(root, buf);
        }
        if p == 2 && self.cpu_block == 1 {
            return self.bcast_pair(root, buf);
        }
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

    /// Broadcast between two members with a CPU each: the child reads the
    /// first half of the root's buffer while the root, instead of waiting
    /// idle for the whole read, writes the second half into the child's
    /// buffer (which the child lends it, as the root lends its own). Every
    /// two-member team takes this form whatever the size, so both sides
    /// always run the same steps, also when their sizes differ:
    /// - child to root: 1 = my buffer is exposed, 2 = done (reading, and
    ///   the root's half is in);
    /// - root to child: 1 = my buffer is exposed, then 2 = I wrote the
    ///   second half into yours, or 3 = I did not (your buffer has another
    ///   size, or the copy failed): read it yourself, which checks sizes.
    ///
    /// 64 KiB between processes: one 64 KiB kernel copy (~4.5 µs on the
    /// host of 2026-11-25) becomes two of 32 KiB side by side.
    fn bcast_pair(&mut self, root: usize, buf: &mut [u8]) -> Result<()> {
        let child = 1 - root;
        // Page-aligned, so neither side's kernel copy splits a page it
        // shares with the other's.
        let split = buf.len() / 2 / 4096 * 4096;
        self.begin()?;
        if self.me == child {
            self.expose(root, buf)?;
            let (head, tail) = buf.split_at_mut(split);
            let mut read = self.read_exposed(root, 0, head);
            let written = self.wait_from(root, 2);
            if written.is_ok() && self.mem.load_u64(self.lay.flag(root) as usize) != self.sig(2) {
                read = read.and(self.read_exposed(root, split, tail));
            }
            // Done either way: the root must not wait forever.
            let notified = self.notify(root, 2);
            written?;
            notified?;
            return read;
        }
        self.expose(child, buf)?;
        self.wait_from(child, 1)?;
        let dest = self.mem.load_u64(self.lay.exposed(child) as usize);
        let len = self.mem.load_u64(self.lay.exposed(child) as usize + 8);
        let wrote = len == buf.len() as u64
            && self.far(child).is_some_and(|far| {
                // SAFETY: the child exposed `dest` as its buffer of `len`
                // bytes (equal to ours: the range is inside it) and keeps it
                // allocated until this step's answer (2 or 3, sent below,
                // after this copy); it touches only the first `split` bytes
                // meanwhile, and this writes only the bytes from `split` on.
                #[allow(unsafe_code)]
                let copied = unsafe { mw_transport::shm::write_lent(far, dest + split as u64, &buf[split..]) };
                copied.is_ok()
            });
        self.notify(child, if wrote { 2 } else { 3 })?;
        self.wait_from(child, 2)
    }

    /// Broadcast on a team with more members than CPUs (4 ranks on 2 CPUs):
    /// the members of a CPU block (see `Team::cpu_block`) mostly run one at
    /// a time, so a reader on the root's CPU would make the root wait for a
    /// context switch before it could finish. Instead the root's block
    /// mates get the data pushed into their slots (they copy it out when
    /// they next run), and in every other block its leader (the first
    /// member, or the root) reads the root's buffer in one copy and pushes
    /// it to its block mates. The root waits only for the other leaders.
    /// 64 KiB at 4 ranks on 2 CPUs: 6.5-9.3 -> 3.7-4.4 us.
    fn bcast_by_cpu_blocks(&mut self, root: usize, buf: &mut [u8]) -> Result<()> {
        let (p, me, b) = (self.p(), self.me, self.cpu_block);
        let blocks = p.div_ceil(b);
        let leader = |block: usize| if block == root / b { root } else { block * b };
        let mates = |leader: usize| (leader / b * b..((leader / b + 1) * b).min(p)).filter(move |&j| j != leader);
        self.begin()?;
        let phase = self.rooted_phase();
        let my_leader = leader(me / b);
        if me != my_leader {
            let slot = self.wait_slot(phase, my_leader)?;
            let signal = self.mem.load_u64(self.lay.slot_base(phase, my_leader) as usize);
            let step = (signal & ((1 << STEP_BITS) - 1)) as u32;
            let outcome = match step {
                PUSH_FAILED => {
                    Err(Error::InvalidArgument("broadcast: the block's leader could not read the root's buffer"))
                }
                _ if step as usize != buf.len() + 1 => {
                    Err(Error::InvalidArgument("collective called with different sizes on different ranks"))
                }
                _ => {
                    self.read_area(&slot, 0, buf);
                    Ok(())
                }
            };
            self.return_credit(phase, my_leader)?;
            return outcome;
        }
        let others = (0..blocks).map(leader).filter(|&l| l != root);
        let mut read = Ok(());
        if me == root {
            for l in others.clone() {
                self.expose(l, buf)?;
            }
        } else {
            read = self.read_exposed(root, 0, buf);
            // Done either way: the root must not wait forever.
            self.notify(root, 2)?;
        }
        // The slot's signal step carries the length plus one, so a mate
        // whose buffer has another size refuses the data; after a failed
        // read the mates are still served (nobody waits forever), with
        // `PUSH_FAILED` instead of data.
        debug_assert!(buf.len() + 1 < PUSH_FAILED as usize, "a slot holds at most 64 KiB");
        let (data, step): (&[u8], u32) = if read.is_ok() { (buf, buf.len() as u32 + 1) } else { (&[], PUSH_FAILED) };
        let sent = mates(me).try_for_each(|m| self.put_slot_step(phase, m, data, step, false));
        self.wake_members(mates(me));
        sent?;
        if me == root {
            for l in others {
                self.wait_from(l, 2)?;
            }
        }
        read
    }

    /// Allgather: every member exposes `send` and reads every other
    /// member's out of theirs (a buffer nobody writes during the call, so
    /// its cache lines are shared, not moved, as the readers copy them).
    pub(super) fn allgather_direct(&mut self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        self.read_every_exposed(send, recv, send.len(), 0, false)
    }

    /// Alltoall: every member exposes `send` and reads block `me` of every
    /// other member's.
    pub(super) fn alltoall_direct(&mut self, n: usize, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let mine = self.me * n;
        self.read_every_exposed(send, recv, n, mine, true)
    }

    /// Exposes `send` to every other member and reads `n` bytes at `offset`
    /// of each one's exposure into that member's block of `recv`; its own
    /// block (`n` bytes at `offset` of `send`) it copies after exposing, so
    /// the others' reads of its buffer start that much sooner (the slowest
    /// member's time is what a collective costs). The others' blocks it
    /// reads in rotation (member `me - 1` first), so that members read
    /// different owners at a time; with `any_order`, in the order they
    /// become readable instead (the first exposed in rotation first), which
    /// with more members than CPUs saves waiting for a member that needs
    /// this very CPU while others are long exposed (4 processes on 2 CPUs,
    /// 64 KiB alltoall: 26.9-27.6 -> 24.2-26.0 µs; as threads 14.7-15.2 ->
    /// 13.2-13.8); with nothing exposed it waits first for a member that
    /// shares its CPU (that wait hands the CPU over at once), else for any.
    /// Not for allgather, where every member reads the same buffers: there
    /// all reading the first-exposed owner's pages at once slowed the
    /// kernel's copies (4 processes, 256 KiB: 171-177 -> 169-205 µs).
    fn read_every_exposed(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        n: usize,
        offset: usize,
        any_order: bool,
    ) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        self.begin()?;
        for k in 1..p {
            self.expose((me + k) % p, send)?;
        }
        recv[me * n..(me + 1) * n].copy_from_slice(&send[offset..offset + n]);
        let mut failed = Ok(());
        let mut pending: Vec<usize> = (1..p).map(|k| (me + p - k) % p).collect();
        let exposed = |team: &Team<'_>, j: usize| team.mem.load_u64(team.lay.flag(j) as usize) >= team.sig(1);
        while !pending.is_empty() {
            let ready = if any_order {
                pending.iter().position(|&j| exposed(self, j))
            } else {
                exposed(self, pending[0]).then_some(0)
            };
            let Some(at) = ready else {
                let waited = match pending.iter().copied().find(|&j| !any_order || self.shares_my_cpu(j)) {
                    Some(j) => self.wait_from(j, 1),
                    None => self.wait_any_dead(|team| pending.iter().any(|&j| exposed(team, j))),
                };
                if let Err(error) = waited {
                    // A member died: read no more, but still tell the
                    // others and wait for the readers of `send`.
                    failed = Err(error);
                    break;
                }
                continue;
            };
            let from = pending.remove(at);
            let read = self.read_exposed(from, offset, &mut recv[from * n..(from + 1) * n]);
            failed = failed.and(read);
        }
        self.finish_direct(failed)
    }

    /// Tells every member this rank is done reading, then waits until every
    /// member is done reading this rank's buffer.
    pub(super) fn finish_direct(&mut self, read: Result<()>) -> Result<()> {
        let (p, me) = (self.p(), self.me);
        self.notify_each((1..p).map(|k| (me + k) % p), 2)?;
        for k in 1..p {
            self.wait_from((me + p - k) % p, 2)?;
        }
        read
    }
}
