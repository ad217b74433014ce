//! PyTorch Distributed Checkpoints written by real PyTorch
//! (`scripts/make_dcp_fixtures.py`): one process, zstd-compressed items, the
//! SAFETENSORS serialization format, four processes with DTensors sharded
//! across them, and four processes through `HuggingFaceStorageWriter` (one
//! safetensors file per rank, `DCP_SHARDING_INFO`). Each must read as PyTorch reads it (`NAME.expected.json`:
//! `dcp_to_torch_save` then `torch.load`); hostile variants must be refused.

use crate::common;
use stowage::{CheckpointError, FormatError};

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value as J;
use stowage::checkpoint::dcp::metadata::ItemKind;
use stowage::checkpoint::dcp::DcpCheckpoint;
use stowage::checkpoint::{Format, PathKey, PyValue, ValueKind, ValueRef};
use stowage::LoadMode;
use stowage::{Checkpoint, LoadOptions};
use stowage::{Device, Error, Tensor};

fn dir(name: &str) -> PathBuf {
    common::fixtures_dir().join("dcp").join(name)
}

fn expected(name: &str) -> J {
    let text = fs::read_to_string(dir(name).with_extension("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn path_of(j: &J) -> Vec<PathKey> {
    j.as_array()
        .unwrap()
        .iter()
        .map(|k| match k {
            J::String(s) => PathKey::Key(s.clone()),
            J::Number(n) => PathKey::Index(n.as_i64().unwrap()),
            _ => panic!("path key {k}"),
        })
        .collect()
}

/// The value at `path` (string and int dict keys, list indices).
fn at<'c>(ckpt: &'c Checkpoint, path: &[PathKey]) -> ValueRef<'c> {
    ckpt.root_value()
        .get_path(path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Python's `repr` of the plain values the fixtures hold.
fn repr(v: &ValueRef<'_>) -> String {
    match v.kind() {
        ValueKind::Int => v.as_i64().unwrap().to_string(),
        ValueKind::Float => format!("{:?}", v.as_f64().unwrap()),
        ValueKind::Str => format!("'{}'", v.as_str().unwrap()),
        ValueKind::Tuple => format!(
            "({})",
            v.as_list()
                .unwrap()
                .map(|x| repr(&x))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => panic!("{other:?}"),
    }
}

fn assert_matches_torch(name: &str, ckpt: &Checkpoint) {
    let want = expected(name);
    let tensors = ckpt.tensors().unwrap();
    let want_tensors = want["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), want_tensors.len(), "{name}: tensor count");
    for w in want_tensors {
        let path = path_of(&w["path"]);
        let t = at(ckpt, &path)
            .as_tensor()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            t.tensor.dtype().name(),
            w["dtype"].as_str().unwrap(),
            "{path:?}"
        );
        let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
        assert_eq!(t.tensor.shape(), &shape[..], "{path:?}");
        let values: Vec<f32> = serde_json::from_value::<Vec<f64>>(w["values"].clone())
            .unwrap()
            .into_iter()
            .map(|v| v as f32)
            .collect();
        assert_eq!(t.tensor.to_vec::<f32>().unwrap(), values, "{name} {path:?}");
    }
    for w in want["values"].as_array().unwrap() {
        let path = path_of(&w["path"]);
        assert_eq!(
            repr(&at(ckpt, &path)),
            w["repr"].as_str().unwrap(),
            "{name} {path:?}"
        );
    }
}

#[test]
fn every_pytorch_layout_reads_as_pytorch_reads_it() {
    for name in ["one", "zstd", "safetensors", "four", "hf"] {
        let ckpt = stowage::load(dir(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_matches_torch(name, &ckpt);
    }
}

/// The metadata does not say whether the items are `torch.save` archives or
/// safetensors blobs; the first tensor item's bytes do, and a loaded
/// checkpoint carries the answer (`inspect`'s `"item_format"`).
#[test]
fn the_items_format_is_read_from_the_first_tensor_item() {
    for (name, want) in [
        ("one", Format::TorchZip),
        ("zstd", Format::TorchZip),
        ("four", Format::TorchZip),
        ("safetensors", Format::Safetensors),
    ] {
        let dcp = DcpCheckpoint::open(dir(name), &LoadOptions::default()).unwrap();
        assert_eq!(dcp.item_format().unwrap(), want, "{name}");
        assert_eq!(stowage::load(dir(name)).unwrap().format(), want, "{name}");
    }
}

#[test]
fn chunks_split_across_ranks_are_assembled() {
    let dcp = DcpCheckpoint::open(dir("four"), &LoadOptions::default()).unwrap();
    let meta = dcp.metadata();
    let cols = meta.items.iter().find(|i| i.fqn == "model.cols").unwrap();
    let stowage::checkpoint::dcp::metadata::ItemKind::Tensor(t) = &cols.kind else {
        panic!("model.cols is a tensor")
    };
    // Four ranks, columns 2, 2, 2 and 0 wide (8 x 6 over 4 ranks).
    assert_eq!(t.chunk_count(), 4);
    assert_eq!(t.chunk(3).unwrap().sizes, [8, 0]);
    let whole = dcp.read_tensor("model.cols").unwrap();
    assert_eq!(
        whole.to_vec::<f32>().unwrap(),
        (0..48).map(|i| i as f32).collect::<Vec<_>>()
    );
}

/// Copies a fixture folder (to damage some of its files).
fn copy(name: &str) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    for f in fs::read_dir(dir(name)).unwrap() {
        let f = f.unwrap();
        fs::copy(f.path(), out.path().join(f.file_name())).unwrap();
    }
    out
}

#[test]
fn a_region_reads_only_the_chunks_it_intersects() {
    let out = copy("four");
    // Columns 0..4 live in ranks 0 and 1; the others' files are emptied.
    for rank in [2, 3] {
        fs::write(out.path().join(format!("__{rank}_0.distcp")), b"").unwrap();
    }
    let dcp = DcpCheckpoint::open(out.path(), &LoadOptions::default()).unwrap();
    let part = dcp.read_region("model.cols", &[2, 1], &[3, 3]).unwrap();
    let want: Vec<f32> = [2, 3, 4]
        .iter()
        .flat_map(|r| (1..4).map(move |c| (r * 6 + c) as f32))
        .collect();
    assert_eq!(part.shape(), [3, 3]);
    assert_eq!(part.to_vec::<f32>().unwrap(), want);
    // The whole tensor needs rank 2's chunk: a clear error naming its file.
    let err = dcp.read_tensor("model.cols").unwrap_err();
    assert!(
        matches!(&err, Error::InFile { path, .. } if path.ends_with("__2_0.distcp")),
        "{err}"
    );
    assert!(err.to_string().contains("model.cols"), "{err}");
    // Outside the tensor.
    assert!(dcp.read_region("model.cols", &[7, 0], &[2, 1]).is_err());
}

#[test]
fn meta_loading_reads_no_data() {
    let out = copy("four");
    for f in fs::read_dir(out.path()).unwrap() {
        let f = f.unwrap();
        if f.file_name() != ".metadata" {
            fs::write(f.path(), b"").unwrap();
        }
    }
    let dcp = DcpCheckpoint::open(
        out.path(),
        &LoadOptions::default().with_map_location(Device::META),
    )
    .unwrap();
    let t: Tensor = dcp.read_tensor("model.w").unwrap();
    assert!(t.is_meta());
    assert_eq!(t.shape(), [12, 4]);
}

#[test]
fn lazy_and_fake_loads() {
    let lazy = stowage::load_with(
        dir("four"),
        &LoadOptions::default().with_mode(LoadMode::Lazy),
    )
    .unwrap();
    let (_, w) = lazy
        .tensors()
        .unwrap()
        .into_iter()
        .find(|(p, _)| stowage::checkpoint::dotted(p) == "model.cols")
        .unwrap();
    let storage = w.tensor.untyped_storage().clone();
    assert!(!storage.is_loaded());
    // A window read assembles the tensor and keeps nothing in the storage.
    let mut window = [0u8; 8];
    storage.read_at(8, &mut window).unwrap();
    assert_eq!(window[..4], 2f32.to_le_bytes());
    assert!(!storage.is_loaded());
    assert_matches_torch("four", &lazy);

    // Fake: the data files are never opened.
    let out = copy("four");
    for f in fs::read_dir(out.path()).unwrap() {
        let f = f.unwrap();
        if f.file_name().to_string_lossy().starts_with("__2") {
            fs::write(f.path(), b"").unwrap();
        }
    }
    let fake = stowage::load_with(
        out.path(),
        &LoadOptions::default().with_mode(LoadMode::Fake),
    )
    .unwrap();
    let t = &fake.tensors().unwrap()[0].1.tensor;
    assert!(!t.untyped_storage().has_data());
}

fn hostile(name: &str) -> Error {
    let path = common::fixtures_dir().join("dcp/hostile").join(name);
    stowage::load(&path).unwrap_err()
}

fn root_cause(e: &Error) -> &Error {
    match e {
        Error::InFile { source, .. } | Error::AtPath { source, .. } => root_cause(source),
        other => other,
    }
}

#[test]
fn hostile_checkpoints_are_refused_clearly() {
    let e = hostile("os_system");
    assert!(
        matches!(root_cause(&e), Error::Checkpoint(CheckpointError::GlobalNotAllowed { module, name }) if module == "os" && name == "system"),
        "{e}"
    );
    let e = hostile("past_end");
    assert!(
        matches!(
            root_cause(&e),
            Error::Format(FormatError::BadObject {
                context: "DCP item",
                ..
            })
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("__1_0.distcp") && e.to_string().contains("model.w"),
        "{e}"
    );
    let e = hostile("overlap");
    assert!(
        matches!(
            root_cause(&e),
            Error::Format(FormatError::BadObject {
                context: "DCP chunks",
                ..
            })
        ),
        "{e}"
    );
    let e = hostile("missing");
    assert!(e.to_string().contains("36 of 48 elements"), "{e}");
    let e = hostile("bomb");
    assert!(
        matches!(
            root_cause(&e),
            Error::Checkpoint(CheckpointError::LimitExceeded {
                limit: stowage::Limit::StorageBytes,
                ..
            })
        ),
        "{e}"
    );
}

#[test]
fn a_dcp_folder_is_not_mistaken_for_anything_else() {
    use stowage::checkpoint::{resolve, Folder};
    let is_dcp = |p: &Path| {
        let source = resolve(p, &LoadOptions::default());
        matches!(
            source.as_ref().map(|s| s.folder()),
            Ok(Some(Folder::Dcp(_)))
        )
    };
    assert!(is_dcp(&dir("one")));
    assert!(!is_dcp(Path::new(env!("CARGO_MANIFEST_DIR"))));
}

/// Saves what a fixture holds as a DCP folder of `ranks` files.
fn resave(name: &str, ranks: usize) -> tempfile::TempDir {
    resave_with(name, ranks, false)
}

/// Saves what a fixture holds as a DCP folder of `ranks` files, its items
/// compressed when `zstd`.
fn resave_with(name: &str, ranks: usize, zstd: bool) -> tempfile::TempDir {
    let ckpt = stowage::load(dir(name)).unwrap();
    let out = tempfile::tempdir().unwrap();
    let options = stowage::checkpoint::dcp::DcpSaveOptions::default()
        .with_ranks(ranks)
        .with_sync(false)
        .with_zstd(zstd);
    stowage::checkpoint::dcp::save(out.path(), &ckpt, &options).unwrap();
    out
}

#[test]
fn saved_folders_read_back_identically() {
    for ranks in [1, 3] {
        let out = resave("four", ranks);
        let files = fs::read_dir(out.path()).unwrap().count();
        assert_eq!(files, ranks + 1, "{ranks} data files and .metadata");
        assert_matches_torch("four", &stowage::load(out.path()).unwrap());
    }
}

/// With zstd, every item is one checksummed frame, recorded as
/// `stream.zstd/1`; the folder reads back identically, and smaller.
#[test]
fn zstd_folders_read_back_identically() {
    let plain = resave("four", 2);
    let packed = resave_with("four", 2, true);
    assert_matches_torch("four", &stowage::load(packed.path()).unwrap());
    let dcp = DcpCheckpoint::open(packed.path(), &LoadOptions::default()).unwrap();
    let items: Vec<_> = dcp
        .metadata()
        .items
        .iter()
        .flat_map(|item| match &item.kind {
            ItemKind::Tensor(t) => t.chunks().map(|c| c.storage).collect(),
            ItemKind::Bytes(info) => vec![info.as_ref()],
        })
        .collect();
    assert!(!items.is_empty());
    for info in items {
        assert_eq!(info.transforms, ["stream.zstd/1"], "{info:?}");
        let file = fs::read(packed.path().join(info.relative_path)).unwrap();
        let frame = &file[info.offset as usize..][..info.length as usize];
        // A zstd frame's magic number, and its descriptor's checksum flag.
        assert_eq!(frame[..4], [0x28, 0xb5, 0x2f, 0xfd]);
        assert_ne!(frame[4] & 0x04, 0, "no content checksum");
    }
    let size = |d: &Path| -> u64 {
        fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    };
    assert!(size(packed.path()) < size(plain.path()));
}

#[test]
fn a_failed_save_leaves_the_previous_checkpoint() {
    let out = resave("one", 2);
    let before = fs::read(out.path().join(".metadata")).unwrap();
    let ckpt = Checkpoint::from_value(PyValue::Int(3)).unwrap(); // not a state dict
    let options = stowage::checkpoint::dcp::DcpSaveOptions::default();
    assert!(stowage::checkpoint::dcp::save(out.path(), &ckpt, &options).is_err());
    assert_eq!(fs::read(out.path().join(".metadata")).unwrap(), before);
    assert_matches_torch("one", &stowage::load(out.path()).unwrap());
}

/// PyTorch's `dcp.load` reads stowage's folders: in one process, and in four
/// processes resharding every matrix along its other dimension.
#[test]
fn pytorch_loads_what_stowage_saves() {
    // zstd needs `zstandard` (or `pyzstd`) beside torch, as `.ci/run` installs it.
    for (ranks, procs, zstd) in [(1, 1, false), (3, 4, false), (2, 3, true)] {
        let out = resave_with("four", ranks, zstd);
        pytorch_reads_as_four(out.path(), procs, &format!("{ranks} ranks, zstd {zstd}"));
    }
}

/// Runs `scripts/dcp_load_check.py`: PyTorch's `dcp.load` of `folder` in
/// `procs` processes must give the `four` fixture's values. One world at a
/// time: each process imports torch, and a world of them on a loaded machine
/// is what makes gloo abort now and then (the script runs such a world again).
fn pytorch_reads_as_four(folder: &Path, procs: usize, what: &str) {
    static ONE_WORLD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let Some(py) = common::torch_python() else {
        return;
    };
    let _world = ONE_WORLD.lock().unwrap_or_else(|e| e.into_inner());
    let run = std::process::Command::new(&py)
        .arg(common::scripts_dir().join("dcp_load_check.py"))
        .arg(folder)
        .arg(dir("four").with_extension("expected.json"))
        .arg(procs.to_string())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{what}, {procs} processes: {}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// A plan of columns: each matrix split by columns over two ranks (as a
/// row-parallel layer's weight is), everything else whole on rank 0.
fn columns() -> stowage::checkpoint::dcp::ChunkPlan {
    use stowage::checkpoint::dcp::PlannedChunk;
    std::sync::Arc::new(|_name: &str, shape: &[usize]| match shape {
        [rows, cols] if *cols >= 2 => {
            let half = cols / 2;
            vec![
                PlannedChunk {
                    rank: 0,
                    offsets: vec![0, 0],
                    sizes: vec![*rows, half],
                },
                PlannedChunk {
                    rank: 1,
                    offsets: vec![0, half],
                    sizes: vec![*rows, cols - half],
                },
            ]
        }
        _ => vec![PlannedChunk {
            rank: 0,
            offsets: vec![0; shape.len()],
            sizes: shape.to_vec(),
        }],
    })
}

#[test]
fn chunks_as_planned_read_back_in_stowage_and_pytorch() {
    let ckpt = stowage::load(dir("four")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let options = stowage::checkpoint::dcp::DcpSaveOptions::default()
        .with_ranks(2)
        .with_sync(false)
        .with_plan(columns());
    stowage::checkpoint::dcp::save(out.path(), &ckpt, &options).unwrap();
    let dcp = DcpCheckpoint::open(out.path(), &LoadOptions::default()).unwrap();
    let w = dcp
        .metadata()
        .items
        .iter()
        .find(|i| i.fqn == "model.w")
        .unwrap();
    let stowage::checkpoint::dcp::metadata::ItemKind::Tensor(t) = &w.kind else {
        panic!("a tensor")
    };
    assert_eq!(t.chunk_count(), 2);
    assert_eq!(t.chunk(1).unwrap().offsets, [0, 2]);
    assert_matches_torch("four", &stowage::load(out.path()).unwrap());

    // A plan that leaves a hole, or names a rank with no file, is refused.
    use stowage::checkpoint::dcp::PlannedChunk;
    for bad in [
        PlannedChunk {
            rank: 0,
            offsets: vec![0, 0],
            sizes: vec![1, 1],
        },
        PlannedChunk {
            rank: 5,
            offsets: vec![0, 0],
            sizes: vec![12, 4],
        },
    ] {
        let plan: stowage::checkpoint::dcp::ChunkPlan =
            std::sync::Arc::new(move |_: &str, s: &[usize]| {
                if s.len() == 2 {
                    vec![bad.clone()]
                } else {
                    vec![PlannedChunk {
                        rank: 0,
                        offsets: vec![0; s.len()],
                        sizes: s.to_vec(),
                    }]
                }
            });
        let options = stowage::checkpoint::dcp::DcpSaveOptions::default()
            .with_ranks(2)
            .with_sync(false)
            .with_plan(plan);
        assert!(stowage::checkpoint::dcp::save(
            tempfile::tempdir().unwrap().path(),
            &ckpt,
            &options
        )
        .is_err());
    }

    pytorch_reads_as_four(out.path(), 4, "columns over 2 ranks");
}

/// A state dict of two tensors, every element `value`.
fn two_tensors(value: f32) -> Checkpoint {
    Checkpoint::from_state_dict([
        ("a", Tensor::from_vec(vec![value; 64], &[64]).unwrap()),
        ("b", Tensor::from_vec(vec![value; 64], &[64]).unwrap()),
    ])
}

/// issue 27, item 1: a DCP opened before a save replaces its folder reads
/// its own version, through the folder it opened, or stops with a clear
/// error; it never reads the new version's data at the old metadata's
/// offsets (which gave values of neither version).
#[test]
fn a_dcp_replaced_while_open_is_read_whole_or_refused() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("step");
    let options = stowage::checkpoint::dcp::DcpSaveOptions::default().with_ranks(2);
    stowage::checkpoint::dcp::save(&dir, &two_tensors(1.0), &options).unwrap();
    let old = DcpCheckpoint::open(&dir, &LoadOptions::default()).unwrap();
    // The new version lays its items out otherwise (one rank), so reading it
    // at the old offsets would give neither version.
    let one_rank = stowage::checkpoint::dcp::DcpSaveOptions::default().with_ranks(1);
    stowage::checkpoint::dcp::save(&dir, &two_tensors(2.0), &one_rank).unwrap();
    for name in ["a", "b"] {
        match old.read_tensor(name) {
            Ok(t) => assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0; 64], "{name}"),
            Err(e) => assert!(
                matches!(e.root(), Error::Checkpoint(CheckpointError::FolderReplaced { folder }) if folder == &dir),
                "{name}: {e}"
            ),
        }
    }
    // A load that starts now reads the new version whole.
    let new = stowage::load(&dir).unwrap();
    assert_eq!(
        new.tensor("a").unwrap().to_vec::<f32>().unwrap(),
        vec![2.0; 64]
    );
}

/// The items of a DCP folder: each name with where its bytes are (the
/// first chunk's, for a tensor).
fn spans(dir: &Path) -> Vec<(String, (String, u64, u64))> {
    let dcp = DcpCheckpoint::open(dir, &LoadOptions::default()).unwrap();
    let mut items: Vec<_> = dcp
        .metadata()
        .items
        .iter()
        .map(|item| {
            let info = match &item.kind {
                ItemKind::Tensor(t) => t.chunk(0).unwrap().storage.to_info(),
                ItemKind::Bytes(info) => info.clone(),
            };
            (
                item.fqn.clone(),
                (info.relative_path, info.offset, info.length),
            )
        })
        .collect();
    items.sort();
    items
}

/// Issue 43, item 3: a tensor, a list and a dict each held at two paths go
/// to a DCP under the keys `dcp.save` gives (each path its item, as
/// PyTorch's planner looks them up), each object's bytes written once;
/// stowage reads the list back as one object.
#[test]
fn values_held_twice_are_written_once_under_pytorchs_keys() {
    use std::sync::Arc;
    let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let w = PyValue::Shared(Arc::new(w.into()));
    let betas = PyValue::Shared(Arc::new(PyValue::list([0.9, 0.99])));
    let cfg = PyValue::Shared(Arc::new(PyValue::OrderedDict(vec![
        ("lr".into(), PyValue::Float(0.1)),
        ("betas".into(), betas.clone()),
    ])));
    let ckpt = Checkpoint::from_value(PyValue::OrderedDict(vec![
        ("w".into(), w.clone()),
        ("cfg".into(), cfg.clone()),
        (
            "opt".into(),
            PyValue::OrderedDict(vec![
                ("cfg".into(), cfg),
                ("b".into(), betas),
                ("w".into(), w),
            ]),
        ),
    ]))
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let options = stowage::checkpoint::dcp::DcpSaveOptions::default().with_sync(false);
    stowage::checkpoint::dcp::save(out.path(), &ckpt, &options).unwrap();
    let items = spans(out.path());
    let names: Vec<_> = items.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "cfg.betas",
            "cfg.lr",
            "opt.b",
            "opt.cfg.betas",
            "opt.cfg.lr",
            "opt.w",
            "w"
        ]
    );
    let at = |name: &str| &items.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(at("cfg.betas"), at("opt.b"));
    assert_eq!(at("cfg.betas"), at("opt.cfg.betas"));
    assert_eq!(at("w"), at("opt.w"));
    assert_ne!(
        at("cfg.lr"),
        at("opt.cfg.lr"),
        "a float is a value, not an object"
    );

    let back = stowage::load(out.path()).unwrap();
    let id = |p: &str| back.get(p).unwrap().id();
    assert!(id("cfg.betas").is_some());
    assert_eq!(id("cfg.betas"), id("opt.b"));
    assert_eq!(
        back.tensor("opt.w").unwrap().to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0]
    );
}

/// Issue 43, item 3: a structure shared 2^40 times over (41 objects) is
/// more paths than `dcp.save` could walk; it goes to a DCP at once, each
/// shared container one item whose bytes are written once, and reads back
/// with its sharing. Beside it, a dict held twice is one item at each
/// path, and a tensor keeps its own key.
#[test]
fn a_structure_shared_exponentially_goes_to_a_dcp_at_once() {
    use std::sync::Arc;
    let mut top = PyValue::Shared(Arc::new(PyValue::OrderedDict(vec![(
        "a".into(),
        PyValue::Int(1),
    )])));
    for _ in 0..40 {
        top = PyValue::Shared(Arc::new(PyValue::list([top.clone(), top])));
    }
    let cfg = PyValue::Shared(Arc::new(PyValue::OrderedDict(vec![(
        "lr".into(),
        PyValue::Float(0.1),
    )])));
    let ckpt = Checkpoint::from_value(PyValue::OrderedDict(vec![
        (
            "w".into(),
            Tensor::ones(&[4], stowage::DType::Float32).unwrap().into(),
        ),
        ("root".into(), top),
        ("cfg".into(), cfg.clone()),
        (
            "opt".into(),
            PyValue::OrderedDict(vec![("cfg".into(), cfg)]),
        ),
    ]))
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let options = stowage::checkpoint::dcp::DcpSaveOptions::default().with_sync(false);
    let dir = out.path().to_path_buf();
    let saved = std::thread::spawn(move || {
        stowage::checkpoint::dcp::save(&dir, &ckpt, &options).map(|()| stowage::load(&dir))
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !saved.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the save did not finish"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let back = saved.join().unwrap().unwrap().unwrap();
    let items = spans(out.path());
    let names: Vec<_> = items.iter().map(|(n, _)| n.as_str()).collect();
    // `root` holds nothing but shared lists: `_is_terminal`, so one item.
    assert_eq!(names, ["cfg", "opt.cfg", "root", "w"]);
    assert_eq!(items[0].1, items[1].1, "the dict's bytes once");
    let size: u64 = fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(size < 16 << 10, "{size} bytes");
    assert_eq!(
        back.get("cfg").unwrap().id(),
        back.get("opt.cfg").unwrap().id()
    );
    let mut node = back.get("root").unwrap();
    for _ in 0..40 {
        let halves: Vec<_> = node.as_list().unwrap().collect();
        assert_eq!(halves[0].id(), halves[1].id());
        node = halves[0].clone();
    }
    assert_eq!(node.get("a").unwrap().as_i64().unwrap(), 1);
}

/// What a DCP cannot store, `dcp.save` fails on too: a sparse or nested
/// tensor, a packed quantized dtype. The save refuses it by name and leaves
/// no folder.
#[test]
fn tensors_a_dcp_cannot_store_are_refused_by_name() {
    let out = tempfile::tempdir().unwrap();
    for (fixture, what) in [
        ("kinds/sparse_coo", "a sparse_coo tensor in a DCP"),
        ("kinds/sparse_compressed", "a sparse_csr tensor in a DCP"),
        ("kinds/nested", "a nested tensor in a DCP"),
        ("kinds/quantized_packed", "quint4x2"),
    ] {
        let ckpt = stowage::load(common::fixture(fixture)).unwrap();
        let dir = out.path().join(fixture.replace('/', "_"));
        let e = stowage::checkpoint::dcp::save(&dir, &ckpt, &Default::default()).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(what) && text.contains("dcp.save refuses it too"),
            "{fixture}: {text}"
        );
        assert!(!dir.exists(), "{fixture}: a folder was left");
    }
}

/// A DCP names every item by its path of string or integer keys: a dict
/// keyed otherwise is refused, naming the key's type and where it is.
#[test]
fn a_key_a_dcp_cannot_name_is_refused_with_its_type_and_place() {
    let out = tempfile::tempdir().unwrap();
    for (key, kind) in [
        (PyValue::Float(1.5), "a float key under model.head"),
        (
            PyValue::Tuple(vec![PyValue::Int(1), PyValue::Int(2)]),
            "a tuple key under model.head",
        ),
    ] {
        let head = PyValue::Dict(vec![(key, PyValue::Int(1))]);
        let ckpt = Checkpoint::builder()
            .value("model.head", head)
            .build()
            .unwrap();
        let e = stowage::checkpoint::dcp::save(&out.path().join("d"), &ckpt, &Default::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "expected string or integer dict keys, found {kind}"
            )),
            "{e}"
        );
    }
}

