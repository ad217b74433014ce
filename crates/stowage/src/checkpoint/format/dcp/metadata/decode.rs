//! The compact decoder of `.metadata`: a pickle machine that knows only
//! the stream PyTorch's pickler writes for a `Metadata` (binary opcodes,
//! protocols 2 to 5) and builds each dataclass straight into [`Parts`]'
//! records at its `BUILD`: a chunk is two ranges of one array of
//! dimensions, not a graph of nodes (a generic node costs some 160 bytes,
//! and a chunk's records take about 120 in all).
//!
//! Values are owned by the stack. Only what the stream reads back from the
//! memo is stored there ([`memo_reads`], a pass before decoding), and only
//! immutable values may be:
//! a list, dict or object read back from the memo (shared, so mutable in
//! place) makes the decoder give up, as does any opcode, global or shape it
//! does not know. Giving up is `None`: the generic reader
//! ([`super::graph`]) then reads the stream and reports what is wrong with
//! it. The decoder's own work and memory are linear in the stream: every
//! value it builds costs an opcode, values read back from the memo are
//! shared (`Rc`) or small, containers nest at most [`MAX_DEPTH`] deep, and
//! dimensions copied into chunks are charged to [`Parts`]' budget.

use std::collections::HashSet;
use std::rc::Rc;

use foldhash::fast::RandomState;
use stowage_pickle::opcode as op;

use super::input::{memo_reads, Input, MemoReads};
use super::parts::{Dims, Parts};
use super::Class;
use crate::checkpoint::globals::allowlist::{self, Global};
use crate::DType;

mod build;

/// How deep containers may nest here (a `Metadata` needs three).
const MAX_DEPTH: u8 = 32;

/// A sequence and the depth of its deepest container (itself is 1).
#[derive(Debug)]
struct Seq {
    depth: u8,
    items: Vec<V>,
}

/// A dict's entries, in order, and its depth. `storage_data`'s entries
/// (a `MetadataIndex` to a `_StorageInfo`, a million of them in a large
/// job) are kept apart as pairs of record numbers, 8 bytes each.
#[derive(Debug, Default)]
struct Map {
    depth: u8,
    items: Vec<(V, V)>,
    storage: Vec<(u32, u32)>,
}

/// A value on the stack.
#[derive(Clone, Debug)]
enum V {
    None,
    Bool(bool),
    Int(i64),
    Float,
    /// A number in [`Parts`]' strings.
    Str(u32),
    Tuple(Rc<Seq>),
    /// A tuple of ints >= 0 (a size's dimensions), stored as dimensions.
    Ints(Dims),
    /// The one-tuple of such a tuple (`torch.Size`'s argument).
    ArgInts(Dims),
    List(Rc<Seq>),
    Dict(Rc<Map>),
    Class(Class),
    /// `torch.Size` or `torch.serialization._get_layout`, before the call.
    Global(Global),
    DType(DType),
    Size(Dims),
    /// A layout or memory format: recorded, not needed.
    Tag,
    /// An instance after `NEWOBJ`, before its `BUILD`.
    Obj(Class),
    /// Records in [`Parts`], by number.
    Chunk(u32),
    Index(u32),
    Info(u32),
    Tensor(u32),
    Props(DType, bool),
    BytesMeta,
    /// The `Metadata` itself, once built.
    Root,
}

impl V {
    fn depth(&self) -> u8 {
        match self {
            V::Tuple(s) | V::List(s) => s.depth,
            V::Ints(_) => 1,
            V::ArgInts(_) => 2,
            V::Dict(m) => m.depth,
            _ => 0,
        }
    }

    /// Whether a copy of the value, read back from the memo, behaves as the
    /// original would: immutable values (strings, tuples, sizes, classes)
    /// are; containers built in place and objects are not.
    fn shareable(&self) -> bool {
        !matches!(
            self,
            V::List(_)
                | V::Dict(_)
                | V::Obj(_)
                | V::Chunk(_)
                | V::Index(_)
                | V::Info(_)
                | V::Tensor(_)
                | V::Root
        )
    }
}

/// The names of the attributes read, numbered first in [`Parts`]' strings.
const ATTRS: &[&str] = &[
    "offsets",
    "sizes",
    "fqn",
    "offset",
    "index",
    "relative_path",
    "length",
    "transform_descriptors",
    "dtype",
    "requires_grad",
    "properties",
    "size",
    "chunks",
    "state_dict_metadata",
    "storage_data",
    "planner_data",
    "version",
];

