//! Checkpoints of the Python 2 era (PyTorch 0.3/0.4 under Python 2: the
//! legacy stream, cPickle protocol 2, `str` keys as `SHORT_BINSTRING`,
//! `OrderedDict` reduced from item lists, 64-bit ints as the text `INT`
//! opcode, `copy_reg`), made by `scripts/make_py2_fixtures.py`, each with what
//! real PyTorch makes of it beside it (`<name>.torch.json`: `weights_only`
//! true and false). stowage reads each as PyTorch does, and refuses what
//! PyTorch refuses, for the same reason.

use std::path::PathBuf;
use stowage::{CheckpointError, FormatError, StorageError};

use crate::common::{assert_manifest_eq, fixtures_dir, manifest, path_json, Hash};
use serde_json::{json, Value as J};
use stowage::checkpoint::pickle::{PickleError, Value};
use stowage::checkpoint::{Format, ValueKind};
use stowage::load;
use stowage::{Checkpoint, Error};

fn py2_dir() -> PathBuf {
    fixtures_dir().join("py2")
}

fn torch_answer(name: &str) -> J {
    let text = std::fs::read_to_string(py2_dir().join(format!("{name}.torch.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The error under the file and record wrappers.
fn root_cause(e: &Error) -> &Error {
    match e {
        Error::InFile { source, .. } | Error::InRecord { source, .. } => root_cause(source),
        e => e,
    }
}

/// The non-tensor leaves in the contract's `values` form (what
/// `torch_manifest.values_manifest` lists).
fn values(ckpt: &Checkpoint) -> Vec<J> {
    ckpt.root_value()
        .leaves()
        .unwrap()
        .iter()
        .filter(|v| v.kind() != ValueKind::Tensor)
        .map(|v| {
            let value = match v.kind() {
                ValueKind::None => J::Null,
                ValueKind::Bool => json!(v.as_bool().unwrap()),
                ValueKind::Int => match v.raw() {
                    Value::BigInt(b) => json!(b.to_string()),
                    _ => {
                        let i = v.as_i64().unwrap();
                        if i.unsigned_abs() <= 1 << 53 {
                            json!(i)
                        } else {
                            json!(i.to_string())
                        }
                    }
                },
                ValueKind::Float => json!(v.as_f64().unwrap()),
                ValueKind::Str => json!(v.as_str().unwrap()),
                ValueKind::Dict | ValueKind::List | ValueKind::Tuple => json!([]),
                other => panic!("no contract form for {other:?}"),
            };
            json!({"path": path_json(v.path()), "type": v.kind().name(), "value": value})
        })
        .collect()
}

/// stowage's tensors and values equal PyTorch's `answer` (one mode's).
fn assert_same(name: &str, ckpt: &Checkpoint, answer: &J) {
    assert_eq!(ckpt.format(), Format::TorchLegacy, "{name}");
    let tensors = manifest(ckpt, Hash::Values).unwrap();
    assert_manifest_eq(name, &tensors, answer["tensors"].as_array().unwrap(), &[]);
    assert_eq!(&J::Array(values(ckpt)), &answer["values"], "{name}: values");
}

fn load_py2(name: &str) -> stowage::Result<Checkpoint> {
    load(py2_dir().join(format!("{name}.pt")))
}

#[test]
fn state_dict_of_pytorch_0_4_reads_as_pytorch_reads_it() {
    let answer = torch_answer("py2_state_dict");
    let ckpt = load_py2("py2_state_dict").unwrap();
    assert_same("py2_state_dict", &ckpt, &answer["weights_only"]);
    assert_eq!(answer["weights_only"]["type"], "OrderedDict");
    // `_metadata` came through BUILD of Python 2's OrderedDict reduce.
    let names: Vec<String> = ckpt
        .state_dict()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            "net.0.weight",
            "net.0.bias",
            "net.1.bias",
            "net.1.num_batches_tracked"
        ]
    );
}

#[test]
fn rebuild_tensor_of_pytorch_0_3_reads_as_pytorch_reads_it() {
    let answer = torch_answer("py2_rebuild_v1");
    let ckpt = load_py2("py2_rebuild_v1").unwrap();
    assert_same("py2_rebuild_v1", &ckpt, &answer["weights_only"]);
    assert_eq!(ckpt.get("epoch").unwrap().as_i64().unwrap(), 5);
}

/// `INT` lines, `LONG4`, `BINUNICODE`: PyTorch's `weights_only` loader does
/// not know the text opcodes and refuses the file; its full loader reads it,
/// and so does stowage (nothing in it names a global outside the allowlist).
#[test]
fn python2_integers_read_as_the_full_loader_reads_them() {
    let answer = torch_answer("py2_text_ints");
    let refused = answer["weights_only"]["error"].as_str().unwrap();
    assert!(refused.contains("Unsupported operand 73"), "{refused}");
    let ckpt = load_py2("py2_text_ints").unwrap();
    assert_same("py2_text_ints", &ckpt, &answer["full"]);
}

/// A Python 2 `str` that is not UTF-8: `torch.load` (either mode) passes
/// `encoding="utf-8"` and fails with `UnicodeDecodeError`; so does stowage.
#[test]
fn a_python2_str_that_is_not_utf8_is_refused_as_pytorch_refuses_it() {
    let answer = torch_answer("py2_non_utf8");
    for mode in ["weights_only", "full"] {
        let e = answer[mode]["error"].as_str().unwrap();
        assert!(e.starts_with("UnicodeDecodeError"), "{mode}: {e}");
    }
    let e = load_py2("py2_non_utf8").unwrap_err();
    assert!(
        matches!(
            root_cause(&e),
            Error::Format(FormatError::Pickle(PickleError::BadText {
                what: "utf-8 (a Python 2 str)",
                ..
            }))
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("object pickle"), "{e}");
}

/// `copy_reg._reconstructor` is outside PyTorch's allowlist: refused, as
/// `weights_only=True` refuses it (named as written, `copy_reg`).
#[test]
fn copy_reg_reconstructor_is_refused_as_pytorch_refuses_it() {
    let answer = torch_answer("py2_copy_reg");
    let refused = answer["weights_only"]["error"].as_str().unwrap();
    assert!(refused.contains("copyreg._reconstructor"), "{refused}");
    assert!(answer["full"].get("error").is_none());
    let e = load_py2("py2_copy_reg").unwrap_err();
    match root_cause(&e) {
        Error::Checkpoint(CheckpointError::GlobalNotAllowed { module, name }) => {
            assert_eq!(
                (module.as_str(), name.as_str()),
                ("copy_reg", "_reconstructor")
            )
        }
        other => panic!("{other:?}"),
    }
}

/// A storage view (`view_metadata` in the persistent id): PyTorch reads it
/// as a slice of its root storage, a storage of its own; stowage as the root
/// storage with the tensor shifted to the view's start. The elements are
/// the same; the storage fields differ, and the tensor shares the root.
#[test]
fn a_storage_view_reads_as_its_slice_of_the_root() {
    let answer = torch_answer("py2_storage_view");
    let ckpt = load_py2("py2_storage_view").unwrap();
    let tensors = manifest(&ckpt, Hash::Values).unwrap();
    let torch = answer["weights_only"]["tensors"].as_array().unwrap();
    let ignore = ["storage_offset", "storage_group", "storage_nbytes"];
    assert_manifest_eq("py2_storage_view", &tensors, torch, &ignore);
    // torch: offset 1 in a 3-element view starting at 3; here 4 in the root.
    assert_eq!(
        (
            torch[1]["storage_offset"].as_u64(),
            torch[1]["storage_nbytes"].as_u64()
        ),
        (Some(1), Some(12))
    );
    assert_eq!(tensors[1]["storage_offset"], 4);
    let (whole, tail) = (ckpt.get("whole").unwrap(), ckpt.get("tail").unwrap());
    assert!(whole
        .as_tensor()
        .unwrap()
        .tensor
        .shares_storage_with(&tail.as_tensor().unwrap().tensor));
}

#[test]
fn a_tensor_past_its_storage_view_is_refused() {
    // The view fixture with the tail tensor's offset moved past the view's
    // three elements (offset 1 -> 2, size 2: elements 2..4 of a 3-element view).
    let mut bytes = std::fs::read(py2_dir().join("py2_storage_view.pt")).unwrap();
    // The view tuple ends `K 3 K 3 TUPLE3`, the pid tuple `TUPLE`, then
    // BINPERSID and the tensor's offset `K 1`.
    let pattern = b"K\x03K\x03\x87tQK\x01";
    let at = bytes
        .windows(pattern.len())
        .position(|w| w == pattern)
        .unwrap();
    bytes[at + pattern.len() - 1] = 2;
    let e = stowage::checkpoint::load_bytes(&bytes, &Default::default()).unwrap_err();
    assert!(
        matches!(
            root_cause(&e),
            Error::Storage(StorageError::OutOfStorage { .. })
        ),
        "{e:?}"
    );
}

/// `stowage scan` reads every legacy section of each, naming the Python 2
/// globals as Python 3 imports them.
#[test]
fn scan_reads_each_python2_file() {
    use stowage::checkpoint::scan::{scan_path, Verdict};
    let report = scan_path(&py2_dir(), &stowage::LoadOptions::default());
    assert_eq!(report.files.len(), 6);
    for f in &report.files {
        assert!(f.error.is_none(), "{}: {:?}", f.path.display(), f.error);
        assert_eq!(f.pickles.len(), 5);
        let unsafe_names: Vec<_> = f
            .globals
            .iter()
            .filter(|g| g.verdict == Verdict::Unsafe)
            .map(|g| format!("{}.{}", g.module, g.name))
            .collect();
        let copy_reg = f.path.ends_with("py2_copy_reg.pt");
        assert_eq!(
            unsafe_names,
            if copy_reg {
                vec![
                    "copyreg._reconstructor".to_owned(),
                    "builtins.object".to_owned(),
                ]
            } else {
                vec![]
            },
            "{}",
            f.path.display()
        );
    }
}
