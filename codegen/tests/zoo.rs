//! Every zoo model end to end through the generated code, at its reduced test size in CI
//! ([`tir_zoo::ModelSpec::test_size`], the smallest input that keeps every op meaningful; each
//! model's spec says why) and at the published size of `examples/` in the `--ignored` set:
//! - the outputs equal the reference interpreter's within 1e-4 relative;
//! - plans cannot change results: under every offset strategy the outputs are bitwise
//!   identical, with buffer sharing on, and also with it off for the models whose sharing is
//!   most varied (in-place residual adds, concatenation and split views, transposes): each
//!   setting is a compilation, and compilation is most of CI's time. The published sizes and
//!   the random graphs of `plans_random.rs` run both settings on everything.
//!
//! Compile time dominates, so each bufferized structure is compiled once: plans that differ
//! only in their offsets run on the same kernels through `<model>_run_at` (see
//! `tir_codegen::relocate`); the first plan of each structure runs the compiled-in offsets
//! (`<model>_run`, what the executable calls).

mod common;

use common::{end_to_end, end_to_end_sharing, load, reduced};

/// Sharing on and off.
macro_rules! zoo {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            end_to_end(stringify!($name), reduced(stringify!($name)));
        }
    )*};
}

/// Sharing on only.
macro_rules! zoo_shared {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            end_to_end_sharing(stringify!($name), reduced(stringify!($name)), &[true]);
        }
    )*};
}

/// The published sizes: minutes each on 2 cores (large interpreter runs), kept out of CI's
/// time budget: `cargo test -p tir-codegen --test zoo -- --ignored`.
macro_rules! zoo_full {
    ($($name:ident => $model:literal),* $(,)?) => {$(
        #[test]
        #[ignore = "published size, slow; run with `cargo test -p tir-codegen --test zoo -- --ignored`"]
        fn $name() {
            end_to_end($model, load($model));
        }
    )*};
}

zoo!(
    bert_base_layer,
    blazeface,
    googlenet,
    mobilenet_v2,
    squeezenet,
    unet_small,
);

zoo_shared!(
    darts_imagenet,
    deeplab_v3,
    densenet121,
    efficientnet_b0,
    inception_v3,
    mobilenet_v1,
    mobilenet_v3_small,
    nasnet_a_mobile,
    posenet,
    randwire_ws,
    resnet50,
);

zoo_full!(
    bert_base_layer_full => "bert_base_layer",
    blazeface_full => "blazeface",
    darts_imagenet_full => "darts_imagenet",
    deeplab_v3_full => "deeplab_v3",
    densenet121_full => "densenet121",
    efficientnet_b0_full => "efficientnet_b0",
    googlenet_full => "googlenet",
    inception_v3_full => "inception_v3",
    mobilenet_v1_full => "mobilenet_v1",
    mobilenet_v2_full => "mobilenet_v2",
    mobilenet_v3_small_full => "mobilenet_v3_small",
    nasnet_a_mobile_full => "nasnet_a_mobile",
    posenet_full => "posenet",
    randwire_ws_full => "randwire_ws",
    resnet50_full => "resnet50",
    squeezenet_full => "squeezenet",
    unet_small_full => "unet_small",
);
