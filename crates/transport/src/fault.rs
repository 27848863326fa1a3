//! Fault injection on the send path: drop, duplicate or reorder outgoing
//! datagrams, deterministically under a seed.
//!
//! Always compiled (STYLE habit 12: loss hooks compiled only for tests are a
//! mistake to avoid), off unless configured, normally from the environment:
//!
//! | variable            | meaning                                         |
//! |---------------------|-------------------------------------------------|
//! | `MW_FAULT_DROP`     | probability a datagram is dropped               |
//! | `MW_FAULT_DUP`      | probability it is sent twice                    |
//! | `MW_FAULT_REORDER`  | probability it is held back and sent after the next one |
//! | `MW_FAULT_SEED`     | PRNG seed, decimal or `0x` hex (default 0)      |
//!
//! Probabilities are `0.05` or `5%`. The three outcomes are exclusive for
//! one datagram (one random draw picks at most one), so they may add up to
//! at most 1. Invalid values are a [`FaultConfigError`], never a panic.
//!
//! Owns: the decision per datagram and the one held-back datagram. Must not:
//! know what the datagrams are. It wraps any send function, so it works the
//! same over UDP, shared memory or the simulator.

use std::io;
use std::net::SocketAddr;

/// Probability that an outgoing datagram is dropped.
pub const ENV_DROP: &str = "MW_FAULT_DROP";
/// Probability that an outgoing datagram is sent twice.
pub const ENV_DUP: &str = "MW_FAULT_DUP";
/// Probability that an outgoing datagram is held back and sent after the next one.
pub const ENV_REORDER: &str = "MW_FAULT_REORDER";
/// Seed of the fault PRNG: the same seed gives the same faults.
pub const ENV_SEED: &str = "MW_FAULT_SEED";

/// Why a fault configuration was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultConfigError {
    /// A probability is neither a number nor a percentage.
    #[error("{var}={value:?}: expected a probability such as 0.05 or a percentage such as 5%")]
    NotAProbability {
        /// The variable (or field) that was read.
        var: &'static str,
        /// Its value as given.
        value: String,
    },
    /// A probability lies outside 0..=1 (0%..=100%).
    #[error("{var}={value:?}: a probability must lie between 0 and 1 (0% and 100%)")]
    OutOfRange {
        /// The variable (or field) that was read.
        var: &'static str,
        /// Its value as given.
        value: String,
    },
    /// The seed is not an unsigned 64-bit integer.
    #[error("{var}={value:?}: expected an unsigned 64-bit integer, decimal or 0x-prefixed hex")]
    BadSeed {
        /// The variable that was read.
        var: &'static str,
        /// Its value as given.
        value: String,
    },
    /// The outcomes are exclusive per datagram, so their sum cannot exceed 1.
    #[error("drop ({drop}) + dup ({dup}) + reorder ({reorder}) exceeds 1")]
    SumExceedsOne {
        /// Drop probability.
        drop: f64,
        /// Duplicate probability.
        dup: f64,
        /// Reorder probability.
        reorder: f64,
    },
}

/// Fault probabilities and the seed that makes them reproducible.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FaultConfig {
    /// Probability in 0..=1 that a datagram is dropped.
    pub drop: f64,
    /// Probability in 0..=1 that a datagram is sent twice.
    pub dup: f64,
    /// Probability in 0..=1 that a datagram is sent after the next one.
    pub reorder: f64,
    /// PRNG seed; equal seeds and configs give equal decisions.
    pub seed: u64,
}

