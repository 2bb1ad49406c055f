//! Tensor usage records: the planner's only input.
//!
//! Vocabulary and conventions follow Pisarchyk & Lee, "Efficient Memory Management for Deep
//! Neural Net Inference" (§3): a *tensor usage record* is `{first_op, last_op, size}` where the
//! lifetime is the **closed** interval of operator indices `[first_op, last_op]` in the execution
//! order, exactly as TFLite's `TensorUsageRecord` stores it. Two records conflict iff their closed
//! intervals intersect.

use std::fmt;

/// One intermediate tensor's lifetime and size.
///
/// Invariant: `first_op <= last_op`. `size` is in bytes; planners align it themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct UsageRecord {
    /// Index of the first operator that uses the tensor (usually its producer).
    pub first_op: usize,
    /// Index of the last operator that uses the tensor (inclusive).
    pub last_op: usize,
    /// Size in bytes.
    pub size: u64,
}

impl UsageRecord {
    pub fn new(size: u64, first_op: usize, last_op: usize) -> Self {
        debug_assert!(first_op <= last_op, "usage record with first_op > last_op");
        UsageRecord {
            first_op,
            last_op,
            size,
        }
    }

    /// Whether two closed lifetimes intersect (paper §3: the tensors cannot share memory).
    pub fn overlaps_in_time(&self, other: &UsageRecord) -> bool {
        !(self.last_op < other.first_op || other.last_op < self.first_op)
    }
}

impl fmt::Display for UsageRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{size = {}, ops = [{}, {}]}}",
            self.size, self.first_op, self.last_op
        )
    }
}
