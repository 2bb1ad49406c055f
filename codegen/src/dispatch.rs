//! Which kernels each op gets: one exhaustive match over the ops, so an op added to the IR
//! does not compile until it has kernels here. The kernels themselves are in [`crate::kernels`],
//! by family.

use crate::kernels::common::Call;
use crate::kernels::{conv, copy, elementwise, gather, matmul, norm, pool};
use crate::nest::R;
use crate::storage::Storage;
use crate::Gen;
use tir_ir::op::PadMode;
use tir_ir::{Function, Op, OpId};

/// The kernels of one op, named `name` (several get `name` plus a suffix), in call order.
pub(crate) fn emit_op<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    id: OpId,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let op = &func.ops[id];
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
        Op::Reduce { kind, axes, .. } => gather::reduce(g, func, st, op, *kind, axes, name),
        Op::Resize(rz) => gather::resize(g, func, st, op, rz, name),
        Op::Trilu { upper, k } => elementwise::trilu(g, func, st, op, *upper, *k, name),
    }
}
