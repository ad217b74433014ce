//! SHA-256 of sixteen messages at once on one core, on AVX-512.
//!
//! Written by hand because no Rust library does this: `sha2`, `ring` and
//! OpenSSL hash one message at a time (Intel's `isa-l_crypto` has such a
//! "multi-buffer" kernel, in C and assembly). Each of a 512-bit vector's
//! sixteen 32-bit lanes carries one message's SHA-256: the rounds are the
//! standard's (FIPS 180-4, 6.2.2) on whole vectors, with AVX-512's rotate
//! and three-input logic instructions. Where a core's SHA extensions run
//! one chain of dependent rounds, this keeps both vector ports busy with
//! sixteen independent ones (`docs/performance.md`, "Issue 42: sixteen
//! tensors hashed at once on AVX-512"). Where the CPU lacks AVX-512, or
//! hashes faster on its SHA extensions ([`preferred`]), the callers use
//! [`sha256x2`](super::sha256x2) instead.
//!
//! The digests are plain SHA-256: the tests check every lane, fed in
//! pieces of any size, against `sha2::Sha256`.

use std::sync::OnceLock;
use std::time::Instant;

use super::sha256x2::{update_both, Sha256, BLOCK};

/// How many messages [`update_lanes`] hashes at once.
pub(crate) const LANES: usize = 16;

/// The fewest bytes of each of sixteen messages worth hashing at once: a
/// caller that must gather them (take their storages' locks, hold its
/// pieces back) hashes fewer in pairs, and under a block a lane the kernel
/// saves nothing.
pub(crate) const AT_LEAST: usize = 16 << 10;

/// Whether this CPU runs [`update_lanes`]'s kernel (checked once; `std`
/// caches the answer).
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether sixteen messages at a time through [`update_lanes`] hash more
/// bytes a second on this CPU than two at a time through [`update_both`]:
/// raced once a process on a quarter of a MiB (under a millisecond), best
/// of three each. Having AVX-512 is not enough to know: a core that runs
/// 512-bit instructions as two halves (AMD's Zen 4) may well hash faster
/// on its SHA extensions.
pub(crate) fn preferred() -> bool {
    static CHOICE: OnceLock<bool> = OnceLock::new();
    *CHOICE.get_or_init(|| available() && race())
}

/// How many messages a core hashes at once on this CPU: sixteen where
/// that is the faster ([`preferred`]), two where it has the SHA
/// extensions ([`sha256x2::interleaves`](super::sha256x2::interleaves)),
/// else one.
pub(crate) fn width() -> usize {
    if preferred() {
        LANES
    } else if super::sha256x2::interleaves() {
        2
    } else {
        1
    }
}

/// [`preferred`]'s measurement: true when sixteen lanes were faster.
fn race() -> bool {
    const EACH: usize = 16 << 10;
    let data = vec![0x5a_u8; LANES * EACH];
    let best = |hash: &dyn Fn() -> [u8; 32]| {
        (0..3)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(hash());
                t.elapsed()
            })
            .min()
    };
    let sixteen = best(&|| {
        let mut hashes: [Sha256; LANES] = Default::default();
        let chunks: Vec<&[u8]> = data.chunks(EACH).collect();
        update_lanes(hashes.each_mut(), std::array::from_fn(|i| chunks[i]));
        hashes[0].clone().finalize()
    });
    let two = best(&|| {
        let (mut a, mut b) = (Sha256::default(), Sha256::default());
        for pair in data.chunks(2 * EACH) {
            let (x, y) = pair.split_at(EACH);
            update_both(&mut a, x, &mut b, y);
        }
        a.finalize()
    });
    sixteen < two
}

/// Hashes `data[i]` next into `hashes[i]`, for every lane. The whole blocks
/// all sixteen have in common go through the kernel together; the rest of
/// each goes alone. Without [`available`], each goes alone.
pub(crate) fn update_lanes(mut hashes: [&mut Sha256; LANES], data: [&[u8]; LANES]) {
    let mut rest = [&[][..]; LANES];
    let mut aligned = true;
    for ((h, d), r) in hashes.iter_mut().zip(data).zip(&mut rest) {
        *r = h.top_up(d);
        aligned &= h.is_aligned();
    }
    if aligned && available() {
        let whole = rest.iter().map(|r| r.len()).min().unwrap_or(0) / BLOCK * BLOCK;
        if whole > 0 {
            #[cfg(target_arch = "x86_64")]
            {
                let mut states = [[0u32; 8]; LANES];
                for (s, h) in states.iter_mut().zip(&hashes) {
                    *s = h.state();
                }
                avx512::compress_whole(&mut states, rest.map(|r| &r[..whole]));
                for (i, h) in hashes.into_iter().enumerate() {
                    h.advance(states[i], whole as u64);
                    h.update(&rest[i][whole..]);
                }
                return;
            }
        }
    }
    for (h, r) in hashes.into_iter().zip(rest) {
        h.update(r);
    }
}

