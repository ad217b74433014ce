//! Content digests on every core (`content::digest_all`, what `stowage
//! manifest`, `inspect --json` and a verified load compute) of 128 float32
//! tensors of 2 MiB in memory (256 MiB), beside two baselines in the same
//! run:
//!
//! - `sha2_one_at_a_time`: `sha2::Sha256::digest` of each tensor's bytes,
//!   a thread per core taking the next tensor as it finishes one (what
//!   `digest_all` did before it paired tensors);
//! - `memcpy`: a copy of the same bytes on every core, the memory's floor.
//!
//! With the x86-64 SHA extensions `digest_all` hashes two tensors at once
//! on each core (`content/sha256x2.rs`), and with AVX-512 sixteen where
//! that is faster (`content/sha256x16.rs`), so its rate over
//! `sha2_one_at_a_time` is what hashing several at once gains on this CPU.
//!
//! A second group saves the same tensors as a `.pt` to nowhere
//! (`checkpoint::save_to_writer` into `io::sink`), plain and with the
//! digests of what it writes (`convert --manifest`) hashed on one, two
//! and four threads, and on as many as `WrittenDigests::new` starts: what
//! the hashing threads add to a save.
//!
//! A third saves 20,000 tensors of 500 bytes (10 MB) the same two ways:
//! what the digests cost a tensor where the bytes are few.
//!
//! Run with `cargo bench -p stowage --bench digest`; `docs/performance.md`
//! records the figures.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use sha2::{Digest, Sha256};
use stowage::checkpoint::content::{self, WrittenDigests};
use stowage::checkpoint::TensorObject;
use stowage::{Checkpoint, SaveOptions, Tensor};

const TENSORS: usize = 128;
const FLOATS: usize = 512 * 1024;
const SMALL_TENSORS: usize = 20_000;
const SMALL_FLOATS: usize = 125;

/// Runs `work(i)` for i in 0..n on one thread per core, each taking the
/// next i as it finishes one.
fn on_every_core(n: usize, work: impl Fn(usize) + Sync) {
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                work(i);
            });
        }
    });
}

fn digests(c: &mut Criterion) {
    let objects: Vec<TensorObject> = (0..TENSORS)
        .map(|k| {
            let values: Vec<f32> = (0..FLOATS).map(|i| (i * 31 + k) as f32).collect();
            TensorObject::new(Tensor::from_vec(values, &[FLOATS]).unwrap())
        })
        .collect();
    let bytes: Vec<Vec<u8>> = objects
        .iter()
        .map(|o| o.tensor.untyped_storage().tolist().unwrap())
        .collect();
    let given: Vec<Option<&TensorObject>> = objects.iter().map(Some).collect();

    let mut g = c.benchmark_group("digest_256MiB_of_2MiB_tensors");
    g.sample_size(20)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Bytes((TENSORS * FLOATS * 4) as u64));
    g.bench_function("digest_all", |b| {
        b.iter(|| black_box(content::digest_all(&given, |_| ())))
    });
    g.bench_function("sha2_one_at_a_time", |b| {
        b.iter(|| {
            on_every_core(TENSORS, |i| {
                black_box(Sha256::digest(&bytes[i]));
            })
        })
    });
    let mut copies: Vec<Vec<u8>> = bytes.clone();
    let targets: Vec<std::sync::Mutex<&mut Vec<u8>>> =
        copies.iter_mut().map(std::sync::Mutex::new).collect();
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            on_every_core(TENSORS, |i| {
                let mut t = targets[i].lock().unwrap();
                t.copy_from_slice(&bytes[i]);
                black_box(&t[..]);
            })
        })
    });
    g.finish();

    let ckpt = Checkpoint::from_state_dict(
        objects
            .iter()
            .enumerate()
            .map(|(i, o)| (format!("t{i:03}"), o.tensor.clone())),
    );
    let mut g = c.benchmark_group("save_256MiB_of_2MiB_tensors");
    g.sample_size(20)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Bytes((TENSORS * FLOATS * 4) as u64));
    let save = |options: &SaveOptions| {
        stowage::checkpoint::save_to_writer(std::io::sink(), "archive", &ckpt, options).unwrap();
    };
    g.bench_function("plain", |b| b.iter(|| save(&SaveOptions::default())));
    let digests_on = |threads: Option<usize>| {
        let digests = threads.map_or_else(WrittenDigests::new, WrittenDigests::with_threads);
        save(&SaveOptions::default().with_digests(digests.clone()));
        black_box(digests.finish())
    };
    for threads in [1, 2, 4] {
        g.bench_function(format!("digests_on_{threads}_threads"), |b| {
            b.iter(|| digests_on(Some(threads)))
        });
    }
    g.bench_function("digests_on_default_threads", |b| {
        b.iter(|| digests_on(None))
    });
    g.finish();

    let small = Checkpoint::from_state_dict((0..SMALL_TENSORS).map(|k| {
        let values: Vec<f32> = (0..SMALL_FLOATS).map(|i| (i * 31 + k) as f32).collect();
        (
            format!("t{k:05}"),
            Tensor::from_vec(values, &[SMALL_FLOATS]).unwrap(),
        )
    }));
    let mut g = c.benchmark_group("save_20000_tensors_of_500_bytes");
    g.sample_size(20)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(SMALL_TENSORS as u64));
    let save = |options: &SaveOptions| {
        stowage::checkpoint::save_to_writer(std::io::sink(), "archive", &small, options).unwrap();
    };
    g.bench_function("plain", |b| b.iter(|| save(&SaveOptions::default())));
    g.bench_function("digests_on_default_threads", |b| {
        b.iter(|| {
            let digests = WrittenDigests::new();
            save(&SaveOptions::default().with_digests(digests.clone()));
            black_box(digests.finish())
        })
    });
    g.finish();
}

criterion_group!(benches, digests);
criterion_main!(benches);
