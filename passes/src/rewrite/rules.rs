//! The rewrite rules: equivalents of a program that are cheaper to schedule.
//!
//! - channel-wise partitioning (SERENITY, Ahn et al., MLSys 2020, §3.3): a convolution or
//!   matmul over a concat is the sum of partial ops over its pieces, each with its slice of
//!   the weight, so a piece can be consumed and freed as soon as it exists and the concat
//!   buffer disappears;
//! - element-wise ops, per-channel pooling and inference batch normalisation (its parameters
//!   sliced) distributed over a concat, which brings the concat next to the op that partitions it;
//! - concat flattening (reassociation of the binary concats of the language);
//! - add commutation and reassociation, so partial sums can be accumulated in any order;
//! - transpose/reshape cancellation.

use super::lang::{attrs_of, op_of, Attrs, EGraph, Rewrite, TirAnalysis, TirNode};
use egg::{rewrite, Applier, Id, PatternAst, Subst, Symbol, Var};
use tir_ir::op::Slice;
use tir_ir::{Activation, BinaryOp, Op, TensorType};

/// Which rules a run uses; the pass extracts candidates from each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleSet {
    /// Partitioning, distribution over concat and cancellation. Linear in the pieces: an
    /// n-ary concat enters left-nested, and each prefix is partitioned once.
    Split,
    /// `Split` plus concat re-bracketing and add commutation and reassociation, which
    /// enumerate every bracketing (Catalan many) and so only run within the node limit.
    All,
}

pub fn rules(set: RuleSet) -> Vec<Rewrite> {
    let mut rules = vec![
        rewrite!("conv-over-concat";      "(conv2d ?c (concat ?k ?a ?b) ?w)"               => { Partition::conv(false) }),
        rewrite!("conv-bias-over-concat"; "(conv2d ?c (concat ?k ?a ?b) ?w ?bias)"         => { Partition::conv(true) }),
        rewrite!("matmul-over-concat";    "(matmul ?c (concat ?k ?a ?b) ?w)"               => { Partition::matmul() }),
        rewrite!("bn-over-concat";        "(batch_norm ?c (concat ?k ?a ?b) ?s ?o ?m ?v)"  => { BatchNormOverConcat }),
        rewrite!("relu-over-concat";      "(relu ?f (concat ?k ?a ?b))"         => "(concat ?k (relu ?f ?a) (relu ?f ?b))"),
        rewrite!("relu6-over-concat";     "(relu6 ?f (concat ?k ?a ?b))"        => "(concat ?k (relu6 ?f ?a) (relu6 ?f ?b))"),
        rewrite!("sigmoid-over-concat";   "(sigmoid ?f (concat ?k ?a ?b))"      => "(concat ?k (sigmoid ?f ?a) (sigmoid ?f ?b))"),
        rewrite!("tanh-over-concat";      "(tanh ?f (concat ?k ?a ?b))"         => "(concat ?k (tanh ?f ?a) (tanh ?f ?b))"),
        rewrite!("hswish-over-concat";    "(hard_swish ?f (concat ?k ?a ?b))"   => "(concat ?k (hard_swish ?f ?a) (hard_swish ?f ?b))"),
        rewrite!("gelu-over-concat";      "(gelu ?f (concat ?k ?a ?b))"         => "(concat ?k (gelu ?f ?a) (gelu ?f ?b))"),
        rewrite!("exp-over-concat";       "(exp ?f (concat ?k ?a ?b))"          => "(concat ?k (exp ?f ?a) (exp ?f ?b))"),
        rewrite!("clip-over-concat";      "(clip ?f (concat ?k ?a ?b))"         => "(concat ?k (clip ?f ?a) (clip ?f ?b))"),
        rewrite!("hsigmoid-over-concat";  "(hard_sigmoid ?f (concat ?k ?a ?b))" => "(concat ?k (hard_sigmoid ?f ?a) (hard_sigmoid ?f ?b))"),
        rewrite!("maxpool-over-concat";   "(max_pool ?f (concat ?k ?a ?b))"     => "(concat ?k (max_pool ?f ?a) (max_pool ?f ?b))" if on_channels("?k", "?a")),
        rewrite!("avgpool-over-concat";   "(avg_pool ?f (concat ?k ?a ?b))"     => "(concat ?k (avg_pool ?f ?a) (avg_pool ?f ?b))" if on_channels("?k", "?a")),
        rewrite!("gap-over-concat";       "(global_avg_pool ?f (concat ?k ?a ?b))" => "(concat ?k (global_avg_pool ?f ?a) (global_avg_pool ?f ?b))" if on_channels("?k", "?a")),
        rewrite!("transpose-cancel";      "(transpose ?p (transpose ?q ?x))"    => "?x" if inverse_perms("?p", "?q")),
        rewrite!("reshape-reshape";       "(reshape ?s (reshape ?t ?x))"        => "(reshape ?s ?x)"),
        rewrite!("reshape-noop";          "(reshape ?s ?x)"                     => "?x" if keeps_type("?x")),
    ];
    if set == RuleSet::All {
        rules.extend([
            rewrite!("concat-flatten";    "(concat ?k (concat ?k ?a ?b) ?c)"    => "(concat ?k ?a (concat ?k ?b ?c))"),
            rewrite!("concat-nest";       "(concat ?k ?a (concat ?k ?b ?c))"    => "(concat ?k (concat ?k ?a ?b) ?c)"),
            rewrite!("add-comm";          "(add ?t ?a ?b)"                      => "(add ?t ?b ?a)" if is_plain_add("?t")),
            rewrite!("add-assoc";         "(add ?t (add ?t ?a ?b) ?c)"          => "(add ?t ?a (add ?t ?b ?c))" if is_plain_add("?t") if same_types(&["?a", "?b", "?c"])),
        ]);
    }
    rules
}

