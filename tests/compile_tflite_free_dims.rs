//! `tirc compile` of `.tflite` models with free dims through convolutions, pools,
//! CONCATENATION and FULLY_CONNECTED: a free height and width (`[1, -1, -1, 3]`) compile with
//! run-time extents into one executable that runs every image size, and a free batch through
//! FULLY_CONNECTED into one that runs every batch; at each shape the outputs are bitwise those
//! of the static model written at that shape, compiled.

mod support;

#[path = "../tflite/tests/common/mod.rs"]
mod common;

use common::*;
use support::*;
use tir_interp::{npy, Tensor};

/// Compiles `free` once and, per input shape, the static model `stat(shape)`; runs both.
fn same_as_static(
    dir: &std::path::Path,
    free: Vec<u8>,
    stat: &dyn Fn(&[u64]) -> Vec<u8>,
    shapes: &[Vec<u64>],
    out: &dyn Fn(&[u64]) -> Vec<u64>,
) {
    std::fs::write(dir.join("m.tflite"), free).unwrap();
    ok(tirc(dir, &["compile", "m.tflite", "-o", "m"]), "compile");
    for (i, shape) in shapes.iter().enumerate() {
        let n: u64 = shape.iter().product();
        let input = format!("x{i}.npy");
        let t = Tensor::f32(shape.clone(), values(n as usize, 50 + i as u64)).unwrap();
        std::fs::write(dir.join(&input), npy::write(&t).unwrap()).unwrap();
        let s = format!("s{i}");
        std::fs::write(dir.join(format!("{s}.tflite")), stat(shape)).unwrap();
        ok(
            tirc(dir, &["compile", &format!("{s}.tflite"), "-o", &s]),
            "static compile",
        );
        let want = run_exe_x(dir, &s, &input, &format!("want{i}.npy"));
        assert_eq!(want.shape(), out(shape).as_slice(), "{shape:?}");
        let got = run_exe_x(dir, "m", &input, &format!("got{i}.npy"));
        assert_eq!(got, want, "{shape:?}: the free-dim executable");
    }
}

#[test]
fn a_free_height_and_width_compile_for_every_size() {
    let dir = scratch("compile-tflite-free-dims", "hw");
    same_as_static(
        &dir,
        free_hw_model(8, 8, true),
        &|s| free_hw_model(s[1] as i32, s[2] as i32, false),
        &[vec![1, 8, 8, 3], vec![1, 5, 11, 3], vec![1, 12, 7, 3]],
        &|s| vec![1, (s[1] - 3) / 2 + 1, (s[2] - 3) / 2 + 1, 8],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fully_connected_compiles_for_every_batch() {
    let dir = scratch("compile-tflite-free-dims", "fc");
    same_as_static(
        &dir,
        free_batch_fc_model(1, true),
        &|s| free_batch_fc_model(s[0] as i32, false),
        &[vec![1, 2, 2, 3], vec![3, 2, 2, 3]],
        &|s| vec![s[0], 5],
    );
    let _ = std::fs::remove_dir_all(&dir);
}
