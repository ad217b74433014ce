//! The view transforms: each a pure function from a [`Layout`] to the layout
//! of a view of the same elements (`view`, `narrow`, `slice`, `select`,
//! `transpose`, `permute`, `expand`, `squeeze`, `unsqueeze`, `diagonal`,
//! `unfold`), and the shapes of `flatten` and `unflatten`.

use super::shape::{infer_shape, numel_of, wrap_dim, wrap_index};
use super::{Dims, Layout};
use crate::error::TensorError;
use crate::{Error, Result};

/// `offset + index * stride`, checked.
fn advance(offset: usize, index: usize, stride: usize) -> Result<usize> {
    index
        .checked_mul(stride)
        .and_then(|d| offset.checked_add(d))
        .ok_or_else(|| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "storage offset",
                detail: format!("{offset} + {index} * {stride}"),
            })
        })
}

impl Layout {
    /// The same elements under a new shape, without copying (one size may be -1).
    ///
    /// # Errors
    /// [`TensorError::ShapeMismatch`] for a wrong element count, [`TensorError::ViewIncompatible`]
    /// when the strides cannot express the new shape (then `reshape` copies).
    pub fn view(&self, shape: &[isize]) -> Result<Layout> {
        let new_shape = infer_shape(shape, self.numel())?;
        match compute_stride(self.shape(), self.stride(), &new_shape) {
            Some(stride) => Ok(Layout {
                dims: Dims::new(&new_shape, &stride),
                offset: self.offset,
            }),
            None => Err(Error::Tensor(TensorError::ViewIncompatible {
                shape: new_shape,
                size: self.shape().to_vec(),
                stride: self.stride().to_vec(),
            })),
        }
    }

    /// `length` elements of `dim` starting at `start` (negative counts from the end).
    ///
    /// # Errors
    /// [`TensorError::ZeroDimTensor`] on a 0-dim layout, [`TensorError::DimOutOfRange`],
    /// [`TensorError::NarrowOutOfRange`] when the range leaves the dimension.
    pub fn narrow(&self, dim: isize, start: isize, length: usize) -> Result<Layout> {
        if self.shape().is_empty() {
            return Err(Error::Tensor(TensorError::ZeroDimTensor { op: "narrow" }));
        }
        let d = self.wrap_dim(dim)?;
        let size = self.shape()[d];
        let s = if start < 0 {
            start + size as isize
        } else {
            start
        };
        if s < 0 || s as usize > size || length > size - s as usize {
            return Err(Error::Tensor(TensorError::NarrowOutOfRange {
                start,
                length,
                size,
            }));
        }
        let mut l = self.clone();
        l.offset = advance(l.offset, s as usize, self.stride()[d])?;
        l.dims.shape_mut()[d] = length;
        Ok(l)
    }

    /// Python slicing `[start:stop:step]` along `dim`; `None` bounds are open, bounds clamp.
    ///
    /// # Errors
    /// [`TensorError::ZeroDimTensor`] on a 0-dim layout, [`TensorError::DimOutOfRange`],
    /// [`TensorError::ZeroArgument`] for a step of 0.
    pub fn slice(
        &self,
        dim: isize,
        start: Option<isize>,
        stop: Option<isize>,
        step: usize,
    ) -> Result<Layout> {
        if self.shape().is_empty() {
            return Err(Error::Tensor(TensorError::ZeroDimTensor { op: "slice" }));
        }
        let d = self.wrap_dim(dim)?;
        if step == 0 {
            return Err(Error::Tensor(TensorError::ZeroArgument {
                op: "slice",
                what: "step",
            }));
        }
        let size = self.shape()[d] as isize;
        let clamp = |v: isize| (if v < 0 { v + size } else { v }).clamp(0, size) as usize;
        let begin = start.map_or(0, clamp);
        let end = stop.map_or(size as usize, clamp).max(begin);
        let mut l = self.clone();
        l.offset = advance(l.offset, begin, self.stride()[d])?;
        let stride = self.stride()[d].saturating_mul(step);
        l.dims.set(d, (end - begin).div_ceil(step), stride);
        Ok(l)
    }

    /// Removes `dim`, keeping the elements at `index` (negative counts from the end).
    ///
    /// # Errors
    /// [`TensorError::ZeroDimTensor`] on 0-dim layouts, [`TensorError::DimOutOfRange`],
    /// [`TensorError::IndexOutOfRange`].
    pub fn select(&self, dim: isize, index: isize) -> Result<Layout> {
        if self.ndim() == 0 {
            return Err(Error::Tensor(TensorError::ZeroDimTensor { op: "select" }));
        }
        let d = self.wrap_dim(dim)?;
        let i = wrap_index(index, d, self.shape()[d])?;
        let mut l = self.clone();
        l.offset = advance(l.offset, i, self.stride()[d])?;
        l.dims.remove(d);
        Ok(l)
    }

