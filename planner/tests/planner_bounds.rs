//! Profiles, breadths, positional maxima and lower bounds against a brute force that sorts
//! every operator's profile, plus the paper's Fig. 2 numbers. 2,000 cases.

use proptest::prelude::*;
use tir_planner::{
    lower_bounds, operator_breadths, operator_profiles, positional_maxima, LowerBounds, PlanError,
    UsageRecord, MAX_TABULATED_OPERATORS,
};

fn align_up(size: u64, align: u64) -> u64 {
    size.div_ceil(align) * align
}

/// Sorted profile sizes of every operator, by definition (paper §3).
fn brute_profiles(rs: &[UsageRecord], align: u64) -> Vec<Vec<u64>> {
    let ops = rs.iter().map(|r| r.last_op + 1).max().unwrap_or(0);
    (0..ops)
        .map(|op| {
            let mut sizes: Vec<u64> = rs
                .iter()
                .filter(|r| r.first_op <= op && op <= r.last_op)
                .map(|r| align_up(r.size, align))
                .collect();
            sizes.sort_unstable_by(|a, b| b.cmp(a));
            sizes
        })
        .collect()
}

fn records() -> impl Strategy<Value = Vec<UsageRecord>> {
    let record = (0usize..30, 0usize..8, 0u64..300).prop_map(|(first_op, len, size)| UsageRecord {
        first_op,
        last_op: first_op + len,
        size,
    });
    proptest::collection::vec(record, 0..25)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn bounds_match_brute_force(rs in records(), align in prop_oneof![Just(1u64), Just(16), Just(100)]) {
        let profiles = brute_profiles(&rs, align);
        let breadths: Vec<u64> = profiles.iter().map(|p| p.iter().sum()).collect();
        let width = profiles.iter().map(Vec::len).max().unwrap_or(0);
        let maxima: Vec<u64> = (0..width)
            .map(|i| profiles.iter().filter_map(|p| p.get(i).copied()).max().unwrap_or(0))
            .collect();
        prop_assert_eq!(operator_breadths(&rs, align).unwrap(), breadths.clone());
        prop_assert_eq!(positional_maxima(&rs, align).unwrap(), maxima.clone());
        prop_assert_eq!(
            lower_bounds(&rs, align).unwrap(),
            LowerBounds {
                offsets: breadths.iter().copied().max().unwrap_or(0),
                shared_objects: maxima.iter().sum(),
            }
        );
        let tabulated = operator_profiles(&rs, align).unwrap();
        for (profile, sizes) in tabulated.iter().zip(&profiles) {
            let got: Vec<u64> = profile.records.iter().map(|&i| align_up(rs[i].size, align)).collect();
            prop_assert_eq!(&got, sizes);
            prop_assert_eq!(profile.breadth, sizes.iter().sum::<u64>());
        }
    }
}

/// Records over hundreds of points, short and long, so that the bounds' trees have many
/// levels above their leaf blocks.
fn spread_records() -> impl Strategy<Value = Vec<UsageRecord>> {
    let record = (0usize..700, prop_oneof![0usize..40, 0usize..400], 1u64..50).prop_map(
        |(first_op, len, size)| UsageRecord {
            first_op,
            last_op: first_op + len,
            size,
        },
    );
    proptest::collection::vec(record, 0..300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn bounds_over_many_points_match_brute_force(rs in spread_records()) {
        let profiles = brute_profiles(&rs, 1);
        let width = profiles.iter().map(Vec::len).max().unwrap_or(0);
        let maxima: Vec<u64> = (0..width)
            .map(|i| profiles.iter().filter_map(|p| p.get(i).copied()).max().unwrap_or(0))
            .collect();
        let breadth = profiles.iter().map(|p| p.iter().sum::<u64>()).max().unwrap_or(0);
        prop_assert_eq!(positional_maxima(&rs, 1).unwrap(), maxima.clone());
        prop_assert_eq!(
            lower_bounds(&rs, 1).unwrap(),
            LowerBounds { offsets: breadth, shared_objects: maxima.iter().sum() }
        );
    }
}

/// Paper Fig. 2: operator #3 has breadth 36 + 28 + 16 = 80, and the third positional maximum
/// is max(16, 16, 16, 10) = 16. The figure's records are not in the text; these are a set
/// with the same profiles at those operators.
#[test]
fn paper_definitions_on_a_small_example() {
    let r = |size, first_op, last_op| UsageRecord {
        first_op,
        last_op,
        size,
    };
    let rs = [
        r(36, 2, 3),
        r(28, 3, 4),
        r(16, 3, 3),
        r(16, 0, 1),
        r(10, 4, 4),
    ];
    let breadths = operator_breadths(&rs, 1).unwrap();
    assert_eq!(breadths[3], 80);
    assert_eq!(positional_maxima(&rs, 1).unwrap(), vec![36, 28, 16]);
}

#[test]
fn bounds_do_not_tabulate_operators() {
    // Operator indices as large as the benchmark CSVs' and beyond: the bounds stay exact...
    let r = |size, first_op, last_op| UsageRecord {
        first_op,
        last_op,
        size,
    };
    let rs = [
        r(10, 0, usize::MAX - 1),
        r(20, usize::MAX / 2, usize::MAX - 1),
        r(5, 7, 9),
    ];
    assert_eq!(
        lower_bounds(&rs, 1),
        Ok(LowerBounds {
            offsets: 30,
            shared_objects: 30
        })
    );
    assert_eq!(positional_maxima(&rs, 1), Ok(vec![20, 10]));
    // ...while the per-operator tables refuse instead of allocating.
    assert!(matches!(
        operator_breadths(&rs, 1),
        Err(PlanError::TooManyOperators {
            limit: MAX_TABULATED_OPERATORS,
            ..
        })
    ));
}

#[test]
fn bounds_scale_to_a_million_records() {
    // A chain of a million tensors plus a long-lived one: the sweep must not be quadratic
    // (a test never times anything; this one would simply not finish).
    let mut rs: Vec<UsageRecord> = (0..1_000_000)
        .map(|i| UsageRecord {
            first_op: i,
            last_op: i + 1,
            size: 64,
        })
        .collect();
    rs.push(UsageRecord {
        first_op: 0,
        last_op: 1_000_000,
        size: 1 << 20,
    });
    let bounds = lower_bounds(&rs, 64).unwrap();
    assert_eq!(bounds.offsets, (1 << 20) + 128);
    assert_eq!(bounds.shared_objects, (1 << 20) + 128);
}

#[test]
fn bound_overflow_is_an_error() {
    let r = |size, first_op, last_op| UsageRecord {
        first_op,
        last_op,
        size,
    };
    let rs = [r(u64::MAX - 63, 0, 1), r(u64::MAX - 63, 1, 2)];
    assert!(matches!(
        lower_bounds(&rs, 64),
        Err(PlanError::Overflow { .. })
    ));
}
