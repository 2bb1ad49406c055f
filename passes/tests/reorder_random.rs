//! Order search on random DAGs: every scheduler gives a valid topological order that changes
//! only the layout; exact is never above a heuristic's peak, and on tiny DAGs equals a brute
//! force over all topological orders.

mod reorder_common;

use proptest::prelude::*;
use reorder_common::*;
use std::time::Duration;
use tir_passes::plan::PlanPolicy;
use tir_passes::reorder::{self, layout_of, Budget, Dag, Scheduler, Search};

const ALIGN: u64 = 64;

fn budget() -> Budget {
    Budget {
        time: Duration::from_secs(5),
        states: 100_000,
    }
}

fn dag_spec(max_nodes: usize) -> impl Strategy<Value = Vec<(Vec<usize>, u8)>> {
    prop::collection::vec(
        (prop::collection::vec(0usize..64, 0..=3), 1u8..=16),
        1..=max_nodes,
    )
}

/// The judge's policy: the `plan` pass's defaults at `ALIGN`, with or without sharing.
fn policy(sharing: bool) -> PlanPolicy {
    PlanPolicy {
        align: ALIGN,
        sharing,
        ..PlanPolicy::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_scheduler_gives_a_valid_order(spec in dag_spec(14)) {
        let module = parse(&random_tir(&spec));
        let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
        let mut exact_peak = None;
        let mut heuristic_peaks = Vec::new();
        for s in Scheduler::ALL {
            let sched = reorder::schedule(&dag, s, budget(), ALIGN).expect("schedule");
            prop_assert!(dag.is_topological(&sched.order));
            let mut after = module.clone();
            let layout = layout_of(entry(&module), &dag, &sched.order);
            after.entry_mut().expect("main").layout = layout;
            check_reordered(&module, &mut after, &dag, &sched.order, ALIGN);
            reorder::judge_order(entry(&module), &dag, &sched.order, &policy(false))
                .expect("checked plan");
            match &sched.exact {
                Some(e) => exact_peak = Some(e.peak),
                None => heuristic_peaks.push((s, sched.peak)),
            }
        }
        let exact_peak = exact_peak.expect("exact ran");
        for (s, p) in heuristic_peaks {
            prop_assert!(exact_peak <= p, "exact {} > {} {}", exact_peak, s, p);
        }
    }

    #[test]
    fn exact_matches_brute_force_on_tiny_dags(spec in dag_spec(6)) {
        let module = parse(&random_tir(&spec));
        let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
        prop_assume!(dag.len() <= 8);
        let sched = reorder::schedule(&dag, Scheduler::Exact, budget(), ALIGN).expect("schedule");
        let e = sched.exact.expect("exact result");
        prop_assert!(e.proved(), "not proved: {:?}", e.stopped);
        prop_assert_eq!(e.peak, brute_force_peak(&dag));
        prop_assert_eq!(e.peak, dag.peak(&e.order));
    }

    #[test]
    fn the_pass_changes_only_the_layout(spec in dag_spec(12), which in 0usize..6, sharing: bool) {
        let module = parse(&random_tir(&spec));
        let mut after = module.clone();
        let opts = reorder::ReorderOptions {
            search: Search::Scheduler(Scheduler::ALL[which]),
            budget: budget(),
            policy: policy(sharing),
        };
        let r = reorder::reorder(after.entry_mut().expect("main"), &opts).expect("reorder");
        prop_assert!(r.stats.slab_after <= r.stats.slab_before);
        let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
        // Recover the node order from the new layout.
        let pos: std::collections::HashMap<_, _> =
            dag.ops.iter().enumerate().map(|(i, &id)| (id, i)).collect();
        let order: Vec<usize> = entry(&after).layout.iter().filter_map(|id| pos.get(id).copied()).collect();
        check_reordered(&module, &mut after, &dag, &order, ALIGN);
    }
}

/// A diamond of two wide branches: running one branch to completion before the other (a
/// depth-first order) beats Kahn's breadth-first order, and exact finds the depth-first peak.
#[test]
fn exact_beats_kahn_on_a_branchy_graph() {
    // 0 -> {1 -> 3, 2 -> 4} -> 5: the branch heads are big, the tails small.
    let spec = vec![
        (vec![], 2),
        (vec![0], 16),
        (vec![0], 16),
        (vec![1], 1),
        (vec![2], 1),
        (vec![3, 4], 2),
    ];
    let module = parse(&random_tir(&spec));
    let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
    let kahn = reorder::schedule(&dag, Scheduler::Kahn, budget(), ALIGN).expect("kahn");
    let exact = reorder::schedule(&dag, Scheduler::Exact, budget(), ALIGN).expect("exact");
    let e = exact.exact.expect("exact result");
    assert!(e.proved());
    assert_eq!(e.peak, brute_force_peak(&dag));
    assert!(e.peak < kahn.peak, "exact {} kahn {}", e.peak, kahn.peak);
}
