//! Kernels for tensors that are not all `f32`: `cast`, the comparisons, `where`, the logical
//! ops, `argmax`/`argmin`, integer arithmetic (binary and unary), and the copies of views and
//! returned values. The f32 kernels are untouched: [`crate::dispatch`] sends an op here only
//! when one of its values has another element type.
//!
//! Storage: `i8`/`u8`/`i32`/`i64` are LLVM integers of their width; `bool` is one byte holding
//! 0 or 1 (NumPy's `|b1`), every load normalising a non-zero byte to 1 so that files with other
//! bytes read as the interpreter reads them. `f16` and `bf16` have no kernels (refused).
//! Each kernel is one strided loop nest, as [`super::common::strided_kernel`], with the
//! element type of every operand its own. Every operation matches the reference interpreter
//! (`tir_interp::typed`) bit for bit: wrapping integer arithmetic, integer division truncating
//! toward zero with a division by zero giving 0 (never a trap), float to integer casts
//! saturating with NaN giving 0 (LLVM's `fpto*i.sat`, Rust's `as`).

use super::common::{broadcast, contiguous, dims, nest, result, unsupported, Call, Strided};
use crate::nest::{llvm, K, R};
use crate::storage::{Loc, Storage};
use crate::{Arg, CodegenError, Gen};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use tir_ir::{BinaryOp, CompareOp, DType, Function, LogicalOp, OpData, UnaryOp, Value};

type TypedFn<'f> =
    &'f dyn for<'a, 'c> Fn(&K<'a, 'c>, &[BasicValueEnum<'c>]) -> R<BasicValueEnum<'c>>;

/// Whether generated code holds `d`: every type but `bf16`; `f16` only in casts and copies.
pub(crate) fn supported(d: DType) -> bool {
    d != DType::BF16
}

fn elem<'c>(k: &K<'_, 'c>, d: DType) -> BasicTypeEnum<'c> {
    match d {
        DType::F32 => k.f32t.into(),
        DType::I8 | DType::U8 | DType::Bool => k.ctx.i8_type().into(),
        DType::I32 => k.ctx.i32_type().into(),
        DType::I64 => k.ctx.i64_type().into(),
        // `bf16` is refused before any kernel is built (`supported`).
        DType::F16 | DType::BF16 => k.ctx.f16_type().into(),
    }
}

fn dtype(func: &Function, v: Value) -> R<DType> {
    func.ty(v)
        .map(|t| t.dtype)
        .ok_or_else(|| CodegenError::NoStorage(func.value_name(v)))
}

fn strided(func: &Function, st: &Storage, v: Value, target: Option<&[i64]>) -> R<(Strided, DType)> {
    let d = dims(func, v)?;
    let t = dtype(func, v)?;
    let n = d.iter().product::<i64>().max(0) as u64;
    Ok((
        Strided {
            loc: st.of(func, v)?,
            bytes: n * t.byte_size(),
            strides: match target {
                Some(t) => broadcast(&d, t),
                None => contiguous(&d),
            },
            base: 0,
        },
        t,
    ))
}

