//! Writing: every fixture survives load → save → load unchanged (tensors,
//! values, sharing, flags, containers, `OrderedDict` state, storage classes),
//! each storage is written once, saves are reproducible and crash-safe, and
//! what PyTorch refuses to save is refused. Plus the safetensors writer.

use crate::common;
use stowage::{CheckpointError, StorageError, TensorError};

use std::collections::HashSet;
use std::path::Path;

use crate::common::{
    assert_manifest_eq, check_keys_match_sharing, describe, fixture, fixture_names, full_manifest,
    load_fixture, logical_bytes, manifest, sha256_hex, tensor_bytes, Hash,
};
use stowage::checkpoint::{dotted, Object, PathKey, PyValue, TensorObject};
use stowage::{Checkpoint, LoadOptions};
use stowage::{DType, Device, Error, Kind, Tensor};
use stowage_pickle::{Graph, Value};
use stowage_zip::{ZipLimits, ZipReader};

/// Number of distinct storages the checkpoint's tensors view, plus those
/// saved as bare storage objects (`torch.save(torch.FloatStorage(…))`).
fn distinct_storages(ckpt: &Checkpoint) -> usize {
    let mut ids = HashSet::new();
    for (_, t) in ckpt.tensors().unwrap() {
        ids.insert(t.tensor.untyped_storage().id());
    }
    for v in ckpt.root_value().leaves_once().unwrap() {
        if let Some(Object::Storage(s)) = v.raw().as_ext() {
            ids.insert(s.storage.id());
        }
    }
    ids.len()
}

/// Number of `data/…` records in a saved archive.
fn data_records(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let zip = ZipReader::new(bytes, &ZipLimits::default()).unwrap();
    let root = zip.root().to_owned();
    zip.entries()
        .iter()
        .filter(|e| zip.name(e).starts_with(&format!("{root}/data/")))
        .count()
}

fn save_ok(path: &Path, ckpt: &Checkpoint, what: &str) {
    stowage::save(path, ckpt).unwrap_or_else(|e| panic!("{what}: save: {e}"));
}

#[test]
fn every_fixture_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    for name in fixture_names() {
        let original = load_fixture(&name);
        let out = dir.path().join(format!("{name}.pt"));
        save_ok(&out, &original, &name);
        let back =
            stowage::load(&out).unwrap_or_else(|e| panic!("{name}: reloading stowage's file: {e}"));
        assert_eq!(back.format(), stowage::checkpoint::Format::TorchZip);

        // Tensors, values, sharing, flags, storage classes and locations.
        assert_manifest_eq(
            &format!("{name} (round trip)"),
            &full_manifest(&back).unwrap(),
            &full_manifest(&original).unwrap(),
            &[],
        );
        check_keys_match_sharing(&name, &back);
        // Containers, OrderedDicts and their BUILD state, scalars, dtypes, sizes.
        assert_eq!(
            describe(&back),
            describe(&original),
            "{name}: object graph differs after the round trip"
        );
        // (Counts of `ordered`/`state` are not compared: they include unreachable
        // nodes, e.g. each tensor's empty backward-hooks OrderedDict.)

        // Every storage is written once.
        let distinct = distinct_storages(&original);
        assert_eq!(
            data_records(&out),
            distinct,
            "{name}: data/ records vs distinct storages"
        );
        assert_eq!(
            back.storages().len(),
            distinct,
            "{name}: storage records after reload"
        );
    }
}

/// Counts the persistent ids a pickle loads: one per tensor object it
/// rebuilds (and per bare storage), however many paths reach each.
struct CountPersids(usize);

