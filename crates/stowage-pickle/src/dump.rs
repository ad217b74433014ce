//! Writing a whole [`Graph`] value: [`write_value`] walks it with an explicit
//! work stack (graph depth costs heap, not call stack), memoizing and
//! batching as CPython does, and asks the caller's [`WriteHooks`] for what
//! only the caller knows: extension values, the class and state of a dict.

use std::io::Write;

use super::opcode as op;
use super::value::{Graph, Node, NodeId, Value};
use super::write::{Pickler, WriteError};
use super::Map;

/// How many items CPython writes per `APPENDS` / `SETITEMS`.
const BATCH: usize = 1000;

/// How [`write_value`] lays out the objects whose opcodes are a choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// Byte for byte as CPython's `pickle.dumps(obj, 2)`: a lone list item or
    /// dict pair is an `APPEND` / `SETITEM`; `()` is not memoized; sets,
    /// frozensets and bytearrays are the calls CPython reduces them to, with
    /// their argument list and tuple memoized; `b''` is `__builtin__.bytes()`.
    #[default]
    CPython,
    /// The layout of stowage's checkpoints, kept byte for byte across
    /// releases: every batch of list items or dict pairs is marked, even a
    /// lone one; every tuple is memoized, `()` too; a set is `set([items])`
    /// from one marked list, neither it nor the argument tuple memoized; a
    /// bytearray is `bytearray(bytes)` with its argument tuple unmemoized;
    /// `b''` is an unmemoized `_codecs.encode('', 'latin1')` (PyTorch's
    /// `weights_only` loader refuses `__builtin__.bytes`); a frozenset is
    /// [refused](WriteError::Refused) (that loader refuses it too).
    Checkpoint,
}

/// The caller's side of [`write_value`], the counterpart of the reader's
/// [`Hooks`](super::Hooks): everything the graph alone does not say.
///
/// `'g` is the lifetime of the graph and of the state values the hooks give.
pub trait WriteHooks<'g, X, W: Write> {
    /// The caller's error; the writer's own errors convert into it.
    type Error: From<WriteError>;

    /// How containers are laid out.
    const LAYOUT: Layout = Layout::CPython;

    /// Deepest value nesting written: the root is at depth 0, a node's items
    /// and state one deeper. Deeper is [`WriteError::TooDeep`].
    const MAX_DEPTH: usize = usize::MAX;

    /// Writes the extension value `x` (a class, a persistent id, a call).
    ///
    /// # Errors
    /// Whatever the caller refuses, and the pickler's errors.
    fn ext(&mut self, p: &mut Pickler<W>, x: &X) -> Result<(), Self::Error>;

    /// The class (`module`, `name`) that the dict node `id` is an instance
    /// of, written as a call `cls()` before its items, as CPython reduces a
    /// dict subclass (`collections.OrderedDict`). `None`, the default: a
    /// plain dict.
    fn dict_class(&self, id: NodeId) -> Option<(&'static str, &'static str)> {
        let _ = id;
        None
    }

    /// State set on the dict node `id` with `BUILD` after its items (an
    /// `OrderedDict`'s `_metadata`). `None` by default.
    fn state(&self, id: NodeId) -> Option<&'g Value<X>> {
        let _ = id;
        None
    }
}

/// Hooks from a function that writes extension values: CPython's layout, no
/// dict classes or state, no depth limit.
struct ExtFn<F>(F);

impl<X, W, F> WriteHooks<'_, X, W> for ExtFn<F>
where
    W: Write,
    F: FnMut(&mut Pickler<W>, &X) -> Result<(), WriteError>,
{
    type Error = WriteError;

    fn ext(&mut self, p: &mut Pickler<W>, x: &X) -> Result<(), WriteError> {
        (self.0)(p, x)
    }
}

