//! Data types: how a tensor reads the bytes of its storage.
//!
//! Every per-dtype fact lives in one table ([`DTYPES`], built by the
//! `dtypes!` macro below), one row per dtype: PyTorch name and aliases,
//! element size, kind, element encoding (with the part dtype of complex
//! dtypes), legacy storage class, safetensors dtype, the C++ element type
//! c10 names in its messages, the range c10 checks written values against,
//! and the integer representation of quantized dtypes. Every lookup in the
//! crate derives from that table, so the facts cannot drift apart.

use crate::error::TensorError;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(feature = "safetensors")]
use safetensors::Dtype as St;

use crate::minifloat::MiniFloat;
use crate::{Error, Result};

/// What kind of values a dtype holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Real floating point (including the 8- and 4-bit formats).
    Float,
    /// Complex floating point.
    Complex,
    /// Signed or unsigned integers.
    Int,
    /// Booleans, one byte each.
    Bool,
    /// Quantized integers (`quint8`, `qint8`, …): their integer representation.
    Quantized,
    /// Uninterpreted bits (`bits8`, `bits16`, …).
    Bits,
}

/// How an element is laid out in bytes, which drives element reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Repr {
    /// IEEE binary64.
    F64,
    /// IEEE binary32.
    F32,
    /// IEEE binary16 (`half::f16`).
    F16,
    /// bfloat16 (`half::bf16`).
    BF16,
    /// A sub-16-bit float format, decoded exactly by `MiniFloat`.
    Mini(MiniFloat),
    /// Two's complement signed integer of the element size.
    Signed,
    /// Unsigned integer of the element size.
    Unsigned,
    /// One byte, 0 or 1.
    Bool,
    /// Two elements of the part dtype, real then imaginary.
    Complex(DType),
    /// No numeric value: uninterpreted bits or packed sub-byte elements (the
    /// raw bytes, read as an unsigned integer where a value is asked for).
    Opaque,
}

/// The values an element can take, as c10's `overflows` checks a value
/// written into it (`storage[i] = v`, `fill_`). For a complex dtype it is the
/// range of each part; for a quantized dtype, that of its integer
/// representation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRange {
    /// Not checked: every value converts (`float64`, `bool`, bits).
    Unchecked,
    /// An integer of `bits` bits.
    Int {
        /// Whether negative values are in range (unsigned targets let them wrap).
        signed: bool,
        /// Width in bits.
        bits: u32,
    },
    /// A float whose largest finite value is `max`.
    Float {
        /// The largest finite value (the smallest is `-max`).
        max: f64,
        /// Whether ±inf is a value (then it never overflows).
        inf: bool,
        /// Whether NaN is a value (else writing NaN overflows).
        nan: bool,
    },
}

const fn int(signed: bool, bits: u32) -> ValueRange {
    ValueRange::Int { signed, bits }
}

const fn float(max: f64, inf: bool, nan: bool) -> ValueRange {
    ValueRange::Float { max, inf, nan }
}

const UNCHECKED: ValueRange = ValueRange::Unchecked;

