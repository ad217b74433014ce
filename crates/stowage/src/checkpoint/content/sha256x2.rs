//! SHA-256 of two messages at once on one core, each fed piece by piece.
//!
//! Written by hand because no library does this: `sha2`, `ring` and
//! OpenSSL hash one message at a time, and `tape-sha256` interleaves only
//! messages held whole in memory. With the x86-64 SHA extensions one
//! message's rounds are a chain of dependent instructions that leaves the
//! SHA unit idle between them; stepping a second message through the same
//! rounds fills those gaps (as Linux's `sha256_ni_x2` does for dm-verity).
//! A core hashes 1.4x the bytes so on this project's AMD EPYC (Zen 3): 1.58
//! against 2.2 GB/s (`docs/performance.md`, "Issue 42: two tensors hashed
//! at once on each core"; `cargo bench -p stowage --bench digest`), 1.2x
//! on an Intel Xeon (Emerald Rapids), where sixteen at once on AVX-512
//! hash faster still ([`sha256x16`](super::sha256x16)). Where the CPU
//! lacks the SHA extensions, each message is hashed alone by `sha2`'s own
//! code, block by block.
//!
//! The digests are plain SHA-256, byte for byte `sha2`'s: the tests check
//! every way of splitting two messages between calls against `sha2::Sha256`.

use sha2::digest::generic_array::GenericArray;

pub(super) const BLOCK: usize = 64;

/// SHA-256's round constants (FIPS 180-4, 4.2.2).
pub(super) const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256's initial state (FIPS 180-4, 5.3.3).
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// One message's SHA-256 in progress.
#[derive(Clone)]
pub(crate) struct Sha256 {
    state: [u32; 8],
    /// The bytes of a block not yet complete: `block[..filled]`.
    block: [u8; BLOCK],
    filled: usize,
    /// Bytes hashed so far.
    len: u64,
}

impl Default for Sha256 {
    fn default() -> Self {
        Sha256 {
            state: IV,
            block: [0; BLOCK],
            filled: 0,
            len: 0,
        }
    }
}

impl Sha256 {
    /// Hashes `data` next.
    pub(crate) fn update(&mut self, data: &[u8]) {
        let rest = self.top_up(data);
        let whole = rest.len() / BLOCK * BLOCK;
        compress(&mut self.state, &rest[..whole]);
        self.len += whole as u64;
        self.keep(&rest[whole..]);
    }

    /// The digest of everything hashed.
    pub(crate) fn finalize(mut self) -> [u8; 32] {
        let bits = self.len.wrapping_mul(8);
        let mut tail = [0u8; 2 * BLOCK];
        tail[..self.filled].copy_from_slice(&self.block[..self.filled]);
        tail[self.filled] = 0x80;
        // The length goes in the last 8 bytes of the block the padding
        // byte lies in, or of the next one if fewer than 8 are left.
        let end = if self.filled + 1 + 8 <= BLOCK {
            BLOCK
        } else {
            2 * BLOCK
        };
        tail[end - 8..end].copy_from_slice(&bits.to_be_bytes());
        compress(&mut self.state, &tail[..end]);
        let mut out = [0u8; 32];
        for (o, w) in out.chunks_exact_mut(4).zip(self.state) {
            o.copy_from_slice(&w.to_be_bytes());
        }
        out
    }

    /// Completes the partial block from the front of `data` (hashing it
    /// once whole); what is left of `data`, which then starts a block.
    pub(super) fn top_up<'d>(&mut self, data: &'d [u8]) -> &'d [u8] {
        if self.filled == 0 {
            return data;
        }
        let n = (BLOCK - self.filled).min(data.len());
        self.block[self.filled..self.filled + n].copy_from_slice(&data[..n]);
        self.filled += n;
        self.len += n as u64;
        if self.filled == BLOCK {
            let block = self.block;
            compress(&mut self.state, &block);
            self.filled = 0;
        }
        &data[n..]
    }

    /// Whether no partial block is pending: the next bytes start a block.
    pub(super) fn is_aligned(&self) -> bool {
        self.filled == 0
    }

    /// The state after the whole blocks hashed so far.
    pub(super) fn state(&self) -> [u32; 8] {
        self.state
    }

    /// Takes `state` as the state after `n` more bytes, whole blocks
    /// compressed elsewhere (the message was [aligned](Self::is_aligned)).
    pub(super) fn advance(&mut self, state: [u32; 8], n: u64) {
        debug_assert!(self.is_aligned() && n.is_multiple_of(BLOCK as u64));
        self.state = state;
        self.len += n;
    }

    /// Keeps `rest`, less than a block, for the next call.
    fn keep(&mut self, rest: &[u8]) {
        debug_assert!(self.filled + rest.len() < BLOCK);
        self.block[self.filled..self.filled + rest.len()].copy_from_slice(rest);
        self.filled += rest.len();
        self.len += rest.len() as u64;
    }
}