/// Work left on [`write_value`]'s explicit stack. `usize`s are the depth of
/// the values concerned.
enum Task<'g, X> {
    Value(&'g Value<X>, usize),
    /// List items still to append, in batches.
    Items(&'g [Value<X>], usize),
    /// Dict pairs still to set, in batches.
    Pairs(&'g [(Value<X>, Value<X>)], usize),
    Op(u8),
    /// A tuple's items are written.
    EndTuple(NodeId, usize),
    /// A set's or frozenset's item list is written.
    EndSet(NodeId),
}

/// Writes `v` (not followed by `STOP`) as CPython would write the object it
/// stands for, in the hooks' [`Layout`]: containers memoized (a node reached
/// twice is written once, then fetched with `BINGET`; lists and dicts are
/// memoized before their items, so cycles through them work), strings
/// memoized, list and dict items in batches of 1000, sets, frozensets and
/// bytearrays as `__builtin__` calls. Extension values go to
/// [`WriteHooks::ext`].
///
/// # Errors
/// [`WriteError::DanglingNode`] for a node id not in `graph`,
/// [`WriteError::Cycle`] for a cycle that passes through tuples and sets
/// only (which Python cannot build), [`WriteError::TooDeep`] past the hooks'
/// depth, [`WriteError::Refused`] for what the layout refuses, the pickler's
/// errors, and the hooks' own.
pub fn write_value<'g, X, W, H>(
    p: &mut Pickler<W>,
    graph: &'g Graph<X>,
    v: &'g Value<X>,
    hooks: &mut H,
) -> Result<(), H::Error>
where
    W: Write,
    H: WriteHooks<'g, X, W>,
{
    let mut walk = Walk {
        checkpoint: H::LAYOUT == Layout::Checkpoint,
        tasks: vec![Task::Value(v, 0)],
        in_progress: Map::default(),
        mutable_entered: 0,
    };
    while let Some(task) = walk.tasks.pop() {
        match task {
            Task::Value(v, depth) => walk.value(p, graph, v, depth, hooks)?,
            Task::Items(items, depth) => walk.items(p, items, depth)?,
            Task::Pairs(pairs, depth) => walk.pairs(p, pairs, depth)?,
            Task::Op(code) => p.op(code)?,
            Task::EndTuple(id, n) => walk.end_tuple(p, id, n)?,
            Task::EndSet(id) => walk.end_set(p, id)?,
        }
    }
    Ok(())
}

/// [`write_value`]'s state: its work stack and what it knows of the
/// containers being written.
struct Walk<'g, X> {
    /// The hooks' layout is [`Layout::Checkpoint`].
    checkpoint: bool,
    tasks: Vec<Task<'g, X>>,
    /// Tuples and sets are memoized after their items, so a cycle reaches
    /// them again; CPython then writes them again and discards the outer
    /// copy. That terminates only if a list or dict was entered in between,
    /// which `mutable_entered` detects: for each tuple or set being written,
    /// the count of lists and dicts entered when it was entered.
    in_progress: Map<NodeId, Vec<u64>>,
    /// Lists and dicts entered so far.
    mutable_entered: u64,
}

impl<'g, X> Walk<'g, X> {
    /// Writes the value `v` at `depth`: a scalar at once, an extension
    /// value through the hooks, a node as [`Walk::node`] writes it.
    fn value<W, H>(
        &mut self,
        p: &mut Pickler<W>,
        graph: &'g Graph<X>,
        v: &'g Value<X>,
        depth: usize,
        hooks: &mut H,
    ) -> Result<(), H::Error>
    where
        W: Write,
        H: WriteHooks<'g, X, W>,
    {
        if depth > H::MAX_DEPTH {
            let max = H::MAX_DEPTH;
            return Err(WriteError::TooDeep { depth, max }.into());
        }
        match v {
            Value::None => p.none()?,
            Value::Bool(b) => p.bool(*b)?,
            Value::Int(i) => p.int(*i)?,
            Value::BigInt(i) => p.bigint(i)?,
            Value::Float(f) => p.float(*f)?,
            Value::Str(s) => p.str_memoized(s)?,
            Value::Bytes(b) if b.is_empty() && self.checkpoint => {
                p.global_memoized("_codecs", "encode")?;
                p.str_memoized("")?;
                p.str_memoized("latin1")?;
                p.tuple(2)?;
                p.reduce()?;
            }
            Value::Bytes(b) => p.bytes(b)?,
            Value::Ext(x) => hooks.ext(p, x)?,
            Value::Node(id) => self.node(p, graph, *id, depth + 1, hooks)?,
        }
        Ok(())
    }

