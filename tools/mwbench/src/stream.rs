//! Throughput of memwire's operations: unidirectional bandwidth with a
//! window of outstanding operations (`bandwidth`), both directions at once
//! (`bibw`), small-message rate (`rate`), initiator overhead (`overhead`:
//! how long a nonblocking call takes to return, MBCF's send cost),
//! bandwidth under injected loss (`loss`), and overlap of a receive with
//! computation (`overlap`).
//!
//! Owns those measurements; must not print (the runner emits the rows).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use mw_core::{Access, AtomicOp, AtomicWidth, Endpoint, Handle, RegionKey, Signal, SignalOp};
use mw_transport::fault::FaultConfig;

use crate::harness::{Adjust, Job};
use crate::plan::Point;
use crate::row::{median, median_p99, Row};

/// Keeps at most `window` handles outstanding: waits for the oldest first.
fn push_windowed<'a>(window: &mut VecDeque<Handle<'a>>, limit: usize, h: Handle<'a>) {
    if window.len() >= limit {
        window.pop_front().expect("window").wait().expect("operation");
    }
    window.push_back(h);
}

fn drain(window: VecDeque<Handle<'_>>) {
    mw_core::wait_all(window).expect("operation");
}

/// Rank 0 issues `count` puts of `size` bytes to rank 1, `window` outstanding;
/// seconds until all are complete at the target.
fn put_stream(ep: &Endpoint, key: RegionKey, peer: u32, data: &[u8], count: usize, window: usize) {
    let mut outstanding = VecDeque::with_capacity(window);
    for _ in 0..count {
        push_windowed(&mut outstanding, window, ep.put_nb(peer, key, 0, data).expect("put_nb"));
    }
    drain(outstanding);
}

/// [`put_stream`] with `put_nb_lent`: each put's bytes are read from `data`
/// as they leave (what the C API's `mw_put_nb` does), not copied at the call.
#[allow(unsafe_code)]
fn put_lent_stream(ep: &Endpoint, key: RegionKey, peer: u32, data: &[u8], count: usize, window: usize) {
    let mut outstanding = VecDeque::with_capacity(window);
    for _ in 0..count {
        // SAFETY: `data` is borrowed for this whole function and every handle
        // is waited on before it returns (`push_windowed`, `drain`).
        let h = unsafe { ep.put_nb_lent(peer, key, 0, data) }.expect("put_nb_lent");
        push_windowed(&mut outstanding, window, h);
    }
    drain(outstanding);
}

/// `count` gets of `size` bytes from `peer`, between `window / 2` and
/// `window` outstanding. A handle borrows its destination, so the buffers
/// are two halves that take turns: one half is reissued while the other is
/// in flight (draining the whole window before issuing more would empty the
/// pipe once per batch). A window of 1 issues one get at a time.
fn get_stream(ep: &Endpoint, key: RegionKey, peer: u32, bufs: &mut [Vec<u8>], count: usize, window: usize) {
    let in_use = window.min(bufs.len());
    let bufs = &mut bufs[..in_use];
    if bufs.len() < 2 {
        for _ in 0..count {
            ep.get(peer, key, 0, &mut bufs[0]).expect("get");
        }
        return;
    }
    let half = bufs.len() / 2;
    let (first, second) = bufs.split_at_mut(half);
    let mut issued = 0;
    let mut in_second = Vec::new();
    while issued < count {
        let n = (count - issued).min(first.len());
        let in_first: Vec<_> = first.iter_mut().take(n).map(|b| ep.get_nb(peer, key, 0, b).expect("get_nb")).collect();
        issued += n;
        mw_core::wait_all(in_second).expect("get");
        let n = (count - issued).min(second.len());
        in_second = second.iter_mut().take(n).map(|b| ep.get_nb(peer, key, 0, b).expect("get_nb")).collect();
        issued += n;
        mw_core::wait_all(in_first).expect("get");
    }
    mw_core::wait_all(in_second).expect("get");
}

