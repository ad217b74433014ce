//! Python data that PyTorch's `weights_only` loader refuses but whose pickled
//! form is data, as stowage decodes it ([`crate::checkpoint::globals::decoded`] names each global):
//! numpy arrays, scalars and dtypes, the `datetime` and `pathlib` types,
//! `slice` and `range`; and the class references of inert loading
//! ([`LoadOptions::with_inert`](crate::checkpoint::LoadOptions::with_inert); the inert objects
//! themselves are [`InertObject`](crate::checkpoint::InertObject)s). Nothing here was
//! imported or called to be made.

use std::fmt;

use crate::{DType, Scalar, Tensor};

/// A numpy dtype: its type code and byte order, with the matching PyTorch
/// dtype where there is one.
#[derive(Clone, Debug, PartialEq)]
pub struct NumpyDType {
    /// The type code as pickled, without byte order (`"f4"`, `"U2"`, `"O8"`).
    pub code: String,
    /// `'<'`, `'>'` or `'|'` (not applicable), as the dtype's state gives it.
    pub byteorder: char,
    /// The PyTorch dtype holding the same elements, when there is one.
    pub torch: Option<DType>,
}

impl NumpyDType {
    /// A dtype from its type code (`"f4"`, `"<u2"`, `"b1"`): the byte order a
    /// prefix names, else little-endian for multi-byte codes.
    pub(crate) fn from_code(code: &str) -> NumpyDType {
        let (order, rest) = match code.chars().next() {
            Some(c @ ('<' | '>' | '|' | '=')) => (Some(c), &code[1..]),
            _ => (None, code),
        };
        let torch = match rest {
            "b1" | "?" => Some(DType::Bool),
            "i1" | "b" => Some(DType::Int8),
            "u1" | "B" => Some(DType::UInt8),
            "i2" | "h" => Some(DType::Int16),
            "u2" | "H" => Some(DType::UInt16),
            "i4" | "i" => Some(DType::Int32),
            "u4" | "I" => Some(DType::UInt32),
            "i8" | "q" | "l" => Some(DType::Int64),
            "u8" | "Q" | "L" => Some(DType::UInt64),
            "f2" | "e" => Some(DType::Float16),
            "f4" | "f" => Some(DType::Float32),
            "f8" | "d" => Some(DType::Float64),
            "c8" | "F" => Some(DType::Complex64),
            "c16" | "D" => Some(DType::Complex128),
            _ => None,
        };
        let byteorder = match order {
            Some('=') | None => {
                if torch.is_some_and(|d| d.size() == 1) {
                    '|'
                } else {
                    '<'
                }
            }
            Some(c) => c,
        };
        NumpyDType {
            code: rest.to_owned(),
            byteorder,
            torch,
        }
    }

    /// numpy's name for it (`dtype.name`): `float32`, `uint8`, `bool` …; the
    /// type code with its byte order (`<U2`) for dtypes without a PyTorch one.
    pub fn name(&self) -> String {
        match self.torch {
            Some(d) => d.name().to_owned(),
            None => format!("{}{}", self.byteorder, self.code),
        }
    }

    /// Whether elements are stored most significant byte first.
    pub(crate) fn big_endian(&self) -> bool {
        self.byteorder == '>'
    }
}

/// A numpy array, decoded into a tensor of the matching dtype.
#[derive(Clone, Debug)]
pub struct NdArray {
    /// The elements, on a storage of their own (not one of the checkpoint's),
    /// in native byte order; a Fortran-ordered array has column-major strides.
    pub tensor: Tensor,
    /// The array's numpy dtype.
    pub dtype: NumpyDType,
}

/// A numpy scalar: its dtype and value.
#[derive(Clone, Debug, PartialEq)]
pub struct NumpyScalar {
    /// The scalar's numpy dtype.
    pub dtype: NumpyDType,
    /// Its value, as an element of its dtype reads (`uint8` to `uint32` as
    /// [`Scalar::Int`], `uint64` as [`Scalar::UInt`]).
    pub value: Scalar,
}

/// A `datetime.timedelta`, or a UTC offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeDelta {
    /// Whole days (may be negative).
    pub days: i64,
    /// Seconds, `0..86400`.
    pub seconds: i64,
    /// Microseconds, `0..1_000_000`.
    pub microseconds: i64,
}

impl TimeDelta {
    /// The whole span in microseconds (Python's `td // timedelta(microseconds=1)`),
    /// wide enough for any fields a pickle gives.
    pub fn total_microseconds(&self) -> i128 {
        (i128::from(self.days) * 86_400 + i128::from(self.seconds)) * 1_000_000
            + i128::from(self.microseconds)
    }
}

/// A `datetime.timezone`: a fixed offset from UTC and an optional name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeZone {
    /// The offset from UTC.
    pub offset: TimeDelta,
    /// The name given to `timezone(offset, name)`, if any.
    pub name: Option<String>,
}