    /// Writes the node `id`, whose items are at depth `inner`: a `BINGET`
    /// when it is memoized already, else its opening opcodes, with its items
    /// and closing left as tasks.
    fn node<W, H>(
        &mut self,
        p: &mut Pickler<W>,
        graph: &'g Graph<X>,
        id: NodeId,
        inner: usize,
        hooks: &mut H,
    ) -> Result<(), H::Error>
    where
        W: Write,
        H: WriteHooks<'g, X, W>,
    {
        if let Some(&i) = p.nodes.get(&id) {
            p.memo_get(i)?;
            return Ok(());
        }
        let node = graph
            .try_get(id)
            .ok_or(WriteError::DanglingNode { id: id.0 })?;
        let checkpoint = self.checkpoint;
        match node {
            Node::Tuple(items) if items.is_empty() && !checkpoint => p.tuple(0)?,
            Node::Tuple(items) => {
                self.enter(id)?;
                if items.len() > 3 {
                    p.mark()?;
                }
                self.tasks.push(Task::EndTuple(id, items.len()));
                self.push_values(items, inner);
            }
            Node::List(items) => {
                self.mutable_entered += 1;
                p.empty_list()?;
                let i = p.memo_put()?;
                p.nodes.insert(id, i);
                self.tasks.push(Task::Items(items, inner));
            }
            Node::Dict(pairs) => {
                self.mutable_entered += 1;
                match hooks.dict_class(id) {
                    Some((module, name)) => {
                        p.global_memoized(module, name)?;
                        p.tuple(0)?;
                        p.reduce()?;
                    }
                    None => p.empty_dict()?,
                }
                let i = p.memo_put()?;
                p.nodes.insert(id, i);
                if let Some(state) = hooks.state(id) {
                    self.tasks
                        .extend([Task::Op(op::BUILD), Task::Value(state, inner)]);
                }
                self.tasks.push(Task::Pairs(pairs, inner));
            }
            Node::FrozenSet(_) if checkpoint => {
                return Err(WriteError::Refused { kind: "frozenset" }.into())
            }
            Node::Set(items) | Node::FrozenSet(items) => {
                self.enter(id)?;
                p.global_memoized("__builtin__", node.kind())?;
                p.empty_list()?;
                self.tasks.push(Task::EndSet(id));
                if checkpoint {
                    // One marked batch of every item.
                    p.mark()?;
                    self.tasks.push(Task::Op(op::APPENDS));
                    self.push_values(items, inner);
                } else {
                    p.memo_put()?;
                    self.tasks.push(Task::Items(items, inner));
                }
            }
            Node::ByteArray(bytes) => {
                p.global_memoized("__builtin__", "bytearray")?;
                if checkpoint {
                    p.bytes(bytes)?;
                    p.tuple(1)?;
                } else if bytes.is_empty() {
                    p.tuple(0)?;
                } else {
                    p.bytes(bytes)?;
                    p.tuple(1)?;
                    p.memo_put()?;
                }
                p.reduce()?;
                let i = p.memo_put()?;
                p.nodes.insert(id, i);
            }
        }
        Ok(())
    }

    /// Notes that the tuple or set `id` is being written; a cycle back to it
    /// with no list or dict entered in between is [`WriteError::Cycle`].
    fn enter(&mut self, id: NodeId) -> Result<(), WriteError> {
        let entries = self.in_progress.entry(id).or_default();
        if entries.last() == Some(&self.mutable_entered) {
            return Err(WriteError::Cycle { id: id.0 });
        }
        entries.push(self.mutable_entered);
        Ok(())
    }

    /// Pushes the tasks that write `items` at `depth`, the first on top.
    fn push_values(&mut self, items: &'g [Value<X>], depth: usize) {
        self.tasks
            .extend(items.iter().rev().map(|v| Task::Value(v, depth)));
    }

    /// The next batch of list items: one `APPEND`, or a marked `APPENDS`,
    /// the rest left as a task.
    fn items<W: Write>(
        &mut self,
        p: &mut Pickler<W>,
        items: &'g [Value<X>],
        depth: usize,
    ) -> Result<(), WriteError> {
        let (chunk, rest) = items.split_at(items.len().min(BATCH));
        if !rest.is_empty() {
            self.tasks.push(Task::Items(rest, depth));
        }
        match chunk {
            [] => {}
            [one] if !self.checkpoint => {
                self.tasks
                    .extend([Task::Op(op::APPEND), Task::Value(one, depth)]);
            }
            _ => {
                p.mark()?;
                self.tasks.push(Task::Op(op::APPENDS));
                self.push_values(chunk, depth);
            }
        }
        Ok(())
    }

