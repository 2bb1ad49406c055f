//! The planner's one error type: every failure is data naming the record or strategy at fault.

/// Why a plan could not be produced. Records come from user files, so every malformed or
/// extreme input ends here instead of in a panic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("usage record {record} has first_op {first_op} after last_op {last_op}")]
    InvalidLifetime {
        record: usize,
        first_op: usize,
        last_op: usize,
    },
    #[error("alignment must be at least 1 byte, got 0")]
    ZeroAlignment,
    #[error("size {size} overflows u64 when rounded up to a multiple of {align}")]
    AlignmentOverflow { size: u64, align: u64 },
    #[error(
        "usage record {record}: size {size} overflows u64 when rounded up to a multiple of {align}"
    )]
    RecordTooLarge {
        record: usize,
        size: u64,
        align: u64,
    },
    #[error("arithmetic overflow while computing {what}: the plan would exceed u64 bytes")]
    Overflow { what: &'static str },
    #[error("{operators} operators are too many to tabulate per operator (limit {limit})")]
    TooManyOperators { operators: u128, limit: usize },
    #[error("strategy `{strategy}` refuses {records} usage records: {reason}")]
    TooLarge {
        strategy: &'static str,
        records: usize,
        reason: &'static str,
    },
    /// A caller's deadline passed before the strategy ran or finished (see
    /// [`super::best_offsets_within`]); not a fault of the records.
    #[error("strategy `{strategy}` stopped by the time budget")]
    TimeBudget { strategy: &'static str },
    /// TFLite defines only `naive`, `equality` and `greedy_in_order` (and `best` of them) for
    /// multi-dimensional sizes ([`crate::multidim`]).
    #[error("strategy `{strategy}` is not defined for {dims}-dimensional sizes; expected one of: naive, equality, greedy_in_order, best")]
    UnsupportedDimensions { strategy: &'static str, dims: usize },
    #[error("unknown strategy `{name}`; expected one of: {expected}")]
    UnknownStrategy { name: String, expected: String },
    /// Incremental re-planning was given a previous plan that cannot be the plan of the
    /// previous records at this alignment.
    #[error("the previous plan does not fit the previous records: {reason}")]
    InvalidPreviousPlan { reason: String },
    #[error("internal planner error: {0}")]
    Internal(&'static str),
}

pub(crate) fn overflow(what: &'static str) -> PlanError {
    PlanError::Overflow { what }
}
