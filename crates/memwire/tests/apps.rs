//! The example applications as end-to-end tests: small instances run as
//! real multi-process jobs (ranks started in the `MW_*` environment-variable
//! mode, the test serving the rendezvous as a launcher would), their own
//! verification switched on.
//! `cargo test` builds the package's examples before running this.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/apps-<hash> → target/<profile>/examples/<name>
    let deps = std::env::current_exe().expect("own path");
    let path = deps.parent().and_then(|d| d.parent()).expect("profile dir").join("examples").join(name);
    assert!(path.exists(), "{} not built (run through `cargo test`, which builds examples)", path.display());
    path
}

/// Runs `n` ranks of example `name` with `args`; returns each rank's output.
fn run_job(n: u32, name: &str, args: &[&str], env: &[(&str, &str)]) -> Vec<Output> {
    let program = example(name);
    // The test holds the listening socket from the start (a port picked
    // here and bound later by rank 0 could be taken by a concurrent test).
    let job_key = mw_bootstrap::random_job_key().expect("job key");
    let server = mw_bootstrap::RendezvousServer::bind("127.0.0.1:0", n, job_key).expect("bind rendezvous");
    let rendezvous = server.local_addr().to_string();
    let _server = server.spawn().expect("serve rendezvous");
    let children: Vec<_> = (0..n)
        .map(|rank| {
            Command::new(&program)
                .args(args)
                .envs(env.iter().copied())
                .env("MW_RANK", rank.to_string())
                .env("MW_SIZE", n.to_string())
                .env("MW_BOOTSTRAP", &rendezvous)
                .env("MW_JOB_KEY", mw_bootstrap::job_key_to_hex(&job_key))
                .env("MW_BOOTSTRAP_TIMEOUT", "60")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn rank")
        })
        .collect();
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().expect("wait")).collect();
    for (rank, out) in outputs.iter().enumerate() {
        assert!(
            out.status.success(),
            "{name} rank {rank} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    outputs
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn raytracer_frames_equal_the_serial_render_over_memwire_and_udp() {
    let png = std::env::temp_dir().join(format!("memwire-raytrace-{}.png", std::process::id()));
    let png_arg = png.to_str().expect("utf-8 path");
    let outs = run_job(
        3,
        "raytrace",
        &["--size", "96x64", "--granularity", "1,7,64", "--transport", "both", "--verify", "--out", png_arg],
        &[],
    );
    let text = stdout(&outs[0]);
    assert!(text.contains("verified: every frame equals the serial render"), "{text}");
    for row in ["memwire", "udp"] {
        let rows = text.lines().filter(|l| l.split_whitespace().nth(2) == Some(row)).count();
        assert_eq!(rows, 3, "one {row} row per granularity:\n{text}");
    }
    let bytes = std::fs::read(&png).expect("png written");
    assert_eq!(&bytes[1..4], b"PNG");
    let _ = std::fs::remove_file(&png);
}

#[test]
fn raytracer_survives_packet_loss() {
    let outs = run_job(
        3,
        "raytrace",
        &["--size", "64x48", "--granularity", "5", "--verify", "--out", "/dev/null"],
        &[("MW_FAULT_DROP", "0.05"), ("MW_FAULT_DUP", "0.02"), ("MW_FAULT_SEED", "3")],
    );
    assert!(stdout(&outs[0]).contains("verified"), "{}", stdout(&outs[0]));
}

#[test]
fn raytracer_runs_alone() {
    let outs =
        run_job(1, "raytrace", &["--size", "32x16", "--granularity", "3", "--verify", "--out", "/dev/null"], &[]);
    assert!(stdout(&outs[0]).contains("verified"), "{}", stdout(&outs[0]));
}

#[test]
fn dsm_jacobi_matches_the_serial_run_bit_for_bit() {
    for n in [2, 4] {
        let outs = run_job(n, "dsm_jacobi", &["30", "45", "25"], &[]);
        let text = stdout(&outs[0]);
        assert!(text.contains("equals the serial run bit for bit"), "{text}");
        assert!(!text.contains("sent 0 masked"), "remote homes must receive masked writes: {text}");
    }
    let outs = run_job(3, "dsm_jacobi", &["20", "33", "10"], &[("MW_FAULT_DROP", "0.05"), ("MW_FAULT_SEED", "9")]);
    assert!(stdout(&outs[0]).contains("bit for bit"));
}

#[test]
fn overlap_fetches_the_block_intact_and_reports_the_hidden_fraction() {
    let outs = run_job(2, "overlap", &["4"], &[]);
    let text = stdout(&outs[0]);
    assert!(text.contains("of the transfer hidden behind computation"), "{text}");
}
