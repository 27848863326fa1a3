//! Random operations and the model they are checked against.
//!
//! Owns: the region layout, [`Model`] (what this rank has written to every
//! target), and [`Worker::step`], one random operation whose result is
//! checked on the spot (gets against the model, fetching atomics against the
//! exact old value). Must not: synchronize with other ranks (main.rs does, at
//! phase ends).
//!
//! Ownership makes every byte predictable: in every rank's region, slice `q`
//! and counter/signal word `q` are written only by rank `q`, so each rank's
//! model of "its" bytes everywhere is exact, and the others check it against
//! a digest at phase ends.

use std::hash::{Hash, Hasher};

use memwire::{wait_all, AtomicWidth, Endpoint, RegionKey, Signal, SignalOp};
use rand::rngs::SmallRng;
use rand::Rng;

/// Byte offsets in the symmetric region of a job of `n` ranks.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub n: u32,
    pub slice: usize,
}

impl Layout {
    pub fn slice(&self, q: u32) -> u64 {
        q as u64 * self.slice as u64
    }
    pub fn counter(&self, q: u32) -> u64 {
        self.data_len() as u64 + 8 * q as u64
    }
    pub fn signal(&self, q: u32) -> u64 {
        self.data_len() as u64 + 8 * (self.n + q) as u64
    }
    /// One word on rank 0 that every rank adds to.
    pub fn global(&self) -> u64 {
        self.data_len() as u64 + 16 * self.n as u64
    }
    pub fn data_len(&self) -> usize {
        self.n as usize * self.slice
    }
    pub fn region_len(&self) -> usize {
        self.global() as usize + 8
    }
}

/// What this rank has written, per target rank.
#[derive(Debug)]
pub struct Model {
    /// Contents of our slice at each target.
    pub slices: Vec<Vec<u8>>,
    /// Our counter word at each target.
    pub counters: Vec<u64>,
    /// put_signal count into our signal word at each target.
    pub signals: Vec<u64>,
    /// Adds to the global word on rank 0.
    pub global_adds: u64,
}

impl Model {
    pub fn new(layout: Layout) -> Model {
        let n = layout.n as usize;
        Model { slices: vec![vec![0; layout.slice]; n], counters: vec![0; n], signals: vec![0; n], global_adds: 0 }
    }
}

/// Digest of a slice, as exchanged at phase ends.
pub fn digest(bytes: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// The operation kinds, for counting.
pub const KINDS: [&str; 14] = [
    "put",
    "get",
    "fetch_add",
    "add",
    "compare_swap",
    "compare_swap_fail",
    "swap",
    "atomic_load",
    "put_signal",
    "put_strided",
    "get_strided",
    "put_iov",
    "put_burst",
    "global_add",
];

/// One rank's random operation stream.
pub struct Worker<'a> {
    pub ep: &'a Endpoint,
    pub key: RegionKey,
    pub layout: Layout,
    pub me: u32,
    pub rng: SmallRng,
    pub model: Model,
    pub counts: [u64; KINDS.len()],
    pub bytes_checked: u64,
}

