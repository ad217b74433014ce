//! Hugging Face sharded sets: the fixtures under `tests/fixtures/sharded/`
//! were written by Hugging Face's own writer (`scripts/make_sharded_fixtures.py`)
//! and read back by PyTorch (`expected.json`); stowage must read them as one
//! checkpoint in every mode, and write sets that split exactly as Hugging
//! Face's writer splits, replace an older set as a whole, and load in Python.

use crate::common;
use stowage::FormatError;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as J;
use stowage::checkpoint::dotted;
use stowage::checkpoint::sharded::{save_sharded, ShardFormat, ShardOptions};
use stowage::LoadMode;
use stowage::{load_with, Checkpoint, LoadOptions};
use stowage::{Device, Error};

fn set_dir(kind: &str) -> PathBuf {
    common::fixtures_dir().join("sharded").join(kind)
}

fn expected(kind: &str) -> J {
    let text = fs::read_to_string(set_dir(kind).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Names, dtypes, shapes and values of every tensor (values compared at
/// float32 precision: exact for every dtype here, and free of the JSON
/// parser's last-digit rounding).
fn assert_matches_torch(kind: &str, ckpt: &Checkpoint) {
    let want = expected(kind);
    let mut tensors = ckpt.tensors().unwrap();
    tensors.sort_by_key(|(p, _)| dotted(p));
    let mut want_tensors = want["tensors"].as_array().unwrap().clone();
    want_tensors.sort_by_key(|w| w["name"].as_str().unwrap().to_owned());
    assert_eq!(tensors.len(), want_tensors.len(), "{kind}: tensor count");
    for ((path, t), w) in tensors.iter().zip(&want_tensors) {
        let name = dotted(path);
        assert_eq!(name, w["name"].as_str().unwrap(), "{kind}: names");
        assert_eq!(
            t.tensor.dtype().name(),
            w["dtype"].as_str().unwrap(),
            "{name}"
        );
        let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
        assert_eq!(t.tensor.shape(), &shape[..], "{name}");
        let values: Vec<f32> = serde_json::from_value::<Vec<f64>>(w["values"].clone())
            .unwrap()
            .into_iter()
            .map(|v| v as f32)
            .collect();
        assert_eq!(t.tensor.to_vec::<f32>().unwrap(), values, "{name}");
    }
}

/// The tensor names in order.
fn names(ckpt: &Checkpoint) -> Vec<String> {
    ckpt.tensors()
        .unwrap()
        .iter()
        .map(|(p, _)| dotted(p))
        .collect()
}

fn by_name(ckpt: &Checkpoint, name: &str) -> stowage::Tensor {
    ckpt.tensors()
        .unwrap()
        .into_iter()
        .find(|(p, _)| dotted(p) == name)
        .unwrap_or_else(|| panic!("no tensor {name}"))
        .1
        .tensor
        .clone()
}

#[test]
fn hugging_face_sets_load_as_one_checkpoint() {
    for kind in ["safetensors", "bin"] {
        let dir = set_dir(kind);
        let source = stowage::checkpoint::resolve(&dir, &stowage::LoadOptions::default()).unwrap();
        let Some(stowage::checkpoint::Folder::Sharded(index)) = source.folder() else {
            panic!("{} holds no sharded set", dir.display())
        };
        for path in [dir.clone(), index.path()] {
            let ckpt = stowage::load(&path).unwrap();
            assert_matches_torch(kind, &ckpt);
            // Shard by shard, in sorted file order, each in its file's order.
            let want: Vec<_> = expected(kind)["tensors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["name"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(names(&ckpt), want);
            // One storage per tensor, but for the tied pair of the `.bin` set.
            assert_eq!(ckpt.storages().len(), 7);
        }
    }
}

#[test]
fn sharing_inside_a_bin_shard_is_kept() {
    let ckpt = stowage::load(set_dir("bin")).unwrap();
    let shared = &expected("bin")["shared"][0];
    let (a, b) = (shared[0].as_str().unwrap(), shared[1].as_str().unwrap());
    assert!(by_name(&ckpt, a).shares_storage_with(&by_name(&ckpt, b)));
    assert!(!by_name(&ckpt, "norm.weight").shares_storage_with(&by_name(&ckpt, a)));
    // Storage keys stay distinct across shards (each shard numbers from 0).
    let mut keys: Vec<_> = ckpt.storages().iter().map(|s| s.key.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), ckpt.storages().len());
}

#[test]
fn every_load_mode_reads_a_set() {
    for kind in ["safetensors", "bin"] {
        let dir = set_dir(kind);
        let lazy = load_with(&dir, &LoadOptions::default().with_mode(LoadMode::Lazy)).unwrap();
        assert_matches_torch(kind, &lazy);
        // SAFETY: the fixtures are not written while the test runs.
        let mapped = unsafe { stowage::load_mmap(&dir, &LoadOptions::default()) }.unwrap();
        assert_matches_torch(kind, &mapped);
        let meta = load_with(
            &dir,
            &LoadOptions::default().with_map_location(Device::META),
        )
        .unwrap();
        let full = stowage::load(&dir).unwrap();
        let shapes = |c: &Checkpoint| {
            c.tensors()
                .unwrap()
                .iter()
                .map(|(p, t)| (dotted(p), t.tensor.shape().to_vec(), t.tensor.is_meta()))
                .collect::<Vec<_>>()
        };
        let want: Vec<_> = shapes(&full)
            .into_iter()
            .map(|(n, s, _)| (n, s, true))
            .collect();
        assert_eq!(shapes(&meta), want);
    }
}

/// The index `dir` holds, as a map.
fn index_json(dir: &Path, format: ShardFormat) -> J {
    serde_json::from_str(&fs::read_to_string(dir.join(format.index_name())).unwrap()).unwrap()
}

#[test]
fn saved_sets_split_as_hugging_face_splits() {
    for (kind, format) in [
        ("safetensors", ShardFormat::Safetensors),
        ("bin", ShardFormat::Bin),
    ] {
        let ckpt = stowage::load(set_dir(kind)).unwrap();
        let out = tempfile::tempdir().unwrap();
        let options = ShardOptions::default()
            .with_format(format)
            .with_max_shard_size(stowage::checkpoint::sharded::parse_size("1KB").unwrap())
            .with_sync(false);
        let saved = save_sharded(out.path(), &ckpt, &options).unwrap();
        assert_eq!(saved.files.len(), 3);
        let ours = index_json(out.path(), format);
        let theirs = index_json(&set_dir(kind), format);
        assert_eq!(ours["weight_map"], theirs["weight_map"], "{kind}");
        assert_eq!(
            ours["metadata"]["total_size"], theirs["metadata"]["total_size"],
            "{kind}"
        );
        let back = stowage::load(out.path()).unwrap();
        assert_matches_torch(kind, &back);
    }
}

/// A training checkpoint (nested dicts, an optimizer's state, values) saved
/// as a set loads back as what was saved, as one safetensors file does: in
/// several shards and in one, in safetensors and in `.bin` shards. Its
/// tensors alone (`tensors_only`) make a flat set.
#[test]
fn a_nested_checkpoint_saved_as_a_set_loads_back_whole() {
    let ckpt = stowage::load(common::fixtures_dir().join("training_checkpoint.pt")).unwrap();
    let leaves = |c: &Checkpoint| {
        let mut out: Vec<String> = c
            .root_value()
            .leaves()
            .unwrap()
            .iter()
            .map(|v| format!("{} {:?}", dotted(v.path()), v.kind()))
            .collect();
        out.sort();
        out
    };
    let want = leaves(&ckpt);
    assert!(want.iter().any(|l| l.starts_with("epoch ")), "{want:?}");
    for (format, size, files) in [
        (ShardFormat::Safetensors, "100B", 3),
        (ShardFormat::Safetensors, "5GB", 1),
        (ShardFormat::Bin, "5GB", 1),
    ] {
        let out = tempfile::tempdir().unwrap();
        let options = ShardOptions::default()
            .with_format(format)
            .with_max_shard_size(stowage::checkpoint::sharded::parse_size(size).unwrap())
            .with_sync(false);
        let saved = save_sharded(out.path(), &ckpt, &options).unwrap();
        assert_eq!(saved.files.len(), files, "{format:?} {size}");
        let back = stowage::load(out.path()).unwrap();
        assert_eq!(leaves(&back), want, "{format:?} {size}");
        assert_eq!(
            back.get("epoch").unwrap().as_i64().unwrap(),
            ckpt.get("epoch").unwrap().as_i64().unwrap()
        );
        let w = |c: &Checkpoint| {
            let t = c
                .get("model.weight")
                .unwrap()
                .as_tensor()
                .unwrap()
                .tensor
                .clone();
            t.to_vec::<f32>().unwrap()
        };
        assert_eq!(w(&back), w(&ckpt), "{format:?} {size}");
    }
    // The tensors alone: a flat set, named by dotted path, nothing else.
    let out = tempfile::tempdir().unwrap();
    let options = ShardOptions::default()
        .with_max_shard_size(100)
        .with_sync(false);
    save_sharded(out.path(), &ckpt.tensors_only().unwrap(), &options).unwrap();
    let index = index_json(out.path(), ShardFormat::Safetensors);
    assert!(index["metadata"]
        .get(stowage::checkpoint::safetensors::TREE_KEY)
        .is_none());
    let flat = stowage::load(out.path()).unwrap();
    assert!(flat.get("epoch").is_err());
    assert!(flat.get("model.weight").is_ok());
}

#[test]
fn one_shard_is_a_single_file_without_index() {
    let ckpt = stowage::load(set_dir("safetensors")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let saved = save_sharded(out.path(), &ckpt, &ShardOptions::default()).unwrap();
    assert_eq!(saved.files, [out.path().join("model.safetensors")]);
    assert!(saved.index.is_none());
    assert_matches_torch("safetensors", &stowage::load(out.path()).unwrap());
}

#[test]
fn a_new_set_replaces_the_old_one_whole_and_a_failed_one_changes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("model");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("config.json"), "{}").unwrap();
    let ckpt = stowage::load(set_dir("safetensors")).unwrap();
    let small = ShardOptions::default()
        .with_max_shard_size(1000)
        .with_sync(false);
    save_sharded(&dir, &ckpt, &small).unwrap();
    let listing = |d: &Path| {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let three = listing(&dir);
    assert_eq!(three.len(), 5, "{three:?}");

    // A save that fails half-way (complex128 has no safetensors dtype) leaves
    // the three-shard set as it was, and nothing beside the folder.
    let c = stowage::Tensor::zeros(&[2], stowage::DType::Complex128).unwrap();
    let bad = Checkpoint::from_state_dict(
        ckpt.state_dict()
            .unwrap()
            .into_iter()
            .chain([("z".to_owned(), c)]),
    );
    assert!(save_sharded(&dir, &bad, &small).is_err());
    assert_eq!(listing(&dir), three);
    assert_eq!(listing(out.path()), ["model"]);
    assert_matches_torch("safetensors", &stowage::load(&dir).unwrap());

    // One shard now: the old shards and index go, config.json stays.
    save_sharded(&dir, &ckpt, &ShardOptions::default()).unwrap();
    assert_eq!(listing(&dir), ["config.json", "model.safetensors"]);
    assert_matches_torch("safetensors", &stowage::load(&dir).unwrap());
}

#[test]
fn hostile_indexes_are_refused() {
    let out = tempfile::tempdir().unwrap();
    let src = set_dir("safetensors");
    for f in fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        fs::copy(f.path(), out.path().join(f.file_name())).unwrap();
    }
    let index = out.path().join("model.safetensors.index.json");
    let original = fs::read_to_string(&index).unwrap();

    // A shard that lacks a tensor the index puts in it.
    let moved = original.replacen(
        "\"norm.weight\": \"model-00003-of-00003.safetensors\"",
        "\"norm.weight\": \"model-00001-of-00003.safetensors\"",
        1,
    );
    fs::write(&index, moved).unwrap();
    let err = stowage::load(out.path()).unwrap_err();
    assert!(
        matches!(common::in_file(&err, &index), Error::Format(FormatError::ShardLacksTensor { name, .. }) if name == "norm.weight"),
        "{err}"
    );

    // A shard outside the folder.
    fs::write(
        &index,
        original.replacen("model-00003-of-00003", "../escape", 1),
    )
    .unwrap();
    let err = stowage::load(out.path()).unwrap_err();
    assert!(
        matches!(
            common::in_file(&err, &index),
            Error::Format(FormatError::BadObject { .. })
        ),
        "{err}"
    );

    // An index that names itself as a shard is read as a file, not followed.
    fs::write(
        &index,
        r#"{"weight_map": {"a": "model.safetensors.index.json"}}"#,
    )
    .unwrap();
    assert!(stowage::load(out.path()).is_err());
}

/// Python with torch, safetensors and huggingface_hub reads a set stowage
/// wrote as `transformers` does: each file of the index, each name where the
/// index says, the values PyTorch read from Hugging Face's own set.
#[test]
fn python_reads_the_sets_stowage_writes() {
    let Some(py) = common::torch_python() else {
        return;
    };
    for (kind, format) in [
        ("safetensors", ShardFormat::Safetensors),
        ("bin", ShardFormat::Bin),
    ] {
        let ckpt = stowage::load(set_dir(kind)).unwrap();
        let out = tempfile::tempdir().unwrap();
        let options = ShardOptions::default()
            .with_format(format)
            .with_max_shard_size(1000)
            .with_sync(false);
        save_sharded(out.path(), &ckpt, &options).unwrap();
        let script = r#"
import json, os, sys, torch
from safetensors.torch import load_file
d, expected = sys.argv[1], json.load(open(sys.argv[2]))
index = [f for f in os.listdir(d) if f.endswith(".index.json")][0]
wm = json.load(open(os.path.join(d, index)))["weight_map"]
got = {}
for shard in sorted(set(wm.values())):
    p = os.path.join(d, shard)
    sd = load_file(p) if shard.endswith(".safetensors") else torch.load(p, weights_only=True)
    for k, t in sd.items():
        assert wm[k] == shard, (k, shard)
        got[k] = t
for e in expected["tensors"]:
    t = got[e["name"]]
    assert str(t.dtype) == "torch." + e["dtype"], e["name"]
    assert t.float().flatten().tolist() == e["values"], e["name"]
print("ok", len(got))
"#;
        let status = Command::new(&py)
            .arg("-c")
            .arg(script)
            .arg(out.path())
            .arg(set_dir(kind).join("expected.json"))
            .output()
            .unwrap();
        assert!(
            status.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&status.stderr)
        );
    }
}

/// A file that a set's index or a DCP's `.metadata` names, and that is not
/// there, makes the checkpoint incomplete: `FormatError::MissingFile` names
/// it and the file that names it, in every load mode; a missing source
/// itself stays not found (issue 40, item 9).
#[test]
fn a_missing_shard_or_rank_file_is_named_with_its_index() {
    use stowage::checkpoint::dcp::{self, DcpSaveOptions};
    use stowage::checkpoint::PyValue;
    let dir = tempfile::tempdir().unwrap();
    let tensors = (0..4)
        .map(|i| {
            let t = stowage::Tensor::from_vec(vec![i as f32; 32], &[32]).unwrap();
            (PyValue::Str(format!("l{i}.w")), PyValue::from(t))
        })
        .collect();
    let ckpt = Checkpoint::from_value(PyValue::Dict(tensors)).unwrap();
    let set = dir.path().join("set");
    let saved = save_sharded(
        &set,
        &ckpt,
        &ShardOptions::default().with_max_shard_size(200),
    )
    .unwrap();
    assert!(saved.files.len() > 1);
    let gone = set.join(&saved.files[1]);
    fs::remove_file(&gone).unwrap();
    let dcp_dir = dir.path().join("dcp");
    dcp::save(&dcp_dir, &ckpt, &DcpSaveOptions::default().with_ranks(2)).unwrap();
    let rank_file = dcp_dir.join("__1_0.distcp");
    fs::remove_file(&rank_file).unwrap();
    let index = set.join(ShardFormat::Safetensors.index_name());
    let metadata = dcp_dir.join(".metadata");
    for mode in [LoadMode::Eager, LoadMode::Lazy, LoadMode::Fake] {
        for (src, file, named_by) in [(&set, &gone, &index), (&index, &gone, &index)] {
            let e = load_with(src, &LoadOptions::default().with_mode(mode)).unwrap_err();
            assert!(
                matches!(e.root(), Error::Format(FormatError::MissingFile { file: f, named_by: n })
                    if f == file && n == named_by),
                "{mode:?} {}: {e}",
                src.display()
            );
        }
        // A DCP opens a rank's file when it reads from it.
        let loaded = load_with(&dcp_dir, &LoadOptions::default().with_mode(mode));
        if mode == LoadMode::Eager {
            let e = loaded.unwrap_err();
            assert!(
                matches!(e.root(), Error::Format(FormatError::MissingFile { file, named_by })
                    if file == &rank_file && named_by == &metadata),
                "{e}"
            );
            assert!(e.to_string().contains(".metadata names"), "{e}");
        }
    }
    let e = load_with(dir.path().join("absent.pt"), &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(e.root(), Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound),
        "{e}"
    );
}

/// `world` processes writing one set divide the work whatever the shard
/// size (issue 40, item 8): a set whose tensors would fit one shard of the
/// default 5 GB is written as at least one shard per rank, the same files
/// for the same world, and loads back whole.
#[test]
fn a_world_of_processes_writes_at_least_one_shard_each() {
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = Checkpoint::from_state_dict((0..4).map(|i| {
        (
            format!("t{i}"),
            stowage::Tensor::from_vec(vec![i as f32; 64], &[64]).unwrap(),
        )
    }));
    let shards = |dir: &Path| {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".safetensors"))
            .collect();
        names.sort();
        names
    };
    for world in [1usize, 2, 4] {
        let mut seen = Vec::new();
        for run in 0..2 {
            let dir = tmp.path().join(format!("world-{world}-{run}"));
            for rank in (0..world).rev() {
                let options = ShardOptions::default().with_part(rank, world);
                save_sharded(&dir, &ckpt, &options).unwrap();
            }
            assert_eq!(shards(&dir).len(), world, "world {world}");
            let back = stowage::load(&dir).unwrap();
            assert_eq!(names(&back), names(&ckpt), "world {world}");
            for (name, t) in ckpt.state_dict().unwrap() {
                assert_eq!(
                    by_name(&back, &name).to_vec::<f32>().unwrap(),
                    t.to_vec::<f32>().unwrap(),
                    "{name}"
                );
            }
            seen.push(
                shards(&dir)
                    .into_iter()
                    .map(|n| (fs::read(dir.join(&n)).unwrap(), n))
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(seen[0], seen[1], "world {world}: the same files each time");
    }
}
