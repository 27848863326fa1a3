//! Virtual time for the protocol.
//!
//! Owns: [`Instant`], a point in time in nanoseconds on whatever clock the
//! caller drives the protocol with (the system monotonic clock in production,
//! the simulator's virtual clock in tests).
//!
//! Must not: read any clock. Time only ever enters the protocol as an argument.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
pub use core::time::Duration;

/// A point in time, in nanoseconds since an origin the caller chooses.
///
/// Arithmetic saturates instead of overflowing: `a - b` is zero when `b` is
/// later than `a`, and adding a huge duration yields [`Instant::MAX`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);
    /// The latest representable instant ("never").
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(nanos(rhs)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_sub(nanos(rhs)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: zero when `rhs` is later than `self`.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}s", self.0 / 1_000_000_000, self.0 % 1_000_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let a = Instant::from_nanos(1_000);
        let b = a + Duration::from_micros(2);
        assert_eq!(b.as_nanos(), 3_000);
        assert_eq!(b - a, Duration::from_nanos(2_000));
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(a - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(format!("{:?}", Instant::from_nanos(1_500_000_000)), "1.500000000s");
    }
}
