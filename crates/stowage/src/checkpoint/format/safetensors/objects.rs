//! The JSON of the leaves a [`tree`](super::tree) records beyond JSON's own
//! types, and back: what PyTorch names as values (`torch.per_tensor_affine`,
//! `torch.sparse_coo`, an allowed global such as `collections.OrderedDict`),
//! the Python data stowage decodes (`datetime`, `pathlib`, `slice`, `range`,
//! builtin types), numpy dtypes, scalars and arrays, and the classes an
//! inert load names. Each is one tagged node:
//!
//! ```text
//! {"qscheme": NAME} | {"layout": NAME} | {"global": [MODULE, NAME]} | {"class": [MODULE, NAME]}
//! {"datetime": [Y, M, D, TIME]} | {"date": [Y, M, D]} | {"time": TIME}
//!   TIME := [H, M, S, US, FOLD, TZ]   TZ := null | [DAYS, SECONDS, US, NAME | null]
//! {"timedelta": [DAYS, SECONDS, US]} | {"timezone": [DAYS, SECONDS, US, NAME | null]}
//! {"path": [CLASS, TEXT]} | {"slice": [A, B, C]} | {"range": [A, B, C]} | {"type": NAME}
//! {"numpy_dtype": CODE} | {"numpy_scalar": [CODE, VALUE]} | {"ndarray": [CODE, SHAPE, HEX]}
//! ```
//!
//! `CODE` is the dtype with its byte order (`"<f4"`); an array's bytes are
//! its elements in C order, native (little-endian) byte order. An array of a
//! dtype PyTorch has no tensor for (strings, objects), of more than
//! [`MAX_ARRAY_BYTES`], or past [`MAX_ARRAYS_BYTES`] of arrays in one file
//! (whose header, hex and all, must stay under the 100 MB safetensors
//! readers accept) is not recorded (`lost`), nor is a bare storage.

use std::sync::Arc;

use num_complex::Complex64;
use serde_json::{json, Value as Json};

use crate::checkpoint::globals::allowlist::{self, Global};
use crate::checkpoint::globals::decoded::{self, Decoded};
use crate::checkpoint::value::data::{
    ClassRef, Date, NdArray, NumpyDType, NumpyScalar, PyData, TimeDelta, TimeOfDay, TimeZone,
};
use crate::checkpoint::value::graph::Object;
use crate::layout::Layout;
use crate::{Scalar, Tensor, UntypedStorage};

/// The largest numpy array kept in the structure, in bytes (twice that as
/// hex in the file's metadata): RNG states and small tables, not weights.
pub(super) const MAX_ARRAY_BYTES: usize = 1 << 20;

/// The most bytes of arrays kept in one file's structure, all together.
pub(super) const MAX_ARRAYS_BYTES: usize = 16 << 20;

/// The node recording `x`; `None` for what is not recorded. `budget` is
/// the bytes of arrays still to be kept in this file ([`MAX_ARRAYS_BYTES`]
/// at first); an array kept takes its bytes from it.
pub(super) fn record(x: &Object, budget: &mut usize) -> Option<Json> {
    Some(match x {
        Object::QScheme(q) => json!({ "qscheme": q }),
        Object::Layout(l) => json!({ "layout": l }),
        Object::Global(g) => {
            let (module, name) = g.path();
            json!({"global": [module, name]})
        }
        Object::Class(c) => json!({"class": [c.module, c.name]}),
        Object::NumpyDType(d) => json!({ "numpy_dtype": code(d) }),
        Object::NumpyScalar(s) => json!({"numpy_scalar": [code(&s.dtype), scalar(s.value)]}),
        Object::NdArray(a) => return ndarray(a, budget),
        Object::Data(d) => data(d),
        _ => return None,
    })
}

fn code(d: &NumpyDType) -> String {
    format!("{}{}", d.byteorder, d.code)
}

fn scalar(s: Scalar) -> Json {
    match s {
        Scalar::Bool(b) => json!(b),
        Scalar::Int(i) => json!(i),
        // As text: JSON readers keep integers past 2^53 only so.
        Scalar::UInt(u) => json!({ "uint": u.to_string() }),
        Scalar::Float(f) => super::tree::float(f),
        Scalar::Complex(c) => {
            json!({"complex": [super::tree::float(c.re), super::tree::float(c.im)]})
        }
    }
}

