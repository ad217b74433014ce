//! `stowage._stowage`, the extension module of the `stowage` Python
//! package: the Rust library's loaders behind a small Python surface. The
//! package (`python/stowage/`) holds the public API, the per-framework
//! adapters and the type stubs; this module only loads, walks and raises.
//!
//! The Rust library stays free of Python: everything PyO3 is here.

// `unsafe` only where a storage's bytes are lent to Python (the buffer
// protocol and DLPack capsules, `storage.rs`), where Python's buffers are
// borrowed (`save.rs`, `target.rs`) and for the mapped load's promise
// (`load`).
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod commands;
mod convert;
mod dcp;
mod depth;
mod errors;
mod location;
mod premade;
mod safe_open;
mod save;
mod storage;
mod target;
mod warnings;

use std::path::PathBuf;
use std::str::FromStr;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use stowage::{Checkpoint, Device, LoadMode, LoadOptions};

use crate::convert::Converter;

/// The load options of the Python arguments: `--inert`'s, the allowed
/// globals, lazy or not, and `map_location` (`None`, `"cpu"` or `"meta"`;
/// any other device is refused until a device back end exists).
fn load_options(
    lazy: bool,
    inert: bool,
    allow_globals: Vec<String>,
    map_location: Option<&str>,
) -> PyResult<LoadOptions> {
    let mut options = LoadOptions::from_env()
        .with_inert(inert)
        .with_allow_globals(allow_globals);
    if lazy {
        options = options.with_mode(LoadMode::Lazy);
    }
    match map_location {
        None | Some("cpu") => {}
        Some("meta") => options = options.with_map_location(Device::META),
        Some(other) => {
            let device = Device::from_str(other)
                .map_err(|e| PyValueError::new_err(format!("map_location {other:?}: {e}")))?;
            return Err(PyValueError::new_err(format!(
                "map_location {device}: stowage has no accelerator back end yet; load on \"cpu\" (the default) and move the tensors"
            )));
        }
    }
    Ok(options)
}

/// Loads the checkpoint at `src` and builds it with `adapter`, a framework
/// adapter of the package (`stowage._torch.Adapter`, `stowage._numpy.Adapter`).
/// The file is read, parsed and checked with the GIL released; the Python
/// objects are built after.
#[pyfunction]
#[pyo3(signature = (src, adapter, *, mmap = false, lazy = false, inert = false, allow_globals = Vec::new(), map_location = None, huge_pages = false, expect = None))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments, one each.
fn load(
    py: Python<'_>,
    src: PathBuf,
    adapter: Bound<'_, PyAny>,
    mmap: bool,
    lazy: bool,
    inert: bool,
    allow_globals: Vec<String>,
    map_location: Option<String>,
    huge_pages: bool,
    expect: Option<String>,
) -> PyResult<Py<PyAny>> {
    if lazy && mmap {
        return Err(PyValueError::new_err(
            "mmap=True and lazy=True: choose one (a mapped load already reads each page on first use)",
        ));
    }
    let mut options = load_options(lazy, inert, allow_globals, map_location.as_deref())?
        .with_huge_pages(huge_pages);
    if let Some(text) = expect {
        let expected = stowage::checkpoint::content::Expected::from_manifest_json(&text)
            .map_err(|e| errors::to_py(py, e))?;
        options = options.with_expected(expected);
    }
    let read = |options: &LoadOptions| {
        if mmap {
            // SAFETY: the caller asked for a mapped load, whose contract
            // (the file must not be truncated or written while its tensors
            // live) the Python docs state, as torch.load(mmap=True)'s do.
            #[allow(unsafe_code)]
            unsafe {
                stowage::load_mmap(&src, options)
            }
        } else {
            stowage::load_with(&src, options)
        }
    };
    // The framework's tensors made while the file is read, where the
    // adapter makes them from DLPack capsules and places no storage, and
    // the file may hold enough storages to pay for the loading thread
    // (0.1 ms; half a microsecond saved a storage).
    let from_dlpack = adapter
        .getattr("dlpack_view")
        .ok()
        .filter(|view| !view.is_none() && !lazy && !adapter.hasattr("placed").unwrap_or(true))
        .filter(|_| {
            std::fs::metadata(&src).is_ok_and(|m| m.is_file() && m.len() >= premade::MIN_FILE)
        });
    let (loaded, premade) = match from_dlpack {
        Some(from_dlpack) => premade::load(py, options, &from_dlpack, read),
        None => (py.detach(|| read(&options)), convert::Storages::default()),
    };
    let ckpt = loaded.map_err(|e| errors::to_py(py, e))?;
    let converter = Converter::new(py, &ckpt, adapter).premade(premade);
    // An eager load's storages are this call's alone until it returns;
    // a lazy one's are read later, on other threads too.
    let mut converter = if lazy {
        converter.lazy()
    } else {
        converter.sole()
    };
    let root = converter.root();
    drop_aside(ckpt);
    root
}

