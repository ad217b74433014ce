//! The pickle opcode table: every opcode of protocols 0–5, as listed by
//! CPython's `pickletools.opcodes`, in one declarative table.
//!
//! Each row gives the constant name (the opcode's name in `pickletools`),
//! its byte, the protocol that introduced it, and a one-line summary. The
//! constants, [`ALL`] and the byte-indexed lookup behind [`info`] are all
//! generated from that single table, so they cannot disagree.

/// Static facts about one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The opcode byte.
    pub byte: u8,
    /// The opcode's name as `pickletools` spells it, e.g. `"BINUNICODE"`.
    pub name: &'static str,
    /// The lowest pickle protocol that uses this opcode.
    pub protocol: u8,
}

macro_rules! opcodes {
    ($($name:ident = $byte:literal, $proto:literal, $doc:literal;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "` (protocol ", stringify!($proto), "): ", $doc)]
            pub const $name: u8 = $byte;
        )*

        /// Every opcode of protocols 0–5, in table order.
        pub const ALL: &[OpInfo] = &[
            $(OpInfo { byte: $byte, name: stringify!($name), protocol: $proto },)*
        ];
    };
}

opcodes! {
    // Integers.
    INT = b'I', 0, "decimal integer line; `I00`/`I01` are False/True.";
    BININT = b'J', 1, "4-byte signed little-endian integer.";
    BININT1 = b'K', 1, "1-byte unsigned integer.";
    BININT2 = b'M', 1, "2-byte unsigned little-endian integer.";
    LONG = b'L', 0, "decimal integer line with optional trailing `L`.";
    LONG1 = 0x8a, 2, "1-byte length, then two's complement little-endian integer.";
    LONG4 = 0x8b, 2, "4-byte length, then two's complement little-endian integer.";
    // Byte strings (Python 2 `str`).
    STRING = b'S', 0, "quoted, escaped string literal line.";
    BINSTRING = b'T', 1, "4-byte signed length, then raw bytes.";
    SHORT_BINSTRING = b'U', 1, "1-byte length, then raw bytes.";
    // Bytes.
    BINBYTES = b'B', 3, "4-byte length, then bytes.";
    SHORT_BINBYTES = b'C', 3, "1-byte length, then bytes.";
    BINBYTES8 = 0x8e, 4, "8-byte length, then bytes.";
    BYTEARRAY8 = 0x96, 5, "8-byte length, then a bytearray's contents.";
    NEXT_BUFFER = 0x97, 5, "push the next out-of-band buffer.";
    READONLY_BUFFER = 0x98, 5, "make the buffer on top of the stack read-only.";
    // Singletons.
    NONE = b'N', 0, "push None.";
    NEWTRUE = 0x88, 2, "push True.";
    NEWFALSE = 0x89, 2, "push False.";
    // Unicode strings.
    UNICODE = b'V', 0, "raw-unicode-escape encoded line.";
    SHORT_BINUNICODE = 0x8c, 4, "1-byte length, then UTF-8.";
    BINUNICODE = b'X', 1, "4-byte length, then UTF-8.";
    BINUNICODE8 = 0x8d, 4, "8-byte length, then UTF-8.";
    // Floats.
    FLOAT = b'F', 0, "float literal line.";
    BINFLOAT = b'G', 1, "8-byte big-endian IEEE 754 double.";
    // Lists.
    EMPTY_LIST = b']', 1, "push an empty list.";
    APPEND = b'a', 0, "append the top item to the list below it.";
    APPENDS = b'e', 1, "extend the list below the mark with the items above it.";
    LIST = b'l', 0, "build a list from the items above the mark.";
    // Tuples.
    EMPTY_TUPLE = b')', 1, "push an empty tuple.";
    TUPLE = b't', 0, "build a tuple from the items above the mark.";
    TUPLE1 = 0x85, 2, "build a 1-tuple from the top item.";
    TUPLE2 = 0x86, 2, "build a 2-tuple from the top two items.";
    TUPLE3 = 0x87, 2, "build a 3-tuple from the top three items.";
    // Dicts.
    EMPTY_DICT = b'}', 1, "push an empty dict.";
    DICT = b'd', 0, "build a dict from the key/value pairs above the mark.";
    SETITEM = b's', 0, "set one key/value pair in the dict below them.";
    SETITEMS = b'u', 1, "set the key/value pairs above the mark in the dict below it.";
    // Sets.
    EMPTY_SET = 0x8f, 4, "push an empty set.";
    ADDITEMS = 0x90, 4, "add the items above the mark to the set below it.";
    FROZENSET = 0x91, 4, "build a frozenset from the items above the mark.";
    // Stack manipulation.
    POP = b'0', 0, "discard the top item (or the topmost mark).";
    DUP = b'2', 0, "push a copy of the top item.";
    MARK = b'(', 0, "push a mark.";
    POP_MARK = b'1', 1, "discard the items above the topmost mark, and the mark.";
    // Memo.
    GET = b'g', 0, "push the memo entry named by a decimal line.";
    BINGET = b'h', 1, "push the memo entry named by a 1-byte index.";
    LONG_BINGET = b'j', 1, "push the memo entry named by a 4-byte index.";
    PUT = b'p', 0, "store the top item in the memo at a decimal-line index.";
    BINPUT = b'q', 1, "store the top item in the memo at a 1-byte index.";
    LONG_BINPUT = b'r', 1, "store the top item in the memo at a 4-byte index.";
    MEMOIZE = 0x94, 4, "store the top item in the memo at index `len(memo)`.";
    // Extension registry.
    EXT1 = 0x82, 2, "push the object registered under a 1-byte extension code.";
    EXT2 = 0x83, 2, "push the object registered under a 2-byte extension code.";
    EXT4 = 0x84, 2, "push the object registered under a 4-byte extension code.";
    // Classes and objects.
    GLOBAL = b'c', 0, "push `module.name` given as two lines.";
    STACK_GLOBAL = 0x93, 4, "push `module.name` taken from two strings on the stack.";
    REDUCE = b'R', 0, "call `callable(*args)`.";
    BUILD = b'b', 0, "apply state to an object (`__setstate__`).";
    INST = b'i', 0, "instantiate `module.name` (two lines) with the items above the mark.";
    OBJ = b'o', 1, "instantiate the class above the mark with the items after it.";
    NEWOBJ = 0x81, 2, "`cls.__new__(cls, *args)`.";
    NEWOBJ_EX = 0x92, 4, "`cls.__new__(cls, *args, **kwargs)`.";
    // Machine control.
    PROTO = 0x80, 2, "1-byte protocol number.";
    STOP = b'.', 0, "end of pickle: the top item is the result.";
    FRAME = 0x95, 4, "8-byte length of the frame that follows.";
    // Persistent ids.
    PERSID = b'P', 0, "persistent id given as an ASCII line.";
    BINPERSID = b'Q', 1, "persistent id taken from the stack.";
}