/// Hashes `da` next into `a` and `db` into `b`, the two at once where the
/// CPU can ([`interleaves`]). The bytes the two have in common, in whole
/// blocks, go through together; the rest of either goes alone.
pub(crate) fn update_both(a: &mut Sha256, da: &[u8], b: &mut Sha256, db: &[u8]) {
    let (da, db) = (a.top_up(da), b.top_up(db));
    let (da, db) = if a.filled == 0 && b.filled == 0 {
        let whole = da.len().min(db.len()) / BLOCK * BLOCK;
        compress_two(&mut a.state, &da[..whole], &mut b.state, &db[..whole]);
        a.len += whole as u64;
        b.len += whole as u64;
        (&da[whole..], &db[whole..])
    } else {
        (da, db)
    };
    a.update(da);
    b.update(db);
}

/// Whether [`update_both`] hashes its two messages at once on this CPU
/// (else one after the other, so a caller gains nothing pairing them).
pub(crate) fn interleaves() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        ni::present()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Hashes `blocks` (whole blocks) into `state`.
fn compress(state: &mut [u32; 8], blocks: &[u8]) {
    debug_assert_eq!(blocks.len() % BLOCK, 0);
    #[cfg(target_arch = "x86_64")]
    if ni::present() {
        ni::compress_one(state, blocks);
        return;
    }
    portable(state, blocks);
}

/// [`compress`] without the SHA extensions: `sha2`'s code, a block at a time.
fn portable(state: &mut [u32; 8], blocks: &[u8]) {
    for block in blocks.chunks_exact(BLOCK) {
        sha2::compress256(state, &[*GenericArray::from_slice(block)]);
    }
}

/// Hashes `da` into `a` and `db` into `b`, both whole blocks of one length.
fn compress_two(a: &mut [u32; 8], da: &[u8], b: &mut [u32; 8], db: &[u8]) {
    debug_assert_eq!(da.len(), db.len());
    #[cfg(target_arch = "x86_64")]
    if ni::present() {
        ni::compress_two(a, da, b, db);
        return;
    }
    compress(a, da);
    compress(b, db);
}

/// The kernel on the x86-64 SHA extensions (SHA-NI), for one message or two.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // SIMD intrinsics: loads from slices and the SHA instructions.
mod ni {
    use std::arch::x86_64::*;

    use super::{BLOCK, K};

    /// Whether this CPU has the instructions the kernel uses (checked once;
    /// `std` caches the answer).
    pub(super) fn present() -> bool {
        is_x86_feature_detected!("sha")
            && is_x86_feature_detected!("sse2")
            && is_x86_feature_detected!("ssse3")
            && is_x86_feature_detected!("sse4.1")
    }

    pub(super) fn compress_one(state: &mut [u32; 8], blocks: &[u8]) {
        let n = blocks.len() / BLOCK;
        // SAFETY: `present()` was true (the callers check it), so the CPU
        // has the target features; `blocks` holds `n` whole blocks.
        unsafe { compress::<1>([state], [blocks.as_ptr()], n) }
    }

    pub(super) fn compress_two(a: &mut [u32; 8], da: &[u8], b: &mut [u32; 8], db: &[u8]) {
        let n = da.len().min(db.len()) / BLOCK;
        // SAFETY: as in `compress_one`; `da` and `db` each hold `n` whole
        // blocks.
        unsafe { compress::<2>([a, b], [da.as_ptr(), db.as_ptr()], n) }
    }

