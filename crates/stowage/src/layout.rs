//! Layouts: shape, stride and storage offset (in elements), and every view
//! computation as a pure function from a layout to a new one.
//!
//! All arithmetic on untrusted numbers is checked here, once: a [`Layout`]
//! always has a representable element count, and [`Layout::check_fits`]
//! checks it against a storage in 128-bit arithmetic. Contiguity is computed
//! when asked, never cached.

use crate::{Error, Result};

/// Shape, stride and storage offset of a tensor. Strides and offset count elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Vec<usize>,
    stride: Vec<usize>,
    offset: usize,
}

/// `offset + index * stride`, checked.
fn advance(offset: usize, index: usize, stride: usize) -> Result<usize> {
    index
        .checked_mul(stride)
        .and_then(|d| offset.checked_add(d))
        .ok_or_else(|| Error::SizeOverflow {
            what: "storage offset",
            detail: format!("{offset} + {index} * {stride}"),
        })
}

/// Wraps a possibly negative dimension into `0..ndim` (0-dim tensors accept -1 and 0, as PyTorch).
///
/// # Errors
/// [`Error::DimOutOfRange`].
pub fn wrap_dim(dim: isize, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as isize;
    let d = if dim < 0 { dim + n } else { dim };
    if d < 0 || d >= n {
        return Err(Error::DimOutOfRange { dim, ndim });
    }
    Ok(d as usize)
}

/// Wraps a possibly negative index into `0..size`.
///
/// # Errors
/// [`Error::IndexOutOfRange`].
pub fn wrap_index(index: isize, dim: usize, size: usize) -> Result<usize> {
    let i = if index < 0 {
        index.checked_add_unsigned(size).unwrap_or(-1)
    } else {
        index
    };
    if i < 0 || i as usize >= size {
        return Err(Error::IndexOutOfRange { index, dim, size });
    }
    Ok(i as usize)
}

/// The element count of `shape`, checked.
///
/// # Errors
/// [`Error::SizeOverflow`].
pub fn numel_of(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| Error::SizeOverflow {
            what: "element count",
            detail: format!("shape {shape:?}"),
        })
}

/// Row-major strides for `shape` (PyTorch gives size-0 and size-1 dims the same rule:
/// `stride[i] = stride[i+1] * max(shape[i+1], 1)`).
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut stride = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        stride[i] = stride[i + 1].saturating_mul(shape[i + 1].max(1));
    }
    stride
}

