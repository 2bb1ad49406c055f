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

use crate::kernels::activation;
use crate::nest::{llvm, K, R};
use inkwell::values::{FloatValue, IntValue, PointerValue, VectorValue};
use tir_ir::Activation;

/// Vectors per interior block.
const NV: i64 = 4;

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

/// The first and one-past-last index in `0..n` for which `ok` holds, assuming those form an
/// interval (empty as `(0, 0)`).
pub(crate) fn interval(n: i64, ok: impl Fn(i64) -> bool) -> (i64, i64) {
    match (0..n).find(|&i| ok(i)) {
        Some(a) => (a, (a..n).take_while(|&i| ok(i)).last().map_or(a, |b| b + 1)),
        None => (0, 0),
    }
}

/// Emits the kernel body at the builder's position; `pb` is the optional bias.
pub fn emit<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &Depthwise,
    px: PointerValue<'c>,
    pw: PointerValue<'c>,
    pb: Option<PointerValue<'c>>,
    po: PointerValue<'c>,
) -> R<()> {
    let mg = d.m / d.c.max(1);
    let taps = d.kh * d.kw;
    let row_in = |oy: i64, i: i64| {
        let iy = oy * d.sh + i * d.dh - d.pt;
        (0..d.h).contains(&iy)
    };
    let (r0, r1) = interval(d.oh, |oy| (0..d.kh).all(|i| row_in(oy, i)));
    k.loop_(0, d.n, &mut |b| {
        k.loop_(0, d.m, &mut |oc| {
            let ic = if mg == 1 {
                oc
            } else {
                llvm(k.b.build_int_signed_div(oc, k.c(mg), "ic"))?
            };
            let xplane = k.gep(px, k.mul(k.add(k.mul(b, d.c)?, ic)?, d.h * d.wi)?)?;
            let oplane = k.gep(po, k.mul(k.add(k.mul(b, d.m)?, oc)?, d.oh * d.ow)?)?;
            let wbase = k.mul(oc, taps)?;
            let tap: Vec<FloatValue> = (0..taps)
                .map(|t| k.ld(pw, k.add(wbase, k.c(t))?))
                .collect::<R<_>>()?;
            let bias = match pb {
                Some(p) => k.ld(p, oc)?,
                None => k.f(0.0),
            };
            let plane = Plane {
                k,
                w,
                d,
                xplane,
                oplane,
                tap: &tap,
                bias,
            };
            let border = |oy: i64| -> Vec<i64> { (0..d.kh).filter(|&i| row_in(oy, i)).collect() };
            for oy in 0..r0 {
                plane.row(k.c(oy), &border(oy))?;
            }
            let all: Vec<i64> = (0..d.kh).collect();
            k.loop_(r0, r1, &mut |oy| plane.row(oy, &all))?;
            for oy in r1..d.oh {
                plane.row(k.c(oy), &border(oy))?;
            }
            Ok(())
        })
    })
}

/// One output plane's state: its input and output planes, taps and bias.
struct Plane<'k, 'a, 'c> {
    k: &'k K<'a, 'c>,
    w: u32,
    d: &'k Depthwise,
    xplane: PointerValue<'c>,
    oplane: PointerValue<'c>,
    tap: &'k [FloatValue<'c>],
    bias: FloatValue<'c>,
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
        let orow = k.gep(self.oplane, k.mul(oy, d.ow)?)?;
        // A vector column's lanes read `ix .. ix + sw`, all inside the row for every tap.
        let col_in = |ox: i64, j: i64| {
            let ix = ox * d.sw + j * d.dw - d.pl;
            ix >= 0 && ix + d.sw - 1 < d.wi
        };
        let (c0, c1) = interval(d.ow, |ox| (0..d.kw).all(|j| col_in(ox, j)));
        for ox in (0..d.ow).filter(|&ox| ox < c0 || ox >= c1) {
            self.scalar(&xrows, orow, ox)?;
        }
        let wl = self.w as i64;
        let len = c1 - c0;
        let big = len / (NV * wl) * NV * wl;
        let single = (len - big) / wl * wl;
        let rest = len - big - single;
        k.loop_step(c0, c0 + big, NV * wl, &mut |ox| {
            self.vectors(&xrows, orow, ox, NV as u32, None)
        })?;
        k.loop_step(c0 + big, c0 + big + single, wl, &mut |ox| {
            self.vectors(&xrows, orow, ox, 1, None)
        })?;
        if rest > 0 {
            let ox = k.c(c0 + big + single);
            self.vectors(&xrows, orow, ox, 1, Some(rest as u32))?;
        }
        Ok(())
    }

    /// One border column: only the kernel columns that land inside the input.
    fn scalar(&self, xrows: &[(i64, PointerValue<'c>)], orow: PointerValue<'c>, ox: i64) -> R<()> {
        let (k, d) = (self.k, self.d);
        let mut acc = self.bias;
        for &(i, xrow) in xrows {
            for j in 0..d.kw {
                let ix = ox * d.sw + j * d.dw - d.pl;
                if (0..d.wi).contains(&ix) {
                    let x = k.ld(xrow, k.c(ix))?;
                    acc = k.fma(x, self.tap[(i * d.kw + j) as usize], acc)?;
                }
            }
        }
        k.st(orow, k.c(ox), activation(k, d.act, acc)?)
    }

    /// `nv` vectors of outputs from column `ox` on (the first `lanes` of one when masked).
    fn vectors(
        &self,
        xrows: &[(i64, PointerValue<'c>)],
        orow: PointerValue<'c>,
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
            let mut out = a;
            if d.act.is_some() {
                for l in 0..lanes.unwrap_or(w) {
                    let y = activation(k, d.act, k.lane(a, l)?)?;
                    out = llvm(k.b.build_insert_element(
                        out,
                        y,
                        k.ctx.i32_type().const_int(l.into(), false),
                        "a",
                    ))?;
                }
            }
            let at = k.add(ox, k.c(v as i64 * wl))?;
            match lanes {
                Some(n) => k.stv_masked(orow, at, out, n)?,
                None => k.stv(orow, at, out)?,
            }
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
