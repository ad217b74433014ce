//! A source resolved once (`stowage::checkpoint::resolve`): what a path
//! holds is found by one probe, and the loaded checkpoint says where it came
//! from, its layout and its files, so that no caller probes again.

use std::path::{Path, PathBuf};

use stowage::checkpoint::{resolve, Folder, Layout};
use stowage::{LoadMode, LoadOptions};

use crate::common::fixtures_dir;

/// The file names of `files`, in order.
fn names(files: &[stowage::io::Location]) -> Vec<String> {
    files
        .iter()
        .map(|f| f.file_name().unwrap().to_owned())
        .collect()
}

/// The files of `dir` whose names `keep` accepts, sorted.
fn listed(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| keep(n))
        .collect();
    names.sort();
    names
}

#[test]
fn every_layout_is_recorded_with_its_files() {
    let f = fixtures_dir();
    let bin = f.join("sharded").join("bin");
    let shards = listed(&bin, |n| n.ends_with(".bin"));
    let ranks = listed(&f.join("dcp").join("hf"), |n| n.ends_with(".safetensors"));
    let cases: Vec<(PathBuf, Layout, Vec<String>)> = vec![
        (
            f.join("simple.pt"),
            Layout::TorchZip,
            vec!["simple.pt".into()],
        ),
        (
            f.join("legacy_format.pt"),
            Layout::TorchLegacy,
            vec!["legacy_format.pt".into()],
        ),
        (bin.clone(), Layout::ShardedBin, shards.clone()),
        (
            bin.join("pytorch_model.bin.index.json"),
            Layout::ShardedBin,
            shards,
        ),
        (
            f.join("dcp").join("one"),
            Layout::Dcp,
            vec![".metadata".into(), "__0_0.distcp".into()],
        ),
        (f.join("dcp").join("hf"), Layout::DcpHf, ranks),
    ];
    for mode in [LoadMode::Eager, LoadMode::Lazy, LoadMode::Fake] {
        let options = LoadOptions::default().with_mode(mode);
        for (path, layout, files) in &cases {
            let ckpt = resolve(path, &options).unwrap().load(&options).unwrap();
            let at = format!("{} ({mode:?})", path.display());
            assert_eq!(ckpt.layout(), *layout, "{at}");
            assert_eq!(names(ckpt.files()), *files, "{at}");
            // `stowage::load_with` is the same resolve and load.
            assert_eq!(
                stowage::load_with(path, &options).unwrap().layout(),
                *layout,
                "{at}"
            );
        }
    }
}

#[test]
fn layouts_are_named_as_the_cli_contract_names_them() {
    let names = [
        (Layout::TorchZip, "torch-zip"),
        (Layout::TorchScript, "torchscript"),
        (Layout::TorchLegacy, "torch-legacy"),
        (Layout::Safetensors, "safetensors"),
        (Layout::ShardedSafetensors, "sharded-safetensors"),
        (Layout::ShardedBin, "sharded-bin"),
        (Layout::Dcp, "dcp"),
        (Layout::DcpHf, "dcp-hf"),
    ];
    for (layout, name) in names {
        assert_eq!(layout.name(), name);
        assert_eq!(
            layout.is_set(),
            name.starts_with("sharded") || name.starts_with("dcp")
        );
    }
}

/// What was resolved is what is loaded: a folder's files are found when it
/// is resolved, and a load reads that version even if the folder is
/// emptied meanwhile (a local folder is held open).
#[test]
fn a_resolved_folder_is_loaded_as_found() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("set");
    copy_dir(&fixtures_dir().join("sharded").join("bin"), &dir);
    let options = LoadOptions::default();
    let source = resolve(&dir, &options).unwrap();
    assert!(matches!(source.folder(), Some(Folder::Sharded(_))));
    assert!(source.is_folder() && !source.is_remote());
    let want = stowage::load(&dir).unwrap().state_dict().unwrap().len();
    // The folder renamed away after it was resolved: its handle still reads it.
    std::fs::rename(&dir, root.path().join("moved")).unwrap();
    let ckpt = source.load(&options).unwrap();
    assert_eq!(ckpt.state_dict().unwrap().len(), want);
    assert_eq!(ckpt.layout(), Layout::ShardedBin);
}

/// A checkpoint built in memory, or loaded from bytes, has no files and
/// says its container.
#[test]
fn a_checkpoint_not_loaded_from_files_has_none() {
    let bytes = std::fs::read(fixtures_dir().join("legacy_format.pt")).unwrap();
    let ckpt = stowage::checkpoint::load_bytes(&bytes, &LoadOptions::default()).unwrap();
    assert_eq!(ckpt.layout(), Layout::TorchLegacy);
    assert!(ckpt.files().is_empty());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}
