//! POLYVAL (RFC 8452 §3), the universal hash of memwire's packet MAC
//! (`mw_proto::auth`), fast enough to run over every byte sent and received.
//!
//! Owns: the hash and its two implementations. On x86-64 CPUs with the
//! carry-less multiplier (PCLMULQDQ, detected once per key at run time) the
//! `clmul` module multiplies four blocks by the key's powers H⁴, H³, H², H
//! and reduces their sum once, instead of reducing after every block: about
//! a quarter of the reductions, and four independent multiplications in
//! flight instead of a chain; with VPCLMULQDQ and AVX2 it folds eight blocks
//! per reduction, two multiplications per instruction (the `polyval` crate
//! reduces per block behind a dispatch call, which showed in the profile of
//! a bulk put between hosts; measurements: docs/perf-notes.md, "packet
//! MAC"). Elsewhere the `polyval` crate computes the same function.
//! Must not: know about packets, keys' origin or tags (the protocol builds
//! the MAC from this hash and AES).
//!
//! `unsafe` lives only in `clmul` (the intrinsics); every use says why it holds.

#[cfg(target_arch = "x86_64")]
mod clmul;

/// A POLYVAL key: the field element H and, with the carry-less multiplier,
/// its powers. Cheap to clone.
#[derive(Clone)]
pub struct PolyvalKey {
    h: [u8; 16],
    /// H, H², H³, H⁴ (little-endian field elements), when the CPU has CLMUL.
    #[cfg(target_arch = "x86_64")]
    powers: Option<clmul::Powers>,
}

impl core::fmt::Debug for PolyvalKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PolyvalKey(<redacted>)")
    }
}

impl PolyvalKey {
    /// The key H, as RFC 8452's 16 little-endian bytes.
    pub fn new(h: [u8; 16]) -> PolyvalKey {
        PolyvalKey {
            h,
            #[cfg(target_arch = "x86_64")]
            powers: clmul::Powers::new(h),
        }
    }

    /// Whether the carry-less-multiply kernel is in use.
    pub fn accelerated(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.powers.is_some() {
            return true;
        }
        false
    }

    /// A hash with nothing absorbed.
    pub fn start(&self) -> Polyval<'_> {
        let soft = (!self.accelerated())
            .then(|| <polyval::Polyval as polyval::universal_hash::KeyInit>::new(polyval::Key::from_slice(&self.h)));
        Polyval { key: self, acc: 0, soft }
    }

    /// A key that never uses the kernel (tests of the portable path).
    #[cfg(test)]
    fn portable(h: [u8; 16]) -> PolyvalKey {
        PolyvalKey {
            h,
            #[cfg(target_arch = "x86_64")]
            powers: None,
        }
    }
}

/// POLYVAL in progress under one key: absorbs whole 16-byte blocks.
#[derive(Clone)]
pub struct Polyval<'k> {
    key: &'k PolyvalKey,
    /// The accumulator S of the kernel, as a little-endian field element.
    acc: u128,
    /// The `polyval` crate's state, where the kernel is not used.
    soft: Option<polyval::Polyval>,
}

impl core::fmt::Debug for Polyval<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Polyval(<redacted>)")
    }
}