/// The kernel: SHA-256's compression function on sixteen lanes.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // SIMD intrinsics: loads from raw pointers and AVX-512.
mod avx512 {
    use std::arch::x86_64::*;

    use super::LANES;
    use crate::checkpoint::content::sha256x2::{BLOCK, K};

    /// Hashes `data[i]`, whole blocks of one length, into `states[i]`.
    /// The caller has checked [`available`](super::available).
    pub(super) fn compress_whole(states: &mut [[u32; 8]; LANES], data: [&[u8]; LANES]) {
        let n = data[0].len() / BLOCK;
        assert!(super::available() && data.iter().all(|d| d.len() == n * BLOCK));
        // SAFETY: the CPU has the target features (asserted), and each
        // `data[i]` holds `n` whole blocks.
        unsafe { compress(states, data.map(<[u8]>::as_ptr), n) }
    }

    /// Hashes `n` blocks from each `data[i]` into `states[i]`.
    ///
    /// # Safety
    /// The CPU has AVX-512F and AVX-512BW, and each `data[i]` points to
    /// `n * 64` readable bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn compress(states: &mut [[u32; 8]; LANES], data: [*const u8; LANES], n: usize) {
        // Word j of every lane's state in one vector.
        let mut v = [_mm512_setzero_si512(); 8];
        for (j, v) in v.iter_mut().enumerate() {
            let words: [u32; LANES] = std::array::from_fn(|i| states[i][j]);
            // SAFETY: `words` is 64 bytes, one unaligned load.
            *v = unsafe { _mm512_loadu_si512(words.as_ptr().cast()) };
        }
        // Big-endian words from each 16 bytes.
        let swap =
            _mm512_broadcast_i32x4(_mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203));
        for block in 0..n {
            let mut rows = [_mm512_setzero_si512(); LANES];
            for (row, p) in rows.iter_mut().zip(data) {
                // SAFETY: block < n, so these 64 bytes are within the
                // lane's data.
                let word = unsafe { _mm512_loadu_si512(p.add(block * BLOCK).cast()) };
                *row = _mm512_shuffle_epi8(word, swap);
            }
            let mut w = transpose(rows);
            let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = v;
            for t in 0..64 {
                if t >= 16 {
                    // σ0 and σ1 of FIPS 180-4, 4.1.2.
                    let s0 = rotations_shift::<7, 18, 3>(w[(t - 15) % 16]);
                    let s1 = rotations_shift::<17, 19, 10>(w[(t - 2) % 16]);
                    w[t % 16] = _mm512_add_epi32(
                        _mm512_add_epi32(w[t % 16], s0),
                        _mm512_add_epi32(w[(t - 7) % 16], s1),
                    );
                }
                let kw = _mm512_add_epi32(w[t % 16], _mm512_set1_epi32(K[t] as i32));
                // Σ1 and Σ0.
                let s1 = rotations::<6, 11, 25>(e);
                let ch = _mm512_ternarylogic_epi32(e, f, g, CHOOSE);
                let t1 = _mm512_add_epi32(_mm512_add_epi32(h, kw), _mm512_add_epi32(s1, ch));
                let s0 = rotations::<2, 13, 22>(a);
                let maj = _mm512_ternarylogic_epi32(a, b, c, MAJORITY);
                h = g;
                g = f;
                f = e;
                e = _mm512_add_epi32(d, t1);
                d = c;
                c = b;
                b = a;
                a = _mm512_add_epi32(t1, _mm512_add_epi32(s0, maj));
            }
            for (v, x) in v.iter_mut().zip([a, b, c, d, e, f, g, h]) {
                *v = _mm512_add_epi32(*v, x);
            }
        }
        for (j, v) in v.iter().enumerate() {
            let mut words = [0u32; LANES];
            // SAFETY: `words` is 64 bytes, one unaligned store.
            unsafe { _mm512_storeu_si512(words.as_mut_ptr().cast(), *v) };
            for (state, word) in states.iter_mut().zip(words) {
                state[j] = word;
            }
        }
    }

    /// Each lane of `x` rotated right by `A`, `B` and `C`, XORed: SHA-256's
    /// Σ0 and Σ1.
    #[target_feature(enable = "avx512f")]
    fn rotations<const A: i32, const B: i32, const C: i32>(x: __m512i) -> __m512i {
        let (a, b, c) = (
            _mm512_ror_epi32::<A>(x),
            _mm512_ror_epi32::<B>(x),
            _mm512_ror_epi32::<C>(x),
        );
        _mm512_ternarylogic_epi32::<XOR3>(a, b, c)
    }

    /// Each lane of `x` rotated right by `A` and `B` and shifted right by
    /// `S`, XORed: SHA-256's σ0 and σ1.
    #[target_feature(enable = "avx512f")]
    fn rotations_shift<const A: i32, const B: i32, const S: u32>(x: __m512i) -> __m512i {
        let (a, b, c) = (
            _mm512_ror_epi32::<A>(x),
            _mm512_ror_epi32::<B>(x),
            _mm512_srli_epi32::<S>(x),
        );
        _mm512_ternarylogic_epi32::<XOR3>(a, b, c)
    }

    /// `_mm512_ternarylogic_epi32`'s table for `a ^ b ^ c`.
    const XOR3: i32 = 0x96;
    /// ... for `if a { b } else { c }`, bit by bit (SHA-256's `Ch`).
    const CHOOSE: i32 = 0xca;
    /// ... for the majority of `a`, `b` and `c` (SHA-256's `Maj`).
    const MAJORITY: i32 = 0xe8;

    /// Rows of sixteen words into columns: word `t` of every row in one
    /// vector, lane `i` from row `i`.
    #[target_feature(enable = "avx512f")]
    fn transpose(r: [__m512i; LANES]) -> [__m512i; LANES] {
        // Within each 128-bit quarter: pairs of rows' words, then fours.
        let mut t = [_mm512_setzero_si512(); LANES];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        // `u[4g + k]`'s quarter `q` holds word `4q + k` of rows `4g..4g+4`.
        let mut u = [_mm512_setzero_si512(); LANES];
        for g in 0..4 {
            let (lo, hi) = (t[4 * g], t[4 * g + 2]);
            let (lo2, hi2) = (t[4 * g + 1], t[4 * g + 3]);
            u[4 * g] = _mm512_unpacklo_epi64(lo, hi);
            u[4 * g + 1] = _mm512_unpackhi_epi64(lo, hi);
            u[4 * g + 2] = _mm512_unpacklo_epi64(lo2, hi2);
            u[4 * g + 3] = _mm512_unpackhi_epi64(lo2, hi2);
        }
        // The quarters of four rows' groups transposed, 4 by 4.
        let mut c = [_mm512_setzero_si512(); LANES];
        for k in 0..4 {
            let (a, b, x, y) = (u[k], u[4 + k], u[8 + k], u[12 + k]);
            let v0 = _mm512_shuffle_i32x4(a, b, 0x44);
            let v1 = _mm512_shuffle_i32x4(a, b, 0xee);
            let v2 = _mm512_shuffle_i32x4(x, y, 0x44);
            let v3 = _mm512_shuffle_i32x4(x, y, 0xee);
            c[k] = _mm512_shuffle_i32x4(v0, v2, 0x88);
            c[4 + k] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
            c[8 + k] = _mm512_shuffle_i32x4(v1, v3, 0x88);
            c[12 + k] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sha2::Digest;

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
            .collect()
    }

    fn sha2(data: &[u8]) -> [u8; 32] {
        sha2::Sha256::digest(data).into()
    }

    /// Sixteen messages of different lengths, fed in `pieces` rounds of
    /// equal shares, each lane's share cut where its own length falls.
    fn hash_in_rounds(messages: &[Vec<u8>], cuts: &[usize]) -> Vec<[u8; 32]> {
        let mut hashes: Vec<Sha256> = (0..LANES).map(|_| Sha256::default()).collect();
        let mut at = vec![0usize; LANES];
        for &cut in cuts {
            let data: [&[u8]; LANES] = std::array::from_fn(|i| {
                let m = &messages[i];
                let end = (at[i] + cut + 7 * i).min(m.len());
                &m[at[i]..end]
            });
            for (a, d) in at.iter_mut().zip(data) {
                *a += d.len();
            }
            let hs: [&mut Sha256; LANES] = {
                let mut it = hashes.iter_mut();
                std::array::from_fn(|_| it.next().expect("sixteen hashes"))
            };
            update_lanes(hs, data);
        }
        for ((h, m), a) in hashes.iter_mut().zip(messages).zip(&at) {
            h.update(&m[*a..]);
        }
        hashes.into_iter().map(Sha256::finalize).collect()
    }

    #[test]
    fn every_lane_is_its_own_messages_sha256() {
        let messages: Vec<Vec<u8>> = (0..LANES)
            .map(|i| bytes(64 * 40 + 13 * i, i as u8))
            .collect();
        let got = hash_in_rounds(&messages, &[64 * 3, 64 * 17, 5, 64 * 8 + 9]);
        for (i, (g, m)) in got.iter().zip(&messages).enumerate() {
            assert_eq!(*g, sha2(m), "lane {i}");
        }
    }

    proptest! {
        #[test]
        fn sixteen_messages_in_any_pieces(
            lens in proptest::collection::vec(0usize..3000, LANES),
            cuts in proptest::collection::vec(0usize..900, 1..8),
        ) {
            let messages: Vec<Vec<u8>> = lens
                .iter()
                .enumerate()
                .map(|(i, &l)| bytes(l, i as u8))
                .collect();
            let got = hash_in_rounds(&messages, &cuts);
            for (g, m) in got.iter().zip(&messages) {
                prop_assert_eq!(*g, sha2(m));
            }
        }
    }
}
