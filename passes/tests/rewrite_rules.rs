//! One `start => goal` test per rewrite rule, in the manner of egg's own `tests/math.rs`:
//! the start term is added to an e-graph whose analysis knows the leaves' types, the rules
//! run, and the goal must land in the start's e-class.

use egg::{Pattern, RecExpr, Runner, Searcher};
use tir_ir::op::{Conv2d, Pool2d, Slice};
use tir_ir::{Activation, BinaryOp, Op, TensorType, UnaryOp};
use tir_passes::rewrite::lang::Rewrite;
use tir_passes::rewrite::lang::{Attrs, EGraph, TirAnalysis, TirNode};
use tir_passes::rewrite::rules::{kernel_rules, rules, RuleSet};

/// The analysis of every test: leaves `%a` `%c` `[1,2,4,4]`, `%b` `[1,3,4,4]`, `%d` `[1,1,4,4]`, `%x` `[1,5,4,4]`,
/// weights `%w` `[6,5,1,1]`, `%bias` `[6]`, `%m` `[5,7]`, `%s`..`%v` `[5]`, depthwise filters
/// `%dw` `[5,1,3,3]` (bias `%dwb` `[5]`) and `%dw2` `[10,1,3,3]` (multiplier 2), rank-2 inputs
/// `%p` `[3,2]`, `%q` `[3,3]`, `%r` `[3,5]`, and the attributes numbered as below.
fn analysis() -> TirAnalysis {
    let mut a = TirAnalysis::default();
    for (name, shape, weight) in [
        ("a", vec![1, 2, 4, 4], false),
        ("b", vec![1, 3, 4, 4], false),
        ("c", vec![1, 2, 4, 4], false),
        ("d", vec![1, 1, 4, 4], false),
        ("x", vec![1, 5, 4, 4], false),
        ("y", vec![1, 5, 4, 4], false),
        ("z", vec![1, 5, 4, 4], false),
        ("w", vec![6, 5, 1, 1], true),
        ("bias", vec![6], true),
        ("m", vec![5, 7], true),
        ("s", vec![5], true),
        ("o", vec![5], true),
        ("mu", vec![5], true),
        ("v", vec![5], true),
        ("p", vec![3, 2], false),
        ("q", vec![3, 3], false),
        ("dw", vec![5, 1, 3, 3], true),
        ("dwb", vec![5], true),
        ("dw2", vec![10, 1, 3, 3], true),
    ] {
        a.leaf(name, TensorType::f32(shape), weight);
    }
    let slice = |start, end, axis| {
        Op::Slice(Slice {
            starts: vec![start],
            ends: vec![end],
            axes: vec![axis],
            steps: vec![1],
        })
    };
    let pool = Pool2d {
        kernel: [3, 3],
        strides: [1, 1],
        pads: [1, 1, 1, 1],
        ceil_mode: false,
        count_include_pad: false,
    };
    let depthwise = |groups| {
        Op::Conv2d(Conv2d {
            pads: [1; 4],
            groups,
            activation: Some(Activation::Relu6),
            ..Conv2d::default()
        })
    };
    let attrs = [
        /* #0 */ Op::Concat { axis: 1 },
        /* #1 */ Op::Conv2d(Conv2d::default()),
        /* #2 */
        Op::Binary {
            op: BinaryOp::Add,
            activation: None,
        },
        /* #3 */ slice(0, 2, 1),
        /* #4 */ slice(2, 5, 1),
        /* #5 */ Op::Unary(UnaryOp::Relu),
        /* #6 */
        Op::Conv2d(Conv2d {
            activation: Some(Activation::Relu),
            ..Conv2d::default()
        }),
        /* #7 */
        Op::Binary {
            op: BinaryOp::Add,
            activation: Some(Activation::Relu),
        },
        /* #8 */ Op::MatMul { activation: None },
        /* #9 */ slice(0, 2, 0),
        /* #10 */ slice(2, 5, 0),
        /* #11 */ Op::BatchNorm { epsilon: 1e-5 },
        /* #12 */ Op::Transpose {
            perm: vec![0, 2, 3, 1],
        },
        /* #13 */ Op::Transpose {
            perm: vec![0, 3, 1, 2],
        },
        /* #14 */ Op::reshape(vec![1, 5, 16]),
        /* #15 */ Op::reshape(vec![1, 80]),
        /* #16 */ Op::reshape(vec![1, 5, 4, 4]),
        /* #17 */
        Op::Concat { axis: 1 - 2 }, // the last axis of a rank-2 matmul operand
        /* #18 */ Op::Unary(UnaryOp::Sigmoid),
        /* #19 */ Op::Clip { min: 0.0, max: 6.0 },
        /* #20 */ Op::Unary(UnaryOp::Tanh),
        /* #21 */ Op::Unary(UnaryOp::Relu6),
        /* #22 */ Op::Unary(UnaryOp::HardSwish),
        /* #23 */ Op::Unary(UnaryOp::Gelu),
        /* #24 */ Op::Unary(UnaryOp::Exp),
        /* #25 */ Op::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        /* #26 */ Op::MaxPool(pool.clone()),
        /* #27 */ Op::AvgPool(pool),
        /* #28 */ Op::GlobalAvgPool,
        /* #29 */ Op::Concat { axis: 2 },
        /* #30 */ depthwise(5),
        /* #31 */ depthwise(2),
        /* #32 */ depthwise(3),
        /* #33 */ slice(0, 3, 0),
        /* #34 */ slice(3, 6, 0),
        /* #35 */ slice(2, 4, 0),
        /* #36 */ slice(4, 6, 0),
    ];
    for (i, op) in attrs.into_iter().enumerate() {
        assert_eq!(a.intern(Attrs::Op(op)) as usize, i);
    }
    a
}

