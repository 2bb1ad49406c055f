//! What the interpreter refuses: wrong inputs, missing weights, unsupported dtypes,
//! unverified modules.

mod common;
use common::*;
use tir_interp::{run, InterpError, Weights};
use tir_ir::builder::Builder;
use tir_ir::op::{Op, UnaryOp};
use tir_ir::{DType, Module, TensorType};

fn relu_module() -> Module {
    let mut b = Builder::new("m");
    let x = b.input("x", TensorType::f32([2, 2]));
    let y = b.op(Op::Unary(UnaryOp::Relu), &[x]).unwrap();
    b.finish(&[y])
}

#[test]
fn the_wrong_number_of_inputs_is_an_error() {
    let e = run(&relu_module(), &Weights::new(), &[]).unwrap_err();
    assert_eq!(
        e,
        InterpError::InputCount {
            expected: 1,
            found: 0
        }
    );
}

#[test]
fn an_input_of_the_wrong_shape_names_the_input() {
    let e = run(&relu_module(), &Weights::new(), &[t(&[4], &[0.; 4])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "input `%x`: expected tensor<2x2xf32>, got tensor<4xf32>"
    );
}

#[test]
fn an_inconsistent_input_tensor_is_an_error() {
    let mut bad = t(&[2, 2], &[0.; 4]);
    bad.data = tir_interp::Data::F32(vec![0.; 3]);
    let e = run(&relu_module(), &Weights::new(), &[bad]).unwrap_err();
    assert!(matches!(e, InterpError::InputType { .. }), "{e}");
}

#[test]
fn a_missing_weight_names_the_const() {
    let mut b = Builder::new("m");
    let x = b.input("x", TensorType::f32([2]));
    let w = b.weight("w0", TensorType::f32([2]));
    let y = b
        .op(
            Op::Binary {
                op: tir_ir::BinaryOp::Add,
                activation: None,
            },
            &[x, w],
        )
        .unwrap();
    let m = b.finish(&[y]);
    let e = run(&m, &Weights::new(), &[t(&[2], &[1., 2.])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "`%w0`: the weight `w0` is not in the weights file"
    );
}

#[test]
fn an_op_without_a_kernel_for_its_element_types_is_rejected_with_the_value() {
    let mut b = Builder::new("m");
    let x = b.input("x", TensorType::new([2], DType::I32));
    let y = b.op(Op::Transpose { perm: vec![0] }, &[x]).unwrap();
    let m = b.finish(&[y]);
    let x = tir_interp::Tensor::new(
        TensorType::new([2], DType::I32),
        tir_interp::Data::I32(vec![1, 2]),
    )
    .unwrap();
    let e = run(&m, &Weights::new(), &[x]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "`%0` (transpose of tensor<2xi32>): the reference interpreter has no kernel for these element types"
    );
}

#[test]
fn integer_relu_runs() {
    let mut b = Builder::new("m");
    let x = b.input("x", TensorType::new([3], DType::I32));
    let y = b.op(Op::Unary(UnaryOp::Relu), &[x]).unwrap();
    let m = b.finish(&[y]);
    let x = tir_interp::Tensor::new(
        TensorType::new([3], DType::I32),
        tir_interp::Data::I32(vec![-4, 0, 9]),
    )
    .unwrap();
    let out = run(&m, &Weights::new(), &[x]).unwrap();
    assert_eq!(out[0].data, tir_interp::Data::I32(vec![0, 0, 9]));
}

#[test]
fn an_unverified_module_is_an_error_not_a_panic() {
    let mut m = relu_module();
    let f = m.entry_mut().unwrap();
    let (_, op) = f.ops_in_order().next().unwrap();
    let r = op.results[0];
    f.values[r].ty = Some(TensorType::f32([3, 3]));
    f.values[r].declared = Some(TensorType::f32([3, 3]));
    let e = run(&m, &Weights::new(), &[t(&[2, 2], &[0.; 4])]).unwrap_err();
    assert!(matches!(e, InterpError::NotVerified { .. }), "{e}");
}

#[test]
fn a_module_without_entry_is_an_error() {
    let e = run(&Module::new("empty"), &Weights::new(), &[]).unwrap_err();
    assert_eq!(e, InterpError::NoEntry);
}

#[test]
fn returned_values_come_back_in_order_and_an_input_can_be_returned() {
    let mut b = Builder::new("m");
    let x = b.input("x", TensorType::f32([2]));
    let y = b.op(Op::Unary(UnaryOp::Relu), &[x]).unwrap();
    let m = b.finish(&[y, x, y]);
    let out = run(&m, &Weights::new(), &[t(&[2], &[-1., 1.])]).unwrap();
    assert_eq!(values(&out[0]), [0., 1.]);
    assert_eq!(values(&out[1]), [-1., 1.]);
    assert_eq!(values(&out[2]), [0., 1.]);
}
