//! The pickle opcode table: every opcode of protocols 0–5, as listed by
//! CPython's `pickletools.opcodes`, in one declarative table.
//!
//! Each row gives the constant name (the opcode's name in `pickletools`),
//! its byte, the protocol that introduced it, the layout of its argument in
//! the stream ([`Arg`]), and a one-line summary. The constants, [`ALL`] and
//! the byte-indexed lookup behind [`info`] are all generated from that single
//! table, so they cannot disagree; the machine, the memo scan and the tests
//! all read arguments through [`Arg`].

/// How an opcode's argument is laid out in the stream, after the opcode
/// byte (`pickletools`' argument descriptors, grouped by layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// No argument.
    None,
    /// An unsigned little-endian integer of this many bytes (`uint1`,
    /// `uint2`, `uint4`, `uint8`).
    Uint(u8),
    /// A signed 4-byte little-endian integer (`int4`).
    Int4,
    /// A big-endian IEEE 754 double (`float8`).
    Float8,
    /// Text up to a newline (`decimalnl_*`, `floatnl`, `stringnl*`,
    /// `unicodestringnl`).
    Line,
    /// Two newline-terminated lines, module and name
    /// (`stringnl_noescape_pair`).
    LinePair,
    /// A little-endian length of `len` bytes, then that many bytes (`long1`,
    /// `long4`, `string1`, `string4`, `bytes*`, `bytearray8`,
    /// `unicodestring*`). A `signed` length (`int4`) that is negative is
    /// malformed.
    Counted {
        /// Bytes in the length: 1, 4 or 8.
        len: u8,
        /// Whether the length is an `int4`.
        signed: bool,
    },
}

/// Static facts about one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The opcode byte.
    pub byte: u8,
    /// The opcode's name as `pickletools` spells it, e.g. `"BINUNICODE"`.
    pub name: &'static str,
    /// The lowest pickle protocol that uses this opcode.
    pub protocol: u8,
    /// The layout of its argument.
    pub arg: Arg,
}

macro_rules! opcodes {
    ($($name:ident = $byte:literal, $proto:literal, $arg:expr, $doc:literal;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "` (protocol ", stringify!($proto), "): ", $doc)]
            pub const $name: u8 = $byte;
        )*

        /// Every opcode of protocols 0–5, in table order.
        pub const ALL: &[OpInfo] = &[
            $(OpInfo { byte: $byte, name: stringify!($name), protocol: $proto, arg: $arg },)*
        ];
    };
}

use Arg::{Counted, Float8, Int4, Line, LinePair, Uint};

