//! Load a PyTorch checkpoint, list its tensors, and read a weight.
//!
//! ```sh
//! cargo run --example load_and_read [-- path/to/pytorch_model.bin]
//! ```
//! Without an argument it reads `tests/fixtures/training_checkpoint.pt`,
//! written by real PyTorch: `{"model": sd, "optimizer": …, "epoch": 3, "config": {…}}`.

use std::path::PathBuf;

fn main() -> stowage::Result<()> {
    let path = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/training_checkpoint.pt")
        });
    // Any format: torch zip, the legacy format, safetensors, a sharded set's
    // folder or index, a distributed checkpoint folder. Nothing in the file runs.
    let ckpt = stowage::load(&path)?;
    for (path, t) in ckpt.tensors()? {
        let t = &t.tensor;
        println!(
            "{:<40} {:<9} {:?}",
            stowage::checkpoint::dotted(&path),
            t.dtype().name(),
            t.shape()
        );
    }
    // A weight as a typed slice, borrowed from the storage (no copy).
    if let Ok(weight) = ckpt.get("model.weight") {
        let weight = &weight.as_tensor()?.tensor;
        let values = weight.read::<f32>()?;
        println!(
            "model.weight[0][..4] = {:?}",
            &values[..4.min(values.len())]
        );
    }
    Ok(())
}
