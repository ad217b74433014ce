//! The strided index, stowage's one strided odometer: the storage offsets of
//! a layout's elements in row-major order ([`Offsets`]), or of several
//! layouts of one shape in lockstep (`StridedIndex`). Views, element loops and
//! the copy kernel all walk with it.

/// The strided odometer: walks the multi-indices of a shape in row-major
/// order and keeps, for each of `N` stride vectors, the storage offset of the
/// current element. With `N = 2` it walks two layouts of one shape in
/// lockstep (a copy's destination and source) at the cost of one odometer.
pub(crate) struct StridedIndex<'a, const N: usize> {
    shape: &'a [usize],
    strides: [&'a [usize]; N],
    /// The multi-index of the element whose offsets are `next`.
    index: Vec<usize>,
    next: [usize; N],
    remaining: usize,
}

impl<'a, const N: usize> StridedIndex<'a, N> {
    /// The offsets of the elements of `shape` under each of `strides`, from
    /// `offsets`. Every stride vector has `shape`'s length, and `shape`'s
    /// element count fits in `usize` (as for every [`Layout`](super::Layout)).
    pub(crate) fn new(shape: &'a [usize], strides: [&'a [usize]; N], offsets: [usize; N]) -> Self {
        debug_assert!(strides.iter().all(|s| s.len() == shape.len()));
        StridedIndex {
            shape,
            strides,
            index: vec![0; shape.len()],
            next: offsets,
            remaining: shape.iter().product(),
        }
    }
}

impl<const N: usize> Iterator for StridedIndex<'_, N> {
    type Item = [usize; N];

    #[inline]
    fn next(&mut self) -> Option<[usize; N]> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.next;
        // Advance the odometer from the last dimension. Wrapping: past the last
        // element the next offsets are never used, and a layout that does not
        // fit any storage may still be iterated.
        for d in (0..self.index.len()).rev() {
            self.index[d] += 1;
            for (next, stride) in self.next.iter_mut().zip(&self.strides) {
                *next = next.wrapping_add(stride[d]);
            }
            if self.index[d] < self.shape[d] {
                break;
            }
            for (next, stride) in self.next.iter_mut().zip(&self.strides) {
                *next = next.wrapping_sub(stride[d].wrapping_mul(self.index[d]));
            }
            self.index[d] = 0;
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<const N: usize> ExactSizeIterator for StridedIndex<'_, N> {}

/// Iterator over the storage offsets of a layout's elements, in row-major
/// order ([`Layout::offsets`](super::Layout::offsets)).
pub struct Offsets<'a>(StridedIndex<'a, 1>);

impl<'a> Offsets<'a> {
    pub(crate) fn new(shape: &'a [usize], stride: &'a [usize], offset: usize) -> Self {
        Offsets(StridedIndex::new(shape, [stride], [offset]))
    }
}

impl Iterator for Offsets<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        self.0.next().map(|[o]| o)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for Offsets<'_> {}

#[cfg(test)]
mod tests {
    use super::{Offsets, StridedIndex};
    use crate::layout::Layout;

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

    #[test]
    fn offsets_of_raw_parts_know_their_length() {
        let o = Offsets::new(&[2, 2], &[10, 3], 7);
        assert_eq!(o.len(), 4);
        assert_eq!(o.collect::<Vec<_>>(), vec![7, 10, 17, 20]);
    }

    #[test]
    fn strided_index_walks_layouts_in_lockstep() {
        let pairs: Vec<[usize; 2]> =
            StridedIndex::new(&[2, 3], [&[3, 1], &[1, 2]], [0, 100]).collect();
        assert_eq!(
            pairs,
            vec![[0, 100], [1, 102], [2, 104], [3, 101], [4, 103], [5, 105]]
        );
    }
}
