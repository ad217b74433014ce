//! The torch zip format against real PyTorch: every fixture in
//! `tests/fixtures` (written by PyTorch 2.15) loads, and each tensor matches
//! what PyTorch reports for it (`NAME.pt.json`), sharing included; plus the
//! behaviours each fixture exists for.

use crate::common;
use stowage::{StorageError, TensorError};

use crate::common::{
    assert_manifest_eq, check_keys_match_sharing, describe, expected_manifest, fixture,
    fixture_names, load_fixture, manifest, Hash, LEGACY_FIXTURES,
};
use stowage::checkpoint::{ByteOrder, Format, PathKey, TensorObject, ValueKind};
use stowage::{Checkpoint, LoadMode, LoadOptions};
use stowage::{DType, Device, Error, Scalar, Tensor};

fn zip_fixtures() -> Vec<String> {
    fixture_names()
        .into_iter()
        .filter(|n| !LEGACY_FIXTURES.contains(&n.as_str()))
        .collect()
}

/// The tensor at `path` (string keys), panicking when absent.
fn at<'c>(ckpt: &'c Checkpoint, path: &[&str]) -> &'c TensorObject {
    let want: Vec<PathKey> = path.iter().map(|k| PathKey::Key((*k).to_owned())).collect();
    ckpt.tensors()
        .expect("tensors")
        .into_iter()
        .find(|(p, _)| *p == want)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no tensor at {path:?}"))
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("values")
}

#[test]
fn every_zip_fixture_matches_pytorch_manifest() {
    let names = zip_fixtures();
    assert!(names.len() >= 20, "{names:?}");
    for name in &names {
        let ckpt = load_fixture(name);
        assert_eq!(ckpt.format(), Format::TorchZip, "{name}");
        let got = manifest(&ckpt, Hash::Values).unwrap_or_else(|e| panic!("{name}: manifest: {e}"));
        assert_manifest_eq(name, &got, &expected_manifest(name), &[]);
        check_keys_match_sharing(name, &ckpt);
    }
}

/// `ZipReader::likely_data_offset`, the guess a remote eager load reads with
/// (header and data in one request), is where PyTorch put every stored
/// record of every fixture it wrote (the deflated ones were rewritten by
/// Python's `zipfile`).
#[test]
fn pytorch_places_each_record_where_the_guess_says() {
    use stowage_zip::{Method, ZipLimits, ZipReader};
    let mut checked = 0;
    for name in zip_fixtures() {
        let zip = ZipReader::new(
            std::fs::read(fixture(&name)).unwrap(),
            &ZipLimits::default(),
        )
        .unwrap();
        for e in zip.entries() {
            if e.method != Method::Stored || !zip.name(e).contains("/data/") {
                continue;
            }
            let actual = zip.data_offset(e).unwrap();
            assert_eq!(
                zip.likely_data_offset(e),
                Some(actual),
                "{name}: {}",
                zip.name(e)
            );
            checked += 1;
        }
    }
    assert!(checked > 150, "{checked}");
}