macro_rules! dtypes {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:literal, $size:literal, $kind:ident, $repr:expr,
            aliases: [$($alias:literal),*], storage: $storage:expr, safetensors: $st:expr,
            cpp: $cpp:literal, range: $range:expr, int_repr: $int_repr:expr;
    )*) => {
        /// A PyTorch dtype. Names, sizes and classes come from [`DTYPES`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum DType {
            $( $(#[$doc])* $variant, )*
        }

        /// One row of the dtype table. Non-exhaustive: columns are added as
        /// facts move into the table, and `safetensors` exists only with that
        /// feature.
        #[derive(Clone, Copy, Debug)]
        #[non_exhaustive]
        pub struct DTypeInfo {
            /// The dtype.
            pub dtype: DType,
            /// PyTorch's primary name, without `torch.` (`"float32"`).
            pub name: &'static str,
            /// Other names PyTorch accepts (`"float"`).
            pub aliases: &'static [&'static str],
            /// Bytes per element.
            pub size: usize,
            /// What the values are.
            pub kind: Kind,
            /// How an element is encoded.
            pub(crate) repr: Repr,
            /// The legacy storage class (`"FloatStorage"`), for dtypes PyTorch gave one.
            pub storage_class: Option<&'static str>,
            /// The safetensors dtype, for dtypes safetensors can hold.
            #[cfg(feature = "safetensors")]
            pub safetensors: Option<St>,
            /// The C++ element type as c10 names it in messages (`"int"`,
            /// `"uint8_t"`, `"c10::Half"`).
            pub cpp_name: &'static str,
            /// The values an element holds, as c10 checks written values.
            pub range: ValueRange,
            /// The dtype a quantized dtype's elements are read and written
            /// through (PyTorch's `int_repr()`); `None` for the others.
            pub int_repr: Option<DType>,
        }

        /// The dtype table: every dtype a PyTorch checkpoint can hold, one row each.
        pub const DTYPES: &[DTypeInfo] = &[
            $( DTypeInfo {
                dtype: DType::$variant, name: $name, aliases: &[$($alias),*], size: $size,
                kind: Kind::$kind, repr: $repr, storage_class: $storage,
                #[cfg(feature = "safetensors")]
                safetensors: $st,
                cpp_name: $cpp, range: $range, int_repr: $int_repr,
            }, )*
        ];
    };
}

