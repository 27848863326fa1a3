//! The physical limits shared-memory results are judged by, measured in the
//! same run: a two-process cache-line ping-pong over a shared page (op
//! `shm_floor`: one line bounced; `shm_floor_2lines`: each side's flag in its
//! own page, what a signal in the receiver's memory costs;
//! `shm_floor_ring`: 8-byte records through a pair of memwire's own rings and
//! nothing else, what any message costs at least), and `memcpy`
//! (single-thread copy bandwidth; for `bibw` two threads copying at once; for
//! `overhead` the time of one copy).
//!
//! The ping-pong's second process is this executable started again with
//! `--shm-floor-child PID FD ITERS LINES` (`LINES` 3: the rings): it maps the parent's memory file
//! through `/proc/PID/fd/FD`, exactly as memwire ranks map each other's.
//! `unsafe` here is only the view of one mapped word as an atomic (the rings
//! check their own accesses). Owns
//! these measurements; must not print (the runner emits the rows).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use std::sync::Arc;

use mw_transport::shm::ring::ring_len;
use mw_transport::shm::{Producer, RingView, Segment};

use crate::pingpong::warmup;
use crate::row::Row;

/// The word at `offset` (a multiple of 8 below the segment's length).
fn word(seg: &Segment, offset: usize) -> &AtomicU64 {
    assert!(offset % 8 == 0 && offset + 8 <= seg.len(), "word inside the page");
    // SAFETY: the mapping is page aligned and `offset` is 8-aligned and in
    // bounds (checked above), so the word is aligned and mapped; it lives as
    // long as `seg`, and both processes access it only through atomics.
    unsafe { AtomicU64::from_ptr(seg.as_ptr().add(offset).cast()) }
}

/// Bytes mapped for the ping-pong: one page per side, so that with
/// `lines == 2` each side waits on a word in its own page.
const FLOOR_LEN: usize = 2 * 4096;

/// Where the parent waits and where the child waits: the same word for the
/// one-line floor; for the two-line floor, words a page apart (like a
/// signal word in each rank's own memory).
fn words(seg: &Segment, lines: u64) -> (&AtomicU64, &AtomicU64) {
    let child_offset = if lines == 2 { 4096 } else { 0 };
    (word(seg, 0), word(seg, child_offset))
}

/// Moves the partner off its parent's CPUs when mwrun bound the parent
/// (it inherits that binding; two spinning processes on one CPU take turns
/// by the time slice, and the ping-pong would not end): onto the job's other
/// CPUs on this host (`MW_BACKGROUND_CPUS`, set by mwrun when it binds),
/// else all of the job's.
fn leave_parents_cpus() {
    let Ok(Some(job)) = mw_core::Config::from_env().map(|c| c.background_cpus) else { return };
    let inherited = mw_transport::wait::allowed_cpus().unwrap_or_default();
    let others: Vec<u32> = job.iter().copied().filter(|c| !inherited.contains(c)).collect();
    let _ = mw_transport::wait::confine_to(if others.is_empty() { &job } else { &others });
}

/// Spin-loop companion of the partner: every 2^20 calls it checks that
/// the parent (`pid`) still runs, and ends this process if not, so that a
/// parent that died mid-measurement leaves no process spinning forever.
struct ParentWatch {
    pid: u32,
    spins: u32,
}

impl ParentWatch {
    fn tick(&mut self) {
        self.spins = self.spins.wrapping_add(1);
        if self.spins % (1 << 20) == 0 && std::os::unix::process::parent_id() != self.pid {
            std::process::exit(1);
        }
        std::hint::spin_loop();
    }
}

/// The child side: waits for odd values, answers with the next even one.
pub fn shm_floor_child(pid: u32, fd: i32, iters: u64, lines: u64) {
    leave_parents_cpus();
    let mut watch = ParentWatch { pid, spins: 0 };
    if lines == RING_MODE {
        let seg = Arc::new(Segment::open_peer(pid, fd, ring_floor_len()).expect("map the parent's rings"));
        let (to_child, to_parent) = floor_rings(&seg);
        let (mut outbox, mut inbox) = Producer::paired(to_parent, to_child);
        let mut payload = [0u8; 8];
        for _ in 0..iters {
            while !inbox.pop(|m| payload.copy_from_slice(m)).expect("intact ring") {
                watch.tick();
            }
            while outbox.push(&[&payload]).is_err() {
                watch.tick();
            }
        }
        return;
    }
    let seg = Segment::open_peer(pid, fd, FLOOR_LEN).expect("map the parent's page");
    let (parent_waits, child_waits) = words(&seg, lines);
    for i in 0..iters {
        while child_waits.load(Ordering::Acquire) != 2 * i + 1 {
            watch.tick();
        }
        parent_waits.store(2 * i + 2, Ordering::Release);
    }
}

