//! An interval index of each tensor's chunks, so that finding the chunks a
//! region meets (a rank's shard, a `StorageReader` item) costs a binary
//! search and the chunks that overlap it along the first dimension, not a
//! scan of every chunk (`.metadata` of a large job has millions; issue 44).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::metadata::{DcpMetadata, ItemKind, TensorMeta};
use crate::error::FormatError;
use crate::{Error, Result};

/// One tensor's chunks ordered by where they start in the first dimension,
/// with the furthest end reached so far in that order.
#[derive(Debug, Default)]
struct ChunkIndex {
    /// Indices into the tensor's `chunks`, by `offsets[0]`.
    order: Vec<u32>,
    /// `max_end[i]`: the largest `offsets[0] + sizes[0]` among `order[..=i]`
    /// (non-decreasing, so a binary search finds where ends pass a bound).
    max_end: Vec<usize>,
}

impl ChunkIndex {
    fn new(meta: &TensorMeta) -> ChunkIndex {
        let spans: Vec<(usize, usize)> = meta
            .chunks()
            .map(|c| {
                let start = c.offsets.first().copied().unwrap_or(0);
                (
                    start,
                    start.saturating_add(c.sizes.first().copied().unwrap_or(1)),
                )
            })
            .collect();
        let span = |i: u32| spans[i as usize];
        let count = u32::try_from(meta.chunk_count()).unwrap_or(u32::MAX);
        let mut order: Vec<u32> = (0..count).collect();
        order.sort_by_key(|&i| span(i).0);
        let mut furthest = 0;
        let max_end = order
            .iter()
            .map(|&i| {
                furthest = furthest.max(span(i).1);
                furthest
            })
            .collect();
        ChunkIndex { order, max_end }
    }

    /// The chunks whose first-dimension extent meets `lo..hi`, and perhaps
    /// a few more that the caller's intersection drops, in metadata order.
    fn candidates(&self, meta: &TensorMeta, lo: usize, hi: usize) -> Vec<usize> {
        // Chunks before `first` all end at or before `lo`; from `last` on,
        // all start at or after `hi`.
        let first = self.max_end.partition_point(|&end| end <= lo);
        let last = self.order.partition_point(|&i| {
            meta.chunk(i as usize)
                .and_then(|c| c.offsets.first().copied())
                .unwrap_or(0)
                < hi
        });
        let mut out: Vec<usize> = self
            .order
            .get(first..last.max(first))
            .unwrap_or(&[])
            .iter()
            .map(|&i| i as usize)
            .collect();
        out.sort_unstable();
        out
    }
}

/// The chunks' parts must tile the region: pairwise disjoint, and as many
/// elements together as the region holds. Only parts whose extents meet
/// along one dimension can overlap, so the parts are swept in order of
/// where they start along the dimension where their starts differ most,
/// each compared with those still open there: O(P log P) for row or column
/// shards, not every pair (a whole tensor of a large job has many chunks).
pub(super) fn check_cover(fqn: &str, parts: &[Vec<(usize, usize)>], wanted: usize) -> Result<()> {
    let covered = parts.iter().fold(0usize, |n, p| {
        n.saturating_add(p.iter().map(|r| r.1).product())
    });
    let dims = parts.first().map_or(0, Vec::len);
    let spread = |d: usize| {
        let mut starts: Vec<usize> = parts.iter().map(|p| p[d].0).collect();
        starts.sort_unstable();
        starts.dedup();
        starts.len()
    };
    let overlap = |a: &[(usize, usize)], b: &[(usize, usize)]| {
        a.iter()
            .zip(b)
            .all(|(x, y)| x.0.max(y.0) < (x.0 + x.1).min(y.0 + y.1))
    };
    let overlapping = || {
        Error::Format(FormatError::BadObject {
            context: "DCP chunks",
            expected: "chunks that do not overlap",
            found: format!("{fqn}: two chunks hold the same elements"),
        })
    };
    if dims == 0 {
        if parts.len() > 1 {
            return Err(overlapping());
        }
    } else {
        let d = (0..dims).max_by_key(|&d| spread(d)).unwrap_or(0);
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by_key(|&i| parts[i][d].0);
        let mut open: Vec<usize> = Vec::new();
        for i in order {
            let start = parts[i][d].0;
            open.retain(|&j| parts[j][d].0 + parts[j][d].1 > start);
            if open.iter().any(|&j| overlap(&parts[i], &parts[j])) {
                return Err(overlapping());
            }
            open.push(i);
        }
    }
    if covered != wanted && wanted > 0 {
        return Err(Error::Format(FormatError::BadObject {
            context: "DCP chunks",
            expected: "chunks covering the whole region",
            found: format!("{fqn}: {covered} of {wanted} elements stored"),
        }));
    }
    Ok(())
}

/// The indexes of a checkpoint's tensors, built on first use.
#[derive(Debug, Default)]
pub(super) struct Indexes(OnceLock<HashMap<String, ChunkIndex>>);

