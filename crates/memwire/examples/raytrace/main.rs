//! Parallel ray tracing into one rank's frame buffer (MBCF §3.4).
//!
//! Rank 0 is the display node: it owns the frame buffer (a memwire region)
//! and computes nothing. The other ranks take the image's pixels cyclically,
//! `N` at a time (the granularity), and put each group of N pixels straight
//! into rank 0's frame buffer. The same program can instead send the pixels
//! over plain UDP sockets with a small go-back-N reliability protocol of its
//! own, as the MBCF paper compared (without one, pixels are lost).
//!
//! ```text
//! mwrun -n 4 target/release/examples/raytrace --granularity 1,4,16,64 --transport both --verify
//! ```
//!
//! Prints one timing row per (granularity, transport), rank 0 checks every
//! frame byte for byte against a serial render with `--verify`, and writes
//! the image as a PNG (`--out`, default `target/raytrace.png`).

mod scene;
mod udp;

use std::time::Instant;

use memwire::{Access, Endpoint, Handle};

/// Groups of pixels computed before their puts are issued and waited for.
const BATCH: usize = 32;

#[derive(Debug)]
struct Args {
    width: u32,
    height: u32,
    granularities: Vec<u32>,
    transports: Vec<String>,
    out: String,
    verify: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        width: 576,
        height: 450,
        granularities: vec![1, 4, 16, 64],
        transports: vec!["memwire".into()],
        out: "target/raytrace.png".into(),
        verify: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--size" => {
                let v = value()?;
                let (w, h) = v.split_once('x').ok_or("--size takes WxH")?;
                args.width = w.parse().map_err(|_| "bad width")?;
                args.height = h.parse().map_err(|_| "bad height")?;
                if args.width == 0 || args.height == 0 {
                    return Err("--size must be at least 1x1".into());
                }
            }
            "--granularity" => {
                args.granularities = value()?
                    .split(',')
                    .map(|g| g.parse::<u32>().ok().filter(|&g| (1..=4096).contains(&g)))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("--granularity takes pixel counts 1..4096, comma-separated")?;
            }
            "--transport" => {
                let v = value()?;
                args.transports = match v.as_str() {
                    "memwire" | "udp" => vec![v],
                    "both" => vec!["memwire".into(), "udp".into()],
                    _ => return Err("--transport is memwire, udp or both".into()),
                };
            }
            "--out" => args.out = value()?,
            "--verify" => args.verify = true,
            "-h" | "--help" => {
                println!(
                    "raytrace [--size WxH] [--granularity N,..] [--transport memwire|udp|both] [--out F] [--verify]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("raytrace: {e}");
            std::process::exit(2);
        }
    };
    let ep = Endpoint::init().unwrap_or_else(|e| {
        eprintln!("raytrace: joining the job failed: {e}");
        std::process::exit(1);
    });
    if let Err(e) = run(&ep, &args) {
        eprintln!("raytrace: rank {}: {e}", ep.rank());
        std::process::exit(1);
    }
    if let Err(e) = ep.finalize() {
        eprintln!("raytrace: finalize: {e}");
        std::process::exit(1);
    }
}

/// Which ranks compute, and which of them this rank is.
struct Workers {
    count: u32,
    me: Option<u32>,
}

fn workers(ep: &Endpoint) -> Workers {
    if ep.size() == 1 {
        return Workers { count: 1, me: Some(0) };
    }
    Workers { count: ep.size() - 1, me: ep.rank().checked_sub(1) }
}

