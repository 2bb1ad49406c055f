//! Malformed and hostile models: every one is refused with a diagnostic that names what is at
//! fault, never an "internal error" or a panic; strings from the model are shown escaped and
//! shortened.

mod common;
use common::*;
use tir_onnx::proto::ModelProto;
use tir_onnx::{ImportError, InputError, NodeError, Oversized, TensorError};

fn relu_of(x: tir_onnx::proto::ValueInfoProto) -> ModelProto {
    model(
        13,
        vec![x],
        &["y"],
        vec![],
        vec![node("Relu", &["x"], &["y"], vec![])],
    )
}

fn import_error(m: &ModelProto) -> ImportError {
    match import(m) {
        Ok(imp) => panic!("expected an error, got:\n{}", tir_ir::print(&imp.module)),
        Err(e) => e,
    }
}

/// No control character (NUL, ESC, newline...) survives into a message.
fn assert_printable(msg: &str) {
    assert!(
        !msg.chars().any(char::is_control),
        "raw control character in {msg:?}"
    );
}

#[test]
fn input_dim_of_2_pow_40_names_the_input_and_dimension() {
    let e = import_error(&relu_of(input("x", &[1, 1 << 40])));
    assert!(
        matches!(
            &e,
            ImportError::Input {
                name,
                problem: InputError::Oversized(Oversized { axis: 1, dim, .. }),
            } if name == "x" && *dim == 1 << 40
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "graph input `x`: dimension 1 (1099511627776) of tensor<1x1099511627776xf32> is too \
         large: the dimensions of an imported tensor times its element size may multiply to at \
         most 1099511627776 (1 TiB)"
    );
}

#[test]
fn input_dim_of_i64_max_is_not_an_internal_error() {
    let e = import_error(&relu_of(input("x", &[1, i64::MAX])));
    let msg = e.to_string();
    assert!(!msg.contains("internal error"), "{msg}");
    assert!(
        msg.starts_with("graph input `x`: dimension 1 (9223372036854775807)"),
        "{msg}"
    );
}

#[test]
fn node_result_too_large_names_the_node_and_output() {
    // Resize to a height of 2^40: every operand is small, the result is not.
    let m = model(
        13,
        vec![input("x", &[1, 1, 2, 2])],
        &["y"],
        vec![ti64("s", &[4], &[1, 1, 1 << 40, 2])],
        vec![node("Resize", &["x", "", "", "s"], &["y"], vec![])],
    );
    let e = import_error(&m);
    match &e {
        ImportError::Node {
            index: 0, problem, ..
        } => assert!(
            matches!(
                &**problem,
                NodeError::Oversized { output, problem: Oversized { axis: 2, .. } } if output == "y"
            ),
            "{problem:?}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string()
            .starts_with("node 0 `Resize_y` (Resize): output `y`: dimension 2 (1099511627776)"),
        "{e}"
    );
}

#[test]
fn pad_past_64_bit_sizes_is_a_node_error() {
    let m = model(
        13,
        vec![input("x", &[1, 1, 2, 2])],
        &["y"],
        vec![ti64("p", &[8], &[0, 0, i64::MAX / 2, 0, 0, 0, 0, 0])],
        vec![node("Pad", &["x", "p"], &["y"], vec![])],
    );
    let e = import_error(&m);
    assert!(matches!(e, ImportError::Node { index: 0, .. }), "{e:?}");
    assert!(!e.to_string().contains("internal error"), "{e}");
}

/// An empty constant has no data to give its size away: its dimensions are bounded all the
/// same, since folding computes strides from them.
#[test]
fn empty_initializer_with_huge_dims_is_refused() {
    let m = model(
        13,
        vec![input("x", &[1, 4])],
        &["y"],
        vec![tf32("k", &[0, 1 << 40, 1 << 40], &[])],
        vec![node("Transpose", &["k"], &["y"], vec![])],
    );
    let e = import_error(&m);
    assert!(
        matches!(
            &e,
            ImportError::Initializer { name, problem: TensorError::Oversized(Oversized { axis: 1, .. }) }
                if name == "k"
        ),
        "{e:?}"
    );
}

#[test]
fn transpose_of_a_constant_with_a_bad_perm_is_a_node_error() {
    let m = model(
        13,
        vec![input("x", &[1, 4])],
        &["y"],
        vec![tseq("k", &[2, 3])],
        vec![node(
            "Transpose",
            &["k"],
            &["y"],
            vec![ais("perm", &[7, 0])],
        )],
    );
    assert_eq!(
        error(&m),
        "node 0 `Transpose_y` (Transpose): perm [7, 0] is not a permutation of 0..2"
    );
}

#[test]
fn node_and_value_names_are_escaped() {
    let mut m = model(
        13,
        vec![input("x", &[1, 4])],
        &["y"],
        vec![],
        vec![node("Relu", &["no\0where\n\u{1b}[31m"], &["y"], vec![])],
    );
    m.graph.as_mut().unwrap().node[0].name = Some("bad\0node\r".into());
    let msg = error(&m);
    assert_printable(&msg);
    assert_eq!(
        msg,
        "node 0 `bad\\0node\\r` (Relu): input `no\\0where\\n\\u{1b}[31m` is not defined by any \
         earlier node, initializer or graph input"
    );
}

#[test]
fn op_type_and_domain_are_escaped() {
    let mut m = relu_of(input("x", &[1, 4]));
    let n = &mut m.graph.as_mut().unwrap().node[0];
    n.op_type = Some("Re\0lu".into());
    let unsupported = error(&m);
    assert_printable(&unsupported);
    assert!(
        unsupported.ends_with("(Re\\0lu): the IR has no `Re\\0lu` op (not supported)"),
        "{unsupported}"
    );

    let mut m = relu_of(input("x", &[1, 4]));
    m.graph.as_mut().unwrap().node[0].domain = Some("com.\u{7}evil".into());
    let domain = error(&m);
    assert_printable(&domain);
    assert!(domain.contains("domain `com.\\u{7}evil`"), "{domain}");
}

#[test]
fn attribute_strings_are_escaped() {
    let m = model(
        13,
        vec![input("x", &[1, 2, 4, 4])],
        &["y"],
        vec![ti64("p", &[8], &[0; 8])],
        vec![node(
            "Pad",
            &["x", "p"],
            &["y"],
            vec![as_("mode", "wr\0ap\n")],
        )],
    );
    assert_eq!(
        error(&m),
        "node 0 `Pad_y` (Pad): pad mode \"wr\\0ap\\n\" is not supported"
    );
}

#[test]
fn graph_input_and_symbolic_dim_names_are_escaped() {
    let m = model(
        13,
        vec![input_sym(
            "x\u{1b}",
            &[D::N(1), D::S("ch\0")],
            tir_onnx::proto::tensor_proto::DataType::Float,
        )],
        &["y"],
        vec![],
        vec![node("Relu", &["x\u{1b}"], &["y"], vec![])],
    );
    let msg = error(&m);
    assert_printable(&msg);
    assert_eq!(
        msg,
        "graph input `x\\u{1b}`: dimension 1 is symbolic (`ch\\0`); give it a value with --dim ch\\0=N"
    );
}

#[test]
fn long_names_are_shortened_keeping_head_and_tail() {
    let long = format!("head{}tail", "m".repeat(100_000));
    let m = model(
        13,
        vec![input("x", &[1, 4])],
        &["y"],
        vec![],
        vec![node("Relu", &[long.as_str()], &["y"], vec![])],
    );
    let msg = error(&m);
    let shown = msg
        .split('`')
        .nth(3)
        .unwrap_or_else(|| panic!("no quoted input name in {msg}"));
    assert!(shown.starts_with("headmmm"), "{shown}");
    assert!(shown.ends_with("mmmtail"), "{shown}");
    assert!(shown.contains("..."), "{shown}");
    assert!(
        shown.chars().count() <= tir_onnx::error::MAX_SHOWN,
        "{shown}"
    );
}

/// Escapes are kept whole when a long name is shortened.
#[test]
fn shortening_never_splits_an_escape() {
    let long = "\u{1b}".repeat(1000);
    let shown = tir_onnx::error::shown(&long).to_string();
    assert!(
        shown.chars().count() <= tir_onnx::error::MAX_SHOWN,
        "{shown}"
    );
    let (head, tail) = shown.split_once("...").expect("shortened");
    for part in [head, tail] {
        assert_eq!(part.replace("\\u{1b}", ""), "", "{shown}");
    }
}

#[test]
fn cast_to_a_type_code_past_i32_is_unknown_not_truncated() {
    // 2^32 + 1 truncated to i32 is 1, FLOAT: the Cast would silently become an identity.
    let m = model(
        13,
        vec![input("x", &[1, 4])],
        &["y"],
        vec![],
        vec![node("Cast", &["x"], &["y"], vec![ai("to", (1 << 32) + 1)])],
    );
    assert_eq!(
        error(&m),
        "node 0 `Cast_y` (Cast): unknown ONNX element type 4294967297"
    );
}

#[test]
fn producer_with_a_newline_keeps_the_text_parseable() {
    let mut m = relu_of(input("x", &[1, 4]));
    m.producer_name = Some("evil\n}\nmodule @x {".into());
    // `text` checks that the printed module parses and verifies again.
    let t = text(&m);
    assert!(
        t.starts_with("// Imported from ONNX by `tirc import` (opset 13, produced by evil\\n}\\nmodule @x {).\n"),
        "{t}"
    );
}

#[test]
fn undefined_graph_output_names_it() {
    let m = model(
        13,
        vec![input("x", &[1, 4])],
        &["nowhere\0"],
        vec![],
        vec![node("Relu", &["x"], &["y"], vec![])],
    );
    assert_eq!(
        error(&m),
        "graph output `nowhere\\0` is not defined by any node, initializer or graph input"
    );
}

/// An erf-GELU whose `x` is computed by a later node (an unsorted graph) is left to the node
/// walk, which names the Erf node, instead of a model-level message naming no node.
#[test]
fn unsorted_erf_gelu_names_the_node() {
    let m = model(
        13,
        vec![input("in", &[1, 4])],
        &["y"],
        vec![
            tf32("sqrt2", &[], &[std::f32::consts::SQRT_2]),
            tf32("one", &[], &[1.0]),
            tf32("half", &[], &[0.5]),
        ],
        vec![
            node("Erf", &["d"], &["e"], vec![]),
            node("Add", &["e", "one"], &["a"], vec![]),
            node("Mul", &["x", "a"], &["m"], vec![]),
            node("Mul", &["m", "half"], &["y"], vec![]),
            node("Relu", &["in"], &["x"], vec![]),
            node("Div", &["x", "sqrt2"], &["d"], vec![]),
        ],
    );
    assert_eq!(
        error(&m),
        "node 0 `Erf_e` (Erf): input `d` is not defined by any earlier node, initializer or graph input"
    );
}