/// Resolves one `-1` in `shape` against `numel` elements.
///
/// # Errors
/// [`Error::ShapeMismatch`] when the sizes cannot hold exactly `numel` elements,
/// [`Error::NegativeSize`] for sizes below -1, [`Error::MultipleInferredDims`]
/// for a second -1.
pub fn infer_shape(shape: &[isize], numel: usize) -> Result<Vec<usize>> {
    let mismatch = || Error::ShapeMismatch {
        shape: shape.to_vec(),
        numel,
    };
    let mut infer = None;
    let mut known: usize = 1;
    for (i, &s) in shape.iter().enumerate() {
        match s {
            -1 if infer.is_none() => infer = Some(i),
            -1 => {
                return Err(Error::MultipleInferredDims {
                    shape: shape.to_vec(),
                })
            }
            s if s < 0 => return Err(Error::NegativeSize { size: s as i64 }),
            s => known = known.checked_mul(s as usize).ok_or_else(mismatch)?,
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&s| s.max(0) as usize).collect();
    match infer {
        Some(i) => {
            if known == 0 || numel % known != 0 {
                return Err(mismatch());
            }
            out[i] = numel / known;
        }
        None if known != numel => return Err(mismatch()),
        None => {}
    }
    Ok(out)
}

impl Layout {
    /// A row-major layout of `shape` at offset 0.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`] when the element count does not fit in `usize`.
    pub fn contiguous(shape: &[usize]) -> Result<Layout> {
        numel_of(shape)?;
        Ok(Layout {
            shape: shape.to_vec(),
            stride: contiguous_strides(shape),
            offset: 0,
        })
    }

    /// A layout from its parts.
    ///
    /// # Errors
    /// [`Error::StrideLengthMismatch`] when shape and stride lengths differ,
    /// [`Error::SizeOverflow`] when the element count or reach overflows.
    pub fn new(shape: &[usize], stride: &[usize], offset: usize) -> Result<Layout> {
        if shape.len() != stride.len() {
            return Err(Error::StrideLengthMismatch {
                shape_len: shape.len(),
                stride_len: stride.len(),
            });
        }
        numel_of(shape)?;
        let l = Layout {
            shape: shape.to_vec(),
            stride: stride.to_vec(),
            offset,
        };
        l.reach()?;
        Ok(l)
    }

    /// Sizes of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Strides in elements.
    pub fn stride(&self) -> &[usize] {
        &self.stride
    }
    /// Storage offset in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// Number of elements (fits in `usize`, checked at construction).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// PyTorch's contiguity: row-major strides, ignoring dimensions of size 1;
    /// a tensor without elements is contiguous.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1usize;
        for (&size, &stride) in self.shape.iter().zip(&self.stride).rev() {
            if size != 1 {
                if stride != expected {
                    return false;
                }
                expected *= size;
            }
        }
        true
    }

    /// Storage elements the layout reaches: 0 without elements, else
    /// `offset + Σ (size-1)·stride + 1` (PyTorch's `computeStorageNbytes` in elements).
    fn reach(&self) -> Result<u128> {
        if self.numel() == 0 {
            return Ok(0);
        }
        let overflow = || Error::SizeOverflow {
            what: "layout reach",
            detail: format!("{self:?}"),
        };
        let mut max = self.offset as u128 + 1;
        for (&size, &stride) in self.shape.iter().zip(&self.stride) {
            let span = (size as u128 - 1)
                .checked_mul(stride as u128)
                .ok_or_else(overflow)?;
            max = max.checked_add(span).ok_or_else(overflow)?;
        }
        Ok(max)
    }

    /// The index of the last storage element reached plus one, as `usize`.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`] when it exceeds `usize`.
    pub fn storage_elements(&self) -> Result<usize> {
        let r = self.reach()?;
        usize::try_from(r).map_err(|_| Error::SizeOverflow {
            what: "layout reach",
            detail: format!("{self:?}"),
        })
    }

    /// Checks that every element lies within a storage of `nbytes` bytes holding `element_size`-byte elements.
    ///
    /// # Errors
    /// [`Error::OutOfStorage`] naming the bytes needed and held.
    pub fn check_fits(&self, element_size: usize, nbytes: usize) -> Result<()> {
        let needed = self
            .reach()?
            .checked_mul(element_size as u128)
            .ok_or_else(|| Error::SizeOverflow {
                what: "layout bytes",
                detail: format!("{self:?} with {element_size}-byte elements"),
            })?;
        if needed > nbytes as u128 {
            return Err(Error::OutOfStorage {
                needed,
                nbytes,
                shape: self.shape.clone(),
                stride: self.stride.clone(),
                offset: self.offset,
                element_size,
            });
        }
        Ok(())
    }

    /// The same elements under a new shape, without copying (one size may be -1).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for a wrong element count, [`Error::ViewIncompatible`]
    /// when the strides cannot express the new shape (then `reshape` copies).
    pub fn view(&self, shape: &[isize]) -> Result<Layout> {
        let new_shape = infer_shape(shape, self.numel())?;
        match compute_stride(&self.shape, &self.stride, &new_shape) {
            Some(stride) => Ok(Layout {
                shape: new_shape,
                stride,
                offset: self.offset,
            }),
            None => Err(Error::ViewIncompatible {
                shape: new_shape,
                size: self.shape.clone(),
                stride: self.stride.clone(),
            }),
        }
    }

    /// `length` elements of `dim` starting at `start` (negative counts from the end).
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::NarrowOutOfRange`] when the range leaves the dimension.
    pub fn narrow(&self, dim: isize, start: isize, length: usize) -> Result<Layout> {
        let d = self.wrap_dim(dim)?;
        let size = self.shape[d];
        let s = if start < 0 {
            start + size as isize
        } else {
            start
        };
        if s < 0 || s as usize > size || length > size - s as usize {
            return Err(Error::NarrowOutOfRange {
                start,
                length,
                size,
            });
        }
        let mut l = self.clone();
        l.offset = advance(l.offset, s as usize, self.stride[d])?;
        l.shape[d] = length;
        Ok(l)
    }

    /// Python slicing `[start:stop:step]` along `dim`; `None` bounds are open, bounds clamp.
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::ZeroArgument`] for a step of 0.
    pub fn slice(
        &self,
        dim: isize,
        start: Option<isize>,
        stop: Option<isize>,
        step: usize,
    ) -> Result<Layout> {
        let d = self.wrap_dim(dim)?;
        if step == 0 {
            return Err(Error::ZeroArgument {
                op: "slice",
                what: "step",
            });
        }
        let size = self.shape[d] as isize;
        let clamp = |v: isize| (if v < 0 { v + size } else { v }).clamp(0, size) as usize;
        let begin = start.map_or(0, clamp);
        let end = stop.map_or(size as usize, clamp).max(begin);
        let mut l = self.clone();
        l.offset = advance(l.offset, begin, self.stride[d])?;
        l.shape[d] = (end - begin).div_ceil(step);
        l.stride[d] = self.stride[d].saturating_mul(step);
        Ok(l)
    }

    /// Removes `dim`, keeping the elements at `index` (negative counts from the end).
    ///
    /// # Errors
    /// [`Error::ZeroDimTensor`] on 0-dim layouts, [`Error::DimOutOfRange`],
    /// [`Error::IndexOutOfRange`].
    pub fn select(&self, dim: isize, index: isize) -> Result<Layout> {
        if self.ndim() == 0 {
            return Err(Error::ZeroDimTensor { op: "select" });
        }
        let d = self.wrap_dim(dim)?;
        let i = wrap_index(index, d, self.shape[d])?;
        let mut l = self.clone();
        l.offset = advance(l.offset, i, self.stride[d])?;
        l.shape.remove(d);
        l.stride.remove(d);
        Ok(l)
    }

    /// Swaps two dimensions.
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`].
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Layout> {
        let mut l = self.clone();
        if self.ndim() == 0 {
            self.wrap_dim(dim0)?;
            self.wrap_dim(dim1)?;
            return Ok(l);
        }
        let (a, b) = (self.wrap_dim(dim0)?, self.wrap_dim(dim1)?);
        l.shape.swap(a, b);
        l.stride.swap(a, b);
        Ok(l)
    }

    /// Reorders the dimensions: dimension `i` of the result is `dims[i]` of this layout.
    ///
    /// # Errors
    /// [`Error::DimCountMismatch`], [`Error::DimOutOfRange`] or [`Error::RepeatedDim`]
    /// unless `dims` is a permutation of the dimensions.
    pub fn permute(&self, dims: &[isize]) -> Result<Layout> {
        let n = self.ndim();
        if dims.len() != n {
            return Err(Error::DimCountMismatch {
                op: "permute",
                what: "dims",
                ndim: n,
                given: dims.len(),
            });
        }
        let mut seen = vec![false; n];
        let mut l = Layout {
            shape: Vec::with_capacity(n),
            stride: Vec::with_capacity(n),
            offset: self.offset,
        };
        for &d in dims {
            let d = wrap_dim(d, n)?;
            if std::mem::replace(&mut seen[d], true) {
                return Err(Error::RepeatedDim {
                    op: "permute",
                    dim: d,
                });
            }
            l.shape.push(self.shape[d]);
            l.stride.push(self.stride[d]);
        }
        Ok(l)
    }

    /// Broadcasts to `sizes` (-1 keeps a size); expanded dimensions get stride 0.
    ///
    /// # Errors
    /// [`Error::ExpandIncompatible`] for fewer sizes than dimensions, a
    /// non-singleton size that would change, a -1 for a new dimension or a
    /// size below -1; [`Error::SizeOverflow`].
    pub fn expand(&self, sizes: &[isize]) -> Result<Layout> {
        let (n, old) = (sizes.len(), self.ndim());
        let incompatible = || Error::ExpandIncompatible {
            sizes: sizes.to_vec(),
            shape: self.shape.clone(),
        };
        if n < old {
            return Err(incompatible());
        }
        let mut shape = vec![0usize; n];
        let mut stride = vec![0usize; n];
        for i in (0..n).rev() {
            let existing = (i + old >= n).then(|| i + old - n);
            let (mut size, mut st) = match existing {
                Some(d) => (self.shape[d], self.stride[d]),
                None if i + 1 < n => (1, shape[i + 1].saturating_mul(stride[i + 1])),
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
            shape[i] = size;
            stride[i] = st;
        }
        numel_of(&shape)?;
        Ok(Layout {
            shape,
            stride,
            offset: self.offset,
        })
    }

    /// Removes every dimension of size 1.
    pub fn squeeze(&self) -> Layout {
        let (shape, stride) = self
            .shape
            .iter()
            .zip(&self.stride)
            .filter(|(&s, _)| s != 1)
            .map(|(&s, &t)| (s, t))
            .unzip();
        Layout {
            shape,
            stride,
            offset: self.offset,
        }
    }

    /// Removes `dim` if its size is 1 (otherwise returns the same layout).
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`].
    pub fn squeeze_dim(&self, dim: isize) -> Result<Layout> {
        let mut l = self.clone();
        if self.ndim() == 0 {
            self.wrap_dim(dim)?;
            return Ok(l);
        }
        let d = self.wrap_dim(dim)?;
        if self.shape[d] == 1 {
            l.shape.remove(d);
            l.stride.remove(d);
        }
        Ok(l)
    }

    /// Inserts a dimension of size 1 at `dim` (which may equal `ndim`).
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`].
    pub fn unsqueeze(&self, dim: isize) -> Result<Layout> {
        let d = wrap_dim(dim, self.ndim() + 1)?;
        let stride = if d >= self.ndim() {
            1
        } else {
            self.shape[d].saturating_mul(self.stride[d])
        };
        let mut l = self.clone();
        l.shape.insert(d, 1);
        l.stride.insert(d, stride);
        Ok(l)
    }

    /// The shape of `flatten(start_dim, end_dim)`.
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::DimOrder`] when start comes after end.
    pub fn flatten_shape(&self, start_dim: isize, end_dim: isize) -> Result<Vec<isize>> {
        if self.ndim() == 0 {
            return Ok(vec![1]);
        }
        let (s, e) = (self.wrap_dim(start_dim)?, self.wrap_dim(end_dim)?);
        if s > e {
            return Err(Error::DimOrder {
                op: "flatten",
                start: s,
                end: e,
            });
        }
        let mid: usize = self.shape[s..=e].iter().product();
        let mut out: Vec<isize> = self.shape[..s].iter().map(|&x| x as isize).collect();
        out.push(mid as isize);
        out.extend(self.shape[e + 1..].iter().map(|&x| x as isize));
        Ok(out)
    }

    /// The shape of `unflatten(dim, sizes)` (one size may be -1).
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::ZeroDimTensor`], [`Error::ZeroArgument`]
    /// for no sizes, [`Error::ShapeMismatch`].
    pub fn unflatten_shape(&self, dim: isize, sizes: &[isize]) -> Result<Vec<isize>> {
        let d = self.wrap_dim(dim)?;
        if self.ndim() == 0 {
            return Err(Error::ZeroDimTensor { op: "unflatten" });
        }
        if sizes.is_empty() {
            return Err(Error::ZeroArgument {
                op: "unflatten",
                what: "len(sizes)",
            });
        }
        let inner = infer_shape(sizes, self.shape[d])?;
        let mut out: Vec<isize> = self.shape[..d].iter().map(|&x| x as isize).collect();
        out.extend(inner.iter().map(|&x| x as isize));
        out.extend(self.shape[d + 1..].iter().map(|&x| x as isize));
        Ok(out)
    }

    /// The diagonal of dimensions `dim1` and `dim2`, shifted by `offset`, appended as the last dimension.
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::RepeatedDim`] for identical dims.
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Result<Layout> {
        let (a, b) = (self.wrap_dim(dim1)?, self.wrap_dim(dim2)?);
        // Below 2 dimensions both wrap to dimension 0.
        if a == b {
            return Err(Error::RepeatedDim {
                op: "diagonal",
                dim: a,
            });
        }
        let (sa, sb) = (self.shape[a] as isize, self.shape[b] as isize);
        let len = if offset >= 0 {
            sa.min(sb - offset)
        } else {
            (sa + offset).min(sb)
        }
        .max(0) as usize;
        let mut l = self.clone();
        if len > 0 {
            l.offset = if offset >= 0 {
                advance(l.offset, offset as usize, self.stride[b])?
            } else {
                advance(l.offset, offset.unsigned_abs(), self.stride[a])?
            };
        }
        let st = self.stride[a].saturating_add(self.stride[b]);
        let (hi, lo) = (a.max(b), a.min(b));
        for d in [hi, lo] {
            l.shape.remove(d);
            l.stride.remove(d);
        }
        l.shape.push(len);
        l.stride.push(st);
        Ok(l)
    }

    /// Windows of `size` elements every `step` along `dim`, as a new last dimension.
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::WindowTooLarge`], [`Error::ZeroArgument`] for a step of 0.
    pub fn unfold(&self, dim: isize, size: usize, step: usize) -> Result<Layout> {
        let d = self.wrap_dim(dim)?;
        let (dsize, dstride) = if self.ndim() == 0 {
            (1, 1)
        } else {
            (self.shape[d], self.stride[d])
        };
        if size > dsize {
            return Err(Error::WindowTooLarge {
                dim: d,
                size,
                max: dsize,
            });
        }
        if step == 0 {
            return Err(Error::ZeroArgument {
                op: "unfold",
                what: "step",
            });
        }
        let mut l = self.clone();
        if self.ndim() > 0 {
            l.shape[d] = (dsize - size) / step + 1;
            l.stride[d] = dstride.saturating_mul(step);
        }
        l.shape.push(size);
        l.stride.push(dstride);
        Ok(l)
    }

    /// Pieces of `split_size` along `dim` (the last may be smaller).
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::ZeroSplitSize`] for a split size of 0 on a non-empty dimension.
    pub fn split(&self, split_size: usize, dim: isize) -> Result<Vec<Layout>> {
        let d = self.wrap_dim(dim)?;
        let size = self.shape.get(d).copied().unwrap_or(1);
        if split_size == 0 && size != 0 {
            return Err(Error::ZeroSplitSize { size });
        }
        let pieces = if split_size == 0 {
            1
        } else {
            size.div_ceil(split_size).max(1)
        };
        (0..pieces)
            .map(|i| {
                let start = i * split_size;
                self.narrow(d as isize, start as isize, split_size.min(size - start))
            })
            .collect()
    }

    /// Pieces of the given sizes along `dim`; they must add up to the dimension's size.
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::SplitSizesMismatch`].
    pub fn split_with_sizes(&self, sizes: &[usize], dim: isize) -> Result<Vec<Layout>> {
        let d = self.wrap_dim(dim)?;
        let total: usize = sizes
            .iter()
            .try_fold(0usize, |a, &s| a.checked_add(s))
            .unwrap_or(usize::MAX);
        if total != self.shape[d] {
            return Err(Error::SplitSizesMismatch {
                sizes: sizes.to_vec(),
                dim: d,
                size: self.shape[d],
            });
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|&len| {
                let l = self.narrow(d as isize, start as isize, len);
                start += len;
                l
            })
            .collect()
    }

    /// `chunks` nearly equal pieces along `dim`, as PyTorch's `chunk`.
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`], [`Error::ZeroArgument`] for 0 chunks.
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Layout>> {
        if chunks == 0 {
            return Err(Error::ZeroArgument {
                op: "chunk",
                what: "chunks",
            });
        }
        let d = self.wrap_dim(dim)?;
        let size = self.shape[d];
        if size == 0 {
            return self.split_with_sizes(&vec![0; chunks], dim);
        }
        self.split(size.div_ceil(chunks), dim)
    }

    /// Every index of `dim`, each with that dimension removed.
    ///
    /// # Errors
    /// [`Error::DimOutOfRange`].
    pub fn unbind(&self, dim: isize) -> Result<Vec<Layout>> {
        let d = self.wrap_dim(dim)?;
        (0..self.shape.get(d).copied().unwrap_or(0))
            .map(|i| self.select(d as isize, i as isize))
            .collect()
    }

    /// The layout under a dtype of `new_size`-byte elements, as PyTorch's `view(dtype)`.
    ///
    /// # Errors
    /// [`Error::ViewDType`] naming the rule that fails; [`Error::SizeOverflow`].
    pub fn view_dtype(&self, old_size: usize, new_size: usize) -> Result<Layout> {
        if old_size == new_size {
            return Ok(self.clone());
        }
        let bad = |problem| Error::ViewDType { problem };
        let n = self.ndim();
        if n == 0 {
            return Err(bad(DTypeViewProblem::ZeroDim));
        }
        if self.stride[n - 1] != 1 {
            return Err(bad(DTypeViewProblem::LastStride {
                stride: self.stride[n - 1],
            }));
        }
        let mut l = self.clone();
        if new_size < old_size {
            let r = old_size / new_size;
            let overflow = || Error::SizeOverflow {
                what: "view(dtype) layout",
                detail: format!("{self:?} with elements split {r} ways"),
            };
            for s in &mut l.stride[..n - 1] {
                *s = s.checked_mul(r).ok_or_else(overflow)?;
            }
            l.shape[n - 1] = l.shape[n - 1].checked_mul(r).ok_or_else(overflow)?;
            l.offset = l.offset.checked_mul(r).ok_or_else(overflow)?;
        } else {
            let ratio = new_size / old_size;
            let size = l.shape[n - 1];
            if size % ratio != 0 {
                return Err(bad(DTypeViewProblem::LastSize { size, ratio }));
            }
            if l.offset % ratio != 0 {
                return Err(bad(DTypeViewProblem::Offset {
                    offset: l.offset,
                    ratio,
                }));
            }
            for (dim, s) in l.stride[..n - 1].iter_mut().enumerate() {
                if *s % ratio != 0 {
                    return Err(bad(DTypeViewProblem::Stride {
                        dim,
                        stride: *s,
                        ratio,
                    }));
                }
                *s /= ratio;
            }
            l.shape[n - 1] /= ratio;
            l.offset /= ratio;
        }
        Ok(l)
    }

    /// Storage offsets of every element in row-major order.
    pub fn offsets(&self) -> Offsets<'_> {
        Offsets::new(&self.shape, &self.stride, self.offset)
    }

    /// `dim` wrapped into `0..ndim` (see [`wrap_dim`]).
    fn wrap_dim(&self, dim: isize) -> Result<usize> {
        wrap_dim(dim, self.ndim())
    }
}

