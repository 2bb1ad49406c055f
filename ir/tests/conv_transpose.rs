//! `conv_transpose`: the shape rule against sizes worked out by hand from the ONNX
//! ConvTranspose definition, its refusals (both disagreeing values named), and the text form.

use tir_ir::op::ConvTranspose;
use tir_ir::shape::infer;
use tir_ir::{Op, TensorType};

fn t(shape: &[u64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn infer_one(c: ConvTranspose, ins: &[TensorType]) -> Result<Vec<u64>, String> {
    let refs: Vec<&TensorType> = ins.iter().collect();
    infer(&Op::ConvTranspose(c), &refs)
        .map(|mut r| r.remove(0).shape)
        .map_err(|e| e.message)
}

#[test]
fn output_size_follows_onnx() {
    // The 2× upsampling of a U-Net decoder: 3×3, stride 2, pads 1, output_padding 1.
    let c = ConvTranspose {
        strides: [2, 2],
        pads: [1, 1, 1, 1],
        output_padding: [1, 1],
        ..ConvTranspose::default()
    };
    assert_eq!(
        infer_one(c, &[t(&[1, 64, 28, 28]), t(&[64, 32, 3, 3]), t(&[32])]),
        Ok(vec![1, 32, 56, 56])
    );
    // No padding: (3 - 1)·1 + 3 = 5 (ONNX's test_convtranspose).
    assert_eq!(
        infer_one(
            ConvTranspose::default(),
            &[t(&[1, 1, 3, 3]), t(&[1, 2, 3, 3])]
        ),
        Ok(vec![1, 2, 5, 5])
    );
    // Strides [3, 2], dilation 2 on the width: rows (3 - 1)·3 + 3 = 9, columns
    // (3 - 1)·2 + 2·2 + 1 = 9, then output padding [1, 0].
    let c = ConvTranspose {
        strides: [3, 2],
        dilations: [1, 2],
        output_padding: [1, 0],
        ..ConvTranspose::default()
    };
    assert_eq!(
        infer_one(c, &[t(&[1, 1, 3, 3]), t(&[1, 2, 3, 3])]),
        Ok(vec![1, 2, 10, 9])
    );
    // Groups: weight [C, M/groups, kH, kW], so M = 3 · 2.
    let c = ConvTranspose {
        groups: 2,
        ..ConvTranspose::default()
    };
    assert_eq!(
        infer_one(c, &[t(&[2, 4, 2, 2]), t(&[4, 3, 1, 1])]),
        Ok(vec![2, 6, 2, 2])
    );
    // Pads cropping the whole full output leave an empty one.
    let c = ConvTranspose {
        pads: [1, 0, 1, 0],
        ..ConvTranspose::default()
    };
    assert_eq!(
        infer_one(c, &[t(&[1, 1, 1, 1]), t(&[1, 1, 2, 1])]),
        Ok(vec![1, 1, 0, 1])
    );
}

#[test]
fn refusals_name_both_values() {
    let e = infer_one(
        ConvTranspose::default(),
        &[t(&[1, 3, 4, 4]), t(&[4, 2, 3, 3])],
    )
    .unwrap_err();
    assert_eq!(
        e,
        "weight tensor<4x2x3x3xf32> is for 4 input channels, but the input tensor<1x3x4x4xf32> has 3"
    );
    let c = ConvTranspose {
        pads: [3, 0, 3, 0],
        ..ConvTranspose::default()
    };
    let e = infer_one(c, &[t(&[1, 1, 2, 2]), t(&[1, 1, 3, 3])]).unwrap_err();
    assert_eq!(
        e,
        "the pads crop 6 along spatial axis 0, more than the full output's 4"
    );
    let c = ConvTranspose {
        groups: 2,
        ..ConvTranspose::default()
    };
    let e = infer_one(c, &[t(&[1, 3, 2, 2]), t(&[3, 1, 3, 3])]).unwrap_err();
    assert_eq!(e, "groups = 2 must divide the input channels (3)");
    let e = infer_one(
        ConvTranspose::default(),
        &[t(&[1, 2, 2, 2]), t(&[2, 2, 3, 3]), t(&[3])],
    )
    .unwrap_err();
    assert_eq!(e, "bias must be tensor<2xf32>, got tensor<3xf32>");
    let e = infer_one(
        ConvTranspose::default(),
        &[t(&[1, 2, 0, 2]), t(&[2, 2, 3, 3])],
    )
    .unwrap_err();
    assert!(e.contains("empty along spatial axis 0"), "{e}");
    let e = infer_one(
        ConvTranspose::default(),
        &[t(&[1, 2, 2, 2]), t(&[2, 2, 0, 3])],
    )
    .unwrap_err();
    assert!(e.contains("kernel dimensions must be positive"), "{e}");
}

#[test]
fn huge_strides_overflow_into_a_diagnostic() {
    let c = ConvTranspose {
        strides: [u64::MAX, 1],
        ..ConvTranspose::default()
    };
    let e = infer_one(c, &[t(&[1, 1, 3, 3]), t(&[1, 1, 3, 3])]).unwrap_err();
    assert_eq!(e, "a dimension overflows 64 bits");
}

#[test]
fn text_form_round_trips_with_defaults_omitted() {
    let text = "module @m {
  func @main(%x: tensor<1x4x5x5xf32>) -> tensor<1x6x11x11xf32> {
    %w = const {name = \"w\"} : tensor<4x3x3x3xf32>
    %b = const {name = \"b\"} : tensor<6xf32>
    %y = conv_transpose(%x, %w, %b) {strides = [2, 2], dilations = [1, 1], pads = [0, 0, 0, 0], output_padding = [0, 0], groups = 2, activation = relu} : tensor<1x6x11x11xf32>
    return %y
  }
}
";
    let m = tir_ir::parse_and_verify(text).expect("verifies");
    let printed = tir_ir::print(&m);
    assert!(
        printed.contains(
            "%y = conv_transpose(%x, %w, %b) {strides = [2, 2], groups = 2, activation = relu} : tensor<1x6x11x11xf32>"
        ),
        "{printed}"
    );
    let again = tir_ir::parse_and_verify(&printed).expect("verifies");
    assert_eq!(tir_ir::print(&again), printed);
}

#[test]
fn bad_attributes_are_refused_when_parsed() {
    for (attrs, want) in [
        ("strides = [0, 1]", "values must be positive"),
        ("dilations = [1, 0]", "values must be positive"),
        ("groups = 0", "must be positive"),
        ("output_padding = [1]", "output_padding"),
    ] {
        let text = format!(
            "module @m {{\n  func @main(%x: tensor<1x1x3x3xf32>) {{\n    %w = const {{name = \"w\"}} : tensor<1x1x3x3xf32>\n    %y = conv_transpose(%x, %w) {{{attrs}}}\n    return %y\n  }}\n}}\n"
        );
        let e = tir_ir::parse_and_verify(&text).expect_err(attrs);
        let msg = format!("{e:?}");
        assert!(msg.contains(want), "{attrs}: {msg}");
    }
}
