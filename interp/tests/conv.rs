//! `conv2d`: hand-computed cases and properties against the formula of docs/ir.md.

mod common;
use common::*;
use tir_interp::Tensor;
use tir_ir::op::{Activation, Conv2d, Op};

/// The formula of docs/ir.md §6.2, written independently of the kernel (bounds tested per
/// tap, no precomputed ranges).
fn conv_formula(c: &Conv2d, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Vec<f32> {
    let xs: Vec<usize> = x.shape().iter().map(|&d| d as usize).collect();
    let ws: Vec<usize> = w.shape().iter().map(|&d| d as usize).collect();
    let (n, ci, h, wd) = (xs[0], xs[1], xs[2] as i64, xs[3] as i64);
    let (m, cg, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
    let (sh, sw) = (c.strides[0] as i64, c.strides[1] as i64);
    let (dh, dw) = (c.dilations[0] as i64, c.dilations[1] as i64);
    let (pt, pl, pb, pr) = (
        c.pads[0] as i64,
        c.pads[1] as i64,
        c.pads[2] as i64,
        c.pads[3] as i64,
    );
    let oh = ((h + pt + pb - (dh * (kh as i64 - 1) + 1)) / sh + 1) as usize;
    let ow = ((wd + pl + pr - (dw * (kw as i64 - 1) + 1)) / sw + 1) as usize;
    let mg = m / c.groups as usize;
    let (xv, wv) = (values(x), values(w));
    let mut out = Vec::new();
    for bn in 0..n {
        for oc in 0..m {
            let g = oc / mg;
            for y in 0..oh {
                for xo in 0..ow {
                    let mut acc = b.map_or(0.0, |b| values(b)[oc]);
                    for cc in 0..cg {
                        for i in 0..kh {
                            for j in 0..kw {
                                let iy = y as i64 * sh + i as i64 * dh - pt;
                                let ix = xo as i64 * sw + j as i64 * dw - pl;
                                if iy < 0 || iy >= h || ix < 0 || ix >= wd {
                                    continue;
                                }
                                let xi = ((bn * ci + g * cg + cc) as i64 * h + iy) * wd + ix;
                                acc += xv[xi as usize] * wv[((oc * cg + cc) * kh + i) * kw + j];
                            }
                        }
                    }
                    out.push(tir_interp::kernels::activation(c.activation, acc));
                }
            }
        }
    }
    out
}

fn check_against_formula(c: Conv2d, xshape: &[u64], wshape: &[u64], bias: bool) {
    let x = noise(xshape, 1);
    let w = noise(wshape, 2);
    let b = noise(&[wshape[0]], 3);
    let mut ops = vec![x.clone(), w.clone()];
    if bias {
        ops.push(b.clone());
    }
    let got = run_op(Op::Conv2d(c.clone()), &ops);
    let want = conv_formula(&c, &x, &w, bias.then_some(&b));
    assert_close(&got, &got.ty.shape.clone(), &want, 1e-5);
}

#[test]
fn conv_1x1_is_a_weighted_channel_sum() {
    // x: 2 channels of 2x2; w: one output channel = 1*c0 + 10*c1.
    let x = t(&[1, 2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
    let w = t(&[1, 2, 1, 1], &[1., 10.]);
    let y = run_op(Op::Conv2d(Conv2d::default()), &[x, w]);
    assert_close(&y, &[1, 1, 2, 2], &[51., 62., 73., 84.], 0.0);
}

#[test]
fn conv_3x3_with_padding_sums_the_in_bounds_neighbourhood() {
    // All-ones kernel on 0..9 (3x3), pads 1: each output is the sum of its neighbourhood.
    let x = iota(&[1, 1, 3, 3]);
    let w = t(&[1, 1, 3, 3], &[1.; 9]);
    let c = Conv2d {
        pads: [1, 1, 1, 1],
        ..Conv2d::default()
    };
    let y = run_op(Op::Conv2d(c), &[x, w]);
    assert_close(
        &y,
        &[1, 1, 3, 3],
        &[8., 15., 12., 21., 36., 27., 20., 33., 24.],
        0.0,
    );
}

#[test]
fn conv_bias_and_fused_relu() {
    let x = t(&[1, 1, 1, 2], &[1., -1.]);
    let w = t(&[2, 1, 1, 1], &[2., -3.]);
    let b = t(&[2], &[0.5, 1.0]);
    let c = Conv2d {
        activation: Some(Activation::Relu),
        ..Conv2d::default()
    };
    let y = run_op(Op::Conv2d(c), &[x, w, b]);
    // channel 0: 2x + 0.5 = [2.5, -1.5] -> [2.5, 0]; channel 1: -3x + 1 = [-2, 4] -> [0, 4].
    assert_close(&y, &[1, 2, 1, 2], &[2.5, 0., 0., 4.], 0.0);
}

#[test]
fn conv_stride_2_on_odd_input() {
    // 5x5 input 0..25, 1x1 kernel of 1, stride 2: every other row and column.
    let x = iota(&[1, 1, 5, 5]);
    let w = t(&[1, 1, 1, 1], &[1.]);
    let c = Conv2d {
        strides: [2, 2],
        ..Conv2d::default()
    };
    let y = run_op(Op::Conv2d(c), &[x, w]);
    assert_close(
        &y,
        &[1, 1, 3, 3],
        &[0., 2., 4., 10., 12., 14., 20., 22., 24.],
        0.0,
    );
}

#[test]
fn conv_dilation_spreads_the_taps() {
    // 1x2 kernel [1, 1] with dilation 2 on a row 0..5: y[i] = x[i] + x[i + 2].
    let x = iota(&[1, 1, 1, 5]);
    let w = t(&[1, 1, 1, 2], &[1., 1.]);
    let c = Conv2d {
        dilations: [1, 2],
        ..Conv2d::default()
    };
    let y = run_op(Op::Conv2d(c), &[x, w]);
    assert_close(&y, &[1, 1, 1, 3], &[2., 4., 6.], 0.0);
}

#[test]
fn conv_asymmetric_padding_pads_top_left_and_bottom_right_separately() {
    // pads [top 1, left 0, bottom 0, right 2] with a 1x1 identity kernel.
    let x = t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let w = t(&[1, 1, 1, 1], &[1.]);
    let c = Conv2d {
        pads: [1, 0, 0, 2],
        ..Conv2d::default()
    };
    let y = run_op(Op::Conv2d(c), &[x, w]);
    assert_close(
        &y,
        &[1, 1, 3, 4],
        &[0., 0., 0., 0., 1., 2., 0., 0., 3., 4., 0., 0.],
        0.0,
    );
}

#[test]
fn conv_depthwise_keeps_channels_apart() {
    let x = t(&[1, 2, 1, 2], &[1., 2., 3., 4.]);
    let w = t(&[2, 1, 1, 1], &[10., 100.]);
    let c = Conv2d {
        groups: 2,
        ..Conv2d::default()
    };
    let y = run_op(Op::Conv2d(c), &[x, w]);
    assert_close(&y, &[1, 2, 1, 2], &[10., 20., 300., 400.], 0.0);
}

#[test]
fn conv_matches_the_formula_with_strides_dilations_pads_and_groups() {
    let c = Conv2d {
        strides: [2, 1],
        dilations: [1, 2],
        pads: [1, 2, 0, 1],
        groups: 2,
        activation: Some(Activation::Relu6),
        prelu: false,
    };
    check_against_formula(c, &[2, 4, 7, 6], &[6, 2, 3, 2], true);
}

#[test]
fn conv_matches_the_formula_with_stride_3_and_large_pads() {
    let c = Conv2d {
        strides: [3, 3],
        pads: [2, 2, 2, 2],
        ..Conv2d::default()
    };
    check_against_formula(c, &[1, 3, 5, 4], &[2, 3, 3, 3], false);
}

#[test]
fn conv_with_groups_is_the_concat_of_convs_on_channel_slices() {
    let (x, w, b) = (
        noise(&[1, 6, 5, 5], 7),
        noise(&[4, 3, 3, 3], 8),
        noise(&[4], 9),
    );
    let c = Conv2d {
        pads: [1, 1, 1, 1],
        groups: 2,
        ..Conv2d::default()
    };
    let grouped = run_op(Op::Conv2d(c.clone()), &[x.clone(), w.clone(), b.clone()]);
    let slice = |t: &Tensor, axis_len: usize, inner: usize, k: usize, shape: &[u64]| {
        let v = values(t);
        let chunk = axis_len * inner;
        let part: Vec<f32> = v
            .chunks(chunk * 2)
            .flat_map(|c| c[k * chunk..(k + 1) * chunk].to_vec())
            .collect();
        common::t(shape, &part)
    };
    let mut want = Vec::new();
    for g in 0..2 {
        let xg = slice(&x, 3, 25, g, &[1, 3, 5, 5]);
        let wg = common::t(&[2, 3, 3, 3], &values(&w)[g * 54..(g + 1) * 54]);
        let bg = common::t(&[2], &values(&b)[g * 2..(g + 1) * 2]);
        let single = Conv2d {
            groups: 1,
            ..c.clone()
        };
        want.extend_from_slice(values(&run_op(Op::Conv2d(single), &[xg, wg, bg])));
    }
    assert_close(&grouped, &[1, 4, 5, 5], &want, 1e-6);
}
