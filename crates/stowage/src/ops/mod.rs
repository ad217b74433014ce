//! Arithmetic that returns new tensors: element-wise operations with
//! broadcasting, reductions and the matrix product, each recorded for
//! [`autograd`](crate::autograd) when an operand requires grad.
//!
//! `+ - * /` compute in PyTorch's result type ([`promote::result_type`]):
//! dimensioned tensors promote with each other ([`promote`]: `float64` wins,
//! then `float32`; two different 16-bit floats meet in `float32`; an integer
//! or bool tensor meets a floating one in the floating dtype), while 0-dim
//! tensors and numbers lift the result only into their category
//! (`ones(2) + tensor(1.0, float64)` is `float32`, `int64_tensor + 1` is
//! `int64`, `int_tensor + 0.5` the default dtype). Division of integers gives
//! the default dtype. Floating results go through the float kernels
//! ([`kernel`]); integer, bool and complex ones through the element loop of
//! [`inplace`], integers wrapping as in C++. Unary operations and reductions
//! take floating tensors only ([`TensorError::DTypeUnsupported`]). The in-place
//! `add_` and `mul_` ([`inplace`]) compute in any dtype with values, under
//! PyTorch's in-place casting rule.

mod inplace;
#[allow(unsafe_code)] // The matrixmultiply gemm calls.
pub(crate) mod kernel;
mod matmul;
mod operand;
mod promote;

use crate::error::TensorError;
use inplace::Gathered;
use kernel::{BinOp, UnOp};
pub use operand::Operand;
pub(crate) use promote::promotion_problem;

use crate::autograd::{record, Backward};
use crate::layout::{broadcast_shapes, contiguous_strides, wrap_dim};
use crate::{DType, Error, Kind, Result, Scalar, Tensor};

/// The dtype a unary operation or reduction of `a` computes in, which must
/// be floating (those kernels compute in floating point only).
fn result_dtype(op: &'static str, a: DType) -> Result<DType> {
    if !a.is_floating_point() {
        return Err(Error::Tensor(TensorError::DTypeUnsupported {
            op,
            dtype: a,
        }));
    }
    Ok(a)
}

/// c10's `ScalarType` name of `dtype`, as PyTorch's dispatch errors print it.
pub(crate) fn scalar_type_name(dtype: DType) -> &'static str {
    use DType::*;
    match dtype {
        Float64 => "Double",
        Float32 => "Float",
        Float16 => "Half",
        BFloat16 => "BFloat16",
        Int64 => "Long",
        Int32 => "Int",
        Int16 => "Short",
        Int8 => "Char",
        UInt8 => "Byte",
        Bool => "Bool",
        Complex128 => "ComplexDouble",
        Complex64 => "ComplexFloat",
        Complex32 => "ComplexHalf",
        UInt16 => "UInt16",
        UInt32 => "UInt32",
        UInt64 => "UInt64",
        Float8E4M3Fn => "Float8_e4m3fn",
        Float8E5M2 => "Float8_e5m2",
        Float8E4M3Fnuz => "Float8_e4m3fnuz",
        Float8E5M2Fnuz => "Float8_e5m2fnuz",
        Float8E8M0Fnu => "Float8_e8m0fnu",
        Float4E2M1FnX2 => "Float4_e2m1fn_x2",
        Bits8 => "Bits8",
        Bits16 => "Bits16",
        Bits1x8 => "Bits1x8",
        Bits2x4 => "Bits2x4",
        Bits4x2 => "Bits4x2",
        QUInt8 => "QUInt8",
        QInt8 => "QInt8",
        QInt32 => "QInt32",
        QUInt4x2 => "QUInt4x2",
        QUInt2x4 => "QUInt2x4",
    }
}

/// The C++ type name c10's `TypeMeta` gives `dtype` in messages (GCC's
/// spelling of the builtin integer types: `long int` for `int64`).
pub(crate) fn type_meta_name(dtype: DType) -> &'static str {
    match dtype {
        DType::UInt8 => "unsigned char",
        DType::Int8 => "signed char",
        DType::Int16 => "short int",
        DType::Int64 => "long int",
        DType::UInt16 => "short unsigned int",
        DType::UInt32 => "unsigned int",
        DType::UInt64 => "long unsigned int",
        other => other.cpp_name(),
    }
}

/// The element-wise operations users call.
#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

