//! The rewrite rules: equivalents of a program that are cheaper to schedule.
//!
//! - channel-wise partitioning (SERENITY, Ahn et al., MLSys 2020, §3.3): a convolution or
//!   matmul over a concat is the sum of partial ops over its pieces, each with its slice of
//!   the weight, so a piece can be consumed and freed as soon as it exists and the concat
//!   buffer disappears;
//! - element-wise ops, per-channel pooling and inference batch normalisation (its parameters
//!   sliced) distributed over a concat, which brings the concat next to the op that partitions it;
//! - kernel-wise (output-channel) partitioning, SERENITY's other rewrite (§3.3): a conv
//!   computed as a channel concat of convs over slices of its filters ([`kernel_rules`]), so
//!   that channel-local consumers (distributed over the concat, depthwise convs included) and
//!   partitioned consumers take each piece before the next exists. It applies to every conv,
//!   so it never saturates: the pass applies it at targeted sites ([`split_conv`]);
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
        rewrite!("dwconv-over-concat";    "(conv2d ?c (concat ?k ?a ?b) ?w)"               => { DepthwiseOverConcat { bias: false } }),
        rewrite!("dwconv-bias-over-concat"; "(conv2d ?c (concat ?k ?a ?b) ?w ?bias)"       => { DepthwiseOverConcat { bias: true } }),
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

/// Kernel-wise partitioning into `pieces` output-channel slices (SERENITY, Ahn et al., MLSys
/// 2020, §3.3). Not part of [`rules`]: every conv matches, and every piece matches again, so
/// saturation would only grow the e-graph; the pass applies it at the sites it targets.
pub fn kernel_rules(pieces: u64) -> Vec<Rewrite> {
    vec![
        rewrite!("conv-split-out";      "(conv2d ?c ?x ?w)"       => { SplitOutputChannels { pieces, bias: false } }),
        rewrite!("conv-bias-split-out"; "(conv2d ?c ?x ?w ?bias)" => { SplitOutputChannels { pieces, bias: true } }),
    ]
}

type Cond = Box<dyn Fn(&mut EGraph, Id, &Subst) -> bool + Send + Sync>;

