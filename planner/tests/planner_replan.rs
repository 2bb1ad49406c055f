//! Incremental re-planning (issue 21, TFLite's `ExecuteAllocations(first_node, last_node)`):
//! every re-plan passes the checker, keeps exactly the unchanged records that live entirely
//! before the change at their previous offsets, and with nothing kept is Alg. 3's full plan.

mod planner_common;

use planner_common::{complex, offsets, rec};
use proptest::prelude::*;
use tir_planner::checker::check_offsets;
use tir_planner::{
    lower_bounds, replan_offsets, OffsetStrategy, OffsetsPlan, PlanError, Replanned, UsageRecord,
};

/// Re-plans and checks every promise of `replan_offsets`.
fn replan(
    previous_records: &[UsageRecord],
    previous: &OffsetsPlan,
    records: &[UsageRecord],
    first_changed_op: usize,
    align: u64,
) -> Replanned {
    let r = replan_offsets(previous_records, previous, records, first_changed_op, align)
        .unwrap_or_else(|e| panic!("replan failed: {e}"));
    if let Err(errors) = check_offsets(records, &r.plan, align) {
        panic!("invalid re-plan {:?}: {errors:?}", r.plan);
    }
    for (i, record) in records.iter().enumerate() {
        let unchanged = previous_records.get(i) == Some(record);
        let expect_kept = unchanged && record.last_op < first_changed_op;
        assert_eq!(r.kept[i], expect_kept, "record {i}");
        if expect_kept {
            assert_eq!(r.plan.offsets[i], previous.offsets[i], "record {i} moved");
        }
    }
    assert!(r.plan.total_size >= lower_bounds(records, align).unwrap().offsets);
    r
}

#[test]
fn nothing_kept_is_the_full_greedy_by_size_plan() {
    let records = complex();
    let previous = offsets(&records, OffsetStrategy::Naive, 1);
    let r = replan(&records, &previous, &records, 0, 1);
    assert_eq!(r.kept_count(), 0);
    assert_eq!(r.plan, offsets(&records, OffsetStrategy::GreedyBySize, 1));
}

#[test]
fn a_size_change_keeps_the_tensors_that_died_before_it() {
    let records = complex();
    let previous = offsets(&records, OffsetStrategy::GreedyBySize, 1);
    // Record 5 (ops 5..=7) grows: records 0 (ops 0..=1) and 1 (ops 1..=4) die before op 5.
    let mut changed = records.clone();
    changed[5].size = 128;
    let r = replan(&records, &previous, &changed, changed[5].first_op, 1);
    assert_eq!(
        r.kept,
        [true, true, false, false, false, false, false, false, false]
    );
    assert!(r.plan.total_size >= 128);
}

#[test]
fn replacing_the_tail_keeps_the_head() {
    // A chain of ten; from op 6 on, the tail becomes three wider tensors.
    let head: Vec<UsageRecord> = (0..6).map(|i| rec(64 * (i as u64 + 1), i, i + 1)).collect();
    let mut records = head.clone();
    records.extend((6..10).map(|i| rec(32, i, i + 1)));
    let previous = offsets(&records, OffsetStrategy::GreedyBySize, 64);
    let mut new_records = head.clone();
    new_records.extend([rec(4096, 6, 8), rec(4096, 7, 9), rec(64, 9, 12)]);
    let r = replan(&records, &previous, &new_records, 6, 64);
    // Records 0..=4 end by op 5; record 5 (ops 5..=6) is live at the change and moves.
    assert_eq!(r.kept_count(), 5);
    assert!(!r.kept[5]);
}

#[test]
fn a_previous_plan_that_does_not_fit_is_an_error() {
    let records = complex();
    let short = OffsetsPlan {
        offsets: vec![0; 3],
        total_size: 64,
    };
    let err = replan_offsets(&records, &short, &records, 4, 1).unwrap_err();
    assert!(
        matches!(err, PlanError::InvalidPreviousPlan { .. }),
        "{err}"
    );
    let previous = offsets(&records, OffsetStrategy::GreedyBySize, 8);
    let mut odd = previous.clone();
    odd.offsets[0] = 4;
    let err = replan_offsets(&records, &odd, &records, 4, 8).unwrap_err();
    assert!(err.to_string().contains("not a multiple of 8"), "{err}");
    // Invalid new records are the planner's usual errors.
    let inverted = [UsageRecord {
        size: 8,
        first_op: 2,
        last_op: 1,
    }];
    let err = replan_offsets(&records, &previous, &inverted, 4, 8).unwrap_err();
    assert!(matches!(err, PlanError::InvalidLifetime { .. }), "{err}");
}

fn arb_records(max: usize) -> impl Strategy<Value = Vec<UsageRecord>> {
    prop::collection::vec((1u64..5000, 0usize..60, 0usize..12), 0..max).prop_map(|v| {
        v.into_iter()
            .map(|(size, first, len)| rec(size, first, first + len))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any previous plan (of any strategy), any change point, sizes changed at random and new
    /// records appended: valid, and exactly the promised records kept in place.
    #[test]
    fn random_changes_keep_the_prefix(
        previous_records in arb_records(60),
        strategy in 0usize..OffsetStrategy::ALL.len(),
        first_changed_op in 0usize..75,
        resize in prop::collection::vec((any::<bool>(), 1u64..5000), 60),
        added in arb_records(20),
        align in prop::sample::select(vec![1u64, 8, 64]),
    ) {
        let strategy = OffsetStrategy::ALL[strategy];
        prop_assume!(!strategy.is_quadratic() || previous_records.len() <= 40);
        let previous = offsets(&previous_records, strategy, align);
        let mut records = previous_records.clone();
        for (r, &(change, size)) in records.iter_mut().zip(&resize) {
            // Only records touching the change are changed, as a caller would report it.
            if change && r.last_op >= first_changed_op {
                r.size = size;
            }
        }
        records.extend(added.into_iter().map(|r| {
            rec(r.size, r.first_op + first_changed_op, r.last_op + first_changed_op)
        }));
        replan(&previous_records, &previous, &records, first_changed_op, align);
    }
}
