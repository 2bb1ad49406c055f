//! Operators imported as compositions of IR ops (onnx/src/import/decompose.rs): each model is
//! imported and run through the reference interpreter, and its values are checked against
//! the ONNX definition written out here in f64; what the compositions cannot express is
//! refused with the reason.

mod common;
use common::*;
use tir_onnx::proto::{AttributeProto, TensorProto};

/// Imports a one-node model (opset `opset`, f32 graph inputs `ins` with their data,
/// initializers `inits`), runs it, and returns each graph output's shape and values.
fn run(
    opset: i64,
    op: &str,
    attrs: Vec<AttributeProto>,
    ins: &[(&str, &[i64], Vec<f32>)],
    inits: Vec<TensorProto>,
    node_inputs: &[&str],
    outs: &[&str],
) -> Vec<(Vec<u64>, Vec<f32>)> {
    let m = model(
        opset,
        ins.iter().map(|(n, d, _)| input(n, d)).collect(),
        outs,
        inits,
        vec![node(op, node_inputs, outs, attrs)],
    );
    let imp = import(&m).unwrap_or_else(|e| panic!("{op}: import failed: {e}"));
    let st = imp.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
    let given: Vec<_> = ins
        .iter()
        .map(|(_, d, v)| {
            tir_interp::Tensor::f32(d.iter().map(|&x| x as u64).collect::<Vec<u64>>(), v.clone())
                .unwrap()
        })
        .collect();
    let got = tir_interp::run(&imp.module, &weights, &given).unwrap();
    got.iter()
        .map(|t| (t.shape().to_vec(), t.as_f32().unwrap().to_vec()))
        .collect()
}

/// A unary op on `xs` (shape `[len]`).
fn unary(opset: i64, op: &str, attrs: Vec<AttributeProto>, xs: &[f32]) -> Vec<f32> {
    let n = [xs.len() as i64];
    run(
        opset,
        op,
        attrs,
        &[("x", &n, xs.to_vec())],
        vec![],
        &["x"],
        &["y"],
    )
    .remove(0)
    .1
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan())
            || g as f64 == w
            || (g as f64 - w).abs() <= 1e-5 + 1e-5 * w.abs();
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

fn sample() -> Vec<f32> {
    vec![
        -30.0, -3.0, -1.5, -0.5, -1e-3, -0.0, 0.0, 1e-3, 0.5, 1.5, 3.0, 30.0,
    ]
}

#[test]
fn activations_follow_their_definitions() {
    let xs = sample();
    let x64: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
    let map = |f: &dyn Fn(f64) -> f64| x64.iter().map(|&x| f(x)).collect::<Vec<f64>>();

    let got = unary(16, "LeakyRelu", vec![af("alpha", 0.1)], &xs);
    assert_close(
        &got,
        &map(&|x| if x < 0.0 { 0.1f32 as f64 * x } else { x }),
        "LeakyRelu",
    );
    let got = unary(16, "LeakyRelu", vec![], &xs);
    assert_close(
        &got,
        &map(&|x| if x < 0.0 { 0.01f32 as f64 * x } else { x }),
        "LeakyRelu default",
    );

    let elu = |a: f64| move |x: f64| if x < 0.0 { a * (x.exp() - 1.0) } else { x };
    assert_close(
        &unary(22, "Elu", vec![af("alpha", 2.0)], &xs),
        &map(&elu(2.0)),
        "Elu",
    );
    assert_close(
        &unary(22, "Elu", vec![], &xs),
        &map(&elu(1.0)),
        "Elu default",
    );

    let (a, g) = (1.673_263_192_176_818_8, 1.050_701_022_148_132_3);
    let selu = move |x: f64| g * if x > 0.0 { x } else { a * x.exp() - a };
    assert_close(&unary(22, "Selu", vec![], &xs), &map(&selu), "Selu");
    let selu2 = |x: f64| 3.0 * if x > 0.0 { x } else { 2.0 * x.exp() - 2.0 };
    let got = unary(22, "Selu", vec![af("alpha", 2.0), af("gamma", 3.0)], &xs);
    assert_close(&got, &map(&selu2), "Selu alpha gamma");

    let celu = |x: f64| x.max(0.0) + (0.5 * ((x / 0.5).exp() - 1.0)).min(0.0);
    assert_close(
        &unary(12, "Celu", vec![af("alpha", 0.5)], &xs),
        &map(&celu),
        "Celu",
    );

    let mish = |x: f64| x * x.exp().ln_1p().tanh();
    assert_close(&unary(22, "Mish", vec![], &xs), &map(&mish), "Mish");

    let swish = |x: f64| x / (1.0 + (-0.5 * x).exp());
    assert_close(
        &unary(24, "Swish", vec![af("alpha", 0.5)], &xs),
        &map(&swish),
        "Swish",
    );

    let gelu = |x: f64| {
        let k = (2.0 / std::f64::consts::PI).sqrt();
        0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
    };
    let got = unary(20, "Gelu", vec![as_("approximate", "tanh")], &xs);
    assert_close(&got, &map(&gelu), "Gelu tanh");

    // The edges: ±inf keep each branch exact, NaN stays NaN.
    let edges = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
    let e = unary(22, "Elu", vec![af("alpha", 2.0)], &edges);
    assert!(
        e[0] == f32::INFINITY && e[1] == -2.0 && e[2].is_nan(),
        "{e:?}"
    );
    let l = unary(16, "LeakyRelu", vec![], &edges);
    assert!(
        l[0] == f32::INFINITY && l[1] == f32::NEG_INFINITY && l[2].is_nan(),
        "{l:?}"
    );
}

