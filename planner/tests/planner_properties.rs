//! Random record sets through every strategy: every plan passes the checker, is no better than
//! its lower bound, and `best` is no worse than any strategy. 4,000 cases.
//! The last property uses many records and long lifetimes, so that the offset strategies'
//! placement index takes its path for tensors spanning many start points.

mod planner_common;

use planner_common::{objects, offsets};
use proptest::prelude::*;
use tir_planner::{
    best_offsets, best_shared_objects, lower_bounds, OffsetStrategy, SharedObjectStrategy,
    UsageRecord,
};

/// Record sets mixing the shapes that break planners: equal sizes, zero-length lifetimes
/// (first == last), whole-program lifetimes, zero sizes and one huge tensor.
pub fn record_sets() -> impl Strategy<Value = Vec<UsageRecord>> {
    let ops = 1usize..24;
    (ops, 0usize..4, any::<bool>()).prop_flat_map(|(ops, size_kind, huge)| {
        let size = match size_kind {
            0 => Just(48u64).boxed(),
            1 => (0u64..8).prop_map(|s| s * 16).boxed(),
            _ => (0u64..5000).boxed(),
        };
        let lifetime = prop_oneof![
            3 => (0..ops).prop_flat_map(move |f| (Just(f), f..(f + 4).min(ops))),
            1 => (0..ops).prop_map(|f| (f, f)),
            1 => Just((0, ops - 1)),
            1 => (0..ops).prop_flat_map(move |f| (Just(f), f..ops)),
        ];
        let record = (size, lifetime).prop_map(|(size, (first_op, last_op))| UsageRecord {
            first_op,
            last_op,
            size,
        });
        proptest::collection::vec(record, 0..20).prop_map(move |mut rs| {
            if huge {
                if let Some(r) = rs.first_mut() {
                    r.size = 1 << 40;
                }
            }
            rs
        })
    })
}

fn alignments() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1u64), Just(8), Just(64), Just(48)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1750))]

    #[test]
    fn shared_objects_are_valid_bounded_and_best_is_smallest(
        rs in record_sets(),
        align in alignments(),
    ) {
        let bound = lower_bounds(&rs, align).unwrap().shared_objects;
        let best = best_shared_objects(&rs, align).unwrap();
        prop_assert!(best.skipped.is_empty());
        for strategy in SharedObjectStrategy::ALL {
            let plan = objects(&rs, strategy, align);
            prop_assert!(plan.cost() >= bound, "{} cost {} < bound {}", strategy, plan.cost(), bound);
            prop_assert!(best.plan.cost() <= plan.cost(), "best beaten by {}", strategy);
        }
        let via_entry_point = objects(&rs, SharedObjectStrategy::Best, align);
        prop_assert_eq!(via_entry_point.cost(), best.plan.cost());
    }

    #[test]
    fn offsets_are_valid_bounded_and_best_is_smallest(
        rs in record_sets(),
        align in alignments(),
    ) {
        let bounds = lower_bounds(&rs, align).unwrap();
        prop_assert!(bounds.offsets <= bounds.shared_objects);
        let best = best_offsets(&rs, align).unwrap();
        prop_assert!(best.skipped.is_empty());
        for strategy in OffsetStrategy::ALL {
            let plan = offsets(&rs, strategy, align);
            prop_assert!(plan.total_size >= bounds.offsets,
                "{} total {} < bound {}", strategy, plan.total_size, bounds.offsets);
            prop_assert_eq!(plan.total_size % align, 0);
            prop_assert!(best.plan.total_size <= plan.total_size, "best beaten by {}", strategy);
        }
        let objects_best = offsets(&rs, OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::Best), align);
        prop_assert!(objects_best.total_size >= bounds.shared_objects);
        prop_assert_eq!(offsets(&rs, OffsetStrategy::Best, align).total_size, best.plan.total_size);
    }
}

fn many_long_records() -> impl Strategy<Value = Vec<UsageRecord>> {
    let record =
        (0usize..150, 0usize..6, 0u64..6, 0u64..2000).prop_map(|(first_op, kind, len, size)| {
            let len = if kind == 0 {
                20 + len as usize * 25
            } else {
                len as usize
            };
            UsageRecord {
                first_op,
                last_op: first_op + len,
                size,
            }
        });
    proptest::collection::vec(record, 0..120)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn greedy_offsets_with_long_lifetimes_are_valid(rs in many_long_records()) {
        let bound = lower_bounds(&rs, 16).unwrap().offsets;
        for strategy in [
            OffsetStrategy::GreedyBySize,
            OffsetStrategy::GreedyByBreadth,
            OffsetStrategy::FirstFit,
            OffsetStrategy::GreedyByLifetime,
            OffsetStrategy::StripPackingBestFit,
        ] {
            prop_assert!(offsets(&rs, strategy, 16).total_size >= bound);
        }
    }
}