/// Index into [`ALL`] for every byte, or `u8::MAX` where the byte is no opcode.
const LOOKUP: [u8; 256] = {
    let mut table = [u8::MAX; 256];
    let mut i = 0;
    while i < ALL.len() {
        table[ALL[i].byte as usize] = i as u8;
        i += 1;
    }
    table
};

/// Facts about the opcode `byte`, or `None` if it is no opcode of protocols 0–5.
pub fn info(byte: u8) -> Option<&'static OpInfo> {
    ALL.get(usize::from(LOOKUP[usize::from(byte)]))
}

/// The opcode's name, or `"?"` for bytes that are no opcode.
pub fn name(byte: u8) -> &'static str {
    info(byte).map_or("?", |i| i.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[(o.code, o.name, o.proto) for o in pickletools.opcodes]` from CPython 3.11.
    #[rustfmt::skip]
    const PICKLETOOLS: &[(u8, &str, u8)] = &[
        (b'I', "INT", 0), (b'J', "BININT", 1), (b'K', "BININT1", 1), (b'M', "BININT2", 1),
        (b'L', "LONG", 0), (0x8a, "LONG1", 2), (0x8b, "LONG4", 2), (b'S', "STRING", 0),
        (b'T', "BINSTRING", 1), (b'U', "SHORT_BINSTRING", 1), (b'B', "BINBYTES", 3),
        (b'C', "SHORT_BINBYTES", 3), (0x8e, "BINBYTES8", 4), (0x96, "BYTEARRAY8", 5),
        (0x97, "NEXT_BUFFER", 5), (0x98, "READONLY_BUFFER", 5), (b'N', "NONE", 0),
        (0x88, "NEWTRUE", 2), (0x89, "NEWFALSE", 2), (b'V', "UNICODE", 0),
        (0x8c, "SHORT_BINUNICODE", 4), (b'X', "BINUNICODE", 1), (0x8d, "BINUNICODE8", 4),
        (b'F', "FLOAT", 0), (b'G', "BINFLOAT", 1), (b']', "EMPTY_LIST", 1), (b'a', "APPEND", 0),
        (b'e', "APPENDS", 1), (b'l', "LIST", 0), (b')', "EMPTY_TUPLE", 1), (b't', "TUPLE", 0),
        (0x85, "TUPLE1", 2), (0x86, "TUPLE2", 2), (0x87, "TUPLE3", 2), (b'}', "EMPTY_DICT", 1),
        (b'd', "DICT", 0), (b's', "SETITEM", 0), (b'u', "SETITEMS", 1), (0x8f, "EMPTY_SET", 4),
        (0x90, "ADDITEMS", 4), (0x91, "FROZENSET", 4), (b'0', "POP", 0), (b'2', "DUP", 0),
        (b'(', "MARK", 0), (b'1', "POP_MARK", 1), (b'g', "GET", 0), (b'h', "BINGET", 1),
        (b'j', "LONG_BINGET", 1), (b'p', "PUT", 0), (b'q', "BINPUT", 1),
        (b'r', "LONG_BINPUT", 1), (0x94, "MEMOIZE", 4), (0x82, "EXT1", 2), (0x83, "EXT2", 2),
        (0x84, "EXT4", 2), (b'c', "GLOBAL", 0), (0x93, "STACK_GLOBAL", 4), (b'R', "REDUCE", 0),
        (b'b', "BUILD", 0), (b'i', "INST", 0), (b'o', "OBJ", 1), (0x81, "NEWOBJ", 2),
        (0x92, "NEWOBJ_EX", 4), (0x80, "PROTO", 2), (b'.', "STOP", 0), (0x95, "FRAME", 4),
        (b'P', "PERSID", 0), (b'Q', "BINPERSID", 1),
    ];

    #[test]
    fn table_matches_pickletools() {
        assert_eq!(ALL.len(), PICKLETOOLS.len());
        for &(byte, name, protocol) in PICKLETOOLS {
            assert_eq!(
                info(byte),
                Some(&OpInfo {
                    byte,
                    name,
                    protocol
                }),
                "{name}"
            );
        }
    }

    #[test]
    fn bytes_are_unique_and_others_unknown() {
        let known = (0..=255u8).filter(|&b| info(b).is_some()).count();
        assert_eq!(known, ALL.len());
        assert_eq!(info(0x99), None);
        assert_eq!(name(0xff), "?");
        assert_eq!(name(MARK), "MARK");
    }
}
