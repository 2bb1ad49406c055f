//! The linear quantization operators (onnx/src/import/quant.rs), imported and run through the
//! reference interpreter, checked against ONNX's definitions written out here; the integer
//! products that f32 could round are refused.

mod common;
use common::*;
use tir_ir::{DType, TensorType};
use tir_onnx::proto::tensor_proto::DataType;
use tir_onnx::proto::{AttributeProto, TensorProto};

/// A constant of ONNX type `dt` (u8, i8: stored as int32_data, as exporters write them).
fn tint(name: &str, dims: &[i64], dt: DataType, v: &[i32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(dt as i32),
        int32_data: v.to_vec(),
        ..Default::default()
    }
}

/// Runs a one-node model whose first input `x` has type `dt` and the given data, and returns
/// every output's values as f64.
fn run(
    opset: i64,
    op: &str,
    attrs: Vec<AttributeProto>,
    x: (&[i64], DataType, Vec<f64>),
    inits: Vec<TensorProto>,
    inputs: &[&str],
    outs: &[&str],
) -> Vec<Vec<f64>> {
    let (dims, dt, data) = x;
    let d: Vec<D> = dims.iter().map(|&v| D::N(v)).collect();
    let m = model(
        opset,
        vec![input_sym("x", &d, dt)],
        outs,
        inits,
        vec![node(op, inputs, outs, attrs)],
    );
    let imp = import(&m).unwrap_or_else(|e| panic!("{op}: import failed: {e}"));
    let st = imp.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
    let shape: Vec<u64> = dims.iter().map(|&v| v as u64).collect();
    let given = match dt {
        DataType::Uint8 => tir_interp::Tensor::new(
            TensorType::new(shape, DType::U8),
            tir_interp::Data::U8(data.iter().map(|&v| v as u8).collect()),
        ),
        DataType::Int8 => tir_interp::Tensor::new(
            TensorType::new(shape, DType::I8),
            tir_interp::Data::I8(data.iter().map(|&v| v as i8).collect()),
        ),
        _ => tir_interp::Tensor::f32(shape, data.iter().map(|&v| v as f32).collect()),
    }
    .unwrap();
    let got = tir_interp::run(&imp.module, &weights, &[given]).unwrap();
    got.iter().map(|t| t.to_f64()).collect()
}

#[test]
fn dequantize_subtracts_the_zero_point_and_scales() {
    let y = run(
        24,
        "DequantizeLinear",
        vec![],
        (&[4], DataType::Uint8, vec![0.0, 3.0, 128.0, 255.0]),
        vec![
            tf32("s", &[], &[0.5]),
            tint("z", &[], DataType::Uint8, &[128]),
        ],
        &["x", "s", "z"],
        &["y"],
    );
    assert_eq!(y[0], [-64.0, -62.5, 0.0, 63.5]);
    // Per axis 1 of a 1x2x2 int8 tensor.
    let y = run(
        24,
        "DequantizeLinear",
        vec![],
        (&[1, 2, 2], DataType::Int8, vec![-128.0, 1.0, 2.0, 127.0]),
        vec![
            tf32("s", &[2], &[1.0, 0.25]),
            tint("z", &[2], DataType::Int8, &[0, -2]),
        ],
        &["x", "s", "z"],
        &["y"],
    );
    assert_eq!(y[0], [-128.0, 1.0, 1.0, 32.25]);
}

#[test]
fn quantize_rounds_half_to_even_then_saturates() {
    let x = vec![-300.0, -1.5, -0.5, 0.5, 1.5, 2.5, 300.0];
    let y = run(
        24,
        "QuantizeLinear",
        vec![],
        (&[7], DataType::Float, x.clone()),
        vec![
            tf32("s", &[], &[1.0]),
            tint("z", &[], DataType::Uint8, &[10]),
        ],
        &["x", "s", "z"],
        &["y"],
    );
    // round(x) + 10, clipped to [0, 255]: -1.5 -> -2, -0.5 -> 0, 0.5 -> 0, 2.5 -> 2.
    assert_eq!(y[0], [0.0, 8.0, 10.0, 10.0, 12.0, 12.0, 255.0]);
    let y = run(
        24,
        "QuantizeLinear",
        vec![],
        (&[7], DataType::Float, x),
        vec![tf32("s", &[], &[0.5]), tint("z", &[], DataType::Int8, &[0])],
        &["x", "s", "z"],
        &["y"],
    );
    assert_eq!(y[0], [-128.0, -3.0, -1.0, 1.0, 3.0, 5.0, 127.0]);
}

