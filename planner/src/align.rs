//! Alignment of tensor sizes and offsets.

use super::PlanError;

/// Alignment used when the caller has no opinion: one cache line, and enough for every SIMD
/// width that codegen emits, so every tensor can be loaded with aligned vector loads.
pub const DEFAULT_ALIGNMENT: u64 = 64;

/// Rounds `size` up to a multiple of `align` (any `align >= 1`, not only powers of two).
pub fn align_size(size: u64, align: u64) -> Result<u64, PlanError> {
    if align == 0 {
        return Err(PlanError::ZeroAlignment);
    }
    let rem = size % align;
    if rem == 0 {
        return Ok(size);
    }
    size.checked_add(align - rem)
        .ok_or(PlanError::AlignmentOverflow { size, align })
}
