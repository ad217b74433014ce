//! [`Operand`]: the right-hand side of arithmetic, a tensor or a number.

use crate::element::Scalar;
use crate::Tensor;

/// The right-hand side of an arithmetic operation: a tensor or a scalar.
#[derive(Clone, Copy)]
pub enum Operand<'a> {
    /// A tensor, broadcast to the left-hand side's shape.
    Tensor(&'a Tensor),
    /// A number.
    Scalar(Scalar),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}
impl From<Scalar> for Operand<'_> {
    fn from(s: Scalar) -> Self {
        Operand::Scalar(s)
    }
}
impl From<f64> for Operand<'_> {
    fn from(v: f64) -> Self {
        Operand::Scalar(Scalar::Float(v))
    }
}
impl From<i64> for Operand<'_> {
    fn from(v: i64) -> Self {
        Operand::Scalar(Scalar::Int(v))
    }
}
