//! Small `.tflite` models built with the generated builder API, imported and run on tir's
//! reference interpreter, against NHWC reference computations written out in the test.

mod common;

use common::*;
use tir_tflite::schema::{ActivationFunctionType as Act, BuiltinOperator as B, Padding};

/// CONV_2D (SAME, stride 2, RELU6) → MAX_POOL_2D (VALID) → RESHAPE → FULLY_CONNECTED (RELU) →
/// SOFTMAX.
#[test]
fn conv_relu6_pool_fc_softmax() {
    let x = values(7 * 6 * 3, 1);
    let f = values(4 * 3 * 3 * 3, 2);
    let fb = values(4, 3);
    let w = values(5 * 8, 4);
    let wb = values(5, 5);
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 7, 6, 3]);
    let tf = m.f32("conv/filter", &[4, 3, 3, 3], &f);
    let tfb = m.f32("conv/bias", &[4], &fb);
    let tc = m.act("conv", &[1, 4, 3, 4]);
    m.op(
        B::CONV_2D,
        &[tx, tf, tfb],
        &[tc],
        Opts::Conv {
            padding: Padding::SAME,
            stride: [2, 2],
            dilation: [1, 1],
            act: Act::RELU6,
        },
    );
    let tp = m.act("pool", &[1, 2, 1, 4]);
    m.op(
        B::MAX_POOL_2D,
        &[tc],
        &[tp],
        Opts::Pool {
            padding: Padding::VALID,
            stride: [2, 2],
            filter: [2, 2],
            act: Act::NONE,
        },
    );
    let shape = m.i32("shape", &[2], &[1, 8]);
    let tr = m.act("flat", &[1, 8]);
    m.op(B::RESHAPE, &[tp, shape], &[tr], Opts::None);
    let tw = m.f32("fc/w", &[5, 8], &w);
    let twb = m.f32("fc/b", &[5], &wb);
    let tfc = m.act("fc", &[1, 5]);
    m.op(
        B::FULLY_CONNECTED,
        &[tr, tw, twb],
        &[tfc],
        Opts::Fc { act: Act::RELU },
    );
    let ts = m.act("probs", &[1, 5]);
    m.op(B::SOFTMAX, &[tfc], &[ts], Opts::Softmax { beta: 1.0 });
    m.outputs.push(ts);

    let out = run_tir(&m.build(), &[(vec![1, 7, 6, 3], x.clone())]);

    let c = conv(
        &Nhwc::new([1, 7, 6, 3], x),
        &f,
        [4, 3, 3, 3],
        &fb,
        [2, 2],
        [1, 1],
        Padding::SAME,
        Act::RELU6,
        false,
    );
    assert_eq!(c.shape, [1, 4, 3, 4]);
    let p = pool(&c, [2, 2], [2, 2], Padding::VALID, true);
    assert_eq!(p.shape, [1, 2, 1, 4]);
    let fc: Vec<f32> = (0..5)
        .map(|o| {
            let s: f32 = (0..8).map(|i| p.data[i] * w[o * 8 + i]).sum();
            (s + wb[o]).max(0.0)
        })
        .collect();
    assert_eq!(out[0].0, vec![1, 5]);
    assert_close(&out[0].1, &softmax(&fc));
}

