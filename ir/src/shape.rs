//! Shape and dtype inference: one rule per op family, all in this file (as tract keeps each
//! op's shape rule with the op). ONNX semantics on NCHW tensors.

use crate::op::{Activation, BinaryOp, Op, Pool2d, UnaryOp};
use crate::types::{DType, TensorType};

/// Why an op's operand types are not acceptable. `operand` points the diagnostic at one
/// operand when the problem is clearly its own.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeError {
    pub message: String,
    pub operand: Option<usize>,
}

type Result<T> = std::result::Result<T, ShapeError>;

fn err<T>(message: impl Into<String>) -> Result<T> {
    Err(ShapeError {
        message: message.into(),
        operand: None,
    })
}

fn err_at<T>(operand: usize, message: impl Into<String>) -> Result<T> {
    Err(ShapeError {
        message: message.into(),
        operand: Some(operand),
    })
}

/// Result types of `op` applied to operands of the given types. `const` has no rule: its type
/// is always declared.
pub fn infer(op: &Op, ins: &[&TensorType]) -> Result<Vec<TensorType>> {
    if !op.arity().accepts(ins.len()) {
        return err(format!(
            "`{}` takes {}, got {}",
            op.name(),
            op.arity(),
            ins.len()
        ));
    }
    if let Some(a) = op.activation() {
        let transcendental = !matches!(
            a,
            Activation::Relu | Activation::Relu6 | Activation::ReluN1To1
        );
        if transcendental && !ins[0].dtype.is_float() {
            return err(format!(
                "the fused activation `{}` needs a float element type, got {}",
                a.name(),
                ins[0].dtype
            ));
        }
    }
    let one = |t: TensorType| Ok(vec![t]);
    match op {
        Op::Const { .. } => err("`const` needs a declared result type"),
        Op::AllocTensor { .. } => err("`alloc_tensor` needs a declared result type"),
        Op::AllocSlab { size, .. } => one(TensorType::new(vec![*size], DType::U8)),
        Op::Conv2d(c) => one(conv2d(c, ins)?),
        Op::ConvTranspose(c) => one(conv_transpose(c, ins)?),
        Op::MatMul { .. } => one(matmul(ins[0], ins[1])?),
        Op::Gemm(g) => {
            let (a, b) = (ins[0], ins[1]);
            same_dtype(ins)?;
            numeric(a.dtype, 0)?;
            if a.rank() != 2 {
                return err_at(0, format!("`gemm` needs rank-2 operands, A is {a}"));
            }
            if b.rank() != 2 {
                return err_at(1, format!("`gemm` needs rank-2 operands, B is {b}"));
            }
            let (m, k) = if g.trans_a {
                (a.shape[1], a.shape[0])
            } else {
                (a.shape[0], a.shape[1])
            };
            let (kb, n) = if g.trans_b {
                (b.shape[1], b.shape[0])
            } else {
                (b.shape[0], b.shape[1])
            };
            if k != kb {
                return err(format!(
                    "inner dimensions differ: A gives K = {k}, B gives K = {kb}"
                ));
            }
            let out = TensorType::new(vec![m, n], a.dtype);
            if let Some(c) = ins.get(2) {
                unidirectional(c, &out.shape).map_err(|m| ShapeError {
                    message: format!("C {m}"),
                    operand: Some(2),
                })?;
            }
            one(out)
        }
        Op::Binary { op: b, .. } => {
            same_dtype(ins)?;
            if ins[0].dtype == DType::Bool {
                return err(format!("`{}` is not defined on bool", binary_name(*b)));
            }
            let shape = broadcast(&ins[0].shape, &ins[1].shape)?;
            one(TensorType::new(shape, ins[0].dtype))
        }
        Op::Unary(u) => {
            let t = ins[0];
            match u {
                UnaryOp::Relu | UnaryOp::Relu6 | UnaryOp::Abs | UnaryOp::Neg => {
                    numeric(t.dtype, 0)?
                }
                _ => float(t.dtype, 0)?,
            }
            one(t.clone())
        }
        Op::Clip { .. } => {
            numeric(ins[0].dtype, 0)?;
            one(ins[0].clone())
        }
        Op::HardSigmoid { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. }
            if !ins[0].dtype.is_float() =>
        {
            err_at(
                0,
                format!("`{}` needs a float tensor, got {}", op.name(), ins[0]),
            )
        }
        Op::HardSigmoid { .. } => one(ins[0].clone()),
        Op::Prelu => {
            same_dtype(ins)?;
            float(ins[0].dtype, 0)?;
            unidirectional(ins[1], &ins[0].shape).map_err(|m| ShapeError {
                message: format!("slope {m}"),
                operand: Some(1),
            })?;
            one(ins[0].clone())
        }
        Op::MaxPool(p) | Op::AvgPool(p) => one(pool2d(p, ins[0])?),
        Op::GlobalAvgPool => {
            let t = ins[0];
            float(t.dtype, 0)?;
            if t.rank() < 3 {
                return err_at(
                    0,
                    format!("`global_avg_pool` needs rank >= 3 (N, C, spatial...), got {t}"),
                );
            }
            let mut s = t.shape.clone();
            for d in &mut s[2..] {
                *d = 1;
            }
            one(TensorType::new(s, t.dtype))
        }
        Op::Concat { axis } => {
            same_dtype(ins)?;
            let r = ins[0].rank();
            let ax = norm_axis(*axis, r)?;
            let mut s = ins[0].shape.clone();
            for (i, t) in ins.iter().enumerate().skip(1) {
                if t.rank() != r {
                    return err_at(
                        i,
                        format!("operand {i} has rank {}, operand 0 has rank {r}", t.rank()),
                    );
                }
                for (d, (&have, &want)) in t.shape.iter().zip(&s).enumerate() {
                    if d != ax && have != want {
                        return err_at(i, format!(
                            "operand {i} is {t}, which differs from operand 0 in dimension {d} (not the concat axis {ax})"
                        ));
                    }
                }
                s[ax] = s[ax].checked_add(t.shape[ax]).ok_or_else(overflow)?;
            }
            one(TensorType::new(s, ins[0].dtype))
        }
        Op::Split { axis, sizes } => {
            let t = ins[0];
            let ax = norm_axis(*axis, t.rank())?;
            let total = sizes
                .iter()
                .try_fold(0u64, |a, s| a.checked_add(*s))
                .ok_or_else(overflow)?;
            if total != t.shape[ax] {
                return err(format!(
                    "sizes add up to {total} but dimension {ax} of {t} is {}",
                    t.shape[ax]
                ));
            }
            Ok(sizes
                .iter()
                .map(|s| {
                    let mut sh = t.shape.clone();
                    sh[ax] = *s;
                    TensorType::new(sh, t.dtype)
                })
                .collect())
        }
        Op::Slice(sl) => {
            let t = ins[0];
            let mut s = t.shape.clone();
            let mut seen = vec![false; t.rank()];
            for i in 0..sl.starts.len() {
                let ax = norm_axis(sl.axes[i], t.rank())?;
                if std::mem::replace(&mut seen[ax], true) {
                    return err(format!("axis {ax} is sliced twice"));
                }
                s[ax] = slice_len(t.shape[ax], sl.starts[i], sl.ends[i], sl.steps[i]);
            }
            one(TensorType::new(s, t.dtype))
        }
        Op::Reshape { shape } => {
            let t = ins[0];
            let n = t.num_elements().ok_or_else(overflow)?;
            let known = shape
                .iter()
                .filter(|d| **d >= 0)
                .try_fold(1u64, |a, d| a.checked_mul(*d as u64))
                .ok_or_else(overflow)?;
            let out: Vec<u64> = if shape.contains(&-1) {
                if known == 0 || n % known != 0 {
                    return err(format!("cannot reshape {t} ({n} elements) to {shape:?}"));
                }
                shape
                    .iter()
                    .map(|d| if *d == -1 { n / known } else { *d as u64 })
                    .collect()
            } else {
                if known != n {
                    return err(format!(
                        "cannot reshape {t} ({n} elements) to {shape:?} ({known} elements)"
                    ));
                }
                shape.iter().map(|d| *d as u64).collect()
            };
            one(TensorType::new(out, t.dtype))
        }
        Op::Flatten { axis } => {
            let t = ins[0];
            let r = t.rank() as i64;
            if *axis < -r || *axis > r {
                return err(format!("axis {axis} is out of range for rank {r}"));
            }
            let ax = if *axis < 0 {
                (axis + r) as usize
            } else {
                *axis as usize
            };
            let outer = t.shape[..ax]
                .iter()
                .try_fold(1u64, |a, d| a.checked_mul(*d))
                .ok_or_else(overflow)?;
            let inner = t.shape[ax..]
                .iter()
                .try_fold(1u64, |a, d| a.checked_mul(*d))
                .ok_or_else(overflow)?;
            one(TensorType::new(vec![outer, inner], t.dtype))
        }
        Op::Squeeze { axes } => {
            let t = ins[0];
            let axes = norm_axes(axes, t.rank())?;
            for &a in &axes {
                if t.shape[a] != 1 {
                    return err(format!(
                        "cannot squeeze axis {a} of {t}: its size is {}",
                        t.shape[a]
                    ));
                }
            }
            let s = t
                .shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, d)| *d)
                .collect::<Vec<_>>();
            one(TensorType::new(s, t.dtype))
        }
        Op::Unsqueeze { axes } => {
            let t = ins[0];
            let r = t.rank() + axes.len();
            let axes = norm_axes(axes, r)?;
            let mut src = t.shape.iter();
            let s: Vec<u64> = (0..r)
                .map(|i| {
                    if axes.contains(&i) {
                        1
                    } else {
                        *src.next().unwrap_or(&1)
                    }
                })
                .collect();
            one(TensorType::new(s, t.dtype))
        }
        Op::Transpose { perm } => {
            let t = ins[0];
            let mut seen = vec![false; t.rank()];
            if perm.len() != t.rank() {
                return err(format!(
                    "perm has {} entries for a rank-{} tensor",
                    perm.len(),
                    t.rank()
                ));
            }
            for &p in perm {
                let p = p as usize;
                if p >= t.rank() || std::mem::replace(&mut seen[p], true) {
                    return err(format!(
                        "perm {perm:?} is not a permutation of 0..{}",
                        t.rank()
                    ));
                }
            }
            one(TensorType::new(
                perm.iter()
                    .map(|&p| t.shape[p as usize])
                    .collect::<Vec<_>>(),
                t.dtype,
            ))
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            norm_axis(*axis, ins[0].rank())?;
            one(ins[0].clone())
        }
        Op::Pad { pads, mode, .. } => {
            let t = ins[0];
            let r = t.rank();
            if pads.len() != 2 * r {
                return err(format!(
                    "pads has {} values; a rank-{r} tensor needs {}",
                    pads.len(),
                    2 * r
                ));
            }
            let mut s = t.shape.clone();
            for i in 0..r {
                if *mode == crate::op::PadMode::Reflect
                    && (pads[i] >= t.shape[i] || pads[r + i] >= t.shape[i])
                {
                    return err(format!(
                        "reflect padding on axis {i} must be smaller than its size {}",
                        t.shape[i]
                    ));
                }
                if *mode == crate::op::PadMode::Edge && t.shape[i] == 0 && pads[i] + pads[r + i] > 0
                {
                    return err(format!("edge padding of the empty axis {i}"));
                }
                s[i] = s[i]
                    .checked_add(pads[i])
                    .and_then(|x| x.checked_add(pads[r + i]))
                    .ok_or_else(overflow)?;
            }
            one(TensorType::new(s, t.dtype))
        }
        Op::BatchNorm { .. } => {
            let t = ins[0];
            same_dtype(ins)?;
            float(t.dtype, 0)?;
            if t.rank() < 2 {
                return err_at(0, format!("`batch_norm` needs rank >= 2, got {t}"));
            }
            let c = t.shape[1];
            for (i, p) in ins.iter().enumerate().skip(1) {
                if p.shape != [c] {
                    return err_at(
                        i,
                        format!("operand {i} must be tensor<{c}x{}>, got {p}", t.dtype),
                    );
                }
            }
            one(t.clone())
        }
        Op::LayerNorm { axis, .. } => {
            let t = ins[0];
            same_dtype(ins)?;
            float(t.dtype, 0)?;
            let ax = norm_axis(*axis, t.rank())?;
            let norm = &t.shape[ax..];
            for (i, p) in ins.iter().enumerate().skip(1) {
                unidirectional(p, norm).map_err(|m| ShapeError {
                    message: format!("operand {i} {m} (the normalised dimensions {norm:?})"),
                    operand: Some(i),
                })?;
            }
            one(t.clone())
        }
        Op::Reduce { axes, keepdims, .. } => {
            let t = ins[0];
            float(t.dtype, 0)?;
            // ONNX: no axes means every axis.
            let axes = if axes.is_empty() {
                (0..t.rank()).collect()
            } else {
                norm_axes(axes, t.rank())?
            };
            let s: Vec<u64> = if *keepdims {
                t.shape
                    .iter()
                    .enumerate()
                    .map(|(i, d)| if axes.contains(&i) { 1 } else { *d })
                    .collect()
            } else {
                t.shape
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !axes.contains(i))
                    .map(|(_, d)| *d)
                    .collect()
            };
            one(TensorType::new(s, t.dtype))
        }
        Op::Resize(r) => {
            let t = ins[0];
            float(t.dtype, 0)?;
            if t.rank() != 4 {
                return err_at(0, format!("`resize` works on NCHW tensors, got {t}"));
            }
            let out = TensorType::new(vec![t.shape[0], t.shape[1], r.size[0], r.size[1]], t.dtype);
            // Every output pixel interpolates from input pixels: an input empty along a
            // spatial axis has none to give a non-empty output (an empty output is fine).
            if (t.shape[2] == 0 || t.shape[3] == 0) && out.num_elements() != Some(0) {
                return err_at(
                    0,
                    format!("nothing to interpolate from: the input {t} is empty along its spatial axes, the output {out} is not"),
                );
            }
            one(out)
        }
    }
}

