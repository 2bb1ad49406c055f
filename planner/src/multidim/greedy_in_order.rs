//! Greedy in order for multi-dimensional sizes (TFLite `GreedyInOrderAssignmentMultidimensional`):
//! as the 1D strategy, walk tensors in execution order and reuse a free object, but an object
//! never grows, since a texture larger in one dimension and smaller in another has no "closest"
//! enlargement. A tensor takes, among the free objects that cover it in every dimension, the one
//! whose volume exceeds its own the least; ties go to the object freed first (TFLite's pool is a
//! list in release order and keeps the first of equal differences). Objects are released in
//! order of (last operator, id), as TFLite's queue pops them.
//!
//! Each placement scans the free pool, as TFLite does: covering in several dimensions has no
//! total order to search, and texture counts are those of GPU graphs, not of traces.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{execution_order, volume, SharedObjectsPlanNd, UsageRecordNd};

pub(super) fn greedy_in_order<const D: usize>(
    records: &[UsageRecordNd<D>],
) -> SharedObjectsPlanNd<D> {
    let mut plan = SharedObjectsPlanNd {
        object_ids: vec![0; records.len()],
        object_sizes: Vec::new(),
    };
    // Free objects in release order.
    let mut pool: Vec<usize> = Vec::new();
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for i in execution_order(records) {
        let r = &records[i];
        while let Some(&Reverse((last, object))) = in_use.peek() {
            if last >= r.first_op {
                break;
            }
            in_use.pop();
            pool.push(object);
        }
        // Volumes were checked by the caller; an object's size is one of the records' sizes.
        let own = volume(&r.size).unwrap_or(u64::MAX);
        let mut best: Option<(usize, u64)> = None;
        for (k, &object) in pool.iter().enumerate() {
            let size = &plan.object_sizes[object];
            if size.iter().zip(&r.size).all(|(o, t)| o >= t) {
                let waste = volume(size).unwrap_or(u64::MAX).saturating_sub(own);
                if best.is_none_or(|(_, w)| waste < w) {
                    best = Some((k, waste));
                }
            }
        }
        let object = match best {
            // `remove`, not `swap_remove`: the pool's order decides later ties.
            Some((k, _)) => pool.remove(k),
            None => {
                plan.object_sizes.push(r.size);
                plan.object_sizes.len() - 1
            }
        };
        plan.object_ids[i] = object;
        in_use.push(Reverse((r.last_op, object)));
    }
    plan
}
