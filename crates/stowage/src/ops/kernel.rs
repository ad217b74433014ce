//! Float kernels behind the arithmetic of [`super`]: no autograd here.
//!
//! Every kernel reads its operands as contiguous `Vec<T>` in row-major order
//! (one strided copy, converting the dtype when needed), computes, and writes
//! a new contiguous tensor. `T` is `f64` for `float64` and `f32` for every
//! other floating dtype, whose results are converted back (as PyTorch computes
//! half precision in `float32`). Matrix products go through `matrixmultiply`.

use crate::error::TensorError;
use bytemuck::Pod;
use num_traits::{Float, Zero};

use num_complex::Complex64;

use crate::element::{Element, Scalar};
use crate::layout::{broadcast_shapes, contiguous_strides, Layout};
use crate::{DType, Error, Kind, Result, Tensor};

/// A floating type arithmetic computes in.
pub(crate) trait Real:
    Element
    + Pod
    + Float
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::ops::MulAssign
    + std::ops::DivAssign
{
    /// `c = a · b` for row-major `a` (`m`×`k`), `b` (`k`×`n`) and `c` (`m`×`n`).
    fn gemm(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]);
    /// `v` rounded to `Self`.
    fn of(v: f64) -> Self;
}

macro_rules! real {
    ($t:ty, $gemm:path) => {
        impl Real for $t {
            fn gemm(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]) {
                assert!(a.len() == m * k && b.len() == k * n && c.len() == m * n);
                // SAFETY: the three slices hold exactly the row-major m×k, k×n
                // and m×n matrices described by these sizes and strides, and
                // `c` is borrowed mutably, so it aliases neither input.
                unsafe {
                    $gemm(
                        m,
                        k,
                        n,
                        1.0,
                        a.as_ptr(),
                        k as isize,
                        1,
                        b.as_ptr(),
                        n as isize,
                        1,
                        0.0,
                        c.as_mut_ptr(),
                        n as isize,
                        1,
                    )
                }
            }
            fn of(v: f64) -> Self {
                v as $t
            }
        }
    };
}
real!(f32, matrixmultiply::sgemm);
real!(f64, matrixmultiply::dgemm);

/// Runs `$body` with `$T` the type arithmetic on `$dtype` computes in.
macro_rules! with_real {
    ($dtype:expr, $T:ident => $body:expr) => {
        if $dtype == DType::Float64 {
            type $T = f64;
            $body
        } else {
            type $T = f32;
            $body
        }
    };
}

/// Element-wise operations of two operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `x` where `y > 0`, else 0: relu's backward (`x` the gradient, `y` the input).
    ReluGrad,
}

impl BinOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::ReluGrad => "threshold_backward",
        }
    }

    /// `x op y` element-wise; a side of one value is broadcast.
    fn zip<T: Real>(self, x: &[T], y: &[T]) -> Vec<T> {
        match (x, y) {
            ([a], _) if y.len() != 1 => self.pairs(std::iter::repeat(a).zip(y)),
            (_, [b]) => self.pairs(x.iter().zip(std::iter::repeat(b))),
            _ => self.pairs(x.iter().zip(y)),
        }
    }

    fn pairs<'a, T: Real>(self, pairs: impl Iterator<Item = (&'a T, &'a T)>) -> Vec<T> {
        match self {
            BinOp::Add => pairs.map(|(&a, &b)| a + b).collect(),
            BinOp::Sub => pairs.map(|(&a, &b)| a - b).collect(),
            BinOp::Mul => pairs.map(|(&a, &b)| a * b).collect(),
            BinOp::Div => pairs.map(|(&a, &b)| a / b).collect(),
            BinOp::ReluGrad => pairs
                .map(|(&g, &v)| if v > T::zero() { g } else { T::zero() })
                .collect(),
        }
    }
}

impl BinOp {
    /// `x[i] = x[i] op y[i]`; a `y` of one value is broadcast.
    fn zip_into<T: Real>(self, x: &mut [T], y: &[T]) {
        match y {
            [b] => self.pairs_into(x.iter_mut().zip(std::iter::repeat(b))),
            _ => self.pairs_into(x.iter_mut().zip(y)),
        }
    }

