//! Why a pickle could not be read: [`PickleError`], each variant with the
//! byte offset where reading failed.

#[cfg(doc)]
use super::Limits;
#[cfg(doc)]
use super::Value;

/// Why a pickle could not be read.
///
/// Every variant names the byte offset (into the pickle) of the opcode that
/// failed, or of the read that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PickleError {
    /// A byte that is no opcode of protocols 0–5.
    #[error("unknown opcode 0x{byte:02x} at offset {offset}")]
    UnknownOpcode {
        /// The byte.
        byte: u8,
        /// Its offset.
        offset: usize,
    },
    /// The input ended inside an opcode's argument or a frame.
    #[error("truncated at offset {offset}: needed {needed} bytes, {available} available")]
    Truncated {
        /// Where the read started.
        offset: usize,
        /// Bytes the argument declares or requires.
        needed: u64,
        /// Bytes left in the input.
        available: usize,
    },
    /// A text opcode's argument has no terminating newline.
    #[error("unterminated line at offset {offset}")]
    UnterminatedLine {
        /// Where the line starts.
        offset: usize,
    },
    /// The input ended without a `STOP` opcode.
    #[error("no stop opcode before end of input at offset {offset}")]
    NoStop {
        /// The input length.
        offset: usize,
    },
    /// An opcode needed more items than the stack holds above the topmost mark.
    #[error("stack underflow in {opcode} at offset {offset}")]
    StackUnderflow {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// An opcode that pops to a mark found no mark.
    #[error("no mark for {opcode} at offset {offset}")]
    NoMark {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// A memo lookup for an index that was never stored.
    #[error("memo index {index} missing at offset {offset}")]
    MemoMissing {
        /// The memo index.
        index: u64,
        /// The offset of the lookup.
        offset: usize,
    },
    /// One of the [`Limits`] was exceeded.
    #[error("limit {limit} exceeded: {value} > {max} at offset {offset}")]
    LimitExceeded {
        /// The limit's field name in [`Limits`], or what else is bounded
        /// (`"dict or set entries"`: 2^32 - 1).
        limit: &'static str,
        /// The value that would have been reached.
        value: usize,
        /// The limit.
        max: usize,
        /// The offset of the opcode.
        offset: usize,
    },
    /// `APPEND`, `SETITEM`, `ADDITEMS` etc. applied to the wrong kind of object.
    #[error("target of {opcode} is not a {expected} at offset {offset}")]
    WrongTarget {
        /// The opcode's name.
        opcode: &'static str,
        /// The kind of node the opcode needs: `"list"`, `"dict"` or `"set"`.
        expected: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// An operand on the stack has the wrong type, e.g. `REDUCE` arguments
    /// that are not a tuple or a `STACK_GLOBAL` name that is not a string.
    #[error("operand of {opcode} is not a {expected} at offset {offset}")]
    WrongOperand {
        /// The opcode's name.
        opcode: &'static str,
        /// What was expected: `"tuple"`, `"dict"` or `"str"`.
        expected: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// A malformed argument: a bad text literal, negative length or index,
    /// invalid UTF-8 or escape sequence.
    #[error("malformed {what} at offset {offset}")]
    BadText {
        /// What was malformed, e.g. `"int"`, `"utf-8"`, `"string quotes"`.
        what: &'static str,
        /// The offset of the opcode.
        offset: usize,
    },
    /// `SETITEMS` or `DICT` with an odd number of items above the mark.
    #[error("odd number of items for {opcode} at offset {offset}")]
    OddItems {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// A protocol number above 5.
    #[error("unsupported protocol {protocol} at offset {offset}")]
    UnsupportedProtocol {
        /// The protocol byte.
        protocol: u8,
        /// Its offset.
        offset: usize,
    },
    /// A known opcode this machine refuses: the `EXT*` extension registry
    /// (there is none) and out-of-band buffers (there are none).
    #[error("unsupported opcode {opcode} at offset {offset}")]
    Unsupported {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// A hook returned a [`Value::Node`] whose id is not in the graph.
    #[error("dangling node id {id} at offset {offset}")]
    DanglingNode {
        /// The node id.
        id: u32,
        /// The offset of the opcode that touched it.
        offset: usize,
    },
}

impl PickleError {
    /// The error a decode of held bytes reported, with its offset moved by
    /// `base` (where the held bytes start in the stream): the errors
    /// [`Input`](super::operand::Input) makes.
    pub(crate) fn moved_by(mut self, base: usize) -> Self {
        match &mut self {
            PickleError::Truncated { offset, .. }
            | PickleError::UnterminatedLine { offset }
            | PickleError::BadText { offset, .. } => *offset += base,
            _ => {}
        }
        self
    }
}
