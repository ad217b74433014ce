//! The command line on checkpoints named by URL, against servers the tests
//! start on 127.0.0.1: moto's S3 server and an HTTP server with `Range`
//! support (`crates/stowage/tests/it/servers`). Every command's output on an
//! uploaded fixture is the local file's; `inspect --no-hash` fetches only
//! metadata; an interrupted upload leaves no object; faults are one clear
//! line, exit 2, nothing written.

use crate::servers;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::servers::Server;
use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stowage/tests/fixtures")
}

/// The S3 server every test of this file shares (it stops with the process).
fn moto() -> Option<&'static Server> {
    static MOTO: OnceLock<Option<Server>> = OnceLock::new();
    MOTO.get_or_init(servers::moto).as_ref()
}

/// Runs `stowage` with the S3 environment of `server` (if any) and `env`.
fn stowage(server: Option<&Server>, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stowage"));
    if let Some(s) = server {
        cmd.envs(servers::s3_env(s));
    }
    cmd.env("STOWAGE_REMOTE_RETRIES", "0")
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running stowage")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every `.pt` fixture (torch zip and legacy; safetensors too where present).
fn fixture_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "pt" || e == "safetensors")
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_command_reads_a_url_as_its_file() {
    let Some(server) = moto() else { return };
    let files = fixture_files();
    let pairs: Vec<String> = files
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            format!("{}=cli/{name}", p.display())
        })
        .collect();
    let mut args = vec!["put"];
    args.extend(pairs.iter().map(String::as_str));
    servers::s3(server, &args);
    let out = tempfile::tempdir().unwrap();
    for file in &files {
        let name = file.file_name().unwrap().to_str().unwrap();
        let url = format!("s3://{}/cli/{name}", servers::BUCKET);
        let local = file.to_str().unwrap();
        let s = Some(server);

        // inspect --json: the same document, plus what was transferred.
        let (a, b) = (
            stowage(s, &[], &["inspect", "--json", &url]),
            stowage(s, &[], &["inspect", "--json", local]),
        );
        assert_eq!(
            a.status.code(),
            b.status.code(),
            "{name}: {}",
            text(&a.stderr)
        );
        if b.status.success() {
            let mut ja: Json = serde_json::from_slice(&a.stdout).unwrap();
            let jb: Json = serde_json::from_slice(&b.stdout).unwrap();
            let transfer = ja.as_object_mut().unwrap().remove("transfer").unwrap();
            assert!(transfer["requests"].as_u64().unwrap() >= 1, "{name}");
            assert!(jb.get("transfer").is_none());
            assert_eq!(ja, jb, "{name}");
        }
        // The table, verify and the error lines, with the URL for the path.
        for cmd in [&["inspect"][..], &["verify"][..]] {
            let a = stowage(s, &[], &[cmd, &[url.as_str()]].concat());
            let b = stowage(s, &[], &[cmd, &[local]].concat());
            assert_eq!(a.status.code(), b.status.code(), "{name} {cmd:?}");
            assert_eq!(
                text(&a.stdout).replace(&url, local),
                text(&b.stdout),
                "{name} {cmd:?}"
            );
        }
        // diff against the local file: the same.
        let d = stowage(s, &[], &["diff", &url, local]);
        if b.status.success() {
            assert_eq!(d.status.code(), Some(0), "{name}: {}", text(&d.stdout));
        }
        // convert from the URL writes what convert from the file writes.
        if b.status.success() {
            let (x, y) = (out.path().join("x"), out.path().join("y"));
            std::fs::create_dir_all(&x).unwrap();
            std::fs::create_dir_all(&y).unwrap();
            let (px, py) = (x.join("out.pt"), y.join("out.pt"));
            let a = stowage(s, &[], &["convert", &url, px.to_str().unwrap()]);
            let b = stowage(s, &[], &["convert", local, py.to_str().unwrap()]);
            assert_eq!(a.status.code(), b.status.code(), "{name}");
            assert_eq!(text(&a.stdout), text(&b.stdout), "{name}");
            if b.status.success() {
                assert!(
                    std::fs::read(&px).unwrap() == std::fs::read(&py).unwrap(),
                    "{name}"
                );
            }
        }
    }
}

