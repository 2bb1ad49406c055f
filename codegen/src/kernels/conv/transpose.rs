//! Transposed convolution (`conv_transpose`) in gather form with the stride phases split, so
//! that every inner loop is dense and nothing needs a scratch buffer.
//!
//! Output pixel `(oy, ox)` of channel `m` sums `x[c, iy, ix] · w[c, m, i, j]` over the taps
//! with `oy + pad_top = iy·sH + i·dH` and `ox + pad_left = ix·sW + j·dW`. Split the output by
//! phase `(py, px) = (oy mod sH, ox mod sW)`: within one phase the taps that contribute are
//! fixed (those with `py + pad_top - i·dH ≡ 0 mod sH`, likewise for `j`), and each reads input
//! row `t + ci` and column `u + cj` for phase row `t` and column `u` (`oy = py + t·sH`,
//! `ox = px + u·sW`). So every phase is a stride-1 correlation of the input with a sub-kernel:
//! the same implicit-GEMM tiles as [`super::im2col`] — `MR` output channels × `NV` vectors of
//! `W` phase columns, the K loop over input channels with the phase's taps unrolled, input rows
//! loaded contiguously (border lanes masked with compile-time masks), weights splat. The only
//! strided access is the store: a phase's columns are every `sW`-th output column, stored lane
//! by lane when `sW > 1` (once per `C/groups · taps` multiply-adds). This is how XNNPACK's
//! and MLAS's deconvolutions avoid the col2im scatter too (a sub-convolution per output
//! phase), written here over the builder's loops.
//!
//! Rows whose taps all lie inside the input run in one loop per phase; the border rows are
//! emitted one by one with only their valid taps. A phase with no taps at all (stride larger
//! than the kernel) still stores the bias, so every output element is written; the fused
//! activation then runs over the finished output in one contiguous loop.

use super::geometry::{interval, row_tiles, tap_fmas, Block, RowTile, ROW_MR, ROW_NV};
use crate::kernels::common::activation;
use crate::nest::{llvm, K, R};
use inkwell::values::{IntValue, PointerValue, VectorValue};
use tir_ir::Activation;

/// Output channels per tile (the threads cut at multiples of it).
pub(super) const MR: i64 = ROW_MR;

/// A transposed convolution's constant extents for one kernel body: `n` images of `c` input
/// channels in `groups` groups, computing `m` output channels (`m / groups` per group) out of
/// weights whose second dimension is `mw` (the full `M/groups`: a tile computing a chunk of
/// channels keeps the weights' strides).
#[derive(Clone, Copy)]
pub(crate) struct TConv {
    pub n: i64,
    pub c: i64,
    pub h: i64,
    pub wi: i64,
    pub m: i64,
    pub mw: i64,
    pub groups: i64,
    pub kh: i64,
    pub kw: i64,
    pub oh: i64,
    pub ow: i64,
    pub sh: i64,
    pub sw: i64,
    pub dh: i64,
    pub dw: i64,
    pub pt: i64,
    pub pl: i64,
    pub act: Option<Activation>,
}

/// The taps of one phase along one axis: `(tap, offset)` where the phase's row or column `t`
/// reads input `t + offset`.
fn phase_taps(phase: i64, pad: i64, k: i64, d: i64, s: i64) -> Vec<(i64, i64)> {
    (0..k)
        .filter_map(|i| {
            let q = phase + pad - i * d;
            (q.rem_euclid(s) == 0).then_some((i, q.div_euclid(s)))
        })
        .collect()
}

/// How many outputs of `0..n` fall in phase `p` of stride `s`.
fn phase_len(n: i64, p: i64, s: i64) -> i64 {
    if p < n {
        (n - p + s - 1) / s
    } else {
        0
    }
}

fn blocks(ulen: i64, wi: i64, cols: &[(i64, i64)], w: i64) -> Vec<Block> {
    let mut out = Vec::new();
    let mut u0 = 0;
    while u0 < ulen {
        let nv = ((ulen - u0 + w - 1) / w).min(ROW_NV);
        let mut store = Vec::new();
        let mut load = Vec::new();
        for v in 0..nv {
            let lane_u = |l: i64| u0 + v * w + l;
            store.push((0..w).map(|l| lane_u(l) < ulen).collect());
            load.push(
                cols.iter()
                    .map(|&(_, cj)| {
                        (0..w)
                            .map(|l| {
                                let ix = lane_u(l) + cj;
                                lane_u(l) < ulen && ix >= 0 && ix < wi
                            })
                            .collect()
                    })
                    .collect(),
            );
        }
        out.push(Block {
            first: u0,
            nv,
            store,
            load,
        });
        u0 += nv * w;
    }
    out
}

/// Emits the kernel body at the builder's position; `pb` is the optional bias.
pub(crate) fn emit<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &TConv,
    px: PointerValue<'c>,
    pw: PointerValue<'c>,
    pb: Option<PointerValue<'c>>,
    po: PointerValue<'c>,
) -> R<()> {
    emit_rows(k, w, d, 0..phase_rows(d), px, pw, pb, po)
}

