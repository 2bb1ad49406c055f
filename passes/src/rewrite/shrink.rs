//! Shrinking rules: equivalents whose intermediates are strictly smaller, applied to every
//! program before the candidates are built.
//!
//! NASNet's and DARTS' factorized reductions (Zoph et al. 2018, `factorized_reduction`; Liu
//! et al. 2019, `FactorizedReduce`) shift the input by one pixel with a full-size `pad` and
//! `slice` and then keep every other pixel with a 1×1 stride-2 pool or conv: two temporaries
//! the size of the input (NASNet's stem: 1.6 MB each, live beside the 1.6 MB input at the
//! model's peak) for a result a quarter of that. The rules move the subsampling first:
//!
//! - `pool-as-slice`: a 1×1 pool with no padding is a strided slice (the average of one
//!   element is the element, bitwise);
//! - `conv1x1-stride-as-slice`: a 1×1 conv with stride `s` and no padding is the 1×1 conv of
//!   the strided slice;
//! - `slice-slice`: two slices compose into one;
//! - `slice-over-pad`: a slice of a constant pad is a smaller constant pad of a slice of the
//!   input (the selected indices that fall in the padding become the new padding);
//! - `unary-over-slice`: an element-wise op commutes with a slice, so the slice runs first.
//!
//! Each rewrite keeps every value bitwise equal: the same elements are read and the same
//! arithmetic is done on them. Weights are never sliced here (the other rules do that).

use super::lang::{op_of, Attrs, EGraph, Rewrite, TirAnalysis, TirNode};
use super::rules::{add_attrs, add_op, is_weight, shape, union, var};
use super::{convert, RewriteError};
use egg::{
    rewrite, Applier, CostFunction, Extractor, Id, Language, PatternAst, Runner, Subst, Symbol,
};
use std::time::Instant;
use tir_ir::op::{PadMode, Pool2d, Slice};
use tir_ir::{Function, Op};

pub fn rules() -> Vec<Rewrite> {
    vec![
        rewrite!("pool-as-slice";           "(avg_pool ?f ?x)"          => { PoolAsSlice }),
        rewrite!("maxpool-as-slice";        "(max_pool ?f ?x)"          => { PoolAsSlice }),
        rewrite!("conv1x1-stride-as-slice"; "(conv2d ?c ?x ?w)"         => { ConvStrideAsSlice { bias: false } }),
        rewrite!("conv1x1-bias-stride-as-slice"; "(conv2d ?c ?x ?w ?b)" => { ConvStrideAsSlice { bias: true } }),
        rewrite!("slice-slice";             "(slice ?f (slice ?g ?x))"  => { SliceSlice }),
        rewrite!("slice-over-pad";          "(slice ?f (pad ?p ?x))"    => { SliceOverPad }),
        rewrite!("relu-over-slice";         "(slice ?f (relu ?g ?x))"   => "(relu ?g (slice ?f ?x))"),
        rewrite!("relu6-over-slice";        "(slice ?f (relu6 ?g ?x))"  => "(relu6 ?g (slice ?f ?x))"),
    ]
}

/// One axis of a slice, normalised: elements `start, start + step, ...`, `count` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Strided {
    start: u64,
    step: u64,
    count: u64,
}

impl Strided {
    fn identity(dim: u64) -> Strided {
        Strided {
            start: 0,
            step: 1,
            count: dim,
        }
    }
}

/// Every axis of a slice of a tensor of shape `dims`, normalised as ONNX Slice reads it
/// (negative indices count from the end, bounds clamp); `None` for a negative step.
fn axes_of(s: &Slice, dims: &[u64]) -> Option<Vec<Strided>> {
    let mut out: Vec<Strided> = dims.iter().map(|&d| Strided::identity(d)).collect();
    for i in 0..s.starts.len() {
        let ax = tir_ir::shape::norm_axis(*s.axes.get(i)?, dims.len()).ok()?;
        let d = i128::from(dims[ax]);
        let step = *s.steps.get(i).unwrap_or(&1);
        if step <= 0 {
            return None;
        }
        let fix = |v: i64| {
            let v = i128::from(v);
            (if v < 0 { v + d } else { v }).clamp(0, d)
        };
        let (start, end) = (fix(s.starts[i]), fix(*s.ends.get(i)?));
        let count = if end > start {
            (end - start + i128::from(step) - 1) / i128::from(step)
        } else {
            0
        };
        out[ax] = Strided {
            start: u64::try_from(start).ok()?,
            step: step as u64,
            count: u64::try_from(count).ok()?,
        };
    }
    Some(out)
}

