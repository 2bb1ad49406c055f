//! The checker catches broken plans: hand-made ones naming each kind of error, and random
//! plans (mostly broken) judged against an O(n^2) brute force. 6,000 random cases.

use proptest::prelude::*;
use tir_planner::checker::{check_offsets, check_shared_objects, CheckError};
use tir_planner::{OffsetsPlan, SharedObjectsPlan, UsageRecord};

fn r(size: u64, first_op: usize, last_op: usize) -> UsageRecord {
    UsageRecord {
        first_op,
        last_op,
        size,
    }
}

fn offsets(offsets: &[u64], total_size: u64) -> OffsetsPlan {
    OffsetsPlan {
        offsets: offsets.to_vec(),
        total_size,
    }
}

fn objects(ids: &[usize], sizes: &[u64]) -> SharedObjectsPlan {
    SharedObjectsPlan {
        object_ids: ids.to_vec(),
        object_sizes: sizes.to_vec(),
    }
}

#[test]
fn overlapping_live_tensors_are_caught() {
    let rs = [r(64, 0, 2), r(64, 2, 3)];
    assert_eq!(
        check_offsets(&rs, &offsets(&[0, 32], 128), 1),
        Err(vec![CheckError::AddressOverlap {
            first: 0,
            second: 1
        }])
    );
    // Same offset, sharing only the operator where one ends and the other starts.
    assert_eq!(
        check_offsets(&rs, &offsets(&[0, 0], 64), 64),
        Err(vec![CheckError::AddressOverlap {
            first: 0,
            second: 1
        }])
    );
    // The later tensor placed below and reaching into the earlier one.
    assert_eq!(
        check_offsets(&rs, &offsets(&[32, 0], 96), 1),
        Err(vec![CheckError::AddressOverlap {
            first: 0,
            second: 1
        }])
    );
    // Disjoint lifetimes may share addresses; adjacent ranges do not overlap.
    assert_eq!(
        check_offsets(&[r(64, 0, 1), r(64, 2, 3)], &offsets(&[0, 0], 64), 64),
        Ok(())
    );
    assert_eq!(check_offsets(&rs, &offsets(&[0, 64], 128), 64), Ok(()));
}

#[test]
fn overlap_hidden_behind_a_long_range_is_caught() {
    // A big live range, then two small ones inside it: the sweep must not only look at the
    // nearest neighbour.
    let rs = [r(100, 0, 9), r(10, 1, 2), r(10, 3, 4)];
    let errors = check_offsets(&rs, &offsets(&[0, 20, 50], 100), 1).unwrap_err();
    assert!(errors.contains(&CheckError::AddressOverlap {
        first: 0,
        second: 1
    }));
    assert!(errors.contains(&CheckError::AddressOverlap {
        first: 0,
        second: 2
    }));
}

#[test]
fn misaligned_out_of_slab_and_malformed_plans_are_caught() {
    let rs = [r(64, 0, 1), r(64, 2, 3)];
    assert_eq!(
        check_offsets(&rs, &offsets(&[0, 8], 128), 64),
        Err(vec![CheckError::Misaligned {
            record: 1,
            offset: 8,
            align: 64
        }])
    );
    assert_eq!(
        check_offsets(&rs, &offsets(&[0, 64], 100), 64),
        Err(vec![CheckError::OutOfSlab {
            record: 1,
            offset: 64,
            size: 64,
            total_size: 100
        }])
    );
    assert_eq!(
        check_offsets(&rs, &offsets(&[0, u64::MAX - 10], u64::MAX), 1),
        Err(vec![CheckError::OutOfSlab {
            record: 1,
            offset: u64::MAX - 10,
            size: 64,
            total_size: u64::MAX
        }])
    );
    assert_eq!(
        check_offsets(&rs, &offsets(&[0], 64), 64),
        Err(vec![CheckError::LengthMismatch {
            expected: 2,
            found: 1
        }])
    );
    assert_eq!(
        check_offsets(&[r(1, 3, 2)], &offsets(&[0], 64), 64),
        Err(vec![CheckError::InvalidLifetime { record: 0 }])
    );
    assert_eq!(
        check_offsets(&rs, &offsets(&[0, 0], 64), 0),
        Err(vec![CheckError::ZeroAlignment])
    );
}

