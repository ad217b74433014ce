//! Exact conversions for PyTorch's 8-bit and 4-bit floating-point formats.
//!
//! PyTorch stores these dtypes one byte per element (two elements per byte
//! for `float4_e2m1fn_x2`). A value with sign `s`, biased exponent `e` and
//! mantissa `m` (`M` mantissa bits) is `(-1)^s * 2^(e - bias) * (1 + m / 2^M)`,
//! or `(-1)^s * 2^(1 - bias) * (m / 2^M)` when `e == 0` (a subnormal).
//!
//! | [`MiniFloat`] | PyTorch dtype | E | M | bias | max | NaN | inf | -0 |
//! |---|---|---|---|---|---|---|---|---|
//! | `F8E4M3Fn` | `float8_e4m3fn` | 4 | 3 | 7 | 448 | `S.1111.111` | no | yes |
//! | `F8E5M2` | `float8_e5m2` | 5 | 2 | 15 | 57344 | `S.11111.mm`, `mm != 0` | `S.11111.00` | yes |
//! | `F8E4M3Fnuz` | `float8_e4m3fnuz` | 4 | 3 | 8 | 240 | `0x80` only | no | no |
//! | `F8E5M2Fnuz` | `float8_e5m2fnuz` | 5 | 2 | 16 | 57344 | `0x80` only | no | no |
//! | `F8E8M0Fnu` | `float8_e8m0fnu` | 8 | 0 | 127 | 2^127 | `0xFF` | no | no zero at all |
//! | `F4E2M1Fn` | `float4_e2m1fn_x2` (two per byte) | 2 | 1 | 1 | 6 | none | no | yes |
//!
//! `float8_e8m0fnu` is unsigned and has no mantissa and no subnormals: the
//! byte `e` is `2^(e - 127)`, so `0x00` is `2^-127`, not zero.
//! `float4_e2m1fn` holds `±{0, 0.5, 1, 1.5, 2, 3, 4, 6}`; PyTorch's
//! `float4_e2m1fn_x2` stores the first of each pair in the low nibble.
//!
//! Each format is one declarative `Format` record (a `const`); a single
//! generic decoder and encoder interpret it. Decoding is exact (every value
//! of these formats is an `f32`). Encoding reproduces PyTorch's c10 conversions bit for bit,
//! including their overflow rules, which differ per format:
//!
//! * `e4m3fn` saturates: finite overflow *and* ±inf become ±448.
//! * `e5m2` rounds to nearest even into ±inf (≥ 61440 is inf), like IEEE.
//! * `e4m3fnuz`/`e5m2fnuz` turn overflow (≥ 248 / ≥ 61440) and ±inf into NaN
//!   (`0x80`), and -0.0 (and negative values that round to zero) into +0.
//! * `e8m0fnu` ignores the sign, rounds to the nearest power of two with ties
//!   *up* (away from zero) rather than to even, maps zero and tiny values to
//!   `0x00` (`2^-127`), and overflow, inf and NaN to NaN (`0xFF`). For `f32`
//!   subnormal inputs PyTorch rounds everything above `2^-127` up to `2^-126`.
//! * NaN becomes the format's NaN, keeping the sign where the format has
//!   signed NaNs (`e4m3fn`, `e5m2`: `S.1111111`).
//!
//! PyTorch has no casts for `float4_e2m1fn_x2` (it is a "shell" dtype;
//! `.to()` and `.float()` raise `NotImplementedError`). Here it is
//! decoded/encoded like PyTorch's reference helpers in
//! `torch.testing._internal.common_quantized` (round to nearest even,
//! saturate to ±6, ±inf to ±6, -0.0 kept); those leave NaN unspecified, and
//! this module maps NaN to +6 (`0x7`).
//!
//! These are hand-written because no dependency covers them: the `half`
//! crate has only 16-bit formats, and the `float8` crate only `e4m3fn` and
//! `e5m2`, not the fnuz, e8m0 or fp4 formats.
//!
//! The tests check every bit pattern and about seven thousand `f32` (and
//! six hundred `f64`) inputs against tables generated from real PyTorch by
//! `scripts/gen_minifloat_tables.py`.

