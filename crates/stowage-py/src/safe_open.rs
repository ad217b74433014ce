//! `stowage.safe_open`: a checkpoint opened lazily, each tensor read when
//! asked for, as safetensors' `safe_open` does, for every format stowage
//! reads (by URL too, with range requests).

use std::collections::HashMap;
use std::path::PathBuf;

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use stowage::checkpoint::{dotted, PathKey, TensorObject};
use stowage::{Checkpoint, LoadMode, LoadOptions};

use crate::convert::Converter;
use crate::errors;

/// A lazily loaded checkpoint: the pickle (or header) is read when it is
/// opened, each storage's bytes when a tensor on it is first asked for.
#[pyclass(module = "stowage._stowage", name = "SafeOpen", frozen)]
pub struct SafeOpen {
    ckpt: Checkpoint,
    adapter: Py<PyAny>,
    /// Each tensor's dotted name, in the file's order, with its path.
    names: Vec<(String, Vec<PathKey>)>,
    by_name: HashMap<String, usize>,
}

impl SafeOpen {
    /// How to read the part of tensor `name` that `ranges` select (see
    /// `read_slice`), or `None` where reading it by runs does not pay.
    fn slice_plan(
        &self,
        py: Python<'_>,
        name: &str,
        ranges: &[(usize, usize, usize)],
    ) -> PyResult<Option<SlicePlan>> {
        let t = self.tensor_object(name)?;
        let tensor = &t.tensor;
        // Both take the storage's lock, which a thread reading it holds:
        // waited for with the GIL released.
        let (has_data, storage_nbytes) =
            py.detach(|| (tensor.has_data(), tensor.untyped_storage().nbytes()));
        let plain = t.kind().is_strided()
            && t.quantization().is_none()
            && t.subclass().is_none()
            && t.state().is_none()
            && !t.conj
            && !t.neg
            && has_data
            && tensor.dtype().elements_per_byte() == 1;
        if !plain || ranges.len() > tensor.dim() {
            return Ok(None);
        }
        let (mut shape, mut stride) = (tensor.shape().to_vec(), tensor.stride().to_vec());
        let mut offset = tensor.storage_offset();
        for (d, &(start, len, step)) in ranges.iter().enumerate() {
            let fits = step > 0 && (len == 0 || start + (len - 1) * step < shape[d]);
            if !fits {
                return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                    "{name}: dimension {d} of size {} has no elements {start}..+{len} by {step}",
                    shape[d]
                )));
            }
            offset += start * stride[d];
            shape[d] = len;
            stride[d] *= step;
        }
        let size = tensor.element_size();
        let numel: usize = shape.iter().product();
        // Runs: the innermost dimensions that lie back to back in the
        // storage are read together.
        let mut run = 1;
        let mut outer = shape.len();
        while outer > 0 && stride[outer - 1] == run {
            run *= shape[outer - 1];
            outer -= 1;
        }
        let runs = numel.checked_div(run).unwrap_or(0);
        // Many small reads cost more than one whole read: read the storage
        // whole when the runs are small and cover much of it.
        if runs > 1 && (run * size < 4096 && numel * size * 4 > storage_nbytes) {
            return Ok(None);
        }
        Ok(Some(SlicePlan {
            storage: tensor.untyped_storage().clone(),
            dtype: tensor.dtype(),
            shape,
            stride,
            offset,
            outer,
            run,
            size,
        }))
    }

    fn tensor_object(&self, name: &str) -> PyResult<&TensorObject> {
        let Some(&i) = self.by_name.get(name) else {
            return Err(PyKeyError::new_err(format!("no tensor named {name:?}")));
        };
        let path = &self.names[i].1;
        let value = self
            .ckpt
            .root_value()
            .get_path(path)
            .and_then(|v| v.as_tensor())
            .map_err(|e| PyKeyError::new_err(e.to_string()))?;
        Ok(value)
    }
}

