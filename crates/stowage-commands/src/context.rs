//! What every command is handed besides its own options: how checkpoints
//! are read (`inert`, the globals allowed), where progress goes, and the
//! meter of this run's transfers to and from object stores.

use std::path::Path;
use std::sync::Arc;

use stowage::Checkpoint;
use stowage::{LoadMode, LoadOptions, SaveOptions};

use crate::progress::{Hidden, Progress};
use crate::CommandError;

/// The settings every command of one run shares, and the meter of what the
/// run transfers: a new context counts from zero, so each call's
/// `"transfer"` is its own, whatever else the process transfers.
///
/// Built with [`Context::default`] and the `with_*` builders.
#[derive(Clone)]
pub struct Context {
    inert: bool,
    allow_globals: Vec<String>,
    limits: Vec<(stowage::Limit, u64)>,
    progress: Arc<dyn Progress>,
    #[cfg(feature = "remote")]
    meter: stowage::io::remote::Meter,
}

impl Default for Context {
    fn default() -> Context {
        Context {
            inert: false,
            allow_globals: Vec::new(),
            limits: Vec::new(),
            progress: Arc::new(Hidden),
            #[cfg(feature = "remote")]
            meter: stowage::io::remote::Meter::new(),
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("inert", &self.inert)
            .field("allow_globals", &self.allow_globals)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Reads every global outside PyTorch's allowlist as an inert object
    /// (`--inert`; [`LoadOptions::with_inert`]).
    #[must_use]
    pub fn with_inert(mut self, inert: bool) -> Context {
        self.inert = inert;
        self
    }

    /// Accepts these globals, each `MODULE.NAME`, as PyTorch's
    /// `add_safe_globals` would (`--allow-global`).
    #[must_use]
    pub fn with_allow_globals(mut self, globals: impl IntoIterator<Item = String>) -> Context {
        self.allow_globals = globals.into_iter().collect();
        self
    }

    /// Sets these limits, over the environment's `STOWAGE_LIMITS`
    /// (`--limit NAME=N`; [`LoadOptions::with_limit`]).
    #[must_use]
    pub fn with_limits(
        mut self,
        limits: impl IntoIterator<Item = (stowage::Limit, u64)>,
    ) -> Context {
        self.limits = limits.into_iter().collect();
        self
    }

    /// Tells `progress` of the long steps.
    #[must_use]
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Context {
        self.progress = progress;
        self
    }

    /// Where progress goes.
    pub(crate) fn progress(&self) -> &dyn Progress {
        &*self.progress
    }

    /// Load options with `inert`, the allowed globals and the limits
    /// applied, over the environment's limits (`STOWAGE_LIMITS`) and
    /// `STOWAGE_REMOTE_*` settings for URLs, counted on this context's meter.
    pub fn load_options(&self) -> LoadOptions {
        let mut options = LoadOptions::from_env()
            .with_inert(self.inert)
            .with_allow_globals(self.allow_globals.iter().cloned());
        for &(limit, value) in &self.limits {
            options = options.with_limit(limit, value);
        }
        #[cfg(feature = "remote")]
        let options = options.with_remote(self.remote());
        options
    }

    /// Save options with the environment's `STOWAGE_REMOTE_*` settings for
    /// URLs, counted on this context's meter.
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

    /// What this context's loads and saves have transferred from and to
    /// object stores.
    #[cfg(feature = "remote")]
    pub fn transfer(&self) -> stowage::io::remote::Transfer {
        self.meter.transfer()
    }

    /// How many bytes this context has received from object stores, as it
    /// goes (for a progress line).
    fn received(&self) -> Box<dyn Fn() -> u64 + Send> {
        #[cfg(feature = "remote")]
        {
            let meter = self.meter.clone();
            Box::new(move || meter.transfer().bytes_received)
        }
        #[cfg(not(feature = "remote"))]
        Box::new(|| 0)
    }

    /// Whether an inert read or allowed globals were asked for.
    pub(crate) fn globals_given(&self) -> bool {
        self.inert || !self.allow_globals.is_empty()
    }

    /// Loads `file` for reading its metadata only (fake: no storage is
    /// read), or lazily (each storage read when used, by windows when
    /// contiguous).
    pub(crate) fn load(
        &self,
        file: &Path,
        metadata_only: bool,
    ) -> Result<Checkpoint, CommandError> {
        self.load_as(file, metadata_only, self.inert)
    }

    /// [`load`](Self::load) lazily and inertly, whatever `inert` says (for
    /// `convert`'s `state_dict`, which reads whole-module saves).
    pub(crate) fn load_inert(&self, file: &Path) -> Result<Checkpoint, CommandError> {
        self.load_as(file, false, true)
    }

    fn load_as(
        &self,
        file: &Path,
        metadata_only: bool,
        inert: bool,
    ) -> Result<Checkpoint, CommandError> {
        let mode = if metadata_only {
            LoadMode::Fake
        } else {
            LoadMode::Lazy
        };
        let options = self.load_options().with_inert(inert).with_mode(mode);
        let bar = self
            .progress
            .reading(format!("reading {}", file.display()), self.received());
        let loaded = stowage::load_with(file, &options).map_err(CommandError::input);
        bar.finish_and_clear();
        loaded
    }
}
