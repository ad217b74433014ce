//! Where a checkpoint's bytes live, behind one type: a local path, or (with
//! the `remote` feature) an object or a prefix in an object store, as
//! `object_store` puts its `LocalFileSystem` behind the same trait as S3.
//!
//! A [`Location`] is parsed once, at the entry point, from what the caller
//! named (`model.pt`, `ckpt/`, `s3://bucket/run/`); everything after reads
//! through it (`open`, `exists`, `list`, `join`) and never asks whether a
//! string is a URL. Where the kind of store matters to a reader, it asks
//! for the [`ReadCost`] of a source, not for its kind.
//!
//! A local folder that a load reads several files of (a sharded set, a
//! distributed checkpoint) is opened once ([`Location::anchored`]), and
//! every file in it is then opened relative to that handle (`openat`), never
//! by its path again. A save that replaces the folder meanwhile exchanges
//! the folder at the path, not the one the load holds, so the load reads
//! wholly the version it started on, or stops with
//! [`CheckpointError::FolderReplaced`] where that version's files are
//! already gone; never files of both.

use crate::error::{CheckpointError, ErrorContext};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{ReadAt, ReadCost};
use crate::{Error, Result};

/// A file or folder, on disk or in an object store.
#[derive(Clone)]
pub struct Location {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    /// A path in the local file system, and the folder handle it is read
    /// relative to, where one was opened ([`Location::anchored`]).
    Local(PathBuf, Option<Anchor>),
    /// A URL in an object store (`s3://bucket/key`; a folder ends in `/`),
    /// with the options its requests are made with.
    #[cfg(feature = "remote")]
    Remote {
        url: String,
        options: super::remote::RemoteOptions,
    },
}

/// An opened local folder, and a path relative to it.
#[derive(Clone)]
struct Anchor {
    /// The folder, opened once.
    dir: Arc<OwnedFd>,
    /// Its path when it was opened: what the path names now may be another
    /// folder (a save exchanged it).
    dir_path: PathBuf,
    /// The path inside it (`.` for the folder itself).
    rel: PathBuf,
}

impl Anchor {
    /// Opens `rel` inside the folder, with `flags`.
    fn open(&self, flags: OFlags) -> io::Result<OwnedFd> {
        Ok(rustix::fs::openat(
            &*self.dir,
            &self.rel,
            flags | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// The type of what `rel` names inside the folder.
    fn file_type(&self) -> io::Result<FileType> {
        let stat = rustix::fs::statat(&*self.dir, &self.rel, AtFlags::empty())?;
        Ok(FileType::from_raw_mode(stat.st_mode))
    }

    /// Whether the folder at `dir_path` is no longer the one opened (a save
    /// exchanged it, or it is gone).
    fn replaced(&self) -> bool {
        let (Ok(held), Ok(now)) = (
            rustix::fs::fstat(&*self.dir),
            rustix::fs::stat(&self.dir_path),
        ) else {
            return true;
        };
        (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino)
    }

    /// `error`, or [`CheckpointError::FolderReplaced`] where a file was not
    /// found because the folder was replaced since it was opened.
    fn explain(&self, error: io::Error) -> Error {
        if error.kind() == io::ErrorKind::NotFound && self.replaced() {
            return Error::Checkpoint(CheckpointError::FolderReplaced {
                folder: self.dir_path.clone(),
            });
        }
        Error::Io(error)
    }
}

/// Opens the local file `path` for positional reads, refusing what is no
/// regular file (a folder, a FIFO, a device, a socket) before reading a
/// byte. The open never blocks: a FIFO is opened without waiting for a
/// writer, then refused.
///
/// # Errors
/// The open's [`Error::Io`], or [`CheckpointError::NotARegularFile`]; the
/// caller names the file.
pub(crate) fn open_regular(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    regular(&file)?;
    Ok(file)
}

/// Whether an opened file is a regular file; what it is, if not.
fn regular(file: &File) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let kind = file.metadata()?.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        return Err(Error::Io(io::Error::other("is a directory")));
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(Error::Checkpoint(CheckpointError::NotARegularFile { what }))
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
            kind: Kind::Local(path.to_owned(), None),
        }
    }

