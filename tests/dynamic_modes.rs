//! The executable's modes on a model with run-time dims (issue 18): `--guard` (canaries after
//! every buffer at its run-time end, checked after every op) runs clean at several shapes with
//! the outputs of the static compile and a plan that passes the checker, and reports an
//! injected out-of-bounds store at its op, naming the buffer's slab bytes at the run-time
//! shape; `--threads N` gives the same bytes for every N.

mod common;

use common::dynamic::{self as dynamic, ok, tirc, Run};
use std::path::{Path, PathBuf};
use std::process::Command;

const CNN: &str = "tests/dynamic/cnn.tir";
const SHAPE_OPS: &str = "tests/dynamic/shape_ops.tir";
const BATCH_OPS: &str = "tests/dynamic/batch_ops.tir";
const VARIANTS: &str = "tests/dynamic/conv_variants.tir";
const MOBILENET: &str = "tests/dynamic/mobilenet_v2.tir";
const POINTWISE: &str = "tests/dynamic/pointwise.tir";
const TCONV: &str = "tests/dynamic/tconv.tir";

fn scratch(test: &str) -> PathBuf {
    dynamic::scratch("modes", test)
}

/// `tirc compile model -o dir/name --opt-level 1 extra...`, which must succeed and report
/// run-time dims.
fn compile(dir: &Path, model: &str, name: &str, extra: &[&str]) -> PathBuf {
    let exe = dir.join(name);
    let mut args = vec!["compile", model, "-o", dynamic::s(&exe), "--opt-level", "1"];
    args.extend(extra);
    let out = tirc(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("run-time dims"), "{stderr}");
    exe
}

