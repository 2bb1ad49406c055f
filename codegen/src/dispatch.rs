//! Which kernels each op gets: one exhaustive match over the ops, so an op added to the IR
//! does not compile until it has kernels here. The kernels themselves are in [`crate::kernels`],
//! by family.

use crate::kernels::common::unsupported;
use crate::kernels::common::Call;
use crate::kernels::sample;
use crate::kernels::scan;
use crate::kernels::{conv, copy, elementwise, gather, matmul, norm, pool, typed};
use crate::nest::R;
use crate::storage::Storage;
use crate::Gen;
use tir_ir::op::{PadMode, ReduceKind};
use tir_ir::{DType, Function, Op, OpData, OpId};

/// The kernels of one op, named `name` (several get `name` plus a suffix), in call order.
pub(crate) fn emit_op<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    id: OpId,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let op = &func.ops[id];
    let all_f32 = op
        .operands
        .iter()
        .chain(&op.results)
        .all(|&v| func.ty(v).is_some_and(|t| t.dtype == DType::F32));
    if !all_f32 && op.op.is_operator() {
        return typed_op(g, func, st, op, name);
    }
    match &op.op {
        // Weights are globals, and buffer ops only say where values live.
        Op::Const { .. } | Op::AllocSlab { .. } | Op::AllocTensor { .. } => Ok(vec![]),
        Op::Unary(u) => elementwise::unary(g, func, st, op, *u, name),
        Op::Clip { min, max } => elementwise::clip(g, func, st, op, *min, *max, name),
        Op::HardSigmoid { alpha, beta } => {
            elementwise::hard_sigmoid(g, func, st, op, *alpha, *beta, name)
        }
        Op::Binary { op: b, activation } => {
            elementwise::binary(g, func, st, op, *b, *activation, name)
        }
        Op::Prelu => elementwise::prelu(g, func, st, op, name),
        Op::BatchNorm { epsilon } => elementwise::batch_norm(g, func, st, op, *epsilon, name),
        Op::Conv2d(c) => conv::conv2d(g, func, st, op, c, name),
        Op::ConvTranspose(c) => conv::conv_transpose(g, func, st, op, c, name),
        Op::MatMul { activation } => matmul::matmul(g, func, st, op, *activation, name),
        Op::Gemm(gm) => matmul::gemm_op(g, func, st, op, gm, name),
        Op::MaxPool(p) => pool::pool(g, func, st, op, p, true, name),
        Op::AvgPool(p) => pool::pool(g, func, st, op, p, false, name),
        Op::GlobalAvgPool => pool::global_avg_pool(g, func, st, op, name),
        Op::Softmax { axis } => norm::softmax(g, func, st, op, *axis, false, name),
        Op::LogSoftmax { axis } => norm::softmax(g, func, st, op, *axis, true, name),
        Op::LayerNorm { axis, epsilon } => norm::layer_norm(g, func, st, op, *axis, *epsilon, name),
        Op::Concat { axis } => copy::concat(g, func, st, op, *axis, name),
        Op::Split { axis, .. } => copy::split(g, func, st, op, *axis, name),
        Op::Slice(s) => copy::slice(g, func, st, op, s, name),
        Op::Transpose { perm } => copy::transpose(g, func, st, op, perm, name),
        // Views: no kernel when bufferization aliased them (`Op::is_view`), else a copy.
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            copy::view(g, func, st, op, name)
        }
        Op::Pad {
            pads,
            mode: PadMode::Constant,
            value,
        } => copy::pad(g, func, st, op, pads, *value, name),
        Op::Pad {
            pads,
            mode: mode @ (PadMode::Reflect | PadMode::Edge),
            ..
        } => gather::pad_gather(g, func, st, op, pads, *mode, name),
        // A mean over every axis after the channels is a global average pool (TFLite's MEAN
        // over an NHWC image's H and W, imported as axes [2, 3]: selfie_segmentation's
        // squeeze-and-excite blocks): that kernel sums each plane with vectors and is cut by
        // planes for threads, where the general reduction is one scalar chain on the calling
        // thread (a 16×72×128 mean took 0.10 ms, at 2 threads too).
        Op::Reduce {
            kind: ReduceKind::Mean,
            axes,
            ..
        } if planes_mean(func, op, axes) => pool::global_avg_pool(g, func, st, op, name),
        Op::Reduce { kind, axes, .. } => gather::reduce(g, func, st, op, *kind, axes, name),
        Op::Resize(rz) => gather::resize(g, func, st, op, rz, name),
        Op::Trilu { upper, k } => elementwise::trilu(g, func, st, op, *upper, *k, name),
        Op::Cast { .. }
        | Op::Compare(_)
        | Op::Where
        | Op::Logical(_)
        | Op::Not
        | Op::ArgReduce { .. }
        | Op::Mod { .. } => typed_op(g, func, st, op, name),
        Op::GridSample(gs) => sample::grid_sample(g, func, st, op, gs, name),
        Op::CumSum { .. } => scan::cumsum(g, func, st, op, name),
        // Its indices are i64: always `typed_op`.
        Op::TopK { .. } => scan::top_k(g, func, st, op, name),
    }
}

/// Whether `axes` of `op`'s operand are exactly its axes 2.. (every axis after the batch and
/// the channels) of a rank-3 or higher tensor: then the mean is [`pool::global_avg_pool`]'s,
/// whose output holds one value per `N·C` plane in order, with or without the kept ones.
fn planes_mean(func: &Function, op: &OpData, axes: &[i64]) -> bool {
    let Some(rank) = func.ty(op.operands[0]).map(|t| t.shape.len()) else {
        return false;
    };
    let mut norm: Vec<usize> = axes
        .iter()
        .filter_map(|&a| tir_ir::shape::norm_axis(a, rank).ok())
        .collect();
    norm.sort_unstable();
    norm.dedup();
    rank >= 3 && norm.len() == axes.len() && norm == (2..rank).collect::<Vec<_>>()
}

/// The kernels of an op with a value that is not `f32` (or an op that always has one); the
/// f32 kernels above never see another element type.
fn typed_op<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    match &op.op {
        Op::Cast { .. } => typed::cast(g, func, st, op, name),
        Op::Compare(c) => typed::compare(g, func, st, op, *c, name),
        Op::Where => typed::where_(g, func, st, op, name),
        Op::Logical(l) => typed::logical(g, func, st, op, Some(*l), name),
        Op::Not => typed::logical(g, func, st, op, None, name),
        Op::ArgReduce { .. } => typed::arg_reduce(g, func, st, op, name),
        Op::CumSum { .. } => scan::cumsum(g, func, st, op, name),
        Op::TopK { .. } => scan::top_k(g, func, st, op, name),
        Op::Binary {
            op: b,
            activation: None,
        } => typed::int_binary(g, func, st, op, *b, name),
        Op::Unary(u) => typed::int_unary(g, func, st, op, *u, name),
        Op::Mod { fmod } => typed::modulo(g, func, st, op, *fmod, name),
        Op::Clip { min, max } => typed::int_clip(g, func, st, op, *min, *max, name),
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            typed::view(g, func, st, op, name)
        }
        other => {
            let types: Vec<String> = op
                .operands
                .iter()
                .filter_map(|&v| func.ty(v).map(|t| t.dtype.to_string()))
                .collect();
            Err(unsupported(
                func,
                op,
                &format!(
                    "`{}` on {} has no generated kernel (only f32)",
                    other.name(),
                    types.join(", ")
                ),
            ))
        }
    }
}
