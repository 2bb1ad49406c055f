//! One judge: `plan_function` is the `plan` pass and the judge of `reorder` and `rewrite`, so
//! "reordering never makes the slab larger" is a property of the pipeline, not of a caller
//! checking afterwards. On random DAGs, under every scheduler, with and without sharing, with
//! no time at all (the judge cut short, the fast strategies only) and with ample time, the
//! `plan` pass after `reorder` never plans a larger slab than `plan` alone on the input
//! program; the pass reuses the judge's plan only when it is the plan it would make itself.
//! Every plan here passed the independent checker inside `plan_function`. Nothing is timed:
//! a budget is zero or an hour.

mod reorder_common;

use proptest::prelude::*;
use reorder_common::*;
use std::time::Duration;
use tir_ir::Module;
use tir_passes::pipeline::{run_pipeline, Pass, PassReport, PlanStats};
use tir_passes::plan::{plan_function, Effort, PlanPolicy};
use tir_passes::reorder::{Budget, ReorderOptions, Scheduler, Search};
use tir_passes::rewrite::RewriteOptions;

const ALIGN: u64 = 64;

fn policy(sharing: bool) -> PlanPolicy {
    PlanPolicy {
        align: ALIGN,
        sharing,
        ..PlanPolicy::default()
    }
}

fn budget(time: Duration) -> Budget {
    Budget {
        time,
        states: 20_000,
    }
}

fn dag_spec() -> impl Strategy<Value = Vec<(Vec<usize>, u8)>> {
    prop::collection::vec((prop::collection::vec(0usize..64, 0..=3), 1u8..=16), 1..=14)
}

/// Runs `passes` then `plan{policy}` and returns the plan pass's report.
fn planned_after(module: &Module, mut passes: Vec<Pass>, policy: PlanPolicy) -> PlanStats {
    let mut m = module.clone();
    passes.push(Pass::Plan(policy));
    let reports = run_pipeline(&mut m, &passes, true, |_, _| {}).expect("pipeline");
    match reports.last().map(|r| &r.report) {
        Some(PassReport::Plan(s)) => s.clone(),
        other => panic!("no plan report: {other:?}"),
    }
}

fn searches() -> impl Strategy<Value = Search> {
    prop_oneof![
        (0usize..Scheduler::ALL.len()).prop_map(|i| Search::Scheduler(Scheduler::ALL[i])),
        Just(Search::Heuristics),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn reordering_never_plans_larger(
        spec in dag_spec(),
        search in searches(),
        sharing: bool,
        ample: bool,
    ) {
        let module = parse(&random_tir(&spec));
        let policy = policy(sharing);
        let time = if ample { Duration::from_secs(3600) } else { Duration::ZERO };
        let alone = planned_after(&module, vec![], policy);
        let reorder = Pass::Reorder(ReorderOptions { search, budget: budget(time), policy });
        let after = planned_after(&module, vec![reorder], policy);
        prop_assert!(
            after.slab <= alone.slab,
            "{:?}: reordered {} > input {}", search, after.slab, alone.slab
        );
    }

    #[test]
    fn the_judge_is_the_plan_pass(spec in dag_spec(), sharing: bool) {
        let module = parse(&random_tir(&spec));
        let policy = policy(sharing);
        let judged = plan_function(entry(&module), &policy).expect("judge");
        let pass = planned_after(&module, vec![], policy);
        prop_assert!(judged.complete);
        prop_assert_eq!(judged.slab(), pass.slab);
        prop_assert_eq!(judged.strategy, pass.strategy);
        prop_assert_eq!(judged.sharing, pass.sharing);
    }

    #[test]
    fn less_effort_is_an_upper_bound(spec in dag_spec(), sharing: bool) {
        let module = parse(&random_tir(&spec));
        let full = plan_function(entry(&module), &policy(sharing)).expect("full");
        for effort in [Effort::Guide, Effort::FastAbove(0), Effort::Until(std::time::Instant::now())] {
            let cut = plan_function(entry(&module), &policy(sharing).with_effort(effort))
                .expect("cut short");
            prop_assert!(cut.slab() >= full.slab(), "{:?}", effort);
            if cut.complete {
                prop_assert_eq!(cut.slab(), full.slab(), "{:?} says complete", effort);
            }
        }
    }
}

/// A pipeline string gives `reorder` and `rewrite` the policy of the `plan` after them.
#[test]
fn passes_judge_with_the_policy_of_the_plan_after_them() {
    let passes = tir_passes::pipeline::parse_pipeline(
        "reorder{scheduler=kahn},rewrite{scheduler=list},plan{sharing=true,guard=64,align=128},bufferize",
    )
    .expect("parses");
    let plan = match passes[2] {
        Pass::Plan(p) => p,
        ref other => panic!("{other:?}"),
    };
    assert!(plan.sharing && plan.guard == 64 && plan.align == 128);
    match (&passes[0], &passes[1]) {
        (Pass::Reorder(r), Pass::Rewrite(w)) => {
            assert_eq!(r.policy, plan);
            assert_eq!(w.policy, plan);
        }
        other => panic!("{other:?}"),
    }
    // With no plan after it, the reorder pass keeps its own default (no sharing).
    match tir_passes::pipeline::parse_pipeline("reorder").expect("parses")[0] {
        Pass::Reorder(r) => assert_eq!(r.policy, PlanPolicy::default()),
        ref other => panic!("{other:?}"),
    }
}

/// The rewrite pass on a concat reduced by a 1x1 conv, cut short (no time: its judge runs the
/// fast strategies only): whatever it keeps, the `plan` after it is never larger than the
/// input's.
#[test]
fn rewriting_never_plans_larger_even_with_no_time() {
    let module = parse(
        "module @dense {
  func @main(%x: tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32> {
    %wa = const {name = \"wa\"} : tensor<32x4x1x1xf32>
    %wb = const {name = \"wb\"} : tensor<32x4x3x3xf32>
    %wy = const {name = \"wy\"} : tensor<4x64x1x1xf32>
    %a = conv2d(%x, %wa) {activation = relu}
    %b = conv2d(%x, %wb) {pads = [1, 1, 1, 1], activation = relu}
    %c = concat(%a, %b) {axis = 1}
    %y = conv2d(%c, %wy)
    return %y
  }
}",
    );
    let policy = PlanPolicy {
        align: ALIGN,
        ..PlanPolicy::compile()
    };
    let alone = planned_after(&module, vec![], policy);
    for time in [Duration::ZERO, Duration::from_secs(3600)] {
        let rewrite = Pass::Rewrite(RewriteOptions {
            scheduler: Scheduler::Kahn,
            budget: budget(time),
            policy,
            ..RewriteOptions::default()
        });
        let after = planned_after(&module, vec![rewrite], policy);
        assert!(
            after.slab <= alone.slab,
            "{time:?}: {} > {}",
            after.slab,
            alone.slab
        );
    }
}