/// One of PyTorch's 8-bit or 4-bit floating-point element formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MiniFloat {
    /// `torch.float8_e4m3fn`: 4 exponent bits (bias 7), 3 mantissa bits, no
    /// infinity, NaN `S.1111.111`, max 448; saturates on overflow.
    F8E4M3Fn,
    /// `torch.float8_e5m2`: IEEE-like, 5 exponent bits (bias 15), 2 mantissa
    /// bits, ±inf and NaN, max 57344.
    F8E5M2,
    /// `torch.float8_e4m3fnuz`: bias 8, no infinity, no negative zero, `0x80`
    /// is the only NaN, max 240.
    F8E4M3Fnuz,
    /// `torch.float8_e5m2fnuz`: bias 16, no infinity, no negative zero,
    /// `0x80` is the only NaN, max 57344.
    F8E5M2Fnuz,
    /// `torch.float8_e8m0fnu`: unsigned powers of two `2^(e - 127)`, `0xFF`
    /// is NaN, no zero.
    F8E8M0Fnu,
    /// One element of `torch.float4_e2m1fn_x2`: 2 exponent bits (bias 1),
    /// 1 mantissa bit, values `±{0, 0.5, 1, 1.5, 2, 3, 4, 6}`, no NaN or inf.
    F4E2M1Fn,
}

/// How a format spends its top bit patterns on NaN and infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Specials {
    /// All exponent and mantissa bits set is NaN, of either sign; no infinity.
    AllOnesNan,
    /// IEEE 754: an all-ones exponent is ±inf (zero mantissa) or NaN.
    Ieee,
    /// The negative-zero pattern is the only NaN; no infinity, no -0.
    NegZeroNan,
    /// Every pattern is a finite number.
    Finite,
}

/// What encoding does with finite values beyond the largest one, and with ±inf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    /// Clamp to ±max.
    Saturate,
    /// Round (to nearest even) into ±inf.
    Infinity,
    /// Produce NaN.
    Nan,
}

/// Rounding of values between two representable neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rounding {
    /// To nearest, ties to the even mantissa.
    NearestEven,
    /// PyTorch's e8m0 rule: to nearest, ties up; `f32` subnormal inputs
    /// round up whenever they are above `2^-127`.
    E8M0,
}

/// A declarative description of one format, read by the generic codec.
#[derive(Clone, Copy, Debug)]
struct Format {
    /// PyTorch's name for the element type.
    name: &'static str,
    /// Whether the top bit is a sign bit (else the format is unsigned).
    signed: bool,
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    /// Whether exponent field 0 holds zero and subnormals (else it is normal).
    subnormals: bool,
    specials: Specials,
    overflow: Overflow,
    rounding: Rounding,
}

const E4M3FN: Format = Format {
    name: "float8_e4m3fn",
    signed: true,
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    subnormals: true,
    specials: Specials::AllOnesNan,
    overflow: Overflow::Saturate,
    rounding: Rounding::NearestEven,
};
const E5M2: Format = Format {
    name: "float8_e5m2",
    signed: true,
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    subnormals: true,
    specials: Specials::Ieee,
    overflow: Overflow::Infinity,
    rounding: Rounding::NearestEven,
};
const E4M3FNUZ: Format = Format {
    name: "float8_e4m3fnuz",
    signed: true,
    exp_bits: 4,
    man_bits: 3,
    bias: 8,
    subnormals: true,
    specials: Specials::NegZeroNan,
    overflow: Overflow::Nan,
    rounding: Rounding::NearestEven,
};
const E5M2FNUZ: Format = Format {
    name: "float8_e5m2fnuz",
    signed: true,
    exp_bits: 5,
    man_bits: 2,
    bias: 16,
    subnormals: true,
    specials: Specials::NegZeroNan,
    overflow: Overflow::Nan,
    rounding: Rounding::NearestEven,
};
const E8M0FNU: Format = Format {
    name: "float8_e8m0fnu",
    signed: false,
    exp_bits: 8,
    man_bits: 0,
    bias: 127,
    subnormals: false,
    specials: Specials::AllOnesNan,
    overflow: Overflow::Nan,
    rounding: Rounding::E8M0,
};
const E2M1FN: Format = Format {
    name: "float4_e2m1fn",
    signed: true,
    exp_bits: 2,
    man_bits: 1,
    bias: 1,
    subnormals: true,
    specials: Specials::Finite,
    overflow: Overflow::Saturate,
    rounding: Rounding::NearestEven,
};

