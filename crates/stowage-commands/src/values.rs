//! Non-tensor values as the CLI shows them: the contract's JSON form
//! (`{"path": …, "type": …, "value": …}`) and a short tree for people.

use std::io::Write;
use stowage::CheckpointError;

use serde_json::{json, Map, Value as Json};
use stowage::checkpoint::pickle::Value;
use stowage::checkpoint::{int_text, Object, PathKey, PyData, TensorObject, ValueKind, ValueRef};
use stowage::Scalar;

use crate::listing::path_json;

/// Integers up to this magnitude are JSON numbers; larger ones decimal strings
/// (a JSON reader's doubles hold every integer up to 2^53 exactly).
const MAX_JSON_INT: u64 = 1 << 53;

/// A float as JSON: a number when finite, else `"nan"`, `"inf"` or `"-inf"`.
pub fn float_json(v: f64) -> Json {
    if v.is_nan() {
        json!("nan")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(v)
    }
}

/// The contract's `type` of a leaf and the fields beside it (`value`, and
/// `storage_key` for a storage object), without the path.
pub fn typed_json(v: &ValueRef<'_>) -> Map<String, Json> {
    let mut o = Map::new();
    let kind = v.kind();
    let value = match v.raw() {
        Value::None => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) if i.unsigned_abs() <= MAX_JSON_INT => json!(i),
        Value::Int(i) => json!(i.to_string()),
        Value::BigInt(b) => json!(int_text(b)),
        Value::Float(f) => float_json(*f),
        Value::Str(s) => json!(&**s),
        Value::Bytes(b) => json!(hex::encode(b)),
        Value::Node(_) => match v.as_bytes() {
            Ok(b) => json!(hex::encode(b)),
            // Only empty containers are leaves.
            Err(_) => json!([]),
        },
        Value::Ext(x) => match x {
            Object::DType(d) => json!(d.name()),
            Object::Device(d) => json!(d.to_string()),
            Object::Size(s) => json!(s),
            Object::Complex(c) => json!([float_json(c.re), float_json(c.im)]),
            Object::QScheme(q) => json!(q),
            Object::Layout(l) => json!(l),
            // A class or function named as a value, not called: the
            // contract's `type`, with its `module` and `name`.
            Object::Global(g) => {
                let (module, name) = g.path();
                type_json(&mut o, module, name)
            }
            Object::Storage(s) => {
                o.insert("storage_key".into(), json!(&*s.key));
                Json::Null
            }
            Object::NdArray(a) => {
                o.insert("type".into(), json!(kind.name()));
                o.insert("dtype".into(), json!(a.dtype.name()));
                o.insert("shape".into(), json!(a.tensor.shape()));
                let sha = crate::data::sha256(&TensorObject::new(a.tensor.clone()), |_| ());
                o.insert("sha256".into(), sha.map_or(Json::Null, Json::String));
                return o;
            }
            Object::NumpyScalar(s) => {
                o.insert("dtype".into(), json!(s.dtype.name()));
                scalar_json(s.value)
            }
            Object::NumpyDType(d) => json!(d.name()),
            Object::Data(d) => data_json(d, &mut o),
            Object::Class(c) => type_json(&mut o, &c.module, &c.name),
            // Tensors are listed under "tensors", never as values.
            _ => Json::Null,
        },
    };
    if let (Some(obj), ValueKind::Object) = (v.as_object(), kind) {
        o.insert("module".into(), json!(obj.module));
        o.insert("name".into(), json!(obj.name));
    }
    // A container of a type JSON and the model lack: listed as its dict or
    // list, with `class` naming the Python type.
    if let Some(class) = v.container_class() {
        o.insert("class".into(), json!(class));
        if matches!(kind, ValueKind::Set | ValueKind::FrozenSet) {
            o.insert("type".into(), json!("list"));
        }
    }
    o.entry("type").or_insert_with(|| json!(kind.name()));
    o.insert("value".into(), value);
    o
}

/// An integer as JSON: a number up to 2^53 in magnitude, else a decimal string.
fn int_json(i: i128) -> Json {
    if i.unsigned_abs() <= u128::from(MAX_JSON_INT) {
        json!(i as i64)
    } else {
        json!(i.to_string())
    }
}

/// A numpy scalar's value as JSON.
fn scalar_json(s: Scalar) -> Json {
    match s {
        Scalar::Bool(b) => json!(b),
        Scalar::Int(i) => int_json(i.into()),
        Scalar::UInt(u) => int_json(u.into()),
        Scalar::Float(f) => float_json(f),
        Scalar::Complex(c) => json!([float_json(c.re), float_json(c.im)]),
    }
}

