//! The scenario families again with packet authentication on: sealing and
//! verifying every packet must not change what the protocol delivers under
//! loss, duplication, reordering, crashes and restarts, and no genuine packet
//! may fail its MAC check.

use mw_proto::AuthKey;
use mw_sim::{run, Scenario};

#[test]
fn families_pass_with_authentication() {
    for family in ["lossless", "loss", "duplicate", "reorder", "mixed", "crash", "restart"] {
        for seed in 0..40 {
            let mut sc = Scenario::family(family, seed).expect("known family");
            sc.config.checksum = false; // the MAC replaces the checksum
            sc.config.auth = Some(AuthKey::from_job_key(&seed.to_le_bytes().repeat(2).try_into().unwrap()));
            let report = run(&sc);
            assert!(report.ok(), "with auth: {}", report.failure_text());
            assert!(
                report.stats.iter().all(|s| s.drops.bad_mac == 0),
                "{family} seed {seed}: a genuine packet failed its MAC"
            );
        }
    }
}
