//! Equality for multi-dimensional sizes (TFLite `EqualityAssignment`, the version it uses for
//! `uint2`/`uint3`): in execution order, each tensor takes the free object of exactly its size
//! with the **lowest id**, else a new object. TFLite scans every object for it; the free
//! objects of each size are kept in an ordered set here, which gives the same object.
//! (The 1D strategy follows TFLite's hashed variant instead, which takes the most recently
//! freed object: TFLite itself picks differently for the two kinds of size.)

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

use super::{execution_order, SharedObjectsPlanNd, UsageRecordNd};

pub(super) fn equality<const D: usize>(records: &[UsageRecordNd<D>]) -> SharedObjectsPlanNd<D> {
    let mut plan = SharedObjectsPlanNd {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    let mut free: HashMap<[u64; D], BTreeSet<usize>> = HashMap::new();
    // Objects in use by the last operator of their current tensor. An object is free for a
    // tensor once that operator is before the tensor's first (TFLite's `dealloc_task`).
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for i in execution_order(records) {
        let r = &records[i];
        while let Some(&Reverse((last, object))) = in_use.peek() {
            if last >= r.first_op {
                break;
            }
            in_use.pop();
            free.entry(plan.object_sizes[object])
                .or_default()
                .insert(object);
        }
        let reused = free.get_mut(&r.size).and_then(|ids| ids.pop_first());
        let object = reused.unwrap_or_else(|| {
            plan.object_sizes.push(r.size);
            plan.object_sizes.len() - 1
        });
        plan.object_ids[i] = object;
        in_use.push(Reverse((r.last_op, object)));
    }
    plan
}