/// A kernel `out[...] = f(ins[...])` over `shape`, each operand loaded as its element type.
fn typed_kernel<'a, 'c>(
    g: &Gen<'a, 'c>,
    name: &str,
    shape: &[i64],
    out: (Strided, DType),
    ins: Vec<(Strided, DType)>,
    f: TypedFn,
) -> R<Call<'c>> {
    let mut all = ins;
    all.push(out);
    let mut strides: Vec<Vec<i64>> = all.iter().map(|s| s.0.strides.clone()).collect();
    let shape = {
        let mut refs: Vec<&mut Vec<i64>> = strides.iter_mut().collect();
        super::common::collapse(shape, &mut refs)
    };
    let args: Vec<Arg> = all
        .iter()
        .map(|s| Arg {
            loc: s.0.loc,
            bytes: s.0.bytes,
        })
        .collect();
    let mut writes = vec![false; all.len()];
    writes[all.len() - 1] = true;
    let func = g.kernel(name, &args, &writes);
    let k = g.k(func);
    let mut ptrs: Vec<PointerValue> = Vec::with_capacity(all.len());
    for (i, (_, d)) in all.iter().enumerate() {
        let p = g.param(func, i as u32)?;
        let ty = elem(&k, *d).ptr_type(AddressSpace::default());
        ptrs.push(llvm(k.b.build_pointer_cast(p, ty, "tp"))?);
    }
    let sets: Vec<(&[i64], i64)> = strides
        .iter()
        .zip(&all)
        .map(|(s, a)| (s.as_slice(), a.0.base))
        .collect();
    let n = all.len();
    let types: Vec<DType> = all.iter().map(|a| a.1).collect();
    nest(&k, &shape, &sets, &mut |idx| {
        let mut vals = Vec::with_capacity(n - 1);
        for i in 0..n - 1 {
            let q = k.gep(ptrs[i], idx[i])?;
            let v = llvm(k.b.build_load(q, "x"))?;
            vals.push(if types[i] == DType::Bool {
                to_byte(&k, ne_zero(&k, v.into_int_value())?)?.into()
            } else {
                v
            });
        }
        let v = f(&k, &vals)?;
        let q = k.gep(ptrs[n - 1], idx[n - 1])?;
        llvm(k.b.build_store(q, v))?;
        Ok(())
    })?;
    llvm(g.builder.build_return(None))?;
    Ok((func, all.iter().map(|s| s.0.loc).collect()))
}

fn ne_zero<'c>(k: &K<'_, 'c>, v: IntValue<'c>) -> R<IntValue<'c>> {
    let z = v.get_type().const_zero();
    llvm(k.b.build_int_compare(IntPredicate::NE, v, z, "nz"))
}

/// An `i1` as a stored bool byte.
fn to_byte<'c>(k: &K<'_, 'c>, c: IntValue<'c>) -> R<IntValue<'c>> {
    llvm(k.b.build_int_z_extend(c, k.ctx.i8_type(), "b"))
}

fn unsigned(d: DType) -> bool {
    matches!(d, DType::U8 | DType::Bool)
}

/// Every value of the op, the result first, in a type generated code computes on (`f16`
/// only when `f16` is true: casts and copies).
fn check_types(func: &Function, op: &OpData) -> R<()> {
    check_types_f16(func, op, false)
}

fn check_types_f16(func: &Function, op: &OpData, f16: bool) -> R<()> {
    for &v in op.results.iter().chain(&op.operands) {
        let d = dtype(func, v)?;
        if !supported(d) || (d == DType::F16 && !f16) {
            return Err(unsupported(
                func,
                op,
                &format!("{d} tensors have no generated kernels (the interpreter runs them)"),
            ));
        }
    }
    Ok(())
}

pub(crate) fn cast<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types_f16(func, op, true)?;
    let (r, out_dims) = result(func, op)?;
    let out = strided(func, st, r, None)?;
    let x = strided(func, st, op.operands[0], None)?;
    let (from, to) = (x.1, out.1);
    let call = typed_kernel(g, name, &out_dims, out, vec![x], &move |k, v| {
        cast_value(k, v[0], from, to)
    })?;
    Ok(vec![call])
}

