//! Multi-dimensional shared objects (2D/3D textures): TFLite's own expectations for its
//! `uint2`/`uint3` strategies, the checker catching every way a plan can break, and properties
//! on random records (every plan checked, never below the lower bound).

use proptest::prelude::*;
use tir_planner::checker::{check_shared_objects, check_shared_objects_nd, CheckError};
use tir_planner::multidim::{
    best_shared_objects_nd, lower_bound_nd, plan_shared_objects_nd, volume, SharedObjectsPlanNd,
    UsageRecord2d, UsageRecord3d, UsageRecordNd, STRATEGIES_ND,
};
use tir_planner::{plan_shared_objects, PlanError, SharedObjectStrategy, UsageRecord};

use SharedObjectStrategy::{Equality, GreedyInOrder, Naive};

/// TFLite's `memory_management_test.cc`, `UInt2Records` (lifetimes closed, as there).
fn uint2_records() -> Vec<UsageRecord2d> {
    [
        ([2, 8], 0, 1),
        ([2, 8], 1, 2),
        ([1, 12], 2, 4),
        ([2, 8], 3, 5),
        ([8, 2], 4, 5),
        ([2, 8], 5, 7),
        ([1, 8], 6, 8),
        ([2, 8], 7, 8),
        ([4, 1], 8, 9),
    ]
    .into_iter()
    .map(|(s, f, l)| UsageRecord2d::new(s, f, l))
    .collect()
}

/// TFLite's `UInt3Records`.
fn uint3_records() -> Vec<UsageRecord3d> {
    [
        ([1, 2, 8], 0, 1),
        ([4, 3, 2], 1, 2),
        ([1, 1, 1], 2, 4),
        ([2, 4, 1], 3, 5),
        ([2, 2, 2], 4, 5),
        ([8, 1, 2], 5, 7),
        ([1, 2, 1], 6, 8),
        ([1, 1, 1], 7, 8),
        ([2, 2, 2], 8, 9),
    ]
    .into_iter()
    .map(|(s, f, l)| UsageRecord3d::new(s, f, l))
    .collect()
}

fn planned<const D: usize>(
    records: &[UsageRecordNd<D>],
    strategy: SharedObjectStrategy,
) -> SharedObjectsPlanNd<D> {
    let plan = plan_shared_objects_nd(records, strategy).expect("plan");
    check_shared_objects_nd(records, &plan).expect("valid plan");
    plan
}

#[test]
fn uint2_plans_are_tflites() {
    let records = uint2_records();
    let naive = planned(&records, Naive);
    assert_eq!(naive.object_ids, (0..9).collect::<Vec<_>>());
    assert_eq!(naive.cost(), Some(16 * 6 + 12 + 8 + 4));

    let equality = planned(&records, Equality);
    assert_eq!(equality.object_ids, [0, 1, 2, 0, 3, 1, 4, 0, 5]);
    assert_eq!(
        equality.object_sizes,
        [[2, 8], [2, 8], [1, 12], [8, 2], [1, 8], [4, 1]]
    );

    let in_order = planned(&records, GreedyInOrder);
    assert_eq!(in_order.object_ids, [0, 1, 2, 0, 3, 1, 2, 0, 3]);
    assert_eq!(in_order.object_sizes, [[2, 8], [2, 8], [1, 12], [8, 2]]);
    assert_eq!(in_order.cost(), Some(16 + 16 + 12 + 16));
}

#[test]
fn uint3_plans_are_tflites() {
    let records = uint3_records();
    let equality = planned(&records, Equality);
    assert_eq!(equality.object_ids, [0, 1, 2, 3, 4, 5, 6, 2, 4]);
    assert_eq!(equality.object_sizes.len(), 7);

    let in_order = planned(&records, GreedyInOrder);
    assert_eq!(in_order.object_ids, [0, 1, 0, 2, 1, 3, 2, 0, 1]);
    assert_eq!(
        in_order.object_sizes,
        [[1, 2, 8], [4, 3, 2], [2, 4, 1], [8, 1, 2]]
    );
}

