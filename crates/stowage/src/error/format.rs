//! Errors of checkpoint formats: a file that is not what it claims.

/// A checkpoint whose bytes are not what its format says: a broken pickle,
/// zip or safetensors header, a record missing or of the wrong size, an
/// object of the wrong shape where PyTorch's meaning expects another.
///
/// The Python package raises these as `CorruptCheckpointError`.
///
/// Part of [`Error`](crate::Error), as [`Error::Format`](crate::Error::Format).
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum FormatError {
    /// Two tensors would be saved under one name (a safetensors file names
    /// each tensor once).
    #[error("two tensors are saved under the name {name:?}")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A shard of a sharded set lacks a tensor its index puts in it.
    #[error("the index puts tensor {name:?} in shard {shard:?}, which does not hold it")]
    ShardLacksTensor {
        /// The tensor's name.
        name: String,
        /// The shard's file name.
        shard: String,
    },
    /// A tensor whose content is not what the manifest a load was given
    /// expects ([`LoadOptions::with_expected`](crate::LoadOptions::with_expected)),
    /// or a tensor the one holds and the other does not.
    #[error("tensor {name:?}: the manifest expects {expected}, the checkpoint holds {found}")]
    ContentMismatch {
        /// The tensor's dotted name.
        name: String,
        /// What the manifest says (`sha256 …`, `float32 [3, 2]`, `no such tensor`).
        expected: String,
        /// What the checkpoint holds, in the same terms.
        found: String,
    },
    /// A pickle the machine could not read (past one of its limits, the
    /// message says how to raise it).
    #[error("pickle: {}{}", .0, pickle_limit_hint(.0))]
    Pickle(#[from] crate::checkpoint::pickle::PickleError),
    /// A zip archive that could not be read or written.
    #[error("zip: {}{}", .0, zip_limit_hint(.0))]
    Zip(#[from] crate::checkpoint::zip::ZipError),
    /// A safetensors file the `safetensors` crate refused.
    #[cfg(feature = "safetensors")]
    #[error("safetensors: {0}")]
    Safetensors(#[from] safetensors::SafeTensorError),
    /// A pickle object of the wrong shape where PyTorch expects another.
    #[error("{context}: expected {expected}, found {found}")]
    BadObject {
        /// Where in the checkpoint's meaning.
        context: &'static str,
        /// What was expected.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// A sparse, nested or per-channel quantized tensor whose components break
    /// an invariant PyTorch's loader checks (`_validate_loaded_sparse_tensors`,
    /// `_nested_view_from_buffer`, `_rebuild_qtensor`).
    #[error("{layout} tensor: {invariant} (found {found}, bound {bound})")]
    BadTensorKind {
        /// The tensor's layout or scheme (`sparse_coo`, `nested`, `per_channel_affine`).
        layout: &'static str,
        /// The invariant broken, as PyTorch states it (`0 <= index < size`).
        invariant: &'static str,
        /// The offending value.
        found: i64,
        /// The bound it had to respect.
        bound: i64,
    },
    /// A file that is not a checkpoint stowage reads.
    #[error("not a checkpoint: {detail}")]
    NotACheckpoint {
        /// Why.
        detail: String,
    },
    /// A file that a set's index or a DCP's `.metadata` names, which is not
    /// there: the checkpoint is incomplete (a missing source itself is
    /// [`Error::Io`](crate::Error::Io), not found).
    #[error("missing file {}, which {} names", .file.display(), .named_by.display())]
    MissingFile {
        /// The file (or object) that is not there.
        file: std::path::PathBuf,
        /// The index or `.metadata` that names it.
        named_by: std::path::PathBuf,
    },
    /// A record the checkpoint references but does not hold.
    #[error("missing record {name}")]
    MissingRecord {
        /// The record's name.
        name: String,
    },
    /// A record whose size is not what the pickle declares.
    #[error("record {name} holds {found} bytes, expected {expected}")]
    RecordSize {
        /// The record's name.
        name: String,
        /// Bytes expected.
        expected: u64,
        /// Bytes found (or claimed).
        found: u64,
    },
    /// A deflated record declaring more bytes than its compressed data can expand to.
    #[error("record {name} declares {declared} bytes, more than its {compressed} compressed bytes can inflate to")]
    ImplausibleRecord {
        /// The record's name.
        name: String,
        /// Bytes the archive declares.
        declared: u64,
        /// Compressed bytes present.
        compressed: u64,
    },
}

crate::error::debug_is_display!(FormatError);

/// `; raise it with …` for a pickle's own limit, or nothing.
fn pickle_limit_hint(e: &crate::checkpoint::pickle::PickleError) -> String {
    match e {
        crate::checkpoint::pickle::PickleError::LimitExceeded { limit, .. } => {
            crate::Limit::of_pickle_field(limit)
                .map(|l| format!("; limit {}: {}", l.name(), l.how_to_raise()))
                .unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// `; raise it with …` for a zip archive past one of the load's limits (its
/// records, or a record read whole: a pickle), or nothing.
fn zip_limit_hint(e: &crate::checkpoint::zip::ZipError) -> String {
    use crate::checkpoint::zip::ZipError;
    let limit = match e {
        ZipError::TooManyEntries { .. } => crate::Limit::Records,
        ZipError::RecordTooLarge { .. } => crate::Limit::PickleBytes,
        _ => return String::new(),
    };
    format!("; limit {}: {}", limit.name(), limit.how_to_raise())
}
