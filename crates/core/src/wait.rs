//! Waiting: how an application call waits for its operation, and what it
//! does meanwhile.
//!
//! Owns: the endpoint lock as application calls take it (marking activity
//! for the watchdog), the wait loop (progress while the condition is
//! false, spin briefly on same-host rings, then sleep on the sockets until
//! the protocol's next timer), the deadlines a wait obeys
//! (`crate::deadline::Bound`) and the mark that tells the background
//! threads an application thread is waiting. Must not: issue operations or
//! change what a round of progress does (`crate::progress`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::deadline::Bound;
use crate::endpoint::{Endpoint, Shared, State};
use crate::lock::StateGuard;
use crate::request::{Output, RequestId};
use crate::{Error, Result};

impl Endpoint {
    /// Locks the state for an application call (which counts as activity:
    /// the watchdog leaves an active application alone).
    pub(crate) fn lock(&self) -> StateGuard<'_, State> {
        // A load and a store, not a locked increment (this is on every
        // call): the watchdog only asks whether the count moved, and an
        // increment lost to a concurrent one still moves it.
        let calls = &self.shared.app_calls;
        calls.store(calls.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        self.shared.lock()
    }

    /// The state lock, not counted as an application call: for a look that
    /// makes no progress (`is_complete`), so that an application polling
    /// it while it computes still has the `Auto` mode's watchdog drive its
    /// transfers, and is not taken for a rank that serves its peers.
    pub(crate) fn lock_without_progress(&self) -> StateGuard<'_, State> {
        self.shared.lock()
    }

    /// Makes progress until `done` says so, busy-polling, then yielding, then
    /// blocking (seed 004: PM/UDP hands the CPU over when polling finds nothing).
    pub(crate) fn wait_for(&self, done: impl FnMut(&mut State) -> bool) {
        self.wait_for_until(done, None);
    }

    /// Waits until request `id` completes and takes its outcome (`None`: it
    /// was already collected, or never existed). One lock when it is
    /// complete already (an eager send's is at once), and collected under
    /// the lock that saw it complete otherwise: not a second one after.
    pub(crate) fn wait_and_take(&self, id: RequestId, bound: Bound) -> Option<(Result<()>, Output)> {
        self.wait_and_take_with(id, false, bound, |_| false)
    }

    /// [`wait_and_take`](Self::wait_and_take) with `advance`, which may
    /// complete the request itself (a receive taking its message from a
    /// ring) and says whether it did: tried first under the same single
    /// lock, before any of the waiting machinery. `ring_spin`: what completes
    /// the request arrives through a same-host ring, so the wait starts with
    /// [`spin_for_ring_record`](Self::spin_for_ring_record) (only once the
    /// first look found the request incomplete: a window of requests whose
    /// replies progress already executed must not spin for nothing).
    /// Past `bound`'s deadline the outcome is `Err(Timeout)` and the request
    /// stays where it is: the caller retires or keeps it.
    pub(crate) fn wait_and_take_with(
        &self,
        id: RequestId,
        ring_spin: bool,
        bound: Bound,
        mut advance: impl FnMut(&mut State) -> bool,
    ) -> Option<(Result<()>, Output)> {
        let mut ready = |state: &mut State| state.requests.is_done(id) != Some(false) || advance(state);
        let first_look = {
            let mut state = self.lock();
            if ready(&mut state) {
                return state.requests.take(id);
            }
            state
        };
        let mut taken = None;
        if !ring_spin {
            drop(first_look);
        } else if self.spin_for_ring_record(first_look, |state, _| {
            if !ready(state) {
                return false;
            }
            taken = state.requests.take(id);
            true
        }) {
            return taken;
        }
        let until = self.deadline(bound);
        let finished = self.wait_for_until(
            |state| {
                if !ready(state) {
                    return false;
                }
                taken = state.requests.take(id);
                true
            },
            until,
        );
        if !finished {
            return Some((Err(Error::Timeout), Output::None));
        }
        taken
    }

    /// The first microseconds of a wait for a record from a same-host ring
    /// (a receive's message, an active message's reply): only the rings'
    /// stamps are polled (no lock, no clock, no progress round), and the
    /// first record that lands is offered to `take` under the lock at once.
    /// Returns whether `take` took it. A record `take` leaves (another
    /// tag, a credit grant, someone else's reply), or a quiet spell of a
    /// few microseconds, hands over to [`wait_for`](Self::wait_for), which
    /// executes it and serves every other path. That loop reaches the same
    /// record through more layers: an 8-byte send/recv ping-pong over shared
    /// memory took 0.121-0.126 µs per hop through it and 0.106-0.111 with
    /// this spin in front (alternating runs, before the rings' lap jumps).
    /// Only for waits a ring ends: a UDP reply would wait out the spin.
    ///
    /// `first_look` is the guard of the caller's first look (which found
    /// nothing): the spin keeps the lock while it peeks, so the record is
    /// taken without another locked instruction between its landing and the
    /// caller's return (~6 ns a hop on the Intel Xeon test VM, where an
    /// uncontended compare-exchange costs more than on the EPYC: an 8-byte
    /// send_recv ping-pong over shared memory does two per hop, one here
    /// and one in the send). It lets go as soon as another thread waits
    /// for the lock (`StateLock::is_wanted`: the progress thread, another
    /// application thread), and peeks without it from then on. `take`'s
    /// second argument says whether the lock was held throughout: the state
    /// is then exactly as the first look left it, and what that look
    /// checked need not be checked again (a receive's matching queues).
    pub(crate) fn spin_for_ring_record(
        &self,
        first_look: StateGuard<'_, State>,
        take: impl FnOnce(&mut State, bool) -> bool,
    ) -> bool {
        let Some(shm) = self.shared.shm.as_deref() else { return false };
        let mut held = Some(first_look);
        for _ in 0..RING_SPIN_ROUNDS {
            if shm.inbound_pending() {
                let (mut state, unchanged) = match held {
                    Some(state) => (state, true),
                    None => (self.lock(), false),
                };
                return take(&mut state, unchanged);
            }
            if held.is_some() && self.shared.state.is_wanted() {
                held = None;
            }
            std::hint::spin_loop();
        }
        false
    }

    /// [`spin_for_ring_record`](Self::spin_for_ring_record) for a caller
    /// that must not let go of the lock until it has finished what it
    /// started under it (`am_begin`: a request published under the id the
    /// next allocation gives, not allocated yet). Polls the rings' stamps
    /// with `held` kept, offers the first record that lands to `take`, and
    /// hands the guard back: after `take` (with what it returned), or with
    /// `false` as soon as another thread waits for the lock or the spin
    /// (~4 µs) is over.
    pub(crate) fn spin_holding_lock<'a>(
        &'a self,
        mut held: StateGuard<'a, State>,
        take: impl FnOnce(&mut State) -> bool,
    ) -> (StateGuard<'a, State>, bool) {
        let Some(shm) = self.shared.shm.as_deref() else { return (held, false) };
        for _ in 0..RING_SPIN_ROUNDS {
            if shm.inbound_pending() {
                let taken = take(&mut held);
                return (held, taken);
            }
            if self.shared.state.is_wanted() {
                break;
            }
            std::hint::spin_loop();
        }
        (held, false)
    }

    /// [`wait_for`](Self::wait_for), giving up at `until`: returns whether
    /// `done` said so.
    pub(crate) fn wait_for_until(
        &self,
        mut done: impl FnMut(&mut State) -> bool,
        until: Option<std::time::Instant>,
    ) -> bool {
        let mut waiter = mw_transport::wait::Waiter::new(self.shared.wait_policy);
        let mut waiting = WaitingMark::new(&self.shared);
        // The mark ends where the wait succeeds, under the lock `done` runs
        // with (no locked instruction on the way back to the caller).
        let mut done = |state: &mut State| {
            let finished = done(state);
            if finished {
                waiting.end(state);
            }
            finished
        };
        // Whether to (re)enter the ring spin: at the start, and whenever the
        // slower loop below found work after a quiet spell (a peer that went
        // quiet for a while, then starts a ping-pong, must be served at ring
        // speed again, not at the pace of the socket and the doorbell).
        let mut spin_rings = self.shared.all_shm;
        loop {
            if spin_rings {
                spin_rings = false;
                if let Some(done_now) = self.spin_on_rings(&mut done, until) {
                    return done_now;
                }
            }
            // One clock read a round serves the deadline and the protocol.
            let clock = std::time::Instant::now();
            if until.is_some_and(|t| clock >= t) {
                return false;
            }
            let deadline = {
                let mut state = self.shared.lock();
                let now = self.shared.at(clock);
                // One datagram per round: the caller's condition is checked
                // as soon as something arrived, instead of after another
                // receive syscall that would only report an empty socket.
                let worked = state.progress_with(now, 1) | state.assist_pulls();
                if done(&mut state) {
                    return true;
                }
                if worked {
                    waiter.reset();
                    spin_rings = self.shared.all_shm;
                    continue;
                }
                state.next_timeout()
            };
            let mut deadline = deadline.map(|t| self.shared.to_std(t));
            if let Some(until) = until {
                deadline = Some(deadline.map_or(until, |d| d.min(until)));
            }
            if self.shared.threaded.load(Ordering::Relaxed) || self.shared.app_waiting.load(Ordering::Relaxed) > 1 {
                // Another thread (the progress thread, or a second
                // application thread waiting too) may receive what we wait
                // for (the datagram, or the shared-memory doorbell) and the
                // socket then stays quiet: never sleep long on it alone.
                // (The Auto watchdog never runs while we wait.)
                let cap = std::time::Instant::now() + Duration::from_micros(500);
                deadline = Some(deadline.map_or(cap, |d| d.min(cap)));
            }
            // About to sleep with same-host peers: announce it so that their
            // next store or ring record rings our doorbell, then poll once
            // more (see crate::shm on why neither side can miss the other).
            let _sleeping = match &self.shared.shm {
                Some(shm) if waiter.blocks_next() => Some(shm.announce_sleep(false)),
                _ => None,
            };
            if _sleeping.is_some() {
                let mut state = self.shared.lock();
                let worked = state.progress(self.shared.now());
                if done(&mut state) {
                    return true;
                }
                if worked {
                    waiter.reset();
                    spin_rings = self.shared.all_shm;
                    continue;
                }
            }
            let fds = self.shared.fds();
            let _ = waiter.idle(fds.as_slice(), deadline);
        }
    }

    /// The first phase of a wait when every peer shares this host: what we
    /// wait for arrives in a ring or by a direct store, so poll the rings
    /// and `done` alone (no receive syscall, which costs more than a whole
    /// shared-memory message), with a full progress round every few µs for
    /// the socket (raw datagrams, timers). After 20 µs each round also
    /// yields (a peer sharing our core runs at once, see `wait_until`);
    /// after `MW_SHM_SPIN_US` the caller's kernel-blocking loop takes over.
    /// `Some(result)` when the wait ended here.
    fn spin_on_rings(
        &self,
        done: &mut impl FnMut(&mut State) -> bool,
        until: Option<std::time::Instant>,
    ) -> Option<bool> {
        const FULL_EVERY: Duration = Duration::from_micros(10);
        const LOCAL_EVERY: Duration = Duration::from_micros(1);
        const YIELD_AFTER: Duration = Duration::from_micros(20);
        let shm = self.shared.shm.as_deref()?;
        let spin = shm.spin;
        // The clock is read every few idle rounds only: a read costs about
        // as much as polling every ring once, and a protocol time stale by
        // well under a microsecond changes no timer's outcome.
        const CLOCK_EVERY: u32 = 8;
        // A record already waiting (a receive whose message is there) is
        // taken before the first clock read.
        if shm.inbound_pending() && done(&mut self.shared.lock()) {
            return Some(true);
        }
        let mut clock = std::time::Instant::now();
        let mut idle_since = clock;
        let mut last_full = clock;
        let mut last_local = clock;
        // Whether the last locked round left local work (messaging, queued
        // ring records, unacknowledged operations): then the locked rounds
        // come every CLOCK_EVERY rounds, otherwise every LOCAL_EVERY only.
        let mut busy = true;
        // The first round only peeks (the clock was just read).
        let mut rounds_since_clock = 1u32;
        // A record-driven round did work since the last clock read.
        let mut restart_idle = false;
        // Record-driven rounds since the last clock read (see below).
        const RECORDS_BEFORE_CLOCK: u32 = 16;
        let mut records_unclocked = 0u32;
        // The lock, kept from the last locked round while the spin only
        // peeks, so that a record is executed without a locked instruction
        // between its landing and the reply (module docs of `lock`,
        // "Holding while spinning"); dropped when another thread wants it
        // and before the CPU is yielded.
        let mut held: Option<StateGuard<'_, State>> = None;
        loop {
            if held.is_some() && self.shared.state.is_wanted() {
                held = None;
            }
            // Between the rounds that take the lock (periodic ones, and any
            // with a record waiting in a ring) the spin only peeks at the
            // rings: a locked round of progress is a few hundred
            // instructions, a peek two loads per peer, so a record is seen
            // and popped sooner after it lands. A record that lands during a
            // locked round waits for it to end: with nothing else to do,
            // those rounds are rare (measured: a ping-pong of 8-byte
            // messages went from 0.22 to 0.19 us when they were 8 times
            // rarer).
            let periodic = rounds_since_clock == 0 && (busy || clock - last_local >= LOCAL_EVERY);
            if periodic || shm.inbound_pending() {
                let record_driven = !periodic;
                let worked = {
                    let mut state = match held.take() {
                        Some(state) => state,
                        None => self.shared.lock(),
                    };
                    // An active-message request at a ring's front runs
                    // first: its reply is on the peer's critical path.
                    // `done` never takes a request from a ring itself, and
                    // executing one first only brings forward what `done`
                    // may be waiting for (an internal collective's step).
                    let served = record_driven && state.serve_ring_requests(|| self.shared.at(clock));
                    // The condition first when a record is there: a receive
                    // takes its own message straight from the ring
                    // (`State::recv_from_ring`). A record-driven round saw
                    // one a moment ago: no second look (taken meanwhile by
                    // another thread, `done` just finds nothing).
                    if (record_driven || shm.inbound_pending()) && done(&mut state) {
                        return Some(true);
                    }
                    let now = self.shared.at(clock);
                    let mut worked = served;
                    worked |= if periodic && clock - last_full >= FULL_EVERY {
                        last_full = clock;
                        last_local = clock;
                        state.progress_with(now, 1)
                    } else if periodic {
                        last_local = clock;
                        state.progress_local(now)
                    } else {
                        // Execute the record (and what it set off in
                        // messaging); the rest waits for the next periodic
                        // round.
                        state.progress_rings(now)
                    };
                    worked |= state.assist_pulls();
                    if done(&mut state) {
                        return Some(true);
                    }
                    busy = worked || state.local_work_pending();
                    held = Some(state);
                    worked
                };
                if worked && record_driven && records_unclocked < RECORDS_BEFORE_CLOCK {
                    // Straight back to peeking: the next record (a
                    // request-reply partner's next request) often lands
                    // within ~100 ns, and a clock read and a periodic round
                    // right here were in its way (8-byte am target waiting
                    // in a barrier: 0.118 -> 0.113 us per half round trip,
                    // `examples/pingpong_blocks`). The clock read that ends
                    // the next few idle rounds restarts the idle time; a
                    // stream of records with no idle round between them
                    // still reads it (deadline, periodic round: sockets and
                    // timers) every RECORDS_BEFORE_CLOCK records.
                    records_unclocked += 1;
                    rounds_since_clock = 1;
                    restart_idle = true;
                    continue;
                }
                if worked {
                    clock = std::time::Instant::now();
                    rounds_since_clock = 0;
                    records_unclocked = 0;
                    idle_since = clock;
                    continue;
                }
            }
            rounds_since_clock += 1;
            if rounds_since_clock < CLOCK_EVERY {
                std::hint::spin_loop();
                continue;
            }
            clock = std::time::Instant::now();
            rounds_since_clock = 0;
            records_unclocked = 0;
            if std::mem::take(&mut restart_idle) {
                idle_since = clock;
            }
            if until.is_some_and(|t| clock >= t) {
                return Some(false);
            }
            let idle = clock - idle_since;
            if idle >= spin {
                return None;
            }
            if idle >= YIELD_AFTER {
                held = None;
                std::thread::yield_now();
            } else {
                // One pause only: it costs ~14 ns on these CPUs, and every
                // pause here is latency added to the message we wait for.
                std::hint::spin_loop();
            }
        }
    }
}