#[test]
fn sum_and_mean_broadcast_their_inputs() {
    let ins: [(&str, &[i64], Vec<f32>); 3] = [
        ("a", &[2, 3], vec![1., 2., 3., 4., 5., 6.]),
        ("b", &[3], vec![10., 20., 30.]),
        ("c", &[2, 1], vec![100., 200.]),
    ];
    let s = run(13, "Sum", vec![], &ins, vec![], &["a", "b", "c"], &["y"]);
    assert_eq!(s[0].0, [2, 3]);
    assert_eq!(s[0].1, [111., 122., 133., 214., 225., 236.]);
    let m = run(13, "Mean", vec![], &ins, vec![], &["a", "b", "c"], &["y"]);
    let want: Vec<f64> = [111., 122., 133., 214., 225., 236.]
        .iter()
        .map(|v| v / 3.0)
        .collect();
    assert_close(&m[0].1, &want, "Mean");
    // One input is that input.
    let one = run(13, "Mean", vec![], &ins[..1], vec![], &["a"], &["y"]);
    assert_eq!(one[0].1, ins[0].2);
}

#[test]
fn global_max_pool_and_lp_normalization() {
    let xs: Vec<f32> = vec![1., -5., 3., 2., -1., -2., -7., -3.];
    let y = run(
        22,
        "GlobalMaxPool",
        vec![],
        &[("x", &[1, 2, 2, 2], xs.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    assert_eq!(y[0].0, [1, 2, 1, 1]);
    assert_eq!(y[0].1, [3., -1.]);

    let x = vec![3., 4., 0., -6., 8., 0.];
    for (p, norms) in [(2, [5.0f64, 10.0]), (1, [7.0, 14.0])] {
        let y = run(
            22,
            "LpNormalization",
            vec![ai("p", p)],
            &[("x", &[2, 3], x.clone())],
            vec![],
            &["x"],
            &["y"],
        );
        let want: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| v as f64 / norms[i / 3])
            .collect();
        assert_close(&y[0].1, &want, &format!("LpNormalization p={p}"));
    }
    // Along axis 0 (a column at a time).
    let y = run(
        22,
        "LpNormalization",
        vec![ai("axis", 0)],
        &[("x", &[2, 3], x.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    let cols = [(9.0f64 + 36.0).sqrt(), (16.0f64 + 64.0).sqrt(), 0.0];
    let want: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| v as f64 / cols[i % 3])
        .collect();
    assert_close(&y[0].1, &want, "LpNormalization axis 0 (0/0 is NaN)");
}

/// `(x - mean) / sqrt(var + eps)` over consecutive groups of `group` values.
fn standardized(x: &[f32], group: usize, eps: f64) -> Vec<f64> {
    x.chunks(group)
        .flat_map(|c| {
            let n = c.len() as f64;
            let m = c.iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = c.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / n;
            c.iter()
                .map(move |&v| (v as f64 - m) / (var + eps).sqrt())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn instance_group_and_mean_variance_normalization() {
    let x: Vec<f32> = (0..24).map(|i| ((i * 7) % 11) as f32 * 0.5 - 2.0).collect();
    let scale = [0.5f32, 2.0, -1.0, 1.5];
    let bias = [0.1f32, -0.2, 0.3, 0.0];
    let inits = || vec![tf32("s", &[4], &scale), tf32("b", &[4], &bias)];
    let affine = |z: Vec<f64>, per: usize| -> Vec<f64> {
        z.iter()
            .enumerate()
            .map(|(i, &v)| {
                let c = (i / per) % 4;
                v * scale[c] as f64 + bias[c] as f64
            })
            .collect()
    };

    // [1, 4, 2, 3]: each channel's 6 values standardised.
    let y = run(
        22,
        "InstanceNormalization",
        vec![af("epsilon", 1e-3)],
        &[("x", &[1, 4, 2, 3], x.clone())],
        inits(),
        &["x", "s", "b"],
        &["y"],
    );
    assert_close(
        &y[0].1,
        &affine(standardized(&x, 6, 1e-3f32 as f64), 6),
        "InstanceNormalization",
    );

    // Two groups of two channels: 12 values per group.
    let y = run(
        21,
        "GroupNormalization",
        vec![ai("num_groups", 2)],
        &[("x", &[1, 4, 2, 3], x.clone())],
        inits(),
        &["x", "s", "b"],
        &["y"],
    );
    assert_close(
        &y[0].1,
        &affine(standardized(&x, 12, 1e-5f32 as f64), 6),
        "GroupNormalization",
    );

    // MVN over [0, 2, 3] of [2, 2, 2, 3]: per channel, across both samples.
    let y = run(
        13,
        "MeanVarianceNormalization",
        vec![],
        &[("x", &[2, 2, 2, 3], x.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    let mut want = vec![0.0; 24];
    for c in 0..2 {
        let idx: Vec<usize> = (0..24).filter(|i| (i / 6) % 2 == c).collect();
        let vals: Vec<f64> = idx.iter().map(|&i| x[i] as f64).collect();
        let m = vals.iter().sum::<f64>() / 12.0;
        let ex2 = vals.iter().map(|v| v * v).sum::<f64>() / 12.0;
        let sd = (ex2 - m * m).sqrt() + 1e-9;
        for &i in &idx {
            want[i] = (x[i] as f64 - m) / sd;
        }
    }
    assert_close(&y[0].1, &want, "MeanVarianceNormalization");
}

#[test]
fn layer_normalization_returns_its_statistics() {
    let x: Vec<f32> = (0..12).map(|i| ((i * 5) % 7) as f32 - 3.0).collect();
    let w: Vec<f32> = (0..4).map(|i| 1.0 + i as f32 * 0.25).collect();
    let out = run(
        17,
        "LayerNormalization",
        vec![af("epsilon", 1e-2)],
        &[("x", &[3, 4], x.clone())],
        vec![tf32("w", &[4], &w)],
        &["x", "w"],
        &["y", "mean", "inv_std"],
    );
    let eps = 1e-2f32 as f64;
    let z = standardized(&x, 4, eps);
    let want_y: Vec<f64> = z
        .iter()
        .enumerate()
        .map(|(i, v)| v * w[i % 4] as f64)
        .collect();
    assert_close(&out[0].1, &want_y, "Y");
    assert_eq!(out[1].0, [3, 1]);
    assert_eq!(out[2].0, [3, 1]);
    for (r, row) in x.chunks(4).enumerate() {
        let m = row.iter().map(|&v| v as f64).sum::<f64>() / 4.0;
        let var = row.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / 4.0;
        assert_close(&out[1].1[r..r + 1], &[m], "Mean");
        assert_close(
            &out[2].1[r..r + 1],
            &[1.0 / (var + eps).sqrt()],
            "InvStdDev",
        );
    }
}

#[test]
fn depth_to_space_space_to_depth_and_tile_move_elements() {
    // [1, 8, 1, 2] with b = 2: value = its flat index, so each output names its source.
    let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let (n, c, h, w, b) = (1usize, 8usize, 1usize, 2usize, 2usize);
    let cb = c / (b * b);
    for mode in ["DCR", "CRD"] {
        let y = run(
            13,
            "DepthToSpace",
            vec![ai("blocksize", 2), as_("mode", mode)],
            &[("x", &[1, 8, 1, 2], x.clone())],
            vec![],
            &["x"],
            &["y"],
        );
        assert_eq!(y[0].0, [1, 2, 2, 4]);
        let mut want = Vec::new();
        for _ in 0..n {
            for oc in 0..cb {
                for oh in 0..h * b {
                    for ow in 0..w * b {
                        let (bh, bw) = (oh % b, ow % b);
                        let ic = if mode == "DCR" {
                            (bh * b + bw) * cb + oc
                        } else {
                            oc * b * b + bh * b + bw
                        };
                        want.push((ic * h * w + (oh / b) * w + ow / b) as f32);
                    }
                }
            }
        }
        assert_eq!(y[0].1, want, "DepthToSpace {mode}");
    }
    // SpaceToDepth inverts DepthToSpace's DCR.
    let d2s = run(
        13,
        "DepthToSpace",
        vec![ai("blocksize", 2)],
        &[("x", &[1, 8, 1, 2], x.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    let back = run(
        13,
        "SpaceToDepth",
        vec![ai("blocksize", 2)],
        &[("x", &[1, 2, 2, 4], d2s[0].1.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    assert_eq!(back[0].0, [1, 8, 1, 2]);
    assert_eq!(back[0].1, x);

    // Tile [2, 3] by [2, 1] then by [1, 2], repeats a constant.
    let t: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let y = run(
        13,
        "Tile",
        vec![],
        &[("x", &[2, 3], t.clone())],
        vec![ti64("r", &[2], &[2, 2])],
        &["x", "r"],
        &["y"],
    );
    assert_eq!(y[0].0, [4, 6]);
    let want: Vec<f32> = (0..24)
        .map(|i| {
            let (r, c) = (i / 6, i % 6);
            ((r % 2) * 3 + c % 3) as f32
        })
        .collect();
    assert_eq!(y[0].1, want);
    let y = run(
        13,
        "Tile",
        vec![],
        &[("x", &[2, 3], t.clone())],
        vec![ti64("r", &[2], &[1, 1])],
        &["x", "r"],
        &["y"],
    );
    assert_eq!(y[0].1, t);
}

#[test]
fn what_the_compositions_cannot_express_is_refused() {
    let one = |opset, op: &str, attrs, dims: &[i64], inits, inputs: &[&str]| {
        error(&model(
            opset,
            vec![input("x", dims)],
            &["y"],
            inits,
            vec![node(op, inputs, &["y"], attrs)],
        ))
    };
    let e = one(
        22,
        "LpNormalization",
        vec![ai("p", 3)],
        &[2, 3],
        vec![],
        &["x"],
    );
    assert!(e.contains("LpNormalization: p = 3 (only 1 and 2)"), "{e}");
    let e = one(
        13,
        "Tile",
        vec![],
        &[2, 3],
        vec![ti64("r", &[2], &[0, 1])],
        &["x", "r"],
    );
    assert!(e.contains("repeats"), "{e}");
    let e = one(
        13,
        "Tile",
        vec![],
        &[2, 3],
        vec![ti64("r", &[1], &[2])],
        &["x", "r"],
    );
    assert!(e.contains("Tile: 1 repeats for a rank-2 input"), "{e}");
    let g = || vec![tf32("s", &[6], &[1.0; 6]), tf32("b", &[6], &[0.0; 6])];
    let e = one(
        21,
        "GroupNormalization",
        vec![ai("num_groups", 4)],
        &[1, 6, 2, 2],
        g(),
        &["x", "s", "b"],
    );
    assert!(
        e.contains("num_groups = 4 does not divide the 6 channels"),
        "{e}"
    );
    let e = one(
        18,
        "GroupNormalization",
        vec![ai("num_groups", 2)],
        &[1, 6, 2, 2],
        g(),
        &["x", "s", "b"],
    );
    assert!(e.contains("opset 18's per-group scale"), "{e}");
    let e = one(
        13,
        "DepthToSpace",
        vec![ai("blocksize", 2)],
        &[1, 6, 2, 2],
        vec![],
        &["x"],
    );
    assert!(e.contains("not a multiple of blocksize² = 4"), "{e}");
    let e = one(
        13,
        "SpaceToDepth",
        vec![ai("blocksize", 2)],
        &[1, 6, 3, 2],
        vec![],
        &["x"],
    );
    assert!(e.contains("3x2 is not a multiple of blocksize 2"), "{e}");
    let e = one(
        13,
        "DepthToSpace",
        vec![ai("blocksize", 2), as_("mode", "XYZ")],
        &[1, 8, 2, 2],
        vec![],
        &["x"],
    );
    assert!(e.contains("mode \"XYZ\" is not supported"), "{e}");
    let e = one(12, "Celu", vec![af("alpha", 0.0)], &[3], vec![], &["x"]);
    assert!(e.contains("alpha must not be 0"), "{e}");
    let e = one(22, "GlobalMaxPool", vec![], &[3, 4], vec![], &["x"]);
    assert!(e.contains("rank 3 or more"), "{e}");
}

/// Trilu imports to the `trilu` op with its constant `k`; a `k` computed at run time is
/// refused.
#[test]
fn trilu_takes_its_constant_diagonal() {
    let x: Vec<f32> = (1..=9).map(|i| i as f32).collect();
    let y = run(
        14,
        "Trilu",
        vec![ai("upper", 0)],
        &[("x", &[3, 3], x.clone())],
        vec![ti64("k", &[], &[1])],
        &["x", "k"],
        &["y"],
    );
    assert_eq!(y[0].1, [1., 2., 0., 4., 5., 6., 7., 8., 9.]);
    let y = run(
        14,
        "Trilu",
        vec![],
        &[("x", &[3, 3], x.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    assert_eq!(y[0].1, [1., 2., 3., 0., 5., 6., 0., 0., 9.]);
    let m = model(
        14,
        vec![input("x", &[3, 3]), input("k", &[])],
        &["y"],
        vec![],
        vec![node("Trilu", &["x", "k"], &["y"], vec![])],
    );
    let e = error(&m);
    assert!(e.contains("k (input 1) must be a constant"), "{e}");
}

#[test]
fn thresholded_relu_and_lrn_follow_their_definitions() {
    let xs = [
        -f32::INFINITY,
        -2.0,
        0.5,
        1.0,
        1.0 + f32::EPSILON,
        3.0,
        f32::INFINITY,
        f32::NAN,
    ];
    let y = unary(22, "ThresholdedRelu", vec![], &xs);
    assert_eq!(
        y[..7],
        [0., 0., 0., 0., 1.0 + f32::EPSILON, 3., f32::INFINITY]
    );
    assert!(y[7].is_nan());

    // LRN over 5 channels of [1, 5, 1, 2], size 4: channels c-1 ..= c+2.
    let x: Vec<f32> = (0..10).map(|i| (i as f32 - 4.0) * 0.7).collect();
    let (alpha, beta, bias, size) = (0.3f64, 0.6f64, 2.0f64, 4usize);
    let attrs = vec![
        af("alpha", 0.3),
        af("beta", 0.6),
        af("bias", 2.0),
        ai("size", 4),
    ];
    let y = run(
        13,
        "LRN",
        attrs,
        &[("x", &[1, 5, 1, 2], x.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    let mut want = Vec::new();
    for c in 0..5usize {
        for p in 0..2usize {
            let lo = c.saturating_sub((size - 1) / 2);
            let hi = (c + (size - 1).div_ceil(2) + 1).min(5);
            let sq: f64 = (lo..hi).map(|cc| (x[cc * 2 + p] as f64).powi(2)).sum();
            let (a, b, k) = (alpha as f32 as f64, beta as f32 as f64, bias as f32 as f64);
            want.push(x[c * 2 + p] as f64 / (k + a / size as f64 * sq).powf(b));
        }
    }
    assert_close(&y[0].1, &want, "LRN");
}

#[test]
fn batch_normalization_in_training_mode_updates_the_running_statistics() {
    // [2, 2, 1, 3]: channel c holds x[n, c, 0, :] for both n.
    let x: Vec<f32> = vec![1., 2., 3., -1., 0., 4., 5., 6., 7., 2., 2., 2.];
    let inits = vec![
        tf32("s", &[2], &[1.5, -1.0]),
        tf32("b", &[2], &[0.25, 0.5]),
        tf32("m", &[2], &[10.0, 20.0]),
        tf32("v", &[2], &[1.0, 2.0]),
    ];
    let out = run(
        15,
        "BatchNormalization",
        vec![
            ai("training_mode", 1),
            af("momentum", 0.75),
            af("epsilon", 1e-2),
        ],
        &[("x", &[2, 2, 1, 3], x.clone())],
        inits,
        &["x", "s", "b", "m", "v"],
        &["y", "running_mean", "running_var"],
    );
    let (scale, bias, rm, rv) = ([1.5, -1.0], [0.25, 0.5], [10.0, 20.0], [1.0, 2.0]);
    let mut want_y = vec![0.0; 12];
    for c in 0..2 {
        let idx: Vec<usize> = (0..12).filter(|i| (i / 3) % 2 == c).collect();
        let vals: Vec<f64> = idx.iter().map(|&i| x[i] as f64).collect();
        let m = vals.iter().sum::<f64>() / 6.0;
        let var = vals.iter().map(|v| (v - m).powi(2)).sum::<f64>() / 6.0;
        for &i in &idx {
            want_y[i] = (x[i] as f64 - m) / (var + 1e-2f32 as f64).sqrt() * scale[c] + bias[c];
        }
        assert_close(
            &out[1].1[c..c + 1],
            &[rm[c] * 0.75 + m * 0.25],
            "running_mean",
        );
        assert_close(
            &out[2].1[c..c + 1],
            &[rv[c] * 0.75 + var * 0.25],
            "running_var",
        );
    }
    assert_close(&out[0].1, &want_y, "Y");
}

#[test]
fn one_dimensional_pools_run_as_two_dimensional_ones() {
    let x: Vec<f32> = vec![1., 5., 2., 8., 3., 0., 7., -1.];
    let y = run(
        22,
        "MaxPool",
        vec![
            ais("kernel_shape", &[3]),
            ais("strides", &[2]),
            ais("pads", &[1, 1]),
        ],
        &[("x", &[1, 1, 8], x.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    assert_eq!(y[0].0, [1, 1, 4]);
    assert_eq!(y[0].1, [5., 8., 8., 7.]);
    let y = run(
        22,
        "AveragePool",
        vec![ais("kernel_shape", &[2]), ais("pads", &[0, 1])],
        &[("x", &[1, 2, 4], x.clone())],
        vec![],
        &["x"],
        &["y"],
    );
    // count_include_pad = 0: the last window holds one element.
    assert_eq!(y[0].0, [1, 2, 4]);
    assert_eq!(y[0].1, [3., 3.5, 5., 8., 1.5, 3.5, 3., -1.]);
}

/// The losses pick each position's target class exactly (an infinite log-probability at
/// another class does not leak), weight it, skip `ignore_index`, and reduce as asked.
#[test]
fn nll_and_softmax_cross_entropy_losses() {
    // [N = 2, C = 3, d = 2]; x[n, c, d].
    let x: Vec<f32> = vec![
        -1.0,
        -2.0,
        f32::NEG_INFINITY,
        -0.5,
        -3.0,
        -0.25, // n = 0
        -0.75,
        -4.0,
        -1.5,
        f32::NEG_INFINITY,
        -2.5,
        -0.125, // n = 1
    ];
    let at = |n: usize, c: usize, d: usize| x[(n * 3 + c) * 2 + d] as f64;
    let targets = [0i64, 2, 1, 1]; // [n][d]
    let w = [0.5f32, 2.0, 4.0];
    let inits = || vec![ti64("t", &[2, 2], &targets), tf32("w", &[3], &w)];
    let loss = |reduction: &str, ignore: Option<i64>| {
        let mut attrs = vec![as_("reduction", reduction)];
        attrs.extend(ignore.map(|i| ai("ignore_index", i)));
        run(
            22,
            "NegativeLogLikelihoodLoss",
            attrs,
            &[("x", &[2, 3, 2], x.clone())],
            inits(),
            &["x", "t", "w"],
            &["y"],
        )
        .remove(0)
    };
    let mut per = Vec::new();
    for n in 0..2 {
        for d in 0..2 {
            let t = targets[n * 2 + d] as usize;
            per.push(-at(n, t, d) * w[t] as f64);
        }
    }
    let none = loss("none", None);
    assert_eq!(none.0, [2, 2]);
    assert_close(&none.1, &per, "none");
    let sum = loss("sum", None);
    assert_eq!(sum.0, Vec::<u64>::new());
    assert_close(&sum.1, &[per.iter().sum()], "sum");
    let wsum: f64 = targets.iter().map(|&t| w[t as usize] as f64).sum();
    assert_close(
        &loss("mean", None).1,
        &[per.iter().sum::<f64>() / wsum],
        "mean",
    );
    // Class 1 ignored: positions 2 and 3 drop out of the sum and of the weights.
    let kept = per[0] + per[1];
    let kept_w = (w[0] + w[2]) as f64;
    assert_close(
        &loss("mean", Some(1)).1,
        &[kept / kept_w],
        "mean, ignore_index 1",
    );

    // Softmax cross-entropy: the same loss on log_softmax over the classes, which is output 1.
    let xs: Vec<f32> = (0..12).map(|i| ((i * 5) % 7) as f32 * 0.5 - 1.0).collect();
    let out = run(
        13,
        "SoftmaxCrossEntropyLoss",
        vec![as_("reduction", "mean"), ai("ignore_index", 2)],
        &[("x", &[2, 3, 2], xs.clone())],
        inits(),
        &["x", "t", "w"],
        &["z", "log_prob"],
    );
    let lp = |n: usize, c: usize, d: usize| {
        let v = |c: usize| xs[(n * 3 + c) * 2 + d] as f64;
        let lse = (0..3).map(|k| v(k).exp()).sum::<f64>().ln();
        v(c) - lse
    };
    let (mut num, mut den) = (0.0, 0.0);
    for n in 0..2 {
        for d in 0..2 {
            let t = targets[n * 2 + d] as usize;
            if t != 2 {
                num += -lp(n, t, d) * w[t] as f64;
                den += w[t] as f64;
            }
        }
    }
    assert_close(&out[0].1, &[num / den], "SoftmaxCrossEntropyLoss");
    let want_lp: Vec<f64> = (0..12).map(|i| lp(i / 6, (i / 2) % 3, i % 2)).collect();
    assert_close(&out[1].1, &want_lp, "log_prob");
}

#[test]
fn loss_targets_must_be_constant_classes() {
    let m = |targets: &[i64], ii: Option<i64>| {
        model(
            22,
            vec![input("x", &[2, 3])],
            &["y"],
            vec![ti64("t", &[2], targets)],
            vec![node(
                "NegativeLogLikelihoodLoss",
                &["x", "t"],
                &["y"],
                ii.map(|i| ai("ignore_index", i)).into_iter().collect(),
            )],
        )
    };
    let e = error(&m(&[0, 3], None));
    assert!(e.contains("target 3 is outside the 3 classes"), "{e}");
    // An out-of-range target that is ignore_index is fine.
    import(&m(&[0, -7], Some(-7))).unwrap();
    let runtime = model(
        22,
        vec![input("x", &[2, 3]), input("t", &[2])],
        &["y"],
        vec![],
        vec![node(
            "NegativeLogLikelihoodLoss",
            &["x", "t"],
            &["y"],
            vec![],
        )],
    );
    let e = error(&runtime);
    assert!(e.contains("target (input 1) must be a constant"), "{e}");
}

#[test]
fn center_crop_pad_crops_and_pads_around_the_centre() {
    // [5, 2] to [2, 5]: rows 1..3 kept (floor((5-2)/2) = 1), columns padded 1 before, 2 after.
    let x: Vec<f32> = (1..=10).map(|i| i as f32).collect();
    let y = run(
        18,
        "CenterCropPad",
        vec![],
        &[("x", &[5, 2], x.clone())],
        vec![ti64("s", &[2], &[2, 5])],
        &["x", "s"],
        &["y"],
    );
    assert_eq!(y[0].0, [2, 5]);
    assert_eq!(y[0].1, [0., 3., 4., 0., 0., 0., 5., 6., 0., 0.]);
    // Only axis -1, cropped from 2 to 1 (start 0).
    let y = run(
        18,
        "CenterCropPad",
        vec![ais("axes", &[-1])],
        &[("x", &[5, 2], x.clone())],
        vec![ti64("s", &[1], &[1])],
        &["x", "s"],
        &["y"],
    );
    assert_eq!(y[0].1, [1., 3., 5., 7., 9.]);
    // The same shape: the input itself.
    let y = run(
        18,
        "CenterCropPad",
        vec![],
        &[("x", &[5, 2], x.clone())],
        vec![ti64("s", &[2], &[5, 2])],
        &["x", "s"],
        &["y"],
    );
    assert_eq!(y[0].1, x);
}

/// ONNX's reference RotaryEmbedding on a `[B, S, H, D]` layout, in f64.
fn rope_reference(
    x: &[f32],
    [b, s, h, d]: [usize; 4],
    cos: &[f64],
    sin: &[f64],
    rot: usize,
    interleaved: bool,
) -> Vec<f64> {
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let half = rot / 2;
    for bi in 0..b {
        for si in 0..s {
            for hi in 0..h {
                let base = ((bi * s + si) * h + hi) * d;
                for i in 0..half {
                    let (p, q) = if interleaved {
                        (2 * i, 2 * i + 1)
                    } else {
                        (i, i + half)
                    };
                    let (x1, x2) = (x[base + p] as f64, x[base + q] as f64);
                    let (c, sn) = (cos[(bi * s + si) * half + i], sin[(bi * s + si) * half + i]);
                    out[base + p] = c * x1 - sn * x2;
                    out[base + q] = sn * x1 + c * x2;
                }
            }
        }
    }
    out
}

#[test]
fn rotary_embedding_rotates_pairs_by_the_cached_angles() {
    let (b, s, h, d) = (1usize, 3usize, 2usize, 6usize);
    let x: Vec<f32> = (0..b * s * h * d)
        .map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5)
        .collect();
    // Caches of 5 positions, rot = 4 (half 2); positions [4, 0, 2].
    let angle = |p: usize, i: usize| 0.3 * (p as f64 + 1.0) * (i as f64 + 1.0);
    let cache = |f: fn(f64) -> f64| -> Vec<f32> {
        (0..5)
            .flat_map(|p| (0..2).map(move |i| f(angle(p, i)) as f32))
            .collect()
    };
    let (cc, sc) = (cache(f64::cos), cache(f64::sin));
    let pos = [4i64, 0, 2];
    let gathered = |c: &[f32]| -> Vec<f64> {
        pos.iter()
            .flat_map(|&p| (0..2).map(move |i| c[p as usize * 2 + i] as f64))
            .collect()
    };
    let inits = || {
        vec![
            tf32("cos", &[5, 2], &cc),
            tf32("sin", &[5, 2], &sc),
            ti64("pos", &[1, 3], &pos),
        ]
    };
    for interleaved in [false, true] {
        // 3-D input [B, S, H·D] with num_heads.
        let y = run(
            23,
            "RotaryEmbedding",
            vec![
                ai("num_heads", 2),
                ai("rotary_embedding_dim", 4),
                ai("interleaved", interleaved as i64),
            ],
            &[("x", &[1, 3, 12], x.clone())],
            inits(),
            &["x", "cos", "sin", "pos"],
            &["y"],
        );
        let want = rope_reference(
            &x,
            [b, s, h, d],
            &gathered(&cc),
            &gathered(&sc),
            4,
            interleaved,
        );
        assert_close(&y[0].1, &want, &format!("3-D, interleaved {interleaved}"));
    }
    // 4-D input [B, H, S, D]: the same values with the heads before the sequence.
    let x4: Vec<f32> = (0..b * h * s * d)
        .map(|i| {
            let (hi, si, di) = (i / (s * d), (i / d) % s, i % d);
            x[(si * h + hi) * d + di]
        })
        .collect();
    let y = run(
        23,
        "RotaryEmbedding",
        vec![ai("rotary_embedding_dim", 4)],
        &[("x", &[1, 2, 3, 6], x4)],
        inits(),
        &["x", "cos", "sin", "pos"],
        &["y"],
    );
    let want = rope_reference(&x, [b, s, h, d], &gathered(&cc), &gathered(&sc), 4, false);
    let want4: Vec<f64> = (0..b * h * s * d)
        .map(|i| {
            let (hi, si, di) = (i / (s * d), (i / d) % s, i % d);
            want[(si * h + hi) * d + di]
        })
        .collect();
    assert_close(&y[0].1, &want4, "4-D");
}

/// AffineGrid maps each output point's normalised coordinates through `theta`.
#[test]
fn affine_grid_transforms_the_normalised_coordinates() {
    // theta: x' = 2x + 0.5y + 0.1, y' = -y + 0.3 (one sample); size [1, 1, 2, 3].
    let theta = vec![2.0f32, 0.5, 0.1, 0.0, -1.0, 0.3];
    for align in [0i64, 1] {
        let y = run(
            20,
            "AffineGrid",
            vec![ai("align_corners", align)],
            &[("theta", &[1, 2, 3], theta.clone())],
            vec![ti64("size", &[4], &[1, 1, 2, 3])],
            &["theta", "size"],
            &["grid"],
        );
        assert_eq!(y[0].0, [1, 2, 3, 2]);
        let c = |i: f64, n: f64| {
            if align == 1 {
                -1.0 + 2.0 * i / (n - 1.0)
            } else {
                (2.0 * i + 1.0) / n - 1.0
            }
        };
        let mut want = Vec::new();
        for h in 0..2 {
            for w in 0..3 {
                let (x, yv) = (c(w as f64, 3.0), c(h as f64, 2.0));
                want.push(2.0f32 as f64 * x + 0.5 * yv + 0.1f32 as f64);
                want.push(-yv + 0.3f32 as f64);
            }
        }
        assert_close(&y[0].1, &want, &format!("align_corners {align}"));
    }
}
