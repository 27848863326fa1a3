//! Round-trip time estimation and the retransmission timeout (RFC 6298).
//!
//! Owns: the smoothed RTT, its variance and the RTO backoff of one peer.
//!
//! Must not: decide which packets give samples; the sender applies Karn's rule
//! (no sample from a retransmitted packet) before calling [`RttEstimator::on_sample`].

use crate::time::Duration;
use crate::Config;

/// Clock granularity G of RFC 6298 §2: the least variance term in the RTO.
const GRANULARITY: Duration = Duration::from_micros(1);
/// Backoff doublings beyond which the RTO stays at `rto_max` anyway.
const MAX_BACKOFF: u32 = 16;
/// Growth of the RTT over its minimum that is taken for scheduling noise
/// rather than a queue (on top of the minimum doubling).
const QUEUE_DELAY_FLOOR: Duration = Duration::from_micros(100);

/// RFC 6298 estimator with a LAN-scale floor.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Duration,
    /// The smallest sample of the connection: the path without queues.
    min_rtt: Option<Duration>,
    backoff: u32,
    /// [`RttEstimator::rto`], recomputed only when an input changes (it is read per packet).
    rto: Duration,
    initial: Duration,
    min: Duration,
    max: Duration,
    ack_delay: Duration,
}

impl RttEstimator {
    pub(crate) fn new(config: &Config) -> RttEstimator {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            latest: Duration::ZERO,
            min_rtt: None,
            backoff: 0,
            rto: config.rto_initial,
            initial: config.rto_initial,
            min: config.rto_min,
            max: config.rto_max,
            ack_delay: config.max_ack_delay,
        }
    }

    /// Takes one RTT measurement `r` (RFC 6298 §2.2-2.3) and ends any backoff
    /// (§5.7: the backed-off RTO holds until a fresh sample arrives).
    pub(crate) fn on_sample(&mut self, r: Duration) {
        self.latest = r;
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + err) / 4;
                self.srtt = Some((srtt * 7 + r) / 8);
            }
        }
        self.backoff = 0;
        self.rto = self.compute_rto();
    }

    /// New data was acknowledged: the path works, so the backoff ends even
    /// without an RTT sample (RFC 9002 §6.2.1 resets its PTO backoff on any
    /// ack; RFC 6298 §5.7 would wait for a Karn-valid sample, which under
    /// heavy loss, when nearly every ack is for a retransmission, may never
    /// come and leaves the RTO pinned at `rto_max`).
    pub(crate) fn on_progress(&mut self) {
        if self.backoff != 0 {
            self.backoff = 0;
            self.rto = self.compute_rto();
        }
    }

    /// RTO expired: double the timeout (RFC 6298 §5.5), up to `rto_max`.
    pub(crate) fn on_timeout(&mut self) {
        self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
        self.rto = self.compute_rto();
    }

    /// The current RTO: `srtt + max(G, 4·rttvar) + max_ack_delay` (the peer
    /// may hold its ack that long), clamped to `[rto_min, rto_max]`, then
    /// doubled per backoff step and clamped again.
    pub(crate) fn rto(&self) -> Duration {
        self.rto
    }

    fn compute_rto(&self) -> Duration {
        let base = match self.srtt {
            None => self.initial,
            Some(srtt) => srtt + (self.rttvar * 4).max(GRANULARITY) + self.ack_delay,
        };
        let base = base.clamp(self.min, self.max);
        (base * (1u32 << self.backoff)).min(self.max)
    }

    /// The smoothed RTT, once measured.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The latest sample is more than twice the connection's smallest plus
    /// [`QUEUE_DELAY_FLOOR`]: packets wait in a queue somewhere on the path
    /// (a switch port, the receiver's socket), so a loss now is likely that
    /// queue overflowing rather than random.
    pub(crate) fn queue_building(&self) -> bool {
        self.min_rtt.is_some_and(|min| self.latest > min * 2 + QUEUE_DELAY_FLOOR)
    }

    /// How much later than a packet another one must have been sent, and been
    /// acked, for the first to count as lost: 9/8 of the larger of the
    /// smoothed and latest RTT (the time threshold of RFC 9002 §6.1.2).
    pub(crate) fn loss_delay(&self) -> Duration {
        match self.srtt {
            None => self.initial,
            Some(srtt) => srtt.max(self.latest) * 9 / 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_estimates_and_backoff() {
        let cfg = Config { max_ack_delay: Duration::from_micros(100), ..Config::default() };
        let mut rtt = RttEstimator::new(&cfg);
        assert_eq!(rtt.rto(), cfg.rto_initial);
        rtt.on_sample(Duration::from_micros(100));
        assert_eq!(rtt.srtt(), Some(Duration::from_micros(100)));
        // 100 + 4·50 + 100 (ack delay) = 400 µs
        assert_eq!(rtt.rto(), Duration::from_micros(400));
        rtt.on_sample(Duration::from_micros(100));
        // rttvar = (3·50 + 0)/4 = 37.5 µs → 100 + 150 + 100
        assert_eq!(rtt.rto(), Duration::from_micros(350));
        rtt.on_timeout();
        assert_eq!(rtt.rto(), Duration::from_micros(700));
        for _ in 0..20 {
            rtt.on_timeout();
        }
        assert_eq!(rtt.rto(), cfg.rto_max);
        rtt.on_sample(Duration::from_micros(1));
        assert!(rtt.rto() >= cfg.rto_min);
    }
}