pub(super) fn var(s: &str) -> Var {
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

pub(super) fn add_attrs(eg: &mut EGraph, a: Attrs) -> Id {
    let i = eg.analysis.intern(a);
    eg.add(TirNode::Attr(i))
}

pub(super) fn add_op(eg: &mut EGraph, name: &str, children: Vec<Id>) -> Id {
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
pub(super) fn union(eg: &mut EGraph, eclass: Id, new: Id, rule: Symbol) -> Vec<Id> {
    if eg.union_trusted(eclass, new, rule) {
        vec![new]
    } else {
        vec![]
    }
}

pub(super) fn shape(eg: &EGraph, id: Id) -> Option<&[u64]> {
    eg[id].data.as_ref().map(|m| m.ty.shape.as_slice())
}

pub(super) fn is_weight(eg: &EGraph, id: Id) -> bool {
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

/// A dense (`groups = 1`) conv split into pieces along its output channels: the classes of
/// the pieces, of the left-nested concat prefixes joining them (`concat(concat(p0, p1), p2)`,
/// so a partitioned consumer accumulates its partial sums in a chain), and the top concat,
/// which equals the conv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSplit {
    pub top: Id,
    pub prefixes: Vec<Id>,
    pub pieces: Vec<Id>,
}

/// `conv2d(x, w, b) = concat_c(conv2d(x, w[s0:s1], b[s0:s1]), ...)`: each output channel of a
/// conv reads every input channel and only its own filter, and a fused activation is per
/// element, so slicing the filters (axis 0) and the bias slices the output (SERENITY §3.3,
/// kernel-wise partitioning). `class` must hold such a conv node; `None` when none is
/// there or it has fewer output channels than `pieces`. Does not union: the caller does.
pub fn split_conv(eg: &mut EGraph, class: Id, pieces: u64) -> Option<KernelSplit> {
    let node = eg[class].nodes.iter().find_map(|n| match n {
        TirNode::Op(name, ch)
            if name.as_str() == "conv2d"
                && (ch.len() == 3 || ch.len() == 4)
                && matches!(op_of(eg, ch[0]), Some(Op::Conv2d(c)) if c.groups == 1) =>
        {
            Some(ch.clone())
        }
        _ => None,
    })?;
    let (c, x, w, bias) = (node[0], node[1], node[2], node.get(3).copied());
    if !is_weight(eg, w) || bias.is_some_and(|b| !is_weight(eg, b)) {
        return None;
    }
    let out = *shape(eg, w)?.first()?;
    if pieces < 2 || out < pieces {
        return None;
    }
    let k = add_attrs(eg, Attrs::Op(Op::Concat { axis: 1 }));
    let mut split = KernelSplit {
        top: class,
        prefixes: Vec::new(),
        pieces: Vec::new(),
    };
    let mut acc: Option<Id> = None;
    for i in 0..pieces {
        let (s0, s1) = (i * out / pieces, (i + 1) * out / pieces);
        let mut ch = vec![c, x, slice_weight(eg, w, 0, s0, s1)];
        if let Some(b) = bias {
            ch.push(slice_weight(eg, b, 0, s0, s1));
        }
        let piece = add_op(eg, "conv2d", ch);
        eg[piece].data.as_ref()?;
        split.pieces.push(piece);
        acc = Some(match acc {
            None => piece,
            Some(a) => {
                let cat = add_op(eg, "concat", vec![k, a, piece]);
                eg[cat].data.as_ref()?;
                if i + 1 < pieces {
                    split.prefixes.push(cat);
                }
                cat
            }
        });
    }
    split.top = acc?;
    Some(split)
}

/// Applies [`split_conv`] wherever its pattern matches (the `start => goal` form of the rule).
pub struct SplitOutputChannels {
    pieces: u64,
    bias: bool,
}

impl Applier<TirNode, TirAnalysis> for SplitOutputChannels {
    fn apply_one(
        &self,
        eg: &mut EGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TirNode>>,
        rule: Symbol,
    ) -> Vec<Id> {
        // The pattern's arity picks the bias form; `split_conv` finds the node by its class.
        if self.bias != s.get(var("?bias")).is_some() {
            return vec![];
        }
        match split_conv(eg, eclass, self.pieces) {
            Some(split) => union(eg, eclass, split.top, rule),
            None => vec![],
        }
    }
}

/// `dwconv(concat(a, b), w, bias) = concat(dwconv(a, w[:ca], bias[:ca]), dwconv(b, w[ca:], ...))`
/// for a depthwise conv (one filter per channel, `groups` = channels): it is channel-local,
/// so it distributes over a channel concat with its filters sliced and `groups` per piece
/// (SERENITY §3.3: what lets a kernel-wise partition flow through a separable conv).
pub struct DepthwiseOverConcat {
    bias: bool,
}

impl Applier<TirNode, TirAnalysis> for DepthwiseOverConcat {
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
        let bias = if self.bias {
            Some(s[var("?bias")])
        } else {
            None
        };
        let Some(Op::Conv2d(cv)) = op_of(eg, c).cloned() else {
            return vec![];
        };
        if !is_weight(eg, w) || bias.is_some_and(|x| !is_weight(eg, x)) {
            return vec![];
        }
        let (Some(sa), Some(sb), Some(sw)) = (shape(eg, a), shape(eg, b), shape(eg, w)) else {
            return vec![];
        };
        let (ca, cb) = (sa.get(1).copied(), sb.get(1).copied());
        let (Some(ca), Some(cb)) = (ca, cb) else {
            return vec![];
        };
        // Depthwise with multiplier 1: a [C, 1, kh, kw] filter, one group per channel.
        let depthwise = sa.len() == 4
            && sw.len() == 4
            && sw[1] == 1
            && cv.groups == ca + cb
            && sw[0] == ca + cb
            && concat_axis(eg, k, 4) == Some(1);
        if !depthwise || ca == 0 || cb == 0 {
            return vec![];
        }
        let piece = |eg: &mut EGraph, x: Id, s0: u64, s1: u64| -> Id {
            let mut p = cv.clone();
            p.groups = s1 - s0;
            let attrs = add_attrs(eg, Attrs::Op(Op::Conv2d(p)));
            let mut ch = vec![attrs, x, slice_weight(eg, w, 0, s0, s1)];
            if let Some(bias) = bias {
                ch.push(slice_weight(eg, bias, 0, s0, s1));
            }
            add_op(eg, "conv2d", ch)
        };
        let l = piece(eg, a, 0, ca);
        let r = piece(eg, b, ca, ca + cb);
        if eg[l].data.is_none() || eg[r].data.is_none() {
            return vec![];
        }
        let cat = add_op(eg, "concat", vec![k, l, r]);
        union(eg, eclass, cat, rule)
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
