//! CNNs with run-time image sizes (issue 18): one executable compiled from a model whose
//! height and width are symbolic runs every image size with outputs bitwise equal to the
//! static compile at that size (`--dim h=.. --dim w=..`) and within 1e-4 of the interpreter,
//! and every plan it makes passes the independent checker with each buffer as large as its
//! value at that size. `tests/dynamic/cnn.tir` (strided conv, max_pool with ceil_mode,
//! global_avg_pool) at odd and minimal sizes and random ones; `tests/dynamic/conv_variants.tir`
//! (every convolution and pooling case side by side); MobileNet v2 with symbolic H and W
//! (`tests/dynamic/mobilenet_v2.tir`), whose 1×1 last image takes the matrix-vector branch;
//! `tests/dynamic/pointwise_panels.tir`, pointwise convolutions whose weights the dynamic
//! compile packs in row panels, at every tile shape and on 1–3 threads;
//! `tests/dynamic/pointwise_chanvec.tir`, pointwise convolutions that run with vectors along
//! the output channels at the pixel counts where the static compile does, on 1–3 threads;
//! `tests/dynamic/depthwise_narrow.tir`, depthwise planes of at most one vector per row;
//! `tests/dynamic/depthwise_flat.tir`, flat depthwise planes in blocks of two groups and two
//! vectors; `tests/dynamic/depthwise_rows.tir`, interior depthwise rows in blocks of 8 and 4;
//! `tests/dynamic/depthwise_border.tir`, depthwise border rows with only the kernel rows
//! inside the image, four vector positions at a time;
//! `tests/dynamic/dense_tiles.tir`, dense convolutions in tiles of 8 output channels;
//! `tests/dynamic/squeeze_excite.tir`, pointwise convolutions on a constant 1×1 image with a
//! run-time batch; `tests/dynamic/pool_inside.tir`, pooling without padding whose windows
//! all lie inside the image.

mod common;

use common::dynamic::{self as dynamic, Run};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const CNN: &str = "tests/dynamic/cnn.tir";
const VARIANTS: &str = "tests/dynamic/conv_variants.tir";
const MOBILENET: &str = "tests/dynamic/mobilenet_v2.tir";
const PANELS: &str = "tests/dynamic/pointwise_panels.tir";
const CHANVEC: &str = "tests/dynamic/pointwise_chanvec.tir";
const NARROW: &str = "tests/dynamic/depthwise_narrow.tir";
const FLAT: &str = "tests/dynamic/depthwise_flat.tir";
const ROWS: &str = "tests/dynamic/depthwise_rows.tir";
const BORDER: &str = "tests/dynamic/depthwise_border.tir";
const DENSE: &str = "tests/dynamic/dense_tiles.tir";
const SQUEEZE: &str = "tests/dynamic/squeeze_excite.tir";
const POOL: &str = "tests/dynamic/pool_inside.tir";

fn scratch(test: &str) -> PathBuf {
    dynamic::scratch("cnn", test)
}

/// The dynamic executable of `model`, compiled once per test binary.
fn compiled(model: &str, cell: &'static OnceLock<PathBuf>) -> &'static Path {
    dynamic::compiled("cnn", model, "h, w", cell)
}

fn cnn_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(CNN, &EXE)
}

/// What one model is run with: its input's name and channels, and whether the interpreter
/// is run too (MobileNet's takes long in a debug build).
struct Case {
    model: &'static str,
    input: &'static str,
    channels: u64,
    interpret: bool,
}

/// [`dynamic::check`] at `(h, w)` on one image.
fn check(dir: &Path, case: &Case, exe: &Path, h: u64, w: u64) {
    let run = Run {
        model: case.model,
        dims: &[("h", h), ("w", w)],
        inputs: &[(case.input, vec![1, case.channels, h, w], h * 131 + w)],
        interpret: case.interpret,
    };
    let records = dynamic::check(dir, exe, &run);
    // Every value of the variants model is an output: its plan is empty.
    assert_eq!(records == 0, case.model == VARIANTS);
}

const CNN_CASE: Case = Case {
    model: CNN,
    input: "x",
    channels: 3,
    interpret: true,
};