#[test]
fn greedy_in_order_never_grows_an_object() {
    // The second tensor is wider but lower: the 1D strategy would grow the free object; the
    // multi-dimensional one must take a new object instead.
    let records = [
        UsageRecord2d::new([4, 4], 0, 0),
        UsageRecord2d::new([8, 1], 1, 1),
    ];
    let plan = planned(&records, GreedyInOrder);
    assert_eq!(plan.object_ids, [0, 1]);
    assert_eq!(plan.object_sizes, [[4, 4], [8, 1]]);
}

#[test]
fn greedy_in_order_takes_the_least_waste_then_the_first_freed() {
    // Three free objects cover the last tensor [2, 2]: [4, 4] wastes 12 elements, [3, 2] and
    // [2, 3] waste 2 each; [3, 2] was freed first (its last operator is earlier).
    let records = [
        UsageRecord2d::new([4, 4], 0, 2),
        UsageRecord2d::new([2, 3], 0, 1),
        UsageRecord2d::new([3, 2], 0, 0),
        UsageRecord2d::new([2, 2], 3, 3),
    ];
    let plan = planned(&records, GreedyInOrder);
    assert_eq!(plan.object_ids[3], 2);
}

#[test]
fn equality_takes_the_lowest_free_id() {
    let records = [
        UsageRecord2d::new([2, 2], 0, 0),
        UsageRecord2d::new([2, 2], 0, 1),
        UsageRecord2d::new([2, 2], 2, 2),
    ];
    // Both objects are free at operator 2; TFLite's scan over objects stops at object 0,
    // where the 1D (hashed) strategy takes object 1, the last freed.
    assert_eq!(planned(&records, Equality).object_ids, [0, 1, 0]);
    let bytes: Vec<UsageRecord> = records
        .iter()
        .map(|r| UsageRecord::new(4, r.first_op, r.last_op))
        .collect();
    assert_eq!(
        plan_shared_objects(&bytes, Equality, 1).unwrap().object_ids,
        [0, 1, 1]
    );
}

#[test]
fn strategies_tflite_does_not_define_are_refused() {
    let records = uint2_records();
    for s in [
        SharedObjectStrategy::GreedyByBreadth,
        SharedObjectStrategy::GreedyBySize,
        SharedObjectStrategy::GreedyBySizeImproved,
        SharedObjectStrategy::MinCostFlow,
    ] {
        assert_eq!(
            plan_shared_objects_nd(&records, s),
            Err(PlanError::UnsupportedDimensions {
                strategy: s.name(),
                dims: 2
            })
        );
    }
}

#[test]
fn best_is_the_cheapest_of_the_three() {
    let records = uint2_records();
    let best = best_shared_objects_nd(&records).unwrap();
    assert_eq!(best.strategy, GreedyInOrder);
    assert_eq!(best.plan, planned(&records, GreedyInOrder));
    assert_eq!(
        plan_shared_objects_nd(&records, SharedObjectStrategy::Best).unwrap(),
        best.plan
    );
}

#[test]
fn lower_bound_is_the_positional_maxima_of_volumes() {
    // Live sets by operator (volumes): {16}, {16, 16}, {16, 12}, {12, 16}, {12, 16, 16},
    // {16, 16, 16}, {16, 8}, {16, 8, 16}, {8, 16, 4}, {4}: positional maxima 16, 16, 16.
    assert_eq!(lower_bound_nd(&uint2_records()), Ok(48));
    // A chain: one object of the largest volume would do if it could change shape.
    let chain = [
        UsageRecord2d::new([4, 4], 0, 0),
        UsageRecord2d::new([8, 1], 1, 1),
    ];
    assert_eq!(lower_bound_nd(&chain), Ok(16));
    assert_eq!(lower_bound_nd::<2>(&[]), Ok(0));
}