#[test]
fn load_bytes_equals_load() {
    for name in fixture_names() {
        let bytes = std::fs::read(fixture(&name)).unwrap();
        let from_file = load_fixture(&name);
        let from_mem = stowage::checkpoint::load_bytes(&bytes, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: load_bytes: {e}"));
        assert_eq!(from_mem.format(), from_file.format(), "{name}");
        assert_eq!(from_mem.byteorder(), from_file.byteorder(), "{name}");
        assert_manifest_eq(
            &format!("{name} (load_bytes vs load)"),
            &manifest(&from_mem, Hash::Values).unwrap(),
            &manifest(&from_file, Hash::Values).unwrap(),
            &[],
        );
        assert_eq!(
            describe(&from_mem),
            describe(&from_file),
            "{name}: object graphs differ"
        );
        let keys = |c: &Checkpoint| {
            c.storages()
                .iter()
                .map(|r| (r.key.clone(), r.storage_type(), r.location.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&from_mem),
            keys(&from_file),
            "{name}: storage records differ"
        );
    }
}

#[test]
fn meta_map_location_loads_every_fixture_without_data() {
    let options = LoadOptions::default().with_map_location(Device::META);
    for name in fixture_names() {
        let ckpt = stowage::load_with(fixture(&name), &options)
            .unwrap_or_else(|e| panic!("{name} on meta: {e}"));
        let got =
            manifest(&ckpt, Hash::None).unwrap_or_else(|e| panic!("{name}: manifest on meta: {e}"));
        // Shapes, strides, offsets, storage sizes and sharing exactly as PyTorch reports.
        assert_manifest_eq(
            &format!("{name} on meta"),
            &got,
            &expected_manifest(&name),
            &["sha256"],
        );
        for r in ckpt.storages() {
            assert!(r.storage.is_meta(), "{name}: storage {} is not meta", r.key);
            assert!(
                matches!(
                    r.storage.bytes(),
                    Err(Error::Storage(StorageError::NoData { .. }))
                ),
                "{name}: storage {} has bytes",
                r.key
            );
        }
        for (path, t) in ckpt.tensors().unwrap() {
            let x = &t.tensor;
            assert!(x.is_meta(), "{name}: {path:?} is not meta");
            assert_eq!(x.device(), Device::META);
            assert_eq!(x.data_ptr(), 0, "{name}: {path:?}");
            let index = vec![0isize; x.dim()];
            if x.numel() > 0 {
                match x.get(&index) {
                    Err(Error::Storage(StorageError::NoData { device, .. })) => {
                        assert_eq!(device, Device::META)
                    }
                    other => panic!("{name}: {path:?}: get on meta gave {other:?}"),
                }
            }
            assert!(
                matches!(
                    x.to_vec::<f64>(),
                    Err(Error::Storage(StorageError::NoData { .. }))
                        | Err(Error::Tensor(TensorError::DTypeUnsupported { .. }))
                ) || x.numel() == 0
            );
        }
    }
}

#[test]
fn views_share_one_storage_and_writes_are_seen_through_every_view() {
    let ckpt = load_fixture("views");
    let tensors = ckpt.tensors().unwrap();
    assert_eq!(tensors.len(), 6);
    assert_eq!(ckpt.storages().len(), 1, "one storage record");
    let base = &at(&ckpt, &["base"]).tensor;
    for (p, t) in &tensors {
        assert!(
            t.tensor.shares_storage_with(base),
            "{p:?} does not share base's storage"
        );
        assert!(t
            .tensor
            .untyped_storage()
            .is_same(&ckpt.storages()[0].storage));
        assert_eq!(
            t.tensor.untyped_storage().data_ptr(),
            base.untyped_storage().data_ptr()
        );
    }
    let row = &at(&ckpt, &["row"]).tensor; // base[1]
    let col = &at(&ckpt, &["col"]).tensor; // base[:, 2]
    let tr = &at(&ckpt, &["t"]).tensor; // base.t()
    let narrow = &at(&ckpt, &["narrow"]).tensor; // base[:, 2:5]
    let flat = &at(&ckpt, &["flat"]).tensor; // base.view(-1)[5:17]

    // Views read the bytes they should before any write.
    assert_eq!(
        f64s(row),
        (0..6)
            .map(|j| base.get(&[1, j]).unwrap().to_f64())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        f64s(col),
        (0..4)
            .map(|i| base.get(&[i, 2]).unwrap().to_f64())
            .collect::<Vec<_>>()
    );

    row.set(&[2], 1234.5).unwrap(); // base[1, 2]
    assert_eq!(base.get(&[1, 2]).unwrap(), Scalar::Float(1234.5));
    assert_eq!(col.get(&[1]).unwrap(), Scalar::Float(1234.5));
    assert_eq!(tr.get(&[2, 1]).unwrap(), Scalar::Float(1234.5));
    assert_eq!(narrow.get(&[1, 0]).unwrap(), Scalar::Float(1234.5));
    assert_eq!(flat.get(&[3]).unwrap(), Scalar::Float(1234.5)); // element 8 = 5 + 3

    tr.set(&[5, 3], -7.0).unwrap(); // base[3, 5] = element 23
    assert_eq!(base.get(&[3, 5]).unwrap(), Scalar::Float(-7.0));
    assert_eq!(
        ckpt.storages()[0].storage.bytes().unwrap()[92..96],
        (-7.0f32).to_le_bytes()
    );
}

#[test]
fn state_dict_root_is_an_ordered_dict_with_its_metadata() {
    let ckpt = load_fixture("state_dict");
    let root = ckpt.root_value();
    assert!(
        root.is_ordered(),
        "root dict is not recorded as an OrderedDict"
    );
    let keys: Vec<&str> = root
        .as_dict()
        .expect("root is a dict")
        .map(|(k, _)| k.as_str().expect("str key"))
        .collect();
    assert!(
        keys.contains(&"0.weight") && keys.iter().any(|k| k.ends_with("num_batches_tracked")),
        "{keys:?}"
    );
    assert!(
        !keys.contains(&"_metadata"),
        "_metadata is state, not an item: {keys:?}"
    );

    // BUILD state: {'_metadata': OrderedDict({'': {'version': 1}, '0': …, …})}.
    let state = root
        .state()
        .expect("the root's BUILD state (_metadata) is kept");
    let meta = state.get("_metadata").expect("_metadata in the state");
    assert!(meta.is_ordered(), "_metadata is an OrderedDict");
    let meta_items: Vec<_> = meta.as_dict().expect("_metadata is a dict").collect();
    let meta_keys: Vec<&str> = meta_items
        .iter()
        .map(|(k, _)| k.as_str().unwrap())
        .collect();
    assert_eq!(meta_keys.first(), Some(&""), "{meta_keys:?}");
    for (k, v) in &meta_items {
        let k = k.as_str().unwrap();
        let has_version = v
            .as_dict()
            .unwrap_or_else(|_| panic!("_metadata[{k:?}] not a dict"))
            .any(|(ek, _)| ek.as_str().ok() == Some("version"));
        assert!(has_version, "_metadata[{k:?}] lacks version");
    }

    // num_batches_tracked is a 0-dim int64.
    let nbt = ckpt.tensors().unwrap().into_iter().find(|(p, _)| matches!(p.last(), Some(PathKey::Key(k)) if k.ends_with("num_batches_tracked"))).unwrap().1;
    assert_eq!((nbt.tensor.dtype(), nbt.tensor.dim()), (DType::Int64, 0));
}

#[test]
fn params_flags() {
    let ckpt = load_fixture("params");
    let tensors = ckpt.tensors().unwrap();
    assert_eq!(tensors.len(), 2);
    assert!(
        ckpt.root_value().kind() == ValueKind::List,
        "root is a list"
    );
    let (p0, param) = &tensors[0];
    let (p1, plain) = &tensors[1];
    assert_eq!(
        (p0.as_slice(), p1.as_slice()),
        (&[PathKey::Index(0)][..], &[PathKey::Index(1)][..])
    );
    assert!(
        param.parameter && param.tensor.requires_grad(),
        "element 0 is an nn.Parameter requiring grad"
    );
    assert!(
        !plain.parameter && plain.tensor.requires_grad(),
        "element 1 is a plain tensor with requires_grad"
    );
    let expected = expected_manifest("params");
    assert_eq!(expected[0]["parameter"], true);
    assert_eq!(expected[1]["parameter"], false);
}

#[test]
fn requires_grad_fixture_flags_and_sharing() {
    let ckpt = load_fixture("requires_grad");
    let expected = expected_manifest("requires_grad");
    let got = manifest(&ckpt, Hash::Values).unwrap();
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(
            (&g["requires_grad"], &g["parameter"]),
            (&e["requires_grad"], &e["parameter"]),
            "{}",
            e["path"]
        );
    }
    // A Parameter with requires_grad=False exists and keeps its flag.
    assert!(ckpt
        .tensors()
        .unwrap()
        .iter()
        .any(|(_, t)| t.parameter && !t.tensor.requires_grad()));
}

#[test]
fn new_dtypes_use_untyped_storages() {
    let ckpt = load_fixture("new_dtypes");
    let dtypes: Vec<DType> = ckpt
        .tensors()
        .unwrap()
        .iter()
        .map(|(_, t)| t.tensor.dtype())
        .collect();
    for d in [
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float8E4M3Fn,
        DType::Float8E5M2,
    ] {
        assert!(dtypes.contains(&d), "{d} missing from {dtypes:?}");
    }
    assert!(!ckpt.storages().is_empty());
    for r in ckpt.storages() {
        assert_eq!(r.storage_type(), "UntypedStorage", "storage {}", r.key);
        assert_eq!(r.dtype, None, "storage {}", r.key);
    }
    // The v3 dtypes decode: uint64 holds values past i64 and float8 converts.
    for (p, t) in ckpt.tensors().unwrap() {
        if t.tensor.numel() > 0 && t.tensor.dtype().has_scalar_values() {
            t.tensor.scalars().unwrap_or_else(|e| panic!("{p:?}: {e}"));
        }
    }
}

#[test]
fn dtypes_fixture_storage_classes() {
    let ckpt = load_fixture("dtypes");
    let class = |d: DType| match d {
        DType::Float64 => "DoubleStorage",
        DType::Float32 => "FloatStorage",
        DType::Float16 => "HalfStorage",
        DType::BFloat16 => "BFloat16Storage",
        DType::Int64 => "LongStorage",
        DType::Int32 => "IntStorage",
        DType::Int16 => "ShortStorage",
        DType::Int8 => "CharStorage",
        DType::UInt8 => "ByteStorage",
        DType::Bool => "BoolStorage",
        DType::Complex128 => "ComplexDoubleStorage",
        DType::Complex64 => "ComplexFloatStorage",
        other => panic!("unexpected dtype {other} in dtypes.pt"),
    };
    let tensors = ckpt.tensors().unwrap();
    assert_eq!(tensors.len(), 12);
    let mut seen = Vec::new();
    for (p, t) in &tensors {
        let rec = ckpt
            .storages()
            .iter()
            .find(|r| r.storage.is_same(t.tensor.untyped_storage()))
            .expect("record");
        assert_eq!(rec.storage_type(), class(t.tensor.dtype()), "{p:?}");
        assert_eq!(rec.dtype, Some(t.tensor.dtype()), "{p:?}");
        assert_eq!(&*rec.location, "cpu");
        assert_eq!(t.tensor.shape(), &[2, 3], "{p:?}");
        seen.push(t.tensor.dtype());
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 12, "one tensor per legacy dtype");
}

#[test]
fn big_endian_values_equal_the_little_endian_originals() {
    let ckpt = load_fixture("big_endian");
    assert_eq!(ckpt.byteorder(), ByteOrder::Big);
    let t = |k: &str| at(&ckpt, &[k]).tensor.clone();
    assert_eq!(t("int16").to_vec::<i64>().unwrap(), [1, -2, 0x1234]);
    assert_eq!(t("int32").to_vec::<i64>().unwrap(), [1, -2, 0x12345678]);
    assert_eq!(
        t("int64").to_vec::<i64>().unwrap(),
        [1, -2, 0x123456789ABCDEF]
    );
    assert_eq!(t("uint8").to_vec::<i64>().unwrap(), [1, 2, 255]);
    assert_eq!(t("int8").to_vec::<i64>().unwrap(), [-1, 2, -128]);
    assert_eq!(t("bool").to_vec::<bool>().unwrap(), [true, false, true]);
    let c64 = t("complex64").view_dtype(DType::Float32).unwrap();
    assert_eq!(c64.to_vec::<f32>().unwrap(), [1.5, 0.25, -2.0, 3.0]);
    let c128 = t("complex128").view_dtype(DType::Float64).unwrap();
    assert_eq!(c128.to_vec::<f64>().unwrap(), [1.5, -0.5]);
    // The transpose views the same (swapped-back) storage.
    let (f, ft) = (t("float32"), t("float32_t"));
    assert!(f.shares_storage_with(&ft));
    assert_eq!(
        ft.to_vec::<f32>().unwrap(),
        f.t().unwrap().to_vec::<f32>().unwrap()
    );
    for (k, expect_in) in [
        ("float32", -10.0..10.0),
        ("float64", -10.0..10.0),
        ("float16", -10.0..10.0),
        ("bfloat16", -10.0..10.0),
    ] {
        for v in t(k).to_vec::<f64>().unwrap() {
            assert!(
                expect_in.contains(&v) && v != 0.0,
                "{k}: {v} is not a randn value (bytes not swapped back?)"
            );
        }
    }
    // And every hash is torch's reading of the file.
    assert_manifest_eq(
        "big_endian",
        &manifest(&ckpt, Hash::Values).unwrap(),
        &expected_manifest("big_endian"),
        &[],
    );
}

#[test]
fn nested_containers_and_the_same_tensor_twice() {
    let ckpt = load_fixture("nested");
    let tensors = ckpt.tensors().unwrap();
    let find = |path: &[PathKey]| tensors.iter().find(|(p, _)| p == path).map(|(_, t)| *t);
    let a = find(&[
        PathKey::Key("outer".into()),
        PathKey::Index(1),
        PathKey::Index(1),
    ])
    .expect("outer.1.1");
    let b = find(&[
        PathKey::Key("again".into()),
        PathKey::Key("same_tensor".into()),
    ])
    .expect("again.same_tensor");
    assert!(a.tensor.shares_storage_with(&b.tensor));
    assert_eq!(a.tensor.layout(), b.tensor.layout());
    let first =
        find(&[PathKey::Key("shared".into()), PathKey::Key("first".into())]).expect("shared.first");
    let second = find(&[PathKey::Key("shared".into()), PathKey::Key("second".into())])
        .expect("shared.second");
    assert!(first.tensor.shares_storage_with(&second.tensor));
    assert_eq!(second.tensor.storage_offset(), 4);
    // Scalars of the nested object: a torch.Size, a dtype and a device are decoded.
    let d = describe(&ckpt).to_string();
    for needle in [
        "\"torch.Size\"",
        "\"dtype\":\"float16\"",
        "\"device\":\"cpu\"",
    ] {
        assert!(
            d.contains(needle),
            "{needle} missing from nested.pt's graph"
        );
    }
}

#[test]
fn same_object_fixture_keeps_pythons_identity() {
    // torch.load's `is`: one object per pickled object (BINPUT/BINGET).
    let ckpt = load_fixture("same_object");
    let tensors = ckpt.tensors().unwrap();
    let at = |dotted: &str| -> &TensorObject {
        tensors
            .iter()
            .find(|(p, _)| stowage::checkpoint::dotted(p) == dotted)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| panic!("no tensor at {dotted}"))
    };
    let t = at("a");
    for same in [
        "b",
        "list.0",
        "list.1",
        "tuple.0",
        "tuple.2",
        "nested.x.y",
        "nested.z.w.v",
    ] {
        assert!(at(same).is_same(t), "{same} is a");
        assert!(at(same).tensor.is_same(&t.tensor), "{same}: tensor handles");
    }
    let p = at("param");
    assert!(p.parameter);
    for same in ["param_again.0", "tuple.1"] {
        assert!(at(same).is_same(p), "{same} is param");
    }
    assert!(at("half").is_same(at("list.2")));
    assert_eq!(at("half").tensor.dtype(), DType::BFloat16);
    // Alike but other objects: same storage, dtype and layout.
    for other in ["look_alike", "detached"] {
        let x = at(other);
        assert!(x.tensor.shares_storage_with(&t.tensor), "{other}");
        assert_eq!(x.tensor.layout(), t.tensor.layout(), "{other}");
        assert!(
            !x.is_same(t) && !x.tensor.is_same(&t.tensor),
            "{other} is not a"
        );
    }
    assert!(!at("row").is_same(t) && !p.is_same(t) && !at("half").is_same(t));
    // Six distinct objects over sixteen paths.
    let groups = common::object_groups(&ckpt);
    let distinct: std::collections::BTreeSet<_> = groups.iter().collect();
    assert_eq!((groups.len(), distinct.len()), (16, 6), "{groups:?}");
}

