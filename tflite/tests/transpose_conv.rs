//! TRANSPOSE_CONV and mediapipe's custom `Convolution2DTransposeBias`, imported and run on
//! tir's interpreter, against TFLite's reference scatter loop written out in NHWC.

mod common;

use common::*;
use tir_tflite::schema::{ActivationFunctionType as Act, BuiltinOperator as B, Padding};

/// TFLite's reference transposed convolution: input pixel `(iy, ix)` adds into output
/// `(iy·sH - pad_h + fy, ix·sW - pad_w + fx)` where that lies inside `out`; filter OHWI.
#[allow(clippy::too_many_arguments)]
fn reference(
    x: &Nhwc,
    f: &[f32],
    fshape: [usize; 4],
    bias: Option<&[f32]>,
    stride: [usize; 2],
    pad: [usize; 2],
    out: [usize; 2],
    a: Act,
) -> Vec<f32> {
    let [n, h, w, ci] = x.shape;
    let [o, kh, kw, _] = fshape;
    let mut y = vec![0.0f32; n * out[0] * out[1] * o];
    for b in 0..n {
        for oy in 0..out[0] {
            for ox in 0..out[1] {
                for oc in 0..o {
                    y[((b * out[0] + oy) * out[1] + ox) * o + oc] = bias.map_or(0.0, |v| v[oc]);
                }
            }
        }
        for iy in 0..h {
            for ix in 0..w {
                for ic in 0..ci {
                    for fy in 0..kh {
                        for fx in 0..kw {
                            let oy = (iy * stride[0] + fy) as i64 - pad[0] as i64;
                            let ox = (ix * stride[1] + fx) as i64 - pad[1] as i64;
                            if oy < 0 || ox < 0 || oy >= out[0] as i64 || ox >= out[1] as i64 {
                                continue;
                            }
                            for oc in 0..o {
                                let fv = f[((oc * kh + fy) * kw + fx) * ci + ic];
                                y[((b * out[0] + oy as usize) * out[1] + ox as usize) * o + oc] +=
                                    x.at(b, iy, ix, ic) * fv;
                            }
                        }
                    }
                }
            }
        }
    }
    y.into_iter().map(|v| act(v, a)).collect()
}

struct Case {
    input: [usize; 4],
    filter: [usize; 4],
    stride: [usize; 2],
    padding: Padding,
    out: [usize; 2],
    bias: bool,
    act: Act,
}

/// TFLite's padding of a TRANSPOSE_CONV: that of a forward convolution from `out` to the input.
fn tflite_pad(out: usize, k: usize, s: usize, p: Padding) -> usize {
    if p == Padding::VALID {
        return 0;
    }
    let conv_out = out.div_ceil(s);
    ((conv_out - 1) * s + k).saturating_sub(out) / 2
}

#[test]
fn transpose_conv_matches_tflite_reference() {
    let cases = [
        // SAME, stride 2, 3×3: the full output 7×9 cropped to 6×8 (the odd pixel at the end).
        Case {
            input: [1, 3, 4, 2],
            filter: [3, 3, 3, 2],
            stride: [2, 2],
            padding: Padding::SAME,
            out: [6, 8],
            bias: true,
            act: Act::RELU,
        },
        // VALID with an output wider than the full one: the last column is bias only.
        Case {
            input: [2, 4, 3, 2],
            filter: [2, 2, 3, 2],
            stride: [1, 2],
            padding: Padding::VALID,
            out: [5, 8],
            bias: true,
            act: Act::NONE,
        },
        // A 1×1 kernel with stride 2 (stride larger than the kernel: every other pixel is
        // bias only) and SAME asking for 2·in.
        Case {
            input: [1, 3, 3, 1],
            filter: [2, 1, 1, 1],
            stride: [2, 2],
            padding: Padding::SAME,
            out: [6, 6],
            bias: false,
            act: Act::NONE,
        },
    ];
    for (ci, c) in cases.iter().enumerate() {
        let nx: usize = c.input.iter().product();
        let nf: usize = c.filter.iter().product();
        let x = values(nx, 10 + ci as u64);
        let f = values(nf, 20 + ci as u64);
        let bv = values(c.filter[0], 30 + ci as u64);
        let mut m = Spec::default();
        let dims = |v: &[usize]| v.iter().map(|&d| d as i32).collect::<Vec<_>>();
        let tx = m.input("x", &dims(&c.input));
        let tf = m.f32("deconv/filter", &dims(&c.filter), &f);
        let out_shape = [
            c.input[0] as i32,
            c.out[0] as i32,
            c.out[1] as i32,
            c.filter[0] as i32,
        ];
        let ts = m.i32("deconv/output_shape", &[4], &out_shape);
        let ty = m.act("deconv", &out_shape);
        let mut ins = vec![ts, tf, tx];
        if c.bias {
            ins.push(m.f32("deconv/bias", &[c.filter[0] as i32], &bv));
        }
        m.op(
            B::TRANSPOSE_CONV,
            &ins,
            &[ty],
            Opts::TransposeConv {
                padding: c.padding,
                stride: [c.stride[0] as i32, c.stride[1] as i32],
                act: c.act,
            },
        );
        m.outputs.push(ty);
        let got = run_tir(
            &m.build(),
            &[(c.input.iter().map(|&d| d as u64).collect(), x.clone())],
        );
        let pad = [
            tflite_pad(c.out[0], c.filter[1], c.stride[0], c.padding),
            tflite_pad(c.out[1], c.filter[2], c.stride[1], c.padding),
        ];
        let want = reference(
            &Nhwc::new(c.input, x),
            &f,
            c.filter,
            c.bias.then_some(&bv[..]),
            c.stride,
            pad,
            c.out,
            c.act,
        );
        assert_eq!(
            got[0].0,
            out_shape.iter().map(|&d| d as u64).collect::<Vec<_>>(),
            "case {ci}"
        );
        assert_close(&got[0].1, &want);
    }
}

