//! A tensor's content: the library's (`stowage::checkpoint::content`), which
//! `inspect`, `diff` and `manifest` read and hash through.

pub(crate) use stowage::checkpoint::content::{digest_all, sha256, Reader};
