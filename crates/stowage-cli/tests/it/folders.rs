//! The `stowage` binary on folders: Hugging Face sharded sets and PyTorch
//! Distributed Checkpoints (the library's fixtures, written by
//! `huggingface_hub` and `torch.distributed.checkpoint`), converted between
//! each other, compared across formats, verified and benchmarked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;

fn stowage<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stowage"))
        .args(args)
        .output()
        .expect("the stowage binary runs")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stowage/tests/fixtures")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn a_dcp_checkpoint_becomes_a_sharded_set_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dcp = fixtures().join("dcp/four");
    let set = tmp.path().join("set");
    // A set holds a state dict; the values go into the index's metadata, as
    // a single file keeps them in `__metadata__` (issue 26, item 13).
    let kept = tmp.path().join("kept");
    let said = ok(&stowage_convert(&[
        dcp.as_os_str(),
        kept.as_os_str(),
        "--to".as_ref(),
        "safetensors".as_ref(),
        "--max-shard-size".as_ref(),
        "200B".as_ref(),
    ]));
    assert!(said.contains("stored 5 non-tensor values"), "{said}");
    let index: Json = serde_json::from_str(
        &std::fs::read_to_string(kept.join("model.safetensors.index.json")).unwrap(),
    )
    .unwrap();
    let epoch: Json = serde_json::from_str(index["metadata"]["epoch"].as_str().unwrap()).unwrap();
    assert_eq!(epoch, serde_json::json!({"type": "int", "value": 3}));
    assert!(index["metadata"]["total_size"].is_number());
    // The same to .bin shards, one of them: an index keeps the values.
    let bin = tmp.path().join("bin");
    ok(&stowage_convert(&[
        dcp.as_os_str(),
        bin.as_os_str(),
        "--to".as_ref(),
        "bin".as_ref(),
    ]));
    let index = std::fs::read_to_string(bin.join("pytorch_model.bin.index.json")).unwrap();
    assert!(index.contains("epoch"), "{index}");

    let said = ok(&stowage_convert(&[
        dcp.as_os_str(),
        set.as_os_str(),
        "--to".as_ref(),
        "safetensors".as_ref(),
        "--max-shard-size".as_ref(),
        "200B".as_ref(),
        "--drop-values".as_ref(),
    ]));
    assert!(said.contains("wrote 3 shards"), "{said}");
    assert!(set.join("model.safetensors.index.json").is_file());

    // Across formats: nested DCP paths against the set's dotted names. Only
    // the dropped values differ.
    let diff = stowage(&[
        "diff".as_ref(),
        dcp.as_os_str(),
        set.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(diff.status.code(), Some(1));
    let json: Json = serde_json::from_slice(&diff.stdout).unwrap();
    let kinds: Vec<&str> = json["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 5, "{json}");
    assert!(kinds.iter().all(|k| *k == "missing_in_b"), "{json}");
    assert_eq!(json["differences"][0]["path"], serde_json::json!(["epoch"]));

    let back = tmp.path().join("dcp");
    ok(&stowage_convert(&[
        set.as_os_str(),
        back.as_os_str(),
        "--to".as_ref(),
        "dcp".as_ref(),
        "--ranks".as_ref(),
        "3".as_ref(),
    ]));
    assert_eq!(
        ok(&stowage(&[
            "diff".as_ref(),
            set.as_os_str(),
            back.as_os_str()
        ]))
        .trim(),
        "same"
    );
    for folder in [&set, &back, &dcp] {
        let report = ok(&stowage(&["verify".as_ref(), folder.as_os_str()]));
        assert_eq!(report.lines().last(), Some("ok"), "{report}");
    }
}

/// The first argument of `convert` is implied: [IN, OUT, flags…].
fn stowage_convert<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let mut all: Vec<&std::ffi::OsStr> = vec!["convert".as_ref()];
    all.extend(args.iter().map(|a| a.as_ref()));
    stowage(&all)
}

#[test]
fn sets_convert_to_pt_and_by_index_name() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = fixtures().join("sharded/bin");
    let pt = tmp.path().join("model.pt");
    ok(&stowage_convert(&[bin.as_os_str(), pt.as_os_str()]));
    assert_eq!(
        ok(&stowage(&[
            "diff".as_ref(),
            bin.as_os_str(),
            pt.as_os_str()
        ]))
        .trim(),
        "same"
    );
    let index = tmp.path().join("out/model.safetensors.index.json");
    std::fs::create_dir(tmp.path().join("out")).unwrap();
    ok(&stowage_convert(&[
        bin.as_os_str(),
        index.as_os_str(),
        "--max-shard-size".as_ref(),
        "1KB".as_ref(),
    ]));
    assert!(index.is_file());
    let bad = stowage_convert(&[
        bin.as_os_str(),
        tmp.path().join("x").as_os_str(),
        "--to".as_ref(),
        "bin".as_ref(),
        "--max-shard-size".as_ref(),
        "5XB".as_ref(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn inspect_verify_and_bench_read_folders() {
    // The contract's folder format names (issue 26, item 20).
    for (folder, format, tensors) in [
        ("sharded/safetensors", "sharded-safetensors", 7),
        ("sharded/bin", "sharded-bin", 8),
        ("dcp/four", "dcp", 5),
        ("dcp/hf", "dcp-hf", 4),
        (
            "sharded/safetensors/model.safetensors.index.json",
            "sharded-safetensors",
            7,
        ),
        ("sharded/bin/pytorch_model.bin.index.json", "sharded-bin", 8),
    ] {
        let path = fixtures().join(folder);
        let json: Json = serde_json::from_str(&ok(&stowage(&[
            "inspect".as_ref(),
            path.as_os_str(),
            "--json".as_ref(),
        ])))
        .unwrap();
        assert_eq!(json["format"], format, "{folder}");
        let text = ok(&stowage(&["inspect".as_ref(), path.as_os_str()]));
        let summary = text.lines().find(|l| l.contains(" tensors, ")).unwrap();
        assert!(
            summary.ends_with(&format!("({format}, little byte order)")),
            "{summary}"
        );
        assert_eq!(
            json["tensors"].as_array().unwrap().len(),
            tensors,
            "{folder}"
        );
        let verified = ok(&stowage(&["verify".as_ref(), path.as_os_str()]));
        let lines: Vec<&str> = verified.lines().collect();
        assert_eq!(lines.last(), Some(&"ok"), "{folder}");
        // What was checked, before the verdict: every file, and the tensors.
        let checked = lines[lines.len() - 2];
        assert!(checked.starts_with("checked: "), "{checked}");
        assert!(
            checked.ends_with(&format!(
                "{tensors} tensors in {} storages",
                json["storages"].as_array().unwrap().len()
            )),
            "{folder}: {checked}"
        );
        let bench: Json = serde_json::from_str(&ok(&stowage(&[
            "bench".as_ref(),
            "load".as_ref(),
            path.as_os_str(),
            "--json".as_ref(),
            "--repeat".as_ref(),
            "2".as_ref(),
        ])))
        .unwrap();
        assert_eq!(bench["op"], "load");
    }
    // A DCP directory's items' format, read from its first tensor item.
    for (folder, items) in [
        ("dcp/four", "torch-zip"),
        ("dcp/zstd", "torch-zip"),
        ("dcp/safetensors", "safetensors"),
    ] {
        let path = fixtures().join(folder);
        let json: Json = serde_json::from_str(&ok(&stowage(&[
            "inspect".as_ref(),
            path.as_os_str(),
            "--json".as_ref(),
            "--no-hash".as_ref(),
        ])))
        .unwrap();
        assert_eq!(json["format"], "dcp", "{folder}");
        assert_eq!(json["item_format"], items, "{folder}");
    }
    let overlap = fixtures().join("dcp/hostile/overlap");
    let out = stowage(&["verify".as_ref(), overlap.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("overlap"),
        "{}",
        text(&out.stdout)
    );
}

/// The summary's "saved by sharing" counts tensor bytes beyond the storages':
/// disjoint slices of one storage save nothing, a tied pair saves a copy.
#[test]
fn saved_by_sharing_is_logical_bytes_beyond_storage_bytes() {
    use stowage::{Checkpoint, DType, Tensor};
    let tmp = tempfile::tempdir().unwrap();
    let all = Tensor::arange(0.0, 12.0, 1.0, DType::Float32).unwrap();
    let slices = (0..3).map(|i| (format!("gate{i}"), all.narrow(0, i * 4, 4).unwrap()));
    let disjoint = tmp.path().join("disjoint.pt");
    stowage::save(&disjoint, &Checkpoint::from_state_dict(slices)).unwrap();
    let summary = ok(&stowage(&["inspect".as_ref(), disjoint.as_os_str()]));
    let summary = summary.lines().last().unwrap();
    assert!(
        summary.starts_with(
            "3 tensors, 1 storages, 48 B in tensors, 48 B in storages, 0 B saved by sharing"
        ),
        "{summary}"
    );

    let tied = tmp.path().join("tied.pt");
    let w = Tensor::ones(&[4], DType::Float32).unwrap();
    stowage::save(
        &tied,
        &Checkpoint::from_state_dict([("a", w.clone()), ("b", w)]),
    )
    .unwrap();
    let summary = ok(&stowage(&["inspect".as_ref(), tied.as_os_str()]));
    assert!(
        summary
            .lines()
            .last()
            .unwrap()
            .contains("32 B in tensors, 16 B in storages, 16 B saved by sharing"),
        "{summary}"
    );
}

/// Two small traps (issue 26, item 20): `--to safetensors r.safetensors`
/// writes that file, not a folder named so; safetensors outputs get the mode
/// every new file gets (the umask's), as `.pt` outputs do.
#[test]
fn a_file_name_wins_over_to_and_outputs_follow_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("simple.pt");
    let st = dir.path().join("r.safetensors");
    ok(&stowage(&[
        "convert".as_ref(),
        input.as_os_str(),
        "--to".as_ref(),
        "safetensors".as_ref(),
        st.as_os_str(),
    ]));
    assert!(st.is_file(), "{} is not a file", st.display());
    let pt = dir.path().join("r.pt");
    ok(&stowage(&[
        "convert".as_ref(),
        input.as_os_str(),
        pt.as_os_str(),
    ]));
    let plain = dir.path().join("plain");
    std::fs::write(&plain, b"").unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&st), mode(&plain), "safetensors");
    assert_eq!(mode(&pt), mode(&plain), ".pt");
}

/// Four bytes overwritten inside an item of a `.distcp` file are a defect,
/// as they are in a `.pth` (issue 26, item 17): every item's records have
/// their CRC-32s checked.
#[test]
fn verify_finds_a_corrupted_dcp_item() {
    use stowage::checkpoint::dcp::{metadata::ItemKind, DcpCheckpoint};
    use stowage_zip::{ZipLimits, ZipReader};
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixtures().join("dcp/one")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    assert_eq!(
        ok(&stowage(&["verify".as_ref(), dir.path().as_os_str()]))
            .lines()
            .last(),
        Some("ok")
    );
    let dcp = DcpCheckpoint::open(dir.path(), &Default::default()).unwrap();
    let info = dcp
        .metadata()
        .items
        .iter()
        .find_map(|i| match &i.kind {
            ItemKind::Tensor(t) => t.chunk(0).map(|c| c.storage.to_info()),
            ItemKind::Bytes(_) => None,
        })
        .unwrap();
    let file = dir.path().join(&info.relative_path);
    let mut bytes = std::fs::read(&file).unwrap();
    let item = &bytes[info.offset as usize..(info.offset + info.length) as usize];
    let zip = ZipReader::new(item, &ZipLimits::default()).unwrap();
    let data = zip
        .entries()
        .iter()
        .find(|e| zip.name(e).contains("/data/") && e.size >= 4)
        .unwrap();
    let at = (info.offset + zip.data_offset(data).unwrap()) as usize;
    for b in &mut bytes[at..at + 4] {
        *b ^= 0xff;
    }
    std::fs::write(&file, &bytes).unwrap();
    let out = stowage(&["verify".as_ref(), dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let report = text(&out.stdout);
    assert!(
        report.contains(&info.relative_path) && report.contains("crc-32 mismatch"),
        "{report}"
    );
    assert!(report.trim_end().ends_with("1 defect"), "{report}");
}

/// `convert --select PATH` keeps the subtree at a dotted path, its paths
/// relative to it, and only the storages it uses (issue 26, item 13).
#[test]
fn convert_select_keeps_a_subtree() {
    let tmp = tempfile::tempdir().unwrap();
    let dcp = fixtures().join("dcp/four");
    let out = tmp.path().join("model.pt");
    ok(&stowage_convert(&[
        dcp.as_os_str(),
        out.as_os_str(),
        "--select".as_ref(),
        "model".as_ref(),
    ]));
    let doc: Json = serde_json::from_str(&ok(&stowage(&[
        "inspect".as_ref(),
        out.as_os_str(),
        "--json".as_ref(),
    ])))
    .unwrap();
    let names: Vec<_> = doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].clone())
        .collect();
    assert_eq!(names.len(), 5);
    assert!(names.contains(&serde_json::json!(["w"])), "{names:?}");
    assert_eq!(doc["values"], serde_json::json!([]));
    let config = tmp.path().join("config.pt");
    ok(&stowage_convert(&[
        dcp.as_os_str(),
        config.as_os_str(),
        "--select".as_ref(),
        "config".as_ref(),
    ]));
    let doc: Json = serde_json::from_str(&ok(&stowage(&[
        "inspect".as_ref(),
        config.as_os_str(),
        "--json".as_ref(),
    ])))
    .unwrap();
    assert_eq!(doc["storages"], serde_json::json!([]));
    assert_eq!(doc["values"][0]["path"], serde_json::json!(["lr"]));
    let missing = stowage_convert(&[
        dcp.as_os_str(),
        config.as_os_str(),
        "--select".as_ref(),
        "nope".as_ref(),
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("nope"));
}

/// A copy of the fixture folder `name`.
fn copy_fixture(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixtures().join(name)).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    dir
}

/// A zstd-compressed item (`_extension.ZStandard`) is decoded and its
/// archive's CRC-32s checked: four bytes overwritten inside it are one
/// defect naming the file and the item, and the load stopping at it again
/// is a note, not a second defect (issue 26, item 17).
#[test]
fn verify_decodes_zstd_items_and_checks_their_archives() {
    use stowage::checkpoint::dcp::{metadata::ItemKind, DcpCheckpoint};
    let dir = copy_fixture("dcp/zstd");
    let report = ok(&stowage(&["verify".as_ref(), dir.path().as_os_str()]));
    let checked = report.lines().rev().nth(1).unwrap();
    assert!(checked.contains("DCP items (8 through zstd)"), "{checked}");
    let dcp = DcpCheckpoint::open(dir.path(), &Default::default()).unwrap();
    let (fqn, info) = dcp
        .metadata()
        .items
        .iter()
        .find_map(|i| match &i.kind {
            ItemKind::Tensor(t) if t.chunk(0).is_some_and(|c| c.storage.length > 64) => {
                t.chunk(0).map(|c| (i.fqn.clone(), c.storage.to_info()))
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(info.transforms, ["stream.zstd/1"]);
    let file = dir.path().join(&info.relative_path);
    let mut bytes = std::fs::read(&file).unwrap();
    let at = (info.offset + info.length / 2) as usize;
    for b in &mut bytes[at..at + 4] {
        *b ^= 0x5a;
    }
    std::fs::write(&file, &bytes).unwrap();
    let out = stowage(&["verify".as_ref(), dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let report = text(&out.stdout);
    let defects: Vec<&str> = report
        .lines()
        .filter(|l| !l.contains(": note: ") && !l.starts_with("checked: "))
        .collect();
    assert_eq!(defects.len(), 2, "one defect, then the count: {report}");
    assert!(
        defects[0].contains(&info.relative_path) && defects[0].contains(&format!("item {fqn} ")),
        "{report}"
    );
    assert_eq!(defects[1], "1 defect", "{report}");
}

/// A sharded set with a shard missing, or with a shard whose header is
/// broken: the shard's defect is listed once, under the shard, and the
/// set's load stopping at it is a note, not a defect of the index.
#[test]
fn verify_of_a_set_blames_the_shard_once() {
    let missing = copy_fixture("sharded/safetensors");
    std::fs::remove_file(missing.path().join("model-00002-of-00003.safetensors")).unwrap();
    let broken = copy_fixture("sharded/safetensors");
    let shard = broken.path().join("model-00002-of-00003.safetensors");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[8] = b'!'; // the JSON header's first byte
    std::fs::write(&shard, &bytes).unwrap();
    for dir in [&missing, &broken] {
        let out = stowage(&["verify".as_ref(), dir.path().as_os_str()]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        let report = text(&out.stdout);
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines.last(), Some(&"1 defect"), "{report}");
        let defects: Vec<&&str> = lines
            .iter()
            .filter(|l| !l.contains(": note: ") && !l.starts_with("checked: "))
            .collect();
        assert_eq!(defects.len(), 2, "{report}");
        assert!(
            defects[0].contains("model-00002-of-00003.safetensors: "),
            "{report}"
        );
        assert!(
            lines.iter().any(|l| l
                .contains(": note: loading the folder stops at model-00002-of-00003.safetensors")),
            "{report}"
        );
    }
}

/// `stowage convert ARGS` under strace, which sends `signal` to it at its
/// `when`-th call of `syscall` (the call is made; the signal arrives as it
/// returns).
fn convert_signalled(
    args: &[std::ffi::OsString],
    syscall: &str,
    when: u32,
    signal: &str,
    fail: bool,
) -> Output {
    // Failing the call as well (EIO) keeps it from happening at all.
    let error = if fail { ":error=EIO" } else { "" };
    Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("trace={syscall}"))
        .arg("-e")
        .arg(format!(
            "inject={syscall}:signal={signal}:when={when}{error}"
        ))
        .arg(env!("CARGO_BIN_EXE_stowage"))
        .arg("convert")
        .args(args)
        .output()
        .expect("strace runs (the Debian package strace; .ci/run installs it)")
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// issue 27, item 3: a save ended by SIGINT or SIGTERM (sent at an exact
/// step) leaves no temporary file or staging folder, and the target as it
/// was, the user's files beside the set included.
#[test]
fn a_convert_ended_by_a_signal_leaves_no_temporaries() {
    let tmp = tempfile::tempdir().unwrap();
    let dcp = fixtures().join("dcp/four");
    let set = tmp.path().join("set");
    let to_set = |out: &Path| -> Vec<std::ffi::OsString> {
        [
            dcp.as_os_str(),
            out.as_os_str(),
            "--to".as_ref(),
            "safetensors".as_ref(),
            "--max-shard-size".as_ref(),
            "200B".as_ref(),
            "--drop-values".as_ref(),
        ]
        .map(|a: &std::ffi::OsStr| a.to_owned())
        .to_vec()
    };
    ok(&stowage_convert(&to_set(&set)));
    std::fs::write(set.join("config.json"), "{}").unwrap();
    std::fs::create_dir(set.join("tokenizer")).unwrap();
    std::fs::write(set.join("tokenizer/vocab.txt"), "a b c").unwrap();
    let before: Vec<(String, Vec<u8>)> = names(&set)
        .into_iter()
        .filter(|n| n != "tokenizer")
        .map(|n| (n.clone(), std::fs::read(set.join(&n)).unwrap()))
        .collect();
    // The steps, as `strace -e trace=rename,renameat,renameat2` shows them:
    // each shard is written into a temporary, renamed (`rename`) into the
    // staging folder; then the staging folder is exchanged with the set
    // (`renameat2`). A single file's temporary is renamed (`rename`) onto
    // it, which here fails as the signal comes.
    let one = tmp.path().join("one.safetensors");
    let one_args: Vec<std::ffi::OsString> = vec![
        dcp.clone().into(),
        one.clone().into(),
        "--drop-values".into(),
    ];
    for (args, syscall, when, signal, number, fail) in [
        // While the set's second shard is put in the staging folder.
        (to_set(&set), "rename", 2, "SIGINT", 2, false),
        // Just after the exchange: the set is new, the user's folder is
        // still in the previous folder.
        (to_set(&set), "renameat2", 1, "SIGTERM", 15, false),
        // A single file, its temporary whole but not in place.
        (one_args, "rename", 1, "SIGTERM", 15, true),
    ] {
        let out = convert_signalled(&args, syscall, when, signal, fail);
        // Ended by the signal, as strace passes it on (by the signal
        // itself, or as the exit status 128 + its number).
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.signal() == Some(number) || out.status.code() == Some(128 + number),
            "{signal} at {syscall}: {:?} {}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        assert_eq!(names(tmp.path()), ["set"], "{signal} at {syscall}");
    }
    assert_eq!(names(tmp.path()), ["set"], "no temporary, no single file");
    for (name, bytes) in &before {
        assert_eq!(&std::fs::read(set.join(name)).unwrap(), bytes, "{name}");
    }
    assert_eq!(
        std::fs::read_to_string(set.join("tokenizer/vocab.txt")).unwrap(),
        "a b c"
    );
}

/// A conversion whose tensor does not fit in the memory the process may use
/// streams it where the output takes it a window at a time (a file, a set),
/// and otherwise (a DCP's chunk) fails with one line naming the tensor and
/// the bytes it could not have, exit 2, and leaves no output and no
/// temporary (an aborted process would leave both its temporary and the
/// caller without a reason).
#[test]
fn a_tensor_too_large_for_memory_is_an_error_that_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("big.safetensors");
    // One float32 tensor of 512 MiB, its bytes a hole in a sparse file.
    let header = br#"{"w":{"dtype":"F32","shape":[134217728],"data_offsets":[0,536870912]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    std::fs::write(&input, &bytes).unwrap();
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap();
    file.set_len(bytes.len() as u64 + (1 << 29)).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    for (out, to) in [
        ("one.safetensors", None),
        ("set", Some("safetensors")),
        ("dcp", Some("dcp")),
        ("one.pt", None),
    ] {
        let target = out_dir.path().join(out);
        // 256 MiB of address space: the program runs, the tensor cannot be held.
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(r#"ulimit -v 262144 && exec "$0" "$@""#)
            .arg(env!("CARGO_BIN_EXE_stowage"))
            .args(["convert", "--no-sync"])
            .arg(&input)
            .arg(&target);
        if let Some(to) = to {
            cmd.args(["--to", to]);
        }
        let run = cmd.output().unwrap();
        let err = text(&run.stderr);
        // Converting to a file (or a set of files) writes from the lazily
        // loaded file, a window at a time: it needs no room for the tensor,
        // and succeeds. A DCP's chunk is a compact copy of its own.
        if to != Some("dcp") {
            assert!(run.status.success(), "{out}: {err}");
            if target.is_dir() {
                std::fs::remove_dir_all(&target).unwrap();
            } else {
                std::fs::remove_file(&target).unwrap();
            }
            continue;
        }
        assert_eq!(run.status.code(), Some(2), "{out}: {err}");
        assert_eq!(err.lines().count(), 1, "{out}: {err}");
        assert!(
            err.contains("failed to allocate 536870912 bytes"),
            "{out}: {err}"
        );
        assert!(err.contains("w: "), "{out}: names the tensor: {err}");
        assert_eq!(
            names(out_dir.path()),
            Vec::<String>::new(),
            "{out}: left behind"
        );
    }
}

/// A folder that is a mount point (a volume mounted at the checkpoint's
/// folder) cannot be renamed, so its set is replaced file by file inside it:
/// the save succeeds, the user's files stay, the set is whole and nothing is
/// left behind. The mount is a tmpfs in a user and mount namespace of its own
/// (`unshare -Urm`), where the whole scenario runs; skipped where the kernel
/// allows none.
#[test]
fn a_mount_point_is_a_folder_target() {
    if !Command::new("unshare")
        .args(["-Urm", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: no user and mount namespaces here (unshare -Urm)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let dcp = fixtures().join("dcp/four");
    let script = r#"
        set -e
        stowage=$1 dcp=$2 mnt=$3
        mount -t tmpfs none "$mnt"
        mkdir "$mnt/tokenizer" && echo vocab > "$mnt/tokenizer/vocab.txt" && echo '{}' > "$mnt/config.json"
        "$stowage" convert -q --drop-values --to safetensors --max-shard-size 200B "$dcp" "$mnt" > /dev/null
        ls -A "$mnt" | tr '\n' ' '; echo
        "$stowage" convert -q --drop-values --to safetensors "$dcp" "$mnt" > /dev/null
        ls -A "$mnt" | tr '\n' ' '; echo
        cat "$mnt/tokenizer/vocab.txt"
        "$stowage" verify "$mnt" | tail -n 1
        "$stowage" diff "$mnt" "$dcp" | tail -n 1
    "#;
    let out = Command::new("unshare")
        .args(["-Urm", "bash", "-c", script, "bash"])
        .arg(env!("CARGO_BIN_EXE_stowage"))
        .arg(&dcp)
        .arg(&mnt)
        .output()
        .unwrap();
    let lines = ok(&out);
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(
        lines,
        [
            "config.json model-00001-of-00003.safetensors model-00002-of-00003.safetensors \
             model-00003-of-00003.safetensors model.safetensors.index.json tokenizer ",
            "config.json model.safetensors tokenizer ",
            "vocab",
            "ok",
            // The 5 values were dropped (`--drop-values`); no tensor differs.
            "5 differences",
        ],
        "{}",
        text(&out.stderr)
    );
}

/// Runs `stowage convert IN OUT ARGS…` as `world` processes at once (as
/// torchrun, a SLURM array or Ray tasks start them, each told its rank by
/// `RANK` and `WORLD_SIZE`), and checks what each says: its rank, and that
/// it wrote the index (or `.metadata`) or left it to the ranks it names;
/// at least one wrote it.
fn converted_at_once(input: &Path, out: &Path, args: &[&str], world: usize) {
    let children: Vec<_> = (0..world)
        .map(|rank| {
            Command::new(env!("CARGO_BIN_EXE_stowage"))
                .arg("convert")
                .arg(input)
                .arg(out)
                .args(args)
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", world.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("the stowage binary starts")
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|child| child.wait_with_output().expect("the stowage binary runs"))
        .collect();
    let mut writers = 0;
    for (rank, child) in children.iter().enumerate() {
        let said = ok(child);
        assert!(
            said.contains(&format!("as rank {rank} of {world}")),
            "{said}"
        );
        let wrote = said.contains("wrote the index");
        writers += usize::from(wrote);
        assert!(
            wrote || said.contains("the index is left to the last rank to finish"),
            "{said}"
        );
    }
    assert!(writers >= 1, "no rank of {world} wrote the index");
}

/// `dir` holds exactly the files (names and bytes) of `expected`.
fn assert_same_files(dir: &Path, expected: &[(String, Vec<u8>)], what: &str) {
    let got = files_of(dir);
    assert!(
        got == expected,
        "{what}: {:?} against {:?}",
        got.iter().map(|f| &f.0).collect::<Vec<_>>(),
        expected.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
}

/// Every file of `dir` (names and bytes), sorted by name.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn ranks_converting_at_once_write_what_one_process_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let dcp = fixtures().join("dcp/four");
    for to in ["safetensors", "bin"] {
        let single = tmp.path().join(format!("single-{to}"));
        let common = ["--to", to, "--max-shard-size", "150B", "--no-sync"];
        let mut args: Vec<&std::ffi::OsStr> = vec![dcp.as_os_str(), single.as_os_str()];
        args.extend(common.iter().map(std::ffi::OsStr::new));
        ok(&stowage_convert(&args));
        let expected = files_of(&single);
        assert!(
            expected.len() > 3,
            "{:?}",
            expected.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        for world in [1usize, 2, 4] {
            let out = tmp.path().join(format!("{to}-{world}"));
            converted_at_once(&dcp, &out, &common, world);
            assert_same_files(&out, &expected, &format!("{to}, {world} ranks"));
        }
    }
    // A rank outside the world is refused.
    let out = stowage_convert(&[
        dcp.as_os_str(),
        tmp.path().join("bad").as_os_str(),
        "--to".as_ref(),
        "safetensors".as_ref(),
        "--rank".as_ref(),
        "2".as_ref(),
        "--world".as_ref(),
        "2".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// A DCP written by `world` processes at once, each its rank's file, is
/// byte for byte the folder `--ranks world` writes in one process.
#[test]
fn ranks_converting_to_dcp_at_once_write_what_one_process_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixtures().join("dcp/four");
    for world in [1usize, 2, 3] {
        let single = tmp.path().join(format!("single-{world}"));
        let ranks = world.to_string();
        ok(&stowage_convert(&[
            src.as_os_str(),
            single.as_os_str(),
            "--to".as_ref(),
            "dcp".as_ref(),
            "--ranks".as_ref(),
            ranks.as_ref(),
            "--no-sync".as_ref(),
        ]));
        let expected = files_of(&single);
        assert_eq!(
            expected.len(),
            world + 1,
            "{world} data files and .metadata"
        );
        let out = tmp.path().join(format!("parts-{world}"));
        converted_at_once(&src, &out, &["--to", "dcp", "--no-sync"], world);
        assert_same_files(&out, &expected, &format!("{world} ranks"));
    }
    // --ranks must agree with the world.
    let out = stowage_convert(&[
        src.as_os_str(),
        tmp.path().join("bad").as_os_str(),
        "--to".as_ref(),
        "dcp".as_ref(),
        "--ranks".as_ref(),
        "3".as_ref(),
        "--rank".as_ref(),
        "0".as_ref(),
        "--world".as_ref(),
        "2".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// A marker left in the folder by an earlier conversion (same world, another
/// set) is warned about by the rank that meets it, and does not stop the set:
/// the rank it names replaces it when it finishes, and writes the index.
#[test]
fn a_stale_marker_of_another_set_is_warned_about_and_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let dcp = fixtures().join("dcp/four");
    let common = [
        "--to",
        "safetensors",
        "--max-shard-size",
        "150B",
        "--no-sync",
    ];
    let single = tmp.path().join("single");
    let mut args: Vec<&std::ffi::OsStr> = vec![dcp.as_os_str(), single.as_os_str()];
    args.extend(common.iter().map(std::ffi::OsStr::new));
    ok(&stowage_convert(&args));
    let expected = files_of(&single);

    let out = tmp.path().join("parts");
    std::fs::create_dir_all(&out).unwrap();
    let stale = out.join(".stowage-part-00001-of-00002");
    std::fs::write(&stale, "model-00001-of-00009.safetensors\n").unwrap();
    let rank = |r: usize| {
        let mut args: Vec<std::ffi::OsString> = vec![dcp.clone().into(), out.clone().into()];
        args.extend(common.iter().map(std::ffi::OsString::from));
        args.extend([
            "--rank".into(),
            r.to_string().into(),
            "--world".into(),
            "2".into(),
        ]);
        stowage_convert(&args)
    };
    let first = rank(0);
    let said = ok(&first);
    assert!(
        said.contains("the index is left to the last rank to finish (rank 1 not done yet)"),
        "{said}"
    );
    let warned = text(&first.stderr);
    assert!(
        warned.contains("warning:") && warned.contains(&stale.display().to_string()),
        "{warned}"
    );
    let second = ok(&rank(1));
    assert!(second.contains("wrote the index"), "{second}");
    assert_same_files(&out, &expected, "after the stale marker");
}
