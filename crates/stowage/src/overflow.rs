//! Which values a write may store: c10's `overflows` and `checked_convert`,
//! as PyTorch applies them to a value written into an element. The one
//! check behind typed storages (`storage[i] = v`, `fill_`,
//! `TypedStorage(data)`) and tensors (`fill_`, `full`, `t[i] = v`).

use crate::dtype::ValueRange;
use crate::element::Scalar;
use crate::error::TensorError;
use crate::{DType, Error, Result};

/// The dtype PyTorch reads and writes a quantized dtype's elements through
/// (its integer representation); other dtypes are themselves.
pub(crate) fn interpret(dtype: DType) -> DType {
    dtype.int_repr().unwrap_or(dtype)
}

/// The route a value takes into storage, which decides PyTorch's checks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// `torch.tensor(data, dtype=…)` (constructing from data): integer dtypes
    /// are range-checked and named as dtypes (`int8`); floats are not checked.
    /// Taken by typed storages only.
    #[cfg_attr(not(feature = "typed-storage"), allow(dead_code))]
    Store,
    /// `storage[i] = v`: c10's `checked_convert` for integers, float32 and the
    /// complex floats, named as C++ types (`int8_t`).
    Set,
    /// `storage.fill_(v)`: as `Set`, and the reduced-precision floats too.
    Fill,
}

/// What c10's `overflows` checks a value against: the element's range (from
/// the dtype table), applied to both parts of a complex element.
#[derive(Clone, Copy)]
pub(crate) struct Range {
    range: ValueRange,
    complex: bool,
}

/// The range a value written into an element of `dtype` is checked against.
pub(crate) fn range(dtype: DType) -> Range {
    let target = interpret(dtype);
    Range {
        range: target.value_range(),
        complex: target.is_complex(),
    }
}

pub(crate) fn float_overflows(f: f64, max: f64, inf: bool, nan: bool) -> bool {
    if inf && f.is_infinite() {
        return false;
    }
    if !nan && f.is_nan() {
        return true;
    }
    f < -max || f > max
}

/// c10's `overflows<To, From>(value)`.
pub(crate) fn overflows(value: Scalar, range: Range) -> bool {
    match (range.range, range.complex) {
        (ValueRange::Unchecked, _) => false,
        (ValueRange::Int { signed, bits }, _) => {
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
        (ValueRange::Float { max, inf, nan }, false) => match value {
            Scalar::Bool(_) => false,
            Scalar::Complex(c) => c.im != 0.0 || float_overflows(c.re, max, inf, nan),
            other => float_overflows(other.to_f64(), max, inf, nan),
        },
        (ValueRange::Float { max, inf, nan }, true) => {
            let c = value.to_complex();
            !matches!(value, Scalar::Bool(_))
                && (float_overflows(c.re, max, inf, nan) || float_overflows(c.im, max, inf, nan))
        }
    }
}

/// Checks that `value` may be written into an element of `dtype` along `path`.
pub(crate) fn check_value(dtype: DType, value: Scalar, path: Path) -> Result<()> {
    if !dtype.has_scalar_values() {
        return Err(Error::Tensor(TensorError::DTypeUnsupported {
            op: "writing an element",
            dtype,
        }));
    }
    let target = interpret(dtype);
    let range = range(target);
    let integer = matches!(range.range, ValueRange::Int { .. });
    match path {
        Path::Store => {
            // torch.tensor: complex values only go into complex and bool elements.
            if let Scalar::Complex(_) = value {
                if !target.is_complex() && target != DType::Bool {
                    return Err(Error::Tensor(TensorError::ComplexNotReal { integer }));
                }
            }
            if integer && overflows(value, range) {
                return Err(Error::Tensor(TensorError::ValueOverflow {
                    type_name: target.name(),
                }));
            }
        }
        Path::Set | Path::Fill => {
            // Reduced-precision real floats are checked by `fill_` only.
            let checked = match (range.range, range.complex) {
                (ValueRange::Float { .. }, false) => path == Path::Fill || target == DType::Float32,
                _ => true,
            };
            if checked && overflows(value, range) {
                return Err(Error::Tensor(TensorError::ValueOverflow {
                    type_name: target.cpp_name(),
                }));
            }
        }
    }
    Ok(())
}