fn cast_value<'c>(
    k: &K<'_, 'c>,
    v: BasicValueEnum<'c>,
    from: DType,
    to: DType,
) -> R<BasicValueEnum<'c>> {
    let b = k.b;
    let ty = elem(k, to);
    // f16 goes through f32: widening is exact, and an integer reaches f16 by way of f32 as
    // in the interpreter.
    if from == to {
        return Ok(v);
    }
    if from == DType::F16 {
        let x = llvm(b.build_float_ext(v.into_float_value(), k.f32t, "h"))?;
        return cast_value(k, x.into(), DType::F32, to);
    }
    if to == DType::F16 {
        let x = cast_value(k, v, from, DType::F32)?.into_float_value();
        return Ok(llvm(b.build_float_trunc(x, ty.into_float_type(), "h"))?.into());
    }
    Ok(match (from, to) {
        (DType::F32, DType::F32) => v,
        (DType::F32, DType::Bool) => {
            // NaN is not zero: unordered-or-not-equal.
            let c = llvm(b.build_float_compare(
                FloatPredicate::UNE,
                v.into_float_value(),
                k.f(0.0),
                "nz",
            ))?;
            to_byte(k, c)?.into()
        }
        (DType::F32, _) => {
            let sat = if to == DType::U8 {
                "llvm.fptoui.sat"
            } else {
                "llvm.fptosi.sat"
            };
            let f = k.intrinsic(sat, &[ty, k.f32t.into()])?;
            llvm(b.build_call(f, &[v.into()], "sat"))?
                .try_as_basic_value()
                .basic()
                .ok_or_else(|| CodegenError::Llvm(format!("{sat} returned no value")))?
        }
        (_, DType::F32) => {
            let i = v.into_int_value();
            if unsigned(from) {
                llvm(b.build_unsigned_int_to_float(i, k.f32t, "f"))?.into()
            } else {
                llvm(b.build_signed_int_to_float(i, k.f32t, "f"))?.into()
            }
        }
        (_, DType::Bool) => to_byte(k, ne_zero(k, v.into_int_value())?)?.into(),
        _ => {
            let i = v.into_int_value();
            let it = ty.into_int_type();
            let (fw, tw) = (i.get_type().get_bit_width(), it.get_bit_width());
            if fw > tw {
                llvm(b.build_int_truncate(i, it, "t"))?.into()
            } else if fw == tw {
                i.into()
            } else if unsigned(from) {
                llvm(b.build_int_z_extend(i, it, "z"))?.into()
            } else {
                llvm(b.build_int_s_extend(i, it, "s"))?.into()
            }
        }
    })
}

pub(crate) fn compare<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    c: CompareOp,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types(func, op)?;
    let (r, out_dims) = result(func, op)?;
    let out = strided(func, st, r, None)?;
    let a = strided(func, st, op.operands[0], Some(&out_dims))?;
    let bb = strided(func, st, op.operands[1], Some(&out_dims))?;
    let d = a.1;
    let call = typed_kernel(g, name, &out_dims, out, vec![a, bb], &move |k, v| {
        let cond = if d == DType::F32 {
            // Ordered predicates: any comparison with a NaN is false.
            let p = match c {
                CompareOp::Equal => FloatPredicate::OEQ,
                CompareOp::Less => FloatPredicate::OLT,
                CompareOp::LessOrEqual => FloatPredicate::OLE,
                CompareOp::Greater => FloatPredicate::OGT,
                CompareOp::GreaterOrEqual => FloatPredicate::OGE,
            };
            llvm(k.b.build_float_compare(p, v[0].into_float_value(), v[1].into_float_value(), "c"))?
        } else {
            let u = unsigned(d);
            let p = match c {
                CompareOp::Equal => IntPredicate::EQ,
                CompareOp::Less if u => IntPredicate::ULT,
                CompareOp::Less => IntPredicate::SLT,
                CompareOp::LessOrEqual if u => IntPredicate::ULE,
                CompareOp::LessOrEqual => IntPredicate::SLE,
                CompareOp::Greater if u => IntPredicate::UGT,
                CompareOp::Greater => IntPredicate::SGT,
                CompareOp::GreaterOrEqual if u => IntPredicate::UGE,
                CompareOp::GreaterOrEqual => IntPredicate::SGE,
            };
            llvm(k.b.build_int_compare(p, v[0].into_int_value(), v[1].into_int_value(), "c"))?
        };
        Ok(to_byte(k, cond)?.into())
    })?;
    Ok(vec![call])
}

