//! `conv2d` with a fused PReLU (`activation = prelu`, the slope its last operand, after the
//! bias and the residual): the text form prints back as parsed, with and without a
//! residual, for every slope spelling; the verifier refuses a slope that is not one value per
//! output channel nor a single value, and a fused PReLU without a bias, at the operand's
//! place.

use tir_ir::diag::render;
use tir_ir::{parse_and_verify, print};

const FUSED: &str = "module @m {
  func @main(%x: tensor<1x8x5x5xf32>, %s: tensor<1x4x5x5xf32>) {
    %w = const {name = \"w\"} : tensor<4x8x3x3xf32>
    %b = const {name = \"b\"} : tensor<4xf32>
    %a = const {name = \"a\"} : tensor<4xf32>
    %y = conv2d(%x, %w, %b, %s, %a) {pads = [1, 1, 1, 1], activation = prelu} : tensor<1x4x5x5xf32>
    return %y
  }
}
";

fn reparses(text: &str, operands: usize, conv: &str) {
    let m = parse_and_verify(text).unwrap_or_else(|d| panic!("{}", render("f.tir", text, &d)));
    let f = m.entry().expect("entry");
    let (_, op) = f
        .ops_in_order()
        .find(|(_, o)| o.op.name() == "conv2d")
        .expect("the conv");
    assert_eq!(op.operands.len(), operands);
    let printed = print(&m);
    assert!(printed.contains(conv), "{printed}");
    let again = parse_and_verify(&printed).expect("reparses");
    assert_eq!(print(&again), printed);
}

#[test]
fn a_prelu_conv_prints_back_as_parsed() {
    reparses(
        FUSED,
        5,
        "conv2d(%x, %w, %b, %s, %a) {pads = [1, 1, 1, 1], activation = prelu}",
    );
    // Without the residual the slope is the fourth operand.
    let plain = FUSED.replace("%b, %s, %a)", "%b, %a)");
    reparses(
        &plain,
        4,
        "conv2d(%x, %w, %b, %a) {pads = [1, 1, 1, 1], activation = prelu}",
    );
    for a in ["4x1x1", "1x4x1x1", "1", "1x1x1"] {
        let t = FUSED.replace(
            "%a = const {name = \"a\"} : tensor<4xf32>",
            &format!("%a = const {{name = \"a\"}} : tensor<{a}xf32>"),
        );
        reparses(&t, 5, "activation = prelu");
    }
}

#[test]
fn a_bad_slope_is_refused_where_it_is_written() {
    let slope = |a: &str| {
        FUSED.replace(
            "%a = const {name = \"a\"} : tensor<4xf32>",
            &format!("%a = const {{name = \"a\"}} : tensor<{a}>"),
        )
    };
    let cases = [
        // The input's channel count, not the result's.
        slope("8xf32"),
        // Per column, as an unfused prelu's `[W]` slope would broadcast.
        slope("1x5xf32"),
        // The channel on the wrong axis of a rank-4 slope.
        slope("4x1x1x1xf32"),
        // Per element.
        slope("1x4x5x5xf32"),
        // Another element type.
        slope("4xi32"),
        // No bias before the slope: three operands is below the fused PReLU's arity.
        FUSED.replace("%w, %b, %s, %a)", "%w, %a)"),
        // Six operands.
        FUSED.replace("%b, %s, %a)", "%b, %s, %s, %a)"),
        // Not an activation.
        FUSED.replace("activation = prelu", "activation = leaky"),
    ];
    let mut out = String::new();
    for c in &cases {
        let ds = parse_and_verify(c).expect_err(c);
        let conv_line = c.lines().find(|l| l.contains("conv2d")).expect("conv line");
        let r = render("f.tir", c, &ds);
        assert!(r.contains("f.tir:"), "{r}");
        out.push_str(&format!("{}\n{}\n", conv_line.trim(), r));
    }
    insta::assert_snapshot!(out);
}