impl Format {
    /// Width of one element.
    const fn bits(&self) -> u32 {
        self.signed as u32 + self.exp_bits + self.man_bits
    }

    /// Bits below the sign bit.
    const fn mag_mask(&self) -> u32 {
        (1 << (self.exp_bits + self.man_bits)) - 1
    }

    const fn sign_bit(&self) -> u32 {
        1 << (self.bits() - 1)
    }

    /// Exponent field all ones, mantissa zero (infinity where it exists).
    const fn inf_code(&self) -> u32 {
        ((1 << self.exp_bits) - 1) << self.man_bits
    }

    /// Magnitude bits of the largest finite value.
    const fn max_code(&self) -> u32 {
        match self.specials {
            Specials::AllOnesNan => self.mag_mask() - 1,
            Specials::Ieee => self.inf_code() - 1,
            Specials::NegZeroNan | Specials::Finite => self.mag_mask(),
        }
    }

    /// The code for NaN, given the input's sign bit (already positioned).
    const fn nan_code(&self, sign: u32) -> u32 {
        match self.specials {
            Specials::AllOnesNan | Specials::Ieee => self.mag_mask() | sign,
            Specials::NegZeroNan => self.sign_bit(),
            Specials::Finite => self.max_code(),
        }
    }

    fn decode(&self, bits: u8) -> f32 {
        let bits = u32::from(bits) & ((1 << self.bits()) - 1);
        let sign = if self.signed {
            bits & self.sign_bit()
        } else {
            0
        };
        let mag = bits & self.mag_mask();
        let frac = mag & ((1 << self.man_bits) - 1);
        let nan = match self.specials {
            Specials::AllOnesNan => mag == self.mag_mask(),
            Specials::Ieee => mag > self.inf_code(),
            Specials::NegZeroNan => sign != 0 && mag == 0,
            Specials::Finite => false,
        };
        let f32_sign = (sign != 0) as u32 * 0x8000_0000;
        if nan {
            // PyTorch: formats with a single NaN pattern give 0x7F800001 (a
            // signalling NaN); signed NaNs keep sign and mantissa, quieted.
            let single = !self.signed || self.specials == Specials::NegZeroNan;
            let quiet = f32_sign | 0x7FC0_0000 | frac << (23 - self.man_bits);
            return f32::from_bits(if single { 0x7F80_0001 } else { quiet });
        }
        if self.specials == Specials::Ieee && mag == self.inf_code() {
            return f32::from_bits(f32_sign | 0x7F80_0000);
        }
        let exp = (mag >> self.man_bits) as i32;
        let (sig, exp) = if self.subnormals && exp == 0 {
            (frac, 1 - self.bias)
        } else {
            (frac | 1 << self.man_bits, exp - self.bias)
        };
        // sig < 2^4 and the scale is within f32's range: both steps are exact.
        let value = sig as f32 * pow2(exp - self.man_bits as i32);
        f32::from_bits(value.to_bits() | f32_sign)
    }

    fn encode(&self, x: f32) -> u8 {
        let bits = x.to_bits();
        let sign = if self.signed && bits >> 31 != 0 {
            self.sign_bit()
        } else {
            0
        };
        let abs = bits & 0x7FFF_FFFF;
        if abs > 0x7F80_0000 {
            return self.nan_code(sign) as u8;
        }
        let code = if abs == 0x7F80_0000 {
            u32::MAX
        } else {
            self.round(abs)
        };
        let code = if code <= self.max_code() {
            code
        } else {
            match self.overflow {
                Overflow::Saturate => self.max_code(),
                Overflow::Infinity => self.inf_code(),
                Overflow::Nan => return self.nan_code(sign) as u8,
            }
        };
        if code == 0 && self.specials == Specials::NegZeroNan {
            return 0; // no negative zero: -0.0 and tiny negatives give +0
        }
        (code | sign) as u8
    }