fn overflow() -> ShapeError {
    ShapeError {
        message: "a dimension overflows 64 bits".into(),
        operand: None,
    }
}

fn binary_name(b: BinaryOp) -> &'static str {
    b.name()
}

fn same_dtype(ins: &[&TensorType]) -> Result<()> {
    let d = ins[0].dtype;
    match ins.iter().position(|t| t.dtype != d) {
        Some(i) => err_at(
            i,
            format!(
                "operand {i} is {}, but operand 0 is {}: element types must match",
                ins[i], ins[0]
            ),
        ),
        None => Ok(()),
    }
}

fn float(d: DType, operand: usize) -> Result<()> {
    if d.is_float() {
        Ok(())
    } else {
        err_at(operand, format!("expected a float element type, got {d}"))
    }
}

fn numeric(d: DType, operand: usize) -> Result<()> {
    if d == DType::Bool {
        err_at(operand, "expected a numeric element type, got bool")
    } else {
        Ok(())
    }
}

/// Normalises a possibly negative axis (ONNX: `-r <= axis < r`).
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let a = norm_axis(a, rank)?;
        if out.contains(&a) {
            return err(format!("axis {a} is given twice"));
        }
        out.push(a);
    }
    Ok(out)
}

/// NumPy broadcasting of two shapes.
pub fn broadcast(a: &[u64], b: &[u64]) -> Result<Vec<u64>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let da = if i < r - a.len() {
            1
        } else {
            a[i - (r - a.len())]
        };
        let db = if i < r - b.len() {
            1
        } else {
            b[i - (r - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return err(format!(
                "shapes {a:?} and {b:?} cannot be broadcast together (dimension {i}: {da} vs {db})"
            ))
            }
        };
    }
    Ok(out)
}

