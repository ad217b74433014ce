//! Shared-memory storages: PyTorch's `share_memory_()`.
//!
//! The bytes move into a POSIX shared-memory object (`shm_open`), mapped
//! `MAP_SHARED`; the storage keeps its identity, so every tensor viewing it
//! follows. Two strategies, as `torch.multiprocessing`:
//!
//! - [`SharingStrategy::FileDescriptor`] (PyTorch's Linux default): the
//!   object is unlinked at once and only its file descriptor remains; another
//!   process gets the bytes from a duplicate of the descriptor (passed over a
//!   Unix socket with `SCM_RIGHTS`, or inherited).
//! - [`SharingStrategy::FileSystem`]: the object keeps its name until the
//!   storage that created it is dropped; another process opens it by name.
//!
//! Either way nothing is left in `/dev/shm` once the creating storage is gone.
//!
//! Compiled with the `shm` feature (on by default).

use crate::error::StorageError;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapOptions;

use super::mapped::MappedBytes;
use super::{Backing, UntypedStorage};
use crate::{Device, Error, Result};

/// How [`UntypedStorage::share_memory_with`] hands the bytes to other processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SharingStrategy {
    /// Unlink the object at once; share its file descriptor.
    #[default]
    FileDescriptor,
    /// Keep the object's name until the creating storage is dropped; share the name.
    FileSystem,
}

/// What a shared-memory storage records about its object.
pub(crate) struct ShmInfo {
    /// The object's name while it has one (`None` once unlinked: the descriptor strategy).
    name: Option<String>,
    /// The descriptor, for handing to other processes.
    file: File,
    /// Whether dropping this storage unlinks the name (the file-system strategy's creator).
    unlink_on_drop: bool,
}

impl Drop for ShmInfo {
    fn drop(&mut self) {
        if let (true, Some(name)) = (self.unlink_on_drop, &self.name) {
            if let Ok(c) = CString::new(name.as_str()) {
                // SAFETY: `c` is a valid NUL-terminated string; unlinking a name has no
                // memory-safety effect (mappings stay valid), and a failure is ignored.
                unsafe { libc::shm_unlink(c.as_ptr()) };
            }
        }
    }
}

/// How another process can reach a shared-memory storage's bytes.
#[derive(Debug)]
pub struct SharedMemoryHandle {
    /// The object's name, while it has one (the file-system strategy).
    pub name: Option<String>,
    /// A duplicate of the object's file descriptor.
    pub fd: OwnedFd,
    /// The storage's size in bytes.
    pub nbytes: usize,
}

fn os_error(what: &str) -> Error {
    Error::Storage(StorageError::SharedMemory {
        name: what.to_owned(),
        source: std::io::Error::last_os_error(),
    })
}

