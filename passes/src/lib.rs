//! Analyses, memory planners and passes over the tir IR.
//!
//! `planner` is IR-agnostic (usage records in, plans out) so that it can plan any framework's
//! buffers; everything else reads and rewrites `tir_ir` modules.

pub mod liveness;
pub mod planner;