/// Whether `t` broadcasts to exactly `target` (ONNX unidirectional broadcasting).
fn unidirectional(t: &TensorType, target: &[u64]) -> std::result::Result<(), String> {
    match broadcast(&t.shape, target) {
        Ok(s) if s == target => Ok(()),
        _ => Err(format!("{t} does not broadcast to {target:?}")),
    }
}

fn matmul(a: &TensorType, b: &TensorType) -> Result<TensorType> {
    same_dtype(&[a, b])?;
    numeric(a.dtype, 0)?;
    if a.rank() == 0 || b.rank() == 0 {
        return err("`matmul` operands must have rank >= 1");
    }
    // NumPy: a 1-D left operand is a row vector, a 1-D right operand a column vector; the
    // added dimension is removed from the result.
    let ash: Vec<u64> = if a.rank() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.clone()
    };
    let bsh: Vec<u64> = if b.rank() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.clone()
    };
    let (m, k) = (ash[ash.len() - 2], ash[ash.len() - 1]);
    let (kb, n) = (bsh[bsh.len() - 2], bsh[bsh.len() - 1]);
    if k != kb {
        return err(format!(
            "inner dimensions differ: {a} and {b} (K = {k} vs {kb})"
        ));
    }
    let mut s = broadcast(&ash[..ash.len() - 2], &bsh[..bsh.len() - 2])?;
    if a.rank() > 1 {
        s.push(m);
    }
    if b.rank() > 1 {
        s.push(n);
    }
    Ok(TensorType::new(s, a.dtype))
}

