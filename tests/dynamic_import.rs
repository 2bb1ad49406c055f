//! `tirc import` of an ONNX model with symbolic input dims, no `--dim`: the `.tir` keeps them,
//! `tirc check` shows symbolic types, and one imported model runs at several input shapes with
//! outputs bitwise equal to the model imported with those dims pinned.

#[path = "../onnx/tests/common/mod.rs"]
mod common;

use common::*;
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tir_interp::{npy, Tensor};
use tir_onnx::proto::tensor_proto::DataType;

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
    String::from_utf8(out.stdout).expect("utf-8")
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-dynimport-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write_npy(path: &Path, shape: &[u64]) {
    let n: u64 = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0).collect();
    let t = Tensor::f32(shape.to_vec(), data).expect("tensor");
    std::fs::write(path, npy::write(&t).expect("npy")).expect("write npy");
}

/// Conv, nearest 2x upsampling, a second conv and `x.view(x.size(0), -1)`-style flatten of the
/// channels and one spatial axis kept apart: `[batch, 3, ?, -1]` in.
fn model_bytes() -> Vec<u8> {
    model(
        13,
        vec![input_sym(
            "x",
            &[D::S("batch"), D::N(2), D::S("?"), D::N(-1)],
            DataType::Float,
        )],
        &["y"],
        vec![
            tseq("w", &[3, 2, 3, 3]),
            tseq("b", &[3]),
            tseq("w2", &[2, 3, 3, 3]),
            tf32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
        ],
        vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["c"],
                vec![ais("pads", &[1, 1, 1, 1])],
            ),
            node("Relu", &["c"], &["r"], vec![]),
            node("Resize", &["r", "", "scales"], &["u"], vec![]),
            node(
                "Conv",
                &["u", "w2"],
                &["c2"],
                vec![ais("strides", &[2, 2]), ais("pads", &[0, 0, 1, 1])],
            ),
            node("Sigmoid", &["c2"], &["y"], vec![]),
        ],
    )
    .encode_to_vec()
}

#[test]
fn one_import_runs_at_many_shapes_like_pinned_imports() {
    let dir = scratch("shapes");
    std::fs::write(dir.join("m.onnx"), model_bytes()).expect("write model");
    ok(&dir, &["import", "m.onnx", "-o", "m.tir"]);
    let text = std::fs::read_to_string(dir.join("m.tir")).expect("m.tir");
    assert!(
        text.contains("func @main(%x: tensor<{batch}x2x{x.d2}x{x.d3}xf32>)"),
        "{text}"
    );
    let check = ok(&dir, &["check", "m.tir"]);
    assert!(check.contains("{batch}"), "{check}");
    for (i, shape) in [[1u64, 2, 5, 7], [3, 2, 4, 4], [2, 2, 9, 3]]
        .iter()
        .enumerate()
    {
        let input = format!("x{i}.npy");
        write_npy(&dir.join(&input), shape);
        let dynamic = format!("dyn{i}.npy");
        ok(
            &dir,
            &[
                "run",
                "m.tir",
                "--weights",
                "m.safetensors",
                "--input",
                &format!("x={input}"),
                "-o",
                &dynamic,
            ],
        );
        let pinned = format!("s{i}.tir");
        let weights = format!("s{i}.safetensors");
        let dims = [
            format!("batch={}", shape[0]),
            format!("x.d2={}", shape[2]),
            format!("x.d3={}", shape[3]),
        ];
        ok(
            &dir,
            &[
                "import",
                "m.onnx",
                "-o",
                &pinned,
                "--weights",
                &weights,
                "--dim",
                &dims[0],
                "--dim",
                &dims[1],
                "--dim",
                &dims[2],
            ],
        );
        let pinned_text = std::fs::read_to_string(dir.join(&pinned)).expect("pinned");
        assert!(!pinned_text.contains("tensor<{"), "{pinned_text}");
        let fixed = format!("fix{i}.npy");
        ok(
            &dir,
            &[
                "run",
                &pinned,
                "--weights",
                &weights,
                "--input",
                &format!("x={input}"),
                "-o",
                &fixed,
            ],
        );
        let a = npy::read(&std::fs::read(dir.join(&dynamic)).expect("dyn")).expect("npy");
        let b = npy::read(&std::fs::read(dir.join(&fixed)).expect("fix")).expect("npy");
        // Output [N, 2, H, W]: the resize doubles, the strided conv halves (padded at the end).
        assert_eq!(a.ty.shape, vec![shape[0], 2, shape[2], shape[3]]);
        assert_eq!(a, b, "shape {shape:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tirc compile MODEL.onnx` with the spatial dims pinned (by their derived names) and the
/// batch left free: one executable for every batch, bitwise equal to the one compiled with
/// the batch pinned too.
#[test]
fn compile_of_an_onnx_model_with_a_free_batch() {
    let dir = scratch("compile");
    std::fs::write(dir.join("m.onnx"), model_bytes()).expect("write model");
    let spatial = ["--dim", "x.d2=5", "--dim", "x.d3=7", "--opt-level", "1"];
    let mut args = vec!["compile", "m.onnx", "-o", "dyn"];
    args.extend(spatial);
    ok(&dir, &args);
    let mut args = vec!["compile", "m.onnx", "-o", "s3", "--dim", "batch=3"];
    args.extend(spatial);
    ok(&dir, &args);
    write_npy(&dir.join("x.npy"), &[3, 2, 5, 7]);
    for exe in ["dyn", "s3"] {
        let out = Command::new(dir.join(exe))
            .current_dir(&dir)
            .args(["--input", "x=x.npy", "--output", &format!("{exe}.npy")])
            .output()
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let a = npy::read(&std::fs::read(dir.join("dyn.npy")).expect("dyn")).expect("npy");
    let b = npy::read(&std::fs::read(dir.join("s3.npy")).expect("s3")).expect("npy");
    assert_eq!(a.ty.shape, vec![3, 2, 5, 7]);
    assert_eq!(a, b);
    let _ = std::fs::remove_dir_all(&dir);
}
