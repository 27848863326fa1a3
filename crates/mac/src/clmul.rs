//! POLYVAL on the x86-64 carry-less multiplier, four blocks per reduction.
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
    __m128i, _mm_clmulepi64_si128, _mm_loadu_si128, _mm_shuffle_epi32, _mm_slli_si128, _mm_srli_si128, _mm_xor_si128,
};

/// H, H², H³, H⁴ of one key (u128 little-endian field elements).
#[derive(Clone)]
pub(crate) struct Powers {
    h: [u128; 4],
}

impl Powers {
    /// The powers of `h`, or `None` when the CPU lacks PCLMULQDQ.
    pub(crate) fn new(h: [u8; 16]) -> Option<Powers> {
        if !(std::arch::is_x86_feature_detected!("pclmulqdq") && std::arch::is_x86_feature_detected!("sse2")) {
            return None;
        }
        let h1 = u128::from_le_bytes(h);
        // SAFETY: the CPU has PCLMULQDQ and SSE2 (checked above), the only
        // features `dot` is compiled for.
        let (h2, h3, h4) = unsafe {
            let h2 = dot(h1, h1);
            let h3 = dot(h2, h1);
            (h2, h3, dot(h3, h1))
        };
        Some(Powers { h: [h1, h2, h3, h4] })
    }

    /// S after absorbing `blocks` (whole 16-byte blocks) into `acc`.
    pub(crate) fn absorb(&self, acc: u128, blocks: &[u8]) -> u128 {
        debug_assert_eq!(blocks.len() % 16, 0);
        // SAFETY: a `Powers` exists only where `new` found PCLMULQDQ and
        // SSE2, the features `absorb_blocks` is compiled for.
        unsafe { absorb_blocks(&self.h, acc, blocks) }
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
fn absorb_blocks(h: &[u128; 4], acc: u128, blocks: &[u8]) -> u128 {
    let [h1, h2, h3, h4] = h.map(to_m128);
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
