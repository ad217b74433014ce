//! Copies: `contiguous`, `deep_clone`, `to_dtype`, `to_device`, `copy_` and
//! `fill_`.
//!
//! The strided copy kernel first drops size-1 dimensions and merges
//! dimensions that are contiguous in both source and destination, then
//! picks the fastest loop: whole-row `memcpy`, a cache-blocked transpose
//! when the destination's innermost dimension is the source's outermost
//! (the `t().contiguous()` case), or an element loop; the dimensions outside
//! the innermost are walked with `StridedIndex`, the one strided odometer. Every kernel
//! re-checks both layouts against the bytes it is given, since a storage
//! may have been resized after a view was made.

use crate::error::{StorageError, TensorError};
use bytemuck::Pod;

use crate::autograd::{record, Backward};
use crate::element::{self, Scalar};
use crate::layout::{broadcast_shapes, Layout, StridedIndex};
use crate::overflow::{check_value, Path};
use crate::overlap::{assert_no_internal_overlap, assert_no_partial_overlap};
use crate::storage::with_pair;
use crate::{DType, Device, Error, Result, Tensor, UntypedStorage};

/// The dimensions of a copy, size-1 ones dropped and neighbours contiguous in
/// both layouts merged: their sizes and their strides on either side.
struct Plan {
    size: Vec<usize>,
    dst: Vec<usize>,
    src: Vec<usize>,
}

impl Plan {
    fn new(shape: &[usize], dst: &[usize], src: &[usize]) -> Plan {
        let mut p = Plan {
            size: Vec::with_capacity(shape.len()),
            dst: Vec::with_capacity(shape.len()),
            src: Vec::with_capacity(shape.len()),
        };
        for i in (0..shape.len()).filter(|&i| shape[i] != 1) {
            let (size, d, s) = (shape[i], dst[i], src[i]);
            match p.size.len().checked_sub(1) {
                Some(o) if p.dst[o] == d * size && p.src[o] == s * size => {
                    p.size[o] *= size;
                    p.dst[o] = d;
                    p.src[o] = s;
                }
                _ => {
                    p.size.push(size);
                    p.dst.push(d);
                    p.src.push(s);
                }
            }
        }
        p
    }

    /// The plan without dimension `k`.
    fn without(&self, k: usize) -> Plan {
        let drop = |v: &[usize]| [&v[..k], &v[k + 1..]].concat();
        Plan {
            size: drop(&self.size),
            dst: drop(&self.dst),
            src: drop(&self.src),
        }
    }

    /// `[dst, src]` offsets of every index of the first `n` dimensions, row-major,
    /// from `[db, sb]`.
    fn outer(&self, n: usize, db: usize, sb: usize) -> StridedIndex<'_, 2> {
        StridedIndex::new(&self.size[..n], [&self.dst[..n], &self.src[..n]], [db, sb])
    }
}

/// `[dst, src]` offsets of the elements of two layouts of one shape, in lockstep.
fn pairs<'a>(dl: &'a Layout, sl: &'a Layout) -> StridedIndex<'a, 2> {
    StridedIndex::new(
        dl.shape(),
        [dl.stride(), sl.stride()],
        [dl.offset(), sl.offset()],
    )
}

/// Edge of the outer tiles of the blocked transpose, in elements. A tile spans
/// `TILE` source rows and `TILE` destination rows (about a thousand 4 KiB pages
/// on both sides together), so its pages stay in the second-level TLB while
/// the micro-blocks inside it are copied.
const TILE: usize = 512;

