//! File-backed storages: PyTorch's `UntypedStorage.from_file(filename, shared, nbytes)`.
//!
//! `shared = true` maps the file read-write and shared (`MAP_SHARED`): writes
//! reach the file, a shorter file is grown to `nbytes`, and the file stays on
//! disk after the storage is dropped. `shared = false` maps it privately
//! (copy-on-write, `MAP_PRIVATE`): the storage can be written, the file never
//! changes, and a file shorter than `nbytes` is an error. Neither can be resized.

use crate::error::{ErrorContext, StorageError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use memmap2::MmapOptions;

use super::mapped::MappedBytes;
use super::{Backing, UntypedStorage};
use crate::{Device, Error, Result};

/// What a file-backed storage records about its file.
pub(crate) struct FileInfo {
    /// The file's path when mapped shared (PyTorch reports `filename` only then).
    pub(crate) path: Option<PathBuf>,
}

impl UntypedStorage {
    /// A storage over the first `nbytes` bytes of the file at `path`
    /// (PyTorch's `UntypedStorage.from_file`). `nbytes == 0` gives an empty storage.
    ///
    /// # Safety
    /// The storage's bytes are the file's: while the storage lives, the file must
    /// not be truncated below `nbytes` (reads would fault), and another process or
    /// mapping may write the bytes only in a way ordered with this process's
    /// accesses (for example, the writer finishes before the reader starts). For
    /// `shared = false`, other writers to the file must not touch pages this
    /// process has not yet written.
    ///
    /// # Errors
    /// [`Error::InFile`] around [`Error::Io`] when it cannot be opened, grown or mapped;
    /// [`StorageError::FileTooSmall`] when `shared` is false and the file is shorter than `nbytes`.
    pub unsafe fn from_file(
        path: impl AsRef<Path>,
        shared: bool,
        nbytes: usize,
    ) -> Result<UntypedStorage> {
        let path = path.as_ref();
        let io = |e| Error::Io(e).in_file(path.to_owned());
        let file: File = if shared {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path)
                .map_err(io)?
        } else {
            File::open(path).map_err(io)?
        };
        let size = file.metadata().map_err(io)?.len();
        if (size as u128) < nbytes as u128 {
            if !shared {
                return Err(Error::Storage(StorageError::FileTooSmall {
                    path: path.to_owned(),
                    size,
                    nbytes,
                }));
            }
            file.set_len(nbytes as u64).map_err(io)?;
        }
        let info = FileInfo {
            path: shared.then(|| path.to_owned()),
        };
        if nbytes == 0 {
            return Ok(Self::from_backing(
                Device::CPU,
                Backing::File(MappedBytes::own(None, info)),
            ));
        }
        let mut options = MmapOptions::new();
        options.len(nbytes);
        // SAFETY: the file is at least `nbytes` long (checked or grown above), and the
        // caller promises it is not truncated or raced while the storage lives.
        let map = unsafe {
            if shared {
                options.map_mut(&file)
            } else {
                options.map_copy(&file)
            }
        }
        .map_err(io)?;
        // The mapping stays valid after the file is closed.
        Ok(Self::from_backing(
            Device::CPU,
            Backing::File(MappedBytes::own(Some(map), info)),
        ))
    }
}
