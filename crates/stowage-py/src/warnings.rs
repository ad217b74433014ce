//! The warnings of the library and of the command line's code (the `log`
//! facade: `stowage::warn`, `convert`'s "dropped N values") as Python's
//! `UserWarning`s, so that `stowage.convert(..., drop_objects=True)` says
//! what it dropped the way a Python library does.
//!
//! Written here, not taken from `pyo3-log`: that crate forwards to Python's
//! `logging` module, where these would go unseen by default, not to
//! `warnings`; the forwarding is a few lines of `log::Log`.

use std::ffi::CString;

use log::{Level, LevelFilter, Log, Metadata, Record};
use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;

/// Forwards records of level `Warn` and above to `warnings.warn`.
struct Warnings;

impl Log for Warnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= Level::Warn
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let Ok(message) = CString::new(format!("stowage: {}", record.args())) else {
            return;
        };
        // From any thread: the GIL is taken for the call (the caller of a
        // stowage function has released it while stowage works).
        Python::attach(|py| {
            let category = py.get_type::<PyUserWarning>();
            // A warnings filter set to "error" raises here; that error
            // cannot cross the `log` call, so it is printed as Python would.
            if let Err(e) = PyErr::warn(py, category.as_any(), &message, 1) {
                e.print(py);
            }
        });
    }

    fn flush(&self) {}
}

/// Installs the forwarding, unless the process has a logger already (an
/// embedding program's own).
pub fn install() {
    if log::set_logger(&Warnings).is_ok() {
        log::set_max_level(LevelFilter::Warn);
    }
}
