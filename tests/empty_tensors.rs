//! Every op with a zero-sized dimension in an operand (issue 17), on the interpreter and on the
//! JIT (`tirc run --engine jit`): no panic, and the same numbers from both. A reduction over
//! nothing is NaN (a mean) or -inf (a maximum) in both, as in NumPy; what has no answer at all,
//! a `resize` from an empty input to a non-empty output, is refused by the verifier.

mod support;

use std::path::Path;
use std::process::Output;
use support::*;
use tir_interp::npy;

/// Name, parameters, body (ending in `return`).
const CASES: &[(&str, &str, &str)] = &[
    ("resize_n0", "%x: tensor<0x1x3x3xf32>", "%y = resize(%x) {size = [6, 6], mode = bilinear}\n return %y"),
    ("conv_only_padding", "%x: tensor<1x3x0x0xf32>", "%w = const {name = \"w\"} : tensor<4x3x3x3xf32>\n %b = const {name = \"b\"} : tensor<4xf32>\n %y = conv2d(%x, %w, %b) {pads = [2, 2, 2, 2], activation = relu}\n return %y"),
    ("conv_no_channels", "%x: tensor<1x0x4x4xf32>", "%w = const {name = \"w\"} : tensor<4x0x3x3xf32>\n %b = const {name = \"b\"} : tensor<4xf32>\n %y = conv2d(%x, %w, %b)\n return %y"),
    ("matmul_k0", "%x: tensor<2x0xf32>", "%w = const {name = \"w\"} : tensor<0x3xf32>\n %y = matmul(%x, %w)\n return %y"),
    ("matmul_n0", "%x: tensor<1x3x4xf32>, %z: tensor<1x4x0xf32>", "%y = matmul(%x, %z)\n return %y"),
    ("matmul_batched_m0", "%x: tensor<2x0x4xf32>", "%w = const {name = \"w\"} : tensor<4x5xf32>\n %y = matmul(%x, %w)\n return %y"),
    ("gemm_k0", "%x: tensor<2x0xf32>", "%w = const {name = \"w\"} : tensor<3x0xf32>\n %b = const {name = \"b\"} : tensor<3xf32>\n %y = gemm(%x, %w, %b) {trans_b = true}\n return %y"),
    ("gemm_m0", "%x: tensor<0x4xf32>", "%w = const {name = \"w\"} : tensor<4x3xf32>\n %y = gemm(%x, %w)\n return %y"),
    ("add_broadcast", "%x: tensor<0x3xf32>", "%w = const {name = \"w\"} : tensor<1x3xf32>\n %y = add(%x, %w) {activation = relu}\n return %y"),
    ("div", "%x: tensor<0xf32>", "%y = div(%x, %x)\n return %y"),
    ("unary", "%x: tensor<2x0x3xf32>", "%a = sigmoid(%x)\n %b = gelu(%a)\n %c = clip(%b) {min = 0.0, max = 1.0}\n %d = hard_sigmoid(%c) {alpha = 0.2, beta = 0.5}\n %e = exp(%d)\n return %e"),
    ("prelu", "%x: tensor<1x0x2x2xf32>", "%s = const {name = \"s\"} : tensor<0x1x1xf32>\n %y = prelu(%x, %s)\n return %y"),
    ("max_pool_over_nothing", "%x: tensor<1x1x0x0xf32>", "%y = max_pool(%x) {kernel = [2, 2], pads = [1, 1, 1, 1]}\n return %y"),
    ("avg_pool_over_nothing", "%x: tensor<1x1x0x0xf32>", "%y = avg_pool(%x) {kernel = [2, 2], pads = [1, 1, 1, 1]}\n return %y"),
    ("avg_pool_over_padding", "%x: tensor<1x1x0x0xf32>", "%y = avg_pool(%x) {kernel = [2, 2], pads = [1, 1, 1, 1], count_include_pad = true}\n return %y"),
    ("global_avg_pool", "%x: tensor<1x3x0x0xf32>", "%y = global_avg_pool(%x)\n return %y"),
    ("reduce_mean", "%x: tensor<2x0xf32>", "%y = reduce_mean(%x) {axes = [1]}\n return %y"),
    ("reductions", "%x: tensor<2x0xf32>", "%a = reduce_sum(%x) {axes = [1]}\n %b = reduce_max(%x) {axes = [1]}\n %c = reduce_min(%x) {axes = [1]}\n %d = reduce_prod(%x) {axes = [1]}\n %e = reduce_log_sum_exp(%x) {axes = [1]}\n %f = reduce_l2(%x) {axes = [1]}\n return %a, %b, %c, %d, %e, %f"),
    ("log_softmax_empty_axis", "%x: tensor<2x0xf32>", "%y = log_softmax(%x) {axis = 1}\n return %y"),
    ("softmax_empty_axis", "%x: tensor<2x0xf32>", "%y = softmax(%x) {axis = 1}\n return %y"),
    ("softmax_empty_rows", "%x: tensor<0x4xf32>", "%y = softmax(%x) {axis = 1}\n return %y"),
    ("layer_norm_empty_axis", "%x: tensor<2x0xf32>", "%s = const {name = \"s\"} : tensor<0xf32>\n %y = layer_norm(%x, %s) {axis = 1}\n return %y"),
    ("layer_norm_empty_rows", "%x: tensor<0x4xf32>", "%s = const {name = \"s\"} : tensor<4xf32>\n %y = layer_norm(%x, %s) {axis = 1}\n return %y"),
    ("batch_norm", "%x: tensor<1x0x2x2xf32>", "%s = const {name = \"s\"} : tensor<0xf32>\n %b = const {name = \"b\"} : tensor<0xf32>\n %m = const {name = \"m\"} : tensor<0xf32>\n %v = const {name = \"v\"} : tensor<0xf32>\n %y = batch_norm(%x, %s, %b, %m, %v)\n return %y"),
    ("concat", "%x: tensor<1x0x2xf32>, %z: tensor<1x3x2xf32>", "%y = concat(%x, %z, %x) {axis = 1}\n return %y"),
    ("slice_to_nothing", "%x: tensor<4x3xf32>", "%y = slice(%x) {starts = [2], ends = [2], axes = [0]}\n return %y"),
    ("pad_constant", "%x: tensor<1x1x0x0xf32>", "%y = pad(%x) {pads = [0, 0, 1, 1, 0, 0, 1, 1], value = 2.5}\n return %y"),
    ("views", "%x: tensor<2x0x3xf32>", "%a = transpose(%x) {perm = [2, 0, 1]}\n %b = reshape(%a) {shape = [0, 6]}\n %c = flatten(%b) {axis = 1}\n %d = unsqueeze(%c) {axes = [0]}\n %e = squeeze(%d) {axes = [0]}\n return %e"),
];