#[pymethods]
impl SafeOpen {
    #[new]
    #[pyo3(signature = (src, adapter, *, inert = false, allow_globals = Vec::new()))]
    fn new(
        py: Python<'_>,
        src: PathBuf,
        adapter: Py<PyAny>,
        inert: bool,
        allow_globals: Vec<String>,
    ) -> PyResult<SafeOpen> {
        let options = LoadOptions::from_env()
            .with_mode(LoadMode::Lazy)
            .with_inert(inert)
            .with_allow_globals(allow_globals);
        let ckpt = py
            .detach(|| stowage::load_with(&src, &options))
            .map_err(|e| errors::to_py(py, e))?;
        let mut names = Vec::new();
        let mut by_name = HashMap::new();
        for (path, _) in ckpt.tensors().map_err(|e| errors::to_py(py, e))? {
            let name = dotted(&path);
            // A tensor reached by two paths is listed at both; a name met
            // twice (two paths that join alike) keeps its first.
            if !by_name.contains_key(&name) {
                by_name.insert(name.clone(), names.len());
                names.push((name, path));
            }
        }
        Ok(SafeOpen {
            ckpt,
            adapter,
            names,
            by_name,
        })
    }

    /// The tensors' names, paths joined with `.`, in the file's order.
    fn keys(&self) -> Vec<String> {
        self.names.iter().map(|(n, _)| n.clone()).collect()
    }

    fn __contains__(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    fn __len__(&self) -> usize {
        self.names.len()
    }

    /// One tensor, its storage's bytes read now (and only its storage's).
    fn get_tensor(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        let t = self.tensor_object(name)?;
        // The walk reads the storage, the GIL released.
        Converter::new(py, &self.ckpt, self.adapter.bind(py).clone())
            .at(name)
            .tensor(t)
    }

    /// The part of a tensor that `ranges` select, one `(start, len, step)`
    /// per leading dimension (the others whole), reading only the bytes it
    /// covers: each run of elements adjacent in the storage is one read.
    /// `None` where that does not pay (a tensor with lazy bits, quantized,
    /// sparse or nested, or a selection whose runs would cover most of
    /// the storage anyway): the caller then reads the tensor whole.
    fn read_slice(
        &self,
        py: Python<'_>,
        name: &str,
        ranges: Vec<(usize, usize, usize)>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let Some(plan) = self.slice_plan(py, name, &ranges)? else {
            return Ok(None);
        };
        // Sized by the file: allocated fallibly, so a slice too large for
        // memory is an error, not an abort of the interpreter.
        let len = plan.nbytes();
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(len).map_err(|_| {
            errors::to_py(
                py,
                stowage::Error::Storage(stowage::StorageError::AllocationFailed { nbytes: len }),
            )
        })?;
        bytes.resize(len, 0);
        py.detach(|| plan.read(&mut bytes))
            .map_err(|e| errors::to_py(py, e))?;
        let part = stowage::UntypedStorage::from_bytes(&bytes).map_err(|e| errors::to_py(py, e))?;
        let mut out = stowage::Tensor::empty(&[0], plan.dtype).map_err(|e| errors::to_py(py, e))?;
        let contiguous: Vec<usize> = contiguous_strides(&plan.shape);
        out.set_(&part, 0, &plan.shape, &contiguous)
            .map_err(|e| errors::to_py(py, e))?;
        let object = TensorObject::new(out);
        let mut converter = Converter::new(py, &self.ckpt, self.adapter.bind(py).clone());
        converter.tensor(&object).map(Some)
    }

    /// [`read_slice`](Self::read_slice) straight into `target`, a
    /// writable, C-contiguous buffer of exactly the part's bytes (a DCP
    /// planner's tensor), the GIL released. False, reading nothing, where
    /// `read_slice` would give `None` or the sizes differ: the caller
    /// then reads the part another way.
    fn read_slice_into(
        &self,
        py: Python<'_>,
        name: &str,
        ranges: Vec<(usize, usize, usize)>,
        target: pyo3::buffer::PyBuffer<u8>,
    ) -> PyResult<bool> {
        let Some(plan) = self.slice_plan(py, name, &ranges)? else {
            return Ok(false);
        };
        if plan.nbytes() != target.len_bytes() {
            return Ok(false);
        }
        crate::target::read_into(py, name, &target, |dst| plan.read(dst))?;
        Ok(true)
    }

    /// `(dtype name, shape)` of a tensor, without reading its bytes.
    /// The dtype (PyTorch's name) and shape of tensor `name`.
    fn tensor_info(&self, name: &str) -> PyResult<(String, Vec<usize>)> {
        let t = self.tensor_object(name)?;
        Ok((
            t.tensor.dtype().name().to_owned(),
            t.tensor.shape().to_vec(),
        ))
    }

    /// The dtype of tensor `name` by safetensors' name (`F32`, `BF16`), as
    /// its `get_slice(...).get_dtype()` gives it, or PyTorch's where
    /// safetensors has none (`complex128`, `qint8`).
    fn safetensors_dtype(&self, name: &str) -> PyResult<String> {
        let dtype = self.tensor_object(name)?.tensor.dtype();
        Ok(dtype
            .safetensors()
            .map_or_else(|| dtype.name().to_owned(), |d| format!("{d:?}")))
    }

    /// The tensors' names in the order of their bytes in the file: by the
    /// storage record each views (a safetensors file's records are in
    /// data-offset order), then by offset in it, as safetensors'
    /// `offset_keys()`; tensors without a record (meta) last.
    fn offset_keys(&self) -> PyResult<Vec<String>> {
        let record: HashMap<usize, usize> = self
            .ckpt
            .storages()
            .iter()
            .enumerate()
            .map(|(i, r)| (r.storage.id(), i))
            .collect();
        let mut keyed = Vec::with_capacity(self.names.len());
        for (order, (name, _)) in self.names.iter().enumerate() {
            let t = &self.tensor_object(name)?.tensor;
            let at = record.get(&t.untyped_storage().id()).copied();
            keyed.push((at.unwrap_or(usize::MAX), t.storage_offset(), order, name));
        }
        keyed.sort();
        Ok(keyed.into_iter().map(|k| k.3.clone()).collect())
    }

    /// The whole saved object, its storages handed to `adapter` unread
    /// (`lazy_storage`): the package's `metadata()` passes one that leaves
    /// the tensors out, so no tensor byte is read.
    fn root(&self, py: Python<'_>, adapter: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        Converter::new(py, &self.ckpt, adapter).lazy().root()
    }

    /// A safetensors file's `__metadata__`, or `None`.
    fn safetensors_metadata<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(meta) = self.ckpt.safetensors_metadata() else {
            return Ok(None);
        };
        let dict = PyDict::new(py);
        for (k, v) in meta {
            dict.set_item(k, v)?;
        }
        Ok(Some(dict))
    }

