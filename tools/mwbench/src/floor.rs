//! The physical limits shared-memory results are judged by, measured in the
//! same run: a two-process cache-line ping-pong over a shared page (op
//! `cacheline`, DESIGN §6's `shm_floor`), and single-thread `memcpy`
//! bandwidth (op `memcpy`).
//!
//! The ping-pong's second process is this executable started again with
//! `--cacheline-child PID FD ITERS`: it maps the parent's memory file
//! through `/proc/PID/fd/FD`, exactly as memwire ranks map each other's.
//! `unsafe` here is only the view of one mapped word as an atomic.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use mw_transport::shm::Segment;

use crate::points::{latency_row, Row};

fn word(seg: &Segment) -> &AtomicU64 {
    // SAFETY: the mapping is at least one page, page aligned (so 8-aligned),
    // lives as long as `seg`, and both processes access this word only
    // through atomics.
    unsafe { AtomicU64::from_ptr(seg.as_ptr().cast()) }
}

/// The child side: waits for odd values, answers with the next even one.
pub fn cacheline_child(pid: u32, fd: i32, iters: u64) {
    let seg = Segment::open_peer(pid, fd, 4096).expect("map the parent's page");
    let w = word(&seg);
    for i in 0..iters {
        while w.load(Ordering::Acquire) != 2 * i + 1 {
            std::hint::spin_loop();
        }
        w.store(2 * i + 2, Ordering::Release);
    }
}

/// Two-process ping-pong of one cache line: half the round trip.
pub fn pingpong_cacheline(iters: usize) -> Row {
    let warm = (iters / 10).max(100);
    let total = (iters + warm) as u64;
    let seg = Segment::create("mwbench-cacheline", 4096).expect("memory file");
    let exe = std::env::current_exe().expect("own path");
    let mut child = std::process::Command::new(exe)
        .args([
            "--cacheline-child",
            &std::process::id().to_string(),
            &seg.fd().expect("own segment").to_string(),
            &total.to_string(),
        ])
        .spawn()
        .expect("start the ping-pong partner");
    let w = word(&seg);
    let mut samples = Vec::with_capacity(iters);
    for i in 0..total {
        let t0 = Instant::now();
        w.store(2 * i + 1, Ordering::Release);
        while w.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
        if i >= warm as u64 {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    child.wait().expect("partner exit");
    latency_row("cacheline", "shm", 8, samples).emit()
}

/// Single-thread copy bandwidth between two warm buffers of `size` bytes.
pub fn bandwidth_memcpy(size: usize, total: usize) -> Row {
    let src = vec![7u8; size];
    let mut dst = vec![0u8; size];
    dst.copy_from_slice(&src);
    let count = total.div_ceil(size).max(1);
    let t0 = Instant::now();
    for _ in 0..count {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    let mbps = (count * size) as f64 / t0.elapsed().as_secs_f64() / 1e6;
    Row::bandwidth("memcpy", "shm", size, count, mbps).emit()
}
