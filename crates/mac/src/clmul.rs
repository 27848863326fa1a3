//! POLYVAL on the x86-64 carry-less multiplier, four blocks per reduction
//! (sixteen with VPCLMULQDQ).
//!
//! POLYVAL's product is `a • b = a·b·x⁻¹²⁸ mod P`, P = x¹²⁸ + x¹²⁷ + x¹²⁶ +
//! x¹²¹ + 1, with field elements as little-endian 128-bit values (RFC 8452
//! §3), so blocks load without a byte swap. Absorbing blocks X₁…X₄ into S is
//! `((((S⊕X₁)•H ⊕ X₂)•H ⊕ X₃)•H ⊕ X₄)•H = (S⊕X₁)•H⁴ ⊕ X₂•H³ ⊕ X₃•H² ⊕ X₄•H`
//! (the powers taken with `•`): the four 256-bit products are summed and
//! reduced once, since the reduction is linear.
//!
//! Owns: the kernel and the key's powers. Must not: be called without the
//! CPU feature (`Powers::new` returns `None` then, so no `Powers` exists).

use std::arch::x86_64::{
    __m128i, __m256i, _mm256_castsi256_si128, _mm256_clmulepi64_epi128, _mm256_extracti128_si256, _mm256_loadu_si256,
    _mm256_slli_si256, _mm256_srli_si256, _mm256_xor_si256, _mm_clmulepi64_si128, _mm_loadu_si128, _mm_shuffle_epi32,
    _mm_slli_si128, _mm_srli_si128, _mm_xor_si128,
};

/// H, H², …, H¹⁶ of one key (u128 little-endian field elements), and
/// whether the CPU multiplies two pairs per instruction (VPCLMULQDQ on
/// 256-bit registers, with AVX2), which folds sixteen blocks per reduction.
#[derive(Clone)]
pub(crate) struct Powers {
    h: [u128; POWERS],
    wide: bool,
}

/// Powers of H kept: one per block of the widest fold.
const POWERS: usize = 16;

impl Powers {
    /// The powers of `h`, or `None` when the CPU lacks PCLMULQDQ.
    pub(crate) fn new(h: [u8; 16]) -> Option<Powers> {
        if !(std::arch::is_x86_feature_detected!("pclmulqdq") && std::arch::is_x86_feature_detected!("sse2")) {
            return None;
        }
        let wide = std::arch::is_x86_feature_detected!("vpclmulqdq") && std::arch::is_x86_feature_detected!("avx2");
        let mut powers = [u128::from_le_bytes(h); POWERS];
        for i in 1..POWERS {
            // SAFETY: the CPU has PCLMULQDQ and SSE2 (checked above), the
            // only features `dot` is compiled for.
            powers[i] = unsafe { dot(powers[i - 1], powers[0]) };
        }
        Some(Powers { h: powers, wide })
    }

    /// S after absorbing `blocks` (whole 16-byte blocks) into `acc`.
    pub(crate) fn absorb(&self, acc: u128, blocks: &[u8]) -> u128 {
        debug_assert!(blocks.len().is_multiple_of(16));
        if self.wide {
            // SAFETY: `wide` is set only where `new` found VPCLMULQDQ, AVX2,
            // PCLMULQDQ and SSE2, the features `absorb_blocks_wide` is
            // compiled for.
            return unsafe { absorb_blocks_wide16(&self.h, acc, blocks) };
        }
        // SAFETY: a `Powers` exists only where `new` found PCLMULQDQ and
        // SSE2, the features `absorb_blocks` is compiled for.
        unsafe { absorb_blocks(&self.h, acc, blocks) }
    }

    /// The same without the 256-bit kernel (tests compare the two).
    #[cfg(test)]
    pub(crate) fn narrow(&self) -> Powers {
        Powers { h: self.h, wide: false }
    }

    /// Whether the 256-bit kernel is in use.
    #[cfg(test)]
    pub(crate) fn is_wide(&self) -> bool {
        self.wide
    }
}

fn to_m128(x: u128) -> __m128i {
    // SAFETY: both types are 16 plain bytes; every bit pattern is valid.
    unsafe { std::mem::transmute::<u128, __m128i>(x) }
}

