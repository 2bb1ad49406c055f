//! Shape and dtype inference: one rule per op family, all in this file (as tract keeps each
//! op's shape rule with the op). ONNX semantics on NCHW tensors.
//!
//! The rules are generic over the dimension arithmetic [`Dim`]: with `u64` dims ([`infer`])
//! every question is decided and the rules behave as plain integer code; with symbolic dims
//! ([`infer_sym`]) a question the canonical forms cannot decide (are `h` and `w` equal? is
//! the padded input at least the window?) is recorded in [`Checks`] as a run-time condition
//! carrying the message the concrete rule would give, and inference goes on as if it held.
//! A new rule is written once, with `require_eq` / `require_ge` for its conditions.

use crate::op::{reshape_text, Activation, BinaryOp, Op, Pool2d, ReshapeDim, UnaryOp};
use crate::sym::{Cond, CondKind, Dim, DimExpr};
use crate::types::{DType, SymTensorType, TensorType, TensorTypeOf};

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

/// The conditions a symbolic inference could not decide, in the order met.
pub struct Checks<D> {
    pub conds: Vec<Cond<D>>,
}

impl<D: Dim> Checks<D> {
    pub fn new() -> Self {
        Checks { conds: Vec::new() }
    }

    /// `a == b`, or the error `message` gives when it is false.
    fn require_eq(&mut self, a: &D, b: &D, message: impl FnOnce() -> ShapeError) -> Result<()> {
        self.require(CondKind::Eq, a, b, a.decide_eq(b), message)
    }

    /// `a >= b`, or the error `message` gives when it is false.
    fn require_ge(&mut self, a: &D, b: &D, message: impl FnOnce() -> ShapeError) -> Result<()> {
        self.require(CondKind::Ge, a, b, a.decide_ge(b), message)
    }

    fn require(
        &mut self,
        kind: CondKind,
        a: &D,
        b: &D,
        decided: Option<bool>,
        message: impl FnOnce() -> ShapeError,
    ) -> Result<()> {
        match decided {
            Some(true) => Ok(()),
            Some(false) => Err(message()),
            None => {
                let (lhs, rhs) = match kind {
                    CondKind::Eq => (a.clone(), b.clone()),
                    CondKind::Ge => D::tidy_ge(a, b),
                };
                self.conds.push(Cond {
                    kind,
                    lhs,
                    rhs,
                    message: message().message,
                });
                Ok(())
            }
        }
    }
}

impl<D: Dim> Default for Checks<D> {
    fn default() -> Self {
        Checks::new()
    }
}

fn shape_error(message: impl Into<String>) -> ShapeError {
    ShapeError {
        message: message.into(),
        operand: None,
    }
}

fn shape_error_at(operand: usize, message: impl Into<String>) -> ShapeError {
    ShapeError {
        message: message.into(),
        operand: Some(operand),
    }
}

/// Result types of `op` applied to operands of the given types. `const` has no rule: its type
/// is always declared.
pub fn infer(op: &Op, ins: &[&TensorType]) -> Result<Vec<TensorType>> {
    let mut checks = Checks::new();
    let out = infer_dims(op, ins, &mut checks)?;
    debug_assert!(checks.conds.is_empty(), "u64 dims decide every condition");
    Ok(out)
}

/// Result types of `op` on operands with symbolic dims; the conditions that could not be
/// decided are appended to `checks`.
pub fn infer_sym(
    op: &Op,
    ins: &[&SymTensorType],
    checks: &mut Checks<DimExpr>,
) -> Result<Vec<SymTensorType>> {
    infer_dims(op, ins, checks)
}

