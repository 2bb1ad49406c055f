//! `conv_transpose` with run-time extents (issue 18): a transposed convolution over images
//! whose height and width (and batch) are known only at run time; channels, kernel, strides,
//! dilations, pads and groups stay constants.
//!
//! **The static kernel's order, per element** (`kernels/conv/transpose.rs`). Output pixel
//! `(oy, ox)` of channel `m` is the sum, from zero, of one FMA per input channel `c` of its
//! group and tap `(i, j)` with `oy + pad_top = iy·sH + i·dH` and `ox + pad_left = ix·sW + j·dW`,
//! in `(c, i, j)` order, then `+ bias` (`+0.0` without one), then the activation. The static
//! kernel splits the output by stride phase and runs the taps of a phase as vectors; a
//! column tap that reads outside the input for some lanes of a vector is a zero-filled lane
//! there, so it adds `w · 0`. Here each output is one scalar chain over the taps that read
//! inside the input; for finite weights the skipped `±0` terms change at most the sign of a
//! zero partial sum, which the final `+ bias` (`+0.0` without one) takes away (as for
//! `conv2d`, `dynamic/cnn.rs`). So the bits are the static kernel's, up to the sign of an
//! output that is exactly zero when the bias is exactly `-0.0`.

use super::{args_dyn, finish_call, refuse, DynSpec, DynTiles};
use crate::kernels::common::{activation, Call};
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::Gen;
use inkwell::values::IntValue;
use inkwell::IntPredicate;
use tir_ir::op::ConvTranspose;
use tir_ir::{Function, OpData};

