//! Normalisations and reductions: BatchNormalization (inference form), LayerNormalization,
//! RMSNormalization (decomposed),
//! Softmax and LogSoftmax (opset < 13's 2-D coercion included), the Reduce* family.

use super::attrs::{norm_axis, Attrs};
use super::{Importer, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::Tensor;
use tir_ir::{BinaryOp, DType, Op, ReduceKind, UnaryOp};

impl Importer {
    pub(super) fn batch_norm(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        if self.opset >= 14 && a.int("training_mode")?.unwrap_or(0) != 0 {
            return self.batch_norm_training(node, a);
        }
        self.only_first_outputs(node, 1)?;
        if a.int("training_mode")?.unwrap_or(0) != 0 {
            return Err(NodeError::Training { expected: "0" });
        }
        let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
        let mut ops = Vec::new();
        for i in 0..5 {
            ops.push(self.in_value(node, i)?);
        }
        self.emit(node, Op::BatchNorm { epsilon }, &ops)
    }

    pub(super) fn layer_norm(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        if self.only_first_outputs(node, 1).is_err() {
            return self.layer_norm_stats(node, a);
        }
        let axis = a.int("axis")?.unwrap_or(-1);
        let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
        let x = self.in_value(node, 0)?;
        let s = self.in_value(node, 1)?;
        let mut ops = vec![x, s];
        ops.extend(self.opt_in_value(node, 2)?);
        self.emit(node, Op::LayerNorm { axis, epsilon }, &ops)
    }

    /// RMSNormalization (opset 23): `x / sqrt(mean(x², axes from axis on) + epsilon) * scale`,
    /// decomposed into mul, reduce_mean, add, sqrt, div and mul (each op its own kernel; the
    /// statistic is the mean in f64 as `reduce_mean` takes it). `stash_type` 1 (float32) only.
    pub(super) fn rms_norm(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        self.only_first_outputs(node, 1)?;
        if let Some(t) = a.int("stash_type")? {
            if t != 1 {
                return Err(NodeError::StashType { value: t });
            }
        }
        let x = self.req_in(node, 0)?;
        let rank = self.rank_of(&x);
        let axis = norm_axis(a.int("axis")?.unwrap_or(-1), rank)?;
        let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
        let xv = self.in_value(node, 0)?;
        let scale = self.in_value(node, 1)?;
        let bin = |op| Op::Binary {
            op,
            activation: None,
        };
        let sq = self.em.fresh();
        let sq = self.em.push(bin(BinaryOp::Mul), &[xv, xv], vec![sq])?[0];
        let ms = self.em.fresh();
        let axes = (axis as i64..rank as i64).collect();
        let reduce = Op::Reduce {
            kind: ReduceKind::Mean,
            axes,
            keepdims: true,
        };
        let ms = self.em.push(reduce, &[sq], vec![ms])?[0];
        let eps = Tensor::from_f64s(DType::F32, vec![], &[epsilon]);
        let hint = format!("{}.epsilon", node.output.first().map_or("rms", |s| s));
        let eps = self.const_value(&hint, eps);
        let var = self.em.fresh();
        let var = self.em.push(bin(BinaryOp::Add), &[ms, eps], vec![var])?[0];
        let rms = self.em.fresh();
        let rms = self.em.push(Op::Unary(UnaryOp::Sqrt), &[var], vec![rms])?[0];
        let n = self.em.fresh();
        let n = self.em.push(bin(BinaryOp::Div), &[xv, rms], vec![n])?[0];
        self.emit(node, bin(BinaryOp::Mul), &[n, scale])
    }

    /// ReduceMean, ReduceSum, ReduceMax, ... : `axes` is an input from opset 13 for ReduceSum
    /// and from opset 18 for the others, an attribute before.
    pub(super) fn reduce(&mut self, node: &NodeProto, a: &Attrs, kind: ReduceKind) -> R<()> {
        let x = self.req_in(node, 0)?;
        let rank = self.rank_of(&x);
        let keepdims = a.int("keepdims")?.unwrap_or(1) != 0;
        let axes_input_from = if kind == ReduceKind::Sum { 13 } else { 18 };
        let axes = self
            .axes_param(node, a, axes_input_from)?
            .unwrap_or_default();
        let axes = if axes.is_empty() {
            if a.int("noop_with_empty_axes")?.unwrap_or(0) != 0 {
                self.alias(node, x);
                return Ok(());
            }
            (0..rank as i64).collect()
        } else {
            axes
        };
        let x = self.in_value(node, 0)?;
        self.emit(
            node,
            Op::Reduce {
                kind,
                axes,
                keepdims,
            },
            &[x],
        )
    }

    /// Softmax, or LogSoftmax with `log`.
    pub(super) fn softmax(&mut self, node: &NodeProto, a: &Attrs, log: bool) -> R<()> {
        let op = |axis| {
            if log {
                Op::LogSoftmax { axis }
            } else {
                Op::Softmax { axis }
            }
        };
        let x = self.req_in(node, 0)?;
        let xs = self.sym_shape_of(&x);
        let legacy = self.opset < 13;
        let axis = a.int("axis")?.unwrap_or(if legacy { 1 } else { -1 });
        let ax = if xs.is_empty() {
            0
        } else {
            norm_axis(axis, xs.len())?
        };
        let xv = self.in_value(node, 0)?;
        if !legacy || ax + 1 >= xs.len() {
            return self.emit(node, op(axis), &[xv]);
        }
        // Before opset 13, Softmax coerces its input to 2-D [prod(d[..axis]), prod(d[axis..])]
        // and normalises over the second axis: reshape, softmax, reshape back.
        let xs = super::static_dims(&xs, "Softmax over the trailing axes (before opset 13)")?;
        let outer: u64 = xs[..ax].iter().product();
        let inner: u64 = xs[ax..].iter().product();
        let flat = self.em.fresh();
        let f = self.em.push(
            Op::reshape(vec![outer as i64, inner as i64]),
            &[xv],
            vec![flat],
        )?[0];
        let sm = self.em.fresh();
        let s = self.em.push(op(-1), &[f], vec![sm])?[0];
        let shape = xs.iter().map(|&d| d as i64).collect();
        self.emit(node, Op::reshape(shape), &[s])
    }
}
