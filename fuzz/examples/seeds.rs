//! Writes the binary seeds of the committed corpus: the ONNX models of
//! `fuzz/corpus/onnx_import/`, the `.npy` files of `fuzz/corpus/npy_read/` and the safetensors
//! files of `fuzz/corpus/safetensors_weights/`. Deterministic, so rerunning it after a format
//! change rewrites the same files:
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example seeds
//!
//! The ONNX models are built with the test helpers of `onnx/tests/common` (prost types, no
//! binary fixtures); the `.npy` and safetensors files are both what tir writes and what it
//! reads but never writes (format versions 2 and 3, big-endian, Fortran order, metadata).

#[path = "../../onnx/tests/common/mod.rs"]
mod common;

use common::*;
use prost::Message;
use std::path::{Path, PathBuf};
use tir_interp::{npy, Data, Tensor, Weights};
use tir_ir::{DType, TensorType};
use tir_onnx::proto::tensor_proto::{DataLocation, DataType};
use tir_onnx::proto::{StringStringEntryProto, TensorProto};

fn corpus(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("cannot create the corpus directory");
    dir
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    assert!(bytes.len() < 50_000, "seed {name} is too large");
    std::fs::write(dir.join(name), bytes).expect("cannot write a seed");
}

fn main() {
    onnx_seeds();
    npy_seeds();
    safetensors_seeds();
}

fn onnx_seeds() {
    let dir = corpus("onnx_import");
    let models = [
        ("conv_pool_gemm.onnx", conv_pool_gemm()),
        ("transformer_block.onnx", transformer_block()),
        ("shape_folding.onnx", shape_folding()),
        ("views.onnx", views()),
        ("resize_pad.onnx", resize_pad()),
        ("elementwise.onnx", elementwise()),
        ("external_data.onnx", external_data()),
    ];
    for (name, m) in models {
        // Every seed must import, or the fuzzer starts from error paths only.
        if let Err(e) = import(&m) {
            if !name.starts_with("external") {
                panic!("seed {name} does not import: {e}");
            }
        }
        write(&dir, name, &m.encode_to_vec());
    }
}

fn conv_pool_gemm() -> tir_onnx::proto::ModelProto {
    model(
        13,
        vec![input_sym(
            "x",
            &[D::S("batch"), D::N(3), D::N(8), D::N(8)],
            DataType::Float,
        )],
        &["y"],
        vec![
            tseq("w", &[4, 3, 3, 3]),
            tseq("b", &[4]),
            tseq("bn_s", &[4]),
            tseq("bn_b", &[4]),
            tseq("bn_m", &[4]),
            tf32("bn_v", &[4], &[1.0, 0.5, 2.0, 0.25]),
            tseq("fc", &[4, 5]),
            tseq("fc_b", &[5]),
        ],
        vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["c"],
                vec![ais("pads", &[1, 1, 1, 1]), ais("strides", &[2, 2])],
            ),
            node(
                "BatchNormalization",
                &["c", "bn_s", "bn_b", "bn_m", "bn_v"],
                &["n"],
                vec![af("epsilon", 1e-3)],
            ),
            node("Relu", &["n"], &["r"], vec![]),
            node(
                "MaxPool",
                &["r"],
                &["p"],
                vec![ais("kernel_shape", &[2, 2]), ais("strides", &[2, 2])],
            ),
            node(
                "AveragePool",
                &["p"],
                &["q"],
                vec![
                    ais("kernel_shape", &[2, 2]),
                    ai("ceil_mode", 1),
                    ai("count_include_pad", 0),
                ],
            ),
            node("GlobalAveragePool", &["q"], &["g"], vec![]),
            node("Flatten", &["g"], &["f"], vec![ai("axis", 1)]),
            node(
                "Gemm",
                &["f", "fc", "fc_b"],
                &["y0"],
                vec![af("alpha", 0.5)],
            ),
            node("Softmax", &["y0"], &["y"], vec![ai("axis", -1)]),
        ],
    )
}

