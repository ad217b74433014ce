//! Static disassembly: the globals a pickle names and the opcodes it uses,
//! found without running it.
//!
//! This is what `pickletools.dis` and PyTorch's `get_globals_in_pkl` do, with
//! one difference that matters for a scanner: the stack is followed, so a
//! `STACK_GLOBAL` whose module and name are string constants, pushed directly
//! or fetched from the memo (`BINGET`), is named as surely as a `GLOBAL`. Only
//! strings are tracked; every other value is "something". A `STACK_GLOBAL`
//! whose operands are not both string constants is reported as
//! [`GlobalName::Dynamic`], and an extension code (`EXT1`, `EXT2`, `EXT4`,
//! which names a global through `copyreg`'s registry) as
//! [`GlobalName::Extension`].
//!
//! The disassembler errs on the side of naming too much: where Python's
//! unpickler would stop with an error that is not about the stream's
//! structure (a stack underflow, a missing memo entry, a string that does not
//! decode), it goes on, so globals after that point are still listed. It stops
//! only where the stream cannot be walked: an unknown opcode, an argument past
//! the end, no `STOP`, an unsupported protocol, or one of the [`Limits`]
//! (memo entries, counted as the unpickler counts them: with
//! [`Limits::scan_memo`] only those read back; stack items and marks;
//! distinct globals as `max_nodes`).
//!
//! Memory is bounded by the input: strings are kept once each (shared between
//! stack and memo), and everything else is one word per stack item.

use std::rc::Rc;

use super::opcode::{self as op, OpInfo};
use super::operand::{index_line, Input, Operand};
use super::read::text::{escape_decode, raw_unicode_escape};
use super::scan::{memo_plan, memoize_index, MemoPlan};
use super::{Limits, Map, PickleError};

/// A global as a pickle names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GlobalName {
    /// `module.name`, as written (no Python 2 → 3 mapping; see
    /// [`compat::fix_import`](super::compat::fix_import)). Bytes that are not
    /// UTF-8 are replaced by U+FFFD.
    Static {
        /// The module.
        module: String,
        /// The name within it.
        name: String,
    },
    /// A `STACK_GLOBAL` whose module or name is not a string constant: what
    /// it names is only known by running the pickle.
    Dynamic,
    /// An extension code (`EXT1`/`EXT2`/`EXT4`): a global registered with
    /// `copyreg.add_extension` in the process that loads the pickle.
    Extension(i64),
}

/// What [`disassemble`] found in one pickle.
#[derive(Clone, Debug)]
pub struct Disassembly {
    /// The protocol its `PROTO` opcode declares (0 without one).
    pub protocol: u8,
    /// Bytes read: up to and including `STOP`, or up to where the walk
    /// stopped with [`error`](Self::error).
    pub consumed: usize,
    /// Each distinct global with the number of times it is named, in order of
    /// first appearance.
    pub globals: Vec<(GlobalName, u64)>,
    /// The offset of the opcode that first names each global of
    /// [`globals`](Self::globals), index for index.
    pub first_offsets: Vec<usize>,
    /// How many times each opcode occurs, indexed by its byte.
    counts: Box<[u64; 256]>,
    /// Why the walk stopped before `STOP`, if it did. The other fields hold
    /// what was found up to there.
    pub error: Option<PickleError>,
    /// Where the frames (`FRAME`, protocol 4 and later) first disagree with
    /// the opcodes, if they do: the offset of the opcode that runs past the
    /// end of its frame, or of a `FRAME` that starts before the current one
    /// ends. CPython's C unpickler reads across such a boundary and its
    /// Python unpickler refuses it, so two readers of one stream can see
    /// different opcodes; `pickle` itself never writes one.
    pub frame_mismatch: Option<usize>,
}

