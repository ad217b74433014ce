//! Crash-safe replacement of a set of files in a folder (a sharded checkpoint):
//! the new set is written into a staging folder beside the target, the target's
//! other files are carried over into it (hard links, or copies), and the two
//! folders are swapped in one step, so a failed or interrupted save leaves the
//! previous set whole and usable.
//!
//! On Linux the swap is `renameat2(RENAME_EXCHANGE)`, atomic. Elsewhere it is
//! two renames (the old folder aside, the new one in place), so a crash between
//! them leaves the target missing and the old set under its aside name.

use crate::error::{CheckpointError, ErrorContext, StorageError};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Has `write` fill a fresh staging folder with the new set, then puts that
/// folder at `dir` in one step. Entries of an existing `dir` for which
/// `replaced(name)` is false are carried over into the staging folder first
/// (files hard-linked or copied, folders moved), so only the set changes.
/// On failure the staging folder is removed and `dir` is untouched.
///
/// Errors come wrapped in [`Error::InFile`] naming `dir`; a `dir` in an
/// object store is [`CheckpointError::Unsupported`] (a store has no folder to stage
/// and exchange in one step).
pub(crate) fn replace_dir(
    dir: &Path,
    sync: bool,
    replaced: impl Fn(&str) -> bool,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let in_dir = |e: Error| e.in_file(dir.to_owned());
    if super::Location::parse(dir).local_path().is_none() {
        return Err(in_dir(Error::Checkpoint(CheckpointError::Unsupported {
            what: "saving a folder (a sharded set, a distributed checkpoint) to object \
                   storage: save it to a local folder, then upload its files"
                .into(),
        })));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staging = parent.join(format!(
        ".{name}.stowage-tmp-{}-{serial}",
        std::process::id()
    ));
    fs::create_dir(&staging).map_err(|e| in_dir(Error::Io(e)))?;
    let result = (|| {
        write(&staging)?;
        let exists = dir.is_dir();
        if exists {
            carry_over(dir, &staging, &replaced)?;
        }
        if sync {
            sync_dir(&staging);
        }
        if exists {
            swap(&staging, dir)?;
            // `staging` now holds the previous set.
            let _ = fs::remove_dir_all(&staging);
        } else {
            fs::rename(&staging, dir).map_err(Error::Io)?;
        }
        if sync {
            sync_dir(&parent);
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    result.map_err(in_dir)
}

/// Puts every entry of `from` that is not `replaced` into `into`: files as hard
/// links (copies where links fail), folders and other entries by rename.
fn carry_over(from: &Path, into: &Path, replaced: &impl Fn(&str) -> bool) -> Result<()> {
    for entry in fs::read_dir(from).map_err(Error::Io)? {
        let entry = entry.map_err(Error::Io)?;
        let file_name = entry.file_name();
        if file_name.to_str().is_some_and(replaced) || into.join(&file_name).exists() {
            continue;
        }
        let (src, dst) = (entry.path(), into.join(&file_name));
        if entry.file_type().map_err(Error::Io)?.is_file() {
            if fs::hard_link(&src, &dst).is_err() {
                fs::copy(&src, &dst).map_err(Error::Io)?;
            }
        } else {
            fs::rename(&src, &dst).map_err(Error::Io)?;
        }
    }
    Ok(())
}

/// Exchanges the folders `a` and `b`.
#[cfg(target_os = "linux")]
fn swap(a: &Path, b: &Path) -> Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes()).map_err(|_| {
            Error::Storage(StorageError::NulInName {
                name: p.display().to_string(),
            })
        })
    };
    let (ca, cb) = (c(a)?, c(b)?);
    // SAFETY: both pointers are valid NUL-terminated strings that outlive the
    // call; `renameat2` reads them and touches no other memory of ours.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    // Filesystems without RENAME_EXCHANGE: two renames.
    if matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return swap_by_renames(a, b);
    }
    Err(Error::Io(err))
}

#[cfg(not(target_os = "linux"))]
fn swap(a: &Path, b: &Path) -> Result<()> {
    swap_by_renames(a, b)
}

/// `b` aside, `a` to `b`, the old `b` to `a`: not atomic (see the module docs).
fn swap_by_renames(a: &Path, b: &Path) -> Result<()> {
    let mut aside = a.as_os_str().to_owned();
    aside.push(".old");
    let aside = PathBuf::from(aside);
    fs::rename(b, &aside).map_err(Error::Io)?;
    if let Err(e) = fs::rename(a, b) {
        let _ = fs::rename(&aside, b);
        return Err(Error::Io(e));
    }
    fs::rename(&aside, a).map_err(Error::Io)
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_set_and_keeps_other_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("model");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("config.json"), "{}").unwrap();
        fs::write(dir.join("old-shard"), "old").unwrap();
        fs::create_dir(dir.join("sub")).unwrap();
        replace_dir(
            &dir,
            true,
            |n| n.ends_with("shard"),
            |s| fs::write(s.join("new-shard"), "new").map_err(Error::Io),
        )
        .unwrap();
        let mut names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["config.json", "new-shard", "sub"]);
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_write_leaves_the_folder_untouched() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("model");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("shard"), "old").unwrap();
        let err = replace_dir(
            &dir,
            false,
            |_| true,
            |s| {
                fs::write(s.join("shard"), "half").unwrap();
                Err(Error::Storage(StorageError::NotResizable))
            },
        )
        .unwrap_err();
        assert!(matches!(err, Error::InFile { .. }));
        assert_eq!(fs::read_to_string(dir.join("shard")).unwrap(), "old");
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1);
    }

    #[test]
    fn creates_a_missing_folder() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("new");
        replace_dir(
            &dir,
            false,
            |_| true,
            |s| fs::write(s.join("a"), "x").map_err(Error::Io),
        )
        .unwrap();
        assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "x");
    }

    #[cfg(feature = "remote")]
    #[test]
    fn a_folder_in_object_storage_is_refused_before_anything_is_written() {
        let url = Path::new("s3://bucket/run/");
        let mut called = false;
        let err = replace_dir(
            url,
            false,
            |_| true,
            |_| {
                called = true;
                Ok(())
            },
        )
        .unwrap_err();
        assert!(!called);
        assert!(
            matches!(&err, Error::InFile { path, source }
            if path == url && matches!(&**source, Error::Checkpoint(CheckpointError::Unsupported { .. }))),
            "{err:?}"
        );
        // Nothing was made locally under the URL's text either.
        assert!(!Path::new("s3:").exists());
    }
}
