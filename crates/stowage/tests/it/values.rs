//! Non-tensor values, first-class: lookups by path in a training checkpoint
//! that PyTorch wrote (`training_checkpoint.pt`, `scripts/make_fixtures.py`),
//! the leaf walk against what Python sees in it
//! (`training_checkpoint.values.json`), and windowed reads of lazily loaded
//! storages.

use crate::common::{fixture, fixtures_dir, load_fixture, path_json};
use serde_json::Value as J;
use stowage::checkpoint::{PathKey, ValueKind};
use stowage::LoadMode;
use stowage::LoadOptions;
use stowage::{CheckpointError, StorageError};
use stowage::{DType, Error};

#[test]
fn a_training_checkpoint_reads_through_get() {
    let ckpt = load_fixture("training_checkpoint");
    assert_eq!(ckpt.get("epoch").unwrap().as_i64().unwrap(), 3);
    assert_eq!(ckpt.get("config.lr").unwrap().as_f64().unwrap(), 1e-3);
    assert_eq!(ckpt.get("config.name").unwrap().as_str().unwrap(), "gpt");
    let betas: Vec<f64> = ckpt
        .get("config.betas")
        .unwrap()
        .as_list()
        .unwrap()
        .map(|b| b.as_f64().unwrap())
        .collect();
    assert_eq!(betas, [0.9, 0.999]);
    assert_eq!(ckpt.get("config.betas").unwrap().kind(), ValueKind::Tuple);
    assert!(!ckpt.get("config.amp").unwrap().as_bool().unwrap());
    assert_eq!(ckpt.get("config.seed").unwrap().kind(), ValueKind::None);
    assert_eq!(
        ckpt.get("config.dtype").unwrap().as_dtype().unwrap(),
        DType::BFloat16
    );
    assert_eq!(
        ckpt.get("config.device").unwrap().as_device().unwrap(),
        stowage::Device::CPU
    );
    assert_eq!(ckpt.get("config.shape").unwrap().as_size().unwrap(), [4, 3]);
    assert_eq!(
        ckpt.get("config.big").unwrap().as_i64().unwrap(),
        (1i64 << 60) + 1
    );
    let z = ckpt.get("config.z").unwrap().as_complex().unwrap();
    assert_eq!((z.re, z.im), (1.5, -2.0));
    assert_eq!(
        ckpt.get("config.blob").unwrap().as_bytes().unwrap(),
        b"\x00\xffab"
    );
    assert!(ckpt
        .get("config.undefined")
        .unwrap()
        .as_f64()
        .unwrap()
        .is_nan());
    // An integer dict key, by dotted path and by keys.
    assert_eq!(ckpt.get("config.7").unwrap().as_str().unwrap(), "int key");
    let by_keys = ckpt
        .root_value()
        .get_path(&[PathKey::Key("config".into()), PathKey::Index(7)])
        .unwrap();
    assert_eq!(by_keys.as_str().unwrap(), "int key");
    // Through the optimizer: int-keyed state, a list of param groups.
    assert_eq!(
        ckpt.get("optimizer.param_groups.0.lr")
            .unwrap()
            .as_f64()
            .unwrap(),
        1e-3
    );
    let step = ckpt
        .get("optimizer.state.0.step")
        .unwrap()
        .as_tensor()
        .unwrap();
    assert_eq!(step.tensor.shape(), &[] as &[usize]);
    let params: Vec<i64> = ckpt
        .get("optimizer.param_groups.0.params")
        .unwrap()
        .as_list()
        .unwrap()
        .map(|p| p.as_i64().unwrap())
        .collect();
    assert_eq!(params, [0, 1]);
    // The model's state dict, named relative to "model".
    let sd = ckpt.get("model").unwrap().state_dict().unwrap();
    let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["weight", "bias"]);
    assert_eq!(sd[0].1.shape(), &[3, 4]);
    let weight = ckpt.get("model.weight").unwrap().as_tensor().unwrap();
    assert!(weight
        .tensor
        .untyped_storage()
        .is_same(sd[0].1.untyped_storage()));
    // The dict as handles.
    let keys: Vec<String> = ckpt
        .root_value()
        .as_dict()
        .unwrap()
        .map(|(k, _)| k.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys, ["model", "optimizer", "epoch", "config"]);
}

