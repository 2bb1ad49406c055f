//! The placement step shared by the greedy offset strategies: put each tensor, in a given
//! order, into a gap between the already placed tensors that are live at the same time.
//!
//! Paper Alg. 3 (and TFLite, and TFLite Micro) scan *every* placed tensor for each new one,
//! which is quadratic; the TFLite arena-initialisation write-up names this scan as the cost
//! that "can't be reduced" but whose N can. Two observations make it near n log n here while
//! giving exactly Alg. 3's offsets:
//!
//! 1. Only tensors whose lifetimes intersect the new one matter, and Alg. 3's gaps depend only
//!    on the *union* of their address ranges: a gap runs from the furthest end seen so far to
//!    the next offset, so a range contained in the union of others, or a duplicate, changes no
//!    gap. [`find_gap`] therefore gives the same answer on any list of ranges with that union,
//!    in particular on pre-merged ("coalesced") ones.
//! 2. Those tensors are the ones *starting* inside the new span `[lo, hi]` plus the ones live
//!    at `lo` that started earlier (a stabbing query at `lo`).
//!
//! All tensors are bucketed by start point up front, in one flat array that also carries each
//! tensor's placed range. A *short* tensor (spanning at most [`SHORT_SPAN`] points) is live at
//! `lo` only if it starts in `[lo - SHORT_SPAN, lo]`, so for a short query everything is one
//! contiguous scan. The *long* tensors live at `lo` are found on a static segment tree over
//! the points, whose nodes keep the coalesced union of their placed long tensors, merged in
//! as each is placed. A *long*
//! query (spanning more than [`LONG_QUERY`] points, e.g. a whole-program tensor of an idealloc
//! trace, which intersects every other tensor) takes the tensors starting inside its span from
//! a second segment tree over blocks of [`BLOCK`] start points, whose nodes keep the coalesced
//! union of the placed tensors starting there. That tree refreshes a node's union lazily, only
//! when a query reads it after a placement below it made it stale, so record sets whose
//! queries are all short (chains) never pay for it.
//!
//! A placement thus costs O(SHORT_SPAN + log n) reads plus the sizes of the O(log n) unions it
//! reads, instead of the number of intersecting tensors; on inference graphs and the public
//! traces the unions stay small because live tensors pack memory densely.

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

/// Tensors spanning more timeline points than this are *long*; see the module comment.
const SHORT_SPAN: usize = 16;

/// Queries spanning more points than this read the start-block tree instead of scanning.
const LONG_QUERY: usize = 64;

/// Start points per leaf of the start-block tree.
const BLOCK: usize = 16;

