//! The linear quantization operators as compositions of f32 IR ops: DequantizeLinear,
//! QuantizeLinear, DynamicQuantizeLinear, QLinearMatMul, MatMulInteger and ConvInteger. Scales
//! and zero points must be constants (initializers, or bound with `tirc import --bind`); they
//! are shaped for broadcasting at import (per tensor, per axis, or repeated over blocks).
//!
//! The integer products of QLinearMatMul, MatMulInteger and ConvInteger are computed by the
//! f32 matmul and conv kernels, which is exact while every partial sum stays below 2^24: the
//! importer checks that bound from the reduction length and the operands' ranges and refuses
//! past it. Rounding is `round` (half to even, as `np.rint`), saturation a `clip` before the
//! cast, as ONNX's reference computes them.

use super::attrs::{norm_axis, Attrs};
use super::{Importer, Val, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::{self, Tensor};
use std::rc::Rc;
use tir_ir::{BinaryOp, DType, Op, ReduceKind, UnaryOp, Value};

/// Integers up to this magnitude are exact in f32.
const F32_EXACT: f64 = (1u64 << 24) as f64;

fn refuse(op: &'static str, problem: impl Into<String>) -> NodeError {
    NodeError::Composite {
        op,
        problem: problem.into(),
    }
}

fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: None,
    }
}

/// The range of a quantized integer type.
fn int_range(op: &'static str, d: DType) -> R<(f64, f64)> {
    Ok(match d {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        other => {
            return Err(refuse(
                op,
                format!("quantized type {other} is not supported (u8, i8, i32)"),
            ))
        }
    })
}

/// Rounds `v` to f16 when the scales are f16: the reference computes in the scales' type.
fn in_type(d: DType, v: f64) -> f64 {
    match d {
        DType::F16 => half::f16::from_f64(v).to_f64(),
        _ => v as f32 as f64,
    }
}

impl Importer {
    fn q_push(&mut self, op: Op, operands: &[Value]) -> R<Value> {
        let name = self.em.fresh();
        Ok(self.em.push(op, operands, vec![name])?[0])
    }

    fn q_const(&mut self, node: &NodeProto, what: &str, t: Tensor) -> Value {
        let hint = format!("{}.{what}", node.output.first().map_or("c", |s| s));
        self.const_value(&hint, t)
    }

    /// A scale or zero point as an f32 constant broadcasting against `xs`: per tensor (one
    /// element), per axis (1-D along `axis`), or blocked (`x`'s rank, `axis` holding one
    /// entry per `block` elements, repeated here).
    fn q_param(
        &mut self,
        node: &NodeProto,
        op: &'static str,
        what: &str,
        t: &Tensor,
        xs: &[u64],
        (axis, block): (i64, i64),
    ) -> R<Value> {
        let v = t.floats();
        if v.len() == 1 {
            return Ok(self.q_const(node, what, Tensor::from_f64s(DType::F32, vec![], &v)));
        }
        let axis = norm_axis(axis, xs.len())?;
        let bad = || {
            refuse(
                op,
                format!(
                    "{what} of shape {:?} fits neither per-axis nor blocked quantization of {xs:?} (axis {axis}, block_size {block})",
                    t.shape
                ),
            )
        };
        if block <= 0 {
            if t.shape.len() != 1 || t.shape[0] != xs[axis] {
                return Err(bad());
            }
            let mut s = vec![1u64; xs.len()];
            s[axis] = xs[axis];
            return Ok(self.q_const(node, what, Tensor::from_f64s(DType::F32, s, &v)));
        }
        let b = block as u64;
        let fits = t.shape.len() == xs.len()
            && (0..xs.len()).all(|d| {
                if d == axis {
                    t.shape[d] == xs[d].div_ceil(b)
                } else {
                    t.shape[d] == xs[d]
                }
            });
        if !fits {
            return Err(bad());
        }
        let ts = t.strides();
        let mut full = Vec::new();
        tensor::for_each_index(xs, |i| {
            let at: usize = i
                .iter()
                .enumerate()
                .map(|(d, &c)| (if d == axis { c / b } else { c }) as usize * ts[d])
                .sum();
            full.push(v[at]);
        });
        Ok(self.q_const(
            node,
            what,
            Tensor::from_f64s(DType::F32, xs.to_vec(), &full),
        ))
    }

