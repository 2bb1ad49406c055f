//! Naive offsets: bump allocation, every tensor its own range in input order (the thesis'
//! `bump_allocation` baseline). The slab is the sum of all aligned sizes.

use crate::error::overflow;
use crate::items::Item;
use crate::{OffsetsPlan, PlanError};

pub(crate) fn naive(items: &[Item]) -> Result<OffsetsPlan, PlanError> {
    let mut offsets = Vec::with_capacity(items.len());
    let mut total_size = 0u64;
    for item in items {
        offsets.push(total_size);
        total_size = total_size
            .checked_add(item.size)
            .ok_or_else(|| overflow("naive slab"))?;
    }
    Ok(OffsetsPlan {
        offsets,
        total_size,
    })
}