/// Copies `src` (laid out by `sl`) into `dst` (laid out by `dl`): same shape, same
/// element size `es`, non-overlapping buffers.
///
/// # Errors
/// [`StorageError::OutOfStorage`] when a layout does not fit its bytes.
pub(crate) fn copy_strided(
    dst: &mut [u8],
    dl: &Layout,
    src: &[u8],
    sl: &Layout,
    es: usize,
) -> Result<()> {
    debug_assert_eq!(dl.shape(), sl.shape());
    dl.check_fits(es, dst.len())?;
    sl.check_fits(es, src.len())?;
    if dl.numel() == 0 {
        return Ok(());
    }
    let plan = Plan::new(dl.shape(), dl.stride(), sl.stride());
    let (db, sb) = (dl.offset(), sl.offset());
    macro_rules! typed {
        ($t:ty) => {
            if let (Ok(d), Ok(s)) = (
                bytemuck::try_cast_slice_mut::<u8, $t>(dst),
                bytemuck::try_cast_slice::<u8, $t>(src),
            ) {
                copy_typed::<$t>(d, s, &plan, db, sb);
                return Ok(());
            }
        };
    }
    match es {
        1 => typed!(u8),
        2 => typed!(u16),
        4 => typed!(u32),
        8 => typed!(u64),
        16 => typed!(u128),
        _ => {}
    }
    // Unaligned bytes (never for stowage's own buffers): element by element.
    for [o, i] in pairs(dl, sl) {
        dst[o * es..(o + 1) * es].copy_from_slice(&src[i * es..(i + 1) * es]);
    }
    Ok(())
}

fn copy_typed<T: Pod>(dst: &mut [T], src: &[T], plan: &Plan, db: usize, sb: usize) {
    let Some(last) = plan.size.len().checked_sub(1) else {
        dst[db] = src[sb];
        return;
    };
    let (n, inner_dst, inner_src) = (plan.size[last], plan.dst[last], plan.src[last]);
    if inner_dst == 1 && inner_src == 1 {
        for [d, s] in plan.outer(last, db, sb) {
            dst[d..d + n].copy_from_slice(&src[s..s + n]);
        }
        return;
    }
    if inner_dst == 1 {
        if let Some(k) = plan.src[..last].iter().rposition(|&s| s == 1) {
            let (rows, row_stride) = (plan.size[k], plan.dst[k]);
            for [d, s] in plan.without(k).outer(last - 1, db, sb) {
                transpose_tiles(dst, d, row_stride, src, s, inner_src, rows, n);
            }
            return;
        }
    }
    if inner_src == 1 {
        // The mirror case, `dst_t.t().copy_(src)`: the destination is contiguous
        // along an outer dimension, the source along the inner one.
        if let Some(k) = plan.dst[..last].iter().rposition(|&d| d == 1) {
            let (cols, col_stride) = (plan.size[k], plan.src[k]);
            for [d, s] in plan.without(k).outer(last - 1, db, sb) {
                transpose_tiles(dst, d, inner_dst, src, s, col_stride, n, cols);
            }
            return;
        }
    }
    for [d, s] in plan.outer(last, db, sb) {
        for j in 0..n {
            dst[d + j * inner_dst] = src[s + j * inner_src];
        }
    }
}

