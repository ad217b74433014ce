//! The integration tests of `stowage`, linked as one binary (one link, one
//! process start); each module was a test binary of its own before.

mod access;
mod architecture;
mod arith_cases;
mod autograd;
mod backings;
mod common;
mod concurrency;
mod crash_safety;
#[cfg(all(feature = "safetensors", feature = "zstd"))]
mod dcp;
mod digest_all;
mod display_cases;
mod expected;
mod hostile;
#[cfg(feature = "safetensors")]
mod interop;
mod kinds;
mod layout_props;
#[cfg(feature = "safetensors")]
mod load_modes;
mod py2;
#[cfg(all(feature = "remote", feature = "safetensors"))]
mod remote;
#[cfg(feature = "safetensors")]
mod roundtrip;
mod save_deterministic;
mod scan;
// Only the remote tests start servers.
#[cfg(all(feature = "remote", feature = "safetensors"))]
mod servers;
#[cfg(feature = "safetensors")]
mod sharded;
#[cfg(feature = "safetensors")]
mod source;
mod torch_legacy;
mod torch_zip;
mod value_tree_props;
#[cfg(feature = "safetensors")]
mod values;
mod walkthrough;
#[cfg(feature = "safetensors")]
mod written_digests;