fn run(ep: &Endpoint, args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let pixels = u64::from(args.width) * u64::from(args.height);
    let frame_len = usize::try_from(pixels * 3)?;
    let frame = ep.alloc_symmetric(frame_len, Access::READ_WRITE)?;
    let reference = (ep.rank() == 0 && args.verify).then(|| {
        let mut image = vec![0u8; frame_len];
        scene::render_span(0, &mut image, args.width, args.height);
        image
    });
    let mut sockets = udp::Link::setup(ep)?;
    let w = workers(ep);
    if ep.rank() == 0 {
        println!(
            "ray tracing {}x{} on {} rank(s): {} computing, rank 0 holds the frame buffer",
            args.width,
            args.height,
            ep.size(),
            w.count
        );
        println!("{:>6} {:>7} {:>11} {:>10} {:>12}", "ranks", "pixels", "transport", "seconds", "Mpixel/s");
    }
    for &granularity in &args.granularities {
        for transport in &args.transports {
            if transport == "udp" && ep.size() == 1 {
                if ep.rank() == 0 {
                    println!("(udp comparison skipped: it needs a display rank and at least one worker)");
                }
                continue;
            }
            frame.fill(0, frame.len(), 0)?;
            ep.barrier()?;
            let start = Instant::now();
            if let Some(me) = w.me {
                match transport.as_str() {
                    "memwire" => compute_and_put(ep, frame.key(), args, granularity, me, w.count)?,
                    _ => sockets.send_pixels(ep, args, granularity, me, w.count)?,
                }
            }
            if ep.rank() == 0 && transport == "udp" {
                sockets.receive_frame(ep, &frame, args, granularity, w.count)?;
            }
            ep.barrier()?;
            let seconds = start.elapsed().as_secs_f64();
            if ep.rank() == 0 {
                println!(
                    "{:>6} {:>7} {:>11} {:>10.3} {:>12.2}",
                    ep.size(),
                    granularity,
                    transport,
                    seconds,
                    pixels as f64 / seconds / 1e6
                );
                if let Some(reference) = &reference {
                    let got = frame.to_vec();
                    if let Some(bad) = got.iter().zip(reference).position(|(a, b)| a != b) {
                        return Err(format!(
                            "{transport} frame at granularity {granularity} differs from the serial render at pixel {}",
                            bad / 3
                        )
                        .into());
                    }
                }
            }
        }
    }
    if ep.rank() == 0 {
        if args.verify {
            println!("verified: every frame equals the serial render byte for byte");
        }
        write_png(&args.out, args.width, args.height, &frame.to_vec())?;
        println!("image: {}", args.out);
    }
    ep.barrier()?;
    Ok(())
}

/// The pixel groups worker `me` of `count` computes: every `count`-th group
/// of `granularity` pixels, as (first pixel, pixel count).
pub fn my_groups(pixels: u64, granularity: u32, me: u32, count: u32) -> impl Iterator<Item = (u64, u32)> {
    let g = u64::from(granularity);
    let groups = pixels.div_ceil(g);
    (u64::from(me)..groups).step_by(count as usize).map(move |k| (k * g, (pixels - k * g).min(g) as u32))
}

/// The memwire way: each group of pixels is put straight into rank 0's
/// frame buffer; a batch of puts is in flight while the next is computed.
fn compute_and_put(
    ep: &Endpoint,
    key: memwire::RegionKey,
    args: &Args,
    granularity: u32,
    me: u32,
    count: u32,
) -> memwire::Result<()> {
    let pixels = u64::from(args.width) * u64::from(args.height);
    let mut groups = my_groups(pixels, granularity, me, count).peekable();
    let mut current: Vec<(u64, Vec<u8>)> = Vec::with_capacity(BATCH);
    while groups.peek().is_some() {
        current.clear();
        for (first, n) in groups.by_ref().take(BATCH) {
            let mut buf = vec![0u8; n as usize * 3];
            scene::render_span(first, &mut buf, args.width, args.height);
            current.push((first, buf));
        }
        let handles: Vec<Handle<'_>> =
            current.iter().map(|(first, buf)| ep.put_nb(0, key, first * 3, buf)).collect::<memwire::Result<_>>()?;
        memwire::wait_all(handles)?;
    }
    Ok(())
}

fn write_png(path: &str, width: u32, height: u32, rgb: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(dir) = std::path::Path::new(path).parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(rgb)?;
    Ok(())
}
