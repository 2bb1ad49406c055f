//! Shape rules against values worked out by hand from the ONNX operator definitions, and the
//! verifier's checks on modules built in code.

use tir_ir::builder::Builder;
use tir_ir::op::{Conv2d, Pool2d};
use tir_ir::shape::infer;
use tir_ir::{Op, TensorType};

fn t(shape: &[u64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn out(op: Op, ins: &[TensorType]) -> Vec<u64> {
    let refs: Vec<&TensorType> = ins.iter().collect();
    infer(&op, &refs).expect("valid").remove(0).shape
}

#[test]
fn conv_output_size_follows_onnx() {
    // 224 → 112 with a 3×3 stride-2 kernel and TF "SAME" padding (0 top/left, 1 bottom/right).
    let c = Conv2d {
        strides: [2, 2],
        pads: [0, 0, 1, 1],
        ..Conv2d::default()
    };
    assert_eq!(
        out(Op::Conv2d(c), &[t(&[1, 3, 224, 224]), t(&[32, 3, 3, 3])]),
        [1, 32, 112, 112]
    );
    // Dilation 2 enlarges a 3×3 kernel to 5×5.
    let c = Conv2d {
        dilations: [2, 2],
        ..Conv2d::default()
    };
    assert_eq!(
        out(Op::Conv2d(c), &[t(&[1, 4, 9, 9]), t(&[4, 4, 3, 3])]),
        [1, 4, 5, 5]
    );
    // Depthwise: groups = channels, weight [C, 1, kH, kW].
    let c = Conv2d {
        groups: 8,
        pads: [1, 1, 1, 1],
        ..Conv2d::default()
    };
    assert_eq!(
        out(Op::Conv2d(c), &[t(&[1, 8, 7, 7]), t(&[8, 1, 3, 3])]),
        [1, 8, 7, 7]
    );
}

#[test]
fn pool_ceil_mode_drops_a_window_starting_in_padding() {
    let p = |ceil_mode, pads| Pool2d {
        kernel: [3, 3],
        strides: [2, 2],
        pads,
        ceil_mode,
        count_include_pad: false,
    };
    // GoogLeNet's 112 → 56 max pool with ceil_mode.
    assert_eq!(
        out(Op::MaxPool(p(true, [0; 4])), &[t(&[1, 64, 112, 112])]),
        [1, 64, 56, 56]
    );
    assert_eq!(
        out(Op::MaxPool(p(false, [0; 4])), &[t(&[1, 64, 112, 112])]),
        [1, 64, 55, 55]
    );
    // 6 + 1 + 1 - 3 = 5, ceil(5 / 2) + 1 = 4, but the 4th window would start at 6 ≥ 6 + 1 - 1.
    assert_eq!(
        out(Op::MaxPool(p(true, [1, 1, 1, 1])), &[t(&[1, 1, 6, 6])]),
        [1, 1, 4, 4]
    );
    assert_eq!(
        out(Op::MaxPool(p(true, [0, 0, 0, 0])), &[t(&[1, 1, 6, 6])]),
        [1, 1, 3, 3]
    );
}

#[test]
fn huge_strides_do_not_overflow() {
    let p = Pool2d {
        kernel: [1, 1],
        strides: [u64::MAX / 2, 1],
        pads: [0; 4],
        ceil_mode: true,
        count_include_pad: false,
    };
    let x = TensorType::new(vec![1, 1, u64::MAX, 1], tir_ir::DType::I8);
    assert_eq!(out(Op::MaxPool(p), &[x]), [1, 1, 3, 1]);
}

#[test]
fn matmul_broadcasts_batch_dimensions() {
    let m = Op::MatMul { activation: None };
    assert_eq!(
        out(m.clone(), &[t(&[2, 1, 3, 4]), t(&[5, 4, 6])]),
        [2, 5, 3, 6]
    );
    assert_eq!(out(m.clone(), &[t(&[4]), t(&[3, 4, 6])]), [3, 6]);
    assert_eq!(out(m, &[t(&[3, 4]), t(&[4])]), [3]);
}

#[test]
fn slice_clamps_like_onnx() {
    let s = |starts: Vec<i64>, ends: Vec<i64>, steps: Vec<i64>| {
        let axes = (0..starts.len() as i64).collect();
        Op::Slice(tir_ir::op::Slice {
            starts,
            ends,
            axes,
            steps,
        })
    };
    assert_eq!(out(s(vec![1], vec![i64::MAX], vec![1]), &[t(&[10])]), [9]);
    assert_eq!(out(s(vec![-3], vec![-1], vec![1]), &[t(&[10])]), [2]);
    assert_eq!(
        out(s(vec![-1], vec![i64::MIN], vec![-1]), &[t(&[10])]),
        [10]
    );
    assert_eq!(out(s(vec![0], vec![10], vec![3]), &[t(&[10])]), [4]);
    assert_eq!(out(s(vec![5], vec![2], vec![1]), &[t(&[10])]), [0]);
}

#[test]
fn reduce_mean_without_axes_reduces_everything() {
    let r = Op::Reduce {
        kind: tir_ir::ReduceKind::Mean,
        axes: vec![],
        keepdims: false,
    };
    assert_eq!(out(r, &[t(&[2, 3, 4])]), Vec::<u64>::new());
}

#[test]
fn a_zero_sized_kernel_is_an_error() {
    let ins = [t(&[1, 1, 5, 5]), t(&[1, 1, 0, 3])];
    let refs: Vec<&TensorType> = ins.iter().collect();
    assert!(infer(&Op::Conv2d(Conv2d::default()), &refs).is_err());
}

#[test]
fn fused_transcendental_activation_needs_floats() {
    let x = TensorType::new(vec![4], tir_ir::DType::I32);
    let add = Op::Binary {
        op: tir_ir::BinaryOp::Add,
        activation: Some(tir_ir::Activation::Tanh),
    };
    assert!(infer(&add, &[&x, &x]).is_err());
    let add = Op::Binary {
        op: tir_ir::BinaryOp::Add,
        activation: Some(tir_ir::Activation::Relu),
    };
    assert!(infer(&add, &[&x, &x]).is_ok());
}

#[test]
fn verifier_rejects_names_that_would_not_print_back() {
    let mut b = Builder::new("m");
    let x = b.input("a/b", t(&[2]));
    let mut m = b.finish(&[x]);
    let errs = tir_ir::verify(&mut m).expect_err("`a/b` is not a value name");
    assert!(
        errs[0].to_string().contains("not a valid value name"),
        "{}",
        errs[0]
    );

    let mut b = Builder::new("m");
    let x = b.input("w", t(&[2]));
    let w = b.weight("w", t(&[2]));
    let s = b
        .op(
            Op::Binary {
                op: tir_ir::BinaryOp::Add,
                activation: None,
            },
            &[x, w],
        )
        .expect("typed");
    let mut m = b.finish(&[s]);
    let errs = tir_ir::verify(&mut m).expect_err("`%w` twice");
    assert!(
        errs[0].to_string().contains("defined more than once"),
        "{}",
        errs[0]
    );
}

#[test]
fn negative_zero_survives_printing() {
    let text = "module @m {\n  func @main(%x: tensor<2xf32>) {\n    %0 = pad(%x) {pads = [1, 1], value = -0.0}\n    return %0\n  }\n}\n";
    let m = tir_ir::parse_and_verify(text).expect("valid");
    let printed = tir_ir::print(&m);
    assert!(printed.contains("value = -0.0"), "{printed}");
}
