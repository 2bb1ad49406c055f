//! Analyses, memory planners and passes over the tir IR.
//!
//! The planner itself is the IR-agnostic crate `tir_planner` (usage records in, plans out), so
//! that a runtime can plan its buffers without the compiler; it is re-exported here as `planner`
//! so that callers keep writing `tir_passes::planner::...`. Everything else reads and rewrites
//! `tir_ir` modules. One pass per file.

pub mod buffer_check;
pub mod bufferize;
pub mod buffers;
pub mod dynamic;
pub mod liveness;
pub mod pipeline;
pub mod plan;
pub mod reorder;
pub mod rewrite;

pub use tir_planner as planner;
