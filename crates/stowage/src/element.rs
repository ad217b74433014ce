//! Element values: reading and writing one element of any dtype, and the
//! Rust types that map to dtypes.
//!
//! Elements live in storage in native byte order. Conversions follow
//! PyTorch's C++ casts: float to integer truncates toward zero (saturating
//! where C++ would be undefined), anything to bool is `!= 0`, complex to
//! real keeps the real part, and every sub-32-bit float is produced from an
//! `f32` (PyTorch's `Half`, `BFloat16` and float8 types convert from `float`,
//! so a `float64` value is rounded to `f32` first, as PyTorch does).

use crate::error::TensorError;
use half::{bf16, f16};
use num_complex::{Complex, Complex32, Complex64};

use crate::dtype::Repr;
use crate::{DType, Error, Result};

/// One element's value, whatever its dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// A signed integer (every integer dtype but large `uint64` values).
    Int(i64),
    /// An unsigned integer (`uint64` elements).
    UInt(u64),
    /// A real float.
    Float(f64),
    /// A complex number.
    Complex(Complex64),
}

impl Scalar {
    /// The value as `f64` (complex: the real part).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::UInt(u) => u as f64,
            Scalar::Float(f) => f,
            Scalar::Complex(c) => c.re,
        }
    }
    /// The value as a complex number.
    pub fn to_complex(self) -> Complex64 {
        match self {
            Scalar::Complex(c) => c,
            other => Complex64::new(other.to_f64(), 0.0),
        }
    }
    /// The value as `i64`, truncating floats toward zero (saturating).
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::UInt(u) => u as i64,
            Scalar::Float(f) => f as i64,
            Scalar::Complex(c) => c.re as i64,
        }
    }
    /// The value as `u64`, as C++ would cast it (integers wrap, floats truncate).
    pub fn to_u64(self) -> u64 {
        match self {
            Scalar::Bool(b) => b as u64,
            Scalar::Int(i) => i as u64,
            Scalar::UInt(u) => u,
            Scalar::Float(f) if f < 0.0 => (f as i64) as u64,
            Scalar::Float(f) => f as u64,
            Scalar::Complex(c) => Scalar::Float(c.re).to_u64(),
        }
    }
    /// The value as a boolean (`!= 0`).
    pub fn to_bool(self) -> bool {
        match self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::UInt(u) => u != 0,
            Scalar::Float(f) => f != 0.0,
            Scalar::Complex(c) => c.re != 0.0 || c.im != 0.0,
        }
    }
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}
impl From<Complex64> for Scalar {
    fn from(v: Complex64) -> Self {
        Scalar::Complex(v)
    }
}

/// Reads the element of `dtype` held in `bytes` (exactly `dtype.size()` bytes, native order).
///
/// # Errors
/// [`TensorError::DTypeUnsupported`] for dtypes without scalar values (bits, packed fp4).
pub(crate) fn read(dtype: DType, bytes: &[u8]) -> Result<Scalar> {
    if !dtype.has_scalar_values() {
        return Err(Error::Tensor(TensorError::DTypeUnsupported {
            op: "reading an element",
            dtype,
        }));
    }
    Ok(read_repr(dtype.info().repr, bytes))
}

fn read_repr(repr: Repr, b: &[u8]) -> Scalar {
    fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[..N]);
        a
    }
    match repr {
        Repr::F64 => Scalar::Float(f64::from_ne_bytes(arr(b))),
        Repr::F32 => Scalar::Float(f32::from_ne_bytes(arr(b)) as f64),
        Repr::F16 => Scalar::Float(f16::from_ne_bytes(arr(b)).to_f64()),
        Repr::BF16 => Scalar::Float(bf16::from_ne_bytes(arr(b)).to_f64()),
        Repr::Mini(m) => Scalar::Float(m.to_f32(b[0]) as f64),
        Repr::Bool => Scalar::Bool(b[0] != 0),
        Repr::Signed => Scalar::Int(match b.len() {
            1 => b[0] as i8 as i64,
            2 => i16::from_ne_bytes(arr(b)) as i64,
            4 => i32::from_ne_bytes(arr(b)) as i64,
            _ => i64::from_ne_bytes(arr(b)),
        }),
        Repr::Unsigned | Repr::Opaque => match b.len() {
            1 => Scalar::Int(b[0] as i64),
            2 => Scalar::Int(u16::from_ne_bytes(arr(b)) as i64),
            4 => Scalar::Int(u32::from_ne_bytes(arr(b)) as i64),
            _ => Scalar::UInt(u64::from_ne_bytes(arr(b))),
        },
        Repr::Complex(part) => {
            let (re, im) = b.split_at(part.size());
            let part = |b| read_repr(part.info().repr, b).to_f64();
            Scalar::Complex(Complex64::new(part(re), part(im)))
        }
    }
}