    /// This location, read from now on through one handle of its local
    /// folder: a folder is opened once, a file through its folder, and
    /// every location [`join`](Self::join)ed to the result opens relative
    /// to that handle. A location in an object store is returned as it is
    /// (an object is read at the version it was opened at, by its ETag).
    ///
    /// A folder that cannot be opened (missing, say) gives the location as
    /// it is, so that its first read names the problem and the file.
    pub(crate) fn anchored(&self) -> Location {
        let Kind::Local(path, None) = &self.kind else {
            return self.clone();
        };
        let (dir_path, rel) = if path.is_dir() {
            (path.clone(), PathBuf::from("."))
        } else {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
                _ => PathBuf::from("."),
            };
            let Some(name) = path.file_name() else {
                return self.clone();
            };
            (dir, PathBuf::from(name))
        };
        let Ok(dir) = rustix::fs::open(
            &dir_path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return self.clone();
        };
        let anchor = Anchor {
            dir: Arc::new(dir),
            dir_path,
            rel,
        };
        Location {
            kind: Kind::Local(path.clone(), Some(anchor)),
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
            Kind::Local(p, _) => p.clone(),
            #[cfg(feature = "remote")]
            Kind::Remote { url, .. } => PathBuf::from(url),
        }
    }

    /// The last part of the name (`model.safetensors`), if there is one; a
    /// folder's URL (ending in `/`) has none.
    pub fn file_name(&self) -> Option<&str> {
        match &self.kind {
            Kind::Local(p, _) => p.file_name()?.to_str(),
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
            Kind::Local(p, anchor) => Kind::Local(
                p.join(name),
                anchor.as_ref().map(|a| Anchor {
                    rel: a.rel.join(name),
                    ..a.clone()
                }),
            ),
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
            Kind::Local(p, anchor) => Kind::Local(
                match p.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
                    _ => PathBuf::from("."),
                },
                // Inside the folder the handle holds, the parent keeps it.
                anchor.as_ref().and_then(|a| {
                    let rel = a.rel.parent()?;
                    Some(Anchor {
                        rel: if rel.as_os_str().is_empty() {
                            PathBuf::from(".")
                        } else {
                            rel.to_owned()
                        },
                        ..a.clone()
                    })
                }),
            ),
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
    pub(crate) fn local_path(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Local(p, _) => Some(p),
            #[cfg(feature = "remote")]
            Kind::Remote { .. } => None,
        }
    }

    /// Whether this names a folder: a local directory, or a URL ending in
    /// `/` (an object store has no folders of its own, only prefixes).
    pub fn is_folder(&self) -> bool {
        match &self.kind {
            Kind::Local(_, Some(a)) => a.file_type().is_ok_and(|t| t == FileType::Directory),
            Kind::Local(p, None) => p.is_dir(),
            #[cfg(feature = "remote")]
            Kind::Remote { url, .. } => url.ends_with('/'),
        }
    }

    /// Whether this is in an object store, where each read is a request
    /// (its [`read_cost`](Self::read_cost) is [`ReadCost::Request`]).
    pub fn is_remote(&self) -> bool {
        self.read_cost() == ReadCost::Request
    }

    /// Whether what is here can be memory-mapped: a local file.
    pub fn can_map(&self) -> bool {
        self.local_path().is_some()
    }

    /// What one read of a source here costs ([`ReadAt::read_cost`]), known
    /// before opening it.
    pub fn read_cost(&self) -> ReadCost {
        match &self.kind {
            Kind::Local(..) => ReadCost::Local,
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
            Kind::Local(..) => Ok(Arc::new(self.open_file()?)),
            #[cfg(feature = "remote")]
            Kind::Remote { url, options } => Ok(Arc::new(super::remote::RemoteObject::open_with(
                url, options,
            )?)),
        }
    }

    /// The local file here, opened for reading (relative to the folder's
    /// handle where there is one): what a mapped load maps.
    ///
    /// # Errors
    /// As [`open`](Self::open); [`CheckpointError::Unsupported`] for an
    /// object in a store.
    pub(crate) fn open_file(&self) -> Result<File> {
        let (p, anchor) = match &self.kind {
            Kind::Local(p, anchor) => (p, anchor),
            #[cfg(feature = "remote")]
            Kind::Remote { .. } => {
                return Err(Error::Checkpoint(CheckpointError::NotLocal {
                    operation: "a local file's handle",
                })
                .in_file(self.path()))
            }
        };
        let file = match anchor {
            // Non-blocking, as `open_regular` opens: a FIFO never blocks.
            Some(a) => File::from(
                a.open(OFlags::RDONLY | OFlags::NONBLOCK)
                    .map_err(|e| a.explain(e).in_file(p.clone()))?,
            ),
            None => return open_regular(p).in_file(p.clone()),
        };
        regular(&file).in_file(p.clone())?;
        Ok(file)
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
            Kind::Local(..) => Ok(None),
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
            Kind::Local(_, Some(a)) => Ok(a.file_type().is_ok_and(|t| t == FileType::RegularFile)),
            Kind::Local(p, None) => Ok(p.is_file()),
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
    pub(crate) fn list(&self) -> Result<Vec<String>> {
        match &self.kind {
            Kind::Local(p, Some(a)) => {
                let in_dir = |e: io::Error| a.explain(e).in_file(p.clone());
                let dir = a.open(OFlags::RDONLY | OFlags::DIRECTORY).map_err(in_dir)?;
                let mut names = Vec::new();
                for entry in rustix::fs::Dir::read_from(&dir).map_err(|e| in_dir(e.into()))? {
                    let entry = entry.map_err(|e| in_dir(e.into()))?;
                    let Ok(name) = entry.file_name().to_str() else {
                        continue;
                    };
                    if name == "." || name == ".." {
                        continue;
                    }
                    let is_dir = match entry.file_type() {
                        FileType::Unknown => self.join(name).is_folder(),
                        t => t == FileType::Directory,
                    };
                    if !is_dir {
                        names.push(name.to_owned());
                    }
                }
                names.sort();
                Ok(names)
            }
            Kind::Local(p, None) => {
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
    /// A symbolic link has the file it names replaced; a target that is not
    /// a file (a device such as `/dev/null`, a FIFO) is written into.
    ///
    /// # Errors
    /// `write`'s error, or the file system's or store's, in
    /// [`Error::InFile`] naming the location.
    pub fn create(
        &self,
        sync: bool,
        len: Option<u64>,
        write: impl FnOnce(&mut dyn io::Write) -> Result<()>,
    ) -> Result<()> {
        match &self.kind {
            Kind::Local(p, _) => super::write_atomically(p, sync, |tmp| {
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

    /// The whole content of the file here, refused past `max` bytes, the
    /// value of `limit` (an index or a metadata file, never a tensor's data).
    ///
    /// # Errors
    /// As [`open`](Self::open); [`CheckpointError::LimitExceeded`] past `max`; a
    /// failed read, naming the location.
    pub fn read_all(&self, limit: crate::Limit, max: u64) -> Result<Vec<u8>> {
        let source = self.open()?;
        let in_file = |e: Error| e.in_file(self.path());
        let len = source.len();
        if len > max {
            return Err(in_file(Error::Checkpoint(CheckpointError::LimitExceeded {
                limit,
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
            Kind::Local(p, _) => p.display().fmt(f),
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
        assert_eq!(a.read_all(crate::Limit::IndexBytes, 2).unwrap(), b"xy");
        assert!(matches!(
            a.read_all(crate::Limit::IndexBytes, 1),
            Err(Error::InFile { .. })
        ));
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

    /// issue 27, item 6: a FIFO is refused at once (the open never waits
    /// for a writer), and a device is no "empty file".
    #[test]
    fn what_is_no_regular_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        for (path, what) in [
            (fifo.clone(), "a FIFO"),
            ("/dev/zero".into(), "a character device"),
        ] {
            let (tx, rx) = std::sync::mpsc::channel();
            let (p, p2) = (path.clone(), path.clone());
            std::thread::spawn(move || {
                let plain = Location::parse(&p).open().err();
                let anchored = Location::parse(&p).anchored().open().err();
                let _ = tx.send((plain, anchored));
            });
            let (plain, anchored) = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("opening {} blocked", p2.display()));
            for err in [plain, anchored] {
                let err = err.expect("refused");
                assert!(
                    matches!(&err, Error::InFile { path: named, source }
                        if named == &path
                        && matches!(&**source, Error::Checkpoint(CheckpointError::NotARegularFile { what: w }) if *w == what)),
                    "{err:?}"
                );
            }
        }
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