type Cond = Box<dyn Fn(&mut EGraph, Id, &Subst) -> bool + Send + Sync>;

fn var(s: &str) -> Var {
    s.parse().expect("rule variables are well formed")
}

/// `?t` is an `add` without a fused activation (`relu(a + b)` does not reassociate).
fn is_plain_add(t: &str) -> Cond {
    let t = var(t);
    Box::new(move |eg, _, s| {
        matches!(
            op_of(eg, s[t]),
            Some(Op::Binary {
                op: BinaryOp::Add,
                activation: None
            })
        )
    })
}

/// The classes have one and the same type: no broadcasting, so every association has it too.
fn same_types(vs: &[&str]) -> Cond {
    let vs: Vec<Var> = vs.iter().map(|v| var(v)).collect();
    Box::new(move |eg, _, s| {
        let tys: Vec<Option<&TensorType>> = vs
            .iter()
            .map(|&v| eg[s[v]].data.as_ref().map(|m| &m.ty))
            .collect();
        tys[0].is_some() && tys.iter().all(|t| *t == tys[0])
    })
}

/// `?k` concatenates NCHW channels (axis 1 of `?a`'s rank): pooling is per channel.
fn on_channels(k: &str, a: &str) -> Cond {
    let (k, a) = (var(k), var(a));
    Box::new(move |eg, _, s| {
        let rank = shape(eg, s[a]).map_or(0, <[u64]>::len);
        rank == 4 && concat_axis(eg, s[k], rank) == Some(1)
    })
}

/// The matched class has `?x`'s type (a reshape to the shape it already has).
fn keeps_type(x: &str) -> Cond {
    let x = var(x);
    Box::new(move |eg, id, s| eg[id].data.is_some() && eg[id].data == eg[s[x]].data)
}

/// `transpose(?p, transpose(?q, x))` is `x`: the permutations compose to the identity.
fn inverse_perms(p: &str, q: &str) -> Cond {
    let (p, q) = (var(p), var(q));
    Box::new(move |eg, _, s| {
        match (op_of(eg, s[p]), op_of(eg, s[q])) {
            (Some(Op::Transpose { perm: p }), Some(Op::Transpose { perm: q })) => {
                // out[i] = mid[p[i]] = x[q[p[i]]]
                p.len() == q.len()
                    && p.iter()
                        .enumerate()
                        .all(|(i, &pi)| q.get(pi as usize) == Some(&(i as u64)))
            }
            _ => false,
        }
    })
}

