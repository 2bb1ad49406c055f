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

fn typed(shape: &[u64], d: tir_ir::DType) -> TensorType {
    TensorType::new(shape.to_vec(), d)
}

fn refused(op: Op, ins: &[TensorType]) -> String {
    let refs: Vec<&TensorType> = ins.iter().collect();
    infer(&op, &refs).expect_err("refused").message
}

#[test]
fn dtype_rules_of_cast_comparisons_where_logic_argmax_and_mod() {
    use tir_ir::{CompareOp, DType, LogicalOp};
    let i64s = |s: &[u64]| typed(s, DType::I64);
    let bools = |s: &[u64]| typed(s, DType::Bool);
    let infer1 = |op: Op, ins: &[TensorType]| {
        let refs: Vec<&TensorType> = ins.iter().collect();
        infer(&op, &refs).expect("valid").remove(0)
    };
    assert_eq!(
        infer1(Op::Cast { to: DType::I64 }, &[t(&[2, 3])]),
        i64s(&[2, 3])
    );
    assert_eq!(
        infer1(Op::Compare(CompareOp::Less), &[i64s(&[4, 1]), i64s(&[5])]),
        bools(&[4, 5])
    );
    assert_eq!(
        infer1(Op::Where, &[bools(&[2, 1, 5]), t(&[3, 1]), t(&[2, 3, 5])]),
        t(&[2, 3, 5])
    );
    assert_eq!(
        infer1(Op::Logical(LogicalOp::Xor), &[bools(&[3, 4]), bools(&[4])]),
        bools(&[3, 4])
    );
    let argmax = |axis, keepdims| Op::ArgReduce {
        max: true,
        axis,
        keepdims,
        select_last_index: false,
    };
    assert_eq!(infer1(argmax(-1, true), &[t(&[3, 4, 5])]), i64s(&[3, 4, 1]));
    assert_eq!(infer1(argmax(1, false), &[t(&[3, 4, 5])]), i64s(&[3, 5]));
    assert_eq!(
        infer1(Op::Mod { fmod: false }, &[i64s(&[2, 3]), i64s(&[3])]),
        i64s(&[2, 3])
    );

    // Refusals name both types, or the one that is wrong.
    assert_eq!(
        refused(Op::Compare(CompareOp::Equal), &[t(&[3]), i64s(&[3])]),
        "operand 1 is tensor<3xi64>, but operand 0 is tensor<3xf32>: element types must match"
    );
    assert_eq!(
        refused(Op::Where, &[t(&[3]), t(&[3]), t(&[3])]),
        "the condition of `where` must be bool, got tensor<3xf32>"
    );
    assert_eq!(
        refused(Op::Where, &[bools(&[3]), t(&[3]), i64s(&[3])]),
        "x is tensor<3xf32> and y is tensor<3xi64>: element types must match"
    );
    assert_eq!(
        refused(Op::Logical(LogicalOp::And), &[bools(&[3]), t(&[3])]),
        "`and` needs bool operands, operand 1 is tensor<3xf32>"
    );
    assert_eq!(
        refused(argmax(0, true), &[bools(&[3])]),
        "expected a numeric element type, got bool"
    );
    assert_eq!(
        refused(argmax(1, true), &[t(&[3, 0])]),
        "`argmax` over the empty axis 1 of tensor<3x0xf32>"
    );
    assert_eq!(
        refused(Op::Mod { fmod: false }, &[t(&[3]), t(&[3])]),
        "`mod` of f32 needs `fmod = true` (the sign of the divisor is defined on integers only)"
    );
}

#[test]
fn new_ops_print_and_parse_back() {
    let text = "module @m {\n  func @main(%x: tensor<2x3xf32>, %y: tensor<3xi64>) -> (tensor<2x3xbool>, tensor<1x3xi64>, tensor<2x3xi64>) {\n    \
                %0 = cast(%x) {to = i64} : tensor<2x3xi64>\n    \
                %1 = greater_or_equal(%0, %y) : tensor<2x3xbool>\n    \
                %2 = not(%1) : tensor<2x3xbool>\n    \
                %3 = or(%1, %2) : tensor<2x3xbool>\n    \
                %4 = argmin(%x) {keepdims = true, select_last_index = true} : tensor<1x3xi64>\n    \
                %5 = mod(%0, %y) {fmod = true} : tensor<2x3xi64>\n    \
                %6 = where(%3, %0, %5) : tensor<2x3xi64>\n    \
                return %3, %4, %6\n  }\n}\n";
    let m = tir_ir::parse_and_verify(text).expect("valid");
    let printed = tir_ir::print(&m);
    let again = tir_ir::parse_and_verify(&printed).expect("reparses");
    assert_eq!(tir_ir::print(&again), printed);
    assert!(printed.contains("cast(%x) {to = i64}"), "{printed}");
    assert!(printed.contains("mod(%0, %y) {fmod = true}"), "{printed}");
    assert!(
        printed.contains("argmin(%x) {select_last_index = true}"),
        "{printed}"
    );
}