pub(crate) fn where_<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types(func, op)?;
    let (r, out_dims) = result(func, op)?;
    let out = strided(func, st, r, None)?;
    let ins = op
        .operands
        .iter()
        .map(|&v| strided(func, st, v, Some(&out_dims)))
        .collect::<R<Vec<_>>>()?;
    let call = typed_kernel(g, name, &out_dims, out, ins, &|k, v| {
        let c = ne_zero(k, v[0].into_int_value())?;
        llvm(k.b.build_select(c, v[1], v[2], "w"))
    })?;
    Ok(vec![call])
}

pub(crate) fn logical<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    l: Option<LogicalOp>,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types(func, op)?;
    let (r, out_dims) = result(func, op)?;
    let out = strided(func, st, r, None)?;
    let ins = op
        .operands
        .iter()
        .map(|&v| strided(func, st, v, Some(&out_dims)))
        .collect::<R<Vec<_>>>()?;
    // The loads normalised every byte to 0 or 1, so bitwise logic is boolean logic.
    let call = typed_kernel(g, name, &out_dims, out, ins, &move |k, v| {
        let a = v[0].into_int_value();
        let one = k.ctx.i8_type().const_int(1, false);
        Ok(match l {
            None => llvm(k.b.build_xor(a, one, "not"))?,
            Some(LogicalOp::And) => llvm(k.b.build_and(a, v[1].into_int_value(), "and"))?,
            Some(LogicalOp::Or) => llvm(k.b.build_or(a, v[1].into_int_value(), "or"))?,
            Some(LogicalOp::Xor) => llvm(k.b.build_xor(a, v[1].into_int_value(), "xor"))?,
        }
        .into())
    })?;
    Ok(vec![call])
}

/// `select(a op b, a, b)` for the integer max and min.
fn int_pick<'c>(
    k: &K<'_, 'c>,
    p: IntPredicate,
    a: IntValue<'c>,
    b: IntValue<'c>,
) -> R<IntValue<'c>> {
    let c = llvm(k.b.build_int_compare(p, a, b, "c"))?;
    Ok(llvm(k.b.build_select(c, a, b, "m"))?.into_int_value())
}

/// Integer `binary` (no fused activation): wrapping add/sub/mul, max, min, and division
/// truncating toward zero with `x / 0 = 0` and `MIN / -1 = MIN` (wrapping), never a trap.
pub(crate) fn int_binary<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    bop: BinaryOp,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types(func, op)?;
    let (r, out_dims) = result(func, op)?;
    let out = strided(func, st, r, None)?;
    let d = out.1;
    if d == DType::F32 {
        return Err(unsupported(func, op, &format!("`{}` on {d}", bop.name())));
    }
    let a = strided(func, st, op.operands[0], Some(&out_dims))?;
    let bb = strided(func, st, op.operands[1], Some(&out_dims))?;
    let u = unsigned(d);
    let call = typed_kernel(g, name, &out_dims, out, vec![a, bb], &move |k, v| {
        let (x, y) = (v[0].into_int_value(), v[1].into_int_value());
        let b = k.b;
        let t = x.get_type();
        Ok(match bop {
            BinaryOp::Add => llvm(b.build_int_add(x, y, "a"))?,
            BinaryOp::Sub => llvm(b.build_int_sub(x, y, "s"))?,
            BinaryOp::Mul => llvm(b.build_int_mul(x, y, "m"))?,
            BinaryOp::Max => int_pick(
                k,
                if u {
                    IntPredicate::UGT
                } else {
                    IntPredicate::SGT
                },
                x,
                y,
            )?,
            BinaryOp::Min => int_pick(
                k,
                if u {
                    IntPredicate::ULT
                } else {
                    IntPredicate::SLT
                },
                x,
                y,
            )?,
            BinaryOp::Div => {
                let zero = t.const_zero();
                let one = t.const_int(1, false);
                let is0 = llvm(b.build_int_compare(IntPredicate::EQ, y, zero, "z"))?;
                if u {
                    let safe = llvm(b.build_select(is0, one, y, "d"))?.into_int_value();
                    let q = llvm(b.build_int_unsigned_div(x, safe, "q"))?;
                    llvm(b.build_select(is0, zero, q, "r"))?.into_int_value()
                } else {
                    let minus1 = t.const_all_ones();
                    let ism1 = llvm(b.build_int_compare(IntPredicate::EQ, y, minus1, "m1"))?;
                    let odd = llvm(b.build_or(is0, ism1, "odd"))?;
                    let safe = llvm(b.build_select(odd, one, y, "d"))?.into_int_value();
                    let q = llvm(b.build_int_signed_div(x, safe, "q"))?;
                    let neg = llvm(b.build_int_sub(zero, x, "n"))?;
                    let q = llvm(b.build_select(ism1, neg, q, "q1"))?.into_int_value();
                    llvm(b.build_select(is0, zero, q, "r"))?.into_int_value()
                }
            }
            BinaryOp::Pow => int_pow(k, x, y, u)?,
        }
        .into())
    })?;
    Ok(vec![call])
}

