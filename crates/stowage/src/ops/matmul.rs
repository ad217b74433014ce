//! Matrix products: [`Tensor::matmul`] (`a @ b`), which dispatches as ATen's
//! `matmul` to a dot product, a matrix-vector product, [`Tensor::mm`] or a
//! batched product, with PyTorch's checks, messages and backward nodes
//! (`DotBackward0`, `MvBackward0`, `MmBackward0`, `BmmBackward0`). None of
//! them promotes: both operands must have one dtype, and the product has it.

use super::{kernel, scalar_type_name};
use crate::autograd::{record, Backward};
use crate::error::TensorError;
use crate::layout::broadcast_shapes;
use crate::{Error, Result, Tensor};

/// `shape` as the signed sizes views take.
fn sizes(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&s| s as isize).collect()
}

/// [`TensorError::NotImplementedFor`] naming PyTorch's kernel `op` unless it takes
/// `a`'s dtype (the 8-bit floats only for `mm`); [`TensorError::DTypeUnsupported`]
/// for complex products that would record gradients (the backward formulas
/// take no conjugates).
fn check_product(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    let dtype = a.dtype();
    if !kernel::has_product(dtype, op == "addmm_impl_cpu_") {
        return Err(Error::Tensor(TensorError::NotImplementedFor {
            op,
            type_name: scalar_type_name(dtype),
        }));
    }
    if dtype.is_complex()
        && crate::autograd::is_grad_enabled()
        && (a.requires_grad() || b.requires_grad())
    {
        return Err(Error::Tensor(TensorError::DTypeUnsupported {
            op: "gradients of complex matrix products",
            dtype,
        }));
    }
    Ok(())
}

