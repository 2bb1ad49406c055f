//! The placement of greedy_by_size before the start-block tree and the coalesced unions
//! (commit 6f884f0, `passes/src/planner/offsets/placement.rs`): start-point buckets and a
//! stabbing tree for long tensors, but every intersecting tensor read and sorted on each
//! placement. Kept verbatim but for the crate-private types, as the "old" column of the
//! scaling table.

use std::cmp::Reverse;

use tir_planner::{align_size, OffsetsPlan, PlanError, UsageRecord};

#[derive(Clone, Copy)]
struct Item {
    first_op: usize,
    last_op: usize,
    size: u64,
}

struct Timeline {
    points: Vec<usize>,
}

impl Timeline {
    fn new(items: &[Item]) -> Self {
        let mut points: Vec<usize> = items.iter().map(|i| i.first_op).collect();
        points.sort_unstable();
        points.dedup();
        Timeline { points }
    }

    fn len(&self) -> usize {
        self.points.len()
    }

    fn spans(&self, items: &[Item]) -> Vec<(usize, usize)> {
        items
            .iter()
            .map(|item| {
                let lo = self.points.partition_point(|&p| p < item.first_op);
                let hi = self
                    .points
                    .partition_point(|&p| p <= item.last_op)
                    .saturating_sub(1);
                (lo, hi.max(lo))
            })
            .collect()
    }
}

fn overflow(_: &str) -> PlanError {
    PlanError::Internal("overflow")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fit {
    Best,
}

const SHORT_SPAN: usize = 16;

/// greedy_by_size as it was: size descending, best fit.
pub fn greedy_by_size(records: &[UsageRecord], align: u64) -> Result<OffsetsPlan, PlanError> {
    let items: Vec<Item> = records
        .iter()
        .map(|r| {
            Ok(Item {
                first_op: r.first_op,
                last_op: r.last_op,
                size: align_size(r.size, align)?,
            })
        })
        .collect::<Result<_, PlanError>>()?;
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| Reverse(records[i].size));
    place(&items, &order, Fit::Best, align)
}

/// Places `items` in `order`; items of size 0 occupy nothing and stay at offset 0.
fn place(items: &[Item], order: &[usize], fit: Fit, align: u64) -> Result<OffsetsPlan, PlanError> {
    let timeline = Timeline::new(items);
    let spans = timeline.spans(items);
    let mut index = TimeIndex::new(items, &spans, timeline.len());
    let mut offsets = vec![0u64; items.len()];
    let mut total_size = 0u64;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &i in order {
        let item = &items[i];
        if item.size == 0 {
            continue;
        }
        ranges.clear();
        index.intersecting(spans[i], &mut ranges);
        ranges.sort_unstable();
        let offset = find_gap(&ranges, item.size, fit, align)?;
        let end = offset
            .checked_add(item.size)
            .ok_or_else(|| overflow("slab size"))?;
        offsets[i] = offset;
        total_size = total_size.max(end);
        index.place(i, offset, end);
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

/// One tensor in the start-point buckets: its last point and, once placed, its range.
#[derive(Clone, Copy)]
struct Slot {
    lo: usize,
    hi: usize,
    offset: u64,
    end: u64,
    placed: bool,
}

/// Which placed tensors intersect a span, i.e. start <= hi and end >= lo.
struct TimeIndex {
    /// Tensors sorted by start point; `bucket[p]..bucket[p + 1]` start at point p.
    slots: Vec<Slot>,
    bucket: Vec<usize>,
    slot_of: Vec<usize>,
    /// Static segment tree over points: node `v` lists (as slot indices) the long tensors
    /// whose span covers v's whole range but not its parent's; `nodes[v]..nodes[v + 1]`.
    size: usize,
    nodes: Vec<usize>,
    long: Vec<usize>,
}

impl TimeIndex {
    fn new(items: &[Item], spans: &[(usize, usize)], points: usize) -> Self {
        let mut by_start: Vec<usize> = (0..items.len()).collect();
        by_start.sort_by_key(|&i| spans[i].0);
        let mut bucket = vec![0usize; points + 1];
        for &(lo, _) in spans {
            bucket[lo + 1] += 1;
        }
        for p in 0..points {
            bucket[p + 1] += bucket[p];
        }
        let mut slot_of = vec![0usize; items.len()];
        let slots = by_start
            .iter()
            .enumerate()
            .map(|(slot, &i)| {
                slot_of[i] = slot;
                let (lo, hi) = spans[i];
                Slot {
                    lo,
                    hi,
                    offset: 0,
                    end: 0,
                    placed: false,
                }
            })
            .collect::<Vec<_>>();

        let size = points.max(1).next_power_of_two();
        let mut per_node: Vec<(usize, usize)> = Vec::new();
        for (slot, s) in slots.iter().enumerate() {
            if s.hi - s.lo > SHORT_SPAN {
                // Canonical cover of [lo, hi] by tree nodes, bottom-up.
                let (mut l, mut r) = (s.lo + size, s.hi + size + 1);
                while l < r {
                    if l & 1 == 1 {
                        per_node.push((l, slot));
                        l += 1;
                    }
                    if r & 1 == 1 {
                        r -= 1;
                        per_node.push((r, slot));
                    }
                    l /= 2;
                    r /= 2;
                }
            }
        }
        per_node.sort_unstable();
        let mut nodes = vec![0usize; 2 * size + 1];
        for &(node, _) in &per_node {
            nodes[node + 1] += 1;
        }
        for v in 0..2 * size {
            nodes[v + 1] += nodes[v];
        }
        let long = per_node.into_iter().map(|(_, slot)| slot).collect();
        TimeIndex {
            slots,
            bucket,
            slot_of,
            size,
            nodes,
            long,
        }
    }

    fn place(&mut self, item: usize, offset: u64, end: u64) {
        let slot = &mut self.slots[self.slot_of[item]];
        slot.offset = offset;
        slot.end = end;
        slot.placed = true;
    }

    fn intersecting(&self, (lo, hi): (usize, usize), out: &mut Vec<(u64, u64)>) {
        // Everything starting in [lo - SHORT_SPAN, hi]: all short tensors that can intersect.
        let window = lo.saturating_sub(SHORT_SPAN);
        for s in &self.slots[self.bucket[window]..self.bucket[hi + 1]] {
            if s.placed && s.hi >= lo {
                out.push((s.offset, s.end));
            }
        }
        // Long tensors starting before the window that are live at `lo`.
        let mut node = lo + self.size;
        while node >= 1 {
            for &slot in &self.long[self.nodes[node]..self.nodes[node + 1]] {
                let s = &self.slots[slot];
                if s.placed && s.lo < window {
                    out.push((s.offset, s.end));
                }
            }
            node /= 2;
        }
    }
}
