//! The placement step shared by the greedy offset strategies: put each tensor, in a given
//! order, into a gap between the already placed tensors that are live at the same time.
//!
//! Paper Alg. 3 (and TFLite, and TFLite Micro) scan *every* placed tensor for each new one,
//! which is quadratic; the TFLite arena-initialisation write-up names this scan as the cost
//! that "can't be reduced" but whose N can. Here the scan only sees tensors whose lifetimes
//! intersect the new one's: placed tensors sit in a segment tree over the timeline keyed by
//! start point, each node holding the latest end below it, so a query descends only into
//! subtrees that contain an intersecting tensor. A placement then costs O((k + 1) log n)
//! plus sorting the k intersecting ranges by offset, which for inference graphs (short
//! lifetimes, a few long ones) is near n log n overall.

use crate::planner::align_size;
use crate::planner::error::overflow;
use crate::planner::items::{Item, Timeline};
use crate::planner::{OffsetsPlan, PlanError};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Smallest gap that fits, lowest offset among equal gaps (paper Alg. 3 L.14-17).
    Best,
    /// Lowest gap that fits (TFLite Micro `GreedyMemoryPlanner`).
    First,
}

/// Places `items` in `order`; items of size 0 occupy nothing and stay at offset 0.
pub(crate) fn place(
    items: &[Item],
    order: &[usize],
    fit: Fit,
    align: u64,
) -> Result<OffsetsPlan, PlanError> {
    let timeline = Timeline::new(items);
    let spans = timeline.spans(items);
    let mut offsets = vec![0u64; items.len()];
    let mut ends = vec![0u64; items.len()];
    let mut placed = TimeIndex::new(timeline.len());
    let mut total_size = 0u64;
    let mut live: Vec<usize> = Vec::new();
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &i in order {
        let item = &items[i];
        if item.size == 0 {
            continue;
        }
        let (lo, hi) = spans[i];
        live.clear();
        placed.intersecting(lo, hi, &mut live);
        ranges.clear();
        ranges.extend(live.iter().map(|&j| (offsets[j], ends[j])));
        ranges.sort_unstable();
        let offset = find_gap(&ranges, item.size, fit, align)?;
        let end = offset
            .checked_add(item.size)
            .ok_or_else(|| overflow("slab size"))?;
        offsets[i] = offset;
        ends[i] = end;
        total_size = total_size.max(end);
        placed.insert(lo, hi, i);
    }
    Ok(OffsetsPlan {
        offsets,
        total_size,
    })
}

/// `ranges` are the `[offset, end)` of the live tensors, sorted by offset; they may overlap
/// each other (they need not be live at the same time as each other). A gap runs from the
/// furthest end seen so far to the next offset; without a fitting gap the tensor goes above
/// everything (Alg. 3 L.19-20).
fn find_gap(ranges: &[(u64, u64)], size: u64, fit: Fit, align: u64) -> Result<u64, PlanError> {
    let mut reached = 0u64;
    let mut best: Option<(u64, u64)> = None;
    for &(offset, end) in ranges {
        let candidate = align_size(reached, align)?;
        if offset >= candidate {
            let gap = offset - candidate;
            if gap >= size {
                match fit {
                    Fit::First => return Ok(candidate),
                    Fit::Best => {
                        if best.is_none_or(|(g, _)| gap < g) {
                            best = Some((gap, candidate));
                        }
                    }
                }
            }
        }
        reached = reached.max(end);
    }
    match best {
        Some((_, offset)) => Ok(offset),
        None => align_size(reached, align),
    }
}

/// Placed tensors by start point, answering "which placed tensors intersect `[lo, hi]`",
/// i.e. start <= hi and end >= lo, in time proportional to the answer.
struct TimeIndex {
    size: usize,
    /// Per node: 1 + the latest end point among its tensors, 0 when empty.
    latest_end: Vec<usize>,
    /// Per start point: its tensors as (end point, id), latest end first.
    starting: Vec<Vec<(usize, usize)>>,
}

impl TimeIndex {
    fn new(points: usize) -> Self {
        let size = points.max(1).next_power_of_two();
        TimeIndex {
            size,
            latest_end: vec![0; 2 * size],
            starting: vec![Vec::new(); points],
        }
    }

    fn insert(&mut self, lo: usize, hi: usize, id: usize) {
        let list = &mut self.starting[lo];
        let at = list.partition_point(|&(end, _)| end >= hi);
        list.insert(at, (hi, id));
        let mut node = self.size + lo;
        self.latest_end[node] = list[0].0 + 1;
        while node > 1 {
            node /= 2;
            self.latest_end[node] = self.latest_end[2 * node].max(self.latest_end[2 * node + 1]);
        }
    }

    fn intersecting(&self, lo: usize, hi: usize, out: &mut Vec<usize>) {
        self.collect(1, 0, lo, hi, out);
    }

    fn collect(&self, node: usize, first: usize, lo: usize, hi: usize, out: &mut Vec<usize>) {
        if first > hi || self.latest_end[node] <= lo {
            return;
        }
        if node >= self.size {
            let list = &self.starting[node - self.size];
            out.extend(
                list.iter()
                    .take_while(|&&(end, _)| end >= lo)
                    .map(|&(_, id)| id),
            );
            return;
        }
        let half = (self.size >> (usize::BITS - 1 - node.leading_zeros())) / 2;
        self.collect(2 * node, first, lo, hi, out);
        self.collect(2 * node + 1, first + half, lo, hi, out);
    }
}
