//! The Reduce* family and log_softmax on hand-computed values: each reduction, the identities
//! over an empty set (ONNX's `*_empty_set` cases), NaN through max and min.

mod common;

use common::{assert_close, iota, run_op, t, values};
use tir_interp::Tensor;
use tir_ir::{Op, ReduceKind};

fn reduce(kind: ReduceKind, axes: &[i64], x: Tensor) -> Tensor {
    run_op(
        Op::Reduce {
            kind,
            axes: axes.to_vec(),
            keepdims: false,
        },
        &[x],
    )
}

#[test]
fn every_reduction_over_the_last_axis() {
    // Rows [-1, 2, 3] and [0.5, -4, 1].
    let x = || t(&[2, 3], &[-1., 2., 3., 0.5, -4., 1.]);
    let cases: [(ReduceKind, [f32; 2]); 10] = [
        (ReduceKind::Mean, [4. / 3., -2.5 / 3.]),
        (ReduceKind::Sum, [4., -2.5]),
        (ReduceKind::Max, [3., 1.]),
        (ReduceKind::Min, [-1., -4.]),
        (ReduceKind::Prod, [-6., -2.]),
        (ReduceKind::L1, [6., 5.5]),
        (ReduceKind::L2, [14f32.sqrt(), 17.25f32.sqrt()]),
        (ReduceKind::SumSquare, [14., 17.25]),
        (ReduceKind::LogSum, [4f32.ln(), f32::NAN]),
        (
            ReduceKind::LogSumExp,
            [
                ((-1f64).exp() + 2f64.exp() + 3f64.exp()).ln() as f32,
                (0.5f64.exp() + (-4f64).exp() + 1f64.exp()).ln() as f32,
            ],
        ),
    ];
    for (kind, want) in cases {
        eprintln!("{}", kind.name());
        assert_close(&reduce(kind, &[-1], x()), &[2], &want, 1e-6);
    }
}

#[test]
fn an_empty_reduction_gives_each_identity() {
    for (kind, want) in [
        (ReduceKind::Sum, 0.),
        (ReduceKind::Prod, 1.),
        (ReduceKind::Max, f32::NEG_INFINITY),
        (ReduceKind::Min, f32::INFINITY),
        (ReduceKind::L1, 0.),
        (ReduceKind::L2, 0.),
        (ReduceKind::SumSquare, 0.),
        (ReduceKind::LogSum, f32::NEG_INFINITY),
        (ReduceKind::LogSumExp, f32::NEG_INFINITY),
    ] {
        let y = reduce(kind, &[1], t(&[2, 0, 3], &[]));
        assert_eq!(y.ty.shape, [2, 3]);
        assert!(
            values(&y).iter().all(|&v| v == want),
            "{}: {:?}",
            kind.name(),
            values(&y)
        );
    }
    let mean = reduce(ReduceKind::Mean, &[0], t(&[0, 2], &[]));
    assert!(values(&mean).iter().all(|v| v.is_nan()));
}

#[test]
fn max_and_min_keep_a_nan_wherever_it_stands() {
    for data in [[f32::NAN, 1., 2.], [1., f32::NAN, 2.], [1., 2., f32::NAN]] {
        for kind in [ReduceKind::Max, ReduceKind::Min] {
            let y = reduce(kind, &[0], t(&[3], &data));
            assert!(values(&y)[0].is_nan(), "{} of {data:?}", kind.name());
        }
    }
}

#[test]
fn reductions_over_several_axes_keep_the_rest_in_order() {
    // iota(2x3x2): sums over axes 0 and 2 of [[0,1],[2,3],[4,5]] + [[6,7],[8,9],[10,11]].
    let y = reduce(ReduceKind::Sum, &[0, 2], iota(&[2, 3, 2]));
    assert_close(&y, &[3], &[14., 22., 30.], 0.0);
    let y = reduce(ReduceKind::Max, &[2, 0], iota(&[2, 3, 2]));
    assert_close(&y, &[3], &[7., 9., 11.], 0.0);
}

#[test]
fn log_softmax_is_the_log_of_softmax_without_the_quotient() {
    let x = t(&[2, 3], &[1., 2., 3., -1000., 0., 1000.]);
    let y = run_op(Op::LogSoftmax { axis: 1 }, &[x]);
    let l = (1. + (-1f64).exp() + (-2f64).exp()).ln();
    let want = [
        (-2. - l) as f32,
        (-1. - l) as f32,
        (0. - l) as f32,
        -2000.,
        -1000.,
        0.,
    ];
    assert_close(&y, &[2, 3], &want, 1e-6);
    // Where softmax underflows to 0, its log would be -inf; log_softmax keeps the value.
    assert!(values(&y)[3].is_finite());
}
