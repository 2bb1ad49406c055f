//! The dtype-generic reference kernels: every op whose operands or results are not all `f32`
//! (casts, comparisons, `where`, logic, `argmax`/`argmin`, integer arithmetic, views).
//!
//! Values are widened without loss before computing: floats (`f32`, `f16`, `bf16`) to `f64`,
//! integers and `bool` to `i64`. Integer arithmetic wraps in `i64` and the result is
//! truncated to its type, which is the same as wrapping in the narrower type (two's
//! complement arithmetic is arithmetic modulo 2^n). Float results are rounded once, from the
//! `f64` value, to the result's type.

use crate::tensor::Data;
use half::{bf16, f16};
use tir_ir::shape::norm_axis;
use tir_ir::{Activation, BinaryOp, DType, Op, TensorType, UnaryOp};

/// An operand: its type and elements.
pub struct In<'a> {
    pub ty: &'a TensorType,
    pub data: &'a Data,
}

/// Elements widened without loss.
enum Wide {
    F(Vec<f64>),
    I(Vec<i64>),
}

fn widen(d: &Data) -> Wide {
    match d {
        Data::F32(v) => Wide::F(v.iter().map(|&x| f64::from(x)).collect()),
        Data::F16(v) => Wide::F(v.iter().map(|x| x.to_f64()).collect()),
        Data::BF16(v) => Wide::F(v.iter().map(|x| x.to_f64()).collect()),
        Data::I8(v) => Wide::I(v.iter().map(|&x| i64::from(x)).collect()),
        Data::U8(v) => Wide::I(v.iter().map(|&x| i64::from(x)).collect()),
        Data::I32(v) => Wide::I(v.iter().map(|&x| i64::from(x)).collect()),
        Data::I64(v) => Wide::I(v.clone()),
        Data::Bool(v) => Wide::I(v.iter().map(|&x| i64::from(x)).collect()),
    }
}

/// Wide values as `dtype`, by ONNX Cast's rules: float to integer truncates toward zero and
/// saturates (NaN gives 0: Rust's `as`), integer to integer wraps, anything to `bool` is "not
/// zero" (NaN is not zero), to a float rounds to nearest even, once.
fn narrow(dtype: DType, w: &Wide) -> Data {
    match w {
        Wide::F(v) => match dtype {
            DType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
            DType::F16 => Data::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
            DType::BF16 => Data::BF16(v.iter().map(|&x| bf16::from_f64(x)).collect()),
            DType::I8 => Data::I8(v.iter().map(|&x| x as i8).collect()),
            DType::U8 => Data::U8(v.iter().map(|&x| x as u8).collect()),
            DType::I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
            DType::I64 => Data::I64(v.iter().map(|&x| x as i64).collect()),
            DType::Bool => Data::Bool(v.iter().map(|&x| x != 0.0).collect()),
        },
        Wide::I(v) => match dtype {
            // Straight from the integer: one rounding (through f64 could round twice).
            DType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
            DType::F16 => Data::F16(v.iter().map(|&x| f16::from_f32(x as f32)).collect()),
            DType::BF16 => Data::BF16(v.iter().map(|&x| bf16::from_f32(x as f32)).collect()),
            DType::I8 => Data::I8(v.iter().map(|&x| x as i8).collect()),
            DType::U8 => Data::U8(v.iter().map(|&x| x as u8).collect()),
            DType::I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
            DType::I64 => Data::I64(v.clone()),
            DType::Bool => Data::Bool(v.iter().map(|&x| x != 0).collect()),
        },
    }
}

fn dims(t: &TensorType) -> Vec<usize> {
    t.shape.iter().map(|&d| d as usize).collect()
}

/// For each element of `out` (row-major), the element of `shape` that NumPy broadcasting
/// reads there.
fn bcast(out: &[usize], shape: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let off = out.len() - shape.len();
    let mut strides = vec![0usize; out.len()];
    let mut acc = 1;
    for d in (0..shape.len()).rev() {
        if shape[d] != 1 {
            strides[off + d] = acc;
        }
        acc *= shape[d];
    }
    let mut idx = vec![0usize; out.len()];
    let mut src = 0usize;
    let mut map = Vec::with_capacity(n);
    for _ in 0..n {
        map.push(src);
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            src += strides[d];
            if idx[d] < out[d] {
                break;
            }
            src -= strides[d] * idx[d];
            idx[d] = 0;
        }
    }
    map
}

/// Integer `a op b`, wrapping; division truncates toward zero and a division by zero gives 0
/// (ONNX leaves it undefined; this is the choice the generated code makes too).
pub fn int_binary(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div => {
            if b == 0 {
                0
            } else {
                a.wrapping_div(b)
            }
        }
        BinaryOp::Pow => int_pow(a, b),
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
    }
}

