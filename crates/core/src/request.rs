//! Outstanding operations: a slab of request slots addressed by [`RequestId`].
//!
//! Owns: each operation's completion state (pending chunks, result, fetched
//! value or data) until the user's handle collects it. Must not: talk to the
//! network. A slot is freed when it is both complete and released by its
//! handle, so a dropped handle never leaves a dangling slot that a late reply
//! could complete into (the generation in the id makes a stale reply miss).

use crate::region::RawMem;
use crate::Error;

/// A request slot id as carried in the wire's `req` field: index in the low
/// 20 bits, generation in the high 12 (0 is reserved for "no reply wanted").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(pub u32);

const INDEX_BITS: u32 = 20;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;

impl RequestId {
    fn new(index: usize, generation: u16) -> RequestId {
        RequestId(((u32::from(generation) & 0xfff) << INDEX_BITS) | (index as u32 + 1))
    }
    fn index(self) -> Option<usize> {
        let raw = self.0 & INDEX_MASK;
        (raw != 0).then(|| raw as usize - 1)
    }
    fn generation(self) -> u16 {
        (self.0 >> INDEX_BITS) as u16
    }
}

/// What a completed request produced.
#[derive(Debug, Default)]
pub enum Output {
    /// Nothing beyond success (puts).
    #[default]
    None,
    /// A fetched word (atomics, get_value).
    Value(u64),
    /// Fetched bytes (gets), copied into the user's buffer when the handle is waited.
    Data(Vec<u8>),
    /// Fetched bytes (gets) landing straight in the user's buffer `mem`, of
    /// which `filled` bytes have arrived: only while the handle that borrows
    /// the buffer is being waited on (see [`Requests::pin`]).
    Pinned { mem: RawMem, filled: usize },
    /// A receive, an active-message reply or payload (see [`crate::msg`]).
    Msg(crate::msg::MsgOutput),
}

#[derive(Debug)]
struct Slot {
    generation: u16,
    in_use: bool,
    released: bool,
    /// Released at issue (an implicit operation, completed by flush or
    /// quiet): a failure is kept for them to report.
    implicit: bool,
    /// Parts (chunks, acks, responses) still to arrive before completion.
    pending: u32,
    result: Option<Result<(), Error>>,
    output: Output,
    target: u32,
    /// Local word to bump when the operation completes (Cenju-4 notification address).
    notify: Option<(crate::region::RegionKey, u64)>,
}

/// The slab of outstanding requests.
#[derive(Debug, Default)]
pub struct Requests {
    slots: Vec<Slot>,
    free: Vec<usize>,
    live: usize,
    /// The first failure of an implicit operation not yet reported, and
    /// its target (see [`Requests::release_implicit`]).
    implicit_failure: Option<(u32, Error)>,
}

