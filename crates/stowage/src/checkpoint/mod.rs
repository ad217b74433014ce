//! Checkpoints: loading and saving `torch.save` files (zip and legacy),
//! safetensors, Hugging Face sharded sets and PyTorch Distributed
//! Checkpoints, and scanning them.
//!
//! The folders are the layers, lowest first (`docs/architecture.md`):
//! - the containers, crates of their own: the [`zip`] archive and the
//!   generic [`pickle`] machine, neither of which knows PyTorch;
//! - the meaning: `value/`, the one model of the Python values a checkpoint
//!   holds (the loaded object graph, [`Checkpoint`] and [`Object`]; the
//!   tensor kinds; the data decoded from globals outside the allowlist;
//!   [`ValueRef`], values read by path; [`CheckpointBuilder`]);
//!   `globals/`, the two tables of the globals a pickle may name (allowed,
//!   and [`decoded`] as data); `options` ([`LoadOptions`], [`LoadMode`],
//!   [`SaveOptions`]); and `torch/`, PyTorch's meaning of a pickle: how
//!   persistent ids become storages, and how tensors are rebuilt on them
//!   and pickled back;
//! - the formats, `format/`, one module each with the same shape (load, and
//!   save where stowage writes the format): `torch_zip`, `torch_legacy`,
//!   [`safetensors`], and the folder layouts built on them, [`sharded`] sets
//!   and [`dcp`]; beside them [`scan`], which reads every pickle a format
//!   holds without its meaning;
//! - this module and `folder`: format detection by content, what a folder
//!   holds ([`folder_of`]), and dispatch.
//!
//! Loading never runs code: a global outside PyTorch's `weights_only`
//! allowlist is an error.

mod folder;
mod format;
mod globals;
mod options;
pub mod scan;
mod torch;
mod value;

// The generic pickle machine is its own crate; `Checkpoint` exposes its
// values, so it stays reachable here.
pub use stowage_pickle as pickle;
// The zip container is its own crate; the CLI and the tests name its types
// through this path.
pub use stowage_zip as zip;

#[cfg(feature = "safetensors")]
pub use format::safetensors;
pub use format::{dcp, sharded};
pub use globals::decoded;

use crate::error::{CheckpointError, ErrorContext, FormatError};
use std::path::Path;

use folder::folder_at;
pub use folder::{folder_of, Folder};
pub use format::torch_zip::{save, save_to_writer, save_with};
use format::{torch_legacy, torch_zip};
pub use globals::allowlist::Global;
pub use options::{LoadMode, LoadOptions, Progress, SaveOptions};
pub use value::access::{ValueKind, ValueRef};
pub use value::builder::{CheckpointBuilder, PyValue};
pub use value::data::{
    ClassRef, Date, NdArray, NumpyDType, NumpyScalar, PyData, TimeDelta, TimeOfDay, TimeZone,
};
pub use value::graph::{
    dotted, ByteOrder, Checkpoint, Construct, Format, InertObject, Object, PathKey, StorageRecord,
    StorageRef, TensorObject, MAX_PATHS,
};
pub use value::kind::{CompressedLayout, Quantization, TensorKind};

use crate::io::{Location, ReadAt};
use crate::storage::{MappedFile, MappedRecords};
use crate::{Error, Result};

/// Loads a checkpoint (torch zip, torch legacy or safetensors, detected by
/// content), or a Hugging Face sharded set (an `*.index.json`, or a folder
/// holding one, or holding a single `model.safetensors`/`pytorch_model.bin`)
/// as one checkpoint ([`sharded`]), or a PyTorch Distributed Checkpoint
/// folder (holding `.metadata`, or the ranks' files of its Hugging Face
/// layout) with its chunks assembled ([`dcp`]); [`folder_of`] tells which.
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

/// Loads what `here` holds: the checkpoint its folder or index names
/// ([`folder_of`]), each file through `load_one`, or `here` itself as a
/// file. A distributed checkpoint's chunks are assembled into new storages,
/// so its files are never `load_one`'s.
fn load_at(
    here: &Location,
    options: &LoadOptions,
    load_one: &dyn Fn(&Location) -> Result<Checkpoint>,
) -> Result<Checkpoint> {
    match folder_at(here)? {
        Some(Folder::Dcp(dir)) => dcp::DcpCheckpoint::at(dir, options)?.into_checkpoint(),
        Some(Folder::Ranks(files)) => dcp::hf::load(&files, load_one),
        Some(Folder::Sharded(index)) => load_set(&index, load_one),
        Some(Folder::Single(file)) => load_one(&file),
        None => load_one(here),
    }
}

/// A sharded set by its index, wherever it is; its shards are named
/// relative to the index's folder, each loaded by `load_shard`.
fn load_set(
    index: &Location,
    load_shard: &dyn Fn(&Location) -> Result<Checkpoint>,
) -> Result<Checkpoint> {
    let text = index.read_all(sharded::MAX_INDEX_BYTES)?;
    let text = String::from_utf8_lossy(&text);
    sharded::load_indexed(index, &text, load_shard)
}

