//! A source resolved once: what a path or URL holds (where it is, and the
//! layout of the checkpoint it names), found by one probe ([`resolve`]) and
//! then loaded without probing again ([`Source::load`]). The loaded
//! [`Checkpoint`] keeps what it came from: its [`Layout`] and its files.

use std::cell::RefCell;
use std::path::Path;

use crate::checkpoint::detect::{detect_format, load_from};
use crate::checkpoint::folder::{folder_at, Folder};
use crate::checkpoint::format::dcp::{self, DcpCheckpoint};
use crate::checkpoint::format::{sharded, torch_zip};
use crate::checkpoint::options::{LoadMode, LoadOptions};
use crate::checkpoint::records::Mode;
use crate::checkpoint::value::graph::{Checkpoint, Format};
use crate::checkpoint::value::origin::{Layout, Origin};
use crate::error::{CheckpointError, ErrorContext};
use crate::io::Location;
use crate::storage::{MappedFile, MappedRecords};
use crate::{Error, Result};

/// What a path or URL holds, found once by [`resolve`]: its location, and
/// the checkpoint folder it names, if it names one. Loading it
/// ([`load`](Source::load)) reads what was found, without probing again.
///
/// A local folder is opened once, when resolved, and every file is read
/// relative to that handle: a load reads the version of the folder that was
/// resolved, even while a save replaces it.
#[derive(Clone, Debug)]
pub struct Source {
    location: Location,
    folder: Option<Folder>,
}