    /// Magnitude code of the finite, non-negative `f32` with bits `abs`,
    /// rounded, with an exponent field that may exceed the format's.
    fn round(&self, abs: u32) -> u32 {
        let (e32, m32) = (abs >> 23, abs & 0x7F_FFFF);
        // abs == sig * 2^exp exactly.
        let (sig, exp) = if e32 == 0 {
            (m32, -149)
        } else {
            (m32 | 0x80_0000, e32 as i32 - 150)
        };
        if sig == 0 {
            return 0;
        }
        let man = self.man_bits as i32;
        let top = exp + 31 - sig.leading_zeros() as i32; // floor(log2(abs))
        let emin = if self.subnormals {
            1 - self.bias
        } else {
            -self.bias
        };
        let quantum = top.max(emin) - man; // exponent of the target's ulp at abs
        let shift = quantum - exp;
        // n * 2^quantum is abs rounded; 2^man <= n <= 2^(man+1) unless below emin.
        let n = if shift <= 0 {
            sig << -shift
        } else {
            let shift = shift.min(31) as u32; // sig < 2^24: larger shifts change nothing
            let (n, rem, half) = (sig >> shift, sig & ((1 << shift) - 1), 1 << (shift - 1));
            let up = match self.rounding {
                Rounding::NearestEven => rem > half || (rem == half && n & 1 == 1),
                Rounding::E8M0 if e32 == 0 => rem > 0,
                Rounding::E8M0 => rem >= half,
            };
            n + up as u32
        };
        // Exponent field times 2^man plus the mantissa; a carry out of the
        // mantissa (n == 2^(man+1)) lands in the exponent field by itself.
        let hidden = if self.subnormals { 0 } else { 1 << man };
        let code =
            ((quantum + man + self.bias - self.subnormals as i32) << man) + n as i32 - hidden;
        code.max(0) as u32
    }
}

/// `2^k` for `-149 <= k <= 127`, exactly.
fn pow2(k: i32) -> f32 {
    if k >= -126 {
        f32::from_bits(((k + 127) as u32) << 23)
    } else {
        f32::from_bits(1 << (k + 149))
    }
}

impl MiniFloat {
    /// Every format, in declaration order.
    pub const ALL: [MiniFloat; 6] = [
        MiniFloat::F8E4M3Fn,
        MiniFloat::F8E5M2,
        MiniFloat::F8E4M3Fnuz,
        MiniFloat::F8E5M2Fnuz,
        MiniFloat::F8E8M0Fnu,
        MiniFloat::F4E2M1Fn,
    ];

