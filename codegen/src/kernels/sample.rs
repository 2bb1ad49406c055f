//! `grid_sample` (ONNX GridSample on NCHW): every output pixel reads the input where the grid
//! (a run-time tensor) points, so unlike `resize` no index table can be built at compile time.
//! The coordinate arithmetic runs per output pixel in `f64`, in the order of the reference
//! interpreter (`tir_interp::kernels::grid_coord`, `grid_tap`), so both give the same bits;
//! `codegen/tests/kernels.rs` checks it on every mode and padding.

use super::common::{bytes_of, dims, unsupported, Call};
use crate::nest::{llvm, K, R};
use crate::storage::Storage;
use crate::{Arg, CodegenError, Gen};
use inkwell::values::{FloatValue, IntValue};
use inkwell::FloatPredicate;
use tir_ir::op::{GridPadding, GridSample, SampleMode};
use tir_ir::{Function, OpData};

/// A one-argument float intrinsic (`llvm.floor`, `llvm.trunc`, `llvm.roundeven`) on `f64`.
fn f64_call<'a, 'c>(k: &K<'a, 'c>, name: &str, x: FloatValue<'c>) -> R<FloatValue<'c>> {
    let f = k.intrinsic(name, &[x.get_type().into()])?;
    llvm(k.b.build_call(f, &[x.into()], "c"))?
        .try_as_basic_value()
        .basic()
        .map(|v| v.into_float_value())
        .ok_or_else(|| CodegenError::Llvm(format!("{name} returned no value")))
}

/// `x as i64` in Rust's sense: saturating, NaN to 0 (`llvm.fptosi.sat`).
fn to_index<'a, 'c>(k: &K<'a, 'c>, x: FloatValue<'c>) -> R<IntValue<'c>> {
    let f = k.intrinsic("llvm.fptosi.sat", &[k.i64t.into(), x.get_type().into()])?;
    llvm(k.b.build_call(f, &[x.into()], "sat"))?
        .try_as_basic_value()
        .basic()
        .map(|v| v.into_int_value())
        .ok_or_else(|| CodegenError::Llvm("fptosi.sat returned no value".into()))
}

fn fcmp<'a, 'c>(
    k: &K<'a, 'c>,
    p: FloatPredicate,
    a: FloatValue<'c>,
    b: FloatValue<'c>,
) -> R<IntValue<'c>> {
    llvm(k.b.build_float_compare(p, a, b, "cmp"))
}

/// The interpreter's `grid_bounds`.
fn bounds(align_corners: bool, len: i64) -> (f64, f64) {
    let l = len as f64;
    if align_corners {
        (0.0, l - 1.0)
    } else {
        (-0.5, l - 0.5)
    }
}

/// The interpreter's `grid_reflect` of `c` into `[lo, hi]` (constants).
fn reflect<'a, 'c>(k: &K<'a, 'c>, c: FloatValue<'c>, lo: f64, hi: f64) -> R<FloatValue<'c>> {
    let d = k.ctx.f64_type();
    let rng = hi - lo;
    if rng <= 0.0 {
        return Ok(d.const_float(lo));
    }
    let (lo_v, hi_v, rng_v) = (d.const_float(lo), d.const_float(hi), d.const_float(rng));
    // One side: dx past the border, n whole extents, remainder r; an even n lands on `near + r`
    // measured from the crossed border, an odd one from the other.
    let side = |dx: FloatValue<'c>, even_at: FloatValue<'c>, odd_at: FloatValue<'c>, sign: f64| {
        let n = f64_call(k, "llvm.trunc", k.fdiv(dx, rng_v)?)?;
        let r = k.fsub(dx, k.fmul(n, rng_v)?)?;
        let par = llvm(k.b.build_float_rem(n, d.const_float(2.0), "par"))?;
        let even = fcmp(k, FloatPredicate::OEQ, par, d.const_float(0.0))?;
        // even: even_at ± r; odd: odd_at ∓ r (sign says which way `even_at` moves inward).
        let (e, o) = if sign > 0.0 {
            (k.fadd(even_at, r)?, k.fsub(odd_at, r)?)
        } else {
            (k.fsub(even_at, r)?, k.fadd(odd_at, r)?)
        };
        k.fsel(even, e, o)
    };
    let below = side(k.fsub(lo_v, c)?, lo_v, hi_v, 1.0)?;
    let above = side(k.fsub(c, hi_v)?, hi_v, lo_v, -1.0)?;
    let is_above = fcmp(k, FloatPredicate::OGT, c, hi_v)?;
    let t = k.fsel(is_above, above, c)?;
    let is_below = fcmp(k, FloatPredicate::OLT, c, lo_v)?;
    k.fsel(is_below, below, t)
}

/// The interpreter's `grid_coord`: grid entry `g` (f32) to a source coordinate in pixels.
fn coord<'a, 'c>(k: &K<'a, 'c>, gs: &GridSample, g: FloatValue<'c>, len: i64) -> R<FloatValue<'c>> {
    let d = k.ctx.f64_type();
    let l = len as f64;
    let g = llvm(k.b.build_float_ext(g, d, "g"))?;
    let g1 = k.fadd(g, d.const_float(1.0))?;
    let mut c = if gs.align_corners {
        k.fmul(k.fdiv(g1, d.const_float(2.0))?, d.const_float(l - 1.0))?
    } else {
        k.fdiv(
            k.fsub(k.fmul(g1, d.const_float(l))?, d.const_float(1.0))?,
            d.const_float(2.0),
        )?
    };
    if gs.mode == SampleMode::Nearest {
        c = f64_call(k, "llvm.roundeven", c)?;
    }
    let (lo, hi) = bounds(gs.align_corners, len);
    c = match gs.padding {
        GridPadding::Zeros => c,
        // Only outside [lo, hi] is the coordinate moved: clamping to [0, l - 1] is the same
        // there, and the identity inside.
        GridPadding::Border => {
            let outside = llvm(k.b.build_or(
                fcmp(k, FloatPredicate::OLT, c, d.const_float(lo))?,
                fcmp(k, FloatPredicate::OGT, c, d.const_float(hi))?,
                "out",
            ))?;
            let lt = fcmp(k, FloatPredicate::OLT, c, d.const_float(0.0))?;
            let gt = fcmp(k, FloatPredicate::OGT, c, d.const_float(l - 1.0))?;
            let hi_c = k.fsel(gt, d.const_float(l - 1.0), c)?;
            let cl = k.fsel(lt, d.const_float(0.0), hi_c)?;
            k.fsel(outside, cl, c)?
        }
        GridPadding::Reflection => reflect(k, c, lo, hi)?,
    };
    Ok(c)
}

/// The interpreter's `grid_tap`: the index read for integer position `i`, and whether it is a
/// real pixel (false: a zero of `zeros` padding; the index is then 0, a safe address).
fn tap<'a, 'c>(
    k: &K<'a, 'c>,
    gs: &GridSample,
    i: IntValue<'c>,
    len: i64,
) -> R<(IntValue<'c>, IntValue<'c>)> {
    let yes = k.ctx.bool_type().const_int(1, false);
    match gs.padding {
        GridPadding::Zeros => {
            let ok = k.in_range(i, 0, len)?;
            let idx = llvm(k.b.build_select(ok, i, k.c(0), "idx"))?.into_int_value();
            Ok((idx, ok))
        }
        GridPadding::Border => Ok((k.iclamp(i, 0, len - 1)?, yes)),
        GridPadding::Reflection => {
            let (lo, hi) = bounds(gs.align_corners, len);
            let f = llvm(k.b.build_signed_int_to_float(i, k.ctx.f64_type(), "fi"))?;
            let r = to_index(k, reflect(k, f, lo, hi)?)?;
            Ok((k.iclamp(r, 0, len - 1)?, yes))
        }
    }
}

/// One tap on an axis: the pixel index, whether it is a real pixel, its weight (`f64`).
type Tap<'c> = (IntValue<'c>, IntValue<'c>, FloatValue<'c>);

/// The interpreter's `cubic_weights` of the fraction `t` (Keys, `a = -0.75`).
fn cubic_weights<'a, 'c>(k: &K<'a, 'c>, t: FloatValue<'c>) -> R<[FloatValue<'c>; 4]> {
    let d = k.ctx.f64_type();
    let a = -0.75f64;
    let cst = |v: f64| d.const_float(v);
    let t = f64_call(k, "llvm.fabs", t)?;
    let (t1, u, u1) = (
        k.fadd(t, cst(1.0))?,
        k.fsub(cst(1.0), t)?,
        k.fsub(cst(2.0), t)?,
    );
    // ((A·s - 5A)·s + 8A)·s - 4A, the outer taps.
    let outer = |s: FloatValue<'c>| -> R<FloatValue<'c>> {
        let p = k.fsub(k.fmul(cst(a), s)?, cst(5.0 * a))?;
        let p = k.fadd(k.fmul(p, s)?, cst(8.0 * a))?;
        k.fsub(k.fmul(p, s)?, cst(4.0 * a))
    };
    // ((A + 2)·s - (A + 3))·s·s + 1, the inner taps.
    let inner = |s: FloatValue<'c>| -> R<FloatValue<'c>> {
        let p = k.fsub(k.fmul(cst(a + 2.0), s)?, cst(a + 3.0))?;
        k.fadd(k.fmul(k.fmul(p, s)?, s)?, cst(1.0))
    };
    Ok([outer(t1)?, inner(t)?, inner(u)?, outer(u1)?])
}

/// The interpreter's `grid_taps`: one tap for nearest, two for bilinear, four for bicubic.
fn taps<'a, 'c>(k: &K<'a, 'c>, gs: &GridSample, cc: FloatValue<'c>, len: i64) -> R<Vec<Tap<'c>>> {
    let d = k.ctx.f64_type();
    match gs.mode {
        SampleMode::Nearest => {
            let (i, ok) = tap(k, gs, to_index(k, cc)?, len)?;
            Ok(vec![(i, ok, d.const_float(1.0))])
        }
        SampleMode::Bilinear => {
            let fl = f64_call(k, "llvm.floor", cc)?;
            let w1 = k.fsub(cc, fl)?;
            let w0 = k.fsub(d.const_float(1.0), w1)?;
            let (i0, ok0) = tap(k, gs, to_index(k, fl)?, len)?;
            let f1 = k.fadd(fl, d.const_float(1.0))?;
            let (i1, ok1) = tap(k, gs, to_index(k, f1)?, len)?;
            Ok(vec![(i0, ok0, w0), (i1, ok1, w1)])
        }
        SampleMode::Bicubic => {
            let fl = f64_call(k, "llvm.floor", cc)?;
            let ws = cubic_weights(k, k.fsub(cc, fl)?)?;
            let mut out = Vec::with_capacity(4);
            for (j, wj) in ws.into_iter().enumerate() {
                let at = k.fadd(fl, d.const_float(j as f64 - 1.0))?;
                let (i, ok) = tap(k, gs, to_index(k, at)?, len)?;
                out.push((i, ok, wj));
            }
            Ok(out)
        }
    }
}

/// The kernel: per image, output row and column, the two coordinates and their taps; then per
/// channel the (up to) four reads and the interpolation.
pub(crate) fn grid_sample<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    gs: &GridSample,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, grid, r) = (op.operands[0], op.operands[1], op.results[0]);
    let (xd, gd, od) = (dims(func, x)?, dims(func, grid)?, dims(func, r)?);
    if xd.len() != 4 || gd.len() != 4 || od.len() != 4 {
        return Err(unsupported(
            func,
            op,
            "grid_sample takes NCHW input and an [N, Ho, Wo, 2] grid",
        ));
    }
    if od.contains(&0) {
        return Ok(vec![]);
    }
    let (n, c, h, w) = (xd[0], xd[1], xd[2], xd[3]);
    let (oh, ow) = (gd[1], gd[2]);
    let args = [
        Arg {
            loc: st.of(func, x)?,
            bytes: bytes_of(&xd),
        },
        Arg {
            loc: st.of(func, grid)?,
            bytes: bytes_of(&gd),
        },
        Arg {
            loc: st.of(func, r)?,
            bytes: bytes_of(&od),
        },
    ];
    let f = g.kernel(name, &args, &[false, false, true]);
    let k = g.k(f);
    let (px, pg, po) = (g.param(f, 0)?, g.param(f, 1)?, g.param(f, 2)?);
    let d = k.ctx.f64_type();
    let nearest = gs.mode == SampleMode::Nearest;
    k.loop_(0, n, &mut |b| {
        k.loop_(0, oh, &mut |oy| {
            k.loop_(0, ow, &mut |ox| {
                let pix = k.add(k.mul(k.add(k.mul(b, oh)?, oy)?, ow)?, ox)?;
                let gi = k.mul(pix, 2)?;
                let cx = coord(&k, gs, k.ld(pg, gi)?, w)?;
                let cy = coord(&k, gs, k.ld(pg, k.add(gi, k.c(1))?)?, h)?;
                let (tx, ty) = (taps(&k, gs, cx, w)?, taps(&k, gs, cy, h)?);
                k.loop_(0, c, &mut |ch| {
                    let plane = k.mul(k.add(k.mul(b, c)?, ch)?, h * w)?;
                    let v = |row: &Tap<'c>, col: &Tap<'c>| -> R<FloatValue<'c>> {
                        let at = k.add(plane, k.add(k.mul(row.0, w)?, col.0)?)?;
                        let val = llvm(k.b.build_float_ext(k.ld(px, at)?, d, "v"))?;
                        let ok = llvm(k.b.build_and(row.1, col.1, "ok"))?;
                        k.fsel(ok, val, d.const_float(0.0))
                    };
                    // Σ_j wy_j · (Σ_i wx_i · x[y_j, x_i]), each sum left to right from its
                    // first term, as the interpreter folds it.
                    let y = if nearest {
                        v(&ty[0], &tx[0])?
                    } else {
                        let row = |rr: &Tap<'c>| -> R<FloatValue<'c>> {
                            let mut acc = k.fmul(tx[0].2, v(rr, &tx[0])?)?;
                            for t in &tx[1..] {
                                acc = k.fadd(acc, k.fmul(t.2, v(rr, t)?)?)?;
                            }
                            Ok(acc)
                        };
                        let mut acc = k.fmul(ty[0].2, row(&ty[0])?)?;
                        for t in &ty[1..] {
                            acc = k.fadd(acc, k.fmul(t.2, row(t)?)?)?;
                        }
                        acc
                    };
                    let out = k.add(
                        k.mul(k.add(k.mul(k.add(k.mul(b, c)?, ch)?, oh)?, oy)?, ow)?,
                        ox,
                    )?;
                    k.st(po, out, llvm(k.b.build_float_trunc(y, k.f32t, "y"))?)
                })
            })
        })
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}