/// `dst[d0 + i*drow + j] = src[s0 + i + j*scol]` for `i < rows`, `j < cols`.
///
/// Blocked twice. Micro-blocks are one cache line (64 bytes) of elements on each
/// side: `B` source lines (the `B` source rows `j..j+B`, elements `i..i+B`) are
/// copied whole into a small buffer, then each of the `B` destination lines is
/// written whole from it. Every line of either buffer is therefore touched once,
/// all at once, which sidesteps the L1 set conflicts of power-of-two row strides
/// (a 4096-float row is 16 KiB, so a column of lines all map to one set). The
/// micro-blocks are walked in `TILE`×`TILE` tiles, source-row block outermost,
/// to keep the pages of a tile in the TLB. Ragged edges go element by element.
#[allow(clippy::too_many_arguments)]
fn transpose_tiles<T: Pod>(
    dst: &mut [T],
    d0: usize,
    drow: usize,
    src: &[T],
    s0: usize,
    scol: usize,
    rows: usize,
    cols: usize,
) {
    /// The blocked transpose with `B`×`B` micro-blocks.
    #[allow(clippy::too_many_arguments)]
    fn blocked<T: Pod, const B: usize>(
        dst: &mut [T],
        d0: usize,
        drow: usize,
        src: &[T],
        s0: usize,
        scol: usize,
        rows: usize,
        cols: usize,
    ) {
        let (rb, cb) = (rows - rows % B, cols - cols % B);
        let mut buf = [[T::zeroed(); B]; B];
        for j0 in (0..cb).step_by(TILE) {
            let j1 = (j0 + TILE).min(cb);
            for i0 in (0..rb).step_by(TILE) {
                let i1 = (i0 + TILE).min(rb);
                for j in (j0..j1).step_by(B) {
                    for i in (i0..i1).step_by(B) {
                        let s = s0 + i + j * scol;
                        for (jj, line) in buf.iter_mut().enumerate() {
                            line.copy_from_slice(&src[s + jj * scol..][..B]);
                        }
                        let d = d0 + i * drow + j;
                        for ii in 0..B {
                            let out: &mut [T; B] = (&mut dst[d + ii * drow..][..B])
                                .try_into()
                                .expect("a slice of B elements");
                            for (o, line) in out.iter_mut().zip(&buf) {
                                *o = line[ii];
                            }
                        }
                    }
                }
            }
        }
        // Ragged edges: the last `rows % B` rows, then the last `cols % B` columns.
        let mut one = |i: usize, js: std::ops::Range<usize>| {
            let row = &mut dst[d0 + i * drow + js.start..d0 + i * drow + js.end];
            for (j, out) in js.zip(row.iter_mut()) {
                *out = src[s0 + i + j * scol];
            }
        };
        for i in rb..rows {
            one(i, 0..cols);
        }
        for i in 0..rb {
            one(i, cb..cols);
        }
    }

    // One cache line of elements per micro-block edge.
    macro_rules! with_edge {
        ($b:literal) => {
            blocked::<T, $b>(dst, d0, drow, src, s0, scol, rows, cols)
        };
    }
    match std::mem::size_of::<T>() {
        1 => with_edge!(64),
        2 => with_edge!(32),
        4 => with_edge!(16),
        8 => with_edge!(8),
        _ => with_edge!(4),
    }
}

/// Converting copy between dtypes, element by element through [`Scalar`].
fn convert_strided(
    dst: &mut [u8],
    dl: &Layout,
    ddt: DType,
    src: &[u8],
    sl: &Layout,
    sdt: DType,
) -> Result<()> {
    let (des, ses) = (ddt.size(), sdt.size());
    dl.check_fits(des, dst.len())?;
    sl.check_fits(ses, src.len())?;
    for [o, i] in pairs(dl, sl) {
        let v = element::read(sdt, &src[i * ses..(i + 1) * ses])?;
        element::write(ddt, v, &mut dst[o * des..(o + 1) * des])?;
    }
    Ok(())
}

/// Copies `src` into `dst` under the right locks, converting dtype if needed;
/// `sl` must already have `dl`'s shape.
fn copy_into(dst: &Tensor, src: &Tensor, sl: &Layout) -> Result<()> {
    let (dl, ddt, sdt) = (&dst.layout, dst.dtype, src.dtype);
    let run = |d: &mut [u8], s: &[u8], sl: &Layout| {
        if ddt == sdt {
            copy_strided(d, dl, s, sl, ddt.size())
        } else {
            convert_strided(d, dl, ddt, s, sl, sdt)
        }
    };
    if !dst.storage.is_same(&src.storage) {
        return with_pair(&src.storage, &dst.storage, "copy_", |s, d| run(d, s, sl))?;
    }
    // Source and destination share bytes and may overlap: gather the source first.
    let tmp_layout = Layout::contiguous(sl.shape())?;
    dst.storage.with_bytes_mut("copy_", |b| {
        let mut tmp = vec![0u8; tmp_layout.numel() * sdt.size()];
        copy_strided(&mut tmp, &tmp_layout, b, sl, sdt.size())?;
        run(b, &tmp, &tmp_layout)
    })?
}

