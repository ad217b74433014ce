//! In-place arithmetic: `add_` and `mul_`.
//!
//! As in PyTorch, the operation computes in the promoted dtype of `self` and
//! the operand ([`result_type`]) and is refused when that dtype cannot be
//! stored back into `self`'s ([`can_cast`]): `int_tensor.add_(0.5)` is an
//! error, `half_tensor.add_(double_tensor)` is not. Contiguous `float32` and
//! `float64` destinations whose dtype is the promoted one take a vectorised
//! kernel; everything else goes element by element through [`Scalar`]
//! (double precision, or the integer or complex value), rounded once to
//! `self`'s dtype.

use crate::error::TensorError;
use num_complex::{Complex, Complex32, Complex64};

use super::kernel;
use super::promote::{can_cast, result_type};
use super::Arith;
use crate::autograd::Backward;
use crate::element::{self, Scalar};
use crate::overlap::{assert_no_internal_overlap, assert_no_partial_overlap};
use crate::{DType, Error, Kind, Operand, Result, Tensor};

impl Tensor {
    /// In place `self += other` (a tensor broadcast to `self`'s shape, or a scalar).
    ///
    /// # Errors
    /// [`TensorError::ResultTypeCast`] when the result type cannot be stored in `self`'s
    /// dtype (as PyTorch refuses `int_tensor.add_(0.5)`), [`TensorError::NoPromotion`]
    /// for dtypes PyTorch does not promote, [`TensorError::SizeMismatch`] or
    /// [`TensorError::BroadcastOutput`] when `other` does not broadcast to `self`'s
    /// shape; [`TensorError::PartialOverlap`] when `other` shares part of `self`'s
    /// memory and [`TensorError::InternalOverlap`] when `self` is expanded (PyTorch's
    /// overlap rule: `a.add_(a)` is allowed); [`StorageError::NoData`](crate::StorageError::NoData) on meta;
    /// [`TensorError::InPlaceRequiresGrad`] while recording gradients, for a leaf
    /// that requires grad or a view of one (as in PyTorch), and for a write
    /// that would be recorded through a view PyTorch or stowage does not
    /// record writes through ([`GradRole`](crate::autograd::GradRole)). On a
    /// computed tensor, or with an `other` that requires grad, the write is
    /// recorded, as in PyTorch ([`crate::autograd`]).
    pub fn add_<'a>(&self, other: impl Into<Operand<'a>>) -> Result<&Self> {
        self.binary_("add_", Arith::Add, other.into(), add)
    }

    /// In place `self *= other` (a tensor broadcast to `self`'s shape, or a scalar).
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn mul_<'a>(&self, other: impl Into<Operand<'a>>) -> Result<&Self> {
        self.binary_("mul_", Arith::Mul, other.into(), mul)
    }

    /// `self = f(self, other)` element by element, for `arith` (whose float
    /// kernel serves contiguous `float32`/`float64` tensors), after PyTorch's
    /// checks: cast rule, kernel, overlap, broadcast. The write counts in the
    /// storage's version; on a computed tensor it is recorded.
    fn binary_(
        &self,
        op: &'static str,
        arith: Arith,
        other: Operand<'_>,
        f: fn(Scalar, Scalar, DType) -> Scalar,
    ) -> Result<&Self> {
        let operand = match other {
            Operand::Tensor(t) => Some(t),
            Operand::Scalar(_) => None,
        };
        let record = self.check_inplace_arith(op, operand)?;
        // Complex gradients need conjugates the backward formulas do not take.
        if record && self.dtype.is_complex() {
            return Err(Error::Tensor(TensorError::DTypeUnsupported {
                op: "gradients of complex arithmetic",
                dtype: self.dtype,
            }));
        }
        // `a *= b` with `b` requiring grad needs `a`'s values from before.
        let original = match (record, arith, operand) {
            (true, Arith::Mul, Some(b)) if b.requires_grad() => Some(self.detach().deep_clone()?),
            _ => None,
        };
        self.write_binary(op, arith, other, f)?;
        if record {
            let (name, backward) = match (arith, other) {
                (Arith::Mul, Operand::Tensor(b)) => (
                    "MulBackward0",
                    match original {
                        Some(a) => Backward::Mul { a, b: b.detach() },
                        None => Backward::MulBy { b: b.detach() },
                    },
                ),
                (Arith::Mul, Operand::Scalar(s)) => ("MulBackward0", Backward::Scale(s.to_f64())),
                (_, Operand::Tensor(b)) => (
                    "AddBackward0",
                    Backward::Add {
                        operands: [
                            (self.shape().to_vec(), self.dtype),
                            (b.shape().to_vec(), b.dtype),
                        ],
                    },
                ),
                (_, Operand::Scalar(_)) => ("AddBackward0", Backward::Identity),
            };
            // Recorded before the version moves: an operand that is `self`
            // (`y.mul_(y)`) is then seen as written since it was saved.
            self.record_inplace(name, backward, operand);
        }
        self.storage.bump_version();
        Ok(self)
    }

    /// The write of [`binary_`](Self::binary_), after its checks.
    fn write_binary(
        &self,
        op: &'static str,
        arith: Arith,
        other: Operand<'_>,
        f: fn(Scalar, Scalar, DType) -> Scalar,
    ) -> Result<&Self> {
        self.check_data(op)?;
        let result = result_type(op, self, &other)?;
        if !can_cast(result, self.dtype) {
            return Err(Error::Tensor(TensorError::ResultTypeCast {
                op,
                result,
                output: self.dtype,
            }));
        }
        let one_element = match other {
            Operand::Tensor(t) => t.numel() == 1,
            Operand::Scalar(_) => true,
        };
        arith.check_kernel(result, one_element)?;
        let kernel = arith.kernel();
        assert_no_internal_overlap(op, self)?;
        if let Operand::Tensor(t) = other {
            assert_no_partial_overlap(op, self, t)?;
        }
        // The operand broadcast to `self`'s shape, checked once.
        let operand = match other {
            Operand::Scalar(s) => Gathered::One(s),
            Operand::Tensor(t) => Gathered::Tensor(t.expanded_for(self.shape())?),
        };
        // As in PyTorch, a narrow float computation reads its operand cast to
        // the computation's dtype, except a one-element factor, which ATen's
        // scalar kernel reads at its own precision.
        let narrow =
            result.kind() == Kind::Float && !matches!(result, DType::Float32 | DType::Float64);
        let scalar_kernel = matches!(arith, Arith::Mul) && one_element;
        let operand = match operand {
            _ if !narrow => operand,
            // ATen's scalar kernel reads the factor as `float`.
            Gathered::One(Scalar::Float(x)) if scalar_kernel => {
                Gathered::One(Scalar::Float(f64::from(x as f32)))
            }
            Gathered::Tensor(t) if scalar_kernel && t.dtype.kind() == Kind::Float => {
                let x = match other {
                    Operand::Tensor(o) => o.item()?.to_f64(),
                    Operand::Scalar(s) => s.to_f64(),
                };
                Gathered::One(Scalar::Float(f64::from(x as f32)))
            }
            _ if scalar_kernel => operand,
            Gathered::One(s) => {
                let t = Tensor::zeros(&[], result)?;
                t.fill_unchecked(s)?;
                Gathered::One(t.item()?)
            }
            Gathered::Tensor(t) if t.dtype != result => Gathered::Tensor(t.to_dtype(result)?),
            tensor => tensor,
        };
        // The typed kernel computes in `self`'s dtype, so it serves only where
        // that is the promoted dtype (a float32 tensor plus a float64 one must
        // compute in float64 and round once, as PyTorch does).
        if result == self.dtype
            && matches!(self.dtype, DType::Float32 | DType::Float64)
            && self.is_contiguous()
        {
            let operand = match &operand {
                Gathered::Tensor(t) => t.clone(),
                Gathered::One(s) => {
                    let t = Tensor::zeros(&[], self.dtype)?;
                    t.fill_unchecked(*s)?;
                    t
                }
            };
            if kernel::inplace(kernel, self, &operand)? {
                return Ok(self);
            }
        }
        self.combine_(op, operand, f)
    }

    /// `self = f(self, operand)` element by element through [`Scalar`], with
    /// no checks: the element loop behind in-place arithmetic and the
    /// out-of-place arithmetic of non-floating dtypes.
    pub(super) fn combine_(
        &self,
        op: &'static str,
        operand: Gathered,
        f: fn(Scalar, Scalar, DType) -> Scalar,
    ) -> Result<&Self> {
        // Gather the operand first: it may share storage with `self`. A
        // one-element operand is read once.
        let values: Vec<Scalar> = match operand {
            Gathered::One(s) => vec![s],
            Gathered::Tensor(t) if t.numel() == 1 => vec![t.item()?],
            Gathered::Tensor(t) => t.scalars()?,
        };
        let (dt, es) = (self.dtype, self.element_size());
        self.storage
            .with_bytes_mut(op, |b| {
                self.layout.check_fits(es, b.len())?;
                for (i, o) in self.layout.offsets().enumerate() {
                    let cell = &mut b[o * es..(o + 1) * es];
                    let v = f(
                        element::read(dt, cell)?,
                        values[if values.len() == 1 { 0 } else { i }],
                        dt,
                    );
                    element::write(dt, v, cell)?;
                }
                Ok(())
            })?
            .map(|()| self)
    }
}

