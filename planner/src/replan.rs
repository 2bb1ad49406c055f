//! Incremental re-planning (issue 21), as TFLite's arena planner re-plans after a change:
//! `ArenaPlanner::ExecuteAllocations(first_node, last_node)` resets the allocations of the
//! tensors that the changed nodes touch and keeps every earlier allocation where it is, then
//! places the reset tensors by size, best fit, around the kept ones.
//!
//! Here the change is given as the first operator it touches, `first_changed_op`: some sizes
//! changed (then it is the smallest `first_op` among the changed records), or the records from
//! operator k on were replaced (then it is k). A record that lives entirely before it
//! (`last_op < first_changed_op`) and is unchanged keeps its offset from the previous plan: no
//! changed record is live at the same time, so its neighbours in memory are still valid. Every
//! other record is placed by paper Alg. 3 (size descending, equal sizes in input order, the
//! smallest gap that fits) among the kept ones and those placed before it. A runtime can
//! thus keep the buffers of the operators already executed (or already bound) and re-plan
//! only the rest; the slab can only be as large as the kept prefix forces, which a full
//! re-plan might beat.

use std::cmp::Reverse;

use crate::items::prepare;
use crate::offsets::placement::{place_around, Fit};
use crate::{OffsetsPlan, PlanError, UsageRecord};

/// A re-planned slab and how much of the previous plan it kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replanned {
    pub plan: OffsetsPlan,
    /// `kept[i]`: record i kept its previous offset.
    pub kept: Vec<bool>,
}

impl Replanned {
    /// How many records kept their previous offset.
    pub fn kept_count(&self) -> usize {
        self.kept.iter().filter(|&&k| k).count()
    }
}

/// Re-plans `records` after a change that touches operators `first_changed_op` and later,
/// keeping the offset `previous` gave every unchanged record that lives entirely before it.
///
/// `previous` must be a valid plan of `previous_records` at `align` (as `plan_offsets` gives);
/// record i of `records` is the same tensor as record i of `previous_records` (indices past
/// the previous records are new tensors). A record counts as unchanged when it is equal to its
/// previous one. With `first_changed_op == 0` nothing is kept and the plan is
/// `plan_offsets(records, GreedyBySize, align)`'s.
pub fn replan_offsets(
    previous_records: &[UsageRecord],
    previous: &OffsetsPlan,
    records: &[UsageRecord],
    first_changed_op: usize,
    align: u64,
) -> Result<Replanned, PlanError> {
    if previous.offsets.len() != previous_records.len() {
        return Err(PlanError::InvalidPreviousPlan {
            reason: format!(
                "{} offsets for {} records",
                previous.offsets.len(),
                previous_records.len()
            ),
        });
    }
    let items = prepare(records, align)?;
    let kept: Vec<bool> = records
        .iter()
        .enumerate()
        .map(|(i, r)| r.last_op < first_changed_op && previous_records.get(i) == Some(r))
        .collect();
    let mut fixed = Vec::new();
    for (i, _) in kept.iter().enumerate().filter(|(_, &k)| k) {
        let offset = previous.offsets[i];
        if !offset.is_multiple_of(align) {
            return Err(PlanError::InvalidPreviousPlan {
                reason: format!("offset {offset} of record {i} is not a multiple of {align}"),
            });
        }
        fixed.push((i, offset));
    }
    // Alg. 3's order over the records to place (as `greedy_by_size`).
    let mut keyed: Vec<(Reverse<u64>, usize)> = items
        .iter()
        .enumerate()
        .filter(|&(i, _)| !kept[i])
        .map(|(i, item)| (Reverse(item.raw_size), i))
        .collect();
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.into_iter().map(|(_, i)| i).collect();
    let plan = place_around(&items, &fixed, &order, Fit::Best, align)?;
    Ok(Replanned { plan, kept })
}
