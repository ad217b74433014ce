//! PyTorch's storage model in a few steps: a tensor is a view of an untyped
//! storage; views share it, so writes show through; `set_` moves a tensor
//! onto another storage; saving keeps the sharing.
//!
//! ```sh
//! cargo run --example storage_walkthrough
//! ```

use stowage::{Checkpoint, DType, Tensor};

fn main() -> stowage::Result<()> {
    // torch.ones(3): 12 bytes, 0 0 128 63 three times.
    let t = Tensor::ones(&[3], DType::Float32)?;
    println!("storage bytes: {:?}", t.untyped_storage().tolist()?);

    // A view copies nothing: a write through it shows in the original.
    let m = Tensor::arange(0.0, 6.0, 1.0, DType::Float32)?.view(&[2, 3])?;
    let col = m.t()?.select(0, 1)?; // m[:, 1]
    col.fill_(-1.0)?;
    println!("{m}");
    assert!(col.shares_storage_with(&m));

    // set_: the tensor now views a zeroed copy of the storage.
    let copy = t.untyped_storage().deep_clone()?;
    copy.fill_(0)?;
    let mut t = t;
    t.set_(&copy, 0, &[3], &[1])?;
    println!("after set_: {t}");

    // Saving keeps sharing: both tensors come back on one storage.
    let ckpt = Checkpoint::from_state_dict([("m", m.clone()), ("col", col)]);
    let path = std::env::temp_dir().join("stowage-walkthrough.pt");
    stowage::save(&path, &ckpt)?;
    let back = stowage::load(&path)?;
    let sd = back.state_dict()?;
    println!(
        "reloaded: {} tensors on {} storage(s)",
        sd.len(),
        back.storages().len()
    );
    assert!(sd[0].1.shares_storage_with(&sd[1].1));
    Ok(())
}