#[test]
fn broken_shared_objects_are_caught() {
    let rs = [r(64, 0, 2), r(32, 2, 3), r(16, 4, 5)];
    assert_eq!(
        check_shared_objects(&rs, &objects(&[0, 0, 0], &[64])),
        Err(vec![CheckError::SharedObjectConflict {
            first: 0,
            second: 1,
            object: 0
        }])
    );
    assert_eq!(
        check_shared_objects(&rs, &objects(&[0, 1, 1], &[64, 16])),
        Err(vec![CheckError::ObjectTooSmall {
            record: 1,
            object: 1,
            size: 32,
            object_size: 16
        }])
    );
    assert_eq!(
        check_shared_objects(&rs, &objects(&[0, 1, 2], &[64, 32])),
        Err(vec![CheckError::UnknownObject {
            record: 2,
            object: 2,
            objects: 2
        }])
    );
    assert_eq!(
        check_shared_objects(&rs, &objects(&[0, 1, 0], &[u64::MAX, 32])),
        Err(vec![CheckError::CostOverflow])
    );
    assert_eq!(
        check_shared_objects(&rs, &objects(&[0], &[64])),
        Err(vec![CheckError::LengthMismatch {
            expected: 3,
            found: 1
        }])
    );
    assert_eq!(
        check_shared_objects(&rs, &objects(&[0, 1, 0], &[64, 32])),
        Ok(())
    );
    // A long tenant hides a conflict from a short one in between.
    let nested = [r(8, 0, 10), r(8, 1, 2), r(8, 5, 6)];
    let errors = check_shared_objects(&nested, &objects(&[0, 1, 0], &[8, 8])).unwrap_err();
    assert_eq!(
        errors,
        vec![CheckError::SharedObjectConflict {
            first: 0,
            second: 2,
            object: 0
        }]
    );
}

fn brute_offsets_ok(rs: &[UsageRecord], plan: &OffsetsPlan, align: u64) -> bool {
    rs.iter().zip(&plan.offsets).all(|(r, &o)| {
        o % align == 0 && o.checked_add(r.size).is_some_and(|e| e <= plan.total_size)
    }) && (0..rs.len()).all(|i| {
        (0..i).all(|j| {
            let live_together = rs[i].first_op <= rs[j].last_op && rs[j].first_op <= rs[i].last_op;
            let (oi, oj) = (plan.offsets[i], plan.offsets[j]);
            let apart = oi + rs[i].size <= oj || oj + rs[j].size <= oi;
            !live_together || apart || rs[i].size == 0 || rs[j].size == 0
        })
    })
}

fn brute_objects_ok(rs: &[UsageRecord], plan: &SharedObjectsPlan) -> bool {
    rs.iter()
        .zip(&plan.object_ids)
        .all(|(r, &o)| o < plan.object_sizes.len() && r.size <= plan.object_sizes[o])
        && (0..rs.len()).all(|i| {
            (0..i).all(|j| {
                let live_together =
                    rs[i].first_op <= rs[j].last_op && rs[j].first_op <= rs[i].last_op;
                !live_together || plan.object_ids[i] != plan.object_ids[j]
            })
        })
}

