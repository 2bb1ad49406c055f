//! Operators imported as compositions of IR ops that already have checked kernels: the
//! parametric activations (LeakyRelu, Elu, Selu, Celu, Mish, Swish, Gelu's tanh form), the
//! variadic Sum and Mean, GlobalMaxPool, LpNormalization, InstanceNormalization,
//! GroupNormalization, MeanVarianceNormalization, LayerNormalization's Mean and InvStdDev
//! outputs, DepthToSpace, SpaceToDepth, Tile, ThresholdedRelu, LRN, BatchNormalization in
//! training mode, 1-D MaxPool/AveragePool (through the 2-D ops), NegativeLogLikelihoodLoss
//! and SoftmaxCrossEntropyLoss with constant targets, CenterCropPad, RotaryEmbedding,
//! AffineGrid; and Trilu, an IR op of its own, whose
//! constant `k` input becomes an attribute.
//!
//! Each composition follows the ONNX reference (or the operator's function body) term by term,
//! so it rounds as the reference does up to the order of f32 operations.

use super::attrs::{norm_axis, Attrs};
use super::{Importer, R};
use crate::error::NodeError;
use crate::proto::{AttributeProto, NodeProto};
use crate::tensor::Tensor;
use tir_ir::op::{PadMode, Pool2d, Slice};
use tir_ir::{BinaryOp, Op, ReduceKind, UnaryOp, Value};

fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: None,
    }
}

fn refuse(op: &'static str, problem: impl Into<String>) -> NodeError {
    NodeError::Composite {
        op,
        problem: problem.into(),
    }
}

impl Importer {
    /// One intermediate op with a single result under a fresh name.
    fn push1(&mut self, op: Op, operands: &[Value]) -> R<Value> {
        let name = self.em.fresh();
        Ok(self.em.push(op, operands, vec![name])?[0])
    }

    fn bin1(&mut self, op: BinaryOp, a: Value, b: Value) -> R<Value> {
        self.push1(bin(op), &[a, b])
    }

    fn un1(&mut self, u: UnaryOp, a: Value) -> R<Value> {
        self.push1(Op::Unary(u), &[a])
    }

    /// A rank-0 constant of `like`'s element type, named after the node's first output.
    fn scalar_like(&mut self, node: &NodeProto, like: Value, what: &str, v: f64) -> Value {
        let dtype = self.em.sym_ty(like).dtype;
        let hint = format!("{}.{what}", node.output.first().map_or("c", |s| s));
        self.const_value(&hint, Tensor::from_f64s(dtype, vec![], &[v]))
    }

    /// The node's first input and its static shape; below rank `min_rank` it is refused,
    /// naming `op`.
    fn input_of_rank(
        &mut self,
        node: &NodeProto,
        op: &'static str,
        min_rank: usize,
    ) -> R<(Value, Vec<u64>)> {
        let x = self.in_value(node, 0)?;
        let xs = self.shape_of_value(x)?;
        if xs.len() < min_rank {
            return Err(refuse(
                op,
                format!("the input needs rank {min_rank} or more, got {}", xs.len()),
            ));
        }
        Ok((x, xs))
    }

    fn shape_of_value(&self, v: Value) -> R<Vec<u64>> {
        Ok(self.em.ty(v)?.shape.clone())
    }

    /// Emits a single-result `op` as the node's output `index` (an extra output such as
    /// LayerNormalization's Mean), named like [`Importer::emit`] names the first.
    fn emit_output(
        &mut self,
        node: &NodeProto,
        index: usize,
        op: Op,
        operands: &[Value],
    ) -> R<Value> {
        let out = node.output.get(index).cloned().unwrap_or_default();
        let name = if self.graph_outputs.contains(&out) {
            self.em.unique(&out)
        } else {
            self.em.fresh()
        };
        let r = self.em.push(op, operands, vec![name])?[0];
        if !out.is_empty() {
            self.env.insert(out, super::Val::Ir(r));
        }
        Ok(r)
    }

    /// The rank of the node's first input, if it has one.
    pub(super) fn rank_of_input(&self, node: &NodeProto) -> Option<usize> {
        let v = self.opt_in(node, 0).ok()??;
        Some(self.shape_of(&v).ok()?.len())
    }

    /// Whether the node's output `index` exists and something reads it.
    fn output_used(&self, node: &NodeProto, index: usize) -> bool {
        node.output
            .get(index)
            .is_some_and(|o| !o.is_empty() && self.used.contains(o))
    }

    /// LeakyRelu: `prelu` with the constant slope `alpha` (default 0.01).
    pub(super) fn leaky_relu(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let alpha = a.float("alpha")?.unwrap_or(0.01);
        let x = self.in_value(node, 0)?;
        let slope = self.scalar_like(node, x, "alpha", alpha);
        self.emit(node, Op::Prelu, &[x, slope])
    }

    /// The two terms of `max(x, 0) + alpha * (exp(min(x, 0)) - 1)`: `x` above zero,
    /// `alpha (e^x - 1)` below (each branch exact: the other term is a zero). Elu, and Selu
    /// scaled by `gamma`.
    fn elu_terms(&mut self, node: &NodeProto, x: Value, alpha: f64) -> R<[Value; 2]> {
        let zero = self.scalar_like(node, x, "zero", 0.0);
        let one = self.scalar_like(node, x, "one", 1.0);
        let alpha = self.scalar_like(node, x, "alpha", alpha);
        let pos = self.bin1(BinaryOp::Max, x, zero)?;
        let neg = self.bin1(BinaryOp::Min, x, zero)?;
        let e = self.un1(UnaryOp::Exp, neg)?;
        let em1 = self.bin1(BinaryOp::Sub, e, one)?;
        let s = self.bin1(BinaryOp::Mul, alpha, em1)?;
        Ok([pos, s])
    }

    pub(super) fn elu(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let alpha = a.float("alpha")?.unwrap_or(1.0);
        let x = self.in_value(node, 0)?;
        let terms = self.elu_terms(node, x, alpha)?;
        self.emit(node, bin(BinaryOp::Add), &terms)
    }

