//! Operator profiles, breadths, positional maxima and the two lower bounds (paper §3, §4.1, §5.1).
//!
//! All functions take the alignment the plan will use, because the paper's sizes are aligned
//! sizes and a bound must be comparable with the plans it bounds.

use super::error::overflow;
use super::items::{prepare, radix_sort_by_key, Item, Timeline};
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
    // One ranking of the operators for both the points and the spans.
    let (timeline, spans) = Timeline::with_spans(&items);
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
    // By size descending; the order among equal sizes changes no maximum.
    let mut order: Vec<(u64, usize, usize)> = items
        .iter()
        .zip(spans)
        .map(|(item, &(lo, hi))| (!item.size, lo, hi))
        .collect();
    radix_sort_by_key(&mut order, |&(key, _, _)| key);
    let mut tree = RangeAddMax::new(points);
    let mut maxima = Vec::new();
    for (complement, lo, hi) in order {
        let size = !complement;
        tree.add(lo, hi);
        if tree.max() > maxima.len() as u64 {
            maxima.push(size);
        }
    }
    Ok(maxima)
}

/// Points per leaf block of [`RangeAddMax`]: one 64-byte cache line of 32-bit counts.
const LEAF_BLOCK: usize = 16;

/// One leaf block's counts, on a cache line of its own.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Counts([u32; LEAF_BLOCK]);

/// Range add of 1 and global maximum over the timeline's points.
///
/// The records arrive by size, so every add lands at a random point: what the structure costs
/// is its cache misses. The counts of [`LEAF_BLOCK`] consecutive points share a cache line and
/// are added to directly; above them a bottom-up segment tree over the blocks (one node per
/// block: 16 times smaller than a tree over points, about 1 MB at a million points, so it
/// mostly stays in cache) keeps, per node, `max`, the largest count in its range counting only
/// additions at or below the node, and `added`, the additions that covered its whole range.
/// After an add the two boundary blocks' paths are recomputed up to where they meet (every
/// node the add covered hangs off them), and above that only while a node's value changes:
/// counts only grow, so once a node's maximum stays the same so do its ancestors', and most
/// adds stop a few levels up. Each node's `[max, added]` sit side by side in 32 bits (counts
/// are at most the number of records; [`positional_maxima_of`] refuses more than fit).
struct RangeAddMax {
    counts: Vec<Counts>,
    blocks: usize,
    nodes: Vec<[u32; 2]>,
}

impl RangeAddMax {
    fn new(points: usize) -> Self {
        let blocks = points.div_ceil(LEAF_BLOCK).max(1).next_power_of_two();
        RangeAddMax {
            counts: vec![Counts([0; LEAF_BLOCK]); blocks],
            blocks,
            nodes: vec![[0; 2]; 2 * blocks],
        }
    }

    fn max(&self) -> u64 {
        u64::from(self.nodes[1][0])
    }

    /// Adds 1 on the closed range `[lo, hi]` of points.
    fn add(&mut self, lo: usize, hi: usize) {
        let (first, last) = (lo / LEAF_BLOCK, hi / LEAF_BLOCK);
        if first == last {
            self.add_in_block(first, lo % LEAF_BLOCK, hi % LEAF_BLOCK);
        } else {
            self.add_in_block(first, lo % LEAF_BLOCK, LEAF_BLOCK - 1);
            self.add_in_block(last, 0, hi % LEAF_BLOCK);
            // The whole blocks between, as the canonical cover of the tree's leaves.
            let (mut l, mut r) = (first + 1 + self.blocks, last + self.blocks);
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
        }
        self.pull(first, last);
    }

    /// Adds 1 to the counts `from..=to` of `block` and refreshes its leaf node.
    fn add_in_block(&mut self, block: usize, from: usize, to: usize) {
        let counts = &mut self.counts[block].0;
        for c in &mut counts[from..=to] {
            *c += 1;
        }
        let leaf = &mut self.nodes[self.blocks + block];
        leaf[0] = leaf[1] + counts.iter().copied().max().unwrap_or(0);
    }

    /// Recomputes the ancestors of the leaves of blocks `first <= last` after an add.
    fn pull(&mut self, first: usize, last: usize) {
        let (mut l, mut r) = (first + self.blocks, last + self.blocks);
        // Below where the paths meet, nodes the add covered hang off them: recompute all.
        while l != r {
            l /= 2;
            r /= 2;
            self.recompute(l);
            if r != l {
                self.recompute(r);
            }
        }
        // Above, nothing else changed: stop at the first node whose maximum stays.
        let mut node = l / 2;
        while node >= 1 && self.recompute(node) {
            node /= 2;
        }
    }

    /// Recomputes `node`'s maximum from its children; whether it changed.
    fn recompute(&mut self, node: usize) -> bool {
        let below = self.nodes[2 * node][0].max(self.nodes[2 * node + 1][0]);
        let max = self.nodes[node][1] + below;
        let changed = max != self.nodes[node][0];
        self.nodes[node][0] = max;
        changed
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
