//! Greedy by Size for offsets (paper Alg. 3; TFLite `GreedyBySizeAssignment`): tensors by
//! size descending (equal sizes in input order, TFLite's `std::stable_sort`), each into the
//! smallest gap that fits among the tensors live at the same time. The paper's recommended
//! offsets strategy: it reaches the lower bound on most of its networks.

use super::placement::{place, Fit};
use crate::items::{radix_sort_by_key, Item};
use crate::{OffsetsPlan, PlanError};

pub(crate) fn greedy_by_size(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    // Sizes descending, equal sizes by index: a stable radix sort of (complemented size,
    // index) pairs, the key beside its index rather than read through it at every pass.
    let mut keyed: Vec<(u64, usize)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (!item.raw_size, i))
        .collect();
    radix_sort_by_key(&mut keyed, |&(key, _)| key);
    let order: Vec<usize> = keyed.into_iter().map(|(_, i)| i).collect();
    place(items, &order, Fit::Best, align)
}