/// Writes `value`, converted to `dtype` as PyTorch casts, into `out`
/// (exactly `dtype.size()` bytes, native order).
///
/// # Errors
/// [`TensorError::DTypeUnsupported`] for dtypes without scalar values.
pub(crate) fn write(dtype: DType, value: Scalar, out: &mut [u8]) -> Result<()> {
    if !dtype.has_scalar_values() {
        return Err(Error::Tensor(TensorError::DTypeUnsupported {
            op: "writing an element",
            dtype,
        }));
    }
    write_repr(dtype.info().repr, value, out);
    Ok(())
}

fn write_repr(repr: Repr, v: Scalar, out: &mut [u8]) {
    // PyTorch's reduced-precision floats are built from `float`.
    let as_f32 = |v: Scalar| v.to_f64() as f32;
    match repr {
        Repr::F64 => out.copy_from_slice(&v.to_f64().to_ne_bytes()),
        Repr::F32 => out.copy_from_slice(&as_f32(v).to_ne_bytes()),
        Repr::F16 => out.copy_from_slice(&f16::from_f32(as_f32(v)).to_ne_bytes()),
        Repr::BF16 => out.copy_from_slice(&bf16::from_f32(as_f32(v)).to_ne_bytes()),
        Repr::Mini(m) => out[0] = m.from_f32(as_f32(v)),
        Repr::Bool => out[0] = v.to_bool() as u8,
        Repr::Signed | Repr::Unsigned | Repr::Opaque => {
            // C++ integral conversion: take the low bytes of the two's complement value.
            let wide = match v {
                Scalar::UInt(u) => u,
                other => other.to_i64() as u64,
            };
            let n = out.len();
            out.copy_from_slice(&wide.to_ne_bytes()[native_low(n)]);
        }
        Repr::Complex(part) => {
            // Each part is converted from `f64` as a real element of the part
            // dtype: `complex<Half>` parts go through `float`, as in c10.
            let c = v.to_complex();
            let (re, im) = out.split_at_mut(part.size());
            let repr = part.info().repr;
            write_repr(repr, Scalar::Float(c.re), re);
            write_repr(repr, Scalar::Float(c.im), im);
        }
    }
}

/// The byte range of the low `n` bytes of a native-order `u64`.
fn native_low(n: usize) -> std::ops::Range<usize> {
    if cfg!(target_endian = "little") {
        0..n
    } else {
        8 - n..8
    }
}

/// A Rust type that is the element type of a dtype (`f32` ↔ `float32` …).
///
/// Used by typed constructors ([`crate::Tensor::from_vec`]), reads
/// ([`crate::Tensor::to_vec`]) and typed views ([`crate::Tensor::read`]).
/// The types are exactly those of the table below; the trait is sealed, since
/// each type must have the size and bit layout of its dtype's elements.
///
/// | type | dtype |
/// | --- | --- |
/// | `f64`, `f32` | `float64`, `float32` |
/// | [`half::f16`], [`half::bf16`] | `float16`, `bfloat16` |
/// | `i64`, `i32`, `i16`, `i8` | `int64` … `int8` |
/// | `u64`, `u32`, `u16`, `u8` | `uint64` … `uint8` |
/// | `bool` | `bool` |
/// | [`num_complex::Complex64`], [`num_complex::Complex32`] | `complex128`, `complex64` |
///
/// Every conversion to an element type follows PyTorch's casts (see the
/// module documentation); [`from_scalar`](Self::from_scalar) applies them to
/// a [`Scalar`], and the typed reads apply the same casts to each element
/// without building one.
pub trait Element: sealed::Cast + Copy + Send + Sync + bytemuck::NoUninit + 'static {
    /// The dtype whose elements are `Self`.
    const DTYPE: DType;
    /// Converts a scalar to `Self` as PyTorch casts.
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Bool(b) => Self::from_bool(b),
            Scalar::Int(i) => Self::from_i64(i),
            Scalar::UInt(u) => Self::from_u64(u),
            Scalar::Float(f) => Self::from_f64(f),
            Scalar::Complex(c) => Self::from_complex(c),
        }
    }
    /// Converts `self` to a scalar.
    fn to_scalar(self) -> Scalar;
}

