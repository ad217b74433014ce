//! Test support shared by the module's tests: hooks that resolve every
//! global to a tag and interpret the builtins CPython pickles as calls, and a
//! renderer whose output the fixture generator reproduces from the Python
//! objects.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{Graph, Hooks, Limits, Node, NodeId, PickleError, Pickled, Value};

mod fixtures;

pub(crate) use fixtures::FIXTURES;

/// The test hooks' extension values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tag {
    /// `module.name` from `find_class`.
    Global(String),
    /// An instance: a list node `[class, args, state]`, mutated by BUILD.
    Obj(NodeId),
    /// A persistent id.
    Pid(Box<Value<Tag>>),
}

#[derive(Debug, PartialEq)]
pub(crate) enum TestError {
    Pickle(PickleError),
    Hook(String),
    Io(String),
}

impl From<std::io::Error> for TestError {
    fn from(e: std::io::Error) -> Self {
        TestError::Io(e.to_string())
    }
}

impl From<PickleError> for TestError {
    fn from(e: PickleError) -> Self {
        TestError::Pickle(e)
    }
}

pub(crate) struct TestHooks;

fn hook_err<T>(what: &str) -> Result<T, TestError> {
    Err(TestError::Hook(what.to_string()))
}

fn tuple_items(g: &Graph<Tag>, args: &Value<Tag>) -> Result<Vec<Value<Tag>>, TestError> {
    match args.as_node().and_then(|id| g.try_get(id)) {
        Some(Node::Tuple(items)) => Ok(items.clone()),
        _ => hook_err("args not a tuple"),
    }
}

/// The items of an optional single list argument.
fn list_arg(g: &Graph<Tag>, items: &[Value<Tag>]) -> Result<Vec<Value<Tag>>, TestError> {
    match items {
        [] => Ok(Vec::new()),
        [v] => match v.as_node().and_then(|id| g.try_get(id)) {
            Some(Node::List(l)) => Ok(l.clone()),
            _ => hook_err("not a list"),
        },
        _ => hook_err("too many args"),
    }
}

fn obj(g: &mut Graph<Tag>, cls: Value<Tag>, args: Value<Tag>) -> Value<Tag> {
    Value::Ext(Tag::Obj(g.list(vec![cls, args, Value::None])))
}

impl Hooks for TestHooks {
    type Ext = Tag;
    type Error = TestError;

    fn find_class(&mut self, module: &str, name: &str) -> Result<Value<Tag>, TestError> {
        if module == "os" {
            return Err(TestError::Hook(format!("refused {module}.{name}")));
        }
        Ok(Value::Ext(Tag::Global(format!("{module}.{name}"))))
    }

    fn persistent_load(
        &mut self,
        _: &mut Graph<Tag>,
        pid: Value<Tag>,
    ) -> Result<Value<Tag>, TestError> {
        Ok(Value::Ext(Tag::Pid(Box::new(pid))))
    }

    fn reduce(
        &mut self,
        g: &mut Graph<Tag>,
        callable: Value<Tag>,
        args: Value<Tag>,
    ) -> Result<Value<Tag>, TestError> {
        let items = tuple_items(g, &args)?;
        let name = match &callable {
            Value::Ext(Tag::Global(n)) => n.replace("__builtin__.", "builtins."),
            _ => String::new(),
        };
        Ok(match name.as_str() {
            "_codecs.encode" => match items.as_slice() {
                [Value::Str(s), Value::Str(enc)] if &**enc == "latin1" => {
                    let bytes: Result<Vec<u8>, _> = s.chars().map(u8::try_from).collect();
                    match bytes {
                        Ok(b) => Value::Bytes(b.into()),
                        Err(_) => return hook_err("not latin-1"),
                    }
                }
                _ => return hook_err("bad encode args"),
            },
            "builtins.bytes" if items.is_empty() => Value::bytes(b""),
            "builtins.set" => Value::Node(g.add(Node::Set(list_arg(g, &items)?))),
            "builtins.frozenset" => Value::Node(g.add(Node::FrozenSet(list_arg(g, &items)?))),
            "builtins.bytearray" => match items.as_slice() {
                [] => Value::Node(g.add(Node::ByteArray(Vec::new()))),
                [Value::Bytes(b)] => Value::Node(g.add(Node::ByteArray(b.to_vec()))),
                _ => return hook_err("bad bytearray args"),
            },
            "collections.OrderedDict" if items.is_empty() => Value::Node(g.dict(Vec::new())),
            // A call that consumes its arguments, as a tensor rebuild does.
            "test.consume" => {
                drop(items);
                g.release(&args);
                Value::None
            }
            "copy_reg._reconstructor" | "copyreg._reconstructor" => {
                let cls = items.first().cloned().unwrap_or(Value::None);
                let empty = Value::Node(g.tuple(Vec::new()));
                obj(g, cls, empty)
            }
            _ => obj(g, callable, args),
        })
    }

    fn build(
        &mut self,
        g: &mut Graph<Tag>,
        o: Value<Tag>,
        state: Value<Tag>,
    ) -> Result<Value<Tag>, TestError> {
        match &o {
            Value::Ext(Tag::Obj(id)) => match g.try_get_mut(*id) {
                Some(Node::List(l)) if l.len() == 3 => l[2] = state,
                _ => return hook_err("bad object"),
            },
            _ => return hook_err("BUILD on a non-object"),
        }
        Ok(o)
    }