impl stowage_pickle::Hooks for CountPersids {
    type Ext = ();
    type Error = stowage::checkpoint::pickle::PickleError;
    fn find_class(&mut self, _: &str, _: &str) -> Result<Value<()>, Self::Error> {
        Ok(Value::Ext(()))
    }
    fn persistent_load(
        &mut self,
        _: &mut Graph<()>,
        _: Value<()>,
    ) -> Result<Value<()>, Self::Error> {
        self.0 += 1;
        Ok(Value::Ext(()))
    }
    /// Every call makes a dict (`OrderedDict()` gets items; the rest is unused).
    fn reduce(
        &mut self,
        g: &mut Graph<()>,
        _: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, Self::Error> {
        Ok(Value::Node(g.dict(Vec::new())))
    }
    fn build(
        &mut self,
        _: &mut Graph<()>,
        obj: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, Self::Error> {
        Ok(obj)
    }
    fn new_obj(
        &mut self,
        g: &mut Graph<()>,
        _: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, Self::Error> {
        Ok(Value::Node(g.dict(Vec::new())))
    }
}

/// The number of persistent ids in a torch zip archive's `data.pkl`.
fn persids(path: &Path) -> usize {
    let zip = ZipReader::new(std::fs::read(path).unwrap(), &ZipLimits::default()).unwrap();
    let entry = zip.find("data.pkl").expect("data.pkl");
    let pkl = zip.read_to_vec(entry).unwrap();
    let mut count = CountPersids(0);
    stowage_pickle::unpickle(&pkl, &mut count, &Default::default()).unwrap();
    count.0
}

/// A tensor object reachable by several paths (`{"a": t, "b": t}`) is written
/// once, as `torch.save` writes it: stowage's pickle rebuilds as many tensors as
/// PyTorch's own, and reloads with the same objects shared (NOTE [tensor identity]).
#[test]
fn each_tensor_object_is_written_once() {
    let dir = tempfile::tempdir().unwrap();
    for name in fixture_names() {
        let original = load_fixture(&name);
        let out = dir.path().join(format!("{name}.pt"));
        save_ok(&out, &original, &name);
        let back = stowage::load(&out).unwrap();
        assert_eq!(
            common::object_groups(&back),
            common::object_groups(&original),
            "{name}: which paths are one object"
        );
        if !common::LEGACY_FIXTURES.contains(&name.as_str()) {
            assert_eq!(
                persids(&out),
                persids(&fixture(&name)),
                "{name}: persistent ids"
            );
        }
    }
    // The fixture made for it: 16 paths, 6 objects, each rebuilt once.
    let out = dir.path().join("same_object.pt");
    assert_eq!(persids(&out), 6);
    // Saving a reloaded file again keeps them (the memo hands out one object).
    let back = stowage::load(&out).unwrap();
    let again = dir.path().join("again.pt");
    save_ok(&again, &back, "same_object again");
    assert_eq!(persids(&again), 6);
}

#[test]
fn saving_twice_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    for name in fixture_names() {
        let ckpt = load_fixture(&name);
        let out = dir.path().join("same.pt");
        save_ok(&out, &ckpt, &name);
        let first = std::fs::read(&out).unwrap();
        save_ok(&out, &ckpt, &name);
        let second = std::fs::read(&out).unwrap();
        assert!(
            first == second,
            "{name}: two saves of one checkpoint differ"
        );
        // And a save of the reloaded checkpoint is the same file again.
        let again = stowage::load(&out).unwrap();
        let out2 = dir.path().join("other").join("same.pt");
        std::fs::create_dir_all(out2.parent().unwrap()).unwrap();
        save_ok(&out2, &again, &name);
        assert!(
            std::fs::read(&out2).unwrap() == first,
            "{name}: save(load(save(x))) differs from save(x)"
        );
    }
}

#[test]
fn from_state_dict_save_load() {
    let w = Tensor::arange(0.0, 12.0, 1.0, DType::Float32)
        .unwrap()
        .view(&[3, 4])
        .unwrap();
    let wt = w.t().unwrap(); // shares w's storage
    let b = Tensor::from_slice(&[1i64, -2, 3]).unwrap();
    let h = Tensor::full(&[2], 0.5, DType::BFloat16).unwrap();
    let u = Tensor::from_slice(&[7u8, 8, 9])
        .unwrap()
        .view_dtype(DType::Float8E4M3Fn)
        .unwrap();
    let entries = vec![
        ("layer.weight", w.clone()),
        ("layer.weight_t", wt),
        ("layer.bias", b),
        ("half", h),
        ("f8", u),
    ];
    let ckpt = Checkpoint::from_state_dict(entries.clone());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sd.pt");
    save_ok(&out, &ckpt, "from_state_dict");
    let back = stowage::load(&out).unwrap();
    assert!(
        back.root_value().is_ordered(),
        "from_state_dict saves an OrderedDict"
    );
    let sd = back.state_dict().unwrap();
    assert_eq!(
        sd.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        entries.iter().map(|(k, _)| *k).collect::<Vec<_>>()
    );
    for ((name, got), (_, want)) in sd.iter().zip(&entries) {
        assert_eq!(got.dtype(), want.dtype(), "{name}");
        assert_eq!(
            (got.shape(), got.stride(), got.storage_offset()),
            (want.shape(), want.stride(), want.storage_offset()),
            "{name}"
        );
        assert_eq!(
            tensor_bytes(got).unwrap(),
            tensor_bytes(want).unwrap(),
            "{name}"
        );
    }
    assert!(
        sd[0].1.shares_storage_with(&sd[1].1),
        "weight and its transpose still share"
    );
    assert_eq!(data_records(&out), 4);
}

#[test]
fn one_storage_as_two_dtypes_is_refused() {
    let f = Tensor::arange(0.0, 4.0, 1.0, DType::Float32).unwrap();
    let i = f.view_dtype(DType::Int32).unwrap();
    assert!(f.shares_storage_with(&i));
    let ckpt = Checkpoint::from_state_dict([("f", f), ("i", i)]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("conflict.pt");
    let err =
        stowage::save(&out, &ckpt).expect_err("PyTorch refuses one storage saved as two types");
    match common::in_file(&err, &out) {
        Error::Checkpoint(CheckpointError::SaveConflict { first, second, .. }) => {
            assert_eq!((*first, *second), (DType::Float32, DType::Int32))
        }
        other => panic!("expected SaveConflict, got {other:?}"),
    }
    assert!(!out.exists(), "a refused save creates no file");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temporary file left"
    );
}

/// A meta tensor saves as `torch.save` saves it: without storage
/// (`_rebuild_meta_tensor_no_storage`), and loads back as a meta tensor.
#[test]
fn a_meta_tensor_saves_without_storage() {
    let m = Tensor::zeros_on(&[2, 3], DType::Float32, Device::META).unwrap();
    let ckpt = Checkpoint::from_state_dict([("m", m)]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("meta.pt");
    stowage::save(&out, &ckpt).unwrap();
    let back = stowage::load(&out).unwrap();
    assert!(back.storages().is_empty());
    let (_, t) = &back.tensors().unwrap()[0];
    assert!(t.tensor.is_meta());
    assert_eq!(
        (t.tensor.shape(), t.tensor.stride()),
        (&[2, 3][..], &[3, 1][..])
    );

    // A meta-loaded fixture, likewise: every tensor keeps its dtype, shape and stride.
    let meta = stowage::load_with(
        fixture("simple"),
        &LoadOptions::default().with_map_location(Device::META),
    )
    .unwrap();
    stowage::save(&out, &meta).unwrap();
    let back = stowage::load(&out).unwrap();
    let shapes = |c: &Checkpoint| -> Vec<_> {
        c.tensors()
            .unwrap()
            .iter()
            .map(|(p, t)| {
                (
                    p.clone(),
                    t.tensor.dtype(),
                    t.tensor.shape().to_vec(),
                    t.tensor.stride().to_vec(),
                    t.tensor.is_meta(),
                )
            })
            .collect()
    };
    assert_eq!(shapes(&back), shapes(&meta));
}

/// A tensor without data that is not on meta (a fake tensor) cannot be saved.
#[test]
fn saving_a_fake_tensor_is_no_data() {
    let fake = Tensor::from_parts(
        stowage::UntypedStorage::new_fake(24, Device::CPU),
        DType::Float32,
        stowage::layout::Layout::contiguous(&[2, 3]).unwrap(),
    )
    .unwrap();
    let ckpt = Checkpoint::from_state_dict([("f", fake)]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fake.pt");
    let err = stowage::save(&out, &ckpt).expect_err("fake tensors have no bytes to save");
    assert!(
        matches!(
            common::in_file(&err, &out),
            Error::Storage(StorageError::NoData { .. })
        ),
        "{err:?}"
    );
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains("stowage-tmp"))
        .collect()
}

#[test]
fn save_is_crash_safe() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model.pt");
    save_ok(&out, &load_fixture("simple"), "simple");
    // Overwriting an existing file goes through a temporary sibling that is renamed away.
    save_ok(&out, &load_fixture("views"), "views over simple");
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["model.pt"]);
    let before = std::fs::read(&out).unwrap();
    assert_eq!(
        manifest(&stowage::load(&out).unwrap(), Hash::Values).unwrap(),
        common::expected_manifest("views")
    );

    // A save that fails part-way (a fake tensor, without data, after real ones)
    // leaves the old file as it was.
    let mut entries = load_fixture("simple").state_dict().unwrap();
    let meta = Tensor::from_parts(
        stowage::UntypedStorage::new_fake(16, Device::CPU),
        DType::Float32,
        stowage::layout::Layout::contiguous(&[4]).unwrap(),
    )
    .unwrap();
    entries.push(("meta".into(), meta));
    let failing = Checkpoint::from_state_dict(entries);
    let err = stowage::save(&out, &failing).expect_err("fake tensor");
    assert!(
        matches!(
            common::in_file(&err, &out),
            Error::Storage(StorageError::NoData { .. })
        ),
        "{err:?}"
    );
    assert!(
        std::fs::read(&out).unwrap() == before,
        "the failed save changed the earlier file"
    );
    assert_eq!(
        temp_files(dir.path()),
        Vec::<String>::new(),
        "the failed save left a temporary file"
    );

    // Same for the safetensors writer.
    let st = dir.path().join("model.safetensors");
    stowage::checkpoint::safetensors::save(&st, &load_fixture("simple")).unwrap();
    let st_before = std::fs::read(&st).unwrap();
    assert!(stowage::checkpoint::safetensors::save(&st, &failing).is_err());
    assert!(std::fs::read(&st).unwrap() == st_before);
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
}

/// Whether the safetensors writer can hold this tensor.
fn safetensors_can_hold(t: &TensorObject) -> bool {
    t.quantization().is_none()
        && t.tensor.dtype().kind() != Kind::Quantized
        && t.tensor.dtype().safetensors().is_some()
}

/// Saves `ckpt` to safetensors, reloads it, and checks every tensor by dotted name.
fn check_safetensors(name: &str, ckpt: &Checkpoint, out: &Path) {
    stowage::checkpoint::safetensors::save(out, ckpt)
        .unwrap_or_else(|e| panic!("{name}: safetensors save: {e}"));
    let back = stowage::load(out).unwrap_or_else(|e| panic!("{name}: safetensors load: {e}"));
    assert_eq!(back.format(), stowage::checkpoint::Format::Safetensors);
    let got = back.state_dict().unwrap();
    let want = ckpt.tensors().unwrap();
    let mut names: Vec<String> = want.iter().map(|(p, _)| dotted(p)).collect();
    let mut got_names: Vec<String> = got.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    got_names.sort();
    assert_eq!(got_names, names, "{name}: safetensors names");
    // Tensors that shared a storage in the checkpoint saved (ties, which a
    // nested checkpoint's structure keeps).
    let source = |n: &str| {
        let (_, t) = want.iter().find(|(p, _)| dotted(p) == n).unwrap();
        t.tensor.clone()
    };
    let tied = |n: &str| {
        let t = source(n);
        want.iter()
            .any(|(p, u)| dotted(p) != n && u.tensor.shares_storage_with(&t))
    };
    for (p, t) in &want {
        let n = dotted(p);
        let (_, g) = got.iter().find(|(k, _)| *k == n).unwrap();
        assert_eq!(g.dtype(), t.tensor.dtype(), "{name}: {n}");
        assert_eq!(g.shape(), t.tensor.shape(), "{name}: {n}");
        assert!(g.is_contiguous() || tied(&n), "{name}: {n}");
        assert_eq!(
            sha256_hex(&tensor_bytes(g).unwrap()),
            sha256_hex(&logical_bytes(t).unwrap()),
            "{name}: {n}: logical values differ"
        );
    }
    // safetensors has no sharing of its own: tensors share a storage after
    // the load only where they shared one before.
    for (i, (na, a)) in got.iter().enumerate() {
        for (nb, b) in &got[i + 1..] {
            assert!(
                !a.shares_storage_with(b) || source(na).shares_storage_with(&source(nb)),
                "{name}: {na} and {nb} share a storage they did not"
            );
        }
    }
}

#[test]
fn safetensors_round_trip_of_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let mut refused = Vec::new();
    for name in fixture_names() {
        let ckpt = load_fixture(&name);
        let tensors = ckpt.tensors().unwrap();
        let out = dir.path().join(format!("{name}.safetensors"));
        match tensors.iter().find(|(_, t)| !safetensors_can_hold(t)) {
            None => check_safetensors(&name, &ckpt, &out),
            Some((bad_path, bad)) => {
                refused.push(name.clone());
                let err = stowage::checkpoint::safetensors::save(&out, &ckpt)
                    .expect_err("unsupported dtype");
                match &err {
                    Error::AtPath { path, source } => {
                        assert_eq!(
                            path,
                            &dotted(bad_path),
                            "{name}: the error names the first unsupported tensor"
                        );
                        match &**source {
                            Error::Tensor(TensorError::DTypeUnsupported { dtype, .. }) => {
                                assert_eq!(*dtype, bad.tensor.dtype(), "{name}")
                            }
                            other => panic!(
                                "{name}: expected DTypeUnsupported inside AtPath, got {other:?}"
                            ),
                        }
                    }
                    other => panic!("{name}: expected Error::AtPath, got {other:?}"),
                }
                let msg = err.to_string();
                assert!(
                    msg.contains(&dotted(bad_path)) && msg.contains(bad.tensor.dtype().name()),
                    "{name}: message {msg:?}"
                );
                assert!(
                    !out.exists(),
                    "{name}: a refused safetensors save created the file"
                );

                // The rest of the fixture converts.
                let keep: Vec<(String, Tensor)> = tensors
                    .iter()
                    .filter(|(_, t)| safetensors_can_hold(t))
                    .map(|(p, t)| (dotted(p), t.resolved().unwrap()))
                    .collect();
                let sub = Checkpoint::from_state_dict(keep);
                check_safetensors(&format!("{name} (supported part)"), &sub, &out);
            }
        }
    }
    refused.sort();
    assert_eq!(
        refused,
        ["big_endian", "dtypes", "legacy_classes", "quantized"],
        "fixtures with complex128 or quantized tensors"
    );
}