/// The shape two shapes broadcast to (NumPy rules).
///
/// # Errors
/// [`Error::ShapeIncompatible`].
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let y = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::ShapeIncompatible {
                    op: "broadcast",
                    expected: a.to_vec(),
                    found: b.to_vec(),
                })
            }
        };
    }
    Ok(out)
}

/// Why `shape` does not expand to `sizes`, in PyTorch's words (the message
/// of [`Error::ExpandIncompatible`]): the first rule that fails, checked
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

/// The rule a layout breaks for `view(dtype)` to a dtype of another element size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DTypeViewProblem {
    /// The layout has no dimensions.
    ZeroDim,
    /// The last dimension is not contiguous.
    LastStride {
        /// Its stride.
        stride: usize,
    },
    /// The last dimension's size is not a multiple of the size ratio.
    LastSize {
        /// Its size.
        size: usize,
        /// The new element size over the old.
        ratio: usize,
    },
    /// The storage offset is not a multiple of the size ratio.
    Offset {
        /// The offset, in old elements.
        offset: usize,
        /// The new element size over the old.
        ratio: usize,
    },
    /// A stride other than the last is not a multiple of the size ratio.
    Stride {
        /// The dimension.
        dim: usize,
        /// Its stride.
        stride: usize,
        /// The new element size over the old.
        ratio: usize,
    },
}