    /// Input `i`, a scale (`float`, f32 only) or zero point, shaped by [`Importer::q_param`]
    /// when constant; computed at run time it must hold one element and becomes an f32
    /// scalar. `None` when absent, or a zero point that is all zeros.
    fn q_param_in(
        &mut self,
        node: &NodeProto,
        op: &'static str,
        i: usize,
        float: bool,
        xs: &[u64],
        ax: (i64, i64),
    ) -> R<Option<Value>> {
        let what = if float { "scale" } else { "zero_point" };
        let v = match self.opt_in(node, i)? {
            None => return Ok(None),
            Some(Val::Const(t)) => {
                if float && t.dtype != DType::F32 {
                    return Err(refuse(
                        op,
                        format!("a {} scale is not supported (f32 only)", t.dtype),
                    ));
                }
                if !float && t.floats().iter().all(|&f| f == 0.0) {
                    return Ok(None);
                }
                return self.q_param(node, op, what, &t, xs, ax).map(Some);
            }
            Some(_) => self.in_value(node, i)?,
        };
        let ty = self.em.ty(v)?.clone();
        if tensor::numel(&ty.shape) != Some(1) || (float && ty.dtype != DType::F32) {
            return Err(refuse(
                op,
                format!("a {what} of more than one element must be a constant (an initializer, or bound with `tirc import --bind`), got {ty} computed at run time"),
            ));
        }
        let mut v = self.q_push(Op::reshape(vec![]), &[v])?;
        if ty.dtype != DType::F32 {
            v = self.q_push(Op::Cast { to: DType::F32 }, &[v])?;
        }
        Ok(Some(v))
    }

    /// DequantizeLinear: `(f32(x) - f32(zero_point)) * scale`.
    pub(super) fn dequantize_linear(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "DequantizeLinear";
        let x = self.in_value(node, 0)?;
        let ty = self.em.ty(x)?.clone();
        int_range(OP, ty.dtype)?;
        if let Some(d) = a.int("output_dtype")? {
            if d != 0 && tensor::dtype_from_onnx(d)? != DType::F32 {
                return Err(refuse(OP, "an output type other than f32 is not supported"));
            }
        }
        let ax = (
            a.int("axis")?.unwrap_or(1),
            a.int("block_size")?.unwrap_or(0),
        );
        let xs = &ty.shape;
        let s = self.q_param_in(node, OP, 1, true, xs, ax)?;
        let s = s.ok_or(NodeError::MissingInput {
            index: 1,
            what: Some("scale"),
        })?;
        let z = self.q_param_in(node, OP, 2, false, xs, ax)?;
        let mut v = self.q_push(Op::Cast { to: DType::F32 }, &[x])?;
        if let Some(z) = z {
            v = self.q_push(bin(BinaryOp::Sub), &[v, z])?;
        }
        self.emit(node, bin(BinaryOp::Mul), &[v, s])
    }

    /// `clip(v, range of to)` cast to `to`, emitted as the node's output `index`.
    fn saturate_to(&mut self, node: &NodeProto, index: usize, v: Value, to: DType) -> R<Value> {
        let (min, max) = int_range("QuantizeLinear", to)?;
        let c = self.q_push(Op::Clip { min, max }, &[v])?;
        self.q_emit_nth(node, index, Op::Cast { to }, &[c])
    }

    fn q_emit_nth(&mut self, node: &NodeProto, index: usize, op: Op, ops: &[Value]) -> R<Value> {
        let out = node.output.get(index).cloned().unwrap_or_default();
        let name = if self.graph_outputs.contains(&out) {
            self.em.unique(&out)
        } else {
            self.em.fresh()
        };
        let r = self.em.push(op, ops, vec![name])?[0];
        if !out.is_empty() {
            self.env.insert(out, Val::Ir(r));
        }
        Ok(r)
    }

