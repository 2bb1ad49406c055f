//! The kernels, one module per op family; [`crate::dispatch`] says which op runs on which.
//! Every op instance gets its own kernel functions, every extent a constant.
//!
//! - [`elementwise`]: unary, binary with NumPy broadcasting, clip, hard_sigmoid, prelu,
//!   batch_norm, with the math functions (sqrt, log, erf, pow, max, ...) in [`math`]; [`copy`]: concat, split, slice, transpose, constant pad, views that were not
//!   aliased. Each is one strided loop nest ([`common::strided_kernel`]) with adjacent
//!   dimensions merged and the contiguous one innermost, so LLVM vectorises it.
//! - [`conv`]: 1×1 with unit strides and no padding is a GEMM per image and group; depthwise
//!   (one input channel per group) and every other convolution have kernels of their own.
//! - [`gemm`]: an `MR × (NV·W)` register-blocked micro-kernel with vector accumulators (`W`
//!   f32 lanes of the target), the contiguous output dimension innermost, bias and activation
//!   in the epilogue; [`matmul`] runs matmul and gemm on it.
//! - [`pool`], [`norm`] (softmax, layer_norm), and [`gather`] (pad by reflection or edge,
//!   resize, reduce_mean: index maps computed at compile time).
//!
//! - [`typed`]: the ops on tensors that are not all `f32` (cast, comparisons, where, logic,
//!   argmax/argmin, integer arithmetic, copies), each operand with its own element type.
//!
//! - [`sample`]: grid_sample, its source coordinates computed per output pixel from the grid.
//!
//! - [`scan`]: cumsum and top_k, one pass per line along their axis, on f32 and integers.
//!
//! The families share [`common`], which imports none of them; no family imports the dispatch.

pub(crate) mod common;
pub(crate) mod conv;
pub(crate) mod copy;
pub(crate) mod elementwise;
pub(crate) mod gather;
pub(crate) mod gemm;
pub(crate) mod math;
pub(crate) mod matmul;
pub(crate) mod norm;
pub(crate) mod pool;
pub(crate) mod sample;
pub(crate) mod scan;
pub(crate) mod typed;
