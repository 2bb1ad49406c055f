//! One kernel per op instance, every extent a constant.
//!
//! - Element-wise ops (unary, binary with NumPy broadcasting, clip, hard_sigmoid, prelu,
//!   batch_norm) and every copy (concat, split, slice, transpose, pad, views that were not
//!   aliased) are one strided loop nest ([`elementwise`]) with adjacent dimensions merged and
//!   the contiguous one innermost, so LLVM vectorises it.
//! - Convolution: 1×1 with unit strides and no padding is a GEMM per image and group;
//!   depthwise (one input channel per group) is [`crate::depthwise`]; every other convolution
//!   is an implicit-im2col GEMM ([`crate::im2col`]).
//! - [`gemm`]: an `MR × (NV·W)` register-blocked micro-kernel with vector accumulators
//!   (`W` f32 lanes of the target), the contiguous output dimension innermost, bias and
//!   activation in the epilogue.

mod gap;
mod gather;
mod gemv;

use crate::nest::{llvm, K, R};
use crate::storage::{Loc, Storage};
use crate::{Arg, CodegenError, Gen};
use inkwell::values::{BasicValueEnum, FloatValue, FunctionValue, IntValue, PointerValue};
use tir_ir::op::PadMode;
use tir_ir::shape::norm_axis;
use tir_ir::{Activation, BinaryOp, Function, Op, OpId, UnaryOp, Value};

pub(crate) type Call<'ctx> = (FunctionValue<'ctx>, Vec<Loc>);

/// An operand of a strided loop nest: where it is, how many bytes it spans, and its element
/// strides over the iteration shape plus a base element offset.
#[derive(Clone, Debug)]
struct Strided {
    loc: Loc,
    bytes: u64,
    strides: Vec<i64>,
    base: i64,
}

type ScalarFn<'f> = &'f dyn for<'a, 'c> Fn(&K<'a, 'c>, &[FloatValue<'c>]) -> R<FloatValue<'c>>;

fn dims(func: &Function, v: Value) -> R<Vec<i64>> {
    func.ty(v)
        .map(|t| t.shape.iter().map(|&d| d as i64).collect())
        .ok_or_else(|| CodegenError::NoStorage(func.value_name(v)))
}

fn contiguous(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![0; shape.len()];
    let mut acc = 1;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc *= shape[d];
    }
    s
}

/// NumPy broadcasting: strides of `shape` read over `target` (0 on broadcast axes).
fn broadcast(shape: &[i64], target: &[i64]) -> Vec<i64> {
    let own = contiguous(shape);
    let off = target.len() - shape.len().min(target.len());
    (0..target.len())
        .map(|d| {
            if d < off {
                0
            } else {
                let k = d - off;
                if shape[k] == 1 && target[d] != 1 {
                    0
                } else {
                    own[k]
                }
            }
        })
        .collect()
}

/// The kernel arguments for `vals`: each one's storage and byte size.
pub(crate) fn args_of(func: &Function, st: &Storage, vals: &[Value]) -> R<Vec<Arg>> {
    vals.iter()
        .map(|&v| {
            Ok(Arg {
                loc: st.of(func, v)?,
                bytes: bytes_of(&dims(func, v)?),
            })
        })
        .collect()
}

fn bytes_of(shape: &[i64]) -> u64 {
    shape.iter().product::<i64>().max(0) as u64 * 4
}

/// Merges adjacent dimensions that every operand walks contiguously; drops unit dimensions.
fn collapse(shape: &[i64], ops: &mut [&mut Vec<i64>]) -> Vec<i64> {
    let mut out_shape: Vec<i64> = Vec::new();
    let mut out: Vec<Vec<i64>> = vec![Vec::new(); ops.len()];
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let merge = !out_shape.is_empty()
            && ops.iter().enumerate().all(|(i, s)| {
                let last = *out[i].last().unwrap_or(&0);
                last == s[d] * shape[d]
            });
        if merge {
            let n = out_shape.len() - 1;
            out_shape[n] *= shape[d];
            for (i, s) in ops.iter().enumerate() {
                let k = out[i].len() - 1;
                out[i][k] = s[d];
            }
        } else {
            out_shape.push(shape[d]);
            for (i, s) in ops.iter().enumerate() {
                out[i].push(s[d]);
            }
        }
    }
    for (i, s) in ops.iter_mut().enumerate() {
        **s = std::mem::take(&mut out[i]);
    }
    out_shape
}

