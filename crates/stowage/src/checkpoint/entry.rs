//! The entry points: [`load`], [`load_with`] and [`load_mmap`], reached from
//! the crate root (`stowage::load`, …), their one path. What they share
//! (format detection, what a folder holds) is the parent module's; the
//! dispatch is a resolved [`Source`](crate::checkpoint::Source)'s.

use std::path::Path;

use super::{resolve, LoadOptions};
use crate::checkpoint::Checkpoint;
use crate::Result;

/// Loads a checkpoint (torch zip, torch legacy or safetensors, detected by
/// content), or a Hugging Face sharded set (an `*.index.json`, or a folder
/// holding one, or holding a single `model.safetensors`/`pytorch_model.bin`)
/// as one checkpoint ([`sharded`](crate::checkpoint::sharded)), or a PyTorch Distributed Checkpoint
/// folder (holding `.metadata`, or the ranks' files of its Hugging Face
/// layout) with its chunks assembled ([`dcp`](crate::checkpoint::dcp)); [`resolve`](crate::checkpoint::resolve) tells which,
/// and the loaded checkpoint says ([`Checkpoint::layout`]).
///
/// With the `remote` feature, `path` may be a URL (`s3://bucket/key.pt`,
/// `gs://…`, `az://…`, `http(s)://…`, `file://…`): the object is read with
/// range requests (`stowage::io::remote::RemoteObject`), a sharded set by
/// the URL of its index, and any folder by its URL ending in `/`.
///
/// # Errors
/// [`Error::InFile`](crate::Error::InFile) wrapping what went wrong: I/O, an unknown format, a
/// refused global, a missing or short record, a tensor past its storage.
pub fn load(path: impl AsRef<Path>) -> Result<Checkpoint> {
    load_with(path, &LoadOptions::default())
}

/// Loads a checkpoint with options, in their [`LoadMode`](crate::LoadMode).
///
/// # Errors
/// As [`load`]; [`CheckpointError::Unsupported`](crate::CheckpointError::Unsupported) for [`LoadMode::Mapped`](crate::LoadMode::Mapped), which only
/// [`load_mmap`] loads.
pub fn load_with(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Checkpoint> {
    resolve(path, options)?.load(options)
}

/// Loads a checkpoint memory-mapped ([`LoadMode::Mapped`](crate::LoadMode::Mapped), whatever mode
/// `options` asks for, unless it is [`LoadMode::Fake`](crate::LoadMode::Fake), which reads
/// nothing and maps nothing), as `torch.load(mmap=True)`: the file is
/// mapped once, privately (copy-on-write, PyTorch's default `MAP_PRIVATE`), and
/// each stored record of a torch zip archive becomes a storage over its part of
/// the mapping, so nothing is read until it is touched and writes never reach
/// the file. Such storages report [`UntypedStorage::is_shared`](crate::UntypedStorage::is_shared) (as PyTorch's
/// do) and cannot be resized. Deflated records, and records that would overlap
/// another, are copied. Legacy-format files (which PyTorch refuses to map) are
/// mapped too, storage by storage where the bytes start at a multiple of the
/// element size, else copied. Each tensor of a safetensors file becomes a
/// storage over its bytes in the mapping.
///
/// A URL names an object in a store, which cannot be mapped: it is loaded
/// eagerly, as [`load_with`] loads it with [`LoadMode::Eager`](crate::LoadMode::Eager),
/// whatever mode `options` asks for.
///
/// # Safety
/// The storages' bytes are the file's pages: while any storage of the
/// checkpoint lives, the file must not be truncated (reads would fault) or
/// written by anyone.
///
/// # Errors
/// As [`load`].
#[allow(unsafe_code)] // Only to pass the caller's promise on to the mapping.
pub unsafe fn load_mmap(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Checkpoint> {
    let source = resolve(path, options)?;
    // SAFETY: the caller's promise, passed on.
    unsafe { source.load_mmap(options) }
}
