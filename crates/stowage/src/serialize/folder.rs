//! What a checkpoint folder holds, found the same way on disk and in object
//! storage: a distributed checkpoint, the ranks' files of DCP's Hugging Face
//! layout, a sharded set, or a set saved as one file.

use std::path::{Path, PathBuf};

use super::{dcp, sharded, LoadOptions};
use crate::Result;

/// The checkpoint a folder holds, as [`folder_of`] finds it. The variants
/// are in the order they are looked for: a folder holding a `.metadata` is
/// a distributed checkpoint whatever else it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Folder {
    /// A PyTorch Distributed Checkpoint: the folder, which holds `.metadata`.
    Dcp(PathBuf),
    /// DCP's Hugging Face layout (no `.metadata`): the ranks'
    /// `shard-0000R-model-0000X-of-0000Y.safetensors` files, sorted.
    Ranks(Vec<PathBuf>),
    /// A Hugging Face sharded set: its `*.index.json`.
    Sharded(PathBuf),
    /// A set saved as one file: `model.safetensors` (before
    /// `pytorch_model.bin`).
    Single(PathBuf),
}

impl Folder {
    /// The checkpoint files the folder holds that a check reads one by one:
    /// the ranks' files, or the single file. A sharded set's shards are named
    /// by its index ([`sharded::ShardIndex::files`]); a distributed
    /// checkpoint's data files by its metadata.
    pub fn files(&self) -> &[PathBuf] {
        match self {
            Folder::Ranks(files) => files,
            Folder::Single(file) => std::slice::from_ref(file),
            Folder::Dcp(_) | Folder::Sharded(_) => &[],
        }
    }
}

/// The checkpoint folder `path` names, if it names one: a local folder, a
/// local `*.index.json`, or with the `remote` feature a URL ending in `/` (a
/// folder) or in `.index.json`. `None` for anything else, which is read as a
/// file.
///
/// In object storage a folder is found with a few small requests: a probe
/// for `.metadata`, then one listing of the folder; where the store cannot
/// list (a plain `http(s)://` server) or refuses to, probes for the index
/// and single-file names (the ranks' layout then cannot be found).
///
/// # Errors
/// Only for a URL: [`Error::InFile`](crate::Error::InFile) naming it, around
/// a not-found error when the folder holds no checkpoint, or the store's
/// error.
pub fn folder_of(path: &Path, options: &LoadOptions) -> Result<Option<Folder>> {
    #[cfg(feature = "remote")]
    if let Some(url) = crate::io::remote::url_of(path) {
        return super::remote::folder_of(url, options);
    }
    let _ = options;
    if dcp::is_dcp(path) {
        return Ok(Some(Folder::Dcp(path.to_owned())));
    }
    if path.is_dir() {
        let ranks = dcp::hf::rank_files(path);
        if !ranks.is_empty() {
            return Ok(Some(Folder::Ranks(ranks)));
        }
    }
    if let Some(index) = sharded::index_of(path) {
        return Ok(Some(Folder::Sharded(index)));
    }
    Ok(path
        .is_dir()
        .then(|| sharded::single_file_of(path).map(Folder::Single))
        .flatten())
}
