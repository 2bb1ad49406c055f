//! Operator profiles, breadths, positional maxima and the two lower bounds (paper §3, §4.1, §5.1).
//!
//! All functions take the alignment the plan will use, because the paper's sizes are aligned
//! sizes and a bound must be comparable with the plans it bounds.

use super::error::overflow;
use super::items::{prepare, Item, Timeline};
use super::{PlanError, UsageRecord};

/// Per-operator tables are refused beyond this many operators: they are for inspection and
/// tests, while the bounds themselves never tabulate operators.
pub const MAX_TABULATED_OPERATORS: usize = 1 << 24;

/// The usage records live at one operator, largest first (paper §3, Fig. 2b).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorProfile {
    /// Operator index in the execution order.
    pub op: usize,
    /// Indices into the records, by aligned size descending; equal sizes keep input order
    /// (TFLite's `CalculateTaskProfiles` uses a stable sort).
    pub records: Vec<usize>,
    /// Sum of the aligned sizes in the profile.
    pub breadth: u64,
}

/// Both lower bounds of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LowerBounds {
    /// §5.1: no offsets plan can be smaller than the largest operator breadth.
    pub offsets: u64,
    /// §4.1: no shared-objects plan can cost less than the sum of the positional maxima.
    pub shared_objects: u64,
}

fn operator_count(records: &[UsageRecord]) -> Result<usize, PlanError> {
    let Some(max_last) = records.iter().map(|r| r.last_op).max() else {
        return Ok(0);
    };
    let operators = max_last as u128 + 1;
    if operators > MAX_TABULATED_OPERATORS as u128 {
        return Err(PlanError::TooManyOperators {
            operators,
            limit: MAX_TABULATED_OPERATORS,
        });
    }
    Ok(operators as usize)
}

/// Every operator's profile, for operators `0..=max last_op`. This materialises
/// `Σ lifetime lengths` entries, so it is meant for inspection, not for planning.
pub fn operator_profiles(
    records: &[UsageRecord],
    align: u64,
) -> Result<Vec<OperatorProfile>, PlanError> {
    let items = prepare(records, align)?;
    let operators = operator_count(records)?;
    let mut profiles: Vec<OperatorProfile> = (0..operators)
        .map(|op| OperatorProfile {
            op,
            records: Vec::new(),
            breadth: 0,
        })
        .collect();
    let mut by_size: Vec<usize> = (0..items.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(items[i].size));
    for &i in &by_size {
        for profile in &mut profiles[items[i].first_op..=items[i].last_op] {
            profile.records.push(i);
            profile.breadth = profile
                .breadth
                .checked_add(items[i].size)
                .ok_or_else(|| overflow("operator breadth"))?;
        }
    }
    Ok(profiles)
}

/// Breadth of every operator `0..=max last_op` (paper §3), by a difference array: O(n + m).
pub fn operator_breadths(records: &[UsageRecord], align: u64) -> Result<Vec<u64>, PlanError> {
    let items = prepare(records, align)?;
    let operators = operator_count(records)?;
    // Entering sizes and leaving sizes are kept apart so that no prefix ever goes negative.
    let mut entering = vec![0u64; operators + 1];
    let mut leaving = vec![0u64; operators + 1];
    for item in &items {
        let e = &mut entering[item.first_op];
        *e = e
            .checked_add(item.size)
            .ok_or_else(|| overflow("operator breadth"))?;
        let l = &mut leaving[item.last_op + 1];
        *l = l
            .checked_add(item.size)
            .ok_or_else(|| overflow("operator breadth"))?;
    }
    let mut breadths = Vec::with_capacity(operators);
    let mut live = 0u64;
    for op in 0..operators {
        live = live
            .checked_sub(leaving[op])
            .ok_or(PlanError::Internal("negative breadth"))?;
        live = live
            .checked_add(entering[op])
            .ok_or_else(|| overflow("operator breadth"))?;
        breadths.push(live);
    }
    Ok(breadths)
}

/// The i-th positional maximum is the largest i-th element over all sorted operator profiles
/// (paper §3); its length is the largest number of records live at once.
pub fn positional_maxima(records: &[UsageRecord], align: u64) -> Result<Vec<u64>, PlanError> {
    let items = prepare(records, align)?;
    let timeline = Timeline::new(&items);
    let spans = timeline.spans(&items);
    positional_maxima_of(&items, &spans, timeline.len())
}

/// Both lower bounds in O(n log n), without tabulating operators.
pub fn lower_bounds(records: &[UsageRecord], align: u64) -> Result<LowerBounds, PlanError> {
    let items = prepare(records, align)?;
    let timeline = Timeline::new(&items);
    let spans = timeline.spans(&items);
    let offsets = breadths_at_points(&items, &spans, timeline.len())?
        .into_iter()
        .max()
        .unwrap_or(0);
    let mut shared_objects = 0u64;
    for m in positional_maxima_of(&items, &spans, timeline.len())? {
        shared_objects = shared_objects
            .checked_add(m)
            .ok_or_else(|| overflow("sum of positional maxima"))?;
    }
    Ok(LowerBounds {
        offsets,
        shared_objects,
    })
}