impl Arith {
    /// PyTorch's CPU kernel for the operation, as its dispatch errors name it.
    fn stub(self) -> &'static str {
        match self {
            Arith::Add | Arith::Sub => "add_stub",
            Arith::Mul => "mul_cpu",
            Arith::Div => "div_cpu",
        }
    }

    /// Whether PyTorch's CPU kernel takes `dtype`: the wide unsigned integers
    /// and the 8-bit floats only multiply, `complex32` does not divide;
    /// quantized, bits and 4-bit dtypes do none of them.
    fn takes(self, dtype: DType) -> bool {
        use DType::*;
        let common = matches!(
            dtype,
            Bool | UInt8
                | Int8
                | Int16
                | Int32
                | Int64
                | Float16
                | BFloat16
                | Float32
                | Float64
                | Complex64
                | Complex128
        );
        match self {
            Arith::Add | Arith::Sub => common || dtype == Complex32,
            Arith::Mul => {
                common
                    || matches!(
                        dtype,
                        Complex32
                            | UInt16
                            | UInt32
                            | UInt64
                            | Float8E4M3Fn
                            | Float8E5M2
                            | Float8E4M3Fnuz
                            | Float8E5M2Fnuz
                            | Float8E8M0Fnu
                    )
            }
            Arith::Div => common,
        }
    }

    /// [`TensorError::NotImplementedFor`] unless PyTorch's CPU kernel computes in
    /// `dtype`. A second operand of one element takes the scalar kernel,
    /// which multiplies and divides reduced-precision floats only for
    /// `float16` and `bfloat16` (`mul_cpu_reduced_float`, `div_cpu_reduced_float`).
    fn check_kernel(self, dtype: DType, one_element_operand: bool) -> Result<()> {
        let reduced_scalar =
            one_element_operand && dtype.kind() == Kind::Float && dtype.size() == 1;
        let (op, reduced_scalar) = match self {
            Arith::Mul if reduced_scalar => ("mul_cpu_reduced_float", true),
            Arith::Div if reduced_scalar => ("div_cpu_reduced_float", true),
            _ => (self.stub(), false),
        };
        if reduced_scalar || !self.takes(dtype) {
            return Err(Error::Tensor(TensorError::NotImplementedFor {
                op,
                type_name: scalar_type_name(dtype),
            }));
        }
        Ok(())
    }

    fn kernel(self) -> BinOp {
        match self {
            Arith::Add => BinOp::Add,
            Arith::Sub => BinOp::Sub,
            Arith::Mul => BinOp::Mul,
            Arith::Div => BinOp::Div,
        }
    }

    /// The operation on one pair of elements, for the element loop.
    fn scalar(self) -> fn(Scalar, Scalar, DType) -> Scalar {
        match self {
            Arith::Add => inplace::add,
            Arith::Sub => inplace::sub,
            Arith::Mul => inplace::mul,
            Arith::Div => inplace::div,
        }
    }
}

/// A number as a 0-dim tensor of its own width (`float64`, `int64`, `bool`,
/// `complex128`), so that kernels convert it once, to the dtype they compute in.
fn number_tensor(s: Scalar) -> Result<Tensor> {
    let dtype = match s {
        Scalar::Bool(_) => DType::Bool,
        Scalar::Int(_) => DType::Int64,
        Scalar::UInt(_) => DType::UInt64,
        Scalar::Float(_) => DType::Float64,
        Scalar::Complex(_) => DType::Complex128,
    };
    let t = Tensor::zeros(&[], dtype)?;
    t.fill_unchecked(s)?;
    Ok(t)
}

impl Tensor {
    fn float_dtype(&self, op: &'static str) -> Result<DType> {
        result_dtype(op, self.dtype)
    }