dtypes! {
    /// 64-bit float (`torch.double`).
    Float64 = "float64", 8, Float, Repr::F64, aliases: ["double"],
        storage: Some("DoubleStorage"), safetensors: Some(St::F64),
        cpp: "double", range: UNCHECKED, int_repr: None;
    /// 32-bit float (`torch.float`), the default dtype.
    Float32 = "float32", 4, Float, Repr::F32, aliases: ["float"],
        storage: Some("FloatStorage"), safetensors: Some(St::F32),
        cpp: "float", range: float(f32::MAX as f64, true, true), int_repr: None;
    /// 16-bit IEEE float (`torch.half`).
    Float16 = "float16", 2, Float, Repr::F16, aliases: ["half"],
        storage: Some("HalfStorage"), safetensors: Some(St::F16),
        cpp: "c10::Half", range: float(65504.0, true, true), int_repr: None;
    /// bfloat16.
    BFloat16 = "bfloat16", 2, Float, Repr::BF16, aliases: [],
        storage: Some("BFloat16Storage"), safetensors: Some(St::BF16),
        cpp: "c10::BFloat16", range: float(3.3895313892515355e38, true, true), int_repr: None;
    /// 64-bit signed integer (`torch.long`).
    Int64 = "int64", 8, Int, Repr::Signed, aliases: ["long"],
        storage: Some("LongStorage"), safetensors: Some(St::I64),
        cpp: "int64_t", range: int(true, 64), int_repr: None;
    /// 32-bit signed integer (`torch.int`).
    Int32 = "int32", 4, Int, Repr::Signed, aliases: ["int"],
        storage: Some("IntStorage"), safetensors: Some(St::I32),
        cpp: "int", range: int(true, 32), int_repr: None;
    /// 16-bit signed integer (`torch.short`).
    Int16 = "int16", 2, Int, Repr::Signed, aliases: ["short"],
        storage: Some("ShortStorage"), safetensors: Some(St::I16),
        cpp: "int16_t", range: int(true, 16), int_repr: None;
    /// 8-bit signed integer.
    Int8 = "int8", 1, Int, Repr::Signed, aliases: [],
        storage: Some("CharStorage"), safetensors: Some(St::I8),
        cpp: "int8_t", range: int(true, 8), int_repr: None;
    /// 8-bit unsigned integer.
    UInt8 = "uint8", 1, Int, Repr::Unsigned, aliases: [],
        storage: Some("ByteStorage"), safetensors: Some(St::U8),
        cpp: "uint8_t", range: int(false, 8), int_repr: None;
    /// Boolean, one byte.
    Bool = "bool", 1, Bool, Repr::Bool, aliases: [],
        storage: Some("BoolStorage"), safetensors: Some(St::BOOL),
        cpp: "bool", range: UNCHECKED, int_repr: None;
    /// Complex with 64-bit parts (`torch.cdouble`).
    Complex128 = "complex128", 16, Complex, Repr::Complex(DType::Float64), aliases: ["cdouble"],
        storage: Some("ComplexDoubleStorage"), safetensors: None,
        cpp: "c10::complex<double>", range: UNCHECKED, int_repr: None;
    /// Complex with 32-bit parts (`torch.cfloat`).
    Complex64 = "complex64", 8, Complex, Repr::Complex(DType::Float32), aliases: ["cfloat"],
        storage: Some("ComplexFloatStorage"), safetensors: Some(St::C64),
        cpp: "c10::complex<float>", range: float(f32::MAX as f64, true, true), int_repr: None;
    /// Complex with 16-bit parts (`torch.chalf`).
    Complex32 = "complex32", 4, Complex, Repr::Complex(DType::Float16), aliases: ["chalf"],
        storage: None, safetensors: None,
        cpp: "c10::complex<c10::Half>", range: float(65504.0, true, true), int_repr: None;
    /// 16-bit unsigned integer.
    UInt16 = "uint16", 2, Int, Repr::Unsigned, aliases: [],
        storage: None, safetensors: Some(St::U16),
        cpp: "uint16_t", range: int(false, 16), int_repr: None;
    /// 32-bit unsigned integer.
    UInt32 = "uint32", 4, Int, Repr::Unsigned, aliases: [],
        storage: None, safetensors: Some(St::U32),
        cpp: "uint32_t", range: int(false, 32), int_repr: None;
    /// 64-bit unsigned integer.
    UInt64 = "uint64", 8, Int, Repr::Unsigned, aliases: [],
        storage: None, safetensors: Some(St::U64),
        cpp: "uint64_t", range: int(false, 64), int_repr: None;
    /// 8-bit float, 4 exponent bits, 3 mantissa bits, finite (no infinities).
    Float8E4M3Fn = "float8_e4m3fn", 1, Float, Repr::Mini(MiniFloat::F8E4M3Fn), aliases: [],
        storage: None, safetensors: Some(St::F8_E4M3),
        cpp: "c10::Float8_e4m3fn", range: float(448.0, false, true), int_repr: None;
    /// 8-bit float, 5 exponent bits, 2 mantissa bits (IEEE-like).
    Float8E5M2 = "float8_e5m2", 1, Float, Repr::Mini(MiniFloat::F8E5M2), aliases: [],
        storage: None, safetensors: Some(St::F8_E5M2),
        cpp: "c10::Float8_e5m2", range: float(57344.0, true, true), int_repr: None;
    /// 8-bit float e4m3, finite, unsigned zero (one NaN).
    Float8E4M3Fnuz = "float8_e4m3fnuz", 1, Float, Repr::Mini(MiniFloat::F8E4M3Fnuz), aliases: [],
        storage: None, safetensors: Some(St::F8_E4M3FNUZ),
        cpp: "c10::Float8_e4m3fnuz", range: float(240.0, false, true), int_repr: None;
    /// 8-bit float e5m2, finite, unsigned zero (one NaN).
    Float8E5M2Fnuz = "float8_e5m2fnuz", 1, Float, Repr::Mini(MiniFloat::F8E5M2Fnuz), aliases: [],
        storage: None, safetensors: Some(St::F8_E5M2FNUZ),
        cpp: "c10::Float8_e5m2fnuz", range: float(57344.0, false, true), int_repr: None;
    /// 8-bit power-of-two scale (exponent only, unsigned). Written values are
    /// not range-checked.
    Float8E8M0Fnu = "float8_e8m0fnu", 1, Float, Repr::Mini(MiniFloat::F8E8M0Fnu), aliases: [],
        storage: None, safetensors: Some(St::F8_E8M0),
        cpp: "c10::Float8_e8m0fnu", range: UNCHECKED, int_repr: None;
    /// Two 4-bit e2m1 floats packed in one byte; elements are read as the raw byte.
    Float4E2M1FnX2 = "float4_e2m1fn_x2", 1, Float, Repr::Opaque, aliases: [],
        storage: None, safetensors: None,
        cpp: "c10::Float4_e2m1fn_x2", range: UNCHECKED, int_repr: None;
    /// 8 uninterpreted bits.
    Bits8 = "bits8", 1, Bits, Repr::Opaque, aliases: [],
        storage: None, safetensors: None,
        cpp: "c10::bits8", range: UNCHECKED, int_repr: None;
    /// 16 uninterpreted bits.
    Bits16 = "bits16", 2, Bits, Repr::Opaque, aliases: [],
        storage: None, safetensors: None,
        cpp: "c10::bits16", range: UNCHECKED, int_repr: None;
    /// Eight 1-bit values in a byte.
    Bits1x8 = "bits1x8", 1, Bits, Repr::Opaque, aliases: [],
        storage: None, safetensors: None,
        cpp: "c10::bits1x8", range: UNCHECKED, int_repr: None;
    /// Four 2-bit values in a byte.
    Bits2x4 = "bits2x4", 1, Bits, Repr::Opaque, aliases: [],
        storage: None, safetensors: None,
        cpp: "c10::bits2x4", range: UNCHECKED, int_repr: None;
    /// Two 4-bit values in a byte.
    Bits4x2 = "bits4x2", 1, Bits, Repr::Opaque, aliases: [],
        storage: None, safetensors: None,
        cpp: "c10::bits4x2", range: UNCHECKED, int_repr: None;
    /// Quantized unsigned 8-bit.
    QUInt8 = "quint8", 1, Quantized, Repr::Unsigned, aliases: [],
        storage: Some("QUInt8Storage"), safetensors: None,
        cpp: "c10::quint8", range: int(false, 8), int_repr: Some(DType::UInt8);
    /// Quantized signed 8-bit.
    QInt8 = "qint8", 1, Quantized, Repr::Signed, aliases: [],
        storage: Some("QInt8Storage"), safetensors: None,
        cpp: "c10::qint8", range: int(true, 8), int_repr: Some(DType::Int8);
    /// Quantized signed 32-bit.
    QInt32 = "qint32", 4, Quantized, Repr::Signed, aliases: [],
        storage: Some("QInt32Storage"), safetensors: None,
        cpp: "c10::qint32", range: int(true, 32), int_repr: Some(DType::Int32);
    /// Two quantized unsigned 4-bit values per byte.
    QUInt4x2 = "quint4x2", 1, Quantized, Repr::Unsigned, aliases: [],
        storage: Some("QUInt4x2Storage"), safetensors: None,
        cpp: "c10::quint4x2", range: int(false, 8), int_repr: Some(DType::UInt8);
    /// Four quantized unsigned 2-bit values per byte.
    QUInt2x4 = "quint2x4", 1, Quantized, Repr::Unsigned, aliases: [],
        storage: Some("QUInt2x4Storage"), safetensors: None,
        cpp: "c10::quint2x4", range: int(false, 8), int_repr: Some(DType::UInt8);
}

