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

/// Sorts `v` by `key`, stably: a least-significant-digit radix sort over only the bits in
/// which the keys differ, in passes of at most [`RADIX_BITS`] bits. Sizes and operator
/// indices differ in twenty-odd bits, so a million keys take two or three linear passes
/// instead of a comparison sort's twenty (the sorts were a large share of planning a million
/// records). Stable, so sorting `(key, index)` pairs made in index order gives the order of
/// `sort_unstable` on the pairs.
pub(crate) fn radix_sort_by_key<T: Copy>(v: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    if v.len() < 1024 {
        v.sort_by_key(&key);
        return;
    }
    let first = key(&v[0]);
    let differ = v.iter().fold(0u64, |d, t| d | (key(t) ^ first));
    if differ == 0 {
        return;
    }
    let (low, high) = (differ.trailing_zeros(), 64 - differ.leading_zeros());
    let passes = (high - low).div_ceil(RADIX_BITS);
    let bits = (high - low).div_ceil(passes);
    let mut from = std::mem::take(v);
    let mut to = from.clone();
    let mut starts = vec![0usize; 1 << bits];
    let mut shift = low;
    while shift < high {
        let mask = (1u64 << bits) - 1;
        let digit = |t: &T| ((key(t) >> shift) & mask) as usize;
        starts.fill(0);
        for t in &from {
            starts[digit(t)] += 1;
        }
        let mut at = 0;
        for s in &mut starts {
            let count = *s;
            *s = at;
            at += count;
        }
        for t in &from {
            let d = digit(t);
            to[starts[d]] = *t;
            starts[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
        shift += bits;
    }
    *v = from;
}

/// Widest digit of [`radix_sort_by_key`]: 1,024 buckets, whose write positions stay in the
/// first-level caches.
const RADIX_BITS: u32 = 10;

/// The distinct `first_op` values, in order: the only operators where the set of live records
/// can grow. Every operator's profile is a subset of the profile at the latest such point at or
/// before it, so breadths, positional maxima and time overlap can all be computed on these
/// points alone — which keeps memory proportional to the records even when operator indices
/// are huge (the benchmark CSVs use times up to 2^20 and beyond).
pub(crate) struct Timeline {
    points: Vec<usize>,
}

/// Operator indices up to this many per record (plus a constant) are dense enough to index
/// an array by; beyond, the time axis is compressed by sorting instead.
const DENSE_OPS_PER_ITEM: usize = 4;

/// When the items' first ops are dense ([`DENSE_OPS_PER_ITEM`]), `at_or_below[op]`: how
/// many distinct first ops are `<= op`, for every `op` up to the largest first op. With it
/// the points and every span come from two passes over the items and one over the
/// operators, instead of three sorts of the items (what the bounds and the placement each
/// spent most of their set-up on at a million records).
fn dense_ranks(items: &[Item]) -> Option<Vec<u32>> {
    let ops = items.iter().map(|i| i.first_op).max()?.checked_add(1)?;
    if ops > DENSE_OPS_PER_ITEM * items.len() + 4096 || items.len() >= u32::MAX as usize {
        return None;
    }
    let mut ranks = vec![0u32; ops];
    for item in items {
        ranks[item.first_op] = 1;
    }
    let mut below = 0u32;
    for r in &mut ranks {
        below += *r;
        *r = below;
    }
    Some(ranks)
}

/// Every item's span from [`dense_ranks`].
fn dense_spans(items: &[Item], ranks: &[u32]) -> Vec<(usize, usize)> {
    let points = ranks.last().map_or(0, |&r| r as usize);
    items
        .iter()
        .map(|item| {
            let lo = ranks[item.first_op] as usize - 1;
            // The points at or below `last_op`; all of them past the last first op.
            let below = ranks.get(item.last_op).map_or(points, |&r| r as usize);
            (lo, (below - 1).max(lo))
        })
        .collect()
}

impl Timeline {
    pub fn new(items: &[Item]) -> Self {
        if let Some(ranks) = dense_ranks(items) {
            return Timeline {
                points: Self::points_of(&ranks),
            };
        }
        let mut points: Vec<usize> = items.iter().map(|i| i.first_op).collect();
        points.sort_unstable();
        points.dedup();
        Timeline { points }
    }

    /// The operators where the rank grows: the distinct first ops, in order.
    fn points_of(ranks: &[u32]) -> Vec<usize> {
        let mut points = Vec::with_capacity(ranks.last().map_or(0, |&r| r as usize));
        let mut before = 0;
        for (op, &r) in ranks.iter().enumerate() {
            if r != before {
                points.push(op);
                before = r;
            }
        }
        points
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// The timeline of `items` and their spans (see [`Timeline::spans`]) from one sort of the
    /// first ops instead of two: the points are the distinct keys of that sort (no sort at
    /// all when the operators are dense).
    pub fn with_spans(items: &[Item]) -> (Self, Vec<(usize, usize)>) {
        if let Some(ranks) = dense_ranks(items) {
            let timeline = Timeline {
                points: Self::points_of(&ranks),
            };
            return (timeline, dense_spans(items, &ranks));
        }
        Self::sorted_with_spans(items)
    }

    /// [`Self::with_spans`] by sorting, whatever the operators.
    fn sorted_with_spans(items: &[Item]) -> (Self, Vec<(usize, usize)>) {
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

    /// Every item's span: the closed range of points `[lo, hi]` inside its lifetime; never
    /// empty because the item's own `first_op` is a point. Two items overlap in time iff their
    /// spans intersect. `items` are those the timeline was made of.
    ///
    /// With dense operators, from [`dense_ranks`]; otherwise by sorting the lifetime ends and
    /// sweeping the points once: a binary search per item misses the cache at every step once
    /// the points outgrow it.
    pub fn spans(&self, items: &[Item]) -> Vec<(usize, usize)> {
        if let Some(ranks) = dense_ranks(items) {
            return dense_spans(items, &ranks);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn dense_spans_are_the_sorted_ones(
            lifetimes in prop::collection::vec((0usize..300, 0usize..100), 1..200),
        ) {
            let items: Vec<Item> = lifetimes
                .iter()
                .map(|&(first_op, len)| Item { first_op, last_op: first_op + len, size: 1, raw_size: 1 })
                .collect();
            let ranks = dense_ranks(&items).expect("dense");
            let (sorted, spans) = Timeline::sorted_with_spans(&items);
            prop_assert_eq!(&Timeline::points_of(&ranks), &sorted.points);
            prop_assert_eq!(&dense_spans(&items, &ranks), &spans);
            let (timeline, with) = Timeline::with_spans(&items);
            prop_assert_eq!(&timeline.points, &sorted.points);
            prop_assert_eq!(&with, &spans);
            prop_assert_eq!(&Timeline::new(&items).spans(&items), &spans);
        }

        #[test]
        fn radix_sort_is_the_stable_sort(
            keys in prop::collection::vec(prop_oneof![0u64..5000, any::<u64>(), Just(u64::MAX)], 0..3000),
            shift in 0u32..40,
        ) {
            let mut pairs: Vec<(u64, usize)> =
                keys.iter().enumerate().map(|(i, &k)| (k << shift.min(k.leading_zeros()), i)).collect();
            let mut expected = pairs.clone();
            expected.sort_unstable();
            radix_sort_by_key(&mut pairs, |p| p.0);
            prop_assert_eq!(pairs, expected);
        }
    }
}