impl std::fmt::Display for DTypeViewProblem {
    /// PyTorch's message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const TAIL: &str = "to view with a dtype of a different element size";
        match *self {
            DTypeViewProblem::ZeroDim => write!(f, "self.dim() cannot be 0 {TAIL}"),
            DTypeViewProblem::LastStride { stride } => {
                write!(f, "self.stride(-1) must be 1 {TAIL}, but got {stride}")
            }
            DTypeViewProblem::LastSize { size, ratio } => write!(
                f,
                "self.size(-1) must be divisible by {ratio} {TAIL}, but got {size}"
            ),
            DTypeViewProblem::Offset { offset, ratio } => write!(
                f,
                "self.storage_offset() must be divisible by {ratio} {TAIL}, but got {offset}"
            ),
            DTypeViewProblem::Stride { dim, stride, ratio } => write!(
                f,
                "self.stride({dim}) must be divisible by {ratio} {TAIL}, but got {stride}"
            ),
        }
    }
}

/// Iterator over the storage offsets of a strided layout's elements, in
/// row-major order: stowage's one strided odometer (views, element loops and
/// the outer dimensions of the copy kernel all walk with it).
pub struct Offsets<'a> {
    shape: &'a [usize],
    stride: &'a [usize],
    /// The multi-index of the element whose offset is `next`.
    index: Vec<usize>,
    next: usize,
    remaining: usize,
}

