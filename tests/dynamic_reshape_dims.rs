//! Reshape targets with sizes written in the dims (issue 18): `tests/dynamic/reshape_dims.tir`
//! flattens `[n, 4, h, w]` to `[n, 4, h*w]` with the target `[{n}, 4, -1]` (two symbolic
//! entries, as PP-OCRv4's text recogniser needs) and back with `[{n}, 4, {h}, {w}]`, and reads
//! `[n, k]` as `[n]`, which holds only where `k` is 1. One executable compiled with every dim
//! free (the compile's probe shapes must find `k = 1`) runs each shape with outputs bitwise
//! equal to the static compile's and within 1e-4 of the interpreter, every plan through the
//! independent checker; a `k` other than 1 is refused with the run-time check's message.

mod common;

use common::dynamic::{self as dynamic, Run};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const MODEL: &str = "tests/dynamic/reshape_dims.tir";

fn exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    dynamic::compiled("reshape-dims", MODEL, "n, h, w, k", &EXE)
}

#[test]
fn targets_written_in_dims_run_at_every_shape_like_the_static_compile() {
    let dir = dynamic::scratch("reshape-dims", "shapes");
    for (n, h, w) in [(2u64, 3u64, 5u64), (1, 7, 2), (3, 1, 1), (1, 16, 9)] {
        let run = Run {
            model: MODEL,
            dims: &[("n", n), ("h", h), ("w", w), ("k", 1)],
            inputs: &[
                ("x", vec![n, 4, h, w], n * 7 + h * 3 + w),
                ("y", vec![n, 1], n + 1),
            ],
            interpret: true,
        };
        dynamic::check(&dir, exe(), &run);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shape_the_checks_refuse_is_named_with_both_values() {
    let out = Command::new(exe())
        .args([
            "--dim", "n=2", "--dim", "h=3", "--dim", "w=5", "--dim", "k=2",
        ])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the run-time check n == k*n fails at n = 2, k = 2: 2 vs 4"),
        "{stderr}"
    );
}
