//! A generic, hardened pickle machine: an unpickler for protocols 0–5, a
//! protocol 2 pickler and a static disassembler, knowing nothing about
//! PyTorch.
//!
//! # Why hand-rolled
//!
//! No existing crate implements what a checkpoint loader needs: a *safe*
//! pickle VM that resolves every class through an allowlisting hook, hands
//! persistent ids to the caller, and keeps Python's object identity. In
//! particular `serde-pickle` deep-copies memo entries (so sharing and
//! mutation after memoization are lost, and a small pickle can expand
//! exponentially) and cannot do persistent ids at all. Here the result is an
//! arena [`Graph`]: the memo shares [`NodeId`]s, mutation after memoization
//! (`APPENDS` after `BINPUT`) is visible through every reference, and cycles
//! are natural.
//!
//! # API
//!
//! - Reading: [`unpickle`] runs one pickle, driven by the caller's [`Hooks`]
//!   for everything that would run Python code (`GLOBAL`, `REDUCE`, `BUILD`,
//!   `NEWOBJ`, persistent ids), within [`Limits`], and returns [`Pickled`]:
//!   the root [`Value`] and the [`Graph`] of [`Node`]s it refers to by
//!   [`NodeId`]. Failures are [`PickleError`]s (or the hooks' own errors).
//!   [`unpickle_reader`] runs one from readers, holding a window of it at a
//!   time rather than all of it, with the same result and errors.
//! - Writing: [`Pickler`] emits protocol 2 opcodes as CPython's C pickler
//!   does; [`write_value`] writes a whole graph value with it, asking the
//!   caller's [`WriteHooks`] for extension values, in a [`Layout`];
//!   [`dumps`] is a complete pickle in CPython's layout. Failures are
//!   [`WriteError`]s.
//! - Inspecting without running: [`disassemble`] lists the globals a pickle
//!   names ([`GlobalName`]) and the opcodes it uses ([`Disassembly`]);
//!   [`compat::fix_import`] maps Python 2 global names to Python 3 as
//!   CPython's unpickler does.
//!
//! The modules behind these: [`opcode`] (the opcode table: byte, name,
//! protocol, argument layout; one decoder reads every argument as the table
//! lays it out, for the machine, the memo scan that runs before it and the
//! disassembler), [`value`], [`read`], [`write`](mod@write), [`dump`],
//! [`disasm`] and [`compat`].
//!
//! # Example
//!
//! Hooks that make every class an opaque extension value, and refuse
//! everything else:
//!
//! ```
//! use stowage_pickle::{disassemble, unpickle, Graph, Hooks, Limits, Node, PickleError, Value};
//!
//! struct Classes;
//!
//! impl Hooks for Classes {
//!     type Ext = String;
//!     type Error = PickleError;
//!
//!     fn find_class(&mut self, module: &str, name: &str) -> Result<Value<String>, PickleError> {
//!         Ok(Value::Ext(format!("{module}.{name}")))
//!     }
//!     fn persistent_load(&mut self, _: &mut Graph<String>, _: Value<String>)
//!         -> Result<Value<String>, PickleError> {
//!         unimplemented!("no persistent ids in this example")
//!     }
//!     fn reduce(&mut self, _: &mut Graph<String>, _: Value<String>, _: Value<String>)
//!         -> Result<Value<String>, PickleError> {
//!         unimplemented!("no calls in this example")
//!     }
//!     fn build(&mut self, _: &mut Graph<String>, _: Value<String>, _: Value<String>)
//!         -> Result<Value<String>, PickleError> {
//!         unimplemented!("no state in this example")
//!     }
//!     fn new_obj(&mut self, _: &mut Graph<String>, _: Value<String>, _: Value<String>)
//!         -> Result<Value<String>, PickleError> {
//!         unimplemented!("no __new__ in this example")
//!     }
//! }
//!
//! // pickle.dumps([1, "a", collections.OrderedDict], 2)
//! let data = b"\x80\x02]q\x00(K\x01X\x01\x00\x00\x00aq\x01ccollections\nOrderedDict\nq\x02e.";
//! let p = unpickle(data, &mut Classes, &Limits::default())?;
//! let Node::List(items) = p.graph.get(p.root.as_node().unwrap()) else { panic!() };
//! assert_eq!(items[0], Value::Int(1));
//! assert_eq!(items[1].as_str(), Some("a"));
//! assert_eq!(items[2].as_ext().map(String::as_str), Some("collections.OrderedDict"));
//!
//! // The same pickle, not run.
//! let d = disassemble(data, &Limits::default());
//! assert_eq!(d.error, None);
//! assert_eq!(d.globals.len(), 1);
//! # Ok::<(), PickleError>(())
//! ```
//!
//! # Hostile input
//!
//! The unpickler never panics, never recurses on input, checks every declared
//! length against the remaining input before allocating, and enforces
//! [`Limits`] on memo size, stack size, node count and nesting depth. The
//! crate has no `unsafe` code.

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod compat;
pub mod disasm;
pub mod dump;
mod error;
mod limits;
pub mod opcode;
mod operand;
pub mod read;
mod scan;
mod source;
#[cfg(test)]
pub(crate) mod testkit;
pub mod value;
pub mod write;

