//! Depthwise convolution (one input channel per group, `C/groups == 1`), register-blocked
//! and vectorised along the contiguous output width (issue 6).
//!
//! Per output plane, the rows whose every kernel row is inside the input (the interior, an
//! interval since the bounds are linear in the row) run in one loop with all `KH` taps; the
//! few border rows above and below are emitted one by one with only their valid kernel rows,
//! all known at compile time. Within a row the same split holds for columns: the interior is
//! covered by blocks of `NV` vectors of `W` outputs each (independent accumulators hide the
//! FMA latency), then single vectors, then one masked vector; the border columns are scalar
//! with their valid kernel columns. So no load is ever guarded per element: padding is
//! handled by peeling. A stride `s` along the width loads `s·W` contiguous inputs and keeps
//! every `s`-th lane. Bias and activation are applied in the epilogue before the one store.

use super::geometry::{interval, Io};
use crate::kernels::common::{activation, prelu_vec};
use crate::nest::{llvm, K, R};
use inkwell::values::{FloatValue, IntValue, PointerValue, VectorValue};
use tir_ir::Activation;

/// Vectors per interior block.
const NV: i64 = 4;
/// Output elements up to which a plane is emitted whole by [`Plane::flat`] (a 14×14 plane,
/// 13 vectors × the taps, unrolled).
const FLAT_MAX: i64 = 256;

/// A depthwise convolution's constant extents (NCHW, weight `[M, 1, KH, KW]`).
pub struct Depthwise {
    pub n: i64,
    pub c: i64,
    pub h: i64,
    pub wi: i64,
    pub m: i64,
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

/// Emits the kernel body at the builder's position.
pub fn emit<'a, 'c>(k: &K<'a, 'c>, w: u32, d: &Depthwise, io: Io<'c>) -> R<()> {
    let mg = d.m / d.c.max(1);
    let taps = d.kh * d.kw;
    let row_in = |oy: i64, i: i64| {
        let iy = oy * d.sh + i * d.dh - d.pt;
        (0..d.h).contains(&iy)
    };
    let (r0, r1) = interval(d.oh, |oy| (0..d.kh).all(|i| row_in(oy, i)));
    // A small unit-stride plane whose input rows are as wide as its output rows: see
    // [`Plane::flat`].
    let flat = d.sh == 1 && d.sw == 1 && d.wi == d.ow && d.oh * d.ow <= FLAT_MAX;
    k.loop_(0, d.n, &mut |b| {
        k.loop_(0, d.m, &mut |oc| {
            let ic = if mg == 1 {
                oc
            } else {
                llvm(k.b.build_int_signed_div(oc, k.c(mg), "ic"))?
            };
            let xplane = k.gep(io.x, k.mul(k.add(k.mul(b, d.c)?, ic)?, d.h * d.wi)?)?;
            let plane_at = k.mul(k.add(k.mul(b, d.m)?, oc)?, d.oh * d.ow)?;
            let oplane = Out {
                o: k.gep(io.out, plane_at)?,
                r: match io.res {
                    Some(p) => Some(k.gep(p, plane_at)?),
                    None => None,
                },
            };
            let wbase = k.mul(oc, taps)?;
            let tap: Vec<FloatValue> = (0..taps)
                .map(|t| k.ld(io.w, k.add(wbase, k.c(t))?))
                .collect::<R<_>>()?;
            let bias = match io.bias {
                Some(p) => k.ld(p, oc)?,
                None => k.f(0.0),
            };
            let slope = match io.slope {
                Some(s) => Some(s.load(k, oc)?),
                None => None,
            };
            let plane = Plane {
                k,
                w,
                d,
                xplane,
                oplane,
                tap: &tap,
                bias,
                slope,
            };
            if flat {
                return plane.flat();
            }
            let border = |oy: i64| -> Vec<i64> { (0..d.kh).filter(|&i| row_in(oy, i)).collect() };
            for oy in 0..r0 {
                plane.row(k.c(oy), &border(oy))?;
            }
            let all: Vec<i64> = (0..d.kh).collect();
            // With unit row strides, interior rows go in pairs ([`Plane::pair`]): the second
            // row's kernel rows are the first's moved down by one, so most input vectors are
            // loaded once for both.
            let pairs = if d.sh == 1 && d.kh > 1 {
                (r1 - r0).max(0) / 2
            } else {
                0
            };
            k.loop_(0, pairs, &mut |q| plane.pair(k.add(k.c(r0), k.mul(q, 2)?)?))?;
            k.loop_(r0 + 2 * pairs, r1, &mut |oy| plane.row(oy, &all))?;
            for oy in r1..d.oh {
                plane.row(k.c(oy), &border(oy))?;
            }
            Ok(())
        })
    })
}

/// Where outputs go: the output, and the residual read at the same index (if any).
#[derive(Clone, Copy)]
struct Out<'c> {
    o: PointerValue<'c>,
    r: Option<PointerValue<'c>>,
}