    /// Swaps two dimensions.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`].
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Layout> {
        let mut l = self.clone();
        if self.ndim() == 0 {
            self.wrap_dim(dim0)?;
            self.wrap_dim(dim1)?;
            return Ok(l);
        }
        let (a, b) = (self.wrap_dim(dim0)?, self.wrap_dim(dim1)?);
        l.dims.swap(a, b);
        Ok(l)
    }

    /// Reorders the dimensions: dimension `i` of the result is `dims[i]` of this layout.
    ///
    /// # Errors
    /// [`TensorError::DimCountMismatch`], [`TensorError::DimOutOfRange`] or [`TensorError::RepeatedDim`]
    /// unless `dims` is a permutation of the dimensions.
    pub fn permute(&self, dims: &[isize]) -> Result<Layout> {
        let n = self.ndim();
        if dims.len() != n {
            return Err(Error::Tensor(TensorError::DimCountMismatch {
                op: "permute",
                what: "dims",
                ndim: n,
                given: dims.len(),
            }));
        }
        let mut seen = vec![false; n];
        let mut l = Layout {
            dims: Dims::zeros(n),
            offset: self.offset,
        };
        for (i, &d) in dims.iter().enumerate() {
            let d = wrap_dim(d, n)?;
            if std::mem::replace(&mut seen[d], true) {
                return Err(Error::Tensor(TensorError::RepeatedDim {
                    op: "permute",
                    dim: d,
                }));
            }
            l.dims.set(i, self.shape()[d], self.stride()[d]);
        }
        Ok(l)
    }

    /// Broadcasts to `sizes` (-1 keeps a size); expanded dimensions get stride 0.
    ///
    /// # Errors
    /// [`TensorError::ExpandIncompatible`] for fewer sizes than dimensions, a
    /// non-singleton size that would change, a -1 for a new dimension or a
    /// size below -1; [`TensorError::SizeOverflow`].
    pub fn expand(&self, sizes: &[isize]) -> Result<Layout> {
        let (n, old) = (sizes.len(), self.ndim());
        let incompatible = || {
            Error::Tensor(TensorError::ExpandIncompatible {
                sizes: sizes.to_vec(),
                shape: self.shape().to_vec(),
            })
        };
        if n < old {
            return Err(incompatible());
        }
        let mut dims = Dims::zeros(n);
        for i in (0..n).rev() {
            let existing = (i + old >= n).then(|| i + old - n);
            let (mut size, mut st) = match existing {
                Some(d) => (self.shape()[d], self.stride()[d]),
                None if i + 1 < n => (1, dims.shape()[i + 1].saturating_mul(dims.stride()[i + 1])),
                None => (1, 1),
            };
            let target = match sizes[i] {
                -1 if existing.is_some() => size,
                t if t < 0 => return Err(incompatible()),
                t => t as usize,
            };
            if size != target {
                if size != 1 {
                    return Err(incompatible());
                }
                size = target;
                st = 0;
            }
            dims.set(i, size, st);
        }
        numel_of(dims.shape())?;
        Ok(Layout {
            dims,
            offset: self.offset,
        })
    }

    /// Removes every dimension of size 1.
    pub fn squeeze(&self) -> Layout {
        let kept = self
            .shape()
            .iter()
            .zip(self.stride())
            .filter(|(&s, _)| s != 1);
        Layout {
            dims: Dims::from_pairs(kept.map(|(&s, &t)| (s, t))),
            offset: self.offset,
        }
    }

