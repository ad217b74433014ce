//! A dict key as a step of a path (`model.layers.0.weight`): strings and
//! integers as themselves, any other key as Python's `str()` prints it
//! where that needs no tensor's data, and never an address.

use crate::checkpoint::pickle::{Graph, Node, Value};

use super::graph::PathKey;
use super::object::Object;
use crate::DType;

/// The path step for a dict key: strings and integers as themselves, any
/// other key as [`key_text`] writes it.
pub(crate) fn path_key(graph: &Graph<Object>, k: &Value<Object>) -> PathKey {
    match k {
        Value::Str(s) => PathKey::Key(s.to_string()),
        Value::Int(i) => PathKey::Index(*i),
        other => {
            let mut text = String::new();
            key_text(graph, other, KEY_DEPTH, &mut text);
            if text.len() > KEY_BYTES {
                let mut end = KEY_BYTES;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text.push('…');
            }
            PathKey::Key(text)
        }
    }
}

/// How deep [`key_text`] writes tuples in tuples (a pickle may nest them
/// without end, or loop).
const KEY_DEPTH: usize = 4;

/// How many bytes of a key [`key_text`] writes before it cuts the rest to
/// `…`: a key is named once per path through it, and a pickle may make one
/// as large as itself (a tuple of a tuple reached a thousand times).
const KEY_BYTES: usize = 256;

/// A dict key as a path step: as Python's `str()` prints it where that
/// needs no tensor's data (`True`, `None`, `0.5`, `b'ab'`, `(1, 'a')`,
/// `torch.float16`, `cpu`, `torch.Size([2])`), a tensor or an array by its
/// dtype and shape (`tensor(float32, [3, 4])`). Never an address: one file
/// gives the same paths in every load and every process (an optimizer's
/// `state` saved whole is keyed by its parameters).
///
/// Writes a little past [`KEY_BYTES`] at most (the caller cuts it there):
/// each string, bytes and tuple stops once the text is that long.
fn key_text(graph: &Graph<Object>, k: &Value<Object>, depth: usize, out: &mut String) {
    use std::fmt::Write as _;
    let full = |out: &String| out.len() > KEY_BYTES;
    if full(out) {
        return;
    }
    // Writing to a `String` cannot fail.
    let _ = match k {
        // In a tuple (a key that is a string is the path step itself).
        Value::Str(s) => {
            out.push('\'');
            for c in s.chars() {
                if full(out) {
                    break;
                }
                if c == '\'' {
                    out.push('\\');
                }
                out.push(c);
            }
            write!(out, "'")
        }
        Value::Int(i) => write!(out, "{i}"),
        Value::Bool(b) => write!(out, "{}", if *b { "True" } else { "False" }),
        Value::None => write!(out, "None"),
        Value::Float(f) if f.is_nan() => write!(out, "nan"),
        // `1.0`, `0.5`, `inf`: Python's spelling but for large exponents.
        Value::Float(f) => write!(out, "{f:?}"),
        Value::BigInt(b) => write!(out, "{}", super::int_text(b)),
        Value::Bytes(b) => {
            out.push_str("b'");
            for &c in b.iter() {
                if full(out) {
                    break;
                }
                let _ = match c {
                    b'\\' | b'\'' => write!(out, "\\{}", char::from(c)),
                    0x20..=0x7e => write!(out, "{}", char::from(c)),
                    _ => write!(out, "\\x{c:02x}"),
                };
            }
            write!(out, "'")
        }
        Value::Node(id) => match graph.get(*id) {
            Node::FrozenSet(items) if items.is_empty() => write!(out, "frozenset()"),
            node @ (Node::Tuple(items) | Node::FrozenSet(items)) if depth > 0 => {
                let tuple = matches!(node, Node::Tuple(_));
                out.push_str(if tuple { "(" } else { "frozenset({" });
                for (i, item) in items.iter().enumerate() {
                    if full(out) {
                        break;
                    }
                    if i > 0 {
                        out.push_str(", ");
                    }
                    key_text(graph, item, depth - 1, out);
                }
                let close = match (tuple, items.len()) {
                    (true, 1) => ",)",
                    (true, _) => ")",
                    (false, _) => "})",
                };
                write!(out, "{close}")
            }
            node => write!(out, "<{}>", node.kind()),
        },
        Value::Ext(o) => match o {
            Object::Tensor(t) => {
                let t = &t.tensor;
                write!(out, "tensor({}, {:?})", t.dtype().name(), t.shape())
            }
            Object::NdArray(a) => write!(out, "array({}, {:?})", a.dtype.code, a.tensor.shape()),
            Object::Storage(s) => {
                write!(out, "storage({})", s.dtype.map_or("untyped", DType::name))
            }
            Object::DType(d) => write!(out, "torch.{}", d.name()),
            Object::Device(d) => write!(out, "{d}"),
            Object::Size(s) => write!(out, "torch.Size({s:?})"),
            Object::Complex(c) => write!(out, "({}{:+}j)", c.re, c.im),
            Object::QScheme(q) => write!(out, "torch.{q}"),
            Object::Layout(l) => write!(out, "torch.{l}"),
            Object::Data(d) => write!(out, "{d}"),
            Object::Class(c) => write!(out, "<class '{}.{}'>", c.module, c.name),
            Object::Global(g) => write!(out, "{g:?}"),
            Object::NumpyScalar(n) => write!(out, "{:?}", n.value),
            Object::NumpyDType(n) => write!(out, "dtype('{}{}')", n.byteorder, n.code),
        },
    };
}

