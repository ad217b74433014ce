//! The one error type of stowage, and its domains.
//!
//! [`Error`] holds one enum per domain: [`TensorError`] (shapes, dtypes,
//! arithmetic, gradients), [`StorageError`] (bytes, memory, devices),
//! [`FormatError`] (a file that is not what its format says) and
//! [`CheckpointError`] (what stowage refuses or cannot do with a
//! checkpoint), beside [`Error::Io`]. Variants carry the numbers and names a
//! caller needs (what was asked, what the limit was), never pre-formatted
//! prose. Context wrappers ([`Error::InFile`], [`Error::InRecord`],
//! [`Error::InStorage`], [`Error::AtPath`]) name the file, the entry and the
//! object path an error arose under; [`ErrorContext`] adds them, to an
//! error or to a result's.

mod checkpoint;
mod format;
mod limit;
mod storage;
mod tensor;

pub use checkpoint::CheckpointError;
pub use format::FormatError;
pub use limit::Limit;
pub use storage::StorageError;
pub use tensor::TensorError;

use std::path::PathBuf;

/// `Debug` as the message, as [`Error`]'s is (see there).
macro_rules! debug_is_display {
    ($t:ty) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                if f.alternate() {
                    let name: &'static str = self.into();
                    write!(f, "{}::{name}: ", stringify!($t))?;
                }
                std::fmt::Display::fmt(self, f)
            }
        }
    };
}
pub(crate) use debug_is_display;

/// Result alias used across stowage.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in stowage.
///
/// `Debug` prints the message, as `Display` does, so that
/// `fn main() -> stowage::Result<()>` reports an error as a person reads
/// it; `{:#?}` puts the variant's name ([`Error::name`]) before it.
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum Error {
    /// A tensor's shape, dimension, dtype, view, arithmetic or gradient.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// A storage's bytes, memory or device.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A checkpoint whose bytes are not what its format says.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A checkpoint stowage refuses or cannot serve as asked.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// An I/O error. The file it concerned is named once, by the
    /// [`Error::InFile`] around it.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// An error in a file.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        source: Box<Error>,
    },
    /// An error in a record of an archive.
    #[error("record {name}: {source}")]
    InRecord {
        /// The record.
        name: String,
        /// What went wrong.
        source: Box<Error>,
    },
    /// An error in a storage of a checkpoint.
    #[error("storage {key}: {source}")]
    InStorage {
        /// The storage key.
        key: String,
        /// What went wrong.
        source: Box<Error>,
    },
    /// An error at an object path (`model.layers.0.weight`).
    #[error("{path}: {source}")]
    AtPath {
        /// The dotted path.
        path: String,
        /// What went wrong.
        source: Box<Error>,
    },
}

impl Error {
    /// `self`, or [`FormatError::MissingFile`] when it says that `file`,
    /// which `named_by` names, is not there.
    pub(crate) fn or_missing(
        self,
        file: std::path::PathBuf,
        named_by: std::path::PathBuf,
    ) -> Error {
        match self.root() {
            Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
                Error::Format(FormatError::MissingFile { file, named_by })
            }
            _ => self,
        }
    }

    /// The variant's name (`"InFile"`, `"OutOfStorage"`), for a program
    /// that reports or counts errors by kind: a domain's error is named by
    /// its own variant.
    pub fn name(&self) -> &'static str {
        match self {
            Error::Tensor(e) => e.into(),
            Error::Storage(e) => e.into(),
            Error::Format(e) => e.into(),
            Error::Checkpoint(e) => e.into(),
            e => e.into(),
        }
    }

    /// The error inside every context wrapper ([`Error::InFile`],
    /// [`Error::InRecord`], [`Error::InStorage`], [`Error::AtPath`]): what
    /// went wrong, wherever it happened.
    pub fn root(&self) -> &Error {
        let mut e = self;
        while let Error::InFile { source, .. }
        | Error::InRecord { source, .. }
        | Error::InStorage { source, .. }
        | Error::AtPath { source, .. } = e
        {
            e = source;
        }
        e
    }

    /// The remote read or write that failed, with its URL, byte range and
    /// cause, wherever it lies under the context wrappers.
    ///
    /// Remote failures are I/O errors: every read, of a local file or of an
    /// object, goes through [`ReadAt`](crate::io::ReadAt)'s `io::Result`,
    /// so they arrive as [`Error::Io`], their
    /// [`kind`](std::io::Error::kind) set as for a local file
    /// (`NotFound`, `PermissionDenied`, `UnexpectedEof`), with the
    /// structured [`RemoteError`](crate::io::remote::RemoteError) inside.
    #[cfg(feature = "remote")]
    pub fn remote(&self) -> Option<&crate::io::remote::RemoteError> {
        match self.root() {
            Error::Io(io) => io.get_ref()?.downcast_ref(),
            _ => None,
        }
    }
}