/// Places `items` in `order`; items of size 0 occupy nothing and stay at offset 0.
pub(crate) fn place(
    items: &[Item],
    order: &[usize],
    fit: Fit,
    align: u64,
) -> Result<OffsetsPlan, PlanError> {
    let timeline = Timeline::new(items);
    let spans = timeline.spans(items);
    let mut index = TimeIndex::new(items, &spans, timeline.len());
    let mut offsets = vec![0u64; items.len()];
    let mut total_size = 0u64;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    // Gathered up front in one independent pass (whose cache misses overlap), so that the
    // placement loop, where each step waits for the last, reads them sequentially.
    let sequence: Vec<(usize, usize)> = order
        .iter()
        .filter(|&&i| items[i].size > 0)
        .map(|&i| (i, index.slot_of[i]))
        .collect();
    for (i, slot) in sequence {
        let item = &items[i];
        ranges.clear();
        index.intersecting(index.span(slot), &mut ranges);
        // Long lists arrive as a few already sorted runs (the unions), which the standard
        // library's run-detecting stable sort merges in near-linear time; short ones sort
        // faster unstably.
        if ranges.len() > 64 {
            ranges.sort();
        } else {
            ranges.sort_unstable();
        }
        let offset = find_gap(&ranges, item.size, fit, align)?;
        let end = offset
            .checked_add(item.size)
            .ok_or_else(|| overflow("slab size"))?;
        offsets[i] = offset;
        total_size = total_size.max(end);
        index.place(slot, offset, end);
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

/// One tensor in the start-point buckets: its span and, once placed, its range.
#[derive(Clone, Copy)]
struct Slot {
    lo: usize,
    hi: usize,
    offset: u64,
    end: u64,
}

/// A coalesced union of address ranges (sorted, disjoint, not touching), recomputed only when
/// read after a placement made it stale.
#[derive(Default)]
struct Union {
    ranges: Vec<(u64, u64)>,
    stale: bool,
}

/// Sorts `ranges` and merges overlapping or touching ones in place.
fn coalesce(ranges: &mut Vec<(u64, u64)>) {
    // Often two sorted runs (an inner node's children): see `place`.
    ranges.sort();
    let mut kept = 0;
    for i in 0..ranges.len() {
        let (offset, end) = ranges[i];
        if kept > 0 && offset <= ranges[kept - 1].1 {
            ranges[kept - 1].1 = ranges[kept - 1].1.max(end);
        } else {
            ranges[kept] = (offset, end);
            kept += 1;
        }
    }
    ranges.truncate(kept);
}

/// Adds `[offset, end)` to a coalesced union, merging the ranges it overlaps or touches.
fn insert_range(ranges: &mut Vec<(u64, u64)>, (mut offset, mut end): (u64, u64)) {
    // Disjoint and sorted by offset, so sorted by end too.
    let first = ranges.partition_point(|&(_, e)| e < offset);
    let mut last = first;
    while last < ranges.len() && ranges[last].0 <= end {
        offset = offset.min(ranges[last].0);
        end = end.max(ranges[last].1);
        last += 1;
    }
    ranges.splice(first..last, [(offset, end)]);
}

/// Canonical cover of the leaves `[lo, hi]` of a bottom-up segment tree with `size` leaves.
fn cover(lo: usize, hi: usize, size: usize, mut visit: impl FnMut(usize)) {
    let (mut l, mut r) = (lo + size, hi + size + 1);
    while l < r {
        if l & 1 == 1 {
            visit(l);
            l += 1;
        }
        if r & 1 == 1 {
            r -= 1;
            visit(r);
        }
        l /= 2;
        r /= 2;
    }
}

/// Which placed tensors intersect a span, i.e. start <= hi and end >= lo.
struct TimeIndex {
    /// Tensors sorted by start point; `bucket[p]..bucket[p + 1]` start at point p.
    slots: Vec<Slot>,
    /// `reach[slot]`: one past the slot's last point once placed, 0 before; the scans read
    /// only this dense array (and a slot's range only when it intersects), which keeps the
    /// memory each placement touches small.
    reach: Vec<usize>,
    bucket: Vec<usize>,
    slot_of: Vec<usize>,
    points: usize,
    /// Stabbing tree over points: node `v` keeps, in `long_unions[union_of[v]]`, the union of
    /// the placed long tensors whose span covers v's whole range but not its parent's (its
    /// canonical cover), updated on each placement; nodes no long tensor covers that way have
    /// no union.
    size: usize,
    union_of: Vec<u32>,
    /// `up[v]`: the nearest of v and its ancestors with long tensors (0: none), so that a
    /// stabbing query visits only those nodes instead of all log n levels.
    up: Vec<u32>,
    long_unions: Vec<Vec<(u64, u64)>>,
    /// Start-block tree: leaf `b` (node `blocks + b`) holds the union of the placed tensors
    /// starting in points `[b * BLOCK, (b + 1) * BLOCK)`, an inner node that of its children.
    blocks: usize,
    block_unions: Vec<Union>,
}

impl TimeIndex {
    fn new(items: &[Item], spans: &[(usize, usize)], points: usize) -> Self {
        let mut bucket = vec![0usize; points + 1];
        for &(lo, _) in spans {
            bucket[lo + 1] += 1;
        }
        for p in 0..points {
            bucket[p + 1] += bucket[p];
        }
        // Counting sort by start point into the buckets.
        let mut next = bucket.clone();
        let mut slot_of = vec![0usize; items.len()];
        let mut slots = vec![
            Slot {
                lo: 0,
                hi: 0,
                offset: 0,
                end: 0,
            };
            items.len()
        ];
        for (i, &(lo, hi)) in spans.iter().enumerate() {
            let slot = next[lo];
            next[lo] += 1;
            slot_of[i] = slot;
            slots[slot] = Slot {
                lo,
                hi,
                offset: 0,
                end: 0,
            };
        }

        let size = points.max(1).next_power_of_two();
        let mut per_node: Vec<(usize, usize)> = Vec::new();
        for (slot, s) in slots.iter().enumerate() {
            if s.hi - s.lo > SHORT_SPAN {
                cover(s.lo, s.hi, size, |node| per_node.push((node, slot)));
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
        let mut union_of = vec![u32::MAX; 2 * size];
        let mut long_unions = Vec::new();
        for (v, id) in union_of.iter_mut().enumerate() {
            if nodes[v] < nodes[v + 1] {
                *id = long_unions.len() as u32;
                long_unions.push(Vec::new());
            }
        }
        let mut up = vec![0u32; 2 * size];
        for v in 1..2 * size {
            up[v] = if nodes[v] < nodes[v + 1] {
                v as u32
            } else {
                up[v / 2]
            };
        }
        let blocks = points.div_ceil(BLOCK).max(1).next_power_of_two();
        let mut block_unions = Vec::new();
        block_unions.resize_with(2 * blocks, Union::default);
        TimeIndex {
            reach: vec![0; slots.len()],
            slots,
            bucket,
            slot_of,
            points,
            size,
            union_of,
            up,
            long_unions,
            blocks,
            block_unions,
        }
    }

    fn span(&self, slot: usize) -> (usize, usize) {
        (self.slots[slot].lo, self.slots[slot].hi)
    }

    fn place(&mut self, slot: usize, offset: u64, end: u64) {
        self.reach[slot] = self.slots[slot].hi + 1;
        let slot = &mut self.slots[slot];
        slot.offset = offset;
        slot.end = end;
        let (lo, hi) = (slot.lo, slot.hi);
        // Every stale node's ancestors are stale too, so marking stops at the first one.
        let mut node = self.blocks + lo / BLOCK;
        while node >= 1 && !self.block_unions[node].stale {
            self.block_unions[node].stale = true;
            node /= 2;
        }
        if hi - lo > SHORT_SPAN {
            let (union_of, long_unions) = (&self.union_of, &mut self.long_unions);
            cover(lo, hi, self.size, |node| {
                insert_range(&mut long_unions[union_of[node] as usize], (offset, end));
            });
        }
    }

    fn intersecting(&mut self, (lo, hi): (usize, usize), out: &mut Vec<(u64, u64)>) {
        // Short tensors live at `lo` start in [lo - SHORT_SPAN, lo]; a short query also takes
        // everything starting up to `hi` in the same scan.
        let window = lo.saturating_sub(SHORT_SPAN);
        let scan_end = if hi - lo > LONG_QUERY { lo } else { hi + 1 };
        self.scan(window, scan_end, lo, out);
        if scan_end <= hi {
            self.starting_in(scan_end, hi + 1, out);
        }
        // Long tensors live at `lo`; those starting in the window are found twice, which
        // changes no union.
        let mut node = self.up[lo + self.size] as usize;
        while node >= 1 {
            out.extend_from_slice(&self.long_unions[self.union_of[node] as usize]);
            node = self.up[node / 2] as usize;
        }
    }

    /// Placed tensors starting at points `[from, to)` that are live at `lo`.
    fn scan(&self, from: usize, to: usize, lo: usize, out: &mut Vec<(u64, u64)>) {
        let (first, last) = (self.bucket[from], self.bucket[to]);
        for (k, &reach) in self.reach[first..last].iter().enumerate() {
            if reach > lo {
                let s = &self.slots[first + k];
                out.push((s.offset, s.end));
            }
        }
    }

    /// Placed tensors starting at points `[from, to)`: whole blocks from the start-block tree,
    /// the partial blocks at either end scanned.
    fn starting_in(&mut self, from: usize, to: usize, out: &mut Vec<(u64, u64)>) {
        let first_block = from.div_ceil(BLOCK);
        let end_block = to / BLOCK;
        if first_block >= end_block {
            self.scan(from, to, 0, out);
            return;
        }
        self.scan(from, first_block * BLOCK, 0, out);
        self.scan(end_block * BLOCK, to, 0, out);
        let mut nodes = Vec::new();
        cover(first_block, end_block - 1, self.blocks, |node| {
            nodes.push(node)
        });
        for node in nodes {
            self.refresh_block(node);
            out.extend_from_slice(&self.block_unions[node].ranges);
        }
    }

    fn refresh_block(&mut self, node: usize) {
        if !self.block_unions[node].stale {
            return;
        }
        let mut ranges = std::mem::take(&mut self.block_unions[node].ranges);
        ranges.clear();
        if node >= self.blocks {
            let block = node - self.blocks;
            let from = (block * BLOCK).min(self.points);
            let to = ((block + 1) * BLOCK).min(self.points);
            self.scan(from, to, 0, &mut ranges);
        } else {
            self.refresh_block(2 * node);
            self.refresh_block(2 * node + 1);
            ranges.extend_from_slice(&self.block_unions[2 * node].ranges);
            ranges.extend_from_slice(&self.block_unions[2 * node + 1].ranges);
        }
        coalesce(&mut ranges);
        self.block_unions[node] = Union {
            ranges,
            stale: false,
        };
    }
}
