//! Read the non-tensor half of a training checkpoint: the epoch, the
//! configuration, the optimizer's hyper-parameters, and the model's state
//! dict by name.
//!
//! ```sh
//! cargo run --example read_values
//! ```

fn main() -> stowage::Result<()> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/training_checkpoint.pt");
    let ckpt = stowage::load(path)?;

    let epoch = ckpt.get("epoch")?.as_i64()?; // ckpt["epoch"]
    let lr = ckpt.get("config.lr")?.as_f64()?; // ckpt["config"]["lr"]
    let name = ckpt.get("config.name")?.as_str()?;
    println!("epoch {epoch}, lr {lr}, name {name:?}");

    for (key, value) in ckpt.get("config")?.as_dict()? {
        // Keys are usually strings; Python allows others (an int here).
        let key = match key.as_str() {
            Ok(s) => format!("{s:?}"),
            Err(_) => key.as_i64().map_or("?".into(), |i| i.to_string()),
        };
        println!("  config[{key}] is a {}", value.kind().name());
    }
    let betas: Vec<f64> = ckpt
        .get("optimizer.param_groups.0.betas")?
        .as_list()?
        .map(|b| b.as_f64())
        .collect::<stowage::Result<_>>()?;
    println!("betas {betas:?}");

    // The tensors under "model", named relative to it (a state dict).
    for (name, t) in ckpt.get("model")?.state_dict()? {
        println!("model.{name}: {:?} {}", t.shape(), t.dtype().name());
    }
    Ok(())
}
