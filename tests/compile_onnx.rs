//! `tirc compile MODEL.onnx`: the model imported in memory, compiled with the weights it
//! carries (or those of `--weights`), checked against the reference interpreter running the
//! `.tir` + safetensors that `tirc import` writes; unsupported input fails naming the node.

mod support;

#[path = "../onnx/tests/common/mod.rs"]
mod common;

use common::*;
use prost::Message;
use std::path::Path;
use support::*;
use tir_interp::Tensor;
use tir_onnx::proto::ModelProto;

/// Conv (grouped, padded, odd spatial size) → Relu → Add of a broadcast initializer: the
/// cleanup fuses the Relu, the rest stays as imported. `scale` changes every weight.
fn conv_model(scale: f32) -> ModelProto {
    let w: Vec<f32> = (0..4 * 3 * 3 * 3)
        .map(|i| ((i % 11) as f32 * 0.09 - 0.4) * scale)
        .collect();
    let b: Vec<f32> = (0..4).map(|i| (i as f32 - 1.5) * 0.1 * scale).collect();
    let c: Vec<f32> = (0..4).map(|i| i as f32 * 0.05 * scale).collect();
    model(
        13,
        vec![input("x", &[1, 3, 7, 5])],
        &["y"],
        vec![
            tf32("w", &[4, 3, 3, 3], &w),
            tf32("b", &[4], &b),
            tf32("c", &[1, 4, 1, 1], &c),
        ],
        vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["h"],
                vec![ais("pads", &[1, 1, 1, 1])],
            ),
            node("Relu", &["h"], &["r"], vec![]),
            node("Add", &["r", "c"], &["y"], vec![]),
        ],
    )
}

fn write_model(dir: &Path, name: &str, m: &ModelProto) {
    std::fs::write(dir.join(name), m.encode_to_vec()).unwrap();
}

/// max |a - b| / max |b|, the conformance suite's measure.
fn rel_err(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.ty, b.ty);
    let (a, b) = (a.as_f32().unwrap(), b.as_f32().unwrap());
    let scale = b.iter().fold(1e-6f64, |m, v| m.max(v.abs() as f64));
    let diff = a
        .iter()
        .zip(b)
        .fold(0f64, |m, (x, y)| m.max((*x as f64 - *y as f64).abs()));
    diff / scale
}

#[test]
fn an_onnx_model_compiles_with_its_own_weights() {
    let dir = scratch("compile-onnx", "own");
    write_model(&dir, "m.onnx", &conv_model(1.0));
    ok(tirc(&dir, &["compile", "m.onnx", "-o", "m"]), "compile");
    // Without --input, the executable and `tirc run` generate the same inputs.
    ok(
        run(
            &dir,
            &dir.join("m").to_string_lossy(),
            &["--output", "exe.npy"],
        ),
        "m",
    );
    ok(
        tirc(
            &dir,
            &[
                "import",
                "m.onnx",
                "-o",
                "m.tir",
                "--weights",
                "m.safetensors",
            ],
        ),
        "import",
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
    assert!(rel_err(&exe, &interp) <= 1e-5, "{}", rel_err(&exe, &interp));
}

#[test]
fn weights_flag_overrides_the_weights_of_an_onnx_model() {
    let dir = scratch("compile-onnx", "weights");
    write_model(&dir, "m.onnx", &conv_model(1.0));
    write_model(&dir, "m2.onnx", &conv_model(-2.0));
    ok(
        tirc(
            &dir,
            &[
                "import",
                "m2.onnx",
                "-o",
                "m2.tir",
                "--weights",
                "m2.safetensors",
            ],
        ),
        "import",
    );
    ok(
        tirc(
            &dir,
            &[
                "compile",
                "m.onnx",
                "--weights",
                "m2.safetensors",
                "-o",
                "m",
            ],
        ),
        "compile",
    );
    ok(
        run(
            &dir,
            &dir.join("m").to_string_lossy(),
            &["--output", "exe.npy"],
        ),
        "m",
    );
    ok(
        tirc(
            &dir,
            &[
                "run",
                "m2.tir",
                "--weights",
                "m2.safetensors",
                "-o",
                "interp.npy",
            ],
        ),
        "run",
    );
    ok(tirc(&dir, &["compile", "m.onnx", "-o", "own"]), "compile");
    ok(
        run(
            &dir,
            &dir.join("own").to_string_lossy(),
            &["--output", "own.npy"],
        ),
        "own",
    );
    let (exe, interp, own) = (
        read_npy(&dir, "exe.npy"),
        read_npy(&dir, "interp.npy"),
        read_npy(&dir, "own.npy"),
    );
    assert!(rel_err(&exe, &interp) <= 1e-5, "{}", rel_err(&exe, &interp));
    assert!(
        rel_err(&own, &interp) > 1e-2,
        "the model's own weights were used"
    );
}

#[test]
fn an_unsupported_op_fails_naming_the_node() {
    let dir = scratch("compile-onnx", "unsupported");
    let m = model(
        13,
        vec![input("x", &[2, 3])],
        &["y"],
        vec![],
        vec![node("Det", &["x"], &["y"], vec![])],
    );
    write_model(&dir, "bad.onnx", &m);
    let out = tirc(&dir, &["compile", "bad.onnx", "-o", "bad"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.onnx: error:"), "{stderr}");
    assert!(
        stderr.contains("Det_y") && stderr.contains("Det"),
        "{stderr}"
    );
    assert!(!dir.join("bad").exists());
}
