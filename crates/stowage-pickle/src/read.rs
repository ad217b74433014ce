//! The unpickler: an iterative stack machine for protocols 0–5.
//!
//! Everything that would run Python code goes through the caller's [`Hooks`].
//! The machine itself only builds [`Graph`] nodes for the built-in
//! containers. Text opcodes follow CPython 3 with `encoding="utf-8"` (as
//! `torch.load` passes): Python 2 `str` (`STRING`, `BINSTRING`,
//! `SHORT_BINSTRING`) becomes [`Value::Str`], and one that is not UTF-8 is
//! refused ([`PickleError::BadText`]), as CPython's unpickler and PyTorch's
//! both refuse it (`UnicodeDecodeError`). Class names reach [`Hooks::find_class`] as
//! written, without Python 2 → 3 name mapping. Integer lines (`INT`, `LONG`)
//! are decimal, at most 4300 digits like CPython's default limit.
//!
//! Dict keys and set items are compared as Python would for scalars
//! (`1 == 1.0 == True`, strings by content) and for the tuples the pickle
//! builds (by their items, `tuples.rs`); by identity for other containers,
//! extension values and the nodes a hook made (which may stand for an
//! object not yet built). The keys a hook put in a dict or set are taken
//! as given (equal ones among them stay); the pickle's keys are compared
//! with them.

mod keys;
mod state;
#[cfg(test)]
mod tests;
pub(crate) mod text;
mod tuples;

use num_bigint::BigInt;

use self::keys::KeyIndex;
use self::text::{escape_decode, parse_int, py2_str, raw_unicode_escape};
use self::tuples::Tuples;
use super::opcode as op;
use super::operand::Operand;
use super::scan::{memo_plan, MemoPlan};
use super::source::{byte_at, operand, Source, Window};
use super::value::{Graph, Interner, Node, NodeId, Value};
use super::{Limits, Map, PickleError, Set};

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

    /// `APPEND` / `APPENDS` on something that is not a list (Python calls its
    /// `append` or `extend` method): `Ok(true)` when the hook took the items,
    /// `Ok(false)` to refuse them as [`PickleError::WrongTarget`] (the default).
    fn extend(
        &mut self,
        graph: &mut Graph<Self::Ext>,
        target: &Value<Self::Ext>,
        items: Vec<Value<Self::Ext>>,
    ) -> Result<bool, Self::Error> {
        let _ = (graph, target, items);
        Ok(false)
    }
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
    let limits = &limits.for_stream(data.len());
    let plan = if limits.scan_memo {
        memo_plan(&mut &data[..])
    } else {
        None
    };
    Machine::new(limits, plan, data.len()).run(&mut &data[..], hooks)
}

/// What [`unpickle_reader`] holds of the pickle at a time: a window this
/// long, and longer only while one argument (a long string) needs it.
const WINDOW: usize = 256 << 10;

/// Reads one pickle of `len` bytes as [`unpickle`] does, from readers that
/// each give its bytes from the first, holding a window of them at a time
/// rather than the whole pickle: a state dict of many tensors has a pickle
/// of about 100 bytes a tensor, which the objects it builds need not sit
/// beside. `open` is called twice where the limits scan the memo first
/// ([`Limits::scan_memo`]; the scan reads the stream once), once otherwise.
/// The result, the errors and their offsets are `unpickle`'s on the same
/// bytes; a reader's error is returned as it is.
pub fn unpickle_reader<H, R>(
    len: usize,
    open: impl FnMut() -> std::io::Result<R>,
    hooks: &mut H,
    limits: &Limits,
) -> Result<Pickled<H::Ext>, H::Error>
where
    H: Hooks,
    H::Error: From<std::io::Error>,
    R: std::io::Read,
{
    unpickle_windows(len, WINDOW, open, hooks, limits)
}

/// [`unpickle_reader`] with windows of `chunk` bytes: for the fuzz target
/// that holds the two equal to [`unpickle`] however windows cut the stream.
#[doc(hidden)]
pub fn unpickle_windows<H, R>(
    len: usize,
    chunk: usize,
    mut open: impl FnMut() -> std::io::Result<R>,
    hooks: &mut H,
    limits: &Limits,
) -> Result<Pickled<H::Ext>, H::Error>
where
    H: Hooks,
    H::Error: From<std::io::Error>,
    R: std::io::Read,
{
    let limits = &limits.for_stream(len);
    let plan = if limits.scan_memo {
        let mut window = Window::new(open()?, len, chunk);
        let plan = memo_plan(&mut window);
        if let Some(e) = window.take_error() {
            return Err(e.into());
        }
        plan
    } else {
        None
    };
    let mut window = Window::new(open()?, len, chunk);
    let out = Machine::new(limits, plan, len).run(&mut window, hooks);
    match window.take_error() {
        Some(e) => Err(e.into()),
        None => out,
    }
}

