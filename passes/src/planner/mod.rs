//! Static memory planning, independent of the IR: usage records in, plans out.
//!
//! Owned by the planner work (issue 3). See `record.rs` for the input contract.

pub mod csv;
pub mod heapmap;
mod record;

pub use record::UsageRecord;