/// Rounds of the spins that wait for a ring record (`Endpoint::
/// spin_for_ring_record`, `Endpoint::spin_holding_lock`), each a pause and
/// a peek per ring: a few microseconds in all (docs/perf-notes.md,
/// "Measurements behind design choices", core).
const RING_SPIN_ROUNDS: u32 = 256;

/// Marks an application thread as waiting inside the library (in
/// `Shared::app_waiting`) until [`end`](WaitingMark::end) or its drop (also
/// when the wait unwinds). The count changes only under the endpoint lock,
/// so a load and a store change it: the mark's end, on the critical path of
/// every wait that succeeds, costs no locked instruction.
struct WaitingMark<'a> {
    shared: &'a Shared,
    marked: bool,
}

impl<'a> WaitingMark<'a> {
    /// Marks before the wait first looks at the state (the watchdog relies
    /// on it: see `start_watchdog`).
    fn new(shared: &'a Shared) -> WaitingMark<'a> {
        let _locked = shared.lock();
        Self::add(&shared.app_waiting, 1);
        WaitingMark { shared, marked: true }
    }

    /// Ends the mark; `_locked` proves the caller holds the endpoint lock.
    fn end(&mut self, _locked: &mut State) {
        if std::mem::take(&mut self.marked) {
            Self::add(&self.shared.app_waiting, u64::MAX); // -1
        }
    }

    /// Adds `delta` (wrapping) with a plain load and store: callers hold
    /// the endpoint lock, so no other change races with this one.
    fn add(counter: &AtomicU64, delta: u64) {
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(delta), Ordering::Relaxed);
    }
}

impl Drop for WaitingMark<'_> {
    fn drop(&mut self) {
        if self.marked {
            let _locked = self.shared.lock();
            Self::add(&self.shared.app_waiting, u64::MAX);
        }
    }
}
