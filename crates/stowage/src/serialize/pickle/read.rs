//! The unpickler: an iterative stack machine for protocols 0–5.
//!
//! Everything that would run Python code goes through the caller's [`Hooks`].
//! The machine itself only builds [`Graph`] nodes for the built-in
//! containers. Text opcodes follow CPython 3 with `encoding="utf-8"` (as
//! `torch.load` passes): Python 2 `str` (`STRING`, `BINSTRING`,
//! `SHORT_BINSTRING`) becomes [`Value::Str`] when it is valid UTF-8 and
//! [`Value::Bytes`] otherwise. Class names reach [`Hooks::find_class`] as
//! written, without Python 2 → 3 name mapping. Integer lines (`INT`, `LONG`)
//! are decimal, at most 4300 digits like CPython's default limit.
//!
//! Dict keys and set items are compared as Python would for scalars
//! (`1 == 1.0 == True`, strings by content), and by identity for containers
//! and extension values; tuples are therefore not compared by content, nor
//! are strings inside nodes a hook prefilled.

use std::collections::HashMap;

use num_bigint::BigInt;

use super::opcode as op;
use super::scan::MemoPlan;
use super::value::{Graph, Interner, Key, Node, NodeId, Value};
use super::{Limits, PickleError};

/// The caller's side of unpickling: everything that would run Python code.
pub trait Hooks {
    /// The caller's extension object type (classes, tensors, ...).
    type Ext: Clone + std::fmt::Debug;
    /// The caller's error type; machine errors convert into it.
    type Error: From<PickleError>;

    /// `GLOBAL` / `STACK_GLOBAL` / `INST` / `OBJ` class lookup. Refusal is the
    /// hook's business (it returns an error naming `module.name`).
    fn find_class(&mut self, module: &str, name: &str) -> Result<Value<Self::Ext>, Self::Error>;

    /// `PERSID` / `BINPERSID`: the object for persistent id `pid` (a `Str`
    /// for `PERSID`, any value for `BINPERSID`).
    fn persistent_load(
        &mut self,
        graph: &mut Graph<Self::Ext>,
        pid: Value<Self::Ext>,
    ) -> Result<Value<Self::Ext>, Self::Error>;

    /// `REDUCE` (and `INST`/`OBJ` instantiation): `callable(*args)`; `args`
    /// is a `Value::Node` of a `Tuple`.
    fn reduce(
        &mut self,
        graph: &mut Graph<Self::Ext>,
        callable: Value<Self::Ext>,
        args: Value<Self::Ext>,
    ) -> Result<Value<Self::Ext>, Self::Error>;

    /// `BUILD`: returns the object that replaces `obj` on the stack (usually
    /// `obj` itself). Memo entries already holding `obj` are not replaced, so
    /// an object that may be shared should be a node mutated in place.
    fn build(
        &mut self,
        graph: &mut Graph<Self::Ext>,
        obj: Value<Self::Ext>,
        state: Value<Self::Ext>,
    ) -> Result<Value<Self::Ext>, Self::Error>;

    /// `NEWOBJ` / `NEWOBJ_EX`: `cls.__new__(cls, *args)`; `args` is a
    /// `Value::Node` of a `Tuple`. (`NEWOBJ_EX` with keyword arguments is
    /// refused as [`PickleError::Unsupported`].)
    fn new_obj(
        &mut self,
        graph: &mut Graph<Self::Ext>,
        cls: Value<Self::Ext>,
        args: Value<Self::Ext>,
    ) -> Result<Value<Self::Ext>, Self::Error>;
}

/// The result of [`unpickle`].
#[derive(Clone, Debug, PartialEq)]
pub struct Pickled<X> {
    /// Every container node built.
    pub graph: Graph<X>,
    /// The pickled object.
    pub root: Value<X>,
    /// The protocol named by the last `PROTO` opcode, 0 if there was none.
    pub protocol: u8,
    /// Bytes read up to and including `STOP`; a following pickle starts here.
    pub consumed: usize,
}

/// Reads one pickle from the start of `data`, stopping at its `STOP` opcode.
pub fn unpickle<H: Hooks>(
    data: &[u8],
    hooks: &mut H,
    limits: &Limits,
) -> Result<Pickled<H::Ext>, H::Error> {
    Machine {
        data,
        pos: 0,
        at: 0,
        op: "?",
        limits,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        plan: if limits.scan_memo {
            super::scan::memo_plan(data)
        } else {
            None
        },
        memoized: 0,
        graph: Graph::new(),
        protocol: 0,
        keys: HashMap::new(),
        interner: Interner::default(),
    }
    .run(hooks)
}

/// Python's default limit on decimal digits in `int(str)`.
const MAX_INT_DIGITS: usize = 4300;

struct Machine<'a, X> {
    data: &'a [u8],
    /// Read position.
    pos: usize,
    /// Offset of the opcode being executed.
    at: usize,
    /// Name of the opcode being executed.
    op: &'static str,
    limits: &'a Limits,
    stack: Vec<Value<X>>,
    /// Stack lengths at each `MARK`.
    marks: Vec<usize>,
    memo: HashMap<u64, Value<X>>,
    /// The memo entries the stream reads (`scan.rs`); only those are stored.
    /// `None` stores every entry.
    plan: Option<MemoPlan>,
    /// `MEMOIZE`s executed: the next one's index when a plan is followed
    /// (the plan excludes `PUT`s, so every entry so far came from one).
    memoized: u64,
    graph: Graph<X>,
    protocol: u8,
    /// Key → position indexes of dicts and sets, for replace/dedup.
    keys: HashMap<NodeId, KeyIndex>,
    /// Every string, bytes and big int pushed goes through it, so keys are cheap.
    interner: Interner,
}

