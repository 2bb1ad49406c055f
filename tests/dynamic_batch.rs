//! `tirc compile` of a model whose only dim without a value is a leading batch the model is
//! independent along (`tir_ir::batch`): one executable, compiled at batch 1, runs every batch
//! size read from its input files, with outputs bitwise equal to the executable compiled at
//! that batch; inputs that disagree on the batch are refused naming the dim and both values,
//! and models that are not independent along their symbolic dim are refused naming why.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tir_interp::{npy, Tensor};

fn tirc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run tirc")
}

fn ok(out: Output, what: &str) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn fails(out: Output, code: i32, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{what}: {stderr}");
    stderr
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-batch-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write_npy(path: &Path, shape: &[u64], seed: u64) {
    let n: u64 = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| (((i + seed) * 7 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let t = Tensor::f32(shape.to_vec(), data).expect("tensor");
    std::fs::write(path, npy::write(&t).expect("npy")).expect("write npy");
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

const MODEL: &str = "tests/dynamic/batch.tir";

#[test]
fn one_executable_runs_every_batch_like_the_static_compile() {
    let dir = scratch("runs");
    let dynamic = dir.join("dyn");
    ok(
        tirc(&["compile", MODEL, "-o", s(&dynamic), "--opt-level", "1"]),
        "dynamic compile",
    );
    for batch in [3u64, 1, 5, 0] {
        let (x, bias) = (
            dir.join(format!("x{batch}.npy")),
            dir.join(format!("b{batch}.npy")),
        );
        write_npy(&x, &[batch, 3, 8, 8], batch);
        write_npy(&bias, &[batch, 10], batch + 1);
        let ins = [format!("x={}", s(&x)), format!("bias={}", s(&bias))];
        let got = dir.join(format!("dyn{batch}.npy"));
        ok(
            Command::new(&dynamic)
                .args(["--input", &ins[0], "--input", &ins[1], "--output", s(&got)])
                .output()
                .expect("run"),
            "dynamic executable",
        );
        let stat = dir.join(format!("s{batch}"));
        let dim = format!("batch={batch}");
        ok(
            tirc(&[
                "compile",
                MODEL,
                "-o",
                s(&stat),
                "--opt-level",
                "1",
                "--dim",
                &dim,
            ]),
            "static compile",
        );
        let want = dir.join(format!("s{batch}.npy"));
        ok(
            Command::new(&stat)
                .args(["--input", &ins[0], "--input", &ins[1], "--output", s(&want)])
                .output()
                .expect("run"),
            "static executable",
        );
        let a = npy::read(&std::fs::read(&got).expect("dyn out")).expect("npy");
        let b = npy::read(&std::fs::read(&want).expect("static out")).expect("npy");
        assert_eq!(a.ty.shape, vec![batch, 10]);
        assert_eq!(a, b, "batch {batch}");
    }
    // Two inputs that disagree on the batch.
    let (x, bias) = (dir.join("x2.npy"), dir.join("b4.npy"));
    write_npy(&x, &[2, 3, 8, 8], 0);
    write_npy(&bias, &[4, 10], 0);
    let e = fails(
        Command::new(&dynamic)
            .args([
                "--input",
                &format!("x={}", s(&x)),
                "--input",
                &format!("bias={}", s(&bias)),
            ])
            .output()
            .expect("run"),
        1,
        "mismatched batch",
    );
    assert!(
        e.contains("the dim `batch` is 2 (from the input `%x`), but this file gives it 4"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dims_that_are_not_a_batch_are_refused() {
    let dir = scratch("refused");
    let out = dir.join("m");
    // The CNN of tests/dynamic/cnn.tir with a cumsum (no kernel with run-time extents)
    // after its first convolution.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dynamic/cnn.tir"),
    )
    .expect("cnn")
    .replace("%1 = relu(%0)", "%1 = cumsum(%0) {axis = 1}");
    let cnn = dir.join("cnn.tir");
    std::fs::write(&cnn, text).expect("write");
    // Height and width: two dims without values.
    let e = fails(tirc(&["compile", s(&cnn), "-o", s(&out)]), 1, "cnn");
    assert!(e.contains("give `h`, `w` a value with --dim NAME=N"), "{e}");
    // One left, but it is not a leading batch.
    let e = fails(
        tirc(&["compile", s(&cnn), "-o", s(&out), "--dim", "h=9"]),
        1,
        "cnn w",
    );
    assert!(
        e.contains("the dim `w` has no value, and it cannot be a run-time batch: the input %x has type tensor<1x3x{h}x{w}xf32>: the dim `w` must be its first dim and nowhere else"),
        "{e}"
    );
    // A softmax across the batch mixes its samples: with every op a kernel with run-time
    // extents the model runs with run-time dims instead of at batch 1; with a cumsum
    // (no such kernel) it is refused.
    let model = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(MODEL))
        .expect("model")
        .replace("%1 = relu(%0)", "%1 = cumsum(%0) {axis = 1}");
    let text = model.replace("softmax(%6) {axis = -1}", "softmax(%6) {axis = 0}");
    let mixed = dir.join("mixed.tir");
    std::fs::write(&mixed, text).expect("write");
    let e = fails(
        tirc(&["compile", s(&mixed), "-o", s(&out)]),
        1,
        "softmax axis 0",
    );
    assert!(
        e.contains("`softmax` along axis 0 mixes the samples of the batch `batch`"),
        "{e}"
    );
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(MODEL))
        .expect("model")
        .replace("softmax(%6) {axis = -1}", "softmax(%6) {axis = 0}");
    std::fs::write(&mixed, text).expect("write");
    let built = dir.join("mixed");
    let e = tirc(&["compile", s(&mixed), "-o", s(&built), "--opt-level", "1"]);
    let stderr = String::from_utf8_lossy(&e.stderr).into_owned();
    assert_eq!(e.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("run-time dims batch"), "{stderr}");
    // An output computed from the weights alone has no batch.
    let text = model.replace("return %7", "%8 = relu(%w1)\n    return %7, %8");
    let weights_only = dir.join("weights_only.tir");
    std::fs::write(&weights_only, text).expect("write");
    let e = fails(
        tirc(&["compile", s(&weights_only), "-o", s(&out)]),
        1,
        "weights output",
    );
    assert!(
        e.contains("the output %8 does not depend on the inputs, so it has no batch"),
        "{e}"
    );
    // Only an executable runs a symbolic batch.
    let e = fails(
        tirc(&["compile", MODEL, "-o", s(&out), "--emit", "obj"]),
        1,
        "obj",
    );
    assert!(e.contains("only --emit exe runs a symbolic batch"), "{e}");
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The zoo-style BERT layer with its sequence length given and its batch left symbolic: one
/// executable for every batch, bitwise equal to the static compile at batch 2.
#[test]
fn bert_layer_with_a_free_batch() {
    let dir = scratch("bert");
    let model = "tests/dynamic/bert.tir";
    let dynamic = dir.join("dyn");
    ok(
        tirc(&[
            "compile",
            model,
            "-o",
            s(&dynamic),
            "--opt-level",
            "1",
            "--dim",
            "seq=5",
        ]),
        "dynamic compile",
    );
    let stat = dir.join("static");
    ok(
        tirc(&[
            "compile",
            model,
            "-o",
            s(&stat),
            "--opt-level",
            "1",
            "--dim",
            "seq=5",
            "--dim",
            "batch=2",
        ]),
        "static compile",
    );
    let (x, mask) = (dir.join("x.npy"), dir.join("mask.npy"));
    write_npy(&x, &[2, 5, 64], 0);
    write_npy(&mask, &[2, 1, 5], 3);
    let ins = [format!("x={}", s(&x)), format!("mask={}", s(&mask))];
    let mut outs = Vec::new();
    for exe in [&dynamic, &stat] {
        let out = dir.join(format!(
            "{}.npy",
            exe.file_name().unwrap().to_string_lossy()
        ));
        ok(
            Command::new(exe)
                .args(["--input", &ins[0], "--input", &ins[1], "--output", s(&out)])
                .output()
                .expect("run"),
            "executable",
        );
        outs.push(npy::read(&std::fs::read(&out).expect("out")).expect("npy"));
    }
    assert_eq!(outs[0].ty.shape, vec![2, 5, 64]);
    assert_eq!(outs[0], outs[1]);
    let _ = std::fs::remove_dir_all(&dir);
}
