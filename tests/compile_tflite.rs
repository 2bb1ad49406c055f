//! `tirc compile MODEL.tflite`: the model imported in memory and compiled with its own weights,
//! checked against the reference interpreter running the `.tir` + safetensors that
//! `tirc import` writes; an unsupported operator fails naming it, exit 1.

mod support;

#[path = "../tflite/tests/common/mod.rs"]
mod common;

use common::*;
use support::*;
use tir_tflite::schema::{ActivationFunctionType as Act, BuiltinOperator as B, Padding};

/// CONV_2D (SAME, stride 2, RELU6) → DEPTHWISE_CONV_2D → AVERAGE_POOL_2D → FULLY_CONNECTED →
/// SOFTMAX, NHWC input [1, 9, 8, 3].
fn model() -> Vec<u8> {
    let mut m = Spec::default();
    let x = m.input("image", &[1, 9, 8, 3]);
    let f = m.f32("conv/filter", &[6, 3, 3, 3], &values(6 * 27, 1));
    let fb = m.f32("conv/bias", &[6], &values(6, 2));
    let c = m.act("conv", &[1, 5, 4, 6]);
    m.op(
        B::CONV_2D,
        &[x, f, fb],
        &[c],
        Opts::Conv {
            padding: Padding::SAME,
            stride: [2, 2],
            dilation: [1, 1],
            act: Act::RELU6,
        },
    );
    let df = m.f32("dw/filter", &[1, 3, 3, 6], &values(54, 3));
    let d = m.act("dw", &[1, 5, 4, 6]);
    m.op(
        B::DEPTHWISE_CONV_2D,
        &[c, df, -1],
        &[d],
        Opts::Depthwise {
            padding: Padding::SAME,
            stride: [1, 1],
            multiplier: 1,
            act: Act::RELU,
        },
    );
    let p = m.act("pool", &[1, 1, 1, 6]);
    m.op(
        B::AVERAGE_POOL_2D,
        &[d],
        &[p],
        Opts::Pool {
            padding: Padding::VALID,
            stride: [1, 1],
            filter: [5, 4],
            act: Act::NONE,
        },
    );
    let w = m.f32("fc/w", &[4, 6], &values(24, 4));
    let y = m.act("logits", &[1, 4]);
    m.op(
        B::FULLY_CONNECTED,
        &[p, w, -1],
        &[y],
        Opts::Fc { act: Act::NONE },
    );
    let s = m.act("probs", &[1, 4]);
    m.op(B::SOFTMAX, &[y], &[s], Opts::Softmax { beta: 1.0 });
    m.outputs.push(s);
    m.build()
}

#[test]
fn a_tflite_model_compiles_with_its_own_weights() {
    let dir = scratch("compile-tflite", "own");
    std::fs::write(dir.join("m.tflite"), model()).unwrap();
    ok(tirc(&dir, &["compile", "m.tflite", "-o", "m"]), "compile");
    // Without --input, the executable and `tirc run` generate the same inputs.
    ok(
        run(
            &dir,
            &dir.join("m").to_string_lossy(),
            &["--output", "exe.npy"],
        ),
        "m",
    );
    ok(tirc(&dir, &["import", "m.tflite", "-o", "m.tir"]), "import");
    let text = std::fs::read_to_string(dir.join("m.tir")).unwrap();
    assert!(
        text.contains("%image: tensor<1x9x8x3xf32>"),
        "the input keeps its NHWC shape:\n{text}"
    );
    ok(
        tirc(
            &dir,
            &[
                "run",
                "m.tir",
                "--weights",
                "m.safetensors",
                "-o",
                "interp.npy",
            ],
        ),
        "run",
    );
    let (exe, interp) = (read_npy(&dir, "exe.npy"), read_npy(&dir, "interp.npy"));
    assert_eq!(exe.ty, interp.ty);
    assert_eq!(exe.shape(), &[1, 4]);
    let (a, b) = (exe.as_f32().unwrap(), interp.as_f32().unwrap());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5, "exe {a:?}, interpreter {b:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unsupported_operator_fails_with_its_name_and_exit_1() {
    let dir = scratch("compile-tflite", "refused");
    let mut m = Spec::default();
    let x = m.input("x", &[1, 4]);
    let y = m.act("y", &[1, 4]);
    m.op(B::FLOOR, &[x], &[y], Opts::None);
    m.outputs.push(y);
    std::fs::write(dir.join("bad.tflite"), m.build()).unwrap();
    for args in [
        &["import", "bad.tflite", "-o", "bad.tir"][..],
        &["compile", "bad.tflite", "-o", "bad"][..],
    ] {
        let out = tirc(&dir, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "bad.tflite: error: operator 0 (FLOOR): not supported by tir's TFLite importer\n"
        );
    }
    std::fs::write(dir.join("cut.tflite"), &model()[..100]).unwrap();
    let out = tirc(&dir, &["import", "cut.tflite", "-o", "cut.tir"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("cut.tflite: error: not a valid TFLite model: "),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
