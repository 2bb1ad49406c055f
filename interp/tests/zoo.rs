//! The interpreter runs the zoo's models (`examples/*.tir`) with seeded weights and inputs and
//! produces finite outputs of the declared types.
//!
//! The models cheap enough for a debug test run here, one test each. The heavy ones
//! (ResNet-50, Inception v3, DenseNet-121, GoogLeNet, PoseNet, DeepLab v3, U-Net) take from
//! several seconds to a minute each in a debug build; they run in the ignored test
//! `heavy_models_run_with_finite_outputs` (`cargo test -p tir-interp --release -- --ignored`).

use std::path::Path;
use tir_interp::{run, weights, Weights};

fn run_model(file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("the example exists");
    let module = tir_ir::parse_and_verify(&text).expect("the example verifies");
    let func = module.entry().expect("an entry function");
    let weights = Weights::generate(&module, 0).expect("weights generate");
    let inputs: Vec<_> = func
        .params
        .iter()
        .map(|&p| weights::random_input(&func.values[p].name, func.ty(p).unwrap(), 0).unwrap())
        .collect();
    let outputs = run(&module, &weights, &inputs).expect("the model runs");
    assert_eq!(outputs.len(), func.result_types.len());
    for (out, ty) in outputs.iter().zip(&func.result_types) {
        assert_eq!(&out.ty, ty);
        let v = out.as_f32().unwrap();
        assert!(v.iter().all(|x| x.is_finite()), "{file}: non-finite output");
        // Not collapsed: the outputs vary.
        let (lo, hi) = v
            .iter()
            .fold((f32::MAX, f32::MIN), |(l, h), &x| (l.min(x), h.max(x)));
        assert!(v.len() < 2 || hi > lo, "{file}: constant output");
    }
}

#[test]
fn mobilenet_v1_runs() {
    run_model("mobilenet_v1.tir");
}

#[test]
fn mobilenet_v2_runs() {
    run_model("mobilenet_v2.tir");
}

#[test]
fn mobilenet_v3_small_runs() {
    run_model("mobilenet_v3_small.tir");
}

#[test]
fn efficientnet_b0_runs() {
    run_model("efficientnet_b0.tir");
}

#[test]
fn squeezenet_runs() {
    run_model("squeezenet.tir");
}

#[test]
fn blazeface_runs() {
    run_model("blazeface.tir");
}

#[test]
fn bert_base_layer_runs() {
    run_model("bert_base_layer.tir");
}

#[test]
fn nasnet_a_mobile_runs() {
    run_model("nasnet_a_mobile.tir");
}

#[test]
fn darts_imagenet_runs() {
    run_model("darts_imagenet.tir");
}

#[test]
fn randwire_ws_runs() {
    run_model("randwire_ws.tir");
}

#[test]
#[ignore = "heavy in a debug build: run with --release -- --ignored"]
fn heavy_models_run_with_finite_outputs() {
    for f in [
        "resnet50.tir",
        "inception_v3.tir",
        "densenet121.tir",
        "googlenet.tir",
        "posenet.tir",
        "deeplab_v3.tir",
        "unet_small.tir",
    ] {
        run_model(f);
    }
}
