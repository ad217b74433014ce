//! Times N eager loads of FILE in this one process, the first included:
//! `load_times FILE [N] [--huge-pages]`. Prints one JSON line,
//! `{"huge_pages": false, "seconds": [first, second, ...]}`, each load timed
//! from the call until every storage is read, its result dropped untimed.
//!
//! The first load of a process is what a command or a training job pays;
//! `scripts/bench_huge_pages.py` runs this in fresh processes, with and
//! without `--huge-pages` (`LoadOptions::with_huge_pages`), beside the
//! floors it measures itself.
//!
//! `cargo run --release --example load_times -- model.pt 3 --huge-pages`.

use std::time::Instant;

use stowage::LoadOptions;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let huge = args.iter().any(|a| a == "--huge-pages");
    let mut rest = args.iter().filter(|a| *a != "--huge-pages");
    let file = rest
        .next()
        .ok_or("usage: load_times FILE [N] [--huge-pages]")?;
    let n: usize = rest.next().map_or(Ok(3), |a| a.parse())?;
    let options = LoadOptions::default().with_huge_pages(huge);
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let ckpt = stowage::load_with(file, &options)?;
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
