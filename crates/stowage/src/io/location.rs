//! Where a checkpoint's bytes live, behind one type: a local path, or (with
//! the `remote` feature) an object or a prefix in an object store, as
//! `object_store` puts its `LocalFileSystem` behind the same trait as S3.
//!
//! A [`Location`] is parsed once, at the entry point, from what the caller
//! named (`model.pt`, `ckpt/`, `s3://bucket/run/`); everything after reads
//! through it (`open`, `exists`, `list`, `join`) and never asks whether a
//! string is a URL. Where the kind of store matters to a reader, it asks
//! for the [`ReadCost`] of a source, not for its kind.

use crate::error::{CheckpointError, ErrorContext};
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ReadAt, ReadCost};
use crate::{Error, Result};

/// A file or folder, on disk or in an object store.
#[derive(Clone)]
pub struct Location {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    /// A path in the local file system.
    Local(PathBuf),
    /// A URL in an object store (`s3://bucket/key`; a folder ends in `/`),
    /// with the options its requests are made with.
    #[cfg(feature = "remote")]
    Remote {
        url: String,
        options: super::remote::RemoteOptions,
    },
}

impl Location {
    /// The location `path` names: a URL the `remote` feature reads
    /// (`s3://…`, `gs://…`, `az://…`, `abfs(s)://…`, `http(s)://…`,
    /// `file://…`; a folder's URL ends in `/`), else a local path. This is
    /// the one place a name is told to be a URL.
    pub fn parse(path: impl AsRef<Path>) -> Location {
        let path = path.as_ref();
        #[cfg(feature = "remote")]
        if let Some(url) = super::remote::url_of(path) {
            return Location {
                kind: Kind::Remote {
                    url: url.to_owned(),
                    options: super::remote::RemoteOptions::default(),
                },
            };
        }
        Location {
            kind: Kind::Local(path.to_owned()),
        }
    }

    /// The same location, its requests made with `options` (an object
    /// store's; a local path ignores them).
    #[cfg(feature = "remote")]
    pub fn with_remote(mut self, remote: &super::remote::RemoteOptions) -> Location {
        if let Kind::Remote { options, .. } = &mut self.kind {
            *options = remote.clone();
        }
        self
    }

    /// The location as the path errors name: the local path, or the URL.
    pub fn path(&self) -> PathBuf {
        match &self.kind {
            Kind::Local(p) => p.clone(),
            #[cfg(feature = "remote")]
            Kind::Remote { url, .. } => PathBuf::from(url),
        }
    }

    /// The last part of the name (`model.safetensors`), if there is one; a
    /// folder's URL (ending in `/`) has none.
    pub fn file_name(&self) -> Option<&str> {
        match &self.kind {
            Kind::Local(p) => p.file_name()?.to_str(),
            #[cfg(feature = "remote")]
            Kind::Remote { url, .. } => url
                .rsplit_once('/')
                .map(|(_, n)| n)
                .filter(|n| !n.is_empty()),
        }
    }

    /// The location of `name` inside this folder (`name` may hold `/`).
    pub fn join(&self, name: &str) -> Location {
        let kind = match &self.kind {
            Kind::Local(p) => Kind::Local(p.join(name)),
            #[cfg(feature = "remote")]
            Kind::Remote { url, options } => Kind::Remote {
                url: format!("{}/{name}", url.trim_end_matches('/')),
                options: options.clone(),
            },
        };
        Location { kind }
    }

