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
}

/// The sweep's starts and stops: the records that occupy bytes (`entry`), each once at its
/// first and once at its last operator, both sorted by time, then record. Operators up to a
/// few per record are counted into place, straight from the records into the two sorted
/// vectors (three linear passes and nothing else allocated but the counts); beyond, a
/// comparison sort. Building both in record order first and sorting a copy of each, as
/// before, wrote 128 MB at a million records instead of 64 (the check phase at 1M
/// fan_out_growing records: 0.129 s before, 0.113 s after; docs/planner.md, ninth pass).
fn sweep_by_time(
    records: &[UsageRecord],
    entry: impl Fn(usize) -> Option<Live>,
    live: usize,
    last: usize,
) -> (Vec<Live>, Vec<Live>) {
    let entries = || (0..records.len()).filter_map(&entry);
    let stop = |l: Live| Live {
        time: records[l.record].last_op,
        ..l
    };
    if last >= 4 * live + 4096 {
        let mut starts: Vec<Live> = entries().collect();
        let mut stops: Vec<Live> = starts.iter().map(|&l| stop(l)).collect();
        starts.sort_by_key(|l| l.time);
        stops.sort_by_key(|l| l.time);
        return (starts, stops);
    }
    let mut first_of = vec![0usize; last + 2];
    let mut last_of = vec![0usize; last + 2];
    for record in 0..records.len() {
        if entry(record).is_some() {
            first_of[records[record].first_op + 1] += 1;
            last_of[records[record].last_op + 1] += 1;
        }
    }
    for t in 0..=last {
        first_of[t + 1] += first_of[t];
        last_of[t + 1] += last_of[t];
    }
    let empty = Live {
        time: 0,
        record: 0,
        offset: 0,
        end: 0,
    };
    let mut starts = vec![empty; live];
    let mut stops = vec![empty; live];
    for l in entries() {
        starts[first_of[l.time]] = l;
        first_of[l.time] += 1;
        let s = stop(l);
        stops[last_of[s.time]] = s;
        last_of[s.time] += 1;
    }
    (starts, stops)
}

/// Live ranges per chunk of [`LiveRanges`], at most; a full chunk splits in two halves. The
/// check phase at 1M fan_out_growing records (`process_split`, ~500 live ranges): 32 0.102 s,
/// 64 0.104 s, 128 0.111 s, 256 0.137 s (docs/planner.md, ninth pass).
const CHUNK: usize = 32;

/// A live range of the offsets check: `(offset, record, end)`, ordered by `(offset, record)`.
type LiveRange = (u64, usize, u64);

/// The offsets check's live ranges in `(offset, record)` order, as a list of sorted chunks of
/// at most [`CHUNK`] ranges (one level of a B+ tree, with chunks found by a linear walk over
/// their last keys, which stay in cache). Inference graphs and many record sets keep a few
/// dozen ranges live: a few chunks, a binary search and a `memmove` in one or two cache
/// lines. Large live sets (~500 ranges at 1M fan_out_growing records, about 20 chunks) cost
/// the walk and a `memmove` of at most a chunk, where the B-tree that held live sets past 256
/// ranges (the sixth pass) walked three levels of nodes and allocated on splits.
struct LiveRanges {
    /// Never empty; a chunk is empty only when it is the only one.
    chunks: Vec<Vec<LiveRange>>,
}

impl Default for LiveRanges {
    fn default() -> Self {
        LiveRanges {
            chunks: vec![Vec::new()],
        }
    }
}

fn key_of(&(offset, record, _): &LiveRange) -> (u64, usize) {
    (offset, record)
}

impl LiveRanges {
    /// The chunk where `key` is or would go: the first whose last key is at least `key`,
    /// else the last chunk.
    fn chunk_of(&self, key: (u64, usize)) -> usize {
        let last = self.chunks.len() - 1;
        self.chunks[..last]
            .iter()
            .position(|c| c.last().is_some_and(|r| key_of(r) >= key))
            .unwrap_or(last)
    }

