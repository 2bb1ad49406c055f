//! Greedy in order (Lee et al. 2019, "On-device neural net inference with mobile GPUs";
//! TFLite `GreedyInOrderAssignment`): walk tensors in execution order; when one starts, reuse
//! the free object whose size is closest to it (growing it if smaller), else create one.
//! Simple and O(n log n), but blind to what comes later.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::execution_order;
use crate::items::Item;
use crate::SharedObjectsPlan;

pub(crate) fn greedy_in_order(items: &[Item]) -> SharedObjectsPlan {
    let mut plan = SharedObjectsPlan {
        object_ids: vec![0; items.len()],
        object_sizes: vec![],
    };
    // Free objects ordered by (size, id), as TFLite's `std::set<PoolRecord>`.
    let mut pool: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for i in execution_order(items) {
        let item = &items[i];
        while let Some(&Reverse((last, object))) = in_use.peek() {
            if last >= item.first_op {
                break;
            }
            in_use.pop();
            pool.insert((plan.object_sizes[object], object));
        }
        // Smallest object at least as large, unless the largest smaller one wastes less.
        let mut best: Option<((u64, usize), u64)> = None;
        if let Some(&(size, id)) = pool.range((item.size, 0)..).next() {
            best = Some(((size, id), size - item.size));
        }
        if let Some(&(size, id)) = pool.range(..(item.size, 0)).next_back() {
            let waste = item.size - size;
            if best.is_none_or(|(_, w)| waste < w) {
                best = Some(((size, id), waste));
            }
        }
        let object = match best {
            Some((key, _)) => {
                pool.remove(&key);
                let object = key.1;
                plan.object_sizes[object] = plan.object_sizes[object].max(item.size);
                object
            }
            None => {
                plan.object_sizes.push(item.size);
                plan.object_sizes.len() - 1
            }
        };
        plan.object_ids[i] = object;
        in_use.push(Reverse((item.last_op, object)));
    }
    plan
}