#[test]
fn lookups_fail_with_typed_errors_naming_the_path() {
    let ckpt = load_fixture("training_checkpoint");
    match ckpt.get("config.nope") {
        Err(Error::Checkpoint(CheckpointError::ValueNotFound { path })) => {
            assert_eq!(path, "config.nope")
        }
        other => panic!("{other:?}"),
    }
    match ckpt.get("optimizer.param_groups.5.lr") {
        Err(Error::Checkpoint(CheckpointError::ValueNotFound { path })) => {
            assert_eq!(path, "optimizer.param_groups.5.lr")
        }
        other => panic!("{other:?}"),
    }
    match ckpt.get("epoch").unwrap().as_str() {
        Err(Error::Checkpoint(CheckpointError::ValueType {
            path,
            expected,
            found,
        })) => assert_eq!((path.as_str(), expected, found), ("epoch", "str", "int")),
        other => panic!("{other:?}"),
    }
    let e = ckpt.get("config.huge").unwrap().as_i64().unwrap_err();
    assert!(
        matches!(&e, Error::Checkpoint(CheckpointError::ValueType { path, found: "int", .. }) if path == "config.huge"),
        "{e:?}"
    );
    assert!(ckpt.get("config").unwrap().as_tensor().is_err());
    assert!(ckpt.get("epoch.x").is_err(), "an int has no keys");
    assert!(ckpt.get("model.weight.0").is_err(), "a tensor has no keys");
    let e = ckpt.get("config.lr").unwrap().as_dict().err().unwrap();
    assert_eq!(
        e.to_string(),
        "value at \"config.lr\": expected dict, found float"
    );
}

#[test]
fn the_leaf_walk_lists_what_python_sees() {
    let ckpt = load_fixture("training_checkpoint");
    let text = std::fs::read_to_string(fixtures_dir().join("training_checkpoint.values.json"))
        .expect("values.json");
    let J::Array(expected) = serde_json::from_str::<J>(&text).unwrap() else {
        panic!("not a list")
    };
    let found: Vec<(J, &str)> = ckpt
        .root_value()
        .leaves()
        .unwrap()
        .iter()
        .map(|v| (path_json(v.path()), v.kind().name()))
        .collect();
    let expected: Vec<(J, &str)> = expected
        .iter()
        .map(|e| (e["path"].clone(), e["type"].as_str().unwrap()))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn lazy_storages_read_in_windows_without_loading() {
    let eager = load_fixture("training_checkpoint");
    let options = LoadOptions::default().with_mode(LoadMode::Lazy);
    let lazy = stowage::load_with(fixture("training_checkpoint"), &options).unwrap();
    let s = lazy
        .get("model.weight")
        .unwrap()
        .as_tensor()
        .unwrap()
        .tensor
        .untyped_storage()
        .clone();
    let want = eager
        .get("model.weight")
        .unwrap()
        .as_tensor()
        .unwrap()
        .tensor
        .untyped_storage()
        .bytes()
        .unwrap()
        .to_vec();
    assert!(!s.is_loaded());
    let mut got = vec![0u8; want.len()];
    for (i, chunk) in got.chunks_mut(5).enumerate() {
        s.read_at(i * 5, chunk).unwrap();
    }
    assert_eq!(got, want);
    assert!(!s.is_loaded(), "windowed reads keep nothing");
    let mut past = [0u8; 4];
    assert!(matches!(
        s.read_at(want.len() - 2, &mut past),
        Err(Error::Storage(StorageError::StorageRange { .. }))
    ));
    // A loaded storage copies from its bytes.
    let e = eager
        .get("model.weight")
        .unwrap()
        .as_tensor()
        .unwrap()
        .tensor
        .untyped_storage()
        .clone();
    let mut head = [0u8; 8];
    e.read_at(4, &mut head).unwrap();
    assert_eq!(head, want[4..12]);
}

#[test]
fn lazy_checkpoints_save_window_by_window_and_report_progress() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use stowage::checkpoint::Progress;
    use stowage::SaveOptions;
    let options = LoadOptions::default().with_mode(LoadMode::Lazy);
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for name in ["training_checkpoint", "views", "nested"] {
        let eager = load_fixture(name);
        let lazy = stowage::load_with(fixture(name), &options).unwrap();
        let done = Arc::new(AtomicU64::new(0));
        let counter = done.clone();
        let save = SaveOptions::default()
            .with_progress(Progress::new(move |n| {
                counter.fetch_add(n, Ordering::Relaxed);
            }))
            .with_sync(false);
        let (a, b) = (dir_a.path().join("c.pt"), dir_b.path().join("c.pt"));
        stowage::save_with(&a, &lazy, &save).unwrap();
        stowage::save_with(&b, &eager, &SaveOptions::default()).unwrap();
        assert!(
            std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
            "{name}"
        );
        let total: u64 = eager
            .storages()
            .iter()
            .map(|s| s.storage.nbytes() as u64)
            .sum();
        assert_eq!(done.load(Ordering::Relaxed), total, "{name}");
        assert!(
            lazy.storages().iter().all(|s| !s.storage.is_loaded()),
            "{name}: saving read storages into memory"
        );
        let (a, b) = (
            dir_a.path().join("c.safetensors"),
            dir_b.path().join("c.safetensors"),
        );
        let st = stowage::checkpoint::safetensors::save_with(&a, &lazy, &save);
        let want = stowage::checkpoint::safetensors::save(&b, &eager);
        assert_eq!(st.is_ok(), want.is_ok(), "{name}");
        if st.is_ok() {
            assert!(
                std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
                "{name}"
            );
            // Contiguous tensors are written from the file; views that are not
            // (in `views`) are copied contiguous first, which reads their storage.
            if name == "training_checkpoint" {
                assert!(
                    lazy.storages().iter().all(|s| !s.storage.is_loaded()),
                    "{name}: the safetensors save read storages into memory"
                );
            }
        }
    }
}