fn from_m128(x: __m128i) -> u128 {
    // SAFETY: as in `to_m128`.
    unsafe { std::mem::transmute::<__m128i, u128>(x) }
}

/// The 256-bit carry-less product of `a` and `b`, as (low, high) halves.
#[inline]
#[target_feature(enable = "pclmulqdq,sse2")]
fn product(a: __m128i, b: __m128i) -> (__m128i, __m128i) {
    let lo = _mm_clmulepi64_si128::<0x00>(a, b);
    let hi = _mm_clmulepi64_si128::<0x11>(a, b);
    let mid = _mm_xor_si128(_mm_clmulepi64_si128::<0x10>(a, b), _mm_clmulepi64_si128::<0x01>(a, b));
    (_mm_xor_si128(lo, _mm_slli_si128::<8>(mid)), _mm_xor_si128(hi, _mm_srli_si128::<8>(mid)))
}

/// `(lo, hi)·x⁻¹²⁸ mod P`: two folds of the low 64 bits by P's low terms
/// (the constant is x⁶³·(x¹²⁷ + x¹²⁶ + x¹²¹)'s bit image, 0xc2 << 56).
#[inline]
#[target_feature(enable = "pclmulqdq,sse2")]
fn reduce(lo: __m128i, hi: __m128i) -> __m128i {
    let poly = to_m128(0xc200_0000_0000_0000_0000_0000_0000_0001);
    let t = _mm_clmulepi64_si128::<0x10>(lo, poly);
    let lo = _mm_xor_si128(_mm_shuffle_epi32::<0x4e>(lo), t);
    let t = _mm_clmulepi64_si128::<0x10>(lo, poly);
    let lo = _mm_xor_si128(_mm_shuffle_epi32::<0x4e>(lo), t);
    _mm_xor_si128(hi, lo)
}

/// `a • b`.
#[target_feature(enable = "pclmulqdq,sse2")]
fn dot(a: u128, b: u128) -> u128 {
    let (lo, hi) = product(to_m128(a), to_m128(b));
    from_m128(reduce(lo, hi))
}

#[target_feature(enable = "pclmulqdq,sse2")]
fn absorb_blocks(h: &[u128; POWERS], acc: u128, blocks: &[u8]) -> u128 {
    let [h1, h2, h3, h4] = [h[0], h[1], h[2], h[3]].map(to_m128);
    let mut s = to_m128(acc);
    let load = |chunk: &[u8]| {
        debug_assert_eq!(chunk.len(), 16);
        // SAFETY: `chunk` is 16 readable bytes; the load is unaligned.
        unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) }
    };
    let mut fours = blocks.chunks_exact(64);
    for four in &mut fours {
        let (l1, g1) = product(_mm_xor_si128(s, load(&four[..16])), h4);
        let (l2, g2) = product(load(&four[16..32]), h3);
        let (l3, g3) = product(load(&four[32..48]), h2);
        let (l4, g4) = product(load(&four[48..]), h1);
        let lo = _mm_xor_si128(_mm_xor_si128(l1, l2), _mm_xor_si128(l3, l4));
        let hi = _mm_xor_si128(_mm_xor_si128(g1, g2), _mm_xor_si128(g3, g4));
        s = reduce(lo, hi);
    }
    for block in fours.remainder().chunks_exact(16) {
        let (lo, hi) = product(_mm_xor_si128(s, load(block)), h1);
        s = reduce(lo, hi);
    }
    from_m128(s)
}

/// Two 128-bit lanes: `[low lane, high lane]`.
fn to_m256(low: u128, high: u128) -> __m256i {
    // SAFETY: two u128 are 32 plain bytes, laid out low lane first; every
    // bit pattern is a valid `__m256i`.
    unsafe { std::mem::transmute::<[u128; 2], __m256i>([low, high]) }
}

