//! Crash-safe replacement of a set of files in a folder (a sharded checkpoint,
//! a distributed checkpoint): the new set is written into a staging folder
//! beside the target, the target's other regular files are linked into it
//! (hard links, or copies), and the two folders are exchanged in one step, so
//! a failed or interrupted save leaves the previous set whole and usable.
//!
//! A save never moves or deletes what it did not write. The target's folders
//! (`tokenizer/`) and other entries stay where they are until the exchange has
//! happened; then they are moved back from the previous folder into the new
//! one. A failed exchange leaves them untouched. A save killed after the
//! exchange leaves them in its staging folder, and the next save to the same
//! target moves them back before it starts (as it removes what killed saves
//! left behind), so nothing is lost.
//!
//! On Linux the exchange is `renameat2(RENAME_EXCHANGE)`, atomic. Elsewhere,
//! or where the filesystem lacks it (NFS), it is two renames (the old folder
//! aside, the new one in place); a crash between them leaves the target
//! missing and the old folder under its aside name, which the next save puts
//! back first. A symlinked target stays a symlink: the folder it points to is
//! replaced. A target that is a mount point cannot be exchanged; its set is
//! replaced file by file inside it (`in_place`, which says what differs).

use crate::error::{CheckpointError, ErrorContext, StorageError};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::pending::Pending;
use crate::{Error, Result};

mod in_place;

/// The suffix of the previous folder put aside by [`swap_by_renames`].
const ASIDE: &str = ".old";

/// Has `write` fill a fresh staging folder with the new set, then puts that
/// folder at `dir` in one step. The regular files of an existing `dir` for
/// which `replaced(name)` is false are linked (or copied) into the staging
/// folder first; its folders and other entries are moved into the new folder
/// after the exchange, so only the set changes. On failure the staging folder
/// (which holds only what this save wrote, and links or copies) is removed
/// and `dir` is untouched.
///
/// With `sync`, every file of the new set and the folders are synced before
/// the exchange, and a failed sync is an error.
///
/// Errors come wrapped in [`Error::InFile`] naming `dir`; a `dir` in an
/// object store is [`CheckpointError::Unsupported`] (a store has no folder to stage
/// and exchange in one step).
pub(crate) fn replace_dir(
    dir: &Path,
    sync: bool,
    replaced: impl Fn(&str) -> bool + Send + Sync + 'static,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let in_dir = |e: Error| e.in_file(dir);
    if super::Location::parse(dir).local_path().is_none() {
        return Err(in_dir(Error::Checkpoint(CheckpointError::NotLocal {
            operation: "saving a folder (a sharded set, a distributed checkpoint): save it to a \
                        local folder, then upload its files",
        })));
    }
    let target = resolve(dir).map_err(in_dir)?;
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A mount point cannot be exchanged: its set is replaced in place.
    if target.is_dir()
        && (in_place::is_mount_point(&target, &parent)
            || fault::at(fault::Step::MountPoint).is_err())
    {
        return in_place::replace(&target, sync, Arc::new(replaced), write).map_err(in_dir);
    }
    recover(&parent, &name, &target, &replaced).map_err(in_dir)?;
    let staging = parent.join(super::atomic::temporary_name(&name));
    let replaced = Arc::new(replaced);
    fs::create_dir(&staging).map_err(|e| in_dir(Error::Io(e)))?;
    // Undone if the process is ended meanwhile: before the exchange the
    // staging folder holds only what this save wrote (and links or
    // copies), after it the previous folder, whose own entries go back.
    let exchanged = Arc::new(AtomicBool::new(false));
    let pending = Pending::new({
        let (staging, target, replaced) = (staging.clone(), target.clone(), replaced.clone());
        let exchanged = exchanged.clone();
        move || {
            if exchanged.load(Ordering::Acquire) {
                let _ = put_back(&staging, &target, &*replaced);
            } else {
                let _ = fs::remove_dir_all(&staging);
            }
        }
    });
    let result = (|| {
        write(&staging)?;
        let exists = target.is_dir();
        if exists {
            link_files(&target, &staging, &*replaced)?;
        }
        if sync {
            sync_tree(&staging)?;
        }
        fault::at(fault::Step::Exchange)?;
        pending.step(|| {
            if exists {
                swap(&staging, &target)?;
                exchanged.store(true, Ordering::Release);
            } else {
                fs::rename(&staging, &target).map_err(Error::Io)?;
            }
            Ok(exists)
        })
    })();
    let exchanged = match result {
        Ok(exchanged) => exchanged,
        Err(e) => {
            // Unless the undo already did it (the process is being ended).
            let _ = pending.step(|| Ok(fs::remove_dir_all(&staging)));
            return Err(in_dir(e));
        }
    };
    if exchanged {
        // `staging` now holds the previous folder: the old set, the
        // originals of the files linked, and the folders that go back.
        fault::at(fault::Step::MoveBack).map_err(in_dir)?;
        pending
            .step(|| {
                move_back(&staging, &target, &*replaced)?;
                let _ = fs::remove_dir_all(&staging);
                Ok(())
            })
            .map_err(|e| in_dir(e.in_file(&staging)))?;
    }
    drop(pending);
    if sync {
        sync_dir(&parent).map_err(in_dir)?;
    }
    Ok(())
}

