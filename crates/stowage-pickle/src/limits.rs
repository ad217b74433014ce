//! The resource limits the unpickler enforces on untrusted input.

#[cfg(doc)]
use super::{unpickle, PickleError};

/// Resource limits for [`unpickle`]. Exceeding any is a
/// [`PickleError::LimitExceeded`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most memo entries stored.
    pub max_memo: usize,
    /// Scan the pickle's opcodes before running it and store only the memo
    /// entries it reads back (on by default). Off, every
    /// entry is stored, as CPython does; the result is the same either way,
    /// except that more entries count against `max_memo`.
    pub scan_memo: bool,
    /// Most items on the stack, and separately most marks.
    pub max_stack: usize,
    /// Deepest node nesting (a node's depth is 1 + the deepest node it holds).
    pub max_depth: usize,
    /// Most nodes in the graph, counting those the hooks add.
    pub max_nodes: usize,
    /// Raise `max_nodes`, `max_memo` and `max_stack` to what a stream of
    /// its length can validly hold ([`for_stream`](Limits::for_stream)), so
    /// that a valid file is never refused for its size while a hostile one
    /// stays bounded by its own length. On by default; the `with_max_*`
    /// builders turn it off, as a limit given is the limit.
    pub scale: bool,
}

/// The nodes a stream may build per byte of it. Every node a pickle builds
/// costs at least one opcode byte of its own (`EMPTY_DICT`, `TUPLE`, a
/// call), and a hook adds at most one node beside the one a call builds;
/// two per byte never refuses a valid stream.
pub const NODES_PER_BYTE: usize = 2;

impl Default for Limits {
    /// 2^20 memo entries, 2^20 stack items, depth 1000, 2^24 nodes, each
    /// of the three counts raised with the stream's length
    /// ([`for_stream`](Limits::for_stream)); memo scan on.
    fn default() -> Self {
        Limits {
            max_memo: 1 << 20,
            scan_memo: true,
            max_stack: 1 << 20,
            max_depth: 1000,
            max_nodes: 1 << 24,
            scale: true,
        }
    }
}

impl Limits {
    /// The limits a stream of `len` bytes is held to: with
    /// [`scale`](Limits::scale), at least [`NODES_PER_BYTE`] nodes a byte,
    /// and a memo entry and a stack item a byte (each needs an opcode byte
    /// of its own), above the limits set, which are the floor; without, the
    /// limits as set. The work and memory a stream can cause stay linear in
    /// its length either way.
    pub fn for_stream(&self, len: usize) -> Limits {
        if !self.scale {
            return *self;
        }
        Limits {
            max_nodes: self.max_nodes.max(len.saturating_mul(NODES_PER_BYTE)),
            max_memo: self.max_memo.max(len),
            max_stack: self.max_stack.max(len),
            ..*self
        }
    }

    /// Whether the counts are raised with the stream's length
    /// ([`scale`](Limits::scale)).
    pub fn with_scale(mut self, scale: bool) -> Self {
        self.scale = scale;
        self
    }

    /// Most memo entries stored, as given (the counts are no longer raised
    /// with the stream's length).
    pub fn with_max_memo(mut self, n: usize) -> Self {
        self.max_memo = n;
        self.scale = false;
        self
    }

    /// Scan the opcodes first and store only the memo entries read back.
    pub fn with_scan_memo(mut self, scan: bool) -> Self {
        self.scan_memo = scan;
        self
    }

    /// Most items on the stack, and separately most marks, as given (the
    /// counts are no longer raised with the stream's length).
    pub fn with_max_stack(mut self, n: usize) -> Self {
        self.max_stack = n;
        self.scale = false;
        self
    }

    /// Deepest node nesting.
    pub fn with_max_depth(mut self, n: usize) -> Self {
        self.max_depth = n;
        self
    }

    /// Most nodes in the graph, counting those the hooks add, as given (the
    /// counts are no longer raised with the stream's length).
    pub fn with_max_nodes(mut self, n: usize) -> Self {
        self.max_nodes = n;
        self.scale = false;
        self
    }
}
