//! Memory-map a large checkpoint: the load reads only the archive's
//! directory and pickle; each tensor's bytes are pages of the file, read when
//! touched (`torch.load(f, mmap=True)`).
//!
//! ```sh
//! cargo run --release --example mmap_load [-- big.pt]
//! ```

use std::path::PathBuf;
use std::time::Instant;

fn main() -> stowage::Result<()> {
    let path = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/state_dict.pt")
        });
    let start = Instant::now();
    // SAFETY: nothing truncates or writes the file while the checkpoint lives.
    let ckpt = unsafe { stowage::load_mmap(&path, &Default::default()) }?;
    let tensors = ckpt.tensors()?;
    let bytes: usize = ckpt.storages().iter().map(|s| s.storage.nbytes()).sum();
    println!(
        "{} tensors, {bytes} bytes mapped in {:?}",
        tensors.len(),
        start.elapsed()
    );
    // Touch one tensor: only its pages are read.
    if let Some((path, t)) = tensors
        .iter()
        .find(|(_, t)| t.tensor.dtype() == stowage::DType::Float32)
    {
        let sum: f32 = t.tensor.to_vec::<f32>()?.iter().sum();
        println!("sum of {} = {sum}", stowage::checkpoint::dotted(path));
    }
    Ok(())
}
