//! `reorder` and `rewrite` on a dynamic function (`tir_passes::dynamic`): the program they
//! keep serves every shape, plans no larger than the input order at every shape it was judged
//! at, and a program rewritten at one shape is kept only when it is shape-generic.

use tir_ir::{Bindings, Module};
use tir_passes::dynamic::{
    generalize, reorder_dynamic, rewrite_dynamic, sample_shapes, specialize_function, JudgeShapes,
};
use tir_passes::pipeline::{parse_pipeline, run_pipeline_at, PassError, PassReport};
use tir_passes::plan::{plan_function, PlanPolicy};
use tir_passes::reorder::{Budget, ReorderOptions, Scheduler, Search};
use tir_passes::rewrite::RewriteOptions;

fn parsed(text: &str) -> Module {
    tir_ir::parse_and_verify(text).expect("valid IR")
}

fn bindings(pairs: &[(&str, u64)]) -> Bindings {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

/// Two branches over `{n}x{m}`: one keeps an `{n}x{m}x{m}`-sized intermediate, the other an
/// `{n}x{m}` one, so which order is better depends on the shape.
const TWO_BRANCHES: &str = "module @m {
  func @main(%x: tensor<{n}x{m}xf32>, %y: tensor<{n}x{m}xf32>) {
    %a = relu(%x)
    %b = sigmoid(%a)
    %c = tanh(%b)
    %d = relu(%y)
    %e = sigmoid(%d)
    %f = tanh(%e)
    %g = add(%c, %f)
    return %g
  }
}";

const BERT: &str = include_str!("../../tests/dynamic/bert.tir");

fn slab_at(f: &tir_ir::Function, b: &Bindings) -> u64 {
    let s = specialize_function(f, b).expect("specializes");
    plan_function(&s, &PlanPolicy::default())
        .expect("plans (checked)")
        .slab()
}

#[test]
fn sample_shapes_cover_every_dim_and_the_corners() {
    let m = parsed(TWO_BRANCHES);
    let shapes = sample_shapes(&m, &Bindings::new());
    // 8, 64, 512 for both, then (512, 8) and (8, 512).
    assert_eq!(shapes.len(), 5, "{shapes:?}");
    assert!(shapes.contains(&bindings(&[("n", 8), ("m", 512)])));
    assert!(shapes.contains(&bindings(&[("n", 512), ("m", 8)])));
    // A pinned dim keeps its value in every sample.
    let pinned = sample_shapes(&m, &bindings(&[("n", 3)]));
    assert_eq!(pinned.len(), 3);
    assert!(pinned.iter().all(|b| b["n"] == 3));
}

#[test]
fn a_reordered_dynamic_function_is_never_larger_than_its_input_order_at_any_judged_shape() {
    for text in [TWO_BRANCHES, BERT] {
        let m = parsed(text);
        let shapes = sample_shapes(&m, &Bindings::new());
        assert!(!shapes.is_empty());
        for search in [
            Search::Heuristics,
            Search::Scheduler(Scheduler::Exact),
            Search::Scheduler(Scheduler::Kahn),
        ] {
            let input = m.entry().expect("main").clone();
            let mut f = input.clone();
            let opts = ReorderOptions {
                search,
                budget: Budget::default(),
                policy: PlanPolicy::default(),
            };
            let stats = reorder_dynamic(&mut f, &opts, &shapes).expect("reorders");
            assert!(f.is_dynamic());
            assert_eq!(f.ops, input.ops, "reordering changes only the layout");
            assert_eq!(stats.shapes.len(), shapes.len());
            for s in &stats.shapes {
                assert!(s.after <= s.before, "{search:?} {s:?}");
                // The figures are the checked plans of the two programs at that shape.
                assert_eq!(s.before, slab_at(&input, &s.shape));
                assert_eq!(s.after, slab_at(&f, &s.shape));
            }
        }
    }
}

#[test]
fn the_bert_block_reorders_to_a_smaller_slab_at_long_sequences() {
    let m = parsed(BERT);
    let mut f = m.entry().expect("main").clone();
    let shapes = sample_shapes(&m, &Bindings::new());
    let stats = reorder_dynamic(&mut f, &ReorderOptions::default(), &shapes).expect("reorders");
    assert_eq!(stats.kept, "reordered");
    assert!(stats.shapes.iter().any(|s| s.after < s.before), "{stats:?}");
}