    /// Removes `dim` if its size is 1 (otherwise returns the same layout).
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`].
    pub fn squeeze_dim(&self, dim: isize) -> Result<Layout> {
        let mut l = self.clone();
        if self.ndim() == 0 {
            self.wrap_dim(dim)?;
            return Ok(l);
        }
        let d = self.wrap_dim(dim)?;
        if self.shape()[d] == 1 {
            l.dims.remove(d);
        }
        Ok(l)
    }

    /// Inserts a dimension of size 1 at `dim` (which may equal `ndim`).
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`].
    pub fn unsqueeze(&self, dim: isize) -> Result<Layout> {
        let d = wrap_dim(dim, self.ndim() + 1)?;
        let stride = if d >= self.ndim() {
            1
        } else {
            self.shape()[d].saturating_mul(self.stride()[d])
        };
        let mut l = self.clone();
        l.dims.insert(d, 1, stride);
        Ok(l)
    }

    /// The shape of `flatten(start_dim, end_dim)`.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::DimOrder`] when start comes after end.
    pub fn flatten_shape(&self, start_dim: isize, end_dim: isize) -> Result<Vec<isize>> {
        if self.ndim() == 0 {
            return Ok(vec![1]);
        }
        let (s, e) = (self.wrap_dim(start_dim)?, self.wrap_dim(end_dim)?);
        if s > e {
            return Err(Error::Tensor(TensorError::DimOrder {
                op: "flatten",
                start: s,
                end: e,
            }));
        }
        let mid: usize = self.shape()[s..=e].iter().product();
        let mut out: Vec<isize> = self.shape()[..s].iter().map(|&x| x as isize).collect();
        out.push(mid as isize);
        out.extend(self.shape()[e + 1..].iter().map(|&x| x as isize));
        Ok(out)
    }

    /// The shape of `unflatten(dim, sizes)` (one size may be -1).
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::ZeroDimTensor`], [`TensorError::ZeroArgument`]
    /// for no sizes, [`TensorError::ShapeMismatch`].
    pub fn unflatten_shape(&self, dim: isize, sizes: &[isize]) -> Result<Vec<isize>> {
        let d = self.wrap_dim(dim)?;
        if self.ndim() == 0 {
            return Err(Error::Tensor(TensorError::ZeroDimTensor {
                op: "unflatten",
            }));
        }
        if sizes.is_empty() {
            return Err(Error::Tensor(TensorError::ZeroArgument {
                op: "unflatten",
                what: "len(sizes)",
            }));
        }
        let inner = infer_shape(sizes, self.shape()[d])?;
        let mut out: Vec<isize> = self.shape()[..d].iter().map(|&x| x as isize).collect();
        out.extend(inner.iter().map(|&x| x as isize));
        out.extend(self.shape()[d + 1..].iter().map(|&x| x as isize));
        Ok(out)
    }

    /// The diagonal of dimensions `dim1` and `dim2`, shifted by `offset`, appended as the last dimension.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::RepeatedDim`] for identical dims.
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Result<Layout> {
        let (a, b) = (self.wrap_dim(dim1)?, self.wrap_dim(dim2)?);
        // Below 2 dimensions both wrap to dimension 0.
        if a == b {
            return Err(Error::Tensor(TensorError::RepeatedDim {
                op: "diagonal",
                dim: a,
            }));
        }
        let (sa, sb) = (self.shape()[a] as isize, self.shape()[b] as isize);
        let len = if offset >= 0 {
            sa.min(sb - offset)
        } else {
            (sa + offset).min(sb)
        }
        .max(0) as usize;
        let mut l = self.clone();
        if len > 0 {
            l.offset = if offset >= 0 {
                advance(l.offset, offset as usize, self.stride()[b])?
            } else {
                advance(l.offset, offset.unsigned_abs(), self.stride()[a])?
            };
        }
        let st = self.stride()[a].saturating_add(self.stride()[b]);
        let (hi, lo) = (a.max(b), a.min(b));
        for d in [hi, lo] {
            l.dims.remove(d);
        }
        l.dims.push(len, st);
        Ok(l)
    }

    /// Windows of `size` elements every `step` along `dim`, as a new last dimension.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::WindowTooLarge`], [`TensorError::ZeroArgument`] for a step of 0.
    pub fn unfold(&self, dim: isize, size: usize, step: usize) -> Result<Layout> {
        let d = self.wrap_dim(dim)?;
        let (dsize, dstride) = if self.ndim() == 0 {
            (1, 1)
        } else {
            (self.shape()[d], self.stride()[d])
        };
        if size > dsize {
            return Err(Error::Tensor(TensorError::WindowTooLarge {
                dim: d,
                size,
                max: dsize,
            }));
        }
        if step == 0 {
            return Err(Error::Tensor(TensorError::ZeroArgument {
                op: "unfold",
                what: "step",
            }));
        }
        let mut l = self.clone();
        if self.ndim() > 0 {
            l.dims
                .set(d, (dsize - size) / step + 1, dstride.saturating_mul(step));
        }
        l.dims.push(size, dstride);
        Ok(l)
    }
}

