//! Greedy by lifetime: longest-lived tensors first, then by size, each into the smallest gap
//! that fits. This is the temporal order of XLA's heap simulator
//! (`GlobalDecreasingSizeBestFitHeap` with `kTemporal`) and PyTorch's
//! GREEDY_BY_LONGEST_AND_SIZE: long-lived tensors pinned low leave short ones to fill above.
//!
//! Ties follow PyTorch's `lenCmp` (memory_planning/greedy_by_size.cpp): equal lifetime length
//! and size go by first operator (its `liveRangeStartCmp`), then input order (PyTorch's last
//! key is the value's id). The gap is PyTorch's `..._WITH_SMALLEST_GAP`, which is Alg. 3's.

use std::cmp::Reverse;

use super::placement::{place, Fit};
use crate::items::Item;
use crate::{OffsetsPlan, PlanError};

pub(crate) fn greedy_by_lifetime(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| {
        (
            Reverse(items[i].last_op - items[i].first_op),
            Reverse(items[i].raw_size),
            items[i].first_op,
        )
    });
    place(items, &order, Fit::Best, align)
}
