//! Malformed and malicious input (`tests/fixtures/hostile/`, see its README):
//! every file gives a typed error, never a panic, a hang or an allocation
//! from a declared size; plus truncations and random mutations of good files
//! and memo-shared structures built in code.

use crate::common;
use stowage::{CheckpointError, FormatError, StorageError, TensorError};

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use stowage::checkpoint::pickle::PickleError;
use stowage::checkpoint::PyValue;
use stowage::{Checkpoint, LoadOptions};
use stowage::{DType, Device, Error, Tensor};
use stowage_zip::{ZipError, ZipWriter};

/// How long any one hostile load may take (debug build, loaded machine).
const LIMIT: Duration = Duration::from_secs(10);

fn panic_text(p: &Box<dyn Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs `f` on a fresh thread with a 2 MiB stack (as test threads have) and
/// returns its result, failing when it panics or takes longer than `limit`.
fn within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("spawn");
    match rx.recv_timeout(limit) {
        Ok(v) => {
            handle.join().expect("thread ended");
            v
        }
        Err(RecvTimeoutError::Timeout) => {
            panic!("{what}: no answer within {limit:?} (a hang or a huge allocation)")
        }
        Err(RecvTimeoutError::Disconnected) => {
            let p = handle
                .join()
                .expect_err("the thread dropped its sender without panicking");
            panic!("{what}: PANICKED: {}", panic_text(&p))
        }
    }
}

/// A load's outcome, computed (and the checkpoint dropped) on the worker thread.
type Outcome = Result<usize, Error>;

fn count_tensors(r: stowage::Result<Checkpoint>) -> Outcome {
    let ckpt = r?;
    let n = ckpt.tensors()?.len();
    drop(ckpt);
    Ok(n)
}

fn load_path(path: &Path) -> Outcome {
    let p = path.to_owned();
    within(&format!("load {}", path.display()), LIMIT, move || {
        count_tensors(stowage::load(&p))
    })
}

fn load_mem(what: &str, bytes: Vec<u8>, options: LoadOptions) -> Outcome {
    within(what, LIMIT, move || {
        count_tensors(stowage::checkpoint::load_bytes(&bytes, &options))
    })
}

fn hostile(name: &str) -> PathBuf {
    common::hostile_dir().join(name)
}

/// `InRecord { name: "data.pkl", source }` → `source`.
fn in_pickle(e: &Error) -> Option<&Error> {
    match e {
        Error::InRecord { name, source } if name == "data.pkl" => Some(source),
        _ => None,
    }
}

/// `InStorage { key: "0", source }` inside `data.pkl`, or under the tensor's
/// path (`AtPath`) for views checked once the pickle is read → `source`.
fn in_storage0(e: &Error) -> Option<&Error> {
    let inner = match e {
        Error::AtPath { source, .. } => source,
        other => in_pickle(other)?,
    };
    match inner {
        Error::InStorage { key, source } if key == "0" => Some(source),
        _ => None,
    }
}

/// What each hostile file must give: a check on the error under `Error::InFile`.
type Check = fn(&Error) -> bool;

