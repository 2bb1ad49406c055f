//! Analyses, memory planners and passes over the tir IR.
//!
//! `planner` is IR-agnostic (usage records in, plans out) so that it can plan any framework's
//! buffers; everything else reads and rewrites `tir_ir` modules. One pass per file.

pub mod buffer_check;
pub mod bufferize;
pub mod buffers;
pub mod liveness;
pub mod pipeline;
pub mod plan;
pub mod planner;
pub mod reorder;
pub mod rewrite;