    const fn format(self) -> &'static Format {
        match self {
            MiniFloat::F8E4M3Fn => &E4M3FN,
            MiniFloat::F8E5M2 => &E5M2,
            MiniFloat::F8E4M3Fnuz => &E4M3FNUZ,
            MiniFloat::F8E5M2Fnuz => &E5M2FNUZ,
            MiniFloat::F8E8M0Fnu => &E8M0FNU,
            MiniFloat::F4E2M1Fn => &E2M1FN,
        }
    }

    /// The value of the bit pattern `bits`, exactly.
    ///
    /// For [`MiniFloat::F4E2M1Fn`] only the low four bits are read. NaN
    /// patterns give the `f32` NaN PyTorch gives: for `e4m3fn` and `e5m2` a
    /// quiet NaN with the pattern's sign and mantissa as payload, for the
    /// fnuz formats and `e8m0fnu` the bits `0x7F800001`.
    pub fn to_f32(self, bits: u8) -> f32 {
        self.format().decode(bits)
    }

    /// The bit pattern nearest to `x`, as PyTorch's c10 conversion computes it.
    ///
    /// Rounds to nearest, ties to even (ties up for `e8m0fnu`); see the
    /// module documentation for overflow, NaN and negative zero per format.
    /// For [`MiniFloat::F4E2M1Fn`] the result is in `0..=15`.
    pub fn from_f32(self, x: f32) -> u8 {
        self.format().encode(x)
    }

    /// Encodes an `f64` the way PyTorch does: rounded to `f32` first (to
    /// nearest even, overflowing to ±inf), then [`from_f32`](Self::from_f32).
    ///
    /// This double rounding can differ from rounding `x` directly: for
    /// example `1.0625 + 2^-40` is `1.0` in `e4m3fn`, not `1.125`.
    pub fn from_f64(self, x: f64) -> u8 {
        self.from_f32(x as f32)
    }

    /// The width of one element in bits: 8, or 4 for [`MiniFloat::F4E2M1Fn`].
    pub fn bits(self) -> u32 {
        self.format().bits()
    }

    /// PyTorch's name for the element format, e.g. `"float8_e4m3fn"`.
    ///
    /// [`MiniFloat::F4E2M1Fn`] is `"float4_e2m1fn"`; PyTorch's dtype is
    /// `float4_e2m1fn_x2`, a byte holding two of them.
    pub fn name(self) -> &'static str {
        self.format().name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLES: &str = include_str!("../tests/data/minifloat_tables.txt");

    /// Column order of the table (see `scripts/gen_minifloat_tables.py`).
    const COLUMNS: [MiniFloat; 6] = MiniFloat::ALL;

    fn short(m: MiniFloat) -> &'static str {
        m.name().split_once('_').map_or("", |(_, s)| s)
    }

    struct Tables {
        decode: Vec<(MiniFloat, Vec<u32>)>,
        f32s: Vec<(u32, Vec<Option<u8>>)>,
        f64s: Vec<(u64, Vec<Option<u8>>)>,
    }

    fn cells(s: &str) -> Vec<Option<u8>> {
        assert_eq!(s.len(), 2 * COLUMNS.len(), "{s}");
        (0..COLUMNS.len())
            .map(|i| match &s[2 * i..2 * i + 2] {
                "--" => None,
                c => Some(u8::from_str_radix(c, 16).unwrap()),
            })
            .collect()
    }

    fn tables() -> Tables {
        let mut t = Tables {
            decode: vec![],
            f32s: vec![],
            f64s: vec![],
        };
        let mut section = "";
        for line in TABLES.lines().filter(|l| !l.starts_with('#')) {
            if let Some(name) = line.strip_prefix("decode ") {
                let m = *COLUMNS.iter().find(|m| short(**m) == name).unwrap();
                t.decode.push((m, vec![]));
                section = "decode";
            } else if line == "f32" || line == "f64" {
                section = line;
            } else {
                let mut it = line.split(' ');
                match section {
                    "decode" => t
                        .decode
                        .last_mut()
                        .unwrap()
                        .1
                        .extend(it.map(|w| u32::from_str_radix(w, 16).unwrap())),
                    "f32" => t.f32s.push((
                        u32::from_str_radix(it.next().unwrap(), 16).unwrap(),
                        cells(it.next().unwrap()),
                    )),
                    "f64" => t.f64s.push((
                        u64::from_str_radix(it.next().unwrap(), 16).unwrap(),
                        cells(it.next().unwrap()),
                    )),
                    _ => panic!("unexpected line {line:?}"),
                }
            }
        }
        t
    }

    #[test]
    fn decode_matches_pytorch_bit_for_bit() {
        let t = tables();
        assert_eq!(t.decode.len(), COLUMNS.len());
        for (m, expected) in &t.decode {
            assert_eq!(expected.len(), 1 << m.bits(), "{m:?}");
            for (bits, &want) in expected.iter().enumerate() {
                let got = m.to_f32(bits as u8).to_bits();
                assert_eq!(got, want, "{m:?} {bits:#04x}: {got:#010x} != {want:#010x}");
            }
        }
    }

    #[test]
    fn encode_f32_matches_pytorch() {
        let t = tables();
        assert!(t.f32s.len() > 5000);
        for (bits, want) in &t.f32s {
            let x = f32::from_bits(*bits);
            for (m, want) in COLUMNS.iter().zip(want) {
                if let Some(want) = *want {
                    let got = m.from_f32(x);
                    assert_eq!(
                        got, want,
                        "{m:?} {x:e} ({bits:#010x}): {got:#04x} != {want:#04x}"
                    );
                }
            }
        }
    }

    #[test]
    fn encode_f64_matches_pytorch() {
        let t = tables();
        assert!(t.f64s.len() > 500);
        for (bits, want) in &t.f64s {
            let x = f64::from_bits(*bits);
            for (m, want) in COLUMNS.iter().zip(want) {
                if let Some(want) = *want {
                    assert_eq!(m.from_f64(x), want, "{m:?} {x:e}");
                }
            }
        }
        // Double rounding: direct rounding would give 1.125 (0x39).
        assert_eq!(MiniFloat::F8E4M3Fn.from_f64(1.0625 + 2f64.powi(-40)), 0x38);
    }

    #[test]
    fn every_pattern_round_trips() {
        for m in MiniFloat::ALL {
            for bits in 0..1u32 << m.bits() {
                let x = m.to_f32(bits as u8);
                if !x.is_nan() {
                    assert_eq!(u32::from(m.from_f32(x)), bits, "{m:?} {bits:#04x} = {x:e}");
                    assert_eq!(
                        u32::from(m.from_f64(f64::from(x))),
                        bits,
                        "{m:?} {bits:#04x}"
                    );
                }
            }
        }
    }

    #[test]
    fn format_facts() {
        let max = |m: MiniFloat| {
            (0..1u32 << m.bits())
                .map(|b| m.to_f32(b as u8))
                .filter(|x| x.is_finite())
                .fold(0f32, f32::max)
        };
        assert_eq!(max(MiniFloat::F8E4M3Fn), 448.0);
        assert_eq!(max(MiniFloat::F8E5M2), 57344.0);
        assert_eq!(max(MiniFloat::F8E4M3Fnuz), 240.0);
        assert_eq!(max(MiniFloat::F8E5M2Fnuz), 57344.0);
        assert_eq!(max(MiniFloat::F8E8M0Fnu), 2f32.powi(127));
        assert_eq!(max(MiniFloat::F4E2M1Fn), 6.0);
        let fp4: Vec<f32> = (0..8).map(|b| MiniFloat::F4E2M1Fn.to_f32(b)).collect();
        assert_eq!(fp4, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(MiniFloat::F8E8M0Fnu.to_f32(0).to_bits(), 0x0040_0000); // 2^-127
        assert_eq!(MiniFloat::F8E5M2.to_f32(0xFC), f32::NEG_INFINITY);
        let nans = |m: MiniFloat| {
            (0..=255u8)
                .filter(|b| m.to_f32(*b).is_nan())
                .collect::<Vec<_>>()
        };
        assert_eq!(nans(MiniFloat::F8E4M3Fn), [0x7F, 0xFF]);
        assert_eq!(
            nans(MiniFloat::F8E5M2),
            [0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF]
        );
        assert_eq!(nans(MiniFloat::F8E4M3Fnuz), [0x80]);
        assert_eq!(nans(MiniFloat::F8E5M2Fnuz), [0x80]);
        assert_eq!(nans(MiniFloat::F8E8M0Fnu), [0xFF]);
        assert_eq!(nans(MiniFloat::F4E2M1Fn), [] as [u8; 0]);
        let names: Vec<_> = MiniFloat::ALL
            .iter()
            .map(|m| (m.name(), m.bits()))
            .collect();
        assert_eq!(
            names,
            [
                ("float8_e4m3fn", 8),
                ("float8_e5m2", 8),
                ("float8_e4m3fnuz", 8),
                ("float8_e5m2fnuz", 8),
                ("float8_e8m0fnu", 8),
                ("float4_e2m1fn", 4),
            ]
        );
    }

    #[test]
    fn specials() {
        use MiniFloat::*;
        let enc = |m: MiniFloat, xs: &[f32]| xs.iter().map(|x| m.from_f32(*x)).collect::<Vec<_>>();
        let xs = [
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e9,
            -1e9,
        ];
        assert_eq!(
            enc(F8E4M3Fn, &xs),
            [0x7F, 0xFF, 0x7E, 0xFE, 0x80, 0x7E, 0xFE]
        );
        assert_eq!(enc(F8E5M2, &xs), [0x7F, 0xFF, 0x7C, 0xFC, 0x80, 0x7C, 0xFC]);
        assert_eq!(
            enc(F8E4M3Fnuz, &xs),
            [0x80, 0x80, 0x80, 0x80, 0x00, 0x80, 0x80]
        );
        assert_eq!(
            enc(F8E5M2Fnuz, &xs),
            [0x80, 0x80, 0x80, 0x80, 0x00, 0x80, 0x80]
        );
        assert_eq!(
            enc(F8E8M0Fnu, &xs),
            [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x9D, 0x9D]
        );
        assert_eq!(enc(F4E2M1Fn, &xs), [0x7, 0x7, 0x7, 0xF, 0x8, 0x7, 0xF]);
        // e8m0: ties go up, 3 -> 4; 1.5 * 2^127 overflows to NaN.
        assert_eq!(
            enc(F8E8M0Fnu, &[3.0, 2.9, 1.5 * 2f32.powi(127)]),
            [0x81, 0x80, 0xFF]
        );
    }

    #[test]
    fn f4x2_packing_is_low_nibble_first() {
        let (a, b) = (
            MiniFloat::F4E2M1Fn.from_f32(1.5),
            MiniFloat::F4E2M1Fn.from_f32(-2.0),
        );
        assert_eq!((a, b), (0x3, 0xC));
        // The first of a pair in the low nibble, as PyTorch packs them.
        let packed = a | (b << 4);
        assert_eq!(packed, 0xC3);
        assert_eq!([packed & 0x0F, packed >> 4], [a, b]);
        assert_eq!(MiniFloat::F4E2M1Fn.to_f32(0xC3), 1.5); // high nibble ignored
    }

    /// Brute force: the nearest representable value to an in-range `x`,
    /// ties to the even pattern, for the round-to-nearest-even formats.
    fn nearest_even(m: MiniFloat, x: f32) -> f32 {
        let mut best = (f64::INFINITY, 0u32);
        for b in 0..1u32 << m.bits() {
            let v = f64::from(m.to_f32(b as u8));
            let d = (v - f64::from(x)).abs();
            if d < best.0 || (d == best.0 && b & 1 == 0) {
                best = (d, b);
            }
        }
        m.to_f32(best.1 as u8)
    }

    proptest::proptest! {
        #[test]
        fn encode_is_nearest_even(bits: u32) {
            let x = f32::from_bits(bits);
            for m in [MiniFloat::F8E4M3Fn, MiniFloat::F8E5M2, MiniFloat::F8E4M3Fnuz,
                      MiniFloat::F8E5M2Fnuz, MiniFloat::F4E2M1Fn] {
                let max = (0..1u32 << m.bits()).map(|b| m.to_f32(b as u8))
                    .filter(|v| v.is_finite()).fold(0f32, f32::max);
                if x.abs() <= max {
                    let got = m.to_f32(m.from_f32(x));
                    proptest::prop_assert_eq!(got, nearest_even(m, x), "{:?} {:e}", m, x);
                }
            }
        }

        #[test]
        fn e8m0_is_nearest_power_of_two_ties_up(bits in 0x0080_0000u32..0x7F00_0000) {
            // f32 normals below 2^127: nearest power of two, ties up, sign ignored.
            let x = f32::from_bits(bits);
            let lo = f32::from_bits(bits & 0x7F80_0000);
            let want = if x - lo >= lo * 2.0 - x { lo * 2.0 } else { lo };
            proptest::prop_assert_eq!(MiniFloat::F8E8M0Fnu.to_f32(MiniFloat::F8E8M0Fnu.from_f32(-x)), want);
        }
    }
}
