//! The endpoint lock: a mutual-exclusion lock whose unlock is a plain
//! release store.
//!
//! Owns: [`StateLock`] and its guard. Must not: know what it guards, or
//! park a waiter in the kernel (see below).
//!
//! Why not `std::sync::Mutex`: its unlock is an atomic swap (it must learn
//! whether a waiter sleeps in the futex), and a same-host message pays for
//! the lock twice on its critical path: the receiver takes the state to
//! pop the record, the sender to push its next one. A locked instruction
//! costs ~6 ns on these CPUs, a plain store ~0.5 ns (measured, tight loop:
//! std lock + unlock 12.4 ns, compare-exchange + store 6.4 ns). On the path
//! much of that overlaps the cache-line transfers: with the waiting mark
//! (`endpoint::WaitingMark`) made lock-free too, an 8-byte send_recv over
//! shared memory went from 0.180-0.182 to 0.174-0.177 µs per half round
//! trip (alternating runs).
//!
//! The price is that a waiter cannot sleep on the lock word (nothing would
//! wake it): it spins briefly, then yields the CPU between attempts. That
//! suits the endpoint lock: its holders never block in the kernel while
//! holding it (waits unlock before they sleep), so a waiter's turn comes
//! within one progress round, and yielding hands the CPU to a holder that
//! shares it. It is not fair; no caller relies on fairness.
//!
//! A holder that panics unlocks on unwind (the guard's drop), like a
//! poisoned `std` mutex whose poison every caller ignores.
//!
//! **Holding while spinning.** A thread about to spin for a same-host
//! record may keep the lock it took for its first look, so that the record
//! is taken without a second locked instruction on the message's critical
//! path (`Endpoint::spin_for_ring_record`). Such a holder must give the
//! lock up as soon as [`StateLock::is_wanted`] says another thread waits
//! for it: a waiter raises that flag before it spins, so it waits one
//! round of the holder's spin, not the whole spin. The flag is a hint
//! either way: one left raised costs a later spinner its head start, one
//! cleared by another waiter's success costs this waiter at most the
//! holder's spin (a few microseconds).
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// Attempts spent spinning before each yield while the lock is taken.
const SPINS_BEFORE_YIELD: u32 = 100;

/// A lock around a `T`; see the module docs.
pub(crate) struct StateLock<T> {
    locked: AtomicBool,
    /// A thread waits for the lock (module docs, "Holding while spinning").
    /// Beside `locked`: the spinning holder reads it from its own line.
    wanted: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to the value to one thread at a time
// (the guard exists only while `locked` is held by its thread), so sharing
// the lock between threads is sound exactly when moving the value is.
unsafe impl<T: Send> Sync for StateLock<T> {}
// SAFETY: as above; the lock owns its value.
unsafe impl<T: Send> Send for StateLock<T> {}

impl<T> StateLock<T> {
    pub(crate) fn new(value: T) -> StateLock<T> {
        StateLock { locked: AtomicBool::new(false), wanted: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Takes the lock, waiting (spinning, then yielding) while another
    /// thread holds it.
    #[inline]
    pub(crate) fn lock(&self) -> StateGuard<'_, T> {
        if let Some(guard) = self.try_lock() {
            return guard;
        }
        self.lock_contended()
    }

    #[cold]
    fn lock_contended(&self) -> StateGuard<'_, T> {
        loop {
            // Once per batch of attempts: a holder spinning for a record
            // lets go when it sees this (module docs).
            self.wanted.store(true, Ordering::Relaxed);
            for _ in 0..SPINS_BEFORE_YIELD {
                // Read-only while taken: the holder keeps its line.
                if !self.locked.load(Ordering::Relaxed) {
                    if let Some(guard) = self.try_lock() {
                        self.wanted.store(false, Ordering::Relaxed);
                        return guard;
                    }
                }
                std::hint::spin_loop();
            }
            std::thread::yield_now();
        }
    }

    /// Whether another thread waits for the lock: a holder that is only
    /// spinning must drop its guard (module docs, "Holding while spinning").
    #[inline]
    pub(crate) fn is_wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<StateGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            // Lazily: a guard built and dropped on failure would unlock the
            // holder's lock.
            .then(|| StateGuard { lock: self })
    }
}

/// Access to the locked value; unlocks on drop.
pub(crate) struct StateGuard<'a, T> {
    lock: &'a StateLock<T>,
}

impl<T> Deref for StateGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the
        // value exists while it lives (see `StateLock::try_lock`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for StateGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for StateGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: every access made under the lock happens before the next
        // holder's Acquire compare-exchange.
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threads_take_turns_and_no_increment_is_lost() {
        // Miri (`make miri`) checks every interleaving it runs for data
        // races; a few hundred turns are enough there and take seconds.
        let turns: u64 = if cfg!(miri) { 200 } else { 100_000 };
        let lock = Arc::new(StateLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..turns {
                        // Not atomic: a read-modify-write that would lose
                        // updates if two threads were inside at once.
                        let mut value = lock.lock();
                        let seen = *value;
                        std::hint::black_box(&seen);
                        *value = seen + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*lock.lock(), 4 * turns);
    }

    #[test]
    fn a_waiter_raises_wanted_and_a_holder_that_lets_go_lets_it_in() {
        let lock = Arc::new(StateLock::new(0u32));
        let guard = lock.lock();
        assert!(!lock.is_wanted(), "nobody waits yet");
        let waiter = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || *lock.lock() += 1)
        };
        // The holder spins as `Endpoint::spin_for_ring_record` does, letting
        // go when asked.
        let started = std::time::Instant::now();
        while !lock.is_wanted() {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "the waiter never asked");
            std::hint::spin_loop();
        }
        drop(guard);
        waiter.join().unwrap();
        assert_eq!(*lock.lock(), 1);
        assert!(!lock.is_wanted(), "the waiter that got the lock lowers the flag");
    }

    #[test]
    fn try_lock_fails_while_held_and_a_panicking_holder_unlocks() {
        let lock = Arc::new(StateLock::new(Vec::<u32>::new()));
        let guard = lock.lock();
        assert!(lock.try_lock().is_none());
        drop(guard);
        assert!(lock.try_lock().is_some());
        let held = Arc::clone(&lock);
        let panicked = std::thread::spawn(move || {
            let mut value = held.lock();
            value.push(1);
            panic!("a bug while holding the lock");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(*lock.lock(), [1]);
    }
}
