//! The warning channel: how stowage tells a program that it is using an API
//! PyTorch has deprecated, without failing the call.
//!
//! PyTorch issues a `UserWarning` through Python's `warnings` module the
//! first time a process touches the legacy typed-storage API
//! ([`TypedStorage`](crate::TypedStorage), the per-dtype storage classes,
//! `tensor.storage()`). stowage does the same through this module:
//!
//! - **What**: a [`Warning`] carries its [`WarningKind`], Python's category
//!   (`UserWarning`), PyTorch's exact message ([`TYPED_STORAGE_REMOVAL`]) and,
//!   where known, the caller's source location (like Python's `stacklevel`).
//! - **Where it goes**: a process-wide [`Route`]. By default warnings go to
//!   the [`log`] facade at level `Warn` with target [`LOG_TARGET`]
//!   (`"stowage"`), the message in Python's layout
//!   (`src/main.rs:12: UserWarning: TypedStorage is deprecated. …`) and the
//!   record's file and line set to the caller's. A program can install a
//!   handler ([`set_handler`]) to observe them or pass them on, or silence
//!   them ([`silence`]).
//! - **Scoped capture**: [`capture`] records the warnings raised on the
//!   current thread while a closure runs and keeps them from the route, like
//!   `warnings.catch_warnings(record=True)`.
//! - **How often**: once per process by default, as PyTorch's
//!   `_warn_typed_storage_removal`. [`set_always_warn_typed_storage_removal`]
//!   (PyTorch's `_set_always_warn_typed_storage_removal`) makes every use warn;
//!   [`reset_typed_storage_removal`] forgets that the warning was issued.
//!   As in PyTorch, a silenced warning still counts as issued.
//!
//! stowage's own paths (loading and saving checkpoints, `untyped_storage()`)
//! never warn.
//!
//! Why the `log` facade: a library does not own the process's standard
//! error. The program decides where its diagnostics go by installing a
//! logger (`env_logger`, `tracing`'s bridge, a few lines of `log::Log`, as
//! the `stowage` command line does to print `warning: …`); with no logger
//! installed the warning is dropped, as every other `log` record is. A program
//! that wants the warnings without a logger installs a handler:
//!
//! ```
//! stowage::warn::set_handler(|w| eprintln!("[my-app] {w}"));
//! # stowage::warn::set_route(stowage::warn::Route::Log);
//! ```

use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// PyTorch's deprecation message for the typed-storage API, word for word
/// (note the two spaces before "To access").
pub const TYPED_STORAGE_REMOVAL: &str = "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage class. This should only matter to you if you are using storages directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()";

/// What a warning is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarningKind {
    /// Use of the legacy typed-storage API (PyTorch's `_warn_typed_storage_removal`).
    TypedStorageRemoval,
}

/// One warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// What it is about.
    pub kind: WarningKind,
    /// Python's warning category (`"UserWarning"`).
    pub category: &'static str,
    /// The message, as PyTorch words it.
    pub message: &'static str,
    /// The source location of the call that warned, when known (calls
    /// through trait methods such as `Display` have none).
    pub location: Option<&'static Location<'static>>,
}

impl fmt::Display for Warning {
    /// Python's layout without the source line:
    /// `file:line: UserWarning: message` (or `UserWarning: message`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(loc) = self.location {
            write!(f, "{}:{}: ", loc.file(), loc.line())?;
        }
        write!(f, "{}: {}", self.category, self.message)
    }
}

/// A function that receives warnings.
pub type Handler = Arc<dyn Fn(&Warning) + Send + Sync>;

/// The `log` target of stowage's warnings.
pub const LOG_TARGET: &str = "stowage";

/// Where warnings go (process-wide).
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Route {
    /// A `log` record at level `Warn`, target [`LOG_TARGET`] (the default).
    #[default]
    Log,
    /// Dropped (Python's `warnings.simplefilter("ignore")`).
    Ignore,
    /// Passed to a function.
    Handler(Handler),
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Route::Log => "Log",
            Route::Ignore => "Ignore",
            Route::Handler(_) => "Handler(..)",
        })
    }
}

