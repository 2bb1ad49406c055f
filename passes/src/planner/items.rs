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

    /// The closed range of points `[lo, hi]` inside the item's lifetime; never empty because
    /// the item's own `first_op` is a point. Two items overlap in time iff their spans intersect.
    pub fn span(&self, item: &Item) -> (usize, usize) {
        let lo = self.points.partition_point(|&p| p < item.first_op);
        let hi = self
            .points
            .partition_point(|&p| p <= item.last_op)
            .saturating_sub(1);
        (lo, hi.max(lo))
    }

    pub fn spans(&self, items: &[Item]) -> Vec<(usize, usize)> {
        items.iter().map(|i| self.span(i)).collect()
    }
}