#[cfg(test)]
mod tests {
    use crate::checkpoint::{dotted, PyValue};
    use crate::{Checkpoint, DType, Device, LoadMode, LoadOptions, Tensor};

    /// An optimizer's `state` saved whole is keyed by its parameters: the
    /// paths through such keys, and through tuples, bytes, dtypes and the
    /// like, read the same in an eager and a lazy load, and in a load of
    /// the file saved again, with no address in them.
    #[test]
    fn keys_of_every_kind_give_the_same_paths_in_every_load() {
        let param = Tensor::from_vec(vec![1.0f32; 12], &[3, 4]).unwrap();
        let t = |x: f32| PyValue::from(Tensor::from_slice(&[x]).unwrap());
        let keyed = |k: PyValue, x: f32| (k, PyValue::Dict(vec![("exp_avg".into(), t(x))]));
        let state = PyValue::Dict(vec![
            keyed(param.clone().into(), 1.0),
            keyed(PyValue::Tuple(vec![1.into(), "a'b".into()]), 2.0),
            keyed(PyValue::Tuple(vec![7.into()]), 3.0),
            keyed(PyValue::Bytes(b"k\x00'".to_vec()), 4.0),
            keyed(DType::BFloat16.into(), 5.0),
            keyed(Device::CPU.into(), 6.0),
            keyed(PyValue::Size(vec![2, 3]), 7.0),
            keyed(true.into(), 8.0),
            keyed(PyValue::None, 9.0),
            keyed(2.0.into(), 10.0),
        ]);
        let ckpt = Checkpoint::builder()
            .value("state", state)
            .value("param", param)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("optimizer.pt");
        crate::save(&file, &ckpt).unwrap();
        let names = |ckpt: &Checkpoint| -> Vec<String> {
            let tensors = ckpt.tensors().unwrap();
            tensors.iter().map(|(p, _)| dotted(p)).collect()
        };
        let eager = crate::load(&file).unwrap();
        let want = [
            "state.tensor(float32, [3, 4]).exp_avg",
            "state.(1, 'a\\'b').exp_avg",
            "state.(7,).exp_avg",
            "state.b'k\\x00\\''.exp_avg",
            "state.torch.bfloat16.exp_avg",
            "state.cpu.exp_avg",
            "state.torch.Size([2, 3]).exp_avg",
            "state.True.exp_avg",
            "state.None.exp_avg",
            "state.2.0.exp_avg",
            "param",
        ];
        assert_eq!(names(&eager), want);
        let lazy = LoadOptions::default().with_mode(LoadMode::Lazy);
        assert_eq!(names(&crate::load_with(&file, &lazy).unwrap()), want);
        let again = dir.path().join("again.pt");
        crate::save(&again, &eager).unwrap();
        assert_eq!(names(&crate::load(&again).unwrap()), want);
    }

    /// A key as large as the pickle (a tuple of one tuple of a thousand
    /// items, reached a thousand times; a MiB of bytes; an int of 100 KB)
    /// names its path in a few hundred bytes.
    #[test]
    fn a_huge_key_is_cut() {
        let inner = std::sync::Arc::new(PyValue::Tuple((0..1000).map(PyValue::Int).collect()));
        let wide = PyValue::Tuple(vec![PyValue::Shared(inner); 1000]);
        let t = || PyValue::from(Tensor::from_slice(&[1.0f32]).unwrap());
        let ckpt = Checkpoint::builder()
            .value(
                "by",
                PyValue::Dict(vec![
                    (wide, t()),
                    (PyValue::Bytes(vec![7; 1 << 20]), t()),
                    (
                        PyValue::BigInt(num_bigint::BigInt::from(7u32).pow(300_000u32)),
                        t(),
                    ),
                ]),
            )
            .build()
            .unwrap();
        let tensors = ckpt.tensors().unwrap();
        let names: Vec<String> = tensors.iter().map(|(p, _)| dotted(p)).collect();
        assert!(names[0].starts_with("by.((0, 1, 2, "), "{}", names[0]);
        assert!(names[1].starts_with("by.b'\\x07\\x07"), "{}", names[1]);
        // Past Python's 4,300 digits for `str()`: hex, which is quick.
        assert!(names[2].starts_with("by.0x"), "{}", names[2]);
        for name in &names {
            assert!(
                name.len() <= 3 + 256 + '…'.len_utf8(),
                "{} bytes",
                name.len()
            );
            assert!(name.ends_with('…'), "{name}");
        }
    }
}