/// Nested counted loops over `shape`; the body gets each stride set's element index.
fn nest<'a, 'c>(
    k: &K<'a, 'c>,
    shape: &[i64],
    sets: &[(&[i64], i64)],
    body: &mut dyn FnMut(&[IntValue<'c>]) -> R<()>,
) -> R<()> {
    fn rec<'a, 'c>(
        k: &K<'a, 'c>,
        shape: &[i64],
        sets: &[(&[i64], i64)],
        ivs: &mut Vec<IntValue<'c>>,
        body: &mut dyn FnMut(&[IntValue<'c>]) -> R<()>,
    ) -> R<()> {
        if ivs.len() == shape.len() {
            let mut idx = Vec::with_capacity(sets.len());
            for (s, base) in sets {
                idx.push(k.index(*base, ivs, s)?);
            }
            return body(&idx);
        }
        let n = shape[ivs.len()];
        k.loop_(0, n, &mut |iv| {
            ivs.push(iv);
            let r = rec(k, shape, sets, ivs, body);
            ivs.pop();
            r
        })
    }
    rec(k, shape, sets, &mut Vec::new(), body)
}

/// A kernel `out[...] = f(ins[...])` over `shape`.
fn elementwise<'a, 'c>(
    g: &Gen<'a, 'c>,
    name: &str,
    shape: &[i64],
    out: Strided,
    ins: Vec<Strided>,
    f: ScalarFn,
) -> R<Call<'c>> {
    let mut all: Vec<Strided> = ins;
    all.push(out);
    let mut strides: Vec<Vec<i64>> = all.iter().map(|s| s.strides.clone()).collect();
    let shape = {
        let mut refs: Vec<&mut Vec<i64>> = strides.iter_mut().collect();
        collapse(shape, &mut refs)
    };
    let args: Vec<Arg> = all
        .iter()
        .map(|s| Arg {
            loc: s.loc,
            bytes: s.bytes,
        })
        .collect();
    let mut writes = vec![false; all.len()];
    writes[all.len() - 1] = true;
    let func = g.kernel(name, &args, &writes);
    let k = g.k(func);
    let ptrs: Vec<PointerValue> = (0..all.len() as u32)
        .map(|i| g.param(func, i))
        .collect::<R<_>>()?;
    let sets: Vec<(&[i64], i64)> = strides
        .iter()
        .zip(&all)
        .map(|(s, a)| (s.as_slice(), a.base))
        .collect();
    let n = all.len();
    nest(&k, &shape, &sets, &mut |idx| {
        let mut vals = Vec::with_capacity(n - 1);
        for i in 0..n - 1 {
            vals.push(k.ld(ptrs[i], idx[i])?);
        }
        let v = f(&k, &vals)?;
        k.st(ptrs[n - 1], idx[n - 1], v)
    })?;
    llvm(g.builder.build_return(None))?;
    Ok((func, all.iter().map(|s| s.loc).collect()))
}

/// A kernel that fills `[loc, loc + n floats)` with `value`.
fn fill<'a, 'c>(g: &Gen<'a, 'c>, name: &str, loc: Loc, n: i64, value: f64) -> R<Call<'c>> {
    let out = Strided {
        loc,
        bytes: n as u64 * 4,
        strides: vec![1],
        base: 0,
    };
    elementwise(g, name, &[n], out, vec![], &move |k, _| Ok(k.f(value)))
}

pub fn activation<'a, 'c>(
    k: &K<'a, 'c>,
    a: Option<Activation>,
    x: FloatValue<'c>,
) -> R<FloatValue<'c>> {
    match a {
        None => Ok(x),
        Some(Activation::Relu) => k.select_lt(x, k.f(0.0), k.f(0.0), x),
        Some(Activation::Relu6) => k.clip(x, 0.0, 6.0),
        Some(Activation::ReluN1To1) => k.clip(x, -1.0, 1.0),
        Some(Activation::Tanh) => k.tanh(x),
        Some(Activation::Sigmoid) => sigmoid(k, x),
        Some(Activation::HardSwish) => {
            let t = k.clip(k.fadd(x, k.f(3.0))?, 0.0, 6.0)?;
            k.fdiv(k.fmul(x, t)?, k.f(6.0))
        }
    }
}

fn sigmoid<'a, 'c>(k: &K<'a, 'c>, x: FloatValue<'c>) -> R<FloatValue<'c>> {
    let e = k.exp(llvm(k.b.build_float_neg(x, "n"))?)?;
    k.fdiv(k.f(1.0), k.fadd(k.f(1.0), e)?)
}

/// `0.5 x erfc(-x / √2)` in f64, with the reference's erfc (Numerical Recipes `erfcc`).
fn gelu<'a, 'c>(k: &K<'a, 'c>, x: FloatValue<'c>) -> R<FloatValue<'c>> {
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

fn unsupported(func: &Function, op: &tir_ir::OpData, why: &str) -> CodegenError {
    CodegenError::Unsupported {
        op: op.op.name(),
        value: op
            .results
            .first()
            .map(|&r| func.value_name(r))
            .unwrap_or_default(),
        why: why.into(),
    }
}

/// The kernels of one op (none for allocations, weights and aliased views).
pub(crate) fn emit_op<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    id: OpId,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let op = &func.ops[id];
    let loc = |v: Value| st.of(func, v);
    let full = |v: Value| -> R<Strided> {
        let d = dims(func, v)?;
        Ok(Strided {
            loc: loc(v)?,
            bytes: bytes_of(&d),
            strides: contiguous(&d),
            base: 0,
        })
    };
    let over = |v: Value, target: &[i64]| -> R<Strided> {
        let d = dims(func, v)?;
        Ok(Strided {
            loc: loc(v)?,
            bytes: bytes_of(&d),
            strides: broadcast(&d, target),
            base: 0,
        })
    };
    let result = op.results.first().copied();
    let out_dims = match result {
        Some(r) => dims(func, r)?,
        None => vec![],
    };
    let one = |c: Call<'c>| Ok(vec![c]);
    match &op.op {
        Op::AllocSlab { .. } | Op::AllocTensor { .. } | Op::Const { .. } => Ok(vec![]),
        Op::Unary(u) => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let u = *u;
            one(elementwise(
                g,
                name,
                &out_dims,
                full(r)?,
                vec![full(op.operands[0])?],
                &move |k, v| match u {
                    UnaryOp::Relu => activation(k, Some(Activation::Relu), v[0]),
                    UnaryOp::Relu6 => activation(k, Some(Activation::Relu6), v[0]),
                    UnaryOp::Sigmoid => sigmoid(k, v[0]),
                    UnaryOp::Tanh => k.tanh(v[0]),
                    UnaryOp::HardSwish => activation(k, Some(Activation::HardSwish), v[0]),
                    UnaryOp::Gelu => gelu(k, v[0]),
                    UnaryOp::Exp => k.exp(v[0]),
                },
            )?)
        }
        Op::Clip { min, max } => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let (lo, hi) = (*min as f32 as f64, *max as f32 as f64);
            one(elementwise(
                g,
                name,
                &out_dims,
                full(r)?,
                vec![full(op.operands[0])?],
                &move |k, v| k.clip(v[0], lo, hi),
            )?)
        }
        Op::HardSigmoid { alpha, beta } => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let (a, b) = (*alpha as f32 as f64, *beta as f32 as f64);
            one(elementwise(
                g,
                name,
                &out_dims,
                full(r)?,
                vec![full(op.operands[0])?],
                &move |k, v| {
                    let y = k.fadd(k.fmul(k.f(a), v[0])?, k.f(b))?;
                    k.clip(y, 0.0, 1.0)
                },
            )?)
        }
        Op::Binary {
            op: bop,
            activation: act,
        } => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let (bop, act) = (*bop, *act);
            one(elementwise(
                g,
                name,
                &out_dims,
                full(r)?,
                vec![
                    over(op.operands[0], &out_dims)?,
                    over(op.operands[1], &out_dims)?,
                ],
                &move |k, v| {
                    let y = match bop {
                        BinaryOp::Add => k.fadd(v[0], v[1])?,
                        BinaryOp::Sub => k.fsub(v[0], v[1])?,
                        BinaryOp::Mul => k.fmul(v[0], v[1])?,
                        BinaryOp::Div => k.fdiv(v[0], v[1])?,
                    };
                    activation(k, act, y)
                },
            )?)
        }
        Op::Prelu => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            one(elementwise(
                g,
                name,
                &out_dims,
                full(r)?,
                vec![full(op.operands[0])?, over(op.operands[1], &out_dims)?],
                &|k, v| {
                    let m = k.fmul(v[1], v[0])?;
                    k.select_lt(v[0], k.f(0.0), m, v[0])
                },
            )?)
        }
        Op::BatchNorm { epsilon } => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            if out_dims.len() < 2 {
                return Err(unsupported(func, op, "rank below 2"));
            }
            let mut chan = vec![0i64; out_dims.len()];
            chan[1] = 1;
            let mut ins = vec![full(op.operands[0])?];
            for &p in &op.operands[1..] {
                let d = dims(func, p)?;
                ins.push(Strided {
                    loc: loc(p)?,
                    bytes: bytes_of(&d),
                    strides: chan.clone(),
                    base: 0,
                });
            }
            let eps = *epsilon;
            one(elementwise(
                g,
                name,
                &out_dims,
                full(r)?,
                ins,
                &move |k, v| {
                    // In f64, as the reference.
                    let d = k.ctx.f64_type();
                    let mut e = Vec::with_capacity(5);
                    for &x in &v[..5] {
                        e.push(llvm(k.b.build_float_ext(x, d, "e"))?);
                    }
                    let (x, s, b, mu, var) = (e[0], e[1], e[2], e[3], e[4]);
                    let inv = k.fdiv(
                        d.const_float(1.0),
                        k.sqrt(k.fadd(var, d.const_float(eps))?)?,
                    )?;
                    let y = k.fadd(k.fmul(k.fmul(s, k.fsub(x, mu)?)?, inv)?, b)?;
                    llvm(k.b.build_float_trunc(y, k.f32t, "t"))
                },
            )?)
        }
        Op::Conv2d(c) => conv2d(g, func, st, op, c, name),
        Op::MatMul { activation: act } => matmul(g, func, st, op, *act, name),
        Op::Gemm(gm) => gemm_op(g, func, st, op, gm, name),
        Op::MaxPool(p) | Op::AvgPool(p) => {
            pool(g, func, st, op, p, matches!(op.op, Op::MaxPool(_)), name)
        }
        Op::GlobalAvgPool => gap::global_avg_pool(g, func, st, op, name),
        Op::Softmax { axis } => softmax(g, func, st, op, *axis, name),
        Op::Concat { axis } => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let ax = norm_axis(*axis, out_dims.len()).map_err(|_| unsupported(func, op, "axis"))?;
            let out_loc = loc(r)?;
            let outer: i64 = out_dims[..ax].iter().product();
            let inner: i64 = out_dims[ax + 1..].iter().product();
            let out_chunk = out_dims[ax] * inner;
            let mut pos = 0i64;
            let mut calls = Vec::new();
            for (i, &x) in op.operands.iter().enumerate() {
                let xd = dims(func, x)?;
                let chunk = xd[ax] * inner;
                let in_place = outer == 1 && loc(x)? == out_loc.at(pos as u64 * 4);
                if !in_place && chunk > 0 && outer > 0 {
                    calls.push(elementwise(
                        g,
                        &format!("{name}_{i}"),
                        &[outer, chunk],
                        Strided {
                            loc: out_loc,
                            bytes: bytes_of(&out_dims),
                            strides: vec![out_chunk, 1],
                            base: pos,
                        },
                        vec![Strided {
                            loc: loc(x)?,
                            bytes: bytes_of(&xd),
                            strides: vec![chunk, 1],
                            base: 0,
                        }],
                        &|_, v| Ok(v[0]),
                    )?);
                }
                pos += chunk;
            }
            Ok(calls)
        }
        Op::Split { axis, .. } => {
            let x = op.operands[0];
            let xd = dims(func, x)?;
            let ax = norm_axis(*axis, xd.len()).map_err(|_| unsupported(func, op, "axis"))?;
            let outer: i64 = xd[..ax].iter().product();
            let inner: i64 = xd[ax + 1..].iter().product();
            let in_chunk = xd[ax] * inner;
            let mut pos = 0;
            let mut calls = Vec::new();
            for (i, &y) in op.results.iter().enumerate() {
                let yd = dims(func, y)?;
                let chunk = yd[ax] * inner;
                let same = outer == 1 && loc(y)? == loc(x)?.at(pos as u64 * 4);
                if !same && chunk > 0 && outer > 0 {
                    calls.push(elementwise(
                        g,
                        &format!("{name}_{i}"),
                        &[outer, chunk],
                        Strided {
                            loc: loc(y)?,
                            bytes: bytes_of(&yd),
                            strides: vec![chunk, 1],
                            base: 0,
                        },
                        vec![Strided {
                            loc: loc(x)?,
                            bytes: bytes_of(&xd),
                            strides: vec![in_chunk, 1],
                            base: pos,
                        }],
                        &|_, v| Ok(v[0]),
                    )?);
                }
                pos += chunk;
            }
            Ok(calls)
        }
        Op::Slice(s) => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let x = op.operands[0];
            let xd = dims(func, x)?;
            let xs = contiguous(&xd);
            let mut strides = xs.clone();
            let mut base = 0i64;
            let axes: Vec<i64> = if s.axes.is_empty() {
                (0..s.starts.len() as i64).collect()
            } else {
                s.axes.clone()
            };
            #[allow(clippy::needless_range_loop)]
            for i in 0..s.starts.len() {
                let ax = norm_axis(axes[i], xd.len()).map_err(|_| unsupported(func, op, "axis"))?;
                let d = xd[ax];
                let step = s.steps.get(i).copied().unwrap_or(1);
                let mut start = s.starts[i];
                if start < 0 {
                    start += d;
                }
                let start = if step > 0 {
                    start.clamp(0, d)
                } else {
                    start.clamp(-1, d - 1)
                };
                if out_dims[ax] > 0 {
                    base += start * xs[ax];
                }
                strides[ax] = xs[ax] * step;
            }
            if out_dims.contains(&0) {
                return Ok(vec![]);
            }
            one(elementwise(
                g,
                name,
                &out_dims,
                full(r)?,
                vec![Strided {
                    loc: loc(x)?,
                    bytes: bytes_of(&xd),
                    strides,
                    base,
                }],
                &|_, v| Ok(v[0]),
            )?)
        }
        Op::Transpose { perm } => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let x = op.operands[0];
            let xd = dims(func, x)?;
            let xs = contiguous(&xd);
            let strides: Vec<i64> = perm.iter().map(|&p| xs[p as usize]).collect();
            one(elementwise(
                g,
                name,
                &out_dims,
                full(r)?,
                vec![Strided {
                    loc: loc(x)?,
                    bytes: bytes_of(&xd),
                    strides,
                    base: 0,
                }],
                &|_, v| Ok(v[0]),
            )?)
        }
        o if o.is_view() => {
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let x = op.operands[0];
            if loc(x)? == loc(r)? {
                return Ok(vec![]);
            }
            let n: i64 = out_dims.iter().product();
            one(copy(g, name, loc(x)?, loc(r)?, n)?)
        }
        Op::Pad { pads, mode, value } => {
            if *mode != PadMode::Constant {
                return gather::pad_gather(g, func, st, op, pads, *mode, name);
            }
            let r = result.ok_or_else(|| unsupported(func, op, "no result"))?;
            let x = op.operands[0];
            let xd = dims(func, x)?;
            let os = contiguous(&out_dims);
            let base: i64 = (0..xd.len()).map(|d| pads[d] as i64 * os[d]).sum();
            let n: i64 = out_dims.iter().product();
            let mut calls = vec![fill(g, &format!("{name}_fill"), loc(r)?, n, *value)?];
            if xd.iter().all(|&d| d > 0) {
                calls.push(elementwise(
                    g,
                    name,
                    &xd,
                    Strided {
                        loc: loc(r)?,
                        bytes: bytes_of(&out_dims),
                        strides: os,
                        base,
                    },
                    vec![full(x)?],
                    &|_, v| Ok(v[0]),
                )?);
            }
            Ok(calls)
        }
        Op::LayerNorm { axis, epsilon } => layer_norm(g, func, st, op, *axis, *epsilon, name),
        Op::ReduceMean { axes, .. } => gather::reduce_mean(g, func, st, op, axes, name),
        Op::Resize(rz) => gather::resize(g, func, st, op, rz, name),
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            Err(unsupported(func, op, "unreachable view"))
        }
    }
}

