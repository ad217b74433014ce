//! The stowage commands as a library: [`inspect`](inspect::inspect),
//! [`diff`](diff::diff), [`verify`](verify::verify),
//! [`convert`](convert::convert) and [`manifest`](manifest::manifest), each a function that takes a checkpoint's
//! path or URL, a [`Context`] and its options, and returns a typed result.
//!
//! The results serialize (`serde`) to exactly the JSON of the CLI contract
//! (`docs/cli-contract.md`), and write the text the command line prints. The
//! `stowage` binary parses its arguments, calls these functions and prints
//! their results; the Python package calls them and turns the results into
//! dicts. Neither re-derives what a command computes.
//!
//! ```no_run
//! use stowage_commands::{diff, Context};
//!
//! let cx = Context::default();
//! let report = diff::diff("a.pt".as_ref(), "b.safetensors".as_ref(), &cx, &diff::DiffOptions::default())?;
//! if !report.is_same() {
//!     println!("{}", serde_json::to_string(&report)?);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`scan`](scan::scan) is the library's own (`stowage::checkpoint::scan`),
//! over several paths; its report serializes itself, and writes its text
//! here ([`scan::write_text`]).

#![deny(missing_docs)]

mod context;
mod data;
mod error;
mod listing;
mod progress;
mod read_ahead;
mod transfer;
mod values;

pub mod content_diff;
pub mod convert;
pub mod diff;
pub mod inspect;
pub mod manifest;
pub mod scan;
pub mod verify;

pub use context::Context;
pub use error::CommandError;
pub use listing::human;
pub use progress::{Bar, Progress, Ticks};
pub use transfer::transfer_json;
