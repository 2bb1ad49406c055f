//! An independent checker for plans, in the spirit of regalloc2's checker: it shares no code
//! with the strategies (not the profiles, not the time axis, not even the overlap test), so a
//! bug in the planner's helpers cannot hide itself.
//!
//! Both checks sweep the records in time order instead of testing every pair, so they are
//! O(n log n) and usable on every plan of every test and benchmark.

use super::multidim::{SharedObjectsPlanNd, UsageRecordNd};
use super::{OffsetsPlan, SharedObjectsPlan, UsageRecord};

/// One way a plan breaks the contract; record indices refer to the input records.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("the plan has {found} entries for {expected} usage records")]
    LengthMismatch { expected: usize, found: usize },
    #[error("usage record {record} has first_op after last_op")]
    InvalidLifetime { record: usize },
    #[error("0 is not an alignment")]
    ZeroAlignment,
    #[error("record {record}: offset {offset} is not a multiple of {align}")]
    Misaligned {
        record: usize,
        offset: u64,
        align: u64,
    },
    #[error(
        "record {record}: {size} bytes at offset {offset} do not fit in a slab of {total_size}"
    )]
    OutOfSlab {
        record: usize,
        offset: u64,
        size: u64,
        total_size: u64,
    },
    #[error("records {first} and {second} are live at the same time and overlap in memory")]
    AddressOverlap { first: usize, second: usize },
    #[error("record {record} is assigned object {object}, but there are only {objects} objects")]
    UnknownObject {
        record: usize,
        object: usize,
        objects: usize,
    },
    #[error("record {record} needs {size} bytes but object {object} has {object_size}")]
    ObjectTooSmall {
        record: usize,
        object: usize,
        size: u64,
        object_size: u64,
    },
    #[error("records {first} and {second} are live at the same time and share object {object}")]
    SharedObjectConflict {
        first: usize,
        second: usize,
        object: usize,
    },
    #[error("the object sizes add up to more than u64 can hold")]
    CostOverflow,
    #[error("record {record} of size {size:?} does not fit object {object} of size {object_size:?} in every dimension")]
    ObjectDoesNotCover {
        record: usize,
        object: usize,
        size: Vec<u64>,
        object_size: Vec<u64>,
    },
    /// A multi-dimensional object must be exactly the component-wise maximum of its tensors'
    /// sizes (zero for an object without tensors): anything larger is memory no tensor uses.
    #[error("object {object} has size {size:?}, but the component-wise maximum of its tensors' sizes is {tight:?}")]
    ObjectNotTight {
        object: usize,
        size: Vec<u64>,
        tight: Vec<u64>,
    },
}

fn lifetime_is_valid(r: &UsageRecord) -> bool {
    r.first_op <= r.last_op
}

/// A record in the offsets check's sweep: when (its first or its last operator) and where.
#[derive(Clone, Copy)]
struct Live {
    time: usize,
    record: usize,
    offset: u64,
    end: u64,
    /// Its place in (offset, record) order among the sweep's records.
    rank: usize,
}

/// A set of ranks `0..n` as a tree of 64-bit words, each bit of a level telling whether the
/// word below it has a bit set: membership, the nearest member below or above a rank, in a
/// few word operations per level (log64 n levels). The offsets check's set of live ranges,
/// by rank in (offset, record) order; a B-tree of the live ranges cost about 600
/// instructions a record (insert, remove, range query) on 300k fan_out_growing records.
struct RankSet {
    /// `levels[0]`: one bit per rank; `levels[k + 1]`: one bit per word of `levels[k]`.
    levels: Vec<Vec<u64>>,
}

impl RankSet {
    fn new(n: usize) -> Self {
        let mut levels = Vec::new();
        let mut len = n.max(1);
        loop {
            let words = len.div_ceil(64);
            levels.push(vec![0u64; words]);
            if words == 1 {
                return RankSet { levels };
            }
            len = words;
        }
    }

    fn insert(&mut self, mut rank: usize) {
        for level in &mut self.levels {
            let word = &mut level[rank / 64];
            let was = *word;
            *word |= 1 << (rank % 64);
            if was != 0 {
                return;
            }
            rank /= 64;
        }
    }

    fn remove(&mut self, mut rank: usize) {
        for level in &mut self.levels {
            let word = &mut level[rank / 64];
            *word &= !(1 << (rank % 64));
            if *word != 0 {
                return;
            }
            rank /= 64;
        }
    }

