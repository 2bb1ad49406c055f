//! Every refusal names what is at fault: the node (index, name, op type), the input, or the
//! initializer. No input file makes the importer panic.

mod common;
use common::*;
use prost::Message;
use tir_onnx::proto::tensor_proto::{DataLocation, DataType};
use tir_onnx::proto::{ModelProto, StringStringEntryProto, TensorProto};
use tir_onnx::ImportOptions;

fn one(
    op: &str,
    inputs: &[&str],
    attrs: Vec<tir_onnx::proto::AttributeProto>,
    inits: Vec<TensorProto>,
    opset: i64,
) -> ModelProto {
    model(
        opset,
        vec![input("x", &[1, 2, 4, 4])],
        &["y"],
        inits,
        vec![node(op, inputs, &["y"], attrs)],
    )
}

#[test]
fn error_messages() {
    let cases: Vec<(&str, ModelProto)> = vec![
        ("unsupported op", one("Det", &["x"], vec![], vec![], 13)),
        ("unsupported domain", {
            let mut m = one("Relu", &["x"], vec![], vec![], 13);
            m.graph.as_mut().unwrap().node[0].domain = Some("com.microsoft".into());
            m
        }),
        ("opset too old", one("Relu", &["x"], vec![], vec![], 9)),
        ("opset too new", one("Relu", &["x"], vec![], vec![], 25)),
        (
            "dynamic dimension",
            model(
                13,
                vec![input_sym(
                    "x",
                    &[D::S("batch"), D::S("channels")],
                    DataType::Float,
                )],
                &["y"],
                vec![],
                vec![node("Relu", &["x"], &["y"], vec![])],
            ),
        ),
        (
            "unsupported input element type",
            model(
                13,
                vec![input_sym("x", &[D::N(1)], DataType::Double)],
                &["y"],
                vec![],
                vec![node("Relu", &["x"], &["y"], vec![])],
            ),
        ),
        (
            "attention bool mask at run time",
            model(
                23,
                vec![
                    input("q", &[1, 1, 2, 4]),
                    input("k", &[1, 1, 2, 4]),
                    input("v", &[1, 1, 2, 4]),
                    input_sym("mask", &[D::N(2), D::N(2)], DataType::Bool),
                ],
                &["y"],
                vec![],
                vec![node("Attention", &["q", "k", "v", "mask"], &["y"], vec![])],
            ),
        ),
        (
            "conv group zero",
            one(
                "Conv",
                &["x", "w"],
                vec![ai("group", 0)],
                vec![tseq("w", &[2, 2, 1, 1])],
                13,
            ),
        ),
        (
            "conv group mismatch",
            one(
                "Conv",
                &["x", "w"],
                vec![ai("group", 3)],
                vec![tseq("w", &[3, 1, 1, 1])],
                13,
            ),
        ),
        (
            "conv 1-D",
            model(
                13,
                vec![input("x", &[1, 2, 4])],
                &["y"],
                vec![tseq("w", &[2, 2, 1])],
                vec![node("Conv", &["x", "w"], &["y"], vec![])],
            ),
        ),
        (
            "clip min above max",
            one(
                "Clip",
                &["x", "lo", "hi"],
                vec![],
                vec![tf32("lo", &[], &[2.0]), tf32("hi", &[], &[1.0])],
                13,
            ),
        ),
        (
            "clip min computed",
            one("Clip", &["x", "x"], vec![], vec![], 13),
        ),
        (
            "pool pad too large",
            one(
                "MaxPool",
                &["x"],
                vec![ais("kernel_shape", &[2, 2]), ais("pads", &[2, 2, 2, 2])],
                vec![],
                13,
            ),
        ),
        (
            "pool dilations",
            one(
                "MaxPool",
                &["x"],
                vec![ais("kernel_shape", &[2, 2]), ais("dilations", &[2, 2])],
                vec![],
                13,
            ),
        ),
        (
            "pool indices used",
            model(
                13,
                vec![input("x", &[1, 2, 4, 4])],
                &["y", "i"],
                vec![],
                vec![node(
                    "MaxPool",
                    &["x"],
                    &["y", "i"],
                    vec![ais("kernel_shape", &[2, 2])],
                )],
            ),
        ),
        (
            "reshape shape computed",
            one("Reshape", &["x", "x"], vec![], vec![], 13),
        ),
        (
            "reshape bad size",
            one(
                "Reshape",
                &["x", "s"],
                vec![],
                vec![ti64("s", &[2], &[3, -1])],
                13,
            ),
        ),
        (
            "split uneven",
            model(
                13,
                vec![input("x", &[1, 5])],
                &["a", "b"],
                vec![],
                vec![node("Split", &["x"], &["a", "b"], vec![ai("axis", 1)])],
            ),
        ),
        (
            "negative pads",
            one(
                "Pad",
                &["x", "p"],
                vec![],
                vec![ti64("p", &[8], &[0, 0, -1, 0, 0, 0, 0, 0])],
                13,
            ),
        ),
        (
            "pad wrap",
            one(
                "Pad",
                &["x", "p"],
                vec![as_("mode", "wrap")],
                vec![ti64("p", &[8], &[0; 8])],
                19,
            ),
        ),
        (
            "resize cubic",
            one(
                "Resize",
                &["x", "", "", "s"],
                vec![as_("mode", "cubic")],
                vec![ti64("s", &[4], &[1, 2, 8, 8])],
                13,
            ),
        ),
        (
            "resize fractional scale",
            one(
                "Resize",
                &["x", "", "s"],
                vec![],
                vec![tf32("s", &[4], &[1.0, 1.0, 1.3, 1.0])],
                13,
            ),
        ),
        (
            "gelu sigmoid",
            one(
                "Gelu",
                &["x"],
                vec![as_("approximate", "sigmoid")],
                vec![],
                20,
            ),
        ),
        (
            "runtime gather",
            one("Gather", &["x", "x"], vec![], vec![], 13),
        ),
        (
            "gather out of range",
            model(
                13,
                vec![input("x", &[1, 2])],
                &["y"],
                vec![ti64("i", &[], &[7])],
                vec![
                    node("Shape", &["x"], &["s"], vec![]),
                    node("Gather", &["s", "i"], &["g"], vec![]),
                    node("Reshape", &["x", "g"], &["y"], vec![]),
                ],
            ),
        ),
        (
            "cast to a type tir does not hold",
            one(
                "Cast",
                &["x"],
                vec![ai("to", DataType::Double as i64)],
                vec![],
                13,
            ),
        ),
        (
            "batchnorm training before opset 14",
            one(
                "BatchNormalization",
                &["x", "g", "g", "g", "g"],
                vec![ai("training_mode", 1)],
                vec![tseq("g", &[2])],
                13,
            ),
        ),
        (
            "wrong attribute type",
            one("Softmax", &["x"], vec![af("axis", 1.0)], vec![], 13),
        ),
        (
            "axis out of range",
            one("Softmax", &["x"], vec![ai("axis", 4)], vec![], 13),
        ),
        (
            "undefined input",
            one("Relu", &["nowhere"], vec![], vec![], 13),
        ),
        (
            "bad initializer",
            one(
                "Add",
                &["x", "k"],
                vec![],
                vec![TensorProto {
                    raw_data: Some(vec![1, 2, 3]),
                    ..tf32("k", &[2], &[])
                }],
                13,
            ),
        ),
        ("unused --dim", one("Relu", &["x"], vec![], vec![], 13)),
    ];
    let mut out = String::new();
    for (what, m) in &cases {
        let opts = if *what == "unused --dim" {
            ImportOptions {
                dims: vec![("nope".into(), 3)],
                ..Default::default()
            }
        } else {
            ImportOptions::default()
        };
        let msg = match import_with(m, &opts) {
            Ok(imp) => panic!(
                "{what}: expected an error, got\n{}",
                tir_ir::print(&imp.module)
            ),
            Err(e) => e.to_string(),
        };
        out.push_str(&format!("{what}:\n  {msg}\n"));
    }
    insta::assert_snapshot!("errors", out);
}

