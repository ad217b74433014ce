//! Writing a safetensors file: the header as the `safetensors` crate
//! writes it (its `Metadata`, its order, its JSON), the tensors' bytes from
//! where they lie.
//!
//! The crate's own writer (`serialize_to_file`) takes each tensor's bytes
//! as one owned buffer: a copy of every tensor, whole, even of one in
//! memory, which a manifest's hashing could not share, and it writes only
//! to a path. Here a tensor in memory is written from its storage under its
//! shared lock, and one in a file not read yet through a window, kept from
//! one tensor to the next or handed to the digests; the file is written as
//! every other output is ([`Location::create`](crate::io::Location::create)):
//! sized up front, synced as it goes, or uploaded as it is written.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use safetensors::tensor::{Dtype, Metadata, SafeTensorError, TensorInfo};

use super::{from_dtype, tree, MAX_HEADER_SIZE, TREE_KEY};
use crate::checkpoint::options::SaveOptions;
use crate::checkpoint::value::graph::{dotted, Checkpoint, TensorObject};
use crate::error::{ErrorContext, FormatError, StorageError, TensorError};
use crate::{Error, Result, Tensor};

/// How much of a tensor not read yet is read and written at a time.
const WINDOW: usize = 8 << 20;

/// A tensor to write: contiguous, with data, under its name.
struct Entry {
    name: Arc<str>,
    dtype: Dtype,
    tensor: Tensor,
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
/// format's own (8 bytes). A tensor in memory is written from its storage
/// under its shared lock, with no copy; one of a lazily loaded storage not
/// read yet comes straight from its file a window at a time and is not kept.
///
/// # Errors
/// As [`save`].
pub fn save_with(path: &Path, ckpt: &Checkpoint, options: &SaveOptions) -> Result<()> {
    let mut entries: Vec<Entry> = Vec::new();
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
        entries.push(Entry {
            name: name.as_str().into(),
            dtype,
            tensor,
        });
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
    let header = header(&mut entries, meta)?;
    let len = entries
        .iter()
        .map(|e| e.tensor.nbytes() as u64)
        .sum::<u64>()
        + 8
        + header.len() as u64;
    options
        .location(path)
        .create(options.sync, Some(len), |out| {
            let mut out = BufWriter::with_capacity(crate::io::WRITE_BUFFER, out);
            out.write_all(&(header.len() as u64).to_le_bytes())?;
            out.write_all(&header)?;
            let mut window = Vec::new();
            for e in &entries {
                write_tensor(&mut out, e, options, &mut window).at_path(&*e.name)?;
            }
            out.into_inner().map_err(|e| Error::Io(e.into_error()))?;
            Ok(())
        })
}

/// The header the crate writes for `entries` (its `prepare`), putting them
/// in its order: by dtype, the largest alignment first, then by name, each
/// tensor's bytes after the one before; the JSON padded with spaces to a
/// multiple of 8 bytes. `__metadata__` is in the order of its keys.
fn header(entries: &mut [Entry], meta: Option<HashMap<String, String>>) -> Result<Vec<u8>> {
    entries.sort_by(|a, b| b.dtype.cmp(&a.dtype).then(a.name.cmp(&b.name)));
    let mut offset = 0;
    let infos = entries
        .iter()
        .map(|e| {
            let n = e.tensor.nbytes();
            let info = TensorInfo {
                dtype: e.dtype,
                shape: e.tensor.shape().to_vec(),
                data_offsets: (offset, offset + n),
            };
            offset += n;
            (e.name.to_string(), info)
        })
        .collect();
    let several = meta.as_ref().is_some_and(|m| m.len() > 1);
    let metadata = Metadata::new(meta, infos)?;
    let mut text = serde_json::to_vec(&metadata).map_err(SafeTensorError::JsonError)?;
    if several {
        text = sort_metadata(&text)?;
    }
    text.resize(text.len().next_multiple_of(8), b' ');
    if text.len() as u64 > MAX_HEADER_SIZE {
        return Err(SafeTensorError::HeaderTooLarge.into());
    }
    Ok(text)
}

/// Writes one tensor's bytes: from its storage under the shared lock where
/// it is in memory (handing the digests a copy: the storage is the
/// caller's), else read a window at a time from its file into `window` or
/// into a buffer handed to the digests whole.
fn write_tensor(
    out: &mut impl Write,
    e: &Entry,
    options: &SaveOptions,
    window: &mut Vec<u8>,
) -> Result<()> {
    let start = e.tensor.storage_offset() * e.tensor.element_size();
    let len = e.tensor.nbytes();
    let storage = e.tensor.untyped_storage();
    let shrank = |nbytes| {
        Error::Storage(StorageError::StorageShrank {
            needed: start + len,
            nbytes,
        })
    };
    let digests = options.digests.as_ref();
    if let Some(d) = digests {
        d.begin(&e.name, len as u64);
    }
    if storage.is_loaded() {
        let bytes = storage.bytes()?;
        let mine = bytes
            .get(start..start + len)
            .ok_or_else(|| shrank(bytes.len()))?;
        out.write_all(mine)?;
        if let Some(d) = digests {
            d.bytes(&e.name, mine);
        }
        if let Some(p) = &options.progress {
            p.add(len as u64);
        }
        return Ok(());
    }
    let mut at = 0;
    while at < len {
        let n = (len - at).min(WINDOW);
        let mut buf = crate::checkpoint::content::written::window_buffer(digests, window, n)?;
        storage.read_at(start + at, &mut buf).map_err(|e| match e {
            Error::Storage(StorageError::StorageRange { nbytes, .. }) => shrank(nbytes),
            e => e,
        })?;
        out.write_all(&buf)?;
        match digests {
            Some(d) => d.window(&e.name, buf),
            None => *window = buf,
        }
        if let Some(p) = &options.progress {
            p.add(n as u64);
        }
        at += n;
    }
    Ok(())
}

/// `header` (JSON, as the crate writes it) with the `__metadata__` entries
/// in the order of their keys. The crate takes the metadata as a `HashMap`
/// and writes it in the map's iteration order, which differs from process
/// to process, and has no way to be given an order; without this the same
/// checkpoint would not save to the same bytes. The entries and their text
/// are the crate's, so the header keeps its length.
fn sort_metadata(header: &[u8]) -> Result<Vec<u8>> {
    let bad = |e: serde_json::Error| {
        Error::Format(FormatError::BadObject {
            context: "safetensors header just made",
            expected: "JSON",
            found: e.to_string(),
        })
    };
    let parsed: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(bad)?;
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
    serde_json::to_vec(&sorted).map_err(bad)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use safetensors::tensor::TensorView;

    use super::*;
    use crate::checkpoint::options::{LoadMode, LoadOptions};

    /// A tensor of dtype number `kind` and `shape`, its bytes counting up
    /// from `seed`.
    fn tensor(kind: usize, shape: &[usize], seed: u8) -> Tensor {
        let n: usize = shape.iter().product();
        let made = match kind {
            0 => Tensor::from_vec((0..n).map(|i| i as f32 + f32::from(seed)).collect(), shape),
            1 => Tensor::from_vec(
                (0..n).map(|i| (i as u8).wrapping_add(seed)).collect(),
                shape,
            ),
            2 => Tensor::from_vec((0..n).map(|i| i as f64 - f64::from(seed)).collect(), shape),
            _ => Tensor::from_vec((0..n).map(|i| i as i16 * i16::from(seed)).collect(), shape),
        };
        made.unwrap()
    }

    /// What the crate's own writer makes of the same tensors.
    fn crates_file(ckpt: &Checkpoint) -> Vec<u8> {
        let tensors = ckpt.tensors().unwrap();
        let bytes: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = tensors
            .iter()
            .map(|(path, t)| {
                let x = &t.tensor;
                let b = x.untyped_storage().bytes().unwrap().to_vec();
                (
                    dotted(path),
                    from_dtype(x.dtype()).unwrap(),
                    x.shape().to_vec(),
                    b,
                )
            })
            .collect();
        let views = bytes.iter().map(|(name, dtype, shape, b)| {
            (
                name.as_str(),
                TensorView::new(*dtype, shape.clone(), b).unwrap(),
            )
        });
        safetensors::tensor::serialize(views, None).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// A state dict saves to the bytes the crate's writer makes of it
        /// (the header's order, offsets, JSON and padding, then the data),
        /// from memory and lazily loaded alike.
        #[test]
        fn a_state_dict_saves_to_the_bytes_the_crate_writes(
            entries in prop::collection::btree_map(
                "[a-z]{1,3}(\\.[a-z0-9]{1,3}){0,2}",
                (0usize..4, prop::collection::vec(0usize..5, 0..3), any::<u8>()),
                1..7,
            )
        ) {
            let ckpt = Checkpoint::from_state_dict(
                entries.iter().map(|(name, (kind, shape, seed))| (name.clone(), tensor(*kind, shape, *seed))).collect::<Vec<_>>(),
            );
            let want = crates_file(&ckpt);
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("m.safetensors");
            save(&file, &ckpt).unwrap();
            prop_assert_eq!(std::fs::read(&file).unwrap(), want.clone());
            // Lazily loaded: each tensor written from its file a window at a time.
            let lazy = crate::load_with(&file, &LoadOptions::default().with_mode(LoadMode::Lazy)).unwrap();
            let again = dir.path().join("again.safetensors");
            save(&again, &lazy).unwrap();
            prop_assert_eq!(std::fs::read(&again).unwrap(), want);
        }
    }

    /// A tensor past a window, viewing its storage from an offset, read
    /// lazily from a `.pt`: written a window at a time from the right
    /// place, the file is the crate's of the same tensors.
    #[test]
    fn a_lazy_view_longer_than_a_window_is_written_from_its_offset() {
        let n = WINDOW / 4 * 2 + 1000;
        let base = tensor(0, &[n + 7], 3);
        let view = base.narrow(0, 7, n).unwrap();
        let ckpt =
            Checkpoint::from_state_dict(vec![("base".to_owned(), base), ("view".to_owned(), view)]);
        let dir = tempfile::tempdir().unwrap();
        let pt = dir.path().join("m.pt");
        crate::save(&pt, &ckpt).unwrap();
        let eager = crate::load(&pt).unwrap();
        let lazy =
            crate::load_with(&pt, &LoadOptions::default().with_mode(LoadMode::Lazy)).unwrap();
        let file = dir.path().join("m.safetensors");
        save(&file, &lazy).unwrap();
        let compact = Checkpoint::from_state_dict(
            eager
                .tensors()
                .unwrap()
                .into_iter()
                .map(|(p, t)| (dotted(&p), t.tensor.deep_clone().unwrap()))
                .collect::<Vec<_>>(),
        );
        assert!(std::fs::read(&file).unwrap() == crates_file(&compact));
    }
}
