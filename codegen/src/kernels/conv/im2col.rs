//! Dense k×k convolution (any stride, dilation, padding and groups) as an implicit-im2col
//! GEMM (issue 6): `out[m, (oy, ox)] = Σ_{c,i,j} W[m, (c, i, j)] · X[(c, i, j), (oy, ox)]`
//! where `X` is never materialised — the micro-kernel's B operand is loaded straight from the
//! input rows.
//!
//! Tiles are `MR` output channels × `NV` vectors of `W` output columns of one output row,
//! with `MR·NV` vector accumulators, the K loop running over input channels with the
//! `KH × KW` taps unrolled. Padding is peeled, never tested per element: output rows whose
//! kernel rows all lie inside the input run in one loop, the border rows are emitted one by
//! one with only their valid kernel rows; along the width, column blocks whose every tap
//! reads inside the row run in one loop, the border blocks are emitted with compile-time lane
//! masks (`llvm.masked.load` zero-fills the padding, `llvm.masked.store` skips the columns
//! past the row's end). A stride `s` along the width loads `s·W` contiguous inputs and keeps
//! every `s`-th lane. Bias and activation are applied in the epilogue.

use super::geometry::{interval, row_tiles, tap_fmas, Block, Conv, Io, RowTile, ROW_NV};
use crate::kernels::common::{activation, prelu};
use crate::nest::{llvm, K, R};
use inkwell::values::{IntValue, VectorValue};

fn blocks(d: &Conv, w: i64) -> Vec<Block> {
    let mut out = Vec::new();
    let mut ox0 = 0;
    while ox0 < d.ow {
        let nv = ((d.ow - ox0 + w - 1) / w).min(ROW_NV);
        let mut store = Vec::new();
        let mut load = Vec::new();
        for v in 0..nv {
            let lane_ox = |l: i64| ox0 + v * w + l;
            store.push((0..w).map(|l| lane_ox(l) < d.ow).collect());
            load.push(
                (0..d.kw)
                    .map(|j| {
                        (0..w * d.sw)
                            .map(|q| {
                                let (l, t) = (q / d.sw, q % d.sw);
                                let ix = lane_ox(l) * d.sw + j * d.dw - d.pl;
                                lane_ox(l) < d.ow && ix >= 0 && ix < d.wi && ix + t < d.wi
                            })
                            .collect()
                    })
                    .collect(),
            );
        }
        out.push(Block {
            first: ox0,
            nv,
            store,
            load,
        });
        ox0 += nv * w;
    }
    out
}

/// Emits the kernel body at the builder's position.
pub fn emit<'a, 'c>(k: &K<'a, 'c>, w: u32, d: &Conv, io: Io<'c>) -> R<()> {
    emit_rows(k, w, d, 0..d.oh, io)
}

/// [`emit`] for the output rows `rows` only (a band of the threads' cut by rows): every row
/// runs the code it runs in the whole image (the same kernel rows, column blocks and channel
/// tiles), so a band gives the whole image's bits.
pub fn emit_rows<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &Conv,
    rows: std::ops::Range<i64>,
    io: Io<'c>,
) -> R<()> {
    let cg = d.c / d.groups;
    let mg = d.m / d.groups;
    let row_in = |oy: i64, i: i64| (0..d.h).contains(&(oy * d.sh + i * d.dh - d.pt));
    let (r0, r1) = interval(d.oh, |oy| (0..d.kh).all(|i| row_in(oy, i)));
    let bl = blocks(d, w as i64);
    k.loop_(0, d.n, &mut |b| {
        k.loop_(0, d.groups, &mut |gi| {
            let img = Img {
                k,
                w,
                d,
                cg,
                mg,
                io: io.group(k, d, b, gi)?,
                blocks: &bl,
            };
            let border = |oy: i64| -> Vec<i64> { (0..d.kh).filter(|&i| row_in(oy, i)).collect() };
            for oy in (0..r0).filter(|oy| rows.contains(oy)) {
                img.row(k.c(oy), &border(oy))?;
            }
            let all: Vec<i64> = (0..d.kh).collect();
            let (a, b) = (r0.max(rows.start), r1.min(rows.end));
            if a < b {
                k.loop_(a, b, &mut |oy| img.row(oy, &all))?;
            }
            for oy in (r1..d.oh).filter(|oy| rows.contains(oy)) {
                img.row(k.c(oy), &border(oy))?;
            }
            Ok(())
        })
    })
}

/// One image and group: where its input channels, output channels, weights and bias start.
struct Img<'k, 'a, 'c> {
    k: &'k K<'a, 'c>,
    w: u32,
    d: &'k Conv,
    cg: i64,
    mg: i64,
    io: Io<'c>,
    blocks: &'k [Block],
}

