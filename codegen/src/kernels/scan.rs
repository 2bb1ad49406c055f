//! The kernels that walk each line along one axis: `cumsum` and `top_k`, on every element
//! type they take (f32, and the integers, each an LLVM integer of its width). Both follow the
//! reference interpreter (`tir_interp::scan`) bit for bit: `cumsum` adds sequentially in the
//! element type along the line (no reassociation: plain `fadd`s, no fast-math flags), and
//! `top_k` inserts each element into the sorted prefix of its line under the same strict
//! total order the interpreter sorts by (value, then lower index first; NaN above numbers),
//! so both pick the same elements.

use super::common::{dims, unsupported, Call};
use crate::nest::{llvm, K, R};
use crate::storage::Storage;
use crate::{Arg, Gen};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use tir_ir::{DType, Function, Op, OpData, Value};

fn elem<'c>(k: &K<'_, 'c>, d: DType) -> Option<BasicTypeEnum<'c>> {
    Some(match d {
        DType::F32 => k.f32t.into(),
        DType::I8 | DType::U8 => k.ctx.i8_type().into(),
        DType::I32 => k.ctx.i32_type().into(),
        DType::I64 => k.ctx.i64_type().into(),
        DType::F16 | DType::BF16 | DType::Bool => return None,
    })
}

fn dtype(func: &Function, op: &OpData, v: Value) -> R<DType> {
    func.ty(v)
        .map(|t| t.dtype)
        .ok_or_else(|| unsupported(func, op, "an untyped value"))
}

/// A typed pointer to kernel parameter `i` of `f`.
fn typed_param<'a, 'c>(
    g: &Gen<'a, 'c>,
    k: &K<'a, 'c>,
    f: inkwell::values::FunctionValue<'c>,
    i: u32,
    ty: BasicTypeEnum<'c>,
) -> R<PointerValue<'c>> {
    llvm(k.b.build_pointer_cast(g.param(f, i)?, ty.ptr_type(AddressSpace::default()), "p"))
}

/// `(outer, n, inner)` of the operand's lines along the op's (normalised) axis.
fn lines(func: &Function, op: &OpData, axis: i64) -> R<(i64, i64, i64)> {
    let xd = dims(func, op.operands[0])?;
    let ax =
        tir_ir::shape::norm_axis(axis, xd.len()).map_err(|e| unsupported(func, op, &e.message))?;
    Ok((
        xd[..ax].iter().product(),
        xd[ax],
        xd[ax + 1..].iter().product(),
    ))
}

fn arg(func: &Function, st: &Storage, v: Value) -> R<Arg> {
    Ok(Arg {
        loc: st.of(func, v)?,
        bytes: func.ty(v).and_then(|t| t.byte_size()).unwrap_or(0),
    })
}

