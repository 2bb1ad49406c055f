//! `tirc import` / `compile` / `run` of a `.tflite` whose input's `shape_signature` is
//! `[-1, 8, 8, 3]`: the import keeps the batch as `x.d0`, `--dim x.d0=N` pins it, and at batch
//! 1 and 3 the free-batch model's outputs (the executable and `tirc run`) are bitwise those of
//! the static model written at that batch.

mod support;

#[path = "../tflite/tests/common/mod.rs"]
mod common;

use common::*;
use support::*;
use tir_interp::{npy, Tensor};
use tir_tflite::schema::BuiltinOperator as B;

/// The shared free-batch model (`common::free_batch_model`), the input's signature
/// `[-1, 8, 8, 3]` when `free`.
fn model(batch: i32, free: bool) -> Vec<u8> {
    free_batch_model(batch, free.then_some(&[-1, 8, 8, 3][..]))
}

#[test]
fn a_free_batch_imports_pins_and_runs_every_batch() {
    let dir = scratch("compile-tflite-free-batch", "runs");
    std::fs::write(dir.join("m.tflite"), model(1, true)).unwrap();
    ok(tirc(&dir, &["import", "m.tflite", "-o", "m.tir"]), "import");
    let text = std::fs::read_to_string(dir.join("m.tir")).unwrap();
    assert!(
        text.contains("%x: tensor<{x.d0}x8x8x3xf32>"),
        "the batch stays free:\n{text}"
    );
    ok(
        tirc(
            &dir,
            &["import", "m.tflite", "-o", "p.tir", "--dim", "x.d0=3"],
        ),
        "import --dim",
    );
    let text = std::fs::read_to_string(dir.join("p.tir")).unwrap();
    assert!(text.contains("%x: tensor<3x8x8x3xf32>"), "pinned:\n{text}");
    // One executable, compiled at batch 1, runs every batch.
    ok(tirc(&dir, &["compile", "m.tflite", "-o", "m"]), "compile");
    for batch in [1u64, 3] {
        let input = format!("x{batch}.npy");
        let data = values(batch as usize * 192, 20 + batch);
        let t = Tensor::f32(vec![batch, 8, 8, 3], data).unwrap();
        std::fs::write(dir.join(&input), npy::write(&t).unwrap()).unwrap();
        let stat = format!("s{batch}");
        std::fs::write(
            dir.join(format!("{stat}.tflite")),
            model(batch as i32, false),
        )
        .unwrap();
        ok(
            tirc(&dir, &["compile", &format!("{stat}.tflite"), "-o", &stat]),
            "static compile",
        );
        let want = run_exe_x(&dir, &stat, &input, &format!("want{batch}.npy"));
        assert_eq!(want.shape(), &[batch, 256]);
        let got = run_exe_x(&dir, "m", &input, &format!("got{batch}.npy"));
        assert_eq!(got, want, "batch {batch}: the free-batch executable");
        let pinned = format!("p{batch}");
        let dim = format!("x.d0={batch}");
        ok(
            tirc(&dir, &["compile", "m.tflite", "-o", &pinned, "--dim", &dim]),
            "compile --dim",
        );
        let got = run_exe_x(&dir, &pinned, &input, &format!("pin{batch}.npy"));
        assert_eq!(got, want, "batch {batch}: compiled with --dim");
        let out = format!("run{batch}.npy");
        ok(
            tirc(
                &dir,
                &[
                    "run",
                    "m.tir",
                    "--weights",
                    "m.safetensors",
                    "--input",
                    &format!("x={input}"),
                    "-o",
                    &out,
                ],
            ),
            "run",
        );
        let interp = read_npy(&dir, &out);
        assert_eq!(interp.shape(), &[batch, 256]);
        let (a, b) = (interp.as_f32().unwrap(), want.as_f32().unwrap());
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x - y).abs() <= 1e-5,
                "batch {batch}: interpreter {x}, exe {y}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_static_reshape_of_the_free_batch_is_refused() {
    let dir = scratch("compile-tflite-free-batch", "refused");
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 4]);
    m.tensors[tx as usize].signature = Some(vec![-1, 4]);
    let shape = m.i32("shape", &[2], &[2, 2]);
    let ty = m.act("y", &[2, 2]);
    m.op(B::RESHAPE, &[tx, shape], &[ty], Opts::None);
    m.outputs.push(ty);
    std::fs::write(dir.join("bad.tflite"), m.build()).unwrap();
    for args in [
        &["import", "bad.tflite", "-o", "bad.tir"][..],
        &["compile", "bad.tflite", "-o", "bad"][..],
    ] {
        let out = tirc(&dir, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out),
            "bad.tflite: error: operator 0 (RESHAPE): tensor 0 `x` depends on the free dim `x.d0` \
             (a `-1` in the input's `shape_signature`), and RESHAPE's new shape [2, 2] has no `-1` \
             to take it: tir's TFLite importer cannot express it for every value of `x.d0`; \
             `--dim x.d0=1` (the extent of the file's static shapes) pins it\n"
        );
    }
    ok(
        tirc(
            &dir,
            &["import", "bad.tflite", "-o", "ok.tir", "--dim", "x.d0=1"],
        ),
        "pinned",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