fn ndarray(a: &NdArray, budget: &mut usize) -> Option<Json> {
    let t = &a.tensor;
    if a.dtype.torch != Some(t.dtype()) || t.nbytes() > MAX_ARRAY_BYTES {
        return None;
    }
    *budget = budget.checked_sub(t.nbytes())?;
    let c = t.contiguous().ok()?;
    let storage = c.untyped_storage().bytes().ok()?;
    let start = c.storage_offset() * c.element_size();
    let bytes = storage.get(start..start + c.nbytes())?;
    Some(json!({"ndarray": [code(&a.dtype), t.shape(), hex::encode(bytes)]}))
}

fn time_zone(tz: &TimeZone) -> Json {
    let d = &tz.offset;
    json!([d.days, d.seconds, d.microseconds, tz.name])
}

fn time(t: &TimeOfDay) -> Json {
    json!([
        t.hour,
        t.minute,
        t.second,
        t.microsecond,
        t.fold,
        t.tz.as_ref().map(time_zone)
    ])
}

fn data(d: &PyData) -> Json {
    match d {
        PyData::DateTime(date, t) => {
            json!({"datetime": [date.year, date.month, date.day, time(t)]})
        }
        PyData::Date(date) => json!({"date": [date.year, date.month, date.day]}),
        PyData::Time(t) => json!({ "time": time(t) }),
        PyData::TimeDelta(d) => json!({"timedelta": [d.days, d.seconds, d.microseconds]}),
        PyData::TimeZone(tz) => json!({ "timezone": time_zone(tz) }),
        PyData::Path { class, path } => json!({"path": [class, path]}),
        PyData::Slice(s) => json!({ "slice": s }),
        PyData::Range(r) => json!({ "range": r }),
        PyData::Type(name) => json!({ "type": name }),
    }
}

/// What went wrong reading a node back, for the tree's error.
type Found = String;

/// The tags of this module's nodes.
const TAGS: &[&str] = &[
    "qscheme",
    "layout",
    "global",
    "class",
    "numpy_dtype",
    "numpy_scalar",
    "ndarray",
    "datetime",
    "date",
    "time",
    "timedelta",
    "timezone",
    "path",
    "slice",
    "range",
    "type",
];

/// The object the node `kind: body` records; `None` when `kind` is not
/// one of this module's tags.
pub(super) fn restore(kind: &str, body: &Json) -> Option<Result<Object, Found>> {
    TAGS.contains(&kind).then(|| restore_tagged(kind, body))
}

fn restore_tagged(kind: &str, body: &Json) -> Result<Object, Found> {
    let bad = || format!("{kind}: {}", super::tree::brief(body));
    let text = || body.as_str().ok_or_else(bad);
    let items = || body.as_array().map(Vec::as_slice).ok_or_else(bad);
    let pair = || match items()? {
        [Json::String(a), Json::String(b)] => Ok((a.as_str(), b.as_str())),
        _ => Err(bad()),
    };
    let data = |d: PyData| Object::Data(Box::new(d));
    Ok(match kind {
        "qscheme" => match allowlist::resolve("torch", text()?) {
            Ok(Global::QScheme(q)) => Object::QScheme(q),
            _ => return Err(bad()),
        },
        "layout" => Object::Layout(text()?.into()),
        "global" => {
            let (module, name) = pair()?;
            Object::Global(Box::new(
                allowlist::resolve(module, name).map_err(|e| e.to_string())?,
            ))
        }
        "class" => {
            let (module, name) = pair()?;
            Object::Class(Arc::new(ClassRef {
                module: module.to_owned(),
                name: name.to_owned(),
            }))
        }
        "numpy_dtype" => Object::NumpyDType(Box::new(NumpyDType::from_code(text()?))),
        "numpy_scalar" => {
            let [code, value] = items()? else {
                return Err(bad());
            };
            let dtype = NumpyDType::from_code(code.as_str().ok_or_else(bad)?);
            let value = scalar_of(value).ok_or_else(bad)?;
            Object::NumpyScalar(Box::new(NumpyScalar { dtype, value }))
        }
        "ndarray" => Object::NdArray(Box::new(ndarray_of(items()?).ok_or_else(bad)?)),
        "datetime" => {
            let [y, m, d, t] = items()? else {
                return Err(bad());
            };
            let date = date_of(y, m, d).ok_or_else(bad)?;
            data(PyData::DateTime(date, time_of(t).ok_or_else(bad)?))
        }
        "date" => {
            let [y, m, d] = items()? else {
                return Err(bad());
            };
            data(PyData::Date(date_of(y, m, d).ok_or_else(bad)?))
        }
        "time" => data(PyData::Time(time_of(body).ok_or_else(bad)?)),
        "timedelta" => data(PyData::TimeDelta(delta_of(items()?).ok_or_else(bad)?)),
        "timezone" => data(PyData::TimeZone(zone_of(body).ok_or_else(bad)?)),
        "path" => {
            let (class, path) = pair()?;
            match decoded::lookup("pathlib", class) {
                Some(Decoded::Path(class)) => data(PyData::Path {
                    class,
                    path: path.to_owned(),
                }),
                _ => return Err(bad()),
            }
        }
        "slice" => {
            let parts: Option<Vec<Option<i64>>> = items()?
                .iter()
                .map(|p| {
                    if p.is_null() {
                        Some(None)
                    } else {
                        p.as_i64().map(Some)
                    }
                })
                .collect();
            data(PyData::Slice(
                parts.and_then(|p| p.try_into().ok()).ok_or_else(bad)?,
            ))
        }
        "range" => {
            let parts: Option<Vec<i64>> = items()?.iter().map(Json::as_i64).collect();
            data(PyData::Range(
                parts.and_then(|p| p.try_into().ok()).ok_or_else(bad)?,
            ))
        }
        "type" => match decoded::lookup("builtins", text()?) {
            Some(Decoded::BuiltinType(t)) => data(PyData::Type(t)),
            _ => return Err(bad()),
        },
        _ => return Err(bad()),
    })
}