#[test]
fn conj_neg_bits_are_restored() {
    let ckpt = load_fixture("conj_neg");
    let tensors = ckpt.tensors().unwrap();
    let get = |k: &str| {
        tensors
            .iter()
            .find(|(p, _)| p == &[PathKey::Key(k.into())])
            .map(|(_, t)| *t)
            .unwrap()
    };
    assert!(get("z_conj").conj && !get("z_conj").neg);
    assert!(get("x_neg").neg);
    assert!(get("imag_of_conj").neg);
    assert!(!get("z").conj && !get("z").neg);
    // Stored bytes are shared with z; only the logical values differ.
    assert!(get("z").tensor.shares_storage_with(&get("z_conj").tensor));
}

#[test]
fn quantized_tensors_keep_scale_and_zero_point() {
    let ckpt = load_fixture("quantized");
    let tensors = ckpt.tensors().unwrap();
    assert!(!tensors.is_empty());
    for (p, t) in &tensors {
        assert!(t.tensor.dtype().kind() == stowage::Kind::Quantized, "{p:?}");
        let (scale, _zero) = t
            .quantization()
            .as_ref()
            .and_then(|q| q.per_tensor())
            .unwrap_or_else(|| panic!("{p:?}: no per-tensor quantization"));
        assert!(scale > 0.0 && scale.is_finite(), "{p:?}");
    }
    let types: Vec<&str> = ckpt.storages().iter().map(|r| r.storage_type()).collect();
    for c in ["QUInt8Storage", "QInt8Storage", "QInt32Storage"] {
        assert!(types.contains(&c), "{c} missing from {types:?}");
    }
}