/// The casts behind [`Element`], one per kind of source value, and the
/// byte views of the element types that are plain old data. Public in a
/// private module, so the trait is sealed and these are not API.
pub(crate) mod sealed {
    use num_complex::Complex64;

    /// Conversions of one source value to `Self`, as PyTorch casts: each is
    /// what [`Scalar`](super::Scalar)'s matching `to_*` method and the cast of
    /// its result give (a `float64` value becomes `int32` through `int64`, as
    /// the old element path did: `(v as i64) as i32`).
    pub trait Cast: Sized + bytemuck::Zeroable {
        /// True when every bit pattern is a value (every element type but `bool`).
        const POD: bool;
        /// From a real float.
        fn from_f64(v: f64) -> Self;
        /// From a signed integer.
        fn from_i64(v: i64) -> Self;
        /// From an unsigned 64-bit integer (`uint64` elements).
        fn from_u64(v: u64) -> Self;
        /// From a boolean.
        fn from_bool(v: bool) -> Self;
        /// From a complex number.
        fn from_complex(v: Complex64) -> Self;
        /// The elements' bytes, for element types that are plain old data
        /// (every one but `bool`, whose bytes must be 0 or 1).
        fn pod_bytes_mut(v: &mut [Self]) -> Option<&mut [u8]>;
    }
}

/// C++'s float-to-unsigned cast as [`Scalar::to_u64`] does it.
fn f64_to_u64(f: f64) -> u64 {
    if f < 0.0 {
        (f as i64) as u64
    } else {
        f as u64
    }
}

macro_rules! element {
    ($($t:ty => $dt:ident, pod: $pod:tt, to: |$v:ident| $to:expr,
        f64: |$f:ident| $from_f:expr, i64: |$i:ident| $from_i:expr, u64: |$u:ident| $from_u:expr,
        bool: |$b:ident| $from_b:expr, complex: |$c:ident| $from_c:expr;)*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            fn to_scalar(self) -> Scalar { let $v = self; $to }
        }
        impl sealed::Cast for $t {
            const POD: bool = $pod;
            #[inline]
            fn from_f64($f: f64) -> Self { $from_f }
            #[inline]
            fn from_i64($i: i64) -> Self { $from_i }
            #[inline]
            fn from_u64($u: u64) -> Self { $from_u }
            #[inline]
            fn from_bool($b: bool) -> Self { $from_b }
            #[inline]
            fn from_complex($c: Complex64) -> Self { $from_c }
            fn pod_bytes_mut(v: &mut [Self]) -> Option<&mut [u8]> { element!(@pod $pod, v) }
        }
    )*};
    (@pod true, $v:ident) => { Some(bytemuck::cast_slice_mut($v)) };
    (@pod false, $v:ident) => {{ let _ = $v; None }};
}