    /// The next batch of dict pairs: one `SETITEM`, or a marked `SETITEMS`,
    /// the rest left as a task.
    fn pairs<W: Write>(
        &mut self,
        p: &mut Pickler<W>,
        pairs: &'g [(Value<X>, Value<X>)],
        depth: usize,
    ) -> Result<(), WriteError> {
        let (chunk, rest) = pairs.split_at(pairs.len().min(BATCH));
        if !rest.is_empty() {
            self.tasks.push(Task::Pairs(rest, depth));
        }
        let op = match chunk {
            [] => return Ok(()),
            [_] if !self.checkpoint => op::SETITEM,
            _ => {
                p.mark()?;
                op::SETITEMS
            }
        };
        self.tasks.push(Task::Op(op));
        for (k, v) in chunk.iter().rev() {
            self.tasks
                .extend([Task::Value(v, depth), Task::Value(k, depth)]);
        }
        Ok(())
    }

    /// Closes the tuple `id` of `n` items, or drops it for its memoized copy
    /// when a cycle wrote it meanwhile.
    fn end_tuple<W: Write>(
        &mut self,
        p: &mut Pickler<W>,
        id: NodeId,
        n: usize,
    ) -> Result<(), WriteError> {
        leave(&mut self.in_progress, id);
        if let Some(&i) = p.nodes.get(&id) {
            // Written meanwhile through a cycle: drop this copy.
            if n > 3 {
                p.pop_mark()?;
            } else {
                (0..n).try_for_each(|_| p.pop())?;
            }
            p.memo_get(i)?;
        } else {
            p.tuple(n)?;
            let i = p.memo_put()?;
            p.nodes.insert(id, i);
        }
        Ok(())
    }

    /// Closes the set or frozenset `id`: the call on its item list, or its
    /// memoized copy when a cycle wrote it meanwhile.
    fn end_set<W: Write>(&mut self, p: &mut Pickler<W>, id: NodeId) -> Result<(), WriteError> {
        leave(&mut self.in_progress, id);
        p.tuple(1)?;
        if !self.checkpoint {
            p.memo_put()?;
        }
        p.reduce()?;
        if let Some(&i) = p.nodes.get(&id) {
            p.pop()?;
            p.memo_get(i)?;
        } else {
            let i = p.memo_put()?;
            p.nodes.insert(id, i);
        }
        Ok(())
    }
}

fn leave(in_progress: &mut Map<NodeId, Vec<u64>>, id: NodeId) {
    if let Some(entries) = in_progress.get_mut(&id) {
        entries.pop();
        if entries.is_empty() {
            in_progress.remove(&id);
        }
    }
}

/// A complete protocol 2 pickle of `v` in CPython's layout: `PROTO 2`, the
/// value, `STOP`. `ext` writes extension values.
///
/// # Errors
/// As [`write_value`].
pub fn dumps<X, F>(graph: &Graph<X>, v: &Value<X>, ext: F) -> Result<Vec<u8>, WriteError>
where
    F: FnMut(&mut Pickler<Vec<u8>>, &X) -> Result<(), WriteError>,
{
    let mut p = Pickler::new(Vec::new())?;
    write_value(&mut p, graph, v, &mut ExtFn(ext))?;
    p.stop()?;
    Ok(p.finish())
}

#[cfg(test)]
mod tests {
    use num_bigint::BigInt;

    use super::super::testkit::{load, render, unhex, Tag};
    use super::*;

    type G = Graph<Tag>;

    fn ext(p: &mut Pickler<Vec<u8>>, t: &Tag) -> Result<(), WriteError> {
        match t {
            Tag::Global(name) => match name.split_once('.') {
                Some((module, name)) => p.global_memoized(module, name),
                None => Err(WriteError::Refused { kind: "global" }),
            },
            _ => Err(WriteError::Refused {
                kind: "extension value",
            }),
        }
    }

