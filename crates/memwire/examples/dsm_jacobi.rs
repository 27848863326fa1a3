//! A small page-based software DSM with a multiple-writer protocol, running a
//! Jacobi relaxation on a shared 2-D grid (PPRAM-Link's selected-word write,
//! `writesw`, which this is the use case of).
//!
//! The grid lives in 256-byte pages, each with a *home* rank that holds its
//! authoritative copy; homes are dealt cyclically, so they do not match the
//! rows a rank computes, and rows do not align with pages: two ranks write
//! different words of the same page in the same iteration (false sharing).
//! Each rank works on a local cache. At an *acquire* it fetches the pages it
//! will read or write from their homes; before the first write to a page it
//! keeps a *twin* (a copy); at *release* it diffs each dirty page against its
//! twin and sends only the changed 4-byte words to the home with
//! `put_masked` (a 64-word mask per 256-byte page), so concurrent writers of
//! one page never overwrite each other's words. A barrier ends the interval.
//!
//! ```text
//! mwrun -n 4 target/release/examples/dsm_jacobi [rows cols iterations]
//! ```
//!
//! Rank 0 checks the final grid, read back from the homes, against a serial
//! Jacobi computed with the same f32 arithmetic: it must match bit for bit.

use std::collections::BTreeMap;
use std::time::Instant;

use memwire::{Access, Endpoint, Handle, RegionKey};

const PAGE: usize = 256;
const WORD: usize = 4;

struct Grid {
    rows: usize,
    cols: usize,
}

impl Grid {
    fn bytes(&self) -> usize {
        self.rows * self.cols * WORD
    }
    /// Bytes of one array, rounded up to whole pages.
    fn array_bytes(&self) -> usize {
        self.bytes().div_ceil(PAGE) * PAGE
    }
    fn initial(&self, row: usize, col: usize) -> f32 {
        // A hot top edge, a warm left edge, cold elsewhere.
        if row == 0 {
            100.0
        } else if col == 0 {
            25.0 + row as f32 * 0.5
        } else {
            0.0
        }
    }
    fn is_boundary(&self, row: usize, col: usize) -> bool {
        row == 0 || col == 0 || row == self.rows - 1 || col == self.cols - 1
    }
}

fn home_of(page: usize, size: u32) -> u32 {
    (page % size as usize) as u32
}

/// The DSM view of one rank: a cache of both arrays and the twins of the
/// pages written since the last release.
struct Dsm<'e> {
    ep: &'e Endpoint,
    key: RegionKey,
    home: memwire::Region<'e>,
    cache: Vec<u8>,
    twins: BTreeMap<usize, [u8; PAGE]>,
    masked_puts: u64,
    words_sent: u64,
}

impl<'e> Dsm<'e> {
    /// Fetches `pages` (global page numbers) from their homes into the cache.
    fn acquire(&mut self, pages: impl IntoIterator<Item = usize>) -> memwire::Result<()> {
        let me = self.ep.rank();
        let size = self.ep.size();
        let mut remote: Vec<(usize, u32)> = Vec::new();
        for page in pages {
            let home = home_of(page, size);
            if home == me {
                self.home.read((page * PAGE) as u64, &mut self.cache[page * PAGE..(page + 1) * PAGE])?;
            } else {
                remote.push((page, home));
            }
        }
        let mut fetched = vec![[0u8; PAGE]; remote.len()];
        let handles: Vec<Handle<'_>> = remote
            .iter()
            .zip(fetched.iter_mut())
            .map(|(&(page, home), out)| self.ep.get_nb(home, self.key, (page * PAGE) as u64, out))
            .collect::<memwire::Result<_>>()?;
        memwire::wait_all(handles)?;
        for (&(page, _), data) in remote.iter().zip(&fetched) {
            self.cache[page * PAGE..(page + 1) * PAGE].copy_from_slice(data);
        }
        Ok(())
    }

    fn write_f32(&mut self, byte_offset: usize, value: f32) {
        let page = byte_offset / PAGE;
        let cache = &self.cache;
        self.twins.entry(page).or_insert_with(|| {
            let mut twin = [0u8; PAGE];
            twin.copy_from_slice(&cache[page * PAGE..(page + 1) * PAGE]);
            twin
        });
        self.cache[byte_offset..byte_offset + WORD].copy_from_slice(&value.to_le_bytes());
    }

    fn read_f32(&self, byte_offset: usize) -> f32 {
        f32::from_le_bytes(self.cache[byte_offset..byte_offset + WORD].try_into().expect("4 bytes"))
    }

    /// Sends the changed words of every dirty page to its home.
    fn release(&mut self) -> memwire::Result<()> {
        let me = self.ep.rank();
        for (page, twin) in std::mem::take(&mut self.twins) {
            let current = &self.cache[page * PAGE..(page + 1) * PAGE];
            let mut mask = 0u64;
            for (w, (now, before)) in current.chunks_exact(WORD).zip(twin.chunks_exact(WORD)).enumerate() {
                if now != before {
                    mask |= 1 << w;
                }
            }
            if mask == 0 {
                continue;
            }
            self.words_sent += u64::from(mask.count_ones());
            let home = home_of(page, self.ep.size());
            if home == me {
                for w in (0..PAGE / WORD).filter(|w| mask & (1 << w) != 0) {
                    let at = w * WORD;
                    self.home.write((page * PAGE + at) as u64, &current[at..at + WORD])?;
                }
            } else {
                self.masked_puts += 1;
                self.ep.put_masked(home, self.key, (page * PAGE) as u64, current, mask)?;
            }
        }
        Ok(())
    }
}

