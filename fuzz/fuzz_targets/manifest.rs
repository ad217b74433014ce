//! Content manifests, differential: the file goes through a real path (a
//! manifest reads lazily, window by window), and when
//! `stowage_commands::manifest::manifest` accepts it:
//!
//! - each entry's digest must be what `content::digest` (`sha2`, one tensor
//!   at a time) gives for the tensor of that name in an eager load, so the
//!   parallel hashing (`digest_all`: sixteen lanes, pairs, windows of
//!   lazily loaded storages) is checked against the plain one;
//! - the root digest must be `root_of` the entries;
//! - an eager load and a lazy load (each tensor then read) with the manifest
//!   expected must succeed;
//! - with one digest changed (the entry the first input byte picks), both
//!   must fail with `ContentMismatch` naming that tensor, or, lazily, when
//!   the tensor's storage is read.
//!
//! Names listed twice (a key `"a.b"` beside a nested `a` → `b`) leave the
//! loads with `expect` out: such a manifest cannot be expected (it says so).
#![no_main]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stowage::checkpoint::content::{self, Expected};
use stowage::checkpoint::{dotted, PathKey, TensorObject};
use stowage::FormatError;
use stowage::{load_with, Checkpoint, Error, LoadMode, LoadOptions};
use stowage_commands::manifest::{manifest, root_of, Manifest};
use stowage_commands::Context;

fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("stowage-fuzz-manifest-{}", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, file)) = data.split_first() else {
        return;
    };
    let path = scratch();
    let _ = std::fs::remove_file(path);
    if std::fs::write(path, file).is_err() {
        return;
    }
    let Ok(m) = manifest(path, &Context::default(), &Default::default()) else {
        return;
    };
    assert_eq!(m.root_sha256(), root_of(m.tensors()), "root digest");
    let Ok(eager) = load_with(path, &LoadOptions::default()) else {
        return;
    };
    check_digests(&m, &eager);
    let eager_strided = eager
        .tensors()
        .is_ok_and(|t| t.iter().all(|(_, o)| o.kind().is_strided()));
    drop(eager);

    let mut names: Vec<&str> = m.tensors().iter().map(|e| e.name.as_str()).collect();
    names.dedup();
    // A load with `expect` refuses sparse and nested tensors (`verify
    // --manifest` checks them).
    let strided = eager_strided;
    if names.len() != m.tensors().len() || m.tensors().is_empty() || !strided {
        return;
    }
    let json = |m: &Manifest| {
        let mut out = Vec::new();
        m.write_json(&mut out).expect("a manifest serializes");
        String::from_utf8(out).expect("JSON is UTF-8")
    };
    let expected = Expected::from_manifest_json(&json(&m)).expect("stowage's own manifest");
    load_expecting(path, expected, None);

    // One digest changed: the tensor the first byte picks must be named.
    let i = usize::from(pick) % m.tensors().len();
    let text = json(&m);
    let digest = &m.tensors()[i].sha256;
    let flipped = format!(
        "{}{}",
        if digest.starts_with('0') { "1" } else { "0" },
        &digest[1..]
    );
    let entry = format!("\"sha256\":\"{digest}\"");
    // Entries of equal digests (equal contents): change the one picked.
    let at = text
        .match_indices(&entry)
        .nth(
            m.tensors()[..i]
                .iter()
                .filter(|e| &e.sha256 == digest)
                .count(),
        )
        .expect("the entry's digest is in the JSON")
        .0;
    let text = format!(
        "{}\"sha256\":\"{flipped}\"{}",
        &text[..at],
        &text[at + entry.len()..]
    );
    let expected = Expected::from_manifest_json(&text).expect("a changed digest parses");
    load_expecting(path, expected, Some(&m.tensors()[i].name));
});

/// Each entry's digest against `content::digest` of the eager load's tensor
/// of that name.
fn check_digests(m: &Manifest, ckpt: &Checkpoint) {
    let Ok(tensors) = ckpt.tensors() else {
        return;
    };
    let mut plain: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, object) in tensors {
        // A sparse or nested tensor is listed by its components, each under
        // the tensor's path and the component's name (the CLI contract).
        let mut each: Vec<(String, TensorObject)> = object
            .kind()
            .components()
            .into_iter()
            .map(|(name, t)| {
                let mut p = path.clone();
                p.push(PathKey::Key(name.to_owned()));
                (dotted(&p), TensorObject::new(t.clone()))
            })
            .collect();
        if object.kind().is_strided() {
            each.push((dotted(&path), object.clone()));
        }
        for (name, object) in each {
            let d = content::sha256(&object, |_| ()).expect("the manifest read it lazily");
            plain.entry(name).or_default().push(d);
        }
    }
    let mut listed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in m.tensors() {
        listed
            .entry(e.name.clone())
            .or_default()
            .push(e.sha256.clone());
    }
    for v in plain.values_mut() {
        v.sort();
    }
    assert_eq!(listed, plain, "manifest digests against content::sha256");
}

/// Loads eagerly and lazily with `expected`: both succeed when `changed` is
/// `None`, else both fail naming it (lazily, once its bytes are read).
fn load_expecting(path: &PathBuf, expected: Expected, changed: Option<&str>) {
    let named = |e: &Error| match (e.root(), changed) {
        (Error::Format(FormatError::ContentMismatch { name, .. }), Some(c)) => name == c,
        _ => false,
    };
    let options = LoadOptions::default().with_expected(expected);
    match (load_with(path, &options), changed) {
        (Ok(_), None) => {}
        (Err(e), Some(_)) => assert!(named(&e), "eager load with a changed digest: {e}"),
        (Ok(_), Some(c)) => panic!("eager load took a changed digest of {c:?}"),
        (Err(e), None) => panic!("eager load refused its own manifest: {e}"),
    }
    let lazy = load_with(path, &options.with_mode(LoadMode::Lazy));
    let ckpt = match (lazy, changed) {
        (Ok(ckpt), _) => ckpt,
        (Err(e), Some(_)) if named(&e) => return,
        (Err(e), _) => panic!("lazy load with {changed:?} changed: {e}"),
    };
    let tensors = ckpt.tensors().expect("listed once already");
    let mut failed = None;
    for (_, object) in tensors {
        if let Err(e) = content::sha256(object, |_| ()) {
            failed.get_or_insert(e);
        }
    }
    match (failed, changed) {
        (None, None) => {}
        (Some(e), Some(_)) => assert!(named(&e), "lazy read with a changed digest: {e}"),
        (None, Some(c)) => panic!("lazy load read a changed digest of {c:?} unchecked"),
        (Some(e), None) => panic!("lazy load refused its own manifest: {e}"),
    }
}
