//! Element-wise ops: the unary functions, `clip`, `hard_sigmoid`, the binary ops with NumPy
//! broadcasting and their fused activation, `prelu` and `batch_norm`. Each is one strided
//! loop nest ([`strided_kernel`]) with adjacent dimensions merged and the contiguous one
//! innermost, so LLVM vectorises it.

use super::common::{
    activation, args_of, bytes_of, dims, full, over, result, sigmoid, strided_kernel, unsupported,
    Call, Strided,
};
use crate::nest::{llvm, K, R};
use crate::storage::Storage;
use crate::{CodegenError, Gen};
use inkwell::values::FloatValue;
use inkwell::IntPredicate;
use tir_ir::{Activation, BinaryOp, Function, OpData, UnaryOp};

pub(crate) fn unary<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    u: UnaryOp,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (r, out_dims) = result(func, op)?;
    let call = strided_kernel(
        g,
        name,
        &out_dims,
        full(func, st, r)?,
        vec![full(func, st, op.operands[0])?],
        &move |k, v| match u {
            UnaryOp::Relu => activation(k, Some(Activation::Relu), v[0]),
            UnaryOp::Relu6 => activation(k, Some(Activation::Relu6), v[0]),
            UnaryOp::Sigmoid => sigmoid(k, v[0]),
            UnaryOp::Tanh => k.tanh(v[0]),
            UnaryOp::HardSwish => activation(k, Some(Activation::HardSwish), v[0]),
            UnaryOp::Gelu => gelu(k, v[0]),
            UnaryOp::Exp => k.exp(v[0]),
            other => super::math::unary(k, other, v[0]),
        },
    )?;
    Ok(vec![call])
}

/// `0.5 x erfc(-x / √2)` in f64, with the reference's erfc (Numerical Recipes `erfcc`).
pub(crate) fn gelu<'a, 'c>(k: &K<'a, 'c>, x: FloatValue<'c>) -> R<FloatValue<'c>> {
    let d = k.ctx.f64_type();
    let c = |v: f64| d.const_float(v);
    let xd = llvm(k.b.build_float_ext(x, d, "xd"))?;
    let arg = k.fmul(xd, c(-std::f64::consts::FRAC_1_SQRT_2))?;
    let fabs = k.intrinsic("llvm.fabs", &[d.into()])?;
    let z = llvm(k.b.build_call(fabs, &[arg.into()], "z"))?
        .try_as_basic_value()
        .basic()
        .ok_or_else(|| CodegenError::Llvm("fabs".into()))?
        .into_float_value();
    let t = k.fdiv(c(1.0), k.fadd(c(1.0), k.fmul(c(0.5), z)?)?)?;
    let coeffs = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ];
    // Horner from the innermost term, as the reference nests it.
    let mut acc = c(coeffs[9]);
    for &co in coeffs[1..9].iter().rev() {
        acc = k.fadd(c(co), k.fmul(t, acc)?)?;
    }
    let acc = k.fmul(t, acc)?;
    let zz = k.fmul(llvm(k.b.build_float_neg(z, "nz"))?, z)?;
    let poly = k.fadd(k.fadd(zz, c(coeffs[0]))?, acc)?;
    let ans = k.fmul(t, k.exp(poly)?)?;
    let neg = k.fsub(c(2.0), ans)?;
    let ge = llvm(k.b.build_float_compare(inkwell::FloatPredicate::OGE, arg, c(0.0), "ge"))?;
    let erfc = k.fsel(ge, ans, neg)?;
    let r = k.fmul(k.fmul(c(0.5), xd)?, erfc)?;
    llvm(k.b.build_float_trunc(r, k.f32t, "g"))
}

pub(crate) fn clip<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    min: f64,
    max: f64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (r, out_dims) = result(func, op)?;
    let (lo, hi) = (min as f32 as f64, max as f32 as f64);
    let call = strided_kernel(
        g,
        name,
        &out_dims,
        full(func, st, r)?,
        vec![full(func, st, op.operands[0])?],
        &move |k, v| k.clip(v[0], lo, hi),
    )?;
    Ok(vec![call])
}

/// `max(0, min(1, alpha * x + beta))`.
pub(crate) fn hard_sigmoid<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    alpha: f64,
    beta: f64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (r, out_dims) = result(func, op)?;
    let (a, b) = (alpha as f32 as f64, beta as f32 as f64);
    let call = strided_kernel(
        g,
        name,
        &out_dims,
        full(func, st, r)?,
        vec![full(func, st, op.operands[0])?],
        &move |k, v| {
            let y = k.fadd(k.fmul(k.f(a), v[0])?, k.f(b))?;
            k.clip(y, 0.0, 1.0)
        },
    )?;
    Ok(vec![call])
}

