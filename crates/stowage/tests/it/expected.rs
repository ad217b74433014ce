//! Loads checked against a content manifest (`LoadOptions::with_expected`,
//! docs/manifest.md): an eager load checks every tensor before it returns;
//! a lazy load checks the names at once and each storage's tensors when the
//! storage is first read, whole, before any byte is handed out.

use std::path::Path;

use stowage::checkpoint::content::{self, Expected};
use stowage::checkpoint::dotted;
use stowage::{Checkpoint, DType, Error, FormatError, LoadMode, LoadOptions, Tensor};

/// A manifest listing what `ckpt` holds, as `stowage manifest` writes it
/// (the members a load reads).
fn manifest_of(ckpt: &Checkpoint) -> String {
    let tensors: Vec<serde_json::Value> = ckpt
        .tensors()
        .unwrap()
        .into_iter()
        .map(|(path, t)| {
            serde_json::json!({
                "dtype": t.tensor.dtype().name(),
                "name": dotted(&path),
                "shape": t.tensor.shape(),
                "sha256": content::sha256(t, |_| ()).unwrap(),
            })
        })
        .collect();
    serde_json::json!({"format": "stowage-manifest/1", "tensors": tensors}).to_string()
}

/// `a` (contiguous) and `b` (a transpose: a strided view), `b` changed by
/// one element when `changed`.
fn save(path: &Path, changed: bool) -> Checkpoint {
    let a = Tensor::arange(0.0, 6.0, 1.0, DType::Float32)
        .unwrap()
        .view(&[2, 3])
        .unwrap();
    let b = Tensor::arange(0.0, 12.0, 1.0, DType::Float32).unwrap();
    if changed {
        b.narrow(0, 7, 1).unwrap().fill_(-1.0).unwrap();
    }
    let b = b.view(&[3, 4]).unwrap().t().unwrap();
    let ckpt = Checkpoint::from_state_dict(vec![("a".to_owned(), a), ("b".to_owned(), b)]);
    stowage::save(path, &ckpt).unwrap();
    ckpt
}

fn mismatch_of(e: &Error) -> Option<(&str, &str, &str)> {
    match e {
        Error::Format(FormatError::ContentMismatch {
            name,
            expected,
            found,
        }) => Some((name, expected, found)),
        Error::AtPath { source, .. } | Error::InFile { source, .. } => mismatch_of(source),
        _ => None,
    }
}

fn tensor<'c>(ckpt: &'c Checkpoint, name: &str) -> &'c Tensor {
    &ckpt.get(name).unwrap().as_tensor().unwrap().tensor
}

#[test]
fn eager_and_lazy_loads_check_what_they_read() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good.pt"), dir.path().join("bad.pt"));
    let saved = save(&good, false);
    save(&bad, true);
    let expected = || Expected::from_manifest_json(&manifest_of(&saved)).unwrap();
    let eager = LoadOptions::default().with_expected(expected());
    let lazy = LoadOptions::default()
        .with_mode(LoadMode::Lazy)
        .with_expected(expected());

    // Eager: the changed tensor fails the load, named with both digests.
    stowage::load_with(&good, &eager).unwrap();
    let e = stowage::load_with(&bad, &eager).unwrap_err();
    let (name, want, found) = mismatch_of(&e).unwrap_or_else(|| panic!("{e}"));
    assert_eq!(name, "b");
    assert!(want.starts_with("sha256 ") && found.starts_with("sha256 ") && want != found);

    // Lazy: the load returns (the names match); `a` reads, `b` (a strided
    // view, checked on a copy of its storage's bytes) fails each read.
    let ckpt = stowage::load_with(&bad, &lazy).unwrap();
    assert_eq!(
        tensor(&ckpt, "a").to_vec::<f32>().unwrap(),
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
    let b = tensor(&ckpt, "b");
    for _ in 0..2 {
        let e = b.to_vec::<f32>().unwrap_err();
        assert_eq!(mismatch_of(&e).map(|m| m.0), Some("b"), "{e}");
    }
    // A window of the storage is refused too: its storage is read whole first.
    let mut window = [0u8; 4];
    let e = b.untyped_storage().read_at(0, &mut window).unwrap_err();
    assert_eq!(mismatch_of(&e).map(|m| m.0), Some("b"), "{e}");

    // The good file, lazily: every tensor reads, windows included.
    let ckpt = stowage::load_with(&good, &lazy).unwrap();
    let b = tensor(&ckpt, "b");
    b.untyped_storage().read_at(4, &mut window).unwrap();
    assert_eq!(f32::from_le_bytes(window), 1.0);
    assert_eq!(
        b.contiguous().unwrap().to_vec::<f32>().unwrap(),
        tensor(&saved, "b")
            .contiguous()
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    );

    // A manifest listing a tensor the file lacks fails a lazy load at once.
    let mut more = manifest_of(&saved);
    more = more.replace(
        "\"tensors\":[",
        &format!(
            "\"tensors\":[{{\"dtype\":\"float32\",\"name\":\"c\",\"shape\":[1],\"sha256\":\"{}\"}},",
            "0".repeat(64)
        ),
    );
    let with_c = LoadOptions::default()
        .with_mode(LoadMode::Lazy)
        .with_expected(Expected::from_manifest_json(&more).unwrap());
    let e = stowage::load_with(&good, &with_c).unwrap_err();
    assert_eq!(
        mismatch_of(&e).map(|m| (m.0, m.2)),
        Some(("c", "no such tensor")),
        "{e}"
    );
}