struct Machine<'a, X> {
    /// The stream's length.
    total: usize,
    /// Offset of the opcode being executed.
    at: usize,
    /// Offset just past the argument of the opcode being executed.
    next: usize,
    /// Name of the opcode being executed.
    op: &'static str,
    limits: &'a Limits,
    stack: Vec<Value<X>>,
    /// Stack lengths at each `MARK`.
    marks: Vec<usize>,
    memo: Map<u64, Value<X>>,
    /// The memo entries the stream reads (`scan.rs`); only those are stored.
    /// `None` stores every entry.
    plan: Option<MemoPlan>,
    /// `MEMOIZE`s executed: the next one's index when a plan is followed
    /// (the plan excludes `PUT`s, so every entry so far came from one).
    memoized: u64,
    graph: Graph<X>,
    protocol: u8,
    /// Key → position indexes of dicts and sets, for replace/dedup.
    keys: Map<NodeId, KeyIndex>,
    /// Every dict key and set item inserted goes through it, so keys are cheap.
    interner: Interner,
    /// The tuples as keys: those the machine built compare by their items.
    tuples: Tuples,
}

impl<'a, X: Clone + std::fmt::Debug> Machine<'a, X> {
    fn new(limits: &'a Limits, plan: Option<MemoPlan>, total: usize) -> Self {
        Machine {
            total,
            at: 0,
            next: 0,
            op: "?",
            limits,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: Map::default(),
            plan,
            memoized: 0,
            graph: Graph::new(),
            protocol: 0,
            keys: Map::default(),
            interner: Interner::default(),
            tuples: Tuples::default(),
        }
    }

    fn run<S: Source, H: Hooks<Ext = X>>(
        mut self,
        src: &mut S,
        hooks: &mut H,
    ) -> Result<Pickled<X>, H::Error> {
        loop {
            self.at = self.next;
            let Some(code) = byte_at(src, self.at) else {
                return Err(PickleError::NoStop { offset: self.at }.into());
            };
            let Some(info) = op::info(code) else {
                let offset = self.at;
                return Err(PickleError::UnknownOpcode { byte: code, offset }.into());
            };
            self.op = info.name;
            match code {
                op::STOP => {
                    let root = self.pop()?;
                    return Ok(Pickled {
                        graph: self.graph,
                        root,
                        protocol: self.protocol,
                        consumed: self.at + 1,
                    });
                }
                // No extension registry, no out-of-band buffers: refused before
                // their arguments are read.
                op::EXT1 | op::EXT2 | op::EXT4 | op::NEXT_BUFFER | op::READONLY_BUFFER => {
                    return Err(self.unsupported().into())
                }
                _ => {}
            }
            let (arg, next) = operand(src, self.at, self.at + 1, info.arg)?;
            self.next = next;
            self.step(code, arg, hooks)?;
        }
    }

