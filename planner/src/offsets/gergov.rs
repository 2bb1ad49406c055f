//! Gergov's algorithm, as the memory-planning thesis describes it (seeds/memory-planning-thesis,
//! ch. 1 §3, after J. Gergov, "Algorithms for compile-time memory optimization", SODA 1999):
//! "constructing an infeasible solution and then transforming to a feasible solution using the
//! Best Fit heuristic for interval graph coloring". The thesis says no more; what is done here:
//!
//! **Phase 1** (the first solution `α′`): a skyline over the timeline's points, one segment of
//! equal height per run of points, all at height 0 at first. Repeatedly take the lowest segment
//! (leftmost among equals) and, among the unplaced tensors whose span lies inside it, the one
//! starting first (then ending first, then largest, then first in input order); put it at the
//! segment's height and raise its span by its size. When no unplaced tensor fits inside the
//! lowest segment, the segment is raised to its lower neighbour's height and merged with it,
//! so that tensors spanning both can be placed there. This follows a public C++ implementation
//! of the thesis's strategies, whose `α′` is infeasible only because its segments share their
//! boundary operators with the tensor just placed (closed intervals); here segments are runs of
//! distinct points and never share one, so `α′` is already feasible (and the tests check it).
//!
//! **Phase 2** (Best Fit): the tensors, in increasing `α′` (ties in phase-1 order), are placed
//! by best fit (paper Alg. 3's gap rule) among the tensors live at the same time. Every tensor
//! placed before one overlapping it in time sits below it in `α′` and, inductively, no higher
//! than its `α′`, so each tensor lands at or below its `α′`: phase 2 never makes the slab
//! larger than phase 1's, and it can move tensors down into the room phase 1 gives up when it
//! raises a segment to its neighbour.
//!
//! Phase 1 costs O(n log n) (a heap of segments, an ordered map of the skyline and a segment
//! tree over the unplaced tensors by start point); phase 2 is the shared placement engine.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::placement::{place, Fit};
use crate::error::overflow;
use crate::items::{Item, Timeline};
use crate::{OffsetsPlan, PlanError};

pub(crate) fn gergov(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    let first = first_solution(items)?;
    let mut order: Vec<(u64, usize, usize)> = first
        .sequence
        .iter()
        .enumerate()
        .map(|(k, &i)| (first.offsets[i], k, i))
        .collect();
    order.sort_unstable();
    let order: Vec<usize> = order.into_iter().map(|(_, _, i)| i).collect();
    place(items, &order, Fit::Best, align)
}

/// Phase 1's `α′` and the order tensors were put into it.
pub(crate) struct FirstSolution {
    pub offsets: Vec<u64>,
    pub sequence: Vec<usize>,
}

/// A run of points `[start, end]` of the skyline at one height.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    end: usize,
    height: u64,
}

pub(crate) fn first_solution(items: &[Item]) -> Result<FirstSolution, PlanError> {
    let mut offsets = vec![0u64; items.len()];
    let mut sequence = Vec::new();
    let (timeline, spans) = Timeline::with_spans(items);
    let points = timeline.len();
    let mut unplaced = Unplaced::new(items, &spans, points);
    if unplaced.remaining == 0 {
        return Ok(FirstSolution { offsets, sequence });
    }
    // The skyline by start point, and its segments by (height, start) for the lowest one;
    // heap entries whose segment has since changed are skipped when popped.
    let mut skyline: BTreeMap<usize, Segment> = BTreeMap::new();
    let mut lowest: BinaryHeap<Reverse<(u64, usize, usize)>> = BinaryHeap::new();
    skyline.insert(
        0,
        Segment {
            end: points - 1,
            height: 0,
        },
    );
    lowest.push(Reverse((0, 0, points - 1)));
    while unplaced.remaining > 0 {
        let Some(Reverse((height, start, end))) = lowest.pop() else {
            return Err(PlanError::Internal("gergov: skyline exhausted"));
        };
        if skyline.get(&start) != Some(&Segment { end, height }) {
            continue;
        }
        if let Some(i) = unplaced.take_inside(start, end) {
            let (lo, hi) = spans[i];
            let top = height
                .checked_add(items[i].size)
                .ok_or_else(|| overflow("gergov skyline"))?;
            offsets[i] = height;
            sequence.push(i);
            skyline.remove(&start);
            if start < lo {
                put(&mut skyline, &mut lowest, start, lo - 1, height);
            }
            put(&mut skyline, &mut lowest, lo, hi, top);
            if hi < end {
                put(&mut skyline, &mut lowest, hi + 1, end, height);
            }
        } else {
            // Nothing fits inside: raise the segment to its lower neighbour and merge.
            let left = skyline.range(..start).next_back().map(|(_, s)| s.height);
            let right = skyline.range(end + 1..).next().map(|(_, s)| s.height);
            let Some(raised) = left.into_iter().chain(right).min() else {
                // One segment over every point contains every tensor, so this cannot be.
                return Err(PlanError::Internal(
                    "gergov: an unplaced tensor fits nowhere",
                ));
            };
            skyline.remove(&start);
            put(&mut skyline, &mut lowest, start, end, raised);
        }
    }
    Ok(FirstSolution { offsets, sequence })
}

