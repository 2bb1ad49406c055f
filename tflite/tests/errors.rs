//! What the importer refuses, and how it says so: the operator's index and builtin name, and
//! why; a malformed file is a diagnostic from the flatbuffers verifier, never a panic.

mod common;

use common::*;
use tir_tflite::schema::{ActivationFunctionType as Act, BuiltinOperator as B};

/// x → RELU → (the given op) → out.
fn relu_then(code: B, out_shape: &[i32]) -> Vec<u8> {
    let mut m = Spec::default();
    let x = m.input("x", &[1, 4, 4, 2]);
    let r = m.act("r", &[1, 4, 4, 2]);
    m.op(B::RELU, &[x], &[r], Opts::None);
    let y = m.act("y", out_shape);
    m.op(code, &[r], &[y], Opts::None);
    m.outputs.push(y);
    m.build()
}

#[test]
fn an_unsupported_operator_is_named_with_its_index() {
    let msg = refusal(&relu_then(B::FLOOR, &[1, 4, 4, 2]));
    assert_eq!(
        msg,
        "operator 1 (FLOOR): not supported by tir's TFLite importer"
    );
}

#[test]
fn transpose_conv_without_its_inputs_is_refused() {
    // TRANSPOSE_CONV's input 2 is the data; given only one input, it is missing.
    let msg = refusal(&relu_then(B::TRANSPOSE_CONV, &[1, 8, 8, 2]));
    assert_eq!(msg, "operator 1 (TRANSPOSE_CONV): input 2 is required");
}

#[test]
fn a_custom_operator_is_named() {
    let mut m = Spec::default();
    let x = m.input("x", &[1, 4]);
    let y = m.act("y", &[1, 4]);
    m.ops.push(OpSpec {
        code: B::CUSTOM,
        custom: Some("MaxPoolingWithArgmax2D".into()),
        custom_options: None,
        inputs: vec![x],
        outputs: vec![y],
        opts: Opts::None,
    });
    m.outputs.push(y);
    assert_eq!(
        refusal(&m.build()),
        "operator 0 (CUSTOM(MaxPoolingWithArgmax2D)): custom operators are not supported"
    );
}

#[test]
fn mediapipe_transpose_conv_without_its_options_is_refused() {
    let mut m = Spec::default();
    let x = m.input("x", &[1, 2, 2, 1]);
    let f = m.f32("f", &[1, 2, 2, 1], &[1.0; 4]);
    let b = m.f32("b", &[1], &[0.0]);
    let y = m.act("y", &[1, 4, 4, 1]);
    m.ops.push(OpSpec {
        code: B::CUSTOM,
        custom: Some("Convolution2DTransposeBias".into()),
        custom_options: Some(vec![1, 0, 0, 0, 2, 0, 0, 0]),
        inputs: vec![x, f, b],
        outputs: vec![y],
        opts: Opts::None,
    });
    m.outputs.push(y);
    assert_eq!(
        refusal(&m.build()),
        "operator 0 (CUSTOM(Convolution2DTransposeBias)): the custom options hold 8 bytes, not \
         the 12 of (padding, stride_w, stride_h)"
    );
}

#[test]
fn a_quantized_tensor_is_refused() {
    // A float model whose FULLY_CONNECTED has int8 weights (hybrid quantization).
    let mut m = Spec::default();
    let x = m.input("x", &[1, 4]);
    let w = m.tensor("w_int8", &[2, 4], TensorType::INT8, Some(vec![1u8; 8]));
    let y = m.act("y", &[1, 2]);
    m.op(
        B::FULLY_CONNECTED,
        &[x, w, -1],
        &[y],
        Opts::Fc { act: Act::NONE },
    );
    m.outputs.push(y);
    assert_eq!(
        refusal(&m.build()),
        "operator 0 (FULLY_CONNECTED): tensor 1 `w_int8` is INT8: quantized models are not \
         supported (tir imports float32 models, with float16 weights behind DEQUANTIZE)"
    );
}

#[test]
fn a_quantized_graph_input_is_refused() {
    let mut m = Spec::default();
    let x = m.tensor("image", &[1, 4, 4, 3], TensorType::UINT8, None);
    m.inputs.push(x);
    m.outputs.push(x);
    assert_eq!(
        refusal(&m.build()),
        "graph input 0 `image`: tensor 0 `image` is UINT8: quantized models are not supported \
         (tir imports float32 models, with float16 weights behind DEQUANTIZE)"
    );
}

#[test]
fn a_shape_the_model_declares_wrongly_is_reported() {
    // RELU6 declared with another shape than its input's.
    let msg = refusal(&relu_then(B::RELU6, &[1, 4, 2, 4]));
    assert_eq!(
        msg,
        "operator 1 (RELU6): tir infers shape [1, 4, 4, 2] for tensor 2 `y`, but the model \
         declares [1, 4, 2, 4]"
    );
}

#[test]
fn a_truncated_file_is_a_diagnostic() {
    let bytes = relu_then(B::RELU6, &[1, 4, 4, 2]);
    for cut in [0, 3, 8, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        let msg = refusal(&bytes[..cut]);
        assert!(
            msg.starts_with("not a valid TFLite model: "),
            "cut at {cut}: {msg}"
        );
    }
}

#[test]
fn garbage_is_a_diagnostic_never_a_panic() {
    let bytes = relu_then(B::RELU6, &[1, 4, 4, 2]);
    // Flip every byte in turn: each result either imports or is refused with a message.
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0xa5;
        if let Err(e) = tir_tflite::import_bytes(&b, &Default::default()) {
            assert!(!e.to_string().is_empty());
        }
    }
    let msg = refusal(b"this is not a flatbuffer at all, just text");
    assert!(msg.starts_with("not a valid TFLite model: "), "{msg}");
}

#[test]
fn a_float16_constant_without_dequantize_is_refused() {
    let mut m = Spec::default();
    let x = m.input("x", &[1, 2]);
    let k = m.f16("k", &[2], &[1.0, 2.0]);
    let y = m.act("y", &[1, 2]);
    m.op(B::ADD, &[x, k], &[y], Opts::Add { act: Act::NONE });
    m.outputs.push(y);
    assert_eq!(
        refusal(&m.build()),
        "operator 0 (ADD): a float16 constant is used without DEQUANTIZE (tir folds float16 \
         weights only behind DEQUANTIZE)"
    );
}
