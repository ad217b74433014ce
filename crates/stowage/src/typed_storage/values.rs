//! Element values written into typed storages, checked as PyTorch checks them.

use super::*;

/// The dtype PyTorch reads and writes a quantized dtype's elements through
/// (its integer representation); other dtypes are themselves.
pub(super) fn interpret(dtype: DType) -> DType {
    match dtype {
        DType::QUInt8 | DType::QUInt4x2 | DType::QUInt2x4 => DType::UInt8,
        DType::QInt8 => DType::Int8,
        DType::QInt32 => DType::Int32,
        d => d,
    }
}

/// The route a value takes into storage, which decides PyTorch's checks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Path {
    /// `torch.tensor(data, dtype=…)` (constructing from data): integer dtypes
    /// are range-checked and named as dtypes (`int8`); floats are not checked.
    Store,
    /// `storage[i] = v`: c10's `checked_convert` for integers, float32 and the
    /// complex floats, named as C++ types (`int8_t`).
    Set,
    /// `storage.fill_(v)`: as `Set`, and the reduced-precision floats too.
    Fill,
}

/// The range a C++ element type holds, for c10's `overflows`.
#[derive(Clone, Copy)]
pub(super) enum Range {
    /// Never overflows (float64, bool, …).
    Any,
    /// An integer of `bits` bits.
    Int { signed: bool, bits: u32 },
    /// A float with largest finite value `max`.
    Float { max: f64, inf: bool, nan: bool },
    /// A complex number whose parts are such floats.
    Complex { max: f64, inf: bool, nan: bool },
}

pub(super) fn range_and_cpp_name(dtype: DType) -> (Range, &'static str) {
    use DType as D;
    let int = |signed, bits| Range::Int { signed, bits };
    let float = |max, inf, nan| Range::Float { max, inf, nan };
    match interpret(dtype) {
        D::UInt8 => (int(false, 8), "uint8_t"),
        D::Int8 => (int(true, 8), "int8_t"),
        D::Int16 => (int(true, 16), "int16_t"),
        D::Int32 => (int(true, 32), "int"),
        D::Int64 => (int(true, 64), "int64_t"),
        D::UInt16 => (int(false, 16), "uint16_t"),
        D::UInt32 => (int(false, 32), "uint32_t"),
        D::UInt64 => (int(false, 64), "uint64_t"),
        D::Float32 => (float(f32::MAX as f64, true, true), "float"),
        D::Float16 => (float(65504.0, true, true), "c10::Half"),
        D::BFloat16 => (float(3.3895313892515355e38, true, true), "c10::BFloat16"),
        D::Float8E4M3Fn => (float(448.0, false, true), "c10::Float8_e4m3fn"),
        D::Float8E5M2 => (float(57344.0, true, true), "c10::Float8_e5m2"),
        D::Float8E4M3Fnuz => (float(240.0, false, true), "c10::Float8_e4m3fnuz"),
        D::Float8E5M2Fnuz => (float(57344.0, false, true), "c10::Float8_e5m2fnuz"),
        D::Complex64 => (
            Range::Complex {
                max: f32::MAX as f64,
                inf: true,
                nan: true,
            },
            "c10::complex<float>",
        ),
        D::Complex32 => (
            Range::Complex {
                max: 65504.0,
                inf: true,
                nan: true,
            },
            "c10::complex<c10::Half>",
        ),
        _ => (Range::Any, ""),
    }
}

pub(super) fn float_overflows(f: f64, max: f64, inf: bool, nan: bool) -> bool {
    if inf && f.is_infinite() {
        return false;
    }
    if !nan && f.is_nan() {
        return true;
    }
    f < -max || f > max
}

/// c10's `overflows<To, From>(value)`.
pub(super) fn overflows(value: Scalar, range: Range) -> bool {
    match range {
        Range::Any => false,
        Range::Int { signed, bits } => {
            let max: i128 = if signed {
                (1i128 << (bits - 1)) - 1
            } else {
                (1i128 << bits) - 1
            };
            let min: i128 = if signed { -(1i128 << (bits - 1)) } else { 0 };
            let float = |f: f64| f.is_nan() || f < min as f64 || f > max as f64;
            match value {
                Scalar::Bool(_) => false,
                // Unsigned targets let negative integers wrap (`-1` → 255).
                Scalar::Int(i) if !signed => i as i128 > max || (i < 0 && -(i as i128) > max),
                Scalar::Int(i) => (i as i128) < min || i as i128 > max,
                Scalar::UInt(u) => u as i128 > max,
                Scalar::Float(f) => float(f),
                Scalar::Complex(c) => c.im != 0.0 || float(c.re),
            }
        }
        Range::Float { max, inf, nan } => match value {
            Scalar::Bool(_) => false,
            Scalar::Complex(c) => c.im != 0.0 || float_overflows(c.re, max, inf, nan),
            other => float_overflows(other.to_f64(), max, inf, nan),
        },
        Range::Complex { max, inf, nan } => {
            let c = value.to_complex();
            !matches!(value, Scalar::Bool(_))
                && (float_overflows(c.re, max, inf, nan) || float_overflows(c.im, max, inf, nan))
        }
    }
}

/// Checks that `value` may be written into an element of `dtype` along `path`.
pub(super) fn check_value(dtype: DType, value: Scalar, path: Path) -> Result<()> {
    if !dtype.has_scalar_values() {
        return Err(Error::DTypeUnsupported {
            op: "writing an element",
            dtype,
        });
    }
    let target = interpret(dtype);
    let (range, cpp) = range_and_cpp_name(target);
    let integer = matches!(range, Range::Int { .. });
    match path {
        Path::Store => {
            // torch.tensor: complex values only go into complex and bool elements.
            if let Scalar::Complex(_) = value {
                if !target.is_complex() && target != DType::Bool {
                    return Err(Error::ComplexNotReal { integer });
                }
            }
            if integer && overflows(value, range) {
                return Err(Error::ValueOverflow {
                    type_name: target.name(),
                });
            }
        }
        Path::Set | Path::Fill => {
            let checked = match range {
                Range::Float { .. } => path == Path::Fill || target == DType::Float32,
                _ => true,
            };
            if checked && overflows(value, range) {
                return Err(Error::ValueOverflow { type_name: cpp });
            }
        }
    }
    Ok(())
}
