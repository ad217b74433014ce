//! Crash-safe saving: a process killed in the middle of a large save leaves the
//! previous file intact, and a later save leaves no temporary file behind.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use stowage::{Checkpoint, DType, Tensor};

fn temp_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".stowage-tmp"))
        })
        .collect()
}

fn small() -> Checkpoint {
    Checkpoint::from_state_dict([("w", Tensor::arange(0.0, 6.0, 1.0, DType::Float32).unwrap())])
}

/// The child half: saves a large checkpoint over the target, again and again,
/// until the parent kills it. Runs only when STOWAGE_CRASH_TARGET is set.
#[test]
fn crash_child_saves_forever() {
    let Ok(target) = std::env::var("STOWAGE_CRASH_TARGET") else {
        return;
    };
    let big = Tensor::full(&[16, 1024, 1024], 1.0, DType::Float32).unwrap(); // 64 MiB
    let ckpt = Checkpoint::from_state_dict([("big", big)]);
    loop {
        stowage::save(&target, &ckpt).unwrap();
    }
}

#[test]
fn a_save_killed_midway_leaves_the_previous_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("model.pt");
    stowage::save(&target, &small()).unwrap();
    let before = std::fs::read(&target).unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_safety::crash_child_saves_forever",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STOWAGE_CRASH_TARGET", &target)
        .spawn()
        .unwrap();
    // Wait until the child is writing its temporary file, and let it write a
    // while. A child that ended (a full disk, say) is reported at once.
    let start = Instant::now();
    while temp_files(dir.path()).is_empty() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child ended ({status}) before it started saving: see its output above");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the child never started saving"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(10));
    child.kill().unwrap();
    child.wait().unwrap();

    // The target is either the previous file or one complete save, never a torn one.
    let now = std::fs::read(&target).unwrap();
    if now != before {
        let loaded = stowage::load(&target).expect("a complete checkpoint");
        assert_eq!(loaded.state_dict().unwrap()[0].1.numel(), 16 << 20);
    }
    assert!(stowage::load(&target).is_ok());

    // A later save completes and cleans up what the killed process left behind.
    stowage::save(&target, &small()).unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), before);
    assert_eq!(
        temp_files(dir.path()),
        Vec::<PathBuf>::new(),
        "temporary files left behind"
    );
}

#[test]
fn saving_over_a_memory_mapped_checkpoint_leaves_the_mapping_valid() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("model.pt");
    stowage::save(&target, &small()).unwrap();
    let opts = stowage::LoadOptions::default();
    // SAFETY: the file is replaced by rename (a new file), never truncated or written.
    let mapped = unsafe { stowage::load_mmap(&target, &opts) }.unwrap();
    let replacement =
        Checkpoint::from_state_dict([("w", Tensor::zeros(&[1], DType::Float32).unwrap())]);
    stowage::save(&target, &replacement).unwrap();
    // The old storage still reads the old bytes: the save made a new file.
    let (_, w) = &mapped.state_dict().unwrap()[0];
    assert_eq!(w.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(
        stowage::load(&target).unwrap().state_dict().unwrap()[0]
            .1
            .numel(),
        1
    );
}
