//! The backward formula of every recorded operation.
//!
//! Each variant holds what its formula needs (saved inputs or outputs are
//! detached handles: they share the data and carry no history). `apply` maps
//! the gradient of the output to the gradients of the inputs, in the order the
//! operation recorded them; it runs under `no_grad`, so the formulas are
//! written with the ordinary tensor operations and record nothing.

use std::sync::Arc;

use crate::layout::Layout;
use crate::ops::kernel::{self, BinOp};
use crate::{DType, Result, Tensor};

/// A view's layout as a function of its input's layout (`|l| l.narrow(0, 1, 2)`).
/// Applied to zeros of the input's shape, it says where each element of the
/// view's gradient goes.
pub(crate) type ViewFn = Arc<dyn Fn(&Layout) -> Result<Layout> + Send + Sync>;

pub(crate) enum Backward {
    /// `a + b`: the gradient, reduced to each operand's shape and dtype.
    Add { operands: [(Vec<usize>, DType); 2] },
    /// `a - b`.
    Sub { operands: [(Vec<usize>, DType); 2] },
    /// `a * b`.
    Mul { a: Tensor, b: Tensor },
    /// `a *= b` in place where `b` does not require grad: only `a`'s
    /// gradient, which needs `b` alone (`a`'s old values are gone).
    MulBy { b: Tensor },
    /// `a / b`.
    Div { a: Tensor, b: Tensor },
    /// `-x`.
    Neg,
    /// `x * s` for a number `s`.
    Scale(f64),
    /// `x ** exponent`.
    Pow { x: Tensor, exponent: f64 },
    /// `exp(x)`, saving the output.
    Exp { out: Tensor },
    /// `log(x)`.
    Log { x: Tensor },
    /// `relu(x)`.
    Relu { x: Tensor },
    /// A sum (or, with `scale` = 1/count, a mean) of an input of `shape` over
    /// `dims` (sorted).
    Sum {
        shape: Vec<usize>,
        dims: Vec<usize>,
        keepdim: bool,
        scale: f64,
    },
    /// `a @ b` of 2-D tensors.
    Mm { a: Tensor, b: Tensor },
    /// The dot product of two vectors.
    Dot { a: Tensor, b: Tensor },
    /// A matrix times a vector.
    Mv { mat: Tensor, vec: Tensor },
    /// Stacks of matrices multiplied (`[b, n, k]` by `[b, k, m]`).
    Bmm { a: Tensor, b: Tensor },
    /// A conversion from `from`.
    Cast { from: DType },
    /// A copy of the same shape (`contiguous`, `clone`, `to(device)`).
    Identity,
    /// `fill_`/`zero_` in place: the old values get no gradient.
    Fill,
    /// `self.copy_(src)` in place: the old values get no gradient, `src`
    /// (of this shape and dtype) the gradient reduced to it.
    Copy { src: (Vec<usize>, DType) },
    /// A view of an input at `input` (its layout, whose strides the layout
    /// function is replayed on), described by a layout function.
    View { input: Layout, view: ViewFn },
    /// A view made under `no_grad` whose base was written in place since:
    /// using it is refused, when backward reaches it, as PyTorch refuses it.
    NoGradView,
    /// `as_strided` of an input at `input` in the storage, to `output`.
    AsStrided { input: Layout, output: Layout },
    /// An in-place operation (`inner`) through a view of
    /// a base of `shape`: the base's gradient goes on as it is, except the
    /// view's region (`view` of the base's layout), which goes through
    /// `inner`'s formula; the operand gets `inner`'s second gradient.
    CopySlices {
        base: Layout,
        view: ViewFn,
        inner: Box<Backward>,
    },
}

impl Backward {
    /// Views pass a leaf's identity on: in-place writes to them are refused as
    /// writes to the leaf.
    pub(crate) fn is_view(&self) -> bool {
        matches!(
            self,
            Backward::View { .. } | Backward::AsStrided { .. } | Backward::NoGradView
        )
    }

    /// The tensors the formula reads for the inputs `needs` says require
    /// grad, whose versions the node keeps (as PyTorch saves `self` for
    /// `self * other` only when `other` requires grad).
    pub(crate) fn saved(&self, needs: &[bool]) -> Vec<&Tensor> {
        let need = |i: usize| needs.get(i).copied().unwrap_or(false);
        // The first operand's gradient reads the second, and the other way.
        let crossed = |a, b| {
            let mut out = Vec::new();
            if need(0) {
                out.push(b);
            }
            if need(1) {
                out.push(a);
            }
            out
        };
        match self {
            Backward::Mul { a, b }
            | Backward::Mm { a, b }
            | Backward::Dot { a, b }
            | Backward::Bmm { a, b } => crossed(a, b),
            // `g / b`, and `-g · a / b²`.
            Backward::Div { a, b } if need(1) => vec![a, b],
            Backward::Div { b, .. } if need(0) => vec![b],
            Backward::Div { .. } => Vec::new(),
            Backward::Mv { mat, vec } => crossed(mat, vec),
            Backward::MulBy { b } => vec![b],
            Backward::Pow { x, .. } | Backward::Log { x } | Backward::Relu { x } => vec![x],
            Backward::Exp { out } => vec![out],
            Backward::CopySlices { inner, .. } => inner.saved(&[true, need(1)]),
            Backward::Add { .. }
            | Backward::Sub { .. }
            | Backward::Neg
            | Backward::Scale(_)
            | Backward::Sum { .. }
            | Backward::Cast { .. }
            | Backward::Identity
            | Backward::Fill
            | Backward::Copy { .. }
            | Backward::View { .. }
            | Backward::NoGradView
            | Backward::AsStrided { .. } => Vec::new(),
        }
    }

