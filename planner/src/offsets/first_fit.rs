//! First fit (TFLite Micro `GreedyMemoryPlanner`): tensors by size descending, each into the
//! lowest gap that fits among the tensors live at the same time. Cheaper to reason about than
//! best fit and what microcontroller builds of TFLite ship.

use std::cmp::Reverse;

use super::placement::{place, Fit};
use crate::items::Item;
use crate::{OffsetsPlan, PlanError};

pub(crate) fn first_fit(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    // Sorting (key, index) pairs is the stable order by key, without a random access into
    // `items` at every comparison.
    let mut keyed: Vec<(Reverse<u64>, usize)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (Reverse(item.raw_size), i))
        .collect();
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.into_iter().map(|(_, i)| i).collect();
    place(items, &order, Fit::First, align)
}