/// Inserts segment `[start, end]` at `height`, merged with neighbours of the same height.
fn put(
    skyline: &mut BTreeMap<usize, Segment>,
    lowest: &mut BinaryHeap<Reverse<(u64, usize, usize)>>,
    mut start: usize,
    mut end: usize,
    height: u64,
) {
    if let Some((&s, &left)) = skyline.range(..start).next_back() {
        if left.height == height && left.end + 1 == start {
            skyline.remove(&s);
            start = s;
        }
    }
    if let Some(&right) = skyline.get(&(end + 1)) {
        if right.height == height {
            skyline.remove(&(end + 1));
            end = right.end;
        }
    }
    skyline.insert(start, Segment { end, height });
    lowest.push(Reverse((height, start, end)));
}

/// The unplaced tensors of size > 0 by start point: a bucket per point, sorted by (span end,
/// size descending, input order), and a min segment tree over the points of the span end of
/// each bucket's first unplaced tensor, to find the first tensor inside a segment.
struct Unplaced {
    buckets: Vec<usize>,
    order: Vec<usize>,
    cursor: Vec<usize>,
    size: usize,
    tree: Vec<usize>,
    hi: Vec<usize>,
    remaining: usize,
}

impl Unplaced {
    fn new(items: &[Item], spans: &[(usize, usize)], points: usize) -> Self {
        let mut keyed: Vec<(usize, usize, Reverse<u64>, usize)> = items
            .iter()
            .enumerate()
            .filter(|(_, item)| item.size > 0)
            .map(|(i, item)| (spans[i].0, spans[i].1, Reverse(item.size), i))
            .collect();
        keyed.sort_unstable();
        let mut buckets = vec![0usize; points + 1];
        for &(lo, ..) in &keyed {
            buckets[lo + 1] += 1;
        }
        for p in 0..points {
            buckets[p + 1] += buckets[p];
        }
        let hi: Vec<usize> = keyed.iter().map(|&(_, hi, ..)| hi).collect();
        let order: Vec<usize> = keyed.iter().map(|&(.., i)| i).collect();
        let size = points.max(1).next_power_of_two();
        let mut tree = vec![usize::MAX; 2 * size];
        for p in 0..points {
            if buckets[p] < buckets[p + 1] {
                tree[size + p] = hi[buckets[p]];
            }
        }
        for v in (1..size).rev() {
            tree[v] = tree[2 * v].min(tree[2 * v + 1]);
        }
        Unplaced {
            cursor: buckets[..points].to_vec(),
            buckets,
            remaining: order.len(),
            order,
            size,
            tree,
            hi,
        }
    }

    /// Removes and returns the unplaced tensor with span inside `[start, end]` that starts
    /// first (ties: ends first, then largest, then first in input order).
    fn take_inside(&mut self, start: usize, end: usize) -> Option<usize> {
        let p = self.leftmost(1, 0, self.size - 1, start, end)?;
        let k = self.cursor[p];
        self.cursor[p] += 1;
        let next = if self.cursor[p] < self.buckets[p + 1] {
            self.hi[self.cursor[p]]
        } else {
            usize::MAX
        };
        let mut v = self.size + p;
        self.tree[v] = next;
        while v > 1 {
            v /= 2;
            self.tree[v] = self.tree[2 * v].min(self.tree[2 * v + 1]);
        }
        self.remaining -= 1;
        Some(self.order[k])
    }