/// `cumsum` along `axis`: per line, a loop carrying the running sum, its first element
/// peeled (`y[first] = x[first]`, or 0 when `exclusive`).
pub(crate) fn cumsum<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let Op::CumSum {
        axis,
        exclusive,
        reverse,
    } = op.op
    else {
        return Err(unsupported(func, op, "not a cumsum"));
    };
    let (x, r) = (op.operands[0], op.results[0]);
    let d = dtype(func, op, x)?;
    let (outer, n, inner) = lines(func, op, axis)?;
    let args = [arg(func, st, x)?, arg(func, st, r)?];
    let f = g.kernel(name, &args, &[false, true]);
    let k = g.k(f);
    let ty = elem(&k, d).ok_or_else(|| unsupported(func, op, &format!("`cumsum` on {d}")))?;
    let xp = typed_param(g, &k, f, 0, ty)?;
    let yp = typed_param(g, &k, f, 1, ty)?;
    let add =
        |k: &K<'a, 'c>, a: BasicValueEnum<'c>, b: BasicValueEnum<'c>| -> R<BasicValueEnum<'c>> {
            Ok(if d == DType::F32 {
                llvm(k.b.build_float_add(a.into_float_value(), b.into_float_value(), "s"))?.into()
            } else {
                // Wrapping, as the interpreter's i64 sum truncated to the type.
                llvm(k.b.build_int_add(a.into_int_value(), b.into_int_value(), "s"))?.into()
            })
        };
    if n > 0 {
        k.loop_(0, outer, &mut |o| {
            k.loop_(0, inner, &mut |i| {
                let base = k.add(k.mul(o, n * inner)?, i)?;
                // Position of step `s` along the line.
                let at = |s: IntValue<'c>| -> R<IntValue<'c>> {
                    let j = if reverse {
                        llvm(k.b.build_int_sub(k.c(n - 1), s, "j"))?
                    } else {
                        s
                    };
                    k.add(base, k.mul(j, inner)?)
                };
                let p0 = at(k.c(0))?;
                let x0 = llvm(k.b.build_load(k.gep(xp, p0)?, "x0"))?;
                let first = if exclusive { ty.const_zero() } else { x0 };
                llvm(k.b.build_store(k.gep(yp, p0)?, first))?;
                k.loop_carry(1, n, 1, vec![x0], &mut |s, acc| {
                    let p = at(s)?;
                    let xv = llvm(k.b.build_load(k.gep(xp, p)?, "x"))?;
                    let next = add(&k, acc[0], xv)?;
                    let y = if exclusive { acc[0] } else { next };
                    llvm(k.b.build_store(k.gep(yp, p)?, y))?;
                    Ok(vec![next])
                })?;
                Ok(())
            })
        })?;
    }
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, vec![args[0].loc, args[1].loc])])
}

