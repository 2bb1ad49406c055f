//! Import-time cleanup: activation fusion and BatchNormalization folding.

mod common;
use common::*;
use tir_onnx::ImportOptions;

#[test]
fn activations_fuse_into_producers() {
    let m = model(
        13,
        vec![input("x", &[1, 2, 4, 4]), input("v", &[2, 3])],
        &["a", "g", "mm", "s", "t", "h"],
        vec![
            tseq("w", &[2, 2, 1, 1]),
            tseq("gw", &[3, 4]),
            tseq("mw", &[3, 3]),
            tf32("zero", &[], &[0.0]),
            tf32("six", &[], &[6.0]),
        ],
        vec![
            node("Conv", &["x", "w"], &["c"], vec![]),
            node("Relu", &["c"], &["a"], vec![]),
            node("Gemm", &["v", "gw"], &["g0"], vec![]),
            node("Clip", &["g0", "zero", "six"], &["g"], vec![]),
            node("MatMul", &["v", "mw"], &["m0"], vec![]),
            node("Sigmoid", &["m0"], &["mm"], vec![]),
            node("Add", &["v", "v"], &["s0"], vec![]),
            node("Tanh", &["s0"], &["s"], vec![]),
            node("Sub", &["v", "v"], &["t0"], vec![]),
            node("HardSwish", &["t0"], &["t"], vec![]),
            // Not fused: the producer's result has a second use.
            node("Mul", &["v", "v"], &["h0"], vec![]),
            node("Relu", &["h0"], &["h1"], vec![]),
            node("Add", &["h0", "h1"], &["h"], vec![]),
        ],
    );
    insta::assert_snapshot!("fused", text(&m));
    let raw = ImportOptions {
        no_cleanup: true,
        ..Default::default()
    };
    insta::assert_snapshot!("not_fused_without_cleanup", text_with(&m, &raw));
}

#[test]
fn returned_producer_is_not_fused() {
    let m = model(
        13,
        vec![input("x", &[2, 3])],
        &["a", "r"],
        vec![],
        vec![
            node("Add", &["x", "x"], &["a"], vec![]),
            node("Relu", &["a"], &["r"], vec![]),
        ],
    );
    insta::assert_snapshot!("returned_producer", text(&m));
}

/// Conv (2 output channels, 1 input channel, 1x1, bias) → BatchNormalization → Relu becomes
/// one conv with the folded weights and `activation = relu`.
#[test]
fn batch_norm_folds_into_conv() {
    let m = model(
        13,
        vec![input("x", &[1, 1, 2, 2])],
        &["y"],
        vec![
            tf32("w", &[2, 1, 1, 1], &[2.0, -1.0]),
            tf32("b", &[2], &[0.5, 1.0]),
            tf32("gamma", &[2], &[3.0, 0.5]),
            tf32("beta", &[2], &[0.25, -2.0]),
            tf32("mean", &[2], &[1.0, -1.0]),
            tf32("var", &[2], &[4.0, 0.25]),
        ],
        vec![
            node("Conv", &["x", "w", "b"], &["c"], vec![]),
            node(
                "BatchNormalization",
                &["c", "gamma", "beta", "mean", "var"],
                &["n"],
                vec![af("epsilon", 0.0)],
            ),
            node("Relu", &["n"], &["y"], vec![]),
        ],
    );
    insta::assert_snapshot!("bn_folded", text(&m));
    let imp = import(&m).unwrap();
    let w = imp.weights.tensors.get("w").unwrap().floats();
    let b = imp.weights.tensors.get("b").unwrap().floats();
    // k = gamma / sqrt(var + eps) = [1.5, 1.0]; w' = w * k; b' = (b - mean) * k + beta.
    assert_eq!(w, vec![3.0, -1.0]);
    assert_eq!(b, vec![(0.5 - 1.0) * 1.5 + 0.25, (1.0 + 1.0) * 1.0 - 2.0]);
    // The BatchNormalization parameters are gone from the weights.
    let mut keys: Vec<&String> = imp.weights.tensors.keys().collect();
    keys.sort();
    assert_eq!(keys, ["b", "w"]);
}

/// Without a conv bias, the BatchNormalization's bias becomes the conv's; a weight shared
/// with another op is not overwritten but copied.
#[test]
fn batch_norm_folds_without_bias_and_with_shared_weight() {
    let m = model(
        13,
        vec![input("x", &[1, 1, 2, 2])],
        &["n", "other"],
        vec![
            tf32("w", &[2, 1, 1, 1], &[2.0, -1.0]),
            tf32("gamma", &[2], &[1.0, 2.0]),
            tf32("beta", &[2], &[0.0, 1.0]),
            tf32("mean", &[2], &[0.0, 0.0]),
            tf32("var", &[2], &[1.0, 1.0]),
        ],
        vec![
            node("Conv", &["x", "w"], &["c"], vec![]),
            node(
                "BatchNormalization",
                &["c", "gamma", "beta", "mean", "var"],
                &["n"],
                vec![af("epsilon", 0.0)],
            ),
            node("Conv", &["x", "w"], &["other"], vec![]),
        ],
    );
    insta::assert_snapshot!("bn_folded_shared_weight", text(&m));
    let imp = import(&m).unwrap();
    assert_eq!(imp.weights.tensors["w"].floats(), vec![2.0, -1.0]);
    assert_eq!(imp.weights.tensors["w.bn_folded"].floats(), vec![2.0, -2.0]);
    assert_eq!(imp.weights.tensors["beta"].floats(), vec![0.0, 1.0]);
}

