//! The physical limits shared-memory results are judged by, measured in the
//! same run: a two-process cache-line ping-pong over a shared page (op
//! `shm_floor`), and `memcpy` (single-thread copy bandwidth; for `bibw` two
//! threads copying at once; for `overhead` the time of one copy).
//!
//! The ping-pong's second process is this executable started again with
//! `--shm-floor-child PID FD ITERS`: it maps the parent's memory file
//! through `/proc/PID/fd/FD`, exactly as memwire ranks map each other's.
//! `unsafe` here is only the view of one mapped word as an atomic. Owns
//! these measurements; must not print (the runner emits the rows).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use mw_transport::shm::Segment;

use crate::pingpong::warmup;
use crate::row::Row;

fn word(seg: &Segment) -> &AtomicU64 {
    // SAFETY: the mapping is at least one page, page aligned (so 8-aligned),
    // lives as long as `seg`, and both processes access this word only
    // through atomics.
    unsafe { AtomicU64::from_ptr(seg.as_ptr().cast()) }
}

/// The child side: waits for odd values, answers with the next even one.
pub fn shm_floor_child(pid: u32, fd: i32, iters: u64) {
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
pub fn pingpong_shm_floor(iters: usize) -> Row {
    let warm = warmup(iters);
    let total = (iters + warm) as u64;
    let seg = Segment::create("mwbench-shm-floor", 4096).expect("memory file");
    let exe = std::env::current_exe().expect("own path");
    let mut child = std::process::Command::new(exe)
        .args([
            "--shm-floor-child",
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
    Row::latency("pingpong", "shm_floor", "shm", 8, samples)
}

/// Copy bandwidth between warm buffers of `size` bytes: one thread
/// (`bandwidth`) or two at once, each with its own buffers (`bibw`, bytes
/// of both counted).
pub fn memcpy_bandwidth(bench: &str, size: usize, count: usize) -> Row {
    let threads = if bench == "bibw" { 2 } else { 1 };
    let copiers: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let src = vec![7u8; size];
                let mut dst = vec![0u8; size];
                dst.copy_from_slice(&src);
                let start = Instant::now();
                for _ in 0..count {
                    dst.copy_from_slice(std::hint::black_box(&src));
                    std::hint::black_box(&mut dst);
                }
                start.elapsed().as_secs_f64()
            })
        })
        .collect();
    let seconds = copiers.into_iter().map(|c| c.join().expect("copier")).fold(0.0, f64::max);
    Row::throughput(bench, "memcpy", "shm", size, count, (threads * count * size) as f64, seconds)
}

/// The time of one copy of `size` bytes between warm buffers (the shared
/// memory reference of `overhead`: a put into a mapped region is a copy).
pub fn memcpy_overhead(size: usize, iters: usize) -> Row {
    let src = vec![7u8; size];
    let mut dst = vec![0u8; size];
    let total = iters + warmup(iters);
    let mut samples = Vec::with_capacity(iters);
    for i in 0..total {
        let t0 = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        let us = t0.elapsed().as_secs_f64() * 1e6;
        if i >= total - iters {
            samples.push(us);
        }
    }
    Row::latency("overhead", "memcpy", "shm", size, samples)
}