/// `top_k` along `axis`: per line, every element in index order is inserted into the sorted
/// first `k` slots of the results (values and indices, which serve as the working list): it
/// walks the filled slots, swapping with each slot it ranks above, so the displaced element
/// walks on; it lands in the first empty slot, or falls off past slot `k - 1`. O(n·k) per
/// line, branch-free within a step.
pub(crate) fn top_k<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let Op::TopK {
        axis,
        k: kk,
        largest,
    } = op.op
    else {
        return Err(unsupported(func, op, "not a top_k"));
    };
    let (x, rv, ri) = match (op.operands.first(), op.results.as_slice()) {
        (Some(&x), &[rv, ri]) => (x, rv, ri),
        _ => {
            return Err(unsupported(
                func,
                op,
                "a top_k has one operand and two results",
            ))
        }
    };
    let d = dtype(func, op, x)?;
    let (outer, n, inner) = lines(func, op, axis)?;
    let kk = kk as i64;
    let args = [arg(func, st, x)?, arg(func, st, rv)?, arg(func, st, ri)?];
    let f = g.kernel(name, &args, &[false, true, true]);
    let k = g.k(f);
    let ty = elem(&k, d).ok_or_else(|| unsupported(func, op, &format!("`top_k` on {d}")))?;
    let xp = typed_param(g, &k, f, 0, ty)?;
    let vp = typed_param(g, &k, f, 1, ty)?;
    let ip = typed_param(g, &k, f, 2, k.i64t.into())?;
    let uns = d == DType::U8;
    // Whether (a, ia) ranks strictly above (b, ib).
    let above = |k: &K<'a, 'c>,
                 a: BasicValueEnum<'c>,
                 ia: IntValue<'c>,
                 b: BasicValueEnum<'c>,
                 ib: IntValue<'c>|
     -> R<IntValue<'c>> {
        let lower = llvm(k.b.build_int_compare(IntPredicate::SLT, ia, ib, "lo"))?;
        if d == DType::F32 {
            let (a, b) = (a.into_float_value(), b.into_float_value());
            let fc = |p, l, r| llvm(k.b.build_float_compare(p, l, r, "c"));
            let an = fc(FloatPredicate::UNO, a, a)?;
            let bn = fc(FloatPredicate::UNO, b, b)?;
            let strict = fc(
                if largest {
                    FloatPredicate::OGT
                } else {
                    FloatPredicate::OLT
                },
                a,
                b,
            )?;
            let eq = fc(FloatPredicate::OEQ, a, b)?;
            let tie = llvm(k.b.build_and(eq, lower, "t"))?;
            let num = llvm(k.b.build_or(strict, tie, "n"))?;
            // NaN ranks above every number: first when `largest`, last otherwise.
            let both = llvm(k.b.build_and(an, bn, "bb"))?;
            let nan_case = llvm(k.b.build_and(both, lower, "nl"))?;
            let one_nan = if largest {
                // a NaN and b a number: above; b NaN and a a number: below.
                llvm(k.b.build_and(an, llvm(k.b.build_not(bn, "nb"))?, "an"))?
            } else {
                llvm(k.b.build_and(bn, llvm(k.b.build_not(an, "na"))?, "bn"))?
            };
            let any_nan = llvm(k.b.build_or(an, bn, "any"))?;
            let nan_rank = llvm(k.b.build_or(nan_case, one_nan, "nr"))?;
            Ok(llvm(k.b.build_select(any_nan, nan_rank, num, "ab"))?.into_int_value())
        } else {
            let (a, b) = (a.into_int_value(), b.into_int_value());
            let p = match (largest, uns) {
                (true, true) => IntPredicate::UGT,
                (true, false) => IntPredicate::SGT,
                (false, true) => IntPredicate::ULT,
                (false, false) => IntPredicate::SLT,
            };
            let strict = llvm(k.b.build_int_compare(p, a, b, "s"))?;
            let eq = llvm(k.b.build_int_compare(IntPredicate::EQ, a, b, "e"))?;
            let tie = llvm(k.b.build_and(eq, lower, "t"))?;
            llvm(k.b.build_or(strict, tie, "ab"))
        }
    };
    k.loop_(0, outer, &mut |o| {
        k.loop_(0, inner, &mut |i| {
            let xbase = k.add(k.mul(o, n * inner)?, i)?;
            let rbase = k.add(k.mul(o, kk * inner)?, i)?;
            k.loop_(0, n, &mut |j| {
                let xv = llvm(k.b.build_load(k.gep(xp, k.add(xbase, k.mul(j, inner)?)?)?, "x"))?;
                k.loop_carry(0, kk, 1, vec![xv, j.into()], &mut |s, carry| {
                    let (cv, ci) = (carry[0], carry[1].into_int_value());
                    let at = k.add(rbase, k.mul(s, inner)?)?;
                    let (vq, iq) = (k.gep(vp, at)?, k.gep(ip, at)?);
                    // Slots below `j` are filled; slot `j` is the first empty one.
                    let sv = llvm(k.b.build_load(vq, "sv"))?;
                    let si = llvm(k.b.build_load(iq, "si"))?.into_int_value();
                    let filled = llvm(k.b.build_int_compare(IntPredicate::SLT, s, j, "f"))?;
                    let first_empty = llvm(k.b.build_int_compare(IntPredicate::EQ, s, j, "fe"))?;
                    let beats = above(&k, cv, ci, sv, si)?;
                    let swap = llvm(k.b.build_and(filled, beats, "sw"))?;
                    let take = llvm(k.b.build_or(swap, first_empty, "tk"))?;
                    // An untouched slot is stored back as it was (beyond `j` it is not
                    // read before an element lands there).
                    let nv = llvm(k.b.build_select(take, cv, sv, "nv"))?;
                    let ni = llvm(k.b.build_select(take, ci, si, "ni"))?;
                    llvm(k.b.build_store(vq, nv))?;
                    llvm(k.b.build_store(iq, ni))?;
                    let cv2 = llvm(k.b.build_select(swap, sv, cv, "cv"))?;
                    let ci2 = llvm(k.b.build_select(swap, si, ci, "ci"))?;
                    Ok(vec![cv2, ci2])
                })?;
                Ok(())
            })
        })
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, vec![args[0].loc, args[1].loc, args[2].loc])])
}