    /// `self ∘ other` in PyTorch's result type ([`promote::result_type`]:
    /// 0-dim tensors and numbers lift only the category), true division
    /// giving the default dtype for integers. Floating results go through the
    /// float kernels; integer, bool and complex ones through the element loop.
    fn binary(&self, op: Arith, other: Operand<'_>) -> Result<Tensor> {
        let kernel_op = op.kernel();
        let name = kernel_op.name();
        if let Arith::Sub = op {
            let other_bool = match other {
                Operand::Tensor(t) => t.dtype == DType::Bool,
                Operand::Scalar(s) => matches!(s, Scalar::Bool(_)),
            };
            if self.dtype == DType::Bool || other_bool {
                return Err(Error::Tensor(TensorError::BoolSubtraction {
                    both: self.dtype == DType::Bool && other_bool,
                }));
            }
        }
        let mut dtype = promote::result_type(name, self, &other).map_err(|e| match e {
            Error::Tensor(TensorError::NotImplementedFor { type_name, .. }) => {
                Error::Tensor(TensorError::NotImplementedFor {
                    op: op.stub(),
                    type_name,
                })
            }
            e => e,
        })?;
        if matches!(op, Arith::Div) && matches!(dtype.kind(), Kind::Int | Kind::Bool) {
            dtype = crate::dtype::default_dtype();
        }
        let other = match other {
            Operand::Tensor(t) => t.clone(),
            Operand::Scalar(s) => number_tensor(s)?,
        };
        op.check_kernel(dtype, other.numel() == 1)?;
        // Complex gradients need conjugates the backward formulas do not take.
        if dtype.is_complex()
            && crate::autograd::is_grad_enabled()
            && (self.requires_grad() || other.requires_grad())
        {
            return Err(Error::Tensor(TensorError::DTypeUnsupported {
                op: "gradients of complex arithmetic",
                dtype,
            }));
        }
        let out = if dtype.is_floating_point() {
            kernel::binary(kernel_op, self, &other, dtype)?
        } else {
            let shape = broadcast_shapes(self.shape(), other.shape())?;
            let out = self.expanded_for(&shape)?.copied(
                dtype,
                contiguous_strides(&shape),
                self.device(),
            )?;
            let operand = Gathered::Tensor(other.expanded_for(&shape)?);
            out.combine_(name, operand, op.scalar())?;
            out
        };
        let operands = [
            (self.shape().to_vec(), self.dtype),
            (other.shape().to_vec(), other.dtype),
        ];
        let (a, b) = (self.detach(), other.detach());
        let (name, backward) = match op {
            Arith::Add => ("AddBackward0", Backward::Add { operands }),
            Arith::Sub => ("SubBackward0", Backward::Sub { operands }),
            Arith::Mul => ("MulBackward0", Backward::Mul { a, b }),
            Arith::Div => ("DivBackward0", Backward::Div { a, b }),
        };
        Ok(record(out, name, &[self, &other], || backward))
    }

