//! The fuzz target's check (`fuzz/fuzz_targets/decode.rs`) as a plain test
//! on stable: over the checked-in seed corpus `fuzz/seeds/decode/`, the seeds
//! built here, and every truncation and many single-byte mutations of them.
//!
//! `MW_WRITE_SEEDS=1 cargo test -p mw-wire --test fuzz_seeds` rewrites the
//! checked-in corpus from the seeds built here.

#[path = "support/decode_check.rs"]
mod decode_check;
#[path = "support/samples.rs"]
mod samples;

use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/decode")
}

#[test]
fn seed_corpus_round_trips() {
    let seeds = samples::seeds();
    if std::env::var_os("MW_WRITE_SEEDS").is_some() {
        let dir = corpus_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:03}")), seed).unwrap();
        }
    }
    let mut checked = 0;
    if let Ok(entries) = std::fs::read_dir(corpus_dir()) {
        for entry in entries {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            decode_check::check(&bytes);
            checked += 1;
        }
    }
    assert!(checked > 0, "no checked-in seeds under {}", corpus_dir().display());
    for seed in &seeds {
        decode_check::check(seed);
    }
}

#[test]
fn seeds_parse() {
    // Every seed is accepted as a packet or an op, so the fuzzer starts from
    // valid inputs of every kind.
    for seed in samples::seeds() {
        let packet = mw_wire::HeaderRepr::parse_packet(&seed);
        let op = mw_wire::OpRepr::parse(&seed);
        assert!(packet.is_ok() || op.is_ok(), "seed {seed:02x?} parses as neither");
    }
}

#[test]
fn truncations_and_byte_flips_never_panic() {
    for seed in samples::seeds() {
        for cut in 0..seed.len() {
            decode_check::check(&seed[..cut]);
        }
        let mut mutated = seed.clone();
        for at in 0..seed.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff, seed[at] ^ 0x01, seed[at].wrapping_add(1)] {
                mutated[at] = value;
                decode_check::check(&mutated);
            }
            mutated[at] = seed[at];
        }
    }
}