/// `a ^ b` on integers: a negative exponent gives the truncated `1 / a^|b|`.
fn int_pow(a: i64, b: i64) -> i64 {
    if b >= 0 {
        // Square and multiply, wrapping: the result modulo 2^64 (b may exceed u32).
        let (mut base, mut e, mut acc) = (a, b as u64, 1i64);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc.wrapping_mul(base);
            }
            base = base.wrapping_mul(base);
            e >>= 1;
        }
        acc
    } else {
        match a {
            1 => 1,
            -1 if b % 2 == 0 => 1,
            -1 => -1,
            _ => 0,
        }
    }
}

/// The integer remainder: C's (the sign of `a`) with `fmod`, else Python's (the sign of
/// `b`); by zero it is 0.
pub fn int_mod(a: i64, b: i64, fmod: bool) -> i64 {
    if b == 0 {
        return 0;
    }
    let r = a.wrapping_rem(b);
    if !fmod && r != 0 && (r < 0) != (b < 0) {
        r.wrapping_add(b)
    } else {
        r
    }
}

fn float_binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Max if a.is_nan() || b.is_nan() => f64::NAN,
        BinaryOp::Min if a.is_nan() || b.is_nan() => f64::NAN,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
    }
}

/// Runs `op` on operands of any element types; `None` when no kernel here covers them.
/// Operand and result types satisfy the op's shape rule.
pub fn exec(op: &Op, ins: &[In], outs: &[&TensorType]) -> Option<Vec<Data>> {
    let out = outs.first()?;
    let oshape = dims(out);
    let over = |i: usize| bcast(&oshape, &dims(ins[i].ty));
    let data = match op {
        Op::Cast { to } => narrow(*to, &widen(ins[0].data)),
        // Views: the same elements in row-major order.
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            ins[0].data.clone()
        }
        Op::Compare(c) => {
            let (ia, ib) = (over(0), over(1));
            let v: Vec<bool> = match (widen(ins[0].data), widen(ins[1].data)) {
                (Wide::F(a), Wide::F(b)) => ia
                    .iter()
                    .zip(&ib)
                    .map(|(&i, &j)| c.holds(a[i], b[j]))
                    .collect(),
                (Wide::I(a), Wide::I(b)) => ia
                    .iter()
                    .zip(&ib)
                    .map(|(&i, &j)| c.holds(a[i], b[j]))
                    .collect(),
                _ => return None,
            };
            Data::Bool(v)
        }
        Op::Where => {
            let Wide::I(cond) = widen(ins[0].data) else {
                return None;
            };
            let (ic, ix, iy) = (over(0), over(1), over(2));
            let pick = |k: usize| cond[ic[k]] != 0;
            let w = match (widen(ins[1].data), widen(ins[2].data)) {
                (Wide::F(x), Wide::F(y)) => Wide::F(
                    (0..ic.len())
                        .map(|k| if pick(k) { x[ix[k]] } else { y[iy[k]] })
                        .collect(),
                ),
                (Wide::I(x), Wide::I(y)) => Wide::I(
                    (0..ic.len())
                        .map(|k| if pick(k) { x[ix[k]] } else { y[iy[k]] })
                        .collect(),
                ),
                _ => return None,
            };
            narrow(out.dtype, &w)
        }
        Op::Logical(l) => {
            let (Data::Bool(a), Data::Bool(b)) = (ins[0].data, ins[1].data) else {
                return None;
            };
            let (ia, ib) = (over(0), over(1));
            Data::Bool(
                ia.iter()
                    .zip(&ib)
                    .map(|(&i, &j)| l.apply(a[i], b[j]))
                    .collect(),
            )
        }
        Op::Not => {
            let Data::Bool(a) = ins[0].data else {
                return None;
            };
            Data::Bool(a.iter().map(|&x| !x).collect())
        }
        Op::Binary { op: b, activation } => {
            let (ia, ib) = (over(0), over(1));
            let w = match (widen(ins[0].data), widen(ins[1].data)) {
                (Wide::I(x), Wide::I(y)) => {
                    let v = ia
                        .iter()
                        .zip(&ib)
                        .map(|(&i, &j)| int_binary(*b, x[i], y[j]));
                    Wide::I(match activation {
                        None => v.collect(),
                        Some(Activation::Relu) => v.map(|x| x.max(0)).collect(),
                        Some(Activation::Relu6) => v.map(|x| x.clamp(0, 6)).collect(),
                        Some(Activation::ReluN1To1) => v.map(|x| x.clamp(-1, 1)).collect(),
                        Some(_) => return None,
                    })
                }
                (Wide::F(x), Wide::F(y)) if activation.is_none() => Wide::F(
                    ia.iter()
                        .zip(&ib)
                        .map(|(&i, &j)| float_binary(*b, x[i], y[j]))
                        .collect(),
                ),
                _ => return None,
            };
            narrow(out.dtype, &w)
        }
        Op::Unary(u) => {
            let Wide::I(x) = widen(ins[0].data) else {
                return None;
            };
            let f: fn(i64) -> i64 = match u {
                UnaryOp::Relu => |x| x.max(0),
                UnaryOp::Relu6 => |x| x.clamp(0, 6),
                UnaryOp::Abs => i64::wrapping_abs,
                UnaryOp::Neg => i64::wrapping_neg,
                _ => return None,
            };
            narrow(out.dtype, &Wide::I(x.into_iter().map(f).collect()))
        }
        Op::Clip { min, max } => match widen(ins[0].data) {
            Wide::I(x) => {
                // The bounds are the integer type's own values (an import gives them as
                // integers), so comparing in f64 against them is exact for the inputs
                // compared; the result is the element or the bound converted back.
                let clip = |v: i64| {
                    let f = v as f64;
                    if f < *min {
                        *min as i64
                    } else if f > *max {
                        *max as i64
                    } else {
                        v
                    }
                };
                narrow(out.dtype, &Wide::I(x.into_iter().map(clip).collect()))
            }
            Wide::F(_) => return None,
        },
        Op::Mod { fmod } => {
            let (ia, ib) = (over(0), over(1));
            let w = match (widen(ins[0].data), widen(ins[1].data)) {
                (Wide::I(x), Wide::I(y)) => Wide::I(
                    ia.iter()
                        .zip(&ib)
                        .map(|(&i, &j)| int_mod(x[i], y[j], *fmod))
                        .collect(),
                ),
                // `%` on floats is C's fmod; the shape rule admits floats only with `fmod`.
                (Wide::F(x), Wide::F(y)) => {
                    Wide::F(ia.iter().zip(&ib).map(|(&i, &j)| x[i] % y[j]).collect())
                }
                _ => return None,
            };
            narrow(out.dtype, &w)
        }
        Op::ArgReduce {
            max,
            axis,
            select_last_index,
            ..
        } => {
            let shape = dims(ins[0].ty);
            let ax = norm_axis(*axis, shape.len()).ok()?;
            let w = widen(ins[0].data);
            Data::I64(arg_reduce(&w, &shape, ax, *max, *select_last_index))
        }
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => {
            let shape = dims(ins[0].ty);
            let ax = norm_axis(*axis, shape.len()).ok()?;
            // Integers only (f32 runs the f32 kernel): wrapping in i64 and truncating is
            // wrapping in the narrower type.
            let Wide::I(x) = widen(ins[0].data) else {
                return None;
            };
            let y = crate::scan::cumsum(&x, &shape, ax, *exclusive, *reverse, 0, i64::wrapping_add);
            narrow(out.dtype, &Wide::I(y))
        }
        Op::TopK { axis, k, largest } => {
            let shape = dims(ins[0].ty);
            let ax = norm_axis(*axis, shape.len()).ok()?;
            let k = usize::try_from(*k).ok()?;
            let (values, indices) = match widen(ins[0].data) {
                // Widening to f64 is exact, so f64's order is the element type's.
                Wide::F(x) => {
                    let (v, i) =
                        crate::scan::top_k(&x, &shape, ax, k, *largest, crate::scan::float_order);
                    (Wide::F(v), i)
                }
                Wide::I(x) => {
                    let (v, i) = crate::scan::top_k(&x, &shape, ax, k, *largest, |a, b| a.cmp(&b));
                    (Wide::I(v), i)
                }
            };
            return Some(vec![narrow(out.dtype, &values), Data::I64(indices)]);
        }
        _ => return None,
    };
    Some(vec![data])
}

