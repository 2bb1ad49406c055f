//! Element-wise ops: binary arithmetic with broadcasting and fused activations, the unary
//! functions, `clip`, `hard_sigmoid`, `prelu`.

mod common;
use common::*;
use tir_interp::kernels::{erf, erfc};
use tir_ir::op::{Activation, BinaryOp, Op, UnaryOp};

fn binary(op: BinaryOp, a: tir_interp::Tensor, b: tir_interp::Tensor) -> tir_interp::Tensor {
    run_op(
        Op::Binary {
            op,
            activation: None,
        },
        &[a, b],
    )
}

fn unary(u: UnaryOp, xs: &[f32]) -> Vec<f32> {
    values(&run_op(Op::Unary(u), &[t(&[xs.len() as u64], xs)])).to_vec()
}

#[test]
fn add_broadcasts_a_channel_vector() {
    // [1, 2, 2, 2] + [2, 1, 1]
    let y = binary(
        BinaryOp::Add,
        iota(&[1, 2, 2, 2]),
        t(&[2, 1, 1], &[100., 200.]),
    );
    assert_close(
        &y,
        &[1, 2, 2, 2],
        &[100., 101., 102., 103., 204., 205., 206., 207.],
        0.0,
    );
}

#[test]
fn binary_broadcasts_both_ways() {
    // [3, 1] - [1, 2] -> [3, 2]
    let y = binary(
        BinaryOp::Sub,
        t(&[3, 1], &[10., 20., 30.]),
        t(&[2], &[1., 2.]),
    );
    assert_close(&y, &[3, 2], &[9., 8., 19., 18., 29., 28.], 0.0);
}

#[test]
fn mul_and_div_with_a_scalar() {
    let y = binary(BinaryOp::Mul, t(&[3], &[1., 2., 3.]), t(&[], &[2.]));
    assert_close(&y, &[3], &[2., 4., 6.], 0.0);
    let y = binary(BinaryOp::Div, t(&[], &[6.]), t(&[3], &[1., 2., 3.]));
    assert_close(&y, &[3], &[6., 3., 2.], 0.0);
}

#[test]
fn binary_fused_activations() {
    let a = t(&[5], &[-8., -2., 0., 2., 8.]);
    let z = t(&[5], &[0.; 5]);
    let run = |act| {
        values(&run_op(
            Op::Binary {
                op: BinaryOp::Add,
                activation: Some(act),
            },
            &[a.clone(), z.clone()],
        ))
        .to_vec()
    };
    assert_eq!(run(Activation::Relu), [0., 0., 0., 2., 8.]);
    assert_eq!(run(Activation::Relu6), [0., 0., 0., 2., 6.]);
    assert_eq!(run(Activation::ReluN1To1), [-1., -1., 0., 1., 1.]);
    assert_eq!(
        run(Activation::HardSwish),
        [0., -2. * 1. / 6., 0., 2. * 5. / 6., 8.]
    );
    let s = run(Activation::Sigmoid);
    assert!((s[3] - 0.880_797_1).abs() < 1e-6 && s[2] == 0.5);
    let th = run(Activation::Tanh);
    assert!((th[3] - 0.964_027_6).abs() < 1e-6);
}

#[test]
fn relu_and_relu6() {
    assert_eq!(unary(UnaryOp::Relu, &[-1., 0., 3., 7.]), [0., 0., 3., 7.]);
    assert_eq!(unary(UnaryOp::Relu6, &[-1., 0., 3., 7.]), [0., 0., 3., 6.]);
}

#[test]
fn sigmoid_tanh_exp_values() {
    let s = unary(UnaryOp::Sigmoid, &[0., 2., -2., -100., 100.]);
    let want = [0.5, 0.880_797_1, 0.119_202_92, 0.0, 1.0];
    for (a, b) in s.iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
    let th = unary(UnaryOp::Tanh, &[0., 1., -1.]);
    assert!((th[1] - 0.761_594_2).abs() < 1e-6 && (th[2] + 0.761_594_2).abs() < 1e-6);
    let e = unary(UnaryOp::Exp, &[0., 1., -1.]);
    assert!((e[1] - std::f32::consts::E).abs() < 1e-6 && (e[2] - 0.367_879_45).abs() < 1e-7);
}

