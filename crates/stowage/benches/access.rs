//! Typed-access benchmarks on 64 MiB of float32 (a 4096×4096 tensor):
//!
//! - `to_vec_f32_contiguous`: `memcpy` (`<[u8]>::to_vec` of the storage bytes,
//!   the baseline), a copy into an existing, already faulted-in buffer (the
//!   bandwidth alone), `to_vec::<f32>()`, and `read::<f32>()` then `to_vec`
//!   of the slice;
//! - `to_vec_f16_to_f32`: `to_vec::<f32>()` of a 4096×4096 float16 tensor (32
//!   MiB read, 64 MiB written), beside its contiguous `memcpy` of the result size;
//! - `to_vec_f32_transposed`: `to_vec::<f32>()` of the transposed tensor (the
//!   strided gather) beside `t().contiguous()` (the transposed-copy kernel).
//!
//! - `to_vec_f32_scalar_path`: the path `to_vec` took before, a `Scalar` per
//!   element (`scalars()` then `from_scalar`), for comparison.
//!
//! Every case but `copy_into_existing` allocates its 64 MiB result afresh,
//! as the baseline does.
//! Run with `cargo bench -p stowage --bench access`; `docs/performance.md`
//! records the figures.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use stowage::{DType, Element, Tensor};

const N: usize = 4096;
/// Bytes of one 4096×4096 float32 tensor (64 MiB).
const BYTES: usize = N * N * 4;

fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(20)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Bytes(BYTES as u64));
    g
}

fn access(c: &mut Criterion) {
    let x = Tensor::arange(0.0, (N * N) as f64, 1.0, DType::Float32)
        .unwrap()
        .view(&[N as isize, N as isize])
        .unwrap();

    let mut g = group(c, "to_vec_f32_contiguous");
    g.bench_function("memcpy", |b| {
        let bytes = x.untyped_storage().bytes().unwrap();
        b.iter(|| black_box(&*bytes).to_vec())
    });
    g.bench_function("copy_into_existing", |b| {
        let bytes = x.untyped_storage().bytes().unwrap();
        let mut out = vec![0u8; BYTES];
        b.iter(|| out.copy_from_slice(black_box(&*bytes)))
    });
    g.bench_function("to_vec", |b| {
        b.iter(|| black_box(&x).to_vec::<f32>().unwrap())
    });
    g.bench_function("read_to_vec", |b| {
        b.iter(|| black_box(&x).read::<f32>().unwrap().to_vec())
    });
    g.finish();

    // The element-by-element path `to_vec` used to take: a `Scalar` per element.
    let mut g = group(c, "to_vec_f32_scalar_path");
    g.sample_size(10);
    g.bench_function("scalars", |b| {
        b.iter(|| {
            let s = black_box(&x).scalars().unwrap();
            s.into_iter().map(f32::from_scalar).collect::<Vec<f32>>()
        })
    });
    g.finish();

    let h = x.to_dtype(DType::Float16).unwrap();
    let mut g = group(c, "to_vec_f16_to_f32");
    g.bench_function("memcpy", |b| {
        let bytes = x.untyped_storage().bytes().unwrap();
        b.iter(|| black_box(&*bytes).to_vec())
    });
    g.bench_function("to_vec", |b| {
        b.iter(|| black_box(&h).to_vec::<f32>().unwrap())
    });
    g.finish();
    drop(h);

    let xt = x.t().unwrap();
    let mut g = group(c, "to_vec_f32_transposed");
    g.bench_function("contiguous", |b| {
        b.iter(|| black_box(&xt).contiguous().unwrap())
    });
    g.bench_function("to_vec", |b| {
        b.iter(|| black_box(&xt).to_vec::<f32>().unwrap())
    });
    g.finish();
}

criterion_group!(benches, access);
criterion_main!(benches);