fn transformer_block() -> tir_onnx::proto::ModelProto {
    model(
        17,
        vec![input("x", &[1, 4, 8])],
        &["y"],
        vec![
            tseq("wq", &[8, 8]),
            tseq("ln_s", &[8]),
            tseq("ln_b", &[8]),
            tf32("half", &[], &[0.5]),
            ti64("perm_axes", &[1], &[1]),
        ],
        vec![
            node("MatMul", &["x", "wq"], &["q"], vec![]),
            node("Transpose", &["q"], &["qt"], vec![ais("perm", &[0, 2, 1])]),
            node("MatMul", &["x", "qt"], &["s"], vec![]),
            node("Mul", &["s", "half"], &["ss"], vec![]),
            node("Softmax", &["ss"], &["a"], vec![ai("axis", -1)]),
            node("MatMul", &["a", "x"], &["o"], vec![]),
            node("Add", &["o", "x"], &["res"], vec![]),
            node(
                "LayerNormalization",
                &["res", "ln_s", "ln_b"],
                &["n"],
                vec![ai("axis", -1), af("epsilon", 1e-5)],
            ),
            node("Gelu", &["n"], &["g"], vec![]),
            node(
                "ReduceMean",
                &["g", "perm_axes"],
                &["y"],
                vec![ai("keepdims", 1)],
            ),
        ],
    )
}

/// `x.view(x.size(0), -1)` as PyTorch exports it, plus ConstantOfShape, Cast and Expand (all
/// folded: they compute on constants).
fn shape_folding() -> tir_onnx::proto::ModelProto {
    model(
        13,
        vec![input_sym(
            "x",
            &[D::S("batch"), D::N(3), D::N(2), D::N(2)],
            DataType::Float,
        )],
        &["y", "z"],
        vec![
            ti64("zero", &[], &[0]),
            ti64("zero_axes", &[1], &[0]),
            ti64("minus1", &[1], &[-1]),
            ti64("one", &[1], &[1]),
            ti64("expand_to", &[2], &[1, 12]),
        ],
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["n"], vec![ai("axis", 0)]),
            node("Unsqueeze", &["n", "zero_axes"], &["n1"], vec![]),
            node(
                "Concat",
                &["n1", "minus1"],
                &["target"],
                vec![ai("axis", 0)],
            ),
            node("Reshape", &["x", "target"], &["y"], vec![]),
            node(
                "ConstantOfShape",
                &["one"],
                &["ones_i"],
                vec![at("value", ti64("v", &[1], &[1]))],
            ),
            node(
                "Cast",
                &["ones_i"],
                &["ones"],
                vec![ai("to", DataType::Float as i64)],
            ),
            node("Expand", &["ones", "expand_to"], &["e"], vec![]),
            node("Mul", &["y", "e"], &["z"], vec![]),
        ],
    )
}

fn views() -> tir_onnx::proto::ModelProto {
    model(
        13,
        vec![input("x", &[2, 6, 1, 4])],
        &["a", "b", "c", "d"],
        vec![
            ti64("sq", &[1], &[2]),
            ti64("sizes", &[2], &[2, 4]),
            ti64("st", &[1], &[1]),
            ti64("en", &[1], &[i64::MAX]),
            ti64("ax", &[1], &[3]),
        ],
        vec![
            node("Squeeze", &["x", "sq"], &["s"], vec![]),
            node("Split", &["s", "sizes"], &["a", "p"], vec![ai("axis", 1)]),
            node("Unsqueeze", &["p", "sq"], &["u"], vec![]),
            node("Slice", &["u", "st", "en", "ax"], &["b"], vec![]),
            node(
                "Transpose",
                &["x"],
                &["c"],
                vec![ais("perm", &[3, 1, 2, 0])],
            ),
            node("Identity", &["x"], &["i"], vec![]),
            node("Dropout", &["i"], &["dd"], vec![]),
            node("Concat", &["dd", "x"], &["d"], vec![ai("axis", 0)]),
        ],
    )
}