    /// Hashes `n` blocks from each `data[i]` into `states[i]`, the `N`
    /// messages' rounds interleaved.
    ///
    /// # Safety
    /// The CPU has the target features, and each `data[i]` points to `n *
    /// 64` readable bytes.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn compress<const N: usize>(states: [&mut [u32; 8]; N], data: [*const u8; N], n: usize) {
        // Big-endian words from the bytes.
        let swap = _mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203);
        // The SHA instructions keep the state as words A, B, E, F and C, D,
        // G, H.
        let mut abef = [_mm_setzero_si128(); N];
        let mut cdgh = [_mm_setzero_si128(); N];
        for i in 0..N {
            let p = states[i].as_ptr().cast::<__m128i>();
            // SAFETY: a state is 8 words, two unaligned 16-byte loads.
            let (dcba, hgfe) = unsafe { (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1))) };
            let cdab = _mm_shuffle_epi32(dcba, 0xb1);
            let efgh = _mm_shuffle_epi32(hgfe, 0x1b);
            abef[i] = _mm_alignr_epi8(cdab, efgh, 8);
            cdgh[i] = _mm_blend_epi16(efgh, cdab, 0xf0);
        }
        let k = K.as_ptr().cast::<__m128i>();
        for block in 0..n {
            let (abef0, cdgh0) = (abef, cdgh);
            let mut w = [[_mm_setzero_si128(); 4]; N];
            for i in 0..N {
                // SAFETY: block < n, so these 64 bytes are within `data[i]`.
                let p = unsafe { data[i].add(block * BLOCK) }.cast::<__m128i>();
                for (j, w) in w[i].iter_mut().enumerate() {
                    // SAFETY: the j-th 16 bytes of that block.
                    *w = _mm_shuffle_epi8(unsafe { _mm_loadu_si128(p.add(j)) }, swap);
                }
            }
            for r in 0..16 {
                let j = r % 4;
                // SAFETY: K has 16 groups of 4 words.
                let kr = unsafe { _mm_loadu_si128(k.add(r)) };
                for i in 0..N {
                    if r >= 4 {
                        let w = &mut w[i];
                        let t = _mm_sha256msg1_epu32(w[j], w[(j + 1) % 4]);
                        let t =
                            _mm_add_epi32(t, _mm_alignr_epi8(w[(j + 3) % 4], w[(j + 2) % 4], 4));
                        w[j] = _mm_sha256msg2_epu32(t, w[(j + 3) % 4]);
                    }
                    let t = _mm_add_epi32(w[i][j], kr);
                    cdgh[i] = _mm_sha256rnds2_epu32(cdgh[i], abef[i], t);
                    abef[i] = _mm_sha256rnds2_epu32(abef[i], cdgh[i], _mm_shuffle_epi32(t, 0x0e));
                }
            }
            for i in 0..N {
                abef[i] = _mm_add_epi32(abef[i], abef0[i]);
                cdgh[i] = _mm_add_epi32(cdgh[i], cdgh0[i]);
            }
        }
        for (i, state) in states.into_iter().enumerate() {
            let feba = _mm_shuffle_epi32(abef[i], 0x1b);
            let dchg = _mm_shuffle_epi32(cdgh[i], 0xb1);
            let dcba = _mm_blend_epi16(feba, dchg, 0xf0);
            let hgef = _mm_alignr_epi8(dchg, feba, 8);
            let p = state.as_mut_ptr().cast::<__m128i>();
            // SAFETY: a state is 8 words, two unaligned 16-byte stores.
            unsafe {
                _mm_storeu_si128(p, dcba);
                _mm_storeu_si128(p.add(1), hgef);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sha2::Digest;

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn sha2(data: &[u8]) -> [u8; 32] {
        sha2::Sha256::digest(data).into()
    }

    #[test]
    fn one_message_at_every_length_around_the_padding() {
        for len in 0..300 {
            let data = bytes(len, 7);
            let mut h = Sha256::default();
            h.update(&data);
            assert_eq!(h.finalize(), sha2(&data), "length {len}");
        }
    }

    #[test]
    fn the_kernel_and_the_portable_code_agree() {
        let data = bytes(64 * 37, 3);
        let (mut ni, mut plain) = (IV, IV);
        compress(&mut ni, &data);
        portable(&mut plain, &data);
        assert_eq!(ni, plain);
        let (mut a, mut b) = (IV, [1u32; 8]);
        compress_two(&mut a, &data, &mut b, &data);
        assert_eq!(a, plain);
        let mut c = [1u32; 8];
        portable(&mut c, &data);
        assert_eq!(b, c);
    }

    proptest! {
        /// Two messages fed together in pieces of any sizes, at any offsets
        /// in their blocks, some pieces alone, give each its own digest.
        #[test]
        fn two_messages_in_any_pieces(
            la in 0usize..5000,
            lb in 0usize..5000,
            cuts in proptest::collection::vec((0usize..700, 0usize..700, 0u8..4), 1..12),
        ) {
            let (ma, mb) = (bytes(la, 1), bytes(lb, 2));
            let (mut a, mut b) = (Sha256::default(), Sha256::default());
            let (mut ra, mut rb) = (&ma[..], &mb[..]);
            for (ca, cb, how) in cuts {
                let (pa, pb) = (ca.min(ra.len()), cb.min(rb.len()));
                match how {
                    0 => a.update(&ra[..pa]),
                    1 => b.update(&rb[..pb]),
                    _ => update_both(&mut a, &ra[..pa], &mut b, &rb[..pb]),
                }
                if how != 1 { ra = &ra[pa..]; }
                if how != 0 { rb = &rb[pb..]; }
            }
            update_both(&mut a, ra, &mut b, rb);
            prop_assert_eq!(a.finalize(), sha2(&ma));
            prop_assert_eq!(b.finalize(), sha2(&mb));
        }
    }
}
