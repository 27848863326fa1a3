//! Helpers shared by the multi-process test binaries (each includes this
//! module with `mod support;`).

use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;

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
