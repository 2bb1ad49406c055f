//! Equality: reuse a free object of exactly the tensor's (aligned) size, else create one
//! (TFLite `EqualityAssignment`). Useful when shapes repeat, and the only strategy that never
//! grows an object.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::execution_order;
use crate::items::Item;
use crate::SharedObjectsPlan;

pub(crate) fn equality(items: &[Item]) -> SharedObjectsPlan {
    let mut plan = SharedObjectsPlan {
        object_ids: vec![0; items.len()],
        object_sizes: vec![],
    };
    // Free objects by size; each list is a stack, as TFLite pops the most recently freed.
    let mut pool: HashMap<u64, Vec<usize>> = HashMap::new();
    // Objects in use, released in order of (last_op, object id) like TFLite's queue.
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for i in execution_order(items) {
        let item = &items[i];
        while let Some(&Reverse((last, object))) = in_use.peek() {
            if last >= item.first_op {
                break;
            }
            in_use.pop();
            pool.entry(plan.object_sizes[object])
                .or_default()
                .push(object);
        }
        let object = match pool.get_mut(&item.size).and_then(|free| free.pop()) {
            Some(object) => object,
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
