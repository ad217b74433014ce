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
//!   and [`decoded`] as data); `options` ([`LoadOptions`], [`LoadMode`](crate::LoadMode),
//!   [`SaveOptions`](crate::SaveOptions)); and `torch/`, PyTorch's meaning of a pickle: how
//!   persistent ids become storages, and how tensors are rebuilt on them
//!   and pickled back;
//! - the formats, `format/`, one module each with the same shape (load, and
//!   save where stowage writes the format): `torch_zip`, `torch_legacy`,
//!   [`safetensors`], and the folder layouts built on them, [`sharded`] sets
//!   and [`dcp`]; beside them [`scan`], which reads every pickle a format
//!   holds without its meaning;
//! - this module, `folder` and `source`: format detection by content, what
//!   a folder holds ([`Folder`]), and a source resolved once and loaded
//!   ([`resolve`], [`Source`]), which records its [`Layout`].
//!
//! Loading never runs code: a global outside PyTorch's `weights_only`
//! allowlist is an error.

pub mod content;
mod destination;
mod detect;
pub(crate) mod entry;
mod folder;
pub(crate) mod format;
mod globals;
pub(crate) mod options;
pub(crate) mod records;
pub mod scan;
mod source;
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

pub use destination::{save_to, Destination, FolderFormat, SaveFormat};
pub use detect::{detect_format, load_bytes};
pub use folder::Folder;
pub use format::torch_zip::save_to_writer;
pub use globals::allowlist::Global;
pub(crate) use options::LoadOptions;
pub use options::{Progress, LIMITS_ENV};
pub use source::{resolve, Source};
pub use value::access::{ValueKind, ValueRef};
pub use value::builder::{CheckpointBuilder, PyValue};
pub use value::data::{
    ClassRef, Date, NdArray, NumpyDType, NumpyScalar, PyData, TimeDelta, TimeOfDay, TimeZone,
};
pub(crate) use value::graph::Checkpoint;
pub use value::graph::{
    dotted, ByteOrder, Construct, Format, InertObject, LocationTag, Object, PathKey, RecordKey,
    StorageRecord, StorageRef, TensorObject, MAX_PATHS,
};
pub use value::int_text;
pub use value::kind::{CompressedLayout, Quantization, TensorKind};
pub use value::origin::Layout;