/// `count` tagged sends of `size` bytes to `peer`, `window` outstanding,
/// on handed-over buffers (`isend_owned`: exposed in place, no copy).
fn send_stream(ep: &Endpoint, peer: u32, spare: &mut Vec<Vec<u8>>, count: usize, window: usize) {
    let mut outstanding = VecDeque::with_capacity(window);
    for _ in 0..count {
        if outstanding.len() >= window {
            let h: mw_core::OwnedSend<'_> = outstanding.pop_front().expect("window");
            let (buf, result) = h.wait();
            result.expect("send");
            spare.push(buf);
        }
        let buf = spare.pop().expect("a free buffer");
        outstanding.push_back(ep.isend_owned(peer, 2, buf).expect("isend_owned"));
    }
    for h in outstanding {
        let (buf, result) = h.wait();
        result.expect("send");
        spare.push(buf);
    }
}

/// `count` receives of `size` bytes from `peer`, `window` posted at all
/// times (a new one as soon as the oldest completes, as the sender keeps
/// `window` in flight), into handed-over buffers (`irecv_owned`: received
/// in place, no staging).
fn recv_stream(ep: &Endpoint, peer: u32, bufs: &mut Vec<Vec<u8>>, count: usize, window: usize) {
    let mut posted = VecDeque::with_capacity(window);
    for _ in 0..count {
        if posted.len() >= window {
            let h: mw_core::OwnedRecv<'_> = posted.pop_front().expect("window");
            let (buf, result) = h.wait();
            result.expect("recv");
            bufs.push(buf);
        }
        let buf = bufs.pop().expect("a free buffer");
        posted.push_back(ep.irecv_owned(peer, 2, buf).expect("irecv_owned"));
    }
    for h in posted {
        let (buf, result) = h.wait();
        result.expect("recv");
        bufs.push(buf);
    }
}

/// Seconds rank 0 takes to move `count` messages of `size` bytes to rank 1
/// with `op` (put, get, send_recv), `window` outstanding, ending when the
/// last is complete at the target (send_recv: when the receiver's ack arrives).
fn one_way(ep: &Endpoint, op: &str, size: usize, count: usize, window: usize) -> f64 {
    let region = ep.alloc_symmetric(size.max(8), Access::ALL).expect("alloc");
    let key = region.key();
    // Buffers are allocated and touched before the clock starts, as the
    // memcpy baseline's are: a first write into fresh pages costs a page
    // fault per 4 KiB, which is not what is measured here.
    let data = vec![5u8; size];
    let mut bufs: Vec<Vec<u8>> = (0..window).map(|_| vec![1u8; size]).collect();
    ep.barrier().expect("barrier");
    let mut seconds = 0.0;
    let t0 = Instant::now();
    match (op, ep.rank()) {
        ("put", 0) => put_stream(ep, key, 1, &data, count, window),
        ("put_lent", 0) => put_lent_stream(ep, key, 1, &data, count, window),
        ("get", 0) => get_stream(ep, key, 1, &mut bufs, count, window),
        ("send_recv", 0) => {
            send_stream(ep, 1, &mut bufs, count, window);
            ep.recv(1, 3, &mut [0u8; 1]).expect("ack");
        }
        ("send_recv", 1) => {
            recv_stream(ep, 0, &mut bufs, count, window);
            ep.send(0, 3, &[1]).expect("ack");
        }
        _ => {}
    }
    if ep.rank() == 0 {
        seconds = t0.elapsed().as_secs_f64();
    }
    ep.barrier().expect("barrier");
    seconds
}

/// Unidirectional bandwidth of the point's op (`bench` is `bandwidth`, or
/// `loss` with `loss` percent of datagrams dropped on every rank's send path).
pub fn bandwidth(job: &Job, p: &Point) -> Vec<Row> {
    let (bench, op, transport, size, count, window, loss_pct) =
        (p.bench, p.op, p.transport, p.size, p.count, p.window, p.loss);
    let adjust: Option<Adjust> = loss_pct.map(|pct| {
        let fault = FaultConfig { drop: pct / 100.0, seed: 7, ..FaultConfig::default() };
        Arc::new(move |c: &mut mw_core::Config| c.fault = Some(fault)) as Adjust
    });
    let seconds = job.pair(transport, adjust, move |ep| one_way(ep, op, size, count, window));
    seconds
        .map(|s| {
            let mut row = Row::throughput(bench, op, transport, size, count, (count * size) as f64, s);
            row.loss_pct = loss_pct;
            row.launched(job.launch())
        })
        .into_iter()
        .collect()
}