impl FaultConfig {
    /// Reads the `MW_FAULT_*` variables; unset or empty ones mean 0.
    pub fn from_env() -> Result<Self, FaultConfigError> {
        Self::from_lookup(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// As [`from_env`](Self::from_env), reading variables through `lookup`
    /// (lets tests and launchers parse without touching the process env).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, FaultConfigError> {
        let get = |var: &'static str| lookup(var).filter(|v| !v.trim().is_empty()).map(|v| (var, v));
        let probability = |var| get(var).map_or(Ok(0.0), |(var, v)| parse_probability(var, &v));
        let cfg = Self {
            drop: probability(ENV_DROP)?,
            dup: probability(ENV_DUP)?,
            reorder: probability(ENV_REORDER)?,
            seed: get(ENV_SEED).map_or(Ok(0), |(var, v)| parse_seed(var, &v))?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Whether any fault has a non-zero probability.
    pub fn is_active(&self) -> bool {
        self.drop > 0.0 || self.dup > 0.0 || self.reorder > 0.0
    }

    /// Checks ranges and the sum, for configurations built in code.
    pub fn validate(&self) -> Result<(), FaultConfigError> {
        for (var, p) in
            [("FaultConfig::drop", self.drop), ("FaultConfig::dup", self.dup), ("FaultConfig::reorder", self.reorder)]
        {
            if !(0.0..=1.0).contains(&p) {
                return Err(FaultConfigError::OutOfRange { var, value: p.to_string() });
            }
        }
        // A little slack so that e.g. 0.7 + 0.2 + 0.1 is not refused for rounding.
        if self.drop + self.dup + self.reorder > 1.0 + 1e-9 {
            return Err(FaultConfigError::SumExceedsOne { drop: self.drop, dup: self.dup, reorder: self.reorder });
        }
        Ok(())
    }
}

/// Parses `0.05`, `5%` or `5 %` into a probability in 0..=1.
fn parse_probability(var: &'static str, raw: &str) -> Result<f64, FaultConfigError> {
    let text = raw.trim();
    let (number, scale) = match text.strip_suffix('%') {
        Some(percent) => (percent.trim_end(), 100.0),
        None => (text, 1.0),
    };
    let not_a_probability = || FaultConfigError::NotAProbability { var, value: raw.to_owned() };
    let value = number.parse::<f64>().map_err(|_| not_a_probability())?;
    if !value.is_finite() {
        return Err(not_a_probability());
    }
    let p = value / scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(FaultConfigError::OutOfRange { var, value: raw.to_owned() });
    }
    Ok(p)
}

fn parse_seed(var: &'static str, raw: &str) -> Result<u64, FaultConfigError> {
    let text = raw.trim();
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse::<u64>(),
    };
    parsed.map_err(|_| FaultConfigError::BadSeed { var, value: raw.to_owned() })
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, passes BigCrush, and any
/// seed, including 0, gives a good stream. Plenty for fault decisions.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The fate of one outgoing datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Send it unchanged.
    Deliver,
    /// Do not send it.
    Drop,
    /// Send it twice, back to back.
    Duplicate,
    /// Hold it back and send it after the next datagram.
    Reorder,
}

/// How many datagrams met each fate (decisions, counted as drawn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultStats {
    /// Datagrams a decision was drawn for.
    pub offered: u64,
    /// Of those, dropped.
    pub dropped: u64,
    /// Of those, sent twice.
    pub duplicated: u64,
    /// Of those, held back behind the next one.
    pub reordered: u64,
}

/// Applies a [`FaultConfig`] to datagrams on their way to a send function.
#[derive(Debug)]
pub struct FaultInjector {
    cfg: FaultConfig,
    rng: SplitMix64,
    stats: FaultStats,
    /// The datagram held back by a `Reorder`, if `held_dst` is set. The
    /// buffer keeps its capacity, so holding allocates only while it grows.
    held: Vec<u8>,
    held_dst: Option<SocketAddr>,
}

impl FaultInjector {
    /// An injector for `cfg` (validated first).
    pub fn new(cfg: FaultConfig) -> Result<Self, FaultConfigError> {
        cfg.validate()?;
        Ok(Self {
            cfg,
            rng: SplitMix64(cfg.seed),
            stats: FaultStats::default(),
            held: Vec::with_capacity(2048),
            held_dst: None,
        })
    }

