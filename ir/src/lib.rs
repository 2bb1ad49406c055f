//! The tir tensor IR.
//!
//! A [`Module`] holds functions; a [`Function`] holds SSA [`Value`]s and [`OpId`]-indexed ops in
//! arenas, plus a separate `layout` (the execution order). Every value is a
//! `tensor<d0 x d1 x ... x dtype>`. Types are static, except in a *dynamic* function, whose
//! types may have symbolic dims ([`sym`]: `tensor<{batch}x3xf32>`); it is verified with the
//! same shape rules over symbolic arithmetic and becomes a static function through
//! [`specialize`] before anything plans it. Ops form the closed enum [`Op`] with ONNX
//! semantics on NCHW tensors; ops that inference runtimes fuse carry an optional fused
//! [`Activation`].
//!
//! The pipeline in this crate: [`parse`] (pest grammar + lowering that resolves names and
//! reads attributes) → [`verify`] (invariants + shape inference, every error collected) →
//! [`print`] (one canonical form). Errors are data with [`Span`]s, turned into text once by
//! [`diag::render`].
//!
//! `docs/ir.md` at the repository root is the reference for the syntax and every op.

pub mod attr;
pub mod batch;
pub mod builder;
pub mod diag;
pub mod entity;
pub mod module;
pub mod op;
pub mod parser;
pub mod printer;
pub mod shape;
pub mod span;
pub mod specialize;
pub mod sym;
pub mod types;
pub mod verifier;

pub use diag::{Diagnostic, ToDiagnostic};
pub use entity::{EntityRef, EntityVec, OpId, Value};
pub use module::{Dynamic, Function, Module, OpData, RuntimeCheck, ValueData, ValueDef};
pub use op::{Activation, BinaryOp, CompareOp, LogicalOp, Op, ReduceKind, ReshapeDim, UnaryOp};
pub use parser::{parse, ParseError};
pub use printer::{print, print_annotated};
pub use span::Span;
pub use specialize::{specialize, Bindings, SpecializeError};
pub use sym::DimExpr;
pub use types::{DType, SymTensorType, TensorType, TensorTypeOf};
pub use verifier::{verify, VerifyError};

/// Parses and verifies `source`, returning diagnostics for whatever is wrong.
pub fn parse_and_verify(source: &str) -> Result<Module, Vec<Diagnostic>> {
    let mut m = parse(source).map_err(|es| {
        es.iter()
            .map(ToDiagnostic::to_diagnostic)
            .collect::<Vec<_>>()
    })?;
    verify(&mut m).map_err(|es| {
        es.iter()
            .map(ToDiagnostic::to_diagnostic)
            .collect::<Vec<_>>()
    })?;
    Ok(m)
}