/// Runs `set` on `start` and asserts that every goal is in the start's class.
fn prove(set: RuleSet, start: &str, goals: &[&str]) {
    prove_with(&rules(set), 8, start, goals);
}

/// The kernel rules run one iteration: every piece is a conv they match again.
const KERNEL_ITERS: usize = 1;

fn prove_with(rules: &[Rewrite], iters: usize, start: &str, goals: &[&str]) {
    let start: RecExpr<TirNode> = start.parse().expect("start parses");
    let runner = Runner::default()
        .with_egraph(EGraph::new(analysis()))
        .with_expr(&start)
        .with_iter_limit(iters)
        .run(rules);
    let root = runner.egraph.find(runner.roots[0]);
    assert!(
        runner.egraph[root].data.is_some(),
        "the start is well typed"
    );
    for g in goals {
        let p: Pattern<TirNode> = g.parse().expect("goal parses");
        assert!(
            p.search_eclass(&runner.egraph, root).is_some(),
            "goal {g} not proved; stop: {:?}",
            runner.stop_reason
        );
    }
}

macro_rules! start_goal {
    ($name:ident, $set:expr, $start:literal => $($goal:literal),+) => {
        #[test]
        fn $name() {
            prove($set, $start, &[$($goal),+]);
        }
    };
}

use RuleSet::{All, Split};

start_goal!(conv_over_concat, Split,
    "(conv2d #1 (concat #0 %a %b) %w)" => "(add #2 (conv2d #1 %a (slice #3 %w)) (conv2d #1 %b (slice #4 %w)))");
start_goal!(conv_bias_over_concat, Split,
    "(conv2d #1 (concat #0 %a %b) %w %bias)" => "(add #2 (conv2d #1 %a (slice #3 %w) %bias) (conv2d #1 %b (slice #4 %w)))");
start_goal!(conv_activation_moves_to_the_add, Split,
    "(conv2d #6 (concat #0 %a %b) %w)" => "(add #7 (conv2d #1 %a (slice #3 %w)) (conv2d #1 %b (slice #4 %w)))");
start_goal!(matmul_over_concat, Split,
    "(matmul #8 (concat #17 %p %q) %m)" => "(add #2 (matmul #8 %p (slice #9 %m)) (matmul #8 %q (slice #10 %m)))");