/// The one table of shape rules, for any dimension arithmetic.
pub fn infer_dims<D: Dim>(
    op: &Op,
    ins: &[&TensorTypeOf<D>],
    cx: &mut Checks<D>,
) -> Result<Vec<TensorTypeOf<D>>> {
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
    let one = |t: TensorTypeOf<D>| Ok(vec![t]);
    match op {
        Op::Const { .. } => err("`const` needs a declared result type"),
        Op::AllocTensor { .. } => err("`alloc_tensor` needs a declared result type"),
        Op::AllocSlab { size, .. } => one(TensorTypeOf::new(vec![D::lit(*size)], DType::U8)),
        Op::Conv2d(c) => one(conv2d(c, ins, cx)?),
        Op::ConvTranspose(c) => one(conv_transpose(c, ins, cx)?),
        Op::MatMul { .. } => one(matmul(ins[0], ins[1], cx)?),
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
                (&a.shape[1], &a.shape[0])
            } else {
                (&a.shape[0], &a.shape[1])
            };
            let (kb, n) = if g.trans_b {
                (&b.shape[1], &b.shape[0])
            } else {
                (&b.shape[0], &b.shape[1])
            };
            cx.require_eq(k, kb, || {
                shape_error(format!(
                    "inner dimensions differ: A gives K = {k}, B gives K = {kb}"
                ))
            })?;
            let out = TensorTypeOf::new(vec![m.clone(), n.clone()], a.dtype);
            if let Some(c) = ins.get(2) {
                unidirectional(c, &out.shape, cx).map_err(|m| ShapeError {
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
            let shape = broadcast_dims(&ins[0].shape, &ins[1].shape, cx)?;
            one(TensorTypeOf::new(shape, ins[0].dtype))
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
            unidirectional(ins[1], &ins[0].shape, cx).map_err(|m| ShapeError {
                message: format!("slope {m}"),
                operand: Some(1),
            })?;
            one(ins[0].clone())
        }
        Op::MaxPool(p) | Op::AvgPool(p) => one(pool2d(p, ins[0], cx)?),
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
                *d = D::lit(1);
            }
            one(TensorTypeOf::new(s, t.dtype))
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
                for (d, (have, want)) in t.shape.iter().zip(&s).enumerate() {
                    if d != ax {
                        cx.require_eq(have, want, || shape_error_at(i, format!(
                            "operand {i} is {t}, which differs from operand 0 in dimension {d} (not the concat axis {ax})"
                        )))?;
                    }
                }
                s[ax] = s[ax].add(&t.shape[ax]).ok_or_else(overflow)?;
            }
            one(TensorTypeOf::new(s, ins[0].dtype))
        }
        Op::Split { axis, sizes } => {
            let t = ins[0];
            let ax = norm_axis(*axis, t.rank())?;
            let total = sizes
                .iter()
                .try_fold(0u64, |a, s| a.checked_add(*s))
                .ok_or_else(overflow)?;
            cx.require_eq(&D::lit(total), &t.shape[ax], || {
                shape_error(format!(
                    "sizes add up to {total} but dimension {ax} of {t} is {}",
                    t.shape[ax]
                ))
            })?;
            Ok(sizes
                .iter()
                .map(|s| {
                    let mut sh = t.shape.clone();
                    sh[ax] = D::lit(*s);
                    TensorTypeOf::new(sh, t.dtype)
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
                s[ax] = t.shape[ax].slice_len(sl.starts[i], sl.ends[i], sl.steps[i]);
            }
            one(TensorTypeOf::new(s, t.dtype))
        }
        Op::Reshape { shape } => {
            let t = ins[0];
            let n = t.num_elements().ok_or_else(overflow)?;
            let target = reshape_text(shape);
            // The written sizes, as dims of this inference (a size naming a dim is known only
            // to a symbolic one).
            let mut sizes: Vec<Option<D>> = Vec::with_capacity(shape.len());
            for d in shape {
                sizes.push(match d {
                    ReshapeDim::Infer => None,
                    ReshapeDim::Size(e) => Some(D::from_expr(e).ok_or_else(|| {
                        shape_error(format!(
                            "the target {target} names a dim, but the operand's shape {t} is static"
                        ))
                    })?),
                });
            }
            let known = sizes
                .iter()
                .flatten()
                .try_fold(D::lit(1), |a, d| a.mul(d))
                .ok_or_else(overflow)?;
            let out: Vec<D> = if sizes.iter().any(Option::is_none) {
                let bad = || shape_error(format!("cannot reshape {t} ({n} elements) to {target}"));
                if known.known() == Some(0) {
                    return Err(bad());
                }
                // A symbolic `known` that is one monomial dividing every term of `n` gives the
                // exact quotient (an identity, so no check: at a binding where `known` is zero,
                // so is `n`); any other leaves a floor division and the check below.
                let inferred = n.div_by(&known).ok_or_else(bad)?;
                // `known` divides `n`.
                let whole = inferred.mul(&known).ok_or_else(overflow)?;
                cx.require_eq(&whole, &n, bad)?;
                sizes
                    .into_iter()
                    .map(|d| d.unwrap_or_else(|| inferred.clone()))
                    .collect()
            } else {
                cx.require_eq(&known, &n, || {
                    shape_error(format!(
                        "cannot reshape {t} ({n} elements) to {target} ({known} elements)"
                    ))
                })?;
                sizes.into_iter().flatten().collect()
            };
            one(TensorTypeOf::new(out, t.dtype))
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
                .try_fold(D::lit(1), |a, d| a.mul(d))
                .ok_or_else(overflow)?;
            let inner = t.shape[ax..]
                .iter()
                .try_fold(D::lit(1), |a, d| a.mul(d))
                .ok_or_else(overflow)?;
            one(TensorTypeOf::new(vec![outer, inner], t.dtype))
        }
        Op::Squeeze { axes } => {
            let t = ins[0];
            let axes = norm_axes(axes, t.rank())?;
            for &a in &axes {
                cx.require_eq(&t.shape[a], &D::lit(1), || {
                    shape_error(format!(
                        "cannot squeeze axis {a} of {t}: its size is {}",
                        t.shape[a]
                    ))
                })?;
            }
            let s = t
                .shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, d)| d.clone())
                .collect::<Vec<_>>();
            one(TensorTypeOf::new(s, t.dtype))
        }
        Op::Unsqueeze { axes } => {
            let t = ins[0];
            let r = t.rank() + axes.len();
            let axes = norm_axes(axes, r)?;
            let mut src = t.shape.iter();
            let s: Vec<D> = (0..r)
                .map(|i| {
                    if axes.contains(&i) {
                        D::lit(1)
                    } else {
                        src.next().cloned().unwrap_or(D::lit(1))
                    }
                })
                .collect();
            one(TensorTypeOf::new(s, t.dtype))
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
            one(TensorTypeOf::new(
                perm.iter()
                    .map(|&p| t.shape[p as usize].clone())
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
                if *mode == crate::op::PadMode::Reflect {
                    let bad = || {
                        shape_error(format!(
                            "reflect padding on axis {i} must be smaller than its size {}",
                            t.shape[i]
                        ))
                    };
                    // Each pad smaller than the axis: axis >= pad + 1.
                    for pad in [pads[i], pads[r + i]] {
                        let need = pad.checked_add(1).ok_or_else(bad)?;
                        cx.require_ge(&t.shape[i], &D::lit(need), bad)?;
                    }
                }
                if *mode == crate::op::PadMode::Edge && (pads[i] > 0 || pads[r + i] > 0) {
                    cx.require_ge(&t.shape[i], &D::lit(1), || {
                        shape_error(format!("edge padding of the empty axis {i}"))
                    })?;
                }
                s[i] = s[i]
                    .add(&D::lit(pads[i]))
                    .and_then(|x| x.add(&D::lit(pads[r + i])))
                    .ok_or_else(overflow)?;
            }
            one(TensorTypeOf::new(s, t.dtype))
        }
        Op::BatchNorm { .. } => {
            let t = ins[0];
            same_dtype(ins)?;
            float(t.dtype, 0)?;
            if t.rank() < 2 {
                return err_at(0, format!("`batch_norm` needs rank >= 2, got {t}"));
            }
            let c = &t.shape[1];
            for (i, p) in ins.iter().enumerate().skip(1) {
                let bad = || {
                    shape_error_at(
                        i,
                        format!("operand {i} must be tensor<{c}x{}>, got {p}", t.dtype),
                    )
                };
                if p.rank() != 1 {
                    return Err(bad());
                }
                cx.require_eq(&p.shape[0], c, bad)?;
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
                unidirectional(p, norm, cx).map_err(|m| ShapeError {
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
            let s: Vec<D> = if *keepdims {
                t.shape
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        if axes.contains(&i) {
                            D::lit(1)
                        } else {
                            d.clone()
                        }
                    })
                    .collect()
            } else {
                t.shape
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !axes.contains(i))
                    .map(|(_, d)| d.clone())
                    .collect()
            };
            one(TensorTypeOf::new(s, t.dtype))
        }
        Op::Resize(r) => {
            let t = ins[0];
            float(t.dtype, 0)?;
            if t.rank() != 4 {
                return err_at(0, format!("`resize` works on NCHW tensors, got {t}"));
            }
            let [oh, ow] = match r.scale {
                None => [D::lit(r.size[0]), D::lit(r.size[1])],
                Some([sh, sw]) => [
                    t.shape[2].mul(&D::lit(sh)).ok_or_else(overflow)?,
                    t.shape[3].mul(&D::lit(sw)).ok_or_else(overflow)?,
                ],
            };
            let out = TensorTypeOf::new(
                vec![t.shape[0].clone(), t.shape[1].clone(), oh, ow],
                t.dtype,
            );
            // Every output pixel interpolates from input pixels: an input empty along a
            // spatial axis has none to give a non-empty output (an empty output is fine).
            // As one condition: min(H, W) >= min(1, elements of the output), an overflowing
            // count being non-zero.
            let one_d = D::lit(1);
            let nonempty = out.num_elements().map_or(one_d.clone(), |n| n.min(&one_d));
            cx.require_ge(&t.shape[2].min(&t.shape[3]), &nonempty, || {
                shape_error_at(
                    0,
                    format!("nothing to interpolate from: the input {t} is empty along its spatial axes, the output {out} is not"),
                )
            })?;
            one(out)
        }
        Op::Trilu { .. } => {
            let t = ins[0];
            float(t.dtype, 0)?;
            if t.rank() < 2 {
                return err_at(
                    0,
                    format!("`trilu` works on the last two axes: it needs rank >= 2, got {t}"),
                );
            }
            one(t.clone())
        }
        Op::Cast { to } => one(TensorTypeOf::new(ins[0].shape.clone(), *to)),
        Op::Compare(_) => {
            same_dtype(ins)?;
            let shape = broadcast_dims(&ins[0].shape, &ins[1].shape, cx)?;
            one(TensorTypeOf::new(shape, DType::Bool))
        }
        Op::Where => {
            if ins[0].dtype != DType::Bool {
                return err_at(
                    0,
                    format!("the condition of `where` must be bool, got {}", ins[0]),
                );
            }
            same_dtype(&ins[1..]).map_err(|e| ShapeError {
                message: format!(
                    "x is {} and y is {}: element types must match",
                    ins[1], ins[2]
                ),
                operand: e.operand.map(|i| i + 1),
            })?;
            let xy = broadcast_dims(&ins[1].shape, &ins[2].shape, cx)?;
            let shape = broadcast_dims(&ins[0].shape, &xy, cx)?;
            one(TensorTypeOf::new(shape, ins[1].dtype))
        }
        Op::Logical(_) | Op::Not => {
            for (i, t) in ins.iter().enumerate() {
                if t.dtype != DType::Bool {
                    return err_at(
                        i,
                        format!("`{}` needs bool operands, operand {i} is {t}", op.name()),
                    );
                }
            }
            let shape = match ins {
                [a, b] => broadcast_dims(&a.shape, &b.shape, cx)?,
                _ => ins[0].shape.clone(),
            };
            one(TensorTypeOf::new(shape, DType::Bool))
        }
        Op::Mod { fmod } => {
            same_dtype(ins)?;
            numeric(ins[0].dtype, 0)?;
            if ins[0].dtype.is_float() && !fmod {
                return err(format!(
                    "`mod` of {} needs `fmod = true` (the sign of the divisor is defined on integers only)",
                    ins[0].dtype
                ));
            }
            let shape = broadcast_dims(&ins[0].shape, &ins[1].shape, cx)?;
            one(TensorTypeOf::new(shape, ins[0].dtype))
        }
        Op::ArgReduce { axis, keepdims, .. } => {
            let t = ins[0];
            numeric(t.dtype, 0)?;
            let ax = norm_axis(*axis, t.rank())?;
            // Every index must come from some element: an empty reduced axis has none.
            cx.require_ge(&t.shape[ax], &D::lit(1), || {
                shape_error_at(
                    0,
                    format!("`{}` over the empty axis {ax} of {t}", op.name()),
                )
            })?;
            let mut s = t.shape.clone();
            if *keepdims {
                s[ax] = D::lit(1);
            } else {
                s.remove(ax);
            }
            one(TensorTypeOf::new(s, DType::I64))
        }
        Op::GridSample(_) => {
            let (x, g) = (ins[0], ins[1]);
            float(x.dtype, 0)?;
            if x.rank() != 4 {
                return err_at(0, format!("`grid_sample` samples NCHW tensors, got {x}"));
            }
            if g.dtype != x.dtype || g.rank() != 4 {
                return err_at(
                    1,
                    format!("the grid must be [N, Ho, Wo, 2] of the input's element type, got {g}"),
                );
            }
            cx.require_eq(&g.shape[3], &D::lit(2), || {
                shape_error_at(
                    1,
                    format!("the grid's last axis holds (x, y): it must be 2, got {g}"),
                )
            })?;
            cx.require_eq(&g.shape[0], &x.shape[0], || {
                shape_error_at(1, format!("the grid {g} and the input {x} differ in batch"))
            })?;
            let out = TensorTypeOf::new(
                vec![
                    x.shape[0].clone(),
                    x.shape[1].clone(),
                    g.shape[1].clone(),
                    g.shape[2].clone(),
                ],
                x.dtype,
            );
            // As for `resize`: an empty image has no pixel to give a non-empty output.
            let one_d = D::lit(1);
            let nonempty = out.num_elements().map_or(one_d.clone(), |n| n.min(&one_d));
            cx.require_ge(&x.shape[2].min(&x.shape[3]), &nonempty, || {
                shape_error_at(
                    0,
                    format!("nothing to sample: the input {x} is empty along its spatial axes, the output {out} is not"),
                )
            })?;
            one(out)
        }
        Op::CumSum { axis, .. } => {
            let t = ins[0];
            if !matches!(t.dtype, DType::F32 | DType::I32 | DType::I64) {
                return err_at(
                    0,
                    format!("`cumsum` takes f32, i32 or i64 tensors, got {t}"),
                );
            }
            norm_axis(*axis, t.rank())?;
            one(t.clone())
        }
        Op::TopK { axis, k, .. } => {
            let t = ins[0];
            if !matches!(
                t.dtype,
                DType::F32 | DType::I8 | DType::U8 | DType::I32 | DType::I64
            ) {
                return err_at(
                    0,
                    format!("`top_k` takes f32, i8, u8, i32 or i64 tensors, got {t}"),
                );
            }
            let ax = norm_axis(*axis, t.rank())?;
            cx.require_ge(&t.shape[ax], &D::lit(*k), || {
                shape_error_at(
                    0,
                    format!(
                        "`top_k` takes k = {k} elements along axis {ax} of {t}, which has fewer"
                    ),
                )
            })?;
            let mut s = t.shape.clone();
            s[ax] = D::lit(*k);
            Ok(vec![
                TensorTypeOf::new(s.clone(), t.dtype),
                TensorTypeOf::new(s, DType::I64),
            ])
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

fn same_dtype<D: Dim>(ins: &[&TensorTypeOf<D>]) -> Result<()> {
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
    broadcast_dims(a, b, &mut Checks::new())
}

/// NumPy broadcasting. A symbolic dim is never taken to be 1 unless it is the constant 1:
/// against another dim it must be equal (a run-time check when undecided), as most
/// compilers of dynamic shapes assume.
fn broadcast_dims<D: Dim>(a: &[D], b: &[D], cx: &mut Checks<D>) -> Result<Vec<D>> {
    let r = a.len().max(b.len());
    let one = D::lit(1);
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = if i < r - a.len() {
            &one
        } else {
            &a[i - (r - a.len())]
        };
        let db = if i < r - b.len() {
            &one
        } else {
            &b[i - (r - b.len())]
        };
        let bad = || {
            shape_error(format!(
                "shapes {a:?} and {b:?} cannot be broadcast together (dimension {i}: {da} vs {db})"
            ))
        };
        out.push(match (da.decide_eq(db), da.known(), db.known()) {
            (Some(true), _, _) => da.clone(),
            (_, Some(1), _) => db.clone(),
            (_, _, Some(1)) => da.clone(),
            (Some(false), _, _) => return Err(bad()),
            (None, _, _) => {
                cx.require_eq(da, db, bad)?;
                // The more constant of the two names the result.
                if db.known().is_some() {
                    db.clone()
                } else {
                    da.clone()
                }
            }
        });
    }
    Ok(out)
}

/// Whether `t` broadcasts to exactly `target` (ONNX unidirectional broadcasting): no more
/// dims than the target, each 1 or the target's.
fn unidirectional<D: Dim>(
    t: &TensorTypeOf<D>,
    target: &[D],
    cx: &mut Checks<D>,
) -> std::result::Result<(), String> {
    let bad = || format!("{t} does not broadcast to {target:?}");
    if t.rank() > target.len() {
        return Err(bad());
    }
    let skip = target.len() - t.rank();
    for (d, want) in t.shape.iter().zip(&target[skip..]) {
        if d.known() != Some(1) {
            cx.require_eq(d, want, || shape_error(bad()))
                .map_err(|e| e.message)?;
        }
    }
    Ok(())
}

fn matmul<D: Dim>(
    a: &TensorTypeOf<D>,
    b: &TensorTypeOf<D>,
    cx: &mut Checks<D>,
) -> Result<TensorTypeOf<D>> {
    same_dtype(&[a, b])?;
    numeric(a.dtype, 0)?;
    if a.rank() == 0 || b.rank() == 0 {
        return err("`matmul` operands must have rank >= 1");
    }
    // NumPy: a 1-D left operand is a row vector, a 1-D right operand a column vector; the
    // added dimension is removed from the result.
    let ash: Vec<D> = if a.rank() == 1 {
        vec![D::lit(1), a.shape[0].clone()]
    } else {
        a.shape.clone()
    };
    let bsh: Vec<D> = if b.rank() == 1 {
        vec![b.shape[0].clone(), D::lit(1)]
    } else {
        b.shape.clone()
    };
    let (m, k) = (&ash[ash.len() - 2], &ash[ash.len() - 1]);
    let (kb, n) = (&bsh[bsh.len() - 2], &bsh[bsh.len() - 1]);
    cx.require_eq(k, kb, || {
        shape_error(format!(
            "inner dimensions differ: {a} and {b} (K = {k} vs {kb})"
        ))
    })?;
    let mut s = broadcast_dims(&ash[..ash.len() - 2], &bsh[..bsh.len() - 2], cx)?;
    if a.rank() > 1 {
        s.push(m.clone());
    }
    if b.rank() > 1 {
        s.push(n.clone());
    }
    Ok(TensorTypeOf::new(s, a.dtype))
}

/// Output extent of a sliding window (convolution or pooling), ONNX / PyTorch rules.
fn window<D: Dim>(
    input: &D,
    pad_begin: u64,
    pad_end: u64,
    kernel_eff: &D,
    stride: u64,
    ceil: bool,
    cx: &mut Checks<D>,
) -> Result<D> {
    let padded = input
        .add(&D::lit(pad_begin))
        .and_then(|v| v.add(&D::lit(pad_end)))
        .ok_or_else(overflow)?;
    cx.require_ge(&padded, kernel_eff, || {
        shape_error(format!(
            "the window ({kernel_eff}) is larger than the padded input ({padded})"
        ))
    })?;
    let span = padded.sub(kernel_eff);
    let steps = if ceil {
        span.div_ceil(stride)
    } else {
        span.div_floor(stride)
    };
    let out = steps.add(&D::lit(1)).ok_or_else(overflow)?;
    if ceil {
        // The last window may not start in the end padding (PyTorch's rule, adopted by ONNX
        // for ceil_mode).
        let begin = input.add(&D::lit(pad_begin)).ok_or_else(overflow)?;
        return Ok(out.ceil_mode_fix(&begin, stride));
    }
    Ok(out)
}

fn conv2d<D: Dim>(
    c: &crate::op::Conv2d,
    ins: &[&TensorTypeOf<D>],
    cx: &mut Checks<D>,
) -> Result<TensorTypeOf<D>> {
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
    let (ci, m, g) = (&x.shape[1], &w.shape[0], c.groups);
    let groups = || {
        shape_error(format!(
            "groups = {g} must divide both the input channels ({ci}) and the output channels ({m})"
        ))
    };
    // `g` divides `d`: ⌊d / g⌋·g == d.
    for d in [ci, m] {
        let whole = d.div_floor(g).mul(&D::lit(g)).ok_or_else(overflow)?;
        cx.require_eq(&whole, d, groups)?;
    }
    cx.require_eq(&w.shape[1], &ci.div_floor(g), || {
        shape_error_at(1, format!(
            "weight {w} expects {} input channels per group, but the input has {ci} channels in {g} group(s)",
            w.shape[1]
        ))
    })?;
    if let Some(b) = ins.get(2) {
        let bad = || shape_error_at(2, format!("bias must be tensor<{m}x{}>, got {b}", x.dtype));
        if b.rank() != 1 {
            return Err(bad());
        }
        cx.require_eq(&b.shape[0], m, bad)?;
    }
    for k in &w.shape[2..] {
        cx.require_ge(k, &D::lit(1), || {
            shape_error_at(
                1,
                format!("kernel dimensions must be positive, weight is {w}"),
            )
        })?;
    }
    let mut s = vec![x.shape[0].clone(), m.clone()];
    for i in 0..2 {
        let k_eff = D::lit(c.dilations[i])
            .mul(&w.shape[2 + i].sub(&D::lit(1)))
            .and_then(|v| v.add(&D::lit(1)))
            .ok_or_else(overflow)?;
        s.push(window(
            &x.shape[2 + i],
            c.pads[i],
            c.pads[2 + i],
            &k_eff,
            c.strides[i],
            false,
            cx,
        )?);
    }
    let out = TensorTypeOf::new(s, x.dtype);
    // The residual is added element by element to the result: exactly its type, no
    // broadcasting (the kernels read it at the output's own index).
    if let Some(r) = c.residual_index(ins.len()).map(|i| ins[i]) {
        let bad = || {
            shape_error_at(
                3,
                format!("residual must have the result's type {out}, got {r}"),
            )
        };
        if r.rank() != 4 {
            return Err(bad());
        }
        for (a, b) in r.shape.iter().zip(&out.shape) {
            cx.require_eq(a, b, bad)?;
        }
    }
    if let Some(i) = c.slope_index(ins.len()) {
        prelu_slope(ins[i], i, m, cx)?;
    }
    Ok(out)
}

/// A fused PReLU's slope: one value per output channel, read at the channel's index by the
/// kernels (`[M]`, `[M, 1, 1]` or `[1, M, 1, 1]`: the channel axis of an NCHW result), or
/// one value for all (every dim 1).
fn prelu_slope<D: Dim>(s: &TensorTypeOf<D>, at: usize, m: &D, cx: &mut Checks<D>) -> Result<()> {
    let one = D::lit(1);
    if s.rank() <= 4 && s.shape.iter().all(|d| d.decide_eq(&one) == Some(true)) {
        return Ok(());
    }
    let bad = || {
        shape_error_at(
            at,
            format!(
                "prelu slope must have one value per output channel ([{m}], [{m}, 1, 1] or \
                 [1, {m}, 1, 1]) or a single value, got {s}"
            ),
        )
    };
    let channel = match s.rank() {
        1 => 0,
        3 => 0,
        4 => 1,
        _ => return Err(bad()),
    };
    for (i, d) in s.shape.iter().enumerate() {
        let want = if i == channel { m } else { &one };
        cx.require_eq(d, want, bad)?;
    }
    Ok(())
}

/// `conv_transpose`, per spatial axis
/// `out = (in - 1)·s + (k - 1)·d + 1 + output_padding - pad_begin - pad_end`.
fn conv_transpose<D: Dim>(
    c: &crate::op::ConvTranspose,
    ins: &[&TensorTypeOf<D>],
    cx: &mut Checks<D>,
) -> Result<TensorTypeOf<D>> {
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
    let (ci, g) = (&x.shape[1], c.groups);
    cx.require_eq(&w.shape[0], ci, || {
        shape_error_at(
            1,
            format!(
                "weight {w} is for {} input channels, but the input {x} has {ci}",
                w.shape[0]
            ),
        )
    })?;
    // `g` divides the input channels: ⌊c / g⌋·g == c.
    let whole = ci.div_floor(g).mul(&D::lit(g)).ok_or_else(overflow)?;
    cx.require_eq(&whole, ci, || {
        shape_error(format!(
            "groups = {g} must divide the input channels ({ci})"
        ))
    })?;
    let m = w.shape[1].mul(&D::lit(g)).ok_or_else(overflow)?;
    if let Some(b) = ins.get(2) {
        let bad = || shape_error_at(2, format!("bias must be tensor<{m}x{}>, got {b}", x.dtype));
        if b.rank() != 1 {
            return Err(bad());
        }
        cx.require_eq(&b.shape[0], &m, bad)?;
    }
    for k in &w.shape[2..] {
        cx.require_ge(k, &D::lit(1), || {
            shape_error_at(
                1,
                format!("kernel dimensions must be positive, weight is {w}"),
            )
        })?;
    }
    let mut s = vec![x.shape[0].clone(), m];
    for i in 0..2 {
        let input = &x.shape[2 + i];
        cx.require_ge(input, &D::lit(1), || {
            shape_error_at(
                0,
                format!("the input {x} is empty along spatial axis {i}: a transposed convolution of it has no defined size"),
            )
        })?;
        let full = input
            .sub(&D::lit(1))
            .mul(&D::lit(c.strides[i]))
            .and_then(|v| {
                let taps = D::lit(c.dilations[i]).mul(&w.shape[2 + i].sub(&D::lit(1)))?;
                v.add(&taps)
            })
            .and_then(|v| v.add(&D::lit(1))?.add(&D::lit(c.output_padding[i])))
            .ok_or_else(overflow)?;
        let crop = c.pads[i].checked_add(c.pads[2 + i]).ok_or_else(overflow)?;
        cx.require_ge(&full, &D::lit(crop), || {
            shape_error(format!(
                "the pads crop {crop} along spatial axis {i}, more than the full output's {full}"
            ))
        })?;
        s.push(full.sub(&D::lit(crop)));
    }
    Ok(TensorTypeOf::new(s, x.dtype))
}

fn pool2d<D: Dim>(p: &Pool2d, x: &TensorTypeOf<D>, cx: &mut Checks<D>) -> Result<TensorTypeOf<D>> {
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
            &x.shape[2 + i],
            p.pads[i],
            p.pads[2 + i],
            &D::lit(p.kernel[i]),
            p.strides[i],
            p.ceil_mode,
            cx,
        )?;
    }
    Ok(TensorTypeOf::new(s, x.dtype))
}
