//! Where a path or URL points, as the library parses it
//! (`stowage::io::Location`), for the Python package's own file handling
//! (`stowage.dcp`): whether it is in an object store, its folder form, and
//! names joined to it. The package never parses a URL itself.

use std::path::PathBuf;

use pyo3::prelude::*;
use stowage::io::Location as Inner;
use stowage::LoadOptions;

#[pyclass(module = "stowage._stowage", name = "Location", frozen)]
pub struct Location {
    inner: Inner,
    /// As given.
    src: String,
}

#[pymethods]
impl Location {
    /// The location `src` (a path or URL) names, with the environment's
    /// `STOWAGE_REMOTE_*` settings for a URL.
    #[new]
    fn new(src: PathBuf) -> Location {
        Location {
            inner: LoadOptions::from_env().location(&src),
            src: src.to_string_lossy().into_owned(),
        }
    }

    /// Whether it is in an object store (each read a request).
    #[getter]
    fn is_remote(&self) -> bool {
        self.inner.is_remote()
    }

    /// It named as a folder: a URL with its trailing `/` (how a folder is
    /// named in an object store); a local path as given.
    fn folder(&self) -> String {
        if self.inner.is_remote() && !self.src.ends_with('/') {
            format!("{}/", self.src)
        } else {
            self.src.clone()
        }
    }

    /// The path or URL of `name` inside it, as a folder.
    fn join(&self, name: &str) -> String {
        self.inner.join(name).to_string()
    }
}
