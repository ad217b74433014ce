//! PyTorch's type promotion: the dtype an operation on two operands computes
//! in, and which results an in-place operation may store.
//!
//! [`promote_types`] is `torch.promote_types` (c10's `promoteTypes`);
//! [`result_type`] is `torch.result_type` for a tensor and an [`Operand`]:
//! dimensioned tensors take precedence over 0-dim tensors, which take
//! precedence over numbers, except that an operand of a higher category
//! (bool < integer < floating < complex) lifts the result into its category.
//! [`can_cast`] is `torch.can_cast`, the rule in-place operations apply.

use crate::element::Scalar;
use crate::error::TensorError;
use crate::{DType, Error, Kind, Operand, Result, Tensor};

/// `torch.promote_types(a, b)`, or `None` where PyTorch refuses: quantized,
/// bits and 8-bit float dtypes promote only with themselves, and
/// `uint16`/`uint32`/`uint64` only with themselves and c10's floating dtypes
/// (float4_e2m1fn_x2 among them). `promotion_is_pytorchs_for_every_pair`
/// checks every pair against PyTorch's own answers.
pub(crate) fn promote_types(a: DType, b: DType) -> Option<DType> {
    use DType::*;
    if a == b {
        return Some(a);
    }
    let lattice = |d: DType| match d {
        UInt8 => Some(0),
        Int8 => Some(1),
        Int16 => Some(2),
        Int32 => Some(3),
        Int64 => Some(4),
        Float16 => Some(5),
        Float32 => Some(6),
        Float64 => Some(7),
        Complex32 => Some(8),
        Complex64 => Some(9),
        Complex128 => Some(10),
        Bool => Some(11),
        BFloat16 => Some(12),
        _ => None,
    };
    let wide_unsigned = |d: DType| matches!(d, UInt16 | UInt32 | UInt64);
    let wide_partner =
        |d: DType| matches!(d, Float16 | Float32 | Float64 | BFloat16 | Float4E2M1FnX2);
    match (lattice(a), lattice(b)) {
        (Some(i), Some(j)) => Some(PROMOTE[i][j]),
        // c10 promotes the wide unsigned integers with its floating dtypes only
        // (not even with bool: `torch.promote_types(torch.uint16, torch.bool)`
        // raises); the 8-bit floats are refused before, but float4_e2m1fn_x2 counts.
        _ if wide_unsigned(a) && wide_partner(b) => Some(b),
        _ if wide_unsigned(b) && wide_partner(a) => Some(a),
        _ => None,
    }
}

/// c10's promotion table, rows and columns in the order of `promote_types`'s lattice.
const PROMOTE: [[DType; 13]; 13] = {
    use DType::{
        BFloat16 as bf, Bool as b1, Complex128 as c8, Complex32 as c2, Complex64 as c4,
        Float16 as f2, Float32 as f4, Float64 as f8, Int16 as i2, Int32 as i4, Int64 as i8,
        Int8 as i1, UInt8 as u1,
    };
    [
        [u1, i2, i2, i4, i8, f2, f4, f8, c2, c4, c8, u1, bf],
        [i2, i1, i2, i4, i8, f2, f4, f8, c2, c4, c8, i1, bf],
        [i2, i2, i2, i4, i8, f2, f4, f8, c2, c4, c8, i2, bf],
        [i4, i4, i4, i4, i8, f2, f4, f8, c2, c4, c8, i4, bf],
        [i8, i8, i8, i8, i8, f2, f4, f8, c2, c4, c8, i8, bf],
        [f2, f2, f2, f2, f2, f2, f4, f8, c2, c4, c8, f2, f4],
        [f4, f4, f4, f4, f4, f4, f4, f8, c4, c4, c8, f4, f4],
        [f8, f8, f8, f8, f8, f8, f8, f8, c8, c8, c8, f8, f8],
        [c2, c2, c2, c2, c2, c2, c4, c8, c2, c4, c8, c2, c4],
        [c4, c4, c4, c4, c4, c4, c4, c8, c4, c4, c8, c4, c4],
        [c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8],
        [u1, i1, i2, i4, i8, f2, f4, f8, c2, c4, c8, b1, bf],
        [bf, bf, bf, bf, bf, f4, f4, f8, c4, c4, c8, bf, bf],
    ]
};

