//! A distributed checkpoint folder as `stowage.dcp.StorageReader` reads it:
//! its tensors' chunks as saved, and any region of a tensor read from the
//! chunks it spans (and only those), so that a rank's plan is read by its
//! byte ranges.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use stowage::checkpoint::dcp::metadata::ItemKind;
use stowage::checkpoint::dcp::DcpCheckpoint;
use stowage::checkpoint::{PathKey, TensorObject};
use stowage::{Checkpoint, LoadOptions};

use crate::convert::Converter;
use crate::errors;

#[pyclass(module = "stowage._stowage", name = "DcpSource", frozen)]
pub struct DcpSource {
    inner: DcpCheckpoint,
    adapter: Py<PyAny>,
}

#[pymethods]
impl DcpSource {
    /// Opens the DCP folder `src` (a path or URL), reading its `.metadata`
    /// only; `adapter` builds the tensors read.
    #[new]
    fn new(py: Python<'_>, src: PathBuf, adapter: Bound<'_, PyAny>) -> PyResult<Self> {
        let options = LoadOptions::from_env();
        let inner = py
            .detach(|| DcpCheckpoint::open(&src, &options))
            .map_err(|e| errors::to_py(py, e))?;
        Ok(DcpSource {
            inner,
            adapter: adapter.unbind(),
        })
    }

    /// Each tensor: its name, dtype, shape and chunks as saved, each chunk
    /// `(offsets, sizes)` as tuples (what `torch.Size` is made of), built
    /// straight into Python objects: a million chunks are a million tuples
    /// and no Rust copies of them.
    fn tensors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for item in &self.inner.metadata().items {
            let ItemKind::Tensor(t) = &item.kind else {
                continue;
            };
            let chunks = t
                .chunks()
                .map(|c| {
                    PyTuple::new(
                        py,
                        [PyTuple::new(py, c.offsets)?, PyTuple::new(py, c.sizes)?],
                    )
                })
                .collect::<PyResult<Vec<_>>>()?;
            out.append((
                item.fqn.as_str(),
                t.dtype.name(),
                PyTuple::new(py, &t.size)?,
                PyList::new(py, chunks)?,
            ))?;
        }
        Ok(out)
    }

    /// Each value item (not a tensor): its name in `.metadata`, and its path
    /// from the root of the saved state dict (`planner_data`), each key a
    /// `str` or an `int`.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, Bound<'py, PyList>)>> {
        self.inner
            .metadata()
            .items
            .iter()
            .filter(|item| matches!(item.kind, ItemKind::Bytes(_)))
            .map(|item| {
                let path = PyList::empty(py);
                for key in &item.path {
                    match key {
                        PathKey::Key(k) => path.append(k)?,
                        PathKey::Index(i) => path.append(i)?,
                    }
                }
                Ok((item.fqn.clone(), path))
            })
            .collect()
    }

    /// Reads the region of tensor `fqn` at `offsets` of extent `sizes`
    /// straight into `target`, a writable, C-contiguous buffer of exactly
    /// its bytes (a planner's tensor, as `tensor.view(torch.uint8).numpy()`),
    /// with the GIL released: no buffer between the file and the tensor.
    fn read_region_into(
        &self,
        py: Python<'_>,
        fqn: &str,
        offsets: Vec<usize>,
        sizes: Vec<usize>,
        target: pyo3::buffer::PyBuffer<u8>,
    ) -> PyResult<()> {
        crate::target::read_into(py, fqn, &target, |dst| {
            self.inner.read_region_into(fqn, &offsets, &sizes, dst)
        })
    }

    /// The region of tensor `fqn` at `offsets` of extent `sizes`, read with
    /// the GIL released from the chunks it spans, as the adapter's tensor.
    fn read_region(
        &self,
        py: Python<'_>,
        fqn: &str,
        offsets: Vec<usize>,
        sizes: Vec<usize>,
    ) -> PyResult<Py<PyAny>> {
        let region = py
            .detach(|| self.inner.read_region(fqn, &offsets, &sizes))
            .map_err(|e| errors::to_py(py, e))?;
        // A lone tensor: the walk needs no object graph.
        let empty = Checkpoint::default();
        Converter::new(py, &empty, self.adapter.bind(py).clone())
            .at(fqn)
            .tensor(&TensorObject::new(region))
    }
}
