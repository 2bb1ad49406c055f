//! The `exact` offset strategy: proven optima on small instances (hand-made, the TFLite
//! oracle records, MiniMalloc's example, brute force over every canonical placement), and
//! limits. Every plan goes through the independent checker and is at least the proven bound.

mod planner_common;

use std::path::PathBuf;
use std::time::Duration;

use planner_common::{complex, records};
use proptest::prelude::*;
use tir_planner::checker::check_offsets;
use tir_planner::csv::read_records_csv;
use tir_planner::{
    best_offsets, exact_offsets, lower_bounds, plan_offsets, ExactOptions, ExactPlan,
    OffsetStrategy, UsageRecord,
};

fn exact(records: &[UsageRecord], align: u64, options: ExactOptions) -> ExactPlan {
    let result = exact_offsets(records, align, &options).unwrap_or_else(|e| panic!("{e}"));
    if let Err(errors) = check_offsets(records, &result.plan, align) {
        panic!(
            "exact produced an invalid plan {:?}: {errors:?}",
            result.plan
        );
    }
    let bounds = lower_bounds(records, align).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        result.lower_bound >= bounds.offsets,
        "bound below max breadth"
    );
    assert!(result.plan.total_size >= result.lower_bound);
    assert!(result.plan.total_size <= result.heuristic_size);
    assert_eq!(
        result.optimal,
        result.plan.total_size == result.lower_bound,
        "optimal must mean best == bound"
    );
    result
}

fn solved(records: &[UsageRecord], align: u64) -> ExactPlan {
    exact(
        records,
        align,
        ExactOptions {
            time_limit: Duration::from_secs(60),
            node_limit: u64::MAX,
        },
    )
}

/// The optimum by brute force: every order of the buffers, each placed at the lowest offset
/// where it fits among the buffers already placed that it overlaps in time. Sorting any plan
/// by offset and letting each buffer fall as low as it can gives one of these placements
/// without raising the slab, so their minimum is the optimum. Shares nothing with the planner.
fn brute_force(records: &[UsageRecord], align: u64) -> u64 {
    let sizes: Vec<u64> = records
        .iter()
        .map(|r| r.size.div_ceil(align) * align)
        .collect();
    let n = records.len();
    let mut order: Vec<usize> = (0..n).collect();
    let mut best = u64::MAX;
    permute(&mut order, 0, &mut |order| {
        let mut placed: Vec<(usize, u64)> = Vec::new();
        let mut top = 0u64;
        for &i in order {
            let mut busy: Vec<(u64, u64)> = placed
                .iter()
                .filter(|&&(j, _)| records[j].overlaps_in_time(&records[i]) && sizes[j] > 0)
                .map(|&(j, o)| (o, o + sizes[j]))
                .collect();
            busy.sort_unstable();
            let mut offset = 0u64;
            for (o, e) in busy {
                if o >= offset + sizes[i] {
                    break;
                }
                offset = offset.max(e);
            }
            placed.push((i, offset));
            top = top.max(offset + sizes[i]);
        }
        best = best.min(top);
    });
    best
}

fn permute(v: &mut Vec<usize>, k: usize, f: &mut dyn FnMut(&[usize])) {
    if k == v.len() {
        f(v);
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permute(v, k + 1, f);
        v.swap(k, i);
    }
}

fn shared_csv(name: &str) -> Option<Vec<UsageRecord>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/benchmarks/minimalloc-challenging")
        .join(name);
    let text = std::fs::read_to_string(path).ok()?;
    let rows = read_records_csv(&text, false).unwrap_or_else(|e| panic!("{name}: {e}"));
    Some(rows.into_iter().map(|r| r.record).collect())
}

/// TFLite's ComplexRecords (reference/tflite-memory-tests.md §4): offsets optimum 96.
#[test]
fn complex_records_optimum_is_96() {
    let r = solved(&complex(), 1);
    assert_eq!(r.plan.total_size, 96);
    assert!(r.optimal);
}

