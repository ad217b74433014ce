//! A DCP folder written in parts: each of `ranks` processes writes its own
//! rank's data file, the one [`save`](super::save) would write for that
//! rank, reading only the chunks that file holds; the last to finish writes
//! `.metadata` (the rule is in `checkpoint::format::parts`). The folder is
//! byte for byte what one process writes.

use std::fs;
use std::path::Path;

use super::data_file::ItemWriter;

/// A rank's data file of a save.
type RankFile = ItemWriter<std::io::BufWriter<std::fs::File>>;
use super::flatten::{flatten, Leaf};
use super::write::{rank_file_name, write_entries, Entry};
use super::write_metadata::pickle_metadata;
use super::METADATA_FILE;
use crate::checkpoint::format::parts::{self, PendingRank};
use crate::checkpoint::value::graph::{dotted, Checkpoint, PathKey};
use crate::error::{CheckpointError, ErrorContext, FormatError};
use crate::{Error, Result};

use super::DcpSaveOptions;

/// Writes rank `rank`'s part of the DCP folder that [`save`](super::save)
/// writes at `dir` with `options` (`options`' ranks are the world): its data
/// file `__{rank}_0.distcp`, whole or not at all, holding its chunks of
/// each tensor (and, for rank 0, the values). Only those chunks are read
/// from `ckpt`, so a lazily loaded source costs each rank its share.
///
/// Every rank must be given the same checkpoint and options. The rank that
/// finishes last writes `.metadata`; every earlier one returns the ranks it
/// found unfinished. A `.metadata` already in `dir` is removed first, so
/// the folder is never read as a checkpoint while its files are replaced.
///
/// # Errors
/// What [`save`](super::save) gives; a rank not below the world size; all
/// wrapped in [`Error::InFile`] naming `dir` or the file.
pub fn save_part(
    dir: &Path,
    ckpt: &Checkpoint,
    options: &DcpSaveOptions,
    rank: usize,
) -> Result<Vec<PendingRank>> {
    let in_dir = |e: Error| e.in_file(dir.to_owned());
    let ranks = options.ranks.max(1);
    parts::check_rank(dir, rank, ranks)?;
    let leaves = flatten(ckpt).map_err(in_dir)?;
    fs::create_dir_all(dir).map_err(|e| in_dir(Error::Io(e)))?;
    match fs::remove_file(dir.join(METADATA_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(in_dir(Error::Io(e))),
        _ => {}
    }
    let name = rank_file_name(rank);
    let mut entries = Vec::new();
    crate::io::write_atomically(&dir.join(&name), options.sync, |tmp| {
        let mut files: Vec<Option<RankFile>> = (0..ranks).map(|_| None).collect();
        files[rank] = Some(RankFile::create(
            tmp,
            rank,
            options.zstd,
            options.digests.is_some(),
        )?);
        entries = write_entries(ckpt, &leaves, options, &mut files)?;
        for f in files.into_iter().flatten() {
            f.close()?;
        }
        Ok(())
    })?;
    let manifest = manifest(&leaves, &entries, ranks, options.zstd);
    let payload: String = stored(&entries)
        .filter(|info| info.relative_path == name)
        .map(|info| format!("{} {}\n", info.offset, info.length))
        .collect();
    parts::finish(
        dir,
        rank,
        ranks,
        &manifest,
        &payload,
        options.sync,
        |payloads| {
            fill(&mut entries, payloads).map_err(in_dir)?;
            let metadata = pickle_metadata(&leaves, &entries)
                .map_err(|e| in_dir(Error::Checkpoint(CheckpointError::PickleWrite(e))))?;
            crate::io::write_atomically(&dir.join(METADATA_FILE), options.sync, |tmp| {
                fs::write(tmp, &metadata).map_err(Error::Io)
            })
        },
    )
}

/// Where every item is stored, in the order each file holds its items.
fn stored(entries: &[Entry]) -> impl Iterator<Item = &super::metadata::StorageInfo> {
    entries.iter().flat_map(|e| match e {
        Entry::Tensor { chunks, .. } => chunks.iter().map(|(_, _, info)| info).collect::<Vec<_>>(),
        Entry::Bytes(info) => vec![info],
    })
}

/// What every rank of one save computes alike: the leaves, the chunks and
/// the files that hold them.
fn manifest(
    leaves: &[(Vec<PathKey>, Leaf<'_>)],
    entries: &[Entry],
    ranks: usize,
    zstd: bool,
) -> String {
    let mut text = format!("dcp ranks {ranks} zstd {zstd}\n");
    for ((path, _), entry) in leaves.iter().zip(entries) {
        match entry {
            Entry::Tensor {
                dtype,
                size,
                chunks,
                ..
            } => {
                text.push_str(&format!("{} {dtype:?} {size:?}", dotted(path)));
                for (offsets, sizes, info) in chunks {
                    text.push_str(&format!(" {}:{offsets:?}+{sizes:?}", info.relative_path));
                }
            }
            Entry::Bytes(info) => {
                text.push_str(&format!("{} value {}", dotted(path), info.relative_path))
            }
        }
        text.push('\n');
    }
    text
}

/// Puts each rank's offsets and lengths (its payload: one `offset length`
/// line per item, in its file's order) into the entries.
fn fill(entries: &mut [Entry], payloads: &[String]) -> Result<()> {
    let bad = |found: String| {
        Error::Format(FormatError::BadObject {
            context: "DCP part marker",
            expected: "one `offset length` line per item of the rank's file",
            found,
        })
    };
    let mut lines: Vec<_> = payloads.iter().map(|p| p.lines()).collect();
    let infos = entries.iter_mut().flat_map(|e| match e {
        Entry::Tensor { chunks, .. } => chunks
            .iter_mut()
            .map(|(_, _, info)| info)
            .collect::<Vec<_>>(),
        Entry::Bytes(info) => vec![info],
    });
    for info in infos {
        let rank = (0..payloads.len())
            .find(|&r| rank_file_name(r) == info.relative_path)
            .ok_or_else(|| bad(format!("an item in {}", info.relative_path)))?;
        let line = lines[rank]
            .next()
            .ok_or_else(|| bad(format!("rank {rank}'s marker ends early")))?;
        let parsed = line
            .split_once(' ')
            .and_then(|(o, l)| Some((o.parse().ok()?, l.parse().ok()?)));
        let Some((offset, length)) = parsed else {
            return Err(bad(format!("rank {rank}: {line:?}")));
        };
        info.offset = offset;
        info.length = length;
    }
    Ok(())
}
