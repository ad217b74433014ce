//! Saves in progress in this process, each with what undoes it, so that a
//! process ended midway (SIGINT, SIGTERM) leaves no temporaries behind:
//! its signal handler calls [`remove_temporaries`], then ends the process.
//!
//! A save registers a [`Pending`] when it makes its temporary file or
//! staging folder, and takes its steps that put things in place (the rename
//! of a file, the exchange of a folder) through [`Pending::step`], under the
//! same lock as [`remove_temporaries`]: the undo never runs halfway through
//! such a step, and a step after the undo is refused.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::{Error, Result};

/// What undoes one save in progress.
type Undo = Box<dyn Fn() + Send>;

/// The saves in progress, by their id.
static PENDING: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<(u64, Undo)>> {
    // An undo that panicked leaves nothing inconsistent in the list.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// One save in progress, registered until it is dropped.
pub(crate) struct Pending(u64);

impl Pending {
    /// Registers a save in progress and what undoes it at any point between
    /// its steps.
    pub(crate) fn new(undo: impl Fn() + Send + 'static) -> Pending {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        pending().push((id, Box::new(undo)));
        Pending(id)
    }

    /// Registers a temporary file of a save in progress, removed if the
    /// process is ended before the save drops this.
    pub(crate) fn removing(file: std::path::PathBuf) -> Pending {
        Pending::new(move || {
            let _ = std::fs::remove_file(&file);
        })
    }

    /// Runs one step of the save, never at the same time as
    /// [`remove_temporaries`]; refused (an `Interrupted` I/O error) once
    /// that has undone the save.
    pub(crate) fn step<T>(&self, step: impl FnOnce() -> Result<T>) -> Result<T> {
        let list = pending();
        if !list.iter().any(|(id, _)| *id == self.0) {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::Interrupted,
                "the save was interrupted: its temporaries were removed",
            )));
        }
        let result = step();
        drop(list);
        result
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        pending().retain(|(id, _)| *id != self.0);
    }
}

/// Undoes every save in progress in this process: removes its temporary
/// file or staging folder, and after a folder's exchange moves the target's
/// own folders back into it first. For a signal handler (`SIGINT`,
/// `SIGTERM`) that then ends the process, as the `stowage` command does:
/// the saves in progress fail at their next step, and nothing they made is
/// left behind. What a process killed without a chance to run this leaves
/// (`SIGKILL`, a crash) is removed by the next save to the same target.
pub fn remove_temporaries() {
    undo(|_| true);
}

/// Undoes the saves in progress whose id `which` picks, and forgets them.
fn undo(which: impl Fn(u64) -> bool) {
    let mut list = pending();
    let (picked, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut *list)
        .into_iter()
        .partition(|(id, _)| which(*id));
    *list = kept;
    // Under the lock: no save takes a step meanwhile.
    for (_, undo) in picked {
        undo();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn a_step_after_the_undo_is_refused_and_the_undo_runs_once() {
        let undone = Arc::new(AtomicU64::new(0));
        let counter = undone.clone();
        let save = Pending::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(save.step(|| Ok(1)).unwrap(), 1);
        // This save only: other tests' saves run in this process meanwhile.
        undo(|id| id == save.0);
        undo(|id| id == save.0);
        assert_eq!(undone.load(Ordering::Relaxed), 1);
        let ran = AtomicBool::new(false);
        let err = save
            .step(|| {
                ran.store(true, Ordering::Relaxed);
                Ok(())
            })
            .unwrap_err();
        assert!(!ran.load(Ordering::Relaxed));
        assert!(matches!(err, Error::Io(e) if e.kind() == io::ErrorKind::Interrupted));
    }
}
