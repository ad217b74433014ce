//! `stowage.inspect`, `stowage.diff` and `stowage.convert`: the commands'
//! library (`stowage-commands`) called directly, each result turned into
//! Python values (the JSON of the CLI contract as dicts and lists, or the
//! lines `convert` prints), with no arguments parsed and no JSON text in
//! between. Each call has a context of its own, so its `"transfer"` counts
//! only its own requests.

use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value as Json;
use stowage_commands::convert::ConvertOptions;
use stowage_commands::diff::DiffOptions;
use stowage_commands::inspect::InspectOptions;
use stowage_commands::{CommandError, Context};

use crate::errors;

/// The exception a command's error is raised as: the library's by its
/// kind, a refused option as `ValueError`.
fn to_py(py: Python<'_>, e: CommandError) -> PyErr {
    match e {
        CommandError::Input(e) => errors::to_py(py, e),
        CommandError::Usage(message) => PyValueError::new_err(message),
        CommandError::Output(e) => PyOSError::new_err(e.to_string()),
        e => errors::StowageError::new_err(e.to_string()),
    }
}

/// `value` as Python's `json.loads` gives it.
pub(crate) fn to_python<'py>(py: Python<'py>, value: &Json) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Json::Null => py.None().into_bound(py),
        Json::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Json::String(s) => s.into_pyobject(py)?.into_any(),
        Json::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Json::Object(members) => {
            let dict = PyDict::new(py);
            for (key, item) in members {
                dict.set_item(key, to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// A context with these global options, counting from zero.
fn context(inert: bool) -> Context {
    Context::default().with_inert(inert)
}

/// `stowage inspect --json`'s object for `src`.
#[pyfunction]
#[pyo3(signature = (src, *, hashes = true, inert = false))]
pub fn inspect(py: Python<'_>, src: PathBuf, hashes: bool, inert: bool) -> PyResult<Py<PyAny>> {
    let doc = py
        .detach(|| {
            let cx = context(inert);
            let options = InspectOptions::default().with_hashes(hashes);
            let inspection = stowage_commands::inspect::inspect(&src, &cx, &options)?;
            serde_json::to_value(&inspection).map_err(|e| CommandError::Output(e.into()))
        })
        .map_err(|e| to_py(py, e))?;
    Ok(to_python(py, &doc)?.unbind())
}

/// `stowage manifest`'s object for `src`.
#[pyfunction]
#[pyo3(signature = (src, *, inert = false, oms_name = None))]
pub fn manifest(
    py: Python<'_>,
    src: PathBuf,
    inert: bool,
    oms_name: Option<String>,
) -> PyResult<Py<PyAny>> {
    let doc = py
        .detach(|| {
            let options = stowage_commands::manifest::ManifestOptions::default();
            let m = stowage_commands::manifest::manifest(&src, &context(inert), &options)?;
            manifest_json(&m, oms_name.as_deref())
        })
        .map_err(|e| to_py(py, e))?;
    Ok(to_python(py, &doc)?.unbind())
}

/// The manifest of `obj` as it is in memory (what `stowage.save` would
/// write, its leaves encoded by `encoder`, tensors hashed where they lie
/// with the GIL released): `stowage manifest`'s object for the file it
/// would be saved as.
#[pyfunction]
#[pyo3(signature = (obj, encoder, *, oms_name = None))]
pub fn manifest_of(
    py: Python<'_>,
    obj: Bound<'_, PyAny>,
    encoder: Bound<'_, PyAny>,
    oms_name: Option<String>,
) -> PyResult<Py<PyAny>> {
    let ckpt = crate::save::checkpoint_of(py, &obj, encoder, Vec::new())?;
    let doc = py
        .detach(|| {
            let cx = context(false);
            let m = stowage_commands::manifest::of_checkpoint(&ckpt, "the object given", &cx)?;
            manifest_json(&m, oms_name.as_deref())
        })
        .map_err(|e| to_py(py, e))?;
    Ok(to_python(py, &doc)?.unbind())
}

/// A manifest's JSON, or with `oms_name` its OMS statement naming that model.
fn manifest_json(
    m: &stowage_commands::manifest::Manifest,
    oms_name: Option<&str>,
) -> Result<Json, CommandError> {
    match oms_name {
        Some(name) => Ok(m.to_oms_statement(name)),
        None => serde_json::to_value(m).map_err(|e| CommandError::Output(e.into())),
    }
}

/// `stowage diff --content --json`'s object for `a` and `b`.
#[pyfunction]
pub fn diff_content(py: Python<'_>, a: PathBuf, b: PathBuf) -> PyResult<Py<PyAny>> {
    let doc = py
        .detach(|| {
            let report = stowage_commands::content_diff::content_diff(&a, &b, &context(false))?;
            serde_json::to_value(&report).map_err(|e| CommandError::Output(e.into()))
        })
        .map_err(|e| to_py(py, e))?;
    Ok(to_python(py, &doc)?.unbind())
}

/// `stowage diff --json`'s object for `a` and `b`.
#[pyfunction]
#[pyo3(signature = (a, b, *, atol = 0.0, rtol = 0.0))]
pub fn diff(py: Python<'_>, a: PathBuf, b: PathBuf, atol: f64, rtol: f64) -> PyResult<Py<PyAny>> {
    let doc = py
        .detach(|| {
            let mut options = DiffOptions::default();
            if atol != 0.0 || rtol != 0.0 {
                options = options.with_tolerance(atol, rtol)?;
            }
            let report = stowage_commands::diff::diff(&a, &b, &context(false), &options)?;
            serde_json::to_value(&report).map_err(|e| CommandError::Output(e.into()))
        })
        .map_err(|e| to_py(py, e))?;
    Ok(to_python(py, &doc)?.unbind())
}

/// `stowage convert`: what it prints.
#[pyfunction]
#[pyo3(signature = (src, dst, *, to = None, max_shard_size = None, ranks = None, inert = false, drop_values = false, drop_objects = false, select = None, state_dict = false, rank = None, world = None, manifest = None))]
#[allow(clippy::too_many_arguments)] // The keyword arguments of `stowage.convert`.
pub fn convert(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    to: Option<&str>,
    max_shard_size: Option<String>,
    ranks: Option<usize>,
    inert: bool,
    drop_values: bool,
    drop_objects: bool,
    select: Option<String>,
    state_dict: bool,
    rank: Option<usize>,
    world: Option<usize>,
    manifest: Option<PathBuf>,
) -> PyResult<String> {
    let to = to
        .map(str::parse::<stowage::checkpoint::FolderFormat>)
        .transpose()
        .map_err(|e| PyValueError::new_err(format!("convert: to: {}", stowage::one_line(&e))))?;
    let mut options = ConvertOptions::default()
        .with_to(to)
        .with_ranks(ranks)
        .with_drop_values(drop_values)
        .with_drop_objects(drop_objects)
        .with_select(select)
        .with_state_dict(state_dict)
        .with_manifest(manifest.is_some());
    if let Some(size) = max_shard_size {
        options = options.with_max_shard_size(size);
    }
    match (rank, world) {
        (Some(rank), Some(world)) => options = options.with_part(rank, world),
        (None, None) => {}
        _ => {
            return Err(PyValueError::new_err(
                "convert: rank and world are given together",
            ))
        }
    }
    py.detach(|| {
        let cx = context(inert);
        let conversion = stowage_commands::convert::convert(&src, &dst, &cx, &options)?;
        if let (Some(path), Some(m)) = (&manifest, conversion.manifest()) {
            stowage_commands::manifest::write_file(path, &cx, |f| m.write_json(f))?;
        }
        Ok(conversion.to_string())
    })
    .map_err(|e| to_py(py, e))
}