/// `x ^ y` on integers as the interpreter computes it: in i64, square and multiply over all 64
/// bits of the exponent (branch-free, so the loop vectorises), wrapping; a negative exponent
/// gives the truncated `1 / x^|y|` (1 for x = 1, ±1 for x = -1, else 0).
fn int_pow<'c>(k: &K<'_, 'c>, x: IntValue<'c>, y: IntValue<'c>, u: bool) -> R<IntValue<'c>> {
    let b = k.b;
    let t = x.get_type();
    let wide = |v: IntValue<'c>| -> R<IntValue<'c>> {
        if t.get_bit_width() == 64 {
            Ok(v)
        } else if u {
            llvm(b.build_int_z_extend(v, k.i64t, "z"))
        } else {
            llvm(b.build_int_s_extend(v, k.i64t, "s"))
        }
    };
    let (x, y) = (wide(x)?, wide(y)?);
    let one = k.c(1);
    let (mut acc, mut base, mut e) = (one, x, y);
    for _ in 0..64 {
        let bit = llvm(b.build_and(e, one, "bit"))?;
        let odd = llvm(b.build_int_compare(IntPredicate::NE, bit, k.c(0), "odd"))?;
        let m = llvm(b.build_int_mul(acc, base, "m"))?;
        acc = llvm(b.build_select(odd, m, acc, "acc"))?.into_int_value();
        base = llvm(b.build_int_mul(base, base, "sq"))?;
        e = llvm(b.build_right_shift(e, one, false, "e"))?;
    }
    let neg_exp = llvm(b.build_int_compare(IntPredicate::SLT, y, k.c(0), "ne"))?;
    let is1 = llvm(b.build_int_compare(IntPredicate::EQ, x, one, "x1"))?;
    let is_m1 = llvm(b.build_int_compare(IntPredicate::EQ, x, k.c(-1), "xm1"))?;
    let y_odd = llvm(b.build_int_compare(
        IntPredicate::NE,
        llvm(b.build_and(y, one, "yb"))?,
        k.c(0),
        "yo",
    ))?;
    let m1_pow = llvm(b.build_select(y_odd, k.c(-1), one, "m1p"))?.into_int_value();
    let small = llvm(b.build_select(is_m1, m1_pow, k.c(0), "sm"))?.into_int_value();
    let small = llvm(b.build_select(is1, one, small, "sm1"))?.into_int_value();
    let r = llvm(b.build_select(neg_exp, small, acc, "p"))?.into_int_value();
    if t.get_bit_width() == 64 {
        Ok(r)
    } else {
        llvm(b.build_int_truncate(r, t, "t"))
    }
}