/// Output extent of a sliding window (convolution or pooling), ONNX / PyTorch rules.
fn window(
    input: u64,
    pad_begin: u64,
    pad_end: u64,
    kernel_eff: u64,
    stride: u64,
    ceil: bool,
) -> Result<u64> {
    let padded = input
        .checked_add(pad_begin)
        .and_then(|v| v.checked_add(pad_end))
        .ok_or_else(overflow)?;
    if padded < kernel_eff {
        return err(format!(
            "the window ({kernel_eff}) is larger than the padded input ({padded})"
        ));
    }
    let span = padded - kernel_eff;
    let steps = if ceil {
        span.div_ceil(stride)
    } else {
        span / stride
    };
    let mut out = steps + 1;
    // (An overflowing product is certainly past the end.)
    let last_start = (out - 1).saturating_mul(stride);
    if ceil && out > 1 && last_start >= input + pad_begin {
        // The last window may not start in the end padding (PyTorch's rule, adopted by ONNX
        // for ceil_mode).
        out -= 1;
    }
    Ok(out)
}

fn conv2d(c: &crate::op::Conv2d, ins: &[&TensorType]) -> Result<TensorType> {
    let (x, w) = (ins[0], ins[1]);
    same_dtype(ins)?;
    numeric(x.dtype, 0)?;
    if x.rank() != 4 {
        return err_at(0, format!("`conv2d` input must be NCHW (rank 4), got {x}"));
    }
    if w.rank() != 4 {
        return err_at(
            1,
            format!("`conv2d` weight must be [M, C/groups, kH, kW], got {w}"),
        );
    }
    let (ci, m, g) = (x.shape[1], w.shape[0], c.groups);
    if ci % g != 0 || m % g != 0 {
        return err(format!(
            "groups = {g} must divide both the input channels ({ci}) and the output channels ({m})"
        ));
    }
    if w.shape[1] != ci / g {
        return err_at(1, format!(
            "weight {w} expects {} input channels per group, but the input has {ci} channels in {g} group(s)",
            w.shape[1]
        ));
    }
    if let Some(b) = ins.get(2) {
        if b.shape != [m] {
            return err_at(2, format!("bias must be tensor<{m}x{}>, got {b}", x.dtype));
        }
    }
    if w.shape[2] == 0 || w.shape[3] == 0 {
        return err_at(
            1,
            format!("kernel dimensions must be positive, weight is {w}"),
        );
    }
    let mut s = vec![x.shape[0], m, 0, 0];
    for i in 0..2 {
        let k_eff = c.dilations[i]
            .checked_mul(w.shape[2 + i].saturating_sub(1))
            .and_then(|v| v.checked_add(1))
            .ok_or_else(overflow)?;
        s[2 + i] = window(
            x.shape[2 + i],
            c.pads[i],
            c.pads[2 + i],
            k_eff,
            c.strides[i],
            false,
        )?;
    }
    Ok(TensorType::new(s, x.dtype))
}

