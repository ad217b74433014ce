//! Reading a tensor's logical bytes without holding its file: contiguous
//! tensors on lazily loaded storages are read window by window straight from
//! the file (`UntypedStorage::read_at`), so hashing or comparing a large
//! checkpoint needs a window of memory, not the checkpoint's size.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use stowage::checkpoint::TensorObject;
use stowage::StorageError;
use stowage::Tensor;

/// Bytes read at a time.
pub const WINDOW: usize = 8 << 20;

/// A tensor's logical elements (row-major, contiguous, little-endian; the lazy
/// conjugation and negation applied), read a window at a time.
///
/// A contiguous tensor without lazy bits is read from its storage, which a
/// lazily loaded storage serves from its file without keeping anything; any
/// other tensor is made contiguous first, in memory.
pub struct Reader {
    tensor: Tensor,
    start: usize,
    len: usize,
    at: usize,
    buf: Vec<u8>,
}

impl Reader {
    /// A reader of `object`'s logical elements.
    ///
    /// # Errors
    /// [`StorageError::NoData`](stowage::StorageError::NoData) for meta tensors; what making a copy gave.
    pub fn new(object: &TensorObject) -> Result<Reader, stowage::Error> {
        let t = &object.tensor;
        if !t.has_data() {
            return Err(stowage::Error::Storage(StorageError::NoData {
                op: "reading tensor bytes",
                device: t.device(),
            }));
        }
        let tensor = if !object.conj && !object.neg && t.is_contiguous() {
            t.clone()
        } else {
            object.resolved()?.contiguous()?
        };
        let size = tensor.element_size().max(1);
        let step = (WINDOW / size).max(1) * size;
        // Packed dtypes (`quint4x2`, `quint2x4`) hold several elements a byte:
        // their integer representation is the packed bytes, as PyTorch's `int_repr()`.
        let per_byte = tensor.dtype().elements_per_byte();
        let len = tensor.numel().div_ceil(per_byte) * tensor.element_size();
        Ok(Reader {
            start: tensor.storage_offset() / per_byte * tensor.element_size(),
            len,
            at: 0,
            buf: vec![0u8; len.min(step)],
            tensor,
        })
    }

    /// The next window (a whole number of elements), or `None` at the end.
    ///
    /// # Errors
    /// What reading the storage gave.
    pub fn next_window(&mut self) -> Result<Option<&[u8]>, stowage::Error> {
        if self.at >= self.len {
            return Ok(None);
        }
        let n = (self.len - self.at).min(self.buf.len());
        self.tensor
            .untyped_storage()
            .read_at(self.start + self.at, &mut self.buf[..n])?;
        self.at += n;
        Ok(Some(&self.buf[..n]))
    }
}

/// Calls `f` with the tensor's logical elements in windows of at most
/// [`WINDOW`] bytes (see [`Reader`]).
///
/// # Errors
/// What reading gave (meta tensors: [`StorageError::NoData`](stowage::StorageError::NoData)), or `f`'s error.
pub fn for_each_window<E: From<stowage::Error>>(
    object: &TensorObject,
    mut f: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut reader = Reader::new(object)?;
    while let Some(w) = reader.next_window()? {
        f(w)?;
    }
    Ok(())
}

/// SHA-256 of the tensor's logical elements (the empty string's hash when it
/// has none); `progress` is told each window's size.
///
/// # Errors
/// As [`for_each_window`].
pub fn digest(object: &TensorObject, progress: impl Fn(u64)) -> Result<[u8; 32], stowage::Error> {
    let mut h = Sha256::new();
    for_each_window(object, |w| {
        h.update(w);
        progress(w.len() as u64);
        Ok::<_, stowage::Error>(())
    })?;
    Ok(h.finalize().into())
}

/// The [`digest`] of each tensor given (`None` where none is given), in
/// order, computed on every core: the tensors, largest first, go to one
/// thread per core as each finishes the one before (SHA-256 itself is
/// sequential within a tensor). `progress` is told each window's size, from
/// any of the threads.
pub fn digest_all(
    objects: &[Option<&TensorObject>],
    progress: impl Fn(u64) + Sync,
) -> Vec<Result<Option<[u8; 32]>, stowage::Error>> {
    let mut order: Vec<usize> = (0..objects.len())
        .filter(|&i| objects[i].is_some())
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(objects[i].map_or(0, |o| o.tensor.nbytes())));
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(order.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let slots: Vec<OnceLock<Result<[u8; 32], stowage::Error>>> =
        (0..objects.len()).map(|_| OnceLock::new()).collect();
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(&i) = order.get(k) else { break };
        if let Some(object) = objects[i] {
            let _ = slots[i].set(digest(object, &progress));
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    slots
        .into_iter()
        .map(|slot| slot.into_inner().transpose())
        .collect()
}

/// Hex SHA-256 of the tensor's logical elements (see [`digest`]).
///
/// # Errors
/// As [`for_each_window`].
pub fn sha256(object: &TensorObject, progress: impl Fn(u64)) -> Result<String, stowage::Error> {
    digest(object, progress).map(hex::encode)
}