    /// QuantizeLinear to u8 or i8: `saturate(round(x / scale) + zero_point)`.
    pub(super) fn quantize_linear(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "QuantizeLinear";
        let x = self.in_value(node, 0)?;
        let ty = self.em.ty(x)?.clone();
        if ty.dtype != DType::F32 {
            return Err(refuse(
                OP,
                format!("a {} input is not supported (f32 only)", ty.dtype),
            ));
        }
        let zp_type = self.opt_in(node, 2)?.map(|z| self.dtype_of(&z));
        let to = match (zp_type, a.int("output_dtype")?.filter(|&d| d != 0)) {
            (Some(z), _) => z,
            (None, Some(d)) => tensor::dtype_from_onnx(d)?,
            (None, None) => DType::U8,
        };
        if !matches!(to, DType::U8 | DType::I8) {
            return Err(refuse(
                OP,
                format!("quantizing to {to} is not supported (u8, i8)"),
            ));
        }
        let ax = (
            a.int("axis")?.unwrap_or(1),
            a.int("block_size")?.unwrap_or(0),
        );
        let xs = &ty.shape;
        let s = self.q_param_in(node, OP, 1, true, xs, ax)?;
        let s = s.ok_or(NodeError::MissingInput {
            index: 1,
            what: Some("scale"),
        })?;
        let z = self.q_param_in(node, OP, 2, false, xs, ax)?;
        let q = self.q_push(bin(BinaryOp::Div), &[x, s])?;
        let mut q = self.q_push(Op::Unary(UnaryOp::Round), &[q])?;
        if let Some(z) = z {
            q = self.q_push(bin(BinaryOp::Add), &[q, z])?;
        }
        self.saturate_to(node, 0, q, to)?;
        Ok(())
    }

    /// DynamicQuantizeLinear: the u8 scale and zero point covering `[min(0, x), max(0, x)]`,
    /// and `x` quantized with them (ONNX's reference, step by step in f32).
    pub(super) fn dynamic_quantize_linear(&mut self, node: &NodeProto) -> R<()> {
        const OP: &str = "DynamicQuantizeLinear";
        let x = self.in_value(node, 0)?;
        let ty = self.em.ty(x)?.clone();
        if ty.dtype != DType::F32 {
            return Err(refuse(
                OP,
                format!("a {} input is not supported (f32 only)", ty.dtype),
            ));
        }
        if tensor::numel(&ty.shape) == Some(0) {
            return Err(refuse(OP, "an empty input has no range"));
        }
        let all = |kind| Op::Reduce {
            kind,
            axes: vec![],
            keepdims: false,
        };
        let k = |me: &mut Self, what: &str, v: f64| {
            me.q_const(node, what, Tensor::from_f64s(DType::F32, vec![], &[v]))
        };
        let zero = k(self, "zero", 0.0);
        let mx = self.q_push(all(ReduceKind::Max), &[x])?;
        let mx = self.q_push(bin(BinaryOp::Max), &[mx, zero])?;
        let mn = self.q_push(all(ReduceKind::Min), &[x])?;
        let mn = self.q_push(bin(BinaryOp::Min), &[mn, zero])?;
        let span = self.q_push(bin(BinaryOp::Sub), &[mx, mn])?;
        // max == min only when both are 0 (x is all zeros): the reference takes a span of 1.
        let flat = self.q_push(Op::Compare(tir_ir::CompareOp::Equal), &[mx, mn])?;
        let one = k(self, "one", 1.0);
        let span = self.q_push(Op::Where, &[flat, one, span])?;
        let q = k(self, "qmax", 255.0);
        let scale = self.q_push(bin(BinaryOp::Div), &[span, q])?;
        let shifted = self.q_push(bin(BinaryOp::Div), &[mn, scale])?;
        let izp = self.q_push(bin(BinaryOp::Sub), &[zero, shifted])?;
        let izp = self.q_push(
            Op::Clip {
                min: 0.0,
                max: 255.0,
            },
            &[izp],
        )?;
        let zpi = self.q_push(Op::Unary(UnaryOp::Round), &[izp])?;
        let y = self.q_push(bin(BinaryOp::Div), &[x, scale])?;
        let y = self.q_push(Op::Unary(UnaryOp::Round), &[y])?;
        let y = self.q_push(bin(BinaryOp::Add), &[y, zpi])?;
        self.saturate_to(node, 0, y, DType::U8)?;
        self.q_emit_nth(node, 1, Op::reshape(vec![]), &[scale])?;
        self.q_emit_nth(node, 2, Op::Cast { to: DType::U8 }, &[zpi])?;
        Ok(())
    }