#[test]
fn deflated_records_read_in_windows() {
    let eager = load_fixture("deflated_records");
    let options = LoadOptions::default().with_mode(LoadMode::Lazy);
    let lazy = stowage::load_with(fixture("deflated_records"), &options).unwrap();
    for name in ["ramp", "steps"] {
        let storage = |c: &stowage::Checkpoint| {
            c.get(name)
                .unwrap()
                .as_tensor()
                .unwrap()
                .tensor
                .untyped_storage()
                .clone()
        };
        let want = storage(&eager).bytes().unwrap().to_vec();
        let s = storage(&lazy);
        let mut got = vec![0u8; want.len()];
        for (i, chunk) in got.chunks_mut(1000).enumerate() {
            s.read_at(i * 1000, chunk).unwrap();
        }
        assert!(got == want, "{name}");
        assert!(!s.is_loaded(), "{name}");
        // Out of order too.
        let mut tail = vec![0u8; 24];
        s.read_at(want.len() - 24, &mut tail).unwrap();
        s.read_at(8, &mut got[..16]).unwrap();
        assert_eq!(tail, want[want.len() - 24..]);
        assert_eq!(got[..16], want[8..24]);
    }
}

/// `collections.Counter` as `torch.load(weights_only=True)` reads it (issue
/// 26, item 10): saved by real PyTorch, a mapping copied and an iterable
/// counted, equal to what torch gives back.
#[test]
fn counters_read_as_torch_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("counter.pt");
    let script = r#"
import collections, json, sys, torch
c = {"counts": collections.Counter("abca"), "given": collections.Counter({"x": 3, "y": -1}),
     "w": torch.ones(2)}
torch.save(c, sys.argv[1])
back = torch.load(sys.argv[1], weights_only=True)
print(json.dumps({k: dict(v) for k, v in back.items() if k != "w"}))
"#;
    let Some(out) = crate::common::run_torch_script(script, &[path.as_os_str()]) else {
        return;
    };
    let torch: J = serde_json::from_slice(&out).unwrap();
    let ckpt = stowage::load(&path).unwrap();
    for name in ["counts", "given"] {
        let mine: serde_json::Map<String, J> = ckpt
            .get(name)
            .unwrap()
            .as_dict()
            .unwrap()
            .map(|(k, v)| (k.as_str().unwrap().to_owned(), J::from(v.as_i64().unwrap())))
            .collect();
        assert_eq!(J::Object(mine), torch[name], "{name}");
    }
}

/// The weights of an `nn.Module` saved whole (issue 26, item 15): exactly
/// the names, order and tensors `model.state_dict()` gives in PyTorch
/// (parameters, persistent buffers, children; a non-persistent buffer and a
/// `None` child left out, tied weights under both names).
#[test]
fn a_whole_module_reads_as_its_state_dict() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.pt");
    let script = r#"
import json, sys, torch, torch.nn as nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.fc2 = nn.Linear(4, 4)
        self.fc2.weight = self.fc1.weight if False else self.fc2.weight
        self.head = nn.Sequential(nn.Linear(4, 2), nn.ReLU())
        self.tied = self.head[0]
        self.gone = None
        self.register_buffer("scale", torch.arange(2.0))
        self.register_buffer("tmp", torch.zeros(3), persistent=False)
        self.register_parameter("unused", None)
