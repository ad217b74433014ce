//! stowage's errors as Python exceptions: `StowageError` is the base, with
//! `UnsafeGlobalError` (a global outside the allowlist) and
//! `CorruptCheckpointError` (a file that is not what it says) below it; a
//! missing file is `FileNotFoundError` and other I/O failures `OSError` with
//! their errno, as Python's own file functions raise them.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use stowage::Error;
use stowage::{CheckpointError, FormatError, StorageError, TensorError};

create_exception!(
    _stowage,
    StowageError,
    PyException,
    "Base class of every error stowage raises about a checkpoint."
);
create_exception!(
    _stowage,
    UnsafeGlobalError,
    StowageError,
    "The file names a global outside PyTorch's weights_only allowlist; it was never imported or called. `.module` and `.name` name it."
);
create_exception!(
    _stowage,
    CorruptCheckpointError,
    StowageError,
    "The file is damaged or not a checkpoint of the format it claims. `.file` names it and `.entry` the record or offset, where known."
);

/// The error the context wrappers (`InFile`, `InRecord`, …) hold, the file
/// they name, and the most specific entry: the deepest record or storage
/// named on the way down, or the record the error itself names.
fn innermost(mut e: &Error) -> (&Error, Option<String>, Option<String>) {
    let (mut file, mut entry) = (None, None);
    loop {
        e = match e {
            Error::InFile { path, source } => {
                file.get_or_insert_with(|| path.display().to_string());
                source
            }
            Error::InRecord { name, source } => {
                entry = Some(name.clone());
                source
            }
            Error::InStorage { key, source } => {
                entry = Some(format!("storage {key}"));
                source
            }
            Error::AtPath { source, .. } => source,
            Error::Format(FormatError::MissingRecord { name })
            | Error::Format(FormatError::RecordSize { name, .. })
            | Error::Format(FormatError::ImplausibleRecord { name, .. }) => {
                return (e, file, Some(name.clone()));
            }
            _ => return (e, file, entry),
        }
    }
}

/// Whether the error says the file's contents are wrong (rather than the
/// request, the machine, or a refusal by policy): the format domain, and a
/// tensor layout the file declares that its own bytes cannot hold.
fn is_corrupt(e: &Error) -> bool {
    matches!(
        e,
        Error::Format(_)
            | Error::Storage(StorageError::OutOfStorage { .. } | StorageError::FileTooSmall { .. })
            | Error::Tensor(TensorError::SizeOverflow { .. })
    )
}

/// The Python exception for a stowage error; its message is the error's,
/// with the file and entry it happened in.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = e.to_string();
    let (inner, file, entry) = innermost(&e);
    let err = match inner {
        Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            return PyFileNotFoundError::new_err((io.raw_os_error().unwrap_or(2), message));
        }
        Error::Io(io) => match io.raw_os_error() {
            Some(errno) => return PyOSError::new_err((errno, message)),
            None => return PyOSError::new_err(message),
        },
        // A destination whose name tells no format: a bad argument.
        Error::Checkpoint(CheckpointError::UnknownSaveFormat { .. }) => {
            return PyValueError::new_err(message);
        }
        Error::Checkpoint(CheckpointError::GlobalNotAllowed { module, name }) => {
            let err = UnsafeGlobalError::new_err(message);
            let value = err.value(py);
            if let Err(e) = value
                .setattr("module", module.as_str())
                .and_then(|()| value.setattr("name", name.as_str()))
            {
                return e;
            }
            err
        }
        e if is_corrupt(e) => {
            let err = CorruptCheckpointError::new_err(message);
            if let Err(e) = err.value(py).setattr("entry", entry.as_deref()) {
                return e;
            }
            err
        }
        _ => StowageError::new_err(message),
    };
    match err.value(py).setattr("file", file.as_deref()) {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// Registers the exception classes in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StowageError", py.get_type::<StowageError>())?;
    m.add("UnsafeGlobalError", py.get_type::<UnsafeGlobalError>())?;
    m.add(
        "CorruptCheckpointError",
        py.get_type::<CorruptCheckpointError>(),
    )?;
    Ok(())
}