#[test]
fn safetensors_refuses_complex128_and_quantized_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let c = Tensor::zeros(&[2], DType::Complex128).unwrap();
    let ok = Tensor::zeros(&[2], DType::Float32).unwrap();
    let ckpt = Checkpoint::from_value(PyValue::OrderedDict(vec![
        ("fine".into(), ok.into()),
        (3.into(), PyValue::dict([("z", c)])),
    ]))
    .unwrap();
    assert_eq!(
        ckpt.tensors().unwrap()[1].0,
        vec![PathKey::Index(3), PathKey::Key("z".into())]
    );
    match stowage::checkpoint::safetensors::save(dir.path().join("c.safetensors"), &ckpt) {
        Err(Error::AtPath { path, source }) => {
            assert_eq!(path, "3.z");
            assert!(
                matches!(
                    *source,
                    Error::Tensor(TensorError::DTypeUnsupported {
                        dtype: DType::Complex128,
                        ..
                    })
                ),
                "{source:?}"
            );
        }
        other => panic!("expected AtPath(3.z, DTypeUnsupported), got {other:?}"),
    }

    let q = load_fixture("quantized");
    let first = dotted(&q.tensors().unwrap()[0].0);
    match stowage::checkpoint::safetensors::save(dir.path().join("q.safetensors"), &q) {
        Err(Error::AtPath { path, source }) => {
            assert_eq!(path, first);
            assert!(
                matches!(*source, Error::Tensor(TensorError::DTypeUnsupported { .. })),
                "{source:?}"
            );
        }
        other => panic!("expected AtPath for the quantized tensor, got {other:?}"),
    }
}