/// `conv_transpose`: plain integer arithmetic per spatial axis,
/// `out = (in - 1)·s + (k - 1)·d + 1 + output_padding - pad_begin - pad_end`.
fn conv_transpose(c: &crate::op::ConvTranspose, ins: &[&TensorType]) -> Result<TensorType> {
    let (x, w) = (ins[0], ins[1]);
    same_dtype(ins)?;
    numeric(x.dtype, 0)?;
    if x.rank() != 4 {
        return err_at(
            0,
            format!("`conv_transpose` input must be NCHW (rank 4), got {x}"),
        );
    }
    if w.rank() != 4 {
        return err_at(
            1,
            format!("`conv_transpose` weight must be [C, M/groups, kH, kW], got {w}"),
        );
    }
    let (ci, g) = (x.shape[1], c.groups);
    if w.shape[0] != ci {
        return err_at(
            1,
            format!(
                "weight {w} is for {} input channels, but the input {x} has {ci}",
                w.shape[0]
            ),
        );
    }
    if ci % g != 0 {
        return err(format!(
            "groups = {g} must divide the input channels ({ci})"
        ));
    }
    let m = w.shape[1].checked_mul(g).ok_or_else(overflow)?;
    if let Some(b) = ins.get(2) {
        if b.shape != [m] {
            return err_at(2, format!("bias must be tensor<{m}x{}>, got {b}", x.dtype));
        }
    }
    if w.shape[2] == 0 || w.shape[3] == 0 {
        return err_at(
            1,
            format!("kernel dimensions must be positive, weight is {w}"),
        );
    }
    let mut s = vec![x.shape[0], m, 0, 0];
    for i in 0..2 {
        let input = x.shape[2 + i];
        if input == 0 {
            return err_at(
                0,
                format!("the input {x} is empty along spatial axis {i}: a transposed convolution of it has no defined size"),
            );
        }
        let full = (input - 1)
            .checked_mul(c.strides[i])
            .and_then(|v| v.checked_add(c.dilations[i].checked_mul(w.shape[2 + i] - 1)?))
            .and_then(|v| v.checked_add(1)?.checked_add(c.output_padding[i]))
            .ok_or_else(overflow)?;
        let crop = c.pads[i].checked_add(c.pads[2 + i]).ok_or_else(overflow)?;
        if crop > full {
            return err(format!(
                "the pads crop {crop} along spatial axis {i}, more than the full output's {full}"
            ));
        }
        s[2 + i] = full - crop;
    }
    Ok(TensorType::new(s, x.dtype))
}

