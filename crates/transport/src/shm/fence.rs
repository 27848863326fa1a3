//! A full memory barrier for the sleep/wake handshake between ranks,
//! cheaper than `fence(SeqCst)` on x86-64.
//!
//! Owns: [`full_fence`]. Must not: be used where an ordinary acquire or
//! release ordering would do; it exists only for the store-then-load
//! (Dekker) pattern of `mw-core`'s sleepers word, where nothing weaker
//! than a full barrier is correct.
//!
//! Why not `std::sync::atomic::fence(SeqCst)`: on x86-64 it is `mfence`,
//! which waits for the store buffer to drain *and* serializes later loads
//! against it, several times what a `lock`-prefixed instruction costs in a
//! tight loop of store, barrier, load (measurements: docs/perf-notes.md,
//! "full fence"). Every same-host message pays one on each side (the
//! sender after publishing the record, the receiver after freeing its
//! slots), a direct put_signal one. The saving is whole only where the stores before the barrier are
//! already in this core's cache (the receiver's freed slots): where one
//! still waits for its line (the sender's record), either barrier waits
//! for that transfer.
//!
//! Any `lock`-prefixed instruction is a full barrier on x86 (Intel SDM
//! vol. 3A, 9.2.2: "reads and writes cannot be reordered with locked
//! instructions"; AMD APM vol. 2, 7.4.2 says the same), which is also what
//! crossbeam-epoch relies on to replace `mfence` with `lock cmpxchg` when
//! pinning.

/// Orders every load and store before the call before every load and
/// store after it, for this thread against all others: what
/// `fence(Ordering::SeqCst)` does, cheaper on x86-64.
#[inline(always)]
pub fn full_fence() {
    // Under Miri (no inline assembly) the portable fence stands in: it is
    // the semantics the assembly implements, so Miri checks callers
    // against exactly what they rely on.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `lock or` of zero into the 4 bytes at the stack pointer
    // rewrites them with their own value atomically: nothing observable
    // changes, even if another thread shares that stack word (the RMW is
    // atomic, so no concurrent store is lost). Without `nomem`, the
    // compiler treats the block as reading and writing any memory, so it
    // moves no load or store across it: with the hardware barrier of the
    // locked instruction, that is a sequentially consistent fence. It only
    // clobbers the flags, which `asm!` assumes unless told otherwise.
    unsafe {
        std::arch::asm!("lock or dword ptr [rsp], 0", options(nostack));
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::full_fence;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The store-buffering litmus test: each thread stores its flag, fences,
    /// then loads the other's. With a full barrier at least one of them
    /// must see the other's store. Without one, x86 lets both read the old
    /// value: on this 2-core machine a compiler-only fence in its place
    /// fails within the first few thousand rounds. The threads start each
    /// round together by spinning on a shared counter, so their stores
    /// overlap in time.
    #[test]
    fn store_buffering_never_lets_both_threads_miss() {
        // Miri (`make miri`) explores weak-memory outcomes itself; a few
        // hundred rounds are enough there.
        const ROUNDS: u64 = if cfg!(miri) { 300 } else { 200_000 };
        let flags = [AtomicU64::new(0), AtomicU64::new(0)];
        let seen = [AtomicU64::new(0), AtomicU64::new(0)];
        let go = AtomicU64::new(0);
        let finished = [AtomicU64::new(0), AtomicU64::new(0)];
        let mut both_missed = 0u64;
        std::thread::scope(|scope| {
            let (flags, seen, go, finished) = (&flags, &seen, &go, &finished);
            scope.spawn(move || {
                for round in 1..=ROUNDS {
                    // Spins first (the rounds must overlap), then yields: with
                    // other tests on the same two CPUs the partner may not be
                    // running, and pure spinning took ~2 minutes.
                    let backoff = crossbeam_utils::Backoff::new();
                    while go.load(Ordering::Acquire) < round {
                        backoff.snooze();
                    }
                    flags[1].store(round, Ordering::Relaxed);
                    full_fence();
                    seen[1].store(flags[0].load(Ordering::Relaxed), Ordering::Relaxed);
                    finished[1].store(round, Ordering::Release);
                }
            });
            for round in 1..=ROUNDS {
                go.store(round, Ordering::Release);
                flags[0].store(round, Ordering::Relaxed);
                full_fence();
                seen[0].store(flags[1].load(Ordering::Relaxed), Ordering::Relaxed);
                let backoff = crossbeam_utils::Backoff::new();
                while finished[1].load(Ordering::Acquire) < round {
                    backoff.snooze();
                }
                if seen[0].load(Ordering::Relaxed) < round && seen[1].load(Ordering::Relaxed) < round {
                    both_missed += 1;
                }
            }
        });
        assert_eq!(both_missed, 0, "rounds where both threads missed the other's store");
    }
}