pub use disasm::{disassemble, Disassembly, GlobalName};
pub use dump::{dumps, write_value, Layout, WriteHooks};
pub use error::PickleError;
pub use limits::{Limits, NODES_PER_BYTE};
pub use read::text::MAX_INT_DIGITS;
pub use read::{unpickle, unpickle_reader, Hooks, Pickled};
pub use value::{Graph, Node, NodeId, Value};
pub use write::{Pickler, WriteError, WriteResult};

/// The machine's hash maps and sets (memo, interned values, the scan's plan):
/// foldhash instead of std's SipHash, which cost a sixth of a large state
/// dict's load. The keys come from the file, so the hasher is seeded at
/// random per process (`RandomState`): a file cannot be crafted to collide.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`Map`].
pub(crate) type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

#[cfg(test)]
mod tests {
    use super::testkit::{load, render, unhex, FIXTURES};
    use super::*;

    #[test]
    fn reads_every_cpython_fixture() {
        for f in FIXTURES {
            let data = unhex(f.hex);
            let p = load(&data).unwrap_or_else(|e| panic!("{}: {e:?}", f.name));
            assert_eq!(render(&p.graph, &p.root), f.render, "{}", f.name);
            assert_eq!(
                p.protocol,
                if f.protocol >= 2 { f.protocol } else { 0 },
                "{}",
                f.name
            );
            assert_eq!(p.consumed, data.len(), "{}", f.name);
        }
    }

    #[test]
    fn fixtures_cover_every_opcode() {
        let mut seen = [false; 256];
        for f in FIXTURES {
            let data = unhex(f.hex);
            let mut pos = 0;
            // Walk the opcodes (arguments skipped by kind) to see which occur.
            while pos < data.len() {
                let code = data[pos];
                seen[usize::from(code)] = true;
                pos += 1 + arg_len(&data[pos..]);
            }
        }
        let missing: Vec<_> = opcode::ALL
            .iter()
            .filter(|o| !seen[usize::from(o.byte)])
            .map(|o| o.name)
            .collect();
        // These CPython 3 never writes for the fixtures' objects; read.rs tests
        // cover them with hand-made or separately generated pickles.
        let elsewhere = [
            "STRING",
            "BINSTRING",
            "SHORT_BINSTRING",
            "BINBYTES",
            "BINBYTES8",
            "BINUNICODE8",
            "NEXT_BUFFER",
            "READONLY_BUFFER",
            "DUP",
            "LONG_BINGET",
            "LONG_BINPUT",
            "EXT1",
            "EXT2",
            "EXT4",
            "INST",
            "OBJ",
            "NEWOBJ_EX",
            "DICT",
            "LIST",
        ];
        for m in &missing {
            assert!(elsewhere.contains(m), "{m} not covered");
        }
    }

    /// The argument length of the opcode at `data[0]`, as the opcode table
    /// lays it out.
    fn arg_len(data: &[u8]) -> usize {
        let mut input = operand::Input { data, pos: 1 };
        input
            .operand(opcode::info(data[0]).unwrap().arg, 0)
            .unwrap();
        input.pos - 1
    }

    #[test]
    fn writer_reproduces_cpython_protocol_2_byte_for_byte() {
        let mut checked = 0;
        for f in FIXTURES
            .iter()
            .filter(|f| f.protocol == 2 && !f.name.starts_with("objects"))
        {
            let data = unhex(f.hex);
            let p = load(&data).unwrap();
            let out = dumps(&p.graph, &p.root, |_, _| {
                unreachable!("no extension values")
            })
            .unwrap();
            assert_eq!(out, data, "{}", f.name);
            checked += 1;
        }
        assert_eq!(checked, 2);
    }

    #[test]
    fn errors_display_lowercase_with_offset() {
        let errors = [
            PickleError::UnknownOpcode {
                byte: 0xff,
                offset: 3,
            },
            PickleError::Truncated {
                offset: 3,
                needed: 8,
                available: 2,
            },
            PickleError::LimitExceeded {
                limit: "max_depth",
                value: 1001,
                max: 1000,
                offset: 3,
            },
            PickleError::WrongTarget {
                opcode: "APPEND",
                expected: "list",
                offset: 3,
            },
        ];
        for e in errors {
            let s = e.to_string();
            assert!(s.contains("offset 3"), "{s}");
            assert!(!s.contains('\n'));
            assert!(s.starts_with(|c: char| c.is_ascii_lowercase()), "{s}");
        }
        assert_eq!(
            PickleError::UnknownOpcode {
                byte: 0xff,
                offset: 3
            }
            .to_string(),
            "unknown opcode 0xff at offset 3"
        );
    }
}