/// MiniMalloc's example `input.12.csv` (capacity 12), as inclusive records.
#[test]
fn minimalloc_example_optimum_is_12() {
    let rs = records(&[(4, 0, 2), (4, 3, 8), (4, 0, 8), (4, 9, 20), (4, 0, 20)]);
    let r = solved(&rs, 1);
    assert_eq!(r.plan.total_size, 12);
    assert!(r.optimal);
    if let Some(from_file) = shared_csv("input.12.csv") {
        assert_eq!(from_file, rs);
    }
}

/// Max breadth is 4 at every operator, but the three long-lived buffers cannot all stay put:
/// a 2-byte buffer live at 0-1 and another at 1-2 beside 1-byte ones force 5 (checked
/// against brute force rather than by hand).
#[test]
fn bound_beyond_max_breadth_is_proven() {
    let rs = records(&[
        (2, 0, 1),
        (2, 1, 2),
        (1, 0, 0),
        (1, 2, 2),
        (2, 2, 3),
        (1, 1, 1),
    ]);
    let r = solved(&rs, 1);
    let opt = brute_force(&rs, 1);
    assert_eq!(r.plan.total_size, opt);
    assert!(r.optimal);
    assert_eq!(r.lower_bound, opt);
}

#[test]
fn independent_components_and_degenerate_records() {
    let rs = records(&[
        (64, 0, 1),
        (32, 1, 2),
        (0, 1, 1),
        (16, 5, 5),
        (16, 5, 6),
        (128, 9, 9),
        (0, 10, 10),
    ]);
    let r = solved(&rs, 16);
    assert_eq!(r.plan.total_size, 128);
    assert!(r.optimal);
    let empty = solved(&[], 1);
    assert_eq!(empty.plan.total_size, 0);
    assert!(empty.optimal);
}

#[test]
fn huge_sizes_do_not_overflow() {
    let big = u64::MAX / 4;
    let rs = records(&[(big, 0, 1), (big, 1, 2), (big, 2, 3), (1, 0, 3)]);
    let r = exact(&rs, 1, ExactOptions::default());
    assert!(r.plan.total_size >= 2 * big);
}

#[test]
fn node_limit_zero_returns_the_incumbent() {
    // Greedy by size is not optimal here (found by the proptest below's brute force).
    let rs = records(&[
        (2, 0, 1),
        (2, 1, 2),
        (1, 0, 0),
        (1, 2, 2),
        (2, 2, 3),
        (1, 1, 1),
    ]);
    let best = best_offsets(&rs, 1).unwrap_or_else(|e| panic!("{e}"));
    let r = exact(
        &rs,
        1,
        ExactOptions {
            time_limit: Duration::from_secs(60),
            node_limit: 0,
        },
    );
    assert_eq!(r.plan, best.plan);
    assert_eq!(r.nodes, 0);
    if best.plan.total_size > r.max_breadth {
        assert!(!r.optimal);
    }
}

#[test]
fn limits_are_respected_on_a_challenging_instance() {
    let Some(rs) = shared_csv("A.1048576.csv") else {
        eprintln!("skipped: ../shared/benchmarks not present");
        return;
    };
    let best = best_offsets(&rs, 1).unwrap_or_else(|e| panic!("{e}"));
    let none = exact(
        &rs,
        1,
        ExactOptions {
            time_limit: Duration::from_secs(60),
            node_limit: 0,
        },
    );
    assert_eq!(none.plan, best.plan);
    assert!(!none.optimal, "heuristics do not reach the bound on A");
    let some = exact(
        &rs,
        1,
        ExactOptions {
            time_limit: Duration::from_secs(60),
            node_limit: 2000,
        },
    );
    assert!(some.nodes <= 2000);
    assert!(some.plan.total_size <= best.plan.total_size);
    let timed = exact(
        &rs,
        1,
        ExactOptions {
            time_limit: Duration::ZERO,
            node_limit: u64::MAX,
        },
    );
    assert_eq!(timed.plan, best.plan);
}

#[test]
fn exact_is_a_named_strategy_outside_all() {
    let s: OffsetStrategy = "exact".parse().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s, OffsetStrategy::Exact);
    assert!(!OffsetStrategy::ALL.contains(&OffsetStrategy::Exact));
    let rs = records(&[(32, 0, 1), (32, 1, 4), (8, 2, 5), (16, 3, 5)]);
    let plan = plan_offsets(&rs, OffsetStrategy::Exact, 8).unwrap_or_else(|e| panic!("{e}"));
    assert!(check_offsets(&rs, &plan, 8).is_ok());
}

