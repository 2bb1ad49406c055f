//! `tirc run`: outputs written as .npy files that read back to what the interpreter computes,
//! the printed summary, weights files, and refused inputs (exit 1 naming the input, exit 2 for
//! command-line misuse).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tir_interp::{npy, Tensor, Weights};

const MODEL: &str = r#"module @tiny {
  func @main(%x: tensor<1x3x8x8xf32>) -> tensor<1x10xf32> {
    %w0 = const {name = "conv0.weight"} : tensor<4x3x3x3xf32>
    %b0 = const {name = "conv0.bias"} : tensor<4xf32>
    %0 = conv2d(%x, %w0, %b0) {pads = [1, 1, 1, 1], activation = relu}
    %1 = global_avg_pool(%0)
    %2 = reshape(%1) {shape = [1, 4]}
    %w1 = const {name = "fc.weight"} : tensor<10x4xf32>
    %logits = gemm(%2, %w1) {trans_b = true}
    return %logits
  }
}
"#;

const TWO_OUTPUTS: &str = r#"module @two {
  func @main(%x: tensor<2x3xf32>) {
    %a = relu(%x)
    %b = sigmoid(%x)
    return %a, %b
  }
}
"#;

/// A fresh directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-run-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tirc(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run tirc")
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = tirc(dir, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tirc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(dir: &Path, args: &[&str], code: i32) -> String {
    let out = tirc(dir, args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tirc {args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).unwrap()
}

fn setup(test: &str, model: &str) -> PathBuf {
    let dir = scratch(test);
    std::fs::write(dir.join("model.tir"), model).unwrap();
    dir
}

fn input(dir: &Path) -> Tensor {
    let x = Tensor::f32(
        [1, 3, 8, 8],
        (0..192).map(|i| (i as f32 * 0.37).sin()).collect(),
    )
    .unwrap();
    std::fs::write(dir.join("x.npy"), npy::write(&x).unwrap()).unwrap();
    x
}

#[test]
fn outputs_written_to_a_directory_read_back_as_the_interpreter_computes() {
    let dir = setup("dir", MODEL);
    let x = input(&dir);
    ok(
        &dir,
        &[
            "run",
            "model.tir",
            "--input",
            "x=x.npy",
            "--output",
            "out",
            "--seed",
            "4",
        ],
    );
    let got = npy::read(&std::fs::read(dir.join("out/logits.npy")).unwrap()).unwrap();

    let module = tir_ir::parse_and_verify(MODEL).unwrap();
    let w = Weights::generate(&module, 4).unwrap();
    let want = tir_interp::run(&module, &w, &[x]).unwrap().remove(0);
    assert_eq!(got, want);
}

#[test]
fn a_single_output_can_be_written_to_a_file() {
    let dir = setup("file", MODEL);
    input(&dir);
    let stdout = ok(
        &dir,
        &["run", "model.tir", "--input", "%x=x.npy", "-o", "y.npy"],
    );
    assert!(stdout.contains("wrote y.npy"), "{stdout}");
    let y = npy::read(&std::fs::read(dir.join("y.npy")).unwrap()).unwrap();
    assert_eq!(y.ty, tir_ir::TensorType::f32([1, 10]));
}

#[test]
fn without_inputs_the_run_is_seeded_and_summarised() {
    let dir = setup("seeded", MODEL);
    let first = ok(&dir, &["run", "model.tir"]);
    assert!(first.contains("%logits: tensor<1x10xf32>"), "{first}");
    assert!(first.contains("checksum"), "{first}");
    let checksum = |s: &str| {
        s.lines()
            .find(|l| l.contains("checksum"))
            .unwrap()
            .to_string()
    };
    let again = ok(&dir, &["run", "model.tir"]);
    assert_eq!(checksum(&first), checksum(&again));
    let other = ok(&dir, &["run", "model.tir", "--seed", "1"]);
    assert_ne!(checksum(&first), checksum(&other));
}

#[test]
fn a_weights_file_replaces_the_generated_weights() {
    let dir = setup("weights", MODEL);
    let module = tir_ir::parse_and_verify(MODEL).unwrap();
    let w = Weights::generate(&module, 9).unwrap();
    std::fs::write(dir.join("w.safetensors"), w.to_safetensors().unwrap()).unwrap();
    // Seed 9 for the inputs in both runs; the weights come from the file or from the seed.
    ok(
        &dir,
        &[
            "run",
            "model.tir",
            "--seed",
            "9",
            "--weights",
            "w.safetensors",
            "-o",
            "a.npy",
        ],
    );
    ok(&dir, &["run", "model.tir", "--seed", "9", "-o", "b.npy"]);
    assert_eq!(
        std::fs::read(dir.join("a.npy")).unwrap(),
        std::fs::read(dir.join("b.npy")).unwrap()
    );
}

#[test]
fn a_weights_file_without_a_const_names_it() {
    let dir = setup("missing-weight", MODEL);
    let mut w = Weights::new();
    w.insert(
        "conv0.weight",
        Tensor::f32([4, 3, 3, 3], vec![0.; 108]).unwrap(),
    );
    std::fs::write(dir.join("w.safetensors"), w.to_safetensors().unwrap()).unwrap();
    let err = fails(&dir, &["run", "model.tir", "--weights", "w.safetensors"], 1);
    assert!(
        err.contains(
            "w.safetensors: error: `%b0`: the weight `conv0.bias` is not in the weights file"
        ),
        "{err}"
    );
}

#[test]
fn an_input_of_the_wrong_shape_exits_1_naming_it() {
    let dir = setup("shape", MODEL);
    let bad = Tensor::f32([1, 3, 8, 7], vec![0.; 168]).unwrap();
    std::fs::write(dir.join("bad.npy"), npy::write(&bad).unwrap()).unwrap();
    let err = fails(&dir, &["run", "model.tir", "--input", "x=bad.npy"], 1);
    assert!(
        err.contains(
            "bad.npy: error: input `%x`: expected tensor<1x3x8x8xf32>, found tensor<1x3x8x7xf32>"
        ),
        "{err}"
    );
}

#[test]
fn an_input_of_the_wrong_dtype_exits_1_naming_it() {
    let dir = setup("dtype", MODEL);
    let bad = Tensor::new(
        tir_ir::TensorType::new([1, 3, 8, 8], tir_ir::DType::I32),
        tir_interp::Data::I32(vec![0; 192]),
    )
    .unwrap();
    std::fs::write(dir.join("bad.npy"), npy::write(&bad).unwrap()).unwrap();
    let err = fails(&dir, &["run", "model.tir", "--input", "x=bad.npy"], 1);
    assert!(
        err.contains("input `%x`: expected tensor<1x3x8x8xf32>, found tensor<1x3x8x8xi32>"),
        "{err}"
    );
}

#[test]
fn a_corrupt_input_file_exits_1_naming_it() {
    let dir = setup("corrupt", MODEL);
    std::fs::write(
        dir.join("bad.npy"),
        b"\x93NUMPY\x01\x00\x1d\x00{'descr': '<f4', 'shape': (3,",
    )
    .unwrap();
    let err = fails(&dir, &["run", "model.tir", "--input", "x=bad.npy"], 1);
    assert!(
        err.contains("bad.npy: error: input `%x`: malformed .npy header"),
        "{err}"
    );
    std::fs::write(dir.join("empty.npy"), b"").unwrap();
    let err = fails(&dir, &["run", "model.tir", "--input", "x=empty.npy"], 1);
    assert!(err.contains("input `%x`"), "{err}");
    let err = fails(&dir, &["run", "model.tir", "--input", "x=absent.npy"], 1);
    assert!(
        err.contains("absent.npy: error: input `%x`: cannot read the file"),
        "{err}"
    );
}

#[test]
fn misuse_of_the_command_line_exits_2() {
    let dir = setup("usage", TWO_OUTPUTS);
    let err = fails(&dir, &["run", "model.tir", "--input", "y=in.npy"], 2);
    assert!(
        err.contains("the model has no input `%y`; its inputs are %x"),
        "{err}"
    );
    let err = fails(&dir, &["run", "model.tir", "--input", "x"], 2);
    assert!(err.contains("expected NAME=FILE.npy"), "{err}");
    let err = fails(&dir, &["run", "model.tir", "-o", "out.npy"], 2);
    assert!(err.contains("give --output a directory"), "{err}");
    fails(&dir, &["run", "model.tir", "--engine", "warp-drive"], 2);
}

#[test]
fn several_outputs_go_to_one_file_each() {
    let dir = setup("two", TWO_OUTPUTS);
    ok(&dir, &["run", "model.tir", "-o", "out"]);
    let a = npy::read(&std::fs::read(dir.join("out/a.npy")).unwrap()).unwrap();
    let b = npy::read(&std::fs::read(dir.join("out/b.npy")).unwrap()).unwrap();
    assert!(a.as_f32().unwrap().iter().all(|&v| v >= 0.0));
    assert!(b.as_f32().unwrap().iter().all(|&v| v > 0.0 && v < 1.0));
}
