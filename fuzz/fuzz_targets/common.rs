//! Shared by the `load`-style targets: load the bytes, then walk every tensor
//! and materialise its logical bytes (conj/neg resolved, made contiguous) so
//! the data paths run too. Tensors over 1 MiB are skipped to keep each
//! execution fast.

use stowage::checkpoint::load_bytes;
use stowage::{Checkpoint, LoadOptions};

const MAX_TENSOR_BYTES: usize = 1 << 20;

#[allow(dead_code)] // `load_modes` loads through a file and calls `walk` itself
pub fn load_and_walk(data: &[u8]) {
    if let Ok(ckpt) = load_bytes(data, &LoadOptions::default()) {
        walk(&ckpt);
    }
}

/// Materialises every tensor of a loaded checkpoint (see the module docs).
pub fn walk(ckpt: &Checkpoint) {
    let Ok(tensors) = ckpt.tensors() else {
        return;
    };
    for (_path, obj) in tensors {
        let t = &obj.tensor;
        if t.is_meta() || t.numel().saturating_mul(t.element_size()) > MAX_TENSOR_BYTES {
            continue;
        }
        let Ok(r) = obj.resolved() else { continue };
        let Ok(c) = r.contiguous() else { continue };
        let Ok(bytes) = c.untyped_storage().bytes() else {
            continue;
        };
        // An empty tensor may carry any storage offset (PyTorch allows it
        // too): it addresses no bytes, so only non-empty ones are checked.
        if c.numel() > 0 {
            let start = c.storage_offset() * c.element_size();
            let logical = bytes.get(start..start + c.nbytes());
            assert!(logical.is_some(), "contiguous tensor outside its storage");
        }
        let _ = ckpt
            .storages()
            .iter()
            .find(|s| s.storage.is_same(t.untyped_storage()));
    }
    let _ = ckpt.state_dict();
}