impl From<crate::checkpoint::pickle::PickleError> for Error {
    fn from(e: crate::checkpoint::pickle::PickleError) -> Error {
        Error::Format(FormatError::Pickle(e))
    }
}

impl From<crate::checkpoint::zip::ZipError> for Error {
    fn from(e: crate::checkpoint::zip::ZipError) -> Error {
        Error::Format(FormatError::Zip(e))
    }
}

#[cfg(feature = "safetensors")]
impl From<safetensors::SafeTensorError> for Error {
    fn from(e: safetensors::SafeTensorError) -> Error {
        Error::Format(FormatError::Safetensors(e))
    }
}

/// Names where an error happened: the file, the entry in it, the storage,
/// the object path. Implemented for [`Error`] and for results whose error
/// converts into one, so that context is added in one way everywhere:
///
/// ```
/// use stowage::ErrorContext;
/// # fn read() -> stowage::Result<u8> { Ok(1) }
/// # fn main() -> stowage::Result<()> {
/// let byte = read().in_file("model.pt").in_entry("archive/data.pkl")?;
/// # Ok(()) }
/// ```
///
/// The last context added is the outermost: the example's error reads
/// `model.pt: record archive/data.pkl: …`.
pub trait ErrorContext {
    /// `Error` for an error, `Result<T>` for a result.
    type Output;
    /// In the file (or object URL) `path`: [`Error::InFile`].
    fn in_file(self, path: impl Into<PathBuf>) -> Self::Output;
    /// In the archive record or folder member `name`: [`Error::InRecord`].
    fn in_entry(self, name: impl Into<String>) -> Self::Output;
    /// In the checkpoint's storage `key`: [`Error::InStorage`].
    fn in_storage(self, key: impl Into<String>) -> Self::Output;
    /// At the object path `path` (`model.layers.0.weight`): [`Error::AtPath`].
    fn at_path(self, path: impl Into<String>) -> Self::Output;
}

impl ErrorContext for Error {
    type Output = Error;
    fn in_file(self, path: impl Into<PathBuf>) -> Error {
        Error::InFile {
            path: path.into(),
            source: Box::new(self),
        }
    }
    fn in_entry(self, name: impl Into<String>) -> Error {
        Error::InRecord {
            name: name.into(),
            source: Box::new(self),
        }
    }
    fn in_storage(self, key: impl Into<String>) -> Error {
        Error::InStorage {
            key: key.into(),
            source: Box::new(self),
        }
    }
    fn at_path(self, path: impl Into<String>) -> Error {
        Error::AtPath {
            path: path.into(),
            source: Box::new(self),
        }
    }
}

impl<T, E: Into<Error>> ErrorContext for std::result::Result<T, E> {
    type Output = Result<T>;
    fn in_file(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|e| e.into().in_file(path))
    }
    fn in_entry(self, name: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.into().in_entry(name))
    }
    fn in_storage(self, key: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.into().in_storage(key))
    }
    fn at_path(self, path: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.into().at_path(path))
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            write!(f, "Error::{}: ", self.name())?;
        }
        std::fmt::Display::fmt(self, f)
    }
}

/// An error and its causes on one line, `outer: cause: root cause`: how the
/// command line and the scan report's JSON write an error.
///
/// A cause whose message the line already holds is left out (many errors,
/// [`Error::Io`] among them, print their source in their own message), and
/// line breaks inside messages become spaces.
pub fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = e.source();
    }
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_the_message_and_alternate_debug_names_the_variant() {
        let e = Error::from(TensorError::NotAScalar { numel: 2 }).in_file("x.pt");
        // What `fn main() -> stowage::Result<()>` prints after "Error: ".
        assert_eq!(format!("{e:?}"), e.to_string());
        assert!(e.to_string().starts_with("x.pt: "), "{e}");
        assert_eq!(format!("{e:#?}"), format!("Error::InFile: {e}"));
        assert_eq!(e.name(), "InFile");
        assert_eq!(e.root().name(), "NotAScalar");
        assert_eq!(
            format!("{:#?}", e.root()),
            "Error::NotAScalar: a tensor with 2 elements cannot be converted to a scalar"
        );
    }
}
