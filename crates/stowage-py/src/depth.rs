//! How deep the walks between the library's values and Python's objects
//! (`convert.rs` loading, `save.rs` saving) may go. Each recurses once per
//! container level and calls into Python at every level, on the calling
//! thread's stack: a checkpoint nested deeper than that stack holds must be
//! an error, never a crash of the interpreter.

use pyo3::exceptions::PyRecursionError;
use pyo3::PyErr;

/// Levels past which a walk stops whatever the stack left.
const MAX_DEPTH: usize = 2000;

/// The stack a walk keeps free below its deepest level: room for the Python
/// calls one level makes (a tensor's constructor, the adapter's functions)
/// and their C callees.
const STACK_MARGIN: usize = 256 << 10;

/// Levels a walk takes with less than [`STACK_MARGIN`] left, down to
/// [`FLOOR`] (under 2 KiB each in a release build, about 13 in a debug
/// one): a real checkpoint is this shallow, and a thread given a small
/// stack (`threading.stack_size(256 << 10)`) can still load it.
const ALWAYS: usize = 8;

/// The stack left below which no level is taken.
const FLOOR: usize = 64 << 10;

/// The error for a walk `depth` levels down at `place` when it can go no
/// deeper: past [`MAX_DEPTH`], or with less than [`STACK_MARGIN`] (for the
/// first [`ALWAYS`] levels, [`FLOOR`]) of this thread's stack left. A
/// Python thread's stack is the one the interpreter or
/// `threading.stack_size` gave it; a main thread's 8 MiB holds every level
/// in a release build and about 600 in a debug one.
pub fn check(depth: usize, place: impl FnOnce() -> String) -> Result<(), PyErr> {
    // `None` where the platform cannot tell the stack's bounds: the level
    // count alone then.
    let left = stacker::remaining_stack();
    let margin = if depth < ALWAYS { FLOOR } else { STACK_MARGIN };
    if depth < MAX_DEPTH && left.is_none_or(|left| left >= margin) {
        return Ok(());
    }
    Err(PyRecursionError::new_err(format!(
        "containers nested {depth} deep at {}: deeper than {}",
        place(),
        if depth >= MAX_DEPTH {
            format!("{MAX_DEPTH} levels")
        } else {
            "this thread's stack holds (a thread with a larger stack, `threading.stack_size`, goes deeper)".to_owned()
        }
    )))
}
