//! One `start => goal` test per shrinking rule (`rewrite::shrink`), in the manner of egg's
//! `tests/math.rs`, then the chains the zoo's factorized reductions need, then the conditions
//! that must refuse.

use egg::{Pattern, RecExpr, Runner, Searcher};
use tir_ir::op::{Conv2d, PadMode, Pool2d, Slice};
use tir_ir::{Op, TensorType, UnaryOp};
use tir_passes::rewrite::lang::{Attrs, EGraph, TirAnalysis, TirNode};
use tir_passes::rewrite::shrink::rules;

/// Leaves: `%x` `[1,4,7,7]`, `%y` `[1,4,8,8]`, weights `%w` `[8,4,1,1]`, `%b` `[8]`, `%wy`
/// `[1,4,8,8]`; the attributes numbered as below.
fn analysis() -> TirAnalysis {
    let mut a = TirAnalysis::default();
    for (name, shape, weight) in [
        ("x", vec![1, 4, 7, 7], false),
        ("y", vec![1, 4, 8, 8], false),
        ("w", vec![8, 4, 1, 1], true),
        ("b", vec![8], true),
        ("wy", vec![1, 4, 8, 8], true),
    ] {
        a.leaf(name, TensorType::f32(shape), weight);
    }
    let slice = |starts: [i64; 2], ends: [i64; 2], steps: [i64; 2]| {
        Op::Slice(Slice {
            starts: starts.to_vec(),
            ends: ends.to_vec(),
            axes: vec![2, 3],
            steps: steps.to_vec(),
        })
    };
    let pad = |mode| Op::Pad {
        pads: vec![0, 0, 0, 0, 0, 0, 1, 1],
        mode,
        value: 0.0,
    };
    let point = |kernel| Pool2d {
        kernel,
        strides: [2, 2],
        pads: [0; 4],
        ceil_mode: false,
        count_include_pad: false,
    };
    let conv = |strides, pads| {
        Op::Conv2d(Conv2d {
            strides,
            pads,
            ..Conv2d::default()
        })
    };
    let attrs = [
        /* #0 */ pad(PadMode::Constant),
        /* #1 */ slice([1, 1], [8, 8], [1, 1]),
        /* #2 */ Op::AvgPool(point([1, 1])),
        /* #3 */ slice([0, 0], [7, 7], [2, 2]),
        /* #4 */ Op::MaxPool(point([1, 1])),
        /* #5 */ slice([1, 1], [8, 8], [2, 2]),
        /* #6 */ slice([1, 1], [6, 6], [2, 2]),
        /* #7 */ conv([2, 2], [0; 4]),
        /* #8 */ conv([1, 1], [0; 4]),
        /* #9 */ Op::Unary(UnaryOp::Relu),
        /* #10 */ Op::Unary(UnaryOp::Relu6),
        /* #11 */ slice([1, 1], [7, 7], [1, 1]),
        /* #12 */ pad(PadMode::Reflect),
        /* #13 */ Op::AvgPool(point([3, 3])),
        /* #14 */ conv([2, 2], [1; 4]),
        /* #15 */
        Op::Slice(Slice {
            starts: vec![7],
            ends: vec![8],
            axes: vec![3],
            steps: vec![1],
        }),
    ];
    for (i, op) in attrs.into_iter().enumerate() {
        assert_eq!(a.intern(Attrs::Op(op)) as usize, i);
    }
    a
}

fn run(start: &str) -> (Runner<TirNode, TirAnalysis>, egg::Id) {
    let start: RecExpr<TirNode> = start.parse().expect("start parses");
    let runner = Runner::default()
        .with_egraph(EGraph::new(analysis()))
        .with_expr(&start)
        .with_iter_limit(16)
        .run(&rules());
    let root = runner.egraph.find(runner.roots[0]);
    assert!(
        runner.egraph[root].data.is_some(),
        "the start is well typed"
    );
    (runner, root)
}

fn prove(start: &str, goals: &[&str]) {
    let (runner, root) = run(start);
    for g in goals {
        let p: Pattern<TirNode> = g.parse().expect("goal parses");
        assert!(
            p.search_eclass(&runner.egraph, root).is_some(),
            "goal {g} not proved; stop: {:?}",
            runner.stop_reason
        );
    }
}

fn refuses(start: &str, not: &str) {
    let (runner, root) = run(start);
    let p: Pattern<TirNode> = not.parse().expect("pattern parses");
    assert!(
        p.search_eclass(&runner.egraph, root).is_none(),
        "{not} must not be proved"
    );
}

macro_rules! start_goal {
    ($name:ident, $start:literal => $($goal:literal),+) => {
        #[test]
        fn $name() {
            prove($start, &[$($goal),+]);
        }
    };
}

start_goal!(pool_as_slice, "(avg_pool #2 %x)" => "(slice #3 %x)");
start_goal!(maxpool_as_slice, "(max_pool #4 %x)" => "(slice #3 %x)");
start_goal!(conv1x1_stride_as_slice, "(conv2d #7 %x %w)" => "(conv2d #8 (slice #3 %x) %w)");
start_goal!(conv1x1_bias_stride_as_slice,
    "(conv2d #7 %x %w %b)" => "(conv2d #8 (slice #3 %x) %w %b)");
start_goal!(slice_slice, "(slice #3 (slice #1 %y))" => "(slice #5 %y)");
start_goal!(slice_over_pad, "(slice #5 (pad #0 %x))" => "(pad #0 (slice #6 %x))");
start_goal!(relu_over_slice, "(slice #3 (relu #9 %x))" => "(relu #9 (slice #3 %x))");
start_goal!(relu6_over_slice, "(slice #3 (relu6 #10 %x))" => "(relu6 #10 (slice #3 %x))");

// NASNet-A's factorized reduction, path 2: pad, shift, 1×1 stride-2 pool. The 8×8 pad and
// the shifted copy are gone: a quarter-size slice, padded by one row and column.
start_goal!(nasnet_shifted_path_subsamples_first,
    "(avg_pool #2 (slice #1 (pad #0 %x)))" => "(pad #0 (slice #6 %x))");
// DARTS' FactorizedReduce, second conv: ReLU, shift, 1×1 stride-2 conv.
start_goal!(darts_shifted_conv_subsamples_first,
    "(conv2d #7 (slice #11 (relu #9 %x)) %w)" => "(conv2d #8 (relu #9 (slice #6 %x)) %w)");

#[test]
fn a_reflect_pad_does_not_commute_with_a_slice() {
    refuses("(slice #5 (pad #12 %x))", "(pad ?p ?s)");
}

#[test]
fn a_pool_with_a_wider_window_stays() {
    refuses("(avg_pool #13 %x)", "(slice ?s %x)");
}

#[test]
fn a_padded_strided_conv_stays() {
    refuses("(conv2d #14 %x %w)", "(conv2d ?c (slice ?s %x) %w)");
}

#[test]
fn slices_of_weights_are_left_to_the_partitioning_rules() {
    refuses("(slice #3 (slice #1 %wy))", "(slice #5 %wy)");
}

#[test]
fn a_slice_of_padding_alone_stays() {
    // Column 7 of the padded map is all padding: no element of `%x` is read.
    refuses("(slice #15 (pad #0 %x))", "(pad ?p (slice ?s %x))");
}