opcodes! {
    // Integers.
    INT = b'I', 0, Line, "decimal integer line; `I00`/`I01` are False/True.";
    BININT = b'J', 1, Int4, "4-byte signed little-endian integer.";
    BININT1 = b'K', 1, Uint(1), "1-byte unsigned integer.";
    BININT2 = b'M', 1, Uint(2), "2-byte unsigned little-endian integer.";
    LONG = b'L', 0, Line, "decimal integer line with optional trailing `L`.";
    LONG1 = 0x8a, 2, Counted { len: 1, signed: false }, "1-byte length, then two's complement little-endian integer.";
    LONG4 = 0x8b, 2, Counted { len: 4, signed: true }, "4-byte length, then two's complement little-endian integer.";
    // Byte strings (Python 2 `str`).
    STRING = b'S', 0, Line, "quoted, escaped string literal line.";
    BINSTRING = b'T', 1, Counted { len: 4, signed: true }, "4-byte signed length, then raw bytes.";
    SHORT_BINSTRING = b'U', 1, Counted { len: 1, signed: false }, "1-byte length, then raw bytes.";
    // Bytes.
    BINBYTES = b'B', 3, Counted { len: 4, signed: false }, "4-byte length, then bytes.";
    SHORT_BINBYTES = b'C', 3, Counted { len: 1, signed: false }, "1-byte length, then bytes.";
    BINBYTES8 = 0x8e, 4, Counted { len: 8, signed: false }, "8-byte length, then bytes.";
    BYTEARRAY8 = 0x96, 5, Counted { len: 8, signed: false }, "8-byte length, then a bytearray's contents.";
    NEXT_BUFFER = 0x97, 5, Arg::None, "push the next out-of-band buffer.";
    READONLY_BUFFER = 0x98, 5, Arg::None, "make the buffer on top of the stack read-only.";
    // Singletons.
    NONE = b'N', 0, Arg::None, "push None.";
    NEWTRUE = 0x88, 2, Arg::None, "push True.";
    NEWFALSE = 0x89, 2, Arg::None, "push False.";
    // Unicode strings.
    UNICODE = b'V', 0, Line, "raw-unicode-escape encoded line.";
    SHORT_BINUNICODE = 0x8c, 4, Counted { len: 1, signed: false }, "1-byte length, then UTF-8.";
    BINUNICODE = b'X', 1, Counted { len: 4, signed: false }, "4-byte length, then UTF-8.";
    BINUNICODE8 = 0x8d, 4, Counted { len: 8, signed: false }, "8-byte length, then UTF-8.";
    // Floats.
    FLOAT = b'F', 0, Line, "float literal line.";
    BINFLOAT = b'G', 1, Float8, "8-byte big-endian IEEE 754 double.";
    // Lists.
    EMPTY_LIST = b']', 1, Arg::None, "push an empty list.";
    APPEND = b'a', 0, Arg::None, "append the top item to the list below it.";
    APPENDS = b'e', 1, Arg::None, "extend the list below the mark with the items above it.";
    LIST = b'l', 0, Arg::None, "build a list from the items above the mark.";
    // Tuples.
    EMPTY_TUPLE = b')', 1, Arg::None, "push an empty tuple.";
    TUPLE = b't', 0, Arg::None, "build a tuple from the items above the mark.";
    TUPLE1 = 0x85, 2, Arg::None, "build a 1-tuple from the top item.";
    TUPLE2 = 0x86, 2, Arg::None, "build a 2-tuple from the top two items.";
    TUPLE3 = 0x87, 2, Arg::None, "build a 3-tuple from the top three items.";
    // Dicts.
    EMPTY_DICT = b'}', 1, Arg::None, "push an empty dict.";
    DICT = b'd', 0, Arg::None, "build a dict from the key/value pairs above the mark.";
    SETITEM = b's', 0, Arg::None, "set one key/value pair in the dict below them.";
    SETITEMS = b'u', 1, Arg::None, "set the key/value pairs above the mark in the dict below it.";
    // Sets.
    EMPTY_SET = 0x8f, 4, Arg::None, "push an empty set.";
    ADDITEMS = 0x90, 4, Arg::None, "add the items above the mark to the set below it.";
    FROZENSET = 0x91, 4, Arg::None, "build a frozenset from the items above the mark.";
    // Stack manipulation.
    POP = b'0', 0, Arg::None, "discard the top item (or the topmost mark).";
    DUP = b'2', 0, Arg::None, "push a copy of the top item.";
    MARK = b'(', 0, Arg::None, "push a mark.";
    POP_MARK = b'1', 1, Arg::None, "discard the items above the topmost mark, and the mark.";
    // Memo.
    GET = b'g', 0, Line, "push the memo entry named by a decimal line.";
    BINGET = b'h', 1, Uint(1), "push the memo entry named by a 1-byte index.";
    LONG_BINGET = b'j', 1, Uint(4), "push the memo entry named by a 4-byte index.";
    PUT = b'p', 0, Line, "store the top item in the memo at a decimal-line index.";
    BINPUT = b'q', 1, Uint(1), "store the top item in the memo at a 1-byte index.";
    LONG_BINPUT = b'r', 1, Uint(4), "store the top item in the memo at a 4-byte index.";
    MEMOIZE = 0x94, 4, Arg::None, "store the top item in the memo at index `len(memo)`.";
    // Extension registry.
    EXT1 = 0x82, 2, Uint(1), "push the object registered under a 1-byte extension code.";
    EXT2 = 0x83, 2, Uint(2), "push the object registered under a 2-byte extension code.";
    EXT4 = 0x84, 2, Int4, "push the object registered under a 4-byte extension code.";
    // Classes and objects.
    GLOBAL = b'c', 0, LinePair, "push `module.name` given as two lines.";
    STACK_GLOBAL = 0x93, 4, Arg::None, "push `module.name` taken from two strings on the stack.";
    REDUCE = b'R', 0, Arg::None, "call `callable(*args)`.";
    BUILD = b'b', 0, Arg::None, "apply state to an object (`__setstate__`).";
    INST = b'i', 0, LinePair, "instantiate `module.name` (two lines) with the items above the mark.";
    OBJ = b'o', 1, Arg::None, "instantiate the class above the mark with the items after it.";
    NEWOBJ = 0x81, 2, Arg::None, "`cls.__new__(cls, *args)`.";
    NEWOBJ_EX = 0x92, 4, Arg::None, "`cls.__new__(cls, *args, **kwargs)`.";
    // Machine control.
    PROTO = 0x80, 2, Uint(1), "1-byte protocol number.";
    STOP = b'.', 0, Arg::None, "end of pickle: the top item is the result.";
    FRAME = 0x95, 4, Uint(8), "8-byte length of the frame that follows.";
    // Persistent ids.
    PERSID = b'P', 0, Line, "persistent id given as an ASCII line.";
    BINPERSID = b'Q', 1, Arg::None, "persistent id taken from the stack.";
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
            let i = info(byte).unwrap();
            assert_eq!((i.byte, i.name, i.protocol), (byte, name, protocol));
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

    /// `[(o.name, o.arg and o.arg.name) for o in pickletools.opcodes]`, for
    /// the opcodes that take an argument.
    const PICKLETOOLS_ARGS: &[(&str, &str)] = &[
        ("INT", "decimalnl_short"),
        ("BININT", "int4"),
        ("BININT1", "uint1"),
        ("BININT2", "uint2"),
        ("LONG", "decimalnl_long"),
        ("LONG1", "long1"),
        ("LONG4", "long4"),
        ("STRING", "stringnl"),
        ("BINSTRING", "string4"),
        ("SHORT_BINSTRING", "string1"),
        ("BINBYTES", "bytes4"),
        ("SHORT_BINBYTES", "bytes1"),
        ("BINBYTES8", "bytes8"),
        ("BYTEARRAY8", "bytearray8"),
        ("UNICODE", "unicodestringnl"),
        ("SHORT_BINUNICODE", "unicodestring1"),
        ("BINUNICODE", "unicodestring4"),
        ("BINUNICODE8", "unicodestring8"),
        ("FLOAT", "floatnl"),
        ("BINFLOAT", "float8"),
        ("GET", "decimalnl_short"),
        ("BINGET", "uint1"),
        ("LONG_BINGET", "uint4"),
        ("PUT", "decimalnl_short"),
        ("BINPUT", "uint1"),
        ("LONG_BINPUT", "uint4"),
        ("EXT1", "uint1"),
        ("EXT2", "uint2"),
        ("EXT4", "int4"),
        ("GLOBAL", "stringnl_noescape_pair"),
        ("INST", "stringnl_noescape_pair"),
        ("PROTO", "uint1"),
        ("FRAME", "uint8"),
        ("PERSID", "stringnl_noescape"),
    ];

    #[test]
    fn argument_layouts_match_pickletools() {
        let layout = |descriptor: &str| match descriptor {
            "uint1" => Uint(1),
            "uint2" => Uint(2),
            "uint4" => Uint(4),
            "uint8" => Uint(8),
            "int4" => Int4,
            "float8" => Float8,
            "stringnl_noescape_pair" => LinePair,
            "long1" | "string1" | "bytes1" | "unicodestring1" => Counted {
                len: 1,
                signed: false,
            },
            "long4" | "string4" => Counted {
                len: 4,
                signed: true,
            },
            "bytes4" | "unicodestring4" => Counted {
                len: 4,
                signed: false,
            },
            "bytes8" | "bytearray8" | "unicodestring8" => Counted {
                len: 8,
                signed: false,
            },
            d if d.ends_with("nl") || d.contains("nl_") => Line,
            d => panic!("unknown descriptor {d}"),
        };
        for o in ALL {
            let want = PICKLETOOLS_ARGS
                .iter()
                .find(|(name, _)| *name == o.name)
                .map_or(Arg::None, |(_, d)| layout(d));
            assert_eq!(o.arg, want, "{}", o.name);
        }
    }
}