/// An operand of element-wise arithmetic, ready for the element loop.
pub(super) enum Gathered {
    /// A number.
    One(Scalar),
    /// A tensor already broadcast to the output's shape.
    Tensor(Tensor),
}

/// `a + b` in `a`'s representation (bool: or; integers wrap).
pub(super) fn add(a: Scalar, b: Scalar, _: DType) -> Scalar {
    match (a, b) {
        (Scalar::Bool(x), y) => Scalar::Bool(x || y.to_bool()),
        (Scalar::Int(x), y) => Scalar::Int(x.wrapping_add(y.to_i64())),
        (Scalar::UInt(x), y) => Scalar::UInt(x.wrapping_add(y.to_u64())),
        (Scalar::Float(x), y) => Scalar::Float(x + y.to_f64()),
        (Scalar::Complex(x), y) => Scalar::Complex(x + y.to_complex()),
    }
}

/// `a - b` in `a`'s representation (never bool: PyTorch refuses it before).
pub(super) fn sub(a: Scalar, b: Scalar, _: DType) -> Scalar {
    match (a, b) {
        (Scalar::Bool(x), y) => Scalar::Bool(x != y.to_bool()),
        (Scalar::Int(x), y) => Scalar::Int(x.wrapping_sub(y.to_i64())),
        (Scalar::UInt(x), y) => Scalar::UInt(x.wrapping_sub(y.to_u64())),
        (Scalar::Float(x), y) => Scalar::Float(x - y.to_f64()),
        (Scalar::Complex(x), y) => Scalar::Complex(x - y.to_complex()),
    }
}