/// The slice op of normalised axes over `dims`, naming only the axes it changes; `None` when
/// it changes none (the slice is the identity).
fn slice_of(axes: &[Strided], dims: &[u64]) -> Option<Slice> {
    let mut s = Slice {
        starts: vec![],
        ends: vec![],
        axes: vec![],
        steps: vec![],
    };
    for (ax, (a, &d)) in axes.iter().zip(dims).enumerate() {
        if *a == Strided::identity(d) {
            continue;
        }
        let end = if a.count == 0 {
            a.start
        } else {
            a.start + (a.count - 1) * a.step + 1
        };
        s.starts.push(a.start as i64);
        s.ends.push(end as i64);
        s.axes.push(ax as i64);
        s.steps.push(a.step as i64);
    }
    (!s.axes.is_empty()).then_some(s)
}

/// `slice(x)` in the e-graph, or `x` when the slice is the identity; `None` when the new node
/// has no type (the rules never build one, but an applier must not union an untyped class).
fn add_slice(eg: &mut EGraph, x: Id, axes: &[Strided]) -> Option<Id> {
    let dims = shape(eg, x)?.to_vec();
    let Some(s) = slice_of(axes, &dims) else {
        return Some(x);
    };
    let a = add_attrs(eg, Attrs::Op(Op::Slice(s)));
    let id = add_op(eg, "slice", vec![a, x]);
    eg[id].data.is_some().then_some(id)
}

/// The spatial axes of a `[N, C, H, W]` tensor subsampled by `strides`, as a 1×1 window
/// with no padding does.
fn subsample(dims: &[u64], strides: [u64; 2]) -> Option<Vec<Strided>> {
    let [_, _, h, w] = *dims else { return None };
    let mut axes: Vec<Strided> = dims.iter().map(|&d| Strided::identity(d)).collect();
    for (ax, (d, s)) in [(2, (h, strides[0])), (3, (w, strides[1]))] {
        if s == 0 || d == 0 {
            return None;
        }
        axes[ax] = Strided {
            start: 0,
            step: s,
            count: (d - 1) / s + 1,
        };
    }
    Some(axes)
}

/// A 1×1 pool without padding keeps one element per window: a strided slice.
pub struct PoolAsSlice;

impl Applier<TirNode, TirAnalysis> for PoolAsSlice {
    fn apply_one(
        &self,
        eg: &mut EGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TirNode>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let x = s[var("?x")];
        let strides = match op_of(eg, s[var("?f")]) {
            Some(Op::AvgPool(p) | Op::MaxPool(p)) if is_point(p) => p.strides,
            _ => return vec![],
        };
        let Some(axes) = shape(eg, x).and_then(|d| subsample(d, strides)) else {
            return vec![];
        };
        match add_slice(eg, x, &axes) {
            Some(new) if eg[new].data == eg[eclass].data => union(eg, eclass, new, rule),
            _ => vec![],
        }
    }
}

fn is_point(p: &Pool2d) -> bool {
    p.kernel == [1, 1] && p.pads == [0; 4] && !p.ceil_mode
}

/// `conv1x1_s(x) = conv1x1_1(slice(x, step s))`: a 1×1 conv with no padding reads only the
/// pixels its stride lands on.
pub struct ConvStrideAsSlice {
    bias: bool,
}