fn copy<'a, 'c>(g: &Gen<'a, 'c>, name: &str, from: Loc, to: Loc, n: i64) -> R<Call<'c>> {
    let s = |loc| Strided {
        loc,
        bytes: n as u64 * 4,
        strides: vec![1],
        base: 0,
    };
    elementwise(g, name, &[n], s(to), vec![s(from)], &|_, v| Ok(v[0]))
}

/// Copies for returned values that are not computed into their output (parameters, weights,
/// values returned twice).
pub(crate) fn emit_returns<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
) -> R<Vec<Call<'c>>> {
    let mut calls = Vec::new();
    for (j, &v) in func.returns.iter().enumerate() {
        let to = Loc {
            base: crate::storage::Base::Output(j),
            offset: 0,
        };
        let from = st.of(func, v)?;
        if from != to {
            let n: i64 = dims(func, v)?.iter().product();
            calls.push(copy(g, &format!("ret{j}"), from, to, n)?);
        }
    }
    Ok(calls)
}

/// The epilogue of a GEMM: `alpha * acc + bias[row]`, then the activation.
#[derive(Clone, Copy)]
pub struct Epilogue<'c> {
    pub alpha: f64,
    pub row_bias: Option<PointerValue<'c>>,
    pub act: Option<Activation>,
}

