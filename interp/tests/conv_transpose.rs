//! `conv_transpose`: hand-computed cases, and the equivalent formulation through `conv2d`
//! (zero-insertion upsampling of the input, then a convolution with the weights flipped and
//! their channel axes swapped) on varied strides, dilations, pads, output padding and groups.

mod common;
use common::*;
use tir_interp::Tensor;
use tir_ir::op::{Activation, Conv2d, ConvTranspose, Op};

#[test]
fn stride_one_sums_the_overlapping_footprints() {
    // Each input pixel stamps the all-ones 2×2 kernel at its position.
    let x = t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let w = t(&[1, 1, 2, 2], &[1.; 4]);
    let y = run_op(Op::ConvTranspose(ConvTranspose::default()), &[x, w]);
    assert_close(
        &y,
        &[1, 1, 3, 3],
        &[1., 3., 2., 4., 10., 6., 3., 7., 4.],
        0.0,
    );
}

#[test]
fn stride_equal_to_the_kernel_tiles_without_overlap() {
    let x = t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let w = t(&[1, 1, 2, 2], &[1., 10., 100., 1000.]);
    let c = ConvTranspose {
        strides: [2, 2],
        ..ConvTranspose::default()
    };
    let y = run_op(Op::ConvTranspose(c), &[x, w]);
    #[rustfmt::skip]
    let want = [
        1., 10., 2., 20.,
        100., 1000., 200., 2000.,
        3., 30., 4., 40.,
        300., 3000., 400., 4000.,
    ];
    assert_close(&y, &[1, 1, 4, 4], &want, 0.0);
}

#[test]
fn output_padding_and_gaps_hold_the_bias() {
    // A 1×1 kernel with stride 2: the odd rows and columns, and the output padding, are only
    // the bias; the crop takes the first row and column away.
    let x = t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let w = t(&[1, 1, 1, 1], &[2.]);
    let b = t(&[1], &[0.5]);
    let c = ConvTranspose {
        strides: [2, 2],
        pads: [1, 1, 0, 0],
        output_padding: [1, 1],
        ..ConvTranspose::default()
    };
    let y = run_op(Op::ConvTranspose(c), &[x, w, b]);
    // Full output 3×3 + 1 of padding = 4×4, minus the first row and column: 3×3.
    #[rustfmt::skip]
    let want = [
        0.5, 0.5, 0.5,
        0.5, 8.5, 0.5,
        0.5, 0.5, 0.5,
    ];
    assert_close(&y, &[1, 1, 3, 3], &want, 0.0);
}