    fn insert(&mut self, key: (u64, usize), end: u64) {
        let c = self.chunk_of(key);
        let chunk = &mut self.chunks[c];
        let at = chunk.partition_point(|r| key_of(r) < key);
        chunk.insert(at, (key.0, key.1, end));
        if chunk.len() > CHUNK {
            let upper = chunk.split_off(chunk.len() / 2);
            self.chunks.insert(c + 1, upper);
        }
    }

    fn remove(&mut self, key: (u64, usize)) {
        let c = self.chunk_of(key);
        let chunk = &mut self.chunks[c];
        if let Ok(at) = chunk.binary_search_by(|r| key_of(r).cmp(&key)) {
            chunk.remove(at);
        }
        // An empty chunk goes (unless it is the only one), and one down to a quarter joins
        // its successor when both fit in one, so a shrinking live set does not leave a long
        // walk over near-empty chunks.
        let len = chunk.len();
        if len == 0 && self.chunks.len() > 1 {
            self.chunks.remove(c);
        } else if len < CHUNK / 4
            && c + 1 < self.chunks.len()
            && len + self.chunks[c + 1].len() <= CHUNK
        {
            let upper = self.chunks.remove(c + 1);
            self.chunks[c].extend(upper);
        }
    }

    /// Calls `visit(offset, record, end)` on the ranges with keys below `key`, in descending
    /// key order, while it returns true.
    fn below_descending(&self, key: (u64, usize), mut visit: impl FnMut(u64, usize, u64) -> bool) {
        let c = self.chunk_of(key);
        let below = self.chunks[c].partition_point(|r| key_of(r) < key);
        let lower = self.chunks[..c]
            .iter()
            .rev()
            .flat_map(|chunk| chunk.iter().rev());
        for &(offset, record, end) in self.chunks[c][..below].iter().rev().chain(lower) {
            if !visit(offset, record, end) {
                return;
            }
        }
    }
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
    // The errors of each record, in record order, and how many records take part in the
    // sweep (`entry`), with their last operator.
    let entry = |record: usize| {
        let (r, offset) = (&records[record], plan.offsets[record]);
        let end = offset.checked_add(r.size)?;
        (lifetime_is_valid(r) && r.size > 0 && end <= plan.total_size).then_some(Live {
            time: r.first_op,
            record,
            offset,
            end,
        })
    };
    let (mut live_records, mut last) = (0, 0);
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
                    live_records += 1;
                    last = last.max(r.last_op);
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
    // Sorted by time, the sweep reads everything it needs about a record as two streams,
    // where looking each up by index missed the cache at every record (records start in
    // random order on most plans).
    let (starts, stops) = sweep_by_time(records, entry, live_records, last);
    // Address ranges of the records live at the current operator, by (offset, record).
    let mut live = LiveRanges::default();
    let mut next_stop = 0;
    let mut inside = Vec::new();
    for l in &starts {
        let (now, i, offset, end) = (l.time, l.record, l.offset, l.end);
        // A record whose last operator is before `now` is dead; one ending at `now` is not.
        while next_stop < stops.len() && stops[next_stop].time < now {
            let dead = &stops[next_stop];
            live.remove((dead.offset, dead.record));
            next_stop += 1;
        }
        // While the live ranges are disjoint, only the nearest range below can reach into
        // ours; every live range starting inside ours overlaps it. One walk finds both:
        // down from the last range starting below our end, the ranges starting inside ours
        // come first, then the nearest one below. (Two range queries, one for each, were a
        // quarter of the checker's tree descents.)
        inside.clear();
        live.below_descending((end, 0), |start, record, range_end| {
            if start >= offset {
                inside.push(record);
                return true;
            }
            if range_end > offset {
                errors.push(CheckError::AddressOverlap {
                    first: record,
                    second: i,
                });
            }
            false
        });
        // In ascending order of offset, as they were reported.
        for &inside in inside.iter().rev() {
            errors.push(CheckError::AddressOverlap {
                first: inside,
                second: i,
            });
        }
        live.insert((offset, i), end);
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