/// `C[i, j] = epi(Σ_k A[i*a_rs + k*a_cs] * B[k*b_rs + j])`, `C[i*c_rs + j]`.
pub struct Gemm<'c> {
    pub a: PointerValue<'c>,
    pub a_rs: i64,
    pub a_cs: i64,
    pub b: PointerValue<'c>,
    pub b_rs: i64,
    pub c: PointerValue<'c>,
    pub c_rs: i64,
    pub m: i64,
    pub n: i64,
    pub k: i64,
}

/// Rows of a wide tile: `MR × NV·W` accumulators (24 of the 32 AVX-512 registers; the rest
/// hold the `NV` B vectors and the broadcast A element). Per K step that is `NV + MR` = 10
/// loads for 24 FMAs, within the two load ports' reach while the two FMA ports stay busy;
/// measured against 12 × 2 (BLIS's Skylake-X shape), 8 × 3 and 4 × 6 on this machine's
/// 512×512×512 GEMM and MobileNet's 1×1 layers, 6 × 4 was fastest (issue 6).
const MR: i64 = 6;
/// Vectors of columns per wide tile.
const NV: u32 = 4;
/// L1 bytes a K block's B panel (`kc × NV·W` floats) may fill: two thirds of the 48 KiB
/// L1d, the rest holding the A rows' lines and the C tile. Reused across every row tile of
/// a column block, the panel must stay in L1 or every FMA waits on L2 (unblocked, a
/// 512×512×512 GEMM's panel is 128 KiB).
const PANEL_BYTES: i64 = 32 * 1024;