    /// `self + other`, broadcasting (`torch.add`).
    ///
    /// # Errors
    /// [`TensorError::SizeMismatch`] when the shapes do not broadcast;
    /// [`TensorError::NoPromotion`] for dtypes PyTorch does not promote;
    /// [`TensorError::NotImplementedFor`] for a result dtype PyTorch has no kernel
    /// for (`uint16` addition, the 8-bit floats, …); [`TensorError::BoolSubtraction`]
    /// for `-` with a bool operand; [`TensorError::DTypeUnsupported`] for complex
    /// results that would need gradients; [`StorageError::NoData`](crate::StorageError::NoData) on meta.
    pub fn add<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(Arith::Add, other.into())
    }

    /// `self - other`, broadcasting (`torch.sub`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn sub<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(Arith::Sub, other.into())
    }

    /// `self * other`, element-wise, broadcasting (`torch.mul`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn mul<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(Arith::Mul, other.into())
    }

    /// `self / other`, element-wise, broadcasting (`torch.div`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn div<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(Arith::Div, other.into())
    }

    fn unary(&self, op: UnOp, name: &'static str) -> Result<Tensor> {
        self.float_dtype(op.name())?;
        let out = kernel::unary(op, self)?;
        // A handle to the output, for `exp`, whose backward saves it.
        let result = out.detach();
        let backward = move || match op {
            UnOp::Neg => Backward::Neg,
            UnOp::Exp => Backward::Exp { out: result },
            UnOp::Log => Backward::Log { x: self.detach() },
            UnOp::Relu => Backward::Relu { x: self.detach() },
            UnOp::Pow(exponent) => Backward::Pow {
                x: self.detach(),
                exponent,
            },
            UnOp::Scale(s) => Backward::Scale(s),
        };
        Ok(record(out, name, &[self], backward))
    }

    /// `-self` (`torch.neg`).
    ///
    /// # Errors
    /// [`TensorError::DTypeUnsupported`] for non-floating dtypes; [`StorageError::NoData`](crate::StorageError::NoData) on meta.
    pub fn neg(&self) -> Result<Tensor> {
        self.unary(UnOp::Neg, "NegBackward0")
    }

    /// `e^self` (`torch.exp`).
    ///
    /// # Errors
    /// As [`neg`](Self::neg).
    pub fn exp(&self) -> Result<Tensor> {
        self.unary(UnOp::Exp, "ExpBackward0")
    }

    /// The natural logarithm (`torch.log`).
    ///
    /// # Errors
    /// As [`neg`](Self::neg).
    pub fn log(&self) -> Result<Tensor> {
        self.unary(UnOp::Log, "LogBackward0")
    }

    /// `max(self, 0)` (`torch.relu`); its gradient at 0 is 0, as PyTorch's.
    ///
    /// # Errors
    /// As [`neg`](Self::neg).
    pub fn relu(&self) -> Result<Tensor> {
        self.unary(UnOp::Relu, "ReluBackward0")
    }

    /// `self ** exponent` for a number (`torch.pow(t, 2.0)`).
    ///
    /// # Errors
    /// As [`neg`](Self::neg).
    pub fn pow(&self, exponent: f64) -> Result<Tensor> {
        self.unary(UnOp::Pow(exponent), "PowBackward0")
    }

    /// The sum of every element, as a 0-dim tensor (`t.sum()`).
    ///
    /// # Errors
    /// As [`neg`](Self::neg).
    pub fn sum(&self) -> Result<Tensor> {
        let all: Vec<isize> = (0..self.dim() as isize).collect();
        self.reduce(&all, false, false, "SumBackward0")
    }

    /// The sum over `dims` (`t.sum(dims, keepdim)`); `keepdim` leaves them as size 1.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`]; [`TensorError::RepeatedDim`] for a repeated
    /// dimension; as [`neg`](Self::neg).
    pub fn sum_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(dims, keepdim, false, "SumBackward1")
    }

    /// The mean of every element, as a 0-dim tensor (`t.mean()`).
    ///
    /// # Errors
    /// As [`neg`](Self::neg).
    pub fn mean(&self) -> Result<Tensor> {
        let all: Vec<isize> = (0..self.dim() as isize).collect();
        self.reduce(&all, false, true, "MeanBackward0")
    }

    /// The mean over `dims` (`t.mean(dims, keepdim)`).
    ///
    /// # Errors
    /// As [`sum_dims`](Self::sum_dims).
    pub fn mean_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(dims, keepdim, true, "MeanBackward1")
    }

    fn reduce(
        &self,
        dims: &[isize],
        keepdim: bool,
        mean: bool,
        name: &'static str,
    ) -> Result<Tensor> {
        self.float_dtype(if mean { "mean" } else { "sum" })?;
        let mut wrapped = Vec::with_capacity(dims.len());
        for &d in dims {
            let d = wrap_dim(d, self.dim())?;
            if wrapped.contains(&d) {
                return Err(Error::Tensor(TensorError::RepeatedDim {
                    op: if mean { "mean" } else { "sum" },
                    dim: d,
                }));
            }
            wrapped.push(d);
        }
        wrapped.sort_unstable();
        let mut out = kernel::sum_dims(self, &wrapped)?;
        let count: usize = wrapped.iter().map(|&d| self.shape()[d]).product();
        let scale = if mean { 1.0 / count as f64 } else { 1.0 };
        if mean {
            out = kernel::unary(UnOp::Scale(scale), &out)?;
        }
        if keepdim {
            let mut shape = self.shape().to_vec();
            for &d in &wrapped {
                shape[d] = 1;
            }
            out = out
                .detach()
                .reshape(&shape.iter().map(|&s| s as isize).collect::<Vec<_>>())?;
        }
        Ok(record(out, name, &[self], || Backward::Sum {
            shape: self.shape().to_vec(),
            dims: wrapped,
            keepdim,
            scale,
        }))
    }

    /// The sum of `self` down to `shape`, which it must broadcast from
    /// (`t.sum_to_size(shape)`): how a broadcast operand's gradient is reduced.
    ///
    /// # Errors
    /// [`TensorError::ShapeIncompatible`] when `shape` does not broadcast to `self`'s shape.
    pub fn sum_to_size(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let mismatch = || {
            Error::Tensor(TensorError::ShapeIncompatible {
                op: "sum_to_size",
                expected: self.shape().to_vec(),
                found: shape.to_vec(),
            })
        };
        let lead = self.dim().checked_sub(shape.len()).ok_or_else(mismatch)?;
        let mut dims: Vec<isize> = (0..lead as isize).collect();
        for (i, &s) in shape.iter().enumerate() {
            match (s, self.shape()[lead + i]) {
                (a, b) if a == b => {}
                (1, _) => dims.push((lead + i) as isize),
                _ => return Err(mismatch()),
            }
        }
        let summed = self.sum_dims(&dims, true)?;
        // As ATen's `sum_to`: a view only when leading dimensions go away.
        if lead == 0 {
            return Ok(summed);
        }
        let sizes: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
        summed.view(&sizes)
    }
}
