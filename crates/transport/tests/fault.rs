//! FaultInjector: determinism under a seed, statistics, send semantics,
//! configuration errors.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mw_transport::fault::{ENV_DROP, ENV_DUP, ENV_REORDER, ENV_SEED};
use mw_transport::{
    FaultAction, FaultConfig, FaultConfigError, FaultInjector, UdpConfig, UdpTransport, WaitPolicy, Waiter,
};
use std::os::fd::AsRawFd;

fn dst() -> SocketAddr {
    "127.0.0.1:9".parse().unwrap()
}

fn config(drop: f64, dup: f64, reorder: f64, seed: u64) -> FaultConfig {
    FaultConfig { drop, dup, reorder, seed }
}

/// Pushes datagrams 0..n (one byte each) through `inj` and returns what was
/// sent, in order.
fn run(inj: &mut FaultInjector, n: u8) -> Vec<u8> {
    let mut wire = Vec::new();
    for i in 0..n {
        inj.send(&[i], dst(), |buf, _| {
            wire.push(buf[0]);
            Ok(())
        })
        .unwrap();
    }
    wire
}

#[test]
fn decisions_are_deterministic_under_a_seed() {
    let cfg = config(0.1, 0.05, 0.05, 42);
    let decide = |cfg| {
        let mut inj = FaultInjector::new(cfg).unwrap();
        let actions: Vec<FaultAction> = (0..10_000).map(|_| inj.decide()).collect();
        (actions, inj.stats())
    };
    let (a, stats_a) = decide(cfg);
    let (b, stats_b) = decide(cfg);
    assert_eq!(a, b);
    assert_eq!(stats_a, stats_b);
    let (c, _) = decide(FaultConfig { seed: 43, ..cfg });
    assert_ne!(a, c, "a different seed must give different faults");

    let mut x = FaultInjector::new(cfg).unwrap();
    let mut y = FaultInjector::new(cfg).unwrap();
    assert_eq!(run(&mut x, 200), run(&mut y, 200));
}

#[test]
fn statistics_match_the_configured_probabilities() {
    let n = 200_000u64;
    let (p_drop, p_dup, p_reorder) = (0.10, 0.05, 0.02);
    for seed in [0, 1, 0xdead_beef] {
        let mut inj = FaultInjector::new(config(p_drop, p_dup, p_reorder, seed)).unwrap();
        for _ in 0..n {
            let _ = inj.decide();
        }
        let stats = inj.stats();
        assert_eq!(stats.offered, n);
        for (name, count, p) in
            [("drop", stats.dropped, p_drop), ("dup", stats.duplicated, p_dup), ("reorder", stats.reordered, p_reorder)]
        {
            let expected = n as f64 * p;
            let sigma = (n as f64 * p * (1.0 - p)).sqrt();
            let off = (count as f64 - expected).abs();
            assert!(off < 5.0 * sigma, "seed {seed}: {name} {count}, expected {expected}±{sigma}");
        }
    }
}

#[test]
fn no_faults_means_every_datagram_goes_out_once_in_order() {
    let mut inj = FaultInjector::new(FaultConfig::default()).unwrap();
    assert!(!inj.config().is_active());
    assert_eq!(run(&mut inj, 100), (0..100).collect::<Vec<_>>());
}

#[test]
fn drop_dup_and_reorder_do_what_they_say() {
    let mut all_dropped = FaultInjector::new(config(1.0, 0.0, 0.0, 1)).unwrap();
    assert!(run(&mut all_dropped, 10).is_empty());
    assert_eq!(all_dropped.stats().dropped, 10);

    let mut all_doubled = FaultInjector::new(config(0.0, 1.0, 0.0, 1)).unwrap();
    assert_eq!(run(&mut all_doubled, 3), [0, 0, 1, 1, 2, 2]);

    // Every datagram wants to be late, but only one is held at a time: each
    // held one goes out right after its successor, swapping pairs.
    let mut all_late = FaultInjector::new(config(0.0, 0.0, 1.0, 1)).unwrap();
    let mut wire = run(&mut all_late, 5);
    assert_eq!(wire, [1, 0, 3, 2]);
    assert!(all_late.holds_datagram());
    assert_eq!(all_late.stats().reordered, 3, "only held datagrams count");
    let flushed = all_late
        .flush(|buf, _| {
            wire.push(buf[0]);
            Ok(())
        })
        .unwrap();
    assert!(flushed && !all_late.holds_datagram());
    assert_eq!(wire, [1, 0, 3, 2, 4]);
}

