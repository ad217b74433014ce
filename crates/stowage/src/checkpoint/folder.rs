//! What a checkpoint folder holds, found once for every store: a
//! distributed checkpoint, the ranks' files of DCP's Hugging Face layout, a
//! sharded set, or a set saved as one file. A folder is a [`Location`]: a
//! local directory or a prefix in an object store, read through the same
//! `exists` and `list`.

use crate::error::ErrorContext;
use std::path::Path;

use crate::checkpoint::format::dcp;
use crate::checkpoint::format::sharded::ShardFormat;
use crate::checkpoint::options::LoadOptions;
use crate::io::Location;
use crate::{Error, Result};

/// The checkpoint a folder holds, as [`folder_of`] finds it. The variants
/// are in the order they are looked for: a folder holding a `.metadata` is
/// a distributed checkpoint whatever else it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Folder {
    /// A PyTorch Distributed Checkpoint: the folder, which holds `.metadata`.
    Dcp(Location),
    /// DCP's Hugging Face layout (no `.metadata`): the ranks'
    /// `shard-0000R-model-0000X-of-0000Y.safetensors` files, sorted.
    Ranks(Vec<Location>),
    /// A Hugging Face sharded set: its `*.index.json`.
    Sharded(Location),
    /// A set saved as one file: `model.safetensors` (before
    /// `pytorch_model.bin`).
    Single(Location),
}

impl Folder {
    /// The checkpoint files the folder holds that a check reads one by one:
    /// the ranks' files, or the single file. A sharded set's shards are named
    /// by its index ([`crate::checkpoint::format::sharded::ShardIndex::files`]); a distributed
    /// checkpoint's data files by its metadata.
    pub fn files(&self) -> &[Location] {
        match self {
            Folder::Ranks(files) => files,
            Folder::Single(file) => std::slice::from_ref(file),
            Folder::Dcp(_) | Folder::Sharded(_) => &[],
        }
    }
}

/// The checkpoint folder `path` names, if it names one: a folder (a local
/// directory, or with the `remote` feature a URL ending in `/`), or an
/// `*.index.json`. `None` for anything else, which is read as a file.
///
/// A folder is looked into the same way wherever it is: a probe for
/// `.metadata`, then one listing; where the store cannot list (a plain
/// `http(s)://` server) or refuses to, probes for the index and single-file
/// names stand in (the ranks' layout then cannot be found).
///
/// # Errors
/// [`Error::InFile`] naming the folder, around a not-found error when it
/// holds no checkpoint, or the store's error.
pub fn folder_of(path: &Path, options: &LoadOptions) -> Result<Option<Folder>> {
    folder_at(&options.location(path))
}

/// [`folder_of`] a location.
pub(crate) fn folder_at(here: &Location) -> Result<Option<Folder>> {
    if !here.is_folder() {
        let index = here.file_name().is_some_and(|n| n.ends_with(".index.json"));
        return Ok(index.then(|| Folder::Sharded(here.clone())));
    }
    let at = |name: &str| here.join(name);
    if here.join(dcp::METADATA_FILE).exists()? {
        return Ok(Some(Folder::Dcp(here.clone())));
    }
    let formats = [ShardFormat::Safetensors, ShardFormat::Bin];
    let listed = here.list();
    if let Ok(names) = &listed {
        let ranks: Vec<Location> = names
            .iter()
            .filter(|n| dcp::hf::is_rank_file(n))
            .map(|n| at(n))
            .collect();
        if !ranks.is_empty() {
            return Ok(Some(Folder::Ranks(ranks)));
        }
        let named = |name: String| names.contains(&name).then(|| at(&name));
        let index = formats
            .iter()
            .find_map(|f| named(f.index_name()))
            .or_else(|| {
                // Else the folder's only index.
                let mut indexes = names.iter().filter(|n| n.ends_with(".index.json"));
                match (indexes.next(), indexes.next()) {
                    (Some(only), None) => Some(at(only)),
                    _ => None,
                }
            });
        if let Some(index) = index {
            return Ok(Some(Folder::Sharded(index)));
        }
        if let Some(file) = formats.iter().find_map(|f| named(f.file_name(""))) {
            return Ok(Some(Folder::Single(file)));
        }
    } else {
        for format in formats {
            if here.join(&format.index_name()).exists()? {
                return Ok(Some(Folder::Sharded(at(&format.index_name()))));
            }
        }
        for format in formats {
            if here.join(&format.file_name("")).exists()? {
                return Ok(Some(Folder::Single(at(&format.file_name("")))));
            }
        }
    }
    let why = match listed {
        Ok(_) => "a folder that holds no checkpoint (no .metadata, *.index.json, \
                  model.safetensors, pytorch_model.bin or rank files)"
            .to_owned(),
        Err(e) => format!(
            "no .metadata, *.index.json, model.safetensors or pytorch_model.bin, and the folder \
             could not be listed for rank files: {}",
            match &e {
                Error::InFile { source, .. } => source.to_string(),
                e => e.to_string(),
            }
        ),
    };
    Err(Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, why)).in_file(here.path()))
}