    /// Executes opcode `code` with its argument `arg`, read as the opcode
    /// table lays it out.
    fn step<H: Hooks<Ext = X>>(
        &mut self,
        code: u8,
        arg: Operand<'_>,
        hooks: &mut H,
    ) -> Result<(), H::Error> {
        let nodes = self.graph.len();
        let v = match (code, arg) {
            (op::MARK, _) => {
                self.limit("max_stack", self.marks.len() + 1, self.limits.max_stack)?;
                self.marks.push(self.stack.len());
                return Ok(());
            }
            (op::POP, _) => {
                if self.stack.len() > self.fence() {
                    self.stack.pop();
                } else if self.marks.pop().is_none() {
                    return Err(self.underflow().into());
                }
                return Ok(());
            }
            (op::POP_MARK, _) => {
                self.pop_mark()?;
                return Ok(());
            }
            (op::DUP, _) => {
                let v = self.top()?.clone();
                self.graph.mark_shared(&v);
                v
            }
            (op::NONE, _) => Value::None,
            (op::NEWTRUE, _) => Value::Bool(true),
            (op::NEWFALSE, _) => Value::Bool(false),
            (op::INT, Operand::Line(line)) => match line {
                b"00" => Value::Bool(false),
                b"01" => Value::Bool(true),
                line => parse_int(line).ok_or(self.bad("int"))?,
            },
            (op::LONG, Operand::Line(line)) => {
                let line = line.strip_suffix(b"L").unwrap_or(line);
                parse_int(line).ok_or(self.bad("long"))?
            }
            (op::BININT, Operand::Int(i)) => Value::Int(i.into()),
            (op::BININT1 | op::BININT2, Operand::Uint(n)) => Value::Int(n as i64),
            (op::LONG1 | op::LONG4, Operand::Bytes(b)) => {
                Value::int(BigInt::from_signed_bytes_le(b))
            }
            (op::FLOAT, Operand::Line(line)) => {
                let text = std::str::from_utf8(line).map_err(|_| self.bad("float"))?;
                Value::Float(text.trim().parse().map_err(|_| self.bad("float"))?)
            }
            (op::BINFLOAT, Operand::Float(f)) => Value::Float(f),
            (op::STRING, Operand::Line(line)) => {
                let body = match line {
                    [q, body @ .., q2] if q == q2 && (*q == b'\'' || *q == b'"') => body,
                    _ => return Err(self.bad("string quotes").into()),
                };
                py2_str(escape_decode(body).ok_or(self.bad("string escape"))?)
                    .ok_or(self.bad("utf-8 (a Python 2 str)"))?
            }
            (op::BINSTRING | op::SHORT_BINSTRING, Operand::Bytes(b)) => {
                py2_str(b.to_vec()).ok_or(self.bad("utf-8 (a Python 2 str)"))?
            }
            (op::UNICODE, Operand::Line(line)) => Value::Str(
                raw_unicode_escape(line)
                    .ok_or(self.bad("unicode escape"))?
                    .into(),
            ),
            (op::SHORT_BINUNICODE | op::BINUNICODE | op::BINUNICODE8, Operand::Bytes(b)) => {
                Value::Str(self.utf8(b)?.into())
            }
            (op::SHORT_BINBYTES | op::BINBYTES | op::BINBYTES8, Operand::Bytes(b)) => {
                Value::Bytes(b.into())
            }
            (op::BYTEARRAY8, Operand::Bytes(b)) => self.node(Node::ByteArray(b.to_vec()))?,
            (op::EMPTY_LIST, _) => self.node(Node::List(Vec::new()))?,
            (op::LIST, _) => {
                let items = self.pop_mark()?;
                self.node(Node::List(items))?
            }
            (op::APPEND, _) => {
                let item = self.pop()?;
                let target = self.top()?.clone();
                self.extend_any(&target, vec![item], hooks)?;
                return Ok(());
            }
            (op::APPENDS, _) => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.extend_any(&target, items, hooks)?;
                return Ok(());
            }
            (op::EMPTY_TUPLE, _) => self.tuple(Vec::new())?,
            (op::TUPLE1 | op::TUPLE2 | op::TUPLE3, _) => {
                let n = usize::from(code - op::TUPLE1) + 1;
                let items = self.pop_n(n)?;
                self.tuple(items)?
            }
            (op::TUPLE, _) => {
                let items = self.pop_mark()?;
                self.tuple(items)?
            }
            (op::EMPTY_DICT, _) => self.node(Node::Dict(Vec::new()))?,
            (op::DICT, _) => {
                let items = self.pop_mark()?;
                let dict = self.node(Node::Dict(Vec::new()))?;
                self.insert(&dict, items, "dict")?;
                dict
            }
            (op::SETITEM, _) => {
                let value = self.pop()?;
                let key = self.pop()?;
                let target = self.top()?.clone();
                self.insert(&target, vec![key, value], "dict")?;
                return Ok(());
            }
            (op::SETITEMS, _) => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.insert(&target, items, "dict")?;
                return Ok(());
            }
            (op::EMPTY_SET, _) => self.node(Node::Set(Vec::new()))?,
            (op::ADDITEMS, _) => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.insert(&target, items, "set")?;
                return Ok(());
            }
            (op::FROZENSET, _) => {
                let items = self.pop_mark()?;
                let mut items: Vec<_> =
                    items.into_iter().map(|v| self.interner.intern(v)).collect();
                for v in &items {
                    self.tuples.register(&mut self.graph, &mut self.interner, v);
                }
                // The first of equal items stays (keys borrow the items, so
                // which stay is decided before any goes).
                let mut seen = Set::default();
                let first: Vec<bool> = items
                    .iter()
                    .map(|v| self.tuples.key(v).is_none_or(|k| seen.insert(k)))
                    .collect();
                drop(seen);
                let mut first = first.into_iter();
                items.retain(|_| first.next().unwrap_or(true));
                self.node(Node::FrozenSet(items))?
            }
            (op::GET, Operand::Line(line)) => {
                let index = self.index_line(line)?;
                self.memo_get(index)?
            }
            (op::BINGET | op::LONG_BINGET, Operand::Uint(index)) => self.memo_get(index)?,
            (op::PUT, Operand::Line(line)) => {
                let index = self.index_line(line)?;
                self.memo_put(index)?;
                return Ok(());
            }
            (op::BINPUT | op::LONG_BINPUT, Operand::Uint(index)) => {
                self.memo_put(index)?;
                return Ok(());
            }
            (op::MEMOIZE, _) => {
                let index =
                    super::scan::memoize_index(self.plan.as_ref(), self.memoized, self.memo.len());
                self.memo_put(index)?;
                self.memoized += 1;
                return Ok(());
            }
            (op::GLOBAL, Operand::Lines(module, name)) => {
                let module = std::str::from_utf8(module).map_err(|_| self.bad("utf-8"))?;
                let name = std::str::from_utf8(name).map_err(|_| self.bad("utf-8"))?;
                hooks.find_class(module, name)?
            }
            (op::STACK_GLOBAL, _) => {
                let (name, module) = (self.pop()?, self.pop()?);
                match (module.as_str(), name.as_str()) {
                    (Some(module), Some(name)) => hooks.find_class(module, name)?,
                    _ => return Err(self.wrong_operand("str").into()),
                }
            }
            (op::REDUCE, _) => {
                let args = self.pop_tuple()?;
                let callable = self.pop()?;
                hooks.reduce(&mut self.graph, callable, args)?
            }
            (op::BUILD, _) => {
                let state = self.pop()?;
                let obj = self.pop()?;
                hooks.build(&mut self.graph, obj, state)?
            }
            (op::INST, Operand::Lines(module, name)) => {
                let module = std::str::from_utf8(module).map_err(|_| self.bad("utf-8"))?;
                let name = std::str::from_utf8(name).map_err(|_| self.bad("utf-8"))?;
                let items = self.pop_mark()?;
                let cls = hooks.find_class(module, name)?;
                let args = self.node(Node::Tuple(items))?;
                hooks.reduce(&mut self.graph, cls, args)?
            }
            (op::OBJ, _) => {
                let mut items = self.pop_mark()?.into_iter();
                let cls = items.next().ok_or(self.underflow())?;
                let args = self.node(Node::Tuple(items.collect()))?;
                hooks.reduce(&mut self.graph, cls, args)?
            }
            (op::NEWOBJ, _) => {
                let args = self.pop_tuple()?;
                let cls = self.pop()?;
                hooks.new_obj(&mut self.graph, cls, args)?
            }
            (op::NEWOBJ_EX, _) => {
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
            (op::PERSID, Operand::Line(line)) => {
                if !line.is_ascii() {
                    return Err(self.bad("persistent id").into());
                }
                let pid = Value::Str(String::from_utf8_lossy(line).into());
                hooks.persistent_load(&mut self.graph, pid)?
            }
            (op::BINPERSID, _) => {
                let pid = self.pop()?;
                hooks.persistent_load(&mut self.graph, pid)?
            }
            (op::PROTO, Operand::Uint(n)) => {
                let protocol = u8::try_from(n).unwrap_or(u8::MAX);
                if protocol > 5 {
                    let offset = self.at;
                    return Err(PickleError::UnsupportedProtocol { protocol, offset }.into());
                }
                self.protocol = protocol;
                return Ok(());
            }
            (op::FRAME, Operand::Uint(n)) => {
                // Frames only group opcodes for buffered reading; the
                // machine reads the stream as it goes, so just check the
                // frame is there.
                let available = self.total - self.next;
                if usize::try_from(n).map_or(true, |n| n > available) {
                    let offset = self.next;
                    return Err(PickleError::Truncated {
                        offset,
                        needed: n,
                        available,
                    }
                    .into());
                }
                return Ok(());
            }
            // `run` handles STOP and the refused opcodes; the opcode table
            // gives every other opcode the operand its arm above takes.
            _ => return Err(self.unsupported().into()),
        };
        // A hook may have released nodes (`Graph::release`), whose ids the
        // next nodes take: what was noted of them goes.
        self.forget_released(nodes);
        // Values from hooks may be new nodes: check them like our own.
        let v = self.checked(v)?;
        self.push(v)?;
        Ok(())
    }
}

impl<X: Clone + std::fmt::Debug> Machine<'_, X> {
    /// `APPEND(S)`: a list is extended here; anything else is offered to
    /// [`Hooks::extend`], and refused when the hook declines.
    fn extend_any<H: Hooks<Ext = X>>(
        &mut self,
        target: &Value<X>,
        items: Vec<Value<X>>,
        hooks: &mut H,
    ) -> Result<(), H::Error> {
        let is_list = matches!(
            target.as_node().and_then(|id| self.graph.try_get(id)),
            Some(Node::List(_))
        );
        if is_list || self.node_id(target)?.is_none() && !matches!(target, Value::Ext(_)) {
            return Ok(self.extend(target, items)?);
        }
        let nodes = self.graph.len();
        if hooks.extend(&mut self.graph, target, items)? {
            self.forget_released(nodes);
            if let Some(id) = target.as_node() {
                self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)?;
            }
            return Ok(());
        }
        Err(PickleError::WrongTarget {
            opcode: self.op,
            expected: "list",
            offset: self.at,
        }
        .into())
    }
}