#[test]
fn node_errors_name_index_name_and_op_type() {
    let m = model(
        13,
        vec![input("x", &[1, 4])],
        &["z"],
        vec![],
        vec![
            node("Relu", &["x"], &["y"], vec![]),
            node("Det", &["y"], &["z"], vec![]),
        ],
    );
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, tir_onnx::ImportError::Node { index: 1, name, op_type, .. } if name == "Det_z" && op_type == "Det"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "node 1 `Det_z` (Det): the IR has no `Det` op (not supported)"
    );
}

fn sample_model() -> ModelProto {
    model(
        13,
        vec![input("x", &[1, 2, 4, 4])],
        &["y"],
        vec![tseq("w", &[3, 2, 3, 3]), ti64("shape", &[2], &[1, -1])],
        vec![
            node(
                "Conv",
                &["x", "w"],
                &["c"],
                vec![ais("pads", &[1, 1, 1, 1])],
            ),
            node("Relu", &["c"], &["r"], vec![]),
            node("Reshape", &["r", "shape"], &["y"], vec![]),
        ],
    )
}

/// Truncations and corruptions of a valid model, and random bytes: an error or a model,
/// never a panic.
#[test]
fn garbage_never_panics() {
    let bytes = sample_model().encode_to_vec();
    assert!(tir_onnx::import_bytes(&bytes, &ImportOptions::default()).is_ok());
    for n in 0..bytes.len() {
        let _ = tir_onnx::import_bytes(&bytes[..n], &ImportOptions::default());
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..2000 {
        let mut b = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() as usize) % b.len();
            b[i] = next() as u8;
        }
        let _ = tir_onnx::import_bytes(&b, &ImportOptions::default());
    }
    for len in [0usize, 1, 7, 64, 1000] {
        let junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let _ = tir_onnx::import_bytes(&junk, &ImportOptions::default());
    }
    let e = tir_onnx::import_bytes(b"not a model at all", &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().starts_with("not a valid ONNX model"), "{e}");
}