impl Applier<TirNode, TirAnalysis> for ConvStrideAsSlice {
    fn apply_one(
        &self,
        eg: &mut EGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TirNode>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let x = s[var("?x")];
        let Some(Op::Conv2d(cv)) = op_of(eg, s[var("?c")]) else {
            return vec![];
        };
        let point = shape(eg, s[var("?w")]).is_some_and(|w| w.len() == 4 && w[2..] == [1, 1]);
        if !point || cv.pads != [0; 4] || cv.strides == [1, 1] || is_weight(eg, x) {
            return vec![];
        }
        let mut unit = cv.clone();
        unit.strides = [1, 1];
        let Some(axes) = shape(eg, x).and_then(|d| subsample(d, cv.strides)) else {
            return vec![];
        };
        let Some(sliced) = add_slice(eg, x, &axes) else {
            return vec![];
        };
        let c = add_attrs(eg, Attrs::Op(Op::Conv2d(unit)));
        let mut ch = vec![c, sliced, s[var("?w")]];
        if self.bias {
            ch.push(s[var("?b")]);
        }
        let new = add_op(eg, "conv2d", ch);
        if eg[new].data != eg[eclass].data {
            return vec![];
        }
        union(eg, eclass, new, rule)
    }
}

/// `slice(slice(x))` is one slice of `x`: element `j` of the outer is element
/// `s2 + j*k2` of the inner, which is `s1 + (s2 + j*k2)*k1` of `x`.
pub struct SliceSlice;

impl Applier<TirNode, TirAnalysis> for SliceSlice {
    fn apply_one(
        &self,
        eg: &mut EGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TirNode>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let x = s[var("?x")];
        if is_weight(eg, x) {
            return vec![];
        }
        let (Some(Op::Slice(outer)), Some(Op::Slice(inner))) =
            (op_of(eg, s[var("?f")]), op_of(eg, s[var("?g")]))
        else {
            return vec![];
        };
        let (outer, inner) = (outer.clone(), inner.clone());
        let Some(dx) = shape(eg, x).map(<[u64]>::to_vec) else {
            return vec![];
        };
        let Some(a) = axes_of(&inner, &dx) else {
            return vec![];
        };
        let mid: Vec<u64> = a.iter().map(|s| s.count).collect();
        let Some(b) = axes_of(&outer, &mid) else {
            return vec![];
        };
        if b.iter().any(|s| s.count == 0) {
            return vec![];
        }
        let composed: Vec<Strided> = a
            .iter()
            .zip(&b)
            .map(|(a, b)| Strided {
                start: a.start + b.start * a.step,
                step: a.step * b.step,
                count: b.count,
            })
            .collect();
        match add_slice(eg, x, &composed) {
            Some(new) if eg[new].data == eg[eclass].data => union(eg, eclass, new, rule),
            _ => vec![],
        }
    }
}

/// `slice(pad(x))` with a constant pad: per axis, the selected indices run through the
/// leading padding, then `x`, then the trailing padding, in order; those in `x` are a strided
/// slice of it, the others become the new, smaller padding.
pub struct SliceOverPad;

impl Applier<TirNode, TirAnalysis> for SliceOverPad {
    fn apply_one(
        &self,
        eg: &mut EGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TirNode>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let x = s[var("?x")];
        let (Some(Op::Slice(sl)), Some(Op::Pad { pads, mode, value })) =
            (op_of(eg, s[var("?f")]), op_of(eg, s[var("?p")]))
        else {
            return vec![];
        };
        if *mode != PadMode::Constant {
            return vec![];
        }
        let (sl, pads, value) = (sl.clone(), pads.clone(), *value);
        let Some(dx) = shape(eg, x).map(<[u64]>::to_vec) else {
            return vec![];
        };
        let r = dx.len();
        if pads.len() != 2 * r {
            return vec![];
        }
        let padded: Vec<u64> = (0..r).map(|i| dx[i] + pads[i] + pads[r + i]).collect();
        let Some(axes) = axes_of(&sl, &padded) else {
            return vec![];
        };
        let mut inner = Vec::with_capacity(r);
        let mut new_pads = vec![0u64; 2 * r];
        for i in 0..r {
            let (a, before, n) = (axes[i], pads[i], dx[i]);
            // Selected indices below `before` (leading pad) and from `before + n` (trailing).
            let below = |limit: u64| {
                if a.start >= limit {
                    0
                } else {
                    a.count.min((limit - a.start).div_ceil(a.step))
                }
            };
            let lead = below(before);
            let tail = a.count - below(before + n);
            let Some(mid) = a.count.checked_sub(lead + tail).filter(|&m| m > 0) else {
                return vec![];
            };
            inner.push(Strided {
                start: a.start + lead * a.step - before,
                step: a.step,
                count: mid,
            });
            new_pads[i] = lead;
            new_pads[r + i] = tail;
        }
        let Some(sliced) = add_slice(eg, x, &inner) else {
            return vec![];
        };
        let new = if new_pads.iter().all(|&p| p == 0) {
            sliced
        } else {
            let p = add_attrs(
                eg,
                Attrs::Op(Op::Pad {
                    pads: new_pads,
                    mode: PadMode::Constant,
                    value,
                }),
            );
            add_op(eg, "pad", vec![p, sliced])
        };
        if eg[new].data != eg[eclass].data {
            return vec![];
        }
        union(eg, eclass, new, rule)
    }
}