    /// An injector configured from `MW_FAULT_*`, or `None` when no fault is
    /// requested (so the caller can skip the indirection entirely).
    pub fn from_env() -> Result<Option<Self>, FaultConfigError> {
        let cfg = FaultConfig::from_env()?;
        if cfg.is_active() {
            Self::new(cfg).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }

    /// Decisions drawn so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// Whether a reordered datagram is waiting for the next send (or `flush`).
    pub fn holds_datagram(&self) -> bool {
        self.held_dst.is_some()
    }

    /// Draws the fate of the next datagram and counts it. For callers that
    /// apply the action themselves (e.g. filtering a batch); `send` uses it.
    pub fn decide(&mut self) -> FaultAction {
        let draw = self.rng.next_f64();
        let cfg = &self.cfg;
        self.stats.offered += 1;
        if draw < cfg.drop {
            self.stats.dropped += 1;
            FaultAction::Drop
        } else if draw < cfg.drop + cfg.dup {
            self.stats.duplicated += 1;
            FaultAction::Duplicate
        } else if draw < cfg.drop + cfg.dup + cfg.reorder {
            self.stats.reordered += 1;
            FaultAction::Reorder
        } else {
            FaultAction::Deliver
        }
    }

    /// Sends `buf` to `dst` through `send`, after deciding its fate:
    /// - `Drop`: nothing is sent (a held datagram keeps waiting);
    /// - `Deliver`/`Duplicate`: sent once/twice, then any held datagram;
    /// - `Reorder`: copied and held until after the next datagram sent. Only
    ///   one is held at a time: if one already is, this one is delivered
    ///   (followed by the held one) and counted as delivered, not reordered.
    ///
    /// An error from sending `buf` itself is returned as is (the caller
    /// retries as it would without faults; the draw is not repeated). Errors
    /// sending the extra copy or the held datagram are not: `buf` did go
    /// out, and reporting failure would make the caller send it again. A
    /// held datagram that meets `WouldBlock` stays held; other errors drop it.
    pub fn send<F>(&mut self, buf: &[u8], dst: SocketAddr, mut send: F) -> io::Result<()>
    where
        F: FnMut(&[u8], SocketAddr) -> io::Result<()>,
    {
        let action = self.decide();
        match action {
            FaultAction::Drop => Ok(()),
            FaultAction::Reorder if self.held_dst.is_none() => {
                self.held.clear();
                self.held.extend_from_slice(buf);
                self.held_dst = Some(dst);
                Ok(())
            }
            FaultAction::Deliver | FaultAction::Reorder => {
                if action == FaultAction::Reorder {
                    // One is held already, so this one is delivered instead
                    // (see above): keep the statistics truthful.
                    self.stats.reordered -= 1;
                }
                send(buf, dst)?;
                self.release_held(&mut send);
                Ok(())
            }
            FaultAction::Duplicate => {
                send(buf, dst)?;
                let _ = send(buf, dst);
                self.release_held(&mut send);
                Ok(())
            }
        }
    }

    /// Sends the held datagram, if any, now. Call from the idle path so a
    /// reordered datagram is not held indefinitely when traffic stops.
    /// Returns whether one was sent.
    pub fn flush<F>(&mut self, mut send: F) -> io::Result<bool>
    where
        F: FnMut(&[u8], SocketAddr) -> io::Result<()>,
    {
        let Some(dst) = self.held_dst else {
            return Ok(false);
        };
        send(&self.held, dst)?;
        self.held_dst = None;
        Ok(true)
    }

    fn release_held<F>(&mut self, send: &mut F)
    where
        F: FnMut(&[u8], SocketAddr) -> io::Result<()>,
    {
        if let Some(dst) = self.held_dst {
            match send(&self.held, dst) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                _ => self.held_dst = None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_stream() {
        // First outputs for seed 0 from the reference C implementation.
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn probabilities_parse_as_fractions_and_percentages() {
        assert_eq!(parse_probability(ENV_DROP, "0.05"), Ok(0.05));
        assert_eq!(parse_probability(ENV_DROP, "5%"), Ok(0.05));
        assert_eq!(parse_probability(ENV_DROP, " 12.5 % "), Ok(0.125));
        assert_eq!(parse_probability(ENV_DROP, "1"), Ok(1.0));
        assert_eq!(parse_probability(ENV_DROP, "0"), Ok(0.0));
    }

    #[test]
    fn seeds_parse_as_decimal_or_hex() {
        assert_eq!(parse_seed(ENV_SEED, "42"), Ok(42));
        assert_eq!(parse_seed(ENV_SEED, "0xff"), Ok(255));
        assert_eq!(parse_seed(ENV_SEED, "18446744073709551615"), Ok(u64::MAX));
        assert!(parse_seed(ENV_SEED, "-1").is_err());
        assert!(parse_seed(ENV_SEED, "0xzz").is_err());
    }
}