#[test]
fn the_pipeline_refuses_plan_on_a_dynamic_function_without_bounds_and_plans_at_them() {
    let passes = parse_pipeline("reorder,plan,bufferize").expect("pipeline");
    let mut m = parsed(BERT);
    let shapes = sample_shapes(&m, &Bindings::new());
    let err = run_pipeline_at(
        &mut m,
        &passes,
        true,
        Some(JudgeShapes::Samples(shapes)),
        |_, _| {},
    )
    .expect_err("no sizes to plan at");
    let PassError::Failed { pass, message } = err else {
        panic!("{err:?}")
    };
    assert_eq!(pass, "plan");
    assert!(
        message.contains("--dim NAME=N") && message.contains("--dim-max NAME=N"),
        "{message}"
    );

    let mut m = parsed(BERT);
    let at = bindings(&[("batch", 2), ("seq", 48)]);
    let stats = run_pipeline_at(
        &mut m,
        &passes,
        true,
        Some(JudgeShapes::Bounds(at.clone())),
        |_, _| {},
    )
    .expect("bounded plan");
    assert!(!m.is_dynamic(), "bufferized at the bounds");
    let PassReport::Plan(plan) = &stats[1].report else {
        panic!("{stats:?}")
    };
    // The bounded plan is the plan of the static model at the bounds (or smaller, reordered).
    let at_bounds = tir_ir::specialize(&parsed(BERT), &at).expect("specializes");
    let input =
        plan_function(at_bounds.entry().expect("main"), &PlanPolicy::default()).expect("plans");
    assert!(
        plan.slab <= input.slab(),
        "{} > {}",
        plan.slab,
        input.slab()
    );
}

#[test]
fn a_rewrite_that_uses_an_extent_of_one_shape_is_not_shape_generic() {
    let original = parsed(
        "module @m {
  func @main(%x: tensor<{n}x4xf32>) {
    %y = relu(%x)
    return %y
  }
}",
    );
    // At n = 8: relu distributed over the two halves, cut at the extent 4 of that shape.
    let at_eight = parsed(
        "module @m {
  func @main(%x: tensor<8x4xf32>) {
    %lo = slice(%x) {starts = [0], ends = [4], axes = [0]}
    %hi = slice(%x) {starts = [4], ends = [8], axes = [0]}
    %rlo = relu(%lo)
    %rhi = relu(%hi)
    %y = concat(%rlo, %rhi) {axis = 0}
    return %y
  }
}",
    );
    let o = original.entry().expect("main");
    let why = generalize(at_eight.entry().expect("main"), o).expect_err("not generic");
    assert!(
        why.contains("%y") || why.contains("run-time check"),
        "{why}"
    );

    // The same program cut along the static axis is the same program at every shape.
    let by_columns = parsed(
        "module @m {
  func @main(%x: tensor<8x4xf32>) {
    %lo = slice(%x) {starts = [0], ends = [2], axes = [1]}
    %hi = slice(%x) {starts = [2], ends = [4], axes = [1]}
    %rlo = relu(%lo)
    %rhi = relu(%hi)
    %y = concat(%rlo, %rhi) {axis = 1}
    return %y
  }
}",
    );
    let g = generalize(by_columns.entry().expect("main"), o).expect("shape-generic");
    assert!(g.is_dynamic());
    let t = g.values[g.returns[0]].sym_type().expect("typed");
    assert_eq!(t.to_string(), "tensor<{n}x4xf32>");
}

#[test]
fn rewriting_a_dynamic_function_keeps_a_program_no_larger_at_every_shape() {
    let m = parsed(BERT);
    let shapes = sample_shapes(&m, &Bindings::new());
    let input = m.entry().expect("main").clone();
    let mut f = input.clone();
    let opts = RewriteOptions {
        scheduler: Scheduler::Exact,
        budget: Budget {
            time: std::time::Duration::from_secs(5),
            ..Budget::default()
        },
        ..RewriteOptions::default()
    };
    let stats = rewrite_dynamic(&mut f, &opts, &shapes).expect("rewrites");
    assert!(f.is_dynamic());
    let policy = PlanPolicy::compile();
    for s in &stats.shapes {
        assert!(s.after <= s.before, "{s:?}");
        let plan = |g: &tir_ir::Function| {
            plan_function(
                &specialize_function(g, &s.shape).expect("specializes"),
                &policy,
            )
            .expect("plans")
            .slab()
        };
        assert_eq!(s.before, plan(&input));
        assert_eq!(s.after, plan(&f));
    }
}