impl DType {
    /// This dtype's row of [`DTYPES`].
    pub(crate) fn info(self) -> &'static DTypeInfo {
        // The table lists the variants in declaration order.
        &DTYPES[self as usize]
    }
    /// PyTorch's primary name, without the `torch.` prefix.
    pub fn name(self) -> &'static str {
        self.info().name
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        self.info().size
    }
    /// What kind of values the dtype holds.
    pub fn kind(self) -> Kind {
        self.info().kind
    }
    /// The legacy storage class name (`FloatStorage` …), if PyTorch has one.
    pub fn storage_class(self) -> Option<&'static str> {
        self.info().storage_class
    }
    /// The dtype of a legacy storage class name (`"FloatStorage"`, also with a
    /// module prefix such as `torch.cuda.FloatStorage`).
    pub(crate) fn from_storage_class(class: &str) -> Option<DType> {
        let name = class.rsplit('.').next().unwrap_or(class);
        DTYPES
            .iter()
            .find(|d| d.storage_class == Some(name))
            .map(|d| d.dtype)
    }
    /// The safetensors dtype, if safetensors can hold the dtype.
    #[cfg(feature = "safetensors")]
    pub fn safetensors(self) -> Option<St> {
        self.info().safetensors
    }
    /// The dtype of a safetensors dtype, if stowage has one for it
    /// (safetensors' `F4` and `F6_*` have none).
    #[cfg(feature = "safetensors")]
    pub(crate) fn from_safetensors(st: St) -> Option<DType> {
        DTYPES
            .iter()
            .find(|d| d.safetensors == Some(st))
            .map(|d| d.dtype)
    }
    /// The C++ element type as c10 names it in its messages (`"int"`, `"c10::Half"`).
    pub(crate) fn cpp_name(self) -> &'static str {
        self.info().cpp_name
    }
    /// The values an element holds, as c10 checks values written into it
    /// (for complex dtypes, each part's range).
    pub(crate) fn value_range(self) -> ValueRange {
        self.info().range
    }
    /// The dtype of each part of a complex dtype (`complex64` → `float32`, as
    /// `torch.view_as_real`); `None` for the others.
    pub(crate) fn complex_part(self) -> Option<DType> {
        match self.info().repr {
            Repr::Complex(part) => Some(part),
            _ => None,
        }
    }
    /// The dtype a quantized dtype's elements are read and written through
    /// (`quint8` → `uint8`, PyTorch's `int_repr()`); `None` for the others.
    pub fn int_repr(self) -> Option<DType> {
        self.info().int_repr
    }
    /// Elements packed into one byte of storage: 2 for `quint4x2`, 4 for
    /// `quint2x4` (PyTorch's packed quantized dtypes, whose `element_size()`
    /// is still 1 and whose storage holds `ceil(numel / 2)` or `ceil(numel / 4)`
    /// bytes), 1 for every other dtype.
    pub fn elements_per_byte(self) -> usize {
        match self {
            DType::QUInt4x2 => 2,
            DType::QUInt2x4 => 4,
            _ => 1,
        }
    }
    /// True for real floating-point dtypes, as `torch.is_floating_point`.
    pub fn is_floating_point(self) -> bool {
        self.kind() == Kind::Float
    }
    /// True for complex dtypes.
    pub fn is_complex(self) -> bool {
        self.kind() == Kind::Complex
    }
    /// True for dtypes whose elements have a numeric value stowage can read
    /// (every kind but packed and uninterpreted bits).
    pub fn has_scalar_values(self) -> bool {
        self.info().repr != Repr::Opaque
    }
    /// The default floating-point dtype, `float32`.
    pub const DEFAULT: DType = DType::Float32;
}