/// A zero `Pad` of H and W feeding a convolution folds into the conv's own pads (TFLite's
/// `ZeroPadding2D` + VALID conv); a pad of another value, of the channels, or with a second
/// use stays. The values are those of the unfolded graph.
#[test]
fn zero_spatial_pad_folds_into_conv() {
    let m = model(
        13,
        vec![input("x", &[1, 2, 5, 6])],
        &["y", "v", "c", "u", "s"],
        vec![
            tseq("w", &[3, 2, 3, 3]),
            ti64("hw", &[8], &[0, 0, 1, 2, 0, 0, 2, 1]),
            ti64("ch", &[8], &[0, 1, 0, 0, 0, 1, 0, 0]),
            tseq("w3", &[3, 4, 3, 3]),
            tf32("one", &[], &[1.0]),
        ],
        vec![
            // Folded: conv pads [1, 1, 1, 1] grow to [2, 3, 3, 2].
            node("Pad", &["x", "hw"], &["p"], vec![]),
            node(
                "Conv",
                &["p", "w"],
                &["y"],
                vec![ais("pads", &[1, 1, 1, 1])],
            ),
            // Not folded: padding with ones.
            node("Pad", &["x", "hw", "one"], &["q"], vec![]),
            node("Conv", &["q", "w"], &["v"], vec![]),
            // Not folded: the channels are padded.
            node("Pad", &["x", "ch"], &["r"], vec![]),
            node("Conv", &["r", "w3"], &["c"], vec![]),
            // Not folded: the padded value has a second use.
            node("Pad", &["x", "hw"], &["t"], vec![]),
            node("Conv", &["t", "w"], &["u"], vec![]),
            node("Relu", &["t"], &["s"], vec![]),
        ],
    );
    insta::assert_snapshot!("pad_folded", text(&m));
    let raw = ImportOptions {
        no_cleanup: true,
        ..Default::default()
    };
    let run = |opts: &ImportOptions| {
        let imp = import_with(&m, opts).unwrap();
        let st = imp.weights.to_safetensors().unwrap();
        let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
        let x = tir_interp::Tensor::f32(
            vec![1, 2, 5, 6],
            (0..60).map(|v| (v as f32 * 0.37).sin()).collect(),
        )
        .unwrap();
        let outs = tir_interp::run(&imp.module, &weights, &[x]).unwrap();
        outs.iter()
            .map(|t| t.as_f32().unwrap().to_vec())
            .collect::<Vec<_>>()
    };
    let (folded, unfolded) = (run(&ImportOptions::default()), run(&raw));
    assert_eq!(folded.len(), unfolded.len());
    for (a, b) in folded.iter().zip(&unfolded) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-6 * y.abs().max(1.0), "{x} vs {y}");
        }
    }
}

/// A strided 1×1 convolution without padding reads its input through a `slice` with the
/// strides as steps and becomes stride 1 (ResNet's downsampling shortcuts then run on the
/// GEMM micro-kernel); a padded one, or one with a 3×3 kernel, stays. Each output is the
/// same products summed in the same order, so the values equal the unrewritten graph's
/// bitwise.
#[test]
fn strided_pointwise_conv_reads_a_subsampled_input() {
    let m = model(
        13,
        vec![input("x", &[1, 4, 7, 9])],
        &["a", "g", "p", "k"],
        vec![
            tseq("w", &[6, 4, 1, 1]),
            tf32("b", &[6], &[0.5, -0.25, 0.0, 1.0, -1.0, 0.125]),
            tseq("wg", &[4, 2, 1, 1]),
            tseq("w3", &[3, 4, 3, 3]),
        ],
        vec![
            // Subsampled: stride 2 (odd extents: rows 0, 2, 4, 6, columns 0, 2, .., 8).
            node(
                "Conv",
                &["x", "w", "b"],
                &["a0"],
                vec![ais("strides", &[2, 2])],
            ),
            node("Relu", &["a0"], &["a"], vec![]),
            // Subsampled: strides 3 × 2, two groups.
            node(
                "Conv",
                &["x", "wg"],
                &["g"],
                vec![ais("strides", &[3, 2]), ai("group", 2)],
            ),
            // Not subsampled: padded.
            node(
                "Conv",
                &["x", "w"],
                &["p"],
                vec![ais("strides", &[2, 2]), ais("pads", &[1, 0, 1, 0])],
            ),
            // Not subsampled: a 3×3 kernel.
            node("Conv", &["x", "w3"], &["k"], vec![ais("strides", &[2, 2])]),
        ],
    );
    let imp = import(&m).unwrap();
    let t = tir_ir::print(&imp.module);
    assert_eq!(t.matches("= slice(").count(), 2, "{t}");
    assert_eq!(t.matches("strides = [2, 2]").count(), 2, "{t}");
    assert!(!t.contains("strides = [3, 2]"), "{t}");
    let raw = ImportOptions {
        no_cleanup: true,
        ..Default::default()
    };
    let run = |opts: &ImportOptions| {
        let imp = import_with(&m, opts).unwrap();
        let st = imp.weights.to_safetensors().unwrap();
        let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
        let x = tir_interp::Tensor::f32(
            vec![1, 4, 7, 9],
            (0..252).map(|v| (v as f32 * 0.37).sin()).collect(),
        )
        .unwrap();
        let outs = tir_interp::run(&imp.module, &weights, &[x]).unwrap();
        outs.iter()
            .map(|t| t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect())
            .collect::<Vec<Vec<u32>>>()
    };
    assert_eq!(run(&ImportOptions::default()), run(&raw));
}