start_goal!(bn_over_concat, Split,
    "(batch_norm #11 (concat #0 %a %b) %s %o %mu %v)" => "(concat #0 (batch_norm #11 %a (slice #9 %s) (slice #9 %o) (slice #9 %mu) (slice #9 %v)) (batch_norm #11 %b (slice #10 %s) (slice #10 %o) (slice #10 %mu) (slice #10 %v)))");
start_goal!(relu_over_concat, Split,
    "(relu #5 (concat #0 %a %b))" => "(concat #0 (relu #5 %a) (relu #5 %b))");
start_goal!(relu6_over_concat, Split,
    "(relu6 #21 (concat #0 %a %b))" => "(concat #0 (relu6 #21 %a) (relu6 #21 %b))");
start_goal!(sigmoid_over_concat, Split,
    "(sigmoid #18 (concat #0 %a %b))" => "(concat #0 (sigmoid #18 %a) (sigmoid #18 %b))");
start_goal!(tanh_over_concat, Split,
    "(tanh #20 (concat #0 %a %b))" => "(concat #0 (tanh #20 %a) (tanh #20 %b))");
start_goal!(hswish_over_concat, Split,
    "(hard_swish #22 (concat #0 %a %b))" => "(concat #0 (hard_swish #22 %a) (hard_swish #22 %b))");
start_goal!(gelu_over_concat, Split,
    "(gelu #23 (concat #0 %a %b))" => "(concat #0 (gelu #23 %a) (gelu #23 %b))");
start_goal!(exp_over_concat, Split,
    "(exp #24 (concat #0 %a %b))" => "(concat #0 (exp #24 %a) (exp #24 %b))");
start_goal!(clip_over_concat, Split,
    "(clip #19 (concat #0 %a %b))" => "(concat #0 (clip #19 %a) (clip #19 %b))");
start_goal!(hsigmoid_over_concat, Split,
    "(hard_sigmoid #25 (concat #0 %a %b))" => "(concat #0 (hard_sigmoid #25 %a) (hard_sigmoid #25 %b))");
start_goal!(maxpool_over_concat, Split,
    "(max_pool #26 (concat #0 %a %b))" => "(concat #0 (max_pool #26 %a) (max_pool #26 %b))");
start_goal!(avgpool_over_concat, Split,
    "(avg_pool #27 (concat #0 %a %b))" => "(concat #0 (avg_pool #27 %a) (avg_pool #27 %b))");
start_goal!(gap_over_concat, Split,
    "(global_avg_pool #28 (concat #0 %a %b))" => "(concat #0 (global_avg_pool #28 %a) (global_avg_pool #28 %b))");
start_goal!(concat_flatten, All,
    "(concat #0 (concat #0 %a %b) %c)" => "(concat #0 %a (concat #0 %b %c))");
start_goal!(concat_nest, All,
    "(concat #0 %a (concat #0 %b %c))" => "(concat #0 (concat #0 %a %b) %c)");
start_goal!(transpose_cancel, Split,
    "(transpose #13 (transpose #12 %x))" => "%x");
start_goal!(reshape_reshape, Split,
    "(reshape #15 (reshape #14 %x))" => "(reshape #15 %x)");
start_goal!(reshape_noop, Split,
    "(reshape #16 %x)" => "%x");
start_goal!(add_comm, All,
    "(add #2 %x %y)" => "(add #2 %y %x)");
start_goal!(add_assoc, All,
    "(add #2 (add #2 %x %y) %z)" => "(add #2 %x (add #2 %y %z))", "(add #2 (add #2 %z %x) %y)");
start_goal!(dwconv_over_concat, Split,
    "(conv2d #30 (concat #0 %a %b) %dw)" => "(concat #0 (conv2d #31 %a (slice #9 %dw)) (conv2d #32 %b (slice #10 %dw)))");
start_goal!(dwconv_bias_over_concat, Split,
    "(conv2d #30 (concat #0 %a %b) %dw %dwb)" => "(concat #0 (conv2d #31 %a (slice #9 %dw) (slice #9 %dwb)) (conv2d #32 %b (slice #10 %dw) (slice #10 %dwb)))");