/// DEPTHWISE_CONV_2D (multiplier 2, VALID, its filter float16 behind DEQUANTIZE) → ADD of a
/// per-channel constant with a fused RELU → AVERAGE_POOL_2D (SAME).
#[test]
fn depthwise_fp16_add_avg_pool() {
    let x = values(6 * 5 * 3, 11);
    // Values a float16 holds exactly, so the reference can use them as they are.
    let f: Vec<f32> = values(3 * 2 * 6, 12)
        .iter()
        .map(|v| (v * 64.0).round() / 64.0)
        .collect();
    let fb = values(6, 13);
    let k = values(6, 14);
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 6, 5, 3]);
    let tf16 = m.f16("dw/filter_fp16", &[1, 3, 2, 6], &f);
    let tf = m.act("dw/filter", &[1, 3, 2, 6]);
    m.op(B::DEQUANTIZE, &[tf16], &[tf], Opts::None);
    let tfb = m.f32("dw/bias", &[6], &fb);
    let td = m.act("dw", &[1, 4, 4, 6]);
    m.op(
        B::DEPTHWISE_CONV_2D,
        &[tx, tf, tfb],
        &[td],
        Opts::Depthwise {
            padding: Padding::VALID,
            stride: [1, 1],
            multiplier: 2,
            act: Act::NONE,
        },
    );
    let tk = m.f32("k", &[6], &k);
    let ta = m.act("sum", &[1, 4, 4, 6]);
    m.op(B::ADD, &[td, tk], &[ta], Opts::Add { act: Act::RELU });
    let tp = m.act("avg", &[1, 2, 2, 6]);
    m.op(
        B::AVERAGE_POOL_2D,
        &[ta],
        &[tp],
        Opts::Pool {
            padding: Padding::SAME,
            stride: [3, 3],
            filter: [3, 3],
            act: Act::NONE,
        },
    );
    m.outputs.push(tp);

    let out = run_tir(&m.build(), &[(vec![1, 6, 5, 3], x.clone())]);

    let d = conv(
        &Nhwc::new([1, 6, 5, 3], x),
        &f,
        [1, 3, 2, 6],
        &fb,
        [1, 1],
        [1, 1],
        Padding::VALID,
        Act::NONE,
        true,
    );
    let a = Nhwc::new(
        d.shape,
        d.data
            .iter()
            .enumerate()
            .map(|(i, v)| (v + k[i % 6]).max(0.0))
            .collect(),
    );
    let p = pool(&a, [3, 3], [3, 3], Padding::SAME, false);
    assert_eq!(out[0].0, vec![1, 2, 2, 6]);
    assert_close(&out[0].1, &p.data);
}

/// CONCATENATION on channels (two inputs, one through LOGISTIC) → MEAN over H and W without
/// keep_dims; a second output keeps the concatenation (NHWC, through HARD_SWISH).
#[test]
fn concat_mean() {
    let a = values(3 * 4 * 2, 21);
    let b = values(3 * 4 * 3, 22);
    let mut m = Spec::default();
    let ta = m.input("a", &[1, 3, 4, 2]);
    let tb = m.input("b", &[1, 3, 4, 3]);
    let tl = m.act("sig", &[1, 3, 4, 3]);
    m.op(B::LOGISTIC, &[tb], &[tl], Opts::None);
    let tc = m.act("cat", &[1, 3, 4, 5]);
    m.op(
        B::CONCATENATION,
        &[ta, tl],
        &[tc],
        Opts::Concat {
            axis: -1,
            act: Act::NONE,
        },
    );
    let axes = m.i32("axes", &[2], &[1, 2]);
    let tm = m.act("mean", &[1, 5]);
    m.op(
        B::MEAN,
        &[tc, axes],
        &[tm],
        Opts::Reducer { keep_dims: false },
    );
    let th = m.act("hs", &[1, 3, 4, 5]);
    m.op(B::HARD_SWISH, &[tc], &[th], Opts::None);
    m.outputs.extend([tm, th]);

    let out = run_tir(
        &m.build(),
        &[(vec![1, 3, 4, 2], a.clone()), (vec![1, 3, 4, 3], b.clone())],
    );

    let mut cat = Vec::new();
    for p in 0..12 {
        cat.extend(&a[p * 2..p * 2 + 2]);
        cat.extend(b[p * 3..p * 3 + 3].iter().map(|v| 1.0 / (1.0 + (-v).exp())));
    }
    let mean: Vec<f32> = (0..5)
        .map(|c| (0..12).map(|p| cat[p * 5 + c]).sum::<f32>() / 12.0)
        .collect();
    let hs: Vec<f32> = cat
        .iter()
        .map(|&v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0)
        .collect();
    assert_eq!(out[0].0, vec![1, 5]);
    assert_close(&out[0].1, &mean);
    assert_eq!(out[1].0, vec![1, 3, 4, 5]);
    assert_close(&out[1].1, &hs);
}

