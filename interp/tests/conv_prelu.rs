//! The reference interpreter's fused PReLU (`conv2d(x, w, b[, s], slope) {activation =
//! prelu}`) gives exactly the bits of the unfused `prelu(add(conv2d(x, w, b), s), slope)`,
//! for each slope spelling (`[M]` against the unfused `[M, 1, 1]`, `[1, M, 1, 1]`, one
//! value), with and without a residual, on dense, grouped and depthwise convolutions, and
//! negative results do meet the slope (so the test would see a slope ignored or misread).

use tir_interp::weights::random_input;
use tir_interp::{Tensor, Weights};

fn t(shape: &[u64]) -> String {
    let d: Vec<String> = shape.iter().map(|x| x.to_string()).collect();
    format!("tensor<{}xf32>", d.join("x"))
}

fn run(text: &str) -> Vec<f32> {
    let module = tir_ir::parse_and_verify(text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    let func = module.entry().expect("entry");
    let mut weights = Weights::generate(&module, 5).expect("weights");
    // Slopes of both signs and zero, named alike in both modules so the values match.
    let a = weights.get("a").expect("slope");
    let v: Vec<f32> = (0..a.as_f32().unwrap().len())
        .map(|i| [0.25, -1.5, 0.0, 3.0][i % 4])
        .collect();
    weights.insert("a", Tensor::f32(a.shape().to_vec(), v).unwrap());
    let inputs: Vec<Tensor> = func
        .params
        .iter()
        .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 9).unwrap())
        .collect();
    tir_interp::run(&module, &weights, &inputs).expect("interp")[0]
        .as_f32()
        .unwrap()
        .to_vec()
}

fn module(x: &[u64], w: &[u64], o: &[u64], residual: bool, a: &[u64], body: &str) -> String {
    let s = if residual {
        format!(", %s: {}", t(o))
    } else {
        String::new()
    };
    format!(
        "module @k {{\n  func @main(%x: {}{s}) {{\n    %w = const {{name = \"w\"}} : {}\n    %b = const {{name = \"b\"}} : {}\n    %a = const {{name = \"a\"}} : {}\n{body}    return %r\n  }}\n}}\n",
        t(x),
        t(w),
        t(&[w[0]]),
        t(a)
    )
}

fn check(x: &[u64], w: &[u64], groups: u64, residual: bool, fa: &[u64], ua: &[u64]) {
    let o = [x[0], w[0], x[2], x[3]];
    let attrs = format!("pads = [1, 1, 1, 1], groups = {groups}");
    let s = if residual { ", %s" } else { "" };
    let fused = module(
        x,
        w,
        &o,
        residual,
        fa,
        &format!("    %r = conv2d(%x, %w, %b{s}, %a) {{{attrs}, activation = prelu}}\n"),
    );
    let (add, y) = if residual {
        ("    %y = add(%c, %s)\n", "%y")
    } else {
        ("", "%c")
    };
    let unfused = module(
        x,
        w,
        &o,
        residual,
        ua,
        &format!("    %c = conv2d(%x, %w, %b) {{{attrs}}}\n{add}    %r = prelu({y}, %a)\n"),
    );
    let f = run(&fused);
    let u = run(&unfused);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&f), bits(&u), "{fused}");
    assert!(f.iter().any(|&v| v < 0.0), "no negative output: {fused}");
}

#[test]
fn fused_prelu_is_the_unfused_prelu_bit_for_bit() {
    let m = [6, 1, 1];
    check(&[1, 4, 5, 5], &[6, 4, 3, 3], 1, true, &[6], &m);
    check(&[1, 4, 5, 5], &[6, 4, 3, 3], 1, false, &[6, 1, 1], &m);
    check(
        &[2, 4, 6, 5],
        &[6, 2, 3, 3],
        2,
        true,
        &[1, 6, 1, 1],
        &[1, 6, 1, 1],
    );
    check(&[1, 6, 7, 7], &[6, 1, 3, 3], 6, true, &[1], &[1]);
    check(
        &[1, 6, 7, 7],
        &[6, 1, 3, 3],
        6,
        false,
        &[1, 1, 1],
        &[1, 1, 1],
    );
}
