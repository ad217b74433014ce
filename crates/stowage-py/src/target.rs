//! Reads straight into memory Python lends: a planner's tensor, as
//! `tensor.view(torch.uint8).numpy()`, filled with the GIL released and no
//! buffer between the file and the tensor.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

use crate::errors;

/// Runs `read` on the bytes of `target` (a writable, C-contiguous buffer),
/// the GIL released; `what` names the read in errors.
#[allow(unsafe_code)] // Writing into the memory a Python buffer lends.
pub fn read_into(
    py: Python<'_>,
    what: &str,
    target: &PyBuffer<u8>,
    read: impl FnOnce(&mut [u8]) -> stowage::Result<()> + Send,
) -> PyResult<()> {
    if target.readonly() || !target.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{what}: the target is not a writable, contiguous buffer"
        )));
    }
    let (ptr, len) = (target.buf_ptr() as usize, target.len_bytes());
    py.detach(|| {
        let dst: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: `target` holds the buffer's export for this call, so
            // its `len` bytes at `ptr` stay allocated; they are the tensor a
            // DCP planner gave this read, which nothing else reads or writes
            // until the read returns (the planner commits it after).
            unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) }
        };
        read(dst)
    })
    .map_err(|e| errors::to_py(py, e))
}