impl Indexes {
    /// The indices of `fqn`'s chunks (of `meta`) that may meet the region
    /// starting at `offsets` of extent `sizes`, in metadata order: every
    /// chunk that does, and only those whose first-dimension extent does.
    pub(super) fn candidates(
        &self,
        metadata: &DcpMetadata,
        fqn: &str,
        meta: &TensorMeta,
        offsets: &[usize],
        sizes: &[usize],
    ) -> Vec<usize> {
        let (Some(&lo), Some(&n)) = (offsets.first(), sizes.first()) else {
            // A 0-d tensor: its one chunk, if any.
            return (0..meta.chunk_count()).collect();
        };
        let all = self.0.get_or_init(|| {
            metadata
                .items
                .iter()
                .filter_map(|item| match &item.kind {
                    ItemKind::Tensor(t) => Some((item.fqn.clone(), ChunkIndex::new(t))),
                    ItemKind::Bytes(_) => None,
                })
                .collect()
        });
        match all.get(fqn) {
            Some(index) => index.candidates(meta, lo, lo.saturating_add(n)),
            None => (0..meta.chunk_count()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::format::dcp::metadata::{tensor_for_test, StorageInfo};
    use crate::DType;

    type Spec = (Vec<usize>, Vec<usize>);

    fn chunk(offsets: &[usize], sizes: &[usize]) -> Spec {
        (offsets.to_vec(), sizes.to_vec())
    }

    fn tensor(chunks: &[Spec]) -> TensorMeta {
        let info = StorageInfo {
            relative_path: "f".into(),
            offset: 0,
            length: 0,
            transforms: Vec::new(),
        };
        let chunks: Vec<(&[usize], &[usize], StorageInfo)> = chunks
            .iter()
            .map(|(o, s)| (&o[..], &s[..], info.clone()))
            .collect();
        tensor_for_test(DType::Float32, &[24, 4], &chunks)
    }

    /// Overlaps are found whichever dimension the sweep runs along, and a
    /// tiling passes.
    #[test]
    fn the_cover_check_finds_overlaps_and_passes_tilings() {
        let rows: Vec<Vec<(usize, usize)>> = (0..8).map(|r| vec![(r * 3, 3), (0, 4)]).collect();
        assert!(check_cover("t", &rows, 96).is_ok());
        let grid: Vec<Vec<(usize, usize)>> = (0..6)
            .flat_map(|r| (0..2).map(move |c| vec![(r * 4, 4), (c * 2, 2)]))
            .collect();
        assert!(check_cover("t", &grid, 96).is_ok());
        let mut bad = grid.clone();
        bad.push(vec![(5, 1), (1, 2)]); // inside two blocks
        assert!(check_cover("t", &bad, 98)
            .unwrap_err()
            .to_string()
            .contains("overlap"));
        let mut cols: Vec<Vec<(usize, usize)>> = (0..4).map(|c| vec![(0, 24), (c, 1)]).collect();
        assert!(check_cover("t", &cols, 96).is_ok());
        cols[3] = vec![(0, 24), (2, 1)];
        assert!(check_cover("t", &cols, 96).is_err());
        let short: Vec<Vec<(usize, usize)>> = (0..7).map(|r| vec![(r * 3, 3), (0, 4)]).collect();
        assert!(check_cover("t", &short, 96)
            .unwrap_err()
            .to_string()
            .contains("84 of 96"));
    }

    /// Against a scan of every chunk, for row shards, column shards and a
    /// grid of blocks, on every region of rows: the same chunks, in order.
    #[test]
    fn candidates_hold_every_chunk_a_scan_finds() {
        let rows: Vec<Spec> = (0..8).rev().map(|r| chunk(&[r * 3, 0], &[3, 4])).collect();
        let cols: Vec<Spec> = (0..4).map(|c| chunk(&[0, c], &[24, 1])).collect();
        let grid: Vec<Spec> = (0..6)
            .flat_map(|r| (0..2).map(move |c| chunk(&[r * 4, c * 2], &[4, 2])))
            .collect();
        for chunks in [rows, cols, grid] {
            let meta = tensor(&chunks);
            let index = ChunkIndex::new(&meta);
            for lo in 0..24 {
                for n in 1..=24 - lo {
                    let scan: Vec<usize> = (0..meta.chunk_count())
                        .filter(|&i| {
                            super::super::intersect(&meta.chunk(i).unwrap(), &[lo, 0], &[n, 4])
                                .is_some()
                        })
                        .collect();
                    let got: Vec<usize> = index
                        .candidates(&meta, lo, lo + n)
                        .into_iter()
                        .filter(|&i| {
                            super::super::intersect(&meta.chunk(i).unwrap(), &[lo, 0], &[n, 4])
                                .is_some()
                        })
                        .collect();
                    assert_eq!(got, scan, "{lo}..{}", lo + n);
                }
            }
            // Row shards: a region of one chunk's rows meets only it.
            if meta.chunk(0).unwrap().sizes[1] == 4 {
                assert_eq!(index.candidates(&meta, 3, 6).len(), 1);
            }
        }
    }
}