#[test]
fn bad_records_are_errors_not_panics() {
    let backwards = [UsageRecordNd {
        first_op: 3,
        last_op: 1,
        size: [1, 1],
    }];
    assert!(matches!(
        plan_shared_objects_nd(&backwards, Naive),
        Err(PlanError::InvalidLifetime { record: 0, .. })
    ));
    let huge = [UsageRecord2d::new([u64::MAX, 2], 0, 0)];
    assert!(matches!(
        plan_shared_objects_nd(&huge, GreedyInOrder),
        Err(PlanError::Overflow { .. })
    ));
    assert!(matches!(
        lower_bound_nd(&huge),
        Err(PlanError::Overflow { .. })
    ));
}

// ---- the checker ----------------------------------------------------------------------------

#[test]
fn checker_refuses_an_object_that_does_not_cover() {
    let records = [UsageRecord2d::new([4, 1], 0, 0)];
    let plan = SharedObjectsPlanNd {
        object_ids: vec![0],
        object_sizes: vec![[2, 2]],
    };
    assert_eq!(
        check_shared_objects_nd(&records, &plan),
        Err(vec![CheckError::ObjectDoesNotCover {
            record: 0,
            object: 0,
            size: vec![4, 1],
            object_size: vec![2, 2],
        }])
    );
}

#[test]
fn checker_refuses_an_object_larger_than_its_tensors() {
    let records = [
        UsageRecord2d::new([4, 1], 0, 0),
        UsageRecord2d::new([1, 4], 1, 1),
    ];
    let plan = SharedObjectsPlanNd {
        object_ids: vec![0, 0],
        object_sizes: vec![[4, 5], [9, 9]],
    };
    assert_eq!(
        check_shared_objects_nd(&records, &plan),
        Err(vec![
            CheckError::ObjectNotTight {
                object: 0,
                size: vec![4, 5],
                tight: vec![4, 4],
            },
            // An object no tensor uses is all waste.
            CheckError::ObjectNotTight {
                object: 1,
                size: vec![9, 9],
                tight: vec![0, 0],
            },
        ])
    );
}

#[test]
fn checker_refuses_tensors_sharing_an_object_at_once() {
    let records = [
        UsageRecord3d::new([1, 1, 1], 0, 2),
        UsageRecord3d::new([1, 1, 1], 2, 3),
    ];
    let plan = SharedObjectsPlanNd {
        object_ids: vec![0, 0],
        object_sizes: vec![[1, 1, 1]],
    };
    assert_eq!(
        check_shared_objects_nd(&records, &plan),
        Err(vec![CheckError::SharedObjectConflict {
            first: 0,
            second: 1,
            object: 0
        }])
    );
}

#[test]
fn checker_refuses_unknown_objects_lengths_and_overflowing_costs() {
    let records = [UsageRecord2d::new([1, 1], 0, 0)];
    let unknown = SharedObjectsPlanNd {
        object_ids: vec![3],
        object_sizes: vec![],
    };
    assert_eq!(
        check_shared_objects_nd(&records, &unknown),
        Err(vec![CheckError::UnknownObject {
            record: 0,
            object: 3,
            objects: 0
        }])
    );
    let short = SharedObjectsPlanNd::<2>::default();
    assert!(matches!(
        check_shared_objects_nd(&records, &short).unwrap_err()[..],
        [CheckError::LengthMismatch { .. }]
    ));
    let huge = [UsageRecord2d::new([u64::MAX, 2], 0, 0)];
    let plan = SharedObjectsPlanNd {
        object_ids: vec![0],
        object_sizes: vec![[u64::MAX, 2]],
    };
    assert_eq!(
        check_shared_objects_nd(&huge, &plan),
        Err(vec![CheckError::CostOverflow])
    );
}

// ---- properties -----------------------------------------------------------------------------

fn records_2d() -> impl Strategy<Value = Vec<UsageRecord2d>> {
    let record = (0usize..30, 0usize..8, 1u64..6, 1u64..6)
        .prop_map(|(first, len, w, h)| UsageRecord2d::new([w, h], first, first + len));
    proptest::collection::vec(record, 0..40)
}

