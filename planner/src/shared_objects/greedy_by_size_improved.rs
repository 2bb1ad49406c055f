//! Greedy by Size Improved (paper §4.4), as TFLite implements it in
//! `GreedyBySizeDistPriorityAssignment` (which TFLite ships as GREEDY_BY_SIZE).
//!
//! Two refinements of Alg. 2. Stages: a tensor's *position* is the last positional maximum
//! that is still >= its size, and tensors are assigned position by position, since the lower
//! bound says the k-th object should be about the k-th positional maximum. Pairing: inside a
//! stage, the next assignment is the (tensor, object) pair with the smallest time gap between
//! the tensor and the object's nearest tensor, so objects are reused back to back; ties go to
//! the larger tensor, then to the lower record index. Objects may grow.
//!
//! It keeps a distance per (unassigned tensor, object) and scans every tensor per step, so it
//! is O(n^2 + n k) in time and O(n k) in memory; it refuses inputs above [`MAX_RECORDS`].

use crate::items::{Item, Timeline};
use crate::profile::positional_maxima_of;
use crate::{PlanError, SharedObjectsPlan};

/// Largest input accepted: beyond it the distance table would not fit in memory comfortably.
pub(crate) const MAX_RECORDS: usize = 1 << 15;

/// Marks "no object" and "lifetimes intersect" (TFLite's `kNotAssigned`).
const NONE: u64 = u64::MAX;

struct Priority {
    position: usize,
    best_dist: u64,
    best_object: usize,
    /// Gap to each object, `NONE` once the object holds a tensor live at the same time.
    dist: Vec<u64>,
}

impl Priority {
    fn recalc_best(&mut self) {
        self.best_dist = NONE;
        for (object, &d) in self.dist.iter().enumerate() {
            if d < self.best_dist {
                self.best_dist = d;
                self.best_object = object;
            }
        }
    }
}

fn time_gap(a: &Item, b: &Item) -> u64 {
    if a.last_op < b.first_op {
        (b.first_op - a.last_op) as u64
    } else if b.last_op < a.first_op {
        (a.first_op - b.last_op) as u64
    } else {
        NONE
    }
}

pub(crate) fn greedy_by_size_improved(items: &[Item]) -> Result<SharedObjectsPlan, PlanError> {
    if items.len() > MAX_RECORDS {
        return Err(PlanError::TooLarge {
            strategy: "greedy_by_size_improved",
            records: items.len(),
            reason: "its per-object distance table is O(n k); the limit is 32768 records",
        });
    }
    let timeline = Timeline::new(items);
    let spans = timeline.spans(items);
    let maxima = positional_maxima_of(items, &spans, timeline.len())?;
    let mut priorities: Vec<Priority> = items
        .iter()
        .map(|item| Priority {
            position: maxima
                .partition_point(|&m| m >= item.size)
                .saturating_sub(1),
            best_dist: NONE,
            best_object: 0,
            dist: Vec::new(),
        })
        .collect();
    let higher = |a: &Priority, ai: &Item, b: &Priority, bi: &Item| {
        (
            a.position,
            a.best_dist,
            std::cmp::Reverse(ai.size),
            std::cmp::Reverse(ai.raw_size),
        ) < (
            b.position,
            b.best_dist,
            std::cmp::Reverse(bi.size),
            std::cmp::Reverse(bi.raw_size),
        )
    };

    let mut plan = SharedObjectsPlan {
        object_ids: vec![0; items.len()],
        object_sizes: vec![],
    };
    let mut unassigned: Vec<usize> = (0..items.len()).collect();
    while !unassigned.is_empty() {
        let mut pick = 0;
        for k in 1..unassigned.len() {
            let (a, b) = (unassigned[k], unassigned[pick]);
            if higher(&priorities[a], &items[a], &priorities[b], &items[b]) {
                pick = k;
            }
        }
        let chosen = unassigned.remove(pick);
        let item = &items[chosen];
        let new_object = priorities[chosen].best_dist == NONE;
        let object = if new_object {
            plan.object_sizes.push(item.size);
            plan.object_sizes.len() - 1
        } else {
            let object = priorities[chosen].best_object;
            plan.object_sizes[object] = plan.object_sizes[object].max(item.size);
            object
        };
        plan.object_ids[chosen] = object;
        priorities[chosen].dist = Vec::new();

        for &other in &unassigned {
            let p = &mut priorities[other];
            if !new_object && p.dist.get(object).copied().unwrap_or(NONE) == NONE {
                continue;
            }
            let d = time_gap(&items[other], item);
            if new_object {
                p.dist.push(d);
            } else if d == NONE {
                if let Some(slot) = p.dist.get_mut(object) {
                    *slot = NONE;
                }
                if p.best_object == object {
                    p.recalc_best();
                }
            } else if let Some(slot) = p.dist.get_mut(object) {
                *slot = (*slot).min(d);
            }
            if d < p.best_dist {
                p.best_dist = d;
                p.best_object = object;
            }
        }
    }
    Ok(plan)
}
