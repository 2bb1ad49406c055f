//! Helpers shared by the planner tests: every plan a test makes goes through the checker here.
#![allow(dead_code)]

pub mod textbook;

use tir_planner::checker::{check_offsets, check_shared_objects};
use tir_planner::{
    plan_offsets, plan_shared_objects, OffsetStrategy, OffsetsPlan, SharedObjectStrategy,
    SharedObjectsPlan, UsageRecord,
};

/// A record in TFLite's argument order: `{size, first_task, last_task}`.
pub fn rec(size: u64, first_op: usize, last_op: usize) -> UsageRecord {
    UsageRecord {
        first_op,
        last_op,
        size,
    }
}

pub fn records(list: &[(u64, usize, usize)]) -> Vec<UsageRecord> {
    list.iter().map(|&(s, f, l)| rec(s, f, l)).collect()
}

/// TFLite's ChainRecords (reference/tflite-memory-tests.md §3).
pub fn chain() -> Vec<UsageRecord> {
    records(&[(16, 0, 1), (8, 1, 2), (64, 2, 3), (32, 3, 4), (8, 4, 5)])
}

/// TFLite's ComplexRecords (reference/tflite-memory-tests.md §4).
pub fn complex() -> Vec<UsageRecord> {
    records(&[
        (32, 0, 1),
        (32, 1, 4),
        (8, 2, 5),
        (16, 3, 5),
        (8, 4, 5),
        (64, 5, 7),
        (8, 6, 8),
        (8, 7, 8),
        (16, 8, 9),
    ])
}

/// Plans offsets and insists the checker accepts the plan.
pub fn offsets(records: &[UsageRecord], strategy: OffsetStrategy, align: u64) -> OffsetsPlan {
    let plan =
        plan_offsets(records, strategy, align).unwrap_or_else(|e| panic!("{strategy} failed: {e}"));
    if let Err(errors) = check_offsets(records, &plan, align) {
        panic!("{strategy} produced an invalid plan {plan:?}: {errors:?}");
    }
    plan
}

/// Plans shared objects and insists the checker accepts the plan, and its offsets form.
pub fn objects(
    records: &[UsageRecord],
    strategy: SharedObjectStrategy,
    align: u64,
) -> SharedObjectsPlan {
    let plan = plan_shared_objects(records, strategy, align)
        .unwrap_or_else(|e| panic!("{strategy} failed: {e}"));
    if let Err(errors) = check_shared_objects(records, &plan) {
        panic!("{strategy} produced an invalid plan {plan:?}: {errors:?}");
    }
    for (&object, r) in plan.object_ids.iter().zip(records) {
        let size = plan.object_sizes[object];
        assert_eq!(
            size % align,
            0,
            "{strategy}: object {object} of size {size} is not aligned"
        );
        assert!(size >= r.size);
    }
    plan
}