/// A time of day (the time part of a `datetime.datetime` or a `datetime.time`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeOfDay {
    /// Hour, `0..24`.
    pub hour: u8,
    /// Minute, `0..60`.
    pub minute: u8,
    /// Second, `0..60`.
    pub second: u8,
    /// Microsecond, `0..1_000_000`.
    pub microsecond: u32,
    /// The `fold` bit (PEP 495).
    pub fold: bool,
    /// The fixed-offset time zone, if the value is aware.
    pub tz: Option<TimeZone>,
}

/// A calendar date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Date {
    /// Year, `1..=9999`.
    pub year: u16,
    /// Month, `1..=12`.
    pub month: u8,
    /// Day of the month.
    pub day: u8,
}

/// A Python value stowage decoded from its pickled form.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum PyData {
    /// `datetime.datetime`.
    DateTime(Date, TimeOfDay),
    /// `datetime.date`.
    Date(Date),
    /// `datetime.time`.
    Time(TimeOfDay),
    /// `datetime.timedelta`.
    TimeDelta(TimeDelta),
    /// `datetime.timezone`.
    TimeZone(TimeZone),
    /// A `pathlib` path: its class (`PosixPath`) and its text (`/a/b`).
    Path {
        /// The class name.
        class: &'static str,
        /// The path, its parts joined as the class joins them.
        path: String,
    },
    /// `slice(start, stop, step)` of ints or `None`s.
    Slice([Option<i64>; 3]),
    /// `range(start, stop, step)`.
    Range([i64; 3]),
    /// A builtin type named as a value (`int`, `list`), e.g. a
    /// `defaultdict`'s factory.
    Type(&'static str),
}

impl PyData {
    /// The name `inspect --json` gives its type: `datetime`, `date`, `time`,
    /// `timedelta`, `timezone`, `path`, `slice`, `range`, `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            PyData::DateTime(..) => "datetime",
            PyData::Date(_) => "date",
            PyData::Time(_) => "time",
            PyData::TimeDelta(_) => "timedelta",
            PyData::TimeZone(_) => "timezone",
            PyData::Path { .. } => "path",
            PyData::Slice(_) => "slice",
            PyData::Range(_) => "range",
            PyData::Type(_) => "type",
        }
    }
}

fn offset_text(f: &mut fmt::Formatter<'_>, d: &TimeDelta) -> fmt::Result {
    let total = d.total_microseconds();
    let sign = if total < 0 { '-' } else { '+' };
    let us = total.unsigned_abs();
    let (secs, micros) = (us / 1_000_000, us % 1_000_000);
    write!(f, "{sign}{:02}:{:02}", secs / 3600, secs / 60 % 60)?;
    if secs % 60 != 0 || micros != 0 {
        write!(f, ":{:02}", secs % 60)?;
    }
    if micros != 0 {
        write!(f, ".{micros:06}")?;
    }
    Ok(())
}

impl fmt::Display for TimeOfDay {
    /// As Python's `isoformat()`: `03:04:05`, `03:04:05.000006+02:00`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}:{:02}", self.hour, self.minute, self.second)?;
        if self.microsecond != 0 {
            write!(f, ".{:06}", self.microsecond)?;
        }
        match &self.tz {
            Some(tz) => offset_text(f, &tz.offset),
            None => Ok(()),
        }
    }
}

impl fmt::Display for Date {
    /// As Python's `isoformat()`: `2024-01-02`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl fmt::Display for PyData {
    /// ISO 8601 for dates and times (Python's `isoformat()`), the offset for a
    /// time zone (`+02:00`), the text for a path, `days,seconds,microseconds`
    /// for a timedelta, and Python's spelling for the others.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |x: &Option<i64>| x.map_or_else(|| "None".to_owned(), |i| i.to_string());
        match self {
            PyData::DateTime(d, t) => write!(f, "{d}T{t}"),
            PyData::Date(d) => write!(f, "{d}"),
            PyData::Time(t) => write!(f, "{t}"),
            PyData::TimeDelta(d) => write!(f, "{},{},{}", d.days, d.seconds, d.microseconds),
            PyData::TimeZone(tz) => offset_text(f, &tz.offset),
            PyData::Path { path, .. } => f.write_str(path),
            PyData::Slice([a, b, c]) => write!(f, "slice({}, {}, {})", opt(a), opt(b), opt(c)),
            PyData::Range([a, b, c]) => write!(f, "range({a}, {b}, {c})"),
            PyData::Type(name) => write!(f, "<class '{name}'>"),
        }
    }
}

/// A global outside the allowlist named as a value (a class or function
/// object, not called), under [`LoadOptions::with_inert`](crate::checkpoint::LoadOptions::with_inert).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClassRef {
    /// The module.
    pub module: String,
    /// The name.
    pub name: String,
}
