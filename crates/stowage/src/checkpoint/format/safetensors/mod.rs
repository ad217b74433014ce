//! safetensors files, through the `safetensors` crate.
//!
//! Reading: each tensor gets its own storage (safetensors has no sharing).
//! Writing: every tensor of a checkpoint under its dotted path, as a
//! contiguous copy, with the `__metadata__` map kept; dtypes safetensors
//! cannot hold are refused naming the dtype and the path.
//!
//! Saving streams one tensor at a time into the file (through the crate's
//! `serialize_to_file`); only non-contiguous or lazily conjugated tensors are
//! copied up front. Loading reads the header alone and validates it as the
//! crate does (`read_header`), then gives each tensor its storage: a
//! view of the mapped file (no copy), a storage read on first use (lazy), or
//! one its bytes are read straight into (one copy, a peak of the tensor bytes
//! plus the header).

use crate::error::{CheckpointError, ErrorContext, FormatError, StorageError, TensorError};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use safetensors::tensor::{Dtype, Metadata, SafeTensorError, View};

use crate::checkpoint::content::WrittenDigests;
use crate::checkpoint::options::{LoadOptions, Progress, SaveOptions};
use crate::checkpoint::pickle::Value;
use crate::checkpoint::records::{Fill, Mode, Record, Records};
use crate::checkpoint::value::graph::{
    dotted, ByteOrder, Checkpoint, Format, Object, StorageRecord, TensorObject,
};
use crate::io::ReadAt;
use crate::layout::Layout;
use crate::storage::Fetch;
use crate::{DType, Error, Result, Tensor, UntypedStorage};

mod objects;
mod tree;
pub use tree::TREE_KEY;
pub(crate) use tree::{record as record_tree, restore as restore_tree};

fn to_dtype(d: Dtype) -> Result<DType> {
    DType::from_safetensors(d).ok_or_else(|| {
        Error::Checkpoint(CheckpointError::UnsupportedDType {
            format: "safetensors",
            dtype: format!("{d:?}"),
        })
    })
}

fn from_dtype(d: DType) -> Option<Dtype> {
    d.safetensors()
}

/// The largest header accepted, in bytes: the `safetensors` crate's own limit.
const MAX_HEADER_SIZE: u64 = 100_000_000;

/// Reads and validates a safetensors header, reading nothing of the data: the
/// checks of the crate's `SafeTensors::read_metadata`, which wants a buffer of
/// the whole file, made on the header alone. The crate's `Metadata`
/// deserialises only if every tensor's offsets follow the last one's and span
/// exactly its dtype and shape; then the data region must end where the file
/// ends. The errors are the crate's, as `read_metadata` gives them.
fn read_header<R: ReadAt>(source: &R) -> Result<(usize, Metadata)> {
    let len = source.len();
    if len < 8 {
        return Err(SafeTensorError::HeaderTooSmall.into());
    }
    let mut head = [0u8; 8];
    source.read_exact_at(&mut head, 0)?;
    let n = u64::from_le_bytes(head);
    if n > MAX_HEADER_SIZE {
        return Err(SafeTensorError::HeaderTooLarge.into());
    }
    if n + 8 > len {
        return Err(SafeTensorError::InvalidHeaderLength.into());
    }
    // `n` is at most MAX_HEADER_SIZE, so it fits a usize.
    let n = n as usize;
    let mut header = vec![0u8; n];
    source.read_exact_at(&mut header, 8)?;
    let text = std::str::from_utf8(&header).map_err(SafeTensorError::InvalidHeader)?;
    let meta: Metadata =
        serde_json::from_str(text).map_err(SafeTensorError::InvalidHeaderDeserialization)?;
    if (n as u64 + 8).checked_add(meta.data_len() as u64) != Some(len) {
        return Err(SafeTensorError::MetadataIncompleteBuffer.into());
    }
    Ok((n, meta))
}

/// A tensor's record: its name, and where its bytes start in the file.
type Key = (String, u64);

