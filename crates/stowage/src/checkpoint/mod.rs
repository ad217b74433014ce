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
//!   [`SaveOptions`](crate::SaveOptions)); and `torch/`, PyTorch's meaning of a pickle: how
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

mod destination;
pub(crate) mod entry;
mod folder;
pub(crate) mod format;
mod globals;
pub(crate) mod options;
pub mod scan;
mod torch;
pub(crate) mod value;

/// The words of the pickle machine (its own crate, `stowage-pickle`) that
/// stowage's API speaks: a raw value ([`ValueRef::raw`], a tensor's or an
/// inert object's state), the limits a load sets and the errors a pickle
/// gives. The machine itself (the unpickler, its graph and hooks, the
/// writer, the disassembler) stays in its crate.
pub mod pickle {
    pub use stowage_pickle::{Limits, NodeId, PickleError, Value, WriteError};
    // The rest, for stowage's own formats.
    pub(crate) use stowage_pickle::*;
}
/// The zip container's error, which stowage's errors carry. The container
/// itself is its own crate, `stowage-zip`.
pub mod zip {
    pub use stowage_zip::ZipError;
    // The rest, for stowage's own formats.
    pub(crate) use stowage_zip::*;
}

#[cfg(feature = "safetensors")]
pub use format::safetensors;
pub use format::{dcp, sharded};
pub use globals::decoded;

use crate::error::{CheckpointError, ErrorContext, FormatError};

pub use destination::{save_to, Destination, FolderFormat, SaveFormat};
use folder::folder_at;
pub use folder::{folder_of, Folder};
pub use format::torch_zip::save_to_writer;
use format::{torch_legacy, torch_zip};
pub use globals::allowlist::Global;
pub use options::Progress;
pub(crate) use options::{LoadMode, LoadOptions};
pub use value::access::{ValueKind, ValueRef};
pub use value::builder::{CheckpointBuilder, PyValue};
pub use value::data::{
    ClassRef, Date, NdArray, NumpyDType, NumpyScalar, PyData, TimeDelta, TimeOfDay, TimeZone,
};
pub(crate) use value::graph::Checkpoint;
pub use value::graph::{
    dotted, ByteOrder, Construct, Format, InertObject, Object, PathKey, StorageRecord, StorageRef,
    TensorObject, MAX_PATHS,
};
pub use value::kind::{CompressedLayout, Quantization, TensorKind};

use crate::io::{Location, ReadAt};
use crate::storage::{MappedFile, MappedRecords};
use crate::{Error, Result};

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
        // The archive's directory, pickle and local headers are read with
        // `pread`, not through the mapping: a read through it faults in each
        // record's header page (and the kernel's fault-around its neighbours),
        // which was most of a mapped load's time (docs/performance.md).
        Ok(Format::TorchZip | Format::TorchScript) => torch_zip::load(file, options, Some(records)),
        Ok(Format::TorchLegacy) => torch_legacy::load(&reader, options, Some(records)),
        Ok(Format::Safetensors) => load_safetensors(&reader, options, Some(records)),
        Err(e) => Err(e),
    };
    loaded.map_err(in_file)
}

/// Loads a checkpoint held in memory (PyTorch's `torch.load(io.BytesIO(...))`).
///
/// # Errors
/// As [`load`](crate::load), without the file name.
pub fn load_bytes(bytes: &[u8], options: &LoadOptions) -> Result<Checkpoint> {
    load_from(bytes, options)
}

/// The kind of checkpoint `source` holds, from its content (never its name).
///
/// # Errors
/// [`FormatError::NotACheckpoint`] for empty or unrecognised files and the `PYTORCH1`
/// preview format, [`CheckpointError::UnsupportedFormat`] for PyTorch ≤ 0.3 tar files, I/O errors.
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
            return Err(Error::Checkpoint(CheckpointError::UnsupportedFormat {
                format: "tar (PyTorch 0.3 and older)",
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
        Err(Error::Checkpoint(CheckpointError::FeatureDisabled {
            feature: "safetensors",
            what: "safetensors files",
        }))
    }
}