/// The folder a save to `dir` replaces: `dir` itself, or the folder a
/// symlink at `dir` points to (so that the link stays a link).
fn resolve(dir: &Path) -> Result<PathBuf> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(dir).map_err(Error::Io),
        _ => Ok(dir.to_owned()),
    }
}

/// Puts back what saves to `parent/name` that were killed (their process no
/// longer exists) left in their staging folders: a previous folder put aside
/// while the target is missing becomes the target again; the entries of a
/// staging folder that are not the set's and that the target lacks (its
/// folders, moved out by the exchange) are moved back into the target. A
/// staging folder is then removed when all that is left in it is the set's
/// files and files the target also holds; anything else stays.
fn recover(
    parent: &Path,
    name: &str,
    target: &Path,
    replaced: &impl Fn(&str) -> bool,
) -> Result<()> {
    let mut stale: Vec<(PathBuf, bool)> = super::atomic::stale_temporaries(parent, name)
        .into_iter()
        .filter(|(entry, _)| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|(entry, rest)| (entry.path(), rest.ends_with(ASIDE)))
        .collect();
    // Asides first: the target itself may be among them.
    stale.sort_by_key(|(_, aside)| !aside);
    for (folder, aside) in stale {
        if aside && fs::symlink_metadata(target).is_err() {
            fs::rename(&folder, target).map_err(Error::Io)?;
            continue;
        }
        if target.is_dir() {
            put_back(&folder, target, replaced).map_err(|e| e.in_file(&folder))?;
        }
    }
    Ok(())
}

/// Moves what `folder` (a staging folder after the exchange, or a killed
/// save's) holds of the target's own back into `target`, then removes
/// `folder` if only the set's files and copies of the target's files are
/// left in it; anything else stays.
fn put_back(folder: &Path, target: &Path, replaced: &impl Fn(&str) -> bool) -> Result<()> {
    move_back(folder, target, replaced)?;
    if only_copies_left(folder, target, replaced) {
        let _ = fs::remove_dir_all(folder);
    }
    Ok(())
}

/// Whether everything in `folder` is one of the set's files, or a regular
/// file whose name `target` also holds (a link or copy made by a save).
fn only_copies_left(folder: &Path, target: &Path, replaced: &impl Fn(&str) -> bool) -> bool {
    let Ok(entries) = fs::read_dir(folder) else {
        return false;
    };
    entries.flatten().all(|entry| {
        let name = entry.file_name();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        is_file && (name.to_str().is_some_and(replaced) || target.join(&name).is_file())
    })
}

/// Hard-links (copies where links fail) into `into` every regular file of
/// `from` that is not `replaced` and that `into` lacks. Nothing of `from`
/// moves.
fn link_files(from: &Path, into: &Path, replaced: &impl Fn(&str) -> bool) -> Result<()> {
    for (entry, dst) in carried(from, into, replaced)? {
        if entry.file_type().map_err(Error::Io)?.is_file() {
            let src = entry.path();
            if fs::hard_link(&src, &dst).is_err() {
                fs::copy(&src, &dst).map_err(Error::Io)?;
            }
        }
    }
    Ok(())
}