/// Bidirectional bandwidth: both ranks stream `count` messages of `size`
/// bytes to each other at once; bytes of both directions over rank 0's time.
pub fn bibw(
    job: &Job,
    op: &'static str,
    transport: &'static str,
    size: usize,
    count: usize,
    window: usize,
) -> Vec<Row> {
    let seconds = job.pair(transport, None, move |ep| {
        let region = ep.alloc_symmetric(size.max(8), Access::ALL).expect("alloc");
        let key = region.key();
        let peer = 1 - ep.rank();
        // Allocated and touched before the clock starts (see `one_way`).
        let data = vec![5u8; size];
        let mut bufs: Vec<Vec<u8>> = (0..window).map(|_| vec![1u8; size]).collect();
        let mut send_bufs: Vec<Vec<u8>> = (0..window).map(|_| data.clone()).collect();
        ep.barrier().expect("barrier");
        let t0 = Instant::now();
        if op == "put" {
            put_stream(ep, key, peer, &data, count, window);
        } else {
            // Receives posted by a helper thread would need a second endpoint
            // handle; instead alternate windows of sends and receives, on
            // handed-over buffers as `bandwidth` streams them (`isend_owned`,
            // `irecv_owned`: in place, no copy; `isend`/`irecv` copy, see
            // memwire's docs).
            let mut done = 0;
            while done < count {
                let batch = (count - done).min(window);
                let recvs: Vec<_> =
                    bufs.drain(..batch).map(|b| ep.irecv_owned(peer, 2, b).expect("irecv_owned")).collect();
                let sends: Vec<_> =
                    send_bufs.drain(..batch).map(|b| ep.isend_owned(peer, 2, b).expect("isend_owned")).collect();
                for s in sends {
                    let (buf, result) = s.wait();
                    result.expect("send");
                    send_bufs.push(buf);
                }
                for r in recvs {
                    let (buf, result) = r.wait();
                    result.expect("recv");
                    bufs.push(buf);
                }
                done += batch;
            }
        }
        ep.barrier().expect("barrier");
        t0.elapsed().as_secs_f64()
    });
    seconds
        .map(|s| {
            Row::throughput("bibw", op, transport, size, count, (2 * count * size) as f64, s).launched(job.launch())
        })
        .into_iter()
        .collect()
}

/// Message rate: `count` operations of `size` bytes from rank 0 to rank 1,
/// `window` outstanding (put, fetch_add, send_recv, am).
pub fn rate(
    job: &Job,
    op: &'static str,
    transport: &'static str,
    size: usize,
    count: usize,
    window: usize,
) -> Vec<Row> {
    let seconds = job.pair(transport, None, move |ep| {
        let region = ep.alloc_symmetric(size.max(8), Access::ALL).expect("alloc");
        let key = region.key();
        if op == "am" {
            ep.register_handler(2, |_ctx, _m| {}).expect("register");
        }
        let data = vec![5u8; size];
        let mut bufs: Vec<Vec<u8>> = (0..window).map(|_| vec![1u8; size]).collect();
        ep.barrier().expect("barrier");
        let t0 = Instant::now();
        match (op, ep.rank()) {
            ("put", 0) => put_stream(ep, key, 1, &data, count, window),
            ("fetch_add", 0) => {
                let mut outstanding = VecDeque::with_capacity(window);
                for _ in 0..count {
                    let h = ep.atomic_nb(1, key, 0, AtomicOp::Add, AtomicWidth::U64, 1, 0, true).expect("fetch_add");
                    push_windowed(&mut outstanding, window, h);
                }
                drain(outstanding);
            }
            ("am", 0) => {
                let data = vec![6u8; size];
                let mut outstanding = VecDeque::with_capacity(window);
                for _ in 0..count {
                    if outstanding.len() >= window {
                        let h: mw_core::AmHandle<'_> = outstanding.pop_front().expect("window");
                        h.wait().expect("am");
                    }
                    outstanding.push_back(ep.am_request_nb(1, 2, &[], &data).expect("am_request_nb"));
                }
                for h in outstanding {
                    h.wait().expect("am");
                }
            }
            ("send_recv", 0) => {
                send_stream(ep, 1, &mut bufs, count, window);
                ep.recv(1, 3, &mut [0u8; 1]).expect("ack");
            }
            ("send_recv", 1) => {
                recv_stream(ep, 0, &mut bufs, count, window);
                ep.send(0, 3, &[1]).expect("ack");
            }
            _ => {}
        }
        let seconds = t0.elapsed().as_secs_f64();
        ep.barrier().expect("barrier");
        if op == "am" {
            ep.unregister_handler(2);
        }
        seconds
    });
    seconds.map(|s| Row::rate(op, transport, size, count, s).launched(job.launch())).into_iter().collect()
}

