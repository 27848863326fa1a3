//! The endpoint fuzz target's check (`fuzz/fuzz_targets/endpoint.rs`) as a
//! plain test on stable: every checked-in seed under `fuzz/seeds/endpoint/`,
//! the seeds built by `mw_core::fuzzing::seeds`, and deterministic mutations
//! of them (truncations and byte flips, with the header fix-up on so they
//! reach the operation layer) must run without a panic and without a byte
//! changing outside the writable regions.
//!
//! `MW_WRITE_SEEDS=1 cargo test -p mw-core --test fuzz_seeds` rewrites the
//! checked-in corpus from the built seeds.

use std::path::PathBuf;

use mw_core::fuzzing::{run, seeds};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/endpoint")
}

#[test]
fn seed_corpus_runs_clean() {
    let seeds = seeds();
    if std::env::var_os("MW_WRITE_SEEDS").is_some() {
        let dir = corpus_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:03}")), seed).unwrap();
        }
    }
    let mut checked = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("fuzz/seeds/endpoint exists") {
        run(&std::fs::read(entry.unwrap().path()).unwrap());
        checked += 1;
    }
    assert!(checked >= seeds.len(), "only {checked} checked-in seeds under {}", corpus_dir().display());
    for seed in &seeds {
        run(seed);
    }
}

/// The single-datagram seeds with their record's fix-up bits set, so a
/// mutated header is repaired and the mutation lands in the payload.
fn single_record_seeds() -> Vec<Vec<u8>> {
    seeds().into_iter().filter(|s| usize::from(u16::from_le_bytes([s[2], s[3]])) + 4 == s.len()).collect()
}

#[test]
fn truncations_and_byte_flips_never_escape_the_regions() {
    let singles = single_record_seeds();
    assert!(singles.len() > 40, "{} single-datagram seeds", singles.len());
    for seed in singles {
        let datagram = 4..seed.len();
        for ctl in [0u8, 3] {
            let mut input = seed.clone();
            input[1] = ctl;
            for cut in (datagram.start..datagram.end).step_by(3) {
                let mut short = input[..cut].to_vec();
                short[2..4].copy_from_slice(&((cut - 4) as u16).to_le_bytes());
                run(&short);
            }
            for at in datagram.clone() {
                let original = input[at];
                for value in [0x00, 0xff, original ^ 0x01, original ^ 0x80, original.wrapping_add(1)] {
                    input[at] = value;
                    run(&input);
                }
                input[at] = original;
            }
        }
    }
}