    /// The largest member below `rank`.
    fn below(&self, mut rank: usize) -> Option<usize> {
        for (height, level) in self.levels.iter().enumerate() {
            let bits = level[rank / 64] & ((1u64 << (rank % 64)) - 1);
            if bits != 0 {
                let mut found = rank / 64 * 64 + 63 - bits.leading_zeros() as usize;
                for lower in self.levels[..height].iter().rev() {
                    found = found * 64 + 63 - lower[found].leading_zeros() as usize;
                }
                return Some(found);
            }
            rank /= 64;
        }
        None
    }

    /// The smallest member above `rank`.
    fn above(&self, mut rank: usize) -> Option<usize> {
        for (height, level) in self.levels.iter().enumerate() {
            let bits = match rank % 64 {
                63 => 0,
                bit => level[rank / 64] & (u64::MAX << (bit + 1)),
            };
            if bits != 0 {
                let mut found = rank / 64 * 64 + bits.trailing_zeros() as usize;
                for lower in self.levels[..height].iter().rev() {
                    found = found * 64 + lower[found].trailing_zeros() as usize;
                }
                return Some(found);
            }
            rank /= 64;
        }
        None
    }
}

/// Sorts sweep entries by time, stably. Operators up to a few per entry are counted into
/// place (two linear passes); beyond, a comparison sort.
fn sort_by_time(entries: &mut Vec<Live>) {
    let Some(last) = entries.iter().map(|l| l.time).max() else {
        return;
    };
    if last >= 4 * entries.len() + 4096 {
        entries.sort_by_key(|l| l.time);
        return;
    }
    let mut first_of = vec![0usize; last + 2];
    for l in entries.iter() {
        first_of[l.time + 1] += 1;
    }
    for t in 0..=last {
        first_of[t + 1] += first_of[t];
    }
    let mut sorted = entries.clone();
    for l in entries.iter() {
        sorted[first_of[l.time]] = *l;
        first_of[l.time] += 1;
    }
    *entries = sorted;
}