    /// An integer operand minus its (per-tensor) zero point, as exact f32, and the largest
    /// magnitude it can take: a constant is folded and measured, a run-time value is cast
    /// and subtracted and bounded by its type's range.
    fn centred(
        &mut self,
        node: &NodeProto,
        op: &'static str,
        i: usize,
        zp_at: usize,
    ) -> R<(Value, f64)> {
        let zp = match self.const_in(node, zp_at, "zero_point")? {
            None => 0.0,
            Some(z) if z.numel() == 1 => z.floats()[0],
            Some(z) => {
                return Err(refuse(
                    op,
                    format!(
                        "a zero point of shape {:?} is not supported (per tensor only)",
                        z.shape
                    ),
                ))
            }
        };
        if let Some(Val::Const(t)) = self.opt_in(node, i)? {
            int_range(op, t.dtype)?;
            let v: Vec<f64> = t.floats().iter().map(|&x| x - zp).collect();
            let m = v.iter().fold(0.0f64, |m, &x| m.max(x.abs()));
            let c = self.q_const(
                node,
                "centred",
                Tensor::from_f64s(DType::F32, t.shape.clone(), &v),
            );
            return Ok((c, m));
        }
        let x = self.in_value(node, i)?;
        let d = self.em.ty(x)?.dtype;
        let (lo, hi) = int_range(op, d)?;
        let mut v = self.q_push(Op::Cast { to: DType::F32 }, &[x])?;
        if zp != 0.0 {
            let z = self.q_const(
                node,
                "zero_point",
                Tensor::from_f64s(DType::F32, vec![], &[zp]),
            );
            v = self.q_push(bin(BinaryOp::Sub), &[v, z])?;
        }
        Ok((v, (hi - zp).abs().max((lo - zp).abs())))
    }

    /// Refuses an integer product whose partial sums could pass 2^24 (f32 would round).
    fn check_exact(op: &'static str, terms: u64, a: f64, b: f64) -> R<()> {
        let worst = terms as f64 * a * b;
        if worst >= F32_EXACT {
            return Err(refuse(
                op,
                format!("sums of {terms} products of magnitude up to {a} x {b} can reach {worst}, past the 2^24 up to which the f32 kernels compute integers exactly"),
            ));
        }
        Ok(())
    }

    /// MatMulInteger: `(a - a_zero_point) @ (b - b_zero_point)` in i32.
    pub(super) fn matmul_integer(&mut self, node: &NodeProto) -> R<()> {
        const OP: &str = "MatMulInteger";
        let (a, ma) = self.centred(node, OP, 0, 2)?;
        let (b, mb) = self.centred(node, OP, 1, 3)?;
        let k = self.em.ty(a)?.shape.last().copied().unwrap_or(1);
        Self::check_exact(OP, k, ma, mb)?;
        let c = self.q_push(Op::MatMul { activation: None }, &[a, b])?;
        self.emit(node, Op::Cast { to: DType::I32 }, &[c])
    }