    /// The gradients of the inputs from `g`, the gradient of the output;
    /// `None` where `needs` says an input does not require grad.
    pub(crate) fn apply(&self, g: &Tensor, needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let need = |i: usize| needs.get(i).copied().unwrap_or(false);
        let one = |t: Tensor| Ok(vec![Some(t)]);
        match self {
            Backward::Add { operands: [a, b] } => two(need, || reduced(g, a), || reduced(g, b)),
            Backward::Sub { operands: [a, b] } => {
                two(need, || reduced(g, a), || reduced(&g.neg()?, b))
            }
            Backward::Mul { a, b } => two(
                need,
                || g.mul(b)?.to_dtype(a.dtype())?.sum_to_size(a.shape()),
                || g.mul(a)?.to_dtype(b.dtype())?.sum_to_size(b.shape()),
            ),
            Backward::Div { a, b } => two(
                need,
                || g.div(b)?.to_dtype(a.dtype())?.sum_to_size(a.shape()),
                || {
                    // -g · a / b²
                    g.mul(a)?
                        .div(&b.mul(b)?)?
                        .neg()?
                        .to_dtype(b.dtype())?
                        .sum_to_size(b.shape())
                },
            ),
            Backward::MulBy { b } => one(g.mul(b)?.to_dtype(g.dtype())?),
            Backward::Neg => one(g.neg()?),
            Backward::Scale(s) => one(g.mul(*s)?),
            // d/dx x⁰ is 0 everywhere, also at x = 0 where the general
            // formula would give 0 · ∞.
            Backward::Pow { exponent, .. } if *exponent == 0.0 => one(Tensor::zeros_like(g)?),
            Backward::Pow { x, exponent } => one(g.mul(&x.pow(exponent - 1.0)?.mul(*exponent)?)?),
            Backward::Exp { out } => one(g.mul(out)?),
            Backward::Log { x } => one(g.div(x)?),
            Backward::Relu { x } => one(kernel::binary(BinOp::ReluGrad, g, x, g.dtype())?),
            Backward::Sum {
                shape,
                dims,
                keepdim,
                scale,
            } => {
                let mut g = g.clone();
                if !keepdim {
                    for &d in dims {
                        g = g.unsqueeze(d as isize)?;
                    }
                }
                let sizes: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
                let spread = g.expand(&sizes)?.contiguous()?;
                one(if *scale == 1.0 {
                    spread
                } else {
                    spread.mul(*scale)?
                })
            }
            Backward::Mm { a, b } => two(need, || g.mm(&b.t()?), || a.t()?.mm(g)),
            Backward::Dot { a, b } => two(need, || b.mul(g), || a.mul(g)),
            Backward::Mv { mat, vec } => two(
                need,
                || g.unsqueeze(1)?.mm(&vec.unsqueeze(0)?),
                || mat.t()?.mv(g),
            ),
            Backward::Bmm { a, b } => two(
                need,
                || g.bmm(&b.transpose(1, 2)?),
                || a.transpose(1, 2)?.bmm(g),
            ),
            Backward::Cast { from } => one(g.to_dtype(*from)?),
            Backward::Identity => one(g.clone()),
            Backward::Fill => one(Tensor::zeros_like(g)?),
            Backward::Copy { src } => two(need, || Tensor::zeros_like(g), || reduced(g, src)),
            Backward::View { input, view } => one(kernel::scatter_view(g, input, &**view)?),
            Backward::NoGradView => Err(crate::Error::Tensor(
                crate::error::TensorError::NoGradViewOfModifiedBase,
            )),
            Backward::AsStrided { input, output } => {
                one(kernel::scatter_strided(g, input, output)?)
            }
            Backward::CopySlices {
                base, view, inner, ..
            } => {
                // A fresh copy of the base's gradient, laid out as the base
                // (so the view function replays as it ran), whose view
                // region is replaced by what `inner` makes of it.
                let layout = base.like_dense()?;
                let zeros = Tensor::zeros(&[layout.numel()], g.dtype())?;
                let result = Tensor { layout, ..zeros };
                result.copy_(g)?;
                let region = Tensor {
                    layout: view(&result.layout)?,
                    ..result.detach()
                };
                // A copy: the formulas may hand their input back (an `add_`'s
                // or `copy_`'s operand gets the gradient as it is), and the
                // region is overwritten below.
                let mut grads = inner
                    .apply(&region.deep_clone()?, &[true, need(1)])?
                    .into_iter();
                match grads.next().flatten() {
                    Some(g0) => region.copy_(&g0)?,
                    None => region.zero_()?,
                };
                Ok(vec![Some(result.contiguous()?), grads.next().flatten()])
            }
        }
    }
}

/// `g` summed down to an operand's shape and converted to its dtype.
fn reduced(g: &Tensor, (shape, dtype): &(Vec<usize>, DType)) -> Result<Tensor> {
    g.sum_to_size(shape)?.to_dtype(*dtype)
}

/// The gradients of a two-input operation, computing only those needed.
fn two(
    need: impl Fn(usize) -> bool,
    first: impl FnOnce() -> Result<Tensor>,
    second: impl FnOnce() -> Result<Tensor>,
) -> Result<Vec<Option<Tensor>>> {
    Ok(vec![
        if need(0) { Some(first()?) } else { None },
        if need(1) { Some(second()?) } else { None },
    ])
}
