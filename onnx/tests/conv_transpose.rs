//! ConvTranspose import: `pads`, `auto_pad`, `output_shape` and `output_padding` become the
//! IR's crop and output padding (checked on ONNX's own backend-test configurations), the
//! result computes ONNX's reference values, and what cannot be expressed is refused.

mod common;
use common::*;

/// The imported `conv_transpose` line of a one-node model on `x: [1, 1, 3, 3]` and the
/// weight `w`.
fn imported(wdims: &[i64], attrs: Vec<tir_onnx::proto::AttributeProto>) -> String {
    let m = model(
        13,
        vec![input("x", &[1, 1, 3, 3])],
        &["y"],
        vec![tseq("w", wdims)],
        vec![node("ConvTranspose", &["x", "w"], &["y"], attrs)],
    );
    let t = text(&m);
    t.lines()
        .find(|l| l.contains("conv_transpose("))
        .unwrap_or_else(|| panic!("no conv_transpose in\n{t}"))
        .trim()
        .to_string()
}

#[test]
fn padding_forms_become_crop_and_output_padding() {
    let w = [1, 2, 3, 3];
    // test_convtranspose_pads: the crop as given.
    assert_eq!(
        imported(
            &w,
            vec![ais("strides", &[3, 2]), ais("pads", &[1, 2, 1, 2])]
        ),
        "%y = conv_transpose(%x, %w) {strides = [3, 2], pads = [1, 2, 1, 2]} : tensor<1x2x7x3xf32>"
    );
    // test_convtranspose_output_shape: 9×7 in full, asked for 10×8: the extra row and column
    // at the end.
    assert_eq!(
        imported(
            &w,
            vec![ais("strides", &[3, 2]), ais("output_shape", &[10, 8])]
        ),
        "%y = conv_transpose(%x, %w) {strides = [3, 2], output_padding = [1, 1]} : tensor<1x2x10x8xf32>"
    );
    // test_convtranspose_kernel_shape's attributes: output_shape and output_padding together.
    assert_eq!(
        imported(
            &w,
            vec![
                ais("strides", &[3, 2]),
                ais("output_shape", &[10, 8]),
                ais("output_padding", &[1, 1]),
                ais("kernel_shape", &[3, 3]),
            ]
        ),
        "%y = conv_transpose(%x, %w) {strides = [3, 2], output_padding = [1, 1]} : tensor<1x2x10x8xf32>"
    );
    // The whole output shape is accepted as well as its spatial part.
    assert_eq!(
        imported(
            &w,
            vec![ais("strides", &[3, 2]), ais("output_shape", &[1, 2, 10, 8])]
        ),
        "%y = conv_transpose(%x, %w) {strides = [3, 2], output_padding = [1, 1]} : tensor<1x2x10x8xf32>"
    );
    // test_convtranspose_autopad_same: SAME_UPPER puts the odd pixel of the crop at the end,
    // SAME_LOWER at the start; the output is in·stride.
    assert_eq!(
        imported(
            &w,
            vec![ais("strides", &[2, 2]), as_("auto_pad", "SAME_UPPER")]
        ),
        "%y = conv_transpose(%x, %w) {strides = [2, 2], pads = [0, 0, 1, 1]} : tensor<1x2x6x6xf32>"
    );
    assert_eq!(
        imported(
            &w,
            vec![ais("strides", &[2, 2]), as_("auto_pad", "SAME_LOWER")]
        ),
        "%y = conv_transpose(%x, %w) {strides = [2, 2], pads = [1, 1, 0, 0]} : tensor<1x2x6x6xf32>"
    );
    // test_convtranspose_dilations.
    assert_eq!(
        imported(&[1, 1, 2, 2], vec![ais("dilations", &[2, 2])]),
        "%y = conv_transpose(%x, %w) {dilations = [2, 2]} : tensor<1x1x5x5xf32>"
    );
    assert_eq!(
        imported(
            &w,
            vec![as_("auto_pad", "VALID"), ais("output_padding", &[1, 0])]
        ),
        "%y = conv_transpose(%x, %w) {output_padding = [1, 0]} : tensor<1x2x6x5xf32>"
    );
}

#[test]
fn computes_onnx_reference_values() {
    // test_convtranspose: x = 0..9 (3×3), two all-ones 3×3 kernels.
    let m = model(
        13,
        vec![input("x", &[1, 1, 3, 3])],
        &["y"],
        vec![tf32("w", &[1, 2, 3, 3], &[1.0; 18])],
        vec![node("ConvTranspose", &["x", "w"], &["y"], vec![])],
    );
    let imp = import(&m).unwrap();
    let st = imp.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
    let x = tir_interp::Tensor::f32(vec![1, 1, 3, 3], (0..9).map(|v| v as f32).collect()).unwrap();
    let y = tir_interp::run(&imp.module, &weights, &[x]).unwrap();
    #[rustfmt::skip]
    let plane = [
        0., 1., 3., 3., 2.,
        3., 8., 15., 12., 7.,
        9., 21., 36., 27., 15.,
        9., 20., 33., 24., 13.,
        6., 13., 21., 15., 8.,
    ];
    let want: Vec<f32> = plane.iter().chain(&plane).copied().collect();
    assert_eq!(y[0].shape(), [1, 2, 5, 5]);
    assert_eq!(y[0].as_f32().unwrap(), &want[..]);
}

#[test]
fn what_cannot_be_expressed_is_refused() {
    let one = |attrs| {
        let m = model(
            13,
            vec![input("x", &[1, 1, 3, 3])],
            &["y"],
            vec![tseq("w", &[1, 2, 3, 3])],
            vec![node("ConvTranspose", &["x", "w"], &["y"], attrs)],
        );
        error(&m)
    };
    // A 7×7 output of a 5×5 full one under SAME_UPPER would start one pixel before it.
    let e = one(vec![
        as_("auto_pad", "SAME_UPPER"),
        ais("output_shape", &[7, 7]),
    ]);
    assert!(e.contains("the output size 7 on spatial axis 0 needs padding the IR cannot express: the full transposed convolution there is 5"), "{e}");
    let e = one(vec![as_("auto_pad", "SAME")]);
    assert!(
        e.contains("`auto_pad` has an unknown value \"SAME\""),
        "{e}"
    );
    let e = one(vec![ais("output_shape", &[1, 2, 3])]);
    assert!(e.contains("`output_shape` has 3 values"), "{e}");
    let e = one(vec![ais("pads", &[4, 0, 4, 0])]);
    assert!(
        e.contains("the pads crop 8 along spatial axis 0, more than the full output's 5"),
        "{e}"
    );
    let e = one(vec![ais("kernel_shape", &[2, 2])]);
    assert!(e.contains("kernel_shape [2, 2] does not match"), "{e}");
}
