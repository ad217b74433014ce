//! A DCP checkpoint at training scale (issue 44): a `.metadata` of a million
//! chunks, laid out as `FileSystemWriter` writes it, is read within a memory
//! bound the harness enforces (`ulimit -v`), not one a timer measures.

use std::path::Path;
use std::process::Command;

use stowage_pickle::Pickler;

const MD: &str = "torch.distributed.checkpoint.metadata";

type P = Pickler<Vec<u8>>;

/// `NEWOBJ` of `module.class` and `BUILD` of the attributes `attrs` writes
/// (as pickle writes a dataclass).
fn object(p: &mut P, module: &str, class: &str, attrs: impl FnOnce(&mut P)) {
    p.global_memoized(module, class).unwrap();
    p.tuple(0).unwrap();
    p.new_obj().unwrap();
    p.empty_dict().unwrap();
    p.mark().unwrap();
    attrs(p);
    p.setitems().unwrap();
    p.build().unwrap();
}

fn size(p: &mut P, dims: &[usize]) {
    p.global_memoized("torch", "Size").unwrap();
    p.mark().unwrap();
    for &d in dims {
        p.int(d as i64).unwrap();
    }
    p.tuple_from_mark().unwrap();
    p.tuple(1).unwrap();
    p.reduce().unwrap();
}

/// `tensors` tensors of `[2 × ranks, 4]` float32, each row-sharded over
/// `ranks` ranks (two rows a rank), every rank's chunks in `__{rank}_0.distcp`
/// at the offsets a writer would give them; no `index` hints, as
/// `FileSystemWriter` writes none.
fn metadata(tensors: usize, ranks: usize) -> Vec<u8> {
    let mut p = Pickler::new(Vec::new()).unwrap();
    let name = |t: usize| format!("layers.{t}.weight");
    object(&mut p, MD, "Metadata", |p| {
        p.str_memoized("state_dict_metadata").unwrap();
        p.empty_dict().unwrap();
        for t in 0..tensors {
            p.str_memoized(&name(t)).unwrap();
            object(p, MD, "TensorStorageMetadata", |p| {
                p.str_memoized("properties").unwrap();
                p.global_memoized(MD, "TensorProperties").unwrap();
                p.tuple(0).unwrap();
                p.new_obj().unwrap();
                p.mark().unwrap();
                p.global_memoized("torch", "float32").unwrap();
                p.global_memoized("torch.serialization", "_get_layout")
                    .unwrap();
                p.str_memoized("torch.strided").unwrap();
                p.tuple(1).unwrap();
                p.reduce().unwrap();
                p.bool(false).unwrap();
                p.global_memoized(MD, "_MEM_FORMAT_ENCODING").unwrap();
                p.int(0).unwrap();
                p.tuple(1).unwrap();
                p.reduce().unwrap();
                p.bool(false).unwrap();
                p.tuple_from_mark().unwrap();
                p.build().unwrap();
                p.str_memoized("size").unwrap();
                size(p, &[2 * ranks, 4]);
                p.str_memoized("chunks").unwrap();
                p.empty_list().unwrap();
                for r in 0..ranks {
                    object(p, MD, "ChunkStorageMetadata", |p| {
                        p.str_memoized("offsets").unwrap();
                        size(p, &[2 * r, 0]);
                        p.str_memoized("sizes").unwrap();
                        size(p, &[2, 4]);
                    });
                    p.append().unwrap();
                }
            });
            p.setitem().unwrap();
        }
        p.str_memoized("storage_data").unwrap();
        p.empty_dict().unwrap();
        for r in 0..ranks {
            for t in 0..tensors {
                object(p, MD, "MetadataIndex", |p| {
                    p.str_memoized("fqn").unwrap();
                    p.str_memoized(&name(t)).unwrap();
                    p.str_memoized("offset").unwrap();
                    size(p, &[2 * r, 0]);
                    p.str_memoized("index").unwrap();
                    p.none().unwrap();
                });
                object(
                    p,
                    "torch.distributed.checkpoint.filesystem",
                    "_StorageInfo",
                    |p| {
                        p.str_memoized("relative_path").unwrap();
                        p.str(&format!("__{r}_0.distcp")).unwrap();
                        p.str_memoized("offset").unwrap();
                        p.int((t * 32) as i64).unwrap();
                        p.str_memoized("length").unwrap();
                        p.int(32).unwrap();
                    },
                );
                p.setitem().unwrap();
            }
        }
        p.str_memoized("version").unwrap();
        p.str_memoized("1.0.0").unwrap();
    });
    p.stop().unwrap();
    p.finish()
}

/// `stowage ARGS` with at most `kib` KiB of address space.
fn run_bounded(kib: u64, args: &[&str], dir: &Path) -> std::process::Output {
    Command::new("bash")
        .arg("-c")
        .arg(format!(r#"ulimit -v {kib} && exec "$0" "$@""#))
        .arg(env!("CARGO_BIN_EXE_stowage"))
        .args(args)
        .arg(dir)
        .output()
        .unwrap()
}

/// A million chunks (1,000 tensors × 1,000 ranks; a 110 MB `.metadata`)
/// are listed within 768 MiB of address space, under 7× the file: the
/// generic pickle graph took some 3.5 GB for them.
#[test]
fn a_million_chunk_metadata_is_read_in_bounded_memory() {
    let (tensors, ranks) = (1000, 1000);
    let dir = tempfile::tempdir().unwrap();
    let bytes = metadata(tensors, ranks);
    std::fs::write(dir.path().join(".metadata"), &bytes).unwrap();
    drop(bytes);
    for r in 0..ranks {
        let f = std::fs::File::create(dir.path().join(format!("__{r}_0.distcp"))).unwrap();
        f.set_len((tensors * 32) as u64).unwrap();
    }
    let run = run_bounded(768 * 1024, &["inspect", "--no-hash"], dir.path());
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(out.contains("layers.999.weight"), "{out}");
    assert!(out.contains(&format!("{tensors} tensors")), "{out}");
}