/// The number of attribute `name` (one of [`ATTRS`]).
fn attr_id(name: &str) -> u32 {
    ATTRS.iter().position(|a| *a == name).unwrap_or(usize::MAX) as u32
}

/// `None` is "the generic reader reads this stream".
type Step<T> = Option<T>;

struct Decoder<'a> {
    input: Input<'a>,
    stack: Vec<V>,
    marks: Vec<usize>,
    /// The memo entries the stream reads back, each in its slot.
    memo: Vec<Option<V>>,
    plan: MemoReads,
    memoized: u64,
    parts: Parts,
    /// `state_dict_metadata` names seen (the decoder leaves duplicate keys
    /// to the generic reader).
    names: HashSet<u32, RandomState>,
    /// The empty tuple, made once (every `NEWOBJ` takes one).
    empty: Rc<Seq>,
}

/// Decodes `data`, or `None` when the generic reader must.
#[cfg(test)]
pub(super) fn decode(data: &[u8]) -> Option<Parts> {
    decode_input(Input::memory(data))
}

/// Decodes the stream `input` (read twice: once for the memo entries it
/// reads back, once to decode), or `None` when the generic reader must.
pub(super) fn decode_input(mut input: Input<'_>) -> Option<Parts> {
    let plan = memo_reads(&mut input)?;
    input.rewind();
    let len = usize::try_from(input.len()).ok()?;
    let mut parts = Parts::for_stream(len);
    for a in ATTRS {
        parts.intern(a);
    }
    let mut d = Decoder {
        input,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: vec![None; plan.count()],
        plan,
        memoized: 0,
        parts,
        names: HashSet::default(),
        empty: Rc::new(Seq {
            depth: 1,
            items: Vec::new(),
        }),
    };
    d.run()?;
    Some(d.parts)
}

