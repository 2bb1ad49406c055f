//! First fit (TFLite Micro `GreedyMemoryPlanner`): tensors by size descending, each into the
//! lowest gap that fits among the tensors live at the same time. Cheaper to reason about than
//! best fit and what microcontroller builds of TFLite ship.
//!
//! Equal sizes are placed in *reverse* input order, as TFLite Micro places them: its
//! `CalculateOffsetsIfNeeded` fills the array of online-planned buffers from the tail
//! (`idx_from_tail--`, so the last buffer added comes first) and then sorts it with a stable
//! bubble sort (`ReverseSortInPlace`). The order changes the slab: on sizes 30, 30, 20, 20 with
//! lifetimes [3,4], [4,5], [1,3], [1,2], TFLite Micro's order gives 80 bytes where input order
//! would give 60 (`planner/tests/planner_oracles.rs`, `tflite_micro_equal_sizes_in_reverse`).

use std::cmp::Reverse;

use super::placement::{place, Fit};
use crate::items::Item;
use crate::{OffsetsPlan, PlanError};

pub(crate) fn first_fit(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    // Sorting (key, index) pairs is the stable order by key, without a random access into
    // `items` at every comparison.
    let mut keyed: Vec<(Reverse<u64>, Reverse<usize>)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (Reverse(item.raw_size), Reverse(i)))
        .collect();
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.into_iter().map(|(_, Reverse(i))| i).collect();
    place(items, &order, Fit::First, align)
}
