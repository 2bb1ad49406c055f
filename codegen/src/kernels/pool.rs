//! Pooling: `max_pool` and `avg_pool` (a scalar loop over each window), and
//! `global_avg_pool`, the mean of each `N·C` plane summed in `f64` like the reference.
//!
//! The squeeze-and-excitation blocks of EfficientNet and MobileNet v3 pool planes of up to
//! 112×112; one scalar `f64` add chain per plane ran at the add's latency (8.6% of
//! EfficientNet-B0's time, issue 6). Here each plane is summed as `W`-lane `f32` loads widened
//! to `f64` into [`ACCS`] independent vector accumulators (the last `< W` elements as one
//! masked load, zero-filled), then the lanes are added pairwise. The sum is exact to `f64`
//! rounding in any order, so the result is the reference's after the cast to `f32` but for
//! ties of the last `f64` bit.

use super::common::{args_of, dims, unsupported, Call};
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::Gen;
use inkwell::values::{BasicValueEnum, FloatValue, VectorValue};
use tir_ir::op::Pool2d;
use tir_ir::{Function, OpData};

/// Max or average pooling on NCHW; padded cells never win a max and count in an average's
/// divisor only with `count_include_pad`.
pub(crate) fn pool<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    p: &Pool2d,
    is_max: bool,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let xd = dims(func, x)?;
    let od = dims(func, r)?;
    if xd.len() != 4 {
        return Err(unsupported(func, op, "pooling needs rank 4"));
    }
    let (planes, h, w) = (xd[0] * xd[1], xd[2], xd[3]);
    let (oh, ow) = (od[2], od[3]);
    let [kh, kw] = p.kernel.map(|v| v as i64);
    let [sh, sw] = p.strides.map(|v| v as i64);
    let [pt, pl, pb, pr] = p.pads.map(|v| v as i64);
    let args = args_of(func, st, &[x, r])?;
    // Planes are independent: cut for threads by whole planes (memory-bound, so the work is
    // the traffic of each window's reads).
    let work = crate::parallel::work(
        (planes * oh * ow * kh * kw).max(0) as u64,
        4 * (planes * (h * w + oh * ow)).max(0) as u64,
    );
    let f = g.units_kernel(
        name,
        &args,
        &[false, true],
        planes,
        work,
        &mut |k, ps, p0, count| {
            let (px, po) = (ps[0], ps[1]);
            k.loop_(0, count, &mut |pl_| {
                let pl_ = k.add(pl_, p0)?;
                let xp = k.gep(px, k.mul(pl_, h * w)?)?;
                let op_ = k.gep(po, k.mul(pl_, oh * ow)?)?;
                k.loop_(0, oh, &mut |oy| {
                    k.loop_(0, ow, &mut |ox| {
                        let by = k.add(k.mul(oy, sh)?, k.c(-pt))?;
                        let bx = k.add(k.mul(ox, sw)?, k.c(-pl))?;
                        let mut acc = k.f(if is_max { f64::NEG_INFINITY } else { 0.0 });
                        let mut cnt = k.f(0.0);
                        for i in 0..kh {
                            let iy = k.add(by, k.c(i))?;
                            let iny = k.in_range(iy, 0, h)?;
                            let cy = k.iclamp(iy, 0, h - 1)?;
                            let incl_y = k.in_range(iy, -pt, h + pb)?;
                            for j in 0..kw {
                                let ix = k.add(bx, k.c(j))?;
                                let inx = k.in_range(ix, 0, w)?;
                                let cx = k.iclamp(ix, 0, w - 1)?;
                                let inside = llvm(k.b.build_and(iny, inx, "in"))?;
                                let v = k.ld(xp, k.add(k.mul(cy, w)?, cx)?)?;
                                if is_max {
                                    let m = k.max_nan(acc, v)?;
                                    acc = k.fsel(inside, m, acc)?;
                                } else {
                                    let s = k.fadd(acc, v)?;
                                    acc = k.fsel(inside, s, acc)?;
                                    let counted = if p.count_include_pad {
                                        let inclx = k.in_range(ix, -pl, w + pr)?;
                                        llvm(k.b.build_and(incl_y, inclx, "c"))?
                                    } else {
                                        inside
                                    };
                                    let c1 = k.fadd(cnt, k.f(1.0))?;
                                    cnt = k.fsel(counted, c1, cnt)?;
                                }
                            }
                        }
                        let out = if is_max { acc } else { k.fdiv(acc, cnt)? };
                        k.st(op_, k.add(k.mul(oy, ow)?, ox)?, out)
                    })
                })
            })
        },
    )?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

