//! The tir reference interpreter, weights and `.npy` I/O.
//!
//! - [`eval::run`] executes a verified module's entry function on host [`Tensor`]s, op by op
//!   in layout order, with plain loops ([`kernels`]) that follow `docs/ir.md` to the letter.
//!   It is the oracle for every generated kernel. Ops on `f32` run the kernels of [`kernels`];
//!   ops touching another element type run the dtype-generic ones of [`typed`], and an op
//!   with no kernel for its element types is an [`InterpError`].
//! - [`Weights`] holds the tensors that `const` ops name: loaded from a safetensors file and
//!   checked against the declared types, or generated deterministically from a seed
//!   ([`weights`] documents the rule).
//! - [`npy`] reads and writes NumPy `.npy` files.
//!
//! Nothing here panics on user input: malformed files, mismatched types and unverified
//! modules are errors.

pub mod eval;
pub mod kernels;
pub mod npy;
pub mod scan;
pub mod tensor;
pub mod typed;
pub mod weights;

pub use eval::{run, InterpError};
pub use npy::NpyError;
pub use tensor::{Data, Tensor};
pub use weights::{Role, Weights, WeightsError};
