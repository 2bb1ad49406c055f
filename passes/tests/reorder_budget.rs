//! The exact scheduler's budget covers its judge. With no time at all, the search stops at
//! once and the judge skips the quadratic offsets strategies and says so, yet the order is
//! still topological and its slab is that of the best fast strategy, whose plan passes the
//! checker; with an ample budget the slab is exactly `planner::best_offsets`'s. The same holds
//! for the `reorder` pass, whose budget covers judging the input order too. Nothing here is
//! timed: a budget is either zero or an hour.

mod reorder_common;

use proptest::prelude::*;
use reorder_common::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tir_passes::buffers::{assign_buffers, Sharing};
use tir_passes::plan::{Effort, PlanPolicy};
use tir_passes::planner::{self, checker::check_offsets, OffsetStrategy, UsageRecord};
use tir_passes::reorder::{self, layout_of, Budget, Dag, ReorderOptions, Scheduler, Search};

const ALIGN: u64 = 64;

fn budget(time: Duration) -> Budget {
    Budget {
        time,
        states: 20_000,
    }
}

/// The judge's policy: no sharing, at `ALIGN`.
fn policy() -> PlanPolicy {
    PlanPolicy {
        align: ALIGN,
        ..PlanPolicy::default()
    }
}

/// The usage records of the function laid out in `order`, one buffer per intermediate.
fn records_of(module: &tir_ir::Module, dag: &Dag, order: &[usize]) -> Vec<UsageRecord> {
    let mut f = entry(module).clone();
    f.layout = layout_of(entry(module), dag, order);
    assign_buffers(&f, Sharing::NONE)
        .expect("buffers")
        .records()
}

/// The smallest checked slab over the strategies `keep` selects, on the order's records.
fn slab_of(
    module: &tir_ir::Module,
    dag: &Dag,
    order: &[usize],
    keep: impl Fn(&OffsetStrategy) -> bool,
) -> u64 {
    let records = records_of(module, dag, order);
    let mut best = u64::MAX;
    for s in OffsetStrategy::ALL.into_iter().filter(keep) {
        let plan = planner::plan_offsets(&records, s, ALIGN).expect("plan");
        check_offsets(&records, &plan, ALIGN).expect("checker");
        best = best.min(plan.total_size);
    }
    best
}

/// Exact with `time`: a topological order that only moves ops, judged as promised.
fn check_exact(module: &tir_ir::Module, time: Duration) {
    let dag = Dag::from_function(entry(module), ALIGN).expect("dag");
    let sched = reorder::schedule_judged(
        entry(module),
        &dag,
        Scheduler::Exact,
        budget(time),
        &policy(),
    )
    .expect("schedule");
    assert!(dag.is_topological(&sched.order));
    let mut after = module.clone();
    after.entry_mut().expect("main").layout = layout_of(entry(module), &dag, &sched.order);
    check_reordered(module, &mut after, &dag, &sched.order, ALIGN);
    let judged = sched.judged.expect("exact judges its order");
    if time.is_zero() {
        // Without time the judge finishes only where a fast plan met the peak breadth (the
        // offsets lower bound), which no quadratic strategy could beat.
        if judged.complete {
            assert_eq!(judged.slab(), dag.peak(&sched.order));
        }
        assert!(!judged.strategy.is_quadratic(), "{}", judged.strategy);
        assert_eq!(
            judged.slab(),
            slab_of(module, &dag, &sched.order, |s| !s.is_quadratic())
        );
    } else {
        assert!(judged.complete && !sched.judge_stopped_by_time);
        let best =
            planner::best_offsets(&records_of(module, &dag, &sched.order), ALIGN).expect("plan");
        assert_eq!(
            (judged.strategy, judged.slab()),
            (best.strategy, best.plan.total_size)
        );
        assert_eq!(judged.slab(), slab_of(module, &dag, &sched.order, |_| true));
    }
}

fn dag_spec() -> impl Strategy<Value = Vec<(Vec<usize>, u8)>> {
    prop::collection::vec((prop::collection::vec(0usize..64, 0..=3), 1u8..=16), 1..=14)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn exact_without_time_judges_with_the_fast_strategies(spec in dag_spec()) {
        check_exact(&parse(&random_tir(&spec)), Duration::ZERO);
    }

    #[test]
    fn exact_with_ample_time_judges_with_best_offsets(spec in dag_spec()) {
        check_exact(&parse(&random_tir(&spec)), Duration::from_secs(3600));
    }

    #[test]
    fn the_pass_without_time_still_never_plans_larger(spec in dag_spec(), which in 0usize..6) {
        let module = parse(&random_tir(&spec));
        let mut after = module.clone();
        let opts = ReorderOptions {
            search: Search::Scheduler(Scheduler::ALL[which]),
            budget: budget(Duration::ZERO),
            policy: policy(),
        };
        let stats = reorder::reorder(after.entry_mut().expect("main"), &opts)
            .expect("reorder")
            .stats;
        if !stats.judge_stopped_by_time {
            prop_assert_eq!(stats.slab_before, stats.peak_before);
            prop_assert_eq!(stats.slab_after, stats.peak_after);
        }
        prop_assert!(stats.slab_after <= stats.slab_before);
        let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
        let input = reorder::input::schedule(&dag);
        prop_assert_eq!(
            stats.slab_before,
            slab_of(&module, &dag, &input, |s| !s.is_quadratic())
        );
        if let Some(e) = &stats.exact {
            prop_assert!(e.lower_bound <= e.peak);
        }
        tir_ir::verify(&mut after).expect("the reordered module verifies");
    }
}

/// A zoo model at full size (DARTS: 549 operators, where min-cost flow alone takes seconds):
/// no time means no quadratic strategy, and still a checked, topological order. Its input
/// order plans above its peak breadth with every fast strategy, so the judge of that order
/// needs the quadratic ones and must say it was stopped.
#[test]
fn no_time_on_darts() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/darts_imagenet.tir");
    let text = std::fs::read_to_string(path).expect("examples/darts_imagenet.tir");
    let module = parse(&text);
    check_exact(&module, Duration::ZERO);
    let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
    let input = reorder::input::schedule(&dag);
    let fast = slab_of(&module, &dag, &input, |s| !s.is_quadratic());
    assert!(
        fast > dag.peak(&input),
        "the input order now plans at its bound"
    );
    let judge = policy().with_effort(Effort::Until(Instant::now()));
    let s = reorder::judge_order(entry(&module), &dag, &input, &judge).expect("judge");
    assert!(!s.complete);
    assert_eq!(s.slab(), fast);
}