/// Loads one checkpoint file or object (never a set: a shard named like an
/// index is read as a file, so an index cannot lead a load in circles), in
/// the options' mode: a torch zip archive or a safetensors file lazily where
/// asked (each storage read on first use), else read now (batched where
/// each read is a request).
fn load_file(here: &Location, options: &LoadOptions) -> Result<Checkpoint> {
    let source = here.open()?;
    let in_file = |e: Error| e.in_file(here.path());
    if options.mode() == LoadMode::Lazy {
        match detect_format(&source) {
            Ok(Format::TorchZip | Format::TorchScript) => {
                return torch_zip::load_lazy(source, &here.path(), options).map_err(in_file)
            }
            #[cfg(feature = "safetensors")]
            Ok(Format::Safetensors) => {
                return safetensors::load_lazy(source, &here.path(), options).map_err(in_file)
            }
            _ => {}
        }
    }
    load_from(source, options).map_err(in_file)
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

/// [`load_mmap`] of one file.
///
/// # Safety
/// As [`load_mmap`].
#[allow(unsafe_code)] // Only to pass the caller's promise on to the mapping.
unsafe fn load_mmap_file(here: &Location, options: &LoadOptions) -> Result<Checkpoint> {
    let in_file = |e: Error| e.in_file(here.path());
    let file = here.open_file()?;
    // SAFETY: the caller promises the file is neither truncated nor written meanwhile.
    let map = unsafe { MappedFile::private(&file) }.map_err(|e| in_file(Error::Io(e)))?;
    let records = MappedRecords::new(map);
    let reader = records.reader();
    let loaded = match detect_format(&reader) {
        Ok(Format::TorchZip | Format::TorchScript) => {
            torch_zip::load(reader, options, Some(records))
        }
        Ok(Format::TorchLegacy) => torch_legacy::load(&reader, options, Some(records)),
        Ok(Format::Safetensors) => load_safetensors(&reader, options, Some(records)),
        Err(e) => Err(e),
    };
    loaded.map_err(in_file)
}

/// Loads a checkpoint held in memory (PyTorch's `torch.load(io.BytesIO(...))`).
///
/// # Errors
/// As [`load`], without the file name.
pub fn load_bytes(bytes: &[u8], options: &LoadOptions) -> Result<Checkpoint> {
    load_from(bytes, options)
}

/// The kind of checkpoint `source` holds, from its content (never its name).
///
/// # Errors
/// [`FormatError::NotACheckpoint`] for empty or unrecognised files and the `PYTORCH1`
/// preview format, [`CheckpointError::Unsupported`] for PyTorch ≤ 0.3 tar files, I/O errors.
pub fn detect_format<R: ReadAt>(source: &R) -> Result<Format> {
    let len = source.len();
    let mut head = [0u8; 16];
    let n = len.min(16) as usize;
    source.read_exact_at(&mut head[..n], 0)?;
    let head = &head[..n];
    if head.starts_with(b"PK\x03\x04") {
        return Ok(Format::TorchZip);
    }
    if head.starts_with(b"PYTORCH1") {
        return Err(Error::Format(FormatError::NotACheckpoint {
            detail: "an unsupported archive format from the preview release (PYTORCH1)".into(),
        }));
    }
    if head.starts_with(torch_legacy::MAGIC_PREFIX) {
        return Ok(Format::TorchLegacy);
    }
    if len >= 265 {
        let mut ustar = [0u8; 5];
        source.read_exact_at(&mut ustar, 257)?;
        if &ustar == b"ustar" {
            return Err(Error::Checkpoint(CheckpointError::Unsupported {
                what: "the tar checkpoint format of PyTorch 0.3 and older".into(),
            }));
        }
    }
    if n >= 9 && head[8] == b'{' {
        return Ok(Format::Safetensors);
    }
    if len == 0 {
        return Err(Error::Format(FormatError::NotACheckpoint {
            detail: "the file is empty".into(),
        }));
    }
    Err(Error::Format(FormatError::NotACheckpoint {
        detail: format!("unrecognised leading bytes {:02x?}", &head[..n.min(8)]),
    }))
}

pub(crate) fn load_from<R: ReadAt>(source: R, options: &LoadOptions) -> Result<Checkpoint> {
    match detect_format(&source)? {
        Format::TorchZip | Format::TorchScript => torch_zip::load(source, options, None),
        Format::TorchLegacy => torch_legacy::load(&source, options, None),
        Format::Safetensors => load_safetensors(&source, options, None),
    }
}

fn load_safetensors<R: ReadAt>(
    source: &R,
    options: &LoadOptions,
    mapped: Option<MappedRecords>,
) -> Result<Checkpoint> {
    #[cfg(feature = "safetensors")]
    return safetensors::load(source, options, mapped, None);
    #[cfg(not(feature = "safetensors"))]
    {
        let _ = (source, options, mapped);
        Err(Error::Checkpoint(CheckpointError::Unsupported {
            what: "safetensors files (stowage was built without its `safetensors` feature)".into(),
        }))
    }
}
