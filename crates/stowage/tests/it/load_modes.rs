//! Memory-mapped, meta and fake loading of checkpoints written by real PyTorch.

use crate::common;
use stowage::StorageError;

use crate::common::{
    assert_manifest_eq, describe, expected_manifest, fixture, fixture_names, full_manifest,
    manifest, Hash,
};
use stowage::{load_mmap, load_with, LoadMode, LoadOptions};
use stowage::{Device, Error};

fn mmap(name: &str) -> stowage::Checkpoint {
    // SAFETY: the fixtures are not modified while the tests run.
    unsafe { load_mmap(fixture(name), &LoadOptions::default()) }
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn mmap_loads_give_pytorchs_answer_for_every_fixture() {
    for name in fixture_names() {
        let ckpt = mmap(&name);
        let got = manifest(&ckpt, Hash::Values).unwrap();
        assert_manifest_eq(
            &format!("{name} (mmap)"),
            &got,
            &expected_manifest(&name),
            &[],
        );
    }
}

#[test]
fn mmap_storages_are_slices_of_the_file_and_writes_stay_private() {
    let path = fixture("views");
    let before = std::fs::read(&path).unwrap();
    let ckpt = mmap("views");
    let storage = &ckpt.storages()[0].storage;
    assert!(
        storage.is_shared(),
        "PyTorch reports mapped storages as shared"
    );
    assert!(matches!(
        storage.resize_(8),
        Err(Error::Storage(StorageError::NotResizable))
    ));
    // Every view shares the one mapped storage, and a write is seen by the others
    // but never reaches the file (copy-on-write).
    let tensors = ckpt.tensors().unwrap();
    let base = &tensors
        .iter()
        .find(|(p, _)| common::path_json(p) == serde_json::json!(["base"]))
        .unwrap()
        .1
        .tensor;
    base.fill_(3.0).unwrap();
    for (_, t) in &tensors {
        assert!(t.tensor.shares_storage_with(base));
        assert!(t.tensor.to_vec::<f32>().unwrap().iter().all(|&v| v == 3.0));
    }
    drop(ckpt);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn mmap_refuses_hostile_files_like_the_eager_loader() {
    for entry in std::fs::read_dir(common::hostile_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("pt") {
            continue;
        }
        let eager = stowage::load(&path);
        // SAFETY: the fixtures are not modified while the tests run.
        let mapped = unsafe { load_mmap(&path, &LoadOptions::default()) };
        assert_eq!(
            eager.is_ok(),
            mapped.is_ok(),
            "{}: eager {:?} vs mmap {:?}",
            path.display(),
            eager.err(),
            mapped.err()
        );
    }
}

#[test]
fn fake_loading_keeps_metadata_reads_no_bytes_and_pretends_a_device() {
    let cuda: Device = "cuda:1".parse().unwrap();
    let options = LoadOptions::default()
        .with_mode(LoadMode::Fake)
        .with_location("cpu", cuda);
    for name in fixture_names() {
        let ckpt = load_with(fixture(&name), &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = manifest(&ckpt, Hash::None).unwrap();
        assert_manifest_eq(
            &format!("{name} (fake)"),
            &got,
            &expected_manifest(&name),
            &["sha256"],
        );
        for (_, t) in ckpt.tensors().unwrap() {
            assert!(t.tensor.is_fake(), "{name}");
            assert_eq!(t.tensor.device(), cuda);
            assert!(matches!(
                t.tensor.scalars(),
                Err(Error::Storage(StorageError::NoData { .. }))
            ));
        }
    }
}

#[test]
fn location_maps_and_map_location_place_storages() {
    let options = LoadOptions::default().with_location("cpu", "cuda:0".parse().unwrap());
    let ckpt = load_with(fixture("simple"), &options).unwrap();
    assert!(ckpt
        .storages()
        .iter()
        .all(|s| s.storage.device() == "cuda:0".parse().unwrap() && &*s.location == "cpu"));
    // Bytes are still there (in host memory) and right.
    let got = manifest(&ckpt, Hash::Values).unwrap();
    assert_manifest_eq("simple on cuda:0", &got, &expected_manifest("simple"), &[]);
    let options = options.with_map_location(Device::META);
    let meta = load_with(fixture("simple"), &options).unwrap();
    assert!(meta
        .storages()
        .iter()
        .all(|s| s.storage.is_meta() && !s.storage.has_data()));
}

#[test]
fn legacy_files_are_mapped_where_alignment_allows() {
    for name in common::LEGACY_FIXTURES {
        let ckpt = mmap(name);
        let got = manifest(&ckpt, Hash::Values).unwrap();
        assert_manifest_eq(
            &format!("{name} (mmap)"),
            &got,
            &expected_manifest(name),
            &[],
        );
        for s in ckpt.storages() {
            // A one-byte element is aligned wherever its blob starts; wider ones are
            // mapped only when the blob's offset allows (these fixtures' do not).
            if s.dtype.map_or(1, |d| d.size()) == 1 && s.storage.nbytes() > 0 {
                assert!(
                    s.storage.is_shared(),
                    "{name}: storage {} ({:?}) was copied",
                    s.key,
                    s.dtype
                );
            }
        }
    }
    let views = mmap("legacy_views");
    assert!(views.storages().iter().any(|s| s.storage.is_shared()));
}

fn lazy_options() -> LoadOptions {
    LoadOptions::default().with_mode(LoadMode::Lazy)
}

#[test]
fn lazy_loads_read_each_storage_on_first_touch() {
    for name in fixture_names() {
        let ckpt =
            load_with(fixture(&name), &lazy_options()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = manifest(&ckpt, Hash::Values).unwrap();
        assert_manifest_eq(
            &format!("{name} (lazy)"),
            &got,
            &expected_manifest(&name),
            &[],
        );
    }
    let ckpt = load_with(fixture("simple"), &lazy_options()).unwrap();
    assert!(ckpt.storages().iter().all(|s| !s.storage.is_loaded()));
    let (_, first) = &ckpt.tensors().unwrap()[0];
    assert_eq!(first.tensor.data_ptr(), 0, "nothing read yet");
    first.tensor.to_vec::<f32>().unwrap();
    assert!(first.tensor.untyped_storage().is_loaded());
    assert_ne!(first.tensor.data_ptr(), 0);
    assert_eq!(
        ckpt.storages()
            .iter()
            .filter(|s| s.storage.is_loaded())
            .count(),
        1
    );
}

#[test]
fn a_lazy_storage_whose_file_shrank_gives_an_error_on_touch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("simple.pt");
    std::fs::copy(fixture("simple"), &path).unwrap();
    let ckpt = load_with(&path, &lazy_options()).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100)
        .unwrap();
    let (_, t) = &ckpt.tensors().unwrap()[0];
    let e = t.tensor.to_vec::<f32>().expect_err("the record is gone");
    // The error names the file and the record, though it comes long after the load.
    assert!(
        matches!(&e, Error::InFile { path: p, .. } if p == &path),
        "{e:?}"
    );
    assert!(e.to_string().contains("data/0"), "{e}");
    // Named as a record past the file's end as it is now, not a short read.
    assert!(
        e.to_string().contains("past the end of the 100-byte file"),
        "{e}"
    );
    assert!(!t.tensor.untyped_storage().is_loaded());
}

#[test]
fn total_storage_bytes_are_limited_even_when_nothing_is_read() {
    for meta in [false, true] {
        let options = {
            let options = LoadOptions::default().with_max_storage_bytes(100);
            match meta {
                true => options.with_map_location(Device::META),
                false => options,
            }
        };
        // simple.pt's storages hold 72 bytes; dtypes.pt's more than 100.
        assert!(load_with(fixture("simple"), &options).is_ok());
        match load_with(fixture("dtypes"), &options) {
            Err(Error::InFile { source, .. }) => {
                let text = source.to_string();
                // The limit named, and how to raise it (issue 43, item 4).
                assert!(text.contains("bytes of storages (storage-bytes)"), "{text}");
                assert!(text.contains("STOWAGE_LIMITS=storage-bytes=N"), "{text}");
            }
            other => panic!("{:?}", other.map(|c| c.storages().len())),
        }
    }
}

/// The memo scan and the release of rebuild arguments change what a load
/// keeps in memory, never what it loads: every fixture describes the same
/// with the scan on (the default) and off (every memo entry stored, so
/// nothing a memo entry holds is released).
#[test]
fn the_memo_scan_changes_nothing_a_load_returns() {
    let limits = stowage::checkpoint::pickle::Limits::default().with_scan_memo(false);
    let every = LoadOptions::default().with_pickle_limits(limits);
    for name in fixture_names() {
        let scanned = load_with(fixture(&name), &LoadOptions::default()).unwrap();
        let stored = load_with(fixture(&name), &every).unwrap();
        assert_eq!(describe(&scanned), describe(&stored), "{name}");
        assert_eq!(
            full_manifest(&scanned).unwrap(),
            full_manifest(&stored).unwrap(),
            "{name}"
        );
    }
}

/// A fake load of a safetensors file reads no tensor bytes either.
#[test]
fn fake_loading_of_safetensors_reads_no_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state_dict.safetensors");
    let eager = stowage::load(fixture("state_dict")).unwrap();
    stowage::checkpoint::safetensors::save(&path, &eager).unwrap();
    let cuda: Device = "cuda:0".parse().unwrap();
    let options = LoadOptions::default()
        .with_mode(LoadMode::Fake)
        .with_map_location(cuda);
    let fake = load_with(&path, &options).unwrap();
    let reread = stowage::load(&path).unwrap();
    let tensors = fake.state_dict().unwrap();
    assert_eq!(tensors.len(), reread.state_dict().unwrap().len());
    for ((name, t), (_, r)) in tensors.iter().zip(reread.state_dict().unwrap()) {
        assert!(t.is_fake() && t.device() == cuda, "{name}");
        assert_eq!((t.shape(), t.dtype()), (r.shape(), r.dtype()), "{name}");
        assert!(
            matches!(
                t.scalars(),
                Err(Error::Storage(StorageError::NoData { .. }))
            ),
            "{name}"
        );
    }
}

/// Every fixture safetensors can hold, written as safetensors into `dir`.
fn safetensors_fixtures(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    fixture_names()
        .into_iter()
        .filter_map(|name| {
            let path = dir.join(format!("{name}.safetensors"));
            let ckpt = stowage::load(fixture(&name)).unwrap();
            stowage::checkpoint::safetensors::save(&path, &ckpt)
                .ok()
                .map(|()| path)
        })
        .collect()
}

/// Each tensor's name, dtype, shape and bytes, in order.
fn contents(ckpt: &stowage::Checkpoint) -> Vec<(String, String, Vec<usize>, Vec<u8>)> {
    ckpt.state_dict()
        .unwrap()
        .into_iter()
        .map(|(name, t)| {
            let bytes = t.contiguous().unwrap().untyped_storage().tolist().unwrap();
            (name, t.dtype().to_string(), t.shape().to_vec(), bytes)
        })
        .collect()
}

/// A memory-mapped safetensors load makes each tensor a view of the file
/// mapping (nothing copied), as the torch zip load does, and gives what the
/// eager load gives.
#[test]
fn mmap_safetensors_storages_are_views_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = safetensors_fixtures(dir.path());
    assert!(
        files.len() > 10,
        "only {} fixtures as safetensors",
        files.len()
    );
    for path in &files {
        let eager = stowage::load(path).unwrap();
        // SAFETY: the file is not modified while mapped.
        let mapped = unsafe { load_mmap(path, &LoadOptions::default()) }.unwrap();
        assert_eq!(contents(&mapped), contents(&eager), "{}", path.display());
        for s in mapped.storages().iter().filter(|s| s.storage.nbytes() > 0) {
            assert!(s.storage.is_shared(), "{}: a copy", path.display());
        }
    }
    // Writes through a mapped storage stay private (copy-on-write).
    let path = dir.path().join("simple.safetensors");
    let before = std::fs::read(&path).unwrap();
    // SAFETY: as above.
    let mapped = unsafe { load_mmap(&path, &LoadOptions::default()) }.unwrap();
    for (_, t) in mapped.state_dict().unwrap() {
        t.untyped_storage().fill_(7).unwrap();
    }
    drop(mapped);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// A lazy safetensors load reads each tensor on first touch, and a read that
/// fails later names the file and the tensor.
#[test]
fn lazy_safetensors_read_each_tensor_on_first_touch() {
    let dir = tempfile::tempdir().unwrap();
    for path in safetensors_fixtures(dir.path()) {
        let eager = stowage::load(&path).unwrap();
        let lazy = load_with(&path, &lazy_options()).unwrap();
        assert!(
            lazy.storages()
                .iter()
                .all(|s| s.storage.nbytes() == 0 || !s.storage.is_loaded()),
            "{}: read while loading",
            path.display()
        );
        assert_eq!(contents(&lazy), contents(&eager), "{}", path.display());
    }
    let path = dir.path().join("simple.safetensors");
    let lazy = load_with(&path, &lazy_options()).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(10)
        .unwrap();
    let (name, t) = &lazy.state_dict().unwrap()[0];
    let e = t.to_vec::<f32>().expect_err("the bytes are gone");
    assert!(
        matches!(&e, Error::InFile { path: p, .. } if p == &path),
        "{e:?}"
    );
    assert!(e.to_string().contains(name.as_str()), "{e}");
}

/// Huge pages change where storages live, never what they hold: every
/// fixture loads with them as PyTorch loads it, and a storage of several
/// 2 MiB pages (a tail included) reads back its bytes.
#[test]
fn loads_in_huge_pages_give_pytorchs_answer() {
    let options = LoadOptions::default().with_huge_pages(true);
    for name in fixture_names() {
        let ckpt = load_with(fixture(&name), &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = manifest(&ckpt, Hash::Values).unwrap();
        assert_manifest_eq(
            &format!("{name} (huge pages)"),
            &got,
            &expected_manifest(&name),
            &[],
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.pt");
    let values: Vec<f32> = (0..(5 << 20) / 4 + 333).map(|i| i as f32).collect();
    let tensor = stowage::Tensor::from_vec(values.clone(), &[values.len()]).unwrap();
    stowage::save(
        &path,
        &stowage::Checkpoint::from_state_dict([("w", tensor)]),
    )
    .unwrap();
    let ckpt = load_with(&path, &options).unwrap();
    let tensors = ckpt.tensors().unwrap();
    assert_eq!(tensors[0].1.tensor.to_vec::<f32>().unwrap(), values);
}