m = Net()
torch.save(m, sys.argv[1])
print(json.dumps([[k, v.flatten().double().tolist()] for k, v in m.state_dict().items()]))
"#;
    let Some(out) = crate::common::run_torch_script(script, &[path.as_os_str()]) else {
        return;
    };
    let torch: Vec<(String, Vec<f64>)> = serde_json::from_slice(&out).unwrap();
    let ckpt = stowage::load_with(&path, &LoadOptions::default().with_inert(true)).unwrap();
    let mine: Vec<(String, Vec<f64>)> = ckpt
        .root_value()
        .module_state_dict()
        .unwrap()
        .into_iter()
        .map(|(k, t)| {
            let t = t.to_dtype(DType::Float64).unwrap();
            (k, t.to_vec::<f64>().unwrap())
        })
        .collect();
    // As f32: serde_json's parse of the shortest decimal may miss the last bit.
    let f32s = |v: Vec<(String, Vec<f64>)>| -> Vec<(String, Vec<f32>)> {
        v.into_iter()
            .map(|(k, x)| (k, x.into_iter().map(|x| x as f32).collect()))
            .collect()
    };
    assert_eq!(f32s(mine), f32s(torch));
    // Anything else is refused, naming what it found.
    let e = stowage::load(crate::common::fixture("simple"))
        .unwrap()
        .root_value()
        .module_state_dict()
        .unwrap_err();
    assert!(
        matches!(e, Error::Checkpoint(CheckpointError::ValueType { .. })),
        "{e}"
    );
}

/// A `collections.Counter` built with the builder is written as one
/// (`collections.Counter`, which PyTorch's weights_only loader allows) and
/// read back as one; a conversion keeps it (issue 40, item 5).
#[test]
fn a_counter_is_written_as_a_counter() {
    use stowage::checkpoint::scan::{scan_bytes, Verdict};
    use stowage::checkpoint::{save_to_writer, PyValue};
    let counts = PyValue::Counter(vec![("a".into(), 3.into()), ("b".into(), 1.into())]);
    let ckpt = stowage::Checkpoint::from_value(PyValue::dict([("vocab", counts)])).unwrap();
    let bytes = save_to_writer(Vec::new(), "archive", &ckpt, &Default::default()).unwrap();
    let scan = scan_bytes(&bytes, &LoadOptions::default());
    let counter = scan
        .globals
        .iter()
        .find(|g| (g.module.as_str(), g.name.as_str()) == ("collections", "Counter"))
        .expect("the pickle names collections.Counter");
    assert_eq!(counter.verdict, Verdict::Allowed);
    let back = stowage::checkpoint::load_bytes(&bytes, &LoadOptions::default()).unwrap();
    let vocab = back.get("vocab").unwrap();
    assert_eq!(vocab.container_class(), Some("collections.Counter"));
    assert_eq!(vocab.get("a").unwrap().as_i64().unwrap(), 3);
    // Written again from what was read: still a Counter.
    let again = save_to_writer(Vec::new(), "archive", &back, &Default::default()).unwrap();
    let again = stowage::checkpoint::load_bytes(&again, &LoadOptions::default()).unwrap();
    assert_eq!(
        again.get("vocab").unwrap().container_class(),
        Some("collections.Counter")
    );
}

/// A tensor and a parameter given Python attributes with the builder
/// (`PyValue::WithState`) are written as `torch.save` writes them
/// (`_rebuild_from_type_v2`, `_rebuild_parameter_with_state`) and read back
/// with them; the Python package's `stowage.save` builds them so.
#[test]
fn a_tensors_attributes_are_written_and_read_back() {
    use stowage::checkpoint::{save_to_writer, PyValue, TensorObject};
    let attrs = |k: &str, v: PyValue| PyValue::dict([(k, v)]);
    let tensor = PyValue::Tensor(Box::new(TensorObject::new(
        stowage::Tensor::from_slice(&[1.0f32, 2.0]).unwrap(),
    )));
    let mut param = TensorObject::new(stowage::Tensor::from_slice(&[3i64]).unwrap());
    param.parameter = true;
    let ckpt = stowage::Checkpoint::from_value(PyValue::dict([
        (
            "t",
            PyValue::WithState(
                Box::new(tensor),
                Box::new(attrs("note", "calibrated".into())),
            ),
        ),
        (
            "p",
            PyValue::WithState(
                Box::new(PyValue::Tensor(Box::new(param))),
                Box::new(attrs("tag", 3.into())),
            ),
        ),
    ]))
    .unwrap();
    let bytes = save_to_writer(Vec::new(), "archive", &ckpt, &Default::default()).unwrap();
    let back = stowage::checkpoint::load_bytes(&bytes, &LoadOptions::default()).unwrap();
    let t = back.get("t").unwrap();
    assert_eq!(
        t.as_tensor().unwrap().tensor.read::<f32>().unwrap()[..],
        [1.0, 2.0]
    );
    let state = t.state().expect("the tensor's attributes");
    assert_eq!(state.get("note").unwrap().as_str().unwrap(), "calibrated");
    let p = back.get("p").unwrap();
    assert!(p.as_tensor().unwrap().parameter);
    assert_eq!(p.state().unwrap().get("tag").unwrap().as_i64().unwrap(), 3);
}
