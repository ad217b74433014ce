//! Data types: how a tensor reads the bytes of its storage.
//!
//! Every fact about a dtype comes from one table ([`DTYPES`], built by the
//! `dtypes!` macro below): PyTorch name and aliases, element size, kind,
//! legacy storage class, safetensors tag and element representation. Every
//! lookup derives from that table, so the facts cannot drift apart.

use std::fmt;
use std::str::FromStr;

use crate::minifloat::MiniFloat;
use crate::Error;

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
pub enum Repr {
    /// IEEE binary64.
    F64,
    /// IEEE binary32.
    F32,
    /// IEEE binary16 (`half::f16`).
    F16,
    /// bfloat16 (`half::bf16`).
    BF16,
    /// A sub-16-bit float format, decoded exactly by [`MiniFloat`].
    Mini(MiniFloat),
    /// Two's complement signed integer of the element size.
    Signed,
    /// Unsigned integer of the element size.
    Unsigned,
    /// One byte, 0 or 1.
    Bool,
    /// Two floats of half the element size (real, imaginary).
    Complex,
    /// Complex with two IEEE binary16 halves.
    ComplexHalf,
}

macro_rules! dtypes {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:literal, $size:literal, $kind:ident, $repr:expr,
            storage: $storage:expr, safetensors: $st:expr, aliases: [$($alias:literal),*];
    )*) => {
        /// A PyTorch dtype. Names, sizes and classes come from [`DTYPES`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum DType {
            $( $(#[$doc])* $variant, )*
        }

        /// One row of the dtype table.
        #[derive(Clone, Copy, Debug)]
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
            pub repr: Repr,
            /// The legacy storage class (`"FloatStorage"`), for dtypes PyTorch gave one.
            pub storage_class: Option<&'static str>,
            /// The safetensors dtype tag, for dtypes safetensors can hold.
            pub safetensors: Option<&'static str>,
        }

        /// The dtype table: every dtype a PyTorch checkpoint can hold, one row each.
        pub const DTYPES: &[DTypeInfo] = &[
            $( DTypeInfo {
                dtype: DType::$variant, name: $name, aliases: &[$($alias),*], size: $size,
                kind: Kind::$kind, repr: $repr, storage_class: $storage, safetensors: $st,
            }, )*
        ];
    };
}