impl Disassembly {
    /// Each opcode that occurs, with its count, in opcode-table order.
    pub fn opcodes(&self) -> impl Iterator<Item = (&'static OpInfo, u64)> + '_ {
        op::ALL
            .iter()
            .map(|o| (o, self.counts[usize::from(o.byte)]))
            .filter(|(_, n)| *n > 0)
    }

    /// How many times the opcode `byte` occurs.
    pub fn count(&self, byte: u8) -> u64 {
        self.counts[usize::from(byte)]
    }
}

/// A stack item: a string constant, or anything else.
type Sym = Option<Rc<str>>;

/// The abstract machine's state.
struct Walk<'l> {
    stack: Vec<Sym>,
    marks: Vec<usize>,
    memo: Map<u64, Sym>,
    /// The memo entries the pickle reads back, when known
    /// ([`Limits::scan_memo`]): only those are stored, as the unpickler
    /// stores them, so both count the same entries against `max_memo`.
    plan: Option<MemoPlan>,
    /// `MEMOIZE`s walked: the next one's index when a plan is followed.
    memoized: u64,
    index: Map<GlobalName, usize>,
    out: Disassembly,
    limits: &'l Limits,
    at: usize,
    /// The end of the current frame, while one is being read.
    frame_end: Option<usize>,
}