impl Tensor {
    /// The matrix product `self @ other` (`torch.matmul`), as ATen dispatches it:
    ///
    /// - two vectors: their dot product, a 0-dim tensor;
    /// - a matrix and a vector: a vector;
    /// - a vector and a matrix: the vector as a row, then that dimension removed;
    /// - two matrices: [`mm`](Self::mm);
    /// - otherwise, dimensions before the last two are batch dimensions,
    ///   broadcast against each other (a vector on either side takes part as
    ///   a row or a column, removed from the result).
    ///
    /// Both operands must have the same dtype, which the product keeps.
    ///
    /// # Errors
    /// [`TensorError::MatmulZeroDim`] for a 0-dim operand; [`TensorError::DotDTypes`],
    /// [`TensorError::DotSizes`], [`TensorError::MvSizes`], [`TensorError::MvDTypes`],
    /// [`TensorError::MatmulShapes`], [`TensorError::MatmulDTypes`], [`TensorError::BmmShapes`],
    /// [`TensorError::ScalarTypeMismatch`] or [`TensorError::SizeMismatch`] where the
    /// operands do not fit, each with PyTorch's message;
    /// [`TensorError::NotImplementedFor`] for dtypes without a product (bool,
    /// `uint16`/`uint32`/`uint64`, …); [`StorageError::NoData`](crate::StorageError::NoData) on meta.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let (d1, d2) = (self.dim(), other.dim());
        match (d1, d2) {
            (0, _) | (_, 0) => Err(Error::Tensor(TensorError::MatmulZeroDim {
                dim1: d1,
                dim2: d2,
            })),
            (1, 1) => self.dot(other),
            (2, 1) => self.mv(other),
            // ATen's `t1.unsqueeze(0).mm(t2).squeeze_(0)`.
            (1, 2) => self
                .unsqueeze(0)?
                .mm(other)?
                .named_view("SqueezeBackward4", |l| l.squeeze_dim(0)),
            (2, 2) => self.mm(other),
            // Fold the batch dimensions of `self` into its rows.
            (_, 1 | 2) => {
                let lead = &self.shape()[..d1 - 1];
                let rows: usize = lead.iter().product();
                let k = self.shape()[d1 - 1];
                let folded = self.reshape(&[rows as isize, k as isize])?;
                let (out, shape) = if d2 == 1 {
                    (folded.mv(other)?, lead.to_vec())
                } else {
                    (folded.mm(other)?, [lead, &other.shape()[1..]].concat())
                };
                out.unsafe_view(&sizes(&shape))
            }
            _ => self.batched_matmul(other),
        }
    }

    /// The product of two matrices of one dtype (`torch.mm`).
    ///
    /// # Errors
    /// [`TensorError::NotAMatrix`] unless both are 2-D; [`TensorError::MatmulShapes`] when
    /// the inner sizes differ; [`TensorError::MatmulDTypes`] for two dtypes;
    /// [`TensorError::NotImplementedFor`] for bool, `uint16`/`uint32`/`uint64`,
    /// `complex32`, quantized and bits dtypes; [`StorageError::NoData`](crate::StorageError::NoData) on meta.
    pub fn mm(&self, other: &Tensor) -> Result<Tensor> {
        let (&[m, k], &[k2, n]) = (self.shape(), other.shape()) else {
            let (arg, operand) = if self.dim() != 2 {
                ("self", self)
            } else {
                ("mat2", other)
            };
            return Err(Error::Tensor(TensorError::NotAMatrix {
                op: "mm",
                arg,
                ndim: operand.dim(),
            }));
        };
        if k != k2 {
            return Err(Error::Tensor(TensorError::MatmulShapes {
                op: "mm",
                mat1: [m, k],
                mat2: [k2, n],
            }));
        }
        if self.dtype != other.dtype {
            return Err(Error::Tensor(TensorError::MatmulDTypes {
                mat1: self.dtype,
                mat2: other.dtype,
            }));
        }
        check_product("addmm_impl_cpu_", self, other)?;
        let out = kernel::mm(self, other)?;
        Ok(record(out, "MmBackward0", &[self, other], || {
            Backward::Mm {
                a: self.detach(),
                b: other.detach(),
            }
        }))
    }

    /// The dot product of two vectors of one dtype and size, as a 0-dim tensor.
    pub(crate) fn dot(&self, other: &Tensor) -> Result<Tensor> {
        if self.dtype != other.dtype {
            return Err(Error::Tensor(TensorError::DotDTypes {
                a: self.dtype,
                b: other.dtype,
            }));
        }
        let (n, n2) = (self.numel(), other.numel());
        if n != n2 {
            return Err(Error::Tensor(TensorError::DotSizes { a: n, b: n2 }));
        }
        check_product("dot", self, other)?;
        let row = self.detach().reshape(&[1, n as isize])?;
        let column = other.detach().reshape(&[n as isize, 1])?;
        let out = kernel::mm(&row, &column)?.reshape(&[])?;
        Ok(record(out, "DotBackward0", &[self, other], || {
            Backward::Dot {
                a: self.detach(),
                b: other.detach(),
            }
        }))
    }

    /// The product of a matrix (`self`) and a vector of one dtype.
    pub(crate) fn mv(&self, vec: &Tensor) -> Result<Tensor> {
        let (&[m, k], n) = (self.shape(), vec.numel()) else {
            return Err(Error::Tensor(TensorError::NotAMatrix {
                op: "mv",
                arg: "self",
                ndim: self.dim(),
            }));
        };
        if k != n {
            return Err(Error::Tensor(TensorError::MvSizes {
                mat: [m, k],
                vec: n,
            }));
        }
        if self.dtype != vec.dtype {
            return Err(Error::Tensor(TensorError::MvDTypes {
                mat: self.dtype,
                vec: vec.dtype,
            }));
        }
        check_product("addmv_impl_cpu", self, vec)?;
        let column = vec.detach().reshape(&[n as isize, 1])?;
        let out = kernel::mm(&self.detach(), &column)?.reshape(&[m as isize])?;
        Ok(record(out, "MvBackward0", &[self, vec], || Backward::Mv {
            mat: self.detach(),
            vec: vec.detach(),
        }))
    }

    /// The products of two stacks of matrices (`[b, n, k]` and `[b, k, m]`).
    pub(crate) fn bmm(&self, other: &Tensor) -> Result<Tensor> {
        let (&[b, n, k], &[b2, k2, m]) = (self.shape(), other.shape()) else {
            return Err(Error::Tensor(TensorError::ShapeIncompatible {
                op: "bmm",
                expected: self.shape().to_vec(),
                found: other.shape().to_vec(),
            }));
        };
        if (b2, k2) != (b, k) {
            return Err(Error::Tensor(TensorError::BmmShapes {
                expected: [b, k],
                found: [b2, k2],
            }));
        }
        if self.dtype != other.dtype {
            return Err(Error::Tensor(TensorError::ScalarTypeMismatch {
                expected: self.dtype,
                found: other.dtype,
            }));
        }
        check_product("bmm", self, other)?;
        let out = Tensor::zeros_on(&[b, n, m], self.dtype, self.device())?;
        let (x, y) = (self.detach(), other.detach());
        for i in 0..b as isize {
            out.select(0, i)?
                .copy_(&kernel::mm(&x.select(0, i)?, &y.select(0, i)?)?)?;
        }
        Ok(record(out, "BmmBackward0", &[self, other], || {
            Backward::Bmm {
                a: self.detach(),
                b: other.detach(),
            }
        }))
    }

    /// `matmul` with a batch dimension on either side: both broadcast to
    /// common batch dimensions, multiplied as stacks of matrices, and viewed
    /// back, as ATen does.
    fn batched_matmul(&self, other: &Tensor) -> Result<Tensor> {
        let (d1, d2) = (self.dim(), other.dim());
        let a = if d1 == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let b = if d2 == 1 {
            other.unsqueeze(1)?
        } else {
            other.clone()
        };
        let (sa, sb) = (a.shape(), b.shape());
        let (n, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
        let (k2, m) = (sb[sb.len() - 2], sb[sb.len() - 1]);
        let batch = broadcast_shapes(&sa[..sa.len() - 2], &sb[..sb.len() - 2])?;
        let count: usize = batch.iter().product();
        let stack = |t: &Tensor, rows: usize, cols: usize| -> Result<Tensor> {
            let full = [&batch[..], &[rows, cols]].concat();
            t.expand(&sizes(&full))?
                .reshape(&[count as isize, rows as isize, cols as isize])
        };
        let out = stack(&a, n, k)?.bmm(&stack(&b, k2, m)?)?;
        let mut shape = batch.clone();
        if d1 > 1 {
            shape.push(n);
        }
        if d2 > 1 {
            shape.push(m);
        }
        out.unsafe_view(&sizes(&shape))
    }
}