/// Loads a safetensors file in `mode`. Each tensor's storage is, as the
/// mode makes it ([`Records`]): a view of its bytes in the mapping (nothing
/// copied or read until touched); a storage that reads its bytes on first
/// use (a lazy load's, made by [`load_lazy`]); one of no bytes (fake); or one its bytes are
/// read straight into, all in one batch: the peak is the tensors' bytes and
/// the header, not twice the file.
pub(crate) fn load<R: ReadAt>(
    source: &R,
    options: &LoadOptions,
    mut records: Records<'_, Key>,
) -> Result<Checkpoint> {
    let (n, meta) = read_header(source)?;
    let data_start = n + 8;
    let mut ckpt = Checkpoint::new();
    ckpt.format = Format::Safetensors;
    ckpt.byteorder = ByteOrder::Little;
    ckpt.safetensors_metadata = meta
        .metadata()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
    let device = options.map_location.unwrap_or_default();
    let mut items = Vec::new();
    // The file's order: by data offset.
    for (i, name) in meta.offset_keys().into_iter().enumerate() {
        let at_path = |e: Error| e.at_path(name.clone());
        // `read_header` validated every entry: its offsets lie in the data
        // region and span exactly its dtype and shape.
        let info = meta.info(&name).ok_or_else(|| {
            at_path(Error::Format(FormatError::BadObject {
                context: "safetensors header",
                expected: "an entry for every name",
                found: "none".into(),
            }))
        })?;
        let dtype = to_dtype(info.dtype).map_err(at_path)?;
        let (begin, end) = info.data_offsets;
        let (nbytes, offset) = (end - begin, (data_start + begin) as u64);
        let record = Record {
            key: (name.clone(), offset),
            nbytes,
            device,
            raw: true,
        };
        let (storage, fill) = records.make(record, || Ok(offset)).map_err(at_path)?;
        if fill == Fill::Now {
            source
                .read_exact_at(&mut storage.bytes_mut().map_err(at_path)?, offset)
                .map_err(|e| at_path(Error::Io(e)))?;
        }
        let layout = Layout::contiguous(&info.shape).map_err(at_path)?;
        let tensor = Tensor::from_parts(storage.clone(), dtype, layout).map_err(at_path)?;
        ckpt.storages.push(StorageRecord {
            key: i.to_string().into(),
            storage,
            dtype: Some(dtype),
            location: device.to_string().into(),
        });
        items.push((
            Value::str(&name),
            Value::Ext(Object::Tensor(std::sync::Arc::new(TensorObject::new(
                tensor,
            )))),
        ));
    }
    read_batch(source, &records.take_batch())?;
    let root = ckpt.graph.dict(items);
    ckpt.root = Value::Node(root);
    // A file stowage wrote from a nested checkpoint: its structure back.
    tree::restore(&mut ckpt)?;
    Ok(ckpt)
}

/// Reads each `(storage, (name, offset))` in one batch of the source's, in
/// pieces of at most 16 MiB (so that a file's two threads split it evenly);
/// a failure names its tensor.
fn read_batch<R: ReadAt>(source: &R, batch: &[(UntypedStorage, Key)]) -> Result<()> {
    const PIECE: usize = 16 << 20;
    let mut guards = Vec::with_capacity(batch.len());
    for (storage, _) in batch {
        guards.push(storage.bytes_mut()?);
    }
    let mut reads: Vec<(u64, &mut [u8])> = Vec::new();
    let mut owner: Vec<usize> = Vec::new();
    for (i, (bytes, (_, (_, offset)))) in guards.iter_mut().zip(batch).enumerate() {
        for (k, piece) in bytes.chunks_mut(PIECE).enumerate() {
            reads.push((offset + (k * PIECE) as u64, piece));
            owner.push(i);
        }
    }
    source
        .read_batch_at(&mut reads)
        .map_err(|(i, e)| Error::Io(e).at_path(batch[owner[i]].1 .0.clone()))
}

/// A safetensors file whose storages read their bytes on first use, through
/// the file they share. A later read names the file and the tensor, since it
/// happens long after the load.
pub(crate) fn load_lazy<R: ReadAt + 'static>(
    file: R,
    path: &Path,
    options: &LoadOptions,
) -> Result<Checkpoint> {
    let file = Arc::new(file);
    let path: Arc<Path> = Arc::from(path);
    let make = |(name, offset): &Key| -> Fetch {
        let (file, path, name, offset) = (file.clone(), path.clone(), name.clone(), *offset);
        Arc::new(move |from: u64, dst: &mut [u8]| {
            let at = offset
                .checked_add(from)
                .ok_or_else(|| Error::Io(std::io::Error::from(std::io::ErrorKind::InvalidInput)));
            at.and_then(|at| file.read_exact_at(dst, at).map_err(Error::Io))
                .at_path(name.as_str())
                .in_file(&*path)
        })
    };
    load(
        &*file,
        options,
        Records::with_fetch(Mode::of(options), &make),
    )
}