/// A decoded `datetime`, `pathlib`, `slice` … value as JSON: ISO 8601 text
/// for dates and times, `[days, seconds, microseconds]` for a timedelta, the
/// UTC offset in seconds (with `name` when it has one) for a time zone, the text (with
/// `class`) for a path, `[start, stop, step]` for a slice or range.
fn data_json(d: &PyData, o: &mut Map<String, Json>) -> Json {
    match d {
        PyData::TimeDelta(t) => json!([t.days, t.seconds, t.microseconds]),
        PyData::TimeZone(tz) => {
            if let Some(name) = &tz.name {
                o.insert("name".into(), json!(name));
            }
            // `utcoffset().total_seconds()`: whole seconds as an integer.
            let us = tz.offset.total_microseconds();
            match (us % 1_000_000, i64::try_from(us / 1_000_000)) {
                (0, Ok(secs)) => json!(secs),
                _ => float_json(us as f64 / 1e6),
            }
        }
        PyData::Path { class, path } => {
            o.insert("class".into(), json!(class));
            json!(path)
        }
        PyData::Slice(s) => json!(s),
        PyData::Range(r) => json!(r),
        PyData::Type(t) => type_json(o, "builtins", t),
        _ => json!(d.to_string()),
    }
}

/// A class or function named as a value, never called: the contract's
/// `type`, with its `module` and `name`; its `value` is null.
fn type_json(o: &mut Map<String, Json>, module: &str, name: &str) -> Json {
    o.insert("type".into(), json!("type"));
    o.insert("module".into(), json!(module));
    o.insert("name".into(), json!(name));
    Json::Null
}

/// One entry of `inspect --json`'s `"objects"`: path, module, name.
pub fn object_json(v: &ValueRef<'_>) -> Json {
    let (module, name) = v.class().unwrap_or_default();
    json!({"path": path_json(v.path()), "module": module, "name": name})
}

/// One entry of `inspect --json`'s `"values"`: path, type, value.
pub fn value_json(v: &ValueRef<'_>) -> Json {
    let mut o = Map::new();
    o.insert("path".into(), path_json(v.path()));
    o.extend(typed_json(v));
    Json::Object(o)
}

/// Bytes as Python writes them inside `b'…'`.
fn escaped(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            b'\\' => "\\\\".to_owned(),
            b'\'' => "\\'".to_owned(),
            0x20..=0x7e => char::from(b).to_string(),
            _ => format!("\\x{b:02x}"),
        })
        .collect()
}

/// Shortens text past `max` characters with `…`.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

/// A leaf as Python would print it, clipped: `3`, `0.001`, `'gpt'`,
/// `torch.bfloat16`, `torch.Size([4, 3])`, `{}`.
pub fn value_text(v: &ValueRef<'_>) -> String {
    const MAX: usize = 60;
    let float = |f: f64| {
        if f.is_nan() {
            "nan".to_owned()
        } else if f.is_infinite() {
            if f > 0.0 { "inf" } else { "-inf" }.to_owned()
        } else {
            format!("{f:?}")
        }
    };
    match v.raw() {
        Value::None => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Int(i) => i.to_string(),
        Value::BigInt(b) => clip(&int_text(b), MAX),
        Value::Float(f) => float(*f),
        Value::Str(s) => format!("{:?}", clip(s, MAX)),
        Value::Bytes(b) => format!("b'{}'", clip(&escaped(b), MAX)),
        Value::Node(_) => match v.kind() {
            ValueKind::Object => v
                .class()
                .map(|(m, n)| format!("<{m}.{n} object>"))
                .unwrap_or_default(),
            ValueKind::Dict => "{}".into(),
            ValueKind::List => "[]".into(),
            ValueKind::Tuple => "()".into(),
            ValueKind::ByteArray => format!(
                "bytearray('{}')",
                clip(&hex::encode(v.as_bytes().unwrap_or_default()), MAX)
            ),
            other => format!("{other}()"),
        },
        Value::Ext(x) => match x {
            Object::DType(d) => format!("torch.{}", d.name()),
            Object::Device(d) => format!("device('{d}')"),
            Object::Size(s) => format!("torch.Size({s:?})"),
            Object::Complex(c) => format!("({}{:+}j)", float(c.re), c.im),
            Object::QScheme(q) => format!("torch.{q}"),
            Object::Layout(l) => format!("torch.{l}"),
            Object::Global(g) => format!("{g:?}"),
            Object::Storage(s) => format!("storage {}", s.key),
            Object::NdArray(a) => format!(
                "array(dtype={}, shape={:?})",
                a.dtype.name(),
                a.tensor.shape()
            ),
            Object::NumpyScalar(s) => format!("np.{}({})", s.dtype.name(), scalar_json(s.value)),
            Object::NumpyDType(d) => format!("dtype('{}')", d.name()),
            Object::Data(d) => d.to_string(),
            Object::Class(c) => format!("<{}.{}>", c.module, c.name),
            _ => String::new(),
        },
    }
}