/// Drops what a load parsed on a thread of its own where it holds many
/// small storages: what Python holds (the storages) stays, and freeing the
/// rest (a graph node, a path and a tensor record per value: a tenth of a
/// load of 20,000 small tensors) need not hold up the caller. Otherwise it
/// is dropped here: a thread costs more than a few values take to free,
/// and one that still held large storages when Python let them go would
/// unmap them while the caller's next load faults its memory in (a 1 GiB
/// load was a third slower).
fn drop_aside(ckpt: Checkpoint) {
    const MANY: usize = 256;
    const SMALL: u64 = 64 << 10;
    let storages = ckpt.storages();
    let bytes: u64 = storages.iter().map(|s| s.storage.nbytes() as u64).sum();
    if storages.len() < MANY || bytes / storages.len() as u64 > SMALL {
        return;
    }
    // Where no thread can be had, `spawn` drops the closure, and the
    // checkpoint in it, here.
    let _ = std::thread::Builder::new()
        .name("stowage-drop".into())
        .spawn(move || drop(ckpt));
}

/// Loads the checkpoint `data` holds (what a file object gave), eagerly,
/// and builds it with `adapter`, as [`load`] does a file's.
#[pyfunction]
#[pyo3(signature = (data, adapter, *, inert = false, allow_globals = Vec::new(), map_location = None))]
fn load_bytes(
    py: Python<'_>,
    data: &Bound<'_, pyo3::types::PyBytes>,
    adapter: Bound<'_, PyAny>,
    inert: bool,
    allow_globals: Vec<String>,
    map_location: Option<String>,
) -> PyResult<Py<PyAny>> {
    let options = load_options(false, inert, allow_globals, map_location.as_deref())?;
    // Borrowed from the immutable `bytes` object, which outlives the load;
    // an eager load copies what it keeps.
    let bytes = data.as_bytes();
    let ckpt = py
        .detach(|| stowage::checkpoint::load_bytes(bytes, &options))
        .map_err(|e| errors::to_py(py, e))?;
    Converter::new(py, &ckpt, adapter).sole().root()
}

/// Scans each path (a file, or a folder read recursively) without loading
/// it: the object of `stowage scan --json` (`format="json"`) or of
/// `stowage scan --format sarif` (`format="sarif"`), made by the same code,
/// as Python values.
#[pyfunction]
#[pyo3(signature = (*paths, format = "json"))]
fn scan(
    py: Python<'_>,
    paths: &Bound<'_, pyo3::types::PyTuple>,
    format: &str,
) -> PyResult<Py<PyAny>> {
    let sarif = match format {
        "json" => false,
        "sarif" => true,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "format must be \"json\" or \"sarif\", not {other:?}"
            )))
        }
    };
    let paths: Vec<PathBuf> = paths.iter().map(|p| p.extract()).collect::<PyResult<_>>()?;
    let doc = py.detach(|| {
        let report = stowage_commands::scan::scan(&paths, &stowage_commands::Context::default());
        if sarif {
            report.to_sarif()
        } else {
            report.to_json()
        }
    });
    Ok(commands::to_python(py, &doc)?.unbind())
}

#[pymodule]
fn _stowage(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    warnings::install();
    m.add_class::<storage::StorageBuffer>()?;
    m.add_class::<storage::PendingStorage>()?;
    m.add_class::<safe_open::SafeOpen>()?;
    m.add_class::<dcp::DcpSource>()?;
    m.add_class::<location::Location>()?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(load_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(save::save_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(save::save, m)?)?;
    m.add_function(wrap_pyfunction!(save::write_items, m)?)?;
    m.add_function(wrap_pyfunction!(save::write_rank, m)?)?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(commands::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(commands::manifest, m)?)?;
    m.add_function(wrap_pyfunction!(commands::manifest_of, m)?)?;
    m.add_function(wrap_pyfunction!(commands::diff_content, m)?)?;
    m.add_function(wrap_pyfunction!(commands::diff, m)?)?;
    m.add_function(wrap_pyfunction!(commands::convert, m)?)?;
    Ok(())
}