impl Requests {
    /// Allocates a request toward `target` waiting for `pending` parts.
    pub fn alloc(&mut self, target: u32, pending: u32) -> Result<RequestId, Error> {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                if self.slots.len() > INDEX_MASK as usize - 1 {
                    return Err(Error::WouldBlock);
                }
                self.slots.push(Slot {
                    generation: 0,
                    in_use: false,
                    released: false,
                    implicit: false,
                    pending: 0,
                    result: None,
                    output: Output::None,
                    target,
                    notify: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.generation = (slot.generation + 1) & 0xfff;
        slot.in_use = true;
        slot.released = false;
        slot.implicit = false;
        slot.pending = pending;
        slot.result = if pending == 0 { Some(Ok(())) } else { None };
        slot.output = Output::None;
        slot.target = target;
        slot.notify = None;
        self.live += 1;
        Ok(RequestId::new(index, slot.generation))
    }

    /// The id the next [`alloc`](Self::alloc) returns, `None` if it would
    /// fail. A caller holding the endpoint lock (so nothing allocates or
    /// frees in between) may publish a message naming the request first and
    /// allocate right after: the bookkeeping then overlaps the message's trip.
    pub fn next_id(&self) -> Option<RequestId> {
        match self.free.last() {
            Some(&index) => Some(RequestId::new(index, (self.slots[index].generation + 1) & 0xfff)),
            None if self.slots.len() > INDEX_MASK as usize - 1 => None,
            None => Some(RequestId::new(self.slots.len(), 1)),
        }
    }

    fn slot_mut(&mut self, id: RequestId) -> Option<&mut Slot> {
        let index = id.index()?;
        let slot = self.slots.get_mut(index)?;
        (slot.in_use && slot.generation == id.generation()).then_some(slot)
    }

    fn slot(&self, id: RequestId) -> Option<&Slot> {
        let index = id.index()?;
        let slot = self.slots.get(index)?;
        (slot.in_use && slot.generation == id.generation()).then_some(slot)
    }

    /// Sets the local notification word bumped on completion.
    pub fn set_notify(&mut self, id: RequestId, notify: (crate::region::RegionKey, u64)) {
        if let Some(slot) = self.slot_mut(id) {
            slot.notify = Some(notify);
        }
    }

    /// One part arrived successfully. Returns the notification target when this
    /// completed the request (the caller bumps it).
    pub fn part_done(&mut self, id: RequestId) -> Option<Completion> {
        let slot = self.slot_mut(id)?;
        if slot.result.is_some() {
            return None;
        }
        slot.pending = slot.pending.saturating_sub(1);
        if slot.pending == 0 {
            slot.result = Some(Ok(()));
            return Some(self.finish(id));
        }
        None
    }

    /// The request failed; later parts are ignored.
    pub fn fail(&mut self, id: RequestId, error: Error) -> Option<Completion> {
        let slot = self.slot_mut(id)?;
        if slot.result.is_some() {
            return None;
        }
        let implicit = slot.implicit.then_some((slot.target, error.clone()));
        slot.result = Some(Err(error));
        if let Some(failure) = implicit {
            self.implicit_failure.get_or_insert(failure);
        }
        Some(self.finish(id))
    }

    /// Releases request `id` at issue: nothing waits on it; it completes
    /// unobserved, and if it fails, the failure is kept until
    /// [`take_implicit_failure`](Self::take_implicit_failure) reports it.
    pub fn release_implicit(&mut self, id: RequestId) {
        let failed = match self.slot_mut(id) {
            Some(slot) => {
                slot.implicit = true;
                match &slot.result {
                    Some(Err(error)) => Some((slot.target, error.clone())),
                    _ => None,
                }
            }
            None => None,
        };
        if let Some(failure) = failed {
            self.implicit_failure.get_or_insert(failure);
        }
        self.release(id);
    }

    /// The first failure of an implicit operation toward `target` (any
    /// target with `None`) not reported yet; reports it.
    pub fn take_implicit_failure(&mut self, target: Option<u32>) -> Option<Error> {
        match &self.implicit_failure {
            Some((t, _)) if target.is_none_or(|want| want == *t) => self.implicit_failure.take().map(|(_, e)| e),
            _ => None,
        }
    }

    fn finish(&mut self, id: RequestId) -> Completion {
        let (notify, released) = match self.slot(id) {
            Some(slot) => (slot.notify, slot.released),
            None => (None, false),
        };
        if released {
            self.free_slot(id);
        }
        Completion { notify }
    }

    /// Stores output (value or data) for a request.
    pub fn set_output(&mut self, id: RequestId, output: Output) {
        if let Some(slot) = self.slot_mut(id) {
            slot.output = output;
        }
    }

    /// Appends fetched bytes to a request's output (a get's chunks, or a
    /// rendezvous pull landing in a receive). `Err` when they do not fit;
    /// a request without a data output (released, or fetching nothing)
    /// ignores them.
    pub fn land(&mut self, id: RequestId, bytes: &[u8]) -> Result<(), ()> {
        let Some(slot) = self.slot_mut(id) else {
            return Ok(());
        };
        match &mut slot.output {
            Output::Data(data) if data.len() + bytes.len() <= data.capacity() => {
                data.extend_from_slice(bytes);
                Ok(())
            }
            Output::Data(_) => Err(()),
            Output::Pinned { mem, filled } if *filled + bytes.len() <= mem.len() => {
                mem.write(*filled, bytes);
                *filled += bytes.len();
                Ok(())
            }
            Output::Pinned { .. } => Err(()),
            Output::Msg(msg) => msg.land(bytes),
            Output::None | Output::Value(_) => Ok(()),
        }
    }

    /// Lets a pending get land the rest of its data straight in `mem` (the
    /// user's buffer, exclusively borrowed by the caller for as long as the
    /// pin lasts): what was staged so far is copied there now. Does nothing
    /// when the request is complete, unknown, or not a staged get whose data
    /// fits `mem`. Saves the copy out of the staging buffer for data that
    /// arrives while the handle is waited on.
    ///
    /// The caller must [`unpin`](Self::unpin) or [`take`](Self::take) the
    /// request (or [`release`](Self::release) it) before the borrow of the
    /// buffer ends, also when unwinding.
    pub fn pin(&mut self, id: RequestId, mem: RawMem) {
        let Some(slot) = self.slot_mut(id) else {
            return;
        };
        if slot.result.is_some() {
            return;
        }
        if let Output::Data(staged) = &slot.output {
            if staged.len() <= mem.len() {
                mem.write(0, staged);
                slot.output = Output::Pinned { mem, filled: staged.len() };
            }
        }
    }

    /// Ends a [`pin`](Self::pin) of a request that did not complete (an
    /// unwinding wait): the data landed so far is in a buffer about to be
    /// given back, so the rest of the request's data is discarded. A
    /// completed request keeps its output for [`take`](Self::take).
    pub fn unpin(&mut self, id: RequestId) {
        if let Some(slot) = self.slot_mut(id) {
            if slot.result.is_none() && matches!(slot.output, Output::Pinned { .. }) {
                slot.output = Output::None;
            }
        }
    }

    /// The messaging output of a pending request, if it has one.
    pub fn msg_mut(&mut self, id: RequestId) -> Option<&mut crate::msg::MsgOutput> {
        match &mut self.slot_mut(id)?.output {
            Output::Msg(msg) => Some(msg),
            _ => None,
        }
    }

    /// Resets how many parts a pending request still waits for (a matched
    /// rendezvous receive waits for its pulled chunks).
    pub fn set_pending(&mut self, id: RequestId, pending: u32) {
        if let Some(slot) = self.slot_mut(id) {
            if slot.result.is_none() {
                slot.pending = pending.max(1);
            }
        }
    }

    /// Parts still to arrive; `None` for an unknown id.
    pub fn pending(&self, id: RequestId) -> Option<u32> {
        self.slot(id).map(|slot| if slot.result.is_some() { 0 } else { slot.pending })
    }

    /// Re-targets a pending request (a wildcard receive matched to a sender),
    /// so it fails if that peer becomes unreachable.
    pub fn set_target(&mut self, id: RequestId, target: u32) {
        if let Some(slot) = self.slot_mut(id) {
            slot.target = target;
        }
    }

    /// Whether the request is pending and its handle still wants the result
    /// (not released).
    pub fn is_wanted(&self, id: RequestId) -> bool {
        self.slot(id).is_some_and(|slot| slot.result.is_none() && !slot.released)
    }

    /// Whether the request is complete; `None` for an unknown id.
    pub fn is_done(&self, id: RequestId) -> Option<bool> {
        self.slot(id).map(|slot| slot.result.is_some())
    }

    /// Takes the result of a completed request and frees it.
    pub fn take(&mut self, id: RequestId) -> Option<(Result<(), Error>, Output)> {
        let slot = self.slot_mut(id)?;
        let result = slot.result.take()?;
        let output = std::mem::take(&mut slot.output);
        self.free_slot(id);
        Some((result, output))
    }

    /// Frees pending request `id` whose outcome its waiter took directly
    /// (a receive whose message was written in place), or that only named
    /// an exposure now withdrawn: nothing waits on it any more (a message
    /// still naming it finds a stale id, which every lookup ignores).
    pub fn retire(&mut self, id: RequestId) {
        self.free_slot(id);
    }

    /// The handle went away: free now if complete, else when it completes.
    pub fn release(&mut self, id: RequestId) {
        if let Some(slot) = self.slot_mut(id) {
            if slot.result.is_some() {
                self.free_slot(id);
            } else {
                slot.released = true;
                slot.output = Output::None;
            }
        }
    }

    fn free_slot(&mut self, id: RequestId) {
        if let Some(index) = id.index() {
            if let Some(slot) = self.slots.get_mut(index) {
                if slot.in_use && slot.generation == id.generation() {
                    slot.in_use = false;
                    slot.output = Output::None;
                    self.free.push(index);
                    self.live -= 1;
                }
            }
        }
    }

    /// Fails every pending request toward `target` (the peer is unreachable).
    pub fn fail_target(&mut self, target: u32, error: &Error) -> Vec<Completion> {
        let mut ids = Vec::new();
        for (index, slot) in self.slots.iter().enumerate() {
            if slot.in_use && slot.result.is_none() && slot.target == target {
                ids.push(RequestId::new(index, slot.generation));
            }
        }
        ids.into_iter().filter_map(|id| self.fail(id, error.clone())).collect()
    }

    /// Requests allocated and not yet freed.
    pub fn live(&self) -> usize {
        self.live
    }
}

/// What the caller must do when a request completes.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    /// Local word to increment, if the operation asked for a notification.
    pub notify: Option<(crate::region::RegionKey, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle() {
        let mut reqs = Requests::default();
        let id = reqs.alloc(1, 2).unwrap();
        assert_ne!(id.0, 0);
        assert_eq!(reqs.is_done(id), Some(false));
        assert!(reqs.part_done(id).is_none());
        assert!(reqs.part_done(id).is_some());
        assert_eq!(reqs.is_done(id), Some(true));
        let (result, _) = reqs.take(id).unwrap();
        assert!(result.is_ok());
        assert_eq!(reqs.is_done(id), None, "stale id must miss");
        let again = reqs.alloc(1, 1).unwrap();
        assert_ne!(again, id, "generation changes on reuse");
        assert!(reqs.part_done(id).is_none(), "late reply for the old id is ignored");
    }

    #[test]
    fn next_id_is_what_alloc_returns() {
        let mut reqs = Requests::default();
        let mut held = Vec::new();
        for round in 0..200usize {
            // Grow, then free in a scrambled order, then reuse.
            if round % 3 == 2 && !held.is_empty() {
                let id = held.swap_remove(round * 7 % held.len());
                reqs.retire(id);
                continue;
            }
            let predicted = reqs.next_id().unwrap();
            assert_eq!(reqs.alloc(0, 1).unwrap(), predicted, "round {round}");
            held.push(predicted);
        }
        assert!(reqs.slots.len() > 10 && !held.is_empty());
    }

    #[test]
    fn a_pinned_get_lands_in_place_and_an_unpinned_one_lands_nowhere() {
        let mut reqs = Requests::default();
        let mut out = vec![0u8; 6];
        let id = reqs.alloc(1, 2).unwrap();
        reqs.set_output(id, Output::Data(Vec::with_capacity(6)));
        reqs.land(id, b"ab").unwrap();
        reqs.pin(id, crate::memory::scoped_mem(&mut out));
        reqs.land(id, b"cd").unwrap();
        assert!(reqs.land(id, b"xyz").is_err(), "more than the buffer holds");
        reqs.land(id, b"ef").unwrap();
        reqs.part_done(id);
        reqs.part_done(id);
        reqs.unpin(id);
        let (result, output) = reqs.take(id).unwrap();
        assert!(result.is_ok());
        assert!(matches!(output, Output::Pinned { filled: 6, .. }), "complete: the output is kept");
        assert_eq!(out, b"abcdef", "staged bytes were copied in at pin time, the rest landed in place");

        let mut other = vec![0u8; 4];
        let id = reqs.alloc(1, 1).unwrap();
        reqs.set_output(id, Output::Data(Vec::with_capacity(4)));
        reqs.pin(id, crate::memory::scoped_mem(&mut other));
        reqs.unpin(id);
        reqs.land(id, b"late").unwrap();
        assert_eq!(other, [0; 4], "after an unpin nothing is written to the buffer");
    }

    #[test]
    fn failure_sticks_and_release_frees() {
        let mut reqs = Requests::default();
        let id = reqs.alloc(3, 2).unwrap();
        reqs.fail(id, Error::OutOfBounds);
        assert!(reqs.part_done(id).is_none());
        reqs.release(id);
        assert_eq!(reqs.live(), 0);
        let pending = reqs.alloc(3, 1).unwrap();
        reqs.release(pending);
        assert_eq!(reqs.live(), 1);
        let done = reqs.fail_target(3, &Error::PeerUnreachable { rank: 3 });
        assert_eq!(done.len(), 1);
        assert_eq!(reqs.live(), 0);
    }
}
#[cfg(test)]
mod size_tests {
    /// Every request slot holds an `Output`, and a message's completion
    /// moves it several times (set, take, hand back): at 128 bytes each move
    /// was a `memcpy` call, and the slab twice as large. Large or rare
    /// parts (active-message arguments) are boxed to keep it so.
    #[test]
    fn request_outputs_stay_small() {
        assert!(std::mem::size_of::<super::Output>() <= 72, "{}", std::mem::size_of::<super::Output>());
        assert!(std::mem::size_of::<super::Slot>() <= 144, "{}", std::mem::size_of::<super::Slot>());
    }
}