    fn pairs_into<'a, T: Real>(self, pairs: impl Iterator<Item = (&'a mut T, &'a T)>) {
        match self {
            BinOp::Add => pairs.for_each(|(a, &b)| *a += b),
            BinOp::Sub => pairs.for_each(|(a, &b)| *a -= b),
            BinOp::Mul => pairs.for_each(|(a, &b)| *a *= b),
            BinOp::Div => pairs.for_each(|(a, &b)| *a /= b),
            BinOp::ReluGrad => pairs.for_each(|(a, &b)| {
                if b <= T::zero() {
                    *a = T::zero()
                }
            }),
        }
    }
}

/// Element-wise operations of one operand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum UnOp {
    Neg,
    Exp,
    Log,
    Relu,
    /// `x^p`.
    Pow(f64),
    /// `x · s`.
    Scale(f64),
}

impl UnOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Exp => "exp",
            UnOp::Log => "log",
            UnOp::Relu => "relu",
            UnOp::Pow(_) => "pow",
            UnOp::Scale(_) => "mul",
        }
    }

    fn map<T: Real>(self, x: &mut [T]) {
        match self {
            UnOp::Neg => x.iter_mut().for_each(|v| *v = -*v),
            UnOp::Exp => x.iter_mut().for_each(|v| *v = v.exp()),
            UnOp::Log => x.iter_mut().for_each(|v| *v = v.ln()),
            UnOp::Relu => x.iter_mut().for_each(|v| *v = v.max(T::zero())),
            UnOp::Pow(p) => {
                let p = T::of(p);
                x.iter_mut().for_each(|v| *v = v.powf(p))
            }
            UnOp::Scale(s) => {
                let s = T::of(s);
                x.iter_mut().for_each(|v| *v *= s)
            }
        }
    }
}

/// `t`'s elements in row-major order as `T` (a copy).
pub(crate) fn values<T: Real>(t: &Tensor) -> Result<Vec<T>> {
    let dense = if t.dtype() == T::DTYPE && t.is_contiguous() {
        t.detach()
    } else {
        t.copied(T::DTYPE, contiguous_strides(t.shape()), t.device())?
    };
    let es = std::mem::size_of::<T>();
    let start = dense.storage_offset() * es;
    dense.storage.with_bytes("arithmetic", |b| {
        dense.layout.check_fits(es, b.len())?;
        Ok(bytemuck::pod_collect_to_vec(
            &b[start..start + dense.numel() * es],
        ))
    })?
}

/// A new contiguous tensor of `shape` holding `v`, converted to `dtype`.
pub(crate) fn from_values<T: Real>(v: Vec<T>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let t = Tensor::zeros(shape, T::DTYPE)?;
    let bytes: &[u8] = bytemuck::cast_slice(&v);
    t.storage.with_bytes_mut("arithmetic", |b| {
        if b.len() != bytes.len() {
            return Err(Error::Tensor(TensorError::ShapeMismatch {
                shape: shape.iter().map(|&s| s as isize).collect(),
                numel: v.len(),
            }));
        }
        b.copy_from_slice(bytes);
        Ok(())
    })??;
    t.to_dtype(dtype)
}

/// `t`'s values broadcast to `shape`: one value when `t` has one element (the
/// kernels broadcast it themselves), else every value of the expanded view.
fn broadcast_values<T: Real>(t: &Tensor, shape: &[usize]) -> Result<Vec<T>> {
    if t.numel() == 1 && shape.iter().product::<usize>() != 1 {
        return values::<T>(&t.detach().reshape(&[1])?);
    }
    let sizes: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
    values::<T>(&t.detach().expand(&sizes)?)
}

/// `op(a, b)` with broadcasting, as `dtype`.
///
/// As PyTorch's `TensorIterator`, the operands are first cast to `dtype` and
/// then computed in `T` (`float32` for the narrower floats), except a
/// one-element second operand of a product or quotient in a reduced-precision
/// dtype, which ATen's scalar kernels read at its own precision
/// (`x_half * 0.1` multiplies by `0.1f`, `x_half + 0.1` adds `half(0.1)`).
pub(crate) fn binary(op: BinOp, a: &Tensor, b: &Tensor, dtype: DType) -> Result<Tensor> {
    let shape = broadcast_shapes(a.shape(), b.shape())?;
    let narrow = !matches!(dtype, DType::Float32 | DType::Float64);
    let cast = |t: &Tensor, keep: bool| -> Result<Tensor> {
        if narrow && !keep && t.dtype() != dtype {
            t.detach().to_dtype(dtype)
        } else {
            Ok(t.detach())
        }
    };
    let scalar_kernel = matches!(op, BinOp::Mul | BinOp::Div) && b.numel() == 1;
    let (a, b) = (cast(a, false)?, cast(b, scalar_kernel)?);
    with_real!(dtype, T => {
        let x = broadcast_values::<T>(&a, &shape)?;
        let y = broadcast_values::<T>(&b, &shape)?;
        from_values(op.zip(&x, &y), &shape, dtype)
    })
}

