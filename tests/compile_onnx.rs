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

/// Strided 1×1 convolutions (ResNet's downsampling shortcuts; odd extents, strides 3 × 2,
/// groups) run as a subsampling `slice` and a stride-1 GEMM after the import cleanup: the
/// executable equals the reference interpreter on the graph as imported, without the
/// cleanup, and is bitwise the same for 1, 2 and 3 threads.
#[test]
fn strided_pointwise_convs_match_the_unrewritten_graph_for_every_thread_count() {
    let dir = scratch("compile-onnx", "strided-pointwise");
    let seq = |n: usize, s: f32| -> Vec<f32> {
        (0..n).map(|i| ((i % 13) as f32 * 0.07 - 0.4) * s).collect()
    };
    let m = model(
        13,
        vec![input("x", &[1, 24, 29, 31])],
        &["y", "g"],
        vec![
            tf32("w", &[64, 24, 1, 1], &seq(64 * 24, 1.0)),
            tf32("b", &[64], &seq(64, 0.5)),
            tf32("wg", &[30, 12, 1, 1], &seq(30 * 12, 0.8)),
        ],
        vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["h"],
                vec![ais("strides", &[2, 2])],
            ),
            node("Relu", &["h"], &["y"], vec![]),
            node(
                "Conv",
                &["x", "wg"],
                &["g"],
                vec![ais("strides", &[3, 2]), ai("group", 2)],
            ),
        ],
    );
    threads_agree_with_the_interpreter(&dir, &m, &["--no-cleanup"], &["y", "g"]);
}

/// Convolutions on small images, cut by output channels or groups at a quarter of the general
/// minimum work per tile (iris_landmark's 8×8 to 2×2 layers, MobileNet v2's 7×7 depthwise
/// layers: `channel_min_work` in codegen/src/parallel.rs): an 8×8 pointwise convolution in
/// one column block, a 2×2 stride-2 convolution bound by its weights, a depthwise 3×3 on a
/// 7×7 image, a max pool and a whole-window head. The executable, compiled at the default
/// minimum, is bitwise the same for 1, 2 and 3 threads and equals the reference interpreter.
#[test]
fn small_image_convs_cut_by_channels_match_the_interpreter_for_every_thread_count() {
    let dir = scratch("compile-onnx", "small-image-cuts");
    let seq = |n: usize, s: f32| -> Vec<f32> {
        (0..n).map(|i| ((i % 17) as f32 * 0.05 - 0.4) * s).collect()
    };
    let m = model(
        13,
        vec![input("x", &[1, 128, 8, 8]), input("z", &[1, 960, 7, 7])],
        &["y", "d"],
        vec![
            tf32("w1", &[64, 128, 1, 1], &seq(64 * 128, 0.2)),
            tf32("b1", &[64], &seq(64, 0.5)),
            tf32("w2", &[128, 64, 2, 2], &seq(128 * 64 * 4, 0.1)),
            tf32("w3", &[213, 128, 2, 2], &seq(213 * 128 * 4, 0.1)),
            tf32("wd", &[960, 1, 3, 3], &seq(960 * 9, 0.7)),
            tf32("bd", &[960], &seq(960, 0.3)),
        ],
        vec![
            node("Conv", &["x", "w1", "b1"], &["p"], vec![]),
            node("Relu", &["p"], &["q"], vec![]),
            node("Conv", &["q", "w2"], &["r"], vec![ais("strides", &[2, 2])]),
            node(
                "MaxPool",
                &["r"],
                &["s"],
                vec![ais("kernel_shape", &[2, 2]), ais("strides", &[2, 2])],
            ),
            node("Conv", &["s", "w3"], &["y"], vec![]),
            node(
                "Conv",
                &["z", "wd", "bd"],
                &["d"],
                vec![ai("group", 960), ais("pads", &[1, 1, 1, 1])],
            ),
        ],
    );
    threads_agree_with_the_interpreter(&dir, &m, &[], &["y", "d"]);
}