/// Moves into `into` every entry of `from` that is not `replaced` and that
/// `into` lacks (the folders and other entries a save does not link).
fn move_back(from: &Path, into: &Path, replaced: &impl Fn(&str) -> bool) -> Result<()> {
    for (entry, dst) in carried(from, into, replaced)? {
        fs::rename(entry.path(), &dst).map_err(Error::Io)?;
    }
    Ok(())
}

/// The entries of `from` that are not the set's (`replaced`) and that
/// `into` lacks, each with its path in `into`: what a save carries between
/// the target and its staging folder.
fn carried(
    from: &Path,
    into: &Path,
    replaced: &impl Fn(&str) -> bool,
) -> Result<Vec<(fs::DirEntry, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(from).map_err(Error::Io)? {
        let entry = entry.map_err(Error::Io)?;
        let file_name = entry.file_name();
        let dst = into.join(&file_name);
        if !file_name.to_str().is_some_and(replaced) && fs::symlink_metadata(&dst).is_err() {
            out.push((entry, dst));
        }
    }
    Ok(out)
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
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;
    if fault::at(fault::Step::NoExchange).is_err() {
        return swap_by_renames(a, b);
    }
    let (ca, cb) = (c(a)?, c(b)?);
    match renameat_with(
        CWD,
        ca.as_c_str(),
        CWD,
        cb.as_c_str(),
        RenameFlags::EXCHANGE,
    ) {
        Ok(()) => Ok(()),
        // Filesystems without RENAME_EXCHANGE: two renames.
        Err(e) if e == Errno::INVAL || e == Errno::NOSYS => swap_by_renames(a, b),
        Err(e) => Err(Error::Io(e.into())),
    }
}

#[cfg(not(target_os = "linux"))]
fn swap(a: &Path, b: &Path) -> Result<()> {
    swap_by_renames(a, b)
}

/// `b` aside, `a` to `b`, the old `b` to `a`: not atomic (see the module docs).
fn swap_by_renames(a: &Path, b: &Path) -> Result<()> {
    let mut aside = a.as_os_str().to_owned();
    aside.push(ASIDE);
    let aside = PathBuf::from(aside);
    fs::rename(b, &aside).map_err(Error::Io)?;
    fault::at(fault::Step::BetweenRenames)?;
    if let Err(e) = fs::rename(a, b) {
        let _ = fs::rename(&aside, b);
        return Err(Error::Io(e));
    }
    fs::rename(&aside, a).map_err(Error::Io)
}

/// Syncs a folder's entries (a rename or a new file is durable only then).
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::Io)
}

/// Syncs the data of every regular file of `dir` (the set's index and
/// `.metadata` included: they must be on disk before the folder that names
/// them is exchanged in), then `dir` itself, whose sync makes the names
/// durable. `fdatasync`, not `fsync`: a shard its own save already synced
/// has since only been renamed, which the folder's sync covers, and `fsync`
/// would flush its inode (the rename's new change time) once more.
fn sync_tree(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(Error::Io)? {
        let entry = entry.map_err(Error::Io)?;
        if entry.file_type().map_err(Error::Io)?.is_file() {
            File::open(entry.path())
                .and_then(|f| f.sync_data())
                .map_err(|e| Error::Io(e).in_file(entry.path()))?;
        }
    }
    sync_dir(dir)
}

/// Faults injected at exact steps, for the tests: what an operator sees
/// when the exchange fails (EIO) or the process is killed there.
mod fault {
    /// A step of [`replace_dir`](super::replace_dir).
    #[cfg_attr(not(test), allow(dead_code))]
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub(super) enum Step {
        /// Just before the exchange: the error is the exchange's.
        Exchange,
        /// After the exchange, before the target's folders are moved back:
        /// the save stops there as a kill would stop it.
        MoveBack,
        /// Between the two renames that stand in for an exchange.
        BetweenRenames,
        /// The filesystem has no `RENAME_EXCHANGE` (EINVAL): two renames.
        NoExchange,
        /// The target is taken for a mount point: its set is replaced in place.
        MountPoint,
        /// Before each file of a set replaced in place is renamed into it.
        Install,
    }

