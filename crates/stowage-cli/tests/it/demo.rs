//! The `stowage` binary, run as a user runs it: `demo`, usage errors, a closed pipe.

use std::process::{Command, Output, Stdio};

fn stowage(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stowage"))
        .args(args)
        .output()
        .expect("the stowage binary runs")
}

#[test]
fn demo_walks_through_the_storage_model() {
    let out = stowage(&["demo"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");

    // ones(3): a 12-byte storage printing `0 0 128 63` three times.
    assert!(text.contains(">>> t = torch.ones(3)"), "{text}");
    let storage =
        " 0\n 0\n 128\n 63\n".repeat(3) + "[stowage.UntypedStorage(device=cpu) of size 12]";
    assert!(text.contains(&storage), "{text}");
    // clone, fill_(0), set_.
    assert!(text.contains(">>> t.set_(s, 0, (3,), (1,))"), "{text}");
    assert!(text.contains("\ntensor([0., 0., 0.])\n"), "{text}");
    assert!(text.contains("Error::OutOfStorage: layout needs 16 bytes but the storage holds 12"));
    // Views: one storage data_ptr on every row of the table.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("x "))
        .skip(1)
        .take_while(|l| !l.starts_with('('))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 7, "{text}");
    let storage_ptrs: Vec<&str> = rows.iter().map(|r| r[r.len() - 2]).collect();
    assert!(storage_ptrs
        .iter()
        .all(|p| p.starts_with("0x") && *p == storage_ptrs[0]));
    // b[2] starts 8 floats into the storage.
    assert!(text.contains("(8, 4)\n"), "{text}");
    assert!(text.contains("\n32\n"), "{text}");
    // A write through b[2] seen through b.t().
    assert!(text.contains("[  8., 100.,  10.,  11.]]"), "{text}");
    assert!(text.contains("tensor(100.)"), "{text}");
    // dtypes over one storage.
    assert!(text.contains("tensor([  0,   0, 128,  63,   0,   0, 128,  63], dtype=torch.uint8)"));
    assert!(text.contains("tensor([    0, 16256,     0, 16256], dtype=torch.int16)"));
    assert!(text.contains("tensor([2., 1.])"), "{text}");
    // Meta.
    assert!(
        text.contains("tensor(..., device='meta', size=(2, 3))"),
        "{text}"
    );
    assert!(text.contains("(24, 0)"), "{text}");
    assert!(text.contains("Error::NoData: "), "{text}");
    // A gradient on a storage of its own; in-place writes to the leaf refused.
    assert!(
        text.contains("\n[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("\n{:?}\n", [0, 0, 128, 63].repeat(3))),
        "{text}"
    );
    assert!(text.contains("Error::InPlaceRequiresGrad: "), "{text}");
    assert!(text.contains("tensor([-0.5000, -0.5000, -0.5000], requires_grad=True)"));
    let lines = text.lines().count();
    assert!((70..=120).contains(&lines), "{lines} lines");
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = stowage(&["nosuchcommand"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nosuchcommand"), "{err}");
}

#[test]
fn unexpected_argument_is_a_usage_error() {
    let out = stowage(&["demo", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn help_and_version_succeed() {
    for args in [&["--help"][..], &["--version"], &["demo", "--help"]] {
        let out = stowage(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(!out.stdout.is_empty());
    }
}

/// `stowage demo | head -0`: the reader is gone before the first write, so
/// every write fails with EPIPE; the binary stops quietly with status 0.
#[cfg(unix)]
#[test]
fn closed_pipe_is_quiet_success() {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("sleep 0.3; exec \"$0\" demo")
        .arg(env!("CARGO_BIN_EXE_stowage"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("the child finishes");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