dtypes! {
    /// 64-bit float (`torch.double`).
    Float64 = "float64", 8, Float, Repr::F64, storage: Some("DoubleStorage"), safetensors: Some("F64"), aliases: ["double"];
    /// 32-bit float (`torch.float`), the default dtype.
    Float32 = "float32", 4, Float, Repr::F32, storage: Some("FloatStorage"), safetensors: Some("F32"), aliases: ["float"];
    /// 16-bit IEEE float (`torch.half`).
    Float16 = "float16", 2, Float, Repr::F16, storage: Some("HalfStorage"), safetensors: Some("F16"), aliases: ["half"];
    /// bfloat16.
    BFloat16 = "bfloat16", 2, Float, Repr::BF16, storage: Some("BFloat16Storage"), safetensors: Some("BF16"), aliases: [];
    /// 64-bit signed integer (`torch.long`).
    Int64 = "int64", 8, Int, Repr::Signed, storage: Some("LongStorage"), safetensors: Some("I64"), aliases: ["long"];
    /// 32-bit signed integer (`torch.int`).
    Int32 = "int32", 4, Int, Repr::Signed, storage: Some("IntStorage"), safetensors: Some("I32"), aliases: ["int"];
    /// 16-bit signed integer (`torch.short`).
    Int16 = "int16", 2, Int, Repr::Signed, storage: Some("ShortStorage"), safetensors: Some("I16"), aliases: ["short"];
    /// 8-bit signed integer.
    Int8 = "int8", 1, Int, Repr::Signed, storage: Some("CharStorage"), safetensors: Some("I8"), aliases: [];
    /// 8-bit unsigned integer.
    UInt8 = "uint8", 1, Int, Repr::Unsigned, storage: Some("ByteStorage"), safetensors: Some("U8"), aliases: [];
    /// Boolean, one byte.
    Bool = "bool", 1, Bool, Repr::Bool, storage: Some("BoolStorage"), safetensors: Some("BOOL"), aliases: [];
    /// Complex with 64-bit parts (`torch.cdouble`).
    Complex128 = "complex128", 16, Complex, Repr::Complex, storage: Some("ComplexDoubleStorage"), safetensors: None, aliases: ["cdouble"];
    /// Complex with 32-bit parts (`torch.cfloat`).
    Complex64 = "complex64", 8, Complex, Repr::Complex, storage: Some("ComplexFloatStorage"), safetensors: Some("C64"), aliases: ["cfloat"];
    /// Complex with 16-bit parts (`torch.chalf`).
    Complex32 = "complex32", 4, Complex, Repr::ComplexHalf, storage: None, safetensors: None, aliases: ["chalf"];
    /// 16-bit unsigned integer.
    UInt16 = "uint16", 2, Int, Repr::Unsigned, storage: None, safetensors: Some("U16"), aliases: [];
    /// 32-bit unsigned integer.
    UInt32 = "uint32", 4, Int, Repr::Unsigned, storage: None, safetensors: Some("U32"), aliases: [];
    /// 64-bit unsigned integer.
    UInt64 = "uint64", 8, Int, Repr::Unsigned, storage: None, safetensors: Some("U64"), aliases: [];
    /// 8-bit float, 4 exponent bits, 3 mantissa bits, finite (no infinities).
    Float8E4M3Fn = "float8_e4m3fn", 1, Float, Repr::Mini(MiniFloat::F8E4M3Fn), storage: None, safetensors: Some("F8_E4M3"), aliases: [];
    /// 8-bit float, 5 exponent bits, 2 mantissa bits (IEEE-like).
    Float8E5M2 = "float8_e5m2", 1, Float, Repr::Mini(MiniFloat::F8E5M2), storage: None, safetensors: Some("F8_E5M2"), aliases: [];
    /// 8-bit float e4m3, finite, unsigned zero (one NaN).
    Float8E4M3Fnuz = "float8_e4m3fnuz", 1, Float, Repr::Mini(MiniFloat::F8E4M3Fnuz), storage: None, safetensors: Some("F8_E4M3FNUZ"), aliases: [];
    /// 8-bit float e5m2, finite, unsigned zero (one NaN).
    Float8E5M2Fnuz = "float8_e5m2fnuz", 1, Float, Repr::Mini(MiniFloat::F8E5M2Fnuz), storage: None, safetensors: Some("F8_E5M2FNUZ"), aliases: [];
    /// 8-bit power-of-two scale (exponent only, unsigned).
    Float8E8M0Fnu = "float8_e8m0fnu", 1, Float, Repr::Mini(MiniFloat::F8E8M0Fnu), storage: None, safetensors: Some("F8_E8M0"), aliases: [];
    /// Two 4-bit e2m1 floats packed in one byte; elements are read as the raw byte.
    Float4E2M1FnX2 = "float4_e2m1fn_x2", 1, Float, Repr::Unsigned, storage: None, safetensors: None, aliases: [];
    /// 8 uninterpreted bits.
    Bits8 = "bits8", 1, Bits, Repr::Unsigned, storage: None, safetensors: None, aliases: [];
    /// 16 uninterpreted bits.
    Bits16 = "bits16", 2, Bits, Repr::Unsigned, storage: None, safetensors: None, aliases: [];
    /// Eight 1-bit values in a byte.
    Bits1x8 = "bits1x8", 1, Bits, Repr::Unsigned, storage: None, safetensors: None, aliases: [];
    /// Four 2-bit values in a byte.
    Bits2x4 = "bits2x4", 1, Bits, Repr::Unsigned, storage: None, safetensors: None, aliases: [];
    /// Two 4-bit values in a byte.
    Bits4x2 = "bits4x2", 1, Bits, Repr::Unsigned, storage: None, safetensors: None, aliases: [];
    /// Quantized unsigned 8-bit.
    QUInt8 = "quint8", 1, Quantized, Repr::Unsigned, storage: Some("QUInt8Storage"), safetensors: None, aliases: [];
    /// Quantized signed 8-bit.
    QInt8 = "qint8", 1, Quantized, Repr::Signed, storage: Some("QInt8Storage"), safetensors: None, aliases: [];
    /// Quantized signed 32-bit.
    QInt32 = "qint32", 4, Quantized, Repr::Signed, storage: Some("QInt32Storage"), safetensors: None, aliases: [];
    /// Two quantized unsigned 4-bit values per byte.
    QUInt4x2 = "quint4x2", 1, Quantized, Repr::Unsigned, storage: Some("QUInt4x2Storage"), safetensors: None, aliases: [];
    /// Four quantized unsigned 2-bit values per byte.
    QUInt2x4 = "quint2x4", 1, Quantized, Repr::Unsigned, storage: Some("QUInt2x4Storage"), safetensors: None, aliases: [];
}

impl DType {
    /// This dtype's row of [`DTYPES`].
    pub fn info(self) -> &'static DTypeInfo {
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
    pub fn from_storage_class(class: &str) -> Option<DType> {
        let name = class.rsplit('.').next().unwrap_or(class);
        DTYPES
            .iter()
            .find(|d| d.storage_class == Some(name))
            .map(|d| d.dtype)
    }
    /// The safetensors tag (`"F32"` …), if safetensors can hold the dtype.
    pub fn safetensors_tag(self) -> Option<&'static str> {
        self.info().safetensors
    }
    /// The dtype of a safetensors tag.
    pub fn from_safetensors_tag(tag: &str) -> Option<DType> {
        DTYPES
            .iter()
            .find(|d| d.safetensors == Some(tag))
            .map(|d| d.dtype)
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
        !matches!(self.kind(), Kind::Bits) && self != DType::Float4E2M1FnX2
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
            .ok_or_else(|| Error::UnknownDType { name: s.to_owned() })
    }
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
}