#[test]
fn protocols_3_to_5_read_alike() {
    // Same structure (different random values: each file has its own seed).
    let m3 = manifest(&load_fixture("protocol3"), Hash::Values).unwrap();
    for name in ["protocol4", "protocol5"] {
        assert_manifest_eq(
            name,
            &manifest(&load_fixture(name), Hash::Values).unwrap(),
            &m3,
            &["sha256"],
        );
    }
}

#[test]
fn root_tensor_and_root_list() {
    let ckpt = load_fixture("root_tensor");
    let t = ckpt.root_value().as_tensor().expect("root is a tensor");
    assert_eq!(
        (
            t.tensor.shape(),
            t.tensor.stride(),
            t.tensor.storage_offset()
        ),
        (&[5, 4][..], &[1, 8][..], 10)
    );
    assert_eq!(ckpt.tensors().unwrap()[0].0, Vec::<PathKey>::new());
    assert_eq!(ckpt.state_dict().unwrap()[0].0, "tensor");

    let ckpt = load_fixture("root_list");
    assert_eq!(ckpt.root_value().kind(), ValueKind::List);
}

#[test]
fn uint_and_float8_pair_shares_one_key() {
    let ckpt = load_fixture("uint_and_float8");
    let tensors = ckpt.tensors().unwrap();
    let get = |k: &str| {
        tensors
            .iter()
            .find(|(p, _)| p == &[PathKey::Key(k.into())])
            .map(|(_, t)| &t.tensor)
            .unwrap()
    };
    let (a, b, c) = (
        get("pair_uint16"),
        get("pair_float8_e5m2"),
        get("pair_uint8"),
    );
    assert!(a.shares_storage_with(b) && b.shares_storage_with(c));
    assert_eq!(
        (a.dtype(), b.dtype(), c.dtype()),
        (DType::UInt16, DType::Float8E5M2, DType::UInt8)
    );
    let key = |t: &Tensor| {
        ckpt.storages()
            .iter()
            .find(|s| s.storage.is_same(t.untyped_storage()))
            .map(|s| s.key.clone())
    };
    assert_eq!(key(a), key(c));
}