/// Initiator overhead: how long `put_nb` / `put_signal_nb` / `isend` of
/// `size` bytes takes to return, per call (median, p99). Completion is
/// waited for, untimed, every `window` calls, so queues never fill.
pub fn overhead(
    job: &Job,
    op: &'static str,
    transport: &'static str,
    size: usize,
    iters: usize,
    window: usize,
) -> Vec<Row> {
    let samples = job.pair(transport, None, move |ep| {
        let region = ep.alloc_symmetric(64 + size.max(8), Access::ALL).expect("alloc");
        let key = region.key();
        let data = vec![7u8; size];
        let mut samples = Vec::with_capacity(iters);
        let total = iters + crate::pingpong::warmup(iters);
        ep.barrier().expect("barrier");
        if ep.rank() == 0 {
            let mut outstanding = Vec::with_capacity(window);
            for i in 0..total {
                let t0 = Instant::now();
                let h = match op {
                    "put" => ep.put_nb(1, key, 64, &data),
                    "put_signal" => {
                        let sig = Signal { key, offset: 0, op: SignalOp::Set, value: i as u64 };
                        ep.put_signal_nb(1, key, 64, &data, sig)
                    }
                    _ => ep.isend(1, 4, &data),
                }
                .expect("nonblocking call");
                let us = t0.elapsed().as_secs_f64() * 1e6;
                if i >= total - iters {
                    samples.push(us);
                }
                outstanding.push(h);
                if outstanding.len() == window {
                    mw_core::wait_all(outstanding.drain(..)).expect("completion");
                }
            }
            mw_core::wait_all(outstanding).expect("completion");
        } else if ep.rank() == 1 && op == "send_recv" {
            let mut buf = vec![0u8; size];
            for _ in 0..total {
                ep.recv(0, 4, &mut buf).expect("recv");
            }
        }
        ep.barrier().expect("barrier");
        samples
    });
    samples.map(|s| Row::latency("overhead", op, transport, size, s).launched(job.launch())).into_iter().collect()
}