#[test]
fn a_held_datagram_survives_a_full_socket() {
    let mut inj = FaultInjector::new(config(0.0, 0.0, 1.0, 1)).unwrap();
    run(&mut inj, 1);
    assert!(inj.holds_datagram());
    let full = |_: &[u8], _| Err(io::Error::from(io::ErrorKind::WouldBlock));
    assert_eq!(inj.flush(full).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert!(inj.holds_datagram());
    let mut wire = Vec::new();
    assert!(inj
        .flush(|b, _| {
            wire.push(b[0]);
            Ok(())
        })
        .unwrap());
    assert_eq!(wire, [0]);
}

#[test]
fn a_failed_send_is_reported_and_not_counted_twice() {
    let mut inj = FaultInjector::new(FaultConfig::default()).unwrap();
    let err = inj.send(b"x", dst(), |_, _| Err(io::Error::from(io::ErrorKind::WouldBlock))).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    assert_eq!(inj.stats().offered, 1);
}

#[test]
fn injector_drops_over_a_real_socket() {
    let cfg = UdpConfig::default();
    let mut tx = UdpTransport::bind("127.0.0.1:0".parse().unwrap(), &cfg).unwrap();
    let mut rx = UdpTransport::bind("127.0.0.1:0".parse().unwrap(), &cfg).unwrap();
    let mut inj = FaultInjector::new(config(0.5, 0.0, 0.0, 7)).unwrap();
    for i in 0..200u8 {
        inj.send(&[i], rx.local_addr(), |b, d| tx.send_to(b, d)).unwrap();
    }
    let expected = 200 - inj.stats().dropped;
    assert!((60..140).contains(&expected), "{expected}");

    let mut buf = [0u8; 16];
    let mut waiter = Waiter::new(WaitPolicy::block_at_once());
    let mut got = 0;
    // After the expected count arrived, a short quiet period shows no extras.
    let mut deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match rx.recv_one(&mut buf).unwrap() {
            Some(_) => {
                got += 1;
                if got == expected {
                    deadline = Instant::now() + Duration::from_millis(20);
                }
            }
            None => {
                if waiter.idle(&[rx.as_raw_fd()], Some(deadline)).unwrap() == mw_transport::Idle::TimedOut {
                    break;
                }
            }
        }
    }
    assert_eq!(got, expected);
}

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name| map.get(name).cloned()
}

#[test]
fn configuration_parses_from_variables() {
    let cfg =
        FaultConfig::from_lookup(lookup(&[(ENV_DROP, "5%"), (ENV_DUP, "0.01"), (ENV_REORDER, ""), (ENV_SEED, "0x2a")]))
            .unwrap();
    assert_eq!(cfg, config(0.05, 0.01, 0.0, 42));
    assert!(cfg.is_active());
    let none = FaultConfig::from_lookup(lookup(&[])).unwrap();
    assert_eq!(none, FaultConfig::default());
    assert!(!none.is_active());
}

fn error_for(vars: &[(&str, &str)]) -> FaultConfigError {
    let err = FaultConfig::from_lookup(lookup(vars)).unwrap_err();
    let message = err.to_string();
    if !matches!(err, FaultConfigError::SumExceedsOne { .. }) {
        assert!(message.contains(vars[0].0), "message should name the variable: {message}");
    }
    err
}

#[test]
fn bad_variables_are_typed_errors_naming_the_variable() {
    use FaultConfigError::*;
    let err = error_for(&[(ENV_DROP, "abc")]);
    assert!(matches!(err, NotAProbability { var, .. } if var == ENV_DROP), "{err:?}");
    let err = error_for(&[(ENV_DUP, "nan")]);
    assert!(matches!(err, NotAProbability { var, .. } if var == ENV_DUP), "{err:?}");
    let err = error_for(&[(ENV_REORDER, "150%")]);
    assert!(matches!(err, OutOfRange { var, .. } if var == ENV_REORDER), "{err:?}");
    let err = error_for(&[(ENV_DROP, "-0.1")]);
    assert!(matches!(err, OutOfRange { .. }), "{err:?}");
    let err = error_for(&[(ENV_SEED, "seven")]);
    assert!(matches!(err, BadSeed { .. }), "{err:?}");
    let err = error_for(&[(ENV_DROP, "60%"), (ENV_DUP, "0.5")]);
    assert!(matches!(err, SumExceedsOne { .. }), "{err:?}");
}

#[test]
fn configs_built_in_code_are_validated() {
    assert!(FaultInjector::new(config(1.5, 0.0, 0.0, 0)).is_err());
    assert!(FaultInjector::new(config(0.7, 0.2, 0.1, 0)).is_ok(), "rounding slack");
    assert!(FaultInjector::new(config(0.0, f64::NAN, 0.0, 0)).is_err());
}
