//! Errors of checkpoints' values and policies: what stowage refuses to do.

use crate::DType;

/// A well-formed checkpoint that stowage refuses or cannot serve as asked:
/// a global outside the allowlist, a limit against hostile input, a value
/// that cannot be saved, a path with no value, something unsupported.
///
/// Part of [`Error`](crate::Error), as [`Error::Checkpoint`](crate::Error::Checkpoint).
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A value the pickle writer could not write (a string longer than protocol 2
    /// holds, a global with a newline, a full memo).
    #[error("pickle: {0}")]
    PickleWrite(crate::checkpoint::pickle::WriteError),
    /// A global outside PyTorch's `weights_only` allowlist; nothing was constructed.
    #[error("refused global {module}.{name}: not in PyTorch's weights_only allowlist, so it is never constructed")]
    GlobalNotAllowed {
        /// The module named.
        module: String,
        /// The name within it.
        name: String,
    },
    /// A value PyTorch's `weights_only` loader refuses (an inert object, a
    /// numpy array, a `datetime` …), met while saving a torch checkpoint: it
    /// cannot be written so that `torch.load(weights_only=True)` reads it.
    ///
    /// [`Checkpoint::drop_objects`](crate::Checkpoint::drop_objects) drops
    /// such values first.
    #[error("cannot save {class} at {path:?}: torch.load(weights_only=True) refuses it")]
    NotSaveable {
        /// The value's path, dotted (`""`: the root).
        path: String,
        /// Its class, `module.name`.
        class: String,
    },
    /// A destination whose name tells no format stowage writes, and no
    /// folder format was given
    /// ([`Destination::resolve`](crate::checkpoint::Destination::resolve)).
    #[error(
        "cannot tell the format to write from {}: name a file .pt, .pth, .bin, .ckpt, .tar or .pkl (torch zip) or .safetensors, or model.safetensors.index.json or pytorch_model.bin.index.json (a sharded set in that folder), or give a folder format: safetensors, bin or dcp",
        .path.display()
    )]
    UnknownSaveFormat {
        /// The destination.
        path: std::path::PathBuf,
    },
    /// Something stowage does only when built with a Cargo feature this
    /// build leaves out.
    #[error("{what} need stowage's `{feature}` feature, which this build leaves out")]
    FeatureDisabled {
        /// The feature (`safetensors`, `zstd`, `remote`).
        feature: &'static str,
        /// What needs it (`safetensors files`).
        what: &'static str,
    },
    /// A file in a checkpoint format stowage recognises and does not read
    /// (the tar format of PyTorch 0.3 and older).
    #[error("unsupported: the {format} checkpoint format")]
    UnsupportedFormat {
        /// The format (`tar (PyTorch 0.3 and older)`).
        format: &'static str,
    },
    /// A tensor of a layout stowage does not build (a sparse layout it does
    /// not know).
    #[error("unsupported: tensors of layout {layout}")]
    UnsupportedLayout {
        /// The layout's name, as the pickle gives it.
        layout: String,
    },
    /// A quantized tensor whose quantization scheme stowage does not read.
    #[error("unsupported: quantized tensors with qscheme {qscheme}")]
    UnsupportedQScheme {
        /// The scheme's name (`per_tensor_symmetric`).
        qscheme: String,
    },
    /// An element type a file format holds that no PyTorch dtype is.
    #[error("unsupported: {format} dtype {dtype}")]
    UnsupportedDType {
        /// The file format (`safetensors`).
        format: &'static str,
        /// The dtype, as the format names it.
        dtype: String,
    },
    /// A DCP item's stream transform stowage does not undo (anything but
    /// `stream.zstd/1`).
    #[error("unsupported: the DCP stream transform {transform:?}")]
    UnsupportedTransform {
        /// The transform's descriptor, as `.metadata` gives it.
        transform: String,
    },
    /// Something that needs a local file or folder, asked of an object in a
    /// store.
    #[error("unsupported by URL: {operation}")]
    NotLocal {
        /// What was asked (`saving a folder …`).
        operation: &'static str,
    },
    /// Something PyTorch can write that stowage recognises but does not support.
    #[error("unsupported: {what}")]
    Unsupported {
        /// What it is.
        what: String,
    },
    /// A resource limit that protects against hostile input.
    #[error("limit exceeded: {limit} reached {value} (at most {max}); {}", limit.how_to_raise())]
    LimitExceeded {
        /// The limit.
        limit: crate::Limit,
        /// The count that went past it (where counting stopped).
        value: u64,
        /// The limit's value.
        max: u64,
    },
    /// One storage saved as two dtypes (PyTorch refuses this too).
    #[error("cannot save multiple tensors or storages that view the same data as different types (storage {key}: {first} and {second})")]
    SaveConflict {
        /// The storage's key.
        key: String,
        /// The dtype it was first saved as.
        first: DType,
        /// The conflicting dtype.
        second: DType,
    },
    /// Nothing at a path of a checkpoint's object ([`Checkpoint::get`](crate::Checkpoint::get)).
    #[error("no value at {path:?}")]
    ValueNotFound {
        /// The dotted path asked for (`""` is the root).
        path: String,
    },
    /// A value of another kind than the one asked for.
    #[error("value at {path:?}: expected {expected}, found {found}")]
    ValueType {
        /// The dotted path of the value (`""` is the root).
        path: String,
        /// The kind asked for (`int`, `dict`, ...).
        expected: &'static str,
        /// The value's kind.
        found: &'static str,
    },
    /// A folder replaced (a save exchanged it) while a load was reading
    /// it, after the files the load still needed were gone: nothing of the
    /// new version was read.
    #[error("the folder {} was replaced while it was being read (a save exchanged it); nothing of the new version was read: load it again", folder.display())]
    FolderReplaced {
        /// The folder, as it was named when the load opened it.
        folder: std::path::PathBuf,
    },
    /// A source that is no regular file (a FIFO, a device, a socket):
    /// checkpoints are read by position, from files or from memory.
    #[error("{what}, not a regular file: a checkpoint is read from a regular file (by position) or from memory")]
    NotARegularFile {
        /// What it is (`a FIFO`, `a character device`, …).
        what: &'static str,
    },
}

crate::error::debug_is_display!(CheckpointError);
