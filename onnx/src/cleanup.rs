//! Import-time cleanup, as inference runtimes do it on load:
//!
//! 1. fold a BatchNormalization into the convolution that feeds it (the per-channel scale
//!    `gamma / sqrt(var + eps)` goes into the weights, the shift into the bias);
//! 2. fuse an activation (`relu`, `relu6`, `clip` with 0..6, 0..inf or -1..1, `tanh`,
//!    `sigmoid`, `hard_swish`) into the conv2d, conv_transpose, gemm, matmul or binary op that
//!    produces its operand, when that result has no other use and is not returned;
//! 3. fold a `pad` of zeros on the spatial dims into the convolution that reads it (the
//!    conv's own `pads` grow by it: TFLite's `ZeroPadding2D` before a VALID convolution,
//!    13% of BlazeFace full-range's time as a separate copy), into every convolution that
//!    reads it when all its uses are convolutions' inputs and it is not returned;
//! 4. give a strided 1×1 convolution without padding its input already subsampled: a
//!    `slice` with the strides as steps, then a stride-1 1×1 convolution, which is a plain
//!    GEMM on the micro-kernel (ResNet's downsampling shortcuts ran at 41–58 GFLOP/s
//!    gathering every other pixel inside the K loop, once per tile of output channels);
//! 5. fuse a residual add into the convolution that produces one of its operands:
//!    `add(conv2d(x, w, b), s)` → `conv2d(x, w, b, s)`, the add's activation moving to the
//!    conv (onnxruntime fuses each ResNet block's skip add and ReLU into the block's last
//!    convolution the same way; separate, the adds took 2.9–3.2 ms of ResNet-50's ~76 ms
//!    at one thread, each writing and re-reading one full tensor);
//! 6. fuse a PReLU (or a LeakyRelu, imported as a PReLU with a one-value slope) into the
//!    convolution that produces its operand, after step 5 so that mediapipe's
//!    `conv → add → prelu` becomes one op: `conv2d(x, w, b, s, slope)` with `activation =
//!    prelu` (separate, iris_landmark's PReLUs ran on the calling thread below the thread
//!    cut, 0.072–0.081 ms of ~1.1 ms per inference at one thread, more at two, each reading
//!    what both cores wrote);
//! 7. drop ops whose results are unused, and weights no `const` names.
//!
//! (Identity and Dropout never reach the IR: the importer binds their output to their input.)
//! A fused graph has fewer intermediates, which is what the seed paper's memory figures count.

use crate::{Tensor, Weights};
use std::collections::{HashMap, HashSet};
use tir_ir::op::Activation;
use tir_ir::op::PadMode;
use tir_ir::{BinaryOp, DType, Function, Module, Op, OpId, TensorType, UnaryOp, Value};

/// What [`cleanup`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanupStats {
    pub folded_batch_norms: usize,
    pub fused_activations: usize,
    pub folded_pads: usize,
    pub subsampled_convs: usize,
    pub fused_residuals: usize,
    pub fused_prelus: usize,
    pub removed_ops: usize,
    pub removed_weights: usize,
}