/// Rows of the longest output phase (phase 0): the units of the threads' cut by rows.
pub(crate) fn phase_rows(d: &TConv) -> i64 {
    phase_len(d.oh, 0, d.sh)
}

/// [`emit`] for the phase rows `band` only: output rows `band.start·sH .. band.end·sH` (a band
/// of the threads' cut by rows). Every phase row runs the code it runs in the whole output
/// (the same taps, column blocks and channel tiles), and the fused activation is the same
/// element-wise function over the band's rows, so a band gives the whole output's values.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_rows<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &TConv,
    band: std::ops::Range<i64>,
    px: PointerValue<'c>,
    pw: PointerValue<'c>,
    pb: Option<PointerValue<'c>>,
    po: PointerValue<'c>,
) -> R<()> {
    let cg = d.c / d.groups;
    let mg = d.m / d.groups;
    let taps = d.kh * d.kw;
    k.loop_(0, d.n, &mut |b| {
        k.loop_(0, d.groups, &mut |gi| {
            let x = k.gep(
                px,
                k.mul(k.add(k.mul(b, d.c)?, k.mul(gi, cg)?)?, d.h * d.wi)?,
            )?;
            let o = k.gep(
                po,
                k.mul(k.add(k.mul(b, d.m)?, k.mul(gi, mg)?)?, d.oh * d.ow)?,
            )?;
            let wt = k.gep(pw, k.mul(gi, cg * d.mw * taps)?)?;
            let bias = match pb {
                Some(p) => Some(k.gep(p, k.mul(gi, mg)?)?),
                None => None,
            };
            for py in 0..d.sh.min(d.oh) {
                let rows_all = phase_taps(py, d.pt, d.kh, d.dh, d.sh);
                let tlen = phase_len(d.oh, py, d.sh);
                for pxp in 0..d.sw.min(d.ow) {
                    let cols = phase_taps(pxp, d.pl, d.kw, d.dw, d.sw);
                    let ulen = phase_len(d.ow, pxp, d.sw);
                    let bl = blocks(ulen, d.wi, &cols, w as i64);
                    let ph = Phase {
                        k,
                        w,
                        d,
                        cg,
                        mg,
                        x,
                        o,
                        wt,
                        bias,
                        py,
                        px: pxp,
                        cols: &cols,
                        blocks: &bl,
                    };
                    let row_in = |t: i64, ci: i64| (0..d.h).contains(&(t + ci));
                    let (r0, r1) =
                        interval(tlen, |t| rows_all.iter().all(|&(_, ci)| row_in(t, ci)));
                    let border = |t: i64| -> Vec<(i64, i64)> {
                        rows_all
                            .iter()
                            .copied()
                            .filter(|&(_, ci)| row_in(t, ci))
                            .collect()
                    };
                    for t in (0..r0).filter(|t| band.contains(t)) {
                        ph.row(k.c(t), &border(t))?;
                    }
                    let (a, b) = (r0.max(band.start), r1.min(band.end));
                    if a < b {
                        k.loop_(a, b, &mut |t| ph.row(t, &rows_all))?;
                    }
                    for t in (r1.max(r0)..tlen).filter(|t| band.contains(t)) {
                        ph.row(k.c(t), &border(t))?;
                    }
                }
            }
            // The fused activation over the group's whole output, once every phase has
            // stored its sums: one contiguous loop the vectoriser widens (inline exp
            // included), where applying it lane by lane in the tiles' scattered stores
            // measured 4× slower than the convolution itself (sigmoid, selfie
            // segmentation's 16 → 1 channel upsampling).
            let (y0, y1) = ((band.start * d.sh).min(d.oh), (band.end * d.sh).min(d.oh));
            if d.act.is_some() && y0 == 0 && y1 == d.oh {
                k.loop_(0, mg * d.oh * d.ow, &mut |i| {
                    let y = activation(k, d.act, k.ld(o, i)?)?;
                    k.st(o, i, y)
                })?;
            } else if d.act.is_some() && y0 < y1 {
                // A band: its rows of every channel.
                k.loop_(0, mg, &mut |ch| {
                    let oc = k.gep(o, k.mul(ch, d.oh * d.ow)?)?;
                    k.loop_(y0 * d.ow, y1 * d.ow, &mut |i| {
                        let y = activation(k, d.act, k.ld(oc, i)?)?;
                        k.st(oc, i, y)
                    })
                })?;
            }
            Ok(())
        })
    })
}

/// One image, group and output phase.
struct Phase<'p, 'a, 'c> {
    k: &'p K<'a, 'c>,
    w: u32,
    d: &'p TConv,
    cg: i64,
    mg: i64,
    x: PointerValue<'c>,
    o: PointerValue<'c>,
    wt: PointerValue<'c>,
    bias: Option<PointerValue<'c>>,
    py: i64,
    px: i64,
    cols: &'p [(i64, i64)],
    blocks: &'p [Block],
}