    pub(super) fn selu(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let alpha = a.float("alpha")?.unwrap_or(1.673_263_192_176_818_8);
        let gamma = a.float("gamma")?.unwrap_or(1.050_701_022_148_132_3);
        let x = self.in_value(node, 0)?;
        let [pos, s] = self.elu_terms(node, x, alpha)?;
        let y = self.bin1(BinaryOp::Add, pos, s)?;
        let gamma = self.scalar_like(node, x, "gamma", gamma);
        self.emit(node, bin(BinaryOp::Mul), &[gamma, y])
    }

    /// Celu: `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`, the ONNX definition.
    pub(super) fn celu(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let alpha = a.float("alpha")?.unwrap_or(1.0);
        if alpha == 0.0 {
            return Err(refuse("Celu", "alpha must not be 0"));
        }
        let x = self.in_value(node, 0)?;
        let zero = self.scalar_like(node, x, "zero", 0.0);
        let one = self.scalar_like(node, x, "one", 1.0);
        let al = self.scalar_like(node, x, "alpha", alpha);
        let pos = self.bin1(BinaryOp::Max, x, zero)?;
        let d = self.bin1(BinaryOp::Div, x, al)?;
        let e = self.un1(UnaryOp::Exp, d)?;
        let em1 = self.bin1(BinaryOp::Sub, e, one)?;
        let s = self.bin1(BinaryOp::Mul, al, em1)?;
        let neg = self.bin1(BinaryOp::Min, s, zero)?;
        self.emit(node, bin(BinaryOp::Add), &[pos, neg])
    }

    /// Mish: `x * tanh(softplus(x))`.
    pub(super) fn mish(&mut self, node: &NodeProto) -> R<()> {
        let x = self.in_value(node, 0)?;
        let sp = self.un1(UnaryOp::Softplus, x)?;
        let t = self.un1(UnaryOp::Tanh, sp)?;
        self.emit(node, bin(BinaryOp::Mul), &[x, t])
    }

    /// Swish (opset 24): `x * sigmoid(alpha * x)`.
    pub(super) fn swish(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let alpha = a.float("alpha")?.unwrap_or(1.0);
        let x = self.in_value(node, 0)?;
        let ax = if alpha == 1.0 {
            x
        } else {
            let al = self.scalar_like(node, x, "alpha", alpha);
            self.bin1(BinaryOp::Mul, al, x)?
        };
        let s = self.un1(UnaryOp::Sigmoid, ax)?;
        self.emit(node, bin(BinaryOp::Mul), &[x, s])
    }

    /// Gelu with `approximate = "tanh"`:
    /// `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`.
    pub(super) fn gelu_tanh(&mut self, node: &NodeProto) -> R<()> {
        let x = self.in_value(node, 0)?;
        let half = self.scalar_like(node, x, "half", 0.5);
        let one = self.scalar_like(node, x, "one", 1.0);
        let c = self.scalar_like(node, x, "cubic", 0.044_715);
        let k = self.scalar_like(
            node,
            x,
            "sqrt_2_over_pi",
            (2.0 / std::f64::consts::PI).sqrt(),
        );
        let x2 = self.bin1(BinaryOp::Mul, x, x)?;
        let x3 = self.bin1(BinaryOp::Mul, x2, x)?;
        let cx3 = self.bin1(BinaryOp::Mul, c, x3)?;
        let inner = self.bin1(BinaryOp::Add, x, cx3)?;
        let arg = self.bin1(BinaryOp::Mul, k, inner)?;
        let t = self.un1(UnaryOp::Tanh, arg)?;
        let onep = self.bin1(BinaryOp::Add, one, t)?;
        let hx = self.bin1(BinaryOp::Mul, half, x)?;
        self.emit(node, bin(BinaryOp::Mul), &[hx, onep])
    }

    /// Sum and Mean of one or more inputs, broadcast together: a chain of adds (Mean then
    /// divides by the count, as the reference does).
    pub(super) fn sum_mean(&mut self, node: &NodeProto, mean: bool) -> R<()> {
        let n = node.input.len();
        if n == 0 {
            return Err(NodeError::MissingInput {
                index: 0,
                what: None,
            });
        }
        if n == 1 {
            let x = self.req_in(node, 0)?;
            self.alias(node, x);
            return Ok(());
        }
        let mut acc = self.in_value(node, 0)?;
        for i in 1..n {
            let y = self.in_value(node, i)?;
            if i + 1 == n && !mean {
                return self.emit(node, bin(BinaryOp::Add), &[acc, y]);
            }
            acc = self.bin1(BinaryOp::Add, acc, y)?;
        }
        let count = self.scalar_like(node, acc, "count", n as f64);
        self.emit(node, bin(BinaryOp::Div), &[acc, count])
    }

    /// GlobalMaxPool: the maximum over every axis after the channels, kept as size 1.
    pub(super) fn global_max_pool(&mut self, node: &NodeProto) -> R<()> {
        let x = self.req_in(node, 0)?;
        let rank = self.shape_of(&x)?.len();
        if rank < 3 {
            return Err(refuse(
                "GlobalMaxPool",
                format!("the input needs rank 3 or more (N, C, spatial...), got {rank}"),
            ));
        }
        let x = self.in_value(node, 0)?;
        let reduce = Op::Reduce {
            kind: ReduceKind::Max,
            axes: (2..rank as i64).collect(),
            keepdims: true,
        };
        self.emit(node, reduce, &[x])
    }

    /// LpNormalization: `x / ||x||_p` along `axis` (p = 1 or 2).
    pub(super) fn lp_normalization(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let p = a.int("p")?.unwrap_or(2);
        let kind = match p {
            1 => ReduceKind::L1,
            2 => ReduceKind::L2,
            _ => return Err(refuse("LpNormalization", format!("p = {p} (only 1 and 2)"))),
        };
        let x = self.req_in(node, 0)?;
        let rank = self.shape_of(&x)?.len();
        let axis = norm_axis(a.int("axis")?.unwrap_or(-1), rank)?;
        let x = self.in_value(node, 0)?;
        let reduce = Op::Reduce {
            kind,
            axes: vec![axis as i64],
            keepdims: true,
        };
        let norm = self.push1(reduce, &[x])?;
        self.emit(node, bin(BinaryOp::Div), &[x, norm])
    }

