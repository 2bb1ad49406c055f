//! Kernels with run-time extents for the copies, gathers, normalisations, reductions and
//! `gemm` (issue 18): one executable compiled from a model whose dims are symbolic runs every
//! shape with outputs bitwise equal to the static compile at that shape and within 1e-4 of
//! the interpreter, and every plan it makes passes the independent checker with each buffer
//! as large as its value at that shape (`common::dynamic::check`).
//! `tests/dynamic/shape_ops.tir`: pad (constant, reflect, edge), concat along the channels
//! and along the run-time width, resize by factors (nearest and bilinear, four coordinate
//! modes), batch_norm and reductions over the image. `tests/dynamic/batch_ops.tir`: gemm (a
//! pre-transposed weight with C, without C, a computed transposed B), batch_norm and
//! reductions over a run-time batch and length, concat along the batch.
//! `tests/dynamic/tconv.tir`: conv_transpose (strides, pads, output_padding, groups,
//! dilations, a stride above the kernel, a fused activation). `tests/dynamic/pointwise.tir`:
//! prelu (per channel and one slope), hard_sigmoid, split, slices counted from the run-time
//! end (steps 2 and −2), trilu upper and lower. And the refusal of an op without such a
//! kernel, naming the dim still free.

mod common;

use common::dynamic::{self as dynamic, ok, tirc, Run};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const SHAPE_OPS: &str = "tests/dynamic/shape_ops.tir";
const BATCH_OPS: &str = "tests/dynamic/batch_ops.tir";
const TCONV: &str = "tests/dynamic/tconv.tir";
const POINTWISE: &str = "tests/dynamic/pointwise.tir";

fn scratch(test: &str) -> PathBuf {
    dynamic::scratch("ops", test)
}

fn shape_ops_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    dynamic::compiled("ops", SHAPE_OPS, "h, w", &EXE)
}

fn batch_ops_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    dynamic::compiled("ops", BATCH_OPS, "n, l", &EXE)
}

fn tconv_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    dynamic::compiled("ops", TCONV, "h, w", &EXE)
}

fn pointwise_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    dynamic::compiled("ops", POINTWISE, "h, w", &EXE)
}

fn check_pointwise(dir: &Path, h: u64, w: u64) {
    let run = Run {
        model: POINTWISE,
        dims: &[("h", h), ("w", w)],
        inputs: &[("x", vec![1, 4, h, w], h * 13 + w)],
        interpret: true,
    };
    assert!(dynamic::check(dir, pointwise_exe(), &run) > 0);
}

fn check_image(dir: &Path, h: u64, w: u64) {
    let run = Run {
        model: SHAPE_OPS,
        dims: &[("h", h), ("w", w)],
        inputs: &[("x", vec![1, 3, h, w], h * 7 + w)],
        interpret: true,
    };
    assert!(dynamic::check(dir, shape_ops_exe(), &run) > 0);
}

fn check_batch(dir: &Path, n: u64, l: u64) {
    let run = Run {
        model: BATCH_OPS,
        dims: &[("n", n), ("l", l)],
        inputs: &[
            ("x", vec![n, 16], n * 5 + l),
            ("y", vec![n, 4, l], n + 3 * l),
        ],
        interpret: true,
    };
    assert!(dynamic::check(dir, batch_ops_exe(), &run) > 0);
}

#[test]
fn pad_concat_resize_and_reductions_run_every_image_size_like_the_static_compile() {
    let dir = scratch("image");
    // 3×3 is the smallest the reflect pads accept; unequal, odd and wider-than-a-vector
    // sides; one side of 1 after the checks (reflect needs 3) is not a shape of the model.
    for (h, w) in [(3, 3), (4, 7), (9, 5), (17, 30)] {
        check_image(&dir, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gemm_batch_norm_reductions_and_concat_run_every_batch_like_the_static_compile() {
    let dir = scratch("batch");
    // A batch of one (the matrix-vector shapes), odd batches and lengths, a batch wider
    // than the GEMM's row tile and the transposed product's columns more than a vector.
    for (n, l) in [(1, 1), (3, 5), (7, 2), (19, 33)] {
        check_batch(&dir, n, l);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn conv_transpose_runs_every_image_size_like_the_static_compile() {
    let dir = scratch("tconv");
    // 1×1 (the stride-3 output loses rows to its pads' crop at 1: 3h − 2 = 1), odd and
    // unequal sides, rows wider than the static kernel's vector blocks.
    for (h, w) in [(1, 1), (2, 5), (7, 3), (13, 30)] {
        let run = Run {
            model: TCONV,
            dims: &[("h", h), ("w", w)],
            inputs: &[("x", vec![1, 4, h, w], h * 3 + w)],
            interpret: true,
        };
        dynamic::check(&dir, tconv_exe(), &run);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slice_split_prelu_hard_sigmoid_and_trilu_run_every_size_like_the_static_compile() {
    let dir = scratch("pointwise");
    // 2×2 is the smallest with a non-empty slice (rows from 1 by 2, columns from w − 5,
    // clamped to 0, to w − 1); w below 5 clamps that start at run time, 7 and 30 do not;
    // square and unequal matrices for trilu's diagonals.
    for (h, w) in [(2, 2), (3, 7), (9, 4), (17, 30)] {
        check_pointwise(&dir, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]
    #[test]
    fn random_sizes_of_the_pointwise_ops_match_the_static_compile(h in 2u64..=24, w in 2u64..=24) {
        let dir = scratch(&format!("propp{h}x{w}"));
        check_pointwise(&dir, h, w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn random_image_sizes_match_the_static_compile(h in 3u64..=24, w in 3u64..=24) {
        let dir = scratch(&format!("prop{h}x{w}"));
        check_image(&dir, h, w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn random_batches_match_the_static_compile(n in 1u64..=24, l in 1u64..=24) {
        let dir = scratch(&format!("propb{n}x{l}"));
        check_batch(&dir, n, l);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A model whose op (`cumsum`) has no kernel with run-time extents, over symbolic `h` and
/// `w`: given `h` at compile time, the refusal names `w`, the dim still free.
#[test]
fn a_refusal_names_the_dim_left_free_not_one_given() {
    let dir = scratch("refusal");
    let model = dir.join("cs.tir");
    std::fs::write(
        &model,
        "module @cs {\n  func @main(%x: tensor<1x3x{h}x{w}xf32>) {\n    %y = cumsum(%x) {axis = 3}\n    return %y\n  }\n}\n",
    )
    .expect("write model");
    let exe = dir.join("cs");
    let m = dynamic::s(&model);
    let out = tirc(&["compile", m, "-o", dynamic::s(&exe), "--dim", "h=9"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "has no kernel with the run-time dim `w` yet; give it a value with --dim w=N"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("--dim h=N"), "{stderr}");
    // Neither given, the first of the op's dims is named.
    let out = tirc(&["compile", m, "-o", dynamic::s(&exe)]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("run-time dim `h` yet"), "{stderr}");
    // Both given, it compiles (the static program).
    ok(
        tirc(&[
            "compile",
            m,
            "-o",
            dynamic::s(&exe),
            "--dim",
            "h=9",
            "--dim",
            "w=4",
        ]),
        "static compile",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