element! {
    f64 => Float64, pod: true, to: |v| Scalar::Float(v),
        f64: |f| f, i64: |i| i as f64, u64: |u| u as f64, bool: |b| b as u8 as f64, complex: |c| c.re;
    f32 => Float32, pod: true, to: |v| Scalar::Float(v as f64),
        f64: |f| f as f32, i64: |i| i as f64 as f32, u64: |u| u as f64 as f32,
        bool: |b| b as u8 as f32, complex: |c| c.re as f32;
    f16 => Float16, pod: true, to: |v| Scalar::Float(v.to_f64()),
        f64: |f| f16::from_f32(f as f32), i64: |i| f16::from_f32(i as f64 as f32),
        u64: |u| f16::from_f32(u as f64 as f32), bool: |b| f16::from_f32(b as u8 as f32),
        complex: |c| f16::from_f32(c.re as f32);
    bf16 => BFloat16, pod: true, to: |v| Scalar::Float(v.to_f64()),
        f64: |f| bf16::from_f32(f as f32), i64: |i| bf16::from_f32(i as f64 as f32),
        u64: |u| bf16::from_f32(u as f64 as f32), bool: |b| bf16::from_f32(b as u8 as f32),
        complex: |c| bf16::from_f32(c.re as f32);
    i64 => Int64, pod: true, to: |v| Scalar::Int(v),
        f64: |f| f as i64, i64: |i| i, u64: |u| u as i64, bool: |b| b as i64, complex: |c| c.re as i64;
    i32 => Int32, pod: true, to: |v| Scalar::Int(v as i64),
        f64: |f| (f as i64) as i32, i64: |i| i as i32, u64: |u| u as i32, bool: |b| b as i32,
        complex: |c| (c.re as i64) as i32;
    i16 => Int16, pod: true, to: |v| Scalar::Int(v as i64),
        f64: |f| (f as i64) as i16, i64: |i| i as i16, u64: |u| u as i16, bool: |b| b as i16,
        complex: |c| (c.re as i64) as i16;
    i8 => Int8, pod: true, to: |v| Scalar::Int(v as i64),
        f64: |f| (f as i64) as i8, i64: |i| i as i8, u64: |u| u as i8, bool: |b| b as i8,
        complex: |c| (c.re as i64) as i8;
    u8 => UInt8, pod: true, to: |v| Scalar::Int(v as i64),
        f64: |f| f64_to_u64(f) as u8, i64: |i| i as u8, u64: |u| u as u8, bool: |b| b as u8,
        complex: |c| f64_to_u64(c.re) as u8;
    u16 => UInt16, pod: true, to: |v| Scalar::Int(v as i64),
        f64: |f| f64_to_u64(f) as u16, i64: |i| i as u16, u64: |u| u as u16, bool: |b| b as u16,
        complex: |c| f64_to_u64(c.re) as u16;
    u32 => UInt32, pod: true, to: |v| Scalar::Int(v as i64),
        f64: |f| f64_to_u64(f) as u32, i64: |i| i as u32, u64: |u| u as u32, bool: |b| b as u32,
        complex: |c| f64_to_u64(c.re) as u32;
    u64 => UInt64, pod: true, to: |v| Scalar::UInt(v),
        f64: |f| f64_to_u64(f), i64: |i| i as u64, u64: |u| u, bool: |b| b as u64,
        complex: |c| f64_to_u64(c.re);
    bool => Bool, pod: false, to: |v| Scalar::Bool(v),
        f64: |f| f != 0.0, i64: |i| i != 0, u64: |u| u != 0, bool: |b| b,
        complex: |c| c.re != 0.0 || c.im != 0.0;
    Complex64 => Complex128, pod: true, to: |v| Scalar::Complex(v),
        f64: |f| Complex64::new(f, 0.0), i64: |i| Complex64::new(i as f64, 0.0),
        u64: |u| Complex64::new(u as f64, 0.0), bool: |b| Complex64::new(b as u8 as f64, 0.0),
        complex: |c| c;
    Complex32 => Complex64, pod: true, to: |v| Scalar::Complex(Complex64::new(v.re as f64, v.im as f64)),
        f64: |f| Complex32::new(f as f32, 0.0), i64: |i| Complex32::new(i as f64 as f32, 0.0),
        u64: |u| Complex32::new(u as f64 as f32, 0.0),
        bool: |b| Complex32::new(b as u8 as f32, 0.0),
        complex: |c| Complex::new(c.re as f32, c.im as f32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DTYPES;
    use crate::error::TensorError;

    #[test]
    fn every_numeric_dtype_round_trips_small_integers() {
        for row in DTYPES.iter().filter(|r| r.dtype.has_scalar_values()) {
            let mut buf = vec![0u8; row.size];
            for v in [0i64, 1, 2] {
                write(row.dtype, Scalar::Int(v), &mut buf).unwrap();
                let back = read(row.dtype, &buf).unwrap();
                let want = match row.dtype {
                    DType::Float8E8M0Fnu if v == 0 => back.to_f64(), // e8m0 has no zero
                    DType::Bool => (v != 0) as u8 as f64,
                    _ => v as f64,
                };
                assert_eq!(back.to_f64(), want, "{}", row.name);
            }
        }
    }

    #[test]
    fn float32_one_is_0_0_128_63() {
        let mut buf = [0u8; 4];
        write(DType::Float32, Scalar::Float(1.0), &mut buf).unwrap();
        assert_eq!(buf, [0, 0, 128, 63]);
    }

    #[test]
    fn conversions_follow_cpp_casts() {
        let mut b = [0u8; 1];
        write(DType::Int8, Scalar::Int(200), &mut b).unwrap();
        assert_eq!(read(DType::Int8, &b).unwrap(), Scalar::Int(-56));
        write(DType::UInt8, Scalar::Float(-1.7), &mut b).unwrap();
        assert_eq!(read(DType::UInt8, &b).unwrap(), Scalar::Int(255));
        write(DType::Bool, Scalar::Float(0.5), &mut b).unwrap();
        assert_eq!(read(DType::Bool, &b).unwrap(), Scalar::Bool(true));
        let mut c = [0u8; 8];
        write(DType::UInt64, Scalar::UInt(u64::MAX), &mut c).unwrap();
        assert_eq!(read(DType::UInt64, &c).unwrap(), Scalar::UInt(u64::MAX));
        let mut h = [0u8; 2];
        write(DType::Float16, Scalar::Float(65520.0), &mut h).unwrap();
        assert!(read(DType::Float16, &h).unwrap().to_f64().is_infinite());
    }

    #[test]
    fn bits_have_no_values() {
        assert!(matches!(
            read(DType::Bits8, &[0]),
            Err(Error::Tensor(TensorError::DTypeUnsupported { .. }))
        ));
        assert!(write(DType::Bits16, Scalar::Int(1), &mut [0, 0]).is_err());
    }

    /// The typed casts are exactly the `Scalar::to_*` formulas the element
    /// path always used (`from_scalar` was `s.to_i64() as i32`, …).
    #[test]
    fn typed_casts_match_the_scalar_formulas() {
        let floats = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.7,
            -1.7,
            255.5,
            256.0,
            -129.0,
            65504.0,
            65520.0,
            3e9,
            -3e9,
            1e19,
            -1e19,
            1e300,
            -1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1e-40,
            16777217.0,
            9.007199254740993e15,
        ];
        let ints = [
            0,
            1,
            -1,
            127,
            128,
            -129,
            255,
            256,
            65535,
            65536,
            -65537,
            i64::MIN,
            i64::MAX,
            3_000_000_000,
            16_777_217,
        ];
        let uints = [0, 1, 255, 256, u64::MAX, u64::MAX / 2 + 1, 1 << 53 | 1];
        let mut scalars: Vec<Scalar> = floats.iter().map(|&f| Scalar::Float(f)).collect();
        scalars.extend(ints.iter().map(|&i| Scalar::Int(i)));
        scalars.extend(uints.iter().map(|&u| Scalar::UInt(u)));
        scalars.extend([Scalar::Bool(false), Scalar::Bool(true)]);
        for &(re, im) in &[
            (1.5, -2.5),
            (0.0, 1.0),
            (-0.0, 0.0),
            (3e9, f64::NAN),
            (-7.9, 0.0),
        ] {
            scalars.push(Scalar::Complex(Complex64::new(re, im)));
        }
        fn same<T: Element + std::fmt::Debug>(s: Scalar, want: T, bits: impl Fn(T) -> u128) {
            let got = T::from_scalar(s);
            assert_eq!(
                bits(got),
                bits(want),
                "{s:?} to {}: {got:?} vs {want:?}",
                T::DTYPE
            );
        }
        for s in scalars {
            same(s, s.to_f64(), |v| v.to_bits() as u128);
            same(s, s.to_f64() as f32, |v| v.to_bits() as u128);
            same(s, f16::from_f32(s.to_f64() as f32), |v| v.to_bits() as u128);
            same(s, bf16::from_f32(s.to_f64() as f32), |v| {
                v.to_bits() as u128
            });
            same(s, s.to_i64(), |v| v as u128);
            same(s, s.to_i64() as i32, |v| v as u32 as u128);
            same(s, s.to_i64() as i16, |v| v as u16 as u128);
            same(s, s.to_i64() as i8, |v| v as u8 as u128);
            same(s, s.to_u64() as u8, |v| v as u128);
            same(s, s.to_u64() as u16, |v| v as u128);
            same(s, s.to_u64() as u32, |v| v as u128);
            same(s, s.to_u64(), |v| v as u128);
            same(s, s.to_bool(), |v| v as u128);
            let c = s.to_complex();
            same(s, c, |v| {
                (v.re.to_bits() as u128) << 64 | v.im.to_bits() as u128
            });
            same(s, Complex32::new(c.re as f32, c.im as f32), |v| {
                (v.re.to_bits() as u128) << 32 | v.im.to_bits() as u128
            });
        }
    }
}
