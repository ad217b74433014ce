//! A region of a DCP tensor read into memory the caller owns: what a
//! `StorageReader` does with each item of a rank's plan, into the tensor
//! the planner gives, with no buffer between.

use super::index::check_cover;
use super::metadata::{Chunk, TensorMeta};
use super::{intersect, DcpCheckpoint};
use crate::error::{FormatError, StorageError, TensorError};
use crate::{Error, Result};

/// The parts of a region: each stored chunk it meets, with the range of
/// each dimension the chunk covers there.
type Parts<'m> = Vec<(Chunk<'m>, Vec<(usize, usize)>)>;

impl DcpCheckpoint {
    /// Tensor `fqn`'s metadata and the chunks that tile the region at
    /// `offsets` of extent `sizes`, checked: inside the tensor, its volume
    /// countable, the chunks' parts disjoint and covering it.
    pub(super) fn region_plan(
        &self,
        fqn: &str,
        offsets: &[usize],
        sizes: &[usize],
    ) -> Result<(&TensorMeta, Parts<'_>)> {
        let meta = self.tensor_meta(fqn)?;
        let inside = offsets.len() == meta.size.len()
            && sizes.len() == meta.size.len()
            && offsets
                .iter()
                .zip(sizes)
                .zip(&meta.size)
                .all(|((o, s), n)| o.checked_add(*s).is_some_and(|e| e <= *n));
        if !inside {
            return Err(Error::Format(FormatError::BadObject {
                context: "DCP region",
                expected: "a region inside the tensor",
                found: format!(
                    "{fqn}: offsets {offsets:?} sizes {sizes:?} of size {:?}",
                    meta.size
                ),
            }));
        }
        let wanted = sizes
            .iter()
            .try_fold(1usize, |a, &b| a.checked_mul(b))
            .ok_or(Error::Tensor(TensorError::SizeOverflow {
                what: "DCP region",
                detail: format!("{sizes:?}"),
            }))?;
        let parts: Parts<'_> = self
            .index
            .candidates(&self.metadata, fqn, meta, offsets, sizes)
            .into_iter()
            .filter_map(|i| {
                let c = meta.chunk(i)?;
                intersect(&c, offsets, sizes).map(|r| (c, r))
            })
            .collect();
        let regions: Vec<_> = parts.iter().map(|(_, r)| r.clone()).collect();
        check_cover(fqn, &regions, wanted)?;
        Ok((meta, parts))
    }

    /// Reads the region of tensor `fqn` at `offsets` of extent `sizes` into
    /// `dst`, the region's bytes in row-major order (exactly
    /// `sizes.product()` elements), from the stored chunks it spans (and only
    /// those). A chunk's part that lies in whole rows on both sides is one
    /// read from the data file straight into `dst`; any other part is read
    /// and then copied into place run by run.
    ///
    /// [`read_region`](Self::read_region) is this into a new tensor.
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region); [`StorageError::StorageRange`]
    /// when `dst` is not the region's size.
    pub fn read_region_into(
        &self,
        fqn: &str,
        offsets: &[usize],
        sizes: &[usize],
        dst: &mut [u8],
    ) -> Result<()> {
        let (meta, parts) = self.region_plan(fqn, offsets, sizes)?;
        let es = meta.dtype.size();
        let wanted: usize = sizes.iter().product();
        if wanted.checked_mul(es) != Some(dst.len()) {
            return Err(Error::Storage(StorageError::StorageRange {
                offset: 0,
                len: wanted.saturating_mul(es),
                nbytes: dst.len(),
            }));
        }
        for (chunk, ranges) in parts {
            let stored = self.read_chunk(fqn, meta.dtype, &chunk)?;
            let mut src = stored;
            for (d, &(lo, len)) in ranges.iter().enumerate() {
                src = src.narrow(d as isize, (lo - chunk.offsets[d]) as isize, len)?;
            }
            // Where the part starts in the region, and whether it is whole
            // rows of it (every dimension after the first complete).
            let at: Vec<usize> = ranges.iter().zip(offsets).map(|(r, o)| r.0 - o).collect();
            let lens: Vec<usize> = ranges.iter().map(|r| r.1).collect();
            let rows = lens.get(1..) == sizes.get(1..);
            if rows && src.is_contiguous() {
                let row = sizes.get(1..).unwrap_or(&[]).iter().product::<usize>() * es;
                let start = at.first().copied().unwrap_or(0) * row;
                let window = dst
                    .get_mut(start..start + src.nbytes())
                    .ok_or(Error::Storage(StorageError::StorageRange {
                        offset: start,
                        len: src.nbytes(),
                        nbytes: wanted * es,
                    }))?;
                read_in_two(src.untyped_storage(), src.storage_offset() * es, window)?;
                continue;
            }
            let piece = src.contiguous()?;
            let bytes = piece.untyped_storage().bytes()?;
            let from = piece.storage_offset() * es;
            scatter(
                dst,
                sizes,
                &at,
                &lens,
                &bytes[from..from + piece.nbytes()],
                es,
            );
        }
        Ok(())
    }
}