    /// QLinearMatMul: `saturate(round((a - a_zp) @ (b - b_zp) * (a_scale * b_scale / y_scale)
    /// + y_zp))`, the multiplier folded in the scales' type as the reference does.
    pub(super) fn qlinear_matmul(&mut self, node: &NodeProto) -> R<()> {
        const OP: &str = "QLinearMatMul";
        let scale = |me: &Self, i: usize| -> R<(f64, DType)> {
            let s = me.req_const_in(node, i, "scale")?;
            if s.numel() != 1 || !matches!(s.dtype, DType::F32 | DType::F16) {
                return Err(refuse(
                    OP,
                    format!("a scale of shape {:?} and type {} is not supported (one f32 or f16 per tensor)", s.shape, s.dtype),
                ));
            }
            Ok((s.floats()[0], s.dtype))
        };
        let ((sa, da), (sb, _), (sy, _)) = (scale(self, 1)?, scale(self, 4)?, scale(self, 6)?);
        let m = in_type(da, in_type(da, sa * sb) / sy);
        let (a, ma) = self.centred(node, OP, 0, 2)?;
        let (b, mb) = self.centred(node, OP, 3, 5)?;
        let k = self.em.ty(a)?.shape.last().copied().unwrap_or(1);
        Self::check_exact(OP, k, ma, mb)?;
        let yzp = self.req_const_in(node, 7, "y_zero_point")?;
        if yzp.numel() != 1 {
            return Err(refuse(OP, "y_zero_point must be one value (per tensor)"));
        }
        let to = yzp.dtype;
        if to != DType::U8 {
            // Checked against the suite: for i8, ONNX 1.19's reference wraps out-of-range
            // results (`astype`) where the definition saturates, so the two disagree.
            return Err(refuse(
                OP,
                format!("a {to} result is not supported (u8 only): ONNX's definition saturates, its reference implementation wraps, and tir will not pick one silently"),
            ));
        }
        let c = self.q_push(Op::MatMul { activation: None }, &[a, b])?;
        let mc = self.q_const(
            node,
            "multiplier",
            Tensor::from_f64s(DType::F32, vec![], &[m]),
        );
        let mut d = self.q_push(bin(BinaryOp::Mul), &[c, mc])?;
        let z = yzp.floats()[0];
        if z != 0.0 {
            let zc = self.q_const(
                node,
                "y_zero_point",
                Tensor::from_f64s(DType::F32, vec![], &[z]),
            );
            d = self.q_push(bin(BinaryOp::Add), &[d, zc])?;
        }
        let r = self.q_push(Op::Unary(UnaryOp::Round), &[d])?;
        self.saturate_to(node, 0, r, to)?;
        Ok(())
    }

    /// ConvInteger: the f32 Conv of the centred operands (the weights constant), cast to i32.
    pub(super) fn conv_integer(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "ConvInteger";
        let (x, mx) = self.centred(node, OP, 0, 2)?;
        let w = self.req_const_in(node, 1, "w")?;
        let wz = match self.const_in(node, 3, "w_zero_point")? {
            None => 0.0,
            Some(z) if z.numel() == 1 => z.floats()[0],
            Some(_) => return Err(refuse(OP, "a per-channel w_zero_point is not supported")),
        };
        int_range(OP, w.dtype)?;
        let wv: Vec<f64> = w.floats().iter().map(|&v| v - wz).collect();
        let mw = wv.iter().fold(0.0f64, |m, &v| m.max(v.abs()));
        let terms: u64 = w.shape.iter().skip(1).product();
        Self::check_exact(OP, terms, mx, mw)?;
        let hint = node
            .output
            .first()
            .map_or("conv_integer", |s| s)
            .to_string();
        let (xin, win, out) = (
            format!("{hint}.x_centred"),
            format!("{hint}.w_centred"),
            format!("{hint}.conv"),
        );
        self.env.insert(xin.clone(), Val::Ir(x));
        self.env.insert(
            win.clone(),
            Val::Const(Rc::new(Tensor::from_f64s(DType::F32, w.shape.clone(), &wv))),
        );
        let inner = NodeProto {
            input: vec![xin, win],
            output: vec![out.clone()],
            op_type: Some("Conv".into()),
            ..Default::default()
        };
        self.conv(&inner, a)?;
        let c = self.value(&out)?;
        self.emit(node, Op::Cast { to: DType::I32 }, &[c])
    }
}
