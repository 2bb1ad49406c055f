//! Normalisations over an axis: `softmax`, `log_softmax` and `layer_norm`, statistics in f64 as
//! the reference.

use super::common::{args_of, broadcast, contiguous, dims, nest, unsupported, Call};
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::Gen;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue, PointerValue};
use tir_ir::shape::norm_axis;
use tir_ir::{Function, OpData};

/// Softmax along `axis`: the maximum, the exponentials summed in f64, the quotients; with
/// `log`, log_softmax: `x - max - ln(sum)` instead of the quotients.
pub(crate) fn softmax<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    axis: i64,
    log: bool,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let xd = dims(func, x)?;
    let ax = norm_axis(axis, xd.len()).map_err(|_| unsupported(func, op, "axis"))?;
    let len = xd[ax];
    let outer: i64 = xd[..ax].iter().product();
    let inner: i64 = xd[ax + 1..].iter().product();
    let args = args_of(func, st, &[x, r])?;
    // Rows are independent: cut for threads by whole outer rows (each normalised by the same loops whatever the cut).
    let work = crate::parallel::work(
        (outer * len * inner * 8).max(0) as u64,
        8 * (outer * len * inner).max(0) as u64,
    );
    let f = g.units_kernel(
        name,
        &args,
        &[false, true],
        outer,
        work,
        &mut |k, ps, u0, count| {
            let (px, po) = (ps[0], ps[1]);
            if !log && inner == 1 {
                // Rows along the last axis: the run-time kernel's passes (the same operations
                // per element), vectors of exponentials apart from their f64 sum.
                let d = crate::dynamic::Dk::over(k);
                let rows = (u0, k.add(u0, k.c(count))?);
                let in_place = args[0].loc == args[1].loc;
                return crate::dynamic::softmax_rows(g, &d, (px, po), rows, k.c(len), in_place);
            }
            let d = k.ctx.f64_type();
            k.loop_(0, count, &mut |o| {
                let o = k.add(o, u0)?;
                k.loop_(0, inner, &mut |i| {
                    let base = k.add(k.mul(o, len * inner)?, i)?;
                    let at = |l: IntValue<'c>| k.add(base, k.mul(l, inner)?);
                    let ninf: BasicValueEnum = k.f(f64::NEG_INFINITY).into();
                    let mx = k.loop_carry(0, len, 1, vec![ninf], &mut |l, cur| {
                        let v = k.ld(px, at(l)?)?;
                        // f32::max: the non-NaN operand wins.
                        let m = cur[0].into_float_value();
                        let gt =
                            llvm(k.b.build_float_compare(inkwell::FloatPredicate::OGT, v, m, "g"))?;
                        let uno =
                            llvm(k.b.build_float_compare(inkwell::FloatPredicate::UNO, m, m, "u"))?;
                        let pick = llvm(k.b.build_or(gt, uno, "p"))?;
                        Ok(vec![k.fsel(pick, v, m)?.into()])
                    })?;
                    let mx = mx[0].into_float_value();
                    let zero: BasicValueEnum = d.const_float(0.0).into();
                    let sum = k.loop_carry(0, len, 1, vec![zero], &mut |l, cur| {
                        let e = k.exp(k.fsub(k.ld(px, at(l)?)?, mx)?)?;
                        if !log {
                            k.st(po, at(l)?, e)?;
                        }
                        let ed = llvm(k.b.build_float_ext(e, d, "e"))?;
                        Ok(vec![k.fadd(cur[0].into_float_value(), ed)?.into()])
                    })?;
                    let sum = sum[0].into_float_value();
                    if log {
                        // log_softmax: (x - max) - ln(sum), in f64 as the reference.
                        let ln = k.intrinsic("llvm.log", &[d.into()])?;
                        let log_sum = llvm(k.b.build_call(ln, &[sum.into()], "ls"))?
                            .try_as_basic_value()
                            .basic()
                            .map(|v| v.into_float_value())
                            .ok_or_else(|| {
                                crate::CodegenError::Llvm("log returned no value".into())
                            })?;
                        return k.loop_(0, len, &mut |l| {
                            let c = k.fsub(k.ld(px, at(l)?)?, mx)?;
                            let c = llvm(k.b.build_float_ext(c, d, "c"))?;
                            let y = llvm(k.b.build_float_sub(c, log_sum, "y"))?;
                            let y = llvm(k.b.build_float_trunc(y, k.f32t, "y"))?;
                            k.st(po, at(l)?, y)
                        });
                    }
                    k.loop_(0, len, &mut |l| {
                        let e = llvm(k.b.build_float_ext(k.ld(po, at(l)?)?, d, "e"))?;
                        let q = llvm(k.b.build_float_trunc(k.fdiv(e, sum)?, k.f32t, "q"))?;
                        k.st(po, at(l)?, q)
                    })
                })
            })
        },
    )?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

