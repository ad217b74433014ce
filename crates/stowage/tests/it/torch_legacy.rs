//! The pre-1.6 single-stream format (`_use_new_zipfile_serialization=False`)
//! against real PyTorch's reading of `legacy_format.pt` and `legacy_views.pt`.

use crate::common::{
    assert_manifest_eq, check_keys_match_sharing, describe, expected_manifest, fixture,
    load_fixture, manifest, Hash, LEGACY_FIXTURES,
};
use stowage::checkpoint::{ByteOrder, Format, PathKey};
use stowage::LoadOptions;
use stowage::StorageError;
use stowage::{DType, Device, Error, Scalar};

#[test]
fn legacy_fixtures_match_pytorch_manifest() {
    for name in LEGACY_FIXTURES {
        let ckpt = load_fixture(name);
        assert_eq!(ckpt.format(), Format::TorchLegacy, "{name}");
        assert_eq!(ckpt.byteorder(), ByteOrder::Little, "{name}");
        let got = manifest(&ckpt, Hash::Values).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_manifest_eq(name, &got, &expected_manifest(name), &[]);
        check_keys_match_sharing(name, &ckpt);
    }
}

#[test]
fn legacy_format_transposed_view_shares_its_storage() {
    let ckpt = load_fixture("legacy_format");
    let tensors = ckpt.tensors().unwrap();
    let expected = expected_manifest("legacy_format");
    assert_eq!(tensors.len(), expected.len());
    // Tensors in one torch storage group share one stowage storage, and only those.
    for (i, (pi, ti)) in tensors.iter().enumerate() {
        for (j, (pj, tj)) in tensors.iter().enumerate() {
            let same = expected[i]["storage_group"] == expected[j]["storage_group"];
            assert_eq!(
                ti.tensor.shares_storage_with(&tj.tensor),
                same,
                "{pi:?} / {pj:?}"
            );
        }
    }
    assert!(
        tensors.iter().any(|(_, t)| !t.tensor.is_contiguous()),
        "legacy_format.pt holds a transposed view"
    );
    // Pointer-valued storage keys survive as the records' keys.
    for r in ckpt.storages() {
        assert!(r.key.bytes().all(|b| b.is_ascii_digit()), "key {:?}", r.key);
        assert_ne!(
            r.storage_type(),
            "UntypedStorage",
            "legacy storages are typed"
        );
    }
}

#[test]
fn legacy_views_sharing_and_parameter() {
    let ckpt = load_fixture("legacy_views");
    let tensors = ckpt.tensors().unwrap();
    let expected = expected_manifest("legacy_views");
    let groups: std::collections::BTreeSet<_> = expected
        .iter()
        .map(|e| e["storage_group"].as_u64().unwrap())
        .collect();
    // Every distinct storage is one record, read once.
    let mut distinct: Vec<&stowage::UntypedStorage> = Vec::new();
    for (_, t) in &tensors {
        let s = t.tensor.untyped_storage();
        if !distinct.iter().any(|d| d.is_same(s)) {
            distinct.push(s);
        }
    }
    assert_eq!(distinct.len(), groups.len());
    assert_eq!(ckpt.storages().len(), groups.len());

    // The Parameter over base[2, 1:] at offset 11, sharing base's storage.
    let (ppath, param) = tensors
        .iter()
        .find(|(_, t)| t.parameter)
        .expect("a Parameter");
    assert_eq!(param.tensor.storage_offset(), 11, "{ppath:?}");
    let base = tensors
        .iter()
        .find(|(p, t)| {
            !t.parameter
                && t.tensor.shares_storage_with(&param.tensor)
                && t.tensor.storage_offset() == 0
                && p != ppath
        })
        .map(|(_, t)| &t.tensor)
        .expect("the base the Parameter views");
    // A write through the base is seen through the Parameter.
    let before = param.tensor.get(&[0]).unwrap();
    let idx: Vec<isize> = match base.dim() {
        2 => {
            let cols = base.shape()[1] as isize;
            vec![11 / cols, 11 % cols]
        }
        _ => vec![11],
    };
    assert_eq!(base.get(&idx).unwrap(), before);
    base.set(&idx, 99.0).unwrap();
    assert_eq!(param.tensor.get(&[0]).unwrap(), Scalar::Float(99.0));

    let dtypes: Vec<DType> = tensors.iter().map(|(_, t)| t.tensor.dtype()).collect();
    for d in [
        DType::Float16,
        DType::Bool,
        DType::Int8,
        DType::Float64,
        DType::Int64,
    ] {
        assert!(dtypes.contains(&d), "{d} missing from {dtypes:?}");
    }
    assert!(
        tensors.iter().any(|(_, t)| t.tensor.numel() == 0),
        "an empty tensor"
    );
}

