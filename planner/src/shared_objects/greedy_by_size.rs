//! Greedy by Size for shared objects (paper Alg. 2).
//!
//! Tensors by size descending, so an object never grows: each takes the smallest object free
//! over its whole lifetime, else a new object of its own size. Among equal sizes the newest
//! object wins, because Alg. 2 (L.14-15) keeps the last suitable object in creation order.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::Schedule;
use crate::items::Item;
use crate::SharedObjectsPlan;

pub(crate) fn greedy_by_size(items: &[Item]) -> SharedObjectsPlan {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| Reverse(items[i].raw_size));
    let mut plan = SharedObjectsPlan {
        object_ids: vec![0; items.len()],
        object_sizes: vec![],
    };
    let mut schedules: Vec<Schedule> = Vec::new();
    let mut by_size: BTreeSet<(u64, Reverse<usize>)> = BTreeSet::new();
    for i in order {
        let item = &items[i];
        let found = by_size
            .iter()
            .find(|(_, Reverse(id))| schedules[*id].is_free(item));
        let object = match found {
            Some(&(_, Reverse(object))) => object,
            None => {
                plan.object_sizes.push(item.size);
                schedules.push(Schedule::default());
                by_size.insert((item.size, Reverse(schedules.len() - 1)));
                schedules.len() - 1
            }
        };
        schedules[object].insert(item);
        plan.object_ids[i] = object;
    }
    plan
}
