//! Import keeping symbolic dims (`ImportOptions::keep_symbols`, what `tirc import` does): input
//! dims become symbols, shape subgraphs fold to dim expressions (a reshape target to sizes
//! written in the dims), and what the IR cannot state for every shape is refused naming the
//! node.

mod common;
use common::*;
use tir_onnx::proto::tensor_proto::DataType;
use tir_onnx::proto::ModelProto;
use tir_onnx::ImportOptions;

fn keep() -> ImportOptions {
    ImportOptions {
        keep_symbols: true,
        ..Default::default()
    }
}

/// The function's signature line of the imported text.
fn signature(m: &ModelProto, opts: &ImportOptions) -> String {
    let t = text_with(m, opts);
    t.lines()
        .find(|l| l.trim_start().starts_with("func @main"))
        .unwrap_or_else(|| panic!("no signature in\n{t}"))
        .trim()
        .to_string()
}

/// A conv and a nearest 2x upsampling on an input with a named batch, an unnamed `?` dim and
/// a `-1` dim.
fn conv_resize() -> ModelProto {
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
            tf32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
        ],
        vec![
            node(
                "Conv",
                &["x", "w"],
                &["c"],
                vec![ais("pads", &[1, 1, 1, 1])],
            ),
            node("Resize", &["c", "", "scales"], &["y"], vec![]),
        ],
    )
}

/// `x.view(x.size(0), -1)` as PyTorch exports it, on a symbolic batch.
fn batch_flatten() -> ModelProto {
    model(
        13,
        vec![input_sym(
            "x",
            &[D::S("batch"), D::N(2), D::N(3), D::N(3)],
            DataType::Float,
        )],
        &["y"],
        vec![
            ti64("zero", &[], &[0]),
            ti64("axes0", &[1], &[0]),
            ti64("minus1", &[1], &[-1]),
        ],
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["n"], vec![ai("axis", 0)]),
            node("Unsqueeze", &["n", "axes0"], &["n1"], vec![]),
            node("Concat", &["n1", "minus1"], &["t"], vec![ai("axis", 0)]),
            node("Reshape", &["x", "t"], &["f"], vec![]),
            node("Relu", &["f"], &["y"], vec![]),
        ],
    )
}

#[test]
fn input_dims_become_symbols() {
    let t = text_with(&conv_resize(), &keep());
    assert!(
        t.contains("func @main(%x: tensor<{batch}x2x{x.d2}x{x.d3}xf32>) -> tensor<{batch}x3x{2*x.d2}x{2*x.d3}xf32>"),
        "{t}"
    );
    assert!(t.contains("{scale = [2, 2]}"), "{t}");
    // The flatten's target folds to [batch, 18]: the batch becomes the IR's one `-1`.
    let t = text_with(&batch_flatten(), &keep());
    assert!(t.contains("-> tensor<{batch}x18xf32>"), "{t}");
    assert!(t.contains("reshape(%x) {shape = [-1, 18]}"), "{t}");
}

#[test]
fn dims_are_pinned_by_name_or_derived_name() {
    let m = conv_resize();
    let opts = ImportOptions {
        dims: vec![("x.d2".into(), 4), ("x.d3".into(), 5)],
        ..keep()
    };
    assert_eq!(
        signature(&m, &opts),
        "func @main(%x: tensor<{batch}x2x4x5xf32>) -> tensor<{batch}x3x8x10xf32> {"
    );
    let all = ImportOptions {
        dims: vec![("batch".into(), 2), ("x.d2".into(), 4), ("x.d3".into(), 5)],
        ..keep()
    };
    assert_eq!(
        signature(&m, &all),
        "func @main(%x: tensor<2x2x4x5xf32>) -> tensor<2x3x8x10xf32> {"
    );
}

#[test]
fn without_keep_symbols_the_old_rules_hold() {
    let m = conv_resize();
    assert_eq!(
        error(&m),
        "graph input `x`: dimension 2 is symbolic (`?`); give it a value with --dim ?=N"
    );
}

#[test]
fn dim_params_are_sanitised() {
    let m = model(
        13,
        vec![input_sym(
            "x",
            &[D::S("p2o.DynamicDimension.0"), D::S("seq len"), D::S("1st")],
            DataType::Float,
        )],
        &["y"],
        vec![],
        vec![node("Relu", &["x"], &["y"], vec![])],
    );
    assert_eq!(
        signature(&m, &keep()),
        "func @main(%x: tensor<{p2o.DynamicDimension.0}x{seq_len}x{_1st}xf32>) -> tensor<{p2o.DynamicDimension.0}x{seq_len}x{_1st}xf32> {"
    );
}

#[test]
fn a_target_with_several_symbolic_entries_writes_them_in_the_dims() {
    // A transpose-like reshape to [w, n, 2]: the IR's reshape infers one entry (`-1`, here
    // `n`, which `n*w*2 / (2*w)` gives exactly) and names the others (`{w}`).
    let two = model(
        13,
        vec![input_sym(
            "x",
            &[D::S("n"), D::S("w"), D::N(2)],
            DataType::Float,
        )],
        &["y"],
        vec![ti64("i", &[2], &[1, 0]), ti64("two", &[1], &[2])],
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "i"], &["wn"], vec![ai("axis", 0)]),
            node("Concat", &["wn", "two"], &["t"], vec![ai("axis", 0)]),
            node("Reshape", &["x", "t"], &["y"], vec![]),
        ],
    );
    let t = text_with(&two, &keep());
    assert!(t.contains("reshape(%x) {shape = [{w}, -1, 2]}"), "{t}");
    assert!(t.contains("-> tensor<{w}x{n}x2xf32>"), "{t}");
}

#[test]
fn refusals_name_the_node_and_the_shape() {
    // A resize to fixed sizes from a symbolic extent.
    let sizes = model(
        13,
        vec![input_sym(
            "x",
            &[D::N(1), D::N(1), D::S("h"), D::N(4)],
            DataType::Float,
        )],
        &["y"],
        vec![ti64("sizes", &[4], &[1, 1, 8, 8])],
        vec![node("Resize", &["x", "", "", "sizes"], &["y"], vec![])],
    );
    assert_eq!(
        import_with(&sizes, &keep()).unwrap_err().to_string(),
        "node 0 `Resize_y` (Resize): Resize (other than by whole-number scales) needs a static \
         shape, but the input's shape is [1, 1, {h}, 4]; give its dims values with --dim NAME=N"
    );
    // A symbolic shape used as a tensor.
    let as_tensor = model(
        13,
        vec![input_sym("x", &[D::S("n"), D::N(3)], DataType::Float)],
        &["y"],
        vec![],
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Relu", &["s"], &["y"], vec![]),
        ],
    );
    let e = import_with(&as_tensor, &keep()).unwrap_err().to_string();
    assert!(e.contains("is a shape computed from symbolic dims"), "{e}");
}
