//! The channel-vector GEMM of a pointwise convolution (`kernels::gemm::chanvec`, issue 20)
//! at a pixel count known only at run time (issue 18).
//!
//! The static compile runs a 1×1 convolution on a small image (2–289 pixels but the full
//! pixel-vector tiles of 3 vectors or more, K ≥ 128, 32 vector registers:
//! `gemm::chanvec_rows`) with vectors along the output channels: on the pixel-vector tiles 9
//! pixels fill 9 of 16 lanes, here every lane but in the last channel panel is an output.
//! MobileNet v2 at 96×96 runs its last stages at 6×6 and 3×3, where the dynamic pixel-vector
//! tiles took about 1.3× the static time.
//!
//! Weights are constants whatever the image size, so a dynamic compile stores, for every
//! pointwise convolution that may take this path, a second copy of its weights in the
//! static kernel's `[M/MR][K][MR]` panels (`MR` = 3 vectors) right after its first layout
//! (`Storage::copy_panels_by`, [`super::cnn::chanvec_rows`]). At run time the kernel takes this
//! path exactly when the static compile at that shape would ([`PixelMask::chosen`]: the
//! static rule, `gemm::chanvec_rows`, evaluated at compile time for every pixel count and
//! kept as a bit mask), with the static kernel's pixel tiles (`chanvec::pixels`: 8, 7 or 6
//! pixels, whichever divides the count first, else 8 and a shorter last tile) and K chunks.
//!
//! **Bits.** Every output is the static chain: zero, one FMA per k in `k = 0..K` order (the
//! chunks resume from the exact f32 partial sums they stored), then `gemm::finish_with`. That
//! is also the pixel-vector tiles' chain, so the bytes are the static compile's at every size,
//! whichever kernel either compile picks; the tests compare them at sizes on both sides of
//! the rule.

use super::Dk;
use crate::kernels::common::entry_scratch;
use crate::kernels::gemm::{
    chanvec_chains, chanvec_contiguous, chanvec_panel_vectors, chanvec_rows, finish_with, k_blocks,
    ChanvecBAt, Epilogue, KBlock, CHANVEC_KC, CHANVEC_VECTORS,
};
use crate::nest::{llvm, R};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

/// Pixel counts up to which the mask below holds the static rule: 5 words of 64 counts,
/// past `chanvec`'s `MAX_PIXELS` (289, 17×17), so every count the static compile may run on
/// these tiles has its bit (a test checks the rule takes none past it). Until issue 18's
/// follow-up the mask was one word (1–64 pixels), and at 14×14 (MobileNet v2 at 224, its
/// 384→64, 384→96 and 576→96 layers) the run-time compile stayed on the pixel-vector tiles where the
/// static compile had moved to these.
const MAX_PIXELS: i64 = 64 * WORDS as i64;
/// Words of [`PixelMask`].
const WORDS: usize = 5;

/// The pixel counts `n` (bit `(n − 1) mod 64` of word `(n − 1) / 64`) at which the static
/// compile runs a pointwise convolution (of given input channels, at given lanes) on the
/// channel-vector tiles: `gemm::chanvec_rows` itself, evaluated at compile time, so the
/// run-time choice cannot drift from the static one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PixelMask([u64; WORDS]);

impl PixelMask {
    /// The mask of a pointwise convolution of `kk` input channels at `w` lanes; empty when
    /// the static rule never takes the tiles (too few registers or channels).
    pub(super) fn of(w: u32, kk: i64) -> Self {
        let mut words = [0; WORDS];
        for n in (1..=MAX_PIXELS).filter(|&n| chanvec_rows(w, n, kk).is_some()) {
            let i = (n - 1) as usize;
            words[i / 64] |= 1 << (i % 64);
        }
        Self(words)
    }

    /// Whether no pixel count takes the tiles.
    pub(super) fn is_empty(&self) -> bool {
        self.0.iter().all(|&m| m == 0)
    }

    /// Whether `n` pixels take the tiles.
    fn has(&self, n: i64) -> bool {
        (1..=MAX_PIXELS).contains(&n) && {
            let i = (n - 1) as usize;
            self.0[i / 64] >> (i % 64) & 1 == 1
        }
    }

    /// The largest pixel count that takes the tiles (0 when none does): the partial sums'
    /// scratch holds that many pixels' slots.
    fn largest(&self) -> i64 {
        (1..=MAX_PIXELS).rev().find(|&n| self.has(n)).unwrap_or(0)
    }

