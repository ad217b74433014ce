//! Density and self-overlap of a layout, as c10 computes them: whether the
//! elements fill a block of storage exactly once in some order
//! ([`Layout::is_non_overlapping_and_dense`]), whether a layout reaches one
//! element twice ([`Layout::internal_overlap`], ATen's `has_internal_overlap`),
//! and the strides a copy "preserving the format" gets
//! ([`Layout::preserve_format_strides`], ATen's `empty_like` rule).

use super::Layout;

/// Whether a layout reaches one storage element from two indices (ATen's
/// `MemOverlap`). Deciding it in general is hard, so, as ATen, only the
/// cheap cases are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemOverlap {
    /// Every element has its own storage element (the layout is non-overlapping and dense).
    No,
    /// A dimension of size above 1 has stride 0 (an expanded layout).
    Yes,
    /// Not decided (ATen's `TooHard`): writes go ahead.
    TooHard,
}

impl Layout {
    /// c10's `is_non_overlapping_and_dense`: the strides, sorted, are the
    /// contiguous strides of the sizes in that order (dimensions of size 0 or
    /// 1 do not count), so the elements cover `numel` consecutive storage
    /// elements once each.
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        let (shape, stride) = (self.shape(), self.stride());
        if shape.len() == 1 {
            return shape[0] < 2 || stride[0] == 1;
        }
        let mut order: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] >= 2).collect();
        order.sort_by_key(|&d| stride[d]);
        let mut required = 1usize;
        for d in order {
            if stride[d] != required {
                return false;
            }
            required = required.saturating_mul(shape[d]);
        }
        true
    }

    /// ATen's `has_internal_overlap`: whether two elements share a storage element.
    pub fn internal_overlap(&self) -> MemOverlap {
        if self.is_non_overlapping_and_dense() {
            MemOverlap::No
        } else if self
            .shape()
            .iter()
            .zip(self.stride())
            .any(|(&size, &stride)| stride == 0 && size > 1)
        {
            MemOverlap::Yes
        } else {
            MemOverlap::TooHard
        }
    }

    /// The layout of a new tensor made like this one with PyTorch's
    /// `preserve_format` ([`preserve_format_strides`](Self::preserve_format_strides)),
    /// at offset 0: dense, in this layout's order of dimensions.
    pub(crate) fn like_dense(&self) -> crate::Result<Layout> {
        Layout::new(self.shape(), &self.preserve_format_strides(), 0)
    }

    /// The strides of a new tensor made like this one with PyTorch's
    /// `preserve_format` (`empty_like`, `zeros_like`, `clone`, `to`): this
    /// layout's own strides when it is non-overlapping and dense, else dense
    /// strides in the same order of dimensions (ATen's `infer_dense_strides`).
    pub fn preserve_format_strides(&self) -> Vec<usize> {
        if self.is_non_overlapping_and_dense() {
            return self.stride().to_vec();
        }
        infer_dense_strides(self.shape(), self.stride())
    }
}

/// ATen's `infer_dense_strides`: dense strides whose order of dimensions
/// follows `stride` (smallest stride innermost; a tie goes to the smaller
/// size, then to the later dimension; stride-0 dimensions keep their place
/// as in a contiguous tensor).
fn infer_dense_strides(shape: &[usize], stride: &[usize]) -> Vec<usize> {
    let n = shape.len();
    // perm[0] is the innermost dimension; it starts as the contiguous order.
    let mut perm: Vec<usize> = (0..n).rev().collect();
    // Whether `d0` should go after `d1`: Some(true) yes, Some(false) no and
    // stop, None ambiguous (keep going).
    let should_swap = |d0: usize, d1: usize| -> Option<bool> {
        let (s0, s1) = (stride[d0], stride[d1]);
        if s0 == 0 || s1 == 0 {
            None
        } else if s0 != s1 {
            Some(s0 > s1)
        } else if shape[d0] > shape[d1] {
            Some(true)
        } else {
            None
        }
    };
    // ATen's stable insertion sort.
    for i in 1..n {
        let mut d1 = i;
        for j in 1..=i {
            let d0 = i - j;
            match should_swap(perm[d0], perm[d1]) {
                Some(true) => {
                    perm.swap(d0, d1);
                    d1 = d0;
                }
                Some(false) => break,
                None => {}
            }
        }
    }
    let mut out = vec![0usize; n];
    let mut current = 1usize;
    for &d in &perm {
        out[d] = current;
        if shape[d] > 1 {
            current = current.saturating_mul(shape[d]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(shape: &[usize], stride: &[usize]) -> Layout {
        Layout::new(shape, stride, 0).unwrap()
    }

    /// Shape, stride, whether dense, and the strides `empty_like` gives.
    type Case = (&'static [usize], &'static [usize], bool, &'static [usize]);

    /// Each case as PyTorch 2.15 answers `torch.empty_like(x).stride()` and
    /// `x.is_non_overlapping_and_dense()`.
    #[test]
    fn preserve_format_follows_aten() {
        let cases: &[Case] = &[
            (&[4, 3], &[1, 4], true, &[1, 4]),
            (&[4, 2], &[4, 2], false, &[2, 1]),
            (&[3, 4], &[1, 0], false, &[4, 1]),
            (&[4, 3], &[1, 0], false, &[3, 1]),
            (&[4, 2, 3], &[1, 12, 4], true, &[1, 12, 4]),
            (&[4, 1, 3], &[1, 4, 4], true, &[1, 4, 4]),
            (&[3], &[1], true, &[1]),
            (&[2, 2], &[1, 4], false, &[1, 2]),
            (&[2, 3, 2], &[2, 4, 12], false, &[1, 2, 6]),
            (&[], &[], true, &[]),
            (&[3, 0], &[1, 3], true, &[1, 3]),
            (&[3, 1, 4], &[4, 100, 1], true, &[4, 100, 1]),
            (
                &[6, 5, 4, 3, 2],
                &[6, 0, 120, 0, 1],
                false,
                &[6, 36, 180, 2, 1],
            ),
            (&[2, 3], &[1, 1], false, &[1, 2]),
            (&[3], &[2], false, &[1]),
        ];
        for &(shape, stride, dense, want) in cases {
            let x = l(shape, stride);
            assert_eq!(
                x.is_non_overlapping_and_dense(),
                dense,
                "{shape:?} {stride:?}"
            );
            assert_eq!(x.preserve_format_strides(), want, "{shape:?} {stride:?}");
        }
    }

    #[test]
    fn internal_overlap_is_decided_only_when_cheap() {
        assert_eq!(l(&[3, 2], &[2, 1]).internal_overlap(), MemOverlap::No);
        assert_eq!(l(&[3, 2], &[0, 1]).internal_overlap(), MemOverlap::Yes);
        assert_eq!(l(&[1, 2], &[0, 1]).internal_overlap(), MemOverlap::No);
        assert_eq!(l(&[3], &[2]).internal_overlap(), MemOverlap::TooHard);
        // Overlapping windows without a zero stride: too hard, as in ATen.
        assert_eq!(l(&[2, 3], &[1, 1]).internal_overlap(), MemOverlap::TooHard);
    }
}