/// Emits a GEMM at the builder's position, the tile shape picked per shape (issue 6):
/// - one column with contiguous A rows and B column (a 1×1 convolution on a 1×1 image, a
///   fully connected layer): a bandwidth-bound matrix-vector product ([`gemv`]);
/// - narrow N (at most [`NARROW`] vectors): every column in one tile of up to [`ACC_REGS`]
///   accumulators over the whole K, so A — the big operand there — streams once (K blocks
///   measured slower: they cut A's rows into short runs);
/// - otherwise `MR × NV·W` tiles, then one tile of the remaining columns (the last vector
///   masked with `llvm.masked.*`, never a latency-bound scalar chain) with as many rows as
///   fit [`ACC_REGS`]. With a short K ([`SHORT_K`]) the output rows, not the B panel, are
///   what streams, so the row tiles go outside; otherwise K is cut into blocks whose B panel
///   fits [`PANEL_BYTES`] ([`k_blocks`]) and the column blocks go outside, so the panel
///   stays in L1 across the row tiles. A block after the first resumes from the partial
///   sums it stored in C, so every output is still one FMA chain in K order, and only the
///   last block applies the epilogue.
pub fn gemm<'a, 'c>(k: &K<'a, 'c>, w: u32, gm: &Gemm<'c>, epi: Epilogue<'c>) -> R<()> {
    if gm.n == 1 && gm.a_cs == 1 && gm.b_rs == 1 && gm.k >= w as i64 {
        return gemv::emit(k, w, gm, epi);
    }
    let wl = w as i64;
    let j0 = k.c(0);
    if gm.n <= NARROW * wl {
        // Narrow (late layers: N = H·W = 49, 196 at most a few vectors): every column in one
        // tile, more rows per tile, so A — the big operand here — is read once.
        let nv = (gm.n + wl - 1) / wl;
        let lanes = (gm.n % wl != 0).then_some((gm.n % wl) as u32);
        let mr = (ACC_REGS / nv).min(12);
        let mfull = gm.m / mr * mr;
        let kb = KBlock::whole(k, gm.k);
        k.loop_step(0, mfull, mr, &mut |i0| {
            tile(k, w, gm, epi, kb, i0, j0, mr, nv as u32, lanes)
        })?;
        if mfull < gm.m {
            let tail = gm.m - mfull;
            tile(k, w, gm, epi, kb, k.c(mfull), j0, tail, nv as u32, lanes)?;
        }
        return Ok(());
    }
    let nr = NV as i64 * wl;
    let nfull = gm.n / nr * nr;
    // The columns after the full blocks: one tile of `nrest` vectors, the last one masked.
    let rest = gm.n - nfull;
    let nrest = ((rest + wl - 1) / wl) as u32;
    let lanes_rest = (rest % wl != 0).then_some((rest % wl) as u32);
    let mfull = gm.m / MR * MR;
    let rows_tail = gm.m - mfull;
    // A column block's row tiles, as many rows per tile as `nv` vectors leave accumulators.
    let rows = |kb: KBlock<'c>, j0: IntValue<'c>, nv: u32, lanes: Option<u32>| -> R<()> {
        let mr = (ACC_REGS / nv as i64).min(12);
        let mfull = gm.m / mr * mr;
        k.loop_step(0, mfull, mr, &mut |i0| {
            tile(k, w, gm, epi, kb, i0, j0, mr, nv, lanes)
        })?;
        if mfull < gm.m {
            tile(k, w, gm, epi, kb, k.c(mfull), j0, gm.m - mfull, nv, lanes)?;
        }
        Ok(())
    };
    let cols = |kb: KBlock<'c>, i0: IntValue<'c>, mr: i64| -> R<()> {
        k.loop_step(0, nfull, nr, &mut |j0| {
            tile(k, w, gm, epi, kb, i0, j0, mr, NV, None)
        })?;
        if rest > 0 {
            tile(k, w, gm, epi, kb, i0, k.c(nfull), mr, nrest, lanes_rest)?;
        }
        Ok(())
    };
    if gm.k <= SHORT_K {
        let kb = KBlock::whole(k, gm.k);
        k.loop_step(0, mfull, MR, &mut |i0| cols(kb, i0, MR))?;
        if rows_tail > 0 {
            cols(kb, k.c(mfull), rows_tail)?;
        }
        return Ok(());
    }
    let kc = (PANEL_BYTES / (NV as i64 * wl * 4)).max(8);
    k_blocks(k, gm.k, kc, &mut |kb| {
        k.loop_step(0, nfull, nr, &mut |j0| rows(kb, j0, NV, None))?;
        if rest > 0 {
            rows(kb, k.c(nfull), nrest, lanes_rest)?;
        }
        Ok(())
    })
}

/// At most this many vectors of columns make a GEMM narrow (one column block).
const NARROW: i64 = 4;
/// Vector accumulators a narrow tile may hold (of 32 registers with AVX-512; the rest hold
/// B vectors and the broadcast A element).
const ACC_REGS: i64 = 24;
/// K up to which the row tiles go outside the column blocks.
const SHORT_K: i64 = 32;

/// The K steps `k0 .. k0 + len` of a tile; the first block starts from zero, later ones
/// from the partial sums stored in C, and only the last applies the epilogue.
#[derive(Clone, Copy)]
struct KBlock<'c> {
    k0: IntValue<'c>,
    len: i64,
    first: bool,
    last: bool,
}

impl<'c> KBlock<'c> {
    fn whole<'a>(k: &K<'a, 'c>, len: i64) -> Self {
        KBlock {
            k0: k.c(0),
            len,
            first: true,
            last: true,
        }
    }
}

