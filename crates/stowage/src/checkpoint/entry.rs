//! The entry points: [`load`], [`load_with`] and [`load_mmap`], reached from
//! the crate root (`stowage::load`, …), their one path. What they share
//! (format detection, what a folder holds, dispatch) is the parent module's.

use std::path::Path;

use super::{load_at, load_file, load_mmap_file, LoadMode, LoadOptions};
use crate::checkpoint::Checkpoint;
use crate::error::CheckpointError;
use crate::{Error, Result};

/// Loads a checkpoint (torch zip, torch legacy or safetensors, detected by
/// content), or a Hugging Face sharded set (an `*.index.json`, or a folder
/// holding one, or holding a single `model.safetensors`/`pytorch_model.bin`)
/// as one checkpoint ([`sharded`](crate::checkpoint::sharded)), or a PyTorch Distributed Checkpoint
/// folder (holding `.metadata`, or the ranks' files of its Hugging Face
/// layout) with its chunks assembled ([`dcp`](crate::checkpoint::dcp)); [`folder_of`](crate::checkpoint::folder_of) tells which.
///
/// With the `remote` feature, `path` may be a URL (`s3://bucket/key.pt`,
/// `gs://…`, `az://…`, `http(s)://…`, `file://…`): the object is read with
/// range requests (`stowage::io::remote::RemoteObject`), a sharded set by
/// the URL of its index, and any folder by its URL ending in `/`.
///
/// # Errors
/// [`Error::InFile`] wrapping what went wrong: I/O, an unknown format, a
/// refused global, a missing or short record, a tensor past its storage.
pub fn load(path: impl AsRef<Path>) -> Result<Checkpoint> {
    load_with(path, &LoadOptions::default())
}

/// Loads a checkpoint with options, in their [`LoadMode`].
///
/// # Errors
/// As [`load`]; [`CheckpointError::Unsupported`] for [`LoadMode::Mapped`], which only
/// [`load_mmap`] loads.
pub fn load_with(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Checkpoint> {
    let path = path.as_ref();
    if options.mode() == LoadMode::Mapped {
        return Err(Error::Checkpoint(CheckpointError::Unsupported {
            what: "LoadMode::Mapped in a safe load: a mapped load is `unsafe fn load_mmap`".into(),
        }));
    }
    load_at(&options.location(path), options, &|file| {
        load_file(file, options)
    })
}

/// Loads a checkpoint memory-mapped ([`LoadMode::Mapped`], whatever mode
/// `options` asks for, unless it is [`LoadMode::Fake`], which reads
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
/// # Safety
/// The storages' bytes are the file's pages: while any storage of the
/// checkpoint lives, the file must not be truncated (reads would fault) or
/// written by anyone.
///
/// # Errors
/// As [`load`].
#[allow(unsafe_code)] // Only to pass the caller's promise on to the mapping.
pub unsafe fn load_mmap(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Checkpoint> {
    let path = path.as_ref();
    let options = match options.mode() {
        LoadMode::Fake => return load_with(path, options),
        _ => &options.clone().with_mode(LoadMode::Mapped),
    };
    let here = options.location(path);
    if here.local_path().is_none() {
        // An object in a store cannot be mapped: it is read as an eager
        // `load_with` reads it.
        return load_with(path, &options.clone().with_mode(LoadMode::Eager));
    }
    load_at(&here, options, &|file| {
        // SAFETY: the caller promises that no file of the checkpoint (the
        // file, or every file of its folder or set) is truncated or written
        // meanwhile.
        unsafe { load_mmap_file(file, options) }
    })
}
