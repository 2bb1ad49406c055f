//! Greedy by Breadth for shared objects (paper Alg. 1; TFLite `GreedyByBreadthAssignment`).
//!
//! Operators with the largest breadth constrain the result most, so their tensors are placed
//! first. For each tensor, among the objects free over its whole lifetime: the smallest one
//! at least as large (L.12-17), else the largest smaller one, grown to fit; else a new object.
//! Equal sizes go to the lowest object id, as TFLite's scan in id order does.
//!
//! Objects are indexed by size so the search stops at the first free one instead of scanning
//! every object (the paper's O(kn^2) is the naive form; §4.2 suggests per-object interval
//! structures, which [`Schedule`] is).

use std::collections::BTreeSet;

use super::Schedule;
use crate::items::{Item, Timeline};
use crate::profile::breadth_order;
use crate::{PlanError, SharedObjectsPlan};

pub(crate) fn greedy_by_breadth(items: &[Item]) -> Result<SharedObjectsPlan, PlanError> {
    let timeline = Timeline::new(items);
    let spans = timeline.spans(items);
    let order = breadth_order(items, &spans, timeline.len())?;
    let mut plan = SharedObjectsPlan {
        object_ids: vec![0; items.len()],
        object_sizes: vec![],
    };
    let mut schedules: Vec<Schedule> = Vec::new();
    let mut by_size: BTreeSet<(u64, usize)> = BTreeSet::new();
    for i in order {
        let item = &items[i];
        let free = |&&(_, id): &&(u64, usize)| schedules[id].is_free(item);
        let chosen = match by_size.range((item.size, 0)..).find(free) {
            Some(&key) => Some(key),
            None => {
                // Largest smaller free object; among equal sizes the lowest id.
                let mut smaller = by_size.range(..(item.size, 0)).rev().filter(free);
                smaller.next().map(|&(size, id)| {
                    let lowest = smaller
                        .take_while(|&&(s, _)| s == size)
                        .map(|&(_, id)| id)
                        .min();
                    (size, lowest.map_or(id, |l| l.min(id)))
                })
            }
        };
        let object = match chosen {
            Some((size, object)) => {
                if size < item.size {
                    by_size.remove(&(size, object));
                    by_size.insert((item.size, object));
                    plan.object_sizes[object] = item.size;
                }
                object
            }
            None => {
                plan.object_sizes.push(item.size);
                schedules.push(Schedule::default());
                by_size.insert((item.size, schedules.len() - 1));
                schedules.len() - 1
            }
        };
        schedules[object].insert(item);
        plan.object_ids[i] = object;
    }
    Ok(plan)
}