impl<'a, X: Clone + std::fmt::Debug> Machine<'a, X> {
    fn run<H: Hooks<Ext = X>>(mut self, hooks: &mut H) -> Result<Pickled<X>, H::Error> {
        loop {
            self.at = self.pos;
            let Some(&code) = self.data.get(self.pos) else {
                return Err(PickleError::NoStop { offset: self.pos }.into());
            };
            self.pos += 1;
            self.op = op::name(code);
            if code == op::STOP {
                let root = self.pop()?;
                return Ok(Pickled {
                    graph: self.graph,
                    root,
                    protocol: self.protocol,
                    consumed: self.pos,
                });
            }
            self.step(code, hooks)?;
        }
    }

    fn step<H: Hooks<Ext = X>>(&mut self, code: u8, hooks: &mut H) -> Result<(), H::Error> {
        let v = match code {
            op::MARK => {
                self.limit("max_stack", self.marks.len() + 1, self.limits.max_stack)?;
                self.marks.push(self.stack.len());
                return Ok(());
            }
            op::POP => {
                if self.stack.len() > self.fence() {
                    self.stack.pop();
                } else if self.marks.pop().is_none() {
                    return Err(self.underflow().into());
                }
                return Ok(());
            }
            op::POP_MARK => {
                self.pop_mark()?;
                return Ok(());
            }
            op::DUP => {
                let v = self.top()?.clone();
                self.graph.mark_shared(&v);
                v
            }
            op::NONE => Value::None,
            op::NEWTRUE => Value::Bool(true),
            op::NEWFALSE => Value::Bool(false),
            op::INT => match self.line()? {
                b"00" => Value::Bool(false),
                b"01" => Value::Bool(true),
                line => parse_int(line).ok_or(self.bad("int"))?,
            },
            op::LONG => {
                let line = self.line()?;
                let line = line.strip_suffix(b"L").unwrap_or(line);
                parse_int(line).ok_or(self.bad("long"))?
            }
            op::BININT => Value::Int(i32::from_le_bytes(self.array()?).into()),
            op::BININT1 => Value::Int(self.byte()?.into()),
            op::BININT2 => Value::Int(u16::from_le_bytes(self.array()?).into()),
            op::LONG1 => {
                let n = self.byte()?;
                Value::int(BigInt::from_signed_bytes_le(self.take(n.into())?))
            }
            op::LONG4 => {
                let n = self.signed_len()?;
                Value::int(BigInt::from_signed_bytes_le(self.take(n)?))
            }
            op::FLOAT => {
                let line = self.line()?;
                let text = std::str::from_utf8(line).map_err(|_| self.bad("float"))?;
                Value::Float(text.trim().parse().map_err(|_| self.bad("float"))?)
            }
            op::BINFLOAT => Value::Float(f64::from_be_bytes(self.array()?)),
            op::STRING => {
                let line = self.line()?;
                let body = match line {
                    [q, body @ .., q2] if q == q2 && (*q == b'\'' || *q == b'"') => body,
                    _ => return Err(self.bad("string quotes").into()),
                };
                py2_str(escape_decode(body).ok_or(self.bad("string escape"))?)
            }
            op::BINSTRING => {
                let n = self.signed_len()?;
                py2_str(self.take(n)?.to_vec())
            }
            op::SHORT_BINSTRING => {
                let n = self.byte()?;
                py2_str(self.take(n.into())?.to_vec())
            }
            op::UNICODE => {
                let line = self.line()?;
                Value::Str(
                    raw_unicode_escape(line)
                        .ok_or(self.bad("unicode escape"))?
                        .into(),
                )
            }
            op::SHORT_BINUNICODE => {
                let n = self.byte()?;
                self.utf8(n.into())?
            }
            op::BINUNICODE => {
                let n = u32::from_le_bytes(self.array()?);
                self.utf8(n.into())?
            }
            op::BINUNICODE8 => {
                let n = u64::from_le_bytes(self.array()?);
                self.utf8(n)?
            }
            op::SHORT_BINBYTES => {
                let n = self.byte()?;
                Value::Bytes(self.take(n.into())?.into())
            }
            op::BINBYTES => {
                let n = u32::from_le_bytes(self.array()?);
                Value::Bytes(self.take(n.into())?.into())
            }
            op::BINBYTES8 => {
                let n = u64::from_le_bytes(self.array()?);
                Value::Bytes(self.take(n)?.into())
            }
            op::BYTEARRAY8 => {
                let n = u64::from_le_bytes(self.array()?);
                let bytes = self.take(n)?.to_vec();
                self.node(Node::ByteArray(bytes))?
            }
            op::EMPTY_LIST => self.node(Node::List(Vec::new()))?,
            op::LIST => {
                let items = self.pop_mark()?;
                self.node(Node::List(items))?
            }
            op::APPEND => {
                let item = self.pop()?;
                let target = self.top()?.clone();
                self.extend(&target, vec![item])?;
                return Ok(());
            }
            op::APPENDS => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.extend(&target, items)?;
                return Ok(());
            }
            op::EMPTY_TUPLE => self.node(Node::Tuple(Vec::new()))?,
            op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                let n = usize::from(code - op::TUPLE1) + 1;
                let items = self.pop_n(n)?;
                self.node(Node::Tuple(items))?
            }
            op::TUPLE => {
                let items = self.pop_mark()?;
                self.node(Node::Tuple(items))?
            }
            op::EMPTY_DICT => self.node(Node::Dict(Vec::new()))?,
            op::DICT => {
                let items = self.pop_mark()?;
                let dict = self.node(Node::Dict(Vec::new()))?;
                self.insert(&dict, items, "dict")?;
                dict
            }
            op::SETITEM => {
                let value = self.pop()?;
                let key = self.pop()?;
                let target = self.top()?.clone();
                self.insert(&target, vec![key, value], "dict")?;
                return Ok(());
            }
            op::SETITEMS => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.insert(&target, items, "dict")?;
                return Ok(());
            }
            op::EMPTY_SET => self.node(Node::Set(Vec::new()))?,
            op::ADDITEMS => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.insert(&target, items, "set")?;
                return Ok(());
            }
            op::FROZENSET => {
                let items = self.pop_mark()?;
                let mut seen = std::collections::HashSet::new();
                let items = items
                    .into_iter()
                    .filter(|v| Key::of(v).map_or(true, |k| seen.insert(k)))
                    .collect();
                self.node(Node::FrozenSet(items))?
            }
            op::GET => {
                let index = self.index_line()?;
                self.memo_get(index)?
            }
            op::BINGET => {
                let index = self.byte()?;
                self.memo_get(index.into())?
            }
            op::LONG_BINGET => {
                let index = u32::from_le_bytes(self.array()?);
                self.memo_get(index.into())?
            }
            op::PUT => {
                let index = self.index_line()?;
                self.memo_put(index)?;
                return Ok(());
            }
            op::BINPUT => {
                let index = self.byte()?;
                self.memo_put(index.into())?;
                return Ok(());
            }
            op::LONG_BINPUT => {
                let index = u32::from_le_bytes(self.array()?);
                self.memo_put(index.into())?;
                return Ok(());
            }
            op::MEMOIZE => {
                let index = match self.plan {
                    Some(_) => self.memoized,
                    None => self.memo.len() as u64,
                };
                self.memo_put(index)?;
                self.memoized += 1;
                return Ok(());
            }
            op::GLOBAL => {
                let (module, name) = (self.line()?, self.line()?);
                let module = std::str::from_utf8(module).map_err(|_| self.bad("utf-8"))?;
                let name = std::str::from_utf8(name).map_err(|_| self.bad("utf-8"))?;
                hooks.find_class(module, name)?
            }
            op::STACK_GLOBAL => {
                let (name, module) = (self.pop()?, self.pop()?);
                match (module.as_str(), name.as_str()) {
                    (Some(module), Some(name)) => hooks.find_class(module, name)?,
                    _ => return Err(self.wrong_operand("str").into()),
                }
            }
            op::REDUCE => {
                let args = self.pop_tuple()?;
                let callable = self.pop()?;
                hooks.reduce(&mut self.graph, callable, args)?
            }
            op::BUILD => {
                let state = self.pop()?;
                let obj = self.pop()?;
                hooks.build(&mut self.graph, obj, state)?
            }
            op::INST => {
                let (module, name) = (self.line()?, self.line()?);
                let module = std::str::from_utf8(module).map_err(|_| self.bad("utf-8"))?;
                let name = std::str::from_utf8(name).map_err(|_| self.bad("utf-8"))?;
                let items = self.pop_mark()?;
                let cls = hooks.find_class(module, name)?;
                let args = self.node(Node::Tuple(items))?;
                hooks.reduce(&mut self.graph, cls, args)?
            }
            op::OBJ => {
                let mut items = self.pop_mark()?.into_iter();
                let cls = items.next().ok_or(self.underflow())?;
                let args = self.node(Node::Tuple(items.collect()))?;
                hooks.reduce(&mut self.graph, cls, args)?
            }
            op::NEWOBJ => {
                let args = self.pop_tuple()?;
                let cls = self.pop()?;
                hooks.new_obj(&mut self.graph, cls, args)?
            }
            op::NEWOBJ_EX => {
                let kwargs = self.pop()?;
                let args = self.pop_tuple()?;
                let cls = self.pop()?;
                match kwargs.as_node().and_then(|id| self.graph.try_get(id)) {
                    Some(Node::Dict(d)) if d.is_empty() => {}
                    Some(Node::Dict(_)) => return Err(self.unsupported().into()),
                    _ => return Err(self.wrong_operand("dict").into()),
                }
                hooks.new_obj(&mut self.graph, cls, args)?
            }
            op::PERSID => {
                let line = self.line()?;
                if !line.is_ascii() {
                    return Err(self.bad("persistent id").into());
                }
                let pid = Value::Str(String::from_utf8_lossy(line).into());
                hooks.persistent_load(&mut self.graph, pid)?
            }
            op::BINPERSID => {
                let pid = self.pop()?;
                hooks.persistent_load(&mut self.graph, pid)?
            }
            op::PROTO => {
                let protocol = self.byte()?;
                if protocol > 5 {
                    let offset = self.at;
                    return Err(PickleError::UnsupportedProtocol { protocol, offset }.into());
                }
                self.protocol = protocol;
                return Ok(());
            }
            op::FRAME => {
                // Frames only group opcodes for buffered reading; the whole
                // input is in memory, so just check the frame is there.
                let n = u64::from_le_bytes(self.array()?);
                self.check_len(n)?;
                return Ok(());
            }
            op::EXT1 | op::EXT2 | op::EXT4 | op::NEXT_BUFFER | op::READONLY_BUFFER => {
                return Err(self.unsupported().into())
            }
            byte => {
                let offset = self.at;
                return Err(PickleError::UnknownOpcode { byte, offset }.into());
            }
        };
        // Values from hooks may be new nodes: check them like our own.
        let v = self.checked(v)?;
        let v = self.interner.intern(v);
        self.push(v)?;
        Ok(())
    }

    // ---- errors ----

    fn underflow(&self) -> PickleError {
        PickleError::StackUnderflow {
            opcode: self.op,
            offset: self.at,
        }
    }

    fn bad(&self, what: &'static str) -> PickleError {
        PickleError::BadText {
            what,
            offset: self.at,
        }
    }

    fn wrong_operand(&self, expected: &'static str) -> PickleError {
        PickleError::WrongOperand {
            opcode: self.op,
            expected,
            offset: self.at,
        }
    }

    fn unsupported(&self) -> PickleError {
        PickleError::Unsupported {
            opcode: self.op,
            offset: self.at,
        }
    }

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

    // ---- input ----

    fn check_len(&self, n: u64) -> Result<usize, PickleError> {
        let available = self.data.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= available => Ok(n),
            _ => Err(PickleError::Truncated {
                offset: self.pos,
                needed: n,
                available,
            }),
        }
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], PickleError> {
        let n = self.check_len(n)?;
        let data: &'a [u8] = self.data;
        let bytes = &data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N as u64)?);
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8, PickleError> {
        Ok(self.array::<1>()?[0])
    }

    /// A 4-byte signed length (`BINSTRING`, `LONG4`); negative is malformed.
    fn signed_len(&mut self) -> Result<u64, PickleError> {
        let n = i32::from_le_bytes(self.array()?);
        u64::try_from(n).map_err(|_| self.bad("negative length"))
    }

    /// A line without its `\n`.
    fn line(&mut self) -> Result<&'a [u8], PickleError> {
        let data: &'a [u8] = self.data;
        let rest = &data[self.pos..];
        let n = rest.iter().position(|&b| b == b'\n');
        let n = n.ok_or(PickleError::UnterminatedLine { offset: self.pos })?;
        self.pos += n + 1;
        Ok(&rest[..n])
    }

    fn index_line(&mut self) -> Result<u64, PickleError> {
        let line = self.line()?;
        let text = std::str::from_utf8(line).map_err(|_| self.bad("memo index"))?;
        text.trim().parse().map_err(|_| self.bad("memo index"))
    }

    fn utf8(&mut self, n: u64) -> Result<Value<X>, PickleError> {
        let bytes = self.take(n)?;
        let s = std::str::from_utf8(bytes).map_err(|_| self.bad("utf-8"))?;
        Ok(Value::Str(s.into()))
    }

    // ---- stack ----

    fn fence(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn push(&mut self, v: Value<X>) -> Result<(), PickleError> {
        self.limit("max_stack", self.stack.len() + 1, self.limits.max_stack)?;
        self.stack.push(v);
        Ok(())
    }

    fn pop(&mut self) -> Result<Value<X>, PickleError> {
        if self.stack.len() <= self.fence() {
            return Err(self.underflow());
        }
        self.stack.pop().ok_or(self.underflow())
    }

    fn top(&self) -> Result<&Value<X>, PickleError> {
        if self.stack.len() <= self.fence() {
            return Err(self.underflow());
        }
        self.stack.last().ok_or(self.underflow())
    }

    fn pop_n(&mut self, n: usize) -> Result<Vec<Value<X>>, PickleError> {
        if self.stack.len() < self.fence() + n {
            return Err(self.underflow());
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    /// Pops the topmost mark and returns the items above it.
    fn pop_mark(&mut self) -> Result<Vec<Value<X>>, PickleError> {
        let mark = self.marks.pop();
        let mark = mark.ok_or(PickleError::NoMark {
            opcode: self.op,
            offset: self.at,
        })?;
        Ok(self.stack.split_off(mark.min(self.stack.len())))
    }

    /// Pops a tuple node (`REDUCE` and `NEWOBJ` arguments).
    fn pop_tuple(&mut self) -> Result<Value<X>, PickleError> {
        let args = self.pop()?;
        match args.as_node().and_then(|id| self.graph.try_get(id)) {
            Some(Node::Tuple(_)) => Ok(args),
            _ => Err(self.wrong_operand("tuple")),
        }
    }

    // ---- memo ----

    fn memo_get(&self, index: u64) -> Result<Value<X>, PickleError> {
        let offset = self.at;
        self.memo
            .get(&index)
            .cloned()
            .ok_or(PickleError::MemoMissing { index, offset })
    }

    fn memo_put(&mut self, index: u64) -> Result<(), PickleError> {
        let v = self.top()?.clone();
        if self.plan.as_ref().is_some_and(|p| !p.read.contains(&index)) {
            return Ok(());
        }
        if !self.memo.contains_key(&index) {
            self.limit("max_memo", self.memo.len() + 1, self.limits.max_memo)?;
        }
        self.graph.mark_shared(&v);
        self.memo.insert(index, v);
        Ok(())
    }

    // ---- nodes ----

    /// Adds a node, enforcing the node and depth limits.
    fn node(&mut self, node: Node<X>) -> Result<Value<X>, PickleError> {
        let max = self.limits.max_nodes.min(u32::MAX as usize - 1);
        self.limit("max_nodes", self.graph.len() + 1, max)?;
        let id = self.graph.add(node);
        self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)?;
        Ok(Value::Node(id))
    }

    /// Checks a value that may come from a hook against the limits.
    fn checked(&self, v: Value<X>) -> Result<Value<X>, PickleError> {
        self.limit("max_nodes", self.graph.len(), self.limits.max_nodes)?;
        if let Value::Node(id) = v {
            self.node_id(&v)?;
            self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)?;
        }
        Ok(v)
    }

    /// The id of a node value that must exist.
    fn node_id(&self, v: &Value<X>) -> Result<Option<NodeId>, PickleError> {
        match *v {
            Value::Node(id) if self.graph.try_get(id).is_none() => Err(PickleError::DanglingNode {
                id: id.0,
                offset: self.at,
            }),
            Value::Node(id) => Ok(Some(id)),
            _ => Ok(None),
        }
    }

    /// `APPEND` / `APPENDS`: extends the list `target`.
    fn extend(&mut self, target: &Value<X>, items: Vec<Value<X>>) -> Result<(), PickleError> {
        let wrong = PickleError::WrongTarget {
            opcode: self.op,
            expected: "list",
            offset: self.at,
        };
        let id = self.node_id(target)?.ok_or(wrong.clone())?;
        self.graph.note_children(id, &items);
        match self.graph.try_get_mut(id) {
            Some(Node::List(list)) => list.extend(items),
            _ => return Err(wrong),
        }
        self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)
    }

    /// `SETITEM(S)` / `DICT` on a dict (`items` alternates key, value) and
    /// `ADDITEMS` on a set. Equal keys replace values; equal items are skipped.
    fn insert(
        &mut self,
        target: &Value<X>,
        items: Vec<Value<X>>,
        expected: &'static str,
    ) -> Result<(), PickleError> {
        let wrong = PickleError::WrongTarget {
            opcode: self.op,
            expected,
            offset: self.at,
        };
        let id = self.node_id(target)?.ok_or(wrong.clone())?;
        match (expected, self.graph.try_get(id)) {
            ("set", Some(Node::Set(_))) | ("dict", Some(Node::Dict(_))) => {}
            _ => return Err(wrong),
        }
        if expected == "dict" && items.len() % 2 != 0 {
            return Err(PickleError::OddItems {
                opcode: self.op,
                offset: self.at,
            });
        }
        self.graph.note_children(id, &items);
        let index = self.keys.entry(id).or_default();
        match self.graph.try_get_mut(id) {
            Some(Node::Dict(entries)) => {
                let mut items = items.into_iter();
                while let (Some(k), Some(v)) = (items.next(), items.next()) {
                    let key = Key::of(&k);
                    match key
                        .as_ref()
                        .and_then(|key| index.position(key, &entries[..]))
                    {
                        Some(i) => entries[i].1 = v,
                        None => {
                            index.record(key, entries.len());
                            entries.push((k, v));
                        }
                    }
                }
            }
            Some(Node::Set(entries)) => {
                for item in items {
                    let key = Key::of(&item);
                    if key
                        .as_ref()
                        .and_then(|key| index.position(key, &entries[..]))
                        .is_none()
                    {
                        index.record(key, entries.len());
                        entries.push(item);
                    }
                }
            }
            _ => return Err(wrong),
        }
        self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)
    }
}

