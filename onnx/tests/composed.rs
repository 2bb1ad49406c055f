//! Operators imported as compositions of IR ops (onnx/src/import/compose.rs): each model is
//! imported and run through the reference interpreter and its values checked against the
//! ONNX definition written out here; what the compositions cannot express is refused with the
//! reason.

mod common;
use common::*;
use tir_ir::{DType, TensorType};
use tir_onnx::proto::tensor_proto::DataType;
use tir_onnx::proto::{AttributeProto, TensorProto};

/// One graph input: name, shape, and its data (as f32, or i64 for an `I64` input).
struct In<'a> {
    name: &'a str,
    dims: &'a [i64],
    f32s: Vec<f32>,
    i64s: Option<Vec<i64>>,
}

fn fin<'a>(name: &'a str, dims: &'a [i64], v: &[f32]) -> In<'a> {
    In {
        name,
        dims,
        f32s: v.to_vec(),
        i64s: None,
    }
}

fn iin<'a>(name: &'a str, dims: &'a [i64], v: &[i64]) -> In<'a> {
    In {
        name,
        dims,
        f32s: vec![],
        i64s: Some(v.to_vec()),
    }
}

/// Imports a one-node model, runs it, and returns the output's shape and values (as f64,
/// whatever its element type).
fn run(
    opset: i64,
    op: &str,
    attrs: Vec<AttributeProto>,
    ins: &[In],
    inits: Vec<TensorProto>,
    node_inputs: &[&str],
) -> (Vec<u64>, Vec<f64>) {
    let graph_ins = ins
        .iter()
        .map(|i| {
            let d: Vec<D> = i.dims.iter().map(|&v| D::N(v)).collect();
            let elem = if i.i64s.is_some() {
                DataType::Int64
            } else {
                DataType::Float
            };
            input_sym(i.name, &d, elem)
        })
        .collect();
    let m = model(
        opset,
        graph_ins,
        &["y"],
        inits,
        vec![node(op, node_inputs, &["y"], attrs)],
    );
    let imp = import(&m).unwrap_or_else(|e| panic!("{op}: import failed: {e}"));
    let st = imp.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
    let given: Vec<_> = ins
        .iter()
        .map(|i| {
            let shape: Vec<u64> = i.dims.iter().map(|&x| x as u64).collect();
            match &i.i64s {
                Some(v) => tir_interp::Tensor::new(
                    TensorType::new(shape, DType::I64),
                    tir_interp::Data::I64(v.clone()),
                )
                .unwrap(),
                None => tir_interp::Tensor::f32(shape, i.f32s.clone()).unwrap(),
            }
        })
        .collect();
    let got = tir_interp::run(&imp.module, &weights, &given).unwrap();
    (got[0].shape().to_vec(), got[0].to_f64())
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-5 + 1e-5 * w.abs();
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

fn refused(
    opset: i64,
    op: &str,
    attrs: Vec<AttributeProto>,
    dims: &[i64],
    inits: Vec<TensorProto>,
    inputs: &[&str],
) -> String {
    error(&model(
        opset,
        vec![input("x", dims)],
        &["y"],
        inits,
        vec![node(op, inputs, &["y"], attrs)],
    ))
}

#[test]
fn hardmax_marks_the_first_maximum_along_its_axis() {
    // Rows with a tie (the first wins) and a negative maximum.
    let x = [1.0, 3.0, 3.0, -1.0, -5.0, -2.0, -4.0, -3.0];
    let (s, y) = run(
        13,
        "Hardmax",
        vec![ai("axis", 1)],
        &[fin("x", &[2, 4], &x)],
        vec![],
        &["x"],
    );
    assert_eq!(s, [2, 4]);
    assert_eq!(y, [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    // Axis 0 of the same matrix: column by column.
    let (_, y) = run(
        13,
        "Hardmax",
        vec![ai("axis", 0)],
        &[fin("x", &[2, 4], &x)],
        vec![],
        &["x"],
    );
    assert_eq!(y, [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    // Opset 11 coerces to a matrix at axis 1: one maximum over each 2x2 block.
    let (s, y) = run(
        11,
        "Hardmax",
        vec![],
        &[fin("x", &[2, 2, 2], &x)],
        vec![],
        &["x"],
    );
    assert_eq!(s, [2, 2, 2]);
    assert_eq!(y, [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn is_inf_and_is_nan_classify_each_element() {
    let x = [
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.0,
        -1.0,
        f32::MAX,
    ];
    let d = [6];
    let go = |op: &str, attrs| run(20, op, attrs, &[fin("x", &d, &x)], vec![], &["x"]).1;
    assert_eq!(go("IsInf", vec![]), [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(
        go("IsInf", vec![ai("detect_negative", 0)]),
        [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(
        go("IsInf", vec![ai("detect_positive", 0)]),
        [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(
        go(
            "IsInf",
            vec![ai("detect_positive", 0), ai("detect_negative", 0)]
        ),
        [0.0; 6]
    );
    assert_eq!(go("IsNaN", vec![]), [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn shrink_imports_at_its_only_opset() {
    let x = [-3.0, -1.5, -1.0, 0.0, 1.0, 1.5, 3.0];
    let (_, y) = run(
        9,
        "Shrink",
        vec![af("lambd", 1.0), af("bias", 0.5)],
        &[fin("x", &[7], &x)],
        vec![],
        &["x"],
    );
    // Below -1: x + 0.5; above 1: x - 0.5; else 0 (the bounds themselves included).
    assert_eq!(y, [-2.5, -1.0, 0.0, 0.0, 0.0, 1.0, 2.5]);
}

#[test]
fn eye_like_and_one_hot_build_their_patterns() {
    let (s, y) = run(
        22,
        "EyeLike",
        vec![ai("k", 1)],
        &[fin("x", &[3, 4], &[0.0; 12])],
        vec![],
        &["x"],
    );
    assert_eq!(s, [3, 4]);
    let mut want = vec![0.0; 12];
    for i in 0..3 {
        want[i * 4 + i + 1] = 1.0;
    }
    assert_eq!(y, want);
    // Indices as floats (truncated), a negative one counting from depth, one out of range.
    let (s, y) = run(
        11,
        "OneHot",
        vec![ai("axis", 0)],
        &[fin("x", &[3], &[2.0, -1.0, 7.0])],
        vec![
            tf32("depth", &[], &[4.0]),
            tf32("values", &[2], &[-1.0, 5.0]),
        ],
        &["x", "depth", "values"],
    );
    assert_eq!(s, [4, 3]);
    // Column j is the one-hot row of index j (axis 0 puts depth first).
    let want = [
        -1.0, -1.0, -1.0, //
        -1.0, -1.0, -1.0, //
        5.0, -1.0, -1.0, //
        -1.0, 5.0, -1.0,
    ];
    assert_eq!(y, want);
}

#[test]
fn expand_broadcasts_to_the_constant_shape() {
    let (s, y) = run(
        13,
        "Expand",
        vec![],
        &[fin("x", &[3, 1], &[1.0, 2.0, 3.0])],
        vec![ti64("shape", &[3], &[2, 1, 4])],
        &["x", "shape"],
    );
    assert_eq!(s, [2, 3, 4]);
    let row: Vec<f64> = [1.0, 2.0, 3.0].iter().flat_map(|&v| [v; 4]).collect();
    assert_eq!(y, [row.clone(), row].concat());
    let e = refused(
        13,
        "Expand",
        vec![],
        &[3, 2],
        vec![ti64("s", &[1], &[4])],
        &["x", "s"],
    );
    assert!(e.contains("does not broadcast"), "{e}");
}

#[test]
fn lp_pool_is_the_p_norm_of_each_window() {
    // 1x1x3x3, a 2x2 window, stride 1, padding 1 on the bottom and right, p = 3.
    let x: Vec<f32> = vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0, 9.0];
    let (s, y) = run(
        22,
        "LpPool",
        vec![
            ais("kernel_shape", &[2, 2]),
            ai("p", 3),
            ais("pads", &[0, 0, 1, 1]),
        ],
        &[fin("x", &[1, 1, 3, 3], &x)],
        vec![],
        &["x"],
    );
    assert_eq!(s, [1, 1, 3, 3]);
    let at = |r: i64, c: i64| {
        if (0..3).contains(&r) && (0..3).contains(&c) {
            (x[(r * 3 + c) as usize] as f64).abs().powi(3)
        } else {
            0.0
        }
    };
    let want: Vec<f64> = (0..3)
        .flat_map(|r| (0..3).map(move |c| (r, c)))
        .map(|(r, c)| (at(r, c) + at(r, c + 1) + at(r + 1, c) + at(r + 1, c + 1)).powf(1.0 / 3.0))
        .collect();
    assert_close(&y, &want, "LpPool p=3");
}

#[test]
fn trilu_on_integers_keeps_its_triangle() {
    let x: Vec<i64> = (1..=12).collect();
    let (s, y) = run(
        14,
        "Trilu",
        vec![ai("upper", 0)],
        &[iin("x", &[3, 4], &x)],
        vec![ti64("k", &[], &[-1])],
        &["x", "k"],
    );
    assert_eq!(s, [3, 4]);
    assert_eq!(
        y,
        [0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 9.0, 10.0, 0.0, 0.0]
    );
}

/// Data with an infinity and a NaN where no index points: a selection that multiplied or
/// added them would show it.
fn poisoned() -> Vec<f32> {
    vec![1.0, 2.0, f32::INFINITY, 4.0, -5.0, f32::NAN, 7.0, -0.5, 9.0]
}

#[test]
fn gathers_with_constant_indices_select_exactly() {
    let x = poisoned();
    let d = [3, 3];
    // Gather rows 2 and -3 (= 0), as a 2x1 index: output 2x1x3.
    let (s, y) = run(
        13,
        "Gather",
        vec![ai("axis", 0)],
        &[fin("x", &d, &x)],
        vec![ti64("i", &[2, 1], &[2, -3])],
        &["x", "i"],
    );
    assert_eq!(s, [2, 1, 3]);
    assert_eq!(y, [7.0, -0.5, 9.0, 1.0, 2.0, f64::INFINITY]);
    // Gather column 1 with a scalar index: rank drops.
    let (s, y) = run(
        13,
        "Gather",
        vec![ai("axis", 1)],
        &[fin("x", &d, &x)],
        vec![ti64("i", &[], &[1])],
        &["x", "i"],
    );
    assert_eq!(s, [3]);
    assert_eq!(y, [2.0, -5.0, -0.5]);
    // GatherElements along axis 1 with fewer rows than the data.
    let (s, y) = run(
        13,
        "GatherElements",
        vec![ai("axis", 1)],
        &[fin("x", &d, &x)],
        vec![ti64("i", &[2, 2], &[0, 0, 1, -3])],
        &["x", "i"],
    );
    assert_eq!(s, [2, 2]);
    assert_eq!(y, [1.0, 1.0, -5.0, 4.0]);
    // GatherND: element (2, 1) and row 0.
    let (s, y) = run(
        13,
        "GatherND",
        vec![],
        &[fin("x", &d, &x)],
        vec![ti64("i", &[2, 2], &[2, 1, 0, 0])],
        &["x", "i"],
    );
    assert_eq!(s, [2]);
    assert_eq!(y, [-0.5, 1.0]);
    let (s, y) = run(
        13,
        "GatherND",
        vec![],
        &[fin("x", &d, &x)],
        vec![ti64("i", &[1, 1], &[0])],
        &["x", "i"],
    );
    assert_eq!(s, [1, 3]);
    assert_close(&y, &[1.0, 2.0, f64::INFINITY], "GatherND row");
}

#[test]
fn scatters_with_constant_updates_fold_their_reduction() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let d = [2, 3];
    let idx = || ti64("i", &[2, 2], &[1, 1, 0, 2]);
    let upd = || tf32("u", &[2, 2], &[10.0, 20.0, -1.0, 7.0]);
    let go = |opset, op: &str, attrs| {
        run(
            opset,
            op,
            attrs,
            &[fin("x", &d, &x)],
            vec![idx(), upd()],
            &["x", "i", "u"],
        )
        .1
    };
    // Row 0 gets 10 then 20 at column 1 (the last one stays); row 1 gets -1 at 0 and 7 at 2.
    assert_eq!(
        go(18, "ScatterElements", vec![ai("axis", 1)]),
        [1.0, 20.0, 3.0, -1.0, 5.0, 7.0]
    );
    assert_eq!(
        go(
            18,
            "ScatterElements",
            vec![ai("axis", 1), as_("reduction", "add")]
        ),
        [1.0, 32.0, 3.0, 3.0, 5.0, 13.0]
    );
    assert_eq!(
        go(
            18,
            "ScatterElements",
            vec![ai("axis", 1), as_("reduction", "max")]
        ),
        [1.0, 20.0, 3.0, 4.0, 5.0, 7.0]
    );
    assert_eq!(
        go(
            18,
            "ScatterElements",
            vec![ai("axis", 1), as_("reduction", "mul")]
        ),
        [1.0, 400.0, 3.0, -4.0, 5.0, 42.0]
    );
    // Scatter, opset 9's name for it.
    assert_eq!(
        go(9, "Scatter", vec![ai("axis", 1)]),
        [1.0, 20.0, 3.0, -1.0, 5.0, 7.0]
    );
    // ScatterND: row 1 replaced, then element (0, 0) minimised.
    let (_, y) = run(
        18,
        "ScatterND",
        vec![],
        &[fin("x", &d, &x)],
        vec![
            ti64("i", &[1, 1], &[1]),
            tf32("u", &[1, 3], &[9.0, 8.0, 7.0]),
        ],
        &["x", "i", "u"],
    );
    assert_eq!(y, [1.0, 2.0, 3.0, 9.0, 8.0, 7.0]);
    let (_, y) = run(
        18,
        "ScatterND",
        vec![as_("reduction", "min")],
        &[fin("x", &d, &x)],
        vec![ti64("i", &[1, 2], &[0, 0]), tf32("u", &[1], &[-3.0])],
        &["x", "i", "u"],
    );
    assert_eq!(y, [-3.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn what_the_index_compositions_cannot_express_is_refused() {
    // Indices computed at run time.
    let e = error(&model(
        13,
        vec![
            input("x", &[3]),
            input_sym("i", &[D::N(2)], DataType::Int64),
        ],
        &["y"],
        vec![],
        vec![node("GatherElements", &["x", "i"], &["y"], vec![])],
    ));
    assert!(e.contains("indices (input 1) must be a constant"), "{e}");
    // An index out of range.
    let e = refused(
        13,
        "Gather",
        vec![],
        &[3],
        vec![ti64("i", &[1], &[3])],
        &["x", "i"],
    );
    assert!(
        e.contains("index 3 is out of range for an axis of 3"),
        "{e}"
    );
    // A selection mask past the limit.
    let e = refused(
        13,
        "Gather",
        vec![],
        &[4096],
        vec![ti64("i", &[2048], &[0; 2048])],
        &["x", "i"],
    );
    assert!(e.contains("selection mask"), "{e}");
    // Updates computed at run time.
    let e = error(&model(
        18,
        vec![input("x", &[3]), input("u", &[1])],
        &["y"],
        vec![ti64("i", &[1], &[0])],
        vec![node("ScatterElements", &["x", "i", "u"], &["y"], vec![])],
    ));
    assert!(e.contains("updates (input 2) must be a constant"), "{e}");
    let e = refused(
        22,
        "LpPool",
        vec![ais("kernel_shape", &[2, 2, 2])],
        &[1, 1, 2, 2, 2],
        vec![],
        &["x"],
    );
    assert!(e.contains("rank 3 or 4"), "{e}");
}

#[test]
fn compress_reverse_sequence_and_max_unpool_move_elements() {
    let x = poisoned();
    let d = [3, 3];
    // Compress rows 0 and 2 (the condition shorter than the axis drops the rest).
    let cond = || TensorProto {
        name: Some("c".into()),
        dims: vec![2],
        data_type: Some(DataType::Bool as i32),
        int32_data: vec![1, 0],
        ..Default::default()
    };
    let (s, y) = run(
        11,
        "Compress",
        vec![ai("axis", 1)],
        &[fin("x", &d, &x)],
        vec![cond()],
        &["x", "c"],
    );
    assert_eq!(s, [3, 1]);
    assert_eq!(y, [1.0, 4.0, 7.0]);
    // Without an axis: the flattened elements 0 (only).
    let (s, y) = run(
        11,
        "Compress",
        vec![],
        &[fin("x", &d, &x)],
        vec![cond()],
        &["x", "c"],
    );
    assert_eq!(s, [1]);
    assert_eq!(y, [1.0]);
    // ReverseSequence (opset 10), batch along axis 0: row 0 reversed over 3, row 1 over 2,
    // row 2 over 1 (unchanged).
    let (_, y) = run(
        10,
        "ReverseSequence",
        vec![ai("batch_axis", 0), ai("time_axis", 1)],
        &[fin("x", &d, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])],
        vec![ti64("l", &[3], &[3, 2, 1])],
        &["x", "l"],
    );
    assert_eq!(y, [3.0, 2.0, 1.0, 5.0, 4.0, 6.0, 7.0, 8.0, 9.0]);
    // MaxUnpool of a 2x2 map by a 2x2 window, stride 2, into a 5x5 output_shape.
    let (s, y) = run(
        22,
        "MaxUnpool",
        vec![ais("kernel_shape", &[2, 2]), ais("strides", &[2, 2])],
        &[fin("x", &[1, 1, 2, 2], &[f32::INFINITY, 2.0, 3.0, 4.0])],
        vec![
            ti64("i", &[1, 1, 2, 2], &[5, 3, 8, 15]),
            ti64("o", &[4], &[1, 1, 5, 5]),
        ],
        &["x", "i", "o"],
    );
    assert_eq!(s, [1, 1, 5, 5]);
    let mut want = vec![0.0; 25];
    // Flat indices into the 4x4 unpooled map, placed at the 5x5 output's top left.
    for (i, v) in [(5, f64::INFINITY), (3, 2.0), (8, 3.0), (15, 4.0)] {
        want[(i / 4) * 5 + i % 4] = v;
    }
    assert_eq!(y, want);
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn recurrent_cells_unroll_over_the_sequence() {
    // One input, one hidden unit, three steps, batch 1: the cells' equations written out.
    let xs = [0.5f32, -1.0, 2.0];
    let d = [3, 1, 1];
    let go = |op: &str, w: &[f32], r: &[f32], b: &[f32], g: i64, attrs| {
        let inits = vec![
            tf32("W", &[1, g, 1], w),
            tf32("R", &[1, g, 1], r),
            tf32("B", &[1, 2 * g], b),
        ];
        let m = model(
            22,
            vec![input("x", &d)],
            &["Y", "Y_h"],
            inits,
            vec![node(op, &["x", "W", "R", "B"], &["Y", "Y_h"], attrs)],
        );
        let imp = import(&m).unwrap_or_else(|e| panic!("{op}: {e}"));
        let st = imp.weights.to_safetensors().unwrap();
        let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
        let x = tir_interp::Tensor::f32(vec![3, 1, 1], xs.to_vec()).unwrap();
        let got = tir_interp::run(&imp.module, &weights, &[x]).unwrap();
        assert_eq!(got[0].shape(), [3, 1, 1, 1]);
        assert_eq!(got[1].shape(), [1, 1, 1]);
        (got[0].to_f64(), got[1].to_f64())
    };
    let (y, yh) = go(
        "RNN",
        &[0.7],
        &[-0.4],
        &[0.1, 0.2],
        1,
        vec![ai("hidden_size", 1)],
    );
    let mut h = 0.0f64;
    let mut want = vec![];
    for &x in &xs {
        h = (0.7 * x as f64 + -0.4 * h + 0.3).tanh();
        want.push(h);
    }
    assert_close(&y, &want, "RNN Y");
    assert_close(&yh, &want[2..], "RNN Y_h");
    // GRU, gates z, r, h.
    let (w, r, b) = (
        [0.5f32, -0.3, 0.8],
        [0.2f32, 0.6, -0.5],
        [0.1f32, 0.0, -0.2, 0.05, 0.3, 0.1],
    );
    let (y, _) = go("GRU", &w, &r, &b, 3, vec![ai("hidden_size", 1)]);
    let f = |v: f32| v as f64;
    let mut h = 0.0f64;
    let mut want = vec![];
    for &x in &xs {
        let x = x as f64;
        let z = sigmoid(f(w[0]) * x + f(r[0]) * h + f(b[0]) + f(b[3]));
        let rg = sigmoid(f(w[1]) * x + f(r[1]) * h + f(b[1]) + f(b[4]));
        let c = (f(w[2]) * x + f(r[2]) * (rg * h) + f(b[2]) + f(b[5])).tanh();
        h = (1.0 - z) * c + z * h;
        want.push(h);
    }
    assert_close(&y, &want, "GRU Y");
    // LSTM, gates i, o, f, c.
    let (w, r) = ([0.5f32, -0.3, 0.8, 0.4], [0.2f32, 0.6, -0.5, 0.3]);
    let b = [0.1f32, 0.0, -0.2, 0.05, 0.3, 0.1, 0.0, -0.1];
    let (y, _) = go("LSTM", &w, &r, &b, 4, vec![ai("hidden_size", 1)]);
    let (mut h, mut c) = (0.0f64, 0.0f64);
    let mut want = vec![];
    for &x in &xs {
        let x = x as f64;
        let gate = |k: usize| f(w[k]) * x + f(r[k]) * h + f(b[k]) + f(b[4 + k]);
        let (i, o, fg, cc) = (
            sigmoid(gate(0)),
            sigmoid(gate(1)),
            sigmoid(gate(2)),
            gate(3).tanh(),
        );
        c = fg * c + i * cc;
        h = o * c.tanh();
        want.push(h);
    }
    assert_close(&y, &want, "LSTM Y");
    let e = error(&model(
        22,
        vec![input("x", &d)],
        &["Y"],
        vec![
            tf32("W", &[2, 1, 1], &[1.0, 1.0]),
            tf32("R", &[2, 1, 1], &[1.0, 1.0]),
        ],
        vec![node(
            "RNN",
            &["x", "W", "R"],
            &["Y"],
            vec![ai("hidden_size", 1), as_("direction", "bidirectional")],
        )],
    ));
    assert!(
        e.contains("direction `bidirectional` is not supported"),
        "{e}"
    );
}