    /// The folder holding this file, as a location to [`join`](Self::join)
    /// names to (a relative local path with no folder gives `.`).
    pub fn parent(&self) -> Location {
        let kind = match &self.kind {
            Kind::Local(p) => Kind::Local(match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
                _ => PathBuf::from("."),
            }),
            #[cfg(feature = "remote")]
            Kind::Remote { url, options } => Kind::Remote {
                url: match url.trim_end_matches('/').rsplit_once('/') {
                    Some((dir, _)) => format!("{dir}/"),
                    None => url.clone(),
                },
                options: options.clone(),
            },
        };
        Location { kind }
    }

    /// The local path, where this is one: what can be memory-mapped.
    pub fn local_path(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Local(p) => Some(p),
            #[cfg(feature = "remote")]
            Kind::Remote { .. } => None,
        }
    }

    /// Whether this names a folder: a local directory, or a URL ending in
    /// `/` (an object store has no folders of its own, only prefixes).
    pub fn is_folder(&self) -> bool {
        match &self.kind {
            Kind::Local(p) => p.is_dir(),
            #[cfg(feature = "remote")]
            Kind::Remote { url, .. } => url.ends_with('/'),
        }
    }

    /// What one read of a source here costs ([`ReadAt::read_cost`]), known
    /// before opening it.
    pub fn read_cost(&self) -> ReadCost {
        match &self.kind {
            Kind::Local(_) => ReadCost::Local,
            #[cfg(feature = "remote")]
            Kind::Remote { .. } => ReadCost::Request,
        }
    }

    /// Opens the file or object here for positional reads: the file, or one
    /// ranged `GET` of the object's head (which gives its length too).
    ///
    /// # Errors
    /// [`Error::InFile`] naming the location, around [`Error::Io`]: not
    /// found (`io::ErrorKind::NotFound`), a folder, refused, or the store's
    /// error.
    pub fn open(&self) -> Result<Arc<dyn ReadAt>> {
        match &self.kind {
            Kind::Local(p) => {
                let in_file = |e: io::Error| Error::Io(e).in_file(p.clone());
                let file = File::open(p).map_err(in_file)?;
                if file.metadata().map_err(in_file)?.is_dir() {
                    return Err(in_file(io::Error::other("is a directory")));
                }
                Ok(Arc::new(file))
            }
            #[cfg(feature = "remote")]
            Kind::Remote { url, options } => Ok(Arc::new(super::remote::RemoteObject::open_with(
                url, options,
            )?)),
        }
    }

    /// The object here, opened as itself for batches of reads that span
    /// several objects ([`remote::read_batches`](super::remote::read_batches));
    /// `None` for a local file, which [`open`](Self::open) reads.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    #[cfg(feature = "remote")]
    pub(crate) fn open_object(&self) -> Result<Option<Arc<super::remote::RemoteObject>>> {
        match &self.kind {
            Kind::Local(_) => Ok(None),
            Kind::Remote { url, options } => Ok(Some(Arc::new(
                super::remote::RemoteObject::open_with(url, options)?,
            ))),
        }
    }

    /// Whether a file or object is here (a missing one is no error).
    ///
    /// # Errors
    /// Only a store's failure other than not-found, naming the location.
    pub fn exists(&self) -> Result<bool> {
        match &self.kind {
            Kind::Local(p) => Ok(p.is_file()),
            #[cfg(feature = "remote")]
            Kind::Remote { .. } => match self.open() {
                Ok(_) => Ok(true),
                Err(Error::InFile { source, .. }) if matches!(&*source, Error::Io(e) if e.kind() == io::ErrorKind::NotFound) => {
                    Ok(false)
                }
                Err(e) => Err(e),
            },
        }
    }

    /// The names of the files (objects) directly in this folder, sorted.
    ///
    /// # Errors
    /// [`Error::InFile`] naming the folder: a local folder that cannot be
    /// read, or a store that cannot or will not list (a plain `http(s)://`
    /// server).
    pub fn list(&self) -> Result<Vec<String>> {
        match &self.kind {
            Kind::Local(p) => {
                let entries = std::fs::read_dir(p).map_err(|e| Error::Io(e).in_file(p.clone()))?;
                let mut names: Vec<String> = entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect();
                names.sort();
                Ok(names)
            }
            #[cfg(feature = "remote")]
            Kind::Remote { url, options } => super::remote::list(url, options),
        }
    }

    /// Writes the file here whole or not at all, `write` filling a writer:
    /// a local file goes to a temporary sibling (sized to `len` up front
    /// where it is known, its pages handed to the disk as they are written
    /// and synced when `sync`) that is then renamed over the target; an
    /// object is a multipart upload committed only once `write` succeeded.
    /// Either way a failed or interrupted write leaves what was here before.
    ///
    /// # Errors
    /// `write`'s error, or the file system's or store's, in
    /// [`Error::InFile`] naming the location.
    pub(crate) fn create(
        &self,
        sync: bool,
        len: Option<u64>,
        write: impl FnOnce(&mut dyn io::Write) -> Result<()>,
    ) -> Result<()> {
        match &self.kind {
            Kind::Local(p) => super::write_atomically(p, sync, |tmp| {
                let file = File::create(tmp)?;
                if let Some(len) = len {
                    super::preallocate(&file, len)?;
                }
                let mut out = super::Output::new(file, sync);
                write(&mut out)?;
                // `len` is exact, so this cuts nothing unless the caller's
                // size and its writer disagree.
                Ok(out.finish(len.unwrap_or(0))?)
            }),
            #[cfg(feature = "remote")]
            Kind::Remote { url, options } => super::remote::upload(url, options, write),
        }
    }

    /// The whole content of the file here, refused past `max` bytes (an
    /// index or a metadata file, never a tensor's data).
    ///
    /// # Errors
    /// As [`open`](Self::open); [`CheckpointError::LimitExceeded`] past `max`; a
    /// failed read, naming the location.
    pub fn read_all(&self, max: u64) -> Result<Vec<u8>> {
        let source = self.open()?;
        let in_file = |e: Error| e.in_file(self.path());
        let len = source.len();
        if len > max {
            return Err(in_file(Error::Checkpoint(CheckpointError::LimitExceeded {
                limit: "file size",
                value: len,
                max,
            })));
        }
        let mut bytes = vec![0; len as usize];
        source
            .read_exact_at(&mut bytes, 0)
            .map_err(|e| in_file(Error::Io(e)))?;
        Ok(bytes)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Local(p) => p.display().fmt(f),
            #[cfg(feature = "remote")]
            Kind::Remote { url, .. } => f.write_str(url),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Location({self})")
    }
}

