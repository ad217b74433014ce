//! Every chunk of a parsed `.metadata`, flat: offsets and sizes in one
//! array, storage in another, each file name and each list of transforms
//! stored once. A chunk costs 32 bytes and its dimensions (a 2-d chunk 64
//! bytes in all), where a chunk of its own with vectors and strings cost
//! about 250.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Chunk, StorageRef};

/// A chunk's storage, its file and transforms by number.
#[derive(Clone, Copy, Debug)]
struct Stored {
    file: u32,
    transforms: u32,
    offset: u64,
    length: u64,
}

/// The chunks of one `.metadata`, in the order of its tensors.
#[derive(Debug, Default)]
pub(super) struct ChunkTable {
    /// Each chunk's offsets then its sizes, `2 × ndim` values a chunk.
    dims: Vec<usize>,
    /// Where each chunk's dimensions start in `dims`.
    dims_at: Vec<usize>,
    stored: Vec<Stored>,
    files: Vec<String>,
    /// Distinct lists of transforms; the first is empty.
    transforms: Vec<Vec<String>>,
}

impl ChunkTable {
    pub(super) fn file_count(&self) -> usize {
        self.files.len()
    }

    pub(super) fn file(&self, id: u32) -> &str {
        &self.files[id as usize]
    }

    /// Chunk `i`, of `ndim` dimensions.
    fn chunk(&self, i: usize, ndim: usize) -> Chunk<'_> {
        let at = self.dims_at[i];
        let s = self.stored[i];
        Chunk {
            offsets: &self.dims[at..at + ndim],
            sizes: &self.dims[at + ndim..at + 2 * ndim],
            storage: StorageRef {
                relative_path: &self.files[s.file as usize],
                offset: s.offset,
                length: s.length,
                transforms: &self.transforms[s.transforms as usize],
            },
        }
    }
}

/// A tensor's chunks: a range of a shared table, each chunk of `ndim`
/// dimensions. `Debug` lists its own chunks, not the table.
#[derive(Clone)]
pub(super) struct Span {
    table: Arc<ChunkTable>,
    first: usize,
    len: usize,
    ndim: usize,
}

impl std::fmt::Debug for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries((0..self.len).map(|i| self.at(i)))
            .finish()
    }
}

impl Span {
    pub(super) fn new(table: Arc<ChunkTable>, first: usize, len: usize, ndim: usize) -> Span {
        debug_assert!(first + len <= table.stored.len());
        Span {
            table,
            first,
            len,
            ndim,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn table(&self) -> &Arc<ChunkTable> {
        &self.table
    }

    /// Chunk `i` of the span (`i < len`).
    pub(super) fn at(&self, i: usize) -> Chunk<'_> {
        self.table.chunk(self.first + i, self.ndim)
    }

    pub(super) fn get(&self, i: usize) -> Option<Chunk<'_>> {
        (i < self.len).then(|| self.at(i))
    }

    /// The file number of each chunk.
    pub(super) fn file_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.table.stored[self.first..self.first + self.len]
            .iter()
            .map(|s| s.file)
    }
}

/// Builds a [`ChunkTable`], chunk by chunk.
#[derive(Debug)]
pub(super) struct Builder {
    table: ChunkTable,
    file_ids: HashMap<String, u32>,
    transform_ids: HashMap<Vec<String>, u32>,
}

impl Default for Builder {
    /// Empty, with the empty list of transforms as number 0.
    fn default() -> Builder {
        Builder {
            table: ChunkTable {
                transforms: vec![Vec::new()],
                ..ChunkTable::default()
            },
            file_ids: HashMap::new(),
            transform_ids: HashMap::new(),
        }
    }
}

impl Builder {
    /// Chunks pushed so far.
    pub(super) fn len(&self) -> usize {
        self.table.stored.len()
    }

    /// Room for `n` more chunks of `dims` dimensions in all.
    pub(super) fn reserve(&mut self, n: usize, dims: usize) {
        self.table.stored.reserve(n);
        self.table.dims_at.reserve(n);
        self.table.dims.reserve(dims);
    }

    /// The number of file `name`, stored once.
    pub(super) fn file_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.file_ids.get(name) {
            return id;
        }
        let id = self.table.files.len() as u32;
        self.table.files.push(name.to_owned());
        self.file_ids.insert(name.to_owned(), id);
        id
    }

    /// The number of the list of transforms `t`, stored once.
    pub(super) fn transforms_id(&mut self, t: &[String]) -> u32 {
        if t.is_empty() {
            return 0;
        }
        if let Some(&id) = self.transform_ids.get(t) {
            return id;
        }
        let id = self.table.transforms.len() as u32;
        self.table.transforms.push(t.to_vec());
        self.transform_ids.insert(t.to_vec(), id);
        id
    }

    /// Appends a chunk whose file and transforms are already numbered.
    pub(super) fn push_ids(
        &mut self,
        offsets: &[usize],
        sizes: &[usize],
        file: u32,
        transforms: u32,
        offset: u64,
        length: u64,
    ) {
        let t = &mut self.table;
        t.dims_at.push(t.dims.len());
        t.dims.extend_from_slice(offsets);
        t.dims.extend_from_slice(sizes);
        t.stored.push(Stored {
            file,
            transforms,
            offset,
            length,
        });
    }

    /// Appends a chunk.
    #[cfg(test)]
    pub(super) fn push(&mut self, offsets: &[usize], sizes: &[usize], info: StorageRef<'_>) {
        let file = self.file_id(info.relative_path);
        let transforms = self.transforms_id(info.transforms);
        self.push_ids(offsets, sizes, file, transforms, info.offset, info.length);
    }

    pub(super) fn finish(self) -> ChunkTable {
        self.table
    }
}