fn add_attrs(eg: &mut EGraph, a: Attrs) -> Id {
    let i = eg.analysis.intern(a);
    eg.add(TirNode::Attr(i))
}

fn add_op(eg: &mut EGraph, name: &str, children: Vec<Id>) -> Id {
    eg.add(TirNode::Op(Symbol::from(name), children))
}

/// `w[start..end]` along `axis`, a new weight. A slice of a slice on the same axis is made
/// from the outer source directly, so repeated partitioning reaches a fixed point instead of
/// stacking slices forever.
fn slice_weight(eg: &mut EGraph, w: Id, axis: usize, start: u64, end: u64) -> Id {
    let inner = eg[w].nodes.iter().find_map(|n| match n {
        TirNode::Op(name, ch) if name.as_str() == "slice" && is_weight(eg, ch[1]) => {
            match op_of(eg, ch[0]) {
                Some(Op::Slice(Slice {
                    starts,
                    axes,
                    steps,
                    ..
                })) if axes.as_slice() == [axis as i64] && steps.as_slice() == [1] => {
                    Some((ch[1], u64::try_from(starts[0]).ok()?))
                }
                _ => None,
            }
        }
        _ => None,
    });
    let (w, start, end) = match inner {
        Some((src, s0)) => (src, s0 + start, s0 + end),
        None => (w, start, end),
    };
    if shape(eg, w).and_then(|s| s.get(axis)) == Some(&(end - start)) && start == 0 {
        return w;
    }
    let a = add_attrs(
        eg,
        Attrs::Op(Op::Slice(Slice {
            starts: vec![start as i64],
            ends: vec![end as i64],
            axes: vec![axis as i64],
            steps: vec![1],
        })),
    );
    add_op(eg, "slice", vec![a, w])
}

fn add(eg: &mut EGraph, activation: Option<Activation>, x: Id, y: Id) -> Id {
    let a = add_attrs(
        eg,
        Attrs::Op(Op::Binary {
            op: BinaryOp::Add,
            activation,
        }),
    );
    add_op(eg, "add", vec![a, x, y])
}

/// egg 0.9's appliers union what they build with the matched class themselves and return
/// the classes that changed.
fn union(eg: &mut EGraph, eclass: Id, new: Id, rule: Symbol) -> Vec<Id> {
    if eg.union_trusted(eclass, new, rule) {
        vec![new]
    } else {
        vec![]
    }
}

fn shape(eg: &EGraph, id: Id) -> Option<&[u64]> {
    eg[id].data.as_ref().map(|m| m.ty.shape.as_slice())
}

fn is_weight(eg: &EGraph, id: Id) -> bool {
    eg[id].data.as_ref().is_some_and(|m| m.weight)
}

/// The concat's axis, normalised.
fn concat_axis(eg: &EGraph, k: Id, rank: usize) -> Option<usize> {
    match op_of(eg, k)? {
        Op::Concat { axis } => tir_ir::shape::norm_axis(*axis, rank).ok(),
        _ => None,
    }
}

/// `op(concat(a, b), w) = op(a, w[.., :ca]) + op(b, w[.., ca:])` for a conv (input channels,
/// weight axis 1) or a matmul (last axis of A, rows of B). A bias goes to the first partial
/// only; a fused activation does not distribute over the sum, so the add takes it.
pub struct Partition {
    conv: bool,
    bias: bool,
}

impl Partition {
    fn conv(bias: bool) -> Self {
        Partition { conv: true, bias }
    }
    fn matmul() -> Self {
        Partition {
            conv: false,
            bias: false,
        }
    }
}