fn records() -> impl Strategy<Value = Vec<UsageRecord>> {
    let record = (0usize..12, 0usize..4, 0u64..6).prop_map(|(first_op, len, size)| UsageRecord {
        first_op,
        last_op: first_op + len,
        size: size * 8,
    });
    proptest::collection::vec(record, 1..12)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn offsets_checker_agrees_with_brute_force(
        (rs, raw_offsets, total) in records().prop_flat_map(|rs| {
            let n = rs.len();
            (Just(rs), proptest::collection::vec(0u64..10, n), 0u64..12)
        }),
        align in prop_oneof![Just(1u64), Just(8), Just(16)],
    ) {
        let plan = OffsetsPlan { offsets: raw_offsets.iter().map(|o| o * 8).collect(), total_size: total * 8 };
        let verdict = check_offsets(&rs, &plan, align);
        prop_assert_eq!(verdict.is_ok(), brute_offsets_ok(&rs, &plan, align), "{:?}", verdict);
    }

    #[test]
    fn objects_checker_agrees_with_brute_force(
        (rs, ids, sizes) in records().prop_flat_map(|rs| {
            let n = rs.len();
            (Just(rs), proptest::collection::vec(0usize..5, n), proptest::collection::vec(0u64..48, 0..5))
        }),
    ) {
        let plan = SharedObjectsPlan { object_ids: ids, object_sizes: sizes };
        let verdict = check_shared_objects(&rs, &plan);
        prop_assert_eq!(verdict.is_ok(), brute_objects_ok(&rs, &plan), "{:?}", verdict);
    }

    /// The offsets check counts the sweep into time order when operators are dense and sorts
    /// it when they are sparse: spreading the same lifetimes far apart (a monotone renumbering,
    /// so the same records meet) must give the same errors in the same order.
    #[test]
    fn sparse_operators_give_the_errors_of_dense_ones(
        (rs, raw_offsets, total) in records().prop_flat_map(|rs| {
            let n = rs.len();
            (Just(rs), proptest::collection::vec(0u64..10, n), 0u64..12)
        }),
    ) {
        let plan = OffsetsPlan { offsets: raw_offsets.iter().map(|o| o * 8).collect(), total_size: total * 8 };
        let sparse: Vec<UsageRecord> = rs
            .iter()
            .map(|x| r(x.size, x.first_op * 100_000, x.last_op * 100_000))
            .collect();
        prop_assert_eq!(check_offsets(&sparse, &plan, 8), check_offsets(&rs, &plan, 8));
    }
}

#[test]
fn overlap_among_many_live_ranges_is_caught() {
    // 10,000 records live together, side by side (a live set far deeper than the hand-made
    // cases above), then one more reaching from record 4,999 into record 5,000 at the end of
    // their lives.
    let n = 10_000;
    let mut rs: Vec<UsageRecord> = (0..n).map(|_| r(16, 0, 5)).collect();
    let mut plan: Vec<u64> = (0..n as u64).map(|k| 16 * k).collect();
    assert_eq!(
        check_offsets(&rs, &offsets(&plan, 16 * n as u64), 16),
        Ok(())
    );
    rs.push(r(16, 5, 6));
    plan.push(16 * 4_999 + 8);
    assert_eq!(
        check_offsets(&rs, &offsets(&plan, 16 * n as u64), 8),
        Err(vec![
            CheckError::AddressOverlap {
                first: 4_999,
                second: n
            },
            CheckError::AddressOverlap {
                first: 5_000,
                second: n
            }
        ])
    );
    // Starting one operator later, it meets nobody.
    rs[n] = r(16, 6, 7);
    assert_eq!(
        check_offsets(&rs, &offsets(&plan, 16 * n as u64), 8),
        Ok(())
    );
}