fn pages_of_rows(grid: &Grid, array: usize, rows: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let base = array * grid.array_bytes();
    let first = base + rows.start * grid.cols * WORD;
    let end = base + rows.end * grid.cols * WORD;
    first / PAGE..end.div_ceil(PAGE)
}

fn serial(grid: &Grid, iterations: usize) -> Vec<f32> {
    let (r, c) = (grid.rows, grid.cols);
    let mut a: Vec<f32> = (0..r * c).map(|i| grid.initial(i / c, i % c)).collect();
    let mut b = a.clone();
    for _ in 0..iterations {
        for i in 1..r - 1 {
            for j in 1..c - 1 {
                b[i * c + j] = 0.25 * (a[(i - 1) * c + j] + a[(i + 1) * c + j] + a[i * c + j - 1] + a[i * c + j + 1]);
            }
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}

fn main() -> memwire::Result<()> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let grid = Grid { rows: *args.first().unwrap_or(&48), cols: *args.get(1).unwrap_or(&70) };
    let iterations = *args.get(2).unwrap_or(&40);
    if grid.rows < 3 || grid.cols < 3 {
        eprintln!("dsm_jacobi: the grid needs at least 3x3 points");
        std::process::exit(2);
    }
    let ep = Endpoint::init()?;
    run(&ep, &grid, iterations)?;
    ep.finalize()
}

fn run(ep: &Endpoint, grid: &Grid, iterations: usize) -> memwire::Result<()> {
    let (me, n) = (ep.rank(), ep.size());
    let total = 2 * grid.array_bytes();
    let home = ep.alloc_symmetric(total, Access::READ_WRITE)?;
    // Every rank initializes the pages it is home to, in both arrays.
    let mut init = vec![0u8; total];
    for array in 0..2 {
        for i in 0..grid.rows * grid.cols {
            let v = grid.initial(i / grid.cols, i % grid.cols);
            let at = array * grid.array_bytes() + i * WORD;
            init[at..at + WORD].copy_from_slice(&v.to_le_bytes());
        }
    }
    for page in (0..total / PAGE).filter(|&p| home_of(p, n) == me) {
        home.write((page * PAGE) as u64, &init[page * PAGE..(page + 1) * PAGE])?;
    }
    ep.barrier()?;
    let key = home.key();
    let mut dsm = Dsm { ep, key, home, cache: vec![0u8; total], twins: BTreeMap::new(), masked_puts: 0, words_sent: 0 };
    // Interior rows 1..rows-1, split into contiguous blocks per rank.
    let interior = grid.rows - 2;
    let lo = 1 + interior * me as usize / n as usize;
    let hi = 1 + interior * (me as usize + 1) / n as usize;
    let start = Instant::now();
    let (mut src, mut dst) = (0usize, 1usize);
    for _ in 0..iterations {
        let read = pages_of_rows(grid, src, lo - 1..hi + 1);
        let write = pages_of_rows(grid, dst, lo..hi);
        dsm.acquire(read.chain(write))?;
        let (sbase, dbase) = (src * grid.array_bytes(), dst * grid.array_bytes());
        let at = |base: usize, i: usize, j: usize| base + (i * grid.cols + j) * WORD;
        for i in lo..hi {
            for j in 0..grid.cols {
                if grid.is_boundary(i, j) {
                    continue;
                }
                let v = 0.25
                    * (dsm.read_f32(at(sbase, i - 1, j))
                        + dsm.read_f32(at(sbase, i + 1, j))
                        + dsm.read_f32(at(sbase, i, j - 1))
                        + dsm.read_f32(at(sbase, i, j + 1)));
                dsm.write_f32(at(dbase, i, j), v);
            }
        }
        dsm.release()?;
        ep.barrier()?;
        std::mem::swap(&mut src, &mut dst);
    }
    let seconds = start.elapsed().as_secs_f64();
    let (puts, words) = (dsm.masked_puts, dsm.words_sent);
    if me == 0 {
        let all = pages_of_rows(grid, src, 0..grid.rows);
        dsm.acquire(all)?;
        let expected = serial(grid, iterations);
        let base = src * grid.array_bytes();
        for (i, want) in expected.iter().enumerate() {
            let got = dsm.read_f32(base + i * WORD);
            if got.to_bits() != want.to_bits() {
                eprintln!(
                    "dsm_jacobi: point ({}, {}) is {got}, the serial run says {want}",
                    i / grid.cols,
                    i % grid.cols
                );
                std::process::exit(1);
            }
        }
        println!(
            "dsm_jacobi: {}x{} grid, {iterations} iterations on {n} rank(s) in {seconds:.3} s; \
             rank 0 sent {puts} masked page writes ({words} words); \
             result equals the serial run bit for bit",
            grid.rows, grid.cols
        );
    }
    ep.barrier()
}