/// Why `shape` does not expand to `sizes`, in PyTorch's words (the message
/// of [`TensorError::ExpandIncompatible`]): the first rule that fails, checked
/// from the last dimension as [`Layout::expand`] does.
pub(crate) fn expand_problem(sizes: &[isize], shape: &[usize]) -> String {
    let (n, old) = (sizes.len(), shape.len());
    if n < old {
        return format!("expand: the number of sizes provided ({n}) must be greater or equal to the number of dimensions in the tensor ({old})");
    }
    for i in (0..n).rev() {
        let existing = (i + old >= n).then(|| shape[i + old - n]);
        match (sizes[i], existing) {
            (-1, None) => return format!("the expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension {i}"),
            (-1, Some(_)) => {}
            (t, _) if t < 0 => return format!("expand: invalid size {t} at dimension {i}"),
            (t, Some(s)) if s != 1 && s != t as usize => return format!("the expanded size of the tensor ({t}) must match the existing size ({s}) at non-singleton dimension {i}; target sizes {sizes:?}, tensor sizes {shape:?}"),
            _ => {}
        }
    }
    format!("cannot expand shape {shape:?} to {sizes:?}")
}

/// PyTorch's `computeStride`: strides for viewing `(old_shape, old_stride)` as `new_shape`
/// without copying, or `None` when impossible.
fn compute_stride(
    old_shape: &[usize],
    old_stride: &[usize],
    new_shape: &[usize],
) -> Option<Vec<usize>> {
    if old_shape.is_empty() {
        return Some(vec![1; new_shape.len()]);
    }
    let numel: usize = old_shape.iter().product();
    if numel == 0 && old_shape == new_shape {
        return Some(old_stride.to_vec());
    }
    let mut new_stride = vec![0usize; new_shape.len()];
    if numel == 0 {
        for d in (0..new_shape.len()).rev() {
            new_stride[d] = if d + 1 == new_shape.len() {
                1
            } else {
                new_shape[d + 1].max(1) * new_stride[d + 1]
            };
        }
        return Some(new_stride);
    }
    let mut view_d = new_shape.len() as isize - 1;
    let mut chunk_base_stride = *old_stride.last()?;
    let mut tensor_numel = 1usize;
    let mut view_numel = 1usize;
    for tensor_d in (0..old_shape.len()).rev() {
        tensor_numel *= old_shape[tensor_d];
        let boundary = tensor_d == 0
            || (old_shape[tensor_d - 1] != 1
                && old_stride[tensor_d - 1] != tensor_numel.saturating_mul(chunk_base_stride));
        if boundary {
            while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                new_stride[view_d as usize] = view_numel.saturating_mul(chunk_base_stride);
                view_numel *= new_shape[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = old_stride[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(new_stride)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TensorError;

    #[test]
    fn contiguous_and_views() {
        let base = Layout::contiguous(&[4, 6]).unwrap();
        assert_eq!(base.stride(), &[6, 1]);
        assert!(base.is_contiguous());
        let t = base.transpose(0, 1).unwrap();
        assert_eq!((t.shape(), t.stride()), (&[6, 4][..], &[1, 6][..]));
        assert!(!t.is_contiguous());
        assert!(matches!(
            t.view(&[24]),
            Err(Error::Tensor(TensorError::ViewIncompatible { .. }))
        ));
        assert_eq!(base.view(&[2, -1, 3]).unwrap().stride(), &[12, 3, 1]);
        assert!(matches!(
            base.view(&[5, -1]),
            Err(Error::Tensor(TensorError::ShapeMismatch { .. }))
        ));
        let row = base.select(0, 1).unwrap();
        assert_eq!((row.shape(), row.offset()), (&[6][..], 6));
        let col = base.select(1, -1).unwrap();
        assert_eq!((col.stride(), col.offset()), (&[6][..], 5));
        let s = base.slice(1, Some(1), None, 2).unwrap();
        assert_eq!(
            (s.shape(), s.stride(), s.offset()),
            (&[4, 3][..], &[6, 2][..], 1)
        );
        let n = base.narrow(0, -2, 2).unwrap();
        assert_eq!(n.offset(), 12);
        assert!(base.narrow(0, 3, 2).is_err());
    }

    #[test]
    fn view_through_size_one_and_split_dims() {
        // A narrowed (non-contiguous) tensor can still be viewed when chunks line up.
        let base = Layout::contiguous(&[4, 6])
            .unwrap()
            .narrow(1, 0, 3)
            .unwrap();
        assert_eq!(base.view(&[4, 3, 1]).unwrap().stride(), &[6, 1, 1]);
        assert_eq!(base.view(&[2, 2, 3]).unwrap().stride(), &[12, 6, 1]);
        assert!(base.view(&[12]).is_err());
    }

    #[test]
    fn expand_and_unsqueeze() {
        let v = Layout::contiguous(&[3]).unwrap().unsqueeze(1).unwrap();
        assert_eq!((v.shape(), v.stride()), (&[3, 1][..], &[1, 1][..]));
        let e = v.expand(&[2, -1, 4]).unwrap();
        assert_eq!((e.shape(), e.stride()), (&[2, 3, 4][..], &[0, 1, 0][..]));
        let e2 = v.expand(&[2, 3, 4]).unwrap();
        assert_eq!(e2.stride(), &[0, 1, 0]);
        assert!(v.expand(&[4, 1]).is_err());
        assert!(v.expand(&[-1, 3, 1]).is_err());
        let scalar = Layout::contiguous(&[]).unwrap();
        assert_eq!(scalar.expand(&[2]).unwrap().stride(), &[0]);
        assert_eq!(scalar.unsqueeze(0).unwrap().stride(), &[1]);
    }

    #[test]
    fn argument_errors_carry_their_numbers_in_pytorchs_words() {
        let base = Layout::contiguous(&[3, 1]).unwrap();
        let msg = |r: Result<Layout>| r.unwrap_err().to_string();
        assert_eq!(
            msg(base.expand(&[4, 2])),
            "the expanded size of the tensor (4) must match the existing size (3) at non-singleton dimension 0; target sizes [4, 2], tensor sizes [3, 1]"
        );
        assert_eq!(
            msg(base.expand(&[3])),
            "expand: the number of sizes provided (1) must be greater or equal to the number of dimensions in the tensor (2)"
        );
        assert_eq!(
            msg(base.expand(&[-1, 3, 1])),
            "the expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension 0"
        );
        assert!(matches!(
            base.narrow(0, 2, 2),
            Err(Error::Tensor(TensorError::NarrowOutOfRange {
                start: 2,
                length: 2,
                size: 3
            }))
        ));
        assert_eq!(
            msg(base.narrow(0, -4, 1)),
            "start (-4) + length (1) exceeds dimension size (3)"
        );
        assert!(matches!(
            base.unfold(0, 4, 1),
            Err(Error::Tensor(TensorError::WindowTooLarge {
                dim: 0,
                size: 4,
                max: 3
            }))
        ));
        assert!(matches!(
            base.diagonal(0, 1, -1),
            Err(Error::Tensor(TensorError::RepeatedDim {
                op: "diagonal",
                dim: 1
            }))
        ));
        assert!(matches!(
            base.flatten_shape(1, 0),
            Err(Error::Tensor(TensorError::DimOrder {
                op: "flatten",
                start: 1,
                end: 0
            }))
        ));
        assert!(matches!(
            base.view(&[-1, -1]),
            Err(Error::Tensor(TensorError::MultipleInferredDims { .. }))
        ));
        assert_eq!(msg(base.view(&[-3])), "invalid shape dimension -3");
        let scalar = Layout::contiguous(&[]).unwrap();
        assert!(matches!(
            scalar.select(0, 0),
            Err(Error::Tensor(TensorError::ZeroDimTensor { op: "select" }))
        ));
        // PyTorch: "narrow() cannot be applied to a 0-dim tensor." (and slice()).
        assert_eq!(
            msg(scalar.narrow(0, 0, 1)),
            "narrow() cannot be applied to a 0-dim tensor"
        );
        assert_eq!(
            msg(scalar.slice(0, Some(0), Some(1), 1)),
            "slice() cannot be applied to a 0-dim tensor"
        );
    }

    #[test]
    fn diagonal_and_unfold() {
        let base = Layout::contiguous(&[3, 4]).unwrap();
        let d = base.diagonal(1, 0, 1).unwrap();
        assert_eq!((d.shape(), d.stride(), d.offset()), (&[3][..], &[5][..], 1));
        let d = base.diagonal(-1, 0, 1).unwrap();
        assert_eq!((d.shape(), d.offset()), (&[2][..], 4));
        assert_eq!(base.diagonal(10, 0, 1).unwrap().shape(), &[0]);
        let u = Layout::contiguous(&[7]).unwrap().unfold(0, 2, 2).unwrap();
        assert_eq!((u.shape(), u.stride()), (&[3, 2][..], &[2, 1][..]));
    }
}
