//! Greedy by Size for offsets (paper Alg. 3; TFLite `GreedyBySizeAssignment`): tensors by
//! size descending (equal sizes in input order, TFLite's `std::stable_sort`), each into the
//! smallest gap that fits among the tensors live at the same time. The paper's recommended
//! offsets strategy: it reaches the lower bound on most of its networks.

use std::cmp::Reverse;

use super::placement::{place, Fit};
use crate::items::Item;
use crate::{OffsetsPlan, PlanError};

pub(crate) fn greedy_by_size(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    // Sorting (key, index) pairs is the stable order by key, without a random access into
    // `items` at every comparison.
    let mut keyed: Vec<(Reverse<u64>, usize)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (Reverse(item.raw_size), i))
        .collect();
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.into_iter().map(|(_, i)| i).collect();
    place(items, &order, Fit::Best, align)
}