/// `conv_transpose(x, w)` as `conv2d` of `x` with `s - 1` zeros inserted between its pixels,
/// padded by `d·(k - 1) - pad` (plus the output padding at the end), with the kernel flipped
/// and `w[c, m]` read as `w'[m, c]` per group.
fn through_conv2d(c: &ConvTranspose, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
    let xs: Vec<usize> = x.shape().iter().map(|&d| d as usize).collect();
    let ws: Vec<usize> = w.shape().iter().map(|&d| d as usize).collect();
    let (n, ci, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (mg, kh, kw) = (ws[1], ws[2], ws[3]);
    let g = c.groups as usize;
    let cg = ci / g;
    let [sh, sw] = c.strides.map(|v| v as usize);
    let (zh, zw) = ((h - 1) * sh + 1, (wd - 1) * sw + 1);
    let mut z = vec![0.0f32; n * ci * zh * zw];
    let xv = values(x);
    for p in 0..n * ci {
        for iy in 0..h {
            for ix in 0..wd {
                z[(p * zh + iy * sh) * zw + ix * sw] = xv[(p * h + iy) * wd + ix];
            }
        }
    }
    let wv = values(w);
    let mut w2 = vec![0.0f32; g * mg * cg * kh * kw];
    for gi in 0..g {
        for m in 0..mg {
            for cc in 0..cg {
                for i in 0..kh {
                    for j in 0..kw {
                        w2[(((gi * mg + m) * cg + cc) * kh + i) * kw + j] =
                            wv[(((gi * cg + cc) * mg + m) * kh + kh - 1 - i) * kw + kw - 1 - j];
                    }
                }
            }
        }
    }
    let [dh, dw] = c.dilations;
    let eh = dh * (kh as u64 - 1);
    let ew = dw * (kw as u64 - 1);
    let conv = Conv2d {
        strides: [1, 1],
        dilations: c.dilations,
        pads: [
            eh - c.pads[0],
            ew - c.pads[1],
            eh - c.pads[2] + c.output_padding[0],
            ew - c.pads[3] + c.output_padding[1],
        ],
        groups: c.groups,
        activation: c.activation,
        prelu: false,
    };
    let z = t(&[n as u64, ci as u64, zh as u64, zw as u64], &z);
    let w2 = t(&[(g * mg) as u64, cg as u64, kh as u64, kw as u64], &w2);
    let mut ops = vec![z, w2];
    ops.extend(b.cloned());
    run_op(Op::Conv2d(conv), &ops)
}

/// One case of [`equals_zero_insertion_then_conv2d`]: input `[N, C, H, W]`, weight
/// `[C, M/groups, kH, kW]`, the op, and whether it has a bias.
struct Case {
    x: [u64; 4],
    w: [u64; 4],
    c: ConvTranspose,
    bias: bool,
}

fn ct(
    strides: [u64; 2],
    dilations: [u64; 2],
    pads: [u64; 4],
    output_padding: [u64; 2],
    groups: u64,
    activation: Option<Activation>,
) -> ConvTranspose {
    ConvTranspose {
        strides,
        dilations,
        pads,
        output_padding,
        groups,
        activation,
    }
}

#[test]
fn equals_zero_insertion_then_conv2d() {
    // Pads at most d·(k - 1), so that the equivalent conv2d's pads are natural numbers.
    let relu = Some(Activation::Relu);
    let cases = [
        Case {
            x: [1, 2, 3, 4],
            w: [2, 3, 3, 3],
            c: ct([2, 2], [1, 1], [1, 1, 1, 1], [1, 1], 1, None),
            bias: true,
        },
        Case {
            x: [2, 3, 4, 3],
            w: [3, 2, 2, 3],
            c: ct([1, 2], [1, 1], [0, 1, 1, 0], [0, 1], 1, relu),
            bias: false,
        },
        // Groups, dilation, output padding beyond the stride's.
        Case {
            x: [1, 4, 3, 3],
            w: [4, 2, 3, 2],
            c: ct([3, 2], [2, 1], [2, 0, 1, 1], [2, 1], 2, None),
            bias: true,
        },
        // A 1×1 kernel with stride 3: two of every three rows and columns are the bias.
        Case {
            x: [1, 2, 5, 2],
            w: [2, 1, 1, 1],
            c: ct([3, 3], [1, 1], [0, 0, 0, 0], [2, 0], 1, None),
            bias: true,
        },
        // Depthwise, dilated, asymmetric crop.
        Case {
            x: [1, 6, 2, 5],
            w: [6, 1, 3, 3],
            c: ct(
                [1, 1],
                [2, 2],
                [1, 3, 2, 1],
                [0, 0],
                6,
                Some(Activation::Relu6),
            ),
            bias: true,
        },
        Case {
            x: [1, 2, 4, 4],
            w: [2, 4, 4, 4],
            c: ct([2, 2], [1, 1], [1, 1, 1, 1], [0, 0], 1, None),
            bias: false,
        },
        Case {
            x: [1, 3, 3, 3],
            w: [3, 2, 2, 2],
            c: ct(
                [2, 3],
                [1, 1],
                [0, 0, 0, 0],
                [1, 2],
                1,
                Some(Activation::Sigmoid),
            ),
            bias: true,
        },
    ];
    for (k, case) in cases.iter().enumerate() {
        let x = noise(&case.x, 10 + k as u32);
        let w = noise(&case.w, 20 + k as u32);
        let b = noise(&[case.w[1] * case.c.groups], 30 + k as u32);
        let mut ops = vec![x.clone(), w.clone()];
        if case.bias {
            ops.push(b.clone());
        }
        let got = run_op(Op::ConvTranspose(case.c.clone()), &ops);
        let want = through_conv2d(&case.c, &x, &w, case.bias.then_some(&b));
        let shape = want.shape().to_vec();
        assert_close(&got, &shape, values(&want), 1e-5);
    }
}
