//! Loading checkpoints from object storage: URL dispatch for the entry
//! points. Each file is a [`RemoteObject`] read with range requests; the
//! formats' loaders do the rest, batching their reads where the source is
//! remote ([`ReadAt::is_remote`]). A folder is named by its URL with a
//! trailing `/`: a distributed checkpoint (its `.metadata`, or its ranks'
//! files, found by a listing), a sharded set (its index) or a folder
//! holding one checkpoint file ([`folder_of`]).

use std::path::{Path, PathBuf};

use super::dcp;
#[cfg(feature = "safetensors")]
use super::safetensors;
use super::sharded::{self, ShardFormat};
use super::{
    detect_format, load_from, torch_zip, Checkpoint, Folder, Format, LoadMode, LoadOptions,
};
use crate::io::remote::{list, RemoteObject};
use crate::io::ReadAt;
use crate::{Error, Result};

/// The checkpoint folder `url` names ([`super::folder_of`]): a set by the
/// URL of its `*.index.json`; a folder by its URL ending in `/`, found by a
/// probe for `.metadata`, then by one listing, or where the store cannot
/// list, by probes for the index and single-file names.
pub(super) fn folder_of(url: &str, options: &LoadOptions) -> Result<Option<Folder>> {
    if url.ends_with(".index.json") {
        return Ok(Some(Folder::Sharded(url.into())));
    }
    let Some(dir) = url.strip_suffix('/') else {
        return Ok(None);
    };
    let at = |name: &str| PathBuf::from(format!("{dir}/{name}"));
    if exists(&format!("{dir}/{}", dcp::METADATA_FILE), options)? {
        return Ok(Some(Folder::Dcp(dir.into())));
    }
    let listed = list(url, &options.remote);
    if let Ok(names) = &listed {
        let ranks: Vec<PathBuf> = names
            .iter()
            .filter(|n| dcp::hf::is_rank_file(n))
            .map(|n| at(n))
            .collect();
        if !ranks.is_empty() {
            return Ok(Some(Folder::Ranks(ranks)));
        }
        let named = |name: String| names.contains(&name).then(|| at(&name));
        let formats = [ShardFormat::Safetensors, ShardFormat::Bin];
        let index = formats
            .iter()
            .find_map(|f| named(f.index_name()))
            .or_else(|| {
                // As on disk: else the folder's only index.
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
        for format in [ShardFormat::Safetensors, ShardFormat::Bin] {
            let index = format!("{dir}/{}", format.index_name());
            if exists(&index, options)? {
                return Ok(Some(Folder::Sharded(index.into())));
            }
        }
        for format in [ShardFormat::Safetensors, ShardFormat::Bin] {
            let file = format!("{dir}/{}", format.file_name(""));
            if exists(&file, options)? {
                return Ok(Some(Folder::Single(file.into())));
            }
        }
    }
    let why = match listed {
        Ok(_) => "no .metadata, *.index.json, model.safetensors, pytorch_model.bin or rank files"
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
    Err(Error::InFile {
        path: url.into(),
        source: Box::new(Error::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            why,
        ))),
    })
}

/// Whether the object at `url` exists (a missing one is no error here).
fn exists(url: &str, options: &LoadOptions) -> Result<bool> {
    match RemoteObject::open_with(url, &options.remote) {
        Ok(_) => Ok(true),
        Err(Error::InFile { source, .. }) if matches!(&*source, Error::Io(e) if e.kind() == std::io::ErrorKind::NotFound) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// A sharded set by the URL of its index; shards are named relative to it.
pub(super) fn load_set(index: &str, options: &LoadOptions) -> Result<Checkpoint> {
    let in_index = |e: Error| Error::InFile {
        path: index.into(),
        source: Box::new(e),
    };
    let object = RemoteObject::open_with(index, &options.remote)?;
    let len = usize::try_from(object.len()).map_err(|_| {
        in_index(Error::Io(std::io::Error::from(
            std::io::ErrorKind::OutOfMemory,
        )))
    })?;
    let mut bytes = vec![0u8; len];
    object
        .read_exact_at(&mut bytes, 0)
        .map_err(|e| in_index(Error::Io(e)))?;
    let text = String::from_utf8_lossy(&bytes);
    sharded::load_indexed(&PathBuf::from(index), &text, |shard: &Path| {
        let url = shard.to_str().unwrap_or_default();
        load_file(url, options)
    })
}

/// Loads one checkpoint object: lazily where asked (torch zip, safetensors),
/// else with its storages fetched in concurrent batches.
pub(super) fn load_file(url: &str, options: &LoadOptions) -> Result<Checkpoint> {
    let object = RemoteObject::open_with(url, &options.remote)?;
    let path = PathBuf::from(url);
    let in_url = |e: Error| Error::InFile {
        path: path.clone(),
        source: Box::new(e),
    };
    if options.mode() == LoadMode::Lazy {
        match detect_format(&object) {
            Ok(Format::TorchZip) => {
                return torch_zip::load_lazy(object, &path, options).map_err(in_url)
            }
            #[cfg(feature = "safetensors")]
            Ok(Format::Safetensors) => {
                return safetensors::load_lazy(object, &path, options).map_err(in_url)
            }
            _ => {}
        }
    }
    load_from(object, options).map_err(in_url)
}
