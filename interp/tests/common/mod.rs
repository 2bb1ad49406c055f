//! Helpers shared by the interpreter's tests: one-op modules built in code, and comparisons.
#![allow(dead_code)]

use tir_interp::{run, Tensor, Weights};
use tir_ir::builder::Builder;
use tir_ir::{Op, TensorType};

/// An f32 tensor; panics (in tests only) if the data does not fit the shape.
pub fn t(shape: &[u64], data: &[f32]) -> Tensor {
    Tensor::f32(shape.to_vec(), data.to_vec()).expect("data fits the shape")
}

/// `0, 1, 2, ...` in the given shape.
pub fn iota(shape: &[u64]) -> Tensor {
    let n: u64 = shape.iter().product();
    t(shape, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
}

/// Deterministic values in [-1, 1) (a tiny LCG, independent of the crate's generator).
pub fn noise(shape: &[u64], seed: u32) -> Tensor {
    let n: u64 = shape.iter().product();
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect();
    t(shape, &v)
}

/// Runs `op` on `operands`, each a parameter of the module; returns every result.
pub fn run_op_multi(op: Op, operands: &[Tensor]) -> Vec<Tensor> {
    let mut b = Builder::new("test");
    let params: Vec<_> = operands
        .iter()
        .enumerate()
        .map(|(i, x)| b.input(format!("x{i}"), x.ty.clone()))
        .collect();
    let results = b.op_multi(op, &params).expect("the op is well typed");
    let module = b.finish(&results);
    run(&module, &Weights::new(), operands).expect("the interpreter runs")
}

/// Runs a single-result `op` on `operands`.
pub fn run_op(op: Op, operands: &[Tensor]) -> Tensor {
    run_op_multi(op, operands).remove(0)
}

pub fn values(x: &Tensor) -> &[f32] {
    x.as_f32().expect("an f32 tensor")
}

/// Asserts equal shapes and elements within `tol` (absolute, plus relative to the expected).
pub fn assert_close(got: &Tensor, shape: &[u64], want: &[f32], tol: f32) {
    assert_eq!(got.ty, TensorType::f32(shape.to_vec()), "result type");
    let g = values(got);
    assert_eq!(g.len(), want.len(), "element count");
    for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
        let ok = (a - b).abs() <= tol * (1.0 + b.abs()) || (a.is_nan() && b.is_nan());
        assert!(
            ok,
            "element {i}: got {a}, want {b}\n got: {g:?}\nwant: {want:?}"
        );
    }
}

/// Asserts that two tensors are equal within `tol`.
pub fn assert_same(got: &Tensor, want: &Tensor, tol: f32) {
    assert_close(got, &want.ty.shape, values(want), tol);
}