#[test]
fn legacy_load_bytes_and_meta() {
    for name in LEGACY_FIXTURES {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let mem = stowage::checkpoint::load_bytes(&bytes, &LoadOptions::default()).unwrap();
        let file = load_fixture(name);
        assert_eq!(describe(&mem), describe(&file), "{name}");
        assert_manifest_eq(
            name,
            &manifest(&mem, Hash::Values).unwrap(),
            &manifest(&file, Hash::Values).unwrap(),
            &[],
        );

        let meta = stowage::checkpoint::load_bytes(
            &bytes,
            &LoadOptions::default().with_map_location(Device::META),
        )
        .unwrap_or_else(|e| panic!("{name} on meta: {e}"));
        assert_manifest_eq(
            name,
            &manifest(&meta, Hash::None).unwrap(),
            &expected_manifest(name),
            &["sha256"],
        );
        for (p, t) in meta.tensors().unwrap() {
            if t.tensor.numel() > 0 {
                assert!(
                    matches!(
                        t.tensor.get(&vec![0; t.tensor.dim()]),
                        Err(Error::Storage(StorageError::NoData { .. }))
                    ),
                    "{name}: {p:?}"
                );
            }
        }
    }
}

#[test]
fn legacy_paths_are_keys_and_indices() {
    // Both legacy fixtures are dicts at the root: every path starts with a string key.
    for name in LEGACY_FIXTURES {
        for (p, _) in load_fixture(name).tensors().unwrap() {
            assert!(matches!(p.first(), Some(PathKey::Key(_))), "{name}: {p:?}");
        }
    }
}

/// `pickle_protocol=3` writes the magic number's pickle with `PROTO 3`:
/// such a file (here a fixture's first pickle marked so) reads as the
/// original, in a load and a scan; protocol 4, which opens with a `FRAME`
/// PyTorch's `weights_only` loader refuses, stays not a checkpoint.
#[test]
fn a_legacy_file_of_protocol_3_loads_and_4_does_not() {
    use stowage::checkpoint::scan::scan_bytes;
    for name in LEGACY_FIXTURES {
        let mut bytes = std::fs::read(fixture(name)).unwrap();
        assert_eq!(bytes[..2], [0x80, 2], "{name}");
        bytes[1] = 3;
        let three = stowage::checkpoint::load_bytes(&bytes, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{name} as protocol 3: {e}"));
        assert_eq!(describe(&three), describe(&load_fixture(name)), "{name}");
        let scan = scan_bytes(&bytes, &LoadOptions::default());
        assert!(scan.error.is_none(), "{name}: {scan:?}");
        assert_eq!(
            scan.kind,
            Some(stowage::checkpoint::scan::ScanKind::TorchLegacy),
            "{name}"
        );
        bytes[1] = 4;
        let four = stowage::checkpoint::load_bytes(&bytes, &LoadOptions::default());
        assert!(
            matches!(
                four,
                Err(Error::Format(stowage::FormatError::NotACheckpoint { .. }))
            ),
            "{name} as protocol 4: {four:?}"
        );
    }
}