static ROUTE: RwLock<Route> = RwLock::new(Route::Log);
static ALWAYS_WARN: AtomicBool = AtomicBool::new(false);
static HAS_WARNED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Open [`capture`] scopes on this thread, innermost last.
    static CAPTURES: RefCell<Vec<Vec<Warning>>> = const { RefCell::new(Vec::new()) };
    /// True while this thread runs a handler, so that a handler using the
    /// legacy API cannot recurse.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}

/// Sets where warnings go and returns the previous route.
pub fn set_route(route: Route) -> Route {
    let mut slot = ROUTE.write().unwrap_or_else(PoisonError::into_inner);
    std::mem::replace(&mut *slot, route)
}

/// The current route.
pub fn route() -> Route {
    ROUTE.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Sends every warning to `handler` instead of `log`; returns the previous route.
pub fn set_handler(handler: impl Fn(&Warning) + Send + Sync + 'static) -> Route {
    set_route(Route::Handler(Arc::new(handler)))
}

/// Drops every warning from now on; returns the previous route (restore it with [`set_route`]).
pub fn silence() -> Route {
    set_route(Route::Ignore)
}

/// Runs `f` and returns what it returned with the warnings raised on this
/// thread meanwhile, in order. Captured warnings do not reach the route
/// (Python's `warnings.catch_warnings(record=True)`). Scopes nest; the
/// innermost one records.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<Warning>) {
    struct Scope;
    impl Drop for Scope {
        fn drop(&mut self) {
            CAPTURES.with(|c| {
                c.borrow_mut().pop();
            });
        }
    }
    CAPTURES.with(|c| c.borrow_mut().push(Vec::new()));
    let scope = Scope;
    let result = f();
    let recorded = CAPTURES.with(|c| c.borrow_mut().last_mut().map(std::mem::take));
    drop(scope);
    (result, recorded.unwrap_or_default())
}

/// Makes every use of the legacy typed-storage API warn, not only the first
/// (PyTorch's `torch.storage._set_always_warn_typed_storage_removal`).
pub fn set_always_warn_typed_storage_removal(always: bool) {
    ALWAYS_WARN.store(always, Ordering::SeqCst);
}

/// Whether every use warns (PyTorch's `_get_always_warn_typed_storage_removal`).
pub fn always_warn_typed_storage_removal() -> bool {
    ALWAYS_WARN.load(Ordering::SeqCst)
}

/// Forgets that the typed-storage warning was issued, so the next use warns
/// again (PyTorch's `_reset_warn_typed_storage_removal`).
pub fn reset_typed_storage_removal() {
    HAS_WARNED.store(false, Ordering::SeqCst);
}

/// True once the typed-storage warning has been issued in this process
/// (also when it was silenced or captured).
pub fn typed_storage_removal_issued() -> bool {
    HAS_WARNED.load(Ordering::SeqCst)
}

/// Issues the typed-storage deprecation warning if this is the first use in
/// the process or always-warn is on. Called by every public legacy entry point.
pub(crate) fn typed_storage_removal(location: Option<&'static Location<'static>>) {
    let first = !HAS_WARNED.swap(true, Ordering::SeqCst);
    if first || always_warn_typed_storage_removal() {
        emit(Warning {
            kind: WarningKind::TypedStorageRemoval,
            category: "UserWarning",
            message: TYPED_STORAGE_REMOVAL,
            location,
        });
    }
}

fn emit(warning: Warning) {
    let captured = CAPTURES.with(|c| match c.borrow_mut().last_mut() {
        Some(scope) => {
            scope.push(warning);
            true
        }
        None => false,
    });
    if captured || IN_HANDLER.with(Cell::get) {
        return;
    }
    match route() {
        Route::Log => log_warning(&warning),
        Route::Ignore => {}
        Route::Handler(h) => {
            struct Reset;
            impl Drop for Reset {
                fn drop(&mut self) {
                    IN_HANDLER.with(|f| f.set(false));
                }
            }
            IN_HANDLER.with(|f| f.set(true));
            let _reset = Reset;
            h(&warning);
        }
    }
}

