//! `best_offsets_within`: a passed deadline skips exactly the quadratic strategies that could
//! still win and says so, and its plan is the best of the fast ones; no deadline (or one far away) is `best_offsets`,
//! judged against every strategy run on its own. Every plan goes through the checker. Nothing
//! here is timed: a deadline is either already passed or an hour away.

use proptest::prelude::*;
use std::time::{Duration, Instant};
use tir_planner::{
    best_offsets, best_offsets_within, checker::check_offsets, lower_bounds, plan_offsets,
    OffsetStrategy, PlanError, UsageRecord,
};

const ALIGN: u64 = 64;

fn record_sets() -> impl Strategy<Value = Vec<UsageRecord>> {
    let record =
        (0usize..24, 0usize..6, 0u64..5000).prop_map(|(first_op, len, size)| UsageRecord {
            first_op,
            last_op: first_op + len,
            size,
        });
    proptest::collection::vec(record, 1..40)
}

fn rank(s: OffsetStrategy) -> usize {
    OffsetStrategy::ALL
        .iter()
        .position(|&x| x == s)
        .expect("a concrete strategy")
}

/// The smallest slab over `strategies`, each planned on its own and checked; ties go to the
/// earliest, as `best` breaks them.
fn oracle(records: &[UsageRecord], strategies: &[OffsetStrategy]) -> (OffsetStrategy, u64) {
    let mut best: Option<(OffsetStrategy, u64)> = None;
    for &s in strategies {
        let plan = plan_offsets(records, s, ALIGN).expect("plan");
        check_offsets(records, &plan, ALIGN).expect("checker");
        if best.is_none_or(|(_, b)| plan.total_size < b) {
            best = Some((s, plan.total_size));
        }
    }
    best.expect("a strategy")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_passed_deadline_skips_the_quadratic_strategies(records in record_sets()) {
        let best = best_offsets_within(&records, ALIGN, Some(Instant::now())).expect("plan");
        check_offsets(&records, &best.plan, ALIGN).expect("checker");
        let fast: Vec<OffsetStrategy> =
            OffsetStrategy::ALL.into_iter().filter(|s| !s.is_quadratic()).collect();
        let (winner, slab) = oracle(&records, &fast);
        prop_assert_eq!((best.strategy, best.plan.total_size), (winner, slab));
        // A quadratic strategy is needed unless a fast plan met the lower bound and the
        // strategy comes after it in `ALL` (it could at best tie, and ties go to the earlier).
        let bound = lower_bounds(&records, ALIGN).expect("bounds").offsets;
        let needed: Vec<OffsetStrategy> = OffsetStrategy::ALL
            .into_iter()
            .filter(|s| s.is_quadratic() && (slab != bound || rank(*s) < rank(winner)))
            .collect();
        let skipped: Vec<OffsetStrategy> = best.skipped.iter().map(|(s, _)| *s).collect();
        prop_assert_eq!(&skipped, &needed);
        for (s, e) in &best.skipped {
            prop_assert_eq!(e, &PlanError::TimeBudget { strategy: s.name() });
        }
        prop_assert_eq!(best.stopped_by_time(), !needed.is_empty());
    }

    #[test]
    fn without_a_deadline_it_is_best_offsets(records in record_sets()) {
        let unbounded = best_offsets(&records, ALIGN).expect("plan");
        let far = Instant::now() + Duration::from_secs(3600);
        for deadline in [None, Some(far)] {
            let best = best_offsets_within(&records, ALIGN, deadline).expect("plan");
            check_offsets(&records, &best.plan, ALIGN).expect("checker");
            prop_assert!(!best.stopped_by_time());
            prop_assert_eq!(&best, &unbounded);
        }
        prop_assert_eq!(
            (unbounded.strategy, unbounded.plan.total_size),
            oracle(&records, &OffsetStrategy::ALL)
        );
    }
}
