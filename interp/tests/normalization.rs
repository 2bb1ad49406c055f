//! `softmax`, `batch_norm`, `layer_norm`, `reduce_mean`.

mod common;
use common::*;
use tir_ir::op::Op;

#[test]
fn softmax_of_a_row() {
    let y = run_op(
        Op::Softmax { axis: -1 },
        &[t(&[2, 3], &[1., 2., 3., 0., 0., 0.])],
    );
    let third = 1. / 3.;
    assert_close(
        &y,
        &[2, 3],
        &[
            0.090_030_57,
            0.244_728_48,
            0.665_240_94,
            third,
            third,
            third,
        ],
        1e-6,
    );
}

#[test]
fn softmax_along_the_first_axis() {
    let y = run_op(Op::Softmax { axis: 0 }, &[t(&[2, 2], &[0., 1., 0., 3.])]);
    assert_close(&y, &[2, 2], &[0.5, 0.119_202_92, 0.5, 0.880_797_1], 1e-6);
}

#[test]
fn softmax_is_stable_for_large_logits() {
    let y = run_op(
        Op::Softmax { axis: -1 },
        &[t(&[3], &[1000., 1000., -1000.])],
    );
    assert_close(&y, &[3], &[0.5, 0.5, 0.], 0.0);
}

#[test]
fn softmax_sums_to_one_along_its_axis() {
    let x = noise(&[3, 4, 5], 5);
    let y = run_op(Op::Softmax { axis: 1 }, &[x]);
    let v = values(&y);
    for o in 0..3 {
        for i in 0..5 {
            let s: f32 = (0..4).map(|l| v[(o * 4 + l) * 5 + i]).sum();
            assert!((s - 1.).abs() < 1e-6, "sum {s}");
        }
    }
    assert!(v.iter().all(|&p| p > 0. && p < 1.));
}

#[test]
fn batch_norm_per_channel() {
    let x = t(&[1, 2, 1, 2], &[1., 2., 3., 4.]);
    let scale = t(&[2], &[1., 2.]);
    let bias = t(&[2], &[0., 1.]);
    let mean = t(&[2], &[1., 3.]);
    let var = t(&[2], &[4., 0.25]);
    let y = run_op(Op::BatchNorm { epsilon: 0.0 }, &[x, scale, bias, mean, var]);
    assert_close(&y, &[1, 2, 1, 2], &[0., 0.5, 1., 5.], 1e-7);
}

#[test]
fn batch_norm_adds_epsilon_to_the_variance() {
    let one = t(&[1], &[1.]);
    let zero = t(&[1], &[0.]);
    let y = run_op(
        Op::BatchNorm { epsilon: 3.0 },
        &[t(&[1, 1, 1], &[2.]), one.clone(), zero.clone(), zero, one],
    );
    assert_close(&y, &[1, 1, 1], &[1.], 1e-7);
}

#[test]
fn layer_norm_over_the_last_axis_with_scale_and_bias() {
    let x = t(&[2, 4], &[1., 2., 3., 4., 5., 7., 5., 7.]);
    let scale = t(&[4], &[1., 1., 2., 2.]);
    let bias = t(&[4], &[0., 0., 0., 1.]);
    let y = run_op(
        Op::LayerNorm {
            axis: -1,
            epsilon: 0.0,
        },
        &[x.clone(), scale.clone(), bias],
    );
    let z = 0.447_213_6; // 0.5 / sqrt(1.25)
    assert_close(
        &y,
        &[2, 4],
        &[-3. * z, -z, 2. * z, 6. * z + 1., -1., 1., -2., 3.],
        1e-6,
    );
    let y = run_op(
        Op::LayerNorm {
            axis: 1,
            epsilon: 0.0,
        },
        &[x, scale],
    );
    assert_close(
        &y,
        &[2, 4],
        &[-3. * z, -z, 2. * z, 6. * z, -1., 1., -2., 2.],
        1e-6,
    );
}

#[test]
fn layer_norm_over_several_axes_broadcasts_the_scale() {
    // axis 0 of a [2, 2] tensor: all four elements; scale [2] broadcasts over [2, 2].
    let x = t(&[2, 2], &[1., 2., 3., 4.]);
    let scale = t(&[2], &[1., 10.]);
    let y = run_op(
        Op::LayerNorm {
            axis: 0,
            epsilon: 0.0,
        },
        &[x, scale],
    );
    let z = 0.447_213_6;
    assert_close(&y, &[2, 2], &[-3. * z, -10. * z, z, 30. * z], 1e-6);
}

#[test]
fn reduce_mean_without_keepdims() {
    let y = run_op(
        Op::Reduce {
            kind: tir_ir::ReduceKind::Mean,
            axes: vec![1],
            keepdims: false,
        },
        &[iota(&[2, 3])],
    );
    assert_close(&y, &[2], &[1., 4.], 0.0);
}

#[test]
fn reduce_mean_over_two_axes_keeping_them() {
    let y = run_op(
        Op::Reduce {
            kind: tir_ir::ReduceKind::Mean,
            axes: vec![0, -1],
            keepdims: true,
        },
        &[iota(&[2, 2, 2])],
    );
    assert_close(&y, &[1, 2, 1], &[2.5, 4.5], 0.0);
}

#[test]
fn reduce_mean_with_empty_axes_follows_the_shape_rule() {
    // The shape rule (ir/src/shape.rs) reduces every axis when `axes` is empty.
    let y = run_op(
        Op::Reduce {
            kind: tir_ir::ReduceKind::Mean,
            axes: vec![],
            keepdims: true,
        },
        &[iota(&[2, 2])],
    );
    assert_close(&y, &[1, 1], &[1.5], 0.0);
}
