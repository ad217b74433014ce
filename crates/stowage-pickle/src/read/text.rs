//! The text opcodes' literals: decimal integers, Python 2 strings and their
//! escapes, and `raw-unicode-escape` lines.

use num_bigint::BigInt;

use super::super::value::Value;

/// Python's default limit on decimal digits in `int(str)`
/// (`sys.get_int_max_str_digits()`): past it, decimal digits take time
/// quadratic in their number. An `INT` or `LONG` opcode's text longer than
/// this is refused.
pub const MAX_INT_DIGITS: usize = 4300;

/// A decimal integer line (surrounding whitespace allowed).
pub(super) fn parse_int<X>(line: &[u8]) -> Option<Value<X>> {
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

/// Python 2 `str` under `encoding="utf-8"` (as `torch.load` passes it): the
/// text it decodes to, or `None` where it is not UTF-8, which CPython's
/// unpickler and PyTorch's `weights_only` unpickler both refuse
/// (`UnicodeDecodeError`; `errors="strict"`).
pub(super) fn py2_str<X>(bytes: Vec<u8>) -> Option<Value<X>> {
    String::from_utf8(bytes).ok().map(|s| Value::Str(s.into()))
}

/// `codecs.escape_decode`: the body of a `STRING` literal.
pub(crate) fn escape_decode(body: &[u8]) -> Option<Vec<u8>> {
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
pub(crate) fn raw_unicode_escape(line: &[u8]) -> Option<String> {
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