/// Writes every tensor of `ckpt` to a safetensors file at `path`, named by dotted path
/// (a root tensor is named `tensor`), as contiguous copies, keeping `__metadata__`
/// (with `"format": "pt"` added when it has no `format`, as Hugging Face's
/// writers write it). Written to a temporary file and renamed into place.
///
/// # Errors
/// [`Error::AtPath`] wrapping [`TensorError::DTypeUnsupported`] for a dtype safetensors cannot
/// hold (complex128, quantized …) or [`StorageError::NoData`] for meta tensors; I/O errors.
///
/// A sparse or nested tensor ([`TensorKind`](crate::checkpoint::TensorKind))
/// has no dense data of its own: its components are written instead, each
/// under the tensor's dotted path and the component's name
/// (`w.indices`, `w.values`; `w.crow_indices`, …; `w.buffer`, `w.sizes`,
/// `w.strides`, `w.offsets`).
pub fn save(path: impl AsRef<Path>, ckpt: &Checkpoint) -> Result<()> {
    save_with(path.as_ref(), ckpt, &SaveOptions::default())
}

/// [`save`] with options: [`SaveOptions::with_sync`] and [`SaveOptions::with_progress`]
/// (told each tensor's bytes as they are written); the alignment is the
/// format's own (8 bytes). Each tensor's bytes are copied out of its storage
/// while it is written, one tensor at a time; those of a lazily loaded
/// storage not read yet come straight from its file and are not kept.
///
/// # Errors
/// As [`save`].
pub fn save_with(path: &Path, ckpt: &Checkpoint, options: &SaveOptions) -> Result<()> {
    let mut views: Vec<(String, Contiguous)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // A sparse or nested tensor is written as its components, each under the
    // tensor's name and the component's (`weight.indices`, `weight.values`).
    let mut named: Vec<(String, Cow<'_, TensorObject>)> = Vec::new();
    // A container held at several places is written once, at its first
    // (its structure records the rest as refs, `tree.rs`).
    for (p, t) in ckpt.tensors_once()? {
        let name = dotted(&p);
        if t.kind().is_strided() {
            named.push((name, Cow::Borrowed(t)));
        } else {
            for (component, x) in t.kind().components() {
                let object = TensorObject::new(x.clone());
                named.push((format!("{name}.{component}"), Cow::Owned(object)));
            }
        }
    }
    for (name, t) in &named {
        let name = name.clone();
        let at = |e: Error| e.at_path(name.clone());
        let x = &t.tensor;
        let dtype = match from_dtype(x.dtype()) {
            Some(d) if t.quantization().is_none() => d,
            _ => {
                return Err(at(Error::Tensor(TensorError::DTypeUnsupported {
                    op: "saving to safetensors",
                    dtype: x.dtype(),
                })))
            }
        };
        if !seen.insert(name.clone()) {
            return Err(Error::Format(FormatError::DuplicateName {
                name: name.clone(),
            }));
        }
        // Contiguous tensors are used as they are; others (and lazily conjugated or
        // negated ones) are copied once here.
        let tensor = t.resolved().and_then(|r| r.contiguous()).map_err(at)?;
        if !tensor.has_data() {
            return Err(at(Error::Storage(StorageError::NoData {
                op: "saving to safetensors",
                device: tensor.device(),
            })));
        }
        views.push((
            name.clone(),
            Contiguous {
                dtype,
                tensor,
                failed: RefCell::new(None),
                progress: options.progress.clone(),
                digests: options.digests.clone().map(|d| (d, name.as_str().into())),
            },
        ));
    }
    // Whenever `__metadata__` is written it says `"format": "pt"`, as
    // Hugging Face's writers do: transformers and `huggingface_hub` refuse a
    // file whose metadata lacks it. A format already given is kept.
    // A checkpoint that is not a flat map of tensors keeps its structure
    // and values in one more entry (`tree`), replacing an entry of that
    // name the checkpoint carries. A flat one keeps the entry it carries:
    // a sharded set's lone shard carries its set's structure (a loaded
    // checkpoint never does: the load rebuilds the structure and drops it).
    let tree = tree::record(ckpt)?;
    let mut meta: Option<HashMap<String, String>> = ckpt
        .safetensors_metadata
        .as_ref()
        .map(|m: &BTreeMap<_, _>| m.clone().into_iter().collect());
    if let Some(tree) = tree {
        meta.get_or_insert_with(HashMap::new)
            .insert(TREE_KEY.to_owned(), tree);
    }
    if let Some(m) = &mut meta {
        m.entry("format".to_owned())
            .or_insert_with(|| "pt".to_owned());
    }
    // The crate writes only to a file (streaming the tensors into it one
    // at a time): an object is staged in one, then uploaded.
    options
        .location(path)
        .create_through_path(options.sync, |tmp| write_views(&views, meta, tmp))
}

/// Streams the tensors into a safetensors file at `tmp`, one at a time.
fn write_views(
    views: &[(String, Contiguous)],
    meta: Option<HashMap<String, String>>,
    tmp: &Path,
) -> Result<()> {
    {
        // The crate writes through a temporary file of its own, made with
        // mode 0600, and renames it onto `tmp`: the file gets the mode a new
        // file gets here (0666 less the umask), as every other output does.
        // The probe that learns that mode is removed before anything is
        // renamed onto its name: ext4 flushes a file renamed over another
        // (`auto_da_alloc`), which took 0.3 s per GiB written.
        let mode = std::fs::File::create(tmp)?.metadata()?.permissions();
        std::fs::remove_file(tmp)?;
        let several = meta.as_ref().is_some_and(|m| m.len() > 1);
        // Its temporary goes into a scratch folder of ours, so that a save
        // ended midway leaves none of the crate's files beside ours.
        crate::io::in_scratch_folder(tmp, |file| {
            safetensors::tensor::serialize_to_file(
                views.iter().map(|(n, v)| (n.as_str(), v)),
                meta,
                file,
            )?;
            Ok(std::fs::set_permissions(file, mode)?)
        })?;
        if several {
            sort_metadata(tmp)?;
        }
        match views
            .iter()
            .find_map(|(n, v)| Some((n, v.failed.borrow_mut().take()?)))
        {
            None => Ok(()),
            Some((name, e)) => Err(e.at_path(name.clone())),
        }
    }
}

/// Puts the header's `__metadata__` entries in the order of their keys, in
/// place. The crate takes the metadata as a `HashMap` and writes it in the
/// map's iteration order, which differs from process to process, and has no
/// way to be given an order; without this the same checkpoint would not
/// save to the same bytes. The entries and their text are the crate's, so
/// the header keeps its length.
fn sort_metadata(file: &Path) -> Result<()> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)?;
    let mut n = [0u8; 8];
    f.read_exact_at(&mut n, 0)?;
    let n = u64::from_le_bytes(n);
    let mut header =
        vec![
            0u8;
            usize::try_from(n).map_err(|_| Error::Tensor(TensorError::SizeOverflow {
                what: "safetensors header",
                detail: n.to_string(),
            }))?
        ];
    f.read_exact_at(&mut header, 8)?;
    let bad = |e: serde_json::Error| {
        Error::Format(FormatError::BadObject {
            context: "safetensors header just written",
            expected: "JSON",
            found: e.to_string(),
        })
    };
    let parsed: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(bad)?;
    let mut sorted = serde_json::Map::new();
    for (k, v) in &parsed {
        let v = match (k.as_str(), v) {
            ("__metadata__", serde_json::Value::Object(m)) => {
                let by_key: BTreeMap<&String, &serde_json::Value> = m.iter().collect();
                let mut m = serde_json::Map::new();
                for (k, v) in by_key {
                    m.insert(k.clone(), v.clone());
                }
                serde_json::Value::Object(m)
            }
            _ => v.clone(),
        };
        sorted.insert(k.clone(), v);
    }
    let mut text = serde_json::to_vec(&sorted).map_err(bad)?;
    if text.len() as u64 > n {
        return Ok(()); // cannot happen: the same entries, as the crate writes them
    }
    text.resize(header.len(), b' ');
    std::os::unix::fs::FileExt::write_all_at(&f, &text, 8)?;
    Ok(())
}

