//! Computation/communication overlap with a large nonblocking GET (SR8000).
//!
//! Rank 1 holds a block of data; rank 0 fetches it three ways and times each:
//! the transfer alone, a computation of about the same length alone, and the
//! two together (`get_nb`, compute, `wait`). The fraction of the transfer
//! hidden behind the computation is `(t_comm + t_comp − t_both) / t_comm`.
//! The progress thread (`MW_PROGRESS=thread`, the default of this example)
//! receives the data while the application computes.
//!
//! ```text
//! mwrun -n 2 target/release/examples/overlap [MiB]
//! ```

use std::time::{Duration, Instant};

use memwire::{Access, Config, Endpoint, ProgressMode};

/// A compute kernel with no memory traffic to speak of: `units` rounds of a
/// dependent multiply-add chain.
fn compute(units: u64) -> f64 {
    let mut x = 1.000_000_1_f64;
    for i in 0..units * 10_000 {
        x = x.mul_add(1.000_000_01, (i & 7) as f64 * 1e-12);
    }
    std::hint::black_box(x)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> memwire::Result<()> {
    let mib: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(32);
    let mut config = Config::from_env()?;
    if std::env::var_os("MW_PROGRESS").is_none() {
        config.progress = ProgressMode::Thread;
    }
    let ep = Endpoint::init_with(config)?;
    if ep.size() < 2 {
        eprintln!("overlap: needs 2 ranks (mwrun -n 2)");
        std::process::exit(2);
    }
    run(&ep, mib << 20)?;
    ep.finalize()
}

fn run(ep: &Endpoint, len: usize) -> memwire::Result<()> {
    let region = ep.alloc_symmetric(len, Access::READ_WRITE)?;
    if ep.rank() == 1 {
        let pattern: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
        region.write(0, &pattern)?;
    }
    ep.barrier()?;
    if ep.rank() == 0 {
        let key = region.key();
        let mut buf = vec![0u8; len];
        let comm = median(
            (0..3)
                .map(|_| {
                    let t = Instant::now();
                    ep.get(1, key, 0, &mut buf).map(|()| t.elapsed())
                })
                .collect::<memwire::Result<_>>()?,
        );
        // Calibrate the kernel to take about as long as the transfer.
        let t = Instant::now();
        compute(100);
        let per_unit = t.elapsed().as_secs_f64() / 100.0;
        let units = ((comm.as_secs_f64() / per_unit) as u64).max(1);
        let comp = median(
            (0..3)
                .map(|_| {
                    let t = Instant::now();
                    compute(units);
                    t.elapsed()
                })
                .collect(),
        );
        buf.fill(0);
        let both = median(
            (0..3)
                .map(|_| {
                    let t = Instant::now();
                    let handle = ep.get_nb(1, key, 0, &mut buf)?;
                    compute(units);
                    handle.wait()?;
                    Ok(t.elapsed())
                })
                .collect::<memwire::Result<_>>()?,
        );
        let bad = buf.iter().enumerate().position(|(i, &x)| x != (i * 7 + i / 4096) as u8);
        if let Some(at) = bad {
            eprintln!("overlap: byte {at} of the fetched block is wrong");
            std::process::exit(1);
        }
        let (c, p, b) = (comm.as_secs_f64(), comp.as_secs_f64(), both.as_secs_f64());
        let hidden = ((c + p - b) / c).clamp(0.0, 1.0);
        println!(
            "overlap: get of {} MiB: transfer {:.1} ms ({:.0} MB/s), compute {:.1} ms, both {:.1} ms \
             -> {:.0}% of the transfer hidden behind computation",
            len >> 20,
            c * 1e3,
            len as f64 / c / 1e6,
            p * 1e3,
            b * 1e3,
            hidden * 100.0
        );
    }
    ep.barrier()
}
