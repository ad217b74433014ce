//! PyTorch's meaning of a checkpoint's pickle, shared by the torch zip and
//! legacy formats: how persistent ids become storages and tensors are rebuilt
//! on them when loading ([`TorchHooks`], through a format's [`StorageSource`]),
//! and how tensors, storages and PyTorch's other objects are pickled back when
//! saving ([`pickle_checkpoint`]). Which globals may be named, and how each is
//! spelt, is the one table in `checkpoint/globals/allowlist.rs`.

mod read;
mod write;

pub(crate) use read::{byteswap, finish_kinds, StorageSource, Tables, TorchHooks};
pub(crate) use write::pickle_checkpoint;