fn scalar_of(j: &Json) -> Option<Scalar> {
    Some(match j {
        Json::Bool(b) => Scalar::Bool(*b),
        Json::Number(n) if !n.is_f64() => Scalar::Int(n.as_i64()?),
        Json::Object(o) if o.contains_key("uint") => {
            Scalar::UInt(o.get("uint")?.as_str()?.parse().ok()?)
        }
        Json::Object(o) if o.contains_key("complex") => {
            match o.get("complex")?.as_array()?.as_slice() {
                [re, im] => Scalar::Complex(Complex64::new(
                    super::tree::float_of(re)?,
                    super::tree::float_of(im)?,
                )),
                _ => return None,
            }
        }
        other => Scalar::Float(super::tree::float_of(other)?),
    })
}

fn ndarray_of(items: &[Json]) -> Option<NdArray> {
    let [code, shape, hex] = items else {
        return None;
    };
    let dtype = NumpyDType::from_code(code.as_str()?);
    let torch = dtype.torch?;
    let shape: Vec<usize> = shape
        .as_array()?
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect::<Option<_>>()?;
    let bytes = super::tree::unhex(hex.as_str()?).ok()?;
    let layout = Layout::contiguous(&shape).ok()?;
    if layout.numel().checked_mul(torch.size())? != bytes.len() {
        return None;
    }
    let storage = UntypedStorage::from_bytes(&bytes).ok()?;
    let tensor = Tensor::from_parts(storage, torch, layout).ok()?;
    Some(NdArray { tensor, dtype })
}

fn int<T: TryFrom<i64>>(j: &Json) -> Option<T> {
    T::try_from(j.as_i64()?).ok()
}

fn date_of(y: &Json, m: &Json, d: &Json) -> Option<Date> {
    Some(Date {
        year: int(y)?,
        month: int(m)?,
        day: int(d)?,
    })
}

fn delta_of(items: &[Json]) -> Option<TimeDelta> {
    let [days, seconds, us] = items else {
        return None;
    };
    Some(TimeDelta {
        days: days.as_i64()?,
        seconds: seconds.as_i64()?,
        microseconds: us.as_i64()?,
    })
}

fn zone_of(j: &Json) -> Option<TimeZone> {
    let (name, offset) = j.as_array()?.split_last()?;
    let name = match name {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        _ => return None,
    };
    Some(TimeZone {
        offset: delta_of(offset)?,
        name,
    })
}