    /// The file's format, as `inspect --json` names a file's: `torch-zip`,
    /// `torchscript`, `torch-legacy` or `safetensors` (for a DCP directory,
    /// its items' format).
    fn format(&self) -> &'static str {
        self.ckpt.format().name()
    }

    /// What it was opened as, as `inspect --json`'s `"format"` names it: a
    /// file's format, or a set's layout (`sharded-safetensors`,
    /// `sharded-bin`, `dcp`, `dcp-hf`).
    fn layout(&self) -> &'static str {
        self.ckpt.layout().name()
    }
}

/// A part of a tensor, in runs of elements adjacent in its storage.
struct SlicePlan {
    storage: stowage::UntypedStorage,
    dtype: stowage::DType,
    /// The part's shape, and its strides and offset in the storage (in
    /// elements).
    shape: Vec<usize>,
    stride: Vec<usize>,
    offset: usize,
    /// The dimensions outside a run, and a run's length (in elements).
    outer: usize,
    run: usize,
    /// The element size in bytes.
    size: usize,
}

impl SlicePlan {
    /// The part's bytes, row-major.
    fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.size
    }

    /// Reads the part into `dst` (exactly [`nbytes`](Self::nbytes) long),
    /// one read per run.
    fn read(&self, dst: &mut [u8]) -> stowage::Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let mut index = vec![0usize; self.outer];
        for chunk in dst.chunks_mut(self.run * self.size) {
            let at: usize = self.offset
                + index
                    .iter()
                    .zip(&self.stride)
                    .map(|(i, s)| i * s)
                    .sum::<usize>();
            self.storage.read_at(at * self.size, chunk)?;
            // The next run: the outer index, as an odometer.
            for d in (0..self.outer).rev() {
                index[d] += 1;
                if index[d] < self.shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(())
    }
}

/// Row-major strides, in elements, of `shape`.
fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1].max(1);
    }
    strides
}
