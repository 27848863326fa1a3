//! The hot-path budget (STYLE.md habit 8): once warmed up, an in-order
//! single-packet message goes in and out of the protocol, acks included,
//! without touching the heap. Checked with a counting global allocator, so
//! this file is its own test binary with a single test. Only the test's own
//! thread counts: the harness's main thread allocates now and then while it
//! waits for the test (4 allocations in 2 runs of 30, never in the
//! protocol, whose clock here is synthetic and whose path is the same every
//! run).

use mw_proto::time::Instant;
use mw_proto::{Config, Endpoint};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's allocations count (a `const` `Cell`: reading
    /// it never allocates, so the allocator may).
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the counter is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from `System` with `layout`; forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_small_messages_do_not_allocate() {
    // With and without packet authentication (the MAC is computed in place).
    let auth = Config { auth: Some(mw_proto::AuthKey::from_job_key(&[3; 16])), ..Config::default() };
    for config in [Config::default(), auth] {
        steady_state(config);
    }
}

fn steady_state(config: Config) {
    let mut a = Endpoint::new(config.clone(), 7, 0, 0xa, 2);
    let mut b = Endpoint::new(config, 7, 1, 0xb, 2);
    let mut buf = vec![0u8; 1472];
    let mut delivered = 0u64;
    let mut acked = 0u64;
    let mut t = 0u64;
    let mut step = |a: &mut Endpoint, b: &mut Endpoint| {
        t += 1_000;
        let now = Instant::from_nanos(t);
        a.submit(now, 1, &[b"8 bytes!"]).unwrap();
        while let Some(tx) = a.poll_transmit(now, &mut buf) {
            let _ = b.handle_datagram(now, &buf[..tx.len], &mut |_, m| delivered += m.len() as u64);
        }
        for ep in [&mut *a, &mut *b] {
            if ep.poll_timeout().is_some_and(|d| d <= now) {
                ep.handle_timeout(now);
            }
        }
        while let Some(tx) = b.poll_transmit(now, &mut buf) {
            let _ = a.handle_datagram(now, &buf[..tx.len], &mut |_, _| {});
        }
        while a.poll_event().is_some() {
            acked += 1;
        }
    };
    for _ in 0..20_000 {
        step(&mut a, &mut b);
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTED.set(true);
    for _ in 0..20_000 {
        step(&mut a, &mut b);
    }
    COUNTED.set(false);
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(delivered, 40_000 * 8);
    assert!(acked > 0);
    assert_eq!(allocations, 0, "{allocations} heap allocations in 20000 steady-state messages");
}