impl<'k, 'a, 'c> Img<'k, 'a, 'c> {
    /// Output row `oy` over every column block, with the kernel rows `is`.
    fn row(&self, oy: IntValue<'c>, is: &[i64]) -> R<()> {
        let (k, d) = (self.k, self.d);
        let rows: Vec<(i64, IntValue<'c>)> = is
            .iter()
            .map(|&i| {
                let iy = k.add(k.mul(oy, d.sh)?, k.c(i * d.dh - d.pt))?;
                Ok((i, k.mul(iy, d.wi)?))
            })
            .collect::<R<_>>()?;
        let orow = k.mul(oy, d.ow)?;
        let at = (self.blocks, self.w, self.mg);
        row_tiles(k, at, &rows, orow, &mut |t| self.tile(t))
    }

    /// `mr` output channels from `m0` × the block's vectors: the K loop over input channels
    /// with the taps unrolled, then bias, activation and the (masked) stores.
    fn tile(&self, t: RowTile<'_, 'c>) -> R<()> {
        let (rows, orow, ox0, blk, m0, mr) = (t.rows, t.orow, t.x0, t.blk, t.m0, t.mr);
        let (k, d, w) = (self.k, self.d, self.w);
        let (wl, taps, nv) = (w as i64, d.kh * d.kw, blk.nv as usize);
        let wrows: Vec<IntValue<'c>> = (0..mr)
            .map(|r| k.mul(k.add(m0, k.c(r))?, self.cg * taps))
            .collect::<R<_>>()?;
        let ix0 = k.mul(ox0, d.sw)?;
        let acc = k.loop_carry(0, self.cg, 1, t.zeros(k, w), &mut |c, cur| {
            let mut acc: Vec<VectorValue<'c>> = cur.iter().map(|v| v.into_vector_value()).collect();
            let xc = k.mul(c, d.h * d.wi)?;
            let wc = k.mul(c, taps)?;
            for &(i, rowoff) in rows {
                let xrow = k.add(xc, rowoff)?;
                for j in 0..d.kw {
                    let t = k.add(wc, k.c(i * d.kw + j))?;
                    let mut load = |v: usize| {
                        let on = &blk.load[v][j as usize];
                        if !on.iter().any(|&b| b) {
                            return Ok(None);
                        }
                        let at = k.add(
                            k.add(xrow, ix0)?,
                            k.c(v as i64 * wl * d.sw + j * d.dw - d.pl),
                        )?;
                        Ok(Some(self.load(at, on)?))
                    };
                    tap_fmas(k, w, &mut acc, &mut load, (self.io.w, &wrows, t))?;
                }
            }
            Ok(acc.into_iter().map(|v| v.into()).collect())
        })?;
        for r in 0..mr {
            let m = k.add(m0, k.c(r))?;
            let bias = match self.io.bias {
                Some(p) => k.ld(p, m)?,
                None => k.f(0.0),
            };
            let slope = match self.io.slope {
                Some(s) => Some(s.load(k, m)?),
                None => None,
            };
            let orow_r = k.add(k.mul(m, d.oh * d.ow)?, orow)?;
            for v in 0..nv {
                let a = acc[r as usize * nv + v].into_vector_value();
                let lanes = &blk.store[v];
                let n_on = lanes.iter().filter(|&&b| b).count() as u32;
                let at = k.add(k.add(orow_r, ox0)?, k.c(v as i64 * wl))?;
                // The residual at the indices the vector is stored to, added after the bias.
                let rv = match self.io.res {
                    Some(p) if n_on == w => Some(k.ldv(p, at, w)?),
                    Some(p) => Some(k.ldv_masked(p, at, w, n_on)?),
                    None => None,
                };
                let mut out = k.vty(w).get_undef();
                for l in 0..n_on {
                    let mut y = k.fadd(k.lane(a, l)?, bias)?;
                    if let Some(rv) = rv {
                        y = k.fadd(y, k.lane(rv, l)?)?;
                    }
                    let mut y = activation(k, d.act, y)?;
                    if let Some(a) = slope {
                        y = prelu(k, a, y)?;
                    }
                    out = llvm(k.b.build_insert_element(
                        out,
                        y,
                        k.ctx.i32_type().const_int(l.into(), false),
                        "o",
                    ))?;
                }
                if n_on == w {
                    k.stv(self.io.out, at, out)?;
                } else {
                    k.stv_masked(self.io.out, at, out, n_on)?;
                }
            }
        }
        Ok(())
    }

    /// `W` inputs at `at, at + sw, ...` (zero where the lane is off): `sw·W` lanes loaded,
    /// every `sw`-th kept.
    fn load(&self, at: IntValue<'c>, on: &[bool]) -> R<VectorValue<'c>> {
        let (k, w) = (self.k, self.w);
        let s = self.d.sw as u32;
        let wide = k.ldv_lanes(self.io.x, at, on)?;
        if s == 1 {
            return Ok(wide);
        }
        let i32t = k.ctx.i32_type();
        let mask: Vec<_> = (0..w)
            .map(|l| i32t.const_int(u64::from(l * s), false))
            .collect();
        llvm(k.b.build_shuffle_vector(
            wide,
            wide.get_type().get_undef(),
            inkwell::types::VectorType::const_vector(&mask),
            "every",
        ))
    }
}
