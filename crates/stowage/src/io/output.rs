//! The temporary file a save writes into: sized to the archive before the first
//! byte (so the file system allocates its blocks once), and, for a synced save,
//! handed to the disk piece by piece as it fills, so that the final sync has
//! little left to wait for.
//!
//! Both are hints to Linux (`fallocate`, `sync_file_range`); elsewhere, or on a
//! file system that does not support them, the file is written the plain way and
//! the result is the same file. The file a save replaces is closed on a thread
//! of its own, so that freeing it does not delay the save.

use std::fs::File;
use std::io::{self, Write};
#[cfg(target_os = "linux")]
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// A synced save asks the kernel to start writing each piece of this many bytes
/// to the disk as soon as it is written.
pub(crate) const WRITE_BEHIND: u64 = 8 << 20;

/// The buffer a save writes through: small records gather in it, and a
/// write at least this long (a storage's or a window's bytes) goes straight
/// to the file. `BufWriter` copies into its buffer every write shorter than
/// its capacity, so a larger buffer would copy most tensors once more.
pub(crate) const WRITE_BUFFER: usize = 256 << 10;

/// Allocates `len` bytes for `file` (empty, just created) and sets its size to
/// `len`. Only a lack of space is an error; a file system that cannot
/// preallocate is written the plain way, and so is a file in memory.
pub(crate) fn preallocate(file: &File, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        if in_memory(file) {
            return Ok(());
        }
        if len == 0 || i64::try_from(len).is_err() {
            return Ok(());
        }
        use rustix::io::Errno;
        match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
            Err(e) if e == Errno::NOSPC || e == Errno::DQUOT => return Err(e.into()),
            _ => {}
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, len);
    Ok(())
}

/// Whether `file` lives in memory (tmpfs, such as `/dev/shm`).
/// There `fallocate` allocates and zeroes every page before the first byte
/// is written: zeroing that each write then overwrites, and allocation that
/// no longer overlaps what runs beside the writer (a 1 GiB
/// `convert --manifest` to `/dev/shm` spent its first 0.1-0.2 s on it, the
/// hashing thread idle; `docs/performance.md`).
#[cfg(target_os = "linux")]
// `f_type`'s width is the target's (`i64` here, narrower on 32-bit).
#[allow(clippy::useless_conversion)]
fn in_memory(file: &File) -> bool {
    rustix::fs::fstatfs(file).is_ok_and(|fs| i64::from(fs.f_type) == i64::from(libc::TMPFS_MAGIC))
}

/// Starts writing bytes `offset..offset + len` of `file` to the disk, without
/// waiting for it. A hint: errors are ignored (the final sync reports real ones).
fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    if let (Ok(offset), Ok(len)) = (
        libc::off64_t::try_from(offset),
        libc::off64_t::try_from(len),
    ) {
        // SAFETY: `sync_file_range` reads only its integer arguments; the descriptor
        // is `file`'s and alive for the call. (`rustix` has no safe wrapper of it.)
        let _ = unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// The file being written, with the count of bytes written.
pub(crate) struct Output {
    file: File,
    written: u64,
    /// Bytes before this offset have been handed to the disk (with `write_behind`).
    handed: u64,
    write_behind: bool,
}

impl Output {
    /// Writes into `file` from its start; `write_behind`: start writing each
    /// [`WRITE_BEHIND`] bytes to the disk as soon as they are written.
    pub(crate) fn new(file: File, write_behind: bool) -> Output {
        Output {
            file,
            written: 0,
            handed: 0,
            write_behind,
        }
    }

    /// Cuts the file to the bytes written, if it was pre-sized to another length.
    pub(crate) fn finish(self, presized: u64) -> io::Result<()> {
        if self.written != presized {
            self.file.set_len(self.written)?;
        }
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let piece = if self.write_behind {
            buf.len().min(WRITE_BEHIND as usize)
        } else {
            buf.len()
        };
        let n = self.file.write(&buf[..piece])?;
        self.written += n as u64;
        if self.write_behind && self.written - self.handed >= WRITE_BEHIND {
            start_writeback(&self.file, self.handed, self.written - self.handed);
            self.handed = self.written;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Files smaller than this are replaced the plain way: freeing them is quick.
const RELEASE_IN_BACKGROUND_MIN: u64 = 64 << 20;

/// The regular file at `path` that a rename is about to replace, opened, so that
/// the kernel frees its pages and blocks when [`release_in_background`] closes
/// it rather than inside the rename (Linux: about 0.1–0.2 s per GiB on the
/// machine of `docs/performance.md`). `None` for small files, anything but a
/// regular file, or a file that cannot be opened; Unix only (Windows cannot
/// rename over an open file).
pub(super) fn open_replaced(path: &Path) -> Option<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.file_type().is_file() || meta.len() < RELEASE_IN_BACKGROUND_MIN {
            return None;
        }
        std::fs::OpenOptions::new()
            .read(true)
            // Never wait on a FIFO put there meanwhile, never follow a symbolic link.
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(path)
            .ok()
    }
    #[cfg(not(unix))]
    {
        let _ = (path, RELEASE_IN_BACKGROUND_MIN);
        None
    }
}

/// Closes `replaced` (unlinked by the rename) on a thread of its own, so that
/// freeing a large file overlaps what the caller does next. If no thread can be
/// started, the file is closed here (the failed spawn drops the closure).
pub(super) fn release_in_background(replaced: Option<File>) {
    if let Some(file) = replaced {
        let _ = std::thread::Builder::new()
            .name("stowage-release".into())
            .spawn(move || drop(file));
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A file on disk is sized up front; one in `/dev/shm` (tmpfs) is not,
    /// its pages left for the writes to allocate.
    #[test]
    fn a_file_in_memory_is_not_preallocated() {
        let on_disk = tempfile::tempfile_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        if !in_memory(&on_disk) {
            preallocate(&on_disk, 1 << 20).unwrap();
            assert_eq!(on_disk.metadata().unwrap().len(), 1 << 20);
        }
        let Ok(shm) = tempfile::tempfile_in("/dev/shm") else {
            return; // no /dev/shm here
        };
        assert!(in_memory(&shm));
        preallocate(&shm, 1 << 20).unwrap();
        assert_eq!(shm.metadata().unwrap().len(), 0);
    }

    /// Preallocating more than the disk has left is an error (a save then
    /// fails before writing, leaving the file it would replace), where the
    /// file system preallocates at all.
    #[test]
    fn a_disk_too_small_for_the_file_is_an_error() {
        let on_disk = tempfile::tempfile_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        if in_memory(&on_disk) {
            return;
        }
        preallocate(&on_disk, 4096).unwrap();
        if on_disk.metadata().unwrap().len() != 4096 {
            return; // this file system does not preallocate
        }
        let fs = rustix::fs::fstatvfs(&on_disk).unwrap();
        let free = fs.f_bavail.saturating_mul(fs.f_frsize);
        let Some(too_much) = free.checked_add(1 << 40).filter(|&n| n < 1 << 50) else {
            return;
        };
        let other = tempfile::tempfile_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let err = preallocate(&other, too_much).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
    }
}