    fn write(g: &G, v: &Value<Tag>) -> Vec<u8> {
        dumps(g, v, ext).unwrap()
    }

    /// Writes, reads back, and checks the rendering is unchanged.
    fn round_trip(g: &G, v: &Value<Tag>) -> (G, Value<Tag>) {
        let data = write(g, v);
        let p = load(&data).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(render(&p.graph, &p.root), render(g, v));
        (p.graph, p.root)
    }

    fn big(s: &str) -> Value<Tag> {
        Value::int(s.parse().unwrap())
    }

    #[test]
    fn round_trips_every_value_kind() {
        let mut g = G::new();
        let pow = |e: u32| BigInt::from(1) << e;
        let mut items = vec![Value::None, Value::Bool(true), Value::Bool(false)];
        for i in [
            0,
            1,
            255,
            256,
            65535,
            65536,
            -1,
            -128,
            i32::MIN.into(),
            i32::MAX.into(),
            i64::MIN,
            i64::MAX,
        ] {
            items.push(Value::Int(i));
        }
        for i in [
            pow(63),
            -pow(63) - 1,
            pow(64),
            -pow(64),
            pow(2039) - 1,
            pow(2039),
            -pow(2039),
            -pow(2039) - 1,
        ] {
            items.push(Value::int(i));
        }
        items.push(big("123456789012345678901234567890"));
        for f in [
            1.5,
            -0.0,
            0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::from_bits(0x7ff8_0000_dead_beef),
            5e-324,
            f64::MAX,
        ] {
            items.push(Value::Float(f));
        }
        for s in [
            "",
            "plain",
            "h\u{e9}llo \\ \n \r \0 \u{1a} \u{20ac} \u{1f600}",
            "line\nbreak",
        ] {
            items.push(Value::str(s));
        }
        for b in [&b""[..], b"ab", b"\x00\xff\x80\n\\", &[0xe9; 300]] {
            items.push(Value::bytes(b));
        }
        let tuples: Vec<_> = (0..6)
            .map(|n| Value::Node(g.tuple((0..n).map(Value::Int).collect::<Vec<_>>())))
            .collect();
        items.extend(tuples);
        let inner = g.list(vec![Value::Int(2)]);
        let dict = g.dict(vec![
            (Value::str("a"), Value::Int(1)),
            (Value::str("b"), Value::Node(inner)),
            (Value::Int(3), Value::None),
        ]);
        items.push(Value::Node(dict));
        items.push(Value::Node(g.dict(Vec::new())));
        items.push(Value::Node(g.list(Vec::new())));
        for node in [
            Node::Set(vec![Value::Int(7), Value::str("q")]),
            Node::Set(Vec::new()),
            Node::FrozenSet(vec![Value::Int(9)]),
            Node::FrozenSet(Vec::new()),
            Node::ByteArray(b"yz".to_vec()),
            Node::ByteArray(Vec::new()),
        ] {
            items.push(Value::Node(g.add(node)));
        }
        items.push(Value::Ext(Tag::Global("collections.OrderedDict".into())));
        items.push(Value::Ext(Tag::Global("collections.OrderedDict".into())));
        let root = Value::Node(g.list(items));
        round_trip(&g, &root);
    }

    #[test]
    fn ints_use_cpython_opcodes() {
        let g = G::new();
        let cases: &[(Value<Tag>, &str)] = &[
            (Value::Int(0), "80024b002e"),
            (Value::Int(255), "80024bff2e"),
            (Value::Int(256), "80024d00012e"),
            (Value::Int(65536), "80024a000001002e"),
            (Value::Int(-128), "80024a80ffffff2e"),
            (Value::Int(1 << 31), "80028a0500000080002e"),
            (Value::Int(-(1 << 31) - 1), "80028a05ffffff7fff2e"),
            (
                big("9223372036854775808"),
                "80028a09000000000000008000", /* + STOP */
            ),
        ];
        for (v, hex) in cases {
            let want = if hex.ends_with("2e") {
                unhex(hex)
            } else {
                [unhex(hex), vec![b'.']].concat()
            };
            assert_eq!(write(&g, v), want, "{v:?}");
        }
        // Minimal two's complement lengths at the LONG1/LONG4 boundary, as
        // pickle.dumps(2**2039 - 1, 2) etc. write them.
        let pow = |e: u32| BigInt::from(1) << e;
        let header = |v: BigInt| write(&g, &Value::int(v))[2..7].to_vec();
        assert_eq!(header(pow(2039) - 1)[..2], [op::LONG1, 255]);
        assert_eq!(header(pow(2039)), [op::LONG4, 0, 1, 0, 0]);
        assert_eq!(header(-pow(2039))[..2], [op::LONG1, 255]);
        assert_eq!(header(-pow(2039) - 1), [op::LONG4, 0, 1, 0, 0]);
    }