/// Starts this executable again as the ping-pong's second process, mapping
/// `seg` (its `LINES` argument is `mode`: 1, 2, or [`RING_MODE`]).
fn spawn_partner(seg: &Segment, total: u64, mode: u64) -> std::process::Child {
    let exe = std::env::current_exe().expect("own path");
    std::process::Command::new(exe)
        .args([
            "--shm-floor-child",
            &std::process::id().to_string(),
            &seg.fd().expect("own segment").to_string(),
            &total.to_string(),
            &mode.to_string(),
        ])
        .spawn()
        .expect("start the ping-pong partner")
}

/// Two-process ping-pong: half the round trip. `lines == 1` (`shm_floor`):
/// both sides bounce one word, so each half trip moves one cache line once.
/// `lines == 2` (`shm_floor_2lines`): each side waits on a word in its own
/// page that the other writes, as a put_signal's signal word in the
/// receiver's memory; the writer must first take the line from its
/// spinning reader, so each half trip costs two transfers.
pub fn pingpong_shm_floor(iters: usize, lines: u64) -> Row {
    let warm = warmup(iters);
    let total = (iters + warm) as u64;
    let seg = Segment::create("mwbench-shm-floor", FLOOR_LEN).expect("memory file");
    let mut child = spawn_partner(&seg, total, lines);
    let (parent_waits, child_waits) = words(&seg, lines);
    let mut samples = Vec::with_capacity(iters);
    for i in 0..total {
        let t0 = Instant::now();
        child_waits.store(2 * i + 1, Ordering::Release);
        while parent_waits.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
        if i >= warm as u64 {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    child.wait().expect("partner exit");
    let op = if lines == 2 { "shm_floor_2lines" } else { "shm_floor" };
    Row::latency("pingpong", op, "shm", 8, samples)
}

/// `lines` value of the ring floor (`shm_floor_ring`).
const RING_MODE: u64 = 3;
/// Data bytes of each floor ring: what an endpoint gives each inbound ring
/// with the default chunk size (room for two 256 KiB records).
const FLOOR_RING_CAP: usize = 1 << 20;

fn ring_floor_len() -> usize {
    2 * ring_len(FLOOR_RING_CAP)
}

/// The parent-to-child and child-to-parent rings of the ring floor.
fn floor_rings(seg: &Arc<Segment>) -> (RingView, RingView) {
    let view = |i: usize| {
        RingView::new(Arc::clone(seg), i * ring_len(FLOOR_RING_CAP), FLOOR_RING_CAP).expect("ring inside the segment")
    };
    (view(0), view(1))
}

/// Two-process ping-pong of 8-byte records through a pair of memwire rings
/// (`mw_transport::shm::ring`) and nothing else: no endpoint, lock,
/// matching or credit. What any message over shared memory costs at least
/// on this machine; `send_recv` over shared memory is judged against it.
pub fn pingpong_shm_floor_ring(iters: usize) -> Row {
    let warm = warmup(iters);
    let total = (iters + warm) as u64;
    let seg = Arc::new(Segment::create("mwbench-ring-floor", ring_floor_len()).expect("memory file"));
    let (to_child, to_parent) = floor_rings(&seg);
    to_child.init_salt();
    to_parent.init_salt();
    // Paired, as an endpoint's rings are: records carry acks, so this
    // ping-pong reuses the lap starts (`ring`'s "Lap jumps").
    let (mut outbox, mut inbox) = Producer::paired(to_child, to_parent);
    let mut child = spawn_partner(&seg, total, RING_MODE);
    let mut samples = Vec::with_capacity(iters);
    let mut payload = [7u8; 8];
    for i in 0..total {
        let t0 = Instant::now();
        while outbox.push(&[&payload]).is_err() {
            std::hint::spin_loop();
        }
        while !inbox.pop(|m| payload.copy_from_slice(m)).expect("intact ring") {
            std::hint::spin_loop();
        }
        if i >= warm as u64 {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    child.wait().expect("partner exit");
    Row::latency("pingpong", "shm_floor_ring", "shm", 8, samples)
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