/// The index along `ax` of the extreme element of every line: the first (or, with `last`,
/// the last) of the largest (`max`) or smallest; NaN counts as the extreme, as in NumPy.
fn arg_reduce(w: &Wide, shape: &[usize], ax: usize, max: bool, last: bool) -> Vec<i64> {
    let outer: usize = shape[..ax].iter().product();
    let n = shape[ax];
    let inner: usize = shape[ax + 1..].iter().product();
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| o * n * inner + k * inner + i;
            let mut best = 0usize;
            for k in 1..n {
                let better = match w {
                    Wide::F(v) => better_f(v[at(k)], v[at(best)], max, last),
                    Wide::I(v) => {
                        let (x, b) = (v[at(k)], v[at(best)]);
                        (if max { x > b } else { x < b }) || (last && x == b)
                    }
                };
                if better {
                    best = k;
                }
            }
            out.push(best as i64);
        }
    }
    out
}

/// Whether `x` replaces the current extreme `b`: NumPy's argmax/argmin stop at the first NaN.
fn better_f(x: f64, b: f64, max: bool, last: bool) -> bool {
    if b.is_nan() {
        return last && x.is_nan();
    }
    if x.is_nan() {
        return true;
    }
    (if max { x > b } else { x < b }) || (last && x == b)
}