/// The lane-wise 256-bit carry-less products of two pairs: (low, high)
/// halves, each holding both lanes' halves.
#[inline]
#[target_feature(enable = "vpclmulqdq,avx2,pclmulqdq,sse2")]
fn product_pairs(a: __m256i, b: __m256i) -> (__m256i, __m256i) {
    let lo = _mm256_clmulepi64_epi128::<0x00>(a, b);
    let hi = _mm256_clmulepi64_epi128::<0x11>(a, b);
    let mid = _mm256_xor_si256(_mm256_clmulepi64_epi128::<0x10>(a, b), _mm256_clmulepi64_epi128::<0x01>(a, b));
    (_mm256_xor_si256(lo, _mm256_slli_si256::<8>(mid)), _mm256_xor_si256(hi, _mm256_srli_si256::<8>(mid)))
}

/// Eight blocks per reduction: blocks 2k and 2k+1 of a group sit in the
/// low and high lanes of one register and are multiplied by H^(8-2k) and
/// H^(7-2k) at once; the lanes are summed before the one reduction. The
/// tail (fewer than eight blocks) goes through the 128-bit kernel.
#[target_feature(enable = "vpclmulqdq,avx2,pclmulqdq,sse2")]
fn absorb_blocks_wide(h: &[u128; POWERS], acc: u128, blocks: &[u8]) -> u128 {
    let pairs = [to_m256(h[7], h[6]), to_m256(h[5], h[4]), to_m256(h[3], h[2]), to_m256(h[1], h[0])];
    let load = |chunk: &[u8]| {
        debug_assert_eq!(chunk.len(), 32);
        // SAFETY: `chunk` is 32 readable bytes; the load is unaligned.
        unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) }
    };
    let mut s = acc;
    let mut eights = blocks.chunks_exact(128);
    for eight in &mut eights {
        // S joins the first block (low lane of the first pair).
        let first = _mm256_xor_si256(load(&eight[..32]), to_m256(s, 0));
        let (mut lo, mut hi) = product_pairs(first, pairs[0]);
        for (k, pair) in pairs.iter().enumerate().skip(1) {
            let (l, g) = product_pairs(load(&eight[32 * k..32 * k + 32]), *pair);
            lo = _mm256_xor_si256(lo, l);
            hi = _mm256_xor_si256(hi, g);
        }
        let lo = _mm_xor_si128(_mm256_castsi256_si128(lo), _mm256_extracti128_si256::<1>(lo));
        let hi = _mm_xor_si128(_mm256_castsi256_si128(hi), _mm256_extracti128_si256::<1>(hi));
        s = from_m128(reduce(lo, hi));
    }
    absorb_blocks(h, s, eights.remainder())
}

/// Sixteen blocks per reduction, as [`absorb_blocks_wide`] does eight:
/// blocks 2k and 2k+1 are multiplied by H^(16-2k) and H^(15-2k) in one
/// register, so the chain through S (a product and a reduction) is paid
/// once per 256 bytes. The tail goes through the eight-block kernel.
#[target_feature(enable = "vpclmulqdq,avx2,pclmulqdq,sse2")]
fn absorb_blocks_wide16(h: &[u128; POWERS], acc: u128, blocks: &[u8]) -> u128 {
    let pairs: [__m256i; 8] = std::array::from_fn(|k| to_m256(h[15 - 2 * k], h[14 - 2 * k]));
    let load = |chunk: &[u8]| {
        debug_assert_eq!(chunk.len(), 32);
        // SAFETY: `chunk` is 32 readable bytes; the load is unaligned.
        unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) }
    };
    let mut s = acc;
    let mut sixteens = blocks.chunks_exact(256);
    for sixteen in &mut sixteens {
        let first = _mm256_xor_si256(load(&sixteen[..32]), to_m256(s, 0));
        let (mut lo, mut hi) = product_pairs(first, pairs[0]);
        for (k, pair) in pairs.iter().enumerate().skip(1) {
            let (l, g) = product_pairs(load(&sixteen[32 * k..32 * k + 32]), *pair);
            lo = _mm256_xor_si256(lo, l);
            hi = _mm256_xor_si256(hi, g);
        }
        let lo = _mm_xor_si128(_mm256_castsi256_si128(lo), _mm256_extracti128_si256::<1>(lo));
        let hi = _mm_xor_si128(_mm256_castsi256_si128(hi), _mm256_extracti128_si256::<1>(hi));
        s = from_m128(reduce(lo, hi));
    }
    absorb_blocks_wide(h, s, sixteens.remainder())
}