#[test]
fn inspect_no_hash_fetches_only_the_metadata() {
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sixteen.pt");
    assert!(servers::torch_checkpoint(&file, 16, 4), "torch.save failed");
    let url = servers::put(server, &file, "meta/sixteen.pt");
    let run = stowage(Some(server), &[], &["inspect", "--json", "--no-hash", &url]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let doc: Json = serde_json::from_slice(&run.stdout).unwrap();
    let t = &doc["transfer"];
    assert!(t["bytes_received"].as_u64().unwrap() < 1 << 20, "{t}");
    assert!(t["requests"].as_u64().unwrap() <= 4, "{t}");
    // The table reads metadata only too; hashing reads every byte.
    let run = stowage(Some(server), &[], &["inspect", "--json", &url]);
    let doc: Json = serde_json::from_slice(&run.stdout).unwrap();
    assert!(doc["transfer"]["bytes_received"].as_u64().unwrap() >= 64 << 20);
}

/// A folder by URL (a trailing `/`): a distributed checkpoint or a sharded
/// set. `inspect --json` says what it says of the local folder (plus the
/// transfer), and `convert` writes the same file.
#[test]
fn folders_by_url_inspect_and_convert_as_local_folders() {
    let Some(server) = moto() else { return };
    let out = tempfile::tempdir().unwrap();
    for (i, sub) in [
        "dcp/four",
        "dcp/zstd",
        "dcp/hf",
        "sharded/safetensors",
        "sharded/bin",
    ]
    .iter()
    .enumerate()
    {
        let dir = fixtures().join(sub);
        let url = servers::put_dir(server, &dir, &format!("folders/{sub}"));
        let local = dir.to_str().unwrap();
        let s = Some(server);
        let (a, b) = (
            stowage(s, &[], &["inspect", "--json", &url]),
            stowage(s, &[], &["inspect", "--json", local]),
        );
        assert!(a.status.success(), "{sub}: {}", text(&a.stderr));
        assert!(b.status.success(), "{sub}: {}", text(&b.stderr));
        let mut ja: Json = serde_json::from_slice(&a.stdout).unwrap();
        let jb: Json = serde_json::from_slice(&b.stdout).unwrap();
        let transfer = ja.as_object_mut().unwrap().remove("transfer").unwrap();
        assert!(transfer["requests"].as_u64().unwrap() >= 2, "{sub}");
        assert_eq!(ja, jb, "{sub}");
        let (x, y) = (
            out.path().join(format!("{i}-url")),
            out.path().join(format!("{i}-local")),
        );
        std::fs::create_dir_all(&x).unwrap();
        std::fs::create_dir_all(&y).unwrap();
        let (px, py) = (x.join("out.pt"), y.join("out.pt"));
        let a = stowage(s, &[], &["convert", &url, px.to_str().unwrap()]);
        let b = stowage(s, &[], &["convert", local, py.to_str().unwrap()]);
        assert!(a.status.success(), "{sub}: {}", text(&a.stderr));
        assert!(b.status.success(), "{sub}: {}", text(&b.stderr));
        assert!(
            std::fs::read(&px).unwrap() == std::fs::read(&py).unwrap(),
            "{sub}"
        );
    }
}

/// `verify` of a folder by URL gives the local folder's verdict, line for
/// line with the URL for the path: each shard or rank file checked, then
/// the folder as a whole. A shard the index names but the bucket lacks is a
/// defect (exit 1), as it is on disk.
#[test]
fn verify_of_a_folder_url_is_the_local_folders_verdict() {
    let Some(server) = moto() else { return };
    let s = Some(server);
    for sub in ["dcp/four", "dcp/hf", "sharded/safetensors", "sharded/bin"] {
        let dir = fixtures().join(sub);
        let url = servers::put_dir(server, &dir, &format!("verify/{sub}"));
        let local = format!("{}/", dir.to_str().unwrap());
        let (a, b) = (
            stowage(s, &[], &["verify", &url]),
            stowage(s, &[], &["verify", &local]),
        );
        assert_eq!(a.status.code(), Some(0), "{sub}: {}", text(&a.stderr));
        assert_eq!(b.status.code(), Some(0), "{sub}: {}", text(&b.stderr));
        let lines = text(&a.stdout).replace(&url, &local);
        assert_eq!(lines, text(&b.stdout), "{sub}");
        assert!(lines.ends_with("ok\n"), "{sub}: {lines}");
    }

    // A set missing its second shard, in the bucket and on disk.
    let set = fixtures().join("sharded/safetensors");
    let partial = tempfile::tempdir().unwrap();
    for name in [
        "model.safetensors.index.json",
        "model-00001-of-00003.safetensors",
        "model-00003-of-00003.safetensors",
    ] {
        std::fs::copy(set.join(name), partial.path().join(name)).unwrap();
    }
    let url = servers::put_dir(server, partial.path(), "verify/partial");
    let local = format!("{}/", partial.path().to_str().unwrap());
    let (a, b) = (
        stowage(s, &[], &["verify", &url]),
        stowage(s, &[], &["verify", &local]),
    );
    assert_eq!(a.status.code(), Some(1), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(1), "{}", text(&b.stderr));
    // The same defects; the load's error (the second) is the store's text.
    let (lines, theirs) = (text(&a.stdout).replace(&url, &local), text(&b.stdout));
    let first = |t: &str| t.lines().next().unwrap_or_default().to_owned();
    assert_eq!(first(&lines), first(&theirs));
    assert!(
        first(&lines)
            .ends_with("model-00002-of-00003.safetensors: missing: the set's index names it"),
        "{lines}"
    );
    assert_eq!(lines.lines().last(), theirs.lines().last());
}

/// `bench load URL --json` reports what the loads transferred, as the other
/// commands' JSON does: every byte of every storage, once per load.
#[test]
fn bench_load_of_a_url_reports_the_transfer() {
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.pt");
    assert!(servers::torch_checkpoint(&file, 2, 1), "torch.save failed");
    let url = servers::put(server, &file, "bench/two.pt");
    let size = std::fs::metadata(&file).unwrap().len();
    let run = stowage(
        Some(server),
        &[],
        &["bench", "load", &url, "--repeat", "2", "--json"],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let doc: Json = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(doc["bytes"], 2 << 20);
    let t = &doc["transfer"];
    // Three loads (a warm-up and two timed), each every storage byte, and at
    // most the file plus the head and tail blocks kept for the metadata.
    let received = t["bytes_received"].as_u64().unwrap();
    let most = 3 * (size + (64 << 10) + (256 << 10));
    assert!(received >= 3 * (2 << 20) && received <= most, "{t}");
    assert!(t["requests"].as_u64().unwrap() >= 3 * 2, "{t}");
    assert_eq!(t["bytes_sent"], 0, "{t}");
    // The line for people says it per load; a local file has no transfer.
    let run = stowage(Some(server), &[], &["bench", "load", &url, "--repeat", "1"]);
    assert!(
        text(&run.stdout).contains("transferred per load: "),
        "{}",
        text(&run.stdout)
    );
    let local = stowage(
        None,
        &[],
        &[
            "bench",
            "load",
            file.to_str().unwrap(),
            "--repeat",
            "1",
            "--json",
        ],
    );
    let doc: Json = serde_json::from_slice(&local.stdout).unwrap();
    assert!(doc.get("transfer").is_none(), "{doc}");
}

#[test]
fn an_interrupted_upload_leaves_no_object() {
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.pt");
    // 96 MiB: six 16 MiB parts.
    assert!(servers::torch_checkpoint(&file, 24, 4), "torch.save failed");
    let url = format!("s3://{}/upload/big.pt", servers::BUCKET);
    // Ended by SIGTERM, the upload is aborted (its parts are billed until
    // then); killed outright, it cannot be, and only no object is promised.
    for signal in ["TERM", "KILL"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stowage"))
            .envs(servers::s3_env(server))
            .args(["convert", file.to_str().unwrap(), &url])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Interrupt it once its multipart upload has begun.
        let start = Instant::now();
        while !servers::upload_in_progress(server, "upload/") {
            assert!(start.elapsed() < Duration::from_secs(60), "no upload began");
            assert!(
                child.try_wait().unwrap().is_none(),
                "convert ended before it could be interrupted"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let finished = child.try_wait().unwrap().is_some();
        let sent = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = child.wait().unwrap();
        assert!(!finished, "convert ended before it could be interrupted");
        use std::os::unix::process::ExitStatusExt;
        let number = if signal == "TERM" { 15 } else { 9 };
        assert_eq!(status.signal(), Some(number), "SIG{signal}: {status:?}");
        assert!(servers::keys(server, "upload/").is_empty(), "SIG{signal}");
        if signal == "TERM" {
            assert!(
                !servers::upload_in_progress(server, "upload/"),
                "SIGTERM left its multipart upload pending"
            );
        }
    }
    // Run to the end, the same convert leaves the whole object.
    let run = stowage(
        Some(server),
        &[],
        &["convert", file.to_str().unwrap(), &url],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(
        servers::keys(server, "upload/"),
        vec!["upload/big.pt".to_owned()]
    );
    let d = stowage(Some(server), &[], &["diff", &url, file.to_str().unwrap()]);
    assert_eq!(d.status.code(), Some(0), "{}", text(&d.stdout));
}

#[test]
fn faults_are_one_line_exit_2_and_write_nothing() {
    if moto().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("four.pt");
    assert!(servers::torch_checkpoint(&file, 4, 1), "torch.save failed");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(dir.path().join("truncated.pt"), &bytes[..bytes.len() / 2]).unwrap();
    let Some(mut server) = servers::range_server(dir.path(), &["--slow", "30"]) else {
        return;
    };
    let base = server.endpoint();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("out.safetensors");
    let quick = [("STOWAGE_REMOTE_TIMEOUT", "1")];
    for (what, url, needle) in [
        ("403", format!("{base}/forbidden/four.pt"), "403"),
        ("truncated", format!("{base}/truncated.pt"), "truncated.pt"),
        ("short", format!("{base}/short/four.pt"), "bytes "),
        ("slow", format!("{base}/slow/four.pt"), "bytes "),
    ] {
        let start = Instant::now();
        for args in [
            vec!["inspect", "--json", url.as_str()],
            vec!["convert", url.as_str(), target.to_str().unwrap()],
        ] {
            let run = stowage(None, &quick, &args);
            let err = text(&run.stderr);
            assert_eq!(run.status.code(), Some(2), "{what} {args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{what}: {err}");
            assert!(err.contains(&url), "{what}: {err}");
            assert!(err.contains(needle), "{what}: {err}");
            assert!(!target.exists(), "{what}: a file was written");
        }
        assert!(
            start.elapsed() < Duration::from_secs(25),
            "{what}: {:?}",
            start.elapsed()
        );
    }
    // A stopped server.
    let url = format!("{base}/four.pt");
    server.stop();
    let run = stowage(None, &quick, &["convert", &url, target.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains(&url));
    assert!(!target.exists());
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "temporaries left"
    );
}

#[test]
fn a_server_stopping_in_the_middle_of_an_eager_load_is_an_error() {
    if moto().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("eight.pt");
    // 8 × 4 MiB: the first block (which gives the length), the tail block,
    // then the records, each with its local header (three to a request when
    // read at once, one each when streamed); the server dies after answering
    // the fourth request, in the middle of the records.
    assert!(servers::torch_checkpoint(&file, 8, 4), "torch.save failed");
    let Some(server) = servers::range_server(dir.path(), &["--stop-after", "4"]) else {
        return;
    };
    let url = format!("{}/eight.pt", server.endpoint());
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("out.pt");
    let start = Instant::now();
    let run = stowage(None, &[], &["convert", &url, target.to_str().unwrap()]);
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains(&url), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "a file was left"
    );
}

/// A URL on a server that ignores `Range` (`python -m http.server`, played
/// by `range_server.py`'s `/norange/`): `inspect` lists it as its local
/// file, and `"transfer"` says the object was fetched whole; past
/// `STOWAGE_REMOTE_MAX_WHOLE_GET` it is one error naming the limit, exit 2.
#[test]
fn a_server_without_range_is_read_whole_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixtures().join("params.pt");
    std::fs::copy(&file, dir.path().join("params.pt")).unwrap();
    let Some(server) = servers::range_server(dir.path(), &[]) else {
        return;
    };
    let url = format!("{}/norange/params.pt", server.endpoint());
    let run = stowage(None, &[], &["inspect", "--json", &url]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let mut got: Json = serde_json::from_slice(&run.stdout).unwrap();
    let transfer = got.as_object_mut().unwrap().remove("transfer").unwrap();
    assert_eq!(transfer["whole_gets"], 1, "{transfer}");
    assert_eq!(
        transfer["bytes_received"],
        std::fs::metadata(&file).unwrap().len(),
        "{transfer}"
    );
    let local = stowage(None, &[], &["inspect", "--json", file.to_str().unwrap()]);
    let want: Json = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(got, want);

    let run = stowage(
        None,
        &[("STOWAGE_REMOTE_MAX_WHOLE_GET", "100")],
        &["inspect", "--json", &url],
    );
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&url)
            && err.contains("ignores Range")
            && err.contains("STOWAGE_REMOTE_MAX_WHOLE_GET"),
        "{err}"
    );
}