fn time_of(j: &Json) -> Option<TimeOfDay> {
    let [h, m, s, us, fold, tz] = j.as_array()?.as_slice() else {
        return None;
    };
    Some(TimeOfDay {
        hour: int(h)?,
        minute: int(m)?,
        second: int(s)?,
        microsecond: int(us)?,
        fold: fold.as_bool()?,
        tz: if tz.is_null() {
            None
        } else {
            Some(zone_of(tz)?)
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn back(x: &Object) -> Object {
        let mut budget = MAX_ARRAYS_BYTES;
        let json = record(x, &mut budget).unwrap_or_else(|| panic!("{x:?} is not recorded"));
        let serde_json::Value::Object(o) = &json else {
            panic!("{json}")
        };
        let (kind, body) = o.iter().next().unwrap();
        restore(kind, body).unwrap().unwrap()
    }

    /// Every kind of object comes back as it was recorded.
    #[test]
    fn each_object_comes_back() {
        let zone = TimeZone {
            offset: TimeDelta {
                days: -1,
                seconds: 79_200,
                microseconds: 5,
            },
            name: Some("EST".into()),
        };
        let t = TimeOfDay {
            hour: 3,
            minute: 4,
            second: 5,
            microsecond: 6,
            fold: true,
            tz: Some(zone.clone()),
        };
        let date = Date {
            year: 2024,
            month: 2,
            day: 29,
        };
        let data = |d: PyData| Object::Data(Box::new(d));
        let objects = [
            Object::QScheme("per_channel_affine"),
            Object::Layout("sparse_coo".into()),
            Object::Global(Box::new(
                allowlist::resolve("collections", "OrderedDict").unwrap(),
            )),
            Object::Class(Arc::new(ClassRef {
                module: "my.pkg".into(),
                name: "Config".into(),
            })),
            Object::NumpyDType(Box::new(NumpyDType::from_code(">u2"))),
            Object::NumpyScalar(Box::new(NumpyScalar {
                dtype: NumpyDType::from_code("<u8"),
                value: Scalar::UInt(u64::MAX),
            })),
            Object::NumpyScalar(Box::new(NumpyScalar {
                dtype: NumpyDType::from_code("<c16"),
                value: Scalar::Complex(Complex64::new(f64::NAN, -0.5)),
            })),
            data(PyData::DateTime(date, t.clone())),
            data(PyData::Date(date)),
            data(PyData::Time(TimeOfDay { tz: None, ..t })),
            data(PyData::TimeDelta(zone.offset)),
            data(PyData::TimeZone(TimeZone { name: None, ..zone })),
            data(PyData::Path {
                class: "PosixPath",
                path: "/a/b".into(),
            }),
            data(PyData::Slice([None, Some(-3), Some(2)])),
            data(PyData::Range([0, 10, 3])),
            data(PyData::Type("int")),
        ];
        for x in objects {
            assert_eq!(format!("{:?}", back(&x)), format!("{x:?}"));
        }
    }

    #[test]
    fn an_array_comes_back_with_its_elements() {
        let tensor = Tensor::from_vec(vec![1u32, 2, 3, 4, 5, 6], &[2, 3])
            .unwrap()
            .t()
            .unwrap();
        let a = NdArray {
            tensor: tensor.clone(),
            dtype: NumpyDType::from_code("<u4"),
        };
        let Object::NdArray(b) = back(&Object::NdArray(Box::new(a))) else {
            panic!("not an array")
        };
        assert_eq!(b.tensor.shape(), &[3, 2]);
        assert_eq!(b.tensor.dtype(), DType::UInt32);
        assert_eq!(
            b.tensor.to_vec::<u32>().unwrap(),
            tensor.to_vec::<u32>().unwrap()
        );
    }

    /// An array PyTorch has no dtype for, or too large to keep, is not
    /// recorded; a node that does not fit is refused, naming what it is.
    #[test]
    fn what_is_not_recorded_or_does_not_fit() {
        let array = |n: usize| {
            Object::NdArray(Box::new(NdArray {
                tensor: Tensor::zeros(&[n], DType::UInt8).unwrap(),
                dtype: NumpyDType::from_code("|u1"),
            }))
        };
        let mut budget = MAX_ARRAYS_BYTES;
        assert!(record(&array(MAX_ARRAY_BYTES + 1), &mut budget).is_none());
        // Past the file's budget, arrays small enough alone are not kept.
        let kept = (0..17)
            .filter(|_| record(&array(MAX_ARRAY_BYTES), &mut budget).is_some())
            .count();
        assert_eq!(kept, MAX_ARRAYS_BYTES / MAX_ARRAY_BYTES);
        for (kind, body) in [
            ("qscheme", json!("strided")),
            ("global", json!(["os", "system"])),
            ("ndarray", json!(["<f4", [2], "00"])),
            ("date", json!([2024, 13])),
            ("type", json!("eval")),
            ("path", json!(["Shell", "/"])),
        ] {
            let err = restore(kind, &body).unwrap().unwrap_err();
            assert!(err.contains(kind), "{kind}: {err}");
        }
        assert!(restore("dict", &json!([])).is_none());
    }
}
