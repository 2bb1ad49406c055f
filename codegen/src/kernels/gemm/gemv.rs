//! The matrix-vector product `C[i] = epi(Σ_k A[i, k] · B[k])` (a 1×1 convolution on a 1×1
//! image, a fully connected layer; issue 6).
//!
//! It does two flops per A element loaded, so it is bound by the bandwidth at which A — the
//! weights, 5 MB for MobileNet's `logits` — streams from memory, not by the FMA units. The
//! kernel therefore keeps many loads in flight: [`ROWS`] rows at once (independent
//! streams for the hardware prefetcher) and [`UNROLL`] vectors of K per row per step, each
//! into its own accumulator, so no FMA waits on the previous one. The `ROWS × UNROLL`
//! partial sums of a row are added at the end (the summation order differs from the
//! reference's, within float rounding).

use super::spec::{finish_with, step_tiles, Epilogue, Gemm, Job};
use crate::nest::{llvm, K, R};
use inkwell::values::{BasicValueEnum, IntValue, VectorValue};

/// Rows per block: independent A streams.
const ROWS: i64 = 4;
/// Vectors of K per row and step: independent accumulators per row.
const UNROLL: i64 = 4;

/// The rows of `j.gm` in blocks of [`ROWS`], the last block `M mod ROWS` rows.
pub(super) fn emit(j: Job) -> R<()> {
    step_tiles(j.k, j.gm.m, ROWS, &mut |i0, rows| block(j, i0, rows))
}

/// Rows `i0 .. i0 + rows`: unrolled steps of `UNROLL` vectors, then single vectors, then
/// the scalar K tail.
fn block<'c>(j: Job<'_, '_, 'c>, i0: IntValue<'c>, rows: i64) -> R<()> {
    let k = j.k;
    let rs: Vec<IntValue> = (0..rows)
        .map(|r| k.mul(k.add(i0, k.c(r))?, j.gm.a_rs))
        .collect::<R<_>>()?;
    block_at(j, i0, &rs, None)
}

/// [`block`] with each row's first A element at `rs[r]` and, with `a_cs`, A's elements
/// along K that far apart (a row of a packed panel: each vector of A gathered lane by
/// lane; the same FMAs on the same values, so the same bits).
fn block_at<'c>(
    j: Job<'_, '_, 'c>,
    i0: IntValue<'c>,
    rs: &[IntValue<'c>],
    a_cs: Option<IntValue<'c>>,
) -> R<()> {
    let (k, w, gm, epi, res) = (j.k, j.w, j.gm, j.epi, j.res);
    let wl = w as i64;
    let step = UNROLL * wl;
    let kun = gm.k / step * step;
    let kv = gm.k / wl * wl;
    // `A[r, kk]` at `ar + kk` (or `ar + kk·a_cs`), one lane or `w` from `kk` on.
    let a_at = |ar: IntValue<'c>, kk: IntValue<'c>| -> R<IntValue<'c>> {
        match a_cs {
            Some(s) => k.add(ar, llvm(k.b.build_int_mul(kk, s, "akk"))?),
            None => k.add(ar, kk),
        }
    };
    let a_vec = |ar: IntValue<'c>, kk: IntValue<'c>| -> R<VectorValue<'c>> {
        if a_cs.is_none() {
            return k.ldv(gm.a, a_at(ar, kk)?, w);
        }
        let mut v = k.vty(w).get_undef();
        for l in 0..w {
            let x = k.ld(gm.a, a_at(ar, k.add(kk, k.c(l.into()))?)?)?;
            let lane = k.ctx.i32_type().const_int(l.into(), false);
            v = llvm(k.b.build_insert_element(v, x, lane, "ag"))?;
        }
        Ok(v)
    };
    let zero: BasicValueEnum = k.vty(w).const_zero().into();
    let un = UNROLL as usize;
    // Accumulator `r·UNROLL + u` of row `r` sums the K vectors `u (mod UNROLL)`.
    let acc = k.loop_carry(0, kun, step, vec![zero; rs.len() * un], &mut |kk, cur| {
        let bs: Vec<VectorValue> = (0..UNROLL)
            .map(|u| k.ldv(gm.b, k.add(kk, k.c(u * wl))?, w))
            .collect::<R<_>>()?;
        let mut next = Vec::with_capacity(cur.len());
        for &ar in rs {
            for (u, &b) in bs.iter().enumerate() {
                let a = a_vec(ar, k.add(kk, k.c(u as i64 * wl))?)?;
                next.push(k.fma(a, b, cur[next.len()].into_vector_value())?.into());
            }
        }
        Ok(next)
    })?;
    // The remaining whole vectors go to each row's first accumulator.
    let firsts: Vec<BasicValueEnum> = acc.iter().step_by(un).copied().collect();
    let firsts = k.loop_carry(kun, kv, wl, firsts, &mut |kk, cur| {
        let b = k.ldv(gm.b, kk, w)?;
        rs.iter()
            .zip(cur)
            .map(|(&ar, c)| {
                let a = a_vec(ar, kk)?;
                Ok(k.fma(a, b, c.into_vector_value())?.into())
            })
            .collect()
    })?;
    for (r, &ar) in rs.iter().enumerate() {
        let mut v = firsts[r].into_vector_value();
        for u in 1..un {
            let o = acc[r * un + u].into_vector_value();
            v = llvm(k.b.build_float_add(v, o, "s"))?;
        }
        let mut s = k.lane_sum(v, w)?;
        for kk in kv..gm.k {
            let a = k.ld(gm.a, a_at(ar, k.c(kk))?)?;
            s = k.fma(a, k.ld(gm.b, k.c(kk))?, s)?;
        }
        let row = k.add(i0, k.c(r as i64))?;
        let at = k.mul(row, gm.c_rs)?;
        let rl = match res {
            Some(p) => Some(k.ld(p, at)?),
            None => None,
        };
        let out = finish_with(k, epi, s, row, rl)?;
        k.st(gm.c, at, out)?;
    }
    Ok(())
}

/// [`emit`]'s rows one at a time up to a run-time row count (kernels with run-time extents,
/// `crate::dynamic`): each row is summed exactly as [`emit`] sums it (a row's accumulators
/// do not depend on how many rows share its block), so the outputs are bitwise equal.
pub(crate) fn emit_rows<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    epi: Epilogue<'c>,
    rows: IntValue<'c>,
) -> R<()> {
    let j = Job::new(k, w, gm, epi, None);
    k.loop_between(k.c(0), rows, &mut |i| block(j, i, 1))
}

/// [`emit_rows`] on an A stored as row panels: `at(i)` gives row `i`'s first element and
/// its K stride (the panel's height, `crate::dynamic::Panels`). Each row is summed as
/// [`emit`] sums it, so the outputs are those of the row-major A.
pub(crate) fn emit_rows_strided<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    epi: Epilogue<'c>,
    rows: IntValue<'c>,
    at: &dyn Fn(IntValue<'c>) -> R<(IntValue<'c>, IntValue<'c>)>,
) -> R<()> {
    let j = Job::new(k, w, gm, epi, None);
    k.loop_between(k.c(0), rows, &mut |i| {
        let (ar, cs) = at(i)?;
        block_at(j, i, &[ar], Some(cs))
    })
}