impl fmt::Display for DType {
    /// Prints `torch.float32`, as PyTorch prints a dtype.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.{}", self.name())
    }
}

impl FromStr for DType {
    type Err = Error;
    /// Parses a PyTorch dtype name or alias, with or without `torch.`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let bare = s.strip_prefix("torch.").unwrap_or(s);
        DTYPES
            .iter()
            .find(|d| d.name == bare || d.aliases.contains(&bare))
            .map(|d| d.dtype)
            .ok_or_else(|| Error::Tensor(TensorError::UnknownDType { name: s.to_owned() }))
    }
}

// ---------------------------------------------------------------------------
// The default dtype: process-wide, as PyTorch's
// ---------------------------------------------------------------------------

/// c10's name of a scalar type: the dtype name with a capital first letter
/// (`Float8_e5m2`), as PyTorch's storage-object lookup spells it.
pub(crate) fn c10_name(dtype: DType) -> String {
    let mut chars = dtype.name().chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

static DEFAULT_DTYPE: AtomicU8 = AtomicU8::new(DType::Float32 as u8);

/// The process's default floating-point dtype (PyTorch's `torch.get_default_dtype()`),
/// `float32` until [`set_default_dtype`] changes it. It is the dtype plain
/// numbers promote to ([`Operand`](crate::Operand)), and, with the
/// `typed-storage` feature, names `Storage`'s class and is the dtype of
/// `TypedStorage::construct` calls without one.
pub fn default_dtype() -> DType {
    let i = DEFAULT_DTYPE.load(Ordering::SeqCst) as usize;
    DTYPES.get(i).map_or(DType::Float32, |row| row.dtype)
}

/// Sets the process's default dtype (PyTorch's `torch.set_default_dtype`).
/// PyTorch accepts only the floating-point dtypes that have a legacy class:
/// float64, float32, float16 and bfloat16.
///
/// # Errors
/// [`TensorError::DefaultDType`] for any other dtype, with PyTorch's message
/// ("only floating-point types are supported as the default type", or
/// "couldn't find storage object Float8_e5m2Storage" for the newer floats).
pub fn set_default_dtype(dtype: DType) -> Result<()> {
    if !dtype.is_floating_point() || dtype.storage_class().is_none() {
        return Err(Error::Tensor(TensorError::DefaultDType { dtype }));
    }
    DEFAULT_DTYPE.store(dtype as u8, Ordering::SeqCst);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_variant_order() {
        for (i, row) in DTYPES.iter().enumerate() {
            assert_eq!(row.dtype as usize, i, "{}", row.name);
            assert_eq!(row.dtype.info().name, row.name);
        }
        assert_eq!(DTYPES.len(), 32);
    }

    #[test]
    fn names_and_aliases_parse() {
        for row in DTYPES {
            assert_eq!(row.name.parse::<DType>().unwrap(), row.dtype);
            assert_eq!(
                format!("{}", row.dtype).parse::<DType>().unwrap(),
                row.dtype
            );
            for a in row.aliases {
                assert_eq!(a.parse::<DType>().unwrap(), row.dtype);
            }
        }
        assert!("float128".parse::<DType>().is_err());
    }

    #[test]
    fn legacy_classes_are_pytorchs_seventeen() {
        let classes: Vec<_> = DTYPES.iter().filter_map(|d| d.storage_class).collect();
        assert_eq!(classes.len(), 17);
        assert_eq!(
            DType::from_storage_class("FloatStorage"),
            Some(DType::Float32)
        );
        assert_eq!(
            DType::from_storage_class("torch.cuda.HalfStorage"),
            Some(DType::Float16)
        );
        assert_eq!(DType::from_storage_class("UntypedStorage"), None);
        assert_eq!(DType::UInt16.storage_class(), None);
    }

    #[test]
    fn element_sizes_match_pytorch() {
        let sizes = [
            (DType::Float64, 8),
            (DType::Complex128, 16),
            (DType::Complex64, 8),
            (DType::Complex32, 4),
            (DType::Bits16, 2),
            (DType::QInt32, 4),
            (DType::Float8E8M0Fnu, 1),
            (DType::Bool, 1),
        ];
        for (d, s) in sizes {
            assert_eq!(d.size(), s, "{d}");
        }
    }

    #[test]
    #[cfg(feature = "safetensors")]
    fn safetensors_dtypes_have_the_element_size() {
        let mut mapped = 0;
        for row in DTYPES {
            if let Some(st) = row.safetensors {
                assert_eq!(st.bitsize(), row.size * 8, "{}", row.name);
                assert_eq!(DType::from_safetensors(st), Some(row.dtype));
                mapped += 1;
            }
        }
        assert_eq!(mapped, 19);
        assert_eq!(DType::from_safetensors(St::F4), None);
    }

    #[test]
    fn ranges_agree_with_the_element_formats() {
        for row in DTYPES {
            let d = row.dtype;
            let want = match row.repr {
                Repr::Signed | Repr::Unsigned if row.kind == Kind::Int => int(
                    row.repr == Repr::Signed,
                    u32::try_from(row.size * 8).unwrap(),
                ),
                Repr::F32 => float(f32::MAX as f64, true, true),
                Repr::F16 => float(half::f16::MAX.to_f64(), true, true),
                Repr::BF16 => float(half::bf16::MAX.to_f64(), true, true),
                // e8m0 (no zero, no sign) is not range-checked.
                Repr::Mini(m) if d != DType::Float8E8M0Fnu => {
                    let values: Vec<f32> = (0..=255u8).map(|b| m.to_f32(b)).collect();
                    let max = values
                        .iter()
                        .filter(|v| v.is_finite())
                        .fold(0f32, |a, &v| a.max(v));
                    float(
                        max as f64,
                        values.iter().any(|v| v.is_infinite()),
                        values.iter().any(|v| v.is_nan()),
                    )
                }
                Repr::Complex(part) => part.value_range(),
                _ => match row.int_repr {
                    Some(int) => int.value_range(),
                    None => UNCHECKED,
                },
            };
            assert_eq!(row.range, want, "{}", row.name);
            assert_eq!(
                row.int_repr.is_some(),
                row.kind == Kind::Quantized,
                "{}",
                row.name
            );
            if let Repr::Complex(part) = row.repr {
                assert_eq!((part.size() * 2, row.kind), (row.size, Kind::Complex));
            }
            if let Repr::Mini(m) = row.repr {
                assert_eq!(m.name(), row.name);
            }
        }
    }

    /// The manifests PyTorch wrote beside the fixtures (`scripts/make_fixtures.py`)
    /// name each tensor's dtype and storage size, and the legacy-class fixture
    /// keys each tensor by its storage class.
    #[test]
    fn table_agrees_with_the_pytorch_fixture_manifests() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut checked = std::collections::BTreeSet::new();
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            if !path.to_string_lossy().ends_with(".pt.json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let entries: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
            let group = |e: &serde_json::Value| e["storage_group"].as_u64();
            for e in &entries {
                let dtype: DType = e["dtype"].as_str().unwrap().parse().unwrap();
                checked.insert(dtype);
                let dims = |k: &str| -> Vec<i64> {
                    e[k].as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_i64().unwrap())
                        .collect()
                };
                let (shape, stride) = (dims("shape"), dims("stride"));
                let offset = e["storage_offset"].as_i64().unwrap();
                let nbytes = e["storage_nbytes"].as_u64().unwrap() as usize;
                let numel: i64 = shape.iter().product();
                let contiguous = (0..shape.len())
                    .all(|i| stride[i] == shape[i + 1..].iter().product::<i64>() || shape[i] == 1);
                let alone = entries.iter().filter(|o| group(o) == group(e)).count() == 1;
                if numel > 0 && contiguous && offset == 0 && alone {
                    assert_eq!(nbytes, numel as usize * dtype.size(), "{path:?} {e}");
                }
                let class = e["path"]
                    .as_array()
                    .unwrap()
                    .last()
                    .and_then(|c| c.as_str());
                if let Some(class) = class.filter(|c| c.ends_with("Storage")) {
                    assert_eq!(dtype.storage_class(), Some(class), "{e}");
                }
            }
        }
        assert!(checked.len() >= 20, "{checked:?}");
    }
}
