//! Metadata cost of a checkpoint: a state dict of 100,000 tiny tensors (4
//! float32 each, 1.6 MB of tensor bytes in all), so that the pickle, not the
//! bytes, is what is timed.
//!
//! - `load_bytes`: [`stowage::checkpoint::load_bytes`] of the whole archive held
//!   in memory (zip directory, pickle machine, PyTorch meaning, 100,000 storages);
//! - `unpickle_data_pkl`: the generic pickle machine alone on the archive's
//!   `data.pkl`, with hooks that build nothing (no storages, no tensors);
//! - `save_to_writer`: [`stowage::checkpoint::save_to_writer`] of the loaded
//!   checkpoint into memory (pickler, zip records, CRCs).
//!
//! Dropping what a load returns is not timed (as in `stowage bench load`).
//! Run with `cargo bench -p stowage --bench pickle`; `docs/performance.md`
//! records the figures next to PyTorch's (`scripts/bench_checkpoint.py` times
//! `torch.load`/`torch.save` of such a file).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use stowage::checkpoint::{load_bytes, save_to_writer};
use stowage::Tensor;
use stowage::{Checkpoint, LoadOptions, SaveOptions};
use stowage_pickle::{unpickle, Graph, Hooks, Limits, PickleError, Value};
use stowage_zip::{ZipLimits, ZipReader};

/// Entries in the state dict.
const ENTRIES: usize = 100_000;

/// `model.layers.{i / 8}.{name}`, 4 float32 each, as a transformer's state dict names them.
fn state_dict() -> Checkpoint {
    const NAMES: [&str; 8] = [
        "attn.q_proj.weight",
        "attn.k_proj.weight",
        "attn.v_proj.weight",
        "attn.o_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
        "input_norm.weight",
        "post_norm.weight",
    ];
    Checkpoint::from_state_dict((0..ENTRIES).map(|i| {
        let t = Tensor::from_vec(vec![i as f32, 1.0, 2.0, 3.0], &[2, 2]).unwrap();
        (format!("model.layers.{}.{}", i / 8, NAMES[i % 8]), t)
    }))
}

/// Hooks that build nothing but the containers: a global is its name, a call of
/// `OrderedDict` an empty dict, every other call and persistent id `None`.
struct Inert;

impl Hooks for Inert {
    type Ext = ();
    type Error = PickleError;

    fn find_class(&mut self, _: &str, name: &str) -> Result<Value<()>, PickleError> {
        Ok(Value::str(name))
    }
    fn persistent_load(
        &mut self,
        _: &mut Graph<()>,
        _: Value<()>,
    ) -> Result<Value<()>, PickleError> {
        Ok(Value::None)
    }
    fn reduce(
        &mut self,
        graph: &mut Graph<()>,
        callable: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, PickleError> {
        Ok(match callable.as_str() {
            Some("OrderedDict") => Value::Node(graph.dict(Vec::new())),
            _ => Value::None,
        })
    }
    fn build(
        &mut self,
        _: &mut Graph<()>,
        obj: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, PickleError> {
        Ok(obj)
    }
    fn new_obj(
        &mut self,
        _: &mut Graph<()>,
        _: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, PickleError> {
        Ok(Value::None)
    }
}

fn bench(c: &mut Criterion) {
    let ckpt = state_dict();
    let archive = save_to_writer(Vec::new(), "archive", &ckpt, &SaveOptions::default()).unwrap();
    let zip = ZipReader::new(&archive[..], &ZipLimits::default()).unwrap();
    let pkl = zip.read_to_vec(zip.find("data.pkl").unwrap()).unwrap();
    drop(zip);
    eprintln!(
        "{ENTRIES} entries: archive {} bytes, data.pkl {} bytes",
        archive.len(),
        pkl.len()
    );
    let options = LoadOptions::default();
    let loaded = load_bytes(&archive, &options).unwrap();
    assert_eq!(loaded.tensors().unwrap().len(), ENTRIES);

    let mut g = c.benchmark_group("state_dict_100k");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(ENTRIES as u64));
    g.bench_function("load_bytes", |b| {
        b.iter_with_large_drop(|| load_bytes(black_box(&archive), &options).unwrap())
    });
    g.bench_function("unpickle_data_pkl", |b| {
        b.iter_with_large_drop(|| {
            // The loader's default limits.
            unpickle(black_box(&pkl), &mut Inert, &Limits::default()).unwrap()
        })
    });
    g.bench_function("save_to_writer", |b| {
        b.iter(|| {
            let out = Vec::with_capacity(archive.len());
            black_box(save_to_writer(out, "archive", &loaded, &SaveOptions::default()).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