#[test]
fn guarded_dynamic_executables_run_clean_at_every_shape_like_the_static_compile() {
    let dir = scratch("guard");
    // The CNN (strided convolution, ceil-mode pool, global pool, gemm) at its smallest
    // size, odd and unequal sides, and larger than both compile probes.
    let exe = compile(&dir, CNN, "cnn", &["--guard"]);
    for (h, w) in [(7, 7), (13, 30), (33, 70)] {
        let run = Run {
            model: CNN,
            dims: &[("h", h), ("w", w)],
            inputs: &[("x", vec![1, 3, h, w], h * 131 + w)],
            interpret: false,
        };
        assert!(dynamic::check(&dir, &exe, &run) > 0);
    }
    // Pads, concats, resizes, reductions.
    let exe = compile(&dir, SHAPE_OPS, "shape_ops", &["--guard"]);
    for (h, w) in [(3, 3), (9, 5), (17, 30)] {
        let run = Run {
            model: SHAPE_OPS,
            dims: &[("h", h), ("w", w)],
            inputs: &[("x", vec![1, 3, h, w], h * 7 + w)],
            interpret: false,
        };
        assert!(dynamic::check(&dir, &exe, &run) > 0);
    }
    // Gemms and concats along a run-time batch.
    let exe = compile(&dir, BATCH_OPS, "batch_ops", &["--guard"]);
    for (n, l) in [(1, 1), (7, 2), (19, 33)] {
        let run = Run {
            model: BATCH_OPS,
            dims: &[("n", n), ("l", l)],
            inputs: &[
                ("x", vec![n, 16], n * 5 + l),
                ("y", vec![n, 4, l], n + 3 * l),
            ],
            interpret: false,
        };
        assert!(dynamic::check(&dir, &exe, &run) > 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An off-by-one store after `max_pool`'s result (the hidden `--guard-fault-op`) is reported
/// at that op, with the buffer's bytes at the shape it runs: the canary watched is the one at
/// the run-time end, not at a compile probe's (the probes' images are 18×24 and 30×38; these
/// are smaller and larger).
#[test]
fn the_guard_reports_an_out_of_bounds_store_at_the_run_time_end_of_its_buffer() {
    let dir = scratch("fault");
    let broken = compile(&dir, CNN, "broken", &["--guard", "--guard-fault-op", "2"]);
    for (h, w) in [(7, 7), (13, 30), (40, 71)] {
        let x = dir.join(format!("x{h}x{w}.npy"));
        dynamic::write_npy(&x, &[1, 3, h, w], h + w);
        let input = format!("x={}", dynamic::s(&x));
        let run = Command::new(&broken)
            .args(["--input", &input])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        assert_eq!(run.status.code(), Some(3), "{h}x{w}: {err}");
        assert!(err.contains("`max_pool` (%2) wrote out of bounds"), "{err}");
        // `slab bytes [A, B)`: B − A is %2's size at this shape.
        let want = dynamic::value_bytes(CNN, &[("h", h), ("w", w)])["%2"];
        let span = err
            .split("slab bytes [")
            .nth(1)
            .and_then(|t| t.split(')').next())
            .expect("slab bytes in the report");
        let (a, b) = span.split_once(", ").expect("[A, B)");
        let (a, b) = (a.parse::<u64>().expect("A"), b.parse::<u64>().expect("B"));
        assert_eq!(b - a, want, "{h}x{w}: {err}");
        assert!(err.contains("at byte +0"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--threads 1`, `2` and `3` give the same bytes at every shape (and the outputs of a run
/// without the flag). The kernels with run-time extents are cut into tiles by the work at the
/// shape (issue 20: at least `MIN_TILE_FLOPS` each), so the larger shapes here are cut: the
/// variants' convolutions (groups, a channel multiplier, strides, dilations) at 60×140 and
/// 97×230 into 2–8 tiles of groups or channels, MobileNet v2's first layers at 96×128 and
/// 75×161 (channels of the 1×1 and dense convolutions, depthwise groups, the residual adds'
/// rows), the shape ops at 150×300 (batch_norm, the reductions) and the point-wise ops at
/// 150×300 (prelu, trilu, slices: rows of their outputs), pad, resize and concat at 150×300
/// and conv_transpose at 60×90 (rows of their outputs); there, the outputs are also
/// checked equal to the static compile's.
#[test]
fn every_thread_count_gives_the_same_bytes() {
    let dir = scratch("threads");
    for (model, name, input, shapes) in [
        (
            CNN,
            "cnn",
            "x",
            vec![vec![1, 3, 7, 7], vec![1, 3, 13, 30], vec![1, 3, 33, 70]],
        ),
        (
            SHAPE_OPS,
            "shape_ops",
            "x",
            // 150×300: batch_norm in 4 tiles of rows, the reductions over H·W in 2, pad
            // (three modes), resize and concat in tiles of rows or elements.
            vec![vec![1, 3, 3, 3], vec![1, 3, 17, 30], vec![1, 3, 150, 300]],
        ),
        (
            TCONV,
            "tconv",
            "x",
            // 60×90: every conv_transpose in tiles of output rows.
            vec![vec![1, 4, 1, 1], vec![1, 4, 7, 3], vec![1, 4, 60, 90]],
        ),
        (
            POINTWISE,
            "pointwise",
            "x",
            // 150×300: prelu and trilu in 4–8 tiles of rows, the slices in 1–2.
            vec![vec![1, 4, 5, 9], vec![1, 4, 150, 300]],
        ),
        (
            VARIANTS,
            "variants",
            "x",
            vec![vec![1, 4, 60, 140], vec![1, 4, 97, 230]],
        ),
        (
            MOBILENET,
            "mobilenet",
            "input",
            vec![vec![1, 3, 96, 128], vec![1, 3, 75, 161]],
        ),
    ] {
        let exe = compile(&dir, model, name, &[]);
        for shape in shapes {
            let tag: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            let tag = format!("{name}{}", tag.join("x"));
            let x = dir.join(format!("{tag}.npy"));
            let seed = shape[2] * 3 + shape[3];
            dynamic::write_npy(&x, &shape, seed);
            if shape[2] >= 60 {
                let run = Run {
                    model,
                    dims: &[("h", shape[2]), ("w", shape[3])],
                    inputs: &[(input, shape.clone(), seed)],
                    interpret: false,
                };
                assert!(
                    dynamic::check(&dir, &exe, &run) > 0 || model == VARIANTS || model == TCONV
                );
            }
            let input = format!("{input}={}", dynamic::s(&x));
            let run = |threads: Option<&str>| -> Vec<(String, Vec<u8>)> {
                let out = dir.join(format!("{tag}-{}", threads.unwrap_or("none")));
                std::fs::create_dir_all(&out).expect("output dir");
                let mut cmd = Command::new(&exe);
                cmd.args(["--input", &input])
                    .args(["--output", &format!("{}/", dynamic::s(&out))]);
                if let Some(t) = threads {
                    cmd.args(["--threads", t]);
                }
                ok(cmd.output().expect("run"), "dynamic executable");
                let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&out)
                    .expect("outputs")
                    .map(|e| {
                        let p = e.expect("entry").path();
                        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                        (n.to_string(), std::fs::read(&p).expect("output"))
                    })
                    .collect();
                files.sort();
                assert!(!files.is_empty());
                files
            };
            let one = run(Some("1"));
            for t in [None, Some("2"), Some("3")] {
                assert!(
                    run(t) == one,
                    "{tag}: --threads {t:?} differs from --threads 1"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