pub(super) fn conv_transpose<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    c: &ConvTranspose,
    name: &str,
) -> R<Call<'c>> {
    let (x, wv, r) = (op.operands[0], op.operands[1], op.results[0]);
    let bias = op.operands.get(2).copied();
    let (xe, we, oe) = (
        spec.dims(func, x)?,
        spec.dims(func, wv)?,
        spec.dims(func, r)?,
    );
    if xe.len() != 4 || we.len() != 4 || oe.len() != 4 {
        return Err(refuse(
            spec,
            func,
            op,
            "a conv_transpose of operands not of rank 4",
        ));
    }
    let konst = |e: &tir_ir::sym::DimExpr| e.as_constant().map(|v| v as i64);
    let (Some(ci), Some(mw), Some(kh), Some(kw), Some(m)) = (
        konst(&xe[1]),
        konst(&we[1]),
        konst(&we[2]),
        konst(&we[3]),
        konst(&oe[1]),
    ) else {
        return Err(refuse(
            spec,
            func,
            op,
            "a conv_transpose with run-time channels or kernel size",
        ));
    };
    let groups = (c.groups as i64).max(1);
    let (cg, mg) = (ci / groups, m / groups);
    let [sh, sw] = c.strides.map(|v| v as i64);
    let [dh, dw] = c.dilations.map(|v| v as i64);
    let (pt, pl) = (c.pads[0] as i64, c.pads[1] as i64);
    let mut vals = vec![x, wv];
    vals.extend(bias);
    vals.push(r);
    let args = args_dyn(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    // Tiles of output rows (every image's channels' rows in turn): each output is one chain
    // of its own, so any cut gives the same bits.
    let flops = 2 * (cg * kh * kw / (sh * sw).max(1)).max(1) as u64;
    let tiles = DynTiles::new(oe.clone(), crate::parallel::work(flops, 8), 8);
    let d = g.dyn_kernel_tiled(name, &args, &writes, &spec.symbols, Some(tiles))?;
    let k = &d.k;
    // The accumulator, in the entry block (where the builder still is) so it is promoted.
    let accp = llvm(k.b.build_alloca(k.f32t, "acc"))?;
    let (n, h, wi) = (d.dim(&xe[0])?, d.dim(&xe[2])?, d.dim(&xe[3])?);
    let (oh, ow) = (d.dim(&oe[2])?, d.dim(&oe[3])?);
    let px = d.param(0)?;
    let pw = d.param(1)?;
    let pb = match bias {
        Some(_) => Some(d.param(2)?),
        None => None,
    };
    let po = d.param(args.len() as u32 - 1)?;
    let hw = d.imul(h, wi)?;
    // No input channel is read from an empty image (every tap's load would be outside it):
    // the sums stay zero, the outputs the bias, as the static kernel's phases without reads.
    let some = llvm(k.b.build_int_compare(IntPredicate::SGT, hw, k.c(0), "some"))?;
    let cg_run = llvm(k.b.build_select(some, k.c(cg), k.c(0), "cg"))?.into_int_value();
    let ohw = d.imul(oh, ow)?;
    let taps = kh * kw;
    let cmp = |p: IntPredicate, a: IntValue<'c>, b: IntValue<'c>| {
        llvm(k.b.build_int_compare(p, a, b, "c"))
    };
    let and = |a: IntValue<'c>, b: IntValue<'c>| llvm(k.b.build_and(a, b, "a"));
    // Whether `q` (= out + pad − tap·dilation) lands on an input index below `len` at stride
    // `s`, and that index (`q / s`, exact where it lands).
    let lands = |q: IntValue<'c>, s: i64, len: IntValue<'c>| -> R<(IntValue<'c>, IntValue<'c>)> {
        let nonneg = cmp(IntPredicate::SGE, q, k.c(0))?;
        let qs = llvm(k.b.build_int_signed_rem(q, k.c(s), "r"))?;
        let exact = cmp(IntPredicate::EQ, qs, k.c(0))?;
        let idx = llvm(k.b.build_int_signed_div(q, k.c(s), "i"))?;
        let below = cmp(IntPredicate::SLT, idx, len)?;
        Ok((and(and(nonneg, exact)?, below)?, idx))
    };
    let moh = d.imul(k.c(m), oh)?;
    let (lo, hi) = d.split(d.imul(n, moh)?, 1)?;
    d.loop_step(lo, hi, 1, &mut |row| {
        // `oh` is not zero here (there is a row).
        let b = llvm(k.b.build_int_signed_div(row, moh, "b"))?;
        let rest = llvm(k.b.build_int_sub(row, d.imul(b, moh)?, "rest"))?;
        let mo = llvm(k.b.build_int_signed_div(rest, oh, "mo"))?;
        let oy = llvm(k.b.build_int_sub(rest, d.imul(mo, oh)?, "oy"))?;
        {
            let gi = llvm(k.b.build_int_signed_div(mo, k.c(mg), "g"))?;
            let ml = llvm(k.b.build_int_signed_rem(mo, k.c(mg), "ml"))?;
            // Input channels of the group, weights of (c, ml, ·, ·).
            let c0 = k.mul(gi, cg)?;
            let xb = d.imul(k.add(k.mul(b, ci)?, c0)?, hw)?;
            let wb = k.add(k.mul(c0, mw * taps)?, k.mul(ml, taps)?)?;
            let ob = d.imul(k.add(k.mul(b, m)?, mo)?, ohw)?;
            let bv = match pb {
                Some(p) => k.ld(p, mo)?,
                None => k.f(0.0),
            };
            {
                // Which row taps read inside the input at this row, and their row offsets
                // (0 where they do not, and never read).
                let mut rows = Vec::with_capacity(kh as usize);
                for i in 0..kh {
                    let (on, iy) = lands(k.add(oy, k.c(pt - i * dh))?, sh, h)?;
                    let off = llvm(k.b.build_select(on, d.imul(iy, wi)?, k.c(0), "ro"))?;
                    rows.push((on, off.into_int_value()));
                }
                d.loop_step(k.c(0), ow, 1, &mut |ox| {
                    let mut taps_on = Vec::with_capacity(taps as usize);
                    for &(on_y, ro) in &rows {
                        for j in 0..kw {
                            let (on_x, ix) = lands(k.add(ox, k.c(pl - j * dw))?, sw, wi)?;
                            let on = and(on_y, on_x)?;
                            let at = k.add(ro, ix)?;
                            let at = llvm(k.b.build_select(on, at, k.c(0), "at"))?;
                            taps_on.push((on, at.into_int_value()));
                        }
                    }
                    // Branches, not selects: a tap's validity is the same for every input
                    // channel, so it is predicted, and the taps off (most of them at stride
                    // 2 and more) cost no load.
                    llvm(k.b.build_store(accp, k.f(0.0)))?;
                    d.loop_step(k.c(0), cg_run, 1, &mut |cc| {
                        let xc = k.add(xb, d.imul(cc, hw)?)?;
                        let wc = k.add(wb, k.mul(cc, mw * taps)?)?;
                        for (t, &(on, at)) in taps_on.iter().enumerate() {
                            k.when(on, &mut || {
                                let wt = k.ld(pw, k.add(wc, k.c(t as i64))?)?;
                                let v = k.ld(px, k.add(xc, at)?)?;
                                let a = llvm(k.b.build_load(accp, "a"))?.into_float_value();
                                llvm(k.b.build_store(accp, k.fma(wt, v, a)?))?;
                                Ok(())
                            })?;
                        }
                        Ok(())
                    })?;
                    let a = llvm(k.b.build_load(accp, "a"))?.into_float_value();
                    let y = activation(k, c.activation, k.fadd(a, bv)?)?;
                    k.st(po, k.add(ob, k.add(d.imul(oy, ow)?, ox)?)?, y)
                })
            }
        }
    })?;
    finish_call(g, d.f, &args)
}