impl Worker<'_> {
    /// A length for a transfer inside a slice: mostly small, sometimes the whole slice.
    fn len(&mut self) -> usize {
        let max = self.layout.slice;
        match self.rng.gen_range(0..100) {
            0..=59 => self.rng.gen_range(1..=64.min(max)),
            60..=89 => self.rng.gen_range(1..=4096.min(max)),
            _ => self.rng.gen_range(1..=max),
        }
    }

    /// A random range `(offset, len)` inside our slice.
    fn range(&mut self) -> (usize, usize) {
        let len = self.len();
        (self.rng.gen_range(0..=self.layout.slice - len), len)
    }

    fn target(&mut self) -> u32 {
        self.rng.gen_range(0..self.layout.n)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.rng.fill(&mut v[..]);
        v
    }

    /// Runs one random operation and checks its result.
    pub fn step(&mut self) -> memwire::Result<()> {
        let (ep, key, l, me) = (self.ep, self.key, self.layout, self.me);
        let t = self.target();
        let kind = match self.rng.gen_range(0..100) {
            0..=24 => 0,
            25..=44 => 1,
            45..=49 => 2,
            50..=53 => 3,
            54..=56 => 4,
            57..=58 => 5,
            59..=61 => 6,
            62..=63 => 7,
            64..=70 => 8,
            71..=76 => 9,
            77..=81 => 10,
            82..=87 => 11,
            88..=93 => 12,
            _ => 13,
        };
        self.counts[kind] += 1;
        match KINDS[kind] {
            "put" => {
                let (off, len) = self.range();
                let data = self.bytes(len);
                ep.put(t, key, l.slice(me) + off as u64, &data)?;
                self.model.slices[t as usize][off..off + len].copy_from_slice(&data);
            }
            "get" => {
                let (off, len) = self.range();
                let mut out = vec![0u8; len];
                ep.get(t, key, l.slice(me) + off as u64, &mut out)?;
                let want = &self.model.slices[t as usize][off..off + len];
                assert!(out == want, "get from rank {t} of {len} bytes at slice offset {off} differs from the model");
                self.bytes_checked += len as u64;
            }
            "fetch_add" => {
                let v = self.rng.gen_range(1..1000);
                let old = ep.fetch_add_u64(t, key, l.counter(me), v)?;
                assert_eq!(old, self.model.counters[t as usize], "fetch_add on rank {t}: old value");
                self.model.counters[t as usize] += v;
            }
            "add" => {
                let v = self.rng.gen_range(1..1000);
                ep.add_u64(t, key, l.counter(me), v)?;
                self.model.counters[t as usize] += v;
            }
            "compare_swap" => {
                let want = self.model.counters[t as usize];
                let new = self.rng.gen::<u64>() >> 8;
                let old = ep.compare_swap_u64(t, key, l.counter(me), want, new)?;
                assert_eq!(old, want, "compare_swap on rank {t}: old value");
                self.model.counters[t as usize] = new;
            }
            "compare_swap_fail" => {
                let have = self.model.counters[t as usize];
                let old = ep.compare_swap_u64(t, key, l.counter(me), have.wrapping_add(1), 7)?;
                assert_eq!(old, have, "failing compare_swap on rank {t} must change nothing");
            }
            "swap" => {
                let new = self.rng.gen::<u64>() >> 8;
                let old = ep.swap_u64(t, key, l.counter(me), new)?;
                assert_eq!(old, self.model.counters[t as usize], "swap on rank {t}: old value");
                self.model.counters[t as usize] = new;
            }
            "atomic_load" => {
                let v = ep.atomic_load(t, key, l.counter(me), AtomicWidth::U64)?;
                assert_eq!(v, self.model.counters[t as usize], "atomic_load on rank {t}");
            }
            "put_signal" => {
                let (off, len) = self.range();
                let data = self.bytes(len);
                let signal = Signal { key, offset: l.signal(me), op: SignalOp::Add, value: 1 };
                ep.put_signal(t, key, l.slice(me) + off as u64, &data, signal)?;
                self.model.slices[t as usize][off..off + len].copy_from_slice(&data);
                self.model.signals[t as usize] += 1;
            }
            "put_strided" | "get_strided" => {
                let elem = self.rng.gen_range(1..=16usize);
                let stride = elem + self.rng.gen_range(0..=32usize);
                let count = self.rng.gen_range(1..=(l.slice - elem) / stride + 1).min(256);
                let extent = (count - 1) * stride + elem;
                let off = self.rng.gen_range(0..=l.slice - extent);
                let model = &mut self.model.slices[t as usize];
                if KINDS[kind] == "put_strided" {
                    let packed = {
                        let mut v = vec![0u8; elem * count];
                        self.rng.fill(&mut v[..]);
                        v
                    };
                    ep.put_strided(t, key, l.slice(me) + off as u64, &packed, elem, count, elem, stride)?;
                    for (i, chunk) in packed.chunks_exact(elem).enumerate() {
                        model[off + i * stride..off + i * stride + elem].copy_from_slice(chunk);
                    }
                } else {
                    let mut out = vec![0u8; elem * count];
                    ep.get_strided(t, key, l.slice(me) + off as u64, &mut out, elem, count, stride, elem)?;
                    for (i, chunk) in out.chunks_exact(elem).enumerate() {
                        let want = &model[off + i * stride..off + i * stride + elem];
                        assert!(chunk == want, "get_strided from rank {t}: element {i} differs from the model");
                    }
                    self.bytes_checked += out.len() as u64;
                }
            }
            "put_iov" => {
                let segments: Vec<(usize, Vec<u8>)> = (0..self.rng.gen_range(1..=8))
                    .map(|_| {
                        let len = self.rng.gen_range(1..=256.min(l.slice));
                        let off = self.rng.gen_range(0..=l.slice - len);
                        (off, self.bytes(len))
                    })
                    .collect();
                let wire: Vec<(u64, &[u8])> =
                    segments.iter().map(|(off, data)| (l.slice(me) + *off as u64, &data[..])).collect();
                ep.put_iov(t, key, &wire)?;
                // Segments land in order: a later one overwrites an earlier overlap.
                for (off, data) in &segments {
                    self.model.slices[t as usize][*off..*off + data.len()].copy_from_slice(data);
                }
            }
            "put_burst" => {
                // Eight nonblocking puts in flight at once, to several targets.
                let puts: Vec<(u32, usize, Vec<u8>)> = (0..8)
                    .map(|_| {
                        let t = self.target();
                        let (off, len) = self.range();
                        (t, off, self.bytes(len))
                    })
                    .collect();
                let mut handles = Vec::with_capacity(puts.len());
                for (t, off, data) in &puts {
                    handles.push(ep.put_nb(*t, key, l.slice(me) + *off as u64, data)?);
                }
                wait_all(handles)?;
                // Same-target puts complete in issue order.
                for (t, off, data) in &puts {
                    self.model.slices[*t as usize][*off..*off + data.len()].copy_from_slice(data);
                }
            }
            "global_add" => {
                ep.add_u64(0, key, l.global(), 1)?;
                self.model.global_adds += 1;
            }
            other => unreachable!("operation kind {other}"),
        }
        Ok(())
    }
}