/// Why c10's `promoteTypes` refuses `a` and `b`, in its words (the message
/// of [`TensorError::NoPromotion`]), checking as it does: quantized, then bits,
/// then 8-bit floats, then the wide unsigned integers.
pub(crate) fn promotion_problem(a: DType, b: DType) -> String {
    use super::scalar_type_name as name;
    let either = |f: fn(DType) -> bool| f(a) || f(b);
    let (na, nb) = (name(a), name(b));
    if either(|d| d.kind() == Kind::Quantized) {
        format!("promoteTypes with quantized numbers is not handled yet; figure out what the correct rules should be, offending types: {na} {nb}")
    } else if either(|d| d.kind() == Kind::Bits) {
        format!("Promotion from {na} and {nb} is unsupported.")
    } else if either(|d| d.kind() == Kind::Float && d.size() == 1 && d != DType::Float4E2M1FnX2) {
        format!("Promotion for Float8 Types is not supported, attempted to promote {na} and {nb}")
    } else if either(|d| matches!(d, DType::UInt16 | DType::UInt32 | DType::UInt64)) {
        format!("Promotion for uint16, uint32, uint64 types is not supported, attempted to promote {na} and {nb}")
    } else {
        // float4_e2m1fn_x2 with a dtype outside c10's table: an internal assert there.
        format!("Promotion of {na} and {nb} is not supported")
    }
}

/// [`promote_types`], or [`TensorError::NoPromotion`] naming `op`.
///
/// # Errors
/// [`TensorError::NoPromotion`] where PyTorch refuses to promote.
pub(crate) fn promote(op: &'static str, a: DType, b: DType) -> Result<DType> {
    promote_types(a, b).ok_or(Error::Tensor(TensorError::NoPromotion { op, a, b }))
}

/// `torch.can_cast(from, to)`: no complex into a non-complex dtype, no
/// floating into an integer one, nothing but bool into bool.
pub(crate) fn can_cast(from: DType, to: DType) -> bool {
    let integral = |d: DType| matches!(d.kind(), Kind::Int | Kind::Bool);
    !(from.is_complex() && !to.is_complex()
        || from.is_floating_point() && integral(to)
        || from != DType::Bool && to == DType::Bool)
}

/// The complex dtype with `d`'s precision (c10's `toComplexType`). That of
/// `bfloat16` is c10's `BComplex32`, which has no kernels (and no dtype in
/// stowage): [`TensorError::NotImplementedFor`]; the 8-bit floats have none
/// ([`TensorError::NoComplexType`]).
fn complex_of(op: &'static str, d: DType) -> Result<DType> {
    Ok(match d {
        DType::Float64 => DType::Complex128,
        DType::Float16 => DType::Complex32,
        DType::BFloat16 => {
            return Err(Error::Tensor(TensorError::NotImplementedFor {
                op,
                type_name: "BComplex32",
            }))
        }
        DType::Float32 => DType::Complex64,
        d if d.is_complex() => d,
        dtype => return Err(Error::Tensor(TensorError::NoComplexType { dtype })),
    })
}

/// The dtype PyTorch gives a Python number: `bool`, `int64`, the default
/// dtype, or the complex dtype of the default dtype's precision.
fn number_dtype(op: &'static str, s: &Scalar) -> Result<DType> {
    let default = crate::dtype::default_dtype();
    Ok(match s {
        Scalar::Bool(_) => DType::Bool,
        Scalar::Int(_) | Scalar::UInt(_) => DType::Int64,
        Scalar::Float(_) => default,
        Scalar::Complex(_) => complex_of(op, default)?,
    })
}

/// c10's `combine_categories`: `higher` (from operands that take precedence)
/// unless `lower` is of a higher category.
fn combine(op: &'static str, higher: Option<DType>, lower: Option<DType>) -> Result<Option<DType>> {
    let (Some(h), Some(l)) = (higher, lower) else {
        return Ok(higher.or(lower));
    };
    Ok(Some(if h.is_complex() {
        h
    } else if l.is_complex() {
        if h.is_floating_point() {
            complex_of(op, h)?
        } else {
            l
        }
    } else if h.is_floating_point() {
        h
    } else if h == DType::Bool || l.is_floating_point() {
        promote(op, h, l)?
    } else {
        h
    }))
}

