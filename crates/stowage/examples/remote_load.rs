//! Loads a checkpoint by URL and prints what it cost, as one JSON line:
//! - `remote_load URL TENSOR`: lazily, then reads the tensor named `TENSOR`
//!   (dotted path): the requests and bytes of the load and of the read;
//! - `remote_load URL`: eagerly (every storage), with the time it took.
//!
//! `cargo run --release --example remote_load --features remote -- URL [TENSOR]`.
//! The S3 client reads `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, credentials …
//! from the environment; `STOWAGE_REMOTE_CONCURRENCY` bounds the requests in
//! flight. `scripts/remote-bench.sh` runs it for `docs/performance.md`.

use std::time::Instant;

use stowage::checkpoint::dotted;
use stowage::io::remote::totals;
use stowage::{load_with, LoadMode, LoadOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let Some(url) = args.next() else {
        eprintln!("usage: remote_load URL [TENSOR]");
        std::process::exit(2);
    };
    let name = args.next();
    let options = LoadOptions::from_env().with_mode(match name {
        Some(_) => LoadMode::Lazy,
        None => LoadMode::Eager,
    });
    let start = Instant::now();
    let ckpt = load_with(&url, &options)?;
    let seconds = start.elapsed().as_secs_f64();
    let loaded = totals();
    let Some(name) = name else {
        let bytes: usize = ckpt.storages().iter().map(|s| s.storage.nbytes()).sum();
        println!(
            "{{\"mode\": \"eager\", \"storage_bytes\": {bytes}, \"seconds\": {seconds:.3}, \"requests\": {}, \"bytes_received\": {}}}",
            loaded.requests, loaded.bytes_received
        );
        return Ok(());
    };
    let tensors = ckpt.tensors()?;
    let Some((_, t)) = tensors.iter().find(|(p, _)| dotted(p) == name) else {
        eprintln!("no tensor named {name}");
        std::process::exit(2);
    };
    let bytes = t.tensor.untyped_storage().bytes()?.len();
    let after = totals();
    println!(
        "{{\"mode\": \"lazy\", \"tensor\": {name:?}, \"tensor_bytes\": {bytes}, \"load\": {{\"requests\": {}, \"bytes_received\": {}}}, \"read\": {{\"requests\": {}, \"bytes_received\": {}}}}}",
        loaded.requests,
        loaded.bytes_received,
        after.requests - loaded.requests,
        after.bytes_received - loaded.bytes_received,
    );
    Ok(())
}