#[cfg(test)]
mod tests {
    use crate::error::TensorError;
    use crate::{DType, Error, Tensor};

    fn ones(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::ones(shape, dtype).unwrap()
    }

    fn msg(a: &Tensor, b: &Tensor) -> String {
        a.matmul(b).unwrap_err().to_string()
    }

    /// `mm`'s refusals with PyTorch 2.15's messages, and its same-dtype products.
    #[test]
    fn matmul_of_matrices_follows_mm() {
        let f32s = DType::Float32;
        let a = ones(&[1000, 64], f32s);
        assert_eq!(
            msg(&a, &a),
            "mm: mat1 and mat2 shapes cannot be multiplied (1000x64 and 1000x64)"
        );
        let long = ones(&[2, 3], DType::Int64);
        let float = ones(&[3, 2], f32s);
        let want = "expected m1 and m2 to have the same dtype, but got: ";
        assert_eq!(msg(&long, &float), format!("{want}long int != float"));
        assert_eq!(msg(&float, &long), format!("{want}float != long int"));
        let double = float.to_dtype(DType::Float64).unwrap();
        assert_eq!(
            msg(&float, &double.t().unwrap()),
            format!("{want}float != double")
        );
        let half = float.to_dtype(DType::Float16).unwrap();
        let square = ones(&[2, 2], f32s);
        assert_eq!(msg(&half, &square), format!("{want}c10::Half != float"));
        let u8s = ones(&[2, 2], DType::UInt8);
        assert_eq!(msg(&square, &u8s), format!("{want}float != unsigned char"));
        // The shapes are checked before the dtypes, the dimensions first.
        assert!(matches!(
            float.matmul(&long),
            Err(Error::Tensor(TensorError::MatmulDTypes { .. }))
        ));
        assert!(matches!(
            long.matmul(&long),
            Err(Error::Tensor(TensorError::MatmulShapes { .. }))
        ));
        let cube = ones(&[2, 2, 3], f32s);
        assert_eq!(
            cube.mm(&float).unwrap_err().to_string(),
            "mm: self must be a matrix, got 3-D tensor"
        );
        let vector = ones(&[3], f32s);
        assert_eq!(
            long.mm(&vector).unwrap_err().to_string(),
            "mm: mat2 must be a matrix, got 1-D tensor"
        );
        // Same-dtype products: integers wrap in their dtype, as PyTorch's.
        let p = Tensor::full(&[2, 2], 200i64, DType::UInt8).unwrap();
        let q = Tensor::full(&[2, 2], 2i64, DType::UInt8).unwrap();
        let pq = p.matmul(&q).unwrap();
        assert_eq!(pq.dtype(), DType::UInt8);
        assert_eq!(pq.to_vec::<u8>().unwrap(), vec![32; 4]);
        let ll = long.matmul(&long.t().unwrap()).unwrap();
        assert_eq!(
            (ll.dtype(), ll.to_vec::<i64>().unwrap()),
            (DType::Int64, vec![3; 4])
        );
        let hh = half.t().unwrap().matmul(&half).unwrap();
        assert_eq!(hh.dtype(), DType::Float16);
        assert_eq!(hh.to_vec::<f32>().unwrap(), vec![3.0; 4]);
        let e4 = ones(&[2, 2], DType::Float8E4M3Fn).matmul(&ones(&[2, 2], DType::Float8E4M3Fn));
        assert_eq!(e4.unwrap().to_vec::<f32>().unwrap(), vec![2.0; 4]);
        let mut c = ones(&[2, 2], DType::Complex64);
        let cc = c.matmul(&c).unwrap();
        assert_eq!(cc.dtype(), DType::Complex64);
        assert_eq!(cc.to_vec::<f64>().unwrap(), vec![2.0; 4]);
        // Complex gradients would need conjugates: refused, not wrong.
        c.requires_grad_(true).unwrap();
        assert!(matches!(
            c.matmul(&c),
            Err(Error::Tensor(TensorError::DTypeUnsupported {
                dtype: DType::Complex64,
                ..
            }))
        ));
        let b = ones(&[2, 2], DType::Bool);
        assert_eq!(
            msg(&b, &b),
            "\"addmm_impl_cpu_\" not implemented for 'Bool'"
        );
        let u16s = ones(&[2, 2], DType::UInt16);
        assert_eq!(
            msg(&u16s, &u16s),
            "\"addmm_impl_cpu_\" not implemented for 'UInt16'"
        );
        let empty = ones(&[2, 0], f32s).matmul(&ones(&[0, 3], f32s)).unwrap();
        assert_eq!(empty.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    }

    /// Vectors and batches: shapes, values, backward nodes and PyTorch 2.15's
    /// messages for each path of ATen's `matmul`.
    #[test]
    fn matmul_dispatches_as_aten() {
        let f = DType::Float32;
        let range = |shape: &[usize]| {
            let n: usize = shape.iter().product();
            let sizes: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
            Tensor::arange(0.0, n as f64, 1.0, f)
                .unwrap()
                .view(&sizes)
                .unwrap()
        };
        let case = |a: &[usize], b: &[usize]| {
            let (mut x, y) = (range(a), range(b));
            x.requires_grad_(true).unwrap();
            let r = x.matmul(&y).unwrap();
            (r.shape().to_vec(), r.grad_fn_name().unwrap(), r.detach())
        };
        let (shape, node, dot) = case(&[3], &[3]);
        assert_eq!((shape, node), (vec![], "DotBackward0"));
        assert_eq!(dot.item().unwrap().to_f64(), 5.0);
        let (shape, node, mv) = case(&[2, 3], &[3]);
        assert_eq!((shape, node), (vec![2], "MvBackward0"));
        assert_eq!(mv.to_vec::<f32>().unwrap(), vec![5.0, 14.0]);
        let (shape, node, vm) = case(&[3], &[3, 2]);
        assert_eq!((shape, node), (vec![2], "SqueezeBackward4"));
        assert_eq!(vm.to_vec::<f32>().unwrap(), vec![10.0, 13.0]);
        for (a, b, want) in [
            (&[4, 2, 3][..], &[3][..], &[4, 2][..]),
            (&[4, 2, 3], &[3, 5], &[4, 2, 5]),
            (&[4, 2, 3], &[4, 3, 5], &[4, 2, 5]),
            (&[2, 1, 2, 3], &[4, 3, 5], &[2, 4, 2, 5]),
        ] {
            let (shape, node, _) = case(a, b);
            assert_eq!(
                (&shape[..], node),
                (want, "UnsafeViewBackward0"),
                "{a:?} @ {b:?}"
            );
        }
        // A batch against a vector and against a broadcast stack: each matrix
        // of the batch multiplied as a matrix.
        let (_, _, batch) = case(&[2, 2, 3], &[1, 3, 2]);
        let first = range(&[2, 3]).matmul(&range(&[3, 2])).unwrap();
        let second = range(&[2, 2, 3])
            .select(0, 1)
            .unwrap()
            .matmul(&range(&[3, 2]))
            .unwrap();
        let want = [
            first.to_vec::<f32>().unwrap(),
            second.to_vec::<f32>().unwrap(),
        ]
        .concat();
        assert_eq!(batch.to_vec::<f32>().unwrap(), want);
        let (shape, _, _) = case(&[3], &[4, 3, 5]);
        assert_eq!(shape, vec![4, 5]);
        // PyTorch's messages.
        let m = |a: &[usize], b: &[usize]| msg(&range(a), &range(b));
        assert_eq!(
            m(&[3], &[4]),
            "inconsistent tensor size, expected tensor [3] and src [4] to have the same \
             number of elements, but got 3 and 4 elements respectively"
        );
        assert_eq!(
            m(&[2, 3], &[4]),
            "size mismatch, got input (2), mat (2x3), vec (4)"
        );
        assert_eq!(
            m(&[3], &[4, 2]),
            "mm: mat1 and mat2 shapes cannot be multiplied (1x3 and 4x2)"
        );
        assert_eq!(
            m(&[2, 2, 3], &[2, 4, 2]),
            "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [2, 4]."
        );
        assert_eq!(
            m(&[4, 2, 3], &[4]),
            "size mismatch, got input (8), mat (8x3), vec (4)"
        );
        assert_eq!(
            m(&[3], &[4, 4, 2]),
            "Expected size for first two dimensions of batch2 tensor to be: [4, 3] but got: [4, 4]."
        );
        assert_eq!(
            m(&[4, 2, 3], &[4, 2]),
            "mm: mat1 and mat2 shapes cannot be multiplied (8x3 and 4x2)"
        );
        assert_eq!(
            m(&[2, 2, 3], &[3, 3, 2]),
            "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"
        );
        let scalar = Tensor::scalar(1.0f32).unwrap();
        assert_eq!(
            msg(&scalar, &range(&[3])),
            "both arguments to matmul need to be at least 1D, but they are 0D and 1D"
        );
        let d = |shape: &[usize], dtype| range(shape).to_dtype(dtype).unwrap();
        assert_eq!(
            msg(&d(&[3], f), &d(&[3], DType::Float64)),
            "dot : expected both vectors to have same dtype, but found Float and Double"
        );
        assert_eq!(
            msg(&d(&[2, 3], DType::Float64), &d(&[3], f)),
            "addmv input tensors must have the same dtype, but got Float, Double, and Float"
        );
        assert_eq!(
            msg(&d(&[2, 2, 3], f), &d(&[2, 3, 2], DType::Float64)),
            "expected scalar type Float but found Double"
        );
        let b = DType::Bool;
        let bools = |shape: &[usize]| Tensor::ones(shape, b).unwrap();
        assert_eq!(
            msg(&bools(&[3]), &bools(&[3])),
            "\"dot\" not implemented for 'Bool'"
        );
        assert_eq!(
            msg(&bools(&[2, 3]), &bools(&[3])),
            "\"addmv_impl_cpu\" not implemented for 'Bool'"
        );
        assert_eq!(
            msg(&bools(&[2, 2, 3]), &bools(&[2, 3, 2])),
            "\"bmm\" not implemented for 'Bool'"
        );
        // Integers keep their dtype; empty batches and inner sizes work.
        let ints = d(&[2, 3], DType::Int8)
            .matmul(&d(&[3], DType::Int8))
            .unwrap();
        assert_eq!(
            (ints.dtype(), ints.to_vec::<i8>().unwrap()),
            (DType::Int8, vec![5, 14])
        );
        let empty = Tensor::ones(&[0, 2, 3], f)
            .unwrap()
            .matmul(&range(&[3, 2]))
            .unwrap();
        assert_eq!(empty.shape(), &[0, 2, 2]);
        let inner = Tensor::ones(&[2, 0], f)
            .unwrap()
            .matmul(&Tensor::ones(&[0], f).unwrap())
            .unwrap();
        assert_eq!(inner.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    }
}