/// Where each key sits in a dict's or set's entries. Hooks may change the
/// node between opcodes, so positions are verified on use and the index is
/// rebuilt when the entry count or a looked-up key disagrees.
#[derive(Default)]
struct KeyIndex {
    len: usize,
    map: HashMap<Key, usize>,
}

/// The keys of a dict's or set's entries.
trait Entries<X> {
    fn count(&self) -> usize;
    fn key(&self, i: usize) -> Option<&Value<X>>;
}

impl<X> Entries<X> for [(Value<X>, Value<X>)] {
    fn count(&self) -> usize {
        self.len()
    }
    fn key(&self, i: usize) -> Option<&Value<X>> {
        self.get(i).map(|(k, _)| k)
    }
}

impl<X> Entries<X> for [Value<X>] {
    fn count(&self) -> usize {
        self.len()
    }
    fn key(&self, i: usize) -> Option<&Value<X>> {
        self.get(i)
    }
}

impl KeyIndex {
    fn rebuild<X, E: Entries<X> + ?Sized>(&mut self, entries: &E) {
        self.map.clear();
        for i in 0..entries.count() {
            if let Some(key) = entries.key(i).and_then(Key::of) {
                self.map.entry(key).or_insert(i);
            }
        }
        self.len = entries.count();
    }

