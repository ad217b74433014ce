//! Printing typed storages as PyTorch does (Python's `repr` of each value).

use super::*;

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed
/// notation for exponents -4 to 15 and scientific (`1e+16`) outside;
/// `add_dot_zero` appends `.0` to integral fixed values, as `repr(float)`
/// does (not inside `repr(complex)`).
pub(super) fn py_float(x: f64, add_dot_zero: bool) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let mut s = format!("{x}");
        if add_dot_zero && !s.contains('.') {
            s.push_str(".0");
        }
        s
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

/// Python's `repr(complex)`: `2j`, `(1+2j)`, `(-0-2j)`, `(1e+20+nanj)`.
pub(super) fn py_complex(c: Complex64) -> String {
    let im = py_float(c.im, false);
    if c.re == 0.0 && c.re.is_sign_positive() {
        return format!("{im}j");
    }
    let sign = if c.im.is_nan() || c.im.is_sign_positive() {
        "+"
    } else {
        ""
    };
    format!("({}{sign}{im}j)", py_float(c.re, false))
}

/// Python's `str()` of the value `storage[i]` returns.
pub(super) fn py_scalar(v: Scalar) -> String {
    match v {
        Scalar::Bool(true) => "True".into(),
        Scalar::Bool(false) => "False".into(),
        Scalar::Int(i) => i.to_string(),
        Scalar::UInt(u) => u.to_string(),
        Scalar::Float(f) => py_float(f, true),
        Scalar::Complex(c) => py_complex(c),
    }
}

impl fmt::Display for TypedStorage {
    /// PyTorch's layout: each element on its own line after a space, then
    /// `[stowage.TypedStorage(dtype=torch.float32, device=cpu) of size 3]`
    /// (PyTorch says `torch.storage.TypedStorage`); `...` instead of the
    /// elements when the storage has no bytes. Elements of dtypes without
    /// values (bits) print as unsigned integers, where PyTorch raises. Warns.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        warn::typed_storage_removal(None);
        let es = self.dtype.size();
        let lines = self.storage.with_bytes("print", |b| {
            let mut lines = String::new();
            for (i, e) in b.chunks_exact(es).enumerate() {
                if i > 0 {
                    lines.push('\n');
                }
                lines.push(' ');
                match element::read(self.dtype, e) {
                    Ok(v) => lines.push_str(&py_scalar(v)),
                    Err(_) => lines.push_str(&raw_unsigned(e).to_string()),
                }
            }
            (lines, b.len() / es)
        });
        let (lines, size) = match lines {
            Ok((l, n)) => (if n == 0 { " ".to_owned() } else { l }, n),
            Err(_) => ("...".to_owned(), self.size_()),
        };
        write!(
            f,
            "{lines}\n[stowage.TypedStorage(dtype={}, device={}) of size {size}]",
            self.dtype,
            self.storage.device()
        )
    }
}

/// An element's bytes as a native-order unsigned integer.
pub(super) fn raw_unsigned(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    if cfg!(target_endian = "little") {
        buf[..n].copy_from_slice(&bytes[..n]);
    } else {
        buf[8 - n..].copy_from_slice(&bytes[bytes.len() - n..]);
    }
    u64::from_ne_bytes(buf)
}

impl fmt::Debug for TypedStorage {
    /// Never warns.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedStorage")
            .field("dtype", &self.dtype)
            .field("device", &self.storage.device())
            .field("nbytes", &self.storage.nbytes())
            .finish()
    }
}