/// PAD → CONV_2D (VALID, dilation 2, grouped: 4 input channels, filter with 2) → MUL of a
/// broadcast constant (RELU_N1_TO_1) → LEAKY_RELU → RESIZE_NEAREST_NEIGHBOR ×2 → TRANSPOSE.
#[test]
fn pad_grouped_dilated_conv_mul_leaky_resize_transpose() {
    let x = values(5 * 5 * 4, 31);
    let f = values(2 * 3 * 3 * 2, 32);
    let k = values(2, 33);
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 5, 5, 4]);
    let pads = m.i32("pads", &[4, 2], &[0, 0, 1, 2, 2, 1, 0, 0]);
    let tp = m.act("padded", &[1, 8, 8, 4]);
    m.op(B::PAD, &[tx, pads], &[tp], Opts::None);
    let tf = m.f32("filter", &[2, 3, 3, 2], &f);
    let tc = m.act("conv", &[1, 4, 4, 2]);
    m.op(
        B::CONV_2D,
        &[tp, tf, -1],
        &[tc],
        Opts::Conv {
            padding: Padding::VALID,
            stride: [1, 1],
            dilation: [2, 2],
            act: Act::NONE,
        },
    );
    let tk = m.f32("k", &[1, 1, 2], &k);
    let tm = m.act("mul", &[1, 4, 4, 2]);
    m.op(
        B::MUL,
        &[tc, tk],
        &[tm],
        Opts::Mul {
            act: Act::RELU_N1_TO_1,
        },
    );
    let tl = m.act("leaky", &[1, 4, 4, 2]);
    m.op(B::LEAKY_RELU, &[tm], &[tl], Opts::LeakyRelu { alpha: 0.2 });
    let size = m.i32("size", &[2], &[8, 8]);
    let tr = m.act("up", &[1, 8, 8, 2]);
    m.op(
        B::RESIZE_NEAREST_NEIGHBOR,
        &[tl, size],
        &[tr],
        Opts::ResizeNearest {
            align_corners: false,
            half_pixel: false,
        },
    );
    let perm = m.i32("perm", &[4], &[0, 3, 1, 2]);
    let tt = m.act("chw", &[1, 2, 8, 8]);
    m.op(B::TRANSPOSE, &[tr, perm], &[tt], Opts::None);
    m.outputs.push(tt);

    let out = run_tir(&m.build(), &[(vec![1, 5, 5, 4], x.clone())]);

    // Pad H by (1, 2) and W by (2, 1).
    let mut padded = vec![0f32; 8 * 8 * 4];
    for h in 0..5 {
        for w in 0..5 {
            for c in 0..4 {
                padded[((h + 1) * 8 + (w + 2)) * 4 + c] = x[(h * 5 + w) * 4 + c];
            }
        }
    }
    let c = conv(
        &Nhwc::new([1, 8, 8, 4], padded),
        &f,
        [2, 3, 3, 2],
        &[],
        [1, 1],
        [2, 2],
        Padding::VALID,
        Act::NONE,
        false,
    );
    assert_eq!(c.shape, [1, 4, 4, 2]);
    let l: Vec<f32> = c
        .data
        .iter()
        .enumerate()
        .map(|(i, v)| (v * k[i % 2]).clamp(-1.0, 1.0))
        .map(|v| if v < 0.0 { 0.2 * v } else { v })
        .collect();
    let mut want = vec![0f32; 2 * 8 * 8];
    for ch in 0..2 {
        for y in 0..8 {
            for xx in 0..8 {
                want[(ch * 8 + y) * 8 + xx] = l[((y / 2) * 4 + xx / 2) * 2 + ch];
            }
        }
    }
    assert_eq!(out[0].0, vec![1, 2, 8, 8]);
    assert_close(&out[0].1, &want);
}