/// The smallest read [`read_in_two`] splits; an eager load reads smaller
/// tensors two at a time instead ([`DcpCheckpoint::read_ahead`](super::DcpCheckpoint)).
pub(super) const PARALLEL_MIN: usize = 4 << 20;

/// Reads `dst` from `storage` at `from`: a large read in two halves on two
/// threads, as the zip and safetensors readers read a file's batch (what a
/// load of a file in the page cache gains from, `docs/performance.md`).
fn read_in_two(storage: &crate::UntypedStorage, from: usize, dst: &mut [u8]) -> Result<()> {
    if dst.len() < PARALLEL_MIN {
        return storage.read_at(from, dst);
    }
    let mid = dst.len() / 2;
    let (first, second) = dst.split_at_mut(mid);
    std::thread::scope(|s| {
        let other = s.spawn(|| storage.read_at(from + mid, second));
        let a = storage.read_at(from, first);
        let b = other
            .join()
            .unwrap_or_else(|_| Err(Error::Io(std::io::Error::other("a reader thread panicked"))));
        a.and(b)
    })
}

/// Copies `piece` (a box of extent `lens`, contiguous) into `dst` (a
/// contiguous array of shape `shape`) at `at`, one run of the last
/// dimension at a time.
fn scatter(dst: &mut [u8], shape: &[usize], at: &[usize], lens: &[usize], piece: &[u8], es: usize) {
    let n = shape.len();
    if n == 0 {
        dst.copy_from_slice(&piece[..dst.len()]);
        return;
    }
    let run = lens[n - 1] * es;
    if run == 0 {
        return;
    }
    // Row-major strides of `dst`, in bytes.
    let mut stride = vec![es; n];
    for d in (0..n - 1).rev() {
        stride[d] = stride[d + 1] * shape[d + 1];
    }
    let mut index = vec![0usize; n - 1];
    for src in piece.chunks_exact(run) {
        let start: usize = (0..n)
            .map(|d| (at[d] + index.get(d).copied().unwrap_or(0)) * stride[d])
            .sum();
        dst[start..start + run].copy_from_slice(src);
        // The next run: the outer index, as an odometer.
        for d in (0..n - 1).rev() {
            index[d] += 1;
            if index[d] < lens[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LoadOptions;

    /// Every region of `model.w` (12×4, saved by 4 ranks), read into a
    /// buffer, equals the same region of the whole tensor.
    #[test]
    fn regions_read_into_memory_are_the_tensors_parts() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dcp/four");
        let ckpt = DcpCheckpoint::open(dir, &LoadOptions::default()).unwrap();
        let whole = ckpt
            .read_tensor("model.w")
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for (offsets, sizes) in [
            ([0, 0], [12, 4]), // every chunk, whole rows
            ([2, 0], [7, 4]),  // across chunk boundaries, rows
            ([1, 1], [10, 2]), // columns: runs copied into place
            ([5, 3], [1, 1]),  // one element
            ([0, 0], [0, 4]),  // nothing
        ] {
            let mut bytes = vec![0u8; sizes[0] * sizes[1] * 4];
            if sizes[0] > 0 {
                ckpt.read_region_into("model.w", &offsets, &sizes, &mut bytes)
                    .unwrap();
            }
            let got: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
                .collect();
            let want: Vec<f32> = (0..sizes[0])
                .flat_map(|r| (0..sizes[1]).map(move |c| (r, c)))
                .map(|(r, c)| whole[(offsets[0] + r) * 4 + offsets[1] + c])
                .collect();
            assert_eq!(got, want, "{offsets:?} {sizes:?}");
        }
        // A buffer of the wrong size, and a region outside the tensor.
        let mut small = vec![0u8; 4];
        assert!(ckpt
            .read_region_into("model.w", &[0, 0], &[2, 2], &mut small)
            .is_err());
        assert!(ckpt
            .read_region_into("model.w", &[11, 0], &[2, 4], &mut [0u8; 32])
            .is_err());
    }
}