#[test]
fn hard_swish_values() {
    // x * relu6(x + 3) / 6
    assert_eq!(
        unary(UnaryOp::HardSwish, &[-4., -3., 0., 3., 4.]),
        [0., 0., 0., 3., 4.]
    );
    let v = unary(UnaryOp::HardSwish, &[1.]);
    assert!((v[0] - 4. / 6.).abs() < 1e-7);
}

#[test]
fn gelu_is_the_exact_erf_form() {
    // Reference values: 0.5 x (1 + erf(x / sqrt 2)) computed to 10 digits.
    let xs = [-3., -1., -0.5, 0., 0.5, 1., 3.];
    let want = [
        -0.004_049_693,
        -0.158_655_25,
        -0.154_268_77,
        0.,
        0.345_731_23,
        0.841_344_7,
        2.995_950_3,
    ];
    let got = unary(UnaryOp::Gelu, &xs);
    for (a, b) in got.iter().zip(want) {
        assert!((a - b).abs() <= 2e-7 * (1. + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn erf_matches_known_values_to_1e_7() {
    let cases = [
        (0.0, 0.0),
        (0.1, 0.112_462_916_018_284_9),
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.0, 0.995_322_265_018_952_7),
        (3.5, 0.999_999_256_901_627_7),
        (-1.0, -0.842_700_792_949_714_9),
    ];
    for (x, want) in cases {
        assert!(
            (erf(x) - want).abs() < 1.2e-7,
            "erf({x}) = {} vs {want}",
            erf(x)
        );
    }
    // erfc keeps its relative accuracy in the tail.
    let tail: f64 = 1.541_725_790_028_002e-8; // erfc(4)
    assert!((erfc(4.0) - tail).abs() / tail < 1.2e-7);
}

#[test]
fn clip_bounds_and_defaults() {
    let x = t(&[4], &[-5., -0.5, 0.5, 5.]);
    let y = run_op(
        Op::Clip {
            min: -1.0,
            max: 1.0,
        },
        std::slice::from_ref(&x),
    );
    assert_close(&y, &[4], &[-1., -0.5, 0.5, 1.], 0.0);
    let y = run_op(
        Op::Clip {
            min: 0.0,
            max: f64::INFINITY,
        },
        &[x],
    );
    assert_close(&y, &[4], &[0., 0., 0.5, 5.], 0.0);
}

#[test]
fn hard_sigmoid_default_and_custom_slope() {
    let x = t(&[4], &[-5., 0., 1., 5.]);
    let y = run_op(
        Op::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        std::slice::from_ref(&x),
    );
    assert_close(&y, &[4], &[0., 0.5, 0.7, 1.], 1e-7);
    let y = run_op(
        Op::HardSigmoid {
            alpha: 1.0 / 6.0,
            beta: 0.5,
        },
        &[x],
    );
    assert_close(&y, &[4], &[0., 0.5, 2. / 3., 1.], 1e-7);
}

#[test]
fn prelu_broadcasts_the_slope_per_channel() {
    let x = t(&[1, 2, 1, 2], &[-1., 2., -3., 4.]);
    let s = t(&[2, 1, 1], &[0.1, 0.5]);
    let y = run_op(Op::Prelu, &[x, s]);
    assert_close(&y, &[1, 2, 1, 2], &[-0.1, 2., -1.5, 4.], 1e-7);
}

#[test]
fn nan_propagates_through_relu_and_clip() {
    let y = unary(UnaryOp::Relu, &[f32::NAN]);
    assert!(y[0].is_nan());
    let c = run_op(Op::Clip { min: 0.0, max: 1.0 }, &[t(&[1], &[f32::NAN])]);
    assert!(values(&c)[0].is_nan());
}

#[test]
fn math_functions_known_values() {
    let nan = f32::NAN;
    assert_eq!(unary(UnaryOp::Abs, &[-2., 0., 3.]), [2., 0., 3.]);
    assert_eq!(unary(UnaryOp::Neg, &[-2., 3.]), [2., -3.]);
    assert_eq!(unary(UnaryOp::Sqrt, &[4., 0.25])[..], [2., 0.5]);
    assert!(unary(UnaryOp::Sqrt, &[-1.])[0].is_nan());
    assert_eq!(unary(UnaryOp::Reciprocal, &[4., -0.5]), [0.25, -2.]);
    assert_eq!(unary(UnaryOp::Log, &[1., 0.])[..], [0., f32::NEG_INFINITY]);
    assert_eq!(unary(UnaryOp::Floor, &[-1.5, 1.5]), [-2., 1.]);
    assert_eq!(unary(UnaryOp::Ceil, &[-1.5, 1.5]), [-1., 2.]);
    // ONNX Round: halves to the even neighbour.
    assert_eq!(
        unary(UnaryOp::Round, &[0.5, 1.5, 2.5, -2.5, 2.6]),
        [0., 2., 2., -2., 3.]
    );
    let e = unary(UnaryOp::Erf, &[0., 1., -2.]);
    assert!(e[0].abs() < 1e-7 && (e[1] - 0.842_700_8).abs() < 2e-7);
    assert!((e[2] + 0.995_322_3).abs() < 2e-7);
    let sc = [unary(UnaryOp::Sin, &[1.])[0], unary(UnaryOp::Cos, &[1.])[0]];
    assert!((sc[0] - 0.841_471).abs() < 1e-6 && (sc[1] - 0.540_302_3).abs() < 1e-6);
    let sp = unary(UnaryOp::Softplus, &[0., 100., -100.]);
    assert!((sp[0] - std::f32::consts::LN_2).abs() < 1e-7 && sp[1] == 100.);
    assert!(sp[2] > 0. && sp[2] < 1e-40);
    assert_eq!(unary(UnaryOp::Softsign, &[1., -3.]), [0.5, -0.75]);
    // The inverse and hyperbolic functions at points with known values; NaN outside domains.
    let close = |u, x: f32, want: f32| {
        let got = unary(u, &[x])[0];
        assert!(
            (got - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{u:?}({x}) = {got}"
        );
    };
    close(UnaryOp::Tan, std::f32::consts::FRAC_PI_4, 1.0);
    close(UnaryOp::Asin, 1.0, std::f32::consts::FRAC_PI_2);
    close(UnaryOp::Acos, -1.0, std::f32::consts::PI);
    close(UnaryOp::Atan, 1.0, std::f32::consts::FRAC_PI_4);
    close(UnaryOp::Sinh, 1.0, 1.175_201_2);
    close(UnaryOp::Cosh, 1.0, 1.543_080_6);
    close(UnaryOp::Asinh, 1.175_201_2, 1.0);
    close(UnaryOp::Acosh, 1.543_080_6, 1.0);
    close(UnaryOp::Atanh, 0.5, 0.549_306_15);
    for (u, x) in [
        (UnaryOp::Asin, 2.0),
        (UnaryOp::Acos, -1.5),
        (UnaryOp::Acosh, 0.5),
    ] {
        assert!(unary(u, &[x])[0].is_nan(), "{u:?}({x})");
    }
    assert_eq!(unary(UnaryOp::Atanh, &[1.0])[0], f32::INFINITY);
    let s = unary(UnaryOp::Sign, &[3.5, -0.25, 0.0, -0.0, f32::NAN]);
    assert_eq!(s[..3], [1., -1., 0.]);
    assert!(s[3] == 0.0 && s[3].is_sign_negative() && s[4].is_nan());
    let pw = binary(
        BinaryOp::Pow,
        t(&[3], &[2., -8., 4.]),
        t(&[3], &[3., 2., 0.5]),
    );
    assert_close(&pw, &[3], &[8., 64., 2.], 0.0);
    let mx = binary(BinaryOp::Max, t(&[3], &[1., nan, -1.]), t(&[1], &[0.]));
    let v = values(&mx);
    assert!(v[0] == 1. && v[1].is_nan() && v[2] == 0.);
    let mn = binary(BinaryOp::Min, t(&[2], &[1., -1.]), t(&[1], &[nan]));
    assert!(values(&mn).iter().all(|x| x.is_nan()));
}