/// Runs `body` over K blocks of at most `kc` steps (balanced: equal blocks but the last):
/// the first and last are emitted apart, the middle ones as one loop.
fn k_blocks<'a, 'c>(
    k: &K<'a, 'c>,
    kk: i64,
    kc: i64,
    body: &mut dyn FnMut(KBlock<'c>) -> R<()>,
) -> R<()> {
    let nb = (kk + kc - 1) / kc;
    if nb <= 1 {
        return body(KBlock::whole(k, kk));
    }
    let balanced = (kk + nb - 1) / nb;
    let kc = if balanced * (nb - 1) < kk {
        balanced
    } else {
        kc
    };
    let last = kc * (nb - 1);
    body(KBlock {
        k0: k.c(0),
        len: kc,
        first: true,
        last: false,
    })?;
    k.loop_step(kc, last, kc, &mut |k0| {
        body(KBlock {
            k0,
            len: kc,
            first: false,
            last: false,
        })
    })?;
    body(KBlock {
        k0: k.c(last),
        len: kk - last,
        first: false,
        last: true,
    })
}

pub(crate) fn finish<'a, 'c>(
    k: &K<'a, 'c>,
    epi: Epilogue<'c>,
    acc: FloatValue<'c>,
    row: IntValue<'c>,
) -> R<FloatValue<'c>> {
    let mut v = acc;
    if epi.alpha != 1.0 {
        v = k.fmul(v, k.f(epi.alpha))?;
    }
    if let Some(b) = epi.row_bias {
        v = k.fadd(v, k.ld(b, row)?)?;
    }
    activation(k, epi.act, v)
}

/// One `mr × nv·W` tile over the K block `kb`; with `lanes = Some(n)` only the first `n`
/// columns of the last vector are loaded and stored (masked).
#[allow(clippy::too_many_arguments)]
fn tile<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    epi: Epilogue<'c>,
    kb: KBlock<'c>,
    i0: IntValue<'c>,
    j0: IntValue<'c>,
    mr: i64,
    nv: u32,
    lanes: Option<u32>,
) -> R<()> {
    let wl = w as i64;
    let rows: Vec<IntValue> = (0..mr).map(|r| k.add(i0, k.c(r))).collect::<R<_>>()?;
    let a_rows: Vec<IntValue> = rows.iter().map(|&r| k.mul(r, gm.a_rs)).collect::<R<_>>()?;
    let c_at = |r: usize, v: u32| -> R<IntValue<'c>> {
        let ci = k.add(k.mul(rows[r], gm.c_rs)?, j0)?;
        k.add(ci, k.c(v as i64 * wl))
    };
    let masked = |v: u32| lanes.filter(|_| v + 1 == nv);
    let init: Vec<BasicValueEnum> = if kb.first {
        let zero: BasicValueEnum = k.vty(w).const_zero().into();
        vec![zero; (mr as usize) * nv as usize]
    } else {
        let mut init = Vec::with_capacity((mr as usize) * nv as usize);
        for r in 0..mr as usize {
            for v in 0..nv {
                let at = c_at(r, v)?;
                init.push(
                    match masked(v) {
                        Some(n) => k.ldv_masked(gm.c, at, w, n)?,
                        None => k.ldv(gm.c, at, w)?,
                    }
                    .into(),
                );
            }
        }
        init
    };
    let acc = k.loop_carry(0, kb.len, 1, init, &mut |kk, cur| {
        let kk = k.add(kb.k0, kk)?;
        let bi = k.add(k.mul(kk, gm.b_rs)?, j0)?;
        let bv: Vec<_> = (0..nv)
            .map(|v| {
                let at = k.add(bi, k.c(v as i64 * wl))?;
                match masked(v) {
                    Some(n) => k.ldv_masked(gm.b, at, w, n),
                    None => k.ldv(gm.b, at, w),
                }
            })
            .collect::<R<_>>()?;
        let ak = k.mul(kk, gm.a_cs)?;
        let mut next = Vec::with_capacity(cur.len());
        for &ar in &a_rows {
            let a = k.splat(k.ld(gm.a, k.add(ar, ak)?)?, w)?;
            for &b in &bv {
                let c = cur[next.len()].into_vector_value();
                next.push(k.fma(a, b, c)?.into());
            }
        }
        Ok(next)
    })?;
    for (r, &row) in rows.iter().enumerate() {
        for v in 0..nv {
            let vec = acc[r * nv as usize + v as usize].into_vector_value();
            let out = if kb.last {
                let mut out = k.vty(w).get_undef();
                for l in 0..masked(v).unwrap_or(w) {
                    let x = finish(k, epi, k.lane(vec, l)?, row)?;
                    out = llvm(k.b.build_insert_element(
                        out,
                        x,
                        k.ctx.i32_type().const_int(l.into(), false),
                        "o",
                    ))?;
                }
                out
            } else {
                vec
            };
            let at = c_at(r, v)?;
            match masked(v) {
                Some(n) => k.stv_masked(gm.c, at, out, n)?,
                None => k.stv(gm.c, at, out)?,
            }
        }
    }
    Ok(())
}