fn resize_pad() -> tir_onnx::proto::ModelProto {
    model(
        13,
        vec![input("x", &[1, 2, 3, 4])],
        &["a", "b", "c"],
        vec![
            tf32("scales", &[4], &[1.0, 1.0, 2.0, 1.5]),
            ti64("sizes", &[4], &[1, 2, 5, 3]),
            ti64("pads", &[8], &[0, 0, 1, 2, 0, 0, 2, 1]),
            tf32("value", &[], &[0.25]),
        ],
        vec![
            node(
                "Resize",
                &["x", "", "scales"],
                &["a"],
                vec![
                    as_("coordinate_transformation_mode", "asymmetric"),
                    as_("nearest_mode", "floor"),
                ],
            ),
            node(
                "Resize",
                &["x", "", "", "sizes"],
                &["b"],
                vec![
                    as_("mode", "linear"),
                    as_("coordinate_transformation_mode", "align_corners"),
                ],
            ),
            node(
                "Pad",
                &["x", "pads", "value"],
                &["c"],
                vec![as_("mode", "constant")],
            ),
        ],
    )
}

fn elementwise() -> tir_onnx::proto::ModelProto {
    model(
        11,
        vec![input("x", &[1, 3, 2, 2]), input("y", &[1, 3, 1, 1])],
        &["o"],
        vec![
            tseq("slope", &[3, 1, 1]),
            tf32("ca", &[2], &[1.0, 2.0]),
            tf32("cb", &[2], &[1.0, 3.0]),
        ],
        vec![
            node("Sub", &["x", "y"], &["a"], vec![]),
            node("Div", &["a", "y"], &["b"], vec![]),
            node(
                "Clip",
                &["b"],
                &["c"],
                vec![af("min", -1.0), af("max", 6.0)],
            ),
            node("PRelu", &["c", "slope"], &["d"], vec![]),
            node("Sigmoid", &["d"], &["e"], vec![]),
            node("Tanh", &["e"], &["f"], vec![]),
            node("Exp", &["f"], &["g"], vec![]),
            node(
                "HardSigmoid",
                &["g"],
                &["h"],
                vec![af("alpha", 0.2), af("beta", 0.5)],
            ),
            node("HardSwish", &["h"], &["i"], vec![]),
            // Folded: Equal and Where only compute on constants.
            node("Equal", &["ca", "cb"], &["eq"], vec![]),
            node("Where", &["eq", "ca", "cb"], &["w"], vec![]),
            node("Add", &["i", "w"], &["o"], vec![]),
        ],
    )
}

/// An initializer in an external file, `data.bin` beside the model (the fuzz target provides
/// one of 1024 bytes).
fn external_data() -> tir_onnx::proto::ModelProto {
    let entry = |k: &str, v: &str| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    let w = TensorProto {
        name: Some("w".into()),
        dims: vec![4, 4],
        data_type: Some(DataType::Float as i32),
        data_location: Some(DataLocation::External as i32),
        external_data: vec![
            entry("location", "data.bin"),
            entry("offset", "128"),
            entry("length", "64"),
        ],
        ..Default::default()
    };
    model(
        13,
        vec![input("x", &[2, 4])],
        &["y"],
        vec![w],
        vec![node("MatMul", &["x", "w"], &["y"], vec![])],
    )
}

/// A `.npy` file as NumPy writes it: magic, version, header length, the dict padded with
/// spaces to a multiple of 64 bytes and ending in `\n`, then the data.
fn npy_raw(major: u8, descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    let prefix = if major == 1 { 10 } else { 12 };
    let mut header = dict.into_bytes();
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend([major, 0]);
    if major == 1 {
        out.extend((header.len() as u16).to_le_bytes());
    } else {
        out.extend((header.len() as u32).to_le_bytes());
    }
    out.extend(header);
    out.extend(data);
    out
}

fn tensor(shape: &[u64], data: Data) -> Tensor {
    let ty = TensorType::new(shape.to_vec(), data.dtype());
    Tensor::new(ty, data).expect("a consistent seed tensor")
}