fn records_3d() -> impl Strategy<Value = Vec<UsageRecord3d>> {
    let record = (0usize..30, 0usize..8, 1u64..4, 1u64..4, 1u64..4)
        .prop_map(|(first, len, w, h, d)| UsageRecord3d::new([w, h, d], first, first + len));
    proptest::collection::vec(record, 0..40)
}

/// Every strategy's plan passes the checker, costs at least the bound, and no more than
/// one object per tensor.
fn every_plan_is_valid<const D: usize>(records: &[UsageRecordNd<D>]) -> Result<(), TestCaseError> {
    let bound = lower_bound_nd(records).unwrap();
    let naive: u64 = records.iter().map(|r| volume(&r.size).unwrap()).sum();
    for s in STRATEGIES_ND
        .into_iter()
        .chain([SharedObjectStrategy::Best])
    {
        let plan = plan_shared_objects_nd(records, s).unwrap();
        prop_assert_eq!(check_shared_objects_nd(records, &plan), Ok(()), "{}", s);
        let cost = plan.cost().unwrap();
        prop_assert!(bound <= cost, "{s}: {cost} < bound {bound}");
        prop_assert!(cost <= naive, "{s}: {cost} > naive {naive}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn every_2d_plan_is_valid_and_above_the_bound(records in records_2d()) {
        every_plan_is_valid(&records)?;
    }

    #[test]
    fn every_3d_plan_is_valid_and_above_the_bound(records in records_3d()) {
        every_plan_is_valid(&records)?;
    }

    /// With one dimension only (h = 1), equality creates as many objects of each size as the
    /// 1D strategy does (which free object of a size it takes does not change how many exist),
    /// and the bound is the 1D one.
    #[test]
    fn one_dimensional_textures_agree_with_the_1d_planner(records in records_2d()) {
        let flat: Vec<UsageRecord2d> = records
            .iter()
            .map(|r| UsageRecord2d::new([r.size[0], 1], r.first_op, r.last_op))
            .collect();
        let bytes: Vec<UsageRecord> = records
            .iter()
            .map(|r| UsageRecord::new(r.size[0], r.first_op, r.last_op))
            .collect();
        let nd = plan_shared_objects_nd(&flat, Equality).unwrap();
        let one = plan_shared_objects(&bytes, Equality, 1).unwrap();
        prop_assert!(check_shared_objects(&bytes, &one).is_ok());
        prop_assert_eq!(nd.cost(), Some(one.cost()));
        let bound = tir_planner::lower_bounds(&bytes, 1).unwrap().shared_objects;
        prop_assert_eq!(lower_bound_nd(&flat), Ok(bound));
    }

    /// The checker against its definition, pair by pair: merging two tensors' objects is
    /// refused exactly when their lifetimes meet.
    #[test]
    fn checker_sees_every_time_conflict(
        records in records_2d().prop_filter("two records", |r| r.len() >= 2),
        a in any::<proptest::sample::Index>(),
        b in any::<proptest::sample::Index>(),
    ) {
        let (a, b) = (a.index(records.len()), b.index(records.len()));
        prop_assume!(a != b);
        let mut plan = plan_shared_objects_nd(&records, Naive).unwrap();
        plan.object_ids[b] = plan.object_ids[a];
        // Keep the object tight so only the time conflict can be wrong.
        let (ra, rb) = (records[a].size, records[b].size);
        plan.object_sizes[a] = [ra[0].max(rb[0]), ra[1].max(rb[1])];
        plan.object_sizes[b] = [0, 0];
        let meet = records[a].first_op <= records[b].last_op
            && records[b].first_op <= records[a].last_op;
        let errors = check_shared_objects_nd(&records, &plan).err().unwrap_or_default();
        let conflict = errors
            .iter()
            .any(|e| matches!(e, CheckError::SharedObjectConflict { .. }));
        prop_assert_eq!(conflict, meet, "{:?}", errors);
    }
}
