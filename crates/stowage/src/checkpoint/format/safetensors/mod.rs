//! safetensors files, through the `safetensors` crate.
//!
//! Reading: each tensor gets its own storage (safetensors has no sharing).
//! Writing: every tensor of a checkpoint under its dotted path, as a
//! contiguous copy, with the `__metadata__` map kept; dtypes safetensors
//! cannot hold are refused naming the dtype and the path.
//!
//! Saving (`save.rs`) writes the crate's header, then each tensor's bytes
//! from where they lie; only non-contiguous or lazily conjugated tensors are
//! copied up front. Loading reads the header alone and validates it as the
//! crate does (`read_header`), then gives each tensor its storage: a view of
//! the mapped file (no copy), a storage read on first use (lazy), or one its
//! bytes are read straight into (one copy, a peak of the tensor bytes plus
//! the header).

use crate::error::{CheckpointError, ErrorContext, FormatError};
use std::path::Path;
use std::sync::Arc;

use safetensors::tensor::{Dtype, Metadata, SafeTensorError};

use crate::checkpoint::options::LoadOptions;
use crate::checkpoint::pickle::Value;
use crate::checkpoint::records::{Fill, Mode, Record, Records};
use crate::checkpoint::value::graph::{
    ByteOrder, Checkpoint, Format, Object, StorageRecord, TensorObject,
};
use crate::io::ReadAt;
use crate::layout::Layout;
use crate::storage::Fetch;
use crate::{DType, Error, Result, Tensor, UntypedStorage};

mod objects;
mod save;
mod tree;
pub use save::{save, save_with};
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