#[test]
fn root_tensor_is_named_tensor_in_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("root.safetensors");
    stowage::checkpoint::safetensors::save(&out, &load_fixture("root_tensor")).unwrap();
    let back = stowage::load(&out).unwrap();
    let sd = back.state_dict().unwrap();
    assert_eq!(sd.len(), 1);
    assert_eq!(sd[0].0, "tensor");
    assert_eq!(sd[0].1.shape(), &[5, 4]);
}

#[test]
fn safetensors_file_round_trips_through_torch_zip() {
    // safetensors → .pt → load: names, values, one storage each.
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("s.safetensors");
    stowage::checkpoint::safetensors::save(&st, &load_fixture("new_dtypes")).unwrap();
    let from_st = stowage::load(&st).unwrap();
    let pt = dir.path().join("s.pt");
    save_ok(&pt, &from_st, "safetensors → pt");
    let back = stowage::load(&pt).unwrap();
    assert_manifest_eq(
        "safetensors → pt",
        &manifest(&back, Hash::Values).unwrap(),
        &manifest(&from_st, Hash::Values).unwrap(),
        &[],
    );
    assert_eq!(data_records(&pt), from_st.tensors().unwrap().len());
}

#[test]
fn state_dict_metadata_survives_the_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["state_dict", "state_dict_linear"] {
        let out = dir.path().join(format!("{name}.pt"));
        save_ok(&out, &load_fixture(name), name);
        let back = stowage::load(&out).unwrap();
        let root = back.root_value();
        assert!(root.is_ordered(), "{name}: root is an OrderedDict again");
        let state = root
            .state()
            .unwrap_or_else(|| panic!("{name}: _metadata state lost"));
        let meta = state.get("_metadata").expect("_metadata");
        assert!(
            meta.is_ordered(),
            "{name}: _metadata is an OrderedDict again"
        );
    }
}