const EXPECTED: &[(&str, &str, Check)] = &[
    ("empty.pt", "NotACheckpoint", |e| {
        matches!(e, Error::Format(FormatError::NotACheckpoint { .. }))
    }),
    ("not_a_checkpoint.pt", "NotACheckpoint", |e| {
        matches!(e, Error::Format(FormatError::NotACheckpoint { .. }))
    }),
    ("truncated.pt", "Zip(NotZip)", |e| {
        matches!(e, Error::Format(FormatError::Zip(ZipError::NotZip { .. })))
    }),
    (
        "legacy_truncated.pt",
        "InRecord(object pickle, Pickle(NoStop | Truncated))",
        |e| {
            matches!(e, Error::InRecord { name, source } if name == "object pickle"
            && matches!(**source, Error::Format(FormatError::Pickle(PickleError::NoStop { .. } | PickleError::Truncated { .. }))))
        },
    ),
    (
        "missing_record.pt",
        "InRecord(data.pkl, InStorage(0, MissingRecord(data/0)))",
        |e| matches!(in_storage0(e), Some(Error::Format(FormatError::MissingRecord { name })) if name == "data/0"),
    ),
    (
        "short_record.pt",
        "InStorage(0, RecordSize(data/0, expected 48, found 20))",
        |e| matches!(in_storage0(e), Some(Error::Format(FormatError::RecordSize { name, expected: 48, found: 20 })) if name == "data/0"),
    ),
    (
        "bad_byteorder.pt",
        "BadObject(byteorder record, found middle)",
        |e| matches!(e, Error::Format(FormatError::BadObject { context: "byteorder record", found, .. }) if found == "middle"),
    ),
    (
        "view_past_end.pt",
        "InStorage(0, OutOfStorage(needed 40, nbytes 24))",
        |e| {
            matches!(
                in_storage0(e),
                Some(Error::Storage(StorageError::OutOfStorage {
                    needed: 40,
                    nbytes: 24,
                    offset: 4,
                    ..
                }))
            )
        },
    ),
    (
        "view_stride_overflow.pt",
        "InStorage(0, OutOfStorage | SizeOverflow)",
        |e| {
            matches!(
                in_storage0(e),
                Some(
                    Error::Storage(StorageError::OutOfStorage { nbytes: 16, .. })
                        | Error::Tensor(TensorError::SizeOverflow { .. })
                )
            )
        },
    ),
    (
        "view_negative_size.pt",
        "InRecord(data.pkl, BadObject(tensor size, int -2))",
        |e| matches!(in_pickle(e), Some(Error::Format(FormatError::BadObject { context: "tensor size", found, .. })) if found.contains("-2")),
    ),
    (
        "absurd_numel.pt",
        "InRecord(data.pkl, SizeOverflow(storage bytes))",
        |e| {
            matches!(
                in_pickle(e),
                Some(Error::Tensor(TensorError::SizeOverflow {
                    what: "storage bytes",
                    ..
                }))
            )
        },
    ),
    (
        "deflate_bomb.pt",
        "InStorage(0, Zip(InflatesTooLarge(expected 48)))",
        |e| {
            matches!(
                in_storage0(e),
                Some(Error::Format(FormatError::Zip(
                    ZipError::InflatesTooLarge { expected: 48, .. }
                )))
            )
        },
    ),
    (
        "deflate_bomb_huge_size.pt",
        "InStorage(0, ImplausibleRecord(data/0, declared 2**40))",
        |e| matches!(in_storage0(e), Some(Error::Format(FormatError::ImplausibleRecord { name, declared, .. })) if name == "data/0" && *declared == 1 << 40),
    ),
    (
        "os_system.pt",
        "GlobalNotAllowed(os.system)",
        |e| matches!(in_pickle(e), Some(Error::Checkpoint(CheckpointError::GlobalNotAllowed { module, name })) if module == "os" && name == "system"),
    ),
    (
        "builtins_eval.pt",
        "GlobalNotAllowed(builtins.eval)",
        |e| matches!(in_pickle(e), Some(Error::Checkpoint(CheckpointError::GlobalNotAllowed { module, name })) if module == "builtins" && name == "eval"),
    ),
    (
        "custom_class.pt",
        "GlobalNotAllowed(__main__.MyModule)",
        |e| matches!(in_pickle(e), Some(Error::Checkpoint(CheckpointError::GlobalNotAllowed { module, name })) if module == "__main__" && name == "MyModule"),
    ),
    (
        "deep_nesting.pt",
        "InRecord(data.pkl, Pickle(LimitExceeded(max_depth)))",
        |e| {
            matches!(
                in_pickle(e),
                Some(Error::Format(FormatError::Pickle(
                    PickleError::LimitExceeded {
                        limit: "max_depth",
                        ..
                    }
                )))
            )
        },
    ),
    (
        "bad_opcode.pt",
        "InRecord(data.pkl, Pickle(UnknownOpcode(0xff at 14)))",
        |e| {
            matches!(
                in_pickle(e),
                Some(Error::Format(FormatError::Pickle(
                    PickleError::UnknownOpcode {
                        byte: 0xff,
                        offset: 14
                    }
                )))
            )
        },
    ),
];

/// Files PyTorch accepts; stowage must too, cheaply.
const ACCEPTED: &[&str] = &["memo_doubling.pt"];

#[test]
fn every_hostile_file_is_listed_here() {
    let mut on_disk: Vec<String> = std::fs::read_dir(common::hostile_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".pt"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = EXPECTED
        .iter()
        .map(|(n, _, _)| n.to_string())
        .chain(ACCEPTED.iter().map(|n| n.to_string()))
        .collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "a hostile fixture without an expectation (or an expectation without a file)"
    );
}

