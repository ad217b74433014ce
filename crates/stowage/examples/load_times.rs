//! Times N eager loads of FILE in this one process, the first included:
//! `load_times FILE [N] [--huge-pages] [--expect MANIFEST]`. Prints one JSON
//! line, `{"huge_pages": false, "seconds": [first, second, ...]}`, each load
//! timed from the call until every storage is read (and, with `--expect`,
//! every tensor checked against the manifest `stowage manifest` wrote), its
//! result dropped untimed.
//!
//! The first load of a process is what a command or a training job pays;
//! `scripts/bench_huge_pages.py` runs this in fresh processes, with and
//! without `--huge-pages` (`LoadOptions::with_huge_pages`), beside the
//! floors it measures itself.
//!
//! `cargo run --release --example load_times -- model.pt 3 --huge-pages`.

use std::time::Instant;

use stowage::checkpoint::content::Expected;
use stowage::LoadOptions;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: load_times FILE [N] [--huge-pages] [--expect MANIFEST]";
    let mut args = std::env::args().skip(1);
    let (mut huge, mut expect, mut rest) = (false, None, Vec::new());
    while let Some(a) = args.next() {
        match a.as_str() {
            "--huge-pages" => huge = true,
            "--expect" => expect = Some(args.next().ok_or(usage)?),
            _ => rest.push(a),
        }
    }
    let mut rest = rest.into_iter();
    let file = rest.next().ok_or(usage)?;
    let n: usize = rest.next().map_or(Ok(3), |a| a.parse())?;
    let mut options = LoadOptions::default().with_huge_pages(huge);
    if let Some(manifest) = expect {
        let text = std::fs::read_to_string(manifest)?;
        options = options.with_expected(Expected::from_manifest_json(&text)?);
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let ckpt = stowage::load_with(&file, &options)?;
        times.push(start.elapsed().as_secs_f64());
        drop(std::hint::black_box(ckpt));
    }
    let times: Vec<String> = times.iter().map(|t| format!("{t:.4}")).collect();
    println!(
        "{{\"huge_pages\": {huge}, \"seconds\": [{}]}}",
        times.join(", ")
    );
    Ok(())
}