/// `(x - mean) / sqrt(var + epsilon) * scale + bias` over the axes from `axis` on, statistics
/// in f64 as the reference.
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    axis: i64,
    epsilon: f64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let x = op.operands[0];
    let r = op.results[0];
    let xd = dims(func, x)?;
    let ax = norm_axis(axis, xd.len()).map_err(|_| unsupported(func, op, "axis"))?;
    let norm = &xd[ax..];
    let inner: i64 = norm.iter().product();
    let outer: i64 = xd[..ax].iter().product();
    let mut vals = vec![x];
    vals.extend(op.operands[1..].iter().copied());
    vals.push(r);
    let args = args_of(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    let param_strides: Vec<Vec<i64>> = op.operands[1..]
        .iter()
        .map(|&p| Ok(broadcast(&dims(func, p)?, norm)))
        .collect::<R<_>>()?;
    // Rows are independent: cut for threads by whole rows (each normalised by the same loops
    // whatever the cut).
    let work = crate::parallel::work(
        8 * (outer * inner).max(0) as u64,
        8 * (outer * inner).max(0) as u64,
    );
    let nargs = args.len();
    let f = g.units_kernel(
        name,
        &args,
        &writes,
        outer,
        work,
        &mut |k, ps, u0, count| {
            let px = ps[0];
            let pp: Vec<PointerValue> = ps[1..nargs - 1].to_vec();
            let po = ps[nargs - 1];
            let d = k.ctx.f64_type();
            let ext = |v: FloatValue<'c>| llvm(k.b.build_float_ext(v, d, "e"));
            k.loop_(0, count, &mut |o| {
                let o = k.add(o, u0)?;
                let base = k.mul(o, inner)?;
                let zero: BasicValueEnum = d.const_float(0.0).into();
                let s = k.loop_carry(0, inner, 1, vec![zero], &mut |i, cur| {
                    let v = ext(k.ld(px, k.add(base, i)?)?)?;
                    Ok(vec![k.fadd(cur[0].into_float_value(), v)?.into()])
                })?;
                let mean = k.fdiv(s[0].into_float_value(), d.const_float(inner as f64))?;
                let s2 = k.loop_carry(0, inner, 1, vec![zero], &mut |i, cur| {
                    let v = k.fsub(ext(k.ld(px, k.add(base, i)?)?)?, mean)?;
                    Ok(vec![k
                        .fadd(cur[0].into_float_value(), k.fmul(v, v)?)?
                        .into()])
                })?;
                let var = k.fdiv(s2[0].into_float_value(), d.const_float(inner as f64))?;
                let inv = k.fdiv(
                    d.const_float(1.0),
                    k.sqrt(k.fadd(var, d.const_float(epsilon))?)?,
                )?;
                // The normalised axes as one loop nest, so scale and bias broadcast over them.
                let xs = contiguous(norm);
                let mut sets: Vec<(&[i64], i64)> = vec![(&xs, 0)];
                for ps in &param_strides {
                    sets.push((ps, 0));
                }
                nest(k, norm, &sets, &mut |idx| {
                    let at = k.add(base, idx[0])?;
                    let v = k.fsub(ext(k.ld(px, at)?)?, mean)?;
                    let mut y = k.fmul(k.fmul(v, inv)?, ext(k.ld(pp[0], idx[1])?)?)?;
                    if pp.len() > 1 {
                        y = k.fadd(y, ext(k.ld(pp[1], idx[2])?)?)?;
                    }
                    k.st(po, at, llvm(k.b.build_float_trunc(y, k.f32t, "t"))?)
                })
            })
        },
    )?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}
