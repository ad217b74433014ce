//! Outputs written in parts by several processes at once, with no
//! collective: each rank writes its own files of a folder, and the last rank
//! to finish writes what names them all (a sharded set's index, a DCP's
//! `.metadata`).
//!
//! The rule, which every writer in parts follows: a rank that has written its
//! files leaves a marker (`.stowage-part-RANK-of-WORLD`) holding the
//! conversion's manifest (what every rank computes alike, so that markers of
//! another conversion are told apart) and its own payload (what the last rank
//! needs of it: the offsets of its items). Then it reads every rank's marker.
//! Markers are written before they are looked for, so at least the last rank
//! to finish finds them all; it writes the final file, whole or not at all,
//! and removes the markers. Two ranks finishing at once may both write it, the
//! same bytes.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::ErrorContext;
use crate::{Error, Result};

/// A rank that had not finished when another rank of an output written in
/// parts looked (see [`SavedSet::pending`](super::sharded::SavedSet::pending)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingRank {
    /// The rank.
    pub rank: usize,
    /// Its marker file is in the folder but names another output: left by an
    /// earlier conversion into the same folder (the rank's own marker will
    /// replace it), or by another conversion writing there now, in which
    /// case neither may finish.
    pub foreign_marker: Option<PathBuf>,
}

/// The marker rank `rank` of `world` leaves in the folder once its files
/// are written.
fn marker_name(rank: usize, world: usize) -> String {
    format!(".stowage-part-{rank:05}-of-{world:05}")
}

/// Between a marker's manifest and its payload: a line no manifest holds
/// (manifests are file and tensor names, one per line, and shapes).
const SEPARATOR: &str = "\n\u{0}payload\n";

/// Leaves this rank's marker in `dir` (`manifest`, then `payload`), then, if
/// every rank's is there with the same manifest, calls `last` with every
/// rank's payload, in rank order, and removes the markers. Returns the
/// ranks it found unfinished: empty when this rank was the last.
pub(crate) fn finish(
    dir: &Path,
    rank: usize,
    world: usize,
    manifest: &str,
    payload: &str,
    sync: bool,
    last: impl FnOnce(&[String]) -> Result<()>,
) -> Result<Vec<PendingRank>> {
    let in_dir = |e: std::io::Error| Error::Io(e).in_file(dir.to_owned());
    let text = format!("{manifest}{SEPARATOR}{payload}");
    crate::io::write_atomically(&dir.join(marker_name(rank, world)), sync, |tmp| {
        fs::write(tmp, &text).map_err(Error::Io)
    })?;
    let mut pending = Vec::new();
    let mut payloads = Vec::with_capacity(world);
    for r in 0..world {
        let marker = dir.join(marker_name(r, world));
        match fs::read_to_string(&marker) {
            Ok(text) => match text.split_once(SEPARATOR) {
                Some((m, p)) if m == manifest => payloads.push(p.to_owned()),
                _ => pending.push(PendingRank {
                    rank: r,
                    foreign_marker: Some(marker),
                }),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => pending.push(PendingRank {
                rank: r,
                foreign_marker: None,
            }),
            Err(e) => return Err(in_dir(e)),
        }
    }
    if !pending.is_empty() {
        return Ok(pending);
    }
    last(&payloads)?;
    for r in 0..world {
        // Another rank finishing at the same moment may have removed it.
        let _ = fs::remove_file(dir.join(marker_name(r, world)));
    }
    Ok(Vec::new())
}

/// Refuses a rank outside the world, naming `dir`.
pub(crate) fn check_rank(dir: &Path, rank: usize, world: usize) -> Result<()> {
    if rank < world {
        return Ok(());
    }
    let what = format!("rank {rank} of a world of {world}: a rank is below the world size");
    Err(
        Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, what))
            .in_file(dir.to_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_rank_gets_every_payload_and_clears_the_markers() {
        let dir = tempfile::tempdir().unwrap();
        let mut got = None;
        let first = finish(dir.path(), 1, 2, "m", "one", false, |_| {
            panic!("not the last rank")
        })
        .unwrap();
        assert_eq!(
            first,
            [PendingRank {
                rank: 0,
                foreign_marker: None
            }]
        );
        let last = finish(dir.path(), 0, 2, "m", "zero", false, |p| {
            got = Some(p.to_vec());
            Ok(())
        })
        .unwrap();
        assert!(last.is_empty());
        assert_eq!(got.unwrap(), ["zero", "one"]);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_marker_of_another_manifest_is_pending_and_named() {
        let dir = tempfile::tempdir().unwrap();
        finish(dir.path(), 0, 2, "old", "", false, |_| {
            panic!("not the last rank")
        })
        .unwrap();
        let pending = finish(dir.path(), 1, 2, "new", "", false, |_| {
            panic!("not the last rank")
        })
        .unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].rank, 0);
        assert!(pending[0].foreign_marker.is_some());
    }
}