fn small_instance() -> impl Strategy<Value = Vec<UsageRecord>> {
    prop::collection::vec((1u64..9, 0usize..6, 0usize..4), 1..=7).prop_map(|v| {
        v.into_iter()
            .map(|(size, first, len)| UsageRecord {
                first_op: first,
                last_op: first + len,
                size,
            })
            .collect()
    })
}

/// Instances built from at most three shapes, so that twins (equal lifetime and size) are
/// common: the search places twins in one order only, which must not lose the optimum.
fn twin_instance() -> impl Strategy<Value = Vec<UsageRecord>> {
    (
        prop::collection::vec((1u64..9, 0usize..4, 0usize..3), 1..=3),
        prop::collection::vec((0usize..3, any::<bool>(), 1u64..5, 0usize..5), 2..=7),
    )
        .prop_map(|(shapes, picks)| {
            picks
                .into_iter()
                .map(|(k, twin, size, first)| {
                    if twin {
                        let (size, first, len) = shapes[k % shapes.len()];
                        UsageRecord {
                            first_op: first,
                            last_op: first + len,
                            size,
                        }
                    } else {
                        UsageRecord {
                            first_op: first,
                            last_op: first + k,
                            size,
                        }
                    }
                })
                .collect()
        })
}

/// Twins are placed in one order only, in input order, so in a plan found by the search
/// their offsets rise with their index. Records 0, 9, 10 and 11 are twins; the best heuristic
/// needs 16, the search proves 15 (found among random instances with twins).
#[test]
fn twins_are_placed_in_input_order() {
    let rs = records(&[
        (2, 4, 5),
        (3, 3, 4),
        (1, 2, 2),
        (3, 1, 3),
        (5, 1, 3),
        (2, 1, 2),
        (4, 3, 4),
        (3, 5, 5),
        (3, 5, 6),
        (2, 4, 5),
        (2, 4, 5),
        (2, 4, 5),
    ]);
    let r = solved(&rs, 1);
    assert!(r.optimal);
    assert!(
        r.heuristic_size > r.plan.total_size,
        "the search must find the plan"
    );
    let twins: Vec<u64> = [0, 9, 10, 11].iter().map(|&i| r.plan.offsets[i]).collect();
    assert!(
        twins.windows(2).all(|w| w[0] < w[1]),
        "twin offsets {twins:?}"
    );
}

/// Bad input: one component above the size the search takes on keeps its heuristic plan and
/// the search gives up at once instead of asking capacities until the (hour-long) deadline.
#[test]
fn unsearchable_component_keeps_the_heuristic() {
    let mut shape: Vec<(u64, usize, usize)> = (0..5000)
        .map(|i| ((i * 7919 % 61 + 1) as u64, i, i + 2 + i * 31 % 5))
        .collect();
    shape.push((3, 100, 100));
    let rs = records(&shape);
    let best = best_offsets(&rs, 1).unwrap_or_else(|e| panic!("{e}"));
    let r = exact(
        &rs,
        1,
        ExactOptions {
            time_limit: Duration::from_secs(3600),
            node_limit: u64::MAX,
        },
    );
    assert_eq!(r.unsearched, rs.len());
    assert_eq!(r.nodes, 0);
    assert_eq!(r.plan, best.plan);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn twins_keep_the_optimum(rs in twin_instance(), align in prop::sample::select(vec![1u64, 2])) {
        let r = solved(&rs, align);
        prop_assert!(r.optimal, "not proven on {rs:?}");
        prop_assert_eq!(r.plan.total_size, brute_force(&rs, align), "{:?}", rs);
    }

    #[test]
    fn proven_optimum_matches_brute_force(rs in small_instance(), align in prop::sample::select(vec![1u64, 2, 4])) {
        let r = solved(&rs, align);
        prop_assert!(r.optimal, "not proven on {rs:?}");
        prop_assert_eq!(r.plan.total_size, brute_force(&rs, align), "{:?}", rs);
    }
}