    /// The leftmost point in `[start, end]` under node `v` (covering `[l, r]`) whose first
    /// unplaced tensor ends at or before `end`.
    fn leftmost(&self, v: usize, l: usize, r: usize, start: usize, end: usize) -> Option<usize> {
        if r < start || l > end || self.tree[v] > end {
            return None;
        }
        if l == r {
            return Some(l);
        }
        let mid = (l + r) / 2;
        self.leftmost(2 * v, l, mid, start, end)
            .or_else(|| self.leftmost(2 * v + 1, mid + 1, r, start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check_offsets;
    use crate::items::prepare;
    use crate::UsageRecord;

    /// Phase 1's height: the highest end in `α′`.
    fn height(items: &[Item], first: &FirstSolution) -> u64 {
        (0..items.len())
            .map(|i| first.offsets[i] + items[i].size)
            .max()
            .unwrap_or(0)
    }

    fn records(list: &[(usize, usize, u64)]) -> Vec<UsageRecord> {
        list.iter()
            .map(|&(first_op, last_op, size)| UsageRecord {
                first_op,
                last_op,
                size,
            })
            .collect()
    }

    /// Phase 1 by hand. The first ops are {0, 2}, so the timeline has two points: A (0-1,
    /// 32 B) spans point 0, B (0-3, 8 B) points 0-1, C (2-3, 16 B) point 1. The skyline starts
    /// as [0, 1] at 0; the first tensor inside it by start, then end, is A: at 0, raising
    /// point 0 to 32. The lowest segment is [1, 1] at 0, holding C: at 0, raised to 16. Now
    /// [1, 1] at 16 holds nothing (B spans both points), so it rises to its neighbour's 32 and
    /// merges into [0, 1] at 32, where B goes. α′ = A 0, B 32, C 0, height 40. Phase 2 places
    /// A, C, B (increasing α′) by best fit: the same offsets.
    #[test]
    fn hand_checked_skyline() {
        let recs = records(&[(0, 1, 32), (0, 3, 8), (2, 3, 16)]);
        let items = prepare(&recs, 1).unwrap();
        let first = first_solution(&items).unwrap();
        assert_eq!(first.offsets, vec![0, 32, 0]);
        assert_eq!(first.sequence, vec![0, 2, 1]);
        assert_eq!(height(&items, &first), 40);
        let plan = gergov(&items, 1).unwrap();
        assert_eq!(plan.offsets, vec![0, 32, 0]);
        assert_eq!(plan.total_size, 40);
        check_offsets(&recs, &plan, 1).unwrap();
    }

    /// Phase 2 lowers a tensor phase 1 put above a raised segment. Points {0, 1, 2}: A (point
    /// 0, 64 B), B (point 1, 16 B), C (points 1-2, 8 B), D (point 2, 32 B). Phase 1: A at 0
    /// (point 0 to 64); lowest [1, 2] at 0, first inside by start then end is B: at 0 (point 1
    /// to 16); lowest [2, 2] at 0 holds D: at 0 (point 2 to 32); lowest [1, 1] at 16 holds
    /// nothing (C spans 1-2), rises to 32 (its lower neighbour, point 2) and merges: C at 32,
    /// height 64 with A. Best fit in α′ order (A, B, D, C) gives the same: C's time holds B
    /// [0, 16) and D [0, 32), so C goes at 32. Hand-checked both ways.
    #[test]
    fn raised_segment() {
        let recs = records(&[(0, 0, 64), (1, 1, 16), (1, 2, 8), (2, 2, 32)]);
        let items = prepare(&recs, 8).unwrap();
        let first = first_solution(&items).unwrap();
        assert_eq!(first.offsets, vec![0, 0, 32, 0]);
        assert_eq!(first.sequence, vec![0, 1, 3, 2]);
        assert_eq!(height(&items, &first), 64);
        let plan = gergov(&items, 8).unwrap();
        assert_eq!(plan.offsets, vec![0, 0, 32, 0]);
        assert_eq!(plan.total_size, 64);
        check_offsets(&recs, &plan, 8).unwrap();
    }

    /// Zero-size tensors are never placed and stay at 0; an empty input plans to nothing.
    #[test]
    fn zero_sizes_and_empty() {
        let plan = gergov(&[], 64).unwrap();
        assert_eq!(plan.total_size, 0);
        let recs = records(&[(0, 5, 0), (1, 2, 100)]);
        let items = prepare(&recs, 64).unwrap();
        let plan = gergov(&items, 64).unwrap();
        assert_eq!(plan.offsets, vec![0, 0]);
        assert_eq!(plan.total_size, 128);
        check_offsets(&recs, &plan, 64).unwrap();
    }

    /// Phase 1 is feasible on its own (checked independently) and phase 2 never exceeds it.
    #[test]
    fn phase_one_is_feasible_and_phase_two_no_higher() {
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        for _ in 0..200 {
            let n = 1 + next(40) as usize;
            let list: Vec<(usize, usize, u64)> = (0..n)
                .map(|_| {
                    let first = next(30) as usize;
                    (first, first + next(12) as usize, 1 + next(500))
                })
                .collect();
            let recs = records(&list);
            let items = prepare(&recs, 8).unwrap();
            let first = first_solution(&items).unwrap();
            let phase1 = OffsetsPlan {
                offsets: first.offsets.clone(),
                total_size: height(&items, &first),
            };
            check_offsets(&recs, &phase1, 8).unwrap();
            let plan = gergov(&items, 8).unwrap();
            check_offsets(&recs, &plan, 8).unwrap();
            assert!(plan.total_size <= phase1.total_size);
            for (final_offset, first_offset) in plan.offsets.iter().zip(&first.offsets) {
                assert!(final_offset <= first_offset);
            }
        }
    }
}
