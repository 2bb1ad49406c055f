//! Constant folding: a node whose inputs are all constants (initializers, `Constant` nodes,
//! `Shape` of a statically shaped value, earlier folds) is evaluated at import time. This is
//! what removes the `Shape → Gather → Unsqueeze → Concat → Reshape` subgraphs PyTorch exports;
//! the ops folded here are the ones those subgraphs use.

use super::attrs::{norm_axis, to_u64s, Attrs};
use super::shape::transpose_perm;
use super::{cast_target, Importer, Val, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::{self, numel, strides, Num, Tensor};
use std::rc::Rc;
use tir_ir::op::Slice;
use tir_ir::{DType, Op, TensorType};

/// The most elements an element-wise fold evaluates: folding is for shape computations and
/// small constants, and its element list is not compact (16 bytes an element).
const MAX_FOLDED_ELEMENTS: u64 = 1 << 24;

impl Importer {
    /// Evaluates a node whose inputs are all constants, if it is one that can be folded.
    pub(super) fn fold(
        &mut self,
        node: &NodeProto,
        op_type: &str,
        a: &Attrs,
        inputs: &[Option<Val>],
    ) -> R<Option<Tensor>> {
        let c = |i: usize| -> R<Rc<Tensor>> {
            match inputs.get(i) {
                Some(Some(Val::Const(t))) => Ok(t.clone()),
                _ => Err(NodeError::MissingInput {
                    index: i,
                    what: None,
                }),
            }
        };
        let t = match op_type {
            "Identity" | "Dropout" => {
                if op_type == "Dropout" {
                    self.only_first_outputs(node, 1)?;
                }
                (*c(0)?).clone()
            }
            "Cast" => {
                let to = cast_target(a)?;
                let x = c(0)?;
                if x.is_int() {
                    Tensor::from_i64s(to, x.shape.clone(), &x.ints())
                } else {
                    Tensor::from_f64s(to, x.shape.clone(), &x.floats())
                }
            }
            "ConstantOfShape" => {
                let shape = to_u64s("shape", &c(0)?.ints())?;
                let value = match a.tensor("value")? {
                    Some(v) => v,
                    None => Tensor::from_f64s(DType::F32, vec![1], &[0.0]),
                };
                if value.numel() != 1 {
                    return Err(NodeError::FillValue);
                }
                let n = numel(&shape).ok_or(NodeError::Overflow { what: "the shape" })?;
                if n.saturating_mul(value.dtype.byte_size()) > tensor::MAX_FOLDED_BYTES {
                    return Err(NodeError::FoldTooLarge { shape });
                }
                let mut data = Vec::with_capacity((n * value.dtype.byte_size()) as usize);
                for _ in 0..n {
                    data.extend_from_slice(&value.data);
                }
                Tensor {
                    dtype: value.dtype,
                    shape,
                    data,
                }
            }
            "Gather" => {
                let x = c(0)?;
                let idx = c(1)?;
                let axis = norm_axis(a.int("axis")?.unwrap_or(0), x.shape.len())?;
                let d = x.shape[axis] as i64;
                let ids: Vec<u64> = idx
                    .ints()
                    .iter()
                    .map(|&i| {
                        let j = if i < 0 { i + d } else { i };
                        if (0..d).contains(&j) {
                            Ok(j as u64)
                        } else {
                            Err(NodeError::GatherIndex {
                                index: i,
                                axis,
                                size: d,
                            })
                        }
                    })
                    .collect::<R<_>>()?;
                let mut shape = x.shape[..axis].to_vec();
                shape.extend(&idx.shape);
                shape.extend(&x.shape[axis + 1..]);
                let st = x.strides();
                let ir = idx.shape.len();
                x.gather_elems(shape, |o| {
                    let mut off = 0;
                    for k in 0..axis {
                        off += o[k] as usize * st[k];
                    }
                    let flat_idx = o[axis..axis + ir]
                        .iter()
                        .zip(strides(&idx.shape))
                        .map(|(&v, s)| v as usize * s)
                        .sum::<usize>();
                    off += ids[flat_idx] as usize * st[axis];
                    for k in axis + 1..x.shape.len() {
                        off += o[k + ir - 1] as usize * st[k];
                    }
                    off
                })?
            }
            "Unsqueeze" => {
                let x = c(0)?;
                let axes = self
                    .axes_param(node, a, 13)?
                    .ok_or(NodeError::AxesRequired)?;
                let out = tir_ir::shape::infer(
                    &Op::Unsqueeze { axes },
                    &[&TensorType::new(x.shape.clone(), x.dtype)],
                )?;
                x.reshaped(out[0].shape.clone())
            }
            "Squeeze" => {
                let x = c(0)?;
                let axes = self.squeeze_axes(node, a, &x.shape)?;
                let out = tir_ir::shape::infer(
                    &Op::Squeeze { axes },
                    &[&TensorType::new(x.shape.clone(), x.dtype)],
                )?;
                x.reshaped(out[0].shape.clone())
            }
            "Flatten" => {
                let x = c(0)?;
                let out = tir_ir::shape::infer(
                    &Op::Flatten {
                        axis: a.int("axis")?.unwrap_or(1),
                    },
                    &[&TensorType::new(x.shape.clone(), x.dtype)],
                )?;
                x.reshaped(out[0].shape.clone())
            }
            "Reshape" => {
                let x = c(0)?;
                let shape = self.reshape_target(node, a, &x.shape)?;
                x.reshaped(shape)
            }
            "Concat" => {
                let axis = a.req_int("axis")?;
                let parts: Vec<Rc<Tensor>> = (0..inputs.len()).map(c).collect::<R<_>>()?;
                let tys: Vec<TensorType> = parts
                    .iter()
                    .map(|t| TensorType::new(t.shape.clone(), t.dtype))
                    .collect();
                let refs: Vec<&TensorType> = tys.iter().collect();
                let out = tir_ir::shape::infer(&Op::Concat { axis }, &refs)?;
                let ax = norm_axis(axis, parts[0].shape.len())?;
                // Row-major concat: for each outer index, the parts' inner blocks in order.
                let outer: u64 = parts[0].shape[..ax].iter().product();
                let mut data = Vec::new();
                for o in 0..outer as usize {
                    for p in &parts {
                        let block = p.data.len() / outer.max(1) as usize;
                        data.extend_from_slice(&p.data[o * block..(o + 1) * block]);
                    }
                }
                Tensor {
                    dtype: parts[0].dtype,
                    shape: out[0].shape.clone(),
                    data,
                }
            }
            "Slice" => {
                let x = c(0)?;
                let s = self.slice_params(node, x.shape.len())?;
                slice_const(&x, &s)?
            }
            "Transpose" => {
                let x = c(0)?;
                let perm = transpose_perm(a, x.shape.len())?;
                // The IR's shape rule checks that `perm` is a permutation of the axes (a
                // hostile one must not index past them) and gives the run-time path's message.
                let shape = tir_ir::shape::infer(
                    &Op::Transpose { perm: perm.clone() },
                    &[&TensorType::new(x.shape.clone(), x.dtype)],
                )?
                .remove(0)
                .shape;
                let st = x.strides();
                x.gather_elems(shape, |o| {
                    o.iter()
                        .zip(&perm)
                        .map(|(&v, &p)| v as usize * st[p as usize])
                        .sum()
                })?
            }
            "Add" | "Sub" | "Mul" | "Div" | "Equal" => {
                let (x, y) = (c(0)?, c(1)?);
                let opn = op_type.to_string();
                elementwise(
                    &[&x, &y],
                    |v| {
                        let r = match (v[0], v[1]) {
                            (Num::I(p), Num::I(q)) => Num::I(match opn.as_str() {
                                "Add" => p.wrapping_add(q),
                                "Sub" => p.wrapping_sub(q),
                                "Mul" => p.wrapping_mul(q),
                                "Div" => {
                                    if q == 0 {
                                        return Err(NodeError::DivisionByZero);
                                    }
                                    p.wrapping_div(q)
                                }
                                _ => i64::from(p == q),
                            }),
                            (p, q) => {
                                let (p, q) = (p.f64(), q.f64());
                                match opn.as_str() {
                                    "Add" => Num::F(p + q),
                                    "Sub" => Num::F(p - q),
                                    "Mul" => Num::F(p * q),
                                    "Div" => Num::F(p / q),
                                    _ => Num::I(i64::from(p == q)),
                                }
                            }
                        };
                        Ok(r)
                    },
                    if op_type == "Equal" {
                        Some(DType::Bool)
                    } else {
                        None
                    },
                )?
            }
            "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
                let (x, y) = (c(0)?, c(1)?);
                let opn = op_type.to_string();
                elementwise(
                    &[&x, &y],
                    |v| {
                        let ord = match (v[0], v[1]) {
                            (Num::I(p), Num::I(q)) => p.partial_cmp(&q),
                            (p, q) => p.f64().partial_cmp(&q.f64()),
                        };
                        use std::cmp::Ordering::{Equal, Greater, Less};
                        let r = match (opn.as_str(), ord) {
                            (_, None) => false,
                            ("Less", Some(o)) => o == Less,
                            ("Greater", Some(o)) => o == Greater,
                            ("LessOrEqual", Some(o)) => o != Greater,
                            (_, Some(o)) => o == Greater || o == Equal,
                        };
                        Ok(Num::I(i64::from(r)))
                    },
                    Some(DType::Bool),
                )?
            }
            "And" | "Or" | "Xor" => {
                let (x, y) = (c(0)?, c(1)?);
                let opn = op_type.to_string();
                elementwise(
                    &[&x, &y],
                    |v| {
                        let (p, q) = (v[0].f64() != 0.0, v[1].f64() != 0.0);
                        let r = match opn.as_str() {
                            "And" => p && q,
                            "Or" => p || q,
                            _ => p != q,
                        };
                        Ok(Num::I(i64::from(r)))
                    },
                    Some(DType::Bool),
                )?
            }
            "Mod" => {
                let (x, y) = (c(0)?, c(1)?);
                let fmod = a.int("fmod")?.unwrap_or(0) != 0;
                elementwise(
                    &[&x, &y],
                    |v| match (v[0], v[1]) {
                        (Num::I(_), Num::I(0)) => Err(NodeError::DivisionByZero),
                        // fmod = 1: the sign of the dividend (C's fmod); 0: the divisor's.
                        (Num::I(p), Num::I(q)) if fmod => Ok(Num::I(p.wrapping_rem(q))),
                        (Num::I(p), Num::I(q)) => {
                            let r = p.wrapping_rem(q);
                            Ok(Num::I(if r != 0 && (r < 0) != (q < 0) {
                                r + q
                            } else {
                                r
                            }))
                        }
                        (p, q) => Ok(Num::F(p.f64() % q.f64())),
                    },
                    None,
                )?
            }
            "Not" => {
                let x = c(0)?;
                elementwise(
                    &[&x],
                    |v| Ok(Num::I(i64::from(v[0].f64() == 0.0))),
                    Some(DType::Bool),
                )?
            }
            "CastLike" => {
                let (x, like) = (c(0)?, c(1)?);
                if x.is_int() {
                    Tensor::from_i64s(like.dtype, x.shape.clone(), &x.ints())
                } else {
                    Tensor::from_f64s(like.dtype, x.shape.clone(), &x.floats())
                }
            }
            "Where" => {
                let (cond, x, y) = (c(0)?, c(1)?, c(2)?);
                elementwise(
                    &[&cond, &x, &y],
                    |v| Ok(if v[0].f64() != 0.0 { v[1] } else { v[2] }),
                    Some(x.dtype),
                )?
            }
            "Range" => {
                let (s0, l0, d0) = (c(0)?, c(1)?, c(2)?);
                if s0.dtype != l0.dtype || s0.dtype != d0.dtype {
                    return Err(NodeError::RangeOperands {
                        start: s0.dtype,
                        limit: l0.dtype,
                        delta: d0.dtype,
                    });
                }
                for (what, t) in [("start", &s0), ("limit", &l0), ("delta", &d0)] {
                    if t.numel() != 1 {
                        return Err(NodeError::NotScalar {
                            what,
                            shape: t.shape.clone(),
                        });
                    }
                }
                // ONNX: max(ceil((limit - start) / delta), 0) elements, start + i·delta.
                if s0.is_int() {
                    let (st, li, de) = (
                        s0.ints()[0] as i128,
                        l0.ints()[0] as i128,
                        d0.ints()[0] as i128,
                    );
                    if de == 0 {
                        return Err(NodeError::RangeDelta);
                    }
                    let span = li - st;
                    let n = if (span > 0) == (de > 0) && span != 0 {
                        (span + de - de.signum()) / de
                    } else {
                        0
                    };
                    if n as u64 > MAX_FOLDED_ELEMENTS {
                        return Err(NodeError::FoldTooLarge {
                            shape: vec![n as u64],
                        });
                    }
                    let v: Vec<i64> = (0..n).map(|i| (st + i * de) as i64).collect();
                    Tensor::from_i64s(s0.dtype, vec![n as u64], &v)
                } else {
                    let (st, li, de) = (s0.floats()[0], l0.floats()[0], d0.floats()[0]);
                    if de == 0.0 {
                        return Err(NodeError::RangeDelta);
                    }
                    let n = ((li - st) / de).ceil().max(0.0);
                    if n.is_nan() || n > MAX_FOLDED_ELEMENTS as f64 {
                        return Err(NodeError::FoldTooLarge {
                            shape: vec![u64::MAX],
                        });
                    }
                    let v: Vec<f64> = (0..n as u64).map(|i| st + i as f64 * de).collect();
                    Tensor::from_f64s(s0.dtype, vec![n as u64], &v)
                }
            }
            "Expand" => {
                let x = c(0)?;
                let shape = to_u64s("shape", &c(1)?.ints())?;
                let n = numel(&shape)
                    .filter(|&n| n <= tensor::MAX_FOLDED_BYTES)
                    .ok_or_else(|| NodeError::FoldTooLarge {
                        shape: shape.clone(),
                    })?;
                // What `elementwise` would refuse, refused before the target is built.
                let out = tir_ir::shape::broadcast(&x.shape, &shape)?;
                let m = numel(&out).ok_or(NodeError::Overflow {
                    what: "the result shape",
                })?;
                if m > MAX_FOLDED_ELEMENTS {
                    return Err(NodeError::FoldTooLarge { shape: out });
                }
                // Only the target's shape matters: one zero byte an element.
                let target = Tensor {
                    dtype: DType::Bool,
                    shape,
                    data: vec![0; n as usize],
                };
                elementwise(&[&x, &target], |v| Ok(v[0]), Some(x.dtype))?
            }
            _ => return Ok(None),
        };
        Ok(Some(t))
    }
}

