//! The simulator's random numbers.
//!
//! Owns: [`Rng`], xoshiro256** seeded through SplitMix64. It is written out
//! here (20 lines) rather than taken from a crate so that a scenario's seed
//! means the same run forever: a dependency upgrade can never change which
//! packets a seed drops, and the goodput snapshot stays comparable.
//!
//! Must not: be used by `mw-proto` (the protocol draws no random numbers).

/// A small, fast, seedable generator (xoshiro256**, Blackman & Vigna).
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

/// SplitMix64 step: also a good 64-bit mixing function for content keys.
pub fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        Rng { s: [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)] }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// Uniform in `lo..=hi` (`lo` if `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// A uniformly chosen element.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len() as u64 - 1) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_stream() {
        // Pinned: a change here silently changes every scenario.
        let mut r = Rng::new(1);
        let first: Vec<u64> = (0..3).map(|_| r.next_u64() % 1000).collect();
        let mut again = Rng::new(1);
        let second: Vec<u64> = (0..3).map(|_| again.next_u64() % 1000).collect();
        assert_eq!(first, second);
        assert!((0..1000).all(|_| r.range(3, 5) >= 3));
        assert!(!r.chance(0.0));
    }
}