/// `units` of dependent integer work (the "computation" overlapped with
/// communication); returns a value so it is not optimized away.
fn compute(units: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..units {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

/// Overlap of a `size`-byte transfer with computation (SR8000 Fig. 3) on
/// the rank that computes: the transfer alone (`comm`), a computation of
/// about the same length alone (`comp`), then the transfer started before the
/// computation and waited after it (`both`). Overlap = (comm + comp − both) /
/// min(comm, comp): 100% when the transfer hides entirely behind the work.
/// `op` names who computes: `send_recv` the receiver (irecv, compute, wait;
/// the sender sends), `isend` the sender (isend, compute, wait; the receiver
/// receives), `put` the initiator of a put (put_nb, compute, wait).
/// With threads as ranks the progress thread is on; under mwrun the job's
/// progress mode applies (`MW_PROGRESS`), recorded in the row.
pub fn overlap(job: &Job, op: &'static str, size: usize, reps: usize) -> Vec<Row> {
    let adjust: Option<Adjust> = match job {
        Job::Threads => Some(Arc::new(|cfg| cfg.progress = mw_core::ProgressMode::Thread)),
        Job::Process(_) => None,
    };
    let progress = match job {
        Job::Threads => "thread".to_string(),
        Job::Process(_) => std::env::var("MW_PROGRESS").unwrap_or_else(|_| "auto".into()),
    };
    let times = job.pair("udp", adjust, move |ep| {
        let (mut comm, mut comp, mut both) = (Vec::new(), Vec::new(), Vec::new());
        let data = vec![6u8; size];
        let mut buf = vec![0u8; size];
        let region = (op == "put").then(|| ep.alloc_symmetric(size.max(8), Access::ALL).expect("alloc"));
        // Rank 0 computes; rank 1 is the other side of the transfer.
        let transfer = |compute_units: Option<u64>, buf: &mut [u8]| -> f64 {
            let t0 = Instant::now();
            match op {
                "send_recv" => {
                    let h = ep.irecv(1, 1, buf).expect("irecv");
                    compute_units.map(compute);
                    h.wait().expect("recv");
                }
                "isend" => {
                    let h = ep.isend(1, 1, &data).expect("isend");
                    compute_units.map(compute);
                    h.wait().expect("isend");
                }
                _ => {
                    let h = ep.put_nb(1, region.as_ref().expect("put's region").key(), 0, &data).expect("put_nb");
                    compute_units.map(compute);
                    h.wait().expect("put");
                }
            }
            t0.elapsed().as_secs_f64() * 1e6
        };
        for phase in 0..2 {
            let mut units = None;
            if phase == 1 && ep.rank() == 0 {
                // Calibrate the work to last about as long as the transfer.
                let target = median(comm.clone());
                let probe = 1u64 << 20;
                let t0 = Instant::now();
                compute(probe);
                let per_unit = t0.elapsed().as_secs_f64() * 1e6 / probe as f64;
                let n = (target / per_unit.max(1e-6)) as u64;
                units = Some(n);
                for _ in 0..reps {
                    let t0 = Instant::now();
                    compute(n);
                    comp.push(t0.elapsed().as_secs_f64() * 1e6);
                }
            }
            for _ in 0..reps {
                // The other side is ready before the clock starts (a posted
                // receive, a waiting sender), so `comm` is the transfer alone.
                if ep.rank() == 0 {
                    ep.barrier().expect("barrier");
                    let us = transfer(units, &mut buf);
                    if phase == 0 {
                        comm.push(us)
                    } else {
                        both.push(us)
                    }
                } else {
                    match op {
                        "send_recv" => {
                            ep.barrier().expect("barrier");
                            ep.send(0, 1, &data).expect("send");
                        }
                        "isend" => {
                            let h = ep.irecv(0, 1, &mut buf).expect("irecv");
                            ep.barrier().expect("barrier");
                            h.wait().expect("recv");
                        }
                        _ => ep.barrier().expect("barrier"),
                    }
                }
            }
        }
        ep.barrier().expect("barrier");
        drop(region);
        (median(comm), median(comp), both)
    });
    let Some((comm, comp, both_samples)) = times else { return Vec::new() };
    let (both, both_p99) = median_p99(both_samples);
    let pct = 100.0 * (comm + comp - both) / comm.min(comp).max(1e-9);
    let mut row = Row::new("overlap", op, "udp", size);
    row.iters = reps;
    row.median_us = Some(both);
    row.p99_us = Some(both_p99);
    for (k, v) in [("comm_us", comm), ("comp_us", comp), ("both_us", both), ("overlap_pct", pct)] {
        row.extra.insert(k.into(), serde_json::json!(v.round()));
    }
    row.extra.insert("progress".into(), serde_json::json!(progress));
    vec![row.launched(job.launch())]
}