fn conv2d<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &tir_ir::OpData,
    c: &tir_ir::op::Conv2d,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, wv, r) = (op.operands[0], op.operands[1], op.results[0]);
    let bias = op.operands.get(2).copied();
    let xd = dims(func, x)?;
    let wd = dims(func, wv)?;
    let od = dims(func, r)?;
    if xd.len() != 4 || wd.len() != 4 || od.len() != 4 {
        return Err(unsupported(func, op, "conv2d needs rank-4 operands"));
    }
    let (n, ci, h, wi) = (xd[0], xd[1], xd[2], xd[3]);
    let (m, cg, kh, kw) = (wd[0], wd[1], wd[2], wd[3]);
    let (oh, ow) = (od[2], od[3]);
    let groups = c.groups as i64;
    let mg = m / groups.max(1);
    let [sh, sw] = c.strides.map(|v| v as i64);
    let [dh, dw] = c.dilations.map(|v| v as i64);
    let (pt, pl) = (c.pads[0] as i64, c.pads[1] as i64);
    let mut vals = vec![x, wv];
    vals.extend(bias);
    vals.push(r);
    let args = args_of(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    let f = g.kernel(name, &args, &writes);
    let k = g.k(f);
    let px = g.param(f, 0)?;
    let pw = g.param(f, 1)?;
    let pb = if bias.is_some() {
        Some(g.param(f, 2)?)
    } else {
        None
    };
    let po = g.param(f, args.len() as u32 - 1)?;
    let pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && c.pads == [0; 4];
    if pointwise {
        // Per image and group: out[M_g, HW] = W[M_g, C_g] · x[C_g, HW] + bias.
        let hw = h * wi;
        k.loop_(0, n, &mut |b| {
            k.loop_(0, groups, &mut |gi| {
                let xo = k.add(k.mul(b, ci * hw)?, k.mul(gi, cg * hw)?)?;
                let oo = k.add(k.mul(b, m * hw)?, k.mul(gi, mg * hw)?)?;
                let wo = k.mul(gi, mg * cg)?;
                let bo = k.mul(gi, mg)?;
                let gm = Gemm {
                    a: k.gep(pw, wo)?,
                    a_rs: cg,
                    a_cs: 1,
                    b: k.gep(px, xo)?,
                    b_rs: hw,
                    c: k.gep(po, oo)?,
                    c_rs: hw,
                    m: mg,
                    n: hw,
                    k: cg,
                };
                let row_bias = match pb {
                    Some(p) => Some(k.gep(p, bo)?),
                    None => None,
                };
                gemm(
                    &k,
                    g.width,
                    &gm,
                    Epilogue {
                        alpha: 1.0,
                        row_bias,
                        act: c.activation,
                    },
                )
            })
        })?;
    } else if cg == 1 {
        let d = crate::depthwise::Depthwise {
            n,
            c: ci,
            h,
            wi,
            m,
            kh,
            kw,
            oh,
            ow,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
            act: c.activation,
        };
        crate::depthwise::emit(&k, g.width, &d, px, pw, pb, po)?;
    } else {
        let d = crate::im2col::Conv {
            n,
            c: ci,
            h,
            wi,
            m,
            groups,
            kh,
            kw,
            oh,
            ow,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
            act: c.activation,
        };
        if crate::rowpack::applies(&d, g.width) {
            crate::rowpack::emit(&k, g.width, &d, px, pw, pb, po)?;
        } else {
            crate::im2col::emit(&k, g.width, &d, px, pw, pb, po)?;
        }
    }
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

fn matmul<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &tir_ir::OpData,
    act: Option<Activation>,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (a, b, r) = (op.operands[0], op.operands[1], op.results[0]);
    let ad = dims(func, a)?;
    let bd = dims(func, b)?;
    let ash = if ad.len() == 1 {
        vec![1, ad[0]]
    } else {
        ad.clone()
    };
    let bsh = if bd.len() == 1 {
        vec![bd[0], 1]
    } else {
        bd.clone()
    };
    let (m, kk) = (ash[ash.len() - 2], ash[ash.len() - 1]);
    let nn = bsh[bsh.len() - 1];
    let (ab, bb) = (&ash[..ash.len() - 2], &bsh[..bsh.len() - 2]);
    let rank = ab.len().max(bb.len());
    let pick = |s: &[i64], i: usize| {
        if i < rank - s.len() {
            1
        } else {
            s[i - (rank - s.len())]
        }
    };
    let batch: Vec<i64> = (0..rank).map(|i| pick(ab, i).max(pick(bb, i))).collect();
    let sa: Vec<i64> = broadcast(ab, &batch).iter().map(|s| s * m * kk).collect();
    let sb: Vec<i64> = broadcast(bb, &batch).iter().map(|s| s * kk * nn).collect();
    let so: Vec<i64> = contiguous(&batch).iter().map(|s| s * m * nn).collect();
    let args = args_of(func, st, &[a, b, r])?;
    let f = g.kernel(name, &args, &[false, false, true]);
    let k = g.k(f);
    let (pa, pb, po) = (g.param(f, 0)?, g.param(f, 1)?, g.param(f, 2)?);
    nest(&k, &batch, &[(&sa, 0), (&sb, 0), (&so, 0)], &mut |idx| {
        let gm = Gemm {
            a: k.gep(pa, idx[0])?,
            a_rs: kk,
            a_cs: 1,
            b: k.gep(pb, idx[1])?,
            b_rs: nn,
            c: k.gep(po, idx[2])?,
            c_rs: nn,
            m,
            n: nn,
            k: kk,
        };
        gemm(
            &k,
            g.width,
            &gm,
            Epilogue {
                alpha: 1.0,
                row_bias: None,
                act,
            },
        )
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

fn gemm_op<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &tir_ir::OpData,
    gm: &tir_ir::op::Gemm,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (a, b, r) = (op.operands[0], op.operands[1], op.results[0]);
    let cin = op.operands.get(2).copied();
    let od = dims(func, r)?;
    let ad = dims(func, a)?;
    let bd = dims(func, b)?;
    let (m, n) = (od[0], od[1]);
    let kk = if gm.trans_a { ad[0] } else { ad[1] };
    let b_pre_transposed = gm.trans_b && st.transposed.contains(&b);
    let _ = bd;
    let args = args_of(func, st, &[a, b, r])?;
    // With C, the activation waits for `+ beta * C` (a second, element-wise kernel).
    let act = if cin.is_some() { None } else { gm.activation };
    let mut calls = Vec::new();
    if gm.trans_b && !b_pre_transposed {
        // B is computed, so no contiguous B row for the micro-kernel: dot products instead.
        let a3 = [args[0], args[1], args[2]];
        let alpha = gm.alpha as f32 as f64;
        calls.push(gather::gemm_nt(
            g,
            &a3,
            (m, n, kk),
            gm.trans_a,
            alpha,
            act,
            name,
        )?);
    } else {
        let f = g.kernel(name, &args, &[false, false, true]);
        let k = g.k(f);
        let (pa, pb, po) = (g.param(f, 0)?, g.param(f, 1)?, g.param(f, 2)?);
        let spec = Gemm {
            a: pa,
            a_rs: if gm.trans_a { 1 } else { kk },
            a_cs: if gm.trans_a { m } else { 1 },
            b: pb,
            b_rs: n,
            c: po,
            c_rs: n,
            m,
            n,
            k: kk,
        };
        gemm(
            &k,
            g.width,
            &spec,
            Epilogue {
                alpha: gm.alpha as f32 as f64,
                row_bias: None,
                act,
            },
        )?;
        llvm(g.builder.build_return(None))?;
        calls.push((f, args.iter().map(|a| a.loc).collect::<Vec<_>>()));
    }
    if let Some(cv) = cin {
        let cd = dims(func, cv)?;
        let beta = gm.beta as f32 as f64;
        let act = gm.activation;
        let out = Strided {
            loc: st.of(func, r)?,
            bytes: bytes_of(&od),
            strides: contiguous(&od),
            base: 0,
        };
        calls.push(elementwise(
            g,
            &format!("{name}_c"),
            &od,
            out.clone(),
            vec![
                out,
                Strided {
                    loc: st.of(func, cv)?,
                    bytes: bytes_of(&cd),
                    strides: broadcast(&cd, &od),
                    base: 0,
                },
            ],
            &move |k, v| activation(k, act, k.fma(k.f(beta), v[1], v[0])?),
        )?);
    }
    Ok(calls)
}

fn pool<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &tir_ir::OpData,
    p: &tir_ir::op::Pool2d,
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
    let f = g.kernel(name, &args, &[false, true]);
    let k = g.k(f);
    let (px, po) = (g.param(f, 0)?, g.param(f, 1)?);
    k.loop_(0, planes, &mut |pl_| {
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
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

fn softmax<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &tir_ir::OpData,
    axis: i64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let xd = dims(func, x)?;
    let ax = norm_axis(axis, xd.len()).map_err(|_| unsupported(func, op, "axis"))?;
    let len = xd[ax];
    let outer: i64 = xd[..ax].iter().product();
    let inner: i64 = xd[ax + 1..].iter().product();
    let args = args_of(func, st, &[x, r])?;
    let f = g.kernel(name, &args, &[false, true]);
    let k = g.k(f);
    let (px, po) = (g.param(f, 0)?, g.param(f, 1)?);
    let d = k.ctx.f64_type();
    k.loop_(0, outer, &mut |o| {
        k.loop_(0, inner, &mut |i| {
            let base = k.add(k.mul(o, len * inner)?, i)?;
            let at = |l: IntValue<'c>| k.add(base, k.mul(l, inner)?);
            let ninf: BasicValueEnum = k.f(f64::NEG_INFINITY).into();
            let mx = k.loop_carry(0, len, 1, vec![ninf], &mut |l, cur| {
                let v = k.ld(px, at(l)?)?;
                // f32::max: the non-NaN operand wins.
                let m = cur[0].into_float_value();
                let gt = llvm(k.b.build_float_compare(inkwell::FloatPredicate::OGT, v, m, "g"))?;
                let uno = llvm(k.b.build_float_compare(inkwell::FloatPredicate::UNO, m, m, "u"))?;
                let pick = llvm(k.b.build_or(gt, uno, "p"))?;
                Ok(vec![k.fsel(pick, v, m)?.into()])
            })?;
            let mx = mx[0].into_float_value();
            let zero: BasicValueEnum = d.const_float(0.0).into();
            let sum = k.loop_carry(0, len, 1, vec![zero], &mut |l, cur| {
                let e = k.exp(k.fsub(k.ld(px, at(l)?)?, mx)?)?;
                k.st(po, at(l)?, e)?;
                let ed = llvm(k.b.build_float_ext(e, d, "e"))?;
                Ok(vec![k.fadd(cur[0].into_float_value(), ed)?.into()])
            })?;
            let sum = sum[0].into_float_value();
            k.loop_(0, len, &mut |l| {
                let e = llvm(k.b.build_float_ext(k.ld(po, at(l)?)?, d, "e"))?;
                let q = llvm(k.b.build_float_trunc(k.fdiv(e, sum)?, k.f32t, "q"))?;
                k.st(po, at(l)?, q)
            })
        })
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

/// `(x - mean) / sqrt(var + epsilon) * scale + bias` over the axes from `axis` on, statistics
/// in f64 as the reference.
#[allow(clippy::too_many_arguments)]
fn layer_norm<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &tir_ir::OpData,
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
    let f = g.kernel(name, &args, &writes);
    let k = g.k(f);
    let px = g.param(f, 0)?;
    let pp: Vec<PointerValue> = (1..args.len() as u32 - 1)
        .map(|i| g.param(f, i))
        .collect::<R<_>>()?;
    let po = g.param(f, args.len() as u32 - 1)?;
    let d = k.ctx.f64_type();
    let ext = |v: FloatValue<'c>| llvm(k.b.build_float_ext(v, d, "e"));
    k.loop_(0, outer, &mut |o| {
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
        nest(&k, norm, &sets, &mut |idx| {
            let at = k.add(base, idx[0])?;
            let v = k.fsub(ext(k.ld(px, at)?)?, mean)?;
            let mut y = k.fmul(k.fmul(v, inv)?, ext(k.ld(pp[0], idx[1])?)?)?;
            if pp.len() > 1 {
                y = k.fadd(y, ext(k.ld(pp[1], idx[2])?)?)?;
            }
            k.st(po, at, llvm(k.b.build_float_trunc(y, k.f32t, "t"))?)
        })
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}