impl<'p, 'a, 'c> Phase<'p, 'a, 'c> {
    /// Phase row `t` over every column block, with the row taps `rows`.
    fn row(&self, t: IntValue<'c>, rows: &[(i64, i64)]) -> R<()> {
        let (k, d) = (self.k, self.d);
        let rows: Vec<(i64, IntValue<'c>)> = rows
            .iter()
            .map(|&(i, ci)| Ok((i, k.mul(k.add(t, k.c(ci))?, d.wi)?)))
            .collect::<R<_>>()?;
        // Output row `py + t·sH`.
        let orow = k.mul(k.add(k.mul(t, d.sh)?, k.c(self.py))?, d.ow)?;
        let at = (self.blocks, self.w, self.mg);
        row_tiles(k, at, &rows, orow, &mut |t| self.tile(t))
    }

    /// `mr` output channels from `m0` × the block's vectors.
    fn tile(&self, t: RowTile<'_, 'c>) -> R<()> {
        let (rows, orow, u0, blk, m0, mr) = (t.rows, t.orow, t.x0, t.blk, t.m0, t.mr);
        let (k, d, w) = (self.k, self.d, self.w);
        let (wl, taps, nv) = (w as i64, d.kh * d.kw, blk.nv as usize);
        let init = t.zeros(k, w);
        let reads =
            !rows.is_empty() && (0..nv).any(|v| blk.load[v].iter().any(|on| on.iter().any(|&b| b)));
        let acc = if !reads {
            init
        } else {
            // Weight of (c, m0 + r, i, j) at c·mw·taps + (m0 + r)·taps + i·kW + j.
            let wrows: Vec<IntValue<'c>> = (0..mr)
                .map(|r| k.mul(k.add(m0, k.c(r))?, taps))
                .collect::<R<_>>()?;
            k.loop_carry(0, self.cg, 1, init, &mut |c, cur| {
                let mut acc: Vec<VectorValue<'c>> =
                    cur.iter().map(|v| v.into_vector_value()).collect();
                let xc = k.mul(c, d.h * d.wi)?;
                let wc = k.mul(c, d.mw * taps)?;
                for &(i, rowoff) in rows {
                    let xrow = k.add(k.add(xc, rowoff)?, u0)?;
                    for (jx, &(j, cj)) in self.cols.iter().enumerate() {
                        let t = k.add(wc, k.c(i * d.kw + j))?;
                        let mut load = |v: usize| {
                            let on = &blk.load[v][jx];
                            if !on.iter().any(|&b| b) {
                                return Ok(None);
                            }
                            let at = k.add(xrow, k.c(v as i64 * wl + cj))?;
                            Ok(Some(k.ldv_lanes(self.x, at, on)?))
                        };
                        tap_fmas(k, w, &mut acc, &mut load, (self.wt, &wrows, t))?;
                    }
                }
                Ok(acc.into_iter().map(|v| v.into()).collect())
            })?
        };
        // Sums plus bias; the activation is applied afterwards (see [`emit`]).
        for r in 0..mr {
            let m = k.add(m0, k.c(r))?;
            let bias = match self.bias {
                Some(p) => k.splat(k.ld(p, m)?, w)?,
                None => k.vty(w).const_zero(),
            };
            let orow_r = k.add(k.mul(m, d.oh * d.ow)?, orow)?;
            for v in 0..nv {
                let a = acc[r as usize * nv + v].into_vector_value();
                let y = llvm(k.b.build_float_add(a, bias, "y"))?;
                let n_on = blk.store[v].iter().filter(|&&b| b).count() as u32;
                // Phase column u0 + v·W + l is output column px + (u0 + v·W + l)·sW.
                let ucol = k.add(u0, k.c(v as i64 * wl))?;
                let base = k.add(orow_r, k.add(k.mul(ucol, d.sw)?, k.c(self.px))?)?;
                if d.sw == 1 {
                    if n_on == w {
                        k.stv(self.o, base, y)?;
                    } else {
                        k.stv_masked(self.o, base, y, n_on)?;
                    }
                } else {
                    for l in 0..n_on {
                        k.st(self.o, k.add(base, k.c(l as i64 * d.sw))?, k.lane(y, l)?)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_partition_the_taps() {
        // Every (output position, tap) pair that lands on an input position is in exactly one
        // phase, at the offset the phase says.
        for (k, d, s, pad) in [(3, 1, 2, 1), (4, 2, 3, 0), (1, 1, 3, 2), (5, 1, 1, 2)] {
            for o in 0..20i64 {
                let p = o.rem_euclid(s);
                let t = o / s;
                let taps = phase_taps(p, pad, k, d, s);
                for i in 0..k {
                    let q = o + pad - i * d;
                    let hit = taps.iter().find(|&&(ti, _)| ti == i);
                    if q.rem_euclid(s) == 0 {
                        assert_eq!(hit.map(|&(_, off)| t + off), Some(q.div_euclid(s)));
                    } else {
                        assert!(hit.is_none());
                    }
                }
            }
        }
    }

    #[test]
    fn phase_lengths_cover_the_axis() {
        for n in 0..12 {
            for s in 1..5 {
                assert_eq!((0..s).map(|p| phase_len(n, p, s)).sum::<i64>(), n);
            }
        }
    }
}