/// Creates (`create`) or opens a shared-memory object named `name`, read-write.
fn shm_open(name: &str, create: bool) -> Result<File> {
    let c = CString::new(name).map_err(|_| {
        Error::Storage(StorageError::NulInName {
            name: name.to_owned(),
        })
    })?;
    let flags = libc::O_RDWR
        | if create {
            libc::O_CREAT | libc::O_EXCL
        } else {
            0
        };
    // SAFETY: `c` is a valid NUL-terminated string; `shm_open` only reads it.
    let fd = unsafe { libc::shm_open(c.as_ptr(), flags, 0o600 as libc::mode_t) };
    if fd < 0 {
        return Err(os_error(name));
    }
    // SAFETY: `fd` was just returned by `shm_open`, is open, and is owned by nobody else.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn unique_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "/stowage_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

/// Maps `file` (`nbytes` long) shared; `None` for zero bytes.
///
/// # Safety
/// Other processes mapping the object must order their writes with this process's accesses.
unsafe fn map_shared(file: &File, nbytes: usize, what: &str) -> Result<Option<memmap2::MmapMut>> {
    if nbytes == 0 {
        return Ok(None);
    }
    // SAFETY: the object is `nbytes` long; the caller accepts the cross-process contract.
    unsafe { MmapOptions::new().len(nbytes).map_mut(file) }
        .map(Some)
        .map_err(|e| {
            Error::Storage(StorageError::SharedMemory {
                name: what.to_owned(),
                source: e,
            })
        })
}

impl UntypedStorage {
    /// Moves the bytes into shared memory with the default strategy (file
    /// descriptor), as PyTorch's `share_memory_()`. Already shared (shared-memory
    /// or file-backed) storages and storages without bytes are left as they are.
    ///
    /// # Errors
    /// [`StorageError::SharedMemory`] when the shared-memory object cannot be created or mapped;
    /// [`StorageError::ShareMemoryNotCpu`] for a meta storage, as PyTorch refuses it
    /// (`_share_fd_: only available on CPU`).
    pub fn share_memory_(&self) -> Result<&Self> {
        self.share_memory_with(SharingStrategy::default())
    }

    /// [`share_memory_`](Self::share_memory_) with an explicit strategy.
    ///
    /// # Errors
    /// As [`share_memory_`](Self::share_memory_).
    pub fn share_memory_with(&self, strategy: SharingStrategy) -> Result<&Self> {
        // PyTorch passes meta storages on to the CPU sharing functions, which refuse them.
        if self.device().is_meta() {
            return Err(Error::Storage(StorageError::ShareMemoryNotCpu {
                op: match strategy {
                    SharingStrategy::FileDescriptor => "_share_fd_",
                    SharingStrategy::FileSystem => "_share_filename_",
                },
            }));
        }
        let mut guard = self.data_write()?;
        let bytes = match &*guard {
            Backing::Heap(h) => h.as_slice(),
            #[cfg(feature = "pinned")]
            Backing::Pinned(p) => p.as_slice(),
            // Shared, file-backed and mapped storages are shared already; no bytes, nothing to share.
            Backing::Shm(_)
            | Backing::File(_)
            | Backing::Mapped(_)
            | Backing::Lazy(_)
            | Backing::Meta { .. } => return Ok(self),
        };
        let nbytes = bytes.len();
        let name = unique_name();
        let file = shm_open(&name, true)?;
        let unlink = || {
            if let Ok(c) = CString::new(name.as_str()) {
                // SAFETY: a valid NUL-terminated name; see `ShmInfo::drop`.
                unsafe { libc::shm_unlink(c.as_ptr()) };
            }
        };
        let made = (|| {
            file.set_len(nbytes as u64).map_err(|e| {
                Error::Storage(StorageError::SharedMemory {
                    name: name.clone(),
                    source: e,
                })
            })?;
            // SAFETY: the object was created exclusively just now; nobody else maps it yet.
            let mut map = unsafe { map_shared(&file, nbytes, &name)? };
            if let Some(m) = map.as_mut() {
                m.copy_from_slice(bytes);
            }
            Ok(map)
        })();
        let map = match made {
            Ok(m) => m,
            Err(e) => {
                unlink();
                return Err(e);
            }
        };
        let info = match strategy {
            SharingStrategy::FileDescriptor => {
                unlink();
                ShmInfo {
                    name: None,
                    file,
                    unlink_on_drop: false,
                }
            }
            SharingStrategy::FileSystem => ShmInfo {
                name: Some(name),
                file,
                unlink_on_drop: true,
            },
        };
        *guard = Backing::Shm(MappedBytes::own(map, info));
        Ok(self)
    }

    /// How another process can reach this storage's bytes, for a shared-memory storage.
    ///
    /// # Errors
    /// [`StorageError::SharedMemory`] when the descriptor cannot be duplicated.
    pub fn shared_memory_handle(&self) -> Result<Option<SharedMemoryHandle>> {
        let guard = self.read_lock();
        let Backing::Shm(bytes) = &*guard else {
            return Ok(None);
        };
        let Some(info) = bytes.extra::<ShmInfo>() else {
            return Ok(None);
        };
        let fd = info.file.try_clone().map_err(|e| {
            Error::Storage(StorageError::SharedMemory {
                name: "descriptor".into(),
                source: e,
            })
        })?;
        Ok(Some(SharedMemoryHandle {
            name: info.name.clone(),
            fd: fd.into(),
            nbytes: bytes.len(),
        }))
    }

    /// A storage over the shared-memory object named `name` (made by another
    /// process's [`share_memory_with`](Self::share_memory_with) with
    /// [`SharingStrategy::FileSystem`]). The creator unlinks the name; this one does not.
    ///
    /// # Safety
    /// The bytes are shared with other processes: their writes must be ordered with
    /// this process's accesses (for example, one finishes before the other starts),
    /// and the object must be at least `nbytes` long.
    ///
    /// # Errors
    /// [`StorageError::SharedMemory`] when the object cannot be opened or mapped.
    pub unsafe fn from_shared_name(name: &str, nbytes: usize) -> Result<UntypedStorage> {
        let file = shm_open(name, false)?;
        // SAFETY: the caller's contract.
        let map = unsafe { map_shared(&file, nbytes, name)? };
        let info = ShmInfo {
            name: Some(name.to_owned()),
            file,
            unlink_on_drop: false,
        };
        Ok(Self::from_backing(
            Device::CPU,
            Backing::Shm(MappedBytes::own(map, info)),
        ))
    }

    /// A storage over the shared-memory object behind `fd` (a descriptor from another
    /// process's [`shared_memory_handle`](Self::shared_memory_handle)).
    ///
    /// # Safety
    /// As [`from_shared_name`](Self::from_shared_name).
    ///
    /// # Errors
    /// [`StorageError::SharedMemory`] when the object cannot be mapped.
    pub unsafe fn from_shared_fd(fd: OwnedFd, nbytes: usize) -> Result<UntypedStorage> {
        let file = File::from(fd);
        // SAFETY: the caller's contract.
        let map = unsafe { map_shared(&file, nbytes, "shared memory descriptor")? };
        let info = ShmInfo {
            name: None,
            file,
            unlink_on_drop: false,
        };
        Ok(Self::from_backing(
            Device::CPU,
            Backing::Shm(MappedBytes::own(map, info)),
        ))
    }
}