/// Hands `warning` to the installed logger, the record located at the
/// caller's source line when known.
fn log_warning(warning: &Warning) {
    let level = log::Level::Warn;
    if level > log::max_level() {
        return;
    }
    let logger = log::logger();
    let metadata = log::Metadata::builder()
        .level(level)
        .target(LOG_TARGET)
        .build();
    if !logger.enabled(&metadata) {
        return;
    }
    logger.log(
        &log::Record::builder()
            .metadata(metadata)
            .args(format_args!("{warning}"))
            .module_path_static(Some(module_path!()))
            .file_static(warning.location.map(Location::file))
            .line(warning.location.map(Location::line))
            .build(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_pytorchs() {
        assert!(TYPED_STORAGE_REMOVAL.contains("directly.  To access"));
        assert!(TYPED_STORAGE_REMOVAL.starts_with("TypedStorage is deprecated. It will be removed"));
        assert!(TYPED_STORAGE_REMOVAL.ends_with("instead of tensor.storage()"));
    }

    #[test]
    fn display_is_pythons_layout() {
        let w = Warning {
            kind: WarningKind::TypedStorageRemoval,
            category: "UserWarning",
            message: "m",
            location: None,
        };
        assert_eq!(w.to_string(), "UserWarning: m");
        let here = Location::caller();
        let w = Warning {
            location: Some(here),
            ..w
        };
        assert_eq!(
            w.to_string(),
            format!("{}:{}: UserWarning: m", here.file(), here.line())
        );
    }

    #[test]
    fn capture_nests_and_records_on_this_thread() {
        let w = Warning {
            kind: WarningKind::TypedStorageRemoval,
            category: "UserWarning",
            message: "m",
            location: None,
        };
        let ((_, inner), outer) = capture(|| {
            emit(w);
            let r = capture(|| emit(w));
            emit(w);
            r
        });
        assert_eq!((inner.len(), outer.len()), (1, 2));
        // A panicking closure still closes its scope.
        let r = std::panic::catch_unwind(|| capture(|| panic!("boom")));
        assert!(r.is_err());
        assert!(CAPTURES.with(|c| c.borrow().is_empty()));
    }

    #[test]
    fn the_default_route_is_a_log_record_at_the_callers_line() {
        use std::sync::Mutex;
        /// Keeps stowage's records; this test binary installs no other logger.
        struct Keep(Mutex<Vec<(log::Level, String, Option<u32>)>>);
        impl log::Log for Keep {
            fn enabled(&self, m: &log::Metadata<'_>) -> bool {
                m.target() == LOG_TARGET
            }
            fn log(&self, r: &log::Record<'_>) {
                if self.enabled(r.metadata()) {
                    let entry = (r.level(), r.args().to_string(), r.line());
                    self.0.lock().unwrap().push(entry);
                }
            }
            fn flush(&self) {}
        }
        static KEEP: Keep = Keep(Mutex::new(Vec::new()));
        log::set_logger(&KEEP).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
        assert!(matches!(route(), Route::Log));
        let here = Location::caller();
        emit(Warning {
            kind: WarningKind::TypedStorageRemoval,
            category: "UserWarning",
            message: "to the log",
            location: Some(here),
        });
        let kept = KEEP.0.lock().unwrap();
        let ours: Vec<_> = kept
            .iter()
            .filter(|k| k.1.ends_with("to the log"))
            .collect();
        assert_eq!(ours.len(), 1, "{kept:?}");
        assert_eq!(ours[0].0, log::Level::Warn);
        assert_eq!(
            ours[0].1,
            format!("{}:{}: UserWarning: to the log", here.file(), here.line())
        );
        assert_eq!(ours[0].2, Some(here.line()));
    }
}
