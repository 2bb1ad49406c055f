//! The `conv_transpose` kernel against the reference interpreter on random shapes and
//! attributes (groups, dilations, strides larger than the kernel, pads, output padding, bias,
//! activations, rows wide enough for the dense column loop), serial and cut into tiles for
//! threads: every thread count gives the same bits.

mod common;

use tir_codegen::{jit_run, jit_run_threads, Bufferized};
use tir_interp::weights::SplitMix64;
use tir_interp::Weights;

struct Rng(SplitMix64);
impl Rng {
    fn r(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.0.next_u64() % (hi - lo + 1)
    }
}

fn t(shape: &[u64]) -> String {
    let d: Vec<String> = shape.iter().map(|x| x.to_string()).collect();
    format!("tensor<{}xf32>", d.join("x"))
}

/// A random `conv_transpose` between a parameter and a flattening reshape (so its result
/// lives in the slab and is copied out).
fn case(rng: &mut Rng, wide: bool) -> String {
    let groups = [1, 1, 2, 3][rng.r(0, 3) as usize];
    let cg = rng.r(1, 3);
    let mg = rng.r(1, 8);
    let (kh, kw) = (rng.r(1, 4), rng.r(1, 4));
    let (sh, sw) = (rng.r(1, 3), rng.r(1, 3));
    let (dh, dw) = (rng.r(1, 2), rng.r(1, 2));
    let n = rng.r(1, 2);
    let h = rng.r(1, 6);
    let w = if wide { rng.r(20, 45) } else { rng.r(1, 7) };
    let full = |i: u64, s: u64, k: u64, d: u64| (i - 1) * s + (k - 1) * d + 1;
    let (fh, fw) = (full(h, sh, kh, dh), full(w, sw, kw, dw));
    // Pads that crop at most the full output, output padding below the stride or more.
    let pt = rng.r(0, (fh - 1).min(2));
    let pb = rng.r(0, (fh - 1 - pt).min(2));
    let pl = rng.r(0, (fw - 1).min(3));
    let pr = rng.r(0, (fw - 1 - pl).min(2));
    let (oph, opw) = (rng.r(0, 2), rng.r(0, 2));
    let bias = rng.r(0, 1) == 1;
    let act = [
        "",
        ", activation = relu",
        ", activation = relu6",
        ", activation = hard_swish",
    ][rng.r(0, 3) as usize];
    let c = cg * groups;
    let mut consts = format!(
        "    %w = const {{name = \"w\"}} : {}\n",
        t(&[c, mg, kh, kw])
    );
    let operands = if bias {
        consts += &format!("    %b = const {{name = \"b\"}} : {}\n", t(&[mg * groups]));
        "%x, %w, %b"
    } else {
        "%x, %w"
    };
    format!(
        "module @k {{\n  func @main(%x: {}) {{\n{consts}    %r = conv_transpose({operands}) {{strides = [{sh}, {sw}], dilations = [{dh}, {dw}], pads = [{pt}, {pl}, {pb}, {pr}], output_padding = [{oph}, {opw}], groups = {groups}{act}}}\n    %flat = reshape(%r) {{shape = [-1]}}\n    return %flat\n  }}\n}}\n",
        t(&[n, c, h, w])
    )
}

fn check(text: &str, threads: bool) {
    let module = tir_ir::parse_and_verify(text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    let weights = Weights::generate(&module, 7).unwrap();
    let inputs = common::inputs(&module);
    let expected = tir_interp::run(&module, &weights, &inputs).unwrap();
    let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();
    let mut m = common::planned(&module, "sharing=true");
    let proof = Bufferized::new(&mut m).unwrap();
    let got = jit_run(&proof, &weights, &ins).unwrap_or_else(|e| panic!("{e}\n{text}"));
    common::check_against_interpreter(text, &expected, &got);
    if threads {
        // Every op cut into as many tiles as it has units.
        let runs = jit_run_threads(&proof, &weights, &ins, &[0, 1, 2, 3], 0, common::OPT)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        common::check_against_interpreter(text, &expected, &runs[0]);
        let serial = common::bits(&runs[0]);
        for run in &runs[1..] {
            assert!(
                common::bits(run) == serial,
                "threads change the bits\n{text}"
            );
        }
    }
}

#[test]
fn conv_transpose_randomised() {
    let mut rng = Rng(SplitMix64(11));
    for k in 0..16 {
        check(&case(&mut rng, k % 4 == 3), false);
    }
}

#[test]
fn conv_transpose_tiles_for_threads_give_the_same_bits() {
    let mut rng = Rng(SplitMix64(12));
    for k in 0..4 {
        check(&case(&mut rng, k % 2 == 1), true);
    }
}

#[test]
fn upsampling_by_the_kernel_size() {
    // Selfie segmentation's shape of layer: 2×2 kernel, stride 2, 16 → 8 channels.
    let text = "module @k {
  func @main(%x: tensor<1x16x9x13xf32>) {
    %w = const {name = \"w\"} : tensor<16x8x2x2xf32>
    %b = const {name = \"b\"} : tensor<8xf32>
    %r = conv_transpose(%x, %w, %b) {strides = [2, 2]}
    %flat = reshape(%r) {shape = [-1]}
    return %flat
  }
}
";
    check(text, true);
}

/// One output channel (selfie segmentation's last layer: 16 → 1, 2×2 stride 2, sigmoid) is
/// cut by bands of phase rows: bands with the border rows of padded kernels, an odd count of
/// output rows (output padding), stride 3 and two images; the activation runs over each
/// band's rows.
#[test]
fn one_output_channel_is_cut_by_bands_of_rows() {
    for (x, w, attrs) in [
        (
            "1x16x9x13",
            "16x1x2x2",
            "strides = [2, 2], activation = sigmoid",
        ),
        (
            "2x3x11x7",
            "3x1x3x3",
            "strides = [2, 2], pads = [1, 1, 0, 1], output_padding = [1, 0], activation = relu6",
        ),
        (
            "1x4x10x9",
            "4x2x4x3",
            "strides = [3, 2], pads = [2, 0, 1, 1], activation = hard_swish",
        ),
    ] {
        let text = format!(
            "module @k {{
  func @main(%x: tensor<{x}xf32>) {{
    %w = const {{name = \"w\"}} : tensor<{w}xf32>
    %r = conv_transpose(%x, %w) {{{attrs}}}
    %flat = reshape(%r) {{shape = [-1]}}
    return %flat
  }}
}}
"
        );
        check(&text, true);
    }
}