/// `dst = dst op operand` in place, for a contiguous `float32` or `float64`
/// `dst` whose bytes are aligned for its element type, as PyTorch computes it
/// (in `dst`'s dtype, the operand converted to it). `operand` must broadcast
/// to `dst`'s shape (the caller checked). `Ok(false)`, having done nothing,
/// when `dst` does not qualify.
pub(crate) fn inplace(op: BinOp, dst: &Tensor, operand: &Tensor) -> Result<bool> {
    if !matches!(dst.dtype(), DType::Float32 | DType::Float64) || !dst.is_contiguous() {
        return Ok(false);
    }
    with_real!(dst.dtype(), T => {
        // Gathered first: the operand may share storage with `dst`.
        let y = broadcast_values::<T>(operand, dst.shape())?;
        let es = std::mem::size_of::<T>();
        let start = dst.storage_offset() * es;
        dst.storage.with_bytes_mut("arithmetic", |b| {
            dst.layout.check_fits(es, b.len())?;
            let bytes = &mut b[start..start + dst.numel() * es];
            Ok(match bytemuck::try_cast_slice_mut::<u8, T>(bytes) {
                Ok(x) => {
                    op.zip_into(x, &y);
                    true
                }
                Err(_) => false,
            })
        })?
    })
}

/// `op(x)`, keeping `x`'s dtype.
pub(crate) fn unary(op: UnOp, x: &Tensor) -> Result<Tensor> {
    with_real!(x.dtype(), T => {
        let mut v = values::<T>(x)?;
        op.map(&mut v);
        from_values(v, x.shape(), x.dtype())
    })
}

/// The sum over `dims` (sorted, distinct), which are removed from the shape.
pub(crate) fn sum_dims(x: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let kept: Vec<usize> = (0..x.dim()).filter(|d| !dims.contains(d)).collect();
    let out_shape: Vec<usize> = kept.iter().map(|&d| x.shape()[d]).collect();
    let order: Vec<isize> = kept.iter().chain(dims).map(|&d| d as isize).collect();
    let moved = x.detach().permute(&order)?;
    let group: usize = dims.iter().map(|&d| x.shape()[d]).product();
    with_real!(x.dtype(), T => {
        let v = values::<T>(&moved)?;
        let sums: Vec<T> = if group == 0 {
            vec![T::zero(); out_shape.iter().product()]
        } else {
            v.chunks_exact(group)
                .map(|c| c.iter().fold(T::zero(), |acc, &e| acc + e))
                .collect()
        };
        from_values(sums, &out_shape, x.dtype())
    })
}

/// Whether PyTorch has a CPU kernel for products of `dtype` (`mm` takes the
/// 8-bit floats too, the others do not).
pub(crate) fn has_product(dtype: DType, mm: bool) -> bool {
    use DType::*;
    matches!(
        dtype,
        UInt8
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
    ) || mm
        && matches!(
            dtype,
            Float8E4M3Fn | Float8E5M2 | Float8E4M3Fnuz | Float8E5M2Fnuz
        )
}

/// The product of two matrices of one dtype (`a` is `m`×`k`, `b` is
/// `k`×`n`, checked by the caller, as is the dtype: [`has_product`]), in that
/// dtype: floats through `matrixmultiply` (reduced-precision floats in
/// `float32`), integers with wrapping arithmetic, complex numbers in double
/// precision.
///
/// # Errors
/// [`TensorError::DTypeUnsupported`] for a dtype without a product; [`StorageError::NoData`](crate::StorageError::NoData) on meta.
pub(crate) fn mm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (&[m, k], &[_, n]) = (a.shape(), b.shape()) else {
        return Err(Error::Tensor(TensorError::ShapeIncompatible {
            op: "mm",
            expected: a.shape().to_vec(),
            found: b.shape().to_vec(),
        }));
    };
    let dtype = a.dtype();
    match dtype.kind() {
        Kind::Float => with_real!(dtype, T => {
            let (x, y) = (values::<T>(a)?, values::<T>(b)?);
            let mut c = vec![T::zero(); m * n];
            T::gemm(m, k, n, &x, &y, &mut c);
            from_values(c, &[m, n], dtype)
        }),
        Kind::Int => {
            let (x, y) = (ints(a)?, ints(b)?);
            let c = naive_mm(m, k, n, &x, &y, 0i64, |acc, p, q| {
                acc.wrapping_add(p.wrapping_mul(q))
            });
            let out = Tensor::zeros(&[m, n], dtype)?;
            out.copy_(&Tensor::from_vec(c, &[m, n])?)?;
            Ok(out)
        }
        Kind::Complex => {
            let complex = |t: &Tensor| -> Result<Vec<Complex64>> {
                Ok(t.scalars()?.into_iter().map(Scalar::to_complex).collect())
            };
            let (x, y) = (complex(a)?, complex(b)?);
            let c = naive_mm(m, k, n, &x, &y, Complex64::zero(), |acc, p, q| acc + p * q);
            let out = Tensor::zeros(&[m, n], dtype)?;
            out.copy_(&Tensor::from_vec(c, &[m, n])?)?;
            Ok(out)
        }
        _ => Err(Error::Tensor(TensorError::DTypeUnsupported {
            op: "mm",
            dtype,
        })),
    }
}

