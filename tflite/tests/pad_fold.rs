//! A zero PAD of H and W read by two DEPTHWISE_CONV_2D (BlazePose's downsampling blocks: one
//! `ZeroPadding2D` feeding both branches) folds into both convolutions' own pads at import
//! (`tir_onnx::cleanup` step 3), the padded tensor gone; a PAD with a use that is not a
//! convolution's input stays. The values are those of the import without cleanup.

mod common;

use common::*;
use tir_tflite::schema::{ActivationFunctionType as Act, BuiltinOperator as B, Padding};
use tir_tflite::ImportOptions;

/// x `[1, 7, 7, 4]` → 1×1 CONV_2D → PAD (1 each side of H and W) → two depthwise 3×3 VALID stride-2
/// convolutions → ADD; with `relu_too`, a RELU of the padded tensor is a second output.
fn model(relu_too: bool) -> Vec<u8> {
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 7, 7, 4]);
    // A 1×1 convolution first, so that the PAD reads an NCHW value (as BlazePose's do).
    let tf = m.f32("pw/filter", &[4, 1, 1, 4], &values(16, 2));
    let tc = m.act("pw", &[1, 7, 7, 4]);
    m.op(
        B::CONV_2D,
        &[tx, tf],
        &[tc],
        Opts::Conv {
            padding: Padding::VALID,
            stride: [1, 1],
            dilation: [1, 1],
            act: Act::NONE,
        },
    );
    let tp = m.i32("paddings", &[4, 2], &[0, 0, 1, 1, 1, 1, 0, 0]);
    let tpad = m.act("padded", &[1, 9, 9, 4]);
    m.op(B::PAD, &[tc, tp], &[tpad], Opts::None);
    let mut branches = Vec::new();
    for (i, seed) in [(0, 3u64), (1, 5)] {
        let f = m.f32(&format!("dw{i}/filter"), &[1, 3, 3, 4], &values(36, seed));
        let b = m.f32(&format!("dw{i}/bias"), &[4], &values(4, seed + 1));
        let y = m.act(&format!("dw{i}"), &[1, 4, 4, 4]);
        m.op(
            B::DEPTHWISE_CONV_2D,
            &[tpad, f, b],
            &[y],
            Opts::Depthwise {
                padding: Padding::VALID,
                stride: [2, 2],
                multiplier: 1,
                act: Act::NONE,
            },
        );
        branches.push(y);
    }
    let ts = m.act("sum", &[1, 4, 4, 4]);
    m.op(B::ADD, &branches, &[ts], Opts::Add { act: Act::NONE });
    m.outputs.push(ts);
    if relu_too {
        let tr = m.act("r", &[1, 9, 9, 4]);
        m.op(B::RELU, &[tpad], &[tr], Opts::None);
        m.outputs.push(tr);
    }
    m.build()
}

fn run(bytes: &[u8], no_cleanup: bool) -> (String, Vec<Vec<f32>>) {
    let opts = ImportOptions {
        no_cleanup,
        ..Default::default()
    };
    let imp = tir_tflite::import_bytes(bytes, &opts).unwrap_or_else(|e| panic!("{e}"));
    let st = imp.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
    let x = tir_interp::Tensor::f32(vec![1, 7, 7, 4], values(196, 11)).unwrap();
    let outs = tir_interp::run(&imp.module, &weights, &[x]).unwrap_or_else(|e| panic!("{e}"));
    (
        tir_ir::print(&imp.module),
        outs.iter().map(|t| t.as_f32().unwrap().to_vec()).collect(),
    )
}

#[test]
fn a_pad_read_by_two_convolutions_folds_into_both() {
    let bytes = model(false);
    let (text, folded) = run(&bytes, false);
    assert!(!text.contains("pad("), "the PAD is folded away:\n{text}");
    assert_eq!(
        text.matches("pads = [1, 1, 1, 1]").count(),
        2,
        "both convolutions take the pad:\n{text}"
    );
    let (raw, unfolded) = run(&bytes, true);
    assert!(
        raw.contains("pad("),
        "without cleanup the PAD stays:\n{raw}"
    );
    assert_eq!(folded.len(), 1);
    assert_close(&folded[0], &unfolded[0]);
}

#[test]
fn a_pad_with_another_use_stays() {
    let bytes = model(true);
    let (text, kept) = run(&bytes, false);
    assert_eq!(text.matches("pad(").count(), 1, "the PAD stays:\n{text}");
    assert!(
        !text.contains("pads = [1, 1, 1, 1]"),
        "no convolution takes it:\n{text}"
    );
    let (_, unfolded) = run(&bytes, true);
    for (a, b) in kept.iter().zip(&unfolded) {
        assert_close(a, b);
    }
}
