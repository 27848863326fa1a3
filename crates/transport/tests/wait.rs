//! Waiter: spin → yield → block, wake-up on arrival, deadlines.

use std::io;
use std::os::fd::AsRawFd;
use std::thread;
use std::time::{Duration, Instant};

use mw_transport::{Idle, UdpConfig, UdpTransport, WaitPolicy, Waiter};

fn bind() -> UdpTransport {
    UdpTransport::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap()
}

#[test]
fn waiter_blocks_until_a_datagram_arrives_from_another_thread() {
    let mut rx = bind();
    let dst = rx.local_addr();
    let delay = Duration::from_millis(100);
    let start = Instant::now();
    let sender = thread::spawn(move || {
        let mut tx = bind();
        thread::sleep(delay);
        tx.send_to(b"wake up", dst).unwrap();
    });

    let mut waiter = Waiter::default();
    let deadline = start + Duration::from_secs(10);
    let mut buf = [0u8; 64];
    let mut polls = 0u64;
    let mut woken = 0;
    let got = loop {
        polls += 1;
        if let Some((len, _)) = rx.recv_one(&mut buf).unwrap() {
            waiter.reset();
            break buf[..len].to_vec();
        }
        match waiter.idle(&[rx.as_raw_fd()], Some(deadline)).unwrap() {
            Idle::Woken => woken += 1,
            Idle::TimedOut => panic!("no datagram within 10 s"),
            Idle::Spun | Idle::Yielded => {}
        }
    };
    sender.join().unwrap();
    let elapsed = start.elapsed();
    assert_eq!(got, b"wake up");
    assert!(elapsed >= delay, "returned before the datagram was sent: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "slow wake-up: {elapsed:?}");
    assert!(woken >= 1, "never blocked");
    // Had it polled for the whole 100 ms it would have made millions of
    // polls; the spin and yield phases (100 µs by default) make a few
    // hundred at most.
    assert!(polls < 200_000, "kept polling instead of blocking: {polls} polls");
}

#[test]
fn waiter_returns_timed_out_at_the_deadline() {
    let rx = bind();
    let mut waiter = Waiter::new(WaitPolicy { spin: Duration::from_micros(50), yield_for: Duration::from_micros(50) });
    let start = Instant::now();
    let deadline = start + Duration::from_millis(30);
    let mut outcomes = Vec::new();
    loop {
        let idle = waiter.idle(&[rx.as_raw_fd()], Some(deadline)).unwrap();
        if outcomes.last() != Some(&idle) {
            outcomes.push(idle);
        }
        if idle == Idle::TimedOut {
            break;
        }
    }
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(30), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(1), "{elapsed:?}");
    // Normally [Spun, Yielded, TimedOut]; a preempted test thread may skip
    // the short yield phase, but phases never go backwards.
    assert_eq!(outcomes.first(), Some(&Idle::Spun));
    assert_eq!(outcomes.last(), Some(&Idle::TimedOut));
    let phase = |idle: &Idle| match idle {
        Idle::Spun => 0,
        Idle::Yielded => 1,
        Idle::Woken | Idle::TimedOut => 2,
    };
    assert!(outcomes.windows(2).all(|w| phase(&w[0]) <= phase(&w[1])), "{outcomes:?}");
}

#[test]
fn phases_follow_the_policy_and_reset_restarts_spinning() {
    let rx = bind();
    let policy = WaitPolicy {
        // Long enough that a preempted test thread still sees each phase.
        spin: Duration::from_millis(20),
        yield_for: Duration::from_millis(20),
    };
    let mut waiter = Waiter::new(policy);
    let fds = [rx.as_raw_fd()];
    let start = Instant::now();
    let deadline = start + Duration::from_millis(80);

    let mut first_yield = None;
    let mut first_block = None;
    loop {
        let idle = waiter.idle(&fds, Some(deadline)).unwrap();
        // Read after the call: the phase was chosen no later than this.
        let at = start.elapsed();
        match idle {
            Idle::Spun => assert!(first_yield.is_none(), "spun after yielding"),
            Idle::Yielded => {
                assert!(first_block.is_none());
                first_yield.get_or_insert(at);
            }
            Idle::Woken => panic!("nothing was sent"),
            Idle::TimedOut => {
                first_block.get_or_insert(at);
                break;
            }
        }
    }
    let first_yield = first_yield.expect("never yielded");
    assert!(first_yield >= policy.spin, "yielded after {first_yield:?}");
    assert!(first_block.unwrap() >= policy.spin + policy.yield_for);

    waiter.reset();
    let later = Instant::now() + Duration::from_secs(1);
    assert_eq!(waiter.idle(&fds, Some(later)).unwrap(), Idle::Spun);
}

#[test]
fn default_policy_yields_before_blocking() {
    let rx = bind();
    let mut waiter = Waiter::default();
    assert_eq!(waiter.policy().spin, WaitPolicy::DEFAULT_SPIN);
    let deadline = Instant::now() + Duration::from_secs(1);
    let first = waiter.idle(&[rx.as_raw_fd()], Some(deadline)).unwrap();
    let expected = if WaitPolicy::DEFAULT_SPIN.is_zero() { Idle::Yielded } else { Idle::Spun };
    assert_eq!(first, expected);
}

#[test]
fn block_at_once_skips_spinning() {
    let rx = bind();
    let mut waiter = Waiter::new(WaitPolicy::block_at_once());
    let deadline = Instant::now() + Duration::from_millis(5);
    let idle = waiter.idle(&[rx.as_raw_fd()], Some(deadline)).unwrap();
    assert!(matches!(idle, Idle::TimedOut | Idle::Woken), "{idle:?}");
    assert!(Instant::now() >= deadline || idle == Idle::Woken);
}

#[test]
fn a_past_deadline_times_out_immediately() {
    let mut waiter = Waiter::default();
    let past = Instant::now();
    assert_eq!(waiter.idle(&[], Some(past)).unwrap(), Idle::TimedOut);
}

#[test]
fn blocking_forever_on_nothing_is_refused() {
    let mut waiter = Waiter::new(WaitPolicy::block_at_once());
    let err = waiter.idle(&[], None).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn waiter_watches_several_fds() {
    let quiet = bind();
    let mut busy = bind();
    let mut tx = bind();
    tx.send_to(b"x", busy.local_addr()).unwrap();
    let mut waiter = Waiter::new(WaitPolicy::block_at_once());
    let deadline = Instant::now() + Duration::from_secs(5);
    let idle = waiter.idle(&[quiet.as_raw_fd(), busy.as_raw_fd()], Some(deadline)).unwrap();
    assert_eq!(idle, Idle::Woken);
    let mut buf = [0u8; 8];
    assert_eq!(busy.recv_one(&mut buf).unwrap().map(|(n, _)| n), Some(1));
}
