//! First fit (TFLite Micro `GreedyMemoryPlanner`): tensors by size descending, each into the
//! lowest gap that fits among the tensors live at the same time. Cheaper to reason about than
//! best fit and what microcontroller builds of TFLite ship.

use std::cmp::Reverse;

use super::placement::{place, Fit};
use crate::planner::items::Item;
use crate::planner::{OffsetsPlan, PlanError};

pub(crate) fn first_fit(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    // TFLite Micro's `ReverseSortInPlace` is a stable bubble sort on size.
    order.sort_by_key(|&i| Reverse(items[i].raw_size));
    place(items, &order, Fit::First, align)
}