pub(crate) fn binary<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    bop: BinaryOp,
    act: Option<Activation>,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (r, out_dims) = result(func, op)?;
    let call = strided_kernel(
        g,
        name,
        &out_dims,
        full(func, st, r)?,
        vec![
            over(func, st, op.operands[0], &out_dims)?,
            over(func, st, op.operands[1], &out_dims)?,
        ],
        &move |k, v| {
            let y = match bop {
                BinaryOp::Add => k.fadd(v[0], v[1])?,
                BinaryOp::Sub => k.fsub(v[0], v[1])?,
                BinaryOp::Mul => k.fmul(v[0], v[1])?,
                BinaryOp::Div => k.fdiv(v[0], v[1])?,
                other => super::math::binary(k, other, v[0], v[1])?,
            };
            activation(k, act, y)
        },
    )?;
    Ok(vec![call])
}

/// `x < 0 ? slope * x : x`, the slope broadcast to `x`.
pub(crate) fn prelu<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (r, out_dims) = result(func, op)?;
    let call = strided_kernel(
        g,
        name,
        &out_dims,
        full(func, st, r)?,
        vec![
            full(func, st, op.operands[0])?,
            over(func, st, op.operands[1], &out_dims)?,
        ],
        &|k, v| {
            let m = k.fmul(v[1], v[0])?;
            k.select_lt(v[0], k.f(0.0), m, v[0])
        },
    )?;
    Ok(vec![call])
}

/// Inference batch normalisation: scale, bias, mean and variance read per channel (axis 1).
pub(crate) fn batch_norm<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    epsilon: f64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (r, out_dims) = result(func, op)?;
    if out_dims.len() < 2 {
        return Err(unsupported(func, op, "rank below 2"));
    }
    let mut chan = vec![0i64; out_dims.len()];
    chan[1] = 1;
    let mut ins = vec![full(func, st, op.operands[0])?];
    for &p in &op.operands[1..] {
        let d = dims(func, p)?;
        ins.push(Strided {
            loc: st.of(func, p)?,
            bytes: bytes_of(&d),
            strides: chan.clone(),
            base: 0,
        });
    }
    let call = strided_kernel(g, name, &out_dims, full(func, st, r)?, ins, &move |k, v| {
        // In f64, as the reference.
        let d = k.ctx.f64_type();
        let mut e = Vec::with_capacity(5);
        for &x in &v[..5] {
            e.push(llvm(k.b.build_float_ext(x, d, "e"))?);
        }
        let (x, s, b, mu, var) = (e[0], e[1], e[2], e[3], e[4]);
        let inv = k.fdiv(
            d.const_float(1.0),
            k.sqrt(k.fadd(var, d.const_float(epsilon))?)?,
        )?;
        let y = k.fadd(k.fmul(k.fmul(s, k.fsub(x, mu)?)?, inv)?, b)?;
        llvm(k.b.build_float_trunc(y, k.f32t, "t"))
    })?;
    Ok(vec![call])
}

/// ONNX Trilu: `x` copied with the elements outside the kept triangle zeroed. One loop over
/// the matrices, the rows and the columns; the column's distance from the diagonal decides.
pub(crate) fn trilu<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    upper: bool,
    k: i64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (r, out_dims) = result(func, op)?;
    let x = op.operands[0];
    let rank = out_dims.len();
    if rank < 2 {
        return Err(unsupported(func, op, "rank below 2"));
    }
    let (n, m) = (out_dims[rank - 2], out_dims[rank - 1]);
    let mats: i64 = out_dims[..rank - 2].iter().product();
    if mats * n * m == 0 {
        return Ok(vec![]);
    }
    let args = args_of(func, st, &[x, r])?;
    let f = g.kernel(name, &args, &[false, true]);
    let kb = g.k(f);
    let (px, po) = (g.param(f, 0)?, g.param(f, 1)?);
    let pred = if upper {
        IntPredicate::SGE
    } else {
        IntPredicate::SLE
    };
    kb.loop_(0, mats, &mut |b| {
        kb.loop_(0, n, &mut |i| {
            let row = kb.add(kb.mul(b, n * m)?, kb.mul(i, m)?)?;
            kb.loop_(0, m, &mut |j| {
                let at = kb.add(row, j)?;
                let v = kb.ld(px, at)?;
                let d = llvm(kb.b.build_int_sub(j, i, "d"))?;
                let keep = llvm(kb.b.build_int_compare(pred, d, kb.c(k), "keep"))?;
                let y = kb.fsel(keep, v, kb.f(0.0))?;
                kb.st(po, at, y)
            })
        })
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}