    #[cfg(test)]
    thread_local! {
        pub(super) static AT: std::cell::RefCell<Vec<Step>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// An I/O error (EIO) when the tests asked for one at `step`.
    pub(super) fn at(step: Step) -> crate::Result<()> {
        #[cfg(test)]
        if AT.with(|at| at.borrow().contains(&step)) {
            return Err(crate::Error::Io(std::io::Error::from_raw_os_error(
                libc::EIO,
            )));
        }
        let _ = step;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::atomic::TEMPORARY as STAGING;

    /// A folder as a user keeps one: the set, a file beside it and a folder.
    fn model_folder(root: &Path) -> PathBuf {
        let dir = root.join("model");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("config.json"), "{}").unwrap();
        fs::write(dir.join("old-shard"), "old").unwrap();
        fs::create_dir(dir.join("tokenizer")).unwrap();
        fs::write(dir.join("tokenizer/vocab.txt"), "a b c").unwrap();
        dir
    }

    /// The user's folder and its file are in `dir`, and nothing but `dir`
    /// is left beside it (no staging folder, no aside).
    fn users_files_kept(root: &Path, dir: &Path) {
        assert_eq!(
            fs::read_to_string(dir.join("tokenizer/vocab.txt")).unwrap(),
            "a b c"
        );
        assert_eq!(names(root), ["model"], "nothing left beside the target");
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn save(dir: &Path, shard: &str, faults: &[fault::Step]) -> Result<()> {
        fault::AT.with(|at| *at.borrow_mut() = faults.to_vec());
        let result = replace_dir(
            dir,
            true,
            |n| n.ends_with("shard"),
            |s| fs::write(s.join(shard), "new").map_err(Error::Io),
        );
        fault::AT.with(|at| at.borrow_mut().clear());
        result
    }

    /// Renames what this process left in `root` as if a process that no
    /// longer exists had left it (a killed save).
    fn as_if_killed(root: &Path) {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let ours = format!("{STAGING}{}-", std::process::id());
        for entry in fs::read_dir(root).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.contains(&ours) {
                let new = name.replace(&ours, &format!("{STAGING}{dead}-"));
                fs::rename(root.join(&name), root.join(new)).unwrap();
            }
        }
    }

    #[test]
    fn a_failed_exchange_moves_and_deletes_nothing_of_the_users() {
        let root = tempfile::tempdir().unwrap();
        let dir = model_folder(root.path());
        let err = save(&dir, "new-shard", &[fault::Step::Exchange]).unwrap_err();
        assert!(
            matches!(&err, Error::InFile { path, .. } if path == &dir),
            "{err:?}"
        );
        assert_eq!(names(&dir), ["config.json", "old-shard", "tokenizer"]);
        users_files_kept(root.path(), &dir);
    }

    #[test]
    fn a_save_killed_after_the_exchange_is_made_whole_by_the_next_save() {
        let root = tempfile::tempdir().unwrap();
        let dir = model_folder(root.path());
        save(&dir, "new-shard", &[fault::Step::MoveBack]).unwrap_err();
        // What a kill at that step leaves: the new set in place, the user's
        // folder still in the previous folder.
        assert_eq!(names(&dir), ["config.json", "new-shard"]);
        as_if_killed(root.path());
        save(&dir, "newer-shard", &[]).unwrap();
        assert_eq!(names(&dir), ["config.json", "newer-shard", "tokenizer"]);
        users_files_kept(root.path(), &dir);
    }

    #[test]
    fn a_save_killed_before_the_exchange_leaves_nothing_after_the_next_save() {
        let root = tempfile::tempdir().unwrap();
        let dir = model_folder(root.path());
        // What a kill while writing leaves: a staging folder holding part of
        // the new set and a link to the user's file.
        let staging = root
            .path()
            .join(format!(".model{STAGING}{}-0", std::process::id()));
        fs::create_dir(&staging).unwrap();
        fs::write(staging.join("new-shard"), "half").unwrap();
        fs::hard_link(dir.join("config.json"), staging.join("config.json")).unwrap();
        as_if_killed(root.path());
        save(&dir, "newer-shard", &[]).unwrap();
        assert_eq!(names(&dir), ["config.json", "newer-shard", "tokenizer"]);
        assert_eq!(fs::read_to_string(dir.join("config.json")).unwrap(), "{}");
        assert_eq!(
            names(root.path()),
            ["model"],
            "the killed save's folder is gone"
        );
    }

    #[test]
    fn two_renames_killed_between_them_are_put_back_by_the_next_save() {
        let root = tempfile::tempdir().unwrap();
        let dir = model_folder(root.path());
        let faults = [fault::Step::NoExchange, fault::Step::BetweenRenames];
        save(&dir, "new-shard", &faults).unwrap_err();
        assert!(
            !dir.exists(),
            "the target is aside, as a kill there leaves it"
        );
        as_if_killed(root.path());
        save(&dir, "newer-shard", &[]).unwrap();
        assert_eq!(names(&dir), ["config.json", "newer-shard", "tokenizer"]);
        users_files_kept(root.path(), &dir);
    }

    #[test]
    fn a_mount_point_has_its_set_replaced_in_place() {
        let root = tempfile::tempdir().unwrap();
        let dir = model_folder(root.path());
        fs::write(dir.join("other-shard"), "old").unwrap();
        save(&dir, "old-shard", &[fault::Step::MountPoint]).unwrap();
        // The set's files the new set lacks are gone, the user's stay, and
        // nothing is left inside the target or beside it.
        assert_eq!(names(&dir), ["config.json", "old-shard", "tokenizer"]);
        assert_eq!(fs::read_to_string(dir.join("old-shard")).unwrap(), "new");
        users_files_kept(root.path(), &dir);
    }

    #[test]
    fn a_mount_point_save_stopped_midway_is_finished_by_the_next_save() {
        let root = tempfile::tempdir().unwrap();
        let dir = model_folder(root.path());
        // Stopped before its first rename, once the staged set is marked whole.
        let faults = [fault::Step::MountPoint, fault::Step::Install];
        save(&dir, "new-shard", &faults).unwrap_err();
        assert_eq!(fs::read_to_string(dir.join("old-shard")).unwrap(), "old");
        as_if_killed(&dir);
        // The next save installs the stopped one's set first, then its own.
        fault::AT.with(|at| *at.borrow_mut() = vec![fault::Step::MountPoint]);
        let mut seen = Vec::new();
        replace_dir(
            &dir,
            true,
            |n| n.ends_with("shard"),
            |s| {
                seen = names(s.parent().unwrap());
                fs::write(s.join("newer-shard"), "newer").map_err(Error::Io)
            },
        )
        .unwrap();
        fault::AT.with(|at| at.borrow_mut().clear());
        assert!(seen.contains(&"new-shard".to_owned()), "{seen:?}");
        assert!(!seen.contains(&"old-shard".to_owned()), "{seen:?}");
        assert_eq!(names(&dir), ["config.json", "newer-shard", "tokenizer"]);
        users_files_kept(root.path(), &dir);
        // Stopped before its set was marked whole: the next save drops it.
        fs::create_dir(format!(
            "{}{}-9",
            in_place::staging_prefix(&dir).display(),
            std::process::id()
        ))
        .unwrap();
        as_if_killed(&dir);
        save(&dir, "last-shard", &[fault::Step::MountPoint]).unwrap();
        assert_eq!(names(&dir), ["config.json", "last-shard", "tokenizer"]);
    }

    #[test]
    fn two_renames_keep_the_users_folders() {
        let root = tempfile::tempdir().unwrap();
        let dir = model_folder(root.path());
        save(&dir, "new-shard", &[fault::Step::NoExchange]).unwrap();
        assert_eq!(names(&dir), ["config.json", "new-shard", "tokenizer"]);
        assert_eq!(names(root.path()), ["model"]);
    }

    #[test]
    fn a_symlinked_target_stays_a_symlink() {
        let root = tempfile::tempdir().unwrap();
        let real = model_folder(root.path());
        let link = root.path().join("latest");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        save(&link, "new-shard", &[]).unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(names(&real), ["config.json", "new-shard", "tokenizer"]);
        assert_eq!(names(root.path()), ["latest", "model"]);
    }

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
            if path == url && matches!(&**source, Error::Checkpoint(CheckpointError::NotLocal { .. }))),
            "{err:?}"
        );
        // Nothing was made locally under the URL's text either.
        assert!(!Path::new("s3:").exists());
    }
}
