//! The pickler: protocol 2 opcodes, byte for byte as CPython's C pickler
//! writes them for the same objects (with `fix_imports`, so builtins are
//! `__builtin__`).
//!
//! [`Pickler`] has one method per opcode or opcode group, and remembers what
//! it memoized; [`write_value`](super::dump::write_value) walks a whole
//! [`Graph`](super::Graph) value with it.

use std::io::{self, Write};

use num_bigint::BigInt;

use super::opcode as op;
use super::value::NodeId;
use super::Map;

/// Why a pickle could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The output failed.
    #[error("writing the pickle: {0}")]
    Io(#[from] io::Error),
    /// A string, bytes object or integer longer than protocol 2 can hold.
    #[error("{what} of {len} bytes is longer than protocol 2 allows (4 GiB)")]
    TooLong {
        /// `"str"` or `"int"`.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A global whose module or name holds a newline, which `GLOBAL` cannot.
    #[error("global {module}.{name} has a newline")]
    NewlineInGlobal {
        /// The module.
        module: String,
        /// The name.
        name: String,
    },
    /// More memo entries than a 4-byte index reaches.
    #[error("the memo is full ({count} entries)")]
    MemoFull {
        /// Entries stored.
        count: u32,
    },
    /// A [`Value::Node`](super::Value::Node) whose id is not in the graph.
    #[error("node {id} is not in the graph")]
    DanglingNode {
        /// The node id.
        id: u32,
    },
    /// A node that contains itself through tuples and sets only, which
    /// Python cannot build.
    #[error("node {id} contains itself through tuples and sets only")]
    Cycle {
        /// The node id.
        id: u32,
    },
    /// Values nested deeper than the hooks allow.
    #[error("nesting depth {depth} exceeds {max}")]
    TooDeep {
        /// The depth reached.
        depth: usize,
        /// The most allowed.
        max: usize,
    },
    /// A kind of node the layout does not write.
    #[error("a {kind} is not written in this layout")]
    Refused {
        /// The node kind, e.g. `"frozenset"`.
        kind: &'static str,
    },
}

/// What the pickler's methods return.
pub type WriteResult<T = ()> = Result<T, WriteError>;

/// A protocol 2 pickle writer.
///
/// Writes go straight to `W`; wrap files in a `BufWriter`. Besides the memo
/// indexes it hands out, the pickler remembers which strings, bytes, globals
/// and graph nodes it has memoized, so
/// [`write_value`](super::dump::write_value) calls on one pickler share them.
/// Node ids are taken to belong to one [`Graph`](super::Graph) per pickler.
#[derive(Debug)]
pub struct Pickler<W: Write> {
    w: W,
    next_memo: u32,
    pub(super) nodes: Map<NodeId, u32>,
    strs: Map<Box<str>, u32>,
    bytes: Map<Box<[u8]>, u32>,
    /// Memo index of each global written, by module, then name (so that a
    /// lookup allocates nothing).
    globals: Map<Box<str>, Map<Box<str>, u32>>,
}

impl<W: Write> Pickler<W> {
    /// A pickler writing to `w`; writes `PROTO 2`.
    ///
    /// # Errors
    /// [`WriteError::Io`] if `w` fails (as every method may).
    pub fn new(mut w: W) -> WriteResult<Self> {
        w.write_all(&[op::PROTO, 2])?;
        Ok(Pickler {
            w,
            next_memo: 0,
            nodes: Map::default(),
            strs: Map::default(),
            bytes: Map::default(),
            globals: Map::default(),
        })
    }

    /// The writer back, after [`Pickler::stop`].
    pub fn finish(self) -> W {
        self.w
    }

    pub(super) fn op(&mut self, code: u8) -> WriteResult {
        self.write(&[code])
    }

    fn write(&mut self, bytes: &[u8]) -> WriteResult {
        Ok(self.w.write_all(bytes)?)
    }

    /// `NONE`.
    pub fn none(&mut self) -> WriteResult {
        self.op(op::NONE)
    }

    /// `NEWTRUE` / `NEWFALSE`.
    pub fn bool(&mut self, b: bool) -> WriteResult {
        self.op(if b { op::NEWTRUE } else { op::NEWFALSE })
    }

    /// An int as CPython picks: `BININT1` for 0..=255, `BININT2` up to
    /// 65535, `BININT` for other 32-bit values, else `LONG1`.
    pub fn int(&mut self, i: i64) -> WriteResult {
        match (u8::try_from(i), u16::try_from(i), i32::try_from(i)) {
            (Ok(b), _, _) => self.write(&[op::BININT1, b]),
            (_, Ok(h), _) => {
                self.op(op::BININT2)?;
                self.write(&h.to_le_bytes())
            }
            (_, _, Ok(w)) => {
                self.op(op::BININT)?;
                self.write(&w.to_le_bytes())
            }
            _ => self.long(&BigInt::from(i)),
        }
    }

    /// Any int: as [`Pickler::int`] when it fits in `i64`, else `LONG1` or,
    /// past 255 bytes, `LONG4`.
    pub fn bigint(&mut self, i: &BigInt) -> WriteResult {
        match i64::try_from(i) {
            Ok(small) => self.int(small),
            Err(_) => self.long(i),
        }
    }

    /// `LONG1` / `LONG4` with minimal two's complement bytes.
    fn long(&mut self, i: &BigInt) -> WriteResult {
        let bytes = i.to_signed_bytes_le();
        match u8::try_from(bytes.len()) {
            Ok(n) => self.write(&[op::LONG1, n])?,
            Err(_) => {
                self.op(op::LONG4)?;
                self.write(&len32("int", bytes.len())?.to_le_bytes())?;
            }
        }
        self.write(&bytes)
    }

    /// `BINFLOAT` (every bit kept, NaN payloads included).
    pub fn float(&mut self, f: f64) -> WriteResult {
        self.op(op::BINFLOAT)?;
        self.write(&f.to_be_bytes())
    }

    /// `BINUNICODE`, not memoized.
    pub fn str(&mut self, s: &str) -> WriteResult {
        self.op(op::BINUNICODE)?;
        self.write(&len32("str", s.len())?.to_le_bytes())?;
        self.write(s.as_bytes())
    }

    /// A string as CPython writes a `str` object: `BINUNICODE` and `BINPUT`
    /// the first time, `BINGET` for equal strings after that.
    pub fn str_memoized(&mut self, s: &str) -> WriteResult {
        if let Some(&i) = self.strs.get(s) {
            return self.memo_get(i);
        }
        self.str(s)?;
        let i = self.memo_put()?;
        self.strs.insert(s.into(), i);
        Ok(())
    }

    /// A `bytes` object in protocol 2 form, as CPython writes it:
    /// `_codecs.encode(<latin-1 str>, 'latin1')`, or `__builtin__.bytes()`
    /// when empty, then `BINPUT`; equal bytes after that are a `BINGET`.
    pub fn bytes(&mut self, b: &[u8]) -> WriteResult {
        if let Some(&i) = self.bytes.get(b) {
            return self.memo_get(i);
        }
        if b.is_empty() {
            self.global_memoized("__builtin__", "bytes")?;
            self.tuple(0)?;
        } else {
            self.global_memoized("_codecs", "encode")?;
            self.str_memoized(&b.iter().map(|&c| char::from(c)).collect::<String>())?;
            self.str_memoized("latin1")?;
            self.tuple(2)?;
            self.memo_put()?;
        }
        self.reduce()?;
        let i = self.memo_put()?;
        self.bytes.insert(b.into(), i);
        Ok(())
    }

    /// `GLOBAL module\nname\n`, not memoized.
    ///
    /// # Errors
    /// [`WriteError::NewlineInGlobal`] if `module` or `name` holds a newline.
    pub fn global(&mut self, module: &str, name: &str) -> WriteResult {
        if module.contains('\n') || name.contains('\n') {
            return Err(WriteError::NewlineInGlobal {
                module: module.to_owned(),
                name: name.to_owned(),
            });
        }
        self.op(op::GLOBAL)?;
        Ok(write!(self.w, "{module}\n{name}\n")?)
    }

    /// A global as CPython writes a class or function: `GLOBAL` and
    /// `BINPUT` the first time, `BINGET` after that.
    pub fn global_memoized(&mut self, module: &str, name: &str) -> WriteResult {
        if let Some(&i) = self.globals.get(module).and_then(|names| names.get(name)) {
            return self.memo_get(i);
        }
        self.global(module, name)?;
        let i = self.memo_put()?;
        self.globals
            .entry(module.into())
            .or_default()
            .insert(name.into(), i);
        Ok(())
    }

    /// `MARK`.
    pub fn mark(&mut self) -> WriteResult {
        self.op(op::MARK)
    }

    /// `TUPLE`: a tuple of the items since the last [`Pickler::mark`].
    pub fn tuple_from_mark(&mut self) -> WriteResult {
        self.op(op::TUPLE)
    }

    /// A tuple of the last `n` items: `EMPTY_TUPLE`, `TUPLE1`, `TUPLE2`,
    /// `TUPLE3`, or for `n > 3` `TUPLE`, for which the caller must have
    /// written a [`Pickler::mark`] before the items.
    pub fn tuple(&mut self, n: usize) -> WriteResult {
        self.op(match n {
            0 => op::EMPTY_TUPLE,
            1 => op::TUPLE1,
            2 => op::TUPLE2,
            3 => op::TUPLE3,
            _ => op::TUPLE,
        })
    }

    /// `EMPTY_LIST`.
    pub fn empty_list(&mut self) -> WriteResult {
        self.op(op::EMPTY_LIST)
    }

    /// `EMPTY_DICT`.
    pub fn empty_dict(&mut self) -> WriteResult {
        self.op(op::EMPTY_DICT)
    }

    /// `APPEND`: append the top item to the list below it.
    pub fn append(&mut self) -> WriteResult {
        self.op(op::APPEND)
    }

    /// `APPENDS`: extend the list below the mark with the items above it.
    pub fn appends(&mut self) -> WriteResult {
        self.op(op::APPENDS)
    }

    /// `SETITEM`: set the top key/value pair in the dict below it.
    pub fn setitem(&mut self) -> WriteResult {
        self.op(op::SETITEM)
    }

    /// `SETITEMS`: set the pairs above the mark in the dict below it.
    pub fn setitems(&mut self) -> WriteResult {
        self.op(op::SETITEMS)
    }

    /// `REDUCE`: `callable(*args)`.
    pub fn reduce(&mut self) -> WriteResult {
        self.op(op::REDUCE)
    }

    /// `NEWOBJ`: `cls.__new__(cls, *args)` of the class and argument tuple on top.
    pub fn new_obj(&mut self) -> WriteResult {
        self.op(op::NEWOBJ)
    }

    /// `BUILD`: apply the top item as state to the object below it.
    pub fn build(&mut self) -> WriteResult {
        self.op(op::BUILD)
    }

    /// `BINPERSID`: the top item is a persistent id.
    pub fn binpersid(&mut self) -> WriteResult {
        self.op(op::BINPERSID)
    }

    /// `POP`.
    pub fn pop(&mut self) -> WriteResult {
        self.op(op::POP)
    }

    /// `POP_MARK`.
    pub fn pop_mark(&mut self) -> WriteResult {
        self.op(op::POP_MARK)
    }

    /// `BINPUT` / `LONG_BINPUT` of the top item at the next memo index,
    /// which is returned.
    pub fn memo_put(&mut self) -> WriteResult<u32> {
        let i = self.next_memo;
        self.next_memo = i.checked_add(1).ok_or(WriteError::MemoFull { count: i })?;
        match u8::try_from(i) {
            Ok(b) => self.write(&[op::BINPUT, b])?,
            Err(_) => {
                self.op(op::LONG_BINPUT)?;
                self.write(&i.to_le_bytes())?;
            }
        }
        Ok(i)
    }

    /// `BINGET` / `LONG_BINGET`.
    pub fn memo_get(&mut self, i: u32) -> WriteResult {
        match u8::try_from(i) {
            Ok(b) => self.write(&[op::BINGET, b]),
            Err(_) => {
                self.op(op::LONG_BINGET)?;
                self.write(&i.to_le_bytes())
            }
        }
    }

    /// `STOP`.
    pub fn stop(&mut self) -> WriteResult {
        self.op(op::STOP)
    }
}

/// A length that protocol 2 writes in 4 bytes.
fn len32(what: &'static str, len: usize) -> WriteResult<u32> {
    u32::try_from(len).map_err(|_| WriteError::TooLong { what, len })
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{load, render};
    use super::*;

    #[test]
    fn low_level_ops() {
        let mut p = Pickler::new(Vec::new()).unwrap();
        p.mark().unwrap();
        for i in 0..256 {
            p.none().unwrap();
            assert_eq!(p.memo_put().unwrap(), i);
        }
        assert_eq!(p.memo_put().unwrap(), 256);
        p.memo_get(0).unwrap();
        p.memo_get(256).unwrap();
        p.pop_mark().unwrap();
        p.global("m", "f").unwrap();
        p.none().unwrap();
        p.tuple(1).unwrap();
        p.reduce().unwrap();
        p.stop().unwrap();
        let data = p.finish();
        assert_eq!(
            &data[data.len() - 17..],
            b"h\x00j\x00\x01\x00\x001cm\nf\nN\x85R."
        );
        let parsed = load(&data).unwrap();
        assert_eq!(
            render(&parsed.graph, &parsed.root),
            "obj[g:m.f, (None), None]"
        );
    }

    #[test]
    fn structured_errors() {
        let mut p = Pickler::new(Vec::new()).unwrap();
        let e = p.global("a\nb", "c").unwrap_err();
        assert!(matches!(e, WriteError::NewlineInGlobal { .. }), "{e:?}");
        assert_eq!(e.to_string(), "global a\nb.c has a newline");
        p.next_memo = u32::MAX;
        p.none().unwrap();
        let e = p.memo_put().unwrap_err();
        assert!(
            matches!(e, WriteError::MemoFull { count: u32::MAX }),
            "{e:?}"
        );
    }
}
