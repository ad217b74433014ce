//! What every subcommand is handed besides its own arguments: the parsed
//! global options (`--quiet`, `--inert`, `--allow-global`), and the loads
//! they shape.

use std::path::Path;

use stowage::Checkpoint;
use stowage::{LoadMode, LoadOptions};

use crate::{progress, Failure};

/// The global options of one run, parsed once by `main`.
#[derive(Debug, Default)]
pub struct Context {
    /// `--inert`.
    inert: bool,
    /// `--allow-global`, each `MODULE.NAME`.
    allow_globals: Vec<String>,
}

impl Context {
    /// The context of a run with these global options.
    pub fn new(inert: bool, allow_globals: Vec<String>) -> Context {
        Context {
            inert,
            allow_globals,
        }
    }

    /// Load options with `--inert` and `--allow-global` applied, and the
    /// environment's `STOWAGE_REMOTE_*` settings for URLs.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions::from_env()
            .with_inert(self.inert)
            .with_allow_globals(self.allow_globals.iter().cloned())
    }

    /// Whether `--inert` or `--allow-global` was given.
    pub fn globals_given(&self) -> bool {
        self.inert || !self.allow_globals.is_empty()
    }

    /// Loads `file` for reading its metadata only (fake: no storage is
    /// read), or lazily (each storage read when used, by windows when
    /// contiguous).
    ///
    /// # Errors
    /// The load's error, naming the file once.
    pub fn load(&self, file: &Path, metadata_only: bool) -> Result<Checkpoint, Failure> {
        self.load_as(file, metadata_only, self.inert)
    }

    /// [`load`](Self::load) lazily and inertly, whatever `--inert` says (for
    /// `convert --state-dict`, which reads whole-module saves).
    ///
    /// # Errors
    /// The load's error, naming the file once.
    pub fn load_inert(&self, file: &Path) -> Result<Checkpoint, Failure> {
        self.load_as(file, false, true)
    }

    fn load_as(
        &self,
        file: &Path,
        metadata_only: bool,
        inert: bool,
    ) -> Result<Checkpoint, Failure> {
        let mode = if metadata_only {
            LoadMode::Fake
        } else {
            LoadMode::Lazy
        };
        let options = self.load_options().with_inert(inert).with_mode(mode);
        let bar = progress::fetching(file, format!("reading {}", file.display()));
        let loaded = stowage::load_with(file, &options).map_err(Failure::input);
        bar.finish_and_clear();
        loaded
    }
}
