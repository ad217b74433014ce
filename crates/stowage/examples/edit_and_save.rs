//! Edit a weight in place and save the checkpoint back, keeping everything
//! else (values, optimizer state, storage sharing) as it was; PyTorch loads
//! the result with `torch.load(f, weights_only=True)`.
//!
//! ```sh
//! cargo run --example edit_and_save
//! ```

fn main() -> stowage::Result<()> {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let ckpt = stowage::load(fixtures.join("training_checkpoint.pt"))?;

    // Scale the bias by 10, through a typed slice borrowed from its storage.
    let bias = ckpt.get("model.bias")?.as_tensor()?.tensor.clone();
    for v in bias.write::<f32>()?.iter_mut() {
        *v *= 10.0;
    }

    let out = std::env::temp_dir().join("stowage-example-edited.pt");
    stowage::save(&out, &ckpt)?; // crash-safe: a temporary file renamed into place

    let back = stowage::load(&out)?;
    let saved = back
        .get("model.bias")?
        .as_tensor()?
        .tensor
        .to_vec::<f32>()?;
    assert_eq!(saved, bias.to_vec::<f32>()?);
    println!(
        "bias now {saved:?}; epoch still {}",
        back.get("epoch")?.as_i64()?
    );
    Ok(())
}