impl<'a> Offsets<'a> {
    /// The offsets of the elements of `shape` with `stride`, from `offset`.
    /// `shape` and `stride` have the same length, and `shape`'s element count fits
    /// in `usize` (as for every [`Layout`]).
    pub(crate) fn new(shape: &'a [usize], stride: &'a [usize], offset: usize) -> Self {
        debug_assert_eq!(shape.len(), stride.len());
        Offsets {
            shape,
            stride,
            index: vec![0; shape.len()],
            next: offset,
            remaining: shape.iter().product(),
        }
    }
}

impl Iterator for Offsets<'_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.next;
        // Advance the odometer from the last dimension.
        for d in (0..self.index.len()).rev() {
            // Wrapping: past the last element the next offset is never used, and a
            // layout that does not fit any storage may still be iterated.
            self.index[d] += 1;
            self.next = self.next.wrapping_add(self.stride[d]);
            if self.index[d] < self.shape[d] {
                break;
            }
            self.next = self
                .next
                .wrapping_sub(self.stride[d].wrapping_mul(self.index[d]));
            self.index[d] = 0;
        }
        Some(current)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Offsets<'_> {}

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

    fn l(shape: &[usize], stride: &[usize], offset: usize) -> Layout {
        Layout::new(shape, stride, offset).unwrap()
    }

    #[test]
    fn contiguous_and_views() {
        let base = Layout::contiguous(&[4, 6]).unwrap();
        assert_eq!(base.stride(), &[6, 1]);
        assert!(base.is_contiguous());
        let t = base.transpose(0, 1).unwrap();
        assert_eq!((t.shape(), t.stride()), (&[6, 4][..], &[1, 6][..]));
        assert!(!t.is_contiguous());
        assert!(matches!(t.view(&[24]), Err(Error::ViewIncompatible { .. })));
        assert_eq!(base.view(&[2, -1, 3]).unwrap().stride(), &[12, 3, 1]);
        assert!(matches!(
            base.view(&[5, -1]),
            Err(Error::ShapeMismatch { .. })
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
    fn diagonal_unfold_split() {
        let base = Layout::contiguous(&[3, 4]).unwrap();
        let d = base.diagonal(1, 0, 1).unwrap();
        assert_eq!((d.shape(), d.stride(), d.offset()), (&[3][..], &[5][..], 1));
        let d = base.diagonal(-1, 0, 1).unwrap();
        assert_eq!((d.shape(), d.offset()), (&[2][..], 4));
        assert_eq!(base.diagonal(10, 0, 1).unwrap().shape(), &[0]);
        let u = Layout::contiguous(&[7]).unwrap().unfold(0, 2, 2).unwrap();
        assert_eq!((u.shape(), u.stride()), (&[3, 2][..], &[2, 1][..]));
        let parts = base.split(3, 1).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.shape()[1]).collect::<Vec<_>>(),
            vec![3, 1]
        );
        let c = Layout::contiguous(&[5]).unwrap().chunk(3, 0).unwrap();
        assert_eq!(
            c.iter().map(|p| p.shape()[0]).collect::<Vec<_>>(),
            vec![2, 2, 1]
        );
        assert_eq!(
            Layout::contiguous(&[0]).unwrap().chunk(3, 0).unwrap().len(),
            3
        );
        assert_eq!(base.unbind(1).unwrap().len(), 4);
    }

    #[test]
    fn view_dtype_rules() {
        let bytes = Layout::contiguous(&[2, 8]).unwrap();
        let f = bytes.view_dtype(1, 4).unwrap();
        assert_eq!((f.shape(), f.stride()), (&[2, 2][..], &[2, 1][..]));
        let back = f.view_dtype(4, 1).unwrap();
        assert_eq!(back, bytes);
        assert!(Layout::contiguous(&[3]).unwrap().view_dtype(1, 2).is_err());
        assert!(bytes.transpose(0, 1).unwrap().view_dtype(1, 2).is_err());
        assert!(Layout::contiguous(&[]).unwrap().view_dtype(4, 2).is_err());
    }

    #[test]
    fn fits_and_overflow() {
        let t = l(&[2, 3], &[3, 1], 2);
        assert!(t.check_fits(4, 32).is_ok());
        assert!(matches!(
            t.check_fits(4, 31),
            Err(Error::OutOfStorage { needed: 32, .. })
        ));
        assert!(l(&[0, 5], &[5, 1], 100).check_fits(4, 0).is_ok());
        assert!(Layout::contiguous(&[usize::MAX, 2]).is_err());
        let huge = l(&[2], &[usize::MAX], usize::MAX);
        assert!(huge.check_fits(8, usize::MAX).is_err());
    }

    #[test]
    fn dims_wrap_like_pytorch() {
        assert_eq!(wrap_dim(-1, 3).unwrap(), 2);
        assert_eq!(wrap_dim(-1, 0).unwrap(), 0);
        assert!(matches!(
            wrap_dim(3, 3),
            Err(Error::DimOutOfRange { dim: 3, ndim: 3 })
        ));
        assert_eq!(
            Error::DimOutOfRange { dim: 2, ndim: 2 }.to_string(),
            "dimension out of range (expected to be in range of [-2, 1], but got 2)"
        );
        assert!(wrap_index(isize::MIN, 0, 4).is_err());
    }

    #[test]
    fn offsets_walk_row_major() {
        let t = Layout::contiguous(&[2, 3])
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        assert_eq!(t.offsets().collect::<Vec<_>>(), vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(
            Layout::contiguous(&[])
                .unwrap()
                .offsets()
                .collect::<Vec<_>>(),
            vec![0]
        );
        assert_eq!(Layout::contiguous(&[0, 3]).unwrap().offsets().count(), 0);
    }
}