/// Input NHWC, filter OHWI, strides `[h, w]`, SAME (else VALID).
type MediapipeCase = ([usize; 4], [usize; 4], [usize; 2], bool);

/// Mediapipe's `Convolution2DTransposeBias` (selfie segmentation's upsampling): options
/// (padding, stride_w, stride_h) as three little-endian int32s; the output size follows from
/// the input, `(in - 1)·s + k - P` with `P = max(0, k - (in - 1) mod s - 1)` under SAME.
#[test]
fn mediapipe_transpose_conv_bias_matches_its_reference() {
    let cases: [MediapipeCase; 3] = [
        ([1, 3, 5, 4], [3, 2, 2, 4], [2, 2], true),
        ([1, 4, 3, 2], [2, 4, 4, 2], [2, 2], true),
        ([1, 3, 4, 2], [2, 3, 2, 2], [3, 1], false),
    ];
    for (ci, (input, filter, stride, same)) in cases.into_iter().enumerate() {
        let p = |i: usize| {
            let k = filter[1 + i];
            if same {
                k.saturating_sub((input[1 + i] - 1) % stride[i] + 1)
            } else {
                0
            }
        };
        let out = [
            (input[1] - 1) * stride[0] + filter[1] - p(0),
            (input[2] - 1) * stride[1] + filter[2] - p(1),
        ];
        let x = values(input.iter().product(), 40 + ci as u64);
        let f = values(filter.iter().product(), 50 + ci as u64);
        let bv = values(filter[0], 60 + ci as u64);
        let mut m = Spec::default();
        let dims = |v: &[usize]| v.iter().map(|&d| d as i32).collect::<Vec<_>>();
        let tx = m.input("x", &dims(&input));
        let tf = m.f32("up/filter", &dims(&filter), &f);
        let tb = m.f32("up/bias", &[filter[0] as i32], &bv);
        let out_shape = [1, out[0] as i32, out[1] as i32, filter[0] as i32];
        let ty = m.act("up", &out_shape);
        let mut options = Vec::new();
        for v in [
            if same { 1i32 } else { 2 },
            stride[1] as i32,
            stride[0] as i32,
        ] {
            options.extend(v.to_le_bytes());
        }
        m.ops.push(OpSpec {
            code: B::CUSTOM,
            custom: Some("Convolution2DTransposeBias".into()),
            custom_options: Some(options),
            inputs: vec![tx, tf, tb],
            outputs: vec![ty],
            opts: Opts::None,
        });
        m.outputs.push(ty);
        let got = run_tir(
            &m.build(),
            &[(input.iter().map(|&d| d as u64).collect(), x.clone())],
        );
        let want = reference(
            &Nhwc::new(input, x),
            &f,
            filter,
            Some(&bv),
            stride,
            [p(0) / 2, p(1) / 2],
            out,
            Act::NONE,
        );
        assert_close(&got[0].1, &want);
    }
}
