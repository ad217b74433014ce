//! Loading checkpoints from object storage: URL dispatch for the entry
//! points. Each file is a [`RemoteObject`] read with range requests; the
//! formats' loaders do the rest, batching their reads where the source is
//! remote ([`ReadAt::is_remote`]). A folder is named by its URL with a
//! trailing `/`: a distributed checkpoint (its `.metadata`), a sharded set
//! (its index) or a folder holding one checkpoint file.

use std::path::{Path, PathBuf};

use super::dcp;
#[cfg(feature = "safetensors")]
use super::safetensors;
use super::sharded::{self, ShardFormat};
use super::{detect_format, load_from, torch_zip, Checkpoint, Format, LoadOptions};
use crate::io::remote::RemoteObject;
use crate::io::ReadAt;
use crate::{Error, Result};

/// Loads the checkpoint, the sharded set or the distributed checkpoint at
/// `url`: a set by the URL of its `*.index.json`, or of its folder (ending in
/// `/`, holding a DCP `.metadata`, an index or one
/// `model.safetensors`/`pytorch_model.bin`).
pub(super) fn load(url: &str, options: &LoadOptions) -> Result<Checkpoint> {
    if url.ends_with(".index.json") {
        return load_set(url, options);
    }
    if let Some(dir) = url.strip_suffix('/') {
        if exists(&format!("{dir}/{}", dcp::METADATA_FILE), options)? {
            return dcp::load(Path::new(dir), options);
        }
        for format in [ShardFormat::Safetensors, ShardFormat::Bin] {
            let index = format!("{dir}/{}", format.index_name());
            if exists(&index, options)? {
                return load_set(&index, options);
            }
        }
        for format in [ShardFormat::Safetensors, ShardFormat::Bin] {
            let file = format!("{dir}/{}", format.file_name(""));
            if exists(&file, options)? {
                return load_file(&file, options);
            }
        }
        return Err(Error::InFile {
            path: url.into(),
            source: Box::new(Error::Io(std::io::ErrorKind::NotFound.into())),
        });
    }
    load_file(url, options)
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
fn load_set(index: &str, options: &LoadOptions) -> Result<Checkpoint> {
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
fn load_file(url: &str, options: &LoadOptions) -> Result<Checkpoint> {
    let object = RemoteObject::open_with(url, &options.remote)?;
    let path = PathBuf::from(url);
    let in_url = |e: Error| Error::InFile {
        path: path.clone(),
        source: Box::new(e),
    };
    if options.lazy && !options.fake {
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
