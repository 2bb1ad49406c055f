//! The strategies' common, validated view of the input: aligned sizes and a compressed time axis.

use super::{align_size, PlanError, UsageRecord};

/// A usage record after validation: `size` is aligned, `raw_size` is what the tensor needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub first_op: usize,
    pub last_op: usize,
    pub size: u64,
    pub raw_size: u64,
}

/// Validates lifetimes and aligns sizes; the only entry from user data into the strategies.
pub(crate) fn prepare(records: &[UsageRecord], align: u64) -> Result<Vec<Item>, PlanError> {
    if align == 0 {
        return Err(PlanError::ZeroAlignment);
    }
    records
        .iter()
        .enumerate()
        .map(|(record, r)| {
            if r.first_op > r.last_op {
                return Err(PlanError::InvalidLifetime {
                    record,
                    first_op: r.first_op,
                    last_op: r.last_op,
                });
            }
            let size = align_size(r.size, align).map_err(|_| PlanError::RecordTooLarge {
                record,
                size: r.size,
                align,
            })?;
            Ok(Item {
                first_op: r.first_op,
                last_op: r.last_op,
                size,
                raw_size: r.size,
            })
        })
        .collect()
}

/// The distinct `first_op` values, in order: the only operators where the set of live records
/// can grow. Every operator's profile is a subset of the profile at the latest such point at or
/// before it, so breadths, positional maxima and time overlap can all be computed on these
/// points alone — which keeps memory proportional to the records even when operator indices
/// are huge (the benchmark CSVs use times up to 2^20 and beyond).
pub(crate) struct Timeline {
    points: Vec<usize>,
}

impl Timeline {
    pub fn new(items: &[Item]) -> Self {
        let mut points: Vec<usize> = items.iter().map(|i| i.first_op).collect();
        points.sort_unstable();
        points.dedup();
        Timeline { points }
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Every item's span: the closed range of points `[lo, hi]` inside its lifetime; never
    /// empty because the item's own `first_op` is a point. Two items overlap in time iff their
    /// spans intersect.
    ///
    /// Computed by sorting the lifetime ends and sweeping the points once: a binary search per
    /// item misses the cache at every step once the points outgrow it.
    /// The timeline of `items` and their spans (see [`Timeline::spans`]) from one sort of the
    /// first ops instead of two: the points are the distinct keys of that sort.
    pub fn with_spans(items: &[Item]) -> (Self, Vec<(usize, usize)>) {
        let mut spans = vec![(0usize, 0usize); items.len()];
        let mut ends: Vec<(usize, usize)> = items
            .iter()
            .enumerate()
            .map(|(i, item)| (item.first_op, i))
            .collect();
        ends.sort_unstable();
        let mut points: Vec<usize> = Vec::new();
        for &(first_op, i) in &ends {
            if points.last() != Some(&first_op) {
                points.push(first_op);
            }
            spans[i].0 = points.len() - 1;
        }
        let timeline = Timeline { points };
        timeline.fill_last_points(items, &mut ends, &mut spans);
        (timeline, spans)
    }

    pub fn spans(&self, items: &[Item]) -> Vec<(usize, usize)> {
        let mut spans = vec![(0usize, 0usize); items.len()];
        let mut ends: Vec<(usize, usize)> = items
            .iter()
            .enumerate()
            .map(|(i, item)| (item.first_op, i))
            .collect();
        ends.sort_unstable();
        let mut point = 0;
        for &(first_op, i) in &ends {
            while self.points[point] < first_op {
                point += 1;
            }
            spans[i].0 = point;
        }
        self.fill_last_points(items, &mut ends, &mut spans);
        spans
    }

    /// Sets every span's end; `ends` is scratch of the items' length.
    fn fill_last_points(
        &self,
        items: &[Item],
        ends: &mut [(usize, usize)],
        spans: &mut [(usize, usize)],
    ) {
        // `ends` was a permutation of the items; refill it with the last ops, in item order.
        for (i, item) in items.iter().enumerate() {
            ends[i] = (item.last_op, i);
        }
        ends.sort_unstable();
        // Points <= last_op; at least the item's own first point.
        let mut below = 0;
        for &(last_op, i) in ends.iter() {
            while below < self.points.len() && self.points[below] <= last_op {
                below += 1;
            }
            spans[i].1 = below.saturating_sub(1).max(spans[i].0);
        }
    }
}
