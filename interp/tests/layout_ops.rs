//! Data movement: `concat`, `split`, `slice`, the views, `transpose`, `pad`.

mod common;
use common::*;
use tir_ir::op::{Op, PadMode, Slice};

fn slice(
    x: tir_interp::Tensor,
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
) -> tir_interp::Tensor {
    let s = Slice {
        starts: starts.to_vec(),
        ends: ends.to_vec(),
        axes: axes.to_vec(),
        steps: steps.to_vec(),
    };
    run_op(Op::Slice(s), &[x])
}

#[test]
fn concat_along_the_channel_axis() {
    let a = t(&[1, 1, 2], &[0., 1.]);
    let b = t(&[1, 2, 2], &[2., 3., 4., 5.]);
    let y = run_op(Op::Concat { axis: 1 }, &[a, b]);
    assert_close(&y, &[1, 3, 2], &[0., 1., 2., 3., 4., 5.], 0.0);
}

#[test]
fn concat_along_the_last_axis_interleaves_rows() {
    let a = t(&[2, 1], &[0., 1.]);
    let b = t(&[2, 2], &[10., 11., 12., 13.]);
    let y = run_op(Op::Concat { axis: -1 }, &[a, b]);
    assert_close(&y, &[2, 3], &[0., 10., 11., 1., 12., 13.], 0.0);
}

#[test]
fn split_gives_consecutive_pieces() {
    let parts = run_op_multi(
        Op::Split {
            axis: 1,
            sizes: vec![1, 2],
        },
        &[iota(&[2, 3])],
    );
    assert_close(&parts[0], &[2, 1], &[0., 3.], 0.0);
    assert_close(&parts[1], &[2, 2], &[1., 2., 4., 5.], 0.0);
}

#[test]
fn split_then_concat_is_the_identity() {
    let x = noise(&[2, 5, 3], 4);
    let parts = run_op_multi(
        Op::Split {
            axis: 1,
            sizes: vec![2, 1, 2],
        },
        std::slice::from_ref(&x),
    );
    let y = run_op(Op::Concat { axis: 1 }, &parts);
    assert_same(&y, &x, 0.0);
}

#[test]
fn slice_with_a_positive_step() {
    let y = slice(iota(&[6]), &[1], &[i64::MAX], &[0], &[2]);
    assert_close(&y, &[3], &[1., 3., 5.], 0.0);
}

#[test]
fn slice_with_negative_step_reverses() {
    // starts -1 (= 4), ends -6 (= -1 after clamping): the whole axis reversed.
    let y = slice(iota(&[5]), &[-1], &[-6], &[0], &[-1]);
    assert_close(&y, &[5], &[4., 3., 2., 1., 0.], 0.0);
    let y = slice(iota(&[5]), &[4], &[0], &[0], &[-2]);
    assert_close(&y, &[2], &[4., 2.], 0.0);
    let y = slice(iota(&[5]), &[i64::MAX], &[i64::MIN], &[0], &[-3]);
    assert_close(&y, &[2], &[4., 1.], 0.0);
}

#[test]
fn slice_on_a_negative_axis_with_negative_step() {
    let y = slice(iota(&[2, 4]), &[3], &[0], &[-1], &[-1]);
    assert_close(&y, &[2, 3], &[3., 2., 1., 7., 6., 5.], 0.0);
}

#[test]
fn slice_out_of_range_is_empty() {
    let y = slice(iota(&[5]), &[-100], &[-200], &[0], &[-1]);
    assert_close(&y, &[0], &[], 0.0);
    let y = slice(iota(&[5]), &[7], &[9], &[0], &[1]);
    assert_close(&y, &[0], &[], 0.0);
}

#[test]
fn slice_two_axes_of_a_4d_tensor() {
    // rows 1 and 3 (step 2), columns 2.. of a 1x1x4x4 tensor.
    let y = slice(iota(&[1, 1, 4, 4]), &[1, 2], &[4, 4], &[2, 3], &[2, 1]);
    assert_close(&y, &[1, 1, 2, 2], &[6., 7., 14., 15.], 0.0);
}

#[test]
fn views_keep_the_elements_in_order() {
    let x = iota(&[1, 2, 1, 3]);
    let want: Vec<f32> = (0..6).map(|i| i as f32).collect();
    assert_close(
        &run_op(Op::reshape(vec![3, -1]), std::slice::from_ref(&x)),
        &[3, 2],
        &want,
        0.0,
    );
    assert_close(
        &run_op(Op::Flatten { axis: 2 }, std::slice::from_ref(&x)),
        &[2, 3],
        &want,
        0.0,
    );
    assert_close(
        &run_op(Op::Squeeze { axes: vec![0, 2] }, std::slice::from_ref(&x)),
        &[2, 3],
        &want,
        0.0,
    );
    assert_close(
        &run_op(Op::Unsqueeze { axes: vec![-1] }, &[x]),
        &[1, 2, 1, 3, 1],
        &want,
        0.0,
    );
}