/// Integer `clip` with the interpreter's rule: an element below `min` (compared exactly, in
/// i64 against `ceil(min)`) becomes `min` truncated to an integer, likewise above `max`.
pub(crate) fn int_clip<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    min: f64,
    max: f64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types(func, op)?;
    let (r, out_dims) = result(func, op)?;
    let out = strided(func, st, r, None)?;
    let d = out.1;
    if d == DType::F32 {
        return Err(unsupported(func, op, "`clip` on f32"));
    }
    let x = strided(func, st, op.operands[0], None)?;
    let uns = unsigned(d);
    let call = typed_kernel(g, name, &out_dims, out, vec![x], &move |k, v| {
        let b = k.b;
        let x = v[0].into_int_value();
        let t = x.get_type();
        let w = if t.get_bit_width() == 64 {
            x
        } else if uns {
            llvm(b.build_int_z_extend(x, k.i64t, "z"))?
        } else {
            llvm(b.build_int_s_extend(x, k.i64t, "s"))?
        };
        let bound = |v: f64| -> R<_> {
            let c = k.c(v as i64);
            if t.get_bit_width() == 64 {
                Ok(c)
            } else {
                llvm(b.build_int_truncate(c, t, "bt"))
            }
        };
        let mut y = x;
        // `v < min` for an integer v is `v < ceil(min)`; an infinite bound never binds.
        if min.is_finite() {
            let below =
                llvm(b.build_int_compare(IntPredicate::SLT, w, k.c(min.ceil() as i64), "lo"))?;
            y = llvm(b.build_select(below, bound(min)?, y, "y"))?.into_int_value();
        }
        // (A NaN bound compares false: it never binds, as in the interpreter.)
        if max.is_finite() {
            let above =
                llvm(b.build_int_compare(IntPredicate::SGT, w, k.c(max.floor() as i64), "hi"))?;
            y = llvm(b.build_select(above, bound(max)?, y, "y"))?.into_int_value();
        }
        Ok(y.into())
    })?;
    Ok(vec![call])
}

/// `mod`: C's `fmod` (`frem`) on f32; on integers the remainder with the sign of the dividend
/// (`fmod`) or of the divisor, by zero 0 and by -1 0 (`srem` traps on `MIN % -1`).
pub(crate) fn modulo<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    fmod: bool,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types(func, op)?;
    let (r, out_dims) = result(func, op)?;
    let out = strided(func, st, r, None)?;
    let d = out.1;
    let a = strided(func, st, op.operands[0], Some(&out_dims))?;
    let bb = strided(func, st, op.operands[1], Some(&out_dims))?;
    let u = unsigned(d);
    let call = typed_kernel(g, name, &out_dims, out, vec![a, bb], &move |k, v| {
        let b = k.b;
        if d == DType::F32 {
            let (x, y) = (v[0].into_float_value(), v[1].into_float_value());
            return Ok(llvm(b.build_float_rem(x, y, "fmod"))?.into());
        }
        let (x, y) = (v[0].into_int_value(), v[1].into_int_value());
        let t = x.get_type();
        let zero = t.const_zero();
        let one = t.const_int(1, false);
        let is0 = llvm(b.build_int_compare(IntPredicate::EQ, y, zero, "z"))?;
        if u {
            let safe = llvm(b.build_select(is0, one, y, "d"))?.into_int_value();
            let r = llvm(b.build_int_unsigned_rem(x, safe, "r"))?;
            return llvm(b.build_select(is0, zero, r, "m"));
        }
        let ism1 = llvm(b.build_int_compare(IntPredicate::EQ, y, t.const_all_ones(), "m1"))?;
        let odd = llvm(b.build_or(is0, ism1, "odd"))?;
        let safe = llvm(b.build_select(odd, one, y, "d"))?.into_int_value();
        // x % 1 is 0, the right remainder for both 0 (by convention) and -1.
        let mut r = llvm(b.build_int_signed_rem(x, safe, "r"))?;
        if !fmod {
            let nz = llvm(b.build_int_compare(IntPredicate::NE, r, zero, "nz"))?;
            let sx = llvm(b.build_xor(r, y, "sx"))?;
            let differ = llvm(b.build_int_compare(IntPredicate::SLT, sx, zero, "df"))?;
            let fix = llvm(b.build_and(nz, differ, "fix"))?;
            let adj = llvm(b.build_int_add(r, y, "adj"))?;
            r = llvm(b.build_select(fix, adj, r, "r2"))?.into_int_value();
        }
        Ok(r.into())
    })?;
    Ok(vec![call])
}