    #[test]
    fn builtins_match_cpython_bytes() {
        // pickle.dumps(<expr>, 2).hex() from CPython 3.11
        let mut g = G::new();
        let pair = g.add(Node::Set(vec![Value::Int(1), Value::Int(2)]));
        let empty_set = g.add(Node::Set(Vec::new()));
        let fs = g.add(Node::FrozenSet(vec![Value::Int(3)]));
        let ba = g.add(Node::ByteArray(b"ab".to_vec()));
        let ba0 = g.add(Node::ByteArray(Vec::new()));
        let aa = g.list(vec![Value::str("a"), Value::str("a")]);
        let t4 = g.tuple((1..5).map(Value::Int).collect::<Vec<_>>());
        let d1 = g.dict(vec![(Value::str("k"), Value::None)]);
        let d2 = g.dict(vec![
            (Value::Int(1), Value::Int(2)),
            (Value::Int(3), Value::Int(4)),
        ]);
        let l1 = g.list(vec![Value::None]);
        let l2 = g.list(vec![Value::None, Value::None]);
        let cases: &[(Value<Tag>, &str)] = &[
            // b'ab'
            (Value::bytes(b"ab"), "8002635f636f646563730a656e636f64650a710058020000006162710158060000006c6174696e3171028671035271042e"),
            // b''
            (Value::bytes(b""), "8002635f5f6275696c74696e5f5f0a62797465730a7100295271012e"),
            // bytearray(b'ab')
            (Value::Node(ba), "8002635f5f6275696c74696e5f5f0a6279746561727261790a7100635f636f646563730a656e636f64650a710158020000006162710258060000006c6174696e3171038671045271058571065271072e"),
            // bytearray()
            (Value::Node(ba0), "8002635f5f6275696c74696e5f5f0a6279746561727261790a7100295271012e"),
            // {1, 2}
            (Value::Node(pair), "8002635f5f6275696c74696e5f5f0a7365740a71005d7101284b014b02658571025271032e"),
            // set()
            (Value::Node(empty_set), "8002635f5f6275696c74696e5f5f0a7365740a71005d71018571025271032e"),
            // frozenset({3})
            (Value::Node(fs), "8002635f5f6275696c74696e5f5f0a66726f7a656e7365740a71005d71014b03618571025271032e"),
            // ['a', 'a'] (one str object twice)
            (Value::Node(aa), "80025d71002858010000006171016801652e"),
            // (1, 2, 3, 4)
            (Value::Node(t4), "8002284b014b024b034b047471002e"),
            // {'k': None}
            (Value::Node(d1), "80027d710058010000006b71014e732e"),
            // {1: 2, 3: 4}
            (Value::Node(d2), "80027d7100284b014b024b034b04752e"),
            // [None]
            (Value::Node(l1), "80025d71004e612e"),
            // [None, None]
            (Value::Node(l2), "80025d7100284e4e652e"),
        ];
        for (v, hex) in cases {
            assert_eq!(write(&g, v), unhex(hex), "{hex}");
        }
    }

    #[test]
    fn shared_nodes_are_written_once_and_read_back_shared() {
        let mut g = G::new();
        let shared = g.list(vec![Value::Int(1)]);
        let t = g.tuple(vec![Value::Int(5)]);
        let root = Value::Node(g.tuple(vec![
            Value::Node(shared),
            Value::Node(shared),
            Value::Node(t),
            Value::Node(t),
        ]));
        let (g2, root2) = round_trip(&g, &root);
        let Node::Tuple(items) = g2.get(root2.as_node().unwrap()) else {
            panic!()
        };
        assert_eq!(items[0], items[1]);
        assert_eq!(items[2], items[3]);
        assert_ne!(items[0], items[2]);
    }

