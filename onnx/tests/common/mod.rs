//! Building small ONNX models in code with the prost types (no binary fixtures).
#![allow(dead_code)]

use prost::Message;
use tir_onnx::proto::attribute_proto::AttributeType;
use tir_onnx::proto::tensor_proto::DataType;
use tir_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use tir_onnx::proto::type_proto;
use tir_onnx::proto::*;
use tir_onnx::{ImportError, ImportOptions, Imported};

fn attr(name: &str, t: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(t as i32),
        ..Default::default()
    }
}

pub fn ai(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        i: Some(v),
        ..attr(name, AttributeType::Int)
    }
}

pub fn ais(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        ints: v.to_vec(),
        ..attr(name, AttributeType::Ints)
    }
}

pub fn af(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        f: Some(v),
        ..attr(name, AttributeType::Float)
    }
}

pub fn afs(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto {
        floats: v.to_vec(),
        ..attr(name, AttributeType::Floats)
    }
}

pub fn as_(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        s: Some(v.as_bytes().to_vec()),
        ..attr(name, AttributeType::String)
    }
}

pub fn at(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        t: Some(t),
        ..attr(name, AttributeType::Tensor)
    }
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: Some(format!("{op}_{}", outputs.first().copied().unwrap_or(""))),
        op_type: Some(op.into()),
        attribute: attrs,
        ..Default::default()
    }
}

/// A dimension: a number, or a symbol.
pub enum D {
    N(i64),
    S(&'static str),
}

pub fn input_sym(name: &str, dims: &[D], elem: DataType) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                D::N(v) => dimension::Value::DimValue(*v),
                D::S(s) => dimension::Value::DimParam(s.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn input(name: &str, dims: &[i64]) -> ValueInfoProto {
    let d: Vec<D> = dims.iter().map(|&v| D::N(v)).collect();
    input_sym(name, &d, DataType::Float)
}

pub fn output(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        ..Default::default()
    }
}

pub fn tf32(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        float_data: data.to_vec(),
        ..Default::default()
    }
}

/// An f32 tensor filled with 0.1, 0.2, ... (stored as raw_data).
pub fn tseq(name: &str, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    let raw: Vec<u8> = (0..n)
        .flat_map(|i| ((i % 17) as f32 * 0.1 - 0.5).to_le_bytes())
        .collect();
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        raw_data: Some(raw),
        ..Default::default()
    }
}

pub fn ti64(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Int64 as i32),
        int64_data: data.to_vec(),
        ..Default::default()
    }
}

pub fn model(
    opset: i64,
    inputs: Vec<ValueInfoProto>,
    outputs: &[&str],
    inits: Vec<TensorProto>,
    nodes: Vec<NodeProto>,
) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        producer_name: Some("tir-tests".into()),
        graph: Some(GraphProto {
            name: Some("test".into()),
            node: nodes,
            initializer: inits,
            input: inputs,
            output: outputs.iter().map(|o| output(o)).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn import_with(m: &ModelProto, opts: &ImportOptions) -> Result<Imported, ImportError> {
    let opts = ImportOptions {
        name: Some(opts.name.clone().unwrap_or_else(|| "test".into())),
        ..opts.clone()
    };
    tir_onnx::import_bytes(&m.encode_to_vec(), &opts)
}

pub fn import(m: &ModelProto) -> Result<Imported, ImportError> {
    import_with(m, &ImportOptions::default())
}

/// The imported text, checked to parse and verify again.
pub fn text_with(m: &ModelProto, opts: &ImportOptions) -> String {
    let imp = import_with(m, opts).unwrap_or_else(|e| panic!("import failed: {e}"));
    let text = tir_ir::print(&imp.module);
    if let Err(d) = tir_ir::parse_and_verify(&text) {
        panic!("the imported text does not verify: {d:?}\n{text}");
    }
    text
}

pub fn text(m: &ModelProto) -> String {
    text_with(m, &ImportOptions::default())
}

/// The import error's message.
pub fn error(m: &ModelProto) -> String {
    match import(m) {
        Ok(imp) => panic!("expected an error, got:\n{}", tir_ir::print(&imp.module)),
        Err(e) => e.to_string(),
    }
}

/// The model's outputs as bits through the interpreter, imported with `opts`, on the input of
/// shape `x` holding `amp · sin(0.37 i)`.
pub fn run_bits(m: &ModelProto, opts: &ImportOptions, x: &[i64], amp: f32) -> Vec<Vec<u32>> {
    let imp = import_with(m, opts).unwrap();
    let st = imp.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
    let n: i64 = x.iter().product();
    let input = tir_interp::Tensor::f32(
        x.iter().map(|&d| d as u64).collect::<Vec<u64>>(),
        (0..n).map(|v| (v as f32 * 0.37).sin() * amp).collect(),
    )
    .unwrap();
    tir_interp::run(&imp.module, &weights, &[input])
        .unwrap()
        .iter()
        .map(|t| t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect())
        .collect()
}

/// Import options that skip the cleanup (the graph as the model writes it).
pub fn no_cleanup() -> ImportOptions {
    ImportOptions {
        no_cleanup: true,
        ..Default::default()
    }
}

/// How many ops of `f` are named `name`.
pub fn count_ops(f: &tir_ir::Function, name: &str) -> usize {
    f.ops_in_order()
        .filter(|(_, o)| o.op.name() == name)
        .count()
}

/// `m` with its first input replaced by the f32 input `name` of dims `dims`, imported keeping
/// its symbolic dims.
pub fn import_free_input(m: &ModelProto, name: &str, dims: &[D]) -> Imported {
    let mut m = m.clone();
    let g = m.graph.as_mut().unwrap();
    g.input[0] = input_sym(name, dims, DataType::Float);
    let opts = ImportOptions {
        keep_symbols: true,
        ..Default::default()
    };
    import_with(&m, &opts).unwrap()
}