/// Tied tensors (one storage viewed whole, again, transposed and sliced) are
/// written to a safetensors file as copies; in a nested checkpoint, whose
/// structure the file keeps, a load, eager or lazy, makes them views of one
/// storage again, with their values. A flat state dict stays flat, as every
/// reader reads it: its tied tensors come back as copies.
#[test]
fn tied_tensors_share_their_storage_again_after_safetensors() {
    let w = Tensor::arange(0.0, 6.0, 1.0, DType::Float32)
        .unwrap()
        .view(&[2, 3])
        .unwrap();
    let other = Tensor::full(&[3], 2.0, DType::Float32).unwrap();
    let entries = vec![
        ("embed.weight", w.clone()),
        ("lm_head.weight", w.clone()),
        ("t", w.t().unwrap()),
        ("row", w.narrow(0, 1, 1).unwrap()),
        ("alone", other),
    ];
    use stowage::checkpoint::PyValue;
    let state = || {
        PyValue::OrderedDict(
            entries
                .iter()
                .map(|(k, t)| ((*k).into(), t.clone().into()))
                .collect(),
        )
    };
    let nested = PyValue::Dict(vec![("model".into(), state()), ("epoch".into(), 3.into())]);
    let dir = tempfile::tempdir().unwrap();
    for (what, ckpt, prefix) in [
        ("flat", Checkpoint::from_value(state()).unwrap(), ""),
        ("nested", Checkpoint::from_value(nested).unwrap(), "model."),
    ] {
        let st = dir.path().join(format!("{what}.safetensors"));
        stowage::checkpoint::safetensors::save(&st, &ckpt).unwrap();
        for mode in [stowage::LoadMode::Eager, stowage::LoadMode::Lazy] {
            let back = stowage::load_with(&st, &LoadOptions::default().with_mode(mode)).unwrap();
            let tensor = |name: &str| {
                back.get(&format!("{prefix}{name}"))
                    .and_then(|v| Ok(v.as_tensor()?.tensor.clone()))
                    .unwrap_or_else(|e| panic!("{what}, {mode:?}: {name}: {e}"))
            };
            let owner = tensor("embed.weight").untyped_storage().id();
            for (name, want) in &entries {
                let got = tensor(name);
                let tied = what == "nested" && *name != "alone";
                assert_eq!(got.shape(), want.shape(), "{what}, {mode:?}: {name}");
                if tied {
                    // The view it was, not a contiguous copy.
                    assert_eq!(got.stride(), want.stride(), "{what}, {mode:?}: {name}");
                    assert_eq!(
                        got.storage_offset(),
                        want.storage_offset(),
                        "{what}, {mode:?}: {name}"
                    );
                }
                assert_eq!(
                    got.to_vec::<f32>().unwrap(),
                    want.to_vec::<f32>().unwrap(),
                    "{what}, {mode:?}: {name}"
                );
                let shared = got.untyped_storage().id() == owner;
                assert_eq!(
                    shared,
                    tied || *name == "embed.weight",
                    "{what}, {mode:?}: {name} shares: {shared}"
                );
            }
        }
    }
}

/// `Checkpoint::select` keeps the storages of its subtree, those its tensors
/// view and those saved as storage objects of their own, and no others; a
/// save of the selection writes each of them once.
#[test]
fn a_selection_keeps_the_storages_of_its_subtree() {
    let ckpt = load_fixture("legacy_classes");
    let dir = tempfile::tempdir().unwrap();
    for (path, storages) in [("storages", 17), ("tensors", 15)] {
        let selected = ckpt.select(path).unwrap();
        assert_eq!(selected.storages().len(), storages, "{path}");
        assert_eq!(distinct_storages(&selected), storages, "{path}");
        let out = dir.path().join(format!("{path}.pt"));
        stowage::save(&out, &selected).unwrap();
        assert_eq!(data_records(&out), storages, "{path}");
        assert_eq!(distinct_storages(&stowage::load(&out).unwrap()), storages);
    }
}
