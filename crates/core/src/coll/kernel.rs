//! Reduction kernels: element types, operations, and `acc[i] = acc[i] op src[i]`
//! over byte buffers in native byte order. Pure; no I/O.
//!
//! Owns: [`DType`], [`ReduceOp`], the element-wise combine (in place) and the
//! typed-slice conversions. Must not: do I/O, allocate while combining, or know
//! whose data it combines: `reduce` fixes the order that keeps every rank's
//! result bit-identical.

/// Element type of a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// i8
    I8,
    /// u8
    U8,
    /// i16
    I16,
    /// u16
    U16,
    /// i32
    I32,
    /// u32
    U32,
    /// i64
    I64,
    /// u64
    U64,
    /// f32
    F32,
    /// f64
    F64,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// Whether it is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }
}

/// Reduction operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (integers wrap).
    Sum,
    /// Product (integers wrap).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers only).
    BitAnd,
    /// Bitwise or (integers only).
    BitOr,
    /// Bitwise xor (integers only).
    BitXor,
}

impl ReduceOp {
    /// Whether the operation is bitwise (not defined on floats).
    pub fn is_bitwise(self) -> bool {
        matches!(self, ReduceOp::BitAnd | ReduceOp::BitOr | ReduceOp::BitXor)
    }
}

/// A type collectives can reduce: the primitive integers and floats.
pub trait Element: Copy + Send + Sync + 'static + private::Sealed {
    /// Its [`DType`].
    const DTYPE: DType;
    /// Native-endian bytes.
    fn write_bytes(self, out: &mut [u8]);
    /// From native-endian bytes.
    fn read_bytes(bytes: &[u8]) -> Self;
}

mod private {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl private::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn write_bytes(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }
            fn read_bytes(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("element-sized chunk"))
            }
        }
    )*};
}
element!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

/// Elements as native-endian bytes.
pub(crate) fn to_bytes<T: Element>(items: &[T]) -> Vec<u8> {
    let size = T::DTYPE.size();
    let mut out = vec![0u8; items.len() * size];
    for (item, chunk) in items.iter().zip(out.chunks_exact_mut(size)) {
        item.write_bytes(chunk);
    }
    out
}

/// Native-endian bytes back into elements.
pub(crate) fn from_bytes<T: Element>(bytes: &[u8], out: &mut [T]) {
    for (item, chunk) in out.iter_mut().zip(bytes.chunks_exact(T::DTYPE.size())) {
        *item = T::read_bytes(chunk);
    }
}

macro_rules! int_kernel {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        match $op {
            ReduceOp::Sum => apply::<$t, N>($acc, $src, <$t>::wrapping_add),
            ReduceOp::Prod => apply::<$t, N>($acc, $src, <$t>::wrapping_mul),
            ReduceOp::Min => apply::<$t, N>($acc, $src, |a: $t, b: $t| a.min(b)),
            ReduceOp::Max => apply::<$t, N>($acc, $src, |a: $t, b: $t| a.max(b)),
            ReduceOp::BitAnd => apply::<$t, N>($acc, $src, |a: $t, b: $t| a & b),
            ReduceOp::BitOr => apply::<$t, N>($acc, $src, |a: $t, b: $t| a | b),
            ReduceOp::BitXor => apply::<$t, N>($acc, $src, |a: $t, b: $t| a ^ b),
        }
    }};
}

macro_rules! float_kernel {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        match $op {
            ReduceOp::Sum => apply::<$t, N>($acc, $src, |a: $t, b: $t| a + b),
            ReduceOp::Prod => apply::<$t, N>($acc, $src, |a: $t, b: $t| a * b),
            ReduceOp::Min => apply::<$t, N>($acc, $src, <$t>::min),
            ReduceOp::Max => apply::<$t, N>($acc, $src, <$t>::max),
            // Rejected before any data moves (check_reduce).
            ReduceOp::BitAnd | ReduceOp::BitOr | ReduceOp::BitXor => {}
        }
    }};
}

/// Native-endian conversion for the kernels.
trait Native<const N: usize>: Copy {
    fn from_ne(bytes: [u8; N]) -> Self;
    fn to_ne(self) -> [u8; N];
}

macro_rules! native {
    ($($t:ty),*) => {$(
        impl Native<{ std::mem::size_of::<$t>() }> for $t {
            fn from_ne(bytes: [u8; std::mem::size_of::<$t>()]) -> Self {
                <$t>::from_ne_bytes(bytes)
            }
            fn to_ne(self) -> [u8; std::mem::size_of::<$t>()] {
                self.to_ne_bytes()
            }
        }
    )*};
}
native!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

#[inline(always)]
fn apply<T: Native<N>, const N: usize>(acc: &mut [u8], src: &[u8], f: impl Fn(T, T) -> T) {
    for (a, s) in acc.chunks_exact_mut(N).zip(src.chunks_exact(N)) {
        let x = T::from_ne(a.try_into().expect("N-byte chunk"));
        let y = T::from_ne(s.try_into().expect("N-byte chunk"));
        a.copy_from_slice(&f(x, y).to_ne());
    }
}

/// `acc[i] = acc[i] op src[i]` element-wise (`acc` and `src` the same length,
/// a whole number of elements).
pub(crate) fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    debug_assert_eq!(acc.len(), src.len());
    match dtype {
        DType::I8 => int_kernel!(i8, op, acc, src),
        DType::U8 => int_kernel!(u8, op, acc, src),
        DType::I16 => int_kernel!(i16, op, acc, src),
        DType::U16 => int_kernel!(u16, op, acc, src),
        DType::I32 => int_kernel!(i32, op, acc, src),
        DType::U32 => int_kernel!(u32, op, acc, src),
        DType::I64 => int_kernel!(i64, op, acc, src),
        DType::U64 => int_kernel!(u64, op, acc, src),
        DType::F32 => float_kernel!(f32, op, acc, src),
        DType::F64 => float_kernel!(f64, op, acc, src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_compute_elementwise() {
        let mut acc = to_bytes(&[1i32, -5, 7]);
        reduce_into(DType::I32, ReduceOp::Sum, &mut acc, &to_bytes(&[2i32, 3, -7]));
        let mut out = [0i32; 3];
        from_bytes(&acc, &mut out);
        assert_eq!(out, [3, -2, 0]);
        reduce_into(DType::I32, ReduceOp::Max, &mut acc, &to_bytes(&[0i32, 0, 0]));
        from_bytes(&acc, &mut out);
        assert_eq!(out, [3, 0, 0]);
        let mut f = to_bytes(&[1.5f64, 2.0]);
        reduce_into(DType::F64, ReduceOp::Min, &mut f, &to_bytes(&[0.5f64, 4.0]));
        let mut fo = [0f64; 2];
        from_bytes(&f, &mut fo);
        assert_eq!(fo, [0.5, 2.0]);
        let mut b = vec![0b1100u8, 0xff];
        reduce_into(DType::U8, ReduceOp::BitXor, &mut b, &[0b1010, 0x0f]);
        assert_eq!(b, [0b0110, 0xf0]);
        let mut w = to_bytes(&[u64::MAX]);
        reduce_into(DType::U64, ReduceOp::Sum, &mut w, &to_bytes(&[2u64]));
        assert_eq!(w, to_bytes(&[1u64]));
    }
}
