//! Shared objects laid end to end in object-id order (paper §5: every shared-objects plan is
//! an offsets plan; TFLite `ObjectsToOffsets`). Object sizes are aligned, so offsets are too.

use crate::error::overflow;
use crate::{OffsetsPlan, PlanError, SharedObjectsPlan};

/// Lays `plan`'s objects end to end in object-id order: object k starts at the sum of the
/// sizes of objects `0..k`, and the slab is the plan's cost.
pub fn objects_to_offsets(plan: &SharedObjectsPlan) -> Result<OffsetsPlan, PlanError> {
    let mut object_offsets = Vec::with_capacity(plan.object_sizes.len());
    let mut total_size = 0u64;
    for &size in &plan.object_sizes {
        object_offsets.push(total_size);
        total_size = total_size
            .checked_add(size)
            .ok_or_else(|| overflow("objects slab"))?;
    }
    let offsets = plan
        .object_ids
        .iter()
        .map(|&id| {
            object_offsets
                .get(id)
                .copied()
                .ok_or(PlanError::Internal("object id out of range"))
        })
        .collect::<Result<Vec<u64>, PlanError>>()?;
    Ok(OffsetsPlan {
        offsets,
        total_size,
    })
}