/// `a * b` in `a`'s representation (bool: and; integers wrap).
pub(super) fn mul(a: Scalar, b: Scalar, _: DType) -> Scalar {
    match (a, b) {
        (Scalar::Bool(x), y) => Scalar::Bool(x && y.to_bool()),
        (Scalar::Int(x), y) => Scalar::Int(x.wrapping_mul(y.to_i64())),
        (Scalar::UInt(x), y) => Scalar::UInt(x.wrapping_mul(y.to_u64())),
        (Scalar::Float(x), y) => Scalar::Float(x * y.to_f64()),
        (Scalar::Complex(x), y) => Scalar::Complex(x * y.to_complex()),
    }
}

/// `a / b`, true division: only floating and complex results reach it
/// (integer quotients are computed in the default dtype). Complex quotients
/// follow c10's `complex::operator/=` (Smith's scaling) in the precision of
/// `dtype`, as PyTorch computes them.
pub(super) fn div(a: Scalar, b: Scalar, dtype: DType) -> Scalar {
    match a {
        Scalar::Complex(x) => {
            let y = b.to_complex();
            Scalar::Complex(if dtype == DType::Complex128 {
                c10_div(x, y)
            } else {
                let narrow = |c: Complex64| Complex32::new(c.re as f32, c.im as f32);
                let q = c10_div(narrow(x), narrow(y));
                Complex64::new(f64::from(q.re), f64::from(q.im))
            })
        }
        x => Scalar::Float(x.to_f64() / b.to_f64()),
    }
}