    fn position<X, E: Entries<X> + ?Sized>(&mut self, key: &Key, entries: &E) -> Option<usize> {
        if self.len != entries.count() {
            self.rebuild(entries);
        }
        let i = *self.map.get(key)?;
        if entries.key(i).and_then(Key::of).as_ref() == Some(key) {
            return Some(i);
        }
        self.rebuild(entries);
        self.map.get(key).copied()
    }

    /// Notes that an entry with `key` was appended at position `i`.
    fn record(&mut self, key: Option<Key>, i: usize) {
        if let Some(key) = key {
            self.map.insert(key, i);
        }
        self.len = i + 1;
    }
}

/// A decimal integer line (surrounding whitespace allowed).
fn parse_int<X>(line: &[u8]) -> Option<Value<X>> {
    let text = std::str::from_utf8(line).ok()?.trim();
    if let Ok(i) = text.parse::<i64>() {
        return Some(Value::Int(i));
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty()
        || digits.len() > MAX_INT_DIGITS
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    BigInt::parse_bytes(text.as_bytes(), 10).map(Value::int)
}

/// Python 2 `str` under `encoding="utf-8"`: text if it decodes, else bytes.
fn py2_str<X>(bytes: Vec<u8>) -> Value<X> {
    match String::from_utf8(bytes) {
        Ok(s) => Value::Str(s.into()),
        Err(e) => Value::Bytes(e.into_bytes().into()),
    }
}

/// `codecs.escape_decode`: the body of a `STRING` literal.
fn escape_decode(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        i += 1;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let e = *body.get(i)?;
        i += 1;
        match e {
            b'\n' => {}
            b'\\' | b'\'' | b'"' => out.push(e),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(0x0b),
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match body.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(v as u8); // CPython keeps the low byte of \ooo.
            }
            b'x' => {
                let hex = body.get(i..i + 2)?;
                i += 2;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
            }
            _ => out.extend([b'\\', e]),
        }
    }
    Some(out)
}

