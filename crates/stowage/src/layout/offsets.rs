//! The strided index: the storage offsets of a layout's elements in
//! row-major order, as an iterator.

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
    /// in `usize` (as for every [`Layout`](super::Layout)).
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

#[cfg(test)]
mod tests {
    use super::Offsets;
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
}