/// Tree cost: the bytes of every op's result (a weight slice is free: it is computed at
/// compile time). Shared subterms count once per use, which only favours the rewritten,
/// smaller forms more.
pub struct Bytes<'a> {
    pub egraph: &'a EGraph,
}

impl Bytes<'_> {
    fn own(&self, enode: &TirNode) -> u64 {
        match enode {
            TirNode::Leaf(_) | TirNode::Attr(_) => 0,
            TirNode::Op(..) => match super::lang::infer(self.egraph, enode) {
                Some(m) if m.weight => 0,
                Some(m) => m.bytes(),
                None => 0,
            },
        }
    }
}

impl CostFunction<TirNode> for Bytes<'_> {
    type Cost = u64;
    fn cost<C>(&mut self, enode: &TirNode, mut costs: C) -> u64
    where
        C: FnMut(Id) -> u64,
    {
        let own = self.own(enode);
        enode.fold(own, |sum, id| sum.saturating_add(costs(id)))
    }
}

/// The program with the shrinking rules applied wherever they make it smaller, or `None`
/// when none applies. Saturation stops at `deadline` (the rules are few and their chains
/// short, so it saturates in milliseconds on the zoo). A class keeps its input node unless a
/// rewritten one is strictly cheaper, and the result is kept only when its intermediates
/// take strictly fewer bytes in all, so a program with nothing to shrink comes back `None`.
pub fn apply(
    func: &Function,
    node_limit: usize,
    deadline: Instant,
) -> Result<Option<Function>, RewriteError> {
    let entered = convert::enter(func)?;
    let runner = Runner::default()
        .with_egraph(entered.egraph.clone())
        .with_iter_limit(16)
        .with_node_limit(node_limit)
        .with_time_limit(deadline.saturating_duration_since(Instant::now()))
        .run(&rules());
    let eg = runner.egraph;
    let extractor = Extractor::new(&eg, Bytes { egraph: &eg });
    let orig = super::original_choice(&eg, &entered);
    let bytes = Bytes { egraph: &eg };
    let choice = |id: Id| -> TirNode {
        let id = eg.find(id);
        let best = extractor.find_best_node(id);
        match orig.get(&id) {
            Some(n) => {
                let cost = n.fold(bytes.own(n), |sum, c| {
                    sum.saturating_add(extractor.find_best_cost(c))
                });
                if cost <= extractor.find_best_cost(id) {
                    n.clone()
                } else {
                    best.clone()
                }
            }
            None => best.clone(),
        }
    };
    let (out, derived) = convert::leave(func, &eg, &entered, &choice)?;
    if !derived.is_empty() {
        return Ok(None);
    }
    let out = super::verified(out)?;
    Ok((intermediate_bytes(&out) < intermediate_bytes(func)).then_some(out))
}

/// Bytes of every operator result, each once.
fn intermediate_bytes(func: &Function) -> u64 {
    func.ops_in_order()
        .filter(|(_, d)| d.op.is_operator())
        .flat_map(|(_, d)| d.results.iter())
        .map(|&v| func.ty(v).and_then(|t| t.byte_size()).unwrap_or(0))
        .fold(0u64, u64::saturating_add)
}