fn external(name: &str, dims: &[i64], location: &str, offset: u64, length: u64) -> TensorProto {
    let kv = |k: &str, v: String| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v),
    };
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        data_location: Some(DataLocation::External as i32),
        external_data: vec![
            kv("location", location.into()),
            kv("offset", offset.to_string()),
            kv("length", length.to_string()),
        ],
        ..Default::default()
    }
}

#[test]
fn external_data() {
    let dir = std::env::temp_dir().join(format!("tir-onnx-external-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut data = vec![0u8; 16];
    for v in [1.0f32, 2.0, 3.0, 4.0] {
        data.extend(v.to_le_bytes());
    }
    std::fs::write(dir.join("weights.bin"), &data).unwrap();
    let m = model(
        13,
        vec![input("x", &[2, 2])],
        &["y"],
        vec![external("k", &[2, 2], "weights.bin", 16, 16)],
        vec![node("Add", &["x", "k"], &["y"], vec![])],
    );
    let path = dir.join("m.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    let imp = tir_onnx::import_file(&path, &ImportOptions::default()).unwrap();
    assert_eq!(imp.weights.tensors["k"].floats(), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(imp.module.name, "m");

    let missing = model(
        13,
        vec![input("x", &[2, 2])],
        &["y"],
        vec![external("k", &[2, 2], "gone.bin", 0, 16)],
        vec![node("Add", &["x", "k"], &["y"], vec![])],
    );
    std::fs::write(&path, missing.encode_to_vec()).unwrap();
    let e = tir_onnx::import_file(&path, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("initializer `k`: cannot read external data file `")
            && e.contains("gone.bin"),
        "{e}"
    );

    let short = model(
        13,
        vec![input("x", &[2, 2])],
        &["y"],
        vec![external("k", &[2, 2], "weights.bin", 24, 16)],
        vec![node("Add", &["x", "k"], &["y"], vec![])],
    );
    std::fs::write(&path, short.encode_to_vec()).unwrap();
    let e = tir_onnx::import_file(&path, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("has 32 bytes, but bytes 24..40 are needed"),
        "{e}"
    );

    let escape = model(
        13,
        vec![input("x", &[2, 2])],
        &["y"],
        vec![external("k", &[2, 2], "../weights.bin", 0, 16)],
        vec![node("Add", &["x", "k"], &["y"], vec![])],
    );
    std::fs::write(&path, escape.encode_to_vec()).unwrap();
    let e = tir_onnx::import_file(&path, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("must be a relative path inside"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn weights_round_trip_through_safetensors() {
    let imp = import(&sample_model()).unwrap();
    let bytes = imp.weights.to_safetensors().unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let w = st.tensor("w").unwrap();
    assert_eq!(w.shape(), &[3, 2, 3, 3]);
    assert_eq!(w.dtype(), safetensors::Dtype::F32);
    assert_eq!(w.data(), imp.weights.tensors["w"].data.as_slice());
    // The folded reshape target is an attribute, not a weight.
    assert!(st.tensor("shape").is_err());
}
