//! Crash-safe file writing: a save goes to a temporary sibling of its target,
//! is synced, and is renamed over the target, so that an interrupted save, a
//! crash or a power loss leaves either the earlier file or the whole new one.
//! A later save removes what a killed process left behind.

use crate::error::ErrorContext;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use super::output;
use super::pending::Pending;
use crate::{Error, Result};

/// What a temporary's name holds after its target's name:
/// `.{name}{TEMPORARY}{pid}-{serial}`, for a file's save and a folder's.
pub(super) const TEMPORARY: &str = ".stowage-tmp-";

/// The start of the names of the temporaries of saves to `name`:
/// `.{name}{TEMPORARY}`, then `{pid}-{serial}`. A name too long for the
/// temporary's whole name to fit in a file name's 255 bytes (`NAME_MAX`)
/// is cut, and a hash of the whole name stands for the rest, so two long
/// names sharing a beginning never share temporaries.
pub(super) fn temporary_prefix(name: &str) -> String {
    const NAME_MAX: usize = 255;
    // What may follow: a pid (10 digits), '-', a serial (20 digits), and a
    // folder save's ".old".
    const TAIL: usize = 10 + 1 + 20 + 4;
    let full = format!(".{name}{TEMPORARY}");
    if full.len() + TAIL <= NAME_MAX {
        return full;
    }
    // '.', the cut name, '~' and 16 hex digits, then TEMPORARY.
    let mut cut = NAME_MAX - TAIL - TEMPORARY.len() - 1 - 1 - 16;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        ".{}~{:016x}{TEMPORARY}",
        &name[..cut],
        fnv1a(name.as_bytes())
    )
}

/// FNV-1a, 64 bits: a hash that stays the same across builds and Rust
/// releases (std's `DefaultHasher` promises neither), for naming only.
/// Written here: a name's few bytes need no hashing crate.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The suffix of the scratch folder that safetensors saves made beside
/// their temporary file before stowage wrote the file itself (the crate
/// made temporaries of its own): one a killed save left is removed too.
const SCRATCH: &str = ".d";

/// Removes the temporary files of saves to `dir/name` that a process which no
/// longer exists left behind (killed in the middle of a save). Temporaries of
/// live processes, this one included, may belong to saves in progress and stay.
fn remove_stale_temporaries(dir: &Path, name: &str) {
    for (entry, rest) in stale_temporaries(dir, name) {
        if rest.ends_with(SCRATCH) {
            let _ = fs::remove_dir_all(entry.path());
        } else {
            // A folder here is a folder save's staging folder, which may
            // hold what is not ours: never removed from here.
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The entries of `dir` named as the temporaries of saves to `dir/name`
/// ([`temporary_prefix`] then `{pid}-…`) whose process no longer exists, each
/// with what follows the prefix. A file's save and a folder's name their
/// temporaries alike.
pub(super) fn stale_temporaries(dir: &Path, name: &str) -> Vec<(fs::DirEntry, String)> {
    let prefix = temporary_prefix(name);
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let file = entry.file_name();
            let rest = file.to_str()?.strip_prefix(&prefix)?.to_owned();
            let pid = rest.split('-').next()?.parse::<i32>().ok()?;
            (pid != std::process::id() as i32 && !process_exists(pid)).then_some((entry, rest))
        })
        .collect()
}

/// Whether a process with this id exists (`kill(pid, 0)`; a process we may not
/// signal exists too).
fn process_exists(pid: i32) -> bool {
    if pid <= 0 {
        return true;
    }
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return true;
    };
    rustix::process::test_kill_process(pid) != Err(rustix::io::Errno::SRCH)
}