fn many_records() -> impl Strategy<Value = Vec<UsageRecord>> {
    // Up to 1,000 records over 200 operators living up to 120 each: the live set rises to
    // many of the checker's chunks (32 ranges each) and falls back, so the sweep splits
    // its chunks, empties them and joins them again.
    let record =
        (0usize..200, 0usize..120, 1u64..4).prop_map(|(first_op, len, size)| UsageRecord {
            first_op,
            last_op: first_op + len,
            size: size * 16,
        });
    proptest::collection::vec(record, 200..1000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn offsets_checker_agrees_with_brute_force_on_deep_live_sets(
        (rs, moved, onto) in many_records().prop_flat_map(|rs| {
            let n = rs.len();
            (Just(rs), 0..n, 0..n)
        }),
        shift in 0u64..4,
    ) {
        // Every record in its own range (valid), then one moved onto another's range, shifted
        // by 0-3 alignment units: invalid exactly when the two live together and now overlap.
        let mut plan: Vec<u64> = rs
            .iter()
            .scan(0u64, |end, r| {
                let at = *end;
                *end += r.size;
                Some(at)
            })
            .collect();
        let total = rs.iter().map(|r| r.size).sum::<u64>() + 64;
        let valid = OffsetsPlan { offsets: plan.clone(), total_size: total };
        prop_assert_eq!(check_offsets(&rs, &valid, 16), Ok(()));
        plan[moved] = plan[onto] + 16 * shift;
        let plan = OffsetsPlan { offsets: plan, total_size: total };
        let verdict = check_offsets(&rs, &plan, 16);
        prop_assert_eq!(verdict.is_ok(), brute_offsets_ok(&rs, &plan, 16), "{:?}", verdict);
    }
}

#[test]
fn overlaps_are_caught_across_the_live_set_changing_representation() {
    // 300 records live from operator 0 side by side (past the checker's chunk of 32 live
    // ranges, so they split into chunks), 200 of them dying after operator 9 (so the chunks
    // shrink, empty and join), then records overlapping the lowest and the highest live range
    // in each state.
    let mut rs: Vec<UsageRecord> = (0..300)
        .map(|k| r(16, 0, if k < 100 { 100 } else { 9 }))
        .collect();
    let mut plan: Vec<u64> = (0..300).map(|k| 16 * k).collect();
    for (record, offset) in [
        (r(16, 0, 0), 0),             // 300: onto record 0, in the first chunk
        (r(16, 0, 0), 16 * 299),      // 301: onto record 299, in the last chunk
        (r(16, 10, 10), 0),           // 302: onto record 0, after the chunks shrank
        (r(16, 10, 10), 16 * 99),     // 303: onto record 99, after the chunks shrank
        (r(16, 20, 20), 16 * 50 + 8), // 304: across records 50 and 51
    ] {
        rs.push(record);
        plan.push(offset);
    }
    let overlap = |first, second| CheckError::AddressOverlap { first, second };
    assert_eq!(
        check_offsets(&rs, &offsets(&plan, 16 * 300), 8),
        Err(vec![
            overlap(0, 300),
            overlap(299, 301),
            overlap(0, 302),
            overlap(99, 303),
            overlap(50, 304),
            overlap(51, 304),
        ])
    );
}

#[test]
fn overlaps_are_caught_after_live_chunks_join() {
    // 300 records live from operator 0 side by side, entering in offset order, so the
    // checker's live ranges split into chunks of half its chunk size (a full chunk splits in
    // halves); the 40 lowest die after operator 9, so the first chunk falls below a quarter
    // and joins the next, more than once with small chunks. Records overlapping ranges that
    // moved in a join (record 45 with chunks of 32, record 64 with chunks of 128), the lowest
    // live one and the highest must still be caught.
    let mut rs: Vec<UsageRecord> = (0..300)
        .map(|k| r(16, 0, if k < 40 { 9 } else { 100 }))
        .collect();
    let mut plan: Vec<u64> = (0..300).map(|k| 16 * k).collect();
    for offset in [16 * 45, 16 * 64, 16 * 40, 16 * 299] {
        rs.push(r(16, 10, 10)); // 300, 301, 302, 303
        plan.push(offset);
    }
    let overlap = |first, second| CheckError::AddressOverlap { first, second };
    assert_eq!(
        check_offsets(&rs, &offsets(&plan, 16 * 300), 8),
        Err(vec![
            overlap(45, 300),
            overlap(64, 301),
            overlap(40, 302),
            overlap(299, 303)
        ])
    );
}