fn npy_seeds() {
    let dir = corpus("npy_read");
    let f32s: Vec<f32> = (0..24).map(|i| i as f32 * 0.25 - 2.0).collect();
    let written = [
        ("f32_2x3x4.npy", tensor(&[2, 3, 4], Data::F32(f32s.clone()))),
        ("f32_scalar.npy", tensor(&[], Data::F32(vec![1.5]))),
        ("f32_empty.npy", tensor(&[0, 3], Data::F32(vec![]))),
        (
            "f16_4.npy",
            tensor(
                &[4],
                Data::from_f32(DType::F16, &[0.5, -1.0, 65504.0, 1e-4]),
            ),
        ),
        ("i8_3.npy", tensor(&[3], Data::I8(vec![-128, 0, 127]))),
        (
            "u8_2x2.npy",
            tensor(&[2, 2], Data::U8(vec![0, 1, 254, 255])),
        ),
        (
            "i32_2.npy",
            tensor(&[2], Data::I32(vec![i32::MIN, i32::MAX])),
        ),
        ("i64_1x2.npy", tensor(&[1, 2], Data::I64(vec![-1, 1 << 40]))),
        (
            "bool_3.npy",
            tensor(&[3], Data::Bool(vec![true, false, true])),
        ),
    ];
    for (name, t) in written {
        write(&dir, name, &npy::write(&t).expect("a writable seed tensor"));
    }
    let be: Vec<u8> = f32s.iter().flat_map(|x| x.to_be_bytes()).collect();
    let le: Vec<u8> = f32s.iter().flat_map(|x| x.to_le_bytes()).collect();
    let raw = [
        ("v2_f32_4x6.npy", npy_raw(2, "<f4", false, "(4, 6)", &le)),
        ("v3_f32_24.npy", npy_raw(3, "<f4", false, "(24,)", &le)),
        (
            "big_endian_f32.npy",
            npy_raw(1, ">f4", false, "(2, 12)", &be),
        ),
        ("fortran_order.npy", npy_raw(1, "<f4", true, "(4, 6)", &le)),
        ("f64_unsupported.npy", npy_raw(1, "<f8", false, "(3,)", &le)),
        ("short_data.npy", npy_raw(1, "<f4", false, "(5, 5)", &le)),
    ];
    for (name, bytes) in raw {
        write(&dir, name, &bytes);
    }
}

/// A safetensors file from its JSON header and data, as other writers lay it out.
fn safetensors_raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

fn safetensors_seeds() {
    let dir = corpus("safetensors_weights");
    let fixed = |text: &str| tir_ir::parse_and_verify(text).expect("a fixed module");
    let run = fixed(include_str!("../modules/safetensors_run.tir"));
    let dtypes = fixed(include_str!("../modules/safetensors_dtypes.tir"));
    for (name, module) in [("run.safetensors", &run), ("dtypes.safetensors", &dtypes)] {
        let w = Weights::generate(module, 7).expect("generated weights");
        write(&dir, name, &w.to_safetensors().expect("encodable weights"));
    }
    // NaN, infinities and a zero variance: the interpreter must still answer.
    let mut w = Weights::generate(&run, 1).expect("generated weights");
    w.insert(
        "bn.var",
        tensor(&[4], Data::F32(vec![0.0, -1.0, f32::NAN, f32::INFINITY])),
    );
    w.insert(
        "fc.bias",
        tensor(&[3], Data::F32(vec![f32::NEG_INFINITY, 0.0, f32::MAX])),
    );
    write(
        &dir,
        "run_nonfinite.safetensors",
        &w.to_safetensors().expect("encodable weights"),
    );
    // Written by hand: metadata, keys out of order, a tensor no const names, a wrong shape.
    let data: Vec<u8> = (0..48u8).collect();
    let data52: Vec<u8> = (0..52u8).collect();
    write(
        &dir,
        "metadata.safetensors",
        &safetensors_raw(
            r#"{"__metadata__":{"format":"pt"},"longs":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"mask":{"dtype":"BOOL","shape":[5],"data_offsets":[16,21]},"unused":{"dtype":"U8","shape":[3],"data_offsets":[21,24]},"half":{"dtype":"F16","shape":[2,3],"data_offsets":[24,36]},"ints":{"dtype":"I32","shape":[2,2],"data_offsets":[36,52]}}"#,
            &data52,
        ),
    );
    write(
        &dir,
        "wrong_shape.safetensors",
        &safetensors_raw(
            r#"{"fc.bias":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"fc.weight":{"dtype":"F64","shape":[3,4],"data_offsets":[16,48]}}"#,
            &data,
        ),
    );
}