    /// Whether the run-time pixel count `n` takes the channel-vector tiles: `n − 1 <`
    /// [`MAX_PIXELS`] (unsigned) and its bit set. The word is picked by a chain of selects
    /// (at most 5 constants, no table in memory), the shift masked into 0..63 so it is
    /// defined for every `n`.
    pub(super) fn chosen<'a, 'c>(&self, d: &Dk<'a, 'c>, n: IntValue<'c>) -> R<IntValue<'c>> {
        let k = &d.k;
        let b = k.b;
        let i = k.add(n, k.c(-1))?;
        let small = llvm(b.build_int_compare(IntPredicate::ULT, i, k.c(MAX_PIXELS), "cv_small"))?;
        let wi = llvm(b.build_right_shift(i, k.c(6), false, "cv_wi"))?;
        let mut bits = k.i64t.const_int(self.0[0], false);
        for (j, &m) in self.0.iter().enumerate().skip(1) {
            let is = llvm(b.build_int_compare(IntPredicate::EQ, wi, k.c(j as i64), "cv_w"))?;
            let word = k.i64t.const_int(m, false);
            bits = llvm(b.build_select(is, word, bits, "cv_word"))?.into_int_value();
        }
        let sh = llvm(b.build_and(i, k.c(63), "cv_sh"))?;
        let bit = llvm(b.build_right_shift(bits, sh, false, "cv_bit"))?;
        let bit = llvm(b.build_and(bit, k.c(1), "cv_bit1"))?;
        let on = llvm(b.build_int_compare(IntPredicate::NE, bit, k.c(0), "cv_on"))?;
        llvm(b.build_and(small, on, "cv"))
    }
}

/// A pointwise convolution's GEMM of one image: `C[M, N] = A[M, K] · B[K, N]`, `N = n` pixels
/// at run time, A the `[M/MR][K][MR]` panels at `a`, B and C row-major with row stride `n`.
/// Rows `[m0, m1)`: `m0` a multiple of `MR` (a thread's share, cut at whole panels), `m1`
/// one too or `M`. `epi`: its row bias indexed by the absolute row. `mask`: the pixel counts
/// at which the caller runs this (the scratch holds the largest).
#[allow(clippy::too_many_arguments)]
pub(super) fn emit<'a, 'c>(
    d: &Dk<'a, 'c>,
    w: u32,
    (a, bx, cx): (PointerValue<'c>, PointerValue<'c>, PointerValue<'c>),
    (m, kk): (i64, i64),
    n: IntValue<'c>,
    (m0, m1): (IntValue<'c>, IntValue<'c>),
    epi: Epilogue<'c>,
    mask: &PixelMask,
) -> R<()> {
    let k = &d.k;
    let mr = CHANVEC_VECTORS * w as i64;
    // One slot of `MR` floats per pixel: every pixel tile's partial sums between K chunks
    // (the static kernel's `MR · n`; 54 KiB at 289 pixels and 16 lanes).
    let sums = entry_scratch(k, mr * mask.largest(), "cv_sums")?;
    let g = Tiles {
        d,
        w,
        a,
        bx,
        cx,
        kk,
        n,
        epi,
        sums,
    };
    let mfull = m / mr * mr;
    let full_end = min(d, m1, k.c(mfull))?;
    d.loop_step(m0, full_end, mr, &mut |i0| g.panel(i0, mr))?;
    if mfull < m {
        let last = llvm(k.b.build_int_compare(IntPredicate::SGT, m1, k.c(mfull), "cv_last"))?;
        k.when(last, &mut || g.panel(k.c(mfull), m - mfull))?;
    }
    Ok(())
}

/// The smaller of two signed values.
fn min<'a, 'c>(d: &Dk<'a, 'c>, x: IntValue<'c>, y: IntValue<'c>) -> R<IntValue<'c>> {
    let b = d.k.b;
    let lt = llvm(b.build_int_compare(IntPredicate::SLT, x, y, "cv_lt"))?;
    Ok(llvm(b.build_select(lt, x, y, "cv_min"))?.into_int_value())
}

/// One image's GEMM on the channel-vector tiles (see [`emit`]).
struct Tiles<'d, 'a, 'c> {
    d: &'d Dk<'a, 'c>,
    w: u32,
    a: PointerValue<'c>,
    bx: PointerValue<'c>,
    cx: PointerValue<'c>,
    kk: i64,
    n: IntValue<'c>,
    epi: Epilogue<'c>,
    sums: PointerValue<'c>,
}