impl Decoder<'_> {
    fn uint(&mut self, n: usize) -> Step<u64> {
        self.input.uint(n)
    }

    fn pop(&mut self) -> Step<V> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return None;
        }
        self.stack.pop()
    }

    /// Where the last mark is, popped.
    fn pop_mark(&mut self) -> Step<usize> {
        let m = self.marks.pop()?;
        (m <= self.stack.len()).then_some(m)
    }

    fn text(&mut self, n: usize) -> Step<V> {
        let s = std::str::from_utf8(self.input.take(n)?).ok()?;
        let id = self.parts.intern(s);
        Some(V::Str(id))
    }

    /// The items from `at` up, as a tuple in their place.
    fn tuple_from(&mut self, at: usize) -> Step<()> {
        if at == self.stack.len() {
            self.stack.push(V::Tuple(self.empty.clone()));
            return Some(());
        }
        // Sizes are tuples of ints, a few for every chunk: they go straight
        // to the dimensions, with no tuple made.
        let ints = &self.stack[at..];
        if ints.iter().all(|v| matches!(v, V::Int(n) if *n >= 0)) {
            let dims = self.stack.drain(at..).map(|v| match v {
                V::Int(n) => n as usize,
                _ => 0,
            });
            let dims = self.parts.dims(dims).ok()?;
            self.stack.push(V::Ints(dims));
            return Some(());
        }
        if let [V::Ints(d)] = ints {
            let d = *d;
            self.stack.truncate(at);
            self.stack.push(V::ArgInts(d));
            return Some(());
        }
        let items: Vec<V> = self.stack.drain(at..).collect();
        let depth = items.iter().map(V::depth).max().unwrap_or(0) + 1;
        if depth > MAX_DEPTH {
            return None;
        }
        self.stack.push(V::Tuple(Rc::new(Seq { depth, items })));
        Some(())
    }

    fn push_tuple(&mut self, n: usize) -> Step<()> {
        let at = self.stack.len().checked_sub(n)?;
        if self.marks.last().is_some_and(|&m| m > at) {
            return None;
        }
        self.tuple_from(at)
    }

    fn run(&mut self) -> Step<()> {
        loop {
            let code = self.input.byte()?;
            match code {
                op::PROTO => {
                    // Protocols past 5 are refused, by the generic reader.
                    if self.uint(1)? > 5 {
                        return None;
                    }
                }
                op::FRAME => {
                    // A frame past the end is a truncated stream.
                    let n = self.uint(8)?;
                    if n > self.input.remaining() {
                        return None;
                    }
                }
                op::STOP => {
                    return matches!(self.stack.as_slice(), [V::Root]).then_some(());
                }
                op::MARK => self.marks.push(self.stack.len()),
                op::POP => {
                    self.pop()?;
                }
                op::NONE => self.stack.push(V::None),
                op::NEWTRUE => self.stack.push(V::Bool(true)),
                op::NEWFALSE => self.stack.push(V::Bool(false)),
                op::BININT => {
                    let n = self.uint(4)? as u32 as i32;
                    self.stack.push(V::Int(n.into()));
                }
                op::BININT1 => {
                    let n = self.uint(1)?;
                    self.stack.push(V::Int(n as i64));
                }
                op::BININT2 => {
                    let n = self.uint(2)?;
                    self.stack.push(V::Int(n as i64));
                }
                op::LONG1 => {
                    let n = self.uint(1)? as usize;
                    let bytes = self.input.take(n)?;
                    if n > 8 {
                        return None;
                    }
                    let mut le = [0u8; 8];
                    le[..n].copy_from_slice(bytes);
                    // Sign-extend from the last byte given.
                    let shift = 64 - 8 * n as u32;
                    let v = if n == 0 {
                        0
                    } else {
                        (i64::from_le_bytes(le) << shift) >> shift
                    };
                    self.stack.push(V::Int(v));
                }
                op::BINFLOAT => {
                    self.input.take(8)?;
                    self.stack.push(V::Float);
                }
                op::SHORT_BINUNICODE => {
                    let n = self.uint(1)? as usize;
                    let v = self.text(n)?;
                    self.stack.push(v);
                }
                op::BINUNICODE => {
                    let n = self.uint(4)? as usize;
                    let v = self.text(n)?;
                    self.stack.push(v);
                }
                op::BINUNICODE8 => {
                    let n = usize::try_from(self.uint(8)?).ok()?;
                    let v = self.text(n)?;
                    self.stack.push(v);
                }
                op::EMPTY_TUPLE => self.stack.push(V::Tuple(self.empty.clone())),
                op::TUPLE1 => self.push_tuple(1)?,
                op::TUPLE2 => self.push_tuple(2)?,
                op::TUPLE3 => self.push_tuple(3)?,
                op::TUPLE => {
                    let at = self.pop_mark()?;
                    self.tuple_from(at)?;
                }
                op::EMPTY_LIST => self.stack.push(V::List(Rc::new(Seq {
                    depth: 1,
                    items: Vec::new(),
                }))),
                op::APPEND => {
                    let at = self.stack.len().checked_sub(1)?;
                    self.extend_list(at)?;
                }
                op::APPENDS => {
                    let at = self.pop_mark()?;
                    self.extend_list(at)?;
                }
                op::EMPTY_DICT => self.stack.push(V::Dict(Rc::new(Map {
                    depth: 1,
                    ..Map::default()
                }))),
                op::SETITEM => {
                    let at = self.stack.len().checked_sub(2)?;
                    self.extend_dict(at)?;
                }
                op::SETITEMS => {
                    let at = self.pop_mark()?;
                    self.extend_dict(at)?;
                }
                op::STACK_GLOBAL => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (V::Str(module), V::Str(name)) = (module, name) else {
                        return None;
                    };
                    let v = self.global(module, name)?;
                    self.stack.push(v);
                }
                op::GLOBAL => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let v = self.global(module, name)?;
                    self.stack.push(v);
                }
                op::NEWOBJ => {
                    // The arguments (ignored: the class is data) are a tuple.
                    let (V::Tuple(_) | V::Ints(_) | V::ArgInts(_)) = self.pop()? else {
                        return None;
                    };
                    match self.pop()? {
                        V::Class(c) if !matches!(c, Class::MemoryFormat | Class::Path) => {
                            self.stack.push(V::Obj(c));
                        }
                        _ => return None,
                    }
                }
                op::REDUCE => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let v = self.reduce(callable, args)?;
                    self.stack.push(v);
                }
                op::BUILD => {
                    let state = self.pop()?;
                    let V::Obj(class) = self.pop()? else {
                        return None;
                    };
                    let v = self.build(class, state)?;
                    self.stack.push(v);
                }
                op::MEMOIZE => {
                    let index = self.memoized;
                    self.memoized += 1;
                    self.memoize(index)?;
                }
                op::BINPUT => {
                    let index = self.uint(1)?;
                    self.memoize(index)?;
                }
                op::LONG_BINPUT => {
                    let index = self.uint(4)?;
                    self.memoize(index)?;
                }
                op::BINGET => {
                    let index = self.uint(1)?;
                    let v = self.memo_get(index)?;
                    self.stack.push(v);
                }
                op::LONG_BINGET => {
                    let index = self.uint(4)?;
                    let v = self.memo_get(index)?;
                    self.stack.push(v);
                }
                _ => return None,
            }
        }
    }

    /// A line of a `GLOBAL` operand, as a string number.
    fn line(&mut self) -> Step<u32> {
        let s = std::str::from_utf8(self.input.line()?).ok()?;
        Some(self.parts.intern(s))
    }

    fn memoize(&mut self, index: u64) -> Step<()> {
        let top = self.stack.last()?;
        if let Some(slot) = self.plan.slot(index) {
            if !top.shareable() {
                return None;
            }
            self.memo[slot] = Some(top.clone());
        }
        Some(())
    }

    fn memo_get(&self, index: u64) -> Step<V> {
        self.memo[self.plan.slot(index)?].clone()
    }

    /// The depth the container below the items from `at` up has once it
    /// holds them; `None` where a mark splits them from it, or where it
    /// would nest too deep.
    fn depth_with_items(&self, at: usize) -> Step<u8> {
        let depth = self
            .stack
            .get(at..)?
            .iter()
            .map(V::depth)
            .max()
            .unwrap_or(0)
            + 1;
        let split = at == 0 || self.marks.last().is_some_and(|&m| m >= at);
        (!split && depth <= MAX_DEPTH).then_some(depth)
    }

    fn extend_list(&mut self, at: usize) -> Step<()> {
        let depth = self.depth_with_items(at)?;
        let (head, items) = self.stack.split_at_mut(at);
        let V::List(list) = head.last_mut()? else {
            return None;
        };
        let list = Rc::get_mut(list)?;
        list.depth = list.depth.max(depth);
        list.items
            .extend(items.iter_mut().map(|v| std::mem::replace(v, V::None)));
        self.stack.truncate(at);
        Some(())
    }

    fn extend_dict(&mut self, at: usize) -> Step<()> {
        let depth = self.depth_with_items(at)?;
        if !(self.stack.len() - at).is_multiple_of(2) {
            return None;
        }
        let (head, items) = self.stack.split_at_mut(at);
        let V::Dict(map) = head.last_mut()? else {
            return None;
        };
        let map = Rc::get_mut(map)?;
        map.depth = map.depth.max(depth);
        for pair in items.chunks_exact_mut(2) {
            let [k, v] = pair else { return None };
            match (std::mem::replace(k, V::None), std::mem::replace(v, V::None)) {
                (V::Index(k), V::Info(v)) => map.storage.push((k, v)),
                // Other keys are strings here.
                (k @ V::Str(_), v) => map.items.push((k, v)),
                _ => return None,
            }
        }
        self.stack.truncate(at);
        Some(())
    }

    fn global(&mut self, module: u32, name: u32) -> Step<V> {
        let (module, name) = (self.parts.string(module), self.parts.string(name));
        if let Some(c) = super::class(module, name) {
            return Some(V::Class(c));
        }
        match allowlist::resolve(module, name).ok()? {
            Global::DType(d) => Some(V::DType(d)),
            g @ (Global::Size | Global::GetLayout) => Some(V::Global(g)),
            _ => None,
        }
    }

    fn reduce(&mut self, callable: V, args: V) -> Step<V> {
        match (callable, args) {
            (V::Global(Global::Size), V::ArgInts(dims)) => Some(V::Size(dims)),
            (V::Global(Global::Size), V::Tuple(args)) => match args.items.as_slice() {
                [] => Some(V::Size(self.parts.dims([]).ok()?)),
                [V::Tuple(t)] if t.items.is_empty() => Some(V::Size(self.parts.dims([]).ok()?)),
                _ => None,
            },
            (
                V::Global(Global::GetLayout) | V::Class(Class::MemoryFormat),
                V::Tuple(_) | V::Ints(_) | V::ArgInts(_),
            ) => Some(V::Tag),
            (V::Class(Class::Path), V::Tuple(args)) => {
                let mut ids = Vec::with_capacity(args.items.len());
                for part in &args.items {
                    let V::Str(s) = part else {
                        return None;
                    };
                    ids.push(*s);
                }
                // Charged before it is made: the parts may be one long
                // string read back many times.
                let len = ids.iter().map(|&s| self.parts.string(s).len() + 1).sum();
                self.parts.charge(len).ok()?;
                let parts: Vec<&str> = ids.iter().map(|&s| self.parts.string(s)).collect();
                let path = parts.join("/");
                Some(V::Str(self.parts.intern(&path)))
            }
            _ => None,
        }
    }
}