/// The `raw-unicode-escape` codec: bytes are Latin-1 characters, except that
/// `\uXXXX` and `\UXXXXXXXX` after an odd run of backslashes are escapes.
/// Lone surrogates are refused (Rust strings cannot hold them).
fn raw_unicode_escape(line: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    let mut backslashes = 0usize;
    while let Some(&b) = line.get(i) {
        i += 1;
        if backslashes % 2 == 1 && (b == b'u' || b == b'U') {
            out.pop();
            let n = if b == b'u' { 4 } else { 8 };
            let hex = std::str::from_utf8(line.get(i..i + n)?).ok()?;
            if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                return None;
            }
            out.push(char::from_u32(u32::from_str_radix(hex, 16).ok()?)?);
            i += n;
            backslashes = 0;
            continue;
        }
        backslashes = if b == b'\\' { backslashes + 1 } else { 0 };
        out.push(char::from(b));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{load, render, unhex, Tag, TestError, TestHooks, FIXTURES};
    use super::*;
    use proptest::prelude::*;

    fn err(data: &[u8]) -> PickleError {
        err_with(data, &Limits::default())
    }

    fn err_with(data: &[u8], limits: &Limits) -> PickleError {
        match unpickle(data, &mut TestHooks, limits) {
            Err(TestError::Pickle(e)) => e,
            other => panic!("expected a pickle error, got {other:?}"),
        }
    }

    fn rendered(data: &[u8]) -> String {
        let p = load(data).unwrap_or_else(|e| panic!("{e:?}"));
        render(&p.graph, &p.root)
    }

    /// Hand-made pickles for opcodes CPython 3 does not write; each was
    /// checked with `pickle.loads(data, encoding="utf-8")` (with a class
    /// `__main__.C` taking `*args`), whose result is noted.
    #[test]
    fn hand_made_pickles() {
        let cases: &[(&[u8], &str)] = &[
            // C(1, 2) via INST
            (b"(I1\nI2\ni__main__\nC\n.", "obj[g:__main__.C, (1, 2), None]"),
            // C(1) via OBJ
            (b"(c__main__\nC\nI1\no.", "obj[g:__main__.C, (1), None]"),
            // ("a'bA\nA\\q", 'q')
            (b"(S'a\\'b\\x41\\n\\101\\q'\nS\"q\"\nt.", "('a\\u{27}bA\\u{a}A\\u{5c}q', 'q')"),
            // ('abc', 'é'); b'\xff' with encoding='bytes'
            (b"(T\x03\x00\x00\x00abcU\x02\xc3\xa9t.", "('abc', '\\u{e9}')"),
            (b"U\x01\xff.", "b:ff"),
            // l = []; l.append(l)
            (b"]2a.", "#0=[@0]"),
            // ('hi', b'\xff')
            (b"\x80\x04(\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi\x8e\x01\x00\x00\x00\x00\x00\x00\x00\xfft.", "('hi', b:ff)"),
            // C() via NEWOBJ_EX with empty kwargs
            (b"\x80\x04c__main__\nC\n)}\x92.", "obj[g:__main__.C, (), None]"),
            // {1: 3}: equal keys (1 == True) replace the value, keep the key
            (b"(K\x01K\x02\x88K\x03d.", "{1: 3}"),
            (b"}(K\x01K\x02K\x01K\x03u.", "{1: 3}"),
            (b"}(G\x3f\xf0\x00\x00\x00\x00\x00\x00K\x02K\x01K\x03u.", "{f:3ff0000000000000: 3}"),
            // {1, 2}
            (b"\x80\x04\x8f(K\x01K\x02\x88\x90.", "set{1, 2}"),
            (b"\x80\x04(K\x01K\x01\x91.", "frozenset{1}"),
            // ('é\\\\u0041\\\\B😀', 'plainé')
            (b"(V\\u00e9\\\\u0041\\\\\\u0042\\U0001F600\nVplain\xe9\nt.", "('\\u{e9}\\u{5c}\\u{5c}u0041\\u{5c}\\u{5c}B\\u{1f600}', 'plain\\u{e9}')"),
            // (12345678901234567890123, -5, -7, 8)
            (b"(L12345678901234567890123L\nL-5\nI-7\nI+8\nt.", "(12345678901234567890123, -5, -7, 8)"),
            // [1]
            (b"(I1\nl.", "[1]"),
            // l = []; (l, l) with 4-byte memo indexes
            (b"]r\x00\x01\x00\x00j\x00\x01\x00\x00\x86.", "(#0=[], @0)"),
            // POP discards a bare mark; POP_MARK discards items and mark
            (b"K\x01(0.", "1"),
            (b"K\x01(K\x02K\x031.", "1"),
        ];
        for (data, want) in cases {
            assert_eq!(rendered(data), *want, "{:?}", String::from_utf8_lossy(data));
        }
    }

    #[test]
    fn long_string_and_bytes_opcodes() {
        let mut data = vec![b'(', b'B', 0, 1, 0, 0];
        data.extend(0..=255u8);
        data.extend([b'X', 44, 1, 0, 0]);
        data.extend([b'x'; 300]);
        data.extend(*b"C\x01zt.");
        let p = load(&data).unwrap();
        let Node::Tuple(items) = p.graph.get(p.root.as_node().unwrap()) else {
            panic!()
        };
        assert_eq!(
            items[0].as_bytes().unwrap(),
            (0..=255u8).collect::<Vec<_>>()
        );
        assert_eq!(items[1].as_str().unwrap(), "x".repeat(300));
        assert_eq!(items[2].as_bytes().unwrap(), b"z");
    }

    #[test]
    fn stops_at_stop_and_reports_consumed() {
        let data = b"\x80\x02K\x01.K\x02.";
        let first = load(data).unwrap();
        assert_eq!(
            (first.root.clone(), first.consumed, first.protocol),
            (Value::Int(1), 5, 2)
        );
        let second = load(&data[first.consumed..]).unwrap();
        assert_eq!(
            (second.root, second.consumed, second.protocol),
            (Value::Int(2), 3, 0)
        );
    }

    #[test]
    fn typed_errors() {
        use PickleError::*;
        #[rustfmt::skip]
        let cases: &[(&[u8], PickleError)] = &[
            (b"\x80\x02\xff", UnknownOpcode { byte: 0xff, offset: 2 }),
            (b"\x80\x02a.", StackUnderflow { opcode: "APPEND", offset: 2 }),
            (b"K\x01(a.", StackUnderflow { opcode: "APPEND", offset: 3 }),
            (b"K\x01(.", StackUnderflow { opcode: "STOP", offset: 3 }),
            (b"0", StackUnderflow { opcode: "POP", offset: 0 }),
            (b"}K\x01a.", WrongTarget { opcode: "APPEND", expected: "list", offset: 3 }),
            (b"c__main__\nC\nK\x01a.", WrongTarget { opcode: "APPEND", expected: "list", offset: 14 }),
            (b"]K\x01K\x02s.", WrongTarget { opcode: "SETITEM", expected: "dict", offset: 5 }),
            (b"](K\x01\x90.", WrongTarget { opcode: "ADDITEMS", expected: "set", offset: 4 }),
            (b"\x80\x02\x82\x01.", Unsupported { opcode: "EXT1", offset: 2 }),
            (b"\x80\x02\x83\x34\x12.", Unsupported { opcode: "EXT2", offset: 2 }),
            (b"\x80\x02\x84\x78\x56\x34\x12.", Unsupported { opcode: "EXT4", offset: 2 }),
            (b"\x80\x05\x97\x98.", Unsupported { opcode: "NEXT_BUFFER", offset: 2 }),
            (b"K\x01t.", NoMark { opcode: "TUPLE", offset: 2 }),
            (b"h\x05.", MemoMissing { index: 5, offset: 0 }),
            (b"g7\n.", MemoMissing { index: 7, offset: 0 }),
            (b"", NoStop { offset: 0 }),
            (b"K\x01", NoStop { offset: 2 }),
            (b"X\xff\x00\x00\x00ab", Truncated { offset: 5, needed: 255, available: 2 }),
            (b"J\x01\x02", Truncated { offset: 1, needed: 4, available: 2 }),
            // BINUNICODE8 claiming 2^60 bytes
            (b"\x8d\x00\x00\x00\x00\x00\x00\x00\x10ab.", Truncated { offset: 9, needed: 1 << 60, available: 3 }),
            (b"\x8e\xff\xff\xff\xff\xff\xff\xff\xff.", Truncated { offset: 9, needed: u64::MAX, available: 1 }),
            (b"\x96\xff\xff\xff\xff\xff\xff\xff\x7f.", Truncated { offset: 9, needed: i64::MAX as u64, available: 1 }),
            (b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00K\x01.", Truncated { offset: 11, needed: 16, available: 3 }),
            (b"I12", UnterminatedLine { offset: 1 }),
            (b"Iabc\n.", BadText { what: "int", offset: 0 }),
            (b"L1.5L\n.", BadText { what: "long", offset: 0 }),
            (b"Fx\n.", BadText { what: "float", offset: 0 }),
            (b"S'abc\n.", BadText { what: "string quotes", offset: 0 }),
            (b"S'a\\x4'\n.", BadText { what: "string escape", offset: 0 }),
            (b"V\\u12\n.", BadText { what: "unicode escape", offset: 0 }),
            (b"V\\ud800\n.", BadText { what: "unicode escape", offset: 0 }),
            (b"V\\U00110000\n.", BadText { what: "unicode escape", offset: 0 }),
            (b"X\x01\x00\x00\x00\xff.", BadText { what: "utf-8", offset: 0 }),
            (b"T\xff\xff\xff\xff.", BadText { what: "negative length", offset: 0 }),
            (b"\x8b\xff\xff\xff\xff.", BadText { what: "negative length", offset: 0 }),
            (b"Np-1\n.", BadText { what: "memo index", offset: 1 }),
            (b"P\xff\n.", BadText { what: "persistent id", offset: 0 }),
            (b"c\xff\nx\n.", BadText { what: "utf-8", offset: 0 }),
            (b"}(K\x01u.", OddItems { opcode: "SETITEMS", offset: 4 }),
            (b"(K\x01d.", OddItems { opcode: "DICT", offset: 3 }),
            (b"\x80\x04K\x01K\x02\x93.", WrongOperand { opcode: "STACK_GLOBAL", expected: "str", offset: 6 }),
            (b"c__main__\nC\nK\x01R.", WrongOperand { opcode: "REDUCE", expected: "tuple", offset: 14 }),
            (b"c__main__\nC\n)K\x01\x92.", WrongOperand { opcode: "NEWOBJ_EX", expected: "dict", offset: 15 }),
            (b"\x80\x06.", UnsupportedProtocol { protocol: 6, offset: 0 }),
        ];
        for (data, want) in cases {
            assert_eq!(&err(data), want, "{:?}", String::from_utf8_lossy(data));
        }
        let huge = format!("I{}\n.", "9".repeat(MAX_INT_DIGITS + 1));
        assert_eq!(
            err(huge.as_bytes()),
            BadText {
                what: "int",
                offset: 0
            }
        );
        let ok = format!("I{}\n.", "9".repeat(MAX_INT_DIGITS));
        assert!(matches!(
            load(ok.as_bytes()).unwrap().root,
            Value::BigInt(_)
        ));
    }

    #[test]
    fn refuses_newobj_ex_with_kwargs() {
        // pickle.dumps(E(), 4) where E.__getnewargs_ex__ returns ((), {'k': 1})
        let data = unhex(
            "8004951e000000000000008c085f5f6d61696e5f5f948c0145949394297d948c016b944b017392942e",
        );
        assert_eq!(
            err(&data),
            PickleError::Unsupported {
                opcode: "NEWOBJ_EX",
                offset: 38
            }
        );
    }

    #[test]
    fn hook_errors_pass_through() {
        let e = load(b"cos\nsystem\n.").unwrap_err();
        assert_eq!(e, TestError::Hook("refused os.system".into()));
    }

    /// Hooks that hand back node ids the graph does not have.
    struct Dangling;

    impl Hooks for Dangling {
        type Ext = ();
        type Error = PickleError;
        fn find_class(&mut self, _: &str, _: &str) -> Result<Value<()>, PickleError> {
            Ok(Value::Node(NodeId(99)))
        }
        fn persistent_load(
            &mut self,
            _: &mut Graph<()>,
            _: Value<()>,
        ) -> Result<Value<()>, PickleError> {
            Ok(Value::None)
        }
        fn reduce(
            &mut self,
            _: &mut Graph<()>,
            _: Value<()>,
            _: Value<()>,
        ) -> Result<Value<()>, PickleError> {
            Ok(Value::None)
        }
        fn build(
            &mut self,
            _: &mut Graph<()>,
            o: Value<()>,
            _: Value<()>,
        ) -> Result<Value<()>, PickleError> {
            Ok(o)
        }
        fn new_obj(
            &mut self,
            _: &mut Graph<()>,
            _: Value<()>,
            _: Value<()>,
        ) -> Result<Value<()>, PickleError> {
            Ok(Value::None)
        }
    }

    #[test]
    fn dangling_node_from_hook_is_an_error() {
        let e = unpickle(b"ca\nb\n.", &mut Dangling, &Limits::default()).unwrap_err();
        assert_eq!(e, PickleError::DanglingNode { id: 99, offset: 0 });
    }

    fn limit(e: PickleError) -> (&'static str, usize) {
        match e {
            PickleError::LimitExceeded { limit, value, .. } => (limit, value),
            e => panic!("expected a limit error, got {e:?}"),
        }
    }

    #[test]
    fn deep_nesting_is_a_depth_error() {
        let n = 100_000;
        let tuples = [&b")"[..], &vec![op::TUPLE1; n], b"."].concat();
        assert_eq!(limit(err(&tuples)), ("max_depth", 1001));
        let marked_lists = [vec![op::MARK; n], vec![op::LIST; n], vec![op::STOP]].concat();
        assert_eq!(limit(err(&marked_lists)), ("max_depth", 1001));
        let appended = [
            vec![op::EMPTY_LIST; n],
            vec![op::APPEND; n - 1],
            vec![op::STOP],
        ]
        .concat();
        assert_eq!(limit(err(&appended)), ("max_depth", 1001));
        // d = {}; for _ in range(n): d = {None: d}
        let dicts = [
            b"}N".repeat(n - 1),
            b"}".to_vec(),
            vec![op::SETITEM; n - 1],
            vec![op::STOP],
        ];
        let dicts = dicts.concat();
        assert_eq!(limit(err(&dicts)), ("max_depth", 1001));
    }

    #[test]
    fn self_reference_does_not_deepen() {
        let data = [&b"]"[..], &b"2a".repeat(5000), b"."].concat();
        let p = load(&data).unwrap();
        assert_eq!(p.graph.depth(p.root.as_node().unwrap()), 1);
    }

    #[test]
    fn memo_sharing_keeps_doubling_small() {
        // x = []; for _ in range(60): x = (x, x)
        let data = [
            &b"]q\x00"[..],
            &b"h\x00h\x00\x86q\x000".repeat(60),
            b"h\x00.",
        ]
        .concat();
        let p = load(&data).unwrap();
        assert_eq!(p.graph.len(), 61);
        let root = p.root.as_node().unwrap();
        assert_eq!(p.graph.depth(root), 61);
        let Node::Tuple(pair) = p.graph.get(root) else {
            panic!()
        };
        assert_eq!(pair[0], pair[1]);
    }

    #[test]
    fn only_memo_entries_the_stream_reads_are_stored() {
        // Five entries written, none read: nothing stored, no memo limit reached.
        let memo = Limits {
            max_memo: 1,
            ..Limits::default()
        };
        let data = b"(K\x01q\x00q\x01q\x02q\x03q\x04t.";
        assert!(unpickle(data, &mut TestHooks, &memo).is_ok());
        // MEMOIZE numbers entries by count, also when the unread ones are skipped.
        let p = load(b"\x80\x04N\x94K\x05\x94K\x06\x94h\x01h\x02\x86.").unwrap();
        assert_eq!(render(&p.graph, &p.root), "(5, 6)");
        // With the scan off, every entry is stored and counts.
        let all = Limits {
            scan_memo: false,
            ..memo
        };
        assert!(unpickle(data, &mut TestHooks, &all).is_err());
        // PUT mixed with MEMOIZE: no plan, every entry stored, numbered by distinct count.
        let p = load(b"\x80\x04Nq\x05K\x07\x94h\x01.").unwrap();
        assert_eq!(render(&p.graph, &p.root), "7");
    }

    #[test]
    fn limits_are_enforced() {
        let small = |f: fn(&mut Limits)| {
            let mut l = Limits::default();
            f(&mut l);
            l
        };
        let memo = small(|l| l.max_memo = 2);
        assert_eq!(
            // Only entries the stream reads count (and are stored).
            limit(err_with(
                b"K\x01q\x00q\x01q\x00q\x02h\x00h\x01h\x02.",
                &memo
            )),
            ("max_memo", 3)
        );
        let stack = small(|l| l.max_stack = 3);
        assert_eq!(limit(err_with(b"NNNN.", &stack)), ("max_stack", 4));
        assert_eq!(limit(err_with(b"((((.", &stack)), ("max_stack", 4));
        let nodes = small(|l| l.max_nodes = 2);
        assert_eq!(limit(err_with(b"]]].", &nodes)), ("max_nodes", 3));
        // The hook's object node counts too.
        let nodes = small(|l| l.max_nodes = 1);
        assert_eq!(
            limit(err_with(b"c__main__\nC\n)R.", &nodes)),
            ("max_nodes", 2)
        );
    }

    #[test]
    fn every_prefix_of_a_real_pickle_is_an_error() {
        for f in FIXTURES {
            let data = unhex(f.hex);
            for n in 0..data.len() {
                assert!(load(&data[..n]).is_err(), "{} prefix {n}", f.name);
            }
        }
    }

    /// Bytes that are opcodes or common arguments, to reach deep states.
    fn alphabet() -> Vec<u8> {
        let mut a: Vec<u8> = op::ALL.iter().map(|o| o.byte).collect();
        a.extend(b"\n\x00\x01\x02\xff019-L'\\xu");
        a
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = load(&data);
        }

        #[test]
        fn random_opcode_streams_never_panic(
            data in proptest::collection::vec(proptest::sample::select(alphabet()), 0..512)
        ) {
            let _ = load(&data);
        }

        #[test]
        fn mutated_pickles_never_panic(
            which in 0..FIXTURES.len(),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 1..8),
        ) {
            let mut data = unhex(FIXTURES[which].hex);
            for (at, byte, kind) in edits {
                let at = at % (data.len() + 1);
                match kind {
                    0 if at < data.len() => data[at] = byte,
                    1 => data.insert(at, byte),
                    _ if at < data.len() => { data.remove(at); }
                    _ => {}
                }
            }
            if let Ok(p) = load(&data) {
                // Whatever it read, the writer can write and the reader re-read.
                let out = super::super::dumps(&p.graph, &p.root, |p, t| match t {
                    Tag::Global(_) | Tag::Obj(_) | Tag::Pid(_) => p.none(),
                });
                let _ = out.map(|out| load(&out));
            }
        }
    }
}
