//! Helpers shared by the multi-process test binaries (each includes this
//! module with `mod support;`).

use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::process::ExitCode;
use std::time::Instant;

/// A free TCP port on loopback for rank 0's rendezvous server (bound, then
/// released; the ranks start right after). Taken below the kernel's
/// ephemeral range (32768+), so no concurrent test's outgoing connection
/// can be handed the same port in between.
pub fn free_port() -> u16 {
    let mut seed = std::collections::hash_map::RandomState::new().build_hasher();
    seed.write_u32(std::process::id());
    let mut next = seed.finish();
    loop {
        let port = 20_000 + (next % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
        next = next.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    }
}

/// The driver of a custom-harness test binary: runs each case whose name
/// contains one of the command line's non-flag arguments (all without
/// any), each caught on its own so one failure does not hide the others,
/// in the `test NAME ... ok` form cargo's harness prints.
pub fn run_cases(cases: &[(&str, fn())]) -> ExitCode {
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let mut failed = 0;
    for &(name, case) in cases {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let start = Instant::now();
        match std::panic::catch_unwind(case) {
            Ok(()) => println!("test {name} ... ok ({:.1} s)", start.elapsed().as_secs_f64()),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        println!("{failed} multi-process case(s) failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