impl<'d, 'a, 'c> Tiles<'d, 'a, 'c> {
    /// The panel of rows `i0 .. i0 + mr`: its K chunks, each run by every pixel tile (the
    /// static kernel's order: a chunk of the panel is read from memory by the first pixel
    /// tile and from L1 by the others).
    fn panel(&self, i0: IntValue<'c>, mr: i64) -> R<()> {
        let k = &self.d.k;
        let b = k.b;
        let n = self.n;
        // `chanvec::pixels`: 8, 7 or 6 pixels per tile, whichever divides `n` first, else 8
        // and a shorter last tile; never more than `n`.
        let divides = |p: i64| -> R<IntValue<'c>> {
            let r = llvm(b.build_int_signed_rem(n, k.c(p), "cv_r"))?;
            llvm(b.build_int_compare(IntPredicate::EQ, r, k.c(0), "cv_div"))
        };
        let (d8, d7, d6) = (divides(8)?, divides(7)?, divides(6)?);
        let sel = |c: IntValue<'c>, x: IntValue<'c>, y: IntValue<'c>| -> R<IntValue<'c>> {
            Ok(llvm(b.build_select(c, x, y, "cv_p"))?.into_int_value())
        };
        let pr = sel(d6, k.c(6), k.c(8))?;
        let pr = sel(d7, k.c(7), pr)?;
        let pr = sel(d8, k.c(8), pr)?;
        let pr = min(self.d, pr, n)?;
        let q = llvm(b.build_int_signed_div(n, pr, "cv_q"))?;
        let nfull = self.d.imul(q, pr)?;
        let rem = llvm(b.build_int_sub(n, nfull, "cv_rem"))?;
        k_blocks(k, self.kk, CHANVEC_KC, &mut |kb| {
            // Whole tiles of `pr` pixels (2–8, a constant in each branch).
            for p in 2..=8 {
                let is = llvm(b.build_int_compare(IntPredicate::EQ, pr, k.c(p), "cv_is"))?;
                k.when(is, &mut || {
                    self.d
                        .loop_step(k.c(0), nfull, p, &mut |j0| self.tile(kb, i0, mr, j0, p))
                })?;
            }
            // The shorter last tile (only after tiles of 8).
            for p in 1..8 {
                let is = llvm(b.build_int_compare(IntPredicate::EQ, rem, k.c(p), "cv_tail"))?;
                k.when(is, &mut || self.tile(kb, i0, mr, nfull, p))?;
            }
            Ok(())
        })
    }

    /// One tile over the K chunk `kb`: rows `i0 .. i0 + mr` (the panel's height; the last
    /// vector masked when `mr` is not a multiple of `w`) × pixels `j0 .. j0 + np`, as
    /// `chanvec::tile`. Its sums wait in the pixels' slots between chunks; after the last
    /// chunk every output gets the epilogue from its slot, one row at a time.
    fn tile(&self, kb: KBlock<'c>, i0: IntValue<'c>, mr: i64, j0: IntValue<'c>, np: i64) -> R<()> {
        let (d, k, w) = (self.d, &self.d.k, self.w);
        let wl = w as i64;
        let slot = k.gep(self.sums, d.imul(j0, k.c(CHANVEC_VECTORS * wl))?)?;
        let acc = chanvec_chains(
            k,
            w,
            (self.a, self.bx),
            &chanvec_panel_vectors(k, w, self.kk, (i0, mr))?,
            &ChanvecBAt {
                row: &|kq, _| d.imul(kq, self.n),
                group: 1,
                pix: chanvec_contiguous(k, j0, np)?,
            },
            slot,
            kb,
            mr,
        )?;
        for (i, a) in acc.iter().enumerate() {
            k.stv(slot, k.c(i as i64 * wl), a.into_vector_value())?;
        }
        if !kb.last {
            return Ok(());
        }
        // Row `r` of the panel is lane `r mod W` of vector `r / W`; pixel `j`'s sums are the
        // `nv` vectors from `j·W` in vector-major order (`(v·np + j)·W + l`).
        k.loop_(0, mr, &mut |r| {
            let v = llvm(k.b.build_int_unsigned_div(r, k.c(wl), "cv_v"))?;
            let l = llvm(k.b.build_int_unsigned_rem(r, k.c(wl), "cv_l"))?;
            let row = k.add(i0, r)?;
            let rowc = k.add(d.imul(row, self.n)?, j0)?;
            let vbase = k.add(k.mul(k.mul(v, np)?, wl)?, l)?;
            for j in 0..np {
                let sum = k.ld(slot, k.add(vbase, k.c(j * wl))?)?;
                let y = finish_with(k, self.epi, sum, row, None)?;
                k.st(self.cx, k.add(rowc, k.c(j))?, y)?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_is_the_static_rule() {
        // At 16 lanes with K ≥ 128: 2–289 pixels but the full pixel-vector tiles of 3 vectors
        // or more (48, 80, …, 288; 64, the narrow tiles' reach, runs here too).
        let m = PixelMask::of(16, 128);
        for n in 1..=MAX_PIXELS {
            assert_eq!(m.has(n), chanvec_rows(16, n, 128).is_some(), "{n} pixels");
            let full = n % 16 == 0 && n >= 48 && n != 64;
            assert_eq!(m.has(n), (2..=289).contains(&n) && !full, "{n} pixels");
        }
        assert_eq!(m.largest(), 289);
    }

    #[test]
    fn the_mask_is_empty_without_enough_channels_or_registers() {
        assert!(PixelMask::of(16, 127).is_empty());
        assert!(PixelMask::of(8, 512).is_empty());
        assert_eq!(PixelMask::of(8, 512).largest(), 0);
    }

    #[test]
    fn the_static_rule_takes_no_count_past_the_mask() {
        // Were the static rule raised past the mask's reach, the run-time compile would run
        // the pixel-vector tiles at those counts and fall behind the static one unseen.
        for w in [4, 8, 16] {
            for kk in [128, 4096] {
                for n in MAX_PIXELS + 1..=4 * MAX_PIXELS {
                    assert_eq!(
                        chanvec_rows(w, n, kk),
                        None,
                        "{w} lanes, {n} pixels, K {kk}"
                    );
                }
            }
        }
    }
}
