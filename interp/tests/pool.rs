//! `max_pool`, `avg_pool`, `global_avg_pool`.

mod common;
use common::*;
use tir_ir::op::{Op, Pool2d};

fn pool(
    kernel: [u64; 2],
    strides: [u64; 2],
    pads: [u64; 4],
    ceil_mode: bool,
    include: bool,
) -> Pool2d {
    Pool2d {
        kernel,
        strides,
        pads,
        ceil_mode,
        count_include_pad: include,
    }
}

#[test]
fn max_pool_3x3_stride_2_pad_1() {
    let y = run_op(
        Op::MaxPool(pool([3, 3], [2, 2], [1, 1, 1, 1], false, false)),
        &[iota(&[1, 1, 4, 4])],
    );
    assert_close(&y, &[1, 1, 2, 2], &[5., 7., 13., 15.], 0.0);
}

#[test]
fn max_pool_padding_never_wins_against_negative_values() {
    let x = t(&[1, 1, 1, 2], &[-5., -7.]);
    let y = run_op(
        Op::MaxPool(pool([1, 2], [1, 1], [0, 1, 0, 1], false, false)),
        &[x],
    );
    assert_close(&y, &[1, 1, 1, 3], &[-5., -5., -7.], 0.0);
}

#[test]
fn max_pool_ceil_mode_adds_a_partial_window() {
    let x = iota(&[1, 1, 1, 5]);
    let floor = run_op(
        Op::MaxPool(pool([1, 2], [1, 2], [0; 4], false, false)),
        std::slice::from_ref(&x),
    );
    assert_close(&floor, &[1, 1, 1, 2], &[1., 3.], 0.0);
    let ceil = run_op(Op::MaxPool(pool([1, 2], [1, 2], [0; 4], true, false)), &[x]);
    assert_close(&ceil, &[1, 1, 1, 3], &[1., 3., 4.], 0.0);
}

#[test]
fn ceil_mode_window_may_not_start_in_the_end_padding() {
    // I = 5, k = 2, s = 2, pads 1 and 1: three windows either way (docs/ir.md §6.10).
    let x = iota(&[1, 1, 1, 5]);
    let y = run_op(
        Op::MaxPool(pool([1, 2], [1, 2], [0, 1, 0, 1], true, false)),
        std::slice::from_ref(&x),
    );
    assert_close(&y, &[1, 1, 1, 3], &[0., 2., 4.], 0.0);
    let y = run_op(
        Op::AvgPool(pool([1, 2], [1, 2], [0, 1, 0, 1], true, false)),
        &[x],
    );
    assert_close(&y, &[1, 1, 1, 3], &[0., 1.5, 3.5], 0.0);
}

#[test]
fn avg_pool_excludes_padding_by_default() {
    let x = t(&[1, 1, 1, 3], &[1., 2., 3.]);
    let y = run_op(
        Op::AvgPool(pool([1, 3], [1, 1], [0, 1, 0, 1], false, false)),
        &[x],
    );
    assert_close(&y, &[1, 1, 1, 3], &[1.5, 2., 2.5], 1e-7);
}

#[test]
fn avg_pool_count_include_pad_divides_by_the_window() {
    let x = t(&[1, 1, 1, 3], &[1., 2., 3.]);
    let y = run_op(
        Op::AvgPool(pool([1, 3], [1, 1], [0, 1, 0, 1], false, true)),
        &[x],
    );
    assert_close(&y, &[1, 1, 1, 3], &[1., 2., 5. / 3.], 1e-7);
}

#[test]
fn avg_pool_count_include_pad_with_ceil_mode_clips_the_divisor_to_the_padded_input() {
    // I = 4, k = 3, s = 2, pads 1/1, ceil: windows start at -1, 1, 3; the last covers
    // [3, 6) of which only [3, 5) is inside the padded input: divisor 2.
    let x = t(&[1, 1, 1, 4], &[1., 2., 3., 4.]);
    let y = run_op(
        Op::AvgPool(pool([1, 3], [1, 2], [0, 1, 0, 1], true, true)),
        std::slice::from_ref(&x),
    );
    assert_close(&y, &[1, 1, 1, 3], &[1., 3., 2.], 1e-7);
    let y = run_op(
        Op::AvgPool(pool([1, 3], [1, 2], [0, 1, 0, 1], true, false)),
        &[x],
    );
    assert_close(&y, &[1, 1, 1, 3], &[1.5, 3., 4.], 1e-7);
}

#[test]
fn avg_pool_2x2_on_planes_and_channels() {
    let y = run_op(
        Op::AvgPool(pool([2, 2], [2, 2], [0; 4], false, false)),
        &[iota(&[1, 2, 2, 4])],
    );
    // channel 0: rows [0 1 2 3] [4 5 6 7]; channel 1: +8.
    assert_close(&y, &[1, 2, 1, 2], &[2.5, 4.5, 10.5, 12.5], 0.0);
}

#[test]
fn global_avg_pool_means_each_plane() {
    let y = run_op(Op::GlobalAvgPool, &[iota(&[1, 2, 2, 2])]);
    assert_close(&y, &[1, 2, 1, 1], &[1.5, 5.5], 0.0);
    let y = run_op(Op::GlobalAvgPool, &[iota(&[2, 1, 3])]);
    assert_close(&y, &[2, 1, 1], &[1., 4.], 0.0);
}