    #[test]
    fn cycles_round_trip() {
        let mut g = G::new();
        // l = [l]
        let l = g.list(Vec::new());
        g.get_mut(l).clone_from(&Node::List(vec![Value::Node(l)]));
        // d = {'self': d}
        let d = g.dict(Vec::new());
        *g.get_mut(d) = Node::Dict(vec![(Value::str("self"), Value::Node(d))]);
        // t = (l2, 1, 2, 3); l2 = [t]  (tuple recursion through a list)
        let l2 = g.list(Vec::new());
        let t = g.tuple(vec![
            Value::Node(l2),
            Value::Int(1),
            Value::Int(2),
            Value::Int(3),
        ]);
        *g.get_mut(l2) = Node::List(vec![Value::Node(t)]);
        // t1 = (l3,); l3 = [t1]
        let l3 = g.list(Vec::new());
        let t1 = g.tuple(vec![Value::Node(l3)]);
        *g.get_mut(l3) = Node::List(vec![Value::Node(t1)]);
        // s = set{l4}; l4 = [s]  (not buildable in Python, but writable)
        let l4 = g.list(Vec::new());
        let s = g.add(Node::Set(vec![Value::Node(l4)]));
        *g.get_mut(l4) = Node::List(vec![Value::Node(s)]);
        // t5 = (l5, l6); l5 = [t5]; l6 = [t5]: the tuple is entered three times
        let (l5, l6) = (g.list(Vec::new()), g.list(Vec::new()));
        let t5 = g.tuple(vec![Value::Node(l5), Value::Node(l6)]);
        *g.get_mut(l5) = Node::List(vec![Value::Node(t5)]);
        *g.get_mut(l6) = Node::List(vec![Value::Node(t5)]);
        for root in [l, d, t, t1, l2, s, t5] {
            round_trip(&g, &Value::Node(root));
        }
    }

    #[test]
    fn impossible_graphs_are_errors() {
        let mut g = G::new();
        let t = g.tuple(Vec::new());
        *g.get_mut(t) = Node::Tuple(vec![Value::Int(1), Value::Node(t)]);
        let e = dumps(&g, &Value::Node(t), ext).unwrap_err();
        assert!(matches!(e, WriteError::Cycle { id } if id == t.0), "{e:?}");
        let e = dumps(&g, &Value::Node(NodeId(7)), ext).unwrap_err();
        assert!(matches!(e, WriteError::DanglingNode { id: 7 }), "{e:?}");
    }

    #[test]
    fn items_are_batched_by_1000() {
        let mut g = G::new();
        let list = g.list(vec![Value::None; 2500]);
        let mut want = unhex("80025d7100");
        for n in [1000, 1000, 500] {
            want.push(op::MARK);
            want.extend(vec![op::NONE; n]);
            want.push(op::APPENDS);
        }
        want.push(op::STOP);
        assert_eq!(write(&g, &Value::Node(list)), want);
        let dict = g.dict(vec![(Value::None, Value::None); 1001]);
        let want = [
            unhex("80027d7100"),
            vec![op::MARK],
            vec![op::NONE; 2000],
            unhex("754e4e732e"),
        ]
        .concat();
        assert_eq!(write(&g, &Value::Node(dict)), want);
        let items: Vec<_> = (0..2500).map(Value::Int).collect();
        let list = g.list(items);
        round_trip(&g, &Value::Node(list));
    }

    #[test]
    fn long_memo_indexes_round_trip() {
        let mut g = G::new();
        let mut items: Vec<_> = (0..300).map(|i| Value::str(&format!("s{i}"))).collect();
        items.extend([Value::str("s0"), Value::str("s299")]);
        let root = Value::Node(g.list(items));
        let data = write(&g, &root);
        assert!(data.windows(5).any(|w| w == [op::LONG_BINPUT, 44, 1, 0, 0]));
        assert!(data.windows(5).any(|w| w == [op::LONG_BINGET, 44, 1, 0, 0]));
        round_trip(&g, &root);
    }