/// Runs the cleanup on every function, rewriting folded weights in `weights`.
pub fn cleanup(module: &mut Module, weights: &mut Weights) -> CleanupStats {
    let mut stats = CleanupStats::default();
    for f in &mut module.funcs {
        fold_batch_norms(f, weights, &mut stats);
        fuse_activations(f, &mut stats);
        fold_pads(f, &mut stats);
        subsample_strided_pointwise(f, &mut stats);
        fuse_residuals(f, &mut stats);
        fuse_prelus(f, &mut stats);
        remove_dead_ops(f, &mut stats);
        compact(f);
    }
    let named: HashSet<&str> = module
        .funcs
        .iter()
        .flat_map(|f| f.layout.iter().map(move |&id| &f.ops[id].op))
        .filter_map(|op| match op {
            Op::Const { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let before = weights.len();
    weights.tensors.retain(|k, _| named.contains(k.as_str()));
    stats.removed_weights = before - weights.len();
    stats
}

fn use_counts(f: &Function) -> HashMap<Value, usize> {
    let mut uses = HashMap::new();
    for &id in &f.layout {
        for &v in &f.ops[id].operands {
            *uses.entry(v).or_insert(0) += 1;
        }
    }
    for &v in &f.returns {
        *uses.entry(v).or_insert(0) += 1;
    }
    uses
}

fn replace_uses(f: &mut Function, from: Value, to: Value) {
    for &id in &f.layout {
        for v in &mut f.ops[id].operands {
            if *v == from {
                *v = to;
            }
        }
    }
    for v in &mut f.returns {
        if *v == from {
            *v = to;
        }
    }
}

/// `consumer`'s result is replaced by `producer_result`, which takes over its name (so a
/// returned value keeps its name); `consumer` leaves the layout.
fn absorb(f: &mut Function, consumer: OpId, producer_result: Value) {
    let q = f.ops[consumer].results[0];
    replace_uses(f, q, producer_result);
    let qname = std::mem::take(&mut f.values[q].name);
    let pname = std::mem::replace(&mut f.values[producer_result].name, qname);
    f.values[q].name = pname;
    f.layout.retain(|&id| id != consumer);
}

fn producer_op(f: &Function, v: Value) -> Option<OpId> {
    f.producer(v).filter(|id| f.layout.contains(id))
}

/// The weight a value is, if it is the result of a `const` whose data is an f32 tensor.
fn const_f32<'w>(f: &Function, weights: &'w Weights, v: Value) -> Option<(&'w str, &'w Tensor)> {
    let id = producer_op(f, v)?;
    let Op::Const { name } = &f.ops[id].op else {
        return None;
    };
    let (k, t) = weights.tensors.get_key_value(name)?;
    (t.dtype == DType::F32).then_some((k.as_str(), t))
}

fn fold_batch_norms(f: &mut Function, weights: &mut Weights, stats: &mut CleanupStats) {
    let order = f.layout.clone();
    for bn in order {
        let uses = use_counts(f);
        let Op::BatchNorm { epsilon } = f.ops[bn].op else {
            continue;
        };
        let ops = f.ops[bn].operands.clone();
        let y = ops[0];
        let Some(conv) = producer_op(f, y) else {
            continue;
        };
        let Op::Conv2d(c) = &f.ops[conv].op else {
            continue;
        };
        if c.activation.is_some() || uses.get(&y) != Some(&1) {
            continue;
        }
        let conv_ops = f.ops[conv].operands.clone();
        let params: Option<Vec<(String, Tensor)>> = ops[1..]
            .iter()
            .chain(&conv_ops[1..])
            .map(|&v| const_f32(f, weights, v).map(|(k, t)| (k.to_string(), t.clone())))
            .collect();
        let Some(params) = params else {
            continue;
        };
        let [(_, gamma), (beta_key, beta), (_, mean), (_, var), (w_key, w), rest @ ..] =
            params.as_slice()
        else {
            continue;
        };
        let m = w.shape.first().copied().unwrap_or(0) as usize;
        let f32s = |t: &Tensor| -> Vec<f64> { t.floats() };
        let (g, b, mu, s2, wv) = (f32s(gamma), f32s(beta), f32s(mean), f32s(var), f32s(w));
        if [g.len(), b.len(), mu.len(), s2.len()]
            .iter()
            .any(|&n| n != m)
            || m == 0
        {
            continue;
        }
        let bias: Vec<f64> = match rest.first() {
            Some((_, t)) if t.numel() == m => f32s(t),
            Some(_) => continue,
            None => vec![0.0; m],
        };
        let per = wv.len() / m;
        let k: Vec<f64> = (0..m).map(|i| g[i] / (s2[i] + epsilon).sqrt()).collect();
        let new_w: Vec<f64> = wv
            .iter()
            .enumerate()
            .map(|(i, &x)| x * k[i / per.max(1)])
            .collect();
        let new_b: Vec<f64> = (0..m).map(|i| (bias[i] - mu[i]) * k[i] + b[i]).collect();
        let new_w = Tensor::from_f64s(DType::F32, w.shape.clone(), &new_w);
        let new_b = Tensor::from_f64s(DType::F32, vec![m as u64], &new_b);

        let w_value = conv_ops[1];
        let w_value = if exclusive(f, &uses, w_value) {
            weights.tensors.insert(w_key.clone(), new_w);
            w_value
        } else {
            fresh_const(f, weights, &format!("{w_key}.bn_folded"), new_w, conv)
        };
        let b_value = match conv_ops.get(2) {
            Some(&bv) if exclusive(f, &uses, bv) => {
                let key = rest[0].0.clone();
                weights.tensors.insert(key, new_b);
                bv
            }
            _ if exclusive(f, &uses, ops[2]) => {
                // Reuse the BatchNormalization's bias weight, moved in front of the conv.
                weights.tensors.insert(beta_key.clone(), new_b);
                if let Some(id) = producer_op(f, ops[2]) {
                    move_before(f, id, conv);
                }
                ops[2]
            }
            _ => fresh_const(f, weights, &format!("{beta_key}.bn_folded"), new_b, conv),
        };
        f.ops[conv].operands = vec![conv_ops[0], w_value, b_value];
        absorb(f, bn, y);
        stats.folded_batch_norms += 1;
    }
}

/// A value used once, not returned, from a `const` that is the only one naming its weight.
fn exclusive(f: &Function, uses: &HashMap<Value, usize>, v: Value) -> bool {
    let Some(id) = producer_op(f, v) else {
        return false;
    };
    let Op::Const { name } = &f.ops[id].op else {
        return false;
    };
    let namesakes = f
        .layout
        .iter()
        .filter(|&&o| matches!(&f.ops[o].op, Op::Const { name: n } if n == name))
        .count();
    uses.get(&v) == Some(&1) && !f.returns.contains(&v) && namesakes == 1
}

fn move_before(f: &mut Function, op: OpId, before: OpId) {
    f.layout.retain(|&id| id != op);
    let pos = f.layout.iter().position(|&id| id == before).unwrap_or(0);
    f.layout.insert(pos, op);
}

/// A new `const` (and weight) placed just before `before`.
fn fresh_const(
    f: &mut Function,
    weights: &mut Weights,
    key: &str,
    t: Tensor,
    before: OpId,
) -> Value {
    let mut k = key.to_string();
    let mut i = 1;
    while weights.tensors.contains_key(&k) {
        k = format!("{key}${i}");
        i += 1;
    }
    let names: HashSet<&str> = f.values.values().map(|v| v.name.as_str()).collect();
    let base = crate::import::identifier_chars(&k);
    let mut vname = base.clone();
    let mut j = 1;
    while names.contains(vname.as_str()) {
        vname = format!("{base}${j}");
        j += 1;
    }
    let ty = TensorType::new(t.shape.clone(), t.dtype);
    weights.tensors.insert(k.clone(), t);
    let id = f.push_op(
        Op::Const { name: k },
        Vec::new(),
        vec![(vname, Some(ty.clone()))],
    );
    let v = f.ops[id].results[0];
    f.values[v].ty = Some(ty);
    move_before(f, id, before);
    v
}

/// The fused form of an activation op, if it has one.
fn as_activation(op: &Op) -> Option<Activation> {
    match op {
        Op::Unary(UnaryOp::Relu) => Some(Activation::Relu),
        Op::Unary(UnaryOp::Relu6) => Some(Activation::Relu6),
        Op::Unary(UnaryOp::Tanh) => Some(Activation::Tanh),
        Op::Unary(UnaryOp::Sigmoid) => Some(Activation::Sigmoid),
        Op::Unary(UnaryOp::HardSwish) => Some(Activation::HardSwish),
        Op::Clip { min, max } if *min == 0.0 && *max == 6.0 => Some(Activation::Relu6),
        Op::Clip { min, max } if *min == 0.0 && *max == f64::INFINITY => Some(Activation::Relu),
        Op::Clip { min, max } if *min == -1.0 && *max == 1.0 => Some(Activation::ReluN1To1),
        _ => None,
    }
}

fn fuse_activations(f: &mut Function, stats: &mut CleanupStats) {
    let order = f.layout.clone();
    for q in order {
        let Some(act) = as_activation(&f.ops[q].op) else {
            continue;
        };
        let p_val = f.ops[q].operands[0];
        let Some(p) = producer_op(f, p_val) else {
            continue;
        };
        let uses = use_counts(f);
        if uses.get(&p_val) != Some(&1) || f.returns.contains(&p_val) {
            continue;
        }
        let slot = match &mut f.ops[p].op {
            Op::Conv2d(c) => &mut c.activation,
            Op::ConvTranspose(c) => &mut c.activation,
            Op::Gemm(g) => &mut g.activation,
            Op::MatMul { activation } | Op::Binary { activation, .. } => activation,
            _ => continue,
        };
        if slot.is_some() {
            continue;
        }
        *slot = Some(act);
        absorb(f, q, p_val);
        stats.fused_activations += 1;
    }
}

/// Step 3: `conv2d(pad(x))` with a constant zero pad of H and W only → `conv2d(x)` with the
/// pad added to its own: a padded cell contributes `0·w` to a sum either way, so the values
/// are the same, without the padded copy in the slab. A pad read by several convolutions
/// (BlazePose's `ZeroPadding2D` feeds the two depthwise branches of each downsampling block)
/// folds into every one of them when every use is a convolution's input: then the padded
/// tensor is gone; with any other use it stays, and so do its convolutions.
fn fold_pads(f: &mut Function, stats: &mut CleanupStats) {
    let order = f.layout.clone();
    for p in order {
        let Op::Pad {
            pads,
            mode: PadMode::Constant,
            value,
        } = &f.ops[p].op
        else {
            continue;
        };
        // NCHW: begins [n, c, h, w], then ends; only h and w may be padded.
        if *value != 0.0 || pads.len() != 8 || [0, 1, 4, 5].iter().any(|&i| pads[i] != 0) {
            continue;
        }
        let grow = [pads[2], pads[3], pads[6], pads[7]];
        let y = f.ops[p].results[0];
        if f.returns.contains(&y) {
            continue;
        }
        let users: Vec<OpId> = f
            .layout
            .iter()
            .copied()
            .filter(|&id| f.ops[id].operands.contains(&y))
            .collect();
        // Every use is the input (operand 0, and no other operand) of a conv2d.
        let all_convs = !users.is_empty()
            && users.iter().all(|&c| {
                let ops = &f.ops[c].operands;
                matches!(f.ops[c].op, Op::Conv2d(_))
                    && ops[0] == y
                    && ops.iter().filter(|&&v| v == y).count() == 1
            });
        if !all_convs {
            continue;
        }
        let x = f.ops[p].operands[0];
        for c in users {
            if let Op::Conv2d(conv) = &mut f.ops[c].op {
                for (pad, g) in conv.pads.iter_mut().zip(grow) {
                    *pad += g;
                }
            }
            f.ops[c].operands[0] = x;
            stats.folded_pads += 1;
        }
        f.layout.retain(|&id| id != p);
    }
}

/// Step 4: a 1×1 convolution with strides `(sh, sw)` and no padding reads input pixel
/// `(oy·sh, ox·sw)` for output pixel `(oy, ox)` and nothing else, so it is the stride-1
/// convolution of `slice(x, steps = strides)`. The subsampled input is a tensor of its own,
/// planned in the slab like any other (`C/s²` of the input), written once by a copy; the
/// convolution then multiplies contiguous rows. Each output is the same sum of the same
/// products in the same order, so the values are unchanged. Static shapes only.
fn subsample_strided_pointwise(f: &mut Function, stats: &mut CleanupStats) {
    if f.dynamic.is_some() {
        return;
    }
    let order = f.layout.clone();
    for c in order {
        let Op::Conv2d(conv) = &f.ops[c].op else {
            continue;
        };
        if conv.strides == [1, 1] || conv.pads != [0; 4] || conv.strides.contains(&0) {
            continue;
        }
        let [sh, sw] = conv.strides;
        let (x, w) = (f.ops[c].operands[0], f.ops[c].operands[1]);
        let (Some(xt), Some(wt)) = (f.values[x].known_type(), f.values[w].known_type()) else {
            continue;
        };
        if xt.rank() != 4 || wt.rank() != 4 || wt.shape[2..] != [1, 1] || xt.shape[2..].contains(&0)
        {
            continue;
        }
        let (h, wi) = (xt.shape[2], xt.shape[3]);
        let (oh, ow) = ((h - 1) / sh + 1, (wi - 1) / sw + 1);
        let ty = TensorType::new(vec![xt.shape[0], xt.shape[1], oh, ow], xt.dtype);
        let names: HashSet<&str> = f.values.values().map(|v| v.name.as_str()).collect();
        let base = format!("{}_subsampled", f.values[x].name);
        let mut name = base.clone();
        let mut j = 1;
        while names.contains(name.as_str()) {
            name = format!("{base}${j}");
            j += 1;
        }
        let slice = tir_ir::op::Slice {
            starts: vec![0, 0],
            ends: vec![((oh - 1) * sh + 1) as i64, ((ow - 1) * sw + 1) as i64],
            axes: vec![2, 3],
            steps: vec![sh as i64, sw as i64],
        };
        let id = f.push_op(Op::Slice(slice), vec![x], vec![(name, None)]);
        let v = f.ops[id].results[0];
        f.values[v].ty = Some(ty);
        move_before(f, id, c);
        f.ops[c].operands[0] = v;
        if let Op::Conv2d(conv) = &mut f.ops[c].op {
            conv.strides = [1, 1];
        }
        stats.subsampled_convs += 1;
    }
}

/// Step 5: `add(conv2d(x, w, b), s)` (either operand order: f32 addition is commutative bit
/// for bit) → `conv2d(x, w, b, s)` with the add's activation, when the conv's result has no
/// other use and is not returned, the conv has a bias and no activation of its own, and `s`
/// has the conv's static type (no broadcasting: the kernels read it at the output's index).
/// The conv's sum is `bias + Σ` (or `Σ + bias`) and the residual is added after it, before the
/// activation, so the values are the unfused graph's bit for bit.
///
/// The conv moves to where the add was: its operands are defined before it and its one use
/// was the add, so that order is valid, and `s` is then defined before the conv even when
/// the model computes the shortcut after the block's last convolution (torchvision's
/// ResNets run `downsample` after `conv3`).
///
/// Not in a dynamic function: the kernels with run-time extents have no residual epilogue
/// (`tir_codegen::dynamic` refuses one).
fn fuse_residuals(f: &mut Function, stats: &mut CleanupStats) {
    if f.is_dynamic() {
        return;
    }
    let order = f.layout.clone();
    for a in order {
        let Op::Binary {
            op: BinaryOp::Add,
            activation,
        } = f.ops[a].op
        else {
            continue;
        };
        let [l, r] = f.ops[a].operands[..] else {
            continue;
        };
        let out_ty = f.ty(f.ops[a].results[0]).cloned();
        let uses = use_counts(f);
        let fusable = |y: Value, s: Value| -> Option<OpId> {
            let c = producer_op(f, y)?;
            let Op::Conv2d(cv) = &f.ops[c].op else {
                return None;
            };
            let ty = f.ty(y)?;
            let ok = cv.activation.is_none()
                && f.ops[c].operands.len() == 3
                && y != s
                && uses.get(&y) == Some(&1)
                && !f.returns.contains(&y)
                && ty.dtype == DType::F32
                && f.ty(s) == Some(ty)
                && out_ty.as_ref() == Some(ty);
            ok.then_some(c)
        };
        let Some((c, y, s)) = [(l, r), (r, l)]
            .into_iter()
            .find_map(|(y, s)| fusable(y, s).map(|c| (c, y, s)))
        else {
            continue;
        };
        move_before(f, c, a);
        f.ops[c].operands.push(s);
        if let Op::Conv2d(cv) = &mut f.ops[c].op {
            cv.activation = activation;
        }
        absorb(f, a, y);
        stats.fused_residuals += 1;
    }
}

/// Step 6: `prelu(conv2d(x, w, b[, s]), slope)` → `conv2d(x, w, b[, s], slope)` with
/// `activation = prelu`, when the conv's result has no other use and is not returned, the
/// conv has a bias and no activation of its own, and the slope is per output channel in the
/// unfused op's broadcasting (`[M, 1, 1]`, `[1, M, 1, 1]`) or a single value. The kernels
/// compute `v < 0 ? slope·v : v` on the finished `(bias + Σ) + s`, the `prelu` kernel's
/// bits on the unfused result. A conv without a bias is left alone: a zero bias would turn a
/// sum of −0 into +0, and mediapipe's convolutions all have one.
///
/// The conv moves to where the prelu was, as in step 5, so the slope is defined before it.
/// Not in a dynamic function (the run-time conv kernel has no PReLU epilogue).
fn fuse_prelus(f: &mut Function, stats: &mut CleanupStats) {
    if f.is_dynamic() {
        return;
    }
    let order = f.layout.clone();
    for q in order {
        if !matches!(f.ops[q].op, Op::Prelu) {
            continue;
        }
        let [y, slope] = f.ops[q].operands[..] else {
            continue;
        };
        let Some(c) = producer_op(f, y) else {
            continue;
        };
        let Op::Conv2d(cv) = &f.ops[c].op else {
            continue;
        };
        let uses = use_counts(f);
        let (Some(ty), Some(st)) = (f.ty(y), f.ty(slope)) else {
            continue;
        };
        let m = ty.shape.get(1).copied();
        let per_channel = |s: &[u64]| match (s, m) {
            ([a, 1, 1], Some(m)) | ([1, a, 1, 1], Some(m)) => *a == m,
            _ => false,
        };
        let scalar = st.shape.len() <= 4 && st.shape.iter().all(|&d| d == 1);
        let ok = cv.activation.is_none()
            && !cv.prelu
            && (3..=4).contains(&f.ops[c].operands.len())
            && y != slope
            && uses.get(&y) == Some(&1)
            && !f.returns.contains(&y)
            && ty.dtype == DType::F32
            && ty.rank() == 4
            && st.dtype == DType::F32
            && (scalar || per_channel(&st.shape));
        if !ok {
            continue;
        }
        move_before(f, c, q);
        f.ops[c].operands.push(slope);
        if let Op::Conv2d(cv) = &mut f.ops[c].op {
            cv.prelu = true;
        }
        absorb(f, q, y);
        stats.fused_prelus += 1;
    }
}

fn remove_dead_ops(f: &mut Function, stats: &mut CleanupStats) {
    let mut uses = use_counts(f);
    let mut live = Vec::with_capacity(f.layout.len());
    for &id in f.layout.iter().rev() {
        let used = f.ops[id]
            .results
            .iter()
            .any(|r| uses.get(r).copied().unwrap_or(0) > 0);
        if used {
            live.push(id);
        } else {
            stats.removed_ops += 1;
            for v in &f.ops[id].operands {
                if let Some(n) = uses.get_mut(v) {
                    *n -= 1;
                }
            }
        }
    }
    live.reverse();
    f.layout = live;
}

/// Rebuilds the function with only the ops in its layout (ops that left the layout are gone
/// from the arena too, as the verifier requires).
fn compact(f: &mut Function) {
    let mut g = Function::new(f.name.clone());
    let mut map: HashMap<Value, Value> = HashMap::new();
    for &p in &f.params {
        let d = &f.values[p];
        let ty = d
            .known_type()
            .cloned()
            .unwrap_or_else(|| TensorType::f32([]));
        let np = g.add_param(d.name.clone(), ty);
        if d.declared_sym.is_some() {
            // A symbolic parameter (a dynamic import): its type is the symbolic one.
            let n = &mut g.values[np];
            n.declared = None;
            n.ty = None;
            n.declared_sym = d.declared_sym.clone();
            n.sym = d.sym.clone();
        }
        map.insert(p, np);
    }
    for &id in &f.layout {
        let o = &f.ops[id];
        let operands = o
            .operands
            .iter()
            .map(|v| map.get(v).copied().unwrap_or(*v))
            .collect();
        let results = o
            .results
            .iter()
            .map(|&r| (f.values[r].name.clone(), f.values[r].declared.clone()))
            .collect();
        let nid = g.push_op(o.op.clone(), operands, results);
        let new_results = g.ops[nid].results.clone();
        for (&r, &n) in o.results.iter().zip(&new_results) {
            g.values[n].ty = f.values[r].ty.clone();
            g.values[n].sym = f.values[r].sym.clone();
            map.insert(r, n);
        }
    }
    g.returns = f
        .returns
        .iter()
        .map(|v| map.get(v).copied().unwrap_or(*v))
        .collect();
    g.result_types = f.result_types.clone();
    g.dynamic = f.dynamic.clone();
    *f = g;
}