/// Checks an offsets plan: one aligned offset per record, every record's `size` bytes inside
/// `[0, total_size)`, and no two records whose closed lifetimes intersect sharing a byte.
/// Records of size 0 occupy no bytes. Every error found is returned; if the plan is invalid
/// at least one is.
pub fn check_offsets(
    records: &[UsageRecord],
    plan: &OffsetsPlan,
    align: u64,
) -> Result<(), Vec<CheckError>> {
    if plan.offsets.len() != records.len() {
        return Err(vec![CheckError::LengthMismatch {
            expected: records.len(),
            found: plan.offsets.len(),
        }]);
    }
    let mut errors = Vec::new();
    if align == 0 {
        errors.push(CheckError::ZeroAlignment);
    }
    // The records that take part in the sweep, each with everything the sweep reads about
    // it, made in record order: sorted by time, the sweep then reads them as two streams,
    // where looking each up by index missed the cache at every record (records start in
    // random order on most plans).
    let mut starts: Vec<Live> = Vec::with_capacity(records.len());
    for (record, (r, &offset)) in records.iter().zip(&plan.offsets).enumerate() {
        if !lifetime_is_valid(r) {
            errors.push(CheckError::InvalidLifetime { record });
            continue;
        }
        if align != 0 && offset % align != 0 {
            errors.push(CheckError::Misaligned {
                record,
                offset,
                align,
            });
        }
        match offset.checked_add(r.size) {
            Some(end) if end <= plan.total_size => {
                if r.size > 0 {
                    starts.push(Live {
                        time: r.first_op,
                        record,
                        offset,
                        end,
                        rank: 0,
                    });
                }
            }
            _ => errors.push(CheckError::OutOfSlab {
                record,
                offset,
                size: r.size,
                total_size: plan.total_size,
            }),
        }
    }
    // Each record's rank in (offset, record) order: the live set below is a set of ranks.
    // A record's ranges are found through `by_rank`, which holds what the sweep reads.
    let mut keys: Vec<(u64, usize)> = starts
        .iter()
        .enumerate()
        .map(|(k, l)| (l.offset, k))
        .collect();
    // (offset, position in `starts`), and `starts` is in record order: (offset, record).
    keys.sort_unstable();
    let mut by_rank: Vec<(u64, u64, usize)> = Vec::with_capacity(keys.len());
    let mut rank_of = vec![0usize; starts.len()];
    for (rank, &(offset, k)) in keys.iter().enumerate() {
        let l = &starts[k];
        by_rank.push((offset, l.end, l.record));
        rank_of[k] = rank;
    }
    drop(keys);
    for (l, &rank) in starts.iter_mut().zip(&rank_of) {
        l.rank = rank;
    }
    drop(rank_of);
    let mut stops: Vec<Live> = starts
        .iter()
        .map(|l| Live {
            time: records[l.record].last_op,
            ..*l
        })
        .collect();
    // By time, then record (both made in record order, and the sort is stable).
    sort_by_time(&mut starts);
    sort_by_time(&mut stops);
    // The ranks of the records live at the current operator.
    let mut live = RankSet::new(by_rank.len());
    let mut next_stop = 0;
    let (mut inside_below, mut inside_above) = (Vec::new(), Vec::new());
    for l in &starts {
        let (now, i, offset, end) = (l.time, l.record, l.offset, l.end);
        // A record whose last operator is before `now` is dead; one ending at `now` is not.
        while next_stop < stops.len() && stops[next_stop].time < now {
            live.remove(stops[next_stop].rank);
            next_stop += 1;
        }
        // While the live ranges are disjoint, only the nearest range below can reach into
        // ours; every live range starting inside ours overlaps it. In (offset, record) order
        // those starting inside ours are the neighbours of our rank on either side, up to
        // the first starting below our offset (the nearest one below) and the first starting
        // at or past our end.
        inside_below.clear();
        inside_above.clear();
        let mut below = None;
        let mut at = l.rank;
        while let Some(rank) = live.below(at) {
            let (start, range_end, record) = by_rank[rank];
            if start < offset {
                if range_end > offset {
                    below = Some(record);
                }
                break;
            }
            inside_below.push(record);
            at = rank;
        }
        at = l.rank;
        while let Some(rank) = live.above(at) {
            let (start, _, record) = by_rank[rank];
            if start >= end {
                break;
            }
            inside_above.push(record);
            at = rank;
        }
        if let Some(first) = below {
            errors.push(CheckError::AddressOverlap { first, second: i });
        }
        // In ascending order of (offset, record), as they were reported.
        for &first in inside_below.iter().rev().chain(&inside_above) {
            errors.push(CheckError::AddressOverlap { first, second: i });
        }
        live.insert(l.rank);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Checks a shared-objects plan: one known object per record, each record no larger than its
/// object, no two records whose closed lifetimes intersect on the same object, and a cost
/// (sum of object sizes) that fits in u64.
pub fn check_shared_objects(
    records: &[UsageRecord],
    plan: &SharedObjectsPlan,
) -> Result<(), Vec<CheckError>> {
    if plan.object_ids.len() != records.len() {
        return Err(vec![CheckError::LengthMismatch {
            expected: records.len(),
            found: plan.object_ids.len(),
        }]);
    }
    let mut errors = Vec::new();
    let objects = plan.object_sizes.len();
    let mut tenants: Vec<Vec<usize>> = vec![Vec::new(); objects];
    for (record, (r, &object)) in records.iter().zip(&plan.object_ids).enumerate() {
        if !lifetime_is_valid(r) {
            errors.push(CheckError::InvalidLifetime { record });
            continue;
        }
        let Some(&object_size) = plan.object_sizes.get(object) else {
            errors.push(CheckError::UnknownObject {
                record,
                object,
                objects,
            });
            continue;
        };
        if r.size > object_size {
            errors.push(CheckError::ObjectTooSmall {
                record,
                object,
                size: r.size,
                object_size,
            });
        }
        tenants[object].push(record);
    }
    if plan
        .object_sizes
        .iter()
        .try_fold(0u64, |a, &s| a.checked_add(s))
        .is_none()
    {
        errors.push(CheckError::CostOverflow);
    }
    for (object, list) in tenants.iter_mut().enumerate() {
        list.sort_by_key(|&i| (records[i].first_op, i));
        // The tenant (sorted by start) that lives longest so far: any later tenant starting
        // no later than its last operator shares time with it.
        let mut longest: Option<usize> = None;
        for &i in list.iter() {
            if let Some(l) = longest {
                if records[i].first_op <= records[l].last_op {
                    errors.push(CheckError::SharedObjectConflict {
                        first: l,
                        second: i,
                        object,
                    });
                }
                if records[i].last_op > records[l].last_op {
                    longest = Some(i);
                }
            } else {
                longest = Some(i);
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Checks a plan of multi-dimensional shared objects ([`crate::multidim`]): one known object
/// per record; each object exactly the component-wise maximum of its records' sizes (so it
/// covers each of them in every dimension and wastes nothing beyond that); no two records whose
/// closed lifetimes intersect on the same object; and a cost, the sum of the object volumes as
/// TFLite counts texture memory, that fits in u64.
pub fn check_shared_objects_nd<const D: usize>(
    records: &[UsageRecordNd<D>],
    plan: &SharedObjectsPlanNd<D>,
) -> Result<(), Vec<CheckError>> {
    if plan.object_ids.len() != records.len() {
        return Err(vec![CheckError::LengthMismatch {
            expected: records.len(),
            found: plan.object_ids.len(),
        }]);
    }
    let mut errors = Vec::new();
    let objects = plan.object_sizes.len();
    let mut tight = vec![[0u64; D]; objects];
    let mut tenants: Vec<Vec<usize>> = vec![Vec::new(); objects];
    for (record, (r, &object)) in records.iter().zip(&plan.object_ids).enumerate() {
        if r.first_op > r.last_op {
            errors.push(CheckError::InvalidLifetime { record });
            continue;
        }
        let Some(object_size) = plan.object_sizes.get(object) else {
            errors.push(CheckError::UnknownObject {
                record,
                object,
                objects,
            });
            continue;
        };
        if (0..D).any(|k| r.size[k] > object_size[k]) {
            errors.push(CheckError::ObjectDoesNotCover {
                record,
                object,
                size: r.size.to_vec(),
                object_size: object_size.to_vec(),
            });
        }
        for (t, &extent) in tight[object].iter_mut().zip(&r.size) {
            *t = (*t).max(extent);
        }
        tenants[object].push(record);
    }
    for (object, (size, tight)) in plan.object_sizes.iter().zip(&tight).enumerate() {
        // A size that does not cover a tenant was reported above; the rest are too large.
        if size != tight && (0..D).all(|k| size[k] >= tight[k]) {
            errors.push(CheckError::ObjectNotTight {
                object,
                size: size.to_vec(),
                tight: tight.to_vec(),
            });
        }
    }
    let cost = plan.object_sizes.iter().try_fold(0u64, |a, s| {
        s.iter()
            .try_fold(1u64, |v, &e| v.checked_mul(e))
            .and_then(|v| a.checked_add(v))
    });
    if cost.is_none() {
        errors.push(CheckError::CostOverflow);
    }
    for (object, list) in tenants.iter_mut().enumerate() {
        list.sort_by_key(|&i| (records[i].first_op, i));
        // As in `check_shared_objects`: the longest-lived tenant so far, by start order.
        let mut longest: Option<usize> = None;
        for &i in list.iter() {
            match longest {
                Some(l) if records[i].first_op <= records[l].last_op => {
                    errors.push(CheckError::SharedObjectConflict {
                        first: l,
                        second: i,
                        object,
                    });
                    if records[i].last_op > records[l].last_op {
                        longest = Some(i);
                    }
                }
                _ => longest = Some(i),
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod rank_set_tests {
    use super::RankSet;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Membership, the nearest member below and above, against a B-tree set, on sets
        /// of one, two and three levels.
        #[test]
        fn rank_set_agrees_with_a_btree_set(
            n in prop::sample::select(vec![1usize, 63, 64, 65, 4096, 4097, 300_000]),
            ops in prop::collection::vec((any::<bool>(), any::<prop::sample::Index>()), 1..200),
        ) {
            let mut set = RankSet::new(n);
            let mut reference = BTreeSet::new();
            for (insert, index) in ops {
                let rank = index.index(n);
                if insert {
                    set.insert(rank);
                    reference.insert(rank);
                } else {
                    set.remove(rank);
                    reference.remove(&rank);
                }
                for probe in [rank, 0, n - 1, index.index(n.min(130))] {
                    prop_assert_eq!(set.below(probe), reference.range(..probe).next_back().copied());
                    prop_assert_eq!(set.above(probe), reference.range(probe + 1..).next().copied());
                }
            }
        }
    }
}
