//! Times the first write of fresh memory, as an eager load's storages get
//! it, after a pause: `fresh_memory [GIB] [PAUSE_MS ...]`.
//!
//! For each pause (default 0, 500, 1000, 2000 and 5000 ms), five times:
//! sleep for the pause, allocate a storage of GIB GiB (default 1) with
//! `UntypedStorage::new` (for large storages an anonymous mapping with
//! transparent huge pages requested, as a load's), write every byte, then
//! drop it. Prints one JSON line per pause with the five times in seconds.
//!
//! On a machine whose memory is the kernel's own, the pause changes nothing.
//! In a virtual machine that hands free memory back to its host (virtio
//! balloon free page reporting, as on Firecracker), memory that stayed free
//! for a while costs the host a fault per page when it is written again;
//! `docs/performance.md` ("Issue 23, item 9") has the figures.
//!
//! `cargo run --release --example fresh_memory -- 1 0 2000`.

use std::time::{Duration, Instant};

use stowage::UntypedStorage;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let gib: usize = args.next().map_or(Ok(1), |a| a.parse())?;
    let mut pauses: Vec<u64> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    if pauses.is_empty() {
        pauses = vec![0, 500, 1000, 2000, 5000];
    }
    let n = gib << 30;
    for pause in pauses {
        let mut times = Vec::new();
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(pause));
            let start = Instant::now();
            let storage = UntypedStorage::new(n)?;
            storage.bytes_mut()?.fill(1);
            times.push(start.elapsed().as_secs_f64());
            drop(std::hint::black_box(storage));
        }
        let times: Vec<String> = times.iter().map(|t| format!("{t:.3}")).collect();
        println!(
            "{{\"gib\": {gib}, \"pause_ms\": {pause}, \"seconds\": [{}]}}",
            times.join(", ")
        );
    }
    Ok(())
}