impl Tensor {
    /// A new tensor with `layout`'s strides holding a copy of `self` converted to `dtype`.
    pub(crate) fn copied(
        &self,
        dtype: DType,
        strides: Vec<usize>,
        device: Device,
    ) -> Result<Tensor> {
        let layout = Layout::new(self.shape(), &strides, 0)?;
        let nbytes = layout
            .storage_elements()?
            .checked_mul(dtype.size())
            .ok_or_else(|| {
                Error::Tensor(TensorError::SizeOverflow {
                    what: "tensor bytes",
                    detail: format!("{:?} of {dtype}", self.shape()),
                })
            })?;
        // Meta results and copies of fake tensors carry metadata only; a meta tensor
        // cannot leave meta (there is nothing to copy), a fake one stays fake.
        let storage = if device.is_meta() {
            UntypedStorage::new_on(nbytes, device)?
        } else if !self.has_data() {
            if self.is_meta() {
                return Err(Error::Storage(StorageError::NoData {
                    op: "copy out of a meta tensor",
                    device: self.device(),
                }));
            }
            UntypedStorage::new_fake(nbytes, device)
        } else {
            UntypedStorage::new_on(nbytes, device)?
        };
        let out = Tensor {
            storage,
            dtype,
            layout,
            autograd: crate::autograd::Autograd::none(),
        };
        if out.has_data() {
            copy_into(&out, self, &self.layout)?;
        }
        Ok(out)
    }