impl Polyval<'_> {
    /// Absorbs `blocks`, whose length must be a multiple of 16.
    ///
    /// # Panics
    ///
    /// If `blocks.len()` is not a multiple of 16.
    pub fn update_blocks(&mut self, blocks: &[u8]) {
        assert!(blocks.len().is_multiple_of(16), "POLYVAL absorbs whole 16-byte blocks");
        if blocks.is_empty() {
            return;
        }
        if let Some(soft) = &mut self.soft {
            use polyval::universal_hash::UniversalHash;
            soft.update_padded(blocks); // whole blocks: nothing is padded
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(powers) = &self.key.powers {
            self.acc = powers.absorb(self.acc, blocks);
        }
    }

    /// Absorbs one block.
    pub fn update_block(&mut self, block: &[u8; 16]) {
        self.update_blocks(block);
    }

    /// The hash: S as 16 little-endian bytes.
    pub fn finalize(self) -> [u8; 16] {
        match self.soft {
            Some(soft) => {
                use polyval::universal_hash::UniversalHash;
                soft.finalize().into()
            }
            None => self.acc.to_le_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(h: [u8; 16], data: &[u8]) -> [u8; 16] {
        use polyval::universal_hash::UniversalHash;
        let mut hash = <polyval::Polyval as polyval::universal_hash::KeyInit>::new(polyval::Key::from_slice(&h));
        hash.update_padded(data);
        hash.finalize().into()
    }

    /// RFC 8452 Appendix A's POLYVAL example.
    #[test]
    fn the_rfc_8452_example() {
        let h = hex16("25629347589242761d31f826ba4b757b");
        let x1 = hex16("4f4f95668c83dfb6401762bb2d01a262");
        let x2 = hex16("d1a24ddd2721d006bbe45f20d3c9f362");
        let mut data = x1.to_vec();
        data.extend_from_slice(&x2);
        let key = PolyvalKey::new(h);
        let mut hash = key.start();
        hash.update_blocks(&data);
        assert_eq!(hash.finalize(), hex16("f7a3b47b846119fae5b7866cf5e5b77e"));
        assert_eq!(reference(h, &data), hex16("f7a3b47b846119fae5b7866cf5e5b77e"));
        let portable = PolyvalKey::portable(h);
        let mut hash = portable.start();
        hash.update_blocks(&x1);
        hash.update_blocks(&x2);
        assert_eq!(hash.finalize(), hex16("f7a3b47b846119fae5b7866cf5e5b77e"));
    }

    fn hex16(s: &str) -> [u8; 16] {
        let mut out = [0u8; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    proptest! {
        /// Whatever the key, the data and the way it is fed (the kernel's
        /// four-block folds, its single-block tail, several calls), the
        /// result is the `polyval` crate's.
        #[test]
        fn matches_the_polyval_crate(h in any::<[u8; 16]>(), blocks in 0usize..40, seed in any::<u64>(), cut in 0usize..40) {
            let data: Vec<u8> = (0..blocks * 16)
                .map(|i| (seed.wrapping_mul(6364136223846793005).wrapping_add(i as u64 * 1442695040888963407) >> 33) as u8)
                .collect();
            let want = reference(h, &data);
            for key in [PolyvalKey::new(h), PolyvalKey::portable(h)] {
                let mut whole = key.start();
                whole.update_blocks(&data);
                let mut split = key.start();
                let at = cut.min(blocks) * 16;
                split.update_blocks(&data[..at]);
                split.update_blocks(&data[at..]);
                prop_assert_eq!(whole.finalize(), want);
                prop_assert_eq!(split.finalize(), want);
            }
        }
    }

    /// The 256-bit kernel (eight blocks per fold) and the 128-bit one
    /// agree, over every length through several folds and tails.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_wide_and_narrow_kernels_agree() {
        let wide = clmul::Powers::new([0x5a; 16]);
        // No CLMUL, no kernel: the contract is that none is built (and the
        // proptest above checks the portable path). A CPU with it must have it.
        assert_eq!(wide.is_some(), std::arch::is_x86_feature_detected!("pclmulqdq"));
        let Some(wide) = wide else { return };
        let narrow = wide.narrow();
        assert_eq!(wide.is_wide(), std::arch::is_x86_feature_detected!("vpclmulqdq"));
        let data: Vec<u8> = (0..16 * 40).map(|i| (i * 37 + 11) as u8).collect();
        for blocks in 0..=40 {
            let d = &data[..blocks * 16];
            for acc in [0u128, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210] {
                assert_eq!(wide.absorb(acc, d), narrow.absorb(acc, d), "{blocks} blocks");
            }
            assert_eq!(wide.absorb(0, d).to_le_bytes(), reference([0x5a; 16], d), "{blocks} blocks");
        }
    }

    #[test]
    fn the_kernel_is_used_where_the_cpu_has_clmul() {
        #[cfg(target_arch = "x86_64")]
        assert_eq!(PolyvalKey::new([1; 16]).accelerated(), std::arch::is_x86_feature_detected!("pclmulqdq"));
        assert_eq!(format!("{:?}", PolyvalKey::new([1; 16])), "PolyvalKey(<redacted>)");
    }
}