/// The items of the dict at the root of a checkpoint made of this pickle alone.
fn root_dict_items(pkl: &[u8]) -> stowage::Result<Vec<(String, i64)>> {
    let mut z = stowage_zip::ZipWriter::new(Vec::new(), "archive", 64);
    z.write_record("data.pkl", pkl).unwrap();
    z.write_record("version", b"3\n").unwrap();
    let bytes = z.finish().unwrap();
    let ckpt = stowage::checkpoint::load_bytes(&bytes, &Default::default())?;
    let root = ckpt.root_value();
    Ok(root
        .as_dict()
        .expect("root is a dict")
        .map(|(k, v)| (k.as_str().unwrap().to_owned(), v.as_i64().unwrap()))
        .collect())
}

/// Python 2's `OrderedDict.__reduce__` pickled the items as two-item lists
/// (`[['a', 1], ['b', 2]]`, as the weights shipped in `lpips` have them, which
/// `scripts/wild-checkpoints.sh` checks against PyTorch); `OrderedDict(...)`
/// takes them as it takes Python 3's tuples.
#[test]
fn ordered_dict_items_may_be_python2_lists() {
    // GLOBAL collections.OrderedDict, EMPTY_LIST, MARK,
    //   [MARK 'a' 1 APPENDS], [MARK 'b' 2 APPENDS], APPENDS, TUPLE1, REDUCE, STOP
    let lists = b"\x80\x02ccollections\nOrderedDict\nq\x00]q\x01(]q\x02(U\x01aK\x01e]q\x03(U\x01bK\x02ee\x85q\x04Rq\x05.";
    // The same with Python 3's item tuples (TUPLE2).
    let tuples = b"\x80\x02ccollections\nOrderedDict\nq\x00]q\x01(U\x01aK\x01\x86q\x02U\x01bK\x02\x86q\x03e\x85q\x04Rq\x05.";
    let want = vec![("a".to_owned(), 1), ("b".to_owned(), 2)];
    assert_eq!(root_dict_items(tuples).unwrap(), want);
    assert_eq!(root_dict_items(lists).unwrap(), want);
    // Items of another length are still refused, naming what was expected.
    let triple = b"\x80\x02ccollections\nOrderedDict\n](](U\x01aK\x01K\x02ee\x85R.";
    let err = root_dict_items(triple).unwrap_err().to_string();
    assert!(err.contains("OrderedDict item"), "{err}");
}

