//! What happens to each datagram: dropped, corrupted, delayed, held back so
//! later ones overtake it (reordering), or sent twice. Seeded, so a run's
//! decisions repeat given the same arrivals.
//!
//! Owns: [`Faults`] (the settings), [`Fate`] (one datagram's decision) and
//! [`Counters`]. Must not: parse frames or touch sockets and clocks (times are
//! offsets from the datagram's arrival).

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Fault settings; probabilities are fractions in 0..=1.
#[derive(Debug, Clone, PartialEq)]
pub struct Faults {
    pub drop: f64,
    pub dup: f64,
    pub reorder: f64,
    pub corrupt: f64,
    /// Added to every datagram.
    pub delay: Duration,
    /// Uniform extra delay, 0..=jitter, per datagram (reorders by itself
    /// when it exceeds the gap between datagrams).
    pub jitter: Duration,
    /// Extra hold of a datagram picked for reordering.
    pub reorder_hold: Duration,
}

/// One datagram's fate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fate {
    /// Never sent.
    pub dropped: bool,
    /// Flip this bit of the UDP payload (index modulo payload bits).
    pub flip_bit: Option<u64>,
    /// When to send it, after arrival.
    pub after: Duration,
    /// Send a second copy this long after arrival.
    pub copy_after: Option<Duration>,
    /// Held back for reordering.
    pub held: bool,
}

/// What the relay did, for its report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames read from the hosts' links that were relayed (GSO super-frames count once).
    pub frames: u64,
    /// Datagrams those frames stood for.
    pub datagrams: u64,
    /// GSO super-frames among the frames.
    pub gso_frames: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// Datagrams (copies included) written to a host's link.
    pub sent: u64,
    /// Sends the kernel refused (counted, not retried: a loss like any other).
    pub send_errors: u64,
    /// Frames seen but not relayed (not UDP between two hosts of the cluster).
    pub ignored: u64,
}

impl Counters {
    /// One line for logs and tests: `key=value` pairs.
    pub fn line(&self) -> String {
        format!(
            "frames={} datagrams={} gso_frames={} dropped={} duplicated={} reordered={} corrupted={} sent={} \
             send_errors={} ignored={}",
            self.frames,
            self.datagrams,
            self.gso_frames,
            self.dropped,
            self.duplicated,
            self.reordered,
            self.corrupted,
            self.sent,
            self.send_errors,
            self.ignored
        )
    }
}

/// Decides fates from a seeded generator.
#[derive(Debug)]
pub struct Decider {
    faults: Faults,
    rng: SmallRng,
}

impl Decider {
    pub fn new(faults: Faults, seed: u64) -> Decider {
        Decider { faults, rng: SmallRng::seed_from_u64(seed) }
    }

    /// The fate of the next datagram, counted in `counters`.
    pub fn decide(&mut self, counters: &mut Counters) -> Fate {
        let f = &self.faults;
        let mut fate = Fate { dropped: false, flip_bit: None, after: f.delay, copy_after: None, held: false };
        if self.rng.gen_bool(f.drop) {
            counters.dropped += 1;
            fate.dropped = true;
            return fate;
        }
        if !f.jitter.is_zero() {
            fate.after += self.rng.gen_range(Duration::ZERO..=f.jitter);
        }
        if self.rng.gen_bool(f.reorder) {
            counters.reordered += 1;
            fate.held = true;
            fate.after += f.reorder_hold;
        }
        if self.rng.gen_bool(f.corrupt) {
            counters.corrupted += 1;
            fate.flip_bit = Some(self.rng.gen());
        }
        if self.rng.gen_bool(f.dup) {
            counters.duplicated += 1;
            // The copy trails the original by up to the reorder hold (at
            // least a little), so it may also arrive after later datagrams.
            let lag = self.rng.gen_range(Duration::from_micros(10)..=f.reorder_hold.max(Duration::from_micros(20)));
            fate.copy_after = Some(fate.after + lag);
        }
        fate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults() -> Faults {
        Faults {
            drop: 0.1,
            dup: 0.2,
            reorder: 0.3,
            corrupt: 0.05,
            delay: Duration::from_micros(100),
            jitter: Duration::from_micros(50),
            reorder_hold: Duration::from_millis(1),
        }
    }

    #[test]
    fn rates_match_the_settings_and_runs_repeat() {
        let mut counters = Counters::default();
        let mut decider = Decider::new(faults(), 42);
        let fates: Vec<Fate> = (0..100_000).map(|_| decider.decide(&mut counters)).collect();
        let near = |count: u64, p: f64| (count as f64 / 100_000.0 - p).abs() < 0.01;
        assert!(near(counters.dropped, 0.1), "{counters:?}");
        // The others apply to the datagrams that were not dropped.
        assert!(near(counters.reordered, 0.9 * 0.3), "{counters:?}");
        assert!(near(counters.duplicated, 0.9 * 0.2), "{counters:?}");
        assert!(near(counters.corrupted, 0.9 * 0.05), "{counters:?}");
        for fate in fates.iter().filter(|f| !f.dropped) {
            let base = Duration::from_micros(100);
            let hold = if fate.held { Duration::from_millis(1) } else { Duration::ZERO };
            assert!(fate.after >= base + hold && fate.after <= base + hold + Duration::from_micros(50));
            if let Some(copy) = fate.copy_after {
                assert!(copy > fate.after);
            }
        }
        let mut again = Decider::new(faults(), 42);
        let replay: Vec<Fate> = (0..1000).map(|_| again.decide(&mut Counters::default())).collect();
        assert_eq!(replay, fates[..1000]);
    }

    #[test]
    fn no_faults_means_every_datagram_passes_untouched_at_once() {
        let none = Faults {
            drop: 0.0,
            dup: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder_hold: Duration::from_millis(1),
        };
        let mut counters = Counters::default();
        let mut decider = Decider::new(none, 1);
        for _ in 0..1000 {
            let fate = decider.decide(&mut counters);
            assert_eq!(
                fate,
                Fate { dropped: false, flip_bit: None, after: Duration::ZERO, copy_after: None, held: false }
            );
        }
        assert_eq!(counters, Counters::default());
    }
}