#[test]
fn hostile_files_give_typed_errors() {
    let mut failures = Vec::new();
    for (name, want, check) in EXPECTED {
        let path = hostile(name);
        match load_path(&path) {
            Ok(n) => failures.push(format!("{name}: loaded ({n} tensors), expected {want}")),
            Err(e) => {
                let inner = common::in_file(&e, &path);
                if !check(inner) {
                    failures.push(format!("{name}: expected {want}, got {inner:?}"));
                }
                let line = e.to_string();
                assert!(
                    line.contains(name) && !line.contains('\n'),
                    "{name}: message {line:?} is not one line naming the file"
                );
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn hostile_files_give_the_same_errors_from_memory() {
    for (name, want, check) in EXPECTED {
        let bytes = std::fs::read(hostile(name)).unwrap();
        match load_mem(name, bytes, LoadOptions::default()) {
            Ok(n) => panic!("{name}: load_bytes loaded {n} tensors, expected {want}"),
            Err(e) => assert!(check(&e), "{name}: load_bytes: expected {want}, got {e:?}"),
        }
    }
}

#[test]
fn hostile_files_on_meta_and_with_crc_checks() {
    let meta = LoadOptions::default().with_map_location(Device::META);
    let crc = LoadOptions::default().with_verify_crc(true);
    for (name, want, check) in EXPECTED {
        let bytes = std::fs::read(hostile(name)).unwrap();
        // On meta no record bytes are read: the two deflate bombs declare sizes that
        // match their pickles, so a meta load (which allocates nothing) may accept them.
        let meta_may_load = name.starts_with("deflate_bomb");
        match load_mem(name, bytes.clone(), meta.clone()) {
            Ok(_) if meta_may_load => {}
            Ok(n) => panic!("{name}: meta load gave {n} tensors, expected {want}"),
            Err(e) => assert!(check(&e), "{name}: meta: expected {want}, got {e:?}"),
        }
        match load_mem(name, bytes, crc.clone()) {
            Ok(n) => panic!("{name}: verify_crc load gave {n} tensors, expected {want}"),
            Err(e) => assert!(check(&e), "{name}: verify_crc: expected {want}, got {e:?}"),
        }
    }
}

#[test]
fn view_past_end_error_names_the_tensor_path() {
    let path = hostile("view_past_end.pt");
    let e = load_path(&path).expect_err("view past the end");
    let line = e.to_string();
    assert!(line.contains("weight"), "{line}");
    match &e {
        Error::InFile { source, .. } => {
            assert!(
                matches!(&**source, Error::AtPath { path, .. } if path == "weight"),
                "{e:?}"
            )
        }
        other => panic!("expected InFile, got {other:?}"),
    }
}

#[test]
fn memo_doubling_file_loads_with_no_tensors_quickly() {
    let path = hostile("memo_doubling.pt");
    let t = Instant::now();
    assert_eq!(
        load_path(&path).expect("PyTorch accepts memo_doubling.pt"),
        0
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn deep_nesting_builds_and_drops_without_recursion_when_limits_allow() {
    // PyTorch accepts it; stowage refuses by default (depth limit), and when the
    // limit is raised must build, walk and drop it without overflowing a 2 MiB stack.
    let bytes = std::fs::read(hostile("deep_nesting.pt")).unwrap();
    let limits = stowage::checkpoint::pickle::Limits::default().with_max_depth(200_000);
    let options = LoadOptions::default().with_pickle_limits(limits);
    assert_eq!(
        load_mem("deep_nesting.pt with max_depth 200000", bytes, options).expect("builds"),
        0
    );
}

/// Every prefix of `name`'s bytes (all shorter lengths) fails to load, without panicking.
fn every_truncation_fails(name: &str) {
    let bytes = std::fs::read(common::fixture(name)).unwrap();
    let n = bytes.len();
    let what = format!("truncations of {name}.pt");
    let failures = within(&what, Duration::from_secs(20), move || {
        let mut loaded = Vec::new();
        for len in 0..n {
            match stowage::checkpoint::load_bytes(&bytes[..len], &LoadOptions::default()) {
                Ok(_) => loaded.push(len),
                Err(e) => {
                    let _ = e.to_string();
                }
            }
        }
        loaded
    });
    assert!(
        failures.is_empty(),
        "{name}.pt cut to these lengths still loaded: {failures:?}"
    );
}

#[test]
fn every_truncation_of_simple_fails() {
    every_truncation_fails("simple");
}

#[test]
fn every_truncation_of_legacy_format_fails() {
    every_truncation_fails("legacy_format");
}

/// Loads mutated bytes on a worker thread; Ok or Err are both fine, a panic or hang is not.
fn survives(bytes: Vec<u8>) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let handle = thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let r = stowage::checkpoint::load_bytes(&bytes, &LoadOptions::default()).map(|c| {
                // Touch everything a consumer would: paths, layouts, values.
                let _ = common::manifest(&c, common::Hash::Values);
                let _ = common::describe(&c);
            });
            if let Err(e) = &r {
                let _ = e.to_string();
            }
            let _ = tx.send(());
        })
        .unwrap();
    match rx.recv_timeout(LIMIT) {
        Ok(()) => handle.join().map_err(|p| panic_text(&p)),
        Err(RecvTimeoutError::Timeout) => Err("hang".into()),
        Err(RecvTimeoutError::Disconnected) => Err(format!(
            "panic: {}",
            handle
                .join()
                .err()
                .map(|p| panic_text(&p))
                .unwrap_or_default()
        )),
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip {
        at: usize,
        bit: u8,
    },
    Set {
        at: usize,
        byte: u8,
    },
    /// Writes a little-endian u32 (sizes, offsets, counts) at a position.
    Word {
        at: usize,
        value: u32,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        (
            any::<usize>(),
            prop_oneof![Just(0u32), Just(u32::MAX), Just(0x7fff_ffff), any::<u32>()]
        )
            .prop_map(|(at, value)| Mutation::Word { at, value }),
    ]
}

fn mutate(mut bytes: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    let n = bytes.len();
    for m in ms {
        match *m {
            Mutation::Flip { at, bit } => bytes[at % n] ^= 1 << bit,
            Mutation::Set { at, byte } => bytes[at % n] = byte,
            Mutation::Word { at, value } => {
                let at = at % (n - 4);
                bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_simple_loads_or_errors(ms in proptest::collection::vec(mutation(), 1..6)) {
        let bytes = mutate(std::fs::read(common::fixture("simple")).unwrap(), &ms);
        prop_assert_eq!(survives(bytes), Ok(()));
    }

    #[test]
    fn mutated_legacy_format_loads_or_errors(ms in proptest::collection::vec(mutation(), 1..4)) {
        let bytes = mutate(std::fs::read(common::fixture("legacy_format")).unwrap(), &ms);
        prop_assert_eq!(survives(bytes), Ok(()));
    }
}

/// A protocol-2 pickle of `x = 'x'; for 60 levels: x = [x, x]` (BINPUT/BINGET), no tensors.
fn memo_doubling_pickle(levels: u8) -> Vec<u8> {
    let mut p = vec![0x80, 0x02];
    p.extend_from_slice(b"X\x01\x00\x00\x00x"); // BINUNICODE 'x'
    p.extend_from_slice(b"q\x00"); // BINPUT 0
    p.push(b'0'); // POP
    for i in 1..=levels {
        p.extend_from_slice(&[b']', b'q', i]); // EMPTY_LIST, BINPUT i
        p.extend_from_slice(&[b'(', b'h', i - 1, b'h', i - 1, b'e']); // MARK, BINGET×2, APPENDS
        p.push(b'0'); // POP
    }
    p.extend_from_slice(&[b'h', levels, b'.']); // BINGET top, STOP
    p
}

fn torch_zip_with_pickle(pkl: &[u8]) -> Vec<u8> {
    let mut z = ZipWriter::new(Vec::new(), "archive", 64);
    z.write_record("data.pkl", pkl).unwrap();
    z.write_record("byteorder", b"little").unwrap();
    z.write_record("version", b"3\n").unwrap();
    z.finish().unwrap()
}

#[test]
fn memo_doubling_of_60_levels_without_tensors_is_instant() {
    let bytes = torch_zip_with_pickle(&memo_doubling_pickle(60));
    let t = Instant::now();
    let n = load_mem("memo doubling, 60 levels", bytes, LoadOptions::default())
        .expect("a memo-shared structure loads");
    assert_eq!(n, 0);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "tensors() took {:?}",
        t.elapsed()
    );
}

#[test]
fn memo_doubling_graph_built_in_code() {
    // The same 2**60-leaf structure built through the graph API, beside a real tensor.
    let w = Tensor::ones(&[2], DType::Float32).unwrap();
    let mut top = PyValue::Shared(Arc::new(PyValue::list(["x", "x"])));
    for _ in 1..60 {
        top = PyValue::Shared(Arc::new(PyValue::list([top.clone(), top])));
    }
    let ckpt = Checkpoint::from_value(PyValue::OrderedDict(vec![
        ("w".into(), w.into()),
        ("doubled".into(), top),
    ]))
    .unwrap();
    let t = Instant::now();
    let paths = within(
        "tensors() of a 2**60-leaf shared structure",
        LIMIT,
        move || {
            ckpt.tensors()
                .map(|ts| ts.into_iter().map(|(p, _)| p).collect::<Vec<_>>())
        },
    )
    .expect("tensors()");
    assert_eq!(
        paths,
        vec![vec![stowage::checkpoint::PathKey::Key("w".into())]]
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "tensors() took {:?}",
        t.elapsed()
    );
}

/// Peak resident memory of this process so far, in KiB (Linux), if known.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn memo_doubling_over_a_tensor_is_refused_quickly_in_bounded_memory() {
    // 2**40 paths to one tensor: tensors() must stop with LimitExceeded,
    // not hang or allocate a path per visit without bound.
    let w = Tensor::ones(&[1], DType::Float32).unwrap();
    let leaf = PyValue::from(w);
    let mut top = PyValue::Shared(Arc::new(PyValue::list([leaf.clone(), leaf])));
    for _ in 1..40 {
        top = PyValue::Shared(Arc::new(PyValue::list([top.clone(), top])));
    }
    let ckpt = Checkpoint::from_value(top).unwrap();
    let before = peak_rss_kib();
    let r = within("tensors() of 2**40 paths to one tensor", LIMIT, move || {
        ckpt.tensors().map(|t| t.len())
    });
    assert!(
        matches!(
            r,
            Err(Error::Checkpoint(CheckpointError::LimitExceeded { .. }))
        ),
        "{r:?}"
    );
    if let (Some(before), Some(after)) = (before, peak_rss_kib()) {
        assert!(
            after.saturating_sub(before) < 1 << 20,
            "peak RSS grew by {} MiB",
            (after - before) >> 10
        );
    }
}

/// A structure shared 2**40 times over (as `torch.save` memoizes it: 41
/// distinct objects) goes into a safetensors file and a sharded set, and
/// back, in time and size linear in its distinct objects: each container
/// once, the rest as refs, its tensor written once (issue 43, item 2).
#[cfg(feature = "safetensors")]
#[test]
fn shared_structures_go_to_safetensors_once_and_come_back_shared() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("laughs.safetensors");
    let set = dir.path().join("set");
    let (out2, set2) = (out.clone(), set.clone());
    let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let inner = PyValue::Shared(Arc::new(PyValue::OrderedDict(vec![
        ("t".into(), w.clone().into()),
        ("a".into(), PyValue::Int(1)),
    ])));
    let mut top = inner;
    for _ in 0..40 {
        top = PyValue::Shared(Arc::new(PyValue::list([top.clone(), top])));
    }
    let ckpt = Checkpoint::from_value(PyValue::OrderedDict(vec![("root".into(), top)])).unwrap();
    let (back, set_back) = within("a shared structure through safetensors", LIMIT, move || {
        stowage::checkpoint::safetensors::save(&out2, &ckpt).unwrap();
        let options = stowage::checkpoint::sharded::ShardOptions::default();
        stowage::checkpoint::sharded::save_sharded(&set2, &ckpt, &options).unwrap();
        (stowage::load(&out2).unwrap(), stowage::load(&set2).unwrap())
    });
    assert!(
        std::fs::metadata(&out).unwrap().len() < 4096,
        "the file is linear in distinct objects"
    );
    for ckpt in [&back, &set_back] {
        // The tensor is there once, under the first path's name.
        let tensors = ckpt.tensors_once().unwrap();
        assert_eq!(tensors.len(), 1);
        assert_eq!(
            tensors[0].1.tensor.to_vec::<f32>().unwrap(),
            vec![1.0, 2.0, 3.0]
        );
        // Both halves of every level are one object again.
        let leaves = ckpt.root_value().leaves_once().unwrap();
        assert_eq!(leaves.len(), 1, "one value, `a`, reached once");
    }
}
