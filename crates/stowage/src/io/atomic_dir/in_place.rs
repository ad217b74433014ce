//! A folder save whose target is a mount point (a volume mounted at the
//! checkpoint's folder). A mount point cannot be renamed (`EBUSY`), nor can
//! a folder beside it be renamed into it (another filesystem), so there is
//! no exchange: the new set is staged in a folder inside the target, and its
//! files are renamed into place one by one, each rename atomic, the index
//! (`*.index.json`, DCP's `.metadata`) last.
//!
//! Before the first rename, a marker inside the staging folder lists the
//! set's files, synced: from then on the install only goes forward. A save
//! that fails or is killed before the marker leaves the previous set whole
//! (the next save removes its staging folder); one that fails, is ended by
//! a signal, or is killed after it is finished by its signal's undo or by
//! the next save to the target, which completes the install before it
//! starts. Nothing but the set's files is touched: the user's files stay
//! where they are.
//!
//! What differs from an exchange: while the files are being renamed, a
//! load of the folder can read some of the new set's files and some of the
//! old one's; and a save killed midway leaves the folder so until the next
//! save.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{fault, sync_dir, sync_tree};
use crate::error::ErrorContext;
use crate::io::atomic::{stale_temporaries, temporary_name};
use crate::io::pending::Pending;
use crate::{Error, Result};

/// The staging folder's name inside the target, before `{pid}-{serial}`.
const STAGING: &str = "set";

/// The marker that says a staging folder holds a whole set, with its names.
const MARKER: &str = ".stowage-complete";

/// Whether `dir` is where a filesystem is mounted: `statx`'s
/// `STATX_ATTR_MOUNT_ROOT` (bind mounts included), else a device that
/// differs from its parent's.
pub(super) fn is_mount_point(dir: &Path, parent: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{statx, AtFlags, StatxAttributes, StatxFlags, CWD};
        let flags = AtFlags::NO_AUTOMOUNT | AtFlags::SYMLINK_NOFOLLOW;
        if let Ok(st) = statx(CWD, dir, flags, StatxFlags::empty()) {
            if st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
                return st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT);
            }
        }
    }
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(dir), fs::metadata(parent)) {
        (Ok(d), Ok(p)) => d.dev() != p.dev(),
        _ => false,
    }
}

/// Replaces the set in the folder `target` in place (see the module docs):
/// `write` fills a staging folder inside it; with `sync`, the staged files,
/// the marker and the target are synced.
pub(super) fn replace(
    target: &Path,
    sync: bool,
    replaced: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    recover(target, &*replaced, sync)?;
    let staging = target.join(temporary_name(STAGING));
    fs::create_dir(&staging).map_err(Error::Io)?;
    let marked = Arc::new(AtomicBool::new(false));
    let pending = Pending::new({
        let (staging, target, replaced) = (staging.clone(), target.to_owned(), replaced.clone());
        let marked = marked.clone();
        move || {
            if marked.load(Ordering::Acquire) {
                let _ = install(&staging, &target, &*replaced, false);
            } else {
                let _ = fs::remove_dir_all(&staging);
            }
        }
    });
    let staged = (|| {
        write(&staging)?;
        if sync {
            sync_tree(&staging)?;
        }
        let mut names: Vec<String> = Vec::new();
        for entry in fs::read_dir(&staging).map_err(Error::Io)? {
            let name = entry.map_err(Error::Io)?.file_name();
            names.push(name.to_string_lossy().into_owned());
        }
        names.sort();
        pending.step(|| {
            fs::write(staging.join(MARKER), names.join("\n")).map_err(Error::Io)?;
            if sync {
                fs::File::open(staging.join(MARKER))
                    .and_then(|f| f.sync_all())
                    .map_err(Error::Io)?;
                sync_dir(&staging)?;
            }
            marked.store(true, Ordering::Release);
            Ok(())
        })
    })();
    if let Err(e) = staged {
        let _ = pending.step(|| Ok(fs::remove_dir_all(&staging)));
        return Err(e);
    }
    // From here the install only goes forward: a failure leaves the marker
    // for the next save to finish it.
    pending.step(|| install(&staging, target, &*replaced, sync))
}

/// Finishes or removes what saves to `target` that were killed (their
/// process no longer exists) left inside it: a staging folder with its
/// marker is installed, one without is removed.
pub(super) fn recover(target: &Path, replaced: &dyn Fn(&str) -> bool, sync: bool) -> Result<()> {
    for (entry, _) in stale_temporaries(target, STAGING) {
        let folder = entry.path();
        if folder.join(MARKER).is_file() {
            install(&folder, target, replaced, sync).map_err(|e| e.in_file(&folder))?;
        } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
            fs::remove_dir_all(&folder).map_err(Error::Io)?;
        }
    }
    Ok(())
}

/// Renames the files the marker of `staging` lists into `target` (the
/// index last), removes the previous set's files the new set lacks, then
/// `staging`. Run again after an interruption, it goes on from there.
fn install(
    staging: &Path,
    target: &Path,
    replaced: &dyn Fn(&str) -> bool,
    sync: bool,
) -> Result<()> {
    let listed = fs::read_to_string(staging.join(MARKER)).map_err(Error::Io)?;
    let mut names: Vec<&str> = listed.lines().filter(|n| !n.is_empty()).collect();
    // The index names the other files: it goes in once they are there.
    names.sort_by_key(|n| is_index(n));
    for name in &names {
        let from = staging.join(name);
        if fs::symlink_metadata(&from).is_ok() {
            fault::at(fault::Step::Install)?;
            fs::rename(&from, target.join(name)).map_err(Error::Io)?;
        }
    }
    // The previous set's files the new one lacks (fewer shards than before).
    for entry in fs::read_dir(target).map_err(Error::Io)? {
        let entry = entry.map_err(Error::Io)?;
        let file = entry.file_name();
        let Some(name) = file.to_str() else { continue };
        if replaced(name) && !names.contains(&name) && entry.file_type().is_ok_and(|t| t.is_file())
        {
            fs::remove_file(entry.path()).map_err(Error::Io)?;
        }
    }
    if sync {
        sync_dir(target)?;
    }
    fs::remove_dir_all(staging).map_err(Error::Io)
}

/// The file that names the others: a sharded set's index, DCP's metadata.
fn is_index(name: &str) -> bool {
    name == ".metadata" || name.ends_with(".index.json")
}

/// The staging folder's path prefix inside `target`, for the tests.
#[cfg(test)]
pub(super) fn staging_prefix(target: &Path) -> std::path::PathBuf {
    target.join(crate::io::atomic::temporary_prefix(STAGING))
}
