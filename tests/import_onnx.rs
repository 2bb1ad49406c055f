//! `tirc import` and `tirc compile MODEL.onnx` on hostile models: one line `FILE: error: ...`
//! with the model's strings escaped, exit 1, and no output file left behind.

mod support;

#[path = "../onnx/tests/common/mod.rs"]
mod common;

use common::*;
use prost::Message;
use support::*;

/// A Relu reading a value whose name holds NUL, ESC and a newline, and which no node defines.
fn hostile_names() -> tir_onnx::proto::ModelProto {
    model(
        13,
        vec![input("x", &[1, 4])],
        &["y"],
        vec![tseq("w", &[4])],
        vec![
            node("Add", &["x", "w"], &["a"], vec![]),
            node("Relu", &["a\0\u{1b}[2J\n"], &["y"], vec![]),
        ],
    )
}

#[test]
fn import_error_is_one_escaped_line_and_writes_nothing() {
    let dir = scratch("import-onnx", "import");
    std::fs::write(dir.join("bad.onnx"), hostile_names().encode_to_vec()).unwrap();
    let out = tirc(&dir, &["import", "bad.onnx", "-o", "bad.tir"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).expect("UTF-8 stderr");
    assert_eq!(
        stderr,
        "bad.onnx: error: node 1 `Relu_y` (Relu): input `a\\0\\u{1b}[2J\\n` is not defined by any \
         earlier node, initializer or graph input\n"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["bad.onnx"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_of_an_oversized_input_names_it_and_exits_1() {
    let dir = scratch("import-onnx", "compile");
    let m = model(
        13,
        vec![input("x", &[1, i64::MAX])],
        &["y"],
        vec![],
        vec![node("Relu", &["x"], &["y"], vec![])],
    );
    std::fs::write(dir.join("big.onnx"), m.encode_to_vec()).unwrap();
    let out = tirc(&dir, &["compile", "big.onnx", "-o", "big"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("big.onnx: error: graph input `x`: dimension 1 (9223372036854775807)"),
        "{stderr}"
    );
    assert!(!dir.join("big").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--bind NAME=FILE.npy` fixes a shape input (the file written as NumPy does); a spec
/// without `=` is CLI misuse (exit 2), an unreadable file a diagnostic (exit 1).
#[test]
fn bind_fixes_a_shape_input_from_a_npy_file() {
    let dir = scratch("import-onnx", "bind");
    let m = model(
        22,
        vec![
            input("x", &[2, 6]),
            input_sym(
                "shape",
                &[D::N(2)],
                tir_onnx::proto::tensor_proto::DataType::Int64,
            ),
        ],
        &["y"],
        vec![],
        vec![node("Reshape", &["x", "shape"], &["y"], vec![])],
    );
    std::fs::write(dir.join("r.onnx"), m.encode_to_vec()).unwrap();
    let header = "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }";
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    npy.extend((padded.len() as u16).to_le_bytes());
    npy.extend(padded.as_bytes());
    npy.extend([4i64, 3].iter().flat_map(|v| v.to_le_bytes()));
    std::fs::write(dir.join("shape.npy"), npy).unwrap();
    let out = tirc(
        &dir,
        &[
            "import",
            "r.onnx",
            "-o",
            "r.tir",
            "--bind",
            "shape=shape.npy",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("r.tir")).unwrap();
    assert!(
        text.contains("(%x: tensor<2x6xf32>) -> tensor<4x3xf32>"),
        "{text}"
    );
    let out = tirc(
        &dir,
        &["import", "r.onnx", "-o", "r2.tir", "--bind", "shape"],
    );
    assert_eq!(out.status.code(), Some(2));
    let out = tirc(
        &dir,
        &[
            "import",
            "r.onnx",
            "-o",
            "r2.tir",
            "--bind",
            "shape=none.npy",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!dir.join("r2.tir").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