/// Integer `relu`, `relu6`, `abs` and `neg` (wrapping).
pub(crate) fn int_unary<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    u: UnaryOp,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types(func, op)?;
    let (r, out_dims) = result(func, op)?;
    let out = strided(func, st, r, None)?;
    let d = out.1;
    if d == DType::F32
        || !matches!(
            u,
            UnaryOp::Relu | UnaryOp::Relu6 | UnaryOp::Abs | UnaryOp::Neg
        )
    {
        return Err(unsupported(func, op, &format!("`{}` on {d}", u.name())));
    }
    let x = strided(func, st, op.operands[0], None)?;
    let uns = unsigned(d);
    let call = typed_kernel(g, name, &out_dims, out, vec![x], &move |k, v| {
        let x = v[0].into_int_value();
        let t = x.get_type();
        let b = k.b;
        let zero = t.const_zero();
        let (gt, lt) = if uns {
            (IntPredicate::UGT, IntPredicate::ULT)
        } else {
            (IntPredicate::SGT, IntPredicate::SLT)
        };
        Ok(match u {
            UnaryOp::Relu => int_pick(k, gt, x, zero)?,
            UnaryOp::Relu6 => int_pick(k, lt, int_pick(k, gt, x, zero)?, t.const_int(6, false))?,
            UnaryOp::Neg => llvm(b.build_int_sub(zero, x, "n"))?,
            _ if uns => x,
            _ => {
                let neg = llvm(b.build_int_sub(zero, x, "n"))?;
                int_pick(k, gt, x, neg)?
            }
        }
        .into())
    })?;
    Ok(vec![call])
}