/// Breadth at every timeline point. The maximum breadth over all operators is attained at a
/// point, because an operator's profile is a subset of the profile at the preceding point.
pub(crate) fn breadths_at_points(
    items: &[Item],
    spans: &[(usize, usize)],
    points: usize,
) -> Result<Vec<u64>, PlanError> {
    let mut entering = vec![0u64; points + 1];
    let mut leaving = vec![0u64; points + 1];
    for (item, &(lo, hi)) in items.iter().zip(spans) {
        entering[lo] = entering[lo]
            .checked_add(item.size)
            .ok_or_else(|| overflow("breadth"))?;
        leaving[hi + 1] = leaving[hi + 1]
            .checked_add(item.size)
            .ok_or_else(|| overflow("breadth"))?;
    }
    let mut live = 0u64;
    let mut breadths = Vec::with_capacity(points);
    for p in 0..points {
        live = live
            .checked_sub(leaving[p])
            .ok_or(PlanError::Internal("negative breadth"))?;
        live = live
            .checked_add(entering[p])
            .ok_or_else(|| overflow("breadth"))?;
        breadths.push(live);
    }
    Ok(breadths)
}

/// Positional maxima without sorting any profile. Let `count(v)` be the largest number of
/// records of size >= v live at one operator; the i-th positional maximum is the largest `v`
/// with `count(v) > i`. Inserting records by size descending into a range-add / max segment
/// tree over the timeline, `count` grows by at most one per insertion, and every time it grows
/// to `c` the record just inserted is the (c-1)-th positional maximum. O(n log n).
pub(crate) fn positional_maxima_of(
    items: &[Item],
    spans: &[(usize, usize)],
    points: usize,
) -> Result<Vec<u64>, PlanError> {
    if items.len() >= u32::MAX as usize {
        return Err(PlanError::TooLarge {
            strategy: "positional maxima",
            records: items.len(),
            reason: "its tree counts live records in 32 bits",
        });
    }
    let mut order: Vec<(std::cmp::Reverse<u64>, usize, usize)> = items
        .iter()
        .zip(spans)
        .map(|(item, &(lo, hi))| (std::cmp::Reverse(item.size), lo, hi))
        .collect();
    order.sort_unstable();
    let mut tree = RangeAddMax::new(points);
    let mut maxima = Vec::new();
    for (std::cmp::Reverse(size), lo, hi) in order {
        tree.add(lo, hi);
        if tree.max() > maxima.len() as u64 {
            maxima.push(size);
        }
    }
    Ok(maxima)
}

/// Segment tree with range add and global maximum, bottom-up (no recursion, no push-down):
/// `max[node]` is the largest count in the node's range counting only additions at or below
/// the node, `added[node]` the additions that covered the node's whole range. A range add
/// touches O(log n) nodes and then recomputes the ancestors of its two ends; at a million
/// records this is several times faster than the recursive lazy tree it replaced. Each node's
/// `[max, added]` sit side by side, in 32 bits (counts are at most the number of records;
/// [`positional_maxima_of`] refuses more than fit): one cache line per node visited, and half
/// the memory of two u64 arrays.
struct RangeAddMax {
    size: usize,
    nodes: Vec<[u32; 2]>,
}

impl RangeAddMax {
    fn new(points: usize) -> Self {
        let size = points.max(1).next_power_of_two();
        RangeAddMax {
            size,
            nodes: vec![[0; 2]; 2 * size],
        }
    }

    fn max(&self) -> u64 {
        u64::from(self.nodes[1][0])
    }

    /// Adds 1 on the closed range `[lo, hi]` of points.
    fn add(&mut self, lo: usize, hi: usize) {
        let (mut l, mut r) = (lo + self.size, hi + self.size + 1);
        let (left, right) = (l, r - 1);
        while l < r {
            if l & 1 == 1 {
                self.nodes[l][0] += 1;
                self.nodes[l][1] += 1;
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                self.nodes[r][0] += 1;
                self.nodes[r][1] += 1;
            }
            l /= 2;
            r /= 2;
        }
        self.pull(left);
        self.pull(right);
    }

    /// Recomputes the ancestors of `node`.
    fn pull(&mut self, mut node: usize) {
        node /= 2;
        while node >= 1 {
            let below = self.nodes[2 * node][0].max(self.nodes[2 * node + 1][0]);
            self.nodes[node][0] = self.nodes[node][1] + below;
            node /= 2;
        }
    }
}

/// The order in which paper Alg. 1 and §5.3 meet the records: operators by breadth descending
/// (equal breadths in execution order, as TFLite's `std::stable_sort`), each operator's
/// unassigned records by size descending (equal sizes in input order). A record is met at the
/// first operator of that order inside its lifetime, so the whole order is a sort by
/// (rank of that operator, size descending, index) — a range-minimum over the timeline instead
/// of walking every operator's profile.
pub(crate) fn breadth_order(
    items: &[Item],
    spans: &[(usize, usize)],
    points: usize,
) -> Result<Vec<usize>, PlanError> {
    let breadths = breadths_at_points(items, spans, points)?;
    let mut by_breadth: Vec<usize> = (0..points).collect();
    by_breadth.sort_by_key(|&p| std::cmp::Reverse(breadths[p]));
    let mut rank = vec![0usize; points];
    for (r, &p) in by_breadth.iter().enumerate() {
        rank[p] = r;
    }
    let size = points.max(1).next_power_of_two();
    let mut tree = vec![usize::MAX; 2 * size];
    tree[size..size + points].copy_from_slice(&rank);
    for node in (1..size).rev() {
        tree[node] = tree[2 * node].min(tree[2 * node + 1]);
    }
    let range_min = |lo: usize, hi: usize| {
        let (mut l, mut r) = (lo + size, hi + size + 1);
        let mut m = usize::MAX;
        while l < r {
            if l & 1 == 1 {
                m = m.min(tree[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                m = m.min(tree[r]);
            }
            l /= 2;
            r /= 2;
        }
        m
    };
    let first_rank: Vec<usize> = spans.iter().map(|&(lo, hi)| range_min(lo, hi)).collect();
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (first_rank[i], std::cmp::Reverse(items[i].raw_size)));
    Ok(order)
}