fn pool2d(p: &Pool2d, x: &TensorType) -> Result<TensorType> {
    numeric(x.dtype, 0)?;
    if x.rank() != 4 {
        return err_at(
            0,
            format!("pooling works on NCHW tensors (rank 4), got {x}"),
        );
    }
    let mut s = x.shape.clone();
    for i in 0..2 {
        if p.pads[i] >= p.kernel[i] || p.pads[2 + i] >= p.kernel[i] {
            return err("padding must be smaller than the kernel");
        }
        s[2 + i] = window(
            x.shape[2 + i],
            p.pads[i],
            p.pads[2 + i],
            p.kernel[i],
            p.strides[i],
            p.ceil_mode,
        )?;
    }
    Ok(TensorType::new(s, x.dtype))
}

/// Length of an ONNX slice along one axis, after clamping `start` and `end` into range.
fn slice_len(dim: u64, start: i64, end: i64, step: i64) -> u64 {
    let d = dim as i128;
    let fix = |v: i64| {
        let v = v as i128;
        if v < 0 {
            v + d
        } else {
            v
        }
    };
    let (s, e) = (fix(start), fix(end));
    let step = step as i128;
    let (s, e) = if step > 0 {
        (s.clamp(0, d), e.clamp(0, d))
    } else {
        (s.clamp(-1, d - 1), e.clamp(-1, d - 1))
    };
    let n = if step > 0 {
        (e - s + step - 1) / step
    } else {
        (s - e + (-step) - 1) / (-step)
    };
    n.max(0) as u64
}
