//! What every subcommand is handed besides its own arguments: the parsed
//! global options (`--inert`, `--allow-global`), the loads and saves they
//! shape, and the meter of this run's transfers to and from object stores.

use std::path::Path;

use stowage::Checkpoint;
use stowage::{LoadMode, LoadOptions, SaveOptions};

use crate::{progress, Failure};

/// The global options of one run, parsed once by `main`.
#[derive(Debug, Default)]
pub struct Context {
    /// `--inert`.
    inert: bool,
    /// `--allow-global`, each `MODULE.NAME`.
    allow_globals: Vec<String>,
    /// What this run's loads and saves transfer (its `"transfer"` member),
    /// whatever else the process transfers: a second command run in the
    /// same process (the Python package's) counts from zero.
    #[cfg(feature = "remote")]
    meter: stowage::io::remote::Meter,
}

impl Context {
    /// The context of a run with these global options.
    pub fn new(inert: bool, allow_globals: Vec<String>) -> Context {
        Context {
            inert,
            allow_globals,
            #[cfg(feature = "remote")]
            meter: stowage::io::remote::Meter::new(),
        }
    }

    /// Load options with `--inert` and `--allow-global` applied, and the
    /// environment's `STOWAGE_REMOTE_*` settings for URLs, counted on this
    /// run's meter.
    pub fn load_options(&self) -> LoadOptions {
        let options = LoadOptions::from_env()
            .with_inert(self.inert)
            .with_allow_globals(self.allow_globals.iter().cloned());
        #[cfg(feature = "remote")]
        let options = options.with_remote(self.remote());
        options
    }

    /// Save options with the environment's `STOWAGE_REMOTE_*` settings for
    /// URLs, counted on this run's meter.
    pub fn save_options(&self) -> SaveOptions {
        let options = SaveOptions::from_env();
        #[cfg(feature = "remote")]
        let options = options.with_remote(self.remote());
        options
    }

    #[cfg(feature = "remote")]
    fn remote(&self) -> stowage::io::remote::RemoteOptions {
        stowage::io::remote::RemoteOptions::from_env().with_meter(self.meter.clone())
    }

    /// What this run has transferred from and to object stores.
    #[cfg(feature = "remote")]
    pub fn transfer(&self) -> stowage::io::remote::Transfer {
        self.meter.transfer()
    }

    /// How many bytes this run has received from object stores, as it
    /// goes (for the progress line).
    fn received(&self) -> impl Fn() -> u64 + Send + 'static {
        #[cfg(feature = "remote")]
        let meter = self.meter.clone();
        #[cfg(feature = "remote")]
        return move || meter.transfer().bytes_received;
        #[cfg(not(feature = "remote"))]
        || 0
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
        let bar = progress::fetching(format!("reading {}", file.display()), self.received());
        let loaded = stowage::load_with(file, &options).map_err(Failure::input);
        bar.finish_and_clear();
        loaded
    }
}
