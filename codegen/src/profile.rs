//! Per-op profiling of compiled models (issue 6): what an op is, for the executable's
//! `--profile N` table.
//!
//! Besides `<model>_run`, every module gets `<model>_run_profiled(inputs, outputs, slab,
//! tick)`, which makes the same kernel calls and calls `tick(i)` before the kernels of the
//! `i`-th profiled op and `tick(count)` after the last one, plus `<model>_profile_info`, a
//! NUL-terminated table with one line per profiled op:
//! `kind \t result \t shape \t flops \n` (flops 0 when the op does no multiply-adds). The
//! executable's `main` times between ticks; the kernels themselves are untouched, so the
//! profiled run measures the code `<model>_run` runs.

use tir_ir::{Function, Op, OpData, OpId, Value};

/// Multiply-add work of an op, counting a fused multiply-add as two flops.
pub fn flops(func: &Function, id: OpId) -> u64 {
    flop_factors(&func.ops[id], |v| func.ty(v).map(|t| t.shape.clone()))
        .map_or(0, |f| 2 * f.iter().product::<u64>())
}

/// The factors whose product is half an op's multiply-add flops (`None`: an op whose
/// multiply-adds do not count), over the dims `dims` gives for a value: the static shapes
/// ([`flops`]) or the symbolic ones of a model with run-time dims (the executable's profile
/// evaluates their product at the shape that runs: `dynamic::main_c`).
pub fn flop_factors<T: Clone>(
    op: &OpData,
    dims: impl Fn(Value) -> Option<Vec<T>>,
) -> Option<Vec<T>> {
    let shape = |i: usize| -> Vec<T> {
        op.operands
            .get(i)
            .and_then(|&v| dims(v))
            .unwrap_or_default()
    };
    let out: Vec<T> = op
        .results
        .first()
        .and_then(|&v| dims(v))
        .unwrap_or_default();
    let with = |mut base: Vec<T>, more: &[T]| {
        base.extend_from_slice(more);
        Some(base)
    };
    match &op.op {
        // Every output element sums C/groups · KH · KW products.
        Op::Conv2d(_) => {
            let w = shape(1);
            if w.len() == 4 {
                with(out, &w[1..])
            } else {
                None
            }
        }
        // Every input element meets M/groups · KH · KW weights (an upper bound: the crop
        // drops some products).
        Op::ConvTranspose(_) => {
            let w = shape(1);
            if w.len() == 4 {
                with(shape(0), &w[1..])
            } else {
                None
            }
        }
        // out[..., M, N] = A[..., M, K] · B[..., K, N]
        Op::MatMul { .. } => {
            let a = shape(0);
            a.last().cloned().and_then(|k| with(out, &[k]))
        }
        Op::Gemm(g) => {
            let a = shape(0);
            let k = if g.trans_a { a.first() } else { a.last() };
            k.cloned().and_then(|k| with(out, &[k]))
        }
        // Only the GEMM-shaped ops' multiply-adds count, as in models' published FLOPs.
        Op::Const { .. }
        | Op::Binary { .. }
        | Op::Unary(_)
        | Op::Clip { .. }
        | Op::HardSigmoid { .. }
        | Op::Prelu
        | Op::MaxPool(_)
        | Op::AvgPool(_)
        | Op::GlobalAvgPool
        | Op::Concat { .. }
        | Op::Split { .. }
        | Op::Slice(_)
        | Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Squeeze { .. }
        | Op::Unsqueeze { .. }
        | Op::Transpose { .. }
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::Pad { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::Reduce { .. }
        | Op::Resize(_)
        | Op::Trilu { .. }
        | Op::Cast { .. }
        | Op::Compare(_)
        | Op::Where
        | Op::Logical(_)
        | Op::Not
        | Op::ArgReduce { .. }
        | Op::Mod { .. }
        | Op::AllocSlab { .. }
        | Op::AllocTensor { .. }
        | Op::GridSample(_)
        | Op::CumSum { .. }
        | Op::TopK { .. } => None,
    }
}

/// One `<model>_profile_info` line for an op (tabs and newlines in names are replaced).
/// `sparse_nonzeros`: the nonzero weights of a convolution that runs the sparse pointwise
/// kernel, labelled `conv2d.sparse` with the FLOPs it does (two per nonzero and pixel), not
/// the dense count, so that its GFLOP/s compare with the dense kernels'.
pub fn info_line(func: &Function, id: OpId, sparse_nonzeros: Option<i64>) -> String {
    let op = &func.ops[id];
    let (kind, name) = label(func, id, sparse_nonzeros.is_some());
    let shape = op
        .results
        .first()
        .and_then(|&v| func.ty(v))
        .map(|t| {
            t.shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("x")
        })
        .unwrap_or_default();
    let flops = match (sparse_nonzeros, &op.op) {
        (Some(nnz), Op::Conv2d(_)) => {
            let out = op.results.first().and_then(|&v| func.ty(v));
            let (n, hw) = out
                .filter(|t| t.shape.len() == 4)
                .map_or((0, 0), |t| (t.shape[0], t.shape[2] * t.shape[3]));
            2 * n * hw * nnz.max(0) as u64
        }
        _ => flops(func, id),
    };
    format!("{kind}\t{name}\t{shape}\t{flops}\n")
}

/// An op's kind and result name, the first two fields of its profile line (tabs and newlines
/// in the name replaced). Convolutions are tagged with the kernel family they take (`dw`,
/// `1x1`, `kxk`, or `sparse` when `sparse`), their kernel size and stride, so that the table
/// tells depthwise from dense. Weights are constants, so a model with run-time dims labels
/// its ops from the probe function's types (`dynamic::main_c`).
pub fn label(func: &Function, id: OpId, sparse: bool) -> (String, String) {
    let op = &func.ops[id];
    let name = op
        .results
        .first()
        .map(|&v| func.value_name(v).replace(['\t', '\n'], " "))
        .unwrap_or_default();
    let mut kind = op.op.name().to_string();
    if let Op::Conv2d(c) = &op.op {
        let w = op
            .operands
            .get(1)
            .and_then(|&v| func.ty(v))
            .map(|t| t.shape.clone());
        if let Some(w) = w.filter(|w| w.len() == 4) {
            let tag = if sparse {
                "sparse"
            } else if w[1] == 1 && c.groups > 1 {
                "dw"
            } else if w[2] == 1 && w[3] == 1 {
                "1x1"
            } else {
                "kxk"
            };
            kind = format!(
                "conv2d.{tag} {}x{}/{}",
                w[2],
                w[3],
                c.strides.iter().max().copied().unwrap_or(1)
            );
        }
    }
    (kind, name)
}