#[test]
fn transpose_2d() {
    let y = run_op(Op::Transpose { perm: vec![1, 0] }, &[iota(&[2, 3])]);
    assert_close(&y, &[3, 2], &[0., 3., 1., 4., 2., 5.], 0.0);
}

#[test]
fn transpose_nchw_to_nhwc() {
    // x[0, c, h, w] = 4c + 2h + w with C = 2, H = W = 2.
    let y = run_op(
        Op::Transpose {
            perm: vec![0, 2, 3, 1],
        },
        &[iota(&[1, 2, 2, 2])],
    );
    assert_close(&y, &[1, 2, 2, 2], &[0., 4., 1., 5., 2., 6., 3., 7.], 0.0);
}

#[test]
fn transpose_then_its_inverse_is_the_identity() {
    let x = noise(&[2, 3, 4, 5], 11);
    let perm = vec![2, 0, 3, 1];
    let mut inverse = vec![0u64; 4];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p as usize] = i as u64;
    }
    let y = run_op(Op::Transpose { perm }, std::slice::from_ref(&x));
    let z = run_op(Op::Transpose { perm: inverse }, &[y]);
    assert_same(&z, &x, 0.0);
}

#[test]
fn pad_constant_with_a_value() {
    let y = run_op(
        Op::Pad {
            pads: vec![1, 0, 0, 1],
            mode: PadMode::Constant,
            value: 9.0,
        },
        &[iota(&[2, 2])],
    );
    assert_close(&y, &[3, 3], &[9., 9., 9., 0., 1., 9., 2., 3., 9.], 0.0);
}

#[test]
fn pad_reflect_mirrors_without_the_edge() {
    let x = t(&[4], &[1., 2., 3., 4.]);
    let y = run_op(
        Op::Pad {
            pads: vec![2, 2],
            mode: PadMode::Reflect,
            value: 0.0,
        },
        &[x],
    );
    assert_close(&y, &[8], &[3., 2., 1., 2., 3., 4., 3., 2.], 0.0);
}

#[test]
fn pad_edge_repeats_the_edge() {
    let x = t(&[3], &[1., 2., 3.]);
    let y = run_op(
        Op::Pad {
            pads: vec![2, 1],
            mode: PadMode::Edge,
            value: 0.0,
        },
        &[x],
    );
    assert_close(&y, &[6], &[1., 1., 1., 2., 3., 3.], 0.0);
}

#[test]
fn pad_reflect_in_two_dimensions() {
    // [[0 1 2] [3 4 5]] padded by 1 row on top and 1 column on the right.
    let y = run_op(
        Op::Pad {
            pads: vec![1, 0, 0, 1],
            mode: PadMode::Reflect,
            value: 0.0,
        },
        &[iota(&[2, 3])],
    );
    assert_close(
        &y,
        &[3, 4],
        &[3., 4., 5., 4., 0., 1., 2., 1., 3., 4., 5., 4.],
        0.0,
    );
}

/// `trilu` keeps the triangle on or above (below) the `k`-th diagonal of each matrix and
/// zeroes the rest, NaN and infinities included.
#[test]
fn trilu_keeps_one_triangle_of_each_matrix() {
    let x = iota(&[2, 3, 4]);
    let up = run_op(Op::Trilu { upper: true, k: 0 }, std::slice::from_ref(&x));
    #[rustfmt::skip]
    let want_up = [
        0., 1., 2., 3.,   0., 5., 6., 7.,   0., 0., 10., 11.,
        12., 13., 14., 15.,   0., 17., 18., 19.,   0., 0., 22., 23.,
    ];
    assert_close(&up, &[2, 3, 4], &want_up, 0.0);
    let low = run_op(
        Op::Trilu {
            upper: false,
            k: -1,
        },
        std::slice::from_ref(&x),
    );
    #[rustfmt::skip]
    let want_low = [
        0., 0., 0., 0.,   4., 0., 0., 0.,   8., 9., 0., 0.,
        0., 0., 0., 0.,   16., 0., 0., 0.,   20., 21., 0., 0.,
    ];
    assert_close(&low, &[2, 3, 4], &want_low, 0.0);
    // A diagonal past the matrix keeps everything (lower) or nothing (upper).
    assert_eq!(
        values(&run_op(
            Op::Trilu { upper: false, k: 5 },
            std::slice::from_ref(&x)
        )),
        values(&x)
    );
    assert!(values(&run_op(Op::Trilu { upper: true, k: 5 }, &[x]))
        .iter()
        .all(|&v| v == 0.0));
    let odd = t(
        &[2, 2],
        &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::NAN],
    );
    let y = run_op(Op::Trilu { upper: true, k: 0 }, &[odd]);
    let y = values(&y);
    assert!(y[0].is_nan() && y[1] == f32::INFINITY && y[2] == 0.0 && y[3].is_nan());
}