/// A contiguous tensor as the `safetensors` crate's `View`.
struct Contiguous {
    dtype: Dtype,
    tensor: Tensor,
    /// Set when the bytes could not be read while writing (the save then fails):
    /// [`StorageError::StorageShrank`] when the storage no longer holds the tensor, else
    /// what reading gave.
    failed: RefCell<Option<Error>>,
    progress: Option<Progress>,
    /// Told the bytes as they are handed over, under the tensor's name.
    digests: Option<(WrittenDigests, Arc<str>)>,
}

impl View for &Contiguous {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        self.tensor.shape()
    }
    fn data(&self) -> Cow<'_, [u8]> {
        // The bytes sit behind the storage's lock, so they are handed over as a copy,
        // one tensor at a time while the file is written. The crate does not check the
        // length it gets, so a storage shrunk meanwhile gives zeros of the right length
        // (keeping later tensors in place) and fails the save afterwards.
        let start = self.tensor.storage_offset() * self.tensor.element_size();
        let storage = self.tensor.untyped_storage();
        let mut out = match crate::storage::zeroed_bytes(self.tensor.nbytes()) {
            Ok(out) => out,
            Err(e) => {
                // The save fails afterwards (its temporary removed); the
                // crate writes whatever it is given meanwhile.
                *self.failed.borrow_mut() = Some(e);
                return Cow::Borrowed(&[]);
            }
        };
        if let Err(e) = storage.read_at(start, &mut out) {
            *self.failed.borrow_mut() = Some(match e {
                Error::Storage(StorageError::StorageRange { nbytes, .. }) => {
                    Error::Storage(StorageError::StorageShrank {
                        needed: start + out.len(),
                        nbytes,
                    })
                }
                e => e,
            });
            out.fill(0);
        }
        if let Some((d, name)) = &self.digests {
            d.begin(name, out.len() as u64);
            d.bytes(name, &out);
        }
        if let Some(p) = &self.progress {
            p.add(out.len() as u64);
        }
        Cow::Owned(out)
    }
    fn data_len(&self) -> usize {
        self.tensor.nbytes()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use safetensors::SafeTensors;

    use super::*;

    /// A small valid file: two tensors and a metadata map.
    fn valid() -> Vec<u8> {
        let header = br#"{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}}"#;
        let mut f = (header.len() as u64).to_le_bytes().to_vec();
        f.extend_from_slice(header);
        f.extend_from_slice(&[1; 11]);
        f
    }

    /// `read_header` accepts exactly what the crate's `read_metadata` accepts,
    /// and reads the same header.
    fn agrees(bytes: &[u8]) -> std::result::Result<(), TestCaseError> {
        let ours = read_header(&bytes);
        let theirs = SafeTensors::read_metadata(bytes);
        match (&ours, &theirs) {
            (Ok((n, a)), Ok((m, b))) => {
                prop_assert_eq!(n, m);
                prop_assert_eq!(a.offset_keys(), b.offset_keys());
                prop_assert_eq!(a.data_len(), b.data_len());
                prop_assert_eq!(a.metadata(), b.metadata());
            }
            (Err(_), Err(_)) => {}
            _ => prop_assert!(
                false,
                "ours {:?}, the crate's {:?}",
                ours.is_ok(),
                theirs.is_ok()
            ),
        }
        Ok(())
    }

    #[test]
    fn a_valid_header_reads() {
        let (n, meta) = read_header(&valid()).unwrap();
        assert_eq!(meta.offset_keys(), ["a", "b"]);
        assert_eq!(n + 8 + meta.data_len(), valid().len());
    }

    proptest! {
        #[test]
        fn read_header_agrees_with_the_crate_on_mutations(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            cut in any::<prop::sample::Index>(),
            extend in 0usize..3,
        ) {
            let mut bytes = valid();
            for (at, byte) in &edits {
                let i = at.index(bytes.len());
                bytes[i] = *byte;
            }
            match extend {
                0 => bytes.truncate(cut.index(bytes.len() + 1)),
                1 => bytes.push(0),
                _ => {}
            }
            agrees(&bytes)?;
        }

        #[test]
        fn read_header_agrees_with_the_crate_on_any_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            agrees(&bytes)?;
        }
    }
}