/// An eager load reads a local folder's tensors under 4 MiB ahead, two at
/// a time, into storages it makes before reading any where they are 1 MiB
/// or more: a folder of such tensors and smaller ones loads whole, each
/// tensor its own values, and a broken item stops it with that item's
/// tensor named, the first broken one in the items' order (a later one is
/// broken too).
#[test]
fn an_eager_load_names_the_first_broken_tensor_it_reads_ahead() {
    let names: Vec<String> = (0..12).map(|i| format!("t{i:02}")).collect();
    let values = |i: usize| -> Vec<f32> {
        let n = if i.is_multiple_of(2) { 1 << 18 } else { 256 };
        (0..n).map(|k| (i * 1_000_000 + k) as f32).collect()
    };
    let ckpt = Checkpoint::from_state_dict(names.iter().enumerate().map(|(i, n)| {
        let v = values(i);
        let len = v.len();
        (n.as_str(), Tensor::from_vec(v, &[len]).unwrap())
    }));
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("step");
    let options = stowage::checkpoint::dcp::DcpSaveOptions::default();
    stowage::checkpoint::dcp::save(&dir, &ckpt, &options).unwrap();
    let back = stowage::load(&dir).unwrap();
    for (i, n) in names.iter().enumerate() {
        let got = back.tensor(n).unwrap().to_vec::<f32>().unwrap();
        assert!(got == values(i), "{n}");
    }
    // An item with its first bytes zeroed has no header.
    let items: std::collections::HashMap<_, _> = spans(&dir).into_iter().collect();
    for broken in ["t04", "t09"] {
        let (file, offset, _) = &items[broken];
        let mut data = fs::read(dir.join(file)).unwrap();
        data[*offset as usize..*offset as usize + 4].fill(0);
        fs::write(dir.join(file), data).unwrap();
    }
    let e = stowage::load(&dir).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("t04") && !text.contains("t09"), "{text}");
}
