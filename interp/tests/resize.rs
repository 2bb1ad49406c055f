//! `resize`: every coordinate transformation mode, every nearest mode, bilinear.

mod common;
use common::*;
use tir_ir::op::{CoordMode, NearestMode, Op, Resize, ResizeMode};

fn resize(
    x: tir_interp::Tensor,
    size: [u64; 2],
    mode: ResizeMode,
    coord: CoordMode,
    nearest: NearestMode,
) -> Vec<f32> {
    let y = run_op(
        Op::Resize(Resize {
            size,
            scale: None,
            mode,
            coord,
            nearest,
        }),
        &[x],
    );
    assert_eq!(y.shape()[2..], size);
    values(&y).to_vec()
}

fn row(v: &[f32]) -> tir_interp::Tensor {
    t(&[1, 1, 1, v.len() as u64], v)
}

fn nearest(x: &[f32], out: u64, coord: CoordMode, mode: NearestMode) -> Vec<f32> {
    resize(row(x), [1, out], ResizeMode::Nearest, coord, mode)
}

fn bilinear(x: &[f32], out: u64, coord: CoordMode) -> Vec<f32> {
    resize(
        row(x),
        [1, out],
        ResizeMode::Bilinear,
        coord,
        NearestMode::RoundPreferFloor,
    )
}

const X3: [f32; 3] = [10., 20., 30.];

#[test]
fn nearest_asymmetric_ties_follow_the_nearest_mode() {
    // Coordinates o / 2: 0, 0.5, 1, 1.5, 2, 2.5.
    use NearestMode::*;
    assert_eq!(
        nearest(&X3, 6, CoordMode::Asymmetric, RoundPreferFloor),
        [10., 10., 20., 20., 30., 30.]
    );
    assert_eq!(
        nearest(&X3, 6, CoordMode::Asymmetric, RoundPreferCeil),
        [10., 20., 20., 30., 30., 30.]
    );
}

#[test]
fn nearest_floor_and_ceil() {
    // Coordinates o / 3: 0, .33, .67, 1, 1.33, 1.67, 2, 2.33, 2.67.
    use NearestMode::*;
    assert_eq!(
        nearest(&X3, 9, CoordMode::Asymmetric, Floor),
        [10., 10., 10., 20., 20., 20., 30., 30., 30.]
    );
    assert_eq!(
        nearest(&X3, 9, CoordMode::Asymmetric, Ceil),
        [10., 20., 20., 20., 30., 30., 30., 30., 30.]
    );
    assert_eq!(
        nearest(&X3, 9, CoordMode::Asymmetric, RoundPreferFloor),
        [10., 10., 20., 20., 20., 30., 30., 30., 30.]
    );
}

#[test]
fn nearest_half_pixel_upsampling() {
    // Coordinates (2o - 1) / 4: -0.25, 0.25, 0.75, 1.25.
    let y = nearest(
        &[10., 20.],
        4,
        CoordMode::HalfPixel,
        NearestMode::RoundPreferFloor,
    );
    assert_eq!(y, [10., 10., 20., 20.]);
}

#[test]
fn nearest_half_pixel_downsampling_hits_exact_ties() {
    // I = 4, O = 2: coordinates 2o + 0.5 exactly, so the nearest mode decides.
    let x = [0., 1., 2., 3.];
    assert_eq!(
        nearest(&x, 2, CoordMode::HalfPixel, NearestMode::RoundPreferFloor),
        [0., 2.]
    );
    assert_eq!(
        nearest(&x, 2, CoordMode::HalfPixel, NearestMode::RoundPreferCeil),
        [1., 3.]
    );
}

#[test]
fn nearest_align_corners() {
    // Coordinates o * 2 / 4: 0, 0.5, 1, 1.5, 2.
    let y = nearest(
        &X3,
        5,
        CoordMode::AlignCorners,
        NearestMode::RoundPreferCeil,
    );
    assert_eq!(y, [10., 20., 20., 30., 30.]);
}

#[test]
fn bilinear_align_corners() {
    assert_eq!(
        bilinear(&X3, 5, CoordMode::AlignCorners),
        [10., 15., 20., 25., 30.]
    );
}

#[test]
fn bilinear_half_pixel_clamps_at_the_borders() {
    assert_eq!(
        bilinear(&[10., 20.], 4, CoordMode::HalfPixel),
        [10., 12.5, 17.5, 20.]
    );
}

#[test]
fn bilinear_asymmetric() {
    let y = bilinear(&[10., 20.], 3, CoordMode::Asymmetric);
    assert_close(&row(&y), &[1, 1, 1, 3], &[10., 10. + 20. / 3., 20.], 1e-6);
}

#[test]
fn pytorch_half_pixel_differs_from_half_pixel_only_for_a_single_output() {
    assert_eq!(bilinear(&[10., 20.], 1, CoordMode::PytorchHalfPixel), [10.]);
    assert_eq!(bilinear(&[10., 20.], 1, CoordMode::HalfPixel), [15.]);
    assert_eq!(
        bilinear(&[10., 20.], 4, CoordMode::PytorchHalfPixel),
        bilinear(&[10., 20.], 4, CoordMode::HalfPixel)
    );
}

#[test]
fn bilinear_in_two_dimensions() {
    let y = resize(
        iota(&[1, 1, 2, 2]),
        [3, 3],
        ResizeMode::Bilinear,
        CoordMode::AlignCorners,
        NearestMode::RoundPreferFloor,
    );
    assert_eq!(y, [0., 0.5, 1., 1., 1.5, 2., 2., 2.5, 3.]);
}

#[test]
fn nearest_in_two_dimensions_on_several_channels() {
    // 2x upsampling of 1x2x2x2 with asymmetric floor: each pixel becomes a 2x2 block.
    let y = resize(
        iota(&[1, 2, 2, 2]),
        [4, 4],
        ResizeMode::Nearest,
        CoordMode::Asymmetric,
        NearestMode::Floor,
    );
    let block = |c: f32| -> Vec<f32> {
        let b = 4. * c;
        vec![
            b,
            b,
            b + 1.,
            b + 1.,
            b,
            b,
            b + 1.,
            b + 1.,
            b + 2.,
            b + 2.,
            b + 3.,
            b + 3.,
            b + 2.,
            b + 2.,
            b + 3.,
            b + 3.,
        ]
    };
    let want: Vec<f32> = [block(0.), block(1.)].concat();
    assert_eq!(y, want);
}