#[test]
fn one_executable_runs_the_cnn_at_every_size_like_the_static_compile() {
    let dir = scratch("cnn");
    // 7×7 is the smallest the model's checks accept (its pool's ceil_mode adds a window
    // there); odd sizes, unequal sides, and rows wider than the interior vector blocks.
    for (h, w) in [(7, 7), (8, 9), (13, 30), (33, 70)] {
        check(&dir, &CNN_CASE, cnn_exe(), h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]
    #[test]
    fn random_image_sizes_match_the_static_compile(h in 7u64..=48, w in 7u64..=48) {
        let dir = scratch(&format!("prop{h}x{w}"));
        check(&dir, &CNN_CASE, cnn_exe(), h, w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn every_convolution_and_pooling_variant_matches_the_static_compile() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = compiled(VARIANTS, &EXE);
    let case = Case {
        model: VARIANTS,
        input: "x",
        channels: 4,
        interpret: true,
    };
    let dir = scratch("variants");
    // 3×5 is the smallest the checks accept (the dilated 1×3 taps need 5 columns): every
    // row and column a border one; 9×13 runs the "same" planes flat (at most 256 outputs
    // for depthwise, 1600 for the others); 30×70 runs every plane by rows, with interior
    // rows and vector blocks.
    for (h, w) in [(3, 5), (9, 13), (30, 70)] {
        check(&dir, &case, exe, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mobilenet_v2_runs_two_image_sizes_like_the_static_compile() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = compiled(MOBILENET, &EXE);
    let case = Case {
        model: MOBILENET,
        input: "input",
        channels: 3,
        interpret: false,
    };
    let dir = scratch("mobilenet");
    // 32×32 leaves a 1×1 image for the last 1×1 convolutions (the matrix-vector branch);
    // 40×72 a 2×3 one.
    for (h, w) in [(32, 32), (40, 72)] {
        check(&dir, &case, exe, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn panels_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(PANELS, &EXE)
}

const PANELS_CASE: Case = Case {
    model: PANELS,
    input: "x",
    channels: 20,
    interpret: true,
};

/// [`check`], then the dynamic executable again on 1, 2 and 3 threads (its tiles are whole
/// panels, a thread's share starting at a panel): every output the same bytes.
fn check_panels(dir: &Path, h: u64, w: u64) {
    check_threads(dir, &PANELS_CASE, panels_exe(), &["b.npy", "d.npy"], h, w);
}

/// [`check`] of `case` at `(h, w)`, then its dynamic executable `exe` on 1, 2 and 3 threads:
/// each of `outputs` the same bytes.
fn check_threads(dir: &Path, case: &Case, exe: &Path, outputs: &[&str], h: u64, w: u64) {
    check(dir, case, exe, h, w);
    let x = dir.join(format!("x{h}x{w}.npy"));
    dynamic::write_npy(&x, &[1, case.channels, h, w], h * 131 + w);
    let runs: Vec<Vec<Vec<u8>>> = [1, 2, 3]
        .iter()
        .map(|t| {
            let out = dir.join(format!("t{t}-{h}x{w}"));
            std::fs::create_dir_all(&out).expect("output dir");
            let run = std::process::Command::new(exe)
                .args(["--input", &format!("{}={}", case.input, dynamic::s(&x))])
                .args(["--output", &format!("{}/", dynamic::s(&out))])
                .args(["--threads", &t.to_string()])
                .output()
                .expect("run");
            dynamic::ok(run, "dynamic executable");
            outputs
                .iter()
                .map(|f| std::fs::read(out.join(f)).expect("output"))
                .collect()
        })
        .collect();
    assert!(
        runs.iter().all(|r| *r == runs[0]),
        "threads differ at {h}x{w}"
    );
}

/// Packed weights read at every tile shape of the run-time GEMM: one pixel (the
/// matrix-vector branch, each row gathered from its panel), 9, 25, 42 and 64 pixels (the
/// narrow tiles of one to four vectors: 12, 12, 8 and 6 rows at 16 lanes), 81 and 390 (whole
/// column blocks and a masked rest), a single row or column; every weight matrix has rows
/// past its last whole panel. A kernel that read the panels row-major fails every size.
#[test]
fn packed_pointwise_weights_match_the_static_compile_at_every_tile_shape() {
    let dir = scratch("panels");
    for (h, w) in [
        (1, 1),
        (3, 3),
        (5, 5),
        (6, 7),
        (8, 8),
        (9, 9),
        (13, 30),
        (1, 17),
    ] {
        check_panels(&dir, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]
    #[test]
    fn packed_pointwise_weights_match_at_random_sizes(h in 1u64..=12, w in 1u64..=12) {
        let dir = scratch(&format!("panels{h}x{w}"));
        check_panels(&dir, h, w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn chanvec_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(CHANVEC, &EXE)
}

const CHANVEC_CASE: Case = Case {
    model: CHANVEC,
    input: "x",
    channels: 128,
    interpret: true,
};

/// [`check_threads`] of the channel-vector model's outputs at each `(h, w)`.
fn check_chanvec_sizes(test: &str, sizes: &[(u64, u64)]) {
    let dir = scratch(test);
    for &(h, w) in sizes {
        check_threads(
            &dir,
            &CHANVEC_CASE,
            chanvec_exe(),
            &["a.npy", "c.npy"],
            h,
            w,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The channel-vector tiles at a run-time pixel count, on both sides of the static rule
/// (`gemm::chanvec_rows`, at 16 lanes: 2–289 pixels but the full pixel-vector tiles of 3
/// vectors or more): one pixel (the matrix-vector branch), 2 and 7 (one tile of every
/// pixel), 9, 10, 25 and 63 (tiles of 8 and a shorter last one), 36 and 49 (tiles of 6 and
/// 7: `chanvec::pixels`), 64 (8 tiles of 8), 48 (the pixel-vector tiles, full there), 65.
/// Every weight matrix has rows past its last whole 48-row panel or fewer than one. A
/// kernel that read the copy at the wrong place, or the first layout, fails these sizes.
#[test]
fn channel_vector_tiles_match_the_static_compile_at_every_pixel_count() {
    check_chanvec_sizes(
        "chanvec",
        &[
            (1, 1),
            (1, 2),
            (1, 7),
            (3, 3),
            (2, 5),
            (5, 5),
            (6, 6),
            (7, 7),
            (6, 8),
            (8, 8),
            (7, 9),
            (5, 13),
        ],
    );
}

/// Past 64 pixels, where the run-time rule once stopped (a one-word mask) and the static
/// compile runs these tiles up to 17×17: 10×10 (tiles of 8 and a last one of 4), 14×14
/// (tiles of 7, MobileNet v2's at 224), 13×13 (8 and 1), 17×17 (289, the rule's last count
/// and the largest scratch of partial sums, 700 input channels in 6 chunks); and the counts
/// the rule leaves to the pixel-vector tiles: 96 and 288 (full tiles of 6 and 18 vectors)
/// and 306 (past it).
#[test]
fn channel_vector_tiles_match_the_static_compile_past_64_pixels() {
    check_chanvec_sizes(
        "chanvec_large",
        &[
            (10, 10),
            (14, 14),
            (13, 13),
            (17, 17),
            (6, 16),
            (18, 16),
            (17, 18),
        ],
    );
}

fn narrow_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(NARROW, &EXE)
}

const NARROW_CASE: Case = Case {
    model: NARROW,
    input: "x",
    channels: 20,
    interpret: true,
};

/// Depthwise planes whose output rows are at most one vector and that do not run flat, row
/// by row over all the groups, at widths on both sides of one vector (at 16 lanes: the
/// stride-2 rows 16 and 17 wide at widths 32 and 33, the unpadded unit-stride ones at 18
/// and 19), one-pixel and tiny images (every tap of a row masked), on 1–3 threads.
#[test]
fn narrow_depthwise_rows_match_the_static_compile() {
    let dir = scratch("narrow");
    for (h, w) in [
        (3, 3),
        (4, 5),
        (6, 6),
        (7, 9),
        (13, 30),
        (9, 32),
        (5, 33),
        (3, 18),
        (8, 19),
    ] {
        check_threads(&dir, &NARROW_CASE, narrow_exe(), &["b.npy", "c.npy"], h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn flat_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(FLAT, &EXE)
}

const FLAT_CASE: Case = Case {
    model: FLAT,
    input: "x",
    channels: 7,
    interpret: true,
};

/// Flat depthwise planes, two groups and two vectors at a time with the last group and
/// vector alone: at 16 lanes planes of 1 vector (the lone vector only), 2 (one block), 3 (a
/// block and one alone), 16 (the largest flat plane, 16×16) and 15 vectors and a half (17×15),
/// on 1–3 threads.
#[test]
fn flat_depthwise_blocks_of_two_vectors_match_the_static_compile() {
    let dir = scratch("flat");
    for (h, w) in [(1, 1), (3, 5), (4, 8), (5, 7), (6, 8), (16, 16), (17, 15)] {
        check_threads(&dir, &FLAT_CASE, flat_exe(), &["b.npy"], h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn rows_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(ROWS, &EXE)
}

const ROWS_CASE: Case = Case {
    model: ROWS,
    input: "x",
    channels: 5,
    interpret: true,
};

/// Interior depthwise rows in blocks: at 16 lanes, rows of 20, 30, 33 and 80 outputs have no
/// block of 4 whole vectors and go 8 rows at a time (16 interior rows: two blocks; 19: two
/// and 3 alone; 11: one and 3; 8: one), rows of 81 and 100 go 4 at a time (12 rows: three
/// blocks; 9: two and one alone), and 40×150 both ways in its three convolutions; on 1–3
/// threads.
#[test]
fn depthwise_row_blocks_of_eight_and_four_match_the_static_compile() {
    let dir = scratch("rows");
    for (h, w) in [
        (18, 20),
        (21, 33),
        (13, 80),
        (10, 30),
        (14, 81),
        (11, 100),
        (40, 150),
    ] {
        check_threads(&dir, &ROWS_CASE, rows_exe(), &["b.npy", "c.npy"], h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn border_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(BORDER, &EXE)
}

const BORDER_CASE: Case = Case {
    model: BORDER,
    input: "x",
    channels: 6,
    interpret: true,
};

/// Depthwise rows with kernel rows outside the image, and interior rows no block takes,
/// four vector positions at a time with only the kernel rows inside: heights where the
/// 5×5/[2, 1] convolution has no interior row (2 output rows: the dilated one's smallest), one (3 rows, PP-OCRv4's
/// 6 → 3) and many; at 16 lanes rows of 2, 3 (PP-OCRv4's 40), 4, 5 and 9 vectors (one block
/// with positions past the row, whole blocks, two blocks and a part), on 1–3 threads.
#[test]
fn depthwise_border_rows_match_the_static_compile() {
    let dir = scratch("border");
    for (h, w) in [
        (3, 40),
        (4, 33),
        (6, 40),
        (7, 64),
        (6, 70),
        (30, 130),
        (13, 37),
    ] {
        check_threads(&dir, &BORDER_CASE, border_exe(), &["b.npy", "c.npy"], h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn dense_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(DENSE, &EXE)
}

const DENSE_CASE: Case = Case {
    model: DENSE,
    input: "x",
    channels: 4,
    interpret: true,
};

/// Dense convolutions in tiles of 8 output channels: a 2×2 image (one pixel after the stride,
/// every tap of the next convolution masked but its centre),
/// small planes (the unit-stride one flat), large ones (rows; masked column ends at widths
/// off the vector), on 1–3 threads.
#[test]
fn dense_tiles_of_eight_channels_match_the_static_compile() {
    let dir = scratch("dense");
    for (h, w) in [(2, 2), (5, 7), (12, 12), (30, 41), (64, 70)] {
        check_threads(&dir, &DENSE_CASE, dense_exe(), &["b.npy", "c.npy"], h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pointwise convolutions on a constant 1×1 image (after a global pool), dynamic only by
/// their batch: the matrix-vector product on row-major weights, at batches 1–3 and images
/// of one pixel, odd sizes and a wide one.
#[test]
fn squeeze_excite_convolutions_on_one_pixel_match_the_static_compile() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = dynamic::compiled("cnn", SQUEEZE, "n, h, w", &EXE);
    let dir = scratch("squeeze");
    for (n, h, w) in [(1, 1, 1), (1, 7, 9), (2, 12, 40), (3, 5, 80)] {
        let run = Run {
            model: SQUEEZE,
            dims: &[("n", n), ("h", h), ("w", w)],
            inputs: &[("x", vec![n, 32, h, w], n * 7 + h * 131 + w)],
            interpret: true,
        };
        dynamic::check(&dir, exe, &run);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pooling without padding: every window inside the image (3×40, PP-OCRv4's 3×2/3×2 onto
/// 1×20; 6×8 and 12×41 for the ceil_mode pools too) or a ceil_mode window past the end (odd
/// sizes: 7×9, 12×41's width), on 1–3 threads.
#[test]
fn pooling_windows_inside_the_image_match_the_static_compile() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = compiled(POOL, &EXE);
    let case = Case {
        model: POOL,
        input: "x0",
        channels: 5,
        interpret: true,
    };
    let dir = scratch("pool");
    let outputs = ["a.npy", "b.npy", "c.npy", "d.npy"];
    for (h, w) in [(3, 40), (6, 8), (7, 9), (12, 41), (3, 3)] {
        check_threads(&dir, &case, exe, &outputs, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
