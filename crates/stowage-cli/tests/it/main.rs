//! The integration tests of `stowage-cli`, linked as one binary (one link, one
//! process start); each module was a test binary of its own before.

mod cli;
mod dcp_scale;
mod demo;
mod folders;
mod kinds;
mod manifest;
#[cfg(feature = "remote")]
mod remote;
mod scan;
mod scan_risk;
#[cfg(feature = "remote")]
#[path = "../../../stowage/tests/it/servers/mod.rs"]
mod servers;
mod wild;
