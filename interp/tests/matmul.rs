//! `matmul` and `gemm`.

mod common;
use common::*;
use tir_ir::op::{Activation, Gemm, Op};

fn matmul(a: &[u64], b: &[u64]) -> tir_interp::Tensor {
    run_op(Op::MatMul { activation: None }, &[iota(a), iota(b)])
}

#[test]
fn matmul_2x3_by_3x2() {
    // [[0 1 2] [3 4 5]] x [[0 1] [2 3] [4 5]]
    let y = matmul(&[2, 3], &[3, 2]);
    assert_close(&y, &[2, 2], &[10., 13., 28., 40.], 0.0);
}

#[test]
fn matmul_rank1_operands_drop_their_dimension() {
    // [K] x [K, N] -> [N]; [M, K] x [K] -> [M]; [K] x [K] -> scalar.
    assert_close(&matmul(&[3], &[3, 2]), &[2], &[10., 13.], 0.0);
    assert_close(&matmul(&[2, 3], &[3]), &[2], &[5., 14.], 0.0);
    assert_close(&matmul(&[3], &[3]), &[], &[5.], 0.0);
}

#[test]
fn matmul_broadcasts_batch_dimensions() {
    // a: [2, 1, 2, 2], b: [3, 2, 2] -> [2, 3, 2, 2]; check against per-batch products.
    let (a, b) = (noise(&[2, 1, 2, 2], 1), noise(&[3, 2, 2], 2));
    let y = run_op(Op::MatMul { activation: None }, &[a.clone(), b.clone()]);
    let (av, bv) = (values(&a), values(&b));
    let mut want = Vec::new();
    for i in 0..2 {
        for j in 0..3 {
            let (am, bm) = (&av[i * 4..i * 4 + 4], &bv[j * 4..j * 4 + 4]);
            for r in 0..2 {
                for c in 0..2 {
                    want.push(am[r * 2] * bm[c] + am[r * 2 + 1] * bm[2 + c]);
                }
            }
        }
    }
    assert_close(&y, &[2, 3, 2, 2], &want, 1e-6);
}

#[test]
fn matmul_fused_activation() {
    let a = t(&[1, 2], &[1., -1.]);
    let b = t(&[2, 2], &[1., 2., 3., 1.]);
    let y = run_op(
        Op::MatMul {
            activation: Some(Activation::Relu),
        },
        &[a, b],
    );
    // [1 - 3, 2 - 1] = [-2, 1] -> relu
    assert_close(&y, &[1, 2], &[0., 1.], 0.0);
}

#[test]
fn gemm_transposes_scales_and_adds_c() {
    // A' = A^T with A = [[1 3] [2 4]] -> [[1 2] [3 4]]; B' = B^T with B = [[1 0] [1 1]] -> [[1 1] [0 1]].
    let a = t(&[2, 2], &[1., 3., 2., 4.]);
    let b = t(&[2, 2], &[1., 0., 1., 1.]);
    let c = t(&[2], &[10., 20.]);
    let g = Gemm {
        trans_a: true,
        trans_b: true,
        alpha: 2.0,
        beta: 0.5,
        activation: None,
    };
    let y = run_op(Op::Gemm(g), &[a, b, c]);
    // A'B' = [[1 3] [3 7]]; 2*A'B' + 0.5*[10 20] = [[7 16] [11 24]]
    assert_close(&y, &[2, 2], &[7., 16., 11., 24.], 0.0);
}

#[test]
fn gemm_c_broadcasts_from_a_column_and_a_scalar() {
    let a = t(&[2, 1], &[1., 2.]);
    let b = t(&[1, 3], &[1., 1., 1.]);
    let col = t(&[2, 1], &[100., 200.]);
    let y = run_op(Op::Gemm(Gemm::default()), &[a.clone(), b.clone(), col]);
    assert_close(&y, &[2, 3], &[101., 101., 101., 202., 202., 202.], 0.0);
    let scalar = t(&[], &[5.]);
    let y = run_op(Op::Gemm(Gemm::default()), &[a, b, scalar]);
    assert_close(&y, &[2, 3], &[6., 6., 6., 7., 7., 7.], 0.0);
}

#[test]
fn gemm_without_c_and_with_fused_activation() {
    let a = t(&[1, 2], &[1., 2.]);
    let b = t(&[2, 2], &[1., -1., 1., -1.]);
    let g = Gemm {
        activation: Some(Activation::Relu),
        ..Gemm::default()
    };
    let y = run_op(Op::Gemm(g), &[a, b]);
    assert_close(&y, &[1, 2], &[3., 0.], 0.0);
}

#[test]
fn gemm_with_trans_b_equals_matmul_with_the_transposed_weight() {
    let (a, w) = (noise(&[3, 5], 1), noise(&[4, 5], 2));
    let g = Gemm {
        trans_b: true,
        ..Gemm::default()
    };
    let y = run_op(Op::Gemm(g), &[a.clone(), w.clone()]);
    let wt = run_op(Op::Transpose { perm: vec![1, 0] }, &[w]);
    let z = run_op(Op::MatMul { activation: None }, &[a, wt]);
    assert_same(&y, &z, 1e-6);
}