    /// `(x - mean) / sqrt(var + epsilon)` over `axes` (kept as size 1), the variance being
    /// the mean of the squared deviations, as the references compute it. Returns the
    /// normalised value and `sqrt(var + epsilon)`; the mean is the node's output `mean_output`
    /// when that is given and used.
    fn standardize(
        &mut self,
        node: &NodeProto,
        x: Value,
        axes: Vec<i64>,
        epsilon: f64,
        mean_output: Option<usize>,
    ) -> R<(Value, Value)> {
        let mean_op = |axes: &Vec<i64>| Op::Reduce {
            kind: ReduceKind::Mean,
            axes: axes.clone(),
            keepdims: true,
        };
        let mean = match mean_output {
            Some(i) if self.output_used(node, i) => {
                self.emit_output(node, i, mean_op(&axes), &[x])?
            }
            _ => self.push1(mean_op(&axes), &[x])?,
        };
        let d = self.bin1(BinaryOp::Sub, x, mean)?;
        let d2 = self.bin1(BinaryOp::Mul, d, d)?;
        let var = self.push1(mean_op(&axes), &[d2])?;
        let eps = self.scalar_like(node, x, "epsilon", epsilon);
        let ve = self.bin1(BinaryOp::Add, var, eps)?;
        let sd = self.un1(UnaryOp::Sqrt, ve)?;
        let n = self.bin1(BinaryOp::Div, d, sd)?;
        Ok((n, sd))
    }

    /// LayerNormalization whose Mean or InvStdDev output is used: the normalised output is
    /// the `layer_norm` op; the statistics are computed beside it over the axes from `axis`
    /// on (kept as size 1). `stash_type` 1 (float32) only.
    pub(super) fn layer_norm_stats(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        if let Some(t) = a.int("stash_type")? {
            if t != 1 {
                return Err(NodeError::StashType { value: t });
            }
        }
        let axis_attr = a.int("axis")?.unwrap_or(-1);
        let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
        let xv = self.req_in(node, 0)?;
        let rank = self.shape_of(&xv)?.len();
        let axis = norm_axis(axis_attr, rank)?;
        let x = self.in_value(node, 0)?;
        let s = self.in_value(node, 1)?;
        let mut ops = vec![x, s];
        ops.extend(self.opt_in_value(node, 2)?);
        self.emit(
            node,
            Op::LayerNorm {
                axis: axis_attr,
                epsilon,
            },
            &ops,
        )?;
        let axes: Vec<i64> = (axis as i64..rank as i64).collect();
        let (_, sd) = self.standardize(node, x, axes, epsilon, Some(1))?;
        if self.output_used(node, 2) {
            self.emit_output(node, 2, Op::Unary(UnaryOp::Reciprocal), &[sd])?;
        }
        Ok(())
    }

    /// `v` (shape `[C]`) reshaped to `[C, 1, ..., 1]` so it broadcasts along axis 1 of a
    /// rank-`rank` tensor.
    fn per_channel(&mut self, v: Value, channels: u64, rank: usize) -> R<Value> {
        let mut shape = vec![channels as i64];
        shape.extend(std::iter::repeat_n(1, rank - 2));
        self.push1(Op::reshape(shape), &[v])
    }

    fn channel_operand(
        &mut self,
        node: &NodeProto,
        i: usize,
        op: &'static str,
        c: u64,
    ) -> R<Value> {
        let v = self.in_value(node, i)?;
        let s = self.shape_of_value(v)?;
        if s != [c] {
            return Err(refuse(
                op,
                format!("input {i} must have shape [{c}] (one per channel), got {s:?}"),
            ));
        }
        Ok(v)
    }

    /// InstanceNormalization: each (n, c) plane standardised over its spatial axes, then
    /// `* scale[c] + bias[c]`.
    pub(super) fn instance_norm(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
        let (x, xs) = self.input_of_rank(node, "InstanceNormalization", 3)?;
        let scale = self.channel_operand(node, 1, "InstanceNormalization", xs[1])?;
        let bias = self.channel_operand(node, 2, "InstanceNormalization", xs[1])?;
        let axes = (2..xs.len() as i64).collect();
        let (n, _) = self.standardize(node, x, axes, epsilon, None)?;
        let s = self.per_channel(scale, xs[1], xs.len())?;
        let b = self.per_channel(bias, xs[1], xs.len())?;
        let ns = self.bin1(BinaryOp::Mul, n, s)?;
        self.emit(node, bin(BinaryOp::Add), &[ns, b])
    }

    /// GroupNormalization (opset 21: scale and bias per channel): the channels split into
    /// `num_groups` groups, each group of each sample standardised, then `* scale + bias`.
    pub(super) fn group_norm(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "GroupNormalization";
        if let Some(t) = a.int("stash_type")? {
            if t != 1 {
                return Err(NodeError::StashType { value: t });
            }
        }
        if self.opset < 21 {
            return Err(refuse(
                OP,
                "opset 18's per-group scale and bias are not supported (opset 21 and later)",
            ));
        }
        let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
        let groups = a.req_int("num_groups")?;
        let (x, xs) = self.input_of_rank(node, OP, 3)?;
        let c = xs[1];
        if groups <= 0 || !c.is_multiple_of(groups as u64) {
            return Err(refuse(
                OP,
                format!("num_groups = {groups} does not divide the {c} channels"),
            ));
        }
        let scale = self.channel_operand(node, 1, OP, c)?;
        let bias = self.channel_operand(node, 2, OP, c)?;
        let grouped = self.push1(Op::reshape(vec![xs[0] as i64, groups, -1]), &[x])?;
        let (n, _) = self.standardize(node, grouped, vec![2], epsilon, None)?;
        let back = self.push1(Op::reshape(xs.iter().map(|&d| d as i64).collect()), &[n])?;
        let s = self.per_channel(scale, c, xs.len())?;
        let b = self.per_channel(bias, c, xs.len())?;
        let ns = self.bin1(BinaryOp::Mul, back, s)?;
        self.emit(node, bin(BinaryOp::Add), &[ns, b])
    }