impl PartialEq for Location {
    /// The same name (the remote options aside).
    fn eq(&self, other: &Location) -> bool {
        self.path() == other.path()
    }
}

impl Eq for Location {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_join_and_name_their_parts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.pt"), b"xy").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let here = Location::parse(dir.path());
        assert!(here.is_folder());
        assert_eq!(here.list().unwrap(), ["a.pt"]);
        let a = here.join("a.pt");
        assert_eq!(a.file_name(), Some("a.pt"));
        assert!(a.exists().unwrap() && !here.join("b.pt").exists().unwrap());
        assert_eq!(a.read_all(2).unwrap(), b"xy");
        assert!(matches!(a.read_all(1), Err(Error::InFile { .. })));
        assert_eq!(a.parent(), here);
        assert_eq!(a.read_cost(), ReadCost::Local);
        let err = here.join("b.pt").open().err().unwrap();
        assert!(matches!(&err, Error::InFile { source, .. }
            if matches!(&**source, Error::Io(e) if e.kind() == io::ErrorKind::NotFound)));
        assert_eq!(
            Location::parse("x.pt").parent().join("y").path(),
            Path::new("./y")
        );
    }

    #[cfg(feature = "remote")]
    #[test]
    fn urls_are_told_apart_once_and_joined_as_urls() {
        let folder = Location::parse("s3://bucket/run/");
        assert!(folder.is_folder());
        assert_eq!(folder.file_name(), None);
        assert_eq!(folder.read_cost(), ReadCost::Request);
        let index = folder.join("model.safetensors.index.json");
        assert_eq!(
            index.to_string(),
            "s3://bucket/run/model.safetensors.index.json"
        );
        assert_eq!(index.file_name(), Some("model.safetensors.index.json"));
        assert!(!index.is_folder());
        assert_eq!(index.parent(), folder);
        assert_eq!(
            index.parent().join("a/b").to_string(),
            "s3://bucket/run/a/b"
        );
        assert_eq!(Location::parse("run/x.pt").read_cost(), ReadCost::Local);
    }
}