impl<'c> Out<'c> {
    /// Both pointers moved by `at` elements.
    fn at<'a>(self, k: &K<'a, 'c>, at: IntValue<'c>) -> R<Out<'c>> {
        Ok(Out {
            o: k.gep(self.o, at)?,
            r: match self.r {
                Some(p) => Some(k.gep(p, at)?),
                None => None,
            },
        })
    }
}

/// One output plane's state: its input and output planes, taps and bias.
struct Plane<'k, 'a, 'c> {
    k: &'k K<'a, 'c>,
    w: u32,
    d: &'k Depthwise,
    xplane: PointerValue<'c>,
    oplane: Out<'c>,
    tap: &'k [FloatValue<'c>],
    bias: FloatValue<'c>,
    /// A fused PReLU's slope for this plane's channel.
    slope: Option<FloatValue<'c>>,
}

impl<'k, 'a, 'c> Plane<'k, 'a, 'c> {
    /// Output row `oy` accumulating the kernel rows `is` (all inside the input).
    fn row(&self, oy: IntValue<'c>, is: &[i64]) -> R<()> {
        let (k, d) = (self.k, self.d);
        let xrows: Vec<(i64, PointerValue<'c>)> = is
            .iter()
            .map(|&i| {
                let iy = k.add(k.mul(oy, d.sh)?, k.c(i * d.dh - d.pt))?;
                Ok((i, k.gep(self.xplane, k.mul(iy, d.wi)?)?))
            })
            .collect::<R<_>>()?;
        let orow = self.oplane.at(k, k.mul(oy, d.ow)?)?;
        // The border columns go into whole vectors with their padding lanes masked off
        // ([`Plane::edge`]): `[0, lead)` before the interior, `[end, ow)` after its whole
        // vectors. A scalar border column (up to `KH·KW` dependent FMAs) cost about as much
        // as a whole vector of interior outputs.
        let (lead, end, big) = self.columns();
        let wl = self.w as i64;
        for ox in (0..lead).step_by(self.w as usize) {
            self.edge(&xrows, orow, ox, (lead - ox).min(wl))?;
        }
        k.loop_step(lead, lead + big, NV * wl, &mut |ox| {
            self.vectors(&xrows, orow, ox, NV as u32, None)
        })?;
        k.loop_step(lead + big, end, wl, &mut |ox| {
            self.vectors(&xrows, orow, ox, 1, None)
        })?;
        for ox in (end..d.ow).step_by(self.w as usize) {
            self.edge(&xrows, orow, ox, (d.ow - ox).min(wl))?;
        }
        Ok(())
    }

    /// Interior output rows `oy` and `oy + 1` (unit row stride, every kernel row inside the
    /// input): the border columns row by row as in [`Plane::row`], the interior vectors of
    /// both rows together ([`Plane::vectors2`]). Each output gets the same FMAs in the same
    /// order as from [`Plane::row`], so the bits are those of two single rows.
    fn pair(&self, oy: IntValue<'c>) -> R<()> {
        let (k, d) = (self.k, self.d);
        let all: Vec<i64> = (0..d.kh).collect();
        let oy1 = k.add(oy, k.c(1))?;
        // Input rows `oy − pt + q·dh`... for the first output row's kernel rows, and
        // `oy + 1 − pt + i·dh` for the second's.
        let xrow = |o: IntValue<'c>, i: i64| -> R<PointerValue<'c>> {
            let iy = k.add(o, k.c(i * d.dh - d.pt))?;
            k.gep(self.xplane, k.mul(iy, d.wi)?)
        };
        let rows0: Vec<(i64, PointerValue<'c>)> = all
            .iter()
            .map(|&i| Ok((i, xrow(oy, i)?)))
            .collect::<R<_>>()?;
        let rows1: Vec<(i64, PointerValue<'c>)> = all
            .iter()
            .map(|&i| Ok((i, xrow(oy1, i)?)))
            .collect::<R<_>>()?;
        let orow0 = self.oplane.at(k, k.mul(oy, d.ow)?)?;
        let orow1 = self.oplane.at(k, k.mul(oy1, d.ow)?)?;
        let (lead, end, big) = self.columns();
        let wl = self.w as i64;
        for ox in (0..lead).step_by(self.w as usize) {
            self.edge(&rows0, orow0, ox, (lead - ox).min(wl))?;
            self.edge(&rows1, orow1, ox, (lead - ox).min(wl))?;
        }
        k.loop_step(lead, lead + big, NV * wl, &mut |ox| {
            self.vectors2(oy, [orow0, orow1], ox, NV as u32)
        })?;
        k.loop_step(lead + big, end, wl, &mut |ox| {
            self.vectors2(oy, [orow0, orow1], ox, 1)
        })?;
        for ox in (end..d.ow).step_by(self.w as usize) {
            self.edge(&rows0, orow0, ox, (d.ow - ox).min(wl))?;
            self.edge(&rows1, orow1, ox, (d.ow - ox).min(wl))?;
        }
        Ok(())
    }

    /// `nv` vectors of outputs from column `ox` of rows `oy` and `oy + 1` (unit row stride):
    /// input row `oy − pt + δ` feeds the first row's kernel row `i` when `δ = i·dh` and the
    /// second's when `δ = 1 + i·dh`, so each of its vectors is loaded once and used by both.
    /// Per accumulator the FMAs still run over `(i, j)` in order, as in [`Plane::vectors`].
    fn vectors2(&self, oy: IntValue<'c>, orows: [Out<'c>; 2], ox: IntValue<'c>, nv: u32) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let b = k.splat(self.bias, w)?;
        let mut acc: [Vec<VectorValue<'c>>; 2] = [vec![b; nv as usize], vec![b; nv as usize]];
        let ix0 = k.mul(ox, d.sw)?;
        // The (row, kernel row) pairs an input row offset δ feeds, δ ascending: for each
        // accumulator its kernel rows come in ascending order.
        let mut deltas: Vec<(i64, Vec<(usize, i64)>)> = Vec::new();
        for r in 0..2usize {
            for i in 0..d.kh {
                let delta = r as i64 + i * d.dh;
                match deltas.iter_mut().find(|(dl, _)| *dl == delta) {
                    Some((_, uses)) => uses.push((r, i)),
                    None => deltas.push((delta, vec![(r, i)])),
                }
            }
        }
        deltas.sort_by_key(|(dl, _)| *dl);
        for (delta, uses) in &deltas {
            let iy = k.add(oy, k.c(delta - d.pt))?;
            let xrow = k.gep(self.xplane, k.mul(iy, d.wi)?)?;
            for j in 0..d.kw {
                // `v` indexes the accumulators of both rows.
                #[allow(clippy::needless_range_loop)]
                for v in 0..nv as usize {
                    let at = k.add(ix0, k.c(v as i64 * wl * d.sw + j * d.dw - d.pl))?;
                    let x = self.load(xrow, at, None)?;
                    for &(r, i) in uses {
                        let t = k.splat(self.tap[(i * d.kw + j) as usize], w)?;
                        acc[r][v] = k.fma(x, t, acc[r][v])?;
                    }
                }
            }
        }
        for (r, accs) in acc.into_iter().enumerate() {
            for (v, a) in accs.into_iter().enumerate() {
                let at = k.add(ox, k.c(v as i64 * wl))?;
                self.store(a, orows[r], at, None)?;
            }
        }
        Ok(())
    }

    /// The column split of a row: border vectors over `[0, lead)`, interior vectors over
    /// `[lead, end)` (the first `big` of them in blocks of `NV`), border vectors over
    /// `[end, ow)`.
    fn columns(&self) -> (i64, i64, i64) {
        let d = self.d;
        // A vector column's lanes read `ix .. ix + sw`, all inside the row for every tap.
        let col_in = |ox: i64, j: i64| {
            let ix = ox * d.sw + j * d.dw - d.pl;
            ix >= 0 && ix + d.sw - 1 < d.wi
        };
        let (c0, c1) = interval(d.ow, |ox| (0..d.kw).all(|j| col_in(ox, j)));
        let wl = self.w as i64;
        let lead = if c0 > 0 && c1 > c0 {
            ((c0 + wl - 1) / wl * wl).min(d.ow)
        } else {
            0
        };
        let len = if c1 > lead { (c1 - lead) / wl * wl } else { 0 };
        let big = len / (NV * wl) * NV * wl;
        (lead, lead + len, big)
    }

    /// The `lanes` outputs from column `ox` of a row (a constant column: the borders), each
    /// tap's load masked to the lanes whose input is inside the row; for a stride `s` the
    /// load spans `s·W` inputs of which only every `s`-th lane is loaded.
    fn edge(&self, xrows: &[(i64, PointerValue<'c>)], orow: Out<'c>, ox: i64, lanes: i64) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let s = d.sw;
        let mut acc = k.splat(self.bias, w)?;
        for &(i, xrow) in xrows {
            for j in 0..d.kw {
                let at = ox * s + j * d.dw - d.pl;
                let on: Vec<bool> = (0..s * w as i64)
                    .map(|q| q % s == 0 && q / s < lanes && (0..d.wi).contains(&(at + q)))
                    .collect();
                if !on.contains(&true) {
                    continue;
                }
                let x = self.pick(k.ldv_lanes(xrow, k.c(at), &on)?)?;
                let t = k.splat(self.tap[(i * d.kw + j) as usize], w)?;
                acc = k.fma(x, t, acc)?;
            }
        }
        let masked = (lanes < w as i64).then_some(lanes as u32);
        self.store(acc, orow, k.c(ox), masked)
    }

    /// The whole plane as one flat run of vectors, for unit strides when the input and output
    /// rows are equally wide (`W_in = W_out`, "same" padding). Then the input under output
    /// element `p = oy·W + ox` for tap `(i, j)` is `p + (i·dh − pt)·W + (j·dw − pl)`: one
    /// contiguous load per tap and vector, whatever rows the vector's lanes span. The lanes
    /// whose tap falls in the padding (row or column out of the input) are masked off, the
    /// masks known at compile time. On the 7×7 and 14×14 planes of MobileNet's late blocks
    /// this replaces rows of one part-filled vector plus scalar border columns (issue 6).
    fn flat(&self) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let total = d.oh * d.ow;
        for p0 in (0..total).step_by(w as usize) {
            let lanes = (total - p0).min(wl);
            let mut acc = k.splat(self.bias, w)?;
            for i in 0..d.kh {
                for j in 0..d.kw {
                    let off = (i * d.dh - d.pt) * d.wi + (j * d.dw - d.pl);
                    let on: Vec<bool> = (0..wl)
                        .map(|l| {
                            let p = p0 + l;
                            let (iy, ix) = (p / d.ow + i * d.dh - d.pt, p % d.ow + j * d.dw - d.pl);
                            l < lanes && (0..d.h).contains(&iy) && (0..d.wi).contains(&ix)
                        })
                        .collect();
                    if !on.contains(&true) {
                        continue;
                    }
                    let x = k.ldv_lanes(self.xplane, k.c(p0 + off), &on)?;
                    let t = k.splat(self.tap[(i * d.kw + j) as usize], w)?;
                    acc = k.fma(x, t, acc)?;
                }
            }
            let masked = (lanes < wl).then_some(lanes as u32);
            self.store(acc, self.oplane, k.c(p0), masked)?;
        }
        Ok(())
    }

    /// Adds the residual at `to.r[at..]` (if any) to the first `lanes` (all without) lanes
    /// of `acc`, applies the activation to them and stores them at `to.o[at..]`.
    fn store(
        &self,
        acc: VectorValue<'c>,
        to: Out<'c>,
        at: IntValue<'c>,
        lanes: Option<u32>,
    ) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        // The accumulator started from the bias, so this is `(bias + Σ) + residual`, the
        // bits of a separate `add` after the convolution.
        let acc = match to.r {
            Some(p) => {
                let r = match lanes {
                    Some(n) => k.ldv_masked(p, at, w, n)?,
                    None => k.ldv(p, at, w)?,
                };
                llvm(k.b.build_float_add(acc, r, "res"))?
            }
            None => acc,
        };
        let to = to.o;
        let mut out = acc;
        if d.act.is_some() {
            for l in 0..lanes.unwrap_or(w) {
                let y = activation(k, d.act, k.lane(acc, l)?)?;
                out = llvm(k.b.build_insert_element(
                    out,
                    y,
                    k.ctx.i32_type().const_int(l.into(), false),
                    "a",
                ))?;
            }
        }
        if let Some(a) = self.slope {
            out = prelu_vec(k, a, out)?;
        }
        match lanes {
            Some(n) => k.stv_masked(to, at, out, n),
            None => k.stv(to, at, out),
        }
    }

    /// `nv` vectors of outputs from column `ox` on (the first `lanes` of one when masked).
    fn vectors(
        &self,
        xrows: &[(i64, PointerValue<'c>)],
        orow: Out<'c>,
        ox: IntValue<'c>,
        nv: u32,
        lanes: Option<u32>,
    ) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let b = k.splat(self.bias, w)?;
        let mut acc: Vec<VectorValue<'c>> = vec![b; nv as usize];
        let ix0 = k.mul(ox, d.sw)?;
        for &(i, xrow) in xrows {
            for j in 0..d.kw {
                let t = k.splat(self.tap[(i * d.kw + j) as usize], w)?;
                for (v, a) in acc.iter_mut().enumerate() {
                    let at = k.add(ix0, k.c(v as i64 * wl * d.sw + j * d.dw - d.pl))?;
                    let x = self.load(xrow, at, lanes)?;
                    *a = k.fma(x, t, *a)?;
                }
            }
        }
        for (v, a) in acc.into_iter().enumerate() {
            let at = k.add(ox, k.c(v as i64 * wl))?;
            self.store(a, orow, at, lanes)?;
        }
        Ok(())
    }

    /// `W` inputs at `at, at + sw, ...`: `sw·W` contiguous ones, every `sw`-th lane kept.
    fn load(
        &self,
        xrow: PointerValue<'c>,
        at: IntValue<'c>,
        lanes: Option<u32>,
    ) -> R<VectorValue<'c>> {
        let (k, w) = (self.k, self.w);
        let s = self.d.sw as u32;
        let wide = match lanes {
            Some(n) => k.ldv_masked(xrow, at, s * w, n * s)?,
            None => k.ldv(xrow, at, s * w)?,
        };
        self.pick(wide)
    }

    /// Every `sw`-th lane of a `sw·W`-lane load.
    fn pick(&self, wide: VectorValue<'c>) -> R<VectorValue<'c>> {
        let (k, w) = (self.k, self.w);
        let s = self.d.sw as u32;
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