/// The items of a short list or tuple of scalars written inline, Python's
/// way (`(0.9, 0.999)`, `[4, 3]`), or `None` for any other value.
fn inline(v: &ValueRef<'_>) -> Option<String> {
    const MAX_ITEMS: usize = 8;
    let (open, close) = match v.kind() {
        ValueKind::List => ("[", "]"),
        ValueKind::Tuple => ("(", ")"),
        _ => return None,
    };
    let items: Vec<ValueRef<'_>> = v.as_list().ok()?.collect();
    if items.is_empty() || items.len() > MAX_ITEMS {
        return None;
    }
    let mut texts = Vec::with_capacity(items.len());
    for item in &items {
        if item.kind().is_container() || item.kind() == ValueKind::Tensor {
            return None;
        }
        texts.push(value_text(item));
    }
    let comma = if items.len() == 1 && close == ")" {
        ","
    } else {
        ""
    };
    Some(format!("{open}{}{comma}{close}", texts.join(", ")))
}

/// Writes the leaves as an indented tree under a `values:` line, at most
/// `max_lines` lines, then how many were left out. A short list or tuple of
/// scalars is written on one line.
pub fn tree(
    ckpt: &stowage::Checkpoint,
    leaves: &[ValueRef<'_>],
    max_lines: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if leaves.is_empty() {
        return Ok(());
    }
    writeln!(out, "values:")?;
    let mut previous: &[PathKey] = &[];
    let mut lines = 0;
    let mut i = 0;
    while i < leaves.len() {
        let leaf = &leaves[i];
        let mut path = leaf.path();
        let mut text = value_text(leaf);
        let mut taken = 1;
        // A short list or tuple of scalars: its parent, on one line.
        if let Some((_, parent_path)) = path.split_last() {
            if let Some(line) = ckpt
                .root_value()
                .get_path(parent_path)
                .ok()
                .as_ref()
                .and_then(inline)
            {
                let n = ckpt
                    .root_value()
                    .get_path(parent_path)
                    .and_then(|p| p.len())
                    .unwrap_or(1);
                if !parent_path.is_empty()
                    && leaves[i..].len() >= n
                    && leaves[i..i + n]
                        .iter()
                        .all(|l| l.path().starts_with(parent_path))
                {
                    path = parent_path;
                    text = line;
                    taken = n;
                }
            }
        }
        let common = previous
            .iter()
            .zip(path)
            .take_while(|(a, b)| a == b)
            .count();
        // The containers on the way that the previous leaf did not open.
        let open = path.len().saturating_sub(1);
        let needed = open.saturating_sub(common.min(open)) + 1;
        if lines + needed > max_lines {
            writeln!(
                out,
                "  … {} more values (all of them: --json)",
                leaves.len() - i
            )?;
            return Ok(());
        }
        for (depth, key) in path.iter().enumerate().take(open).skip(common.min(open)) {
            writeln!(out, "{:indent$}{key}:", "", indent = 2 * (depth + 1))?;
        }
        let name = path
            .last()
            .map_or_else(|| "(root)".to_owned(), |k| k.to_string());
        writeln!(
            out,
            "{:indent$}{name}: {text}",
            "",
            indent = 2 * path.len().max(1)
        )?;
        lines += needed;
        previous = path;
        i += taken;
    }
    Ok(())
}

/// Every non-tensor leaf of `ckpt`, once per path; when a structure is shared
/// too often for that (past the library's walk limit), each shared container
/// once, at its first path, with a warning naming `file`, and `true`.
///
/// # Errors
/// When even that walk exceeds its limit.
pub fn leaves<'c>(
    ckpt: &'c stowage::Checkpoint,
    file: &std::path::Path,
) -> Result<(Vec<ValueRef<'c>>, bool), crate::CommandError> {
    match ckpt.root_value().leaves() {
        Err(stowage::Error::Checkpoint(CheckpointError::LimitExceeded { .. })) => {
            log::warn!(
                "{}: values are shared too often to list once per path; each shared container is listed once, at its first path",
                file.display()
            );
            let once = ckpt.root_value().leaves_once();
            Ok((once.map_err(crate::CommandError::input)?, true))
        }
        other => Ok((other.map_err(crate::CommandError::input)?, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigInt;
    use stowage::checkpoint::PyValue;
    use stowage::Checkpoint;

    /// Ints past 64 bits are decimal up to Python's 4,300 digits for
    /// `str()`, hex past them: exact, and written in time linear in their
    /// length (a pickle's int of 4 MB took 9 s as decimal digits).
    #[test]
    fn ints_past_python_s_str_limit_are_hex() {
        let small: BigInt = BigInt::from(2u32).pow(100u32) + 7;
        let huge: BigInt = -BigInt::from(7u32).pow(300_000u32);
        let ckpt = Checkpoint::builder()
            .value("small", PyValue::BigInt(small.clone()))
            .value("huge", PyValue::BigInt(huge.clone()))
            .build()
            .unwrap();
        let root = ckpt.root_value();
        let text = |name: &str| typed_json(&root.get(name).unwrap())["value"].clone();
        assert_eq!(text("small"), json!(small.to_string()));
        assert_eq!(
            text("huge"),
            json!(format!("-0x{}", (-&huge).to_str_radix(16)))
        );
        assert!(value_text(&root.get("huge").unwrap()).starts_with("-0x"));
    }
}
