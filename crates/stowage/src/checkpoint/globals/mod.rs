//! The globals a pickle may name, in two tables: `allowlist`, PyTorch's
//! `weights_only` allowlist, each global with what stowage builds for it;
//! and `decoded`, the globals outside it whose pickled form is data, read as
//! data when the user allows them or loads inertly.

pub(crate) mod allowlist;
pub mod decoded;