impl Walk<'_> {
    fn limit(&self, limit: &'static str, value: usize, max: usize) -> Result<(), PickleError> {
        if value > max {
            return Err(PickleError::LimitExceeded {
                limit,
                value,
                max,
                offset: self.at,
            });
        }
        Ok(())
    }

    fn fence(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn push(&mut self, v: Sym) -> Result<(), PickleError> {
        self.limit("max_stack", self.stack.len() + 1, self.limits.max_stack)?;
        self.stack.push(v);
        Ok(())
    }

    /// The top item above the mark, or "something" where Python would underflow.
    fn pop(&mut self) -> Sym {
        if self.stack.len() > self.fence() {
            self.stack.pop().flatten()
        } else {
            None
        }
    }

    fn pop_n(&mut self, n: usize) {
        for _ in 0..n {
            self.pop();
        }
    }

    /// Drops the items above the topmost mark, and the mark (all of the stack
    /// when there is none, where Python would fail).
    fn pop_mark(&mut self) {
        let fence = self.marks.pop().unwrap_or(0);
        self.stack.truncate(fence);
    }

    fn top(&self) -> Sym {
        if self.stack.len() > self.fence() {
            self.stack.last().cloned().flatten()
        } else {
            None
        }
    }

    fn memo_put(&mut self, index: u64) -> Result<(), PickleError> {
        let v = self.top();
        if self.plan.as_ref().is_some_and(|p| !p.read.contains(&index)) {
            return Ok(());
        }
        if !self.memo.contains_key(&index) {
            self.limit("max_memo", self.memo.len() + 1, self.limits.max_memo)?;
        }
        self.memo.insert(index, v);
        Ok(())
    }

    fn name(&mut self, g: GlobalName) -> Result<(), PickleError> {
        if let Some(&i) = self.index.get(&g) {
            self.out.globals[i].1 += 1;
            return Ok(());
        }
        self.limit(
            "max_nodes",
            self.out.globals.len() + 1,
            self.limits.max_nodes,
        )?;
        self.index.insert(g.clone(), self.out.globals.len());
        self.out.globals.push((g, 1));
        self.out.first_offsets.push(self.at);
        Ok(())
    }

    /// Runs one opcode whose argument has been read.
    fn step(&mut self, code: u8, arg: Operand<'_>, input: &Input<'_>) -> Result<(), PickleError> {
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let text = |b: &[u8]| std::str::from_utf8(b).ok().map(Rc::from);
        match (code, arg) {
            (op::STRING, Operand::Line(line)) => {
                let s = match line {
                    [q, body @ .., q2] if q == q2 && (*q == b'\'' || *q == b'"') => {
                        escape_decode(body).and_then(|b| String::from_utf8(b).ok())
                    }
                    _ => None,
                };
                self.push(s.map(Rc::from))?;
            }
            (op::UNICODE, Operand::Line(line)) => {
                self.push(raw_unicode_escape(line).map(Rc::from))?;
            }
            (
                op::BINSTRING
                | op::SHORT_BINSTRING
                | op::SHORT_BINUNICODE
                | op::BINUNICODE
                | op::BINUNICODE8,
                Operand::Bytes(b),
            ) => self.push(text(b))?,
            (op::GLOBAL, Operand::Lines(module, name)) => {
                self.name(GlobalName::Static {
                    module: lossy(module),
                    name: lossy(name),
                })?;
                self.push(None)?;
            }
            (op::INST, Operand::Lines(module, name)) => {
                self.name(GlobalName::Static {
                    module: lossy(module),
                    name: lossy(name),
                })?;
                self.pop_mark();
                self.push(None)?;
            }
            (op::STACK_GLOBAL, _) => {
                let (name, module) = (self.pop(), self.pop());
                self.name(match (module, name) {
                    (Some(module), Some(name)) => GlobalName::Static {
                        module: module.to_string(),
                        name: name.to_string(),
                    },
                    _ => GlobalName::Dynamic,
                })?;
                self.push(None)?;
            }
            (op::EXT1 | op::EXT2, Operand::Uint(n)) => {
                self.name(GlobalName::Extension(n as i64))?;
                self.push(None)?;
            }
            (op::EXT4, Operand::Int(n)) => {
                self.name(GlobalName::Extension(n.into()))?;
                self.push(None)?;
            }
            (op::GET, Operand::Line(line)) => {
                let v = index_line(line).and_then(|i| self.memo.get(&i).cloned().flatten());
                self.push(v)?;
            }
            (op::BINGET | op::LONG_BINGET, Operand::Uint(i)) => {
                let v = self.memo.get(&i).cloned().flatten();
                self.push(v)?;
            }
            (op::PUT, Operand::Line(line)) => {
                if let Some(i) = index_line(line) {
                    self.memo_put(i)?;
                }
            }
            (op::BINPUT | op::LONG_BINPUT, Operand::Uint(i)) => self.memo_put(i)?,
            (op::MEMOIZE, _) => {
                let index = memoize_index(self.plan.as_ref(), self.memoized, self.memo.len());
                self.memo_put(index)?;
                self.memoized += 1;
            }
            (op::MARK, _) => {
                self.limit("max_stack", self.marks.len() + 1, self.limits.max_stack)?;
                self.marks.push(self.stack.len());
            }
            (op::POP, _) => {
                if self.stack.len() > self.fence() {
                    self.stack.pop();
                } else {
                    self.marks.pop();
                }
            }
            (op::POP_MARK | op::APPENDS | op::SETITEMS | op::ADDITEMS, _) => self.pop_mark(),
            (op::LIST | op::TUPLE | op::DICT | op::FROZENSET | op::OBJ, _) => {
                self.pop_mark();
                self.push(None)?;
            }
            (op::DUP, _) => self.push(self.top())?,
            (op::APPEND | op::BUILD, _) => self.pop_n(1),
            (op::SETITEM, _) => self.pop_n(2),
            (op::TUPLE1 | op::BINPERSID, _) => {
                self.pop_n(1);
                self.push(None)?;
            }
            (op::TUPLE2 | op::REDUCE | op::NEWOBJ, _) => {
                self.pop_n(2);
                self.push(None)?;
            }
            (op::TUPLE3 | op::NEWOBJ_EX, _) => {
                self.pop_n(3);
                self.push(None)?;
            }
            (op::PROTO, Operand::Uint(n)) => {
                let protocol = u8::try_from(n).unwrap_or(u8::MAX);
                if protocol > 5 {
                    return Err(PickleError::UnsupportedProtocol {
                        protocol,
                        offset: self.at,
                    });
                }
                self.out.protocol = protocol;
            }
            (op::FRAME, Operand::Uint(n)) => {
                input.check_len(n)?;
                if self.frame_end.is_some_and(|end| self.at < end) {
                    self.out.frame_mismatch.get_or_insert(self.at);
                }
                self.frame_end = Some(input.pos.saturating_add(n as usize));
            }
            (op::READONLY_BUFFER, _) => {}
            // Every other opcode pushes one value that is not a string.
            _ => self.push(None)?,
        }
        Ok(())
    }
}