/// Finds what `path` holds, with `options`' store settings for a URL: a
/// checkpoint folder (a local directory, a URL ending in `/`, or an
/// `*.index.json`): a distributed checkpoint, its ranks' layout, a sharded
/// set or a folder holding one file ([`Folder`]), or else a file. Nothing is read of a file until it is loaded.
///
/// # Errors
/// [`Error::InFile`] naming the folder, around a not-found error when it
/// holds no checkpoint, or the store's error.
pub fn resolve(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Source> {
    Source::at(&options.location(path.as_ref()))
}

impl Source {
    pub(crate) fn at(here: &Location) -> Result<Source> {
        let location = here.anchored();
        let folder = folder_at(&location)?;
        Ok(Source { location, folder })
    }

    /// Where it is.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The checkpoint folder it names, or `None` for a file.
    pub fn folder(&self) -> Option<&Folder> {
        self.folder.as_ref()
    }

    /// Whether it names a folder (a local directory, or a URL ending in `/`).
    pub fn is_folder(&self) -> bool {
        self.location.is_folder()
    }

    /// Whether each read is a request to an object store.
    pub fn is_remote(&self) -> bool {
        self.location.is_remote()
    }

    /// Loads it with options, in their [`LoadMode`].
    ///
    /// # Errors
    /// As [`load`](crate::load); [`CheckpointError::Unsupported`] for
    /// [`LoadMode::Mapped`], which only [`load_mmap`](Source::load_mmap)
    /// loads.
    pub fn load(&self, options: &LoadOptions) -> Result<Checkpoint> {
        if options.mode() == LoadMode::Mapped {
            return Err(Error::Checkpoint(CheckpointError::Unsupported {
                what: "LoadMode::Mapped in a safe load: a mapped load is `unsafe fn load_mmap`"
                    .into(),
            }));
        }
        self.load_each(options, &|file| load_file(file, options))
    }

    /// Loads it memory-mapped, as [`load_mmap`](crate::load_mmap) does.
    ///
    /// # Safety
    /// As [`load_mmap`](crate::load_mmap): no file of the checkpoint may be
    /// truncated or written while any of its storages lives.
    ///
    /// # Errors
    /// As [`load`](crate::load).
    #[allow(unsafe_code)] // Only to pass the caller's promise on to the mapping.
    pub unsafe fn load_mmap(&self, options: &LoadOptions) -> Result<Checkpoint> {
        let options = match options.mode() {
            LoadMode::Fake => return self.load(options),
            _ => &options.clone().with_mode(LoadMode::Mapped),
        };
        if !self.location.can_map() {
            // An object in a store cannot be mapped: it is read as an eager
            // load reads it.
            return self.load(&options.clone().with_mode(LoadMode::Eager));
        }
        self.load_each(options, &|file| {
            // SAFETY: the caller promises that no file of the checkpoint (the
            // file, or every file of its folder or set) is truncated or
            // written meanwhile.
            unsafe { load_mmap_file(file, options) }
        })
    }

    /// Loads what was found, each file through `load_one` (a distributed
    /// checkpoint's chunks are assembled into new storages, so its files are
    /// never `load_one`'s), and records the layout and the files read.
    fn load_each(
        &self,
        options: &LoadOptions,
        load_one: &dyn Fn(&Location) -> Result<Checkpoint>,
    ) -> Result<Checkpoint> {
        if options.expected.is_some() && options.mode() == LoadMode::Fake {
            return Err(Error::Checkpoint(CheckpointError::Unsupported {
                what: "checking a manifest in a fake load, which has no tensor data: load eagerly or lazily, or use stowage verify --manifest".into(),
            }));
        }
        let read = RefCell::new(Vec::new());
        let each = |file: &Location| {
            read.borrow_mut().push(file.clone());
            load_one(file)
        };
        let (mut ckpt, layout) = match &self.folder {
            Some(Folder::Dcp(dir)) => {
                let dcp = DcpCheckpoint::at(dir.clone(), options)?;
                read.borrow_mut().extend(dcp.files());
                (dcp.into_checkpoint()?, Layout::Dcp)
            }
            Some(Folder::Ranks(files)) => (dcp::hf::load(files, each)?, Layout::DcpHf),
            Some(Folder::Sharded(index)) => {
                let text = index.read_all(crate::Limit::IndexBytes, sharded::MAX_INDEX_BYTES)?;
                let ckpt = sharded::load_indexed(index, &String::from_utf8_lossy(&text), each)?;
                let layout = Layout::sharded(ckpt.format);
                (ckpt, layout)
            }
            Some(Folder::Single(file)) => {
                let ckpt = each(file)?;
                let layout = Layout::file(ckpt.format);
                (ckpt, layout)
            }
            None => {
                let ckpt = each(&self.location)?;
                let layout = Layout::file(ckpt.format);
                (ckpt, layout)
            }
        };
        ckpt.origin = Some(Origin {
            layout,
            files: read.into_inner(),
        });
        ckpt.max_paths = options.max_paths;
        if let Some(expected) = &options.expected {
            // Every tensor read is hashed now, on every core; a lazy load's
            // storages each when first read.
            let checked = match options.mode() {
                LoadMode::Lazy => expected.check_lazily(&ckpt),
                _ => expected.check(&ckpt),
            };
            checked.map_err(|e| e.in_file(self.location.path()))?;
        }
        Ok(ckpt)
    }
}

/// Loads one checkpoint file or object (never a set: a shard named like an
/// index is read as a file, so an index cannot lead a load in circles), in
/// the options' mode: a torch zip archive or a safetensors file lazily where
/// asked (each storage read on first use), else read now (batched where
/// each read is a request).
fn load_file(here: &Location, options: &LoadOptions) -> Result<Checkpoint> {
    let source = here.open()?;
    let in_file = |e: Error| e.in_file(here.path());
    if options.mode() == LoadMode::Lazy {
        match detect_format(&source) {
            Ok(Format::TorchZip | Format::TorchScript) => {
                return torch_zip::load_lazy(source, &here.path(), options).map_err(in_file)
            }
            #[cfg(feature = "safetensors")]
            Ok(Format::Safetensors) => {
                return crate::checkpoint::format::safetensors::load_lazy(
                    source,
                    &here.path(),
                    options,
                )
                .map_err(in_file)
            }
            _ => {}
        }
    }
    load_from(source, options, Mode::of(options)).map_err(in_file)
}

/// [`load_mmap`] of one file.
///
/// # Safety
/// As [`load_mmap`].
#[allow(unsafe_code)] // Only to pass the caller's promise on to the mapping.
unsafe fn load_mmap_file(here: &Location, options: &LoadOptions) -> Result<Checkpoint> {
    let in_file = |e: Error| e.in_file(here.path());
    let file = here.open_file()?;
    // SAFETY: the caller promises the file is neither truncated nor written meanwhile.
    let map = unsafe { MappedFile::private(&file) }.map_err(|e| in_file(Error::Io(e)))?;
    let records = MappedRecords::new(map);
    let reader = records.reader();
    let mode = Mode::mapped(records, options);
    let loaded = match detect_format(&reader) {
        // The archive's directory, pickle and local headers are read with
        // `pread`, not through the mapping: a read through it faults in each
        // record's header page (and the kernel's fault-around its neighbours),
        // which was most of a mapped load's time (docs/performance.md).
        Ok(Format::TorchZip | Format::TorchScript) => torch_zip::load(file, options, mode),
        Ok(_) => load_from(reader, options, mode),
        Err(e) => Err(e),
    };
    loaded.map_err(in_file)
}