#[test]
fn grid_sample_takes_its_output_size_from_the_grid() {
    use tir_ir::op::{GridPadding, GridSample, SampleMode};
    let gs = Op::GridSample(GridSample {
        mode: SampleMode::Bilinear,
        padding: GridPadding::Zeros,
        align_corners: false,
    });
    assert_eq!(
        out(gs.clone(), &[t(&[2, 32, 48, 48]), t(&[2, 16, 12, 2])]),
        [2, 32, 16, 12]
    );
    assert_eq!(
        refused(gs.clone(), &[t(&[1, 3, 4, 4]), t(&[1, 5, 5, 3])]),
        "the grid's last axis holds (x, y): it must be 2, got tensor<1x5x5x3xf32>"
    );
    assert_eq!(
        refused(gs.clone(), &[t(&[1, 3, 4, 4]), t(&[2, 5, 5, 2])]),
        "the grid tensor<2x5x5x2xf32> and the input tensor<1x3x4x4xf32> differ in batch"
    );
    assert_eq!(
        refused(gs, &[t(&[1, 3, 4]), t(&[1, 5, 5, 2])]),
        "`grid_sample` samples NCHW tensors, got tensor<1x3x4xf32>"
    );
    // Attributes print only when not the default, and parse back.
    let text = "module @m {\n  func @main(%x: tensor<1x2x3x3xf32>, %g: tensor<1x4x5x2xf32>) -> tensor<1x2x4x5xf32> {\n    \
                %0 = grid_sample(%x, %g) {mode = nearest, padding_mode = reflection, align_corners = true} : tensor<1x2x4x5xf32>\n    \
                %1 = grid_sample(%0, %g) : tensor<1x2x4x5xf32>\n    \
                return %1\n  }\n}\n";
    let printed = tir_ir::print(&tir_ir::parse_and_verify(text).expect("valid"));
    assert!(
        printed.contains(
            "grid_sample(%x, %g) {mode = nearest, padding_mode = reflection, align_corners = true}"
        ),
        "{printed}"
    );
    assert!(printed.contains("grid_sample(%0, %g) :"), "{printed}");
}

#[test]
fn cumsum_keeps_its_operand_type_and_takes_f32_i32_i64() {
    use tir_ir::DType;
    let cs = |axis| Op::CumSum {
        axis,
        exclusive: false,
        reverse: false,
    };
    assert_eq!(infer(&cs(-1), &[&t(&[2, 5])]).unwrap(), vec![t(&[2, 5])]);
    let i32s = typed(&[7], DType::I32);
    assert_eq!(infer(&cs(0), &[&i32s]).unwrap(), vec![i32s.clone()]);
    assert_eq!(
        refused(cs(2), &[t(&[2, 5])]),
        "axis 2 is out of range for rank 2"
    );
    assert_eq!(
        refused(cs(0), &[typed(&[3], DType::U8)]),
        "`cumsum` takes f32, i32 or i64 tensors, got tensor<3xu8>"
    );
}

#[test]
fn top_k_has_two_results_values_and_i64_indices() {
    use tir_ir::DType;
    let tk = |axis, k| Op::TopK {
        axis,
        k,
        largest: true,
    };
    assert_eq!(tk(0, 1).num_results(), 2);
    assert_eq!(
        infer(&tk(-1, 2), &[&t(&[3, 4])]).unwrap(),
        vec![t(&[3, 2]), typed(&[3, 2], DType::I64)]
    );
    assert_eq!(
        infer(&tk(0, 3), &[&typed(&[3, 4], DType::I32)]).unwrap(),
        vec![typed(&[3, 4], DType::I32), typed(&[3, 4], DType::I64)]
    );
    assert_eq!(
        refused(tk(1, 5), &[t(&[3, 4])]),
        "`top_k` takes k = 5 elements along axis 1 of tensor<3x4xf32>, which has fewer"
    );
    assert_eq!(
        refused(tk(0, 1), &[typed(&[3], DType::Bool)]),
        "`top_k` takes f32, i8, u8, i32 or i64 tensors, got tensor<3xbool>"
    );
}

#[test]
fn cumsum_and_top_k_print_and_parse_back() {
    let text = "module @m {\n  func @main(%x: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<2x4xf32>, tensor<2x4xi64>) {\n    \
                %0 = cumsum(%x) {axis = 1, exclusive = true, reverse = true} : tensor<3x4xf32>\n    \
                %1, %2 = top_k(%0) {axis = 0, k = 2, largest = false} : tensor<2x4xf32>, tensor<2x4xi64>\n    \
                return %0, %1, %2\n  }\n}\n";
    let m = tir_ir::parse_and_verify(text).expect("valid");
    let printed = tir_ir::print(&m);
    let again = tir_ir::parse_and_verify(&printed).expect("reparses");
    assert_eq!(tir_ir::print(&again), printed);
    assert!(
        printed.contains("cumsum(%x) {axis = 1, exclusive = true, reverse = true}"),
        "{printed}"
    );
    assert!(
        printed.contains("%1, %2 = top_k(%0) {axis = 0, k = 2, largest = false}"),
        "{printed}"
    );
    // Bad attributes are located diagnostics, not panics.
    for bad in [
        "top_k(%x) {k = 0}",
        "top_k(%x) {}",
        "top_k(%x) {k = -2}",
        "cumsum(%x) {}",
        "cumsum(%x) {axis = 0, exclusive = 3}",
    ] {
        let text = format!(
            "module @m {{\n  func @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {{\n    %a, %b = {bad}\n    return %x\n  }}\n}}\n"
        );
        assert!(tir_ir::parse_and_verify(&text).is_err(), "{bad} accepted");
    }
}
