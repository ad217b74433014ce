//! The fast save path writes the same bytes every time: storages large enough
//! to be hashed on a second thread, a file pre-sized to the archive's length,
//! synced or not, written over a large existing file or into memory. (Small
//! fixtures are checked for the same in `roundtrip.rs`.)

use std::path::Path;

use stowage::checkpoint::save_to_writer;
use stowage::{save_with, Checkpoint, SaveOptions};
use stowage::{DType, Tensor};
use stowage_zip::{ZipLimits, ZipReader};

/// Tensors of several sizes and dtypes, two views of one storage, and storages
/// past the size from which the CRC is computed on a second thread (1 MiB).
fn checkpoint() -> Checkpoint {
    let big: Vec<f32> = (0..3 * 1024 * 1024 / 4 + 7)
        .map(|i| i as f32 * 0.5)
        .collect();
    let n = big.len();
    let big = Tensor::from_vec(big, &[n]).unwrap();
    let ints = Tensor::arange(0.0, 300_000.0, 1.0, DType::Int64).unwrap();
    let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    let bytes = Tensor::from_vec(bytes, &[50, 100]).unwrap();
    let view = big.narrow(0, 10, 1000).unwrap();
    let entries = [
        ("big", big.clone()),
        ("ints", ints),
        ("bytes", bytes),
        ("view_of_big", view),
        ("empty", Tensor::zeros(&[0], DType::Float32).unwrap()),
        ("scalar", Tensor::zeros(&[], DType::Float64).unwrap()),
    ];
    Checkpoint::from_state_dict(entries)
}

fn save(path: &Path, ckpt: &Checkpoint, sync: bool) {
    let options = SaveOptions::default().with_sync(sync);
    save_with(path, ckpt, &options).unwrap();
}

#[test]
fn saves_are_byte_identical_synced_or_not_and_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = checkpoint();
    let path = dir.path().join("model.pt");

    save(&path, &ckpt, true);
    let first = std::fs::read(&path).unwrap();
    save(&path, &ckpt, true);
    assert!(
        std::fs::read(&path).unwrap() == first,
        "two synced saves differ"
    );
    save(&path, &ckpt, false);
    assert!(
        std::fs::read(&path).unwrap() == first,
        "an unsynced save differs"
    );

    // The file holds exactly the archive `save_to_writer` writes: pre-sizing left no
    // trailing bytes.
    let in_memory = save_to_writer(Vec::new(), "model", &ckpt, &SaveOptions::default()).unwrap();
    assert!(in_memory == first, "file and in-memory archive differ");

    // Every record's CRC is that of its bytes, and the storages were written once.
    let zip = ZipReader::new(&first[..], &ZipLimits::default()).unwrap();
    for entry in zip.entries() {
        zip.check_crc(entry).unwrap();
    }
    let data = zip
        .entries()
        .iter()
        .filter(|e| zip.name(e).starts_with("model/data/"))
        .count();
    assert_eq!(data, 5);

    let again = stowage::load(&path).unwrap();
    let (t, _) = &again.tensors().unwrap()[0];
    assert_eq!(stowage::checkpoint::dotted(t), "big");
    let out2 = dir.path().join("copy").join("model.pt");
    std::fs::create_dir_all(out2.parent().unwrap()).unwrap();
    save(&out2, &again, true);
    assert!(
        std::fs::read(&out2).unwrap() == first,
        "save(load(save(x))) differs"
    );
}

#[test]
fn saving_over_a_large_file_replaces_it_whole() {
    // Large enough for the replaced file to be released on another thread.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.pt");
    let large = Tensor::zeros(&[17 * 1024 * 1024], DType::Float32).unwrap();
    save(
        &path,
        &Checkpoint::from_state_dict([("large", large)]),
        false,
    );
    assert!(std::fs::metadata(&path).unwrap().len() > 64 << 20);

    let ckpt = checkpoint();
    save(&path, &ckpt, true);
    let expected = save_to_writer(Vec::new(), "model", &ckpt, &SaveOptions::default()).unwrap();
    assert!(std::fs::read(&path).unwrap() == expected);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["model.pt"], "a temporary file was left behind");
}
