//! A tensor's content, whatever its container: its logical elements (row
//! major, little-endian, the lazy conjugation and negation applied) read a
//! window at a time, their SHA-256 (the `sha256` of `stowage inspect --json`
//! and of content manifests, `docs/manifest.md`), and a load's check of its
//! tensors against the digests a manifest expects ([`Expected`],
//! [`LoadOptions::with_expected`](crate::LoadOptions::with_expected)).
//!
//! Contiguous tensors on lazily loaded storages are read window by window
//! straight from the file (`UntypedStorage::read_at`), so hashing a large
//! checkpoint needs a window of memory, not the checkpoint's size.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::checkpoint::value::graph::{dotted, Checkpoint, TensorObject};
use crate::checkpoint::value::kind::TensorKind;
use crate::error::{CheckpointError, ErrorContext, FormatError, StorageError};
use crate::{Error, Result, Tensor, UntypedStorage};
use sha2::{Digest, Sha256};

mod parallel;
mod sha256x16;
mod sha256x2;
pub(crate) mod written;
pub use parallel::digest_all;
pub use written::{WrittenDigest, WrittenDigests};

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
    /// [`StorageError::NoData`] for meta tensors; what making a copy gave.
    pub fn new(object: &TensorObject) -> Result<Reader, crate::Error> {
        let t = &object.tensor;
        if !t.has_data() {
            return Err(crate::Error::Storage(StorageError::NoData {
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
        let (start, len) = logical_span(&tensor);
        Ok(Reader {
            start,
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
    pub fn next_window(&mut self) -> Result<Option<&[u8]>, crate::Error> {
        let n = self.fill()?;
        Ok((n > 0).then(|| &self.buf[..n]))
    }

    /// Bytes `range` of the window read last.
    fn window(&self, range: std::ops::Range<usize>) -> &[u8] {
        &self.buf[range]
    }

    /// Reads the next window into the buffer: its length, 0 at the end.
    fn fill(&mut self) -> Result<usize, crate::Error> {
        if self.at >= self.len {
            return Ok(0);
        }
        let n = (self.len - self.at).min(self.buf.len());
        self.tensor
            .untyped_storage()
            .read_at(self.start + self.at, &mut self.buf[..n])?;
        self.at += n;
        Ok(n)
    }
}

/// How many bytes a tensor's digest hashes: its elements' (packed dtypes,
/// several elements a byte: the packed bytes), whatever its strides.
pub fn logical_len(tensor: &Tensor) -> usize {
    let per_byte = tensor.dtype().elements_per_byte();
    tensor.numel().div_ceil(per_byte) * tensor.element_size()
}

/// Where a contiguous tensor's logical elements lie in its storage: the
/// byte offset and length. Packed dtypes (`quint4x2`, `quint2x4`) hold
/// several elements a byte: their integer representation is the packed
/// bytes, as PyTorch's `int_repr()`.
pub(crate) fn logical_span(tensor: &Tensor) -> (usize, usize) {
    let per_byte = tensor.dtype().elements_per_byte();
    let len = logical_len(tensor);
    (
        tensor.storage_offset() / per_byte * tensor.element_size(),
        len,
    )
}

/// Where `object`'s logical elements lie in its storage, when they are one
/// range of it as they are (strided, contiguous, no lazy conjugation or
/// negation): the bytes [`Reader`] would read.
pub(crate) fn logical_range(object: &TensorObject) -> Option<(usize, usize)> {
    let t = &object.tensor;
    let plain = !object.conj && !object.neg && object.kind().is_strided();
    (plain && t.has_data() && t.is_contiguous()).then(|| logical_span(t))
}

/// Calls `f` with the tensor's logical elements in windows of at most
/// [`WINDOW`] bytes (see [`Reader`]).
///
/// # Errors
/// What reading gave (meta tensors: [`StorageError::NoData`]), or `f`'s error.
pub fn for_each_window<E: From<crate::Error>>(
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
pub fn digest(object: &TensorObject, progress: impl Fn(u64)) -> Result<[u8; 32], crate::Error> {
    let mut h = Sha256::new();
    for_each_window(object, |w| {
        h.update(w);
        progress(w.len() as u64);
        Ok::<_, crate::Error>(())
    })?;
    Ok(h.finalize().into())
}

/// Hex SHA-256 of the tensor's logical elements (see [`digest`]).
///
/// # Errors
/// As [`for_each_window`].
pub fn sha256(object: &TensorObject, progress: impl Fn(u64)) -> Result<String, crate::Error> {
    digest(object, progress).map(hex::encode)
}

/// A digest that differs from the manifest's, at the tensor's path.
fn content_mismatch(name: &str, want: &[u8; 32], found: &[u8; 32]) -> Error {
    Error::Format(FormatError::ContentMismatch {
        name: name.to_owned(),
        expected: format!("sha256 {}", hex::encode(want)),
        found: format!("sha256 {}", hex::encode(found)),
    })
    .at_path(name.to_owned())
}

/// A tensor of a lazily loaded storage, to check when its bytes are read:
/// its place in them, and what the manifest lists for it. It holds no
/// tensor (the storage holds the check: a tensor would keep the storage
/// alive through itself).
struct Pending {
    name: String,
    /// Its logical elements' bytes, when they are one range of the storage.
    range: Option<(usize, usize)>,
    dtype: crate::DType,
    layout: crate::layout::Layout,
    conj: bool,
    neg: bool,
    sha256: [u8; 32],
}

/// Checks the tensors `pending` of one storage against its whole `bytes`,
/// just read: a contiguous tensor's range is hashed as it lies; any other
/// is rebuilt on a copy of the bytes and hashed as [`digest`] does.
fn check_bytes(pending: &[Pending], bytes: &[u8]) -> Result<()> {
    for p in pending {
        let digest: [u8; 32] = match p.range {
            Some((start, len)) => {
                let range = bytes.get(start..start + len).ok_or(Error::Storage(
                    StorageError::StorageRange {
                        offset: start,
                        len,
                        nbytes: bytes.len(),
                    },
                ))?;
                Sha256::digest(range).into()
            }
            None => {
                let storage = crate::UntypedStorage::from_bytes(bytes)?;
                let tensor = Tensor::from_parts(storage, p.dtype, p.layout.clone())?;
                let mut object = TensorObject::new(tensor);
                object.conj = p.conj;
                object.neg = p.neg;
                digest(&object, |_| ())?
            }
        };
        if digest != p.sha256 {
            return Err(content_mismatch(&p.name, &p.sha256, &digest));
        }
    }
    Ok(())
}

/// The content a manifest says a checkpoint holds (`stowage manifest`'s
/// JSON, `docs/manifest.md`): each tensor's dtype, shape and digest by name,
/// for a load to check what it reads against
/// ([`LoadOptions::with_expected`](crate::LoadOptions::with_expected)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    tensors: BTreeMap<String, ExpectedTensor>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ExpectedTensor {
    dtype: String,
    shape: Vec<usize>,
    sha256: [u8; 32],
}

impl Expected {
    /// The tensors a manifest lists, from its JSON text.
    ///
    /// # Errors
    /// [`FormatError::BadObject`]: not a manifest of the `stowage-manifest/1`
    /// format, or an entry without its fields, or a name listed twice.
    pub fn from_manifest_json(text: &str) -> Result<Expected> {
        let bad = |found: String| {
            Error::Format(FormatError::BadObject {
                context: "content manifest",
                expected: "stowage manifest's JSON (stowage-manifest/1)",
                found,
            })
        };
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("invalid JSON: {e}")))?;
        if doc["format"] != "stowage-manifest/1" {
            return Err(bad(format!("format {}", doc["format"])));
        }
        let entries = doc["tensors"]
            .as_array()
            .ok_or_else(|| bad("no \"tensors\" list".into()))?;
        let mut tensors = BTreeMap::new();
        for e in entries {
            let name = e["name"]
                .as_str()
                .ok_or_else(|| bad(format!("an entry {e}")))?;
            let dtype = e["dtype"]
                .as_str()
                .ok_or_else(|| bad(format!("an entry {e}")))?;
            let shape = e["shape"]
                .as_array()
                .and_then(|s| {
                    s.iter()
                        .map(|n| n.as_u64().and_then(|n| usize::try_from(n).ok()))
                        .collect()
                })
                .ok_or_else(|| bad(format!("an entry {e}")))?;
            let mut sha256 = [0u8; 32];
            e["sha256"]
                .as_str()
                .and_then(|h| hex::decode_to_slice(h, &mut sha256).ok())
                .ok_or_else(|| bad(format!("an entry {e}")))?;
            let entry = ExpectedTensor {
                dtype: dtype.to_owned(),
                shape,
                sha256,
            };
            if tensors.insert(name.to_owned(), entry).is_some() {
                return Err(bad(format!("{name:?} listed twice")));
            }
        }
        Ok(Expected { tensors })
    }

    /// How many tensors the manifest lists.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether the manifest lists no tensor.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Checks every tensor of `ckpt` against the manifest, the digests
    /// computed on every core: each must be listed, with its dtype, shape and
    /// digest, and every tensor listed must be there.
    ///
    /// # Errors
    /// [`FormatError::ContentMismatch`] for the first tensor (in name order)
    /// that differs, is not listed or is missing, in [`Error::AtPath`];
    /// [`CheckpointError::Unsupported`] for a sparse or nested tensor
    /// (`stowage verify --manifest` checks those); what reading a tensor gave.
    pub fn check(&self, ckpt: &Checkpoint) -> Result<()> {
        let found = self.check_listing(ckpt)?;
        self.check_digests(&found)
    }

    /// Checks a lazily loaded `ckpt` against the manifest: the names,
    /// dtypes and shapes now, and each storage's tensors' digests when the
    /// storage is first read (a window of it reads it whole first), before
    /// any byte is handed out: a mismatch fails that read, and the next, with
    /// [`FormatError::ContentMismatch`] naming the tensor. Storages already
    /// in memory are checked now.
    ///
    /// # Errors
    /// As [`check`](Self::check), for what is checked now.
    pub(crate) fn check_lazily(&self, ckpt: &Checkpoint) -> Result<()> {
        let found = self.check_listing(ckpt)?;
        let mut by_storage: HashMap<usize, (UntypedStorage, Vec<Pending>)> = HashMap::new();
        let mut now = Vec::new();
        for (name, object) in &found {
            let storage = object.tensor.untyped_storage();
            let pending = Pending {
                name: name.clone(),
                range: logical_range(object),
                dtype: object.tensor.dtype(),
                layout: object.tensor.layout().clone(),
                conj: object.conj,
                neg: object.neg,
                sha256: self.tensors[name].sha256,
            };
            by_storage
                .entry(storage.id())
                .or_insert_with(|| (storage.clone(), Vec::new()))
                .1
                .push(pending);
        }
        let mut ids: Vec<usize> = by_storage.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let (storage, pending) = by_storage.remove(&id).unwrap_or_else(|| unreachable!());
            let pending = Arc::new(pending);
            let check = {
                let pending = pending.clone();
                Arc::new(move |bytes: &[u8]| check_bytes(&pending, bytes))
            };
            if !storage.check_on_first_read(check) {
                now.push(storage);
            }
        }
        // The storages already read (not lazy) are checked now.
        let read: Vec<(String, &TensorObject)> = found
            .into_iter()
            .filter(|(_, o)| {
                let id = o.tensor.untyped_storage().id();
                now.iter().any(|s| s.id() == id)
            })
            .collect();
        self.check_digests(&read)
    }

    /// The tensors of `ckpt` by name, each listed in the manifest with its
    /// dtype and shape, and every one listed there.
    fn check_listing<'c>(&self, ckpt: &'c Checkpoint) -> Result<Vec<(String, &'c TensorObject)>> {
        let mut found: Vec<(String, &TensorObject)> = Vec::new();
        for (path, object) in ckpt.tensors()? {
            if !matches!(object.kind(), TensorKind::Strided) {
                return Err(Error::Checkpoint(CheckpointError::Unsupported {
                    what: "checking a sparse or nested tensor against a manifest while loading (use stowage verify --manifest)".into(),
                })
                .at_path(dotted(&path)));
            }
            found.push((dotted(&path), object));
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let mismatch = |name: &str, expected: String, found: String| {
            Error::Format(FormatError::ContentMismatch {
                name: name.to_owned(),
                expected,
                found,
            })
            .at_path(name.to_owned())
        };
        for (name, object) in &found {
            let t = &object.tensor;
            let Some(want) = self.tensors.get(name) else {
                return Err(mismatch(
                    name,
                    "no such tensor".into(),
                    format!("{} {:?}", t.dtype().name(), t.shape()),
                ));
            };
            let (dtype, shape) = (t.dtype().name(), t.shape().to_vec());
            if want.dtype != dtype || want.shape != shape {
                return Err(mismatch(
                    name,
                    format!("{} {:?}", want.dtype, want.shape),
                    format!("{dtype} {shape:?}"),
                ));
            }
        }
        if let Some(name) = self
            .tensors
            .keys()
            .find(|n| found.binary_search_by(|f| f.0.as_str().cmp(n)).is_err())
        {
            return Err(mismatch(name, "a tensor".into(), "no such tensor".into()));
        }
        Ok(found)
    }

    /// Hashes each of `found` (on every core) against its listed digest.
    fn check_digests(&self, found: &[(String, &TensorObject)]) -> Result<()> {
        let objects: Vec<Option<&TensorObject>> = found.iter().map(|(_, o)| Some(*o)).collect();
        for ((name, _), digest) in found.iter().zip(digest_all(&objects, |_| ())) {
            let digest = digest
                .map_err(|e| e.at_path(name.clone()))?
                .unwrap_or_default();
            let want = &self.tensors[name];
            if digest != want.sha256 {
                return Err(content_mismatch(name, &want.sha256, &digest));
            }
        }
        Ok(())
    }
}
