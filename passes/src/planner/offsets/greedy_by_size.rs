//! Greedy by Size for offsets (paper Alg. 3; TFLite `GreedyBySizeAssignment`): tensors by
//! size descending (equal sizes in input order, TFLite's `std::stable_sort`), each into the
//! smallest gap that fits among the tensors live at the same time. The paper's recommended
//! offsets strategy: it reaches the lower bound on most of its networks.

use std::cmp::Reverse;

use super::placement::{place, Fit};
use crate::planner::items::Item;
use crate::planner::{OffsetsPlan, PlanError};

pub(crate) fn greedy_by_size(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    // Raw size descending is also aligned size descending; raw sizes keep TFLite's order.
    order.sort_by_key(|&i| Reverse(items[i].raw_size));
    place(items, &order, Fit::Best, align)
}
