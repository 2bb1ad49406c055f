//! Arithmetic binary ops with run-time extents computed in flat runs of vectors (issue 18,
//! `codegen/src/dynamic/pointwise.rs` `binary_runs`): an operand broadcast along the
//! result's innermost axes (a scalar, a per-channel vector, a row) is splat once per run, one
//! of the result's shape is loaded as vectors, the last vector of each run is masked. One
//! executable of `tests/dynamic/binary_runs.tir` runs every image size with outputs bitwise
//! equal to the static compile at that size and within 1e-4 of the interpreter, every plan
//! through the independent checker (`common::dynamic::check`), at sizes whose runs are
//! shorter than a vector, a whole number of vectors, and vectors plus a tail.

mod common;

use common::dynamic::{self as dynamic, Run};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const MODEL: &str = "tests/dynamic/binary_runs.tir";

fn exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    dynamic::compiled("binary_runs", MODEL, "h, w", &EXE)
}

fn check(dir: &Path, h: u64, w: u64) {
    let run = Run {
        model: MODEL,
        dims: &[("h", h), ("w", w)],
        inputs: &[
            ("x", vec![1, 4, h, w], h * 11 + w),
            ("y", vec![1, 4, h, w], h + 5 * w),
        ],
        interpret: true,
    };
    assert!(dynamic::check(dir, exe(), &run) > 0);
}

#[test]
fn broadcast_operands_in_vector_runs_match_the_static_compile_at_every_size() {
    let dir = dynamic::scratch("binary_runs", "sizes");
    // Runs of 1 element, shorter than a vector (w = 3), exactly two 16-lane vectors
    // (w = 32), vectors and a tail (w = 37, h · w = 185), and a single row (h = 1).
    for (h, w) in [(1, 1), (2, 3), (4, 32), (5, 37), (1, 50)] {
        check(&dir, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]
    #[test]
    fn random_sizes_of_the_broadcast_runs_match_the_static_compile(h in 1u64..=20, w in 1u64..=40) {
        let dir = dynamic::scratch("binary_runs", &format!("prop{h}x{w}"));
        check(&dir, h, w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