/// `t`'s integer elements as `i64`, row-major.
fn ints(t: &Tensor) -> Result<Vec<i64>> {
    Ok(t.scalars()?.into_iter().map(Scalar::to_i64).collect())
}

/// `c = a · b` for row-major `a` (`m`×`k`) and `b` (`k`×`n`), accumulating with `fma`.
fn naive_mm<T: Copy>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    b: &[T],
    zero: T,
    fma: impl Fn(T, T, T) -> T,
) -> Vec<T> {
    let mut c = vec![zero; m * n];
    for i in 0..m {
        for (j, out) in c[i * n..(i + 1) * n].iter_mut().enumerate() {
            *out = (0..k).fold(zero, |acc, l| fma(acc, a[i * k + l], b[l * n + j]));
        }
    }
    c
}

/// The gradient of a view's input: `g` added into zeros of `input_shape`
/// through the same view of them (`view` maps a layout to the view's), summing
/// where the view repeats elements (expand, overlapping unfold).
pub(crate) fn scatter_view(
    g: &Tensor,
    input: &Layout,
    view: &dyn Fn(&Layout) -> Result<Layout>,
) -> Result<Tensor> {
    // Replayed on the input's order of strides, as the view was made (a
    // `view(-1)` of a transposed input holds only there), made dense.
    let base = input.like_dense()?;
    let l = view(&base)?;
    if l.shape() != g.shape() {
        return Err(Error::Tensor(TensorError::ShapeIncompatible {
            op: "view backward",
            expected: l.shape().to_vec(),
            found: g.shape().to_vec(),
        }));
    }
    with_real!(g.dtype(), T => {
        let gv = values::<T>(g)?;
        let mut by_element = vec![T::zero(); base.numel()];
        add_at(&mut by_element, l.offsets(), &gv);
        // In the input's row-major order (already so for a contiguous input).
        let out: Vec<T> = if base.is_contiguous() {
            by_element
        } else {
            base.offsets().map(|o| by_element[o]).collect()
        };
        from_values(out, input.shape(), g.dtype())
    })
}

/// The gradient of `as_strided`'s input, which sat at `input` in its storage,
/// from the gradient `g` of the view at `output` in the same storage: each
/// storage element collects the gradients of the view's elements on it, and
/// shares them among the input's elements on it (PyTorch's rule for inputs
/// that overlap themselves).
pub(crate) fn scatter_strided(g: &Tensor, input: &Layout, output: &Layout) -> Result<Tensor> {
    let span = input.storage_elements()?.max(output.storage_elements()?);
    with_real!(g.dtype(), T => {
        let gv = values::<T>(g)?;
        let mut by_element = vec![T::zero(); span];
        add_at(&mut by_element, output.offsets(), &gv);
        let mut count = vec![0u32; span];
        for o in input.offsets() {
            count[o] += 1;
        }
        let out: Vec<T> = input
            .offsets()
            .map(|o| by_element[o] / T::of(f64::from(count[o])))
            .collect();
        from_values(out, input.shape(), g.dtype())
    })
}

/// `out[o] += v` for each offset and value, in order. Every offset is below
/// `out.len()`: views of a layout stay inside it, and `scatter_strided` sizes
/// its buffer to both layouts' reach.
fn add_at<T: Real>(out: &mut [T], offsets: impl Iterator<Item = usize>, v: &[T]) {
    for (o, &x) in offsets.zip(v) {
        out[o] += x;
    }
}