#[test]
fn dynamic_quantize_covers_zero_and_the_input_range() {
    let x = vec![0.0, 2.0, -3.0, -2.5, 1.34, 0.5];
    let y = run(
        11,
        "DynamicQuantizeLinear",
        vec![],
        (&[6], DataType::Float, x.clone()),
        vec![],
        &["x"],
        &["y", "scale", "zp"],
    );
    // The reference in f32: scale = (2 - -3) / 255, zp = round(3 / scale).
    let scale = (2.0f32 - -3.0f32) / 255.0f32;
    let zp = (0.0f32 - (-3.0f32 / scale))
        .clamp(0.0, 255.0)
        .round_ties_even();
    let want: Vec<f64> = x
        .iter()
        .map(|&v| ((v as f32 / scale).round_ties_even() + zp).clamp(0.0, 255.0) as f64)
        .collect();
    assert_eq!(y[0], want);
    assert_eq!(y[1], [scale as f64]);
    assert_eq!(y[2], [zp as f64]);
}

#[test]
fn integer_matmuls_are_exact_or_refused() {
    // MatMulInteger at opset 10: (a - 1) @ (b - 2) in i32.
    let a = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [2, 3, 4, 5, 6, 7];
    let y = run(
        10,
        "MatMulInteger",
        vec![],
        (&[2, 3], DataType::Uint8, a.clone()),
        vec![
            tint("b", &[3, 2], DataType::Uint8, &b),
            tint("az", &[], DataType::Uint8, &[1]),
            tint("bz", &[], DataType::Uint8, &[2]),
        ],
        &["x", "b", "az", "bz"],
        &["y"],
    );
    let want = |a: &[f64]| {
        let mut w = vec![0.0; 4];
        for i in 0..2 {
            for j in 0..2 {
                for k in 0..3 {
                    w[i * 2 + j] += (a[i * 3 + k] - 1.0) * (b[k * 2 + j] - 2) as f64;
                }
            }
        }
        w
    };
    assert_eq!(y[0], want(&a));
    // QLinearMatMul to u8: round(C * (0.5 * 2 / 4) + 3).
    let y = run(
        21,
        "QLinearMatMul",
        vec![],
        (&[2, 3], DataType::Uint8, a.clone()),
        vec![
            tf32("as", &[], &[0.5]),
            tint("az", &[], DataType::Uint8, &[1]),
            tint("b", &[3, 2], DataType::Uint8, &b),
            tf32("bs", &[], &[2.0]),
            tint("bz", &[], DataType::Uint8, &[2]),
            tf32("ys", &[], &[4.0]),
            tint("yz", &[], DataType::Uint8, &[3]),
        ],
        &["x", "as", "az", "b", "bs", "bz", "ys", "yz"],
        &["y"],
    );
    let q: Vec<f64> = want(&a)
        .iter()
        .map(|&c| (c * 0.25 + 3.0).round_ties_even().clamp(0.0, 255.0))
        .collect();
    assert_eq!(y[0], q);
    // 300 terms of up to 255 x 255 can pass 2^24: refused.
    let e = error(&model(
        10,
        vec![input_sym("x", &[D::N(1), D::N(300)], DataType::Uint8)],
        &["y"],
        vec![tint("b", &[300, 1], DataType::Uint8, &[255; 300])],
        vec![node("MatMulInteger", &["x", "b"], &["y"], vec![])],
    ));
    assert!(e.contains("past the 2^24"), "{e}");
    // An i8 QLinearMatMul result: the definition and the reference disagree.
    let e = error(&model(
        21,
        vec![input_sym("x", &[D::N(1), D::N(2)], DataType::Int8)],
        &["y"],
        vec![
            tf32("s", &[], &[1.0]),
            tint("z", &[], DataType::Int8, &[0]),
            tint("b", &[2, 1], DataType::Int8, &[1, 1]),
        ],
        vec![node(
            "QLinearMatMul",
            &["x", "s", "z", "b", "s", "z", "s", "z"],
            &["y"],
            vec![],
        )],
    ));
    assert!(e.contains("a i8 result is not supported"), "{e}");
}