fn run(dir: &Path, model: &str, engine: &str, out: &str) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(dir)
        .args(["run", model, "--engine", engine, "-o", out])
        .output()
        .unwrap()
}

/// The values of every `.npy` file in `dir`, by file name.
fn outputs(dir: &Path) -> Vec<(String, Vec<f32>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let t = npy::read(&std::fs::read(p).unwrap()).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, t.as_f32().unwrap().to_vec())
        })
        .collect()
}

#[test]
fn every_op_on_empty_operands_gives_the_same_values_on_both_engines() {
    let dir = scratch("empty", "sweep");
    for (name, params, body) in CASES {
        let model = format!("{name}.tir");
        std::fs::write(
            dir.join(&model),
            format!("module @m {{\n  func @main({params}) {{\n {body}\n  }}\n}}\n"),
        )
        .unwrap();
        let (i, j) = (format!("{name}.interp"), format!("{name}.jit"));
        for (engine, out) in [("interp", &i), ("jit", &j)] {
            let o = run(&dir, &model, engine, out);
            assert!(
                o.status.success(),
                "{name} on {engine}: {:?}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let (by_interp, by_jit) = (outputs(&dir.join(&i)), outputs(&dir.join(&j)));
        assert_eq!(by_interp.len(), by_jit.len(), "{name}");
        for ((file, a), (_, b)) in by_interp.iter().zip(&by_jit) {
            let same = a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()));
            assert!(same, "{name} {file}: interp {a:?}, jit {b:?}");
        }
    }
}

#[test]
fn resize_from_an_empty_input_is_refused_on_both_engines() {
    let dir = scratch("empty", "resize");
    std::fs::write(
        dir.join("m.tir"),
        "module @m {\n  func @main(%x: tensor<1x1x0x3xf32>) {\n    %y = resize(%x) {size = [4, 4], mode = nearest}\n    return %y\n  }\n}\n",
    )
    .unwrap();
    for engine in ["interp", "jit"] {
        let o = run(&dir, "m.tir", engine, "out");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{engine}: {err}");
        assert!(
            err.contains("m.tir:3:17: error: `resize`: nothing to interpolate from: the input tensor<1x1x0x3xf32> is empty along its spatial axes, the output tensor<1x1x4x4xf32> is not"),
            "{engine}: {err}"
        );
    }
}
