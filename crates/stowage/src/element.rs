//! Element values: reading and writing one element of any dtype, and the
//! Rust types that map to dtypes.
//!
//! Elements live in storage in native byte order. Conversions follow
//! PyTorch's C++ casts: float to integer truncates toward zero (saturating
//! where C++ would be undefined), anything to bool is `!= 0`, complex to
//! real keeps the real part, and every sub-32-bit float is produced from an
//! `f32` (PyTorch's `Half`, `BFloat16` and float8 types convert from `float`,
//! so a `float64` value is rounded to `f32` first, as PyTorch does).

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
/// [`Error::DTypeUnsupported`] for dtypes without scalar values (bits, packed fp4).
pub fn read(dtype: DType, bytes: &[u8]) -> Result<Scalar> {
    if !dtype.has_scalar_values() {
        return Err(Error::DTypeUnsupported {
            op: "reading an element",
            dtype,
        });
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
/// [`Error::DTypeUnsupported`] for dtypes without scalar values.
pub fn write(dtype: DType, value: Scalar, out: &mut [u8]) -> Result<()> {
    if !dtype.has_scalar_values() {
        return Err(Error::DTypeUnsupported {
            op: "writing an element",
            dtype,
        });
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
/// Used by typed constructors ([`crate::Tensor::from_slice`]) and reads
/// ([`crate::Tensor::to_vec`]).
pub trait Element: Copy + Send + Sync + 'static {
    /// The dtype whose elements are `Self`.
    const DTYPE: DType;
    /// Converts a scalar to `Self` as PyTorch casts.
    fn from_scalar(s: Scalar) -> Self;
    /// Converts `self` to a scalar.
    fn to_scalar(self) -> Scalar;
}

macro_rules! element {
    ($($t:ty => $dt:ident, |$s:ident| $from:expr, |$v:ident| $to:expr;)*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            fn from_scalar($s: Scalar) -> Self { $from }
            fn to_scalar(self) -> Scalar { let $v = self; $to }
        }
    )*};
}

element! {
    f64 => Float64, |s| s.to_f64(), |v| Scalar::Float(v);
    f32 => Float32, |s| s.to_f64() as f32, |v| Scalar::Float(v as f64);
    f16 => Float16, |s| f16::from_f32(s.to_f64() as f32), |v| Scalar::Float(v.to_f64());
    bf16 => BFloat16, |s| bf16::from_f32(s.to_f64() as f32), |v| Scalar::Float(v.to_f64());
    i64 => Int64, |s| s.to_i64(), |v| Scalar::Int(v);
    i32 => Int32, |s| s.to_i64() as i32, |v| Scalar::Int(v as i64);
    i16 => Int16, |s| s.to_i64() as i16, |v| Scalar::Int(v as i64);
    i8 => Int8, |s| s.to_i64() as i8, |v| Scalar::Int(v as i64);
    u8 => UInt8, |s| s.to_u64() as u8, |v| Scalar::Int(v as i64);
    u16 => UInt16, |s| s.to_u64() as u16, |v| Scalar::Int(v as i64);
    u32 => UInt32, |s| s.to_u64() as u32, |v| Scalar::Int(v as i64);
    u64 => UInt64, |s| s.to_u64(), |v| Scalar::UInt(v);
    bool => Bool, |s| s.to_bool(), |v| Scalar::Bool(v);
    Complex64 => Complex128, |s| s.to_complex(), |v| Scalar::Complex(v);
    Complex32 => Complex64, |s| { let c = s.to_complex(); Complex::new(c.re as f32, c.im as f32) }, |v| Scalar::Complex(Complex64::new(v.re as f64, v.im as f64));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DTYPES;

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
            Err(Error::DTypeUnsupported { .. })
        ));
        assert!(write(DType::Bits16, Scalar::Int(1), &mut [0, 0]).is_err());
    }
}