/// `argmax`/`argmin` along `axis`: one pass over each line keeping the best index, NaN the
/// extreme (as the interpreter and NumPy), the first or (`last`) the last of equal extremes.
pub(crate) fn arg_reduce<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let tir_ir::Op::ArgReduce {
        max,
        axis,
        select_last_index: last,
        ..
    } = op.op
    else {
        return Err(unsupported(func, op, "not an argmax or argmin"));
    };
    check_types(func, op)?;
    let (r, _) = result(func, op)?;
    let x = op.operands[0];
    let xd = dims(func, x)?;
    let ax =
        tir_ir::shape::norm_axis(axis, xd.len()).map_err(|e| unsupported(func, op, &e.message))?;
    let outer: i64 = xd[..ax].iter().product();
    let n = xd[ax];
    let inner: i64 = xd[ax + 1..].iter().product();
    let (xs, d) = strided(func, st, x, None)?;
    let (os, _) = strided(func, st, r, None)?;
    let args = [
        Arg {
            loc: xs.loc,
            bytes: xs.bytes,
        },
        Arg {
            loc: os.loc,
            bytes: os.bytes,
        },
    ];
    let f = g.kernel(name, &args, &[false, true]);
    let k = g.k(f);
    let xp = llvm(k.b.build_pointer_cast(
        g.param(f, 0)?,
        elem(&k, d).ptr_type(AddressSpace::default()),
        "xp",
    ))?;
    let op_ = llvm(k.b.build_pointer_cast(
        g.param(f, 1)?,
        k.i64t.ptr_type(AddressSpace::default()),
        "op",
    ))?;
    let uns = unsigned(d);
    k.loop_(0, outer, &mut |o| {
        k.loop_(0, inner, &mut |i| {
            // Element (o, j, i) is at o*n*inner + j*inner + i.
            let base = k.add(k.mul(o, n * inner)?, i)?;
            let first = llvm(k.b.build_load(k.gep(xp, base)?, "x0"))?;
            let done = k.loop_carry(1, n, 1, vec![first, k.c(0).into()], &mut |j, cur| {
                let at = k.add(base, k.mul(j, inner)?)?;
                let x = llvm(k.b.build_load(k.gep(xp, at)?, "x"))?;
                let better = if d == DType::F32 {
                    let (x, b) = (x.into_float_value(), cur[0].into_float_value());
                    let p = |pr, l, r, nm| llvm(k.b.build_float_compare(pr, l, r, nm));
                    // b is NaN: only a later NaN with `last` replaces it.
                    let b_nan = p(FloatPredicate::UNO, b, b, "bn")?;
                    let x_nan = p(FloatPredicate::UNO, x, x, "xn")?;
                    let strict = p(
                        if max {
                            FloatPredicate::OGT
                        } else {
                            FloatPredicate::OLT
                        },
                        x,
                        b,
                        "s",
                    )?;
                    let tie = if last {
                        p(FloatPredicate::OEQ, x, b, "e")?
                    } else {
                        k.ctx.bool_type().const_zero()
                    };
                    let ord =
                        llvm(k.b.build_or(x_nan, llvm(k.b.build_or(strict, tie, "o"))?, "o"))?;
                    let on_nan = if last {
                        x_nan
                    } else {
                        k.ctx.bool_type().const_zero()
                    };
                    llvm(k.b.build_select(b_nan, on_nan, ord, "bt"))?.into_int_value()
                } else {
                    let (x, b) = (x.into_int_value(), cur[0].into_int_value());
                    let pr = match (max, uns) {
                        (true, true) => IntPredicate::UGT,
                        (true, false) => IntPredicate::SGT,
                        (false, true) => IntPredicate::ULT,
                        (false, false) => IntPredicate::SLT,
                    };
                    let strict = llvm(k.b.build_int_compare(pr, x, b, "s"))?;
                    if last {
                        let e = llvm(k.b.build_int_compare(IntPredicate::EQ, x, b, "e"))?;
                        llvm(k.b.build_or(strict, e, "o"))?
                    } else {
                        strict
                    }
                };
                let nb = llvm(k.b.build_select(better, x, cur[0], "nb"))?;
                let ni = llvm(k.b.build_select(better, j.into(), cur[1], "ni"))?;
                Ok(vec![nb, ni])
            })?;
            let oi = k.add(k.mul(o, inner)?, i)?;
            llvm(k.b.build_store(k.gep(op_, oi)?, done[1]))?;
            Ok(())
        })
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, vec![xs.loc, os.loc])])
}

/// A kernel copying `bytes` bytes from `from` to `to`.
pub(crate) fn copy_bytes<'a, 'c>(
    g: &Gen<'a, 'c>,
    name: &str,
    from: Loc,
    to: Loc,
    bytes: u64,
) -> R<Call<'c>> {
    let s = |loc| {
        (
            Strided {
                loc,
                bytes,
                strides: vec![1],
                base: 0,
            },
            DType::U8,
        )
    };
    typed_kernel(g, name, &[bytes as i64], s(to), vec![s(from)], &|_, v| {
        Ok(v[0])
    })
}

/// A view of a non-f32 tensor that bufferization did not alias: a byte copy.
pub(crate) fn view<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    check_types_f16(func, op, true)?;
    let (r, _) = result(func, op)?;
    let x = op.operands[0];
    let (from, to) = (st.of(func, x)?, st.of(func, r)?);
    if from == to {
        return Ok(vec![]);
    }
    let bytes = func.ty(r).and_then(|t| t.byte_size()).unwrap_or(0);
    Ok(vec![copy_bytes(g, name, from, to, bytes)?])
}
