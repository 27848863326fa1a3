//! The hot-path budget, checked: after setup, sending and receiving make no
//! heap allocation. Alone in its binary because it installs a counting
//! global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;

use mw_transport::{UdpConfig, UdpTransport};

struct CountingAllocator;

thread_local! {
    /// Allocations made by this thread. Per thread so that the test
    /// harness's own threads cannot disturb the count; const-initialised
    /// with no destructor, so using it inside the allocator cannot recurse.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: forwards every call unchanged to the system allocator, which
// upholds the GlobalAlloc contract; the counter has no effect on memory.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Receives exactly `n` datagrams with `recv_one`, spinning (no Waiter, so
/// nothing but the transport runs between the counter reads).
fn spin_recv_one(rx: &mut UdpTransport, buf: &mut [u8], n: usize) {
    let mut got = 0;
    while got < n {
        if rx.recv_one(buf).unwrap().is_some() {
            got += 1;
        }
    }
}

#[test]
fn send_and_receive_do_not_allocate() {
    for cfg in [UdpConfig::default(), UdpConfig { gso: false, gro: false, ..UdpConfig::default() }] {
        let mut tx = UdpTransport::bind("127.0.0.1:0".parse().unwrap(), &cfg).unwrap();
        let mut rx = UdpTransport::bind("127.0.0.1:0".parse().unwrap(), &cfg).unwrap();
        let dst = rx.local_addr();
        let mut batch = rx.new_recv_batch();
        let payload = [7u8; 1000];
        let msgs: Vec<(SocketAddr, &[u8])> = (0..40).map(|_| (dst, &payload[..])).collect();
        let mut buf = vec![0u8; 2048];

        let before = allocations();
        for _ in 0..100 {
            tx.send_to(&payload, dst).unwrap();
            spin_recv_one(&mut rx, &mut buf, 1);
            tx.send_parts(&[&payload[..10], &payload[10..]], dst).unwrap();
            spin_recv_one(&mut rx, &mut buf, 1);
        }
        // GSO send, then GRO buffers split by recv_one (the stash path).
        assert_eq!(tx.send_batch(&msgs).unwrap(), msgs.len());
        spin_recv_one(&mut rx, &mut buf, msgs.len());
        // GSO send, then batch receive.
        assert_eq!(tx.send_batch(&msgs).unwrap(), msgs.len());
        let mut got = 0;
        while got < msgs.len() {
            got += rx.recv_batch(&mut batch).unwrap();
            assert!(batch.iter().all(|(_, p)| p == payload));
        }
        let allocations = allocations() - before;
        assert_eq!(allocations, 0, "hot path allocated (cfg {cfg:?})");
    }
}