macro_rules! kernel_goal {
    ($name:ident, $pieces:expr, $start:literal => $($goal:literal),+) => {
        #[test]
        fn $name() {
            prove_with(&kernel_rules($pieces), KERNEL_ITERS, $start, &[$($goal),+]);
        }
    };
}

kernel_goal!(conv_split_out, 2,
    "(conv2d #6 %x %w)" => "(concat #0 (conv2d #6 %x (slice #33 %w)) (conv2d #6 %x (slice #34 %w)))");
kernel_goal!(conv_bias_split_out, 2,
    "(conv2d #1 %x %w %bias)" => "(concat #0 (conv2d #1 %x (slice #33 %w) (slice #33 %bias)) (conv2d #1 %x (slice #34 %w) (slice #34 %bias)))");
kernel_goal!(conv_split_out_in_three_nests_left, 3,
    "(conv2d #1 %x %w)" => "(concat #0 (concat #0 (conv2d #1 %x (slice #9 %w)) (conv2d #1 %x (slice #35 %w))) (conv2d #1 %x (slice #36 %w)))");

start_goal!(nested_concat_partitions_piece_by_piece, Split,
    "(conv2d #1 (concat #0 (concat #0 %a %d) %c) %w)" => "(add #2 (add #2 (conv2d #1 %a (slice #3 %w)) ?p) ?q)");

/// Conditions that must refuse: each start keeps its class to itself.
fn refuses(set: RuleSet, start: &str, not: &str) {
    refuses_with(&rules(set), 8, start, not);
}

fn refuses_with(rules: &[Rewrite], iters: usize, start: &str, not: &str) {
    let start: RecExpr<TirNode> = start.parse().expect("start parses");
    let runner = Runner::default()
        .with_egraph(EGraph::new(analysis()))
        .with_expr(&start)
        .with_iter_limit(iters)
        .run(rules);
    let root = runner.egraph.find(runner.roots[0]);
    let p: Pattern<TirNode> = not.parse().expect("pattern parses");
    assert!(
        p.search_eclass(&runner.egraph, root).is_none(),
        "{not} must not be proved"
    );
}

#[test]
fn add_with_activation_does_not_commute() {
    refuses(All, "(add #7 %x %y)", "(add #7 %y %x)");
}

#[test]
fn transpose_pairs_that_do_not_cancel_stay() {
    refuses(Split, "(transpose #12 (transpose #12 %x))", "%x");
}

#[test]
fn conv_over_a_concat_of_activations_only_partitions_weights() {
    // `%x` is not a weight: no partition of a conv whose weight is computed.
    refuses(Split, "(conv2d #1 (concat #0 %a %b) %x)", "(add #2 ?l ?r)");
}

#[test]
fn pooling_over_a_spatial_concat_stays() {
    refuses(
        Split,
        "(max_pool #26 (concat #29 %x %y))",
        "(concat #29 ?l ?r)",
    );
}

#[test]
fn a_depthwise_conv_with_a_channel_multiplier_stays() {
    // Two filters per input channel: a channel's outputs are not where the concat puts them.
    refuses(
        Split,
        "(conv2d #30 (concat #0 %a %b) %dw2)",
        "(concat #0 ?l ?r)",
    );
}

#[test]
fn a_depthwise_conv_is_not_split_by_its_filters() {
    // Its output channels read one input channel each: the kernel split would need the input
    // sliced too; the pass lets depthwise convs follow a split producer instead.
    refuses_with(
        &kernel_rules(2),
        KERNEL_ITERS,
        "(conv2d #30 %x %dw)",
        "(concat #0 ?l ?r)",
    );
}

#[test]
fn a_conv_is_not_split_into_more_pieces_than_filters() {
    refuses_with(
        &kernel_rules(7),
        KERNEL_ITERS,
        "(conv2d #1 %x %w)",
        "(concat #0 ?l ?r)",
    );
}
