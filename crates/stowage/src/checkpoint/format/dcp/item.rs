//! One DCP item: the bytes a `_StorageInfo` names, through its stream
//! transforms, decoded as a `torch.save` archive or, in the `SAFETENSORS`
//! serialization format, as one tensor of the safetensors blob that starts
//! at the item's offset.

use crate::error::{CheckpointError, FormatError};
use std::path::Path;
use std::sync::Arc;

use super::metadata::StorageRef;
use crate::checkpoint::format::torch_zip;
use crate::checkpoint::options::{LoadMode, LoadOptions};
use crate::checkpoint::pickle::Value;
use crate::checkpoint::records::Mode;
use crate::checkpoint::value::graph::{Checkpoint, Object};
use crate::io::ReadAt;
use crate::{Error, Result, Tensor};

const ZIP_MAGIC: &[u8; 4] = b"PK\x03\x04";

/// Room a `torch.save` archive needs beside its tensor's bytes (records'
/// headers, the pickle, alignment): the most a compressed item may inflate
/// to past its tensor.
pub(super) const ARCHIVE_OVERHEAD: u64 = 1 << 20;

/// A data file of a DCP checkpoint, or an item's window of it: a local
/// file or, with the `remote` feature, an object named by URL.
pub(super) type Source = Arc<dyn ReadAt>;

/// Checks that the item lies inside its file.
pub(super) fn check_inside(file: &dyn ReadAt, info: StorageRef<'_>) -> Result<()> {
    let len = file.len();
    let inside = info
        .offset
        .checked_add(info.length)
        .is_some_and(|end| end <= len);
    if !inside {
        return Err(Error::Format(FormatError::BadObject {
            context: "DCP item",
            expected: "bytes inside its file",
            found: format!(
                "offset {} length {} in a file of {len} bytes",
                info.offset, info.length
            ),
        }));
    }
    Ok(())
}

/// Whether the item is a `torch.save` archive rather than a tensor of a
/// safetensors blob: a transformed item always is (PyTorch's writer
/// transforms only archives); otherwise its first bytes say.
///
/// # Errors
/// The item is not inside its file; I/O errors.
pub(super) fn is_archive(file: &dyn ReadAt, info: StorageRef<'_>) -> Result<bool> {
    if !info.transforms.is_empty() {
        return Ok(true);
    }
    check_inside(file, info)?;
    if info.length < 4 {
        return Ok(false);
    }
    let mut head = [0u8; 4];
    file.read_exact_at(&mut head, info.offset)
        .map_err(Error::Io)?;
    Ok(&head == ZIP_MAGIC)
}

/// The item's stored bytes, checked to lie inside its file.
fn stored(file: &dyn ReadAt, info: StorageRef<'_>) -> Result<Vec<u8>> {
    check_inside(file, info)?;
    // Bounded by the file's size, checked above.
    let mut bytes = crate::storage::zeroed_bytes(info.length as usize)?;
    file.read_exact_at(&mut bytes, info.offset)
        .map_err(Error::Io)?;
    Ok(bytes)
}

/// The item's stored bytes with its stream transforms undone, no more than
/// `limit` bytes.
pub(super) fn decoded(file: &dyn ReadAt, info: StorageRef<'_>, limit: u64) -> Result<Vec<u8>> {
    untransform(stored(file, info)?, info.transforms, limit)
}

/// Undoes the stream transforms, in the order PyTorch's reader applies them;
/// no output past `limit` bytes (a decompression bomb stops there).
fn untransform(bytes: Vec<u8>, transforms: &[String], limit: u64) -> Result<Vec<u8>> {
    transforms
        .iter()
        .try_fold(bytes, |bytes, t| transform_from(bytes, t, limit))
}

/// One transform, named as `_extension.py` names them (`name/version`).
fn transform_from(bytes: Vec<u8>, descriptor: &str, limit: u64) -> Result<Vec<u8>> {
    let (name, version) = descriptor.split_once('/').unwrap_or((descriptor, "0"));
    #[cfg(feature = "zstd")]
    if name == "stream.zstd" && version.split('.').next() == Some("1") {
        return unzstd(&bytes, limit);
    }
    let _ = (bytes, limit, name, version);
    Err(Error::Checkpoint(CheckpointError::UnsupportedTransform {
        transform: descriptor.to_owned(),
    }))
}

#[cfg(feature = "zstd")]
fn unzstd(bytes: &[u8], limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(bytes)
        .map_err(Error::Io)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(Error::Io)?;
    if out.len() as u64 > limit {
        return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
            limit: crate::Limit::StorageBytes,
            value: out.len() as u64,
            max: limit,
        }));
    }
    Ok(out)
}

/// The tensor a chunk's item holds (`nbytes`: the chunk's size in bytes),
/// read through `window`, the item's bytes in `file` (at `path`), as
/// [`io::windows`](crate::io::windows) gives them: an untransformed archive
/// is read in place and lazily, each storage reading its record on first
/// use, so that a caller can read it straight into its destination
/// (`UntypedStorage::read_at`); a local file's window reads the file, an
/// object's was fetched whole.
pub(super) fn read_tensor(
    file: &Source,
    window: Source,
    path: &Path,
    info: StorageRef<'_>,
    fqn: &str,
    nbytes: u64,
    options: &LoadOptions,
) -> Result<Tensor> {
    let tensor_of = |ckpt: &Checkpoint| match &ckpt.root {
        Value::Ext(Object::Tensor(t)) => t.resolved(),
        _ => Err(Error::Format(FormatError::BadObject {
            context: "DCP tensor item",
            expected: "a saved tensor",
            found: "another object".into(),
        })),
    };
    if !info.transforms.is_empty() {
        let limit = nbytes.saturating_add(ARCHIVE_OVERHEAD);
        let bytes = untransform(whole(&*window)?, info.transforms, limit)?;
        return tensor_of(&torch_zip::load(&bytes[..], options, Mode::of(options))?);
    }
    if !starts_an_archive(&*window)? {
        // In the safetensors format every tensor item of a file starts at the
        // one blob's header, and its length is its data's: the tensor is
        // found through the header, in the file.
        return read_safetensors(&**file, info.offset, fqn, nbytes);
    }
    let lazy = options.clone().with_mode(LoadMode::Lazy);
    tensor_of(&torch_zip::load_lazy(window, path, &lazy)?)
}