/// A TorchScript archive begins as any torch zip, so `detect_format` says
/// `TorchZip`; loaded, the checkpoint says `TorchScript` (it holds
/// `constants.pkl` beside `data.pkl`), in every load mode.
#[test]
fn a_torchscript_archive_loads_as_torchscript() {
    let wild = common::fixtures_dir().join("wild");
    for stem in ["torchscript", "torchscript_traced", "torchscript_typed"] {
        let path = wild.join(format!("{stem}.pt"));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            stowage::checkpoint::detect_format(&bytes).unwrap(),
            Format::TorchZip,
            "{stem}"
        );
        for mode in [LoadMode::Eager, LoadMode::Lazy, LoadMode::Fake] {
            let options = LoadOptions::default().with_mode(mode);
            let ckpt = stowage::load_with(&path, &options).unwrap();
            assert_eq!(ckpt.format(), Format::TorchScript, "{stem} {mode:?}");
            assert_eq!(ckpt.format().name(), "torchscript");
        }
    }
    // A plain torch.save archive stays TorchZip.
    assert_eq!(load_fixture(&zip_fixtures()[0]).format(), Format::TorchZip);
}

/// Writes over the signature of the local header of the record of `path`
/// whose name ends in `/<record>`; gives the record's full name.
fn break_local_header(path: &std::path::Path, record: &str) -> String {
    let mut bytes = std::fs::read(path).unwrap();
    let zip = stowage_zip::ZipReader::new(bytes.clone(), &Default::default()).unwrap();
    let bad = zip
        .entries()
        .iter()
        .find(|e| zip.name(e).ends_with(&format!("/{record}")))
        .unwrap_or_else(|| panic!("no record {record}"));
    let at = bad.local_header_offset as usize;
    bytes[at..at + 4].copy_from_slice(b"XXXX");
    std::fs::write(path, &bytes).unwrap();
    zip.name(bad).to_owned()
}