/// Walks the pickle at the start of `data` to its `STOP` without running it,
/// and lists the globals it names and the opcodes it uses.
///
/// Never fails and never panics: a stream that cannot be walked to its end
/// gives what was found before the failure, with
/// [`Disassembly::error`] saying why.
pub fn disassemble(data: &[u8], limits: &Limits) -> Disassembly {
    let limits = &limits.for_stream(data.len());
    let mut walk = Walk {
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Map::default(),
        plan: if limits.scan_memo {
            memo_plan(&mut &data[..])
        } else {
            None
        },
        memoized: 0,
        index: Map::default(),
        out: Disassembly {
            protocol: 0,
            consumed: 0,
            globals: Vec::new(),
            first_offsets: Vec::new(),
            counts: Box::new([0; 256]),
            error: None,
            frame_mismatch: None,
        },
        limits,
        at: 0,
        frame_end: None,
    };
    let mut input = Input { data, pos: 0 };
    let error = loop {
        walk.at = input.pos;
        let Some(&code) = data.get(input.pos) else {
            break Some(PickleError::NoStop { offset: data.len() });
        };
        let Some(info) = op::info(code) else {
            break Some(PickleError::UnknownOpcode {
                byte: code,
                offset: input.pos,
            });
        };
        input.pos += 1;
        walk.out.counts[usize::from(code)] += 1;
        if code == op::STOP {
            break None;
        }
        let step = input
            .operand(info.arg, walk.at)
            .and_then(|arg| walk.step(code, arg, &input));
        if let Err(e) = step {
            break Some(e);
        }
        // An opcode must end within the frame it starts in (a frame's
        // opcodes fill it exactly); the next one after it is unframed.
        match walk.frame_end {
            Some(end) if code != op::FRAME && input.pos > end => {
                walk.out.frame_mismatch.get_or_insert(walk.at);
                walk.frame_end = None;
            }
            Some(end) if input.pos == end => walk.frame_end = None,
            _ => {}
        }
    };
    walk.out.consumed = if error.is_some() { walk.at } else { input.pos };
    walk.out.error = error;
    walk.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Graph, Value};

    fn names(data: &[u8]) -> Vec<(String, u64)> {
        agrees_with_the_machine(data);
        let d = disassemble(data, &Limits::default());
        assert_eq!(d.error, None);
        d.globals
            .into_iter()
            .map(|(g, n)| {
                let s = match g {
                    GlobalName::Static { module, name } => format!("{module}.{name}"),
                    GlobalName::Dynamic => "?".into(),
                    GlobalName::Extension(c) => format!("ext{c}"),
                };
                (s, n)
            })
            .collect()
    }

    #[test]
    fn global_inst_and_counts() {
        // GLOBAL os.system twice (the second through INST), REDUCE.
        let data = b"cos\nsystem\n(S'ls'\ntR(S'x'\nios\nsystem\n.";
        assert_eq!(names(data), vec![("os.system".into(), 2)]);
        let d = disassemble(data, &Limits::default());
        assert_eq!(d.count(op::REDUCE), 1);
        assert_eq!(d.count(op::INST), 1);
        assert_eq!(d.consumed, data.len());
        assert_eq!(d.protocol, 0);
    }

    #[test]
    fn stack_global_from_constants_and_memo() {
        // PROTO 4, 'builtins' BINPUT 0, 'eval' BINPUT 1, POP POP,
        // BINGET 0 BINGET 1 STACK_GLOBAL.
        let data = b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x9400h\x00h\x01\x93.";
        assert_eq!(names(data), vec![("builtins.eval".into(), 1)]);
        // The same with MEMOIZE, and with text strings.
        let data = b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x9400g0\ng1\n\x93.";
        assert_eq!(names(data), vec![("builtins.eval".into(), 1)]);
        let data = b"\x80\x04Vos\nS'system'\n\x93.";
        assert_eq!(names(data), vec![("os.system".into(), 1)]);
        // The machine reads each of these, and looks up what is named.
        for data in [
            &b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x9400h\x00h\x01\x93."[..],
            b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x9400g0\ng1\n\x93.",
            data,
        ] {
            assert!(agrees_with_the_machine(data));
        }
    }

    #[test]
    fn frames_that_disagree_with_the_opcodes_are_found() {
        // PROTO 4, FRAME 6: BININT1 1, BININT1 2, TUPLE2, STOP, as pickle
        // writes it (pickle.dumps((1, 2), protocol=4)).
        let framed = |len: u8| {
            let mut d = b"\x80\x04\x95".to_vec();
            d.extend_from_slice(&[len, 0, 0, 0, 0, 0, 0, 0]);
            d.extend_from_slice(b"K\x01K\x02\x86.");
            d
        };
        let ok = disassemble(&framed(6), &Limits::default());
        assert_eq!((ok.error, ok.frame_mismatch), (None, None));
        // A frame of 3 bytes ends inside the second BININT1 (offset 13).
        let d = disassemble(&framed(3), &Limits::default());
        assert_eq!((d.error, d.frame_mismatch), (None, Some(13)));
        // A string whose bytes run past the frame: the Python unpickler
        // refuses it, the C one reads on.
        let mut d = b"\x80\x04\x95\x04\x00\x00\x00\x00\x00\x00\x00".to_vec();
        d.extend_from_slice(b"\x8c\x09os system\x94.");
        assert_eq!(disassemble(&d, &Limits::default()).frame_mismatch, Some(11));
        // A second FRAME before the first one ends.
        let mut d = b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00".to_vec();
        d.extend_from_slice(b"\x95\x01\x00\x00\x00\x00\x00\x00\x00N.");
        assert_eq!(disassemble(&d, &Limits::default()).frame_mismatch, Some(11));
        // Frames back to back, and an unframed opcode after the last one.
        let mut d = b"\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00K\x01".to_vec();
        d.extend_from_slice(b"\x95\x02\x00\x00\x00\x00\x00\x00\x00K\x02\x86.");
        let d = disassemble(&d, &Limits::default());
        assert_eq!((d.error, d.frame_mismatch), (None, None));
    }

    #[test]
    fn dynamic_and_extension_globals() {
        // STACK_GLOBAL over an int and the result of a call.
        let data = b"\x80\x04K\x01\x8c\x01x\x93cm\nf\n)R\x8c\x01y\x93\x82\x05.";
        assert_eq!(
            names(data),
            vec![("?".into(), 2), ("m.f".into(), 1), ("ext5".into(), 1)]
        );
        // Each where it is first named: the first STACK_GLOBAL, GLOBAL, EXT1.
        let d = disassemble(data, &Limits::default());
        assert_eq!(d.first_offsets, [7, 8, 19]);
    }

    #[test]
    fn marks_and_containers_keep_the_stack_in_step() {
        // 'a' 'b' inside a list, then STACK_GLOBAL of the two strings below it.
        let data = b"\x80\x02X\x01\x00\x00\x00mX\x01\x00\x00\x00n(K\x01K\x02l0\x93.";
        assert_eq!(names(data), vec![("m.n".into(), 1)]);
        // DUP and TUPLE2 on strings.
        let data = b"\x8c\x01m2\x86\x8c\x01m\x8c\x01n\x93.";
        assert_eq!(names(data), vec![("m.n".into(), 1)]);
        assert!(agrees_with_the_machine(data));
    }

    #[test]
    fn stops_where_the_stream_cannot_be_walked() {
        let d = disassemble(b"cos\nsystem\n\xff", &Limits::default());
        assert_eq!(
            d.error,
            Some(PickleError::UnknownOpcode {
                byte: 0xff,
                offset: 11
            })
        );
        assert_eq!(d.globals.len(), 1, "what came before is kept");
        assert_eq!(d.consumed, 11);
        let d = disassemble(b"cos\nsystem\n", &Limits::default());
        assert_eq!(d.error, Some(PickleError::NoStop { offset: 11 }));
        let d = disassemble(b"X\xff\x00\x00\x00ab.", &Limits::default());
        assert!(matches!(d.error, Some(PickleError::Truncated { .. })));
        let d = disassemble(b"\x80\x06.", &Limits::default());
        assert!(matches!(
            d.error,
            Some(PickleError::UnsupportedProtocol { protocol: 6, .. })
        ));
    }

    #[test]
    fn underflow_is_not_fatal() {
        // REDUCE on an empty stack, then a global: still listed.
        assert_eq!(names(b"R0cm\nf\n."), vec![("m.f".into(), 1)]);
    }

    #[test]
    fn limits_hold() {
        let limits = Limits {
            max_stack: 2,
            scale: false,
            ..Limits::default()
        };
        let d = disassemble(b"NNN.", &limits);
        assert!(matches!(
            d.error,
            Some(PickleError::LimitExceeded {
                limit: "max_stack",
                ..
            })
        ));
        // Memo entries count as the unpickler counts them: with `scan_memo`
        // (the default) only those read back, so a pickle that memoizes
        // each of a million tensors' tuples and reads few back is walked
        // whole, as it is loaded; without it, every entry.
        let max_memo = |n, scan_memo| Limits {
            max_memo: n,
            scan_memo,
            scale: false,
            ..Limits::default()
        };
        let memo_exceeded = |d: Disassembly| {
            matches!(
                d.error,
                Some(PickleError::LimitExceeded {
                    limit: "max_memo",
                    ..
                })
            )
        };
        let unread = b"Nq\x00q\x00q\x01q\x02.";
        assert!(memo_exceeded(disassemble(unread, &max_memo(1, false))));
        assert_eq!(disassemble(unread, &max_memo(1, true)).error, None);
        let read_back = b"Nq\x00q\x01h\x00h\x01.";
        assert!(memo_exceeded(disassemble(read_back, &max_memo(1, true))));
        assert_eq!(disassemble(read_back, &max_memo(2, true)).error, None);
        // MEMOIZE numbers entries by count, also when unread ones are skipped:
        // the string memoized second is fetched by `h\x01` and names the global.
        let memoized = b"\x80\x04N\x94\x8c\x01m\x94\x8c\x01f\x94h\x01h\x02\x93.";
        let d = disassemble(memoized, &max_memo(2, true));
        assert_eq!(d.error, None);
        let named = GlobalName::Static {
            module: "m".into(),
            name: "f".into(),
        };
        assert_eq!(d.globals, vec![(named, 1)]);
    }

    /// Every CPython fixture walks to its end, and the globals match what
    /// the machine's `find_class` is asked for.
    #[test]
    fn every_cpython_fixture_walks_to_stop() {
        use super::super::testkit::{unhex, FIXTURES};
        for f in FIXTURES {
            let data = unhex(f.hex);
            let d = disassemble(&data, &Limits::default());
            assert_eq!(d.error, None, "{}", f.name);
            assert_eq!(d.consumed, data.len(), "{}", f.name);
        }
    }

    proptest::proptest! {
        /// Any bytes: no panic, and `consumed` within the input.
        #[test]
        fn never_panics(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let d = disassemble(&data, &Limits::default());
            proptest::prop_assert!(d.consumed <= data.len());
        }
    }

    /// Hooks that accept everything (`BUILD` keeps its object) and record
    /// the classes looked up, as the `pickle_disasm` fuzz target's.
    #[derive(Default)]
    struct Record(Vec<(String, String)>);

    impl crate::Hooks for Record {
        type Ext = u8;
        type Error = PickleError;

        fn find_class(&mut self, module: &str, name: &str) -> Result<Value<u8>, PickleError> {
            self.0.push((module.to_owned(), name.to_owned()));
            Ok(Value::Ext(0))
        }
        fn persistent_load(
            &mut self,
            _: &mut Graph<u8>,
            _: Value<u8>,
        ) -> Result<Value<u8>, PickleError> {
            Ok(Value::Ext(1))
        }
        fn reduce(
            &mut self,
            _: &mut Graph<u8>,
            _: Value<u8>,
            _: Value<u8>,
        ) -> Result<Value<u8>, PickleError> {
            Ok(Value::Ext(2))
        }
        fn build(
            &mut self,
            _: &mut Graph<u8>,
            obj: Value<u8>,
            _: Value<u8>,
        ) -> Result<Value<u8>, PickleError> {
            Ok(obj)
        }
        fn new_obj(
            &mut self,
            _: &mut Graph<u8>,
            _: Value<u8>,
            _: Value<u8>,
        ) -> Result<Value<u8>, PickleError> {
            Ok(Value::Ext(3))
        }
    }

    /// The invariants of the `pickle_disasm` fuzz target (see there): with
    /// its limits lifted the disassembler stops only on structure; where the
    /// machine reads a pickle, the disassembler walks it to the same end and
    /// names exactly the classes the machine looked up; where the machine
    /// fails on structure, the disassembler fails the same way. Returns
    /// whether the machine read it.
    fn agrees_with_the_machine(data: &[u8]) -> bool {
        let structural = |e: &PickleError| {
            matches!(
                e,
                PickleError::UnknownOpcode { .. }
                    | PickleError::Truncated { .. }
                    | PickleError::UnterminatedLine { .. }
                    | PickleError::NoStop { .. }
                    | PickleError::UnsupportedProtocol { .. }
                    | PickleError::BadText {
                        what: "negative length",
                        ..
                    }
            )
        };
        let lifted = Limits {
            max_memo: usize::MAX,
            max_stack: usize::MAX,
            max_nodes: usize::MAX,
            ..Limits::default()
        };
        let d = disassemble(data, &lifted);
        assert!(d.consumed <= data.len());
        if let Some(e) = &d.error {
            assert!(structural(e), "{e:?}");
        }
        let mut hooks = Record::default();
        match crate::unpickle(data, &mut hooks, &Limits::default()) {
            Ok(p) => {
                assert_eq!(d.error, None);
                assert_eq!((d.consumed, d.protocol), (p.consumed, p.protocol));
                assert_eq!(d.count(op::STOP), 1);
                let mut looked_up: Vec<(GlobalName, u64)> = Vec::new();
                for (module, name) in hooks.0 {
                    let g = GlobalName::Static { module, name };
                    match looked_up.iter_mut().find(|(h, _)| *h == g) {
                        Some((_, n)) => *n += 1,
                        None => looked_up.push((g, 1)),
                    }
                }
                assert_eq!(d.globals, looked_up);
                true
            }
            Err(e) => {
                if structural(&e) {
                    assert_eq!(d.error, Some(e));
                }
                false
            }
        }
    }

    #[test]
    fn every_cpython_fixture_agrees_with_the_machine() {
        use super::super::testkit::{unhex, FIXTURES};
        for f in FIXTURES {
            let read = agrees_with_the_machine(&unhex(f.hex));
            // The `objects` fixtures set items on an object that these hooks
            // leave opaque (an `OrderedDict` made by `REDUCE`), which the
            // machine refuses.
            assert_eq!(read, !f.name.starts_with("objects"), "{}", f.name);
        }
    }

    /// Opcodes with their arguments, for streams the machine often reads:
    /// strings into and out of the memo, globals of every kind, containers,
    /// calls, marks.
    const PIECES: &[&[u8]] = &[
        b"\x8c\x01m",
        b"\x8c\x01n",
        b"X\x01\x00\x00\x00m",
        b"U\x01n",
        b"S'm'\n",
        b"Vn\n",
        b"\x94",
        b"q\x00",
        b"q\x01",
        b"p1\n",
        b"h\x00",
        b"h\x01",
        b"g1\n",
        b"0",
        b"1",
        b"2",
        b"(",
        b"\x93",
        b"cm\nf\n",
        b"im\nf\n",
        b"o",
        b")",
        b"R",
        b"b",
        b"\x81",
        b"N",
        b"K\x01",
        b"\x85",
        b"\x86",
        b"\x87",
        b"t",
        b"]",
        b"l",
        b"a",
        b"e",
        b"}",
        b"d",
        b"s",
        b"u",
        b"\x8f",
        b"\x90",
        b"\x91",
        b"Q",
        b"Pp\n",
        b"\x80\x02",
        b"\x80\x04",
        b"\x82\x05",
        b"\x95\x00\x00\x00\x00\x00\x00\x00\x00",
        b".",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        /// Streams of whole opcodes, ending in `STOP`.
        #[test]
        fn opcode_streams_agree_with_the_machine(
            picks in proptest::collection::vec(0..PIECES.len(), 0..24),
        ) {
            let mut data: Vec<u8> = picks.iter().flat_map(|&i| PIECES[i].iter().copied()).collect();
            data.push(op::STOP);
            agrees_with_the_machine(&data);
        }

        /// CPython's fixtures with one byte changed, inserted or cut off.
        #[test]
        fn mutated_fixtures_agree_with_the_machine(
            which in 0..super::super::testkit::FIXTURES.len(),
            at in proptest::prelude::any::<proptest::sample::Index>(),
            byte in proptest::prelude::any::<u8>(),
            how in 0..3u8,
        ) {
            let f = &super::super::testkit::FIXTURES[which];
            let mut data = super::super::testkit::unhex(f.hex);
            let i = at.index(data.len());
            match how {
                0 => data[i] = byte,
                1 => data.insert(i, byte),
                _ => data.truncate(i),
            }
            agrees_with_the_machine(&data);
        }
    }
}