/// Has `write` create a temporary sibling of `path` (at the path it is given),
/// syncs it when `sync` is set, and renames it to `path` (then syncs the folder);
/// on failure the temporary file is removed and any earlier file at `path` is
/// untouched. Errors come wrapped in [`Error::InFile`] naming `path`.
pub(crate) fn write_atomically(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let in_file = |e: Error| e.in_file(path.to_owned());
    // Renaming over a symbolic link would replace the link: the file it
    // names is replaced instead (a dangling link is replaced as a file).
    let target = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).ok(),
        _ => None,
    };
    let path = target.as_deref().unwrap_or(path);
    // Nothing can replace a target that is not a file (a device such as
    // `/dev/null`, a FIFO): the file is made aside, then copied into it.
    if fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return write_through(path, write).map_err(in_file);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique per save (two threads saving one path must not share a temporary file);
    // the process id lets a later save recognise what a killed process left.
    let tmp = dir.join(temporary_name(&name));
    // Undone (the temporary removed) if the process is ended meanwhile.
    let pending = Pending::removing(tmp.clone());
    let result = (|| {
        write(&tmp)?;
        if sync {
            File::open(&tmp)
                .and_then(|f| f.sync_all())
                .map_err(Error::Io)?;
        }
        // The file being replaced is closed on another thread, which is where the
        // kernel then frees its pages and blocks (tenths of a second per GiB).
        let replaced = output::open_replaced(path);
        pending.step(|| fs::rename(&tmp, path).map_err(Error::Io))?;
        output::release_in_background(replaced);
        remove_stale_temporaries(&dir, &name);
        if sync {
            // The rename is durable only once the folder is synced.
            File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(Error::Io)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(in_file)
}

/// A number no other temporary of this process's saves has.
fn next_serial() -> u64 {
    static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The name of a new temporary of a save to `name` (a file's or a
/// folder's): [`temporary_prefix`], this process's id and a serial, so
/// that a later save tells what a killed process left.
pub(super) fn temporary_name(name: &str) -> String {
    format!(
        "{}{}-{}",
        temporary_prefix(name),
        std::process::id(),
        next_serial()
    )
}

/// Writes `path`, an existing target that is not a regular file (a
/// device, a FIFO), with `write`: the file is made in the system's
/// temporary folder (removed whatever happens) and its bytes copied into
/// the target, as `torch.save` to `/dev/null` writes them there.
fn write_through(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = std::env::temp_dir().join(format!(
        "stowage-through-{}-{}",
        std::process::id(),
        next_serial()
    ));
    let _pending = Pending::removing(tmp.clone());
    let result = (|| {
        write(&tmp)?;
        let mut from = File::open(&tmp)?;
        let mut to = fs::OpenOptions::new().write(true).open(path)?;
        std::io::copy(&mut from, &mut to)?;
        Ok(())
    })();
    let _ = fs::remove_file(&tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process and init exist (init though it may not be signalled);
    /// a child that has exited and been waited for does not.
    #[test]
    fn a_process_exists_until_it_has_ended() {
        assert!(process_exists(std::process::id() as i32));
        assert!(process_exists(1));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!process_exists(pid));
    }

    #[test]
    fn a_temporarys_name_fits_in_a_file_name_for_the_longest_target() {
        let longest = format!("{}.pt", "m".repeat(252));
        let other = format!("{}.pt", "m".repeat(251) + "n");
        for name in [&longest, &other] {
            let tmp = format!("{}{}-{}.old", temporary_prefix(name), u32::MAX, u64::MAX);
            assert!(tmp.len() <= 255, "{} bytes", tmp.len());
        }
        assert_ne!(temporary_prefix(&longest), temporary_prefix(&other));
        assert_eq!(temporary_prefix("model.pt"), ".model.pt.stowage-tmp-");
        // Cut on a character boundary.
        let wide = "é".repeat(127);
        assert!(temporary_prefix(&wide).len() < 255);
    }

    #[test]
    fn a_device_or_a_link_is_written_through_never_replaced() {
        let null = Path::new("/dev/null");
        write_atomically(null, true, |tmp| fs::write(tmp, b"x").map_err(Error::Io)).unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::metadata(null).unwrap().file_type().is_char_device());
        // A link to a file: the file gets the new bytes, the link stays.
        let dir = tempfile::tempdir().unwrap();
        let (file, link) = (dir.path().join("file"), dir.path().join("link"));
        fs::write(&file, b"old").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_atomically(&link, false, |tmp| {
            fs::write(tmp, b"new").map_err(Error::Io)
        })
        .unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&file).unwrap(), b"new");
    }

    #[test]
    fn a_file_named_with_255_bytes_is_saved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{}.pt", "m".repeat(252)));
        write_atomically(&path, true, |tmp| fs::write(tmp, b"x").map_err(Error::Io)).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"x");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