/// c10's complex division (numpy's): scale by the larger part of the divisor.
fn c10_div<T: num_traits::Float>(x: Complex<T>, y: Complex<T>) -> Complex<T> {
    let (a, b, c, d) = (x.re, x.im, y.re, y.im);
    let (abs_c, abs_d) = (c.abs(), d.abs());
    if abs_c >= abs_d {
        if abs_c == T::zero() && abs_d == T::zero() {
            // Division by zero gives a complex inf or nan.
            return Complex::new(a / abs_c, b / abs_d);
        }
        let rat = d / c;
        let scl = T::one() / (c + d * rat);
        Complex::new((a + b * rat) * scl, (b - a * rat) * scl)
    } else {
        let rat = c / d;
        let scl = T::one() / (d + c * rat);
        Complex::new((a * rat + b) * scl, (b * rat - a) * scl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TensorError;

    #[test]
    fn arithmetic_in_place() {
        let t = Tensor::ones(&[2, 2], DType::Float32).unwrap();
        t.add_(1.5).unwrap();
        t.mul_(&Tensor::from_slice(&[2.0f32, 3.0]).unwrap())
            .unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![5.0, 7.5, 5.0, 7.5]);
        let i = Tensor::ones(&[2], DType::Int64).unwrap();
        assert!(i.add_(0.5).is_err());
        i.add_(&i.clone()).unwrap();
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 2]);
        let u8t = Tensor::from_slice(&[250u8]).unwrap();
        u8t.add_(10i64).unwrap();
        assert_eq!(u8t.to_vec::<u8>().unwrap(), vec![4]);
    }

    /// A float32 tensor plus a float64 one computes in float64 and rounds once,
    /// whatever the layout: `1 + (2^-24 + 2^-50)` rounds up to the next float32
    /// above 1 (PyTorch gives 1.0000001), where float32 arithmetic would round
    /// the operand to 2^-24 first and the sum to 1.
    #[test]
    fn a_wider_operand_computes_in_the_promoted_dtype() {
        let y = Tensor::from_slice(&[2f64.powi(-24) + 2f64.powi(-50); 4])
            .unwrap()
            .reshape(&[2, 2])
            .unwrap();
        let want = 1.0 + f32::EPSILON;
        let contiguous = Tensor::ones(&[2, 2], DType::Float32).unwrap();
        contiguous.add_(&y).unwrap();
        assert_eq!(contiguous.to_vec::<f32>().unwrap(), vec![want; 4]);
        let transposed = Tensor::ones(&[2, 2], DType::Float32).unwrap().t().unwrap();
        transposed.add_(&y).unwrap();
        assert_eq!(transposed.to_vec::<f32>().unwrap(), vec![want; 4]);
    }

    /// The float fast path (contiguous float32/float64) and the element-by-element
    /// path agree, also when the operand overlaps the destination.
    #[test]
    fn in_place_fast_path_matches_the_general_path() {
        let values: Vec<f32> = (0..12).map(|i| (i as f32) * 0.37 - 1.9).collect();
        let fresh = || Tensor::from_vec(values.clone(), &[3, 4]).unwrap();
        // Contiguous (fast) against the same values through a transposed,
        // non-contiguous destination (general).
        let fast = fresh();
        let general = fresh().t().unwrap().contiguous().unwrap().t().unwrap();
        assert!(!general.is_contiguous());
        let row = Tensor::from_slice(&[0.5f32, -1.25, 3.0, 0.1]).unwrap();
        for t in [&fast, &general] {
            t.add_(&row).unwrap();
            t.mul_(0.1).unwrap();
            t.add_(&Tensor::from_slice(&[7i64]).unwrap()).unwrap();
            t.mul_(&t.clone()).unwrap();
        }
        let (f, g) = (
            fast.to_vec::<f32>().unwrap(),
            general.to_vec::<f32>().unwrap(),
        );
        assert_eq!(f, g);
        // An operand that overlaps the destination where ATen cannot decide
        // (strided views) is read before the destination is written, as
        // PyTorch's element loop reads each operand element before writing it
        // (float32 takes the fast path, float64 too, float16 the general one).
        for dtype in [DType::Float32, DType::Float64, DType::Float16] {
            let flat = fresh().view(&[-1]).unwrap().to_dtype(dtype).unwrap();
            let before = flat.to_vec::<f32>().unwrap();
            let (dst, src) = (
                flat.slice(0, Some(0), Some(10), 2).unwrap(),
                flat.slice(0, Some(2), Some(12), 2).unwrap(),
            );
            dst.add_(&src).unwrap();
            let after = flat.to_vec::<f32>().unwrap();
            for i in (0..10).step_by(2) {
                let want = Tensor::scalar(before[i] + before[i + 2]).unwrap();
                let want = want.to_dtype(dtype).unwrap().to_vec::<f32>().unwrap()[0];
                assert_eq!(after[i], want, "{dtype} element {i}");
            }
        }
    }

    /// PyTorch's overlap rule: `a.add_(a)` is allowed, a shifted or transposed
    /// view of `a` (or a 0-dim one) is refused, and so is an expanded `a`.
    #[test]
    fn partial_overlap_is_refused() {
        let a = Tensor::arange(0.0, 6.0, 1.0, DType::Float32).unwrap();
        a.add_(&a).unwrap();
        a.mul_(&a.clone()).unwrap();
        assert_eq!(
            a.to_vec::<f32>().unwrap(),
            vec![0.0, 4.0, 16.0, 36.0, 64.0, 100.0]
        );
        let before = a.to_vec::<f32>().unwrap();
        let tail = a.narrow(0, 1, 5).unwrap();
        let shifted = tail.add_(&a.narrow(0, 0, 5).unwrap());
        assert!(matches!(
            shifted,
            Err(Error::Tensor(TensorError::PartialOverlap { op: "add_" }))
        ));
        let m = a.view(&[2, 3]).unwrap();
        let row = m.mul_(&m.select(0, 0).unwrap());
        assert!(matches!(
            row,
            Err(Error::Tensor(TensorError::PartialOverlap { op: "mul_" }))
        ));
        assert!(a.add_(&a.select(0, 0).unwrap()).is_err());
        let sq = a.narrow(0, 0, 4).unwrap().view(&[2, 2]).unwrap();
        assert!(sq.add_(&sq.t().unwrap()).is_err());
        assert_eq!(a.to_vec::<f32>().unwrap(), before);
        let wide = Tensor::zeros(&[1], DType::Float32)
            .unwrap()
            .expand(&[3])
            .unwrap();
        assert!(matches!(
            wide.add_(1.0),
            Err(Error::Tensor(TensorError::InternalOverlap { op: "add_" }))
        ));
        let ones = Tensor::ones(&[3], DType::Float32).unwrap();
        assert!(matches!(
            wide.mul_(&ones),
            Err(Error::Tensor(TensorError::InternalOverlap { .. }))
        ));
    }

    /// In-place scalar arithmetic wraps integers and rounds floats to infinity
    /// without a range check, as PyTorch (`uint8.add_(300)` is 44).
    #[test]
    fn scalar_operands_are_not_range_checked() {
        let u = Tensor::zeros(&[2], DType::UInt8).unwrap();
        u.add_(300i64).unwrap();
        assert_eq!(u.to_vec::<u8>().unwrap(), vec![44, 44]);
        let i = Tensor::zeros(&[2], DType::Int8).unwrap();
        i.add_(200i64).unwrap();
        assert_eq!(i.to_vec::<i8>().unwrap(), vec![-56, -56]);
        let h = Tensor::zeros(&[2], DType::Float16).unwrap();
        h.add_(1e6).unwrap();
        assert_eq!(h.to_vec::<f32>().unwrap(), vec![f32::INFINITY; 2]);
    }

    /// Broadcasting errors in PyTorch's words.
    #[test]
    fn operands_that_do_not_broadcast_are_refused() {
        let t = Tensor::ones(&[2, 3], DType::Float32).unwrap();
        let e = t.mul_(&Tensor::ones(&[4, 1, 3], DType::Float32).unwrap());
        assert_eq!(
            e.unwrap_err().to_string(),
            "output with shape [2, 3] doesn't match the broadcast shape [4, 2, 3]"
        );
        let two = Tensor::ones(&[2], DType::Float32).unwrap();
        let e = two.add_(&Tensor::ones(&[3], DType::Float32).unwrap());
        assert_eq!(
            e.unwrap_err().to_string(),
            "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"
        );
        let e = t.add(&Tensor::ones(&[4, 1, 2], DType::Float32).unwrap());
        assert_eq!(
            e.unwrap_err().to_string(),
            "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 2"
        );
    }

    /// PyTorch's in-place rule: the promoted dtype must cast to `self`'s.
    #[test]
    fn results_that_cannot_be_stored_are_refused() {
        let i = Tensor::ones(&[2], DType::Int64).unwrap();
        let e = i.add_(0.5).unwrap_err();
        assert!(matches!(
            e,
            Error::Tensor(TensorError::ResultTypeCast {
                op: "add_",
                result: DType::Float32,
                output: DType::Int64
            })
        ));
        assert_eq!(
            e.to_string(),
            "result type Float can't be cast to the desired output type Long"
        );
        let f = Tensor::ones(&[2], DType::Float32).unwrap();
        assert!(matches!(
            i.mul_(&f),
            Err(Error::Tensor(TensorError::ResultTypeCast {
                result: DType::Float32,
                ..
            }))
        ));
        let b = Tensor::ones(&[2], DType::Bool).unwrap();
        assert!(b.add_(1i64).is_err());
        b.mul_(Scalar::Bool(false)).unwrap();
        assert_eq!(b.to_vec::<bool>().unwrap(), vec![false, false]);
        // A wider float operand casts down (same category), as PyTorch allows.
        let h = Tensor::ones(&[2], DType::Float16).unwrap();
        h.add_(&Tensor::ones(&[2], DType::Float64).unwrap())
            .unwrap();
        assert_eq!(h.to_vec::<f32>().unwrap(), vec![2.0, 2.0]);
        // Dtypes PyTorch does not promote with others.
        let e8 = Tensor::zeros(&[2], DType::Float8E4M3Fn).unwrap();
        assert!(matches!(
            e8.add_(&f),
            Err(Error::Tensor(TensorError::NoPromotion { .. }))
        ));
        // Kernels PyTorch lacks: float8 and uint16 addition, float8 times a
        // scalar; uint16 multiplies, float8 multiplies by a tensor.
        let refused = |r: Result<&Tensor>| r.unwrap_err().to_string();
        assert_eq!(
            refused(e8.add_(1.0)),
            "\"add_stub\" not implemented for 'Float8_e4m3fn'"
        );
        assert_eq!(
            refused(e8.mul_(1.0)),
            "\"mul_cpu_reduced_float\" not implemented for 'Float8_e4m3fn'"
        );
        e8.mul_(&Tensor::ones(&[2], DType::Float8E4M3Fn).unwrap())
            .unwrap();
        let u16t = Tensor::ones(&[2], DType::UInt16).unwrap();
        assert!(matches!(
            u16t.add_(&i),
            Err(Error::Tensor(TensorError::NoPromotion { .. }))
        ));
        assert_eq!(
            refused(u16t.add_(3i64)),
            "\"add_stub\" not implemented for 'UInt16'"
        );
        u16t.mul_(3i64).unwrap();
        assert_eq!(u16t.to_vec::<u16>().unwrap(), vec![3, 3]);
    }
}