/// The body runs in NCHW: a chain of layout-sensitive ops (conv → depthwise → pool → add) has
/// one transpose at the input and one at the output, none between, and the parameters and
/// results keep the model's NHWC shapes.
#[test]
fn transposes_only_at_the_boundaries() {
    let mut m = Spec::default();
    let x = m.input("x", &[1, 6, 6, 2]);
    let f = m.f32("f", &[3, 3, 3, 2], &values(54, 41));
    let c = m.act("c", &[1, 6, 6, 3]);
    let conv_opts = || Opts::Conv {
        padding: Padding::SAME,
        stride: [1, 1],
        dilation: [1, 1],
        act: Act::RELU,
    };
    m.op(B::CONV_2D, &[x, f, -1], &[c], conv_opts());
    let df = m.f32("df", &[1, 3, 3, 3], &values(27, 42));
    let d = m.act("d", &[1, 6, 6, 3]);
    m.op(
        B::DEPTHWISE_CONV_2D,
        &[c, df, -1],
        &[d],
        Opts::Depthwise {
            padding: Padding::SAME,
            stride: [1, 1],
            multiplier: 1,
            act: Act::NONE,
        },
    );
    let p = m.act("p", &[1, 3, 3, 3]);
    m.op(
        B::MAX_POOL_2D,
        &[d],
        &[p],
        Opts::Pool {
            padding: Padding::VALID,
            stride: [2, 2],
            filter: [2, 2],
            act: Act::NONE,
        },
    );
    let k = m.f32("k", &[3], &[0.5, -0.25, 1.0]);
    let y = m.act("y", &[1, 3, 3, 3]);
    m.op(B::ADD, &[p, k], &[y], Opts::Add { act: Act::RELU6 });
    m.outputs.push(y);
    let imported = tir_tflite::import_bytes(&m.build(), &Default::default()).unwrap();
    let text = tir_ir::print(&imported.module);
    assert_eq!(text.matches("transpose(").count(), 2, "{text}");
    assert!(
        text.contains("(%x: tensor<1x6x6x2xf32>) -> tensor<1x3x3x3xf32>"),
        "{text}"
    );
    // The conv's fused RELU, and the add's per-channel constant broadcast in NCHW.
    assert!(text.contains("activation = relu}"), "{text}");
    assert!(text.contains("tensor<1x3x1x1xf32>"), "{text}");
}

/// REDUCE_MAX over channels keeping dims (an NHWC axis on the NCHW inside), then SUM over H and
/// W without keep_dims, REDUCE_MIN and REDUCE_PROD over W.
#[test]
fn reduce_max_sum_min_prod() {
    let x = values(3 * 4 * 2, 41);
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 3, 4, 2]);
    let c = m.i32("c", &[1], &[3]);
    let hw = m.i32("hw", &[2], &[1, 2]);
    let w = m.i32("w", &[1], &[2]);
    let tmax = m.act("max", &[1, 3, 4, 1]);
    m.op(
        B::REDUCE_MAX,
        &[tx, c],
        &[tmax],
        Opts::Reducer { keep_dims: true },
    );
    let tsum = m.act("sum", &[1, 1]);
    m.op(
        B::SUM,
        &[tmax, hw],
        &[tsum],
        Opts::Reducer { keep_dims: false },
    );
    let tmin = m.act("min", &[1, 3, 2]);
    m.op(
        B::REDUCE_MIN,
        &[tx, w],
        &[tmin],
        Opts::Reducer { keep_dims: false },
    );
    let tprod = m.act("prod", &[1, 3, 1, 2]);
    m.op(
        B::REDUCE_PROD,
        &[tx, w],
        &[tprod],
        Opts::Reducer { keep_dims: true },
    );
    m.outputs.extend([tmax, tsum, tmin, tprod]);

    let out = run_tir(&m.build(), &[(vec![1, 3, 4, 2], x.clone())]);

    let at = |h: usize, w: usize, c: usize| x[(h * 4 + w) * 2 + c];
    let max: Vec<f32> = (0..12).map(|p| x[p * 2].max(x[p * 2 + 1])).collect();
    let sum = vec![max.iter().sum::<f32>()];
    let mut min = Vec::new();
    let mut prod = Vec::new();
    for h in 0..3 {
        for c in 0..2 {
            min.push((0..4).map(|w| at(h, w, c)).fold(f32::INFINITY, f32::min));
            prod.push((0..4).map(|w| at(h, w, c)).product::<f32>());
        }
    }
    assert_eq!(out[0].0, vec![1, 3, 4, 1]);
    assert_close(&out[0].1, &max);
    assert_eq!(out[1].0, vec![1, 1]);
    assert_close(&out[1].1, &sum);
    assert_eq!(out[2].0, vec![1, 3, 2]);
    assert_close(&out[2].1, &min);
    assert_eq!(out[3].0, vec![1, 3, 1, 2]);
    assert_close(&out[3].1, &prod);
}
