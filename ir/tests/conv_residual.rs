//! `conv2d`'s fourth operand, the residual (a ResNet block's skip add fused into its last
//! convolution): the text form prints back as parsed, and the verifier refuses a residual
//! whose type is not the result's, or one without a bias before it, at the operand's place.

use tir_ir::diag::render;
use tir_ir::{parse_and_verify, print};

const FUSED: &str = "module @m {
  func @main(%x: tensor<1x8x5x5xf32>, %s: tensor<1x4x5x5xf32>) {
    %w = const {name = \"w\"} : tensor<4x8x3x3xf32>
    %b = const {name = \"b\"} : tensor<4xf32>
    %y = conv2d(%x, %w, %b, %s) {pads = [1, 1, 1, 1], activation = relu} : tensor<1x4x5x5xf32>
    return %y
  }
}
";

#[test]
fn a_residual_conv_prints_back_as_parsed() {
    let m = parse_and_verify(FUSED).unwrap_or_else(|d| panic!("{}", render("f.tir", FUSED, &d)));
    let f = m.entry().expect("entry");
    let (_, conv) = f
        .ops_in_order()
        .find(|(_, o)| o.op.name() == "conv2d")
        .expect("the conv");
    assert_eq!(conv.operands.len(), 4);
    let text = print(&m);
    assert!(
        text.contains("conv2d(%x, %w, %b, %s) {pads = [1, 1, 1, 1], activation = relu}"),
        "{text}"
    );
    let again = parse_and_verify(&text).expect("reparses");
    assert_eq!(print(&again), text);
}

#[test]
fn a_bad_residual_is_refused_where_it_is_written() {
    let cases = [
        // Another shape (the input's channels, not the result's).
        FUSED.replace("%s: tensor<1x4x5x5xf32>", "%s: tensor<1x8x5x5xf32>"),
        // A broadcastable but different shape: the kernels read it at the output's index.
        FUSED.replace("%s: tensor<1x4x5x5xf32>", "%s: tensor<1x4x1x5xf32>"),
        // Another rank.
        FUSED.replace("%s: tensor<1x4x5x5xf32>", "%s: tensor<4x5x5xf32>"),
        // Another element type.
        FUSED.replace("%s: tensor<1x4x5x5xf32>", "%s: tensor<1x4x5x5xi32>"),
        // Without a bias the third operand is the bias, and a [1, 4, 5, 5] bias is refused.
        FUSED.replace("%w, %b, %s)", "%w, %s)"),
        // Five operands.
        FUSED.replace("%w, %b, %s)", "%w, %b, %s, %s)"),
    ];
    let mut out = String::new();
    for c in &cases {
        let ds = parse_and_verify(c).expect_err(c);
        let conv_line = c.lines().find(|l| l.contains("conv2d")).expect("conv line");
        out.push_str(&format!(
            "{}\n{}\n",
            conv_line.trim(),
            render("f.tir", c, &ds)
        ));
    }
    insta::assert_snapshot!(out);
}
