//! Strided-copy benchmarks: `t().contiguous()` and `copy_` of a transposed
//! 4096×4096 float32 tensor, a 3-D permute, the no-op `contiguous()`, and a
//! plain 64 MiB `memcpy` as the ceiling; then the loops the strided index
//! ([`stowage::layout::Offsets`]) drives: `contiguous()` of every other
//! element of a 256³ cube (the element loop, 65 536 outer steps of 128
//! elements) and a converting copy of a transposed 1024×1024 tensor (every
//! element through the iterator).
//!
//! Run with `cargo bench -p stowage --bench copy`; the PyTorch side is
//! `scripts/bench_copy_torch.py`, and `docs/performance.md` records the figures.
//! Throughput is bytes read plus bytes written (2 × 64 MiB per iteration), so
//! criterion's `thrpt` is directly comparable with the GB/s in the docs.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use stowage::{DType, Tensor};

const N: usize = 4096;
/// Bytes of one 4096×4096 float32 tensor (64 MiB).
const BYTES: usize = N * N * 4;

fn arange(shape: &[isize]) -> Tensor {
    let numel: isize = shape.iter().product();
    Tensor::arange(0.0, numel as f64, 1.0, DType::Float32)
        .unwrap()
        .view(shape)
        .unwrap()
}

/// Criterion settings for one ~10–40 ms operation: few, flat samples.
fn slow_group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(20)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Bytes(2 * BYTES as u64));
    g
}

fn copies(c: &mut Criterion) {
    let x = arange(&[N as isize, N as isize]);
    let xt = x.t().unwrap();

    let mut g = slow_group(c, "transpose_contiguous_4096");
    g.bench_function("stowage", |b| {
        b.iter(|| black_box(&x).t().unwrap().contiguous().unwrap())
    });
    g.finish();

    let dst = Tensor::zeros(&[N, N], DType::Float32).unwrap();
    let mut g = slow_group(c, "copy_transposed_view");
    g.bench_function("stowage", |b| {
        b.iter(|| {
            dst.copy_(black_box(&xt)).unwrap();
        })
    });
    g.finish();
    drop(dst);

    let cube = arange(&[256, 256, 256]);
    let mut g = slow_group(c, "permute_contiguous_256cubed");
    g.bench_function("stowage", |b| {
        b.iter(|| {
            black_box(&cube)
                .permute(&[2, 0, 1])
                .unwrap()
                .contiguous()
                .unwrap()
        })
    });
    g.finish();
    drop(cube);

    let src = vec![1u8; BYTES];
    let mut out = vec![0u8; BYTES];
    let mut g = slow_group(c, "memcpy_64MiB");
    g.bench_function("stowage", |b| {
        b.iter(|| out.copy_from_slice(black_box(&src)))
    });
    g.finish();
    black_box(&out);

    let cube = arange(&[256, 256, 256]);
    let stepped = cube.slice(2, None, None, 2).unwrap();
    let mut g = slow_group(c, "step2_contiguous_256cubed");
    g.throughput(Throughput::Bytes(BYTES as u64));
    g.bench_function("stowage", |b| {
        b.iter(|| black_box(&stepped).contiguous().unwrap())
    });
    g.finish();
    drop((cube, stepped));

    let small = arange(&[1024, 1024]).t().unwrap();
    let mut g = slow_group(c, "to_float64_transposed_1024");
    g.throughput(Throughput::Bytes(1024 * 1024 * (4 + 8)));
    g.bench_function("stowage", |b| {
        b.iter(|| black_box(&small).to_dtype(DType::Float64).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("contiguous_already");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("stowage", |b| {
        b.iter(|| black_box(&x).contiguous().unwrap())
    });
    g.finish();
}

criterion_group!(benches, copies);
criterion_main!(benches);