/// Whether the bytes of `window` start a zip archive.
fn starts_an_archive(window: &dyn ReadAt) -> Result<bool> {
    let mut head = [0u8; 4];
    if window.len() < 4 {
        return Ok(false);
    }
    window.read_exact_at(&mut head, 0).map_err(Error::Io)?;
    Ok(&head == ZIP_MAGIC)
}

/// All the bytes of `window` (an item's, bounded by its file's size).
fn whole(window: &dyn ReadAt) -> Result<Vec<u8>> {
    let len = usize::try_from(window.len()).map_err(|_| {
        Error::Storage(crate::error::StorageError::AllocationFailed { nbytes: usize::MAX })
    })?;
    let mut bytes = crate::storage::zeroed_bytes(len)?;
    window.read_exact_at(&mut bytes, 0).map_err(Error::Io)?;
    Ok(bytes)
}

/// A non-tensor item, read through `window` (its bytes): the checkpoint
/// its archive holds.
pub(super) fn read_value(
    window: &dyn ReadAt,
    info: StorageRef<'_>,
    options: &LoadOptions,
) -> Result<Checkpoint> {
    let limit = options.max_storage_bytes.saturating_add(ARCHIVE_OVERHEAD);
    let bytes = untransform(whole(window)?, info.transforms, limit)?;
    torch_zip::load(&bytes[..], options, Mode::of(options))
}

#[cfg(feature = "safetensors")]
fn read_safetensors(file: &dyn ReadAt, offset: u64, fqn: &str, nbytes: u64) -> Result<Tensor> {
    /// The most bytes a safetensors header may have (the `safetensors` crate's limit).
    const MAX_HEADER: u64 = 100_000_000;
    use crate::layout::Layout;
    let bad = |expected: &'static str, found: String| {
        Error::Format(FormatError::BadObject {
            context: "DCP safetensors item",
            expected,
            found,
        })
    };
    let mut n = [0u8; 8];
    file.read_exact_at(&mut n, offset).map_err(Error::Io)?;
    let n = u64::from_le_bytes(n);
    let data_start = offset
        .checked_add(8)
        .and_then(|s| s.checked_add(n))
        .filter(|&s| n <= MAX_HEADER && s <= file.len())
        .ok_or_else(|| {
            bad(
                "a safetensors header inside the file",
                format!("{n} header bytes"),
            )
        })?;
    let mut header = vec![0; n as usize];
    file.read_exact_at(&mut header, offset + 8)
        .map_err(Error::Io)?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| bad("a JSON header", e.to_string()))?;
    let entry = header
        .get(fqn)
        .cloned()
        .ok_or_else(|| bad("an entry for the tensor", "none".into()))?;
    let entry: safetensors::tensor::TensorInfo =
        serde_json::from_value(entry).map_err(|e| bad("a tensor entry", e.to_string()))?;
    let dtype = crate::DType::from_safetensors(entry.dtype)
        .ok_or_else(|| bad("a dtype stowage reads", format!("{:?}", entry.dtype)))?;
    let (begin, end) = entry.data_offsets;
    let (begin, end) = (begin as u64, end as u64);
    let at = data_start
        .checked_add(begin)
        .filter(|_| end >= begin && end - begin == nbytes)
        .filter(|&at| at.checked_add(nbytes).is_some_and(|e| e <= file.len()))
        .ok_or_else(|| {
            bad(
                "the chunk's bytes inside the file",
                format!("data offsets [{begin}, {end}) for {nbytes} bytes"),
            )
        })?;
    let layout = Layout::contiguous(&entry.shape)?;
    let tensor = Tensor::from_parts(crate::UntypedStorage::new(nbytes as usize)?, dtype, layout)?;
    file.read_exact_at(&mut tensor.untyped_storage().bytes_mut()?, at)
        .map_err(Error::Io)?;
    Ok(tensor)
}

#[cfg(not(feature = "safetensors"))]
fn read_safetensors(_: &dyn ReadAt, _: u64, _: &str, _: u64) -> Result<Tensor> {
    Err(Error::Checkpoint(CheckpointError::FeatureDisabled {
        feature: "safetensors",
        what: "DCP checkpoints in the safetensors format",
    }))
}

#[cfg(all(test, feature = "zstd"))]
mod tests {
    use super::*;

    /// A zstd frame with a content checksum (PyTorch's writers add none, but
    /// other writers may) is checked as it is decoded: a frame whose data
    /// decodes but whose checksum disagrees is refused.
    #[test]
    fn a_zstd_frame_checksum_is_checked() {
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        encoder.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut encoder, &data).unwrap();
        let mut frame = encoder.finish().unwrap();
        let transforms = ["stream.zstd/1".to_owned()];
        assert_eq!(
            untransform(frame.clone(), &transforms, 1 << 20).unwrap(),
            data
        );
        // The checksum is the frame's last four bytes.
        let n = frame.len();
        frame[n - 1] ^= 0xff;
        let err = untransform(frame, &transforms, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
    }
}
