//! CumSum, TopK and NonZero: each model is built here with prost, imported and run
//! through the reference interpreter, and its values checked against results computed by hand
//! (or by the plain loops written out below); what the import cannot express is refused with
//! the reason.

mod common;
use common::*;
use tir_ir::DType;
use tir_onnx::proto::tensor_proto::DataType;
use tir_onnx::proto::{ModelProto, TensorProto};

fn ti32(name: &str, dims: &[i64], data: &[i32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Int32 as i32),
        int32_data: data.to_vec(),
        ..Default::default()
    }
}

/// Imports `m` and runs it on f32 inputs; every output as (shape, values as f64, dtype).
fn run(m: &ModelProto, inputs: &[(&[u64], Vec<f32>)]) -> Vec<(Vec<u64>, Vec<f64>, DType)> {
    let imp = import(m).unwrap_or_else(|e| panic!("import failed: {e}"));
    let st = imp.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
    let given: Vec<_> = inputs
        .iter()
        .map(|(s, v)| tir_interp::Tensor::f32(s.to_vec(), v.clone()).unwrap())
        .collect();
    tir_interp::run(&imp.module, &weights, &given)
        .unwrap()
        .into_iter()
        .map(|t| (t.shape().to_vec(), t.to_f64(), t.ty.dtype))
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn cumsum_takes_its_axis_from_a_constant_and_its_flags_from_attributes() {
    let x: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let cases: [(i64, i64, i64, [f64; 6]); 4] = [
        (0, 0, 0, [1.0, 2.0, 3.0, 5.0, 7.0, 9.0]),
        (1, 0, 0, [1.0, 3.0, 6.0, 4.0, 9.0, 15.0]),
        (-1, 1, 0, [0.0, 1.0, 3.0, 0.0, 4.0, 9.0]),
        (1, 1, 1, [5.0, 3.0, 0.0, 11.0, 6.0, 0.0]),
    ];
    for (axis, exclusive, reverse, want) in cases {
        let m = model(
            14,
            vec![input("x", &[2, 3])],
            &["y"],
            vec![ti32("axis", &[], &[axis as i32])],
            vec![node(
                "CumSum",
                &["x", "axis"],
                &["y"],
                vec![ai("exclusive", exclusive), ai("reverse", reverse)],
            )],
        );
        let out = run(&m, &[(&[2, 3], x.clone())]);
        assert_eq!(out[0].0, vec![2, 3]);
        assert_close(
            &out[0].1,
            &want,
            &format!("axis {axis} exclusive {exclusive} reverse {reverse}"),
        );
    }
    // A run-time axis is refused naming it; a bad one names the axis.
    let m = model(
        14,
        vec![input("x", &[2, 3]), input_sym("axis", &[], DataType::Int32)],
        &["y"],
        vec![],
        vec![node("CumSum", &["x", "axis"], &["y"], vec![])],
    );
    assert!(
        error(&m).contains("axis (input 1) must be a constant"),
        "{}",
        error(&m)
    );
    let m = model(
        14,
        vec![input("x", &[2, 3])],
        &["y"],
        vec![ti32("axis", &[], &[2])],
        vec![node("CumSum", &["x", "axis"], &["y"], vec![])],
    );
    assert!(
        error(&m).contains("axis 2 is out of range for rank 2"),
        "{}",
        error(&m)
    );
}

fn top_k_model(
    k: i64,
    attrs: Vec<tir_onnx::proto::AttributeProto>,
    outputs: &[&str],
) -> ModelProto {
    model(
        11,
        vec![input("x", &[3, 4])],
        outputs,
        vec![ti64("k", &[1], &[k])],
        vec![node("TopK", &["x", "k"], &["v", "i"], attrs)],
    )
}

#[test]
fn top_k_gives_values_and_indices_ties_to_the_lower_index() {
    let x: Vec<f32> = vec![
        0.0, 1.0, 2.0, 3.0, //
        4.0, 4.0, 1.0, 4.0, //
        -1.0, -5.0, -1.0, 8.0,
    ];
    let out = run(
        &top_k_model(3, vec![ai("axis", 1)], &["v", "i"]),
        &[(&[3, 4], x.clone())],
    );
    assert_eq!(out[0].0, vec![3, 3]);
    assert_eq!(
        out[0].1,
        vec![3.0, 2.0, 1.0, 4.0, 4.0, 4.0, 8.0, -1.0, -1.0]
    );
    assert_eq!(out[1].2, DType::I64);
    assert_eq!(out[1].1, vec![3.0, 2.0, 1.0, 0.0, 1.0, 3.0, 3.0, 0.0, 2.0]);
    // Smallest along axis 0.
    let out = run(
        &top_k_model(2, vec![ai("axis", 0), ai("largest", 0)], &["v", "i"]),
        &[(&[3, 4], x.clone())],
    );
    assert_eq!(out[0].1, vec![-1.0, -5.0, -1.0, 3.0, 0.0, 1.0, 1.0, 4.0]);
    assert_eq!(out[1].1, vec![2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
    // Only one output returned: imported through a copy, so the op's results stay together.
    for outputs in [["v"], ["i"]] {
        let m = top_k_model(2, vec![], &outputs);
        let out = run(&m, &[(&[3, 4], x.clone())]);
        assert_eq!(out[0].0, vec![3, 2]);
        // (`outs` names the destinations of all of an op's results or none.)
        let t = text(&m);
        assert!(t.contains("= reshape("), "{t}");
    }
}

#[test]
fn top_k_refuses_a_run_time_k_and_a_k_past_the_axis() {
    let m = model(
        11,
        vec![
            input("x", &[3, 4]),
            input_sym("k", &[D::N(1)], DataType::Int64),
        ],
        &["v", "i"],
        vec![],
        vec![node("TopK", &["x", "k"], &["v", "i"], vec![])],
    );
    let e = error(&m);
    assert!(
        e.contains(
            "K (the number of elements, part of the results' shape) (input 1) must be a constant"
        ),
        "{e}"
    );
    let e = error(&top_k_model(5, vec![], &["v", "i"]));
    assert!(
        e.contains("`top_k` takes k = 5 elements along axis 1"),
        "{e}"
    );
    let e = error(&top_k_model(0, vec![], &["v", "i"]));
    assert!(e.contains("K must be positive"), "{e}");
}

#[test]
fn non_zero_folds_a_constant_and_refuses_a_run_time_input_naming_why() {
    let m = model(
        13,
        vec![input("x", &[2, 2])],
        &["y"],
        vec![tf32("c", &[2, 3], &[1.0, 0.0, 2.0, 0.0, 0.0, 3.0])],
        vec![
            node("NonZero", &["c"], &["n"], vec![]),
            node("Cast", &["n"], &["nf"], vec![ai("to", 1)]),
            node("ReduceSum", &["nf"], &["s"], vec![ai("keepdims", 0)]),
            node("Add", &["x", "s"], &["y"], vec![]),
        ],
    );
    // Indices (0,0), (0,2), (1,2): their coordinates sum to 5.
    let out = run(&m, &[(&[2, 2], vec![0.0; 4])]);
    assert_eq!(out[0].1, vec![5.0; 4]);
    let m = model(
        13,
        vec![input("x", &[2, 2])],
        &["y"],
        vec![],
        vec![node("NonZero", &["x"], &["y"], vec![])],
    );
    let e = error(&m);
    assert!(
        e.contains("static memory planning needs every shape at compile time"),
        "{e}"
    );
    assert!(!e.contains("has no `"), "{e}");
}