/// A file of more storages than the loader reads in one batch (an eager
/// load reads its records each time 16,384 wait, as the pickle names them):
/// every tensor loads with its own bytes, and a view the pickle reaches
/// after two batches were read, of a storage read in the first, still
/// shares it.
#[test]
fn records_read_in_batches_as_the_pickle_goes_land_in_their_storages() {
    use stowage::checkpoint::PyValue;
    let n = 40_000;
    let base = Tensor::from_slice(&[0.5f32, 1.5, 2.5, 3.5]).unwrap();
    let mut entries = vec![("base".to_owned(), base.clone())];
    entries.extend((0..n).map(|i| {
        let t = Tensor::from_slice(&[i as f32, -(i as f32)]).unwrap();
        (format!("t{i}"), t)
    }));
    entries.push(("late_view".to_owned(), base.narrow(0, 1, 2).unwrap()));
    let ckpt = Checkpoint::from_value(PyValue::state_dict(entries)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.pt");
    stowage::save(&path, &ckpt).unwrap();

    let back = stowage::load(&path).unwrap();
    assert_eq!(back.storages().len(), n + 1);
    for i in (0..n)
        .step_by(997)
        .chain([16_383, 16_384, 32_767, 32_768, n - 1])
    {
        let t = &at(&back, &[&format!("t{i}")]).tensor;
        assert_eq!(t.to_vec::<f32>().unwrap(), [i as f32, -(i as f32)], "t{i}");
    }
    let (base, view) = (
        &at(&back, &["base"]).tensor,
        &at(&back, &["late_view"]).tensor,
    );
    assert!(view.shares_storage_with(base));
    assert_eq!(view.to_vec::<f32>().unwrap(), [1.5, 2.5]);
    assert_eq!(base.to_vec::<f32>().unwrap(), [0.5, 1.5, 2.5, 3.5]);

    // A record of the first batch with a broken local header: the load's
    // error names that record, not the storage the pickle was making when
    // the batch was read, nor the pickle.
    let name = break_local_header(&path, "data/100");
    match stowage::load(&path) {
        Err(Error::InFile { source, .. }) => match *source {
            Error::InRecord { name: got, .. } => assert_eq!(got, name),
            other => panic!("expected the record named, got {other}"),
        },
        other => panic!("expected an error in the file, got {:?}", other.map(|_| ())),
    }
}

/// A mapped load reads its records' local headers a batch at a time (4,096
/// entries): over several batches every storage is a view of the file at
/// its own record, and a broken header in a later batch fails the load
/// naming its storage, as a header read on its own does, after the records
/// before it in that batch were mapped.
#[test]
fn a_mapped_load_reads_local_headers_in_batches_and_names_a_broken_one() {
    use stowage::checkpoint::PyValue;
    let n = 10_000;
    let entries: Vec<(String, Tensor)> = (0..n)
        .map(|i| {
            let t = Tensor::from_slice(&[i as f32, -(i as f32), 0.5]).unwrap();
            (format!("t{i}"), t)
        })
        .collect();
    let ckpt = Checkpoint::from_value(PyValue::state_dict(entries)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.pt");
    stowage::save(&path, &ckpt).unwrap();
    let mmap = |path: &std::path::Path| {
        // SAFETY: the file is not written while the checkpoint lives.
        unsafe { stowage::load_mmap(path, &LoadOptions::default()) }
    };

    let back = mmap(&path).unwrap();
    assert_eq!(back.storages().len(), n);
    assert!(back.storages().iter().all(|s| s.storage.is_shared()));
    for i in (0..n)
        .step_by(331)
        .chain([4_095, 4_096, 8_191, 8_192, n - 1])
    {
        let t = &at(&back, &[&format!("t{i}")]).tensor;
        assert_eq!(
            t.to_vec::<f32>().unwrap(),
            [i as f32, -(i as f32), 0.5],
            "t{i}"
        );
    }
    drop(back);

    break_local_header(&path, "data/5000");
    let err = mmap(&path).map(|_| ()).unwrap_err();
    match &err {
        Error::InFile { source, .. } => match &**source {
            Error::InRecord { source, .. } => match &**source {
                Error::InStorage { key, source } => {
                    assert_eq!(key, "5000");
                    assert!(source.to_string().contains("bad local header"), "{err}");
                }
                other => panic!("expected the storage named, got {other}"),
            },
            other => panic!("expected the pickle's record named, got {other}"),
        },
        other => panic!("expected an error in the file, got {other}"),
    }
}

/// `LoadOptions::with_on_storage` is called once for each storage a zip
/// archive's load makes, eager or mapped, with the dtype its pickle
/// declares, at the address the storage keeps; not for a legacy file's
/// (whose storages a mapped load moves once their records are found).
#[test]
fn on_storage_sees_each_archive_storage_at_its_final_address() {
    use std::sync::{Arc, Mutex};
    let seen_by = |mapped: bool, name: &str| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let options = {
            let seen = Arc::clone(&seen);
            LoadOptions::default().with_on_storage(move |storage, dtype| {
                let mut seen = seen.lock().unwrap();
                seen.push((storage.id(), storage.data_ptr(), dtype));
            })
        };
        let ckpt = if mapped {
            // SAFETY: the fixtures are not modified while the tests run.
            unsafe { stowage::load_mmap(fixture(name), &options) }
        } else {
            stowage::load_with(fixture(name), &options)
        }
        .unwrap();
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        (ckpt, seen)
    };
    for mapped in [false, true] {
        for name in zip_fixtures() {
            let (ckpt, seen) = seen_by(mapped, &name);
            let made: Vec<_> = ckpt
                .storages()
                .iter()
                .filter_map(|r| {
                    let dtype = r.dtype?;
                    Some((r.storage.id(), r.storage.data_ptr(), dtype))
                })
                .collect();
            assert_eq!(seen, made, "{name} (mapped: {mapped})");
        }
        let (_, seen) = seen_by(mapped, LEGACY_FIXTURES[0]);
        assert!(seen.is_empty(), "legacy, mapped: {mapped}");
    }
}