    /// `self` when already contiguous, else a row-major copy.
    ///
    /// # Errors
    /// [`StorageError::NoData`] on meta when a copy is needed; allocation failure.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let strides = crate::layout::contiguous_strides(self.shape());
        let out = self.copied(self.dtype, strides, self.device())?;
        Ok(record(out, "CloneBackward0", &[self], || {
            Backward::Identity
        }))
    }

    /// A copy of the data on a new storage (PyTorch's `t.clone()`), keeping the strides
    /// of dense tensors (PyTorch's `preserve_format`). On meta the copy is meta too.
    ///
    /// # Errors
    /// Allocation failure.
    pub fn deep_clone(&self) -> Result<Tensor> {
        let out = self.copied(
            self.dtype,
            self.layout.preserve_format_strides(),
            self.device(),
        )?;
        Ok(record(out, "CloneBackward0", &[self], || {
            Backward::Identity
        }))
    }

    /// The values converted to `dtype` (`self` when the dtype is already `dtype`).
    ///
    /// # Errors
    /// [`TensorError::DTypeUnsupported`] for dtypes without values; [`StorageError::NoData`] on meta.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype {
            return Ok(self.clone());
        }
        let out = self.copied(dtype, self.layout.preserve_format_strides(), self.device())?;
        Ok(record(out, "ToCopyBackward0", &[self], || Backward::Cast {
            from: self.dtype,
        }))
    }

    /// This tensor on `device` (`self` when already there). To meta keeps only metadata.
    ///
    /// # Errors
    /// [`StorageError::NoData`] when leaving meta; allocation failure.
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        let out = self.copied(self.dtype, self.layout.preserve_format_strides(), device)?;
        Ok(record(out, "ToCopyBackward0", &[self], || {
            Backward::Identity
        }))
    }

    /// `self` expanded to `out`, the shape a write into another tensor has
    /// (a view, detached), or PyTorch's errors: [`TensorError::SizeMismatch`] when
    /// the shapes do not broadcast, [`TensorError::BroadcastOutput`] when they
    /// broadcast to another shape than `out`.
    pub(crate) fn expanded_for(&self, out: &[usize]) -> Result<Tensor> {
        let broadcast = broadcast_shapes(out, self.shape())?;
        if broadcast != out {
            return Err(Error::Tensor(TensorError::BroadcastOutput {
                output: out.to_vec(),
                broadcast,
            }));
        }
        let sizes: Vec<isize> = out.iter().map(|&s| s as isize).collect();
        Ok(Tensor {
            layout: self.layout.expand(&sizes)?,
            ..self.detach()
        })
    }

    /// Copies `src` into `self`, broadcasting its shape and converting its dtype.
    /// Every view of `self`'s storage sees the new values.
    ///
    /// # Errors
    /// [`TensorError::SizeMismatch`] or [`TensorError::BroadcastOutput`] when `src` does
    /// not broadcast to `self`'s shape; [`TensorError::PartialOverlap`] when `src`
    /// shares part of `self`'s memory, [`TensorError::InternalOverlap`] when `self`
    /// is expanded (PyTorch's overlap rule);
    /// [`StorageError::NoData`] on meta; [`TensorError::InPlaceRequiresGrad`] while recording
    /// gradients, for a leaf that requires grad or a view of one, and through
    /// the views [`GradRole`](crate::autograd::GradRole) names. On a computed
    /// tensor, or from a `src` that requires grad, the copy is recorded
    /// (`CopyBackwards`), as in PyTorch ([`crate::autograd`]).
    pub fn copy_(&self, src: &Tensor) -> Result<&Self> {
        let record = self.check_inplace_arith("copy_", Some(src))?;
        self.check_data("copy_")?;
        src.check_data("copy_")?;
        // ATen's `copy_` returns early on the same data in the same layout and dtype.
        if self.storage.is_same(&src.storage)
            && self.layout == src.layout
            && self.dtype == src.dtype
        {
            return Ok(self);
        }
        assert_no_internal_overlap("copy_", self)?;
        assert_no_partial_overlap("copy_", self, src)?;
        let sl = src.expanded_for(self.shape())?.layout;
        copy_into(self, src, &sl)?;
        if record {
            let src_of = (src.shape().to_vec(), src.dtype);
            self.record_inplace("CopyBackwards", Backward::Copy { src: src_of }, Some(src));
        }
        self.storage.bump_version();
        Ok(self)
    }

    /// Sets every element to `value` (cast to the dtype). As in PyTorch, an
    /// expanded tensor may be filled, and a value the dtype cannot hold is
    /// refused rather than wrapped (a negative integer wraps into an unsigned
    /// dtype, as c10 allows).
    ///
    /// # Errors
    /// [`TensorError::ValueOverflow`] for a value out of the dtype's range (`300`
    /// into `uint8`, `1e6` into `float16`, a complex value with an imaginary
    /// part into a real dtype); [`StorageError::NoData`] on meta;
    /// [`TensorError::DTypeUnsupported`] for dtypes without values;
    /// [`TensorError::InPlaceRequiresGrad`] while recording gradients for a leaf
    /// that requires grad or a view of one; on a computed tensor the write
    /// is recorded (`FillBackward0`), as in PyTorch.
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<&Self> {
        self.fill_recorded("fill_", "FillBackward0", value.into())
    }

    /// [`fill_`](Self::fill_) as the operation `op`, recorded as `name` on a
    /// computed tensor.
    fn fill_recorded(&self, op: &'static str, name: &'static str, value: Scalar) -> Result<&Self> {
        let record = self.check_inplace_arith(op, None)?;
        self.check_data(op)?;
        check_value(self.dtype, value, Path::Fill)?;
        self.fill_unchecked(value)?;
        if record {
            self.record_inplace(name, Backward::Fill, None);
        }
        self.storage.bump_version();
        Ok(self)
    }

    /// [`fill_`](Self::fill_) without the range check: values are cast as
    /// arithmetic casts them (how a number becomes an operand).
    pub(crate) fn fill_unchecked(&self, value: Scalar) -> Result<&Self> {
        let es = self.element_size();
        let mut one = vec![0u8; es];
        element::write(self.dtype, value, &mut one)?;
        self.storage
            .with_bytes_mut("fill_", |b| {
                self.layout.check_fits(es, b.len())?;
                if self.is_contiguous() {
                    let start = self.storage_offset() * es;
                    for chunk in b[start..start + self.nbytes()].chunks_exact_mut(es) {
                        chunk.copy_from_slice(&one);
                    }
                } else {
                    for o in self.layout.offsets() {
                        b[o * es..(o + 1) * es].copy_from_slice(&one);
                    }
                }
                Ok(())
            })?
            .map(|()| self)
    }

    /// Sets every element to zero.
    ///
    /// # Errors
    /// As [`fill_`](Self::fill_).
    pub fn zero_(&self) -> Result<&Self> {
        self.fill_recorded("zero_", "ZeroBackward0", Scalar::Int(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{StorageError, TensorError};

    fn grid(r: usize, c: usize) -> Tensor {
        Tensor::arange(0.0, (r * c) as f64, 1.0, DType::Float32)
            .unwrap()
            .view(&[r as isize, c as isize])
            .unwrap()
    }

    #[test]
    fn transposed_contiguous_matches_elementwise() {
        for (r, c) in [(1, 1), (3, 5), (33, 70), (64, 64), (100, 3)] {
            let t = grid(r, c).t().unwrap();
            let c1 = t.contiguous().unwrap();
            assert!(c1.is_contiguous());
            assert_eq!(c1.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
        }
    }

    /// A `[r, c]` tensor of `dtype` whose values follow the row-major index.
    fn grid_of(r: usize, c: usize, dtype: DType) -> Tensor {
        Tensor::arange(0.0, (r * c) as f64, 1.0, DType::Int64)
            .unwrap()
            .to_dtype(dtype)
            .unwrap()
            .view(&[r as isize, c as isize])
            .unwrap()
    }

    #[test]
    fn blocked_transpose_every_element_width_and_ragged_edges() {
        // Widths 1, 2, 4, 8, 16 bytes (micro-blocks of 64, 32, 16, 8, 4 elements);
        // shapes below, at, straddling and beyond a micro-block and a `TILE`.
        let dtypes = [
            DType::UInt8,
            DType::Int16,
            DType::Float32,
            DType::Float64,
            DType::Complex128,
        ];
        let shapes = [
            (1, 1),
            (3, 5),
            (17, 70),
            (64, 64),
            (65, 130),
            (600, 37),
            (37, 600),
        ];
        for dtype in dtypes {
            for (r, c) in shapes {
                let x = grid_of(r, c, dtype);
                let t = x.t().unwrap();
                let want = t.scalars().unwrap();
                assert_eq!(
                    t.contiguous().unwrap().scalars().unwrap(),
                    want,
                    "{dtype} {r}x{c}"
                );
                let dst = Tensor::zeros(&[c, r], dtype).unwrap();
                dst.copy_(&t).unwrap();
                assert_eq!(dst.scalars().unwrap(), want, "{dtype} {r}x{c} copy_");
                // Mirror path: a transposed destination, a contiguous source.
                let dst_t = Tensor::zeros(&[c, r], dtype).unwrap();
                dst_t.t().unwrap().copy_(&x).unwrap();
                assert_eq!(dst_t.scalars().unwrap(), want, "{dtype} {r}x{c} into .t()");
            }
        }
    }

    #[test]
    fn permuted_3d_contiguous_matches_elementwise() {
        let x = grid_of(5 * 17, 33, DType::Float32)
            .view(&[5, 17, 33])
            .unwrap();
        for dims in [[2, 0, 1], [1, 2, 0], [2, 1, 0], [0, 2, 1]] {
            let p = x.permute(&dims).unwrap();
            let c = p.contiguous().unwrap();
            assert!(c.is_contiguous());
            assert_eq!(c.scalars().unwrap(), p.scalars().unwrap(), "{dims:?}");
        }
    }

    #[test]
    fn copy_broadcasts_converts_and_is_seen_by_views() {
        let dst = Tensor::zeros(&[2, 3], DType::Float64).unwrap();
        let view = dst.select(0, 1).unwrap();
        let src = Tensor::from_slice(&[1i32, 2, 3]).unwrap();
        dst.copy_(&src).unwrap();
        assert_eq!(view.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0]);
        assert!(dst.copy_(&Tensor::from_slice(&[1i32, 2]).unwrap()).is_err());
    }

    /// PyTorch's overlap rule (`a[1:].copy_(a[:-1])` and `b.copy_(b.t())` are
    /// refused and change nothing; disjoint parts of one storage, the same
    /// view, and strided views ATen cannot decide go ahead).
    #[test]
    fn overlapping_copy_within_one_storage() {
        let t = grid(3, 3);
        let before = t.to_vec::<f32>().unwrap();
        let e = t.copy_(&t.t().unwrap()).unwrap_err();
        assert!(matches!(
            e,
            Error::Tensor(TensorError::PartialOverlap { op: "copy_" })
        ));
        assert_eq!(
            e.to_string(),
            "unsupported operation: some elements of the input tensor and the written-to \
             tensor refer to a single memory location. Please clone() the tensor before \
             performing the operation."
        );
        assert_eq!(t.to_vec::<f32>().unwrap(), before);
        let flat = Tensor::arange(0.0, 5.0, 1.0, DType::Int64).unwrap();
        let tail = flat.narrow(0, 1, 4).unwrap();
        let shifted = tail.copy_(&flat.narrow(0, 0, 4).unwrap());
        assert!(matches!(
            shifted,
            Err(Error::Tensor(TensorError::PartialOverlap { .. }))
        ));
        assert_eq!(flat.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3, 4]);
        // A 0-dim view of the destination is part of it.
        let scalar = flat.copy_(&flat.select(0, 0).unwrap());
        assert!(matches!(
            scalar,
            Err(Error::Tensor(TensorError::PartialOverlap { .. }))
        ));
        // Disjoint parts, the same view twice, full overlap through view(dtype).
        flat.narrow(0, 0, 2)
            .unwrap()
            .copy_(&flat.narrow(0, 3, 2).unwrap())
            .unwrap();
        assert_eq!(flat.to_vec::<i64>().unwrap(), vec![3, 4, 2, 3, 4]);
        flat.narrow(0, 1, 4)
            .unwrap()
            .copy_(&flat.narrow(0, 1, 4).unwrap())
            .unwrap();
        assert_eq!(flat.to_vec::<i64>().unwrap(), vec![3, 4, 2, 3, 4]);
        flat.copy_(&flat.view_dtype(DType::Float64).unwrap())
            .unwrap();
        // Strided views that overlap: too hard for ATen's test, so they go ahead
        // (stowage reads the source before writing).
        let g = Tensor::arange(0.0, 12.0, 1.0, DType::Float32).unwrap();
        let (even, later) = (
            g.slice(0, Some(0), Some(10), 2).unwrap(),
            g.slice(0, Some(2), Some(12), 2).unwrap(),
        );
        even.copy_(&later).unwrap();
        assert_eq!(
            even.to_vec::<f32>().unwrap(),
            vec![2.0, 4.0, 6.0, 8.0, 10.0]
        );
    }

    /// An expanded destination is refused by `copy_`, but `fill_` fills it.
    #[test]
    fn expanded_destinations() {
        let base = Tensor::zeros(&[1], DType::Float32).unwrap();
        let wide = base.expand(&[3]).unwrap();
        let e = wide
            .copy_(&Tensor::ones(&[3], DType::Float32).unwrap())
            .unwrap_err();
        assert!(matches!(
            e,
            Error::Tensor(TensorError::InternalOverlap { op: "copy_" })
        ));
        assert_eq!(
            e.to_string(),
            "unsupported operation: more than one element of the written-to tensor refers \
             to a single memory location. Please clone() the tensor before performing the \
             operation."
        );
        wide.fill_(2.0).unwrap();
        assert_eq!(wide.to_vec::<f32>().unwrap(), vec![2.0; 3]);
        wide.zero_().unwrap();
        assert_eq!(base.to_vec::<f32>().unwrap(), vec![0.0]);
    }

    /// `fill_` and `full` refuse values the dtype cannot hold, with PyTorch's
    /// message; a negative integer wraps into an unsigned dtype, as in c10.
    #[test]
    fn fill_checks_the_value_range() {
        let overflow = |dtype: DType, v: Scalar| {
            let t = Tensor::zeros(&[2], dtype).unwrap();
            let e = t.fill_(v).unwrap_err();
            assert_eq!(
                t.to_vec::<f64>().unwrap(),
                vec![0.0; 2],
                "{dtype} unchanged"
            );
            e.to_string()
        };
        let msg = |ty: &str| format!("value cannot be converted to type {ty} without overflow");
        assert_eq!(overflow(DType::UInt8, Scalar::Int(300)), msg("uint8_t"));
        assert_eq!(overflow(DType::Int8, Scalar::Int(-129)), msg("int8_t"));
        assert_eq!(
            overflow(DType::Float16, Scalar::Float(1e6)),
            msg("c10::Half")
        );
        assert_eq!(
            overflow(DType::BFloat16, Scalar::Float(1e300)),
            msg("c10::BFloat16")
        );
        assert_eq!(overflow(DType::Float32, Scalar::Float(1e300)), msg("float"));
        assert_eq!(overflow(DType::Int32, Scalar::Float(f64::NAN)), msg("int"));
        assert_eq!(
            overflow(DType::Float8E4M3Fn, Scalar::Float(1e6)),
            msg("c10::Float8_e4m3fn")
        );
        let c = Scalar::Complex(num_complex::Complex64::new(1.0, 1.0));
        assert_eq!(overflow(DType::Float32, c), msg("float"));
        let e = Tensor::full(&[2], 200i64, DType::Int8).unwrap_err();
        assert_eq!(e.to_string(), msg("int8_t"));
        assert!(Tensor::full(&[2], 1e6, DType::Float16).is_err());
        // What PyTorch accepts.
        let u = Tensor::full(&[2], -1i64, DType::UInt8).unwrap();
        assert_eq!(u.to_vec::<u8>().unwrap(), vec![255; 2]);
        let f = Tensor::full(&[2], f64::INFINITY, DType::Float32).unwrap();
        assert_eq!(f.to_vec::<f32>().unwrap(), vec![f32::INFINITY; 2]);
        let i = Tensor::full(&[2], 2.5, DType::Int32).unwrap();
        assert_eq!(i.to_vec::<i32>().unwrap(), vec![2; 2]);
        let b = Tensor::full(&[2], 5i64, DType::Bool).unwrap();
        assert_eq!(b.to_vec::<bool>().unwrap(), vec![true; 2]);
        let h = Tensor::full(&[1], f64::NAN, DType::Float16).unwrap();
        assert!(h.to_vec::<f32>().unwrap()[0].is_nan());
        let one = Scalar::Complex(num_complex::Complex64::new(1.0, 0.0));
        assert_eq!(
            Tensor::full(&[1], one, DType::Float32)
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            vec![1.0]
        );
    }

    #[test]
    fn clone_preserves_dense_strides() {
        let t = grid(2, 3).t().unwrap();
        let c = t.deep_clone().unwrap();
        assert_eq!(c.stride(), &[1, 3]);
        assert!(!c.shares_storage_with(&t));
        assert_eq!(c.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
        let stepped = grid(4, 4).slice(1, None, None, 2).unwrap();
        assert_eq!(stepped.deep_clone().unwrap().stride(), &[2, 1]);
    }

    #[test]
    fn to_dtype_and_fill() {
        let t = Tensor::full(&[3], 2.7, DType::Float32).unwrap();
        assert_eq!(
            t.to_dtype(DType::Int32).unwrap().to_vec::<i32>().unwrap(),
            vec![2; 3]
        );
        t.narrow(0, 1, 1).unwrap().zero_().unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap()[1], 0.0);
        let m = t.to_device(Device::META).unwrap();
        assert!(m.fill_(1.0).is_err());
        assert!(m.contiguous().is_ok());
        assert!(m.deep_clone().unwrap().is_meta());
    }

    #[test]
    fn shrunk_storage_is_an_error_not_a_panic() {
        let t = Tensor::ones(&[4], DType::Float32).unwrap();
        t.untyped_storage().resize_(4).unwrap();
        assert!(matches!(
            t.fill_(1.0),
            Err(Error::Storage(StorageError::OutOfStorage { .. }))
        ));
        assert!(t.deep_clone().is_err());
    }
}
