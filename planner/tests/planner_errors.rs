//! Hostile inputs come back as `PlanError`s from every strategy, never as panics.

use tir_planner::{
    align_size, lower_bounds, plan_offsets, plan_shared_objects, OffsetStrategy, PlanError,
    SharedObjectStrategy, UsageRecord, DEFAULT_ALIGNMENT,
};

fn r(size: u64, first_op: usize, last_op: usize) -> UsageRecord {
    UsageRecord {
        first_op,
        last_op,
        size,
    }
}

fn every_strategy(records: &[UsageRecord], align: u64, check: impl Fn(&str, PlanError)) {
    for s in SharedObjectStrategy::ALL
        .into_iter()
        .chain([SharedObjectStrategy::Best])
    {
        match plan_shared_objects(records, s, align) {
            Ok(plan) => panic!("{s} accepted the input: {plan:?}"),
            Err(e) => check(s.name(), e),
        }
    }
    for s in OffsetStrategy::ALL
        .into_iter()
        .chain([OffsetStrategy::Best])
    {
        match plan_offsets(records, s, align) {
            Ok(plan) => panic!("{s} accepted the input: {plan:?}"),
            Err(e) => check(s.name(), e),
        }
    }
}

#[test]
fn align_size_rounds_up_and_checks_overflow() {
    assert_eq!(DEFAULT_ALIGNMENT, 64);
    assert_eq!(align_size(0, 64), Ok(0));
    assert_eq!(align_size(1, 64), Ok(64));
    assert_eq!(align_size(64, 64), Ok(64));
    assert_eq!(align_size(65, 64), Ok(128));
    assert_eq!(align_size(10, 3), Ok(12));
    assert_eq!(align_size(u64::MAX, 1), Ok(u64::MAX));
    assert_eq!(
        align_size(u64::MAX, 64),
        Err(PlanError::AlignmentOverflow {
            size: u64::MAX,
            align: 64
        })
    );
    assert_eq!(align_size(5, 0), Err(PlanError::ZeroAlignment));
}

#[test]
fn inverted_lifetime_is_rejected_by_every_strategy() {
    let records = [r(8, 0, 1), r(8, 5, 2)];
    every_strategy(&records, 8, |name, e| {
        assert_eq!(
            e,
            PlanError::InvalidLifetime {
                record: 1,
                first_op: 5,
                last_op: 2
            },
            "{name}"
        )
    });
    assert!(lower_bounds(&records, 8).is_err());
}

#[test]
fn zero_alignment_is_rejected_by_every_strategy() {
    every_strategy(&[r(8, 0, 1)], 0, |name, e| {
        assert_eq!(e, PlanError::ZeroAlignment, "{name}")
    });
}

#[test]
fn unalignable_size_is_rejected_by_every_strategy() {
    every_strategy(&[r(1, 0, 0), r(u64::MAX, 0, 1)], 64, |name, e| {
        assert_eq!(
            e,
            PlanError::RecordTooLarge {
                record: 1,
                size: u64::MAX,
                align: 64
            },
            "{name}"
        )
    });
}

#[test]
fn slab_overflow_is_an_error_not_a_panic() {
    // Two live-together tensors whose sizes sum past u64: no plan exists.
    let records = [r(u64::MAX / 2 + 1, 0, 1), r(u64::MAX / 2 + 1, 1, 2)];
    every_strategy(&records, 1, |name, e| {
        assert!(matches!(e, PlanError::Overflow { .. }), "{name}: {e}")
    });
}

#[test]
fn huge_operator_indices_are_fine() {
    let records = [
        r(8, usize::MAX - 1, usize::MAX),
        r(8, 0, usize::MAX),
        r(8, 3, 3),
    ];
    for s in OffsetStrategy::ALL {
        let plan = plan_offsets(&records, s, 8).unwrap();
        assert!(plan.total_size >= 16, "{s}");
    }
    for s in SharedObjectStrategy::ALL {
        assert!(
            plan_shared_objects(&records, s, 8).unwrap().cost() >= 16,
            "{s}"
        );
    }
}
