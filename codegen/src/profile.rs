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

use tir_ir::{Function, Op, OpId};

/// Multiply-add work of an op, counting a fused multiply-add as two flops.
pub fn flops(func: &Function, id: OpId) -> u64 {
    let op = &func.ops[id];
    let shape = |i: usize| -> Vec<u64> {
        op.operands
            .get(i)
            .and_then(|&v| func.ty(v))
            .map(|t| t.shape.clone())
            .unwrap_or_default()
    };
    let out: Vec<u64> = op
        .results
        .first()
        .and_then(|&v| func.ty(v))
        .map(|t| t.shape.clone())
        .unwrap_or_default();
    let outn: u64 = out.iter().product();
    match &op.op {
        // Every output element sums C/groups · KH · KW products.
        Op::Conv2d(_) => {
            let w = shape(1);
            if w.len() == 4 {
                2 * outn * w[1] * w[2] * w[3]
            } else {
                0
            }
        }
        // Every input element meets M/groups · KH · KW weights (an upper bound: the crop
        // drops some products).
        Op::ConvTranspose(_) => {
            let (x, w) = (shape(0), shape(1));
            if w.len() == 4 {
                2 * x.iter().product::<u64>() * w[1] * w[2] * w[3]
            } else {
                0
            }
        }
        // out[..., M, N] = A[..., M, K] · B[..., K, N]
        Op::MatMul { .. } => {
            let a = shape(0);
            2 * outn * a.last().copied().unwrap_or(0)
        }
        Op::Gemm(g) => {
            let a = shape(0);
            let k = if g.trans_a { a.first() } else { a.last() };
            2 * outn * k.copied().unwrap_or(0)
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
        | Op::TopK { .. } => 0,
    }
}

/// One `<model>_profile_info` line for an op (tabs and newlines in names are replaced).
/// `sparse_nonzeros`: the nonzero weights of a convolution that runs the sparse pointwise
/// kernel, labelled `conv2d.sparse` with the FLOPs it does (two per nonzero and pixel), not
/// the dense count, so that its GFLOP/s compare with the dense kernels'.
pub fn info_line(func: &Function, id: OpId, sparse_nonzeros: Option<i64>) -> String {
    let op = &func.ops[id];
    let clean = |s: String| s.replace(['\t', '\n'], " ");
    let (name, shape) = match op.results.first() {
        Some(&v) => (
            clean(func.value_name(v)),
            func.ty(v)
                .map(|t| {
                    t.shape
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join("x")
                })
                .unwrap_or_default(),
        ),
        None => (String::new(), String::new()),
    };
    let mut kind = op.op.name().to_string();
    if let Op::Conv2d(c) = &op.op {
        // The kernel family the op takes, so the table tells depthwise from dense.
        let w = op
            .operands
            .get(1)
            .and_then(|&v| func.ty(v))
            .map(|t| t.shape.clone());
        if let Some(w) = w.filter(|w| w.len() == 4) {
            let tag = if sparse_nonzeros.is_some() {
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
