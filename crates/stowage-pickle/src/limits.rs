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
}

impl Default for Limits {
    /// 2^20 memo entries, 2^20 stack items, depth 1000, 2^24 nodes; memo scan on.
    fn default() -> Self {
        Limits {
            max_memo: 1 << 20,
            scan_memo: true,
            max_stack: 1 << 20,
            max_depth: 1000,
            max_nodes: 1 << 24,
        }
    }
}

impl Limits {
    /// Most memo entries stored.
    pub fn with_max_memo(mut self, n: usize) -> Self {
        self.max_memo = n;
        self
    }

    /// Scan the opcodes first and store only the memo entries read back.
    pub fn with_scan_memo(mut self, scan: bool) -> Self {
        self.scan_memo = scan;
        self
    }

    /// Most items on the stack, and separately most marks.
    pub fn with_max_stack(mut self, n: usize) -> Self {
        self.max_stack = n;
        self
    }

    /// Deepest node nesting.
    pub fn with_max_depth(mut self, n: usize) -> Self {
        self.max_depth = n;
        self
    }

    /// Most nodes in the graph, counting those the hooks add.
    pub fn with_max_nodes(mut self, n: usize) -> Self {
        self.max_nodes = n;
        self
    }
}