    /// MeanVarianceNormalization, as its ONNX function body computes it:
    /// `(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)` over `axes` (default `[0, 2, 3]`).
    pub(super) fn mean_variance_norm(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.in_value(node, 0)?;
        let rank = self.shape_of_value(x)?.len();
        let axes = a.ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
        for &ax in &axes {
            norm_axis(ax, rank)?;
        }
        let mean_op = Op::Reduce {
            kind: ReduceKind::Mean,
            axes,
            keepdims: true,
        };
        let m = self.push1(mean_op.clone(), &[x])?;
        let m2 = self.bin1(BinaryOp::Mul, m, m)?;
        let x2 = self.bin1(BinaryOp::Mul, x, x)?;
        let ex2 = self.push1(mean_op, &[x2])?;
        let var = self.bin1(BinaryOp::Sub, ex2, m2)?;
        let sd = self.un1(UnaryOp::Sqrt, var)?;
        let eps = self.scalar_like(node, x, "epsilon", 1e-9);
        let sde = self.bin1(BinaryOp::Add, sd, eps)?;
        let d = self.bin1(BinaryOp::Sub, x, m)?;
        self.emit(node, bin(BinaryOp::Div), &[d, sde])
    }

    /// DepthToSpace (`mode` DCR or CRD) and SpaceToDepth on NCHW: reshape to 6-D, transpose,
    /// reshape back, as the ONNX definitions state them.
    pub(super) fn depth_space(&mut self, node: &NodeProto, a: &Attrs, to_space: bool) -> R<()> {
        let op: &'static str = if to_space {
            "DepthToSpace"
        } else {
            "SpaceToDepth"
        };
        let b = a.req_int("blocksize")?;
        let x = self.in_value(node, 0)?;
        let xs = self.shape_of_value(x)?;
        let [n, c, h, w] = match xs[..] {
            [n, c, h, w] => [n as i64, c as i64, h as i64, w as i64],
            _ => {
                return Err(refuse(
                    op,
                    format!(
                        "only rank-4 (NCHW) inputs are supported, got rank {}",
                        xs.len()
                    ),
                ))
            }
        };
        if b <= 0 {
            return Err(refuse(op, format!("blocksize must be positive, got {b}")));
        }
        let (shape6, perm, out) = if to_space {
            if c % (b * b) != 0 {
                return Err(refuse(
                    op,
                    format!(
                        "the {c} channels are not a multiple of blocksize² = {}",
                        b * b
                    ),
                ));
            }
            let mode = a.string("mode")?.unwrap_or_else(|| "DCR".into());
            let cb = c / (b * b);
            let out = vec![n, cb, h * b, w * b];
            match mode.as_str() {
                "DCR" => (vec![n, b, b, cb, h, w], vec![0, 3, 4, 1, 5, 2], out),
                "CRD" => (vec![n, cb, b, b, h, w], vec![0, 1, 4, 2, 5, 3], out),
                _ => {
                    return Err(NodeError::StringValue {
                        what: "mode",
                        value: mode,
                        text: " (DCR or CRD)",
                    })
                }
            }
        } else {
            if h % b != 0 || w % b != 0 {
                return Err(refuse(
                    op,
                    format!("the spatial size {h}x{w} is not a multiple of blocksize {b}"),
                ));
            }
            (
                vec![n, c, h / b, b, w / b, b],
                vec![0, 3, 5, 1, 2, 4],
                vec![n, c * b * b, h / b, w / b],
            )
        };
        let r = self.push1(Op::reshape(shape6), &[x])?;
        let t = self.push1(Op::Transpose { perm }, &[r])?;
        self.emit(node, Op::reshape(out), &[t])
    }

    /// Tile with constant `repeats`: along each axis, the value concatenated with itself
    /// `repeats[axis]` times (a repeat of 0, an empty result, is refused).
    pub(super) fn tile(&mut self, node: &NodeProto) -> R<()> {
        let reps = self.req_const_in(node, 1, "repeats")?.ints();
        let mut v = self.in_value(node, 0)?;
        let rank = self.shape_of_value(v)?.len();
        if reps.len() != rank {
            return Err(refuse(
                "Tile",
                format!("{} repeats for a rank-{rank} input", reps.len()),
            ));
        }
        if reps.iter().any(|&r| r < 1) {
            return Err(NodeError::Negative {
                what: "repeats (zero or negative: an empty result)",
                values: reps,
            });
        }
        let last = reps.iter().rposition(|&r| r > 1);
        let Some(last) = last else {
            // Every repeat is 1: the value itself, through a copy so the output has an op.
            let shape = self.shape_of_value(v)?.iter().map(|&d| d as i64).collect();
            return self.emit(node, Op::reshape(shape), &[v]);
        };
        for (axis, &r) in reps.iter().enumerate() {
            if r == 1 {
                continue;
            }
            let copies = vec![v; r as usize];
            let op = Op::Concat { axis: axis as i64 };
            if axis == last {
                return self.emit(node, op, &copies);
            }
            v = self.push1(op, &copies)?;
        }
        Ok(())
    }

    /// Trilu: the `trilu` op, with its diagonal offset `k` (input 1, a constant scalar,
    /// default 0) as an attribute.
    pub(super) fn trilu(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let upper = a.int("upper")?.unwrap_or(1) != 0;
        let k = match self.const_in(node, 1, "k")? {
            None => 0,
            Some(t) => match t.ints()[..] {
                [k] => k,
                _ => {
                    return Err(NodeError::NotScalar {
                        what: "k",
                        shape: t.shape.clone(),
                    })
                }
            },
        };
        let x = self.in_value(node, 0)?;
        if !self.em.ty(x)?.dtype.is_float() {
            return self.trilu_masked(node, x, upper, k);
        }
        self.emit(node, Op::Trilu { upper, k }, &[x])
    }

    /// ThresholdedRelu: `x` where `x > alpha`, else 0. As `step * max(x, alpha)` with
    /// `step = relu(sign(x - alpha))` (1 above the threshold, 0 at or below it; `x - alpha` is
    /// positive exactly when `x > alpha`): each branch exact, -inf gives 0 and NaN stays NaN.
    pub(super) fn thresholded_relu(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let alpha = a.float("alpha")?.unwrap_or(1.0);
        let x = self.in_value(node, 0)?;
        let al = self.scalar_like(node, x, "alpha", alpha);
        let d = self.bin1(BinaryOp::Sub, x, al)?;
        let sg = self.un1(UnaryOp::Sign, d)?;
        let step = self.un1(UnaryOp::Relu, sg)?;
        let m = self.bin1(BinaryOp::Max, x, al)?;
        self.emit(node, bin(BinaryOp::Mul), &[step, m])
    }

    /// LRN: `x / (bias + alpha / size * Σ x²)^beta`, the sum over the channels from
    /// `c - floor((size-1)/2)` to `c + ceil((size-1)/2)`. The windowed sum is an `avg_pool`
    /// (padding counted, so it divides by `size`) over the channels of `x²` viewed as
    /// `[N, 1, C, H·W]`.
    pub(super) fn lrn(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let alpha = a.float("alpha")?.unwrap_or(1e-4);
        let beta = a.float("beta")?.unwrap_or(0.75);
        let bias = a.float("bias")?.unwrap_or(1.0);
        let size = a.req_int("size")?;
        let x = self.in_value(node, 0)?;
        let xs = self.shape_of_value(x)?;
        if xs.len() != 4 {
            return Err(refuse(
                "LRN",
                format!(
                    "only rank-4 (NCHW) inputs are supported, got rank {}",
                    xs.len()
                ),
            ));
        }
        if size <= 0 {
            return Err(refuse("LRN", format!("size must be positive, got {size}")));
        }
        let (n, c, hw) = (xs[0] as i64, xs[1] as i64, (xs[2] * xs[3]) as i64);
        let size = size as u64;
        let before = (size - 1) / 2;
        let x2 = self.bin1(BinaryOp::Mul, x, x)?;
        let col = self.push1(Op::reshape(vec![n, 1, c, hw]), &[x2])?;
        let pool = Op::AvgPool(Pool2d {
            kernel: [size, 1],
            strides: [1, 1],
            pads: [before, 0, size - 1 - before, 0],
            ceil_mode: false,
            count_include_pad: true,
        });
        let avg = self.push1(pool, &[col])?;
        let shape = xs.iter().map(|&d| d as i64).collect();
        let avg = self.push1(Op::reshape(shape), &[avg])?;
        // alpha / size * Σ = alpha * mean.
        let al = self.scalar_like(node, x, "alpha", alpha);
        let bi = self.scalar_like(node, x, "bias", bias);
        let be = self.scalar_like(node, x, "beta", beta);
        let scaled = self.bin1(BinaryOp::Mul, al, avg)?;
        let base = self.bin1(BinaryOp::Add, bi, scaled)?;
        let den = self.bin1(BinaryOp::Pow, base, be)?;
        self.emit(node, bin(BinaryOp::Div), &[x, den])
    }

    /// BatchNormalization with `training_mode = 1` (opset 14 on): normalised with the batch's
    /// own statistics (mean and population variance over every axis but the channels), and
    /// the running statistics `mean * momentum + batch * (1 - momentum)` as outputs 1 and 2.
    pub(super) fn batch_norm_training(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "BatchNormalization";
        let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
        let momentum = a.float("momentum")?.unwrap_or(0.9);
        let (x, xs) = self.input_of_rank(node, OP, 2)?;
        let c = xs[1];
        let scale = self.channel_operand(node, 1, OP, c)?;
        let bias = self.channel_operand(node, 2, OP, c)?;
        let run_mean = self.channel_operand(node, 3, OP, c)?;
        let run_var = self.channel_operand(node, 4, OP, c)?;
        let mut axes = vec![0i64];
        axes.extend(2..xs.len() as i64);
        let mean_op = |axes: &Vec<i64>| Op::Reduce {
            kind: ReduceKind::Mean,
            axes: axes.clone(),
            keepdims: true,
        };
        let mean = self.push1(mean_op(&axes), &[x])?;
        let d = self.bin1(BinaryOp::Sub, x, mean)?;
        let d2 = self.bin1(BinaryOp::Mul, d, d)?;
        let var = self.push1(mean_op(&axes), &[d2])?;
        let eps = self.scalar_like(node, x, "epsilon", epsilon);
        let ve = self.bin1(BinaryOp::Add, var, eps)?;
        let sd = self.un1(UnaryOp::Sqrt, ve)?;
        let nrm = self.bin1(BinaryOp::Div, d, sd)?;
        let s = self.per_channel(scale, c, xs.len())?;
        let b = self.per_channel(bias, c, xs.len())?;
        let ns = self.bin1(BinaryOp::Mul, nrm, s)?;
        self.emit(node, bin(BinaryOp::Add), &[ns, b])?;
        let mom = self.scalar_like(node, x, "momentum", momentum);
        let rest = self.scalar_like(node, x, "one_minus_momentum", 1.0 - momentum);
        for (i, running, batch) in [(1, run_mean, mean), (2, run_var, var)] {
            if !self.output_used(node, i) {
                continue;
            }
            let flat = self.push1(Op::reshape(vec![c as i64]), &[batch])?;
            let kept = self.bin1(BinaryOp::Mul, running, mom)?;
            let new = self.bin1(BinaryOp::Mul, flat, rest)?;
            self.emit_output(node, i, bin(BinaryOp::Add), &[kept, new])?;
        }
        Ok(())
    }

    /// MaxPool and AveragePool on a rank-3 input `[N, C, L]`: the 2-D pool over
    /// `[N, C, 1, L]` with every spatial attribute widened by a leading 1 (pads by a leading
    /// 0 on each side), then the height axis squeezed away.
    pub(super) fn pool_1d(&mut self, node: &NodeProto, op_type: &str, a: &Attrs) -> R<()> {
        self.only_first_outputs(node, 1)?;
        let widened: Vec<AttributeProto> =
            a.0.iter()
                .map(|at| {
                    let mut at = at.clone();
                    match at.name.as_deref() {
                        Some("kernel_shape" | "strides" | "dilations") => at.ints.insert(0, 1),
                        Some("pads") if at.ints.len() == 2 => {
                            at.ints = vec![0, at.ints[0], 0, at.ints[1]];
                        }
                        _ => {}
                    }
                    at
                })
                .collect();
        let x = self.in_value(node, 0)?;
        let tall = self.push1(Op::Unsqueeze { axes: vec![2] }, &[x])?;
        // The 2-D pool runs on a stand-in node whose input and output are fresh names.
        let hint = node.output.first().map_or("pool", |s| s);
        let (inner_in, inner_out) = (self.unused_name(hint, "in"), self.unused_name(hint, "out"));
        self.env.insert(inner_in.clone(), super::Val::Ir(tall));
        let inner = NodeProto {
            input: vec![inner_in],
            output: vec![inner_out.clone()],
            op_type: Some(op_type.to_string()),
            ..Default::default()
        };
        self.pool(&inner, op_type, &Attrs(&widened))?;
        let pooled = self.value(&inner_out)?;
        self.emit(node, Op::Squeeze { axes: vec![2] }, &[pooled])
    }

    /// A name bound to nothing yet, for values the importer threads through stand-in nodes.
    fn unused_name(&self, hint: &str, what: &str) -> String {
        let mut k = 0;
        loop {
            let name = format!("{hint}${what}{k}");
            if !self.env.contains_key(&name) {
                return name;
            }
            k += 1;
        }
    }

    /// NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss as the same loss on
    /// `log_softmax(x)` along the classes (its log-probabilities are output 1 when used).
    /// The targets (and the class weights, when given) must be constants: the element at each
    /// position's target class is picked by clamping the input between constant bounds that
    /// are ±inf at the target and 0 elsewhere (`max(min(x, hi), lo)`, exact for every finite
    /// or infinite input) and summing over the classes; the loss is that times `-weight[t]`
    /// (0 where the target is `ignore_index`), then summed or divided by the constant total
    /// weight for `reduction = "mean"`.
    ///
    /// Differs from ONNX: a NaN at a class other than the target makes that position's loss
    /// NaN (the sum over the classes carries it), where ONNX ignores it.
    pub(super) fn nll_loss(&mut self, node: &NodeProto, a: &Attrs, softmax: bool) -> R<()> {
        let op: &'static str = if softmax {
            "SoftmaxCrossEntropyLoss"
        } else {
            "NegativeLogLikelihoodLoss"
        };
        let reduction = a.string("reduction")?.unwrap_or_else(|| "mean".into());
        if !matches!(reduction.as_str(), "none" | "sum" | "mean") {
            return Err(NodeError::StringValue {
                what: "reduction",
                value: reduction,
                text: " (none, sum or mean)",
            });
        }
        let ignore = a.int("ignore_index")?;
        let target = self.req_const_in(node, 1, "target")?;
        let weight = self.const_in(node, 2, "weight")?;
        let (x, xs) = self.input_of_rank(node, op, 2)?;
        let c = xs[1] as usize;
        let mut ts = vec![xs[0]];
        ts.extend(&xs[2..]);
        if target.shape != ts {
            return Err(refuse(
                op,
                format!(
                    "the target has shape {:?}, the input {xs:?} needs {ts:?}",
                    target.shape
                ),
            ));
        }
        let weights = match &weight {
            Some(w) if w.shape != [c as u64] => {
                return Err(refuse(
                    op,
                    format!("the weight has shape {:?}, expected [{c}]", w.shape),
                ))
            }
            Some(w) => w.floats(),
            None => vec![1.0; c],
        };
        let t = target.ints();
        let inner: usize = xs[2..].iter().map(|&d| d as usize).product();
        let total = xs.iter().map(|&d| d as usize).product::<usize>();
        let (mut hi, mut lo) = (vec![0.0; total], vec![0.0; total]);
        let mut negw = vec![0.0; t.len()];
        let mut denom = 0.0;
        for (p, &tc) in t.iter().enumerate() {
            if Some(tc) == ignore {
                continue;
            }
            if tc < 0 || tc as usize >= c {
                return Err(refuse(
                    op,
                    format!("target {tc} is outside the {c} classes (and is not ignore_index)"),
                ));
            }
            let (n, d) = (p / inner.max(1), p % inner.max(1));
            let at = (n * c + tc as usize) * inner + d;
            hi[at] = f64::INFINITY;
            lo[at] = f64::NEG_INFINITY;
            let w = weights[tc as usize];
            negw[p] = -w;
            denom += w as f32 as f64;
        }
        let dtype = self.em.sym_ty(x).dtype;
        let hint = node.output.first().map_or("loss", |s| s).to_string();
        let hi = self.const_value(
            &format!("{hint}.target_hi"),
            Tensor::from_f64s(dtype, xs.clone(), &hi),
        );
        let lo = self.const_value(
            &format!("{hint}.target_lo"),
            Tensor::from_f64s(dtype, xs.clone(), &lo),
        );
        let negw = self.const_value(
            &format!("{hint}.neg_weight"),
            Tensor::from_f64s(dtype, ts.clone(), &negw),
        );
        let input = if !softmax {
            x
        } else if self.output_used(node, 1) {
            self.emit_output(node, 1, Op::LogSoftmax { axis: 1 }, &[x])?
        } else {
            self.push1(Op::LogSoftmax { axis: 1 }, &[x])?
        };
        let capped = self.bin1(BinaryOp::Min, input, hi)?;
        let picked = self.bin1(BinaryOp::Max, capped, lo)?;
        let sum_classes = Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![1],
            keepdims: false,
        };
        let picked = self.push1(sum_classes, &[picked])?;
        if reduction == "none" {
            return self.emit(node, bin(BinaryOp::Mul), &[picked, negw]);
        }
        let loss = self.bin1(BinaryOp::Mul, picked, negw)?;
        let sum_all = Op::Reduce {
            kind: ReduceKind::Sum,
            axes: (0..ts.len() as i64).collect(),
            keepdims: false,
        };
        if reduction == "sum" {
            return self.emit(node, sum_all, &[loss]);
        }
        let s = self.push1(sum_all, &[loss])?;
        let d = self.scalar_like(node, x, "total_weight", denom);
        self.emit(node, bin(BinaryOp::Div), &[s, d])
    }

    /// CenterCropPad: along each of `axes` (default all), a centred `slice` where the target
    /// is smaller (starting at `floor((dim - target) / 2)`) and a centred zero `pad` where it
    /// is larger (`floor((target - dim) / 2)` before, the rest after). Target shape constant.
    pub(super) fn center_crop_pad(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "CenterCropPad";
        let target = self.req_const_in(node, 1, "shape")?.ints();
        let x = self.in_value(node, 0)?;
        let xs = self.shape_of_value(x)?;
        let rank = xs.len();
        let axes = match a.ints("axes")? {
            Some(axes) => axes
                .iter()
                .map(|&ax| norm_axis(ax, rank))
                .collect::<R<Vec<usize>>>()?,
            None => (0..rank).collect(),
        };
        if axes.len() != target.len() {
            return Err(refuse(
                OP,
                format!("{} target sizes for {} axes", target.len(), axes.len()),
            ));
        }
        let mut crop = Slice {
            starts: vec![],
            ends: vec![],
            axes: vec![],
            steps: vec![],
        };
        let mut pads = vec![0u64; 2 * rank];
        let mut seen = vec![false; rank];
        for (&ax, &t) in axes.iter().zip(&target) {
            if std::mem::replace(&mut seen[ax], true) {
                return Err(NodeError::AxisTwice { axis: ax as i64 });
            }
            if t < 0 {
                return Err(NodeError::Negative {
                    what: "shape",
                    values: target.clone(),
                });
            }
            let (t, d) = (t as u64, xs[ax]);
            if t < d {
                let start = (d - t) / 2;
                crop.starts.push(start as i64);
                crop.ends.push((start + t) as i64);
                crop.axes.push(ax as i64);
                crop.steps.push(1);
            } else if t > d {
                pads[ax] = (t - d) / 2;
                pads[rank + ax] = t - d - pads[ax];
            }
        }
        let padded = pads.iter().any(|&p| p > 0);
        if crop.starts.is_empty() && !padded {
            self.alias(node, super::Val::Ir(x));
            return Ok(());
        }
        let pad = Op::Pad {
            pads,
            mode: PadMode::Constant,
            value: 0.0,
        };
        if crop.starts.is_empty() {
            return self.emit(node, pad, &[x]);
        }
        if !padded {
            return self.emit(node, Op::Slice(crop), &[x]);
        }
        let cropped = self.push1(Op::Slice(crop), &[x])?;
        self.emit(node, pad, &[cropped])
    }

    /// RotaryEmbedding (opset 23): the first `rotary_embedding_dim` values of each head
    /// (default all) rotated pairwise by the cached angles, as ONNX's reference computes it:
    /// `real = cos·x1 - sin·x2`, `imag = sin·x1 + cos·x2`, the pairs being the two halves or
    /// (`interleaved`) the even and odd elements. With `position_ids` the caches must be
    /// constants (gathered at import); without, they are `[batch, seq, rot/2]` values.
    pub(super) fn rotary_embedding(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "RotaryEmbedding";
        let interleaved = a.int("interleaved")?.unwrap_or(0) != 0;
        let x = self.in_value(node, 0)?;
        let xs = self.shape_of_value(x)?;
        // The working layout keeps the heads where the input has them: [B, H, S, D] as given,
        // or [B, S, H, D] from a 3-D [B, S, H·D].
        let (b, s, work) = match xs[..] {
            [b, h, s, d] => (b, s, vec![b, h, s, d]),
            [b, s, hidden] => {
                let heads = a.int("num_heads")?.unwrap_or(0);
                if heads <= 0 || !hidden.is_multiple_of(heads as u64) {
                    return Err(refuse(
                        OP,
                        format!(
                            "a 3-D input needs num_heads dividing its {hidden} values, got {heads}"
                        ),
                    ));
                }
                let h = heads as u64;
                (b, s, vec![b, s, h, hidden / h])
            }
            _ => {
                return Err(refuse(
                    OP,
                    format!("the input must have rank 3 or 4, got {}", xs.len()),
                ))
            }
        };
        // The caches broadcast over the heads: [B, 1, S, r] or [B, S, 1, r].
        let heads_first = xs.len() == 4;
        let cache_shape = |r: u64| -> Vec<i64> {
            let (b, s, r) = (b as i64, s as i64, r as i64);
            if heads_first {
                vec![b, 1, s, r]
            } else {
                vec![b, s, 1, r]
            }
        };
        let d = work[3];
        let rot = match a.int("rotary_embedding_dim")?.unwrap_or(0) {
            0 => d,
            r if r > 0 && r as u64 <= d && r % 2 == 0 => r as u64,
            r => {
                return Err(refuse(
                    OP,
                    format!("rotary_embedding_dim {r} must be even and at most the head size {d}"),
                ))
            }
        };
        if rot % 2 != 0 {
            return Err(refuse(OP, format!("the head size {d} is odd")));
        }
        let half = rot / 2;
        let mut caches = Vec::new();
        for (i, what) in [(1usize, "cos_cache"), (2, "sin_cache")] {
            let v = match self.const_in(node, 3, "position_ids")? {
                Some(pos) => {
                    let cache = self.req_const_in(node, i, what)?;
                    let rows = match cache.shape[..] {
                        [rows, r] if r == half => rows,
                        _ => {
                            return Err(refuse(
                                OP,
                                format!(
                                    "{what} has shape {:?}, expected [positions, {half}]",
                                    cache.shape
                                ),
                            ))
                        }
                    };
                    let ids = pos.ints();
                    if pos.shape != [b, s] {
                        return Err(refuse(
                            OP,
                            format!(
                                "position_ids has shape {:?}, expected [{b}, {s}]",
                                pos.shape
                            ),
                        ));
                    }
                    if let Some(bad) = ids.iter().find(|&&p| p < 0 || p as u64 >= rows) {
                        return Err(refuse(
                            OP,
                            format!("position id {bad} is outside the {rows} cached positions"),
                        ));
                    }
                    let vals = cache.floats();
                    let gathered: Vec<f64> = ids
                        .iter()
                        .flat_map(|&p| vals[p as usize * half as usize..][..half as usize].to_vec())
                        .collect();
                    let t = Tensor::from_f64s(
                        cache.dtype,
                        cache_shape(half).iter().map(|&v| v as u64).collect(),
                        &gathered,
                    );
                    let hint = format!("{}.{what}", node.output.first().map_or("rope", |s| s));
                    self.const_value(&hint, t)
                }
                None => {
                    let c = self.in_value(node, i)?;
                    let cs = self.shape_of_value(c)?;
                    if cs != [b, s, half] {
                        return Err(refuse(
                            OP,
                            format!("{what} has shape {cs:?}, expected [{b}, {s}, {half}] without position_ids"),
                        ));
                    }
                    self.push1(Op::reshape(cache_shape(half)), &[c])?
                }
            };
            caches.push(v);
        }
        let (cos, sin) = (caches[0], caches[1]);
        let xw = if xs.len() == 3 {
            let shape = work.iter().map(|&v| v as i64).collect();
            self.push1(Op::reshape(shape), &[x])?
        } else {
            x
        };
        let last = |start: u64, end: u64, step: i64| {
            Op::Slice(Slice {
                starts: vec![start as i64],
                ends: vec![end as i64],
                axes: vec![3],
                steps: vec![step],
            })
        };
        let xr = if rot < d {
            self.push1(last(0, rot, 1), &[xw])?
        } else {
            xw
        };
        let (x1, x2) = if interleaved {
            (
                self.push1(last(0, rot, 2), &[xr])?,
                self.push1(last(1, rot, 2), &[xr])?,
            )
        } else {
            (
                self.push1(last(0, half, 1), &[xr])?,
                self.push1(last(half, rot, 1), &[xr])?,
            )
        };
        let c1 = self.bin1(BinaryOp::Mul, cos, x1)?;
        let s2 = self.bin1(BinaryOp::Mul, sin, x2)?;
        let real = self.bin1(BinaryOp::Sub, c1, s2)?;
        let s1 = self.bin1(BinaryOp::Mul, sin, x1)?;
        let c2 = self.bin1(BinaryOp::Mul, cos, x2)?;
        let imag = self.bin1(BinaryOp::Add, s1, c2)?;
        let rotated = if interleaved {
            let ru = self.push1(Op::Unsqueeze { axes: vec![4] }, &[real])?;
            let iu = self.push1(Op::Unsqueeze { axes: vec![4] }, &[imag])?;
            let pairs = self.push1(Op::Concat { axis: 4 }, &[ru, iu])?;
            let mut shape: Vec<i64> = work.iter().map(|&v| v as i64).collect();
            shape[3] = rot as i64;
            self.push1(Op::reshape(shape), &[pairs])?
        } else {
            self.push1(Op::Concat { axis: 3 }, &[real, imag])?
        };
        let whole = if rot < d {
            let rest = self.push1(last(rot, d, 1), &[xw])?;
            self.push1(Op::Concat { axis: 3 }, &[rotated, rest])?
        } else {
            rotated
        };
        let shape = xs.iter().map(|&v| v as i64).collect();
        self.emit(node, Op::reshape(shape), &[whole])
    }

    /// AffineGrid (opset 20): `theta [N, k, k+1]` times the homogeneous coordinates
    /// `[x, y, (z,) 1]` of every output point (a constant `[k+1, points]` made from the
    /// constant `size`), transposed to `[N, points, k]` and shaped `[N, (D,) H, W, k]`.
    /// Coordinates along an axis of `n` points: `-1 + 2i / (n - 1)` with `align_corners`
    /// (-1 for one point), `(2i + 1) / n - 1` without.
    pub(super) fn affine_grid(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "AffineGrid";
        let align = a.int("align_corners")?.unwrap_or(0) != 0;
        let size = self.req_const_in(node, 1, "size")?.ints();
        let spatial: Vec<u64> = match size[..] {
            [_, _, h, w] => vec![h, w],
            [_, _, d, h, w] => vec![d, h, w],
            _ => {
                return Err(refuse(
                    OP,
                    format!("size must have 4 or 5 values, got {}", size.len()),
                ))
            }
        }
        .into_iter()
        .map(|v| u64::try_from(v).map_err(|_| refuse(OP, format!("negative size {v}"))))
        .collect::<R<_>>()?;
        let k = spatial.len();
        let theta = self.in_value(node, 0)?;
        let ts = self.shape_of_value(theta)?;
        if ts.len() != 3 || ts[0] as i64 != size[0] || ts[1..] != [k as u64, k as u64 + 1] {
            return Err(refuse(
                OP,
                format!(
                    "theta has shape {ts:?}, expected [{}, {k}, {}]",
                    size[0],
                    k + 1
                ),
            ));
        }
        let coord = |i: u64, n: u64| -> f64 {
            if align {
                if n == 1 {
                    -1.0
                } else {
                    -1.0 + 2.0 * i as f64 / (n - 1) as f64
                }
            } else {
                (2 * i + 1) as f64 / n as f64 - 1.0
            }
        };
        let points: u64 = spatial.iter().product();
        // Row r of the constant holds coordinate r (x first, then y, z) of every point; the
        // last row is the homogeneous 1.
        let mut base = vec![1.0; (k + 1) * points as usize];
        for p in 0..points {
            let mut rest = p;
            // The point's index along each axis, last axis (W, the x coordinate) first.
            for (r, &n) in spatial.iter().rev().enumerate() {
                base[r * points as usize + p as usize] = coord(rest % n, n);
                rest /= n;
            }
        }
        let dtype = self.em.sym_ty(theta).dtype;
        let hint = format!("{}.base_grid", node.output.first().map_or("grid", |s| s));
        let base = self.const_value(
            &hint,
            Tensor::from_f64s(dtype, vec![k as u64 + 1, points], &base),
        );
        let mm = self.push1(Op::MatMul { activation: None }, &[theta, base])?;
        let t = self.push1(
            Op::Transpose {
                perm: vec![0, 2, 1],
            },
            &[mm],
        )?;
        let mut shape = vec![ts[0] as i64];
        shape.extend(spatial.iter().map(|&v| v as i64));
        shape.push(k as i64);
        self.emit(node, Op::reshape(shape), &[t])
    }
}