    fn new_obj(
        &mut self,
        g: &mut Graph<Tag>,
        cls: Value<Tag>,
        args: Value<Tag>,
    ) -> Result<Value<Tag>, TestError> {
        Ok(obj(g, cls, args))
    }
}

pub(crate) fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

pub(crate) fn load(data: &[u8]) -> Result<Pickled<Tag>, TestError> {
    super::unpickle(data, &mut TestHooks, &Limits::default())
}

/// [`load`] read through windows of `chunk` bytes ([`unpickle_reader`](super::unpickle_reader)).
pub(crate) fn load_windowed(data: &[u8], chunk: usize) -> Result<Pickled<Tag>, TestError> {
    let open = || Ok::<_, std::io::Error>(data);
    super::read::unpickle_windows(data.len(), chunk, open, &mut TestHooks, &Limits::default())
}

/// The node a value refers to, if any (instances are nodes too).
fn node_of(v: &Value<Tag>) -> Option<NodeId> {
    match v {
        Value::Node(id) | Value::Ext(Tag::Obj(id)) => Some(*id),
        _ => None,
    }
}

/// Renders a value like the Python `render` quoted in `testkit/fixtures.rs`
/// (which made the expected strings): nodes reached more
/// than once are labelled `#n=` at their first rendering and `@n` after.
pub(crate) fn render(g: &Graph<Tag>, root: &Value<Tag>) -> String {
    let tracked = |id: NodeId| !matches!(g.get(id), Node::Tuple(t) if t.is_empty());
    let mut counts: HashMap<NodeId, usize> = HashMap::new();
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        if let Value::Ext(Tag::Pid(p)) = v {
            stack.push(p);
        }
        let Some(id) = node_of(v) else { continue };
        if tracked(id) {
            let c = counts.entry(id).or_insert(0);
            *c += 1;
            if *c > 1 {
                continue;
            }
        }
        stack.extend(g.get(id).values());
    }
    let mut r = Renderer {
        g,
        counts,
        labels: HashMap::new(),
        out: String::new(),
    };
    r.value(root);
    r.out
}

struct Renderer<'g> {
    g: &'g Graph<Tag>,
    counts: HashMap<NodeId, usize>,
    labels: HashMap<NodeId, usize>,
    out: String,
}

impl Renderer<'_> {
    fn seq<'v>(
        &mut self,
        open: &str,
        items: impl IntoIterator<Item = &'v Value<Tag>>,
        close: &str,
    ) {
        self.out.push_str(open);
        for (i, v) in items.into_iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.value(v);
        }
        self.out.push_str(close);
    }

    fn value(&mut self, v: &Value<Tag>) {
        match v {
            Value::None => self.out.push_str("None"),
            Value::Bool(b) => self.out.push_str(if *b { "True" } else { "False" }),
            Value::Int(i) => write!(self.out, "{i}").unwrap(),
            Value::BigInt(i) => write!(self.out, "{i}").unwrap(),
            Value::Float(f) => write!(self.out, "f:{:016x}", f.to_bits()).unwrap(),
            Value::Str(s) => {
                self.out.push('\'');
                for c in s.chars() {
                    if c.is_ascii_alphanumeric() || " _.-".contains(c) {
                        self.out.push(c);
                    } else {
                        write!(self.out, "\\u{{{:x}}}", u32::from(c)).unwrap();
                    }
                }
                self.out.push('\'');
            }
            Value::Bytes(b) => {
                self.out.push_str("b:");
                b.iter().for_each(|x| write!(self.out, "{x:02x}").unwrap());
            }
            Value::Ext(Tag::Global(n)) => write!(self.out, "g:{n}").unwrap(),
            Value::Ext(Tag::Pid(p)) => {
                self.out.push_str("pid(");
                self.value(p);
                self.out.push(')');
            }
            Value::Node(id) | Value::Ext(Tag::Obj(id)) => {
                let id = *id;
                if self.counts.get(&id).copied().unwrap_or(0) > 1 {
                    if let Some(l) = self.labels.get(&id) {
                        write!(self.out, "@{l}").unwrap();
                        return;
                    }
                    let l = self.labels.len();
                    self.labels.insert(id, l);
                    write!(self.out, "#{l}=").unwrap();
                }
                let g = self.g;
                match (v, g.get(id)) {
                    (Value::Ext(_), Node::List(l)) => self.seq("obj[", l, "]"),
                    (_, Node::List(l)) => self.seq("[", l, "]"),
                    (_, Node::Tuple(l)) => self.seq("(", l, ")"),
                    (_, Node::Set(l)) => self.seq("set{", l, "}"),
                    (_, Node::FrozenSet(l)) => self.seq("frozenset{", l, "}"),
                    (_, Node::ByteArray(b)) => {
                        self.out.push_str("bytearray:");
                        b.iter().for_each(|x| write!(self.out, "{x:02x}").unwrap());
                    }
                    (_, Node::Dict(d)) => {
                        self.out.push('{');
                        for (i, (k, v)) in d.iter().enumerate() {
                            if i > 0 {
                                self.out.push_str(", ");
                            }
                            self.value(k);
                            self.out.push_str(": ");
                            self.value(v);
                        }
                        self.out.push('}');
                    }
                }
            }
        }
    }
}
