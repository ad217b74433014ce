//! Convert a `pytorch_model.bin` (or any checkpoint) to safetensors, saying
//! which tensors were tied (one storage, several names: safetensors stores a
//! copy for each) and which non-tensor values a safetensors file cannot hold.
//!
//! ```sh
//! cargo run --example convert_to_safetensors [-- IN OUT.safetensors]
//! ```

use std::collections::HashMap;
use std::path::PathBuf;

fn main() -> stowage::Result<()> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let input = args
        .next()
        .unwrap_or_else(|| fixtures.join("training_checkpoint.pt"));
    let output = args
        .next()
        .unwrap_or_else(|| std::env::temp_dir().join("stowage-example.safetensors"));

    // Lazy: each storage is read when the writer reaches it, and not kept.
    let options = stowage::LoadOptions::default().with_mode(stowage::LoadMode::Lazy);
    let ckpt = stowage::load_with(&input, &options)?;

    let mut by_storage: HashMap<usize, Vec<String>> = HashMap::new();
    for (path, t) in ckpt.tensors()? {
        let id = t.tensor.untyped_storage().id();
        by_storage
            .entry(id)
            .or_default()
            .push(stowage::checkpoint::dotted(&path));
    }
    for names in by_storage.values().filter(|n| n.len() > 1) {
        println!("tied (written as copies): {}", names.join(", "));
    }
    for leaf in ckpt.root_value().leaves()? {
        println!(
            "not a tensor, not written: {}",
            stowage::checkpoint::dotted(leaf.path())
        );
    }

    stowage::checkpoint::safetensors::save(&output, &ckpt)?;
    let back = stowage::load(&output)?;
    println!(
        "wrote {} tensors to {}",
        back.tensors()?.len(),
        output.display()
    );
    Ok(())
}
