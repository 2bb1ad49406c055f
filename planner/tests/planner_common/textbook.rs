//! Paper Alg. 3 exactly as printed (Pisarchyk & Lee 2020, §5.2): for each tensor, scan *every*
//! placed tensor in offset order, skip those whose lifetimes do not intersect, and keep the
//! smallest gap that fits (lowest offset among equal gaps); without one, go above the highest
//! end seen. Quadratic on purpose: it is the reference the fast placement must match offset for
//! offset (`tests/planner_placement.rs`) and the baseline of `examples/greedy_scaling`.
//! Shares no code with the strategies; tensors of size 0 stay at offset 0 and occupy nothing,
//! as in the planner.
#![allow(dead_code)]

use std::cmp::Reverse;

use tir_planner::{align_size, OffsetsPlan, UsageRecord};

/// The order tensors are placed in.
#[derive(Clone, Copy, Debug)]
pub enum Order {
    /// Size descending, equal sizes in input order (greedy_by_size).
    Size,
    /// Size descending, equal sizes in reverse input order (first_fit: TFLite Micro fills its
    /// sort array from the tail).
    SizeLastFirst,
    /// Lifetime length descending, then size descending, then first operator
    /// (greedy_by_lifetime, PyTorch's `lenCmp`).
    Lifetime,
}

/// Which fitting gap is taken.
#[derive(Clone, Copy, Debug)]
pub enum Fit {
    /// Smallest, lowest among equals (Alg. 3 L.14-17).
    Best,
    /// Lowest (TFLite Micro).
    First,
}

pub fn textbook_offsets(
    records: &[UsageRecord],
    order: Order,
    fit: Fit,
    align: u64,
) -> OffsetsPlan {
    let sizes: Vec<u64> = records
        .iter()
        .map(|r| align_size(r.size, align).expect("size fits when aligned"))
        .collect();
    let mut by: Vec<usize> = (0..records.len()).collect();
    match order {
        Order::Size => by.sort_by_key(|&i| Reverse(records[i].size)),
        Order::SizeLastFirst => {
            by.reverse();
            by.sort_by_key(|&i| Reverse(records[i].size));
        }
        Order::Lifetime => by.sort_by_key(|&i| {
            let r = &records[i];
            (Reverse(r.last_op - r.first_op), Reverse(r.size), r.first_op)
        }),
    }
    let mut offsets = vec![0u64; records.len()];
    let mut total_size = 0u64;
    // Placed tensors ordered by offset (Alg. 3's `ordered_allocated_ids`).
    let mut allocated: Vec<usize> = Vec::new();
    for t in by {
        let size = sizes[t];
        if size == 0 {
            continue;
        }
        let mut prev_offset = 0u64;
        let mut best_offset = None;
        let mut smallest_gap = u64::MAX;
        for &x in &allocated {
            let max_first = records[t].first_op.max(records[x].first_op);
            let min_last = records[t].last_op.min(records[x].last_op);
            if max_first <= min_last {
                if offsets[x] >= prev_offset {
                    let gap = offsets[x] - prev_offset;
                    if gap >= size && gap < smallest_gap {
                        smallest_gap = gap;
                        best_offset = Some(prev_offset);
                        if matches!(fit, Fit::First) {
                            break;
                        }
                    }
                }
                prev_offset = prev_offset.max(offsets[x] + sizes[x]);
            }
        }
        let offset = best_offset.unwrap_or(prev_offset);
        offsets[t] = offset;
        total_size = total_size.max(offset + size);
        let at = allocated.partition_point(|&x| offsets[x] <= offset);
        allocated.insert(at, t);
    }
    OffsetsPlan {
        offsets,
        total_size,
    }
}