/// Folds ONNX Slice on a constant, with the IR's slice semantics (`docs/ir.md` 6.14).
fn slice_const(x: &Tensor, s: &Slice) -> R<Tensor> {
    let rank = x.shape.len();
    let mut start = vec![0i128; rank];
    let mut step = vec![1i128; rank];
    let mut shape = x.shape.clone();
    for k in 0..s.starts.len() {
        let ax = norm_axis(s.axes[k], rank)?;
        let d = x.shape[ax] as i128;
        let t = s.steps[k] as i128;
        let fix = |v: i64| {
            let v = v as i128;
            if v < 0 {
                v + d
            } else {
                v
            }
        };
        let (mut b, mut e) = (fix(s.starts[k]), fix(s.ends[k]));
        let len = if t > 0 {
            b = b.clamp(0, d);
            e = e.clamp(0, d);
            ((e - b + t - 1) / t).max(0)
        } else {
            b = b.clamp(-1, d - 1);
            e = e.clamp(-1, d - 1);
            ((b - e + (-t) - 1) / (-t)).max(0)
        };
        start[ax] = b;
        step[ax] = t;
        shape[ax] = len as u64;
    }
    let st = x.strides();
    x.gather_elems(shape, |o| {
        (0..rank)
            .map(|k| (start[k] + o[k] as i128 * step[k]) as usize * st[k])
            .sum()
    })
    .map_err(NodeError::from)
}