/// Independent vector accumulators per plane (each `W` lanes of `f64`: two AVX-512 registers).
const ACCS: i64 = 2;

pub(crate) fn global_avg_pool<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let xd = dims(func, x)?;
    if xd.len() < 2 {
        return Err(unsupported(func, op, "rank below 2"));
    }
    let planes = xd[0] * xd[1];
    let size: i64 = xd[2..].iter().product();
    let args = args_of(func, st, &[x, r])?;
    let w = g.width;
    let wl = w as i64;
    let d = g.ctx.f64_type();
    let dv = d.vec_type(w);
    let step = ACCS * wl;
    let unrolled = size / step * step;
    let whole = size / wl * wl;
    // Planes are independent: cut for threads by whole planes (a memory-bound read).
    let work = crate::parallel::work(
        (planes * size).max(0) as u64,
        4 * (planes * (size + 1)).max(0) as u64,
    );
    let f = g.units_kernel(
        name,
        &args,
        &[false, true],
        planes,
        work,
        &mut |k, ps, p0, count| {
            let (px, po) = (ps[0], ps[1]);
            let widen = |v: VectorValue<'c>| -> R<VectorValue<'c>> {
                llvm(k.b.build_float_ext(v, dv, "e"))
            };
            k.loop_(0, count, &mut |pl| {
                let pl = k.add(pl, p0)?;
                let base = k.mul(pl, size)?;
                let zero: BasicValueEnum = dv.const_zero().into();
                let accs = k.loop_carry(
                    0,
                    unrolled,
                    step,
                    vec![zero; ACCS as usize],
                    &mut |i, cur| {
                        let at = k.add(base, i)?;
                        (0..ACCS)
                            .map(|a| {
                                let v = widen(k.ldv(px, k.add(at, k.c(a * wl))?, w)?)?;
                                let c = cur[a as usize].into_vector_value();
                                Ok(llvm(k.b.build_float_add(c, v, "s"))?.into())
                            })
                            .collect()
                    },
                )?;
                let mut acc = accs[0].into_vector_value();
                for a in &accs[1..] {
                    acc = llvm(k.b.build_float_add(acc, a.into_vector_value(), "s"))?;
                }
                let acc = k.loop_carry(unrolled, whole, wl, vec![acc.into()], &mut |i, cur| {
                    let v = widen(k.ldv(px, k.add(base, i)?, w)?)?;
                    let c = cur[0].into_vector_value();
                    Ok(vec![llvm(k.b.build_float_add(c, v, "s"))?.into()])
                })?;
                let mut acc = acc[0].into_vector_value();
                if whole < size {
                    let v = k.ldv_masked(px, k.add(base, k.c(whole))?, w, (size - whole) as u32)?;
                    acc = llvm(k.b.build_float_add(acc, widen(v)?, "s"))?;
                }
                let mut parts: Vec<FloatValue> = (0..w)
                    .map(|l| {
                        let i = k.ctx.i32_type().const_int(l.into(), false);
                        Ok(llvm(k.b.build_extract_element(acc, i, "l"))?.into_float_value())
                    })
                    .collect::<R<_>>()?;
                while parts.len() > 1 {
                    parts = parts
                        .chunks(2)
                        .map(|p| {
                            if p.len() == 2 {
                                k.fadd(p[0], p[1])
                            } else {
                                Ok(p[0])
                            }
                        })
                        .collect::<R<_>>()?;
                }
                let mean = k.fdiv(parts[0], d.const_float(size as f64))?;
                k.st(po, pl, llvm(k.b.build_float_trunc(mean, k.f32t, "t"))?)
            })
        },
    )?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}