/// ResNet-like bottleneck blocks whose 3×3 convolutions are cut by bands of output rows
/// (`rowpack_pixels` in codegen/src/kernels/conv/mod.rs): on a 56×56 image (the periodic
/// run's repetitions) and a 28×28 one (ranges of grid vectors), between 1×1 convolutions
/// cut by pixel columns, the second with the residual add fused. The executable, compiled
/// at the default minimum work per tile, is bitwise the same for 1, 2 and 3 threads and
/// equals the reference interpreter.
#[test]
fn three_by_three_convs_cut_by_rows_match_the_interpreter_for_every_thread_count() {
    let dir = scratch("compile-onnx", "row-band-cuts");
    let seq = |n: usize, s: f32| -> Vec<f32> {
        (0..n)
            .map(|i| ((i % 19) as f32 * 0.04 - 0.35) * s)
            .collect()
    };
    let mut inits = Vec::new();
    let mut nodes = Vec::new();
    for (b, c) in [16usize, 32].into_iter().enumerate() {
        let (x, y) = (format!("x{b}"), format!("y{b}"));
        let n = |s: &str| format!("{s}{b}");
        inits.push(tf32(
            &n("wa"),
            &[c as i64, c as i64, 1, 1],
            &seq(c * c, 0.5),
        ));
        inits.push(tf32(
            &n("wb"),
            &[c as i64, c as i64, 3, 3],
            &seq(c * c * 9, 0.2),
        ));
        inits.push(tf32(&n("bb"), &[c as i64], &seq(c, 0.3)));
        inits.push(tf32(
            &n("wc"),
            &[c as i64, c as i64, 1, 1],
            &seq(c * c, 0.4),
        ));
        nodes.push(node("Conv", &[&x, &n("wa")], &[&n("a")], vec![]));
        nodes.push(node("Relu", &[&n("a")], &[&n("ra")], vec![]));
        nodes.push(node(
            "Conv",
            &[&n("ra"), &n("wb"), &n("bb")],
            &[&n("c")],
            vec![ais("pads", &[1, 1, 1, 1])],
        ));
        nodes.push(node("Relu", &[&n("c")], &[&n("rc")], vec![]));
        nodes.push(node("Conv", &[&n("rc"), &n("wc")], &[&n("d")], vec![]));
        nodes.push(node("Add", &[&n("d"), &x], &[&y], vec![]));
    }
    let m = model(
        13,
        vec![input("x0", &[1, 16, 56, 56]), input("x1", &[1, 32, 28, 28])],
        &["y0", "y1"],
        inits,
        nodes,
    );
    threads_agree_with_the_interpreter(&dir, &m, &[], &["y0", "y1"]);
}

/// Compiles `m` (in `dir`), runs the executable at 1, 2 and 3 threads and `tirc run` on the
/// imported model (`import_flags` added to the import): each output in `outputs` is bitwise
/// the same at every thread count and within 1e-5 of the interpreter.
fn threads_agree_with_the_interpreter(
    dir: &Path,
    m: &ModelProto,
    import_flags: &[&str],
    outputs: &[&str],
) {
    write_model(dir, "m.onnx", m);
    ok(tirc(dir, &["compile", "m.onnx", "-o", "m"]), "compile");
    let exe = dir.join("m").to_string_lossy().to_string();
    for t in ["1", "2", "3"] {
        let out = format!("exe{t}");
        std::fs::create_dir_all(dir.join(&out)).unwrap();
        ok(run(dir, &exe, &["--threads", t, "--output", &out]), "m");
    }
    let mut import = vec!["import", "m.onnx"];
    import.extend_from_slice(import_flags);
    import.extend(["-o", "m.tir", "--weights", "m.safetensors"]);
    ok(tirc(dir, &import), "import");
    std::fs::create_dir_all(dir.join("interp")).unwrap();
    ok(
        tirc(
            dir,
            &["run", "m.tir", "--weights", "m.safetensors", "-o", "interp"],
        ),
        "run",
    );
    for name in outputs {
        let f = format!("{name}.npy");
        let one = read_npy(&dir.join("exe1"), &f);
        for t in ["2", "3"] {
            let other = read_npy(&dir.join(format!("exe{t}")), &f);
            assert_eq!(one, other, "{name}: 1 vs {t} threads");
        }
        let interp = read_npy(&dir.join("interp"), &f);
        assert!(
            rel_err(&one, &interp) <= 1e-5,
            "{name}: {}",
            rel_err(&one, &interp)
        );
    }
}