/// `torch.result_type(t, other)`: the dtype `t ∘ other` computes in.
///
/// # Errors
/// [`TensorError::NoPromotion`] where PyTorch refuses to promote.
pub(crate) fn result_type(op: &'static str, t: &Tensor, other: &Operand<'_>) -> Result<DType> {
    // The three tiers of c10's `ResultTypeState`: dimensioned tensors, 0-dim tensors, numbers.
    let mut tiers: [Option<DType>; 3] = [None; 3];
    let mut add = |tier: usize, d: DType| -> Result<()> {
        tiers[tier] = Some(match tiers[tier] {
            Some(e) => promote(op, e, d)?,
            None => d,
        });
        Ok(())
    };
    let tier = |t: &Tensor| usize::from(t.dim() == 0);
    add(tier(t), t.dtype())?;
    match other {
        Operand::Tensor(o) => add(tier(o), o.dtype())?,
        Operand::Scalar(s) => add(2, number_dtype(op, s)?)?,
    }
    let lower = combine(op, tiers[1], tiers[2])?;
    Ok(combine(op, tiers[0], lower)?.unwrap_or(t.dtype()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    /// Every pair of stowage's dtypes against `torch.promote_types`, as PyTorch
    /// itself answered (`scripts/make_promotion_table.py`).
    #[test]
    fn promotion_is_pytorchs_for_every_pair() {
        let json: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/promote_types.json"))
                .expect("fixture is JSON");
        let table = &json["promote_types"];
        let (mut checked, mut wrong) = (0, Vec::new());
        for a in crate::dtype::DTYPES.iter().map(|r| r.dtype) {
            for b in crate::dtype::DTYPES.iter().map(|r| r.dtype) {
                let Some(want) = table.get(a.name()).and_then(|row| row.get(b.name())) else {
                    continue; // a dtype this PyTorch does not have
                };
                let want = want
                    .as_str()
                    .map(|n| n.parse::<DType>().expect("known dtype"));
                let got = promote_types(a, b);
                if got != want {
                    wrong.push(format!(
                        "promote_types({a}, {b}): {got:?}, PyTorch {want:?}"
                    ));
                }
                checked += 1;
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(checked > 1000, "only {checked} pairs checked");
    }

    #[test]
    fn promotion_follows_c10() {
        assert_eq!(promote_types(UInt8, Int8), Some(Int16));
        assert_eq!(promote_types(Bool, Int32), Some(Int32));
        assert_eq!(promote_types(Float16, BFloat16), Some(Float32));
        assert_eq!(promote_types(Float32, Complex32), Some(Complex64));
        assert_eq!(promote_types(Int64, Float16), Some(Float16));
        assert_eq!(promote_types(UInt32, Float32), Some(Float32));
        assert_eq!(promote_types(UInt32, Int64), None);
        assert_eq!(promote_types(Float8E4M3Fn, Float32), None);
        assert_eq!(promote_types(QInt8, QInt8), Some(QInt8));
        assert_eq!(promote_types(QInt8, Int8), None);
        assert_eq!(promote_types(Bits8, UInt8), None);
        for (i, row) in PROMOTE.iter().enumerate() {
            for (j, &d) in row.iter().enumerate() {
                assert_eq!(d, PROMOTE[j][i], "the table is symmetric");
            }
        }
    }

    #[test]
    fn refusals_have_c10s_messages() {
        let msg = |a, b| promote("add", a, b).unwrap_err().to_string();
        assert_eq!(
            msg(Float8E4M3Fn, Float32),
            "Promotion for Float8 Types is not supported, attempted to promote Float8_e4m3fn and Float"
        );
        assert_eq!(
            msg(Float8E8M0Fnu, UInt16),
            "Promotion for Float8 Types is not supported, attempted to promote Float8_e8m0fnu and UInt16"
        );
        assert_eq!(
            msg(Bool, UInt32),
            "Promotion for uint16, uint32, uint64 types is not supported, attempted to promote Bool and UInt32"
        );
        assert_eq!(
            msg(Bits8, UInt8),
            "Promotion from Bits8 and Byte is unsupported."
        );
        assert_eq!(
            msg(QUInt8, Float32),
            "promoteTypes with quantized numbers is not handled yet; figure out what the correct rules should be, offending types: QUInt8 Float"
        );
    }

    #[test]
    fn casts_follow_categories() {
        assert!(can_cast(Int64, Float16));
        assert!(can_cast(Float64, Float16));
        assert!(can_cast(Bool, Bool));
        assert!(!can_cast(Float32, Int64));
        assert!(!can_cast(Complex64, Float64));
        assert!(!can_cast(Int8, Bool));
    }

    #[test]
    fn numbers_and_0_dim_tensors_lift_only_the_category() {
        let ints = Tensor::zeros(&[2], Int32).unwrap();
        let half = Tensor::zeros(&[2], Float16).unwrap();
        let r = |t: &Tensor, o: Operand<'_>| result_type("add", t, &o).unwrap();
        assert_eq!(r(&ints, Operand::Scalar(Scalar::Int(3))), Int32);
        assert_eq!(r(&ints, Operand::Scalar(Scalar::Float(0.5))), Float32);
        assert_eq!(r(&half, Operand::Scalar(Scalar::Float(0.5))), Float16);
        let c = Scalar::Complex(num_complex::Complex64::new(0.0, 1.0));
        assert_eq!(r(&half, Operand::Scalar(c)), Complex32);
        let zero_dim = Tensor::zeros(&[], Float64).unwrap();
        assert_eq!(r(&half, Operand::Tensor(&zero_dim)), Float16);
        assert_eq!(r(&ints, Operand::Tensor(&zero_dim)), Float64);
        assert_eq!(r(&zero_dim, Operand::Tensor(&half)), Float16);
    }
}