/// Evaluates `f` element-wise over inputs broadcast together (NumPy rules).
fn elementwise(
    ins: &[&Tensor],
    mut f: impl FnMut(&[Num]) -> R<Num>,
    out_dtype: Option<DType>,
) -> R<Tensor> {
    let mut shape: Vec<u64> = Vec::new();
    for t in ins {
        shape = tir_ir::shape::broadcast(&shape, &t.shape)?;
    }
    let n = numel(&shape).ok_or(NodeError::Overflow {
        what: "the result shape",
    })?;
    if n > MAX_FOLDED_ELEMENTS {
        return Err(NodeError::FoldTooLarge { shape });
    }
    let strs: Vec<Vec<usize>> = ins
        .iter()
        .map(|t| {
            // Strides aligned to the result's rank; broadcast axes get stride 0.
            let s = strides(&t.shape);
            let pad = shape.len() - t.shape.len();
            (0..shape.len())
                .map(|k| {
                    if k < pad || t.shape[k - pad] == 1 {
                        0
                    } else {
                        s[k - pad]
                    }
                })
                .collect()
        })
        .collect();
    let mut out = Vec::with_capacity(n as usize);
    let mut err = None;
    let mut args = vec![Num::I(0); ins.len()];
    tensor::for_each_index(&shape, |idx| {
        if err.is_some() {
            return;
        }
        for (j, t) in ins.iter().enumerate() {
            let off: usize = idx
                .iter()
                .zip(&strs[j])
                .map(|(&i, &s)| i as usize * s)
                .sum();
            args[j] = t.get(off);
        }
        match f(&args) {
            Ok(v) => out.push(v),
            Err(e) => err = Some(e),
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    let dtype = out_dtype.unwrap_or(ins[0].dtype);
    if out.iter().all(|v| matches!(v, Num::I(_))) {
        let v: Vec<i64> = out
            .iter()
            .map(|v| match v {
                Num::I(i) => *i,
                Num::F(f) => *f as i64,
            })
            .collect();
        Ok(Tensor::from_i64s(dtype, shape, &v))
    } else {
        let v: Vec<f64> = out.iter().map(|v| v.f64()).collect();
        Ok(Tensor::from_f64s(dtype, shape, &v))
    }
}