impl Applier<TirNode, TirAnalysis> for Partition {
    fn apply_one(
        &self,
        eg: &mut EGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TirNode>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let (c, k, a, b, w) = (
            s[var("?c")],
            s[var("?k")],
            s[var("?a")],
            s[var("?b")],
            s[var("?w")],
        );
        if !is_weight(eg, w) {
            return vec![];
        }
        let (Some(sa), Some(sb), Some(sw)) = (shape(eg, a), shape(eg, b), shape(eg, w)) else {
            return vec![];
        };
        let (sa, sb, sw) = (sa.to_vec(), sb.to_vec(), sw.to_vec());
        // A fused activation moves to the add: act(conv(x)) = act(sum of partials).
        let (in_axis, w_axis, activation, partial) = match op_of(eg, c) {
            Some(Op::Conv2d(cv)) if self.conv && cv.groups == 1 => {
                let mut p = cv.clone();
                p.activation = None;
                (1, 1, cv.activation, Op::Conv2d(p))
            }
            Some(&Op::MatMul { activation }) if !self.conv && sw.len() == 2 && sa.len() >= 2 => {
                (sa.len() - 1, 0, activation, Op::MatMul { activation: None })
            }
            _ => return vec![],
        };
        if concat_axis(eg, k, sa.len()) != Some(in_axis) || sw.len() <= w_axis {
            return vec![];
        }
        let (ca, cb) = (sa[in_axis], sb[in_axis]);
        if ca + cb != sw[w_axis] {
            return vec![];
        }
        let wa = slice_weight(eg, w, w_axis, 0, ca);
        let wb = slice_weight(eg, w, w_axis, ca, ca + cb);
        let name = if self.conv { "conv2d" } else { "matmul" };
        let p = add_attrs(eg, Attrs::Op(partial));
        let mut first = vec![p, a, wa];
        if self.bias {
            first.push(s[var("?bias")]);
        }
        let pa = add_op(eg, name, first);
        let pb = add_op(eg, name, vec![p, b, wb]);
        if eg[pa].data.is_none() || eg[pb].data.is_none() {
            return vec![];
        }
        let sum = add(eg, activation, pa, pb);
        union(eg, eclass, sum, rule)
    }
}

/// `batch_norm(concat(a, b), s, o, m, v) = concat(batch_norm(a, s[:ca], ...),
/// batch_norm(b, s[ca:], ...))` on the channel axis: inference batch normalisation is
/// per channel.
pub struct BatchNormOverConcat;

impl Applier<TirNode, TirAnalysis> for BatchNormOverConcat {
    fn apply_one(
        &self,
        eg: &mut EGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TirNode>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let (c, k, a, b) = (s[var("?c")], s[var("?k")], s[var("?a")], s[var("?b")]);
        let params: Vec<Id> = ["?s", "?o", "?m", "?v"].iter().map(|v| s[var(v)]).collect();
        if !params
            .iter()
            .all(|&p| is_weight(eg, p) && shape(eg, p).is_some_and(|x| x.len() == 1))
        {
            return vec![];
        }
        let (Some(sa), Some(sb)) = (shape(eg, a), shape(eg, b)) else {
            return vec![];
        };
        if sa.len() < 2 || concat_axis(eg, k, sa.len()) != Some(1) {
            return vec![];
        }
        let (ca, cb) = (sa[1], sb[1]);
        let mut left = vec![c, a];
        let mut right = vec![c, b];
        for &p in &params {
            left.push(slice_weight(eg, p, 0, 0, ca));
            right.push(slice_weight(eg, p, 0, ca, ca + cb));
        }
        let l = add_op(eg, "batch_norm", left);
        let r = add_op(eg, "batch_norm", right);
        if eg[l].data.is_none() || eg[r].data.is_none() {
            return vec![];
        }
        let cat = add_op(eg, "concat", vec![k, l, r]);
        union(eg, eclass, cat, rule)
    }
}

/// Whether an attribute class holds a `Result` index (used by extraction).
pub fn is_result_attr(eg: &EGraph, id: Id) -> bool {
    matches!(attrs_of(eg, id), Some(Attrs::Result(_)))
}
