//! Best-fit strip packing (Burke, Kendall & Whitwell 2004, "A new placement heuristic for the
//! orthogonal stock-cutting problem"), as Sekiyama et al. 2018 ("Profile-guided memory
//! optimization for deep neural networks") apply it to offset planning.
//!
//! Transposed to memory planning, the strip's width is time and its height is address; a
//! tensor is a rectangle whose horizontal position is fixed by its lifetime. Burke's best fit
//! keeps the skyline of what is placed and repeatedly looks at its lowest segment (leftmost
//! among equals): of the unplaced tensors whose lifetime lies inside that segment, it places
//! the one that fills most of it — the longest-lived, then the largest — on top of the
//! segment. If no tensor fits, the segment is wasted: raised to its lower neighbour and
//! merged. Unlike the greedy strategies this fills memory bottom-up, which the paper found
//! better than Greedy by Size on DeepLab.
//!
//! Each step scans the unplaced tensors starting inside the segment, so the worst case is
//! quadratic.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::error::overflow;
use crate::items::{Item, Timeline};
use crate::{OffsetsPlan, PlanError};

/// Maximal runs of timeline points at equal height, keyed by first point.
struct Skyline {
    segments: BTreeMap<usize, (usize, u64)>,
    lowest: BTreeSet<(u64, usize)>,
}

impl Skyline {
    fn insert(&mut self, start: usize, end: usize, height: u64) {
        self.segments.insert(start, (end, height));
        self.lowest.insert((height, start));
    }

    fn remove(&mut self, start: usize) -> Option<(usize, u64)> {
        let (end, height) = self.segments.remove(&start)?;
        self.lowest.remove(&(height, start));
        Some((end, height))
    }

    fn before(&self, start: usize) -> Option<(usize, usize, u64)> {
        self.segments
            .range(..start)
            .next_back()
            .map(|(&s, &(e, h))| (s, e, h))
    }

    fn after(&self, end: usize) -> Option<(usize, usize, u64)> {
        self.segments
            .range(end + 1..)
            .next()
            .map(|(&s, &(e, h))| (s, e, h))
    }

    /// Sets `[start, end]` (currently inside one segment) to `height`, merging equal neighbours.
    fn set(&mut self, start: usize, end: usize, height: u64) {
        let mut start = start;
        let mut end = end;
        if let Some((s, e, h)) = self.before(start) {
            if h == height && e + 1 == start {
                self.remove(s);
                start = s;
            }
        }
        if let Some((s, e, h)) = self.after(end) {
            if h == height && s == end + 1 {
                self.remove(s);
                end = e;
            }
        }
        self.insert(start, end, height);
    }
}

pub(crate) fn strip_packing_best_fit(items: &[Item]) -> Result<OffsetsPlan, PlanError> {
    let mut offsets = vec![0u64; items.len()];
    let timeline = Timeline::new(items);
    if timeline.len() == 0 {
        return Ok(OffsetsPlan {
            offsets,
            total_size: 0,
        });
    }
    let spans = timeline.spans(items);
    let mut unplaced: BTreeSet<(usize, usize)> = (0..items.len())
        .filter(|&i| items[i].size > 0)
        .map(|i| (spans[i].0, i))
        .collect();
    let mut skyline = Skyline {
        segments: BTreeMap::new(),
        lowest: BTreeSet::new(),
    };
    skyline.insert(0, timeline.len() - 1, 0);
    let mut total_size = 0u64;
    while !unplaced.is_empty() {
        let Some(&(height, start)) = skyline.lowest.first() else {
            return Err(PlanError::Internal("empty skyline"));
        };
        let Some(&(end, _)) = skyline.segments.get(&start) else {
            return Err(PlanError::Internal("skyline index out of sync"));
        };
        let fits = unplaced
            .range((start, 0)..=(end, usize::MAX))
            .filter(|&&(_, i)| spans[i].1 <= end)
            .max_by_key(|&&(_, i)| {
                let item = &items[i];
                (
                    item.last_op - item.first_op,
                    item.size,
                    item.raw_size,
                    Reverse(i),
                )
            })
            .copied();
        match fits {
            Some((lo, i)) => {
                unplaced.remove(&(lo, i));
                let hi = spans[i].1;
                let top = height
                    .checked_add(items[i].size)
                    .ok_or_else(|| overflow("slab"))?;
                offsets[i] = height;
                total_size = total_size.max(top);
                skyline.remove(start);
                if lo > start {
                    skyline.insert(start, lo - 1, height);
                }
                if hi < end {
                    skyline.insert(hi + 1, end, height);
                }
                skyline.set(lo, hi, top);
            }
            None => {
                // Nothing fits: raise the segment to its lower neighbour, wasting the space.
                let left = skyline.before(start).map(|(_, _, h)| h);
                let right = skyline.after(end).map(|(_, _, h)| h);
                let Some(raised) = left.into_iter().chain(right).min() else {
                    return Err(PlanError::Internal(
                        "a tensor fits nowhere in an empty skyline",
                    ));
                };
                skyline.remove(start);
                skyline.set(start, end, raised);
            }
        }
    }
    Ok(OffsetsPlan {
        offsets,
        total_size,
    })
}