    #[test]
    fn deep_graphs_write_without_recursion() {
        let mut g = G::new();
        let mut v = Value::None;
        for _ in 0..100_000 {
            v = Value::Node(g.list(vec![v]));
        }
        let data = write(&g, &v);
        assert!(data.len() > 100_000);
    }

    /// Checkpoint layout, with an `OrderedDict` class and `BUILD` state.
    struct Ckpt<'g> {
        ordered: NodeId,
        state: &'g Value<Tag>,
    }

    impl<'g> WriteHooks<'g, Tag, Vec<u8>> for Ckpt<'g> {
        type Error = WriteError;
        const LAYOUT: Layout = Layout::Checkpoint;
        const MAX_DEPTH: usize = 3;

        fn ext(&mut self, p: &mut Pickler<Vec<u8>>, t: &Tag) -> Result<(), WriteError> {
            ext(p, t)
        }
        fn dict_class(&self, id: NodeId) -> Option<(&'static str, &'static str)> {
            (id == self.ordered).then_some(("collections", "OrderedDict"))
        }
        fn state(&self, id: NodeId) -> Option<&'g Value<Tag>> {
            (id == self.ordered).then_some(self.state)
        }
    }

    fn write_checkpoint<'g>(
        g: &'g G,
        v: &'g Value<Tag>,
        hooks: &mut Ckpt<'g>,
    ) -> Result<Vec<u8>, WriteError> {
        let mut p = Pickler::new(Vec::new())?;
        write_value(&mut p, g, v, hooks)?;
        p.stop()?;
        Ok(p.finish())
    }

    #[test]
    fn checkpoint_layout() {
        let mut g = G::new();
        let state = Value::Int(7);
        let od = g.dict(vec![(Value::Int(1), Value::None)]);
        let l1 = g.list(vec![Value::None]);
        let t0 = g.tuple(Vec::new());
        let set = g.add(Node::Set(vec![Value::Int(1)]));
        let ba = g.add(Node::ByteArray(b"a".to_vec()));
        let fs = Value::Node(g.add(Node::FrozenSet(Vec::new())));
        // Depth: the root is 0, so three nested lists hold a value at depth 3.
        let mut deep = Value::None;
        for _ in 0..3 {
            deep = Value::Node(g.list(vec![deep]));
        }
        let deeper = Value::Node(g.list(vec![deep.clone()]));
        let cases: &[(Value<Tag>, &str)] = &[
            // OrderedDict(), BINPUT, MARK 1 None SETITEMS, 7 BUILD
            (Value::Node(od), "800263636f6c6c656374696f6e730a4f726465726564446963740a710029527101284b014e754b07622e"),
            // [None]: a marked batch of one
            (Value::Node(l1), "80025d7100284e652e"),
            // (): memoized
            (Value::Node(t0), "80022971002e"),
            // set([1]): one marked list, neither it nor (list,) memoized
            (Value::Node(set), "8002635f5f6275696c74696e5f5f0a7365740a71005d284b0165855271012e"),
            // bytearray(b'a'): (bytes,) not memoized
            (Value::Node(ba), "8002635f5f6275696c74696e5f5f0a6279746561727261790a7100635f636f646563730a656e636f64650a7101580100000061710258060000006c6174696e317103867104527105855271062e"),
            // b'': _codecs.encode('', 'latin1'), not memoized
            (Value::bytes(b""), "8002635f636f646563730a656e636f64650a71005800000000710158060000006c6174696e31710286522e"),
        ];
        let write = |v| {
            write_checkpoint(
                &g,
                v,
                &mut Ckpt {
                    ordered: od,
                    state: &state,
                },
            )
        };
        for (v, hex) in cases {
            let got = write(v).unwrap();
            assert_eq!(got, unhex(hex), "{hex}");
            if v.as_node() != Some(od) {
                load(&got).unwrap();
            }
        }
        let e = write(&fs).unwrap_err();
        assert!(
            matches!(e, WriteError::Refused { kind: "frozenset" }),
            "{e:?}"
        );
        write(&deep).unwrap();
        let e = write(&deeper).unwrap_err();
        assert!(
            matches!(e, WriteError::TooDeep { depth: 4, max: 3 }),
            "{e:?}"
        );
    }
}
