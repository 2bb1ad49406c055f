//! Every kernel against the reference interpreter, on small randomised shapes (odd sizes,
//! strides, dilations, groups, padding, broadcasting), through the JIT.

use tir_codegen::{jit_run, jit_run_on, jit_run_threads, target_spec, Bufferized};
use tir_interp::weights::{random_input, SplitMix64};
use tir_interp::{Tensor, Weights};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

/// Runs `text` through the interpreter and through codegen (after `plan{plan},bufferize`) and
/// returns both outputs.
pub fn both(text: &str, plan: &str) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    both_with(text, plan, None)
}

/// [`both`] with the parameters' values given (`None`: random inputs).
pub fn both_with(
    text: &str,
    plan: &str,
    given: Option<Vec<Tensor>>,
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let module = tir_ir::parse_and_verify(text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    let func = module.entry().expect("entry");
    let weights = Weights::generate(&module, 7).expect("weights");
    let inputs: Vec<Tensor> = given.unwrap_or_else(|| {
        func.params
            .iter()
            .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 3).unwrap())
            .collect()
    });
    let expected: Vec<Vec<f32>> = tir_interp::run(&module, &weights, &inputs)
        .expect("interp")
        .into_iter()
        .map(|t| t.as_f32().unwrap().to_vec())
        .collect();
    let mut m = module.clone();
    let passes = parse_pipeline(&format!("plan{{{plan}}},bufferize")).unwrap();
    run_pipeline(&mut m, &passes, true, |_, _| {}).expect("pipeline");
    let proof = Bufferized::new(&mut m).expect("bufferized");
    let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();
    let got = jit_run(&proof, &weights, &ins).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // Every kernel cut into its smallest tiles (issue 20), run serially and on 1, 2 and 3
    // threads: the same bits every way, and the interpreter's values as the uncut kernel's
    // (checked by the callers on `got`, here against it within the same tolerance).
    let threads = [0, 1, 2, 3];
    let runs = jit_run_threads(&proof, &weights, &ins, &threads, 0, 1)
        .unwrap_or_else(|e| panic!("tiled: {e}\n{text}"));
    for (n, run) in threads.iter().zip(&runs).skip(1) {
        assert!(
            runs[0]
                .iter()
                .zip(run)
                .all(|(a, b)| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())),
            "{n} threads differ from the serial tiled run\n{text}"
        );
    }
    for (e, t) in expected.iter().zip(&runs[0]) {
        for (i, (a, b)) in e.iter().zip(t).enumerate() {
            let ok = a == b
                || (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-5
                || (a.is_nan() && b.is_nan());
            assert!(
                ok,
                "tiled kernels, element {i}: reference {a}, generated {b}\n{text}"
            );
        }
    }
    (expected, got)
}

pub fn check(text: &str) {
    check_with(text, None)
}

/// [`check`] on given parameter values.
pub fn check_with(text: &str, given: Option<Vec<Tensor>>) {
    let (expected, got) = both_with(text, "sharing=true", given);
    assert_eq!(expected.len(), got.len());
    for (e, g) in expected.iter().zip(&got) {
        assert_eq!(e.len(), g.len());
        for (i, (a, b)) in e.iter().zip(g).enumerate() {
            let ok = a == b
                || (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-5
                || (a.is_nan() && b.is_nan());
            assert!(ok, "element {i}: reference {a}, generated {b}\n{text}");
        }
    }
}

fn t(shape: &[u64]) -> String {
    let d: Vec<String> = shape.iter().map(|x| x.to_string()).collect();
    format!("tensor<{}xf32>", d.join("x"))
}

/// One op between a parameter `%x` (and optional second parameter `%y`) and a flattening
/// reshape, so the op's result lives in the slab and is copied out.
fn model(params: &[(&str, Vec<u64>)], consts: &[(&str, Vec<u64>)], op: &str) -> String {
    let ps: Vec<String> = params
        .iter()
        .map(|(n, s)| format!("%{n}: {}", t(s)))
        .collect();
    let mut body = String::new();
    for (n, s) in consts {
        body += &format!("    %{n} = const {{name = \"{n}\"}} : {}\n", t(s));
    }
    format!(
        "module @k {{\n  func @main({}) {{\n{body}    %r = {op}\n    %flat = reshape(%r) {{shape = [-1]}}\n    return %flat\n  }}\n}}\n",
        ps.join(", ")
    )
}

struct Rng(SplitMix64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64(seed))
    }
    fn r(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.0.next_u64() % (hi - lo + 1)
    }
}

#[test]
fn unary_and_activation_kernels() {
    for op in [
        "relu",
        "relu6",
        "sigmoid",
        "tanh",
        "hard_swish",
        "gelu",
        "exp",
    ] {
        check(&model(
            &[("x", vec![2, 3, 5, 7])],
            &[],
            &format!("{op}(%x)"),
        ));
    }
    check(&model(
        &[("x", vec![37])],
        &[],
        "clip(%x) {min = -0.5, max = 0.25}",
    ));
    check(&model(
        &[("x", vec![3, 11])],
        &[],
        "hard_sigmoid(%x) {alpha = 0.2, beta = 0.5}",
    ));
}

#[test]
fn binary_broadcasting_and_fused_activations() {
    let mut rng = Rng::new(1);
    let shapes: [(Vec<u64>, Vec<u64>); 6] = [
        (vec![2, 3, 5, 7], vec![2, 3, 5, 7]),
        (vec![2, 3, 5, 7], vec![3, 1, 1]),
        (vec![1, 3, 1, 7], vec![2, 1, 5, 1]),
        (vec![5, 1], vec![1, 6]),
        (vec![4, 9], vec![1]),
        (vec![1], vec![3, 17]),
    ];
    for (i, (a, b)) in shapes.iter().enumerate() {
        let op = ["add", "sub", "mul", "div"][i % 4];
        let act = [
            "",
            " {activation = relu}",
            " {activation = relu6}",
            " {activation = hard_swish}",
            " {activation = sigmoid}",
            " {activation = tanh}",
        ][rng.r(0, 5) as usize];
        check(&model(
            &[("x", a.clone()), ("y", b.clone())],
            &[],
            &format!("{op}(%x, %y){act}"),
        ));
    }
    // A weight operand (broadcast per channel), and prelu.
    check(&model(
        &[("x", vec![1, 4, 3, 5])],
        &[("s", vec![4, 1, 1])],
        "mul(%x, %s)",
    ));
    check(&model(
        &[("x", vec![1, 4, 3, 5])],
        &[("slope", vec![4, 1, 1])],
        "prelu(%x, %slope)",
    ));
}

#[test]
fn conv2d_randomised() {
    let mut rng = Rng::new(2);
    for case in 0..14 {
        let groups = [1, 1, 2, 3][rng.r(0, 3) as usize];
        let depthwise = case % 4 == 3;
        let cg = if depthwise { 1 } else { rng.r(1, 3) };
        let groups = if depthwise { rng.r(2, 5) } else { groups };
        let c = cg * groups;
        let m = if depthwise { c } else { groups * rng.r(1, 4) };
        let (kh, kw) = (rng.r(1, 3), rng.r(1, 3));
        let (sh, sw) = (rng.r(1, 2), rng.r(1, 3));
        let (dh, dw) = (rng.r(1, 2), rng.r(1, 2));
        let pads = [rng.r(0, 2), rng.r(0, 2), rng.r(0, 2), rng.r(0, 1)];
        let n = rng.r(1, 2);
        let (h, w) = (rng.r(kh * dh, 9), rng.r(kw * dw, 11));
        let bias = rng.r(0, 1) == 1;
        let act = [
            "",
            ", activation = relu",
            ", activation = relu6",
            ", activation = hard_swish",
        ][rng.r(0, 3) as usize];
        let operands = if bias { "%x, %w, %b" } else { "%x, %w" };
        let mut consts = vec![("w", vec![m, cg, kh, kw])];
        if bias {
            consts.push(("b", vec![m]));
        }
        check(&model(
            &[("x", vec![n, c, h, w])],
            &consts,
            &format!(
                "conv2d({operands}) {{strides = [{sh}, {sw}], dilations = [{dh}, {dw}], pads = [{}, {}, {}, {}], groups = {groups}{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
}

#[test]
fn conv2d_wide_rows_implicit_im2col() {
    // Rows wide enough for the implicit-im2col tiles' clean column blocks (one loop over
    // them) next to masked border blocks; output channels that leave a row tail of the
    // channel tile; strides 1-3, dilations, asymmetric padding, groups.
    let mut rng = Rng::new(5);
    for case in 0..6 {
        let groups = [1, 2][case % 2];
        let cg = rng.r(1, 3);
        let m = groups * rng.r(1, 8);
        let (kh, kw) = (rng.r(1, 5), rng.r(2, 5));
        let (sh, sw) = (rng.r(1, 2), rng.r(1, 3));
        let (dh, dw) = (rng.r(1, 2), rng.r(1, 2));
        let pads = [rng.r(0, 2), rng.r(0, 3), rng.r(0, 2), rng.r(0, 3)];
        let h = rng.r(kh * dh, kh * dh + 5);
        let w = rng.r(40, 140);
        let act = ["", ", activation = relu"][case % 2];
        check(&model(
            &[("x", vec![1, cg * groups, h, w])],
            &[("w", vec![m, cg, kh, kw]), ("b", vec![m])],
            &format!(
                "conv2d(%x, %w, %b) {{strides = [{sh}, {sw}], dilations = [{dh}, {dw}], pads = [{}, {}, {}, {}], groups = {groups}{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
}

/// Several implicit-im2col channel tiles (6 output channels each) and a row tail, on
/// outputs too big to be row-packed: a stem-like 7×7/2 of 3 channels, a strided 3×3 with
/// groups, a dilated stride-1 kernel on 147-wide rows.
#[test]
fn conv2d_im2col_full_channel_tiles() {
    for (x, w, attrs) in [
        (
            vec![1, 3, 90, 90],
            vec![29, 3, 7, 7],
            "strides = [2, 2], pads = [3, 3, 3, 3], activation = relu",
        ),
        (
            vec![1, 4, 90, 103],
            vec![50, 2, 3, 3],
            "strides = [2, 2], pads = [1, 0, 1, 1], groups = 2",
        ),
        (vec![1, 2, 14, 147], vec![24, 2, 3, 2], "dilations = [1, 2]"),
    ] {
        let m = w[0];
        check(&model(
            &[("x", x)],
            &[("w", w), ("b", vec![m])],
            &format!("conv2d(%x, %w, %b) {{{attrs}}}"),
        ));
    }
}

/// Implicit-im2col convolutions whose image outweighs their weights are cut by bands of
/// output rows (selfie_segmentation's and pose_detection's first layers): bands with the top
/// and bottom border rows (padding), a dilated kernel, odd row counts (49 rows in 8 bands),
/// and a residual and PReLU in the epilogue.
#[test]
fn conv2d_im2col_cut_by_output_rows() {
    for (x, w, attrs) in [
        (
            vec![1, 3, 97, 80],
            vec![16, 3, 3, 3],
            "strides = [2, 2], pads = [1, 1, 1, 1], activation = hard_swish",
        ),
        (
            vec![1, 3, 60, 90],
            vec![24, 3, 3, 3],
            "strides = [2, 2], pads = [0, 0, 1, 1], activation = relu6",
        ),
        (
            vec![1, 2, 21, 147],
            vec![5, 2, 3, 2],
            "dilations = [2, 2], pads = [2, 1, 2, 1]",
        ),
    ] {
        let m = w[0];
        check(&model(
            &[("x", x)],
            &[("w", w), ("b", vec![m])],
            &format!("conv2d(%x, %w, %b) {{{attrs}}}"),
        ));
    }
    check(&model(
        &[("x", vec![1, 3, 97, 80]), ("y", vec![1, 16, 49, 40])],
        &[("w", vec![16, 3, 3, 3]), ("b", vec![16]), ("s", vec![16])],
        "conv2d(%x, %w, %b, %y, %s) {strides = [2, 2], pads = [1, 1, 1, 1], activation = prelu}",
    ));
}

#[test]
fn conv2d_row_packed_narrow_images() {
    // Narrow images run row-packed (whole image on the vector lanes): 7/14/17-wide rows,
    // "valid" convolutions whose output rows are narrower than the input's (per-row masked
    // stores), 1x7 and 7x1 kernels, strides 2-3 (one strided load per output row a vector
    // touches, 1x1/2 included), over-padding, dilations, asymmetric padding, groups, output
    // channels that leave a remainder of the channel tile, and an image just above the
    // unrolling limit, whose repeating middle rows run as a loop (40-wide rows: a period of
    // 5 vectors).
    #[allow(clippy::type_complexity)]
    let shapes: [(u64, u64, u64, u64, [u64; 2], [u64; 4], u64); 12] = [
        // (h, w, kh, kw, strides, pads, dilation)
        (7, 7, 3, 3, [1, 1], [1, 1, 1, 1], 1),
        (14, 14, 3, 3, [1, 1], [1, 1, 1, 1], 1),
        (17, 17, 1, 7, [1, 1], [0, 3, 0, 3], 1),
        (17, 17, 7, 1, [1, 1], [3, 0, 3, 0], 1),
        (9, 11, 3, 3, [1, 1], [0, 0, 0, 0], 1),
        (8, 13, 3, 2, [1, 1], [2, 0, 1, 1], 2),
        (5, 3, 5, 3, [1, 1], [2, 2, 2, 2], 1),
        (14, 14, 3, 3, [2, 2], [1, 1, 1, 1], 1),
        (15, 13, 1, 1, [2, 2], [0, 0, 0, 0], 1),
        (9, 20, 3, 3, [2, 3], [1, 0, 2, 1], 1),
        (13, 9, 3, 3, [1, 2], [0, 1, 0, 1], 2),
        (41, 40, 3, 3, [1, 1], [1, 1, 1, 1], 1),
    ];
    let mut rng = Rng::new(13);
    for (case, &(h, w, kh, kw, [sh, sw], pads, dil)) in shapes.iter().enumerate() {
        let groups = [1, 1, 2][case % 3];
        let cg = rng.r(1, 4);
        let m = groups * [3, 8, 11, 17][case % 4];
        let act = ["", ", activation = relu", ", activation = relu6"][case % 3];
        check(&model(
            &[("x", vec![rng.r(1, 2), cg * groups, h, w])],
            &[("w", vec![m, cg, kh, kw]), ("b", vec![m])],
            &format!(
                "conv2d(%x, %w, %b) {{strides = [{sh}, {sw}], dilations = [{dil}, {dil}], pads = [{}, {}, {}, {}], groups = {groups}{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
    // An input too big to stay in L2 across channel tiles (590 KB): pixel tiles outside.
    check(&model(
        &[("x", vec![1, 144, 32, 32])],
        &[("w", vec![20, 144, 1, 1]), ("b", vec![20])],
        "conv2d(%x, %w, %b) {strides = [2, 2], activation = relu}",
    ));
}

/// Strided dense convolutions on the packed im2col panel (issue 20): strides 2 and 3 (and
/// along one axis only), padding on every side (over-padding too: whole padded kernel rows
/// and columns), dilations, a batch of 2, output rows that are not whole vectors, pixel
/// blocks of several rows with a tail block, output channels (at least the panel's 32) that
/// leave tile tails, and enough input channels (43, 45, 70) that K is cut into chunks, the
/// last one shorter; images of one block are cut by channels, bigger ones by rows; a 17×17
/// output (Inception v3's 3×3/2 layers, 289 pixels) is one block of every row.
#[test]
fn conv2d_strided_packed_panel() {
    #[allow(clippy::type_complexity)]
    let shapes: [(u64, u64, u64, u64, u64, u64, [u64; 2], [u64; 4], [u64; 2]); 10] = [
        // (n, c, h, w, m, k, strides, pads, dilations)
        (1, 3, 61, 77, 35, 7, [2, 2], [3, 2, 1, 3], [1, 1]),
        (2, 5, 23, 19, 33, 3, [3, 3], [1, 1, 1, 1], [1, 1]),
        (1, 43, 23, 31, 40, 3, [2, 2], [1, 1, 1, 1], [1, 1]),
        (1, 45, 17, 17, 32, 3, [2, 2], [0, 1, 1, 0], [1, 1]),
        (1, 70, 14, 14, 37, 3, [2, 2], [1, 1, 1, 1], [1, 1]),
        (1, 4, 40, 21, 45, 5, [1, 2], [2, 2, 2, 2], [2, 1]),
        (1, 6, 30, 50, 34, 3, [3, 1], [0, 2, 1, 0], [1, 2]),
        (1, 2, 9, 9, 32, 3, [2, 2], [3, 3, 3, 3], [1, 1]),
        (2, 3, 45, 200, 33, 4, [2, 3], [1, 2, 0, 1], [1, 1]),
        (1, 40, 35, 35, 38, 3, [2, 2], [0, 0, 0, 0], [1, 1]),
    ];
    for (case, &(n, c, h, w, m, k, [sh, sw], pads, [dh, dw])) in shapes.iter().enumerate() {
        let act = ["", ", activation = relu", ", activation = relu6"][case % 3];
        let (operands, mut consts) = if case % 4 == 3 {
            ("%x, %w", vec![])
        } else {
            ("%x, %w, %b", vec![("b", vec![m])])
        };
        consts.insert(0, ("w", vec![m, c, k, k]));
        check(&model(
            &[("x", vec![n, c, h, w])],
            &consts,
            &format!(
                "conv2d({operands}) {{strides = [{sh}, {sw}], dilations = [{dh}, {dw}], pads = [{}, {}, {}, {}]{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
}

/// Strided convolutions with big kernels on wide rows read their taps in place (issue 20:
/// the 7×7/2 stems), one GEMM per output row on planes of every second (third) input
/// column: ResNet's padded stem at 112 wide (pad 3; 35 output channels, a 5-row tile tail), a
/// residual and PReLU in the epilogue, SqueezeNet's unpadded one at 109 wide (a masked
/// last vector) with a one-row tail block, an odd width (94) with asymmetric padding, a
/// 5×5 with strides 2 and 3 onto 96, and a batch of 2. Each block of output rows copies
/// its input rows once (the rows consecutive output rows share, once), its channels' copies
/// `(rows − 1)·SH + KH` rows apart: 4 input channels into 70 outputs (a 4-row tile tail) on
/// 13 output rows (a one-row tail block copying 7). `check` runs them on 1–3 threads.
#[test]
fn conv2d_strided_stems_read_taps_in_place() {
    #[allow(clippy::type_complexity)]
    let shapes: [(u64, u64, u64, u64, u64, u64, [u64; 2], [u64; 4]); 5] = [
        // (n, c, h, w, m, k, strides, pads)
        (1, 3, 40, 224, 35, 7, [2, 2], [3, 3, 3, 3]),
        (1, 4, 25, 224, 70, 7, [2, 2], [3, 3, 3, 3]),
        (1, 3, 31, 223, 40, 7, [2, 2], [0, 0, 0, 0]),
        (2, 3, 44, 189, 33, 7, [2, 2], [2, 3, 1, 1]),
        (1, 2, 30, 286, 34, 5, [2, 3], [2, 2, 2, 2]),
    ];
    for (case, &(n, c, h, w, m, k, [sh, sw], pads)) in shapes.iter().enumerate() {
        let act = [", activation = relu", "", ", activation = relu6"][case % 3];
        check(&model(
            &[("x", vec![n, c, h, w])],
            &[("w", vec![m, c, k, k]), ("b", vec![m])],
            &format!(
                "conv2d(%x, %w, %b) {{strides = [{sh}, {sw}], pads = [{}, {}, {}, {}]{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
    check(&model(
        &[("x", vec![1, 3, 40, 224]), ("y", vec![1, 35, 20, 112])],
        &[("w", vec![35, 3, 7, 7]), ("b", vec![35]), ("s", vec![35])],
        "conv2d(%x, %w, %b, %y, %s) {strides = [2, 2], pads = [3, 3, 3, 3], activation = prelu}",
    ));
}

/// Stride-1 dense convolutions on rows too wide for row packing (issue 20: Inception v3's
/// 147- and 71-wide stem layers) run on the packed panel too. Each image has over 100 grid
/// vectors and rows that repeat only after more than 48 vectors (odd widths, 130 and 200),
/// so the row-packed kernel refuses it: "valid" and "same" padding, asymmetric padding
/// (a padded kernel row on top only, kernel columns on one side), a dilation, 1×7 and 7×1
/// kernels, rows that are not whole vectors, pixel blocks of one and several rows with a
/// tail block, enough input channels (40) that K is cut into chunks, a batch of 2, and
/// output channels (32–37) that leave tile tails. Kernels of 25 taps or more take the panel
/// on narrow rows too (Inception v3's 5×5 at 35×35, its 5 pixel blocks made 6 for two
/// threads' halves; a 7×7 at 20×20). Rows of 128 or more read the taps in place from one
/// padded copy of each block's input rows: more than 64 output channels (a group of 64
/// sums and a tail group), two padded rows at the bottom and a one-row tail block, blocks
/// of three rows (147 wide: fewer GEMM vectors than two) with a one-row and a two-row tail,
/// and 90 input channels at 147 wide, whose copy passes one chunk (back to the per-tap
/// panel).
#[test]
fn conv2d_stride_one_wide_rows_packed_panel() {
    #[allow(clippy::type_complexity)]
    let shapes: [(u64, u64, u64, u64, u64, [u64; 2], [u64; 4], [u64; 2]); 13] = [
        // (n, c, h, w, m, kernel, pads, dilations)
        (1, 4, 14, 149, 32, [3, 3], [0, 0, 0, 0], [1, 1]),
        (1, 3, 13, 147, 37, [3, 3], [1, 1, 1, 1], [1, 1]),
        (2, 40, 25, 73, 33, [3, 3], [0, 0, 0, 0], [1, 1]),
        (1, 5, 14, 130, 32, [3, 3], [2, 0, 0, 1], [1, 2]),
        (1, 6, 14, 131, 34, [1, 7], [0, 3, 0, 3], [1, 1]),
        (1, 3, 18, 101, 32, [7, 1], [3, 0, 3, 0], [1, 1]),
        (1, 2, 9, 200, 35, [2, 5], [1, 2, 0, 0], [1, 1]),
        (1, 12, 35, 35, 40, [5, 5], [2, 2, 2, 2], [1, 1]),
        (2, 5, 20, 20, 32, [7, 7], [3, 3, 3, 3], [1, 1]),
        (1, 3, 12, 147, 70, [3, 3], [1, 1, 1, 1], [1, 1]),
        (1, 4, 11, 140, 32, [3, 3], [0, 1, 2, 1], [1, 1]),
        (2, 90, 6, 147, 33, [3, 3], [1, 1, 1, 1], [1, 1]),
        (1, 5, 14, 147, 32, [3, 3], [1, 1, 1, 1], [1, 1]),
    ];
    for (case, &(n, c, h, w, m, [kh, kw], pads, [dh, dw])) in shapes.iter().enumerate() {
        let act = ["", ", activation = relu", ", activation = relu6"][case % 3];
        let (operands, mut consts) = if case % 4 == 3 {
            ("%x, %w", vec![])
        } else {
            ("%x, %w, %b", vec![("b", vec![m])])
        };
        consts.insert(0, ("w", vec![m, c, kh, kw]));
        check(&model(
            &[("x", vec![n, c, h, w])],
            &consts,
            &format!(
                "conv2d({operands}) {{strides = [1, 1], dilations = [{dh}, {dw}], pads = [{}, {}, {}, {}]{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
}

#[test]
fn conv2d_row_packed_periodic_images() {
    // Stride-1 images above the unrolling limit whose middle rows repeat: the row-packed
    // kernel runs them as a loop over repetitions of a block of vectors, the border rows
    // unrolled. ResNet's 56×56 "same" 3×3 (a period of 7 vectors; 11 output channels leave
    // a channel-tile remainder), a "valid" convolution whose grid rows are wider than its
    // output rows (per-row stores shifted per repetition), dilation with asymmetric padding,
    // a 1×1 with row padding on an input too big for L2 (pixel tiles outside, the loop
    // around them), and a 147-wide image whose period is too long, which takes the row
    // kernel.
    #[allow(clippy::type_complexity)]
    let shapes: [(u64, u64, u64, u64, u64, u64, [u64; 4], u64); 5] = [
        // (c, m, h, w, kh, kw, pads, dilation)
        (3, 11, 56, 56, 3, 3, [1, 1, 1, 1], 1),
        (2, 9, 30, 72, 3, 3, [0, 0, 0, 0], 1),
        (2, 8, 40, 48, 3, 3, [2, 1, 0, 3], 2),
        (48, 8, 56, 56, 1, 1, [1, 0, 1, 0], 1),
        (2, 7, 12, 147, 3, 3, [1, 1, 1, 1], 1),
    ];
    for (case, &(c, m, h, w, kh, kw, pads, dil)) in shapes.iter().enumerate() {
        let act = ["", ", activation = relu", ", activation = relu6"][case % 3];
        check(&model(
            &[("x", vec![1, c, h, w])],
            &[("w", vec![m, c, kh, kw]), ("b", vec![m])],
            &format!(
                "conv2d(%x, %w, %b) {{dilations = [{dil}, {dil}], pads = [{}, {}, {}, {}]{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
}

/// Stride-1 row-packed convolutions with at least as many pixels as output channels are cut
/// by pixels (issue 20): bands of the periodic run's repetitions, the first band with the
/// unrolled vectors before the run and the last with those after it, or, on an unrolled
/// image, ranges of grid vectors. Two images (the bands of the second at its offsets), a
/// "valid" convolution, dilations with asymmetric padding, a channel tail of the tiles, and
/// the shapes of ResNet-50's 56×56 and 28×28 layers with fewer channels. Run whole, cut
/// into its smallest tiles (a band per repetition or per vector) on 0–3 threads, against
/// the interpreter and bitwise across the thread counts ([`both_with`]).
#[test]
fn conv2d_row_packed_cut_by_pixels() {
    #[allow(clippy::type_complexity)]
    let shapes: [(u64, u64, u64, u64, u64, u64, [u64; 4], u64); 6] = [
        // (n, c, m, h, w, k, pads, dilation)
        (2, 5, 16, 56, 56, 3, [1, 1, 1, 1], 1),
        (1, 6, 12, 28, 28, 3, [1, 1, 1, 1], 1),
        (2, 3, 19, 30, 72, 3, [0, 0, 0, 0], 1),
        (1, 4, 9, 40, 48, 3, [2, 1, 0, 3], 2),
        (2, 7, 20, 13, 11, 5, [2, 2, 2, 2], 1),
        (1, 2, 8, 9, 9, 3, [0, 1, 1, 0], 1),
    ];
    for (case, &(n, c, m, h, w, k, pads, dil)) in shapes.iter().enumerate() {
        let act = ["", ", activation = relu", ", activation = relu6"][case % 3];
        check(&model(
            &[("x", vec![n, c, h, w])],
            &[("w", vec![m, c, k, k]), ("b", vec![m])],
            &format!(
                "conv2d(%x, %w, %b) {{dilations = [{dil}, {dil}], pads = [{}, {}, {}, {}]{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
}

#[test]
fn depthwise_randomised() {
    // Rows wide enough for every path of the depthwise kernel: blocks of four vectors, single
    // vectors, the masked remainder and the scalar border columns; border rows above and
    // below; strides 1-3 (lane-picking loads), dilations, asymmetric padding, channel
    // multipliers 1-2, and images too small to have an interior.
    let mut rng = Rng::new(11);
    for case in 0..10 {
        let c = rng.r(1, 4);
        let mult = rng.r(1, 2);
        let (kh, kw) = (rng.r(1, 5), rng.r(1, 5));
        let (sh, sw) = (rng.r(1, 2), rng.r(1, 3));
        let (dh, dw) = (rng.r(1, 2), rng.r(1, 2));
        let pads = [rng.r(0, 2), rng.r(0, 2), rng.r(0, 2), rng.r(0, 2)];
        let h = rng.r(kh * dh, kh * dh + 6);
        let w = if case < 2 {
            rng.r(kw * dw, kw * dw + 3)
        } else {
            rng.r(20, 150)
        };
        let bias = case % 3 != 0;
        let act = ["", ", activation = relu6", ", activation = hard_swish"][case % 3];
        let operands = if bias { "%x, %w, %b" } else { "%x, %w" };
        let mut consts = vec![("w", vec![c * mult, 1, kh, kw])];
        if bias {
            consts.push(("b", vec![c * mult]));
        }
        check(&model(
            &[("x", vec![rng.r(1, 2), c, h, w])],
            &consts,
            &format!(
                "conv2d({operands}) {{strides = [{sh}, {sw}], dilations = [{dh}, {dw}], pads = [{}, {}, {}, {}], groups = {c}{act}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
}

#[test]
fn pointwise_conv_is_a_gemm() {
    // 1x1 convolutions of odd sizes hit every tile path: narrow (one column block), wide with
    // a short or a long K, full tiles, row tails, the one-vector column block and the masked
    // column tail.
    for (c, m, h, w, groups) in [
        (3, 7, 5, 7, 1),
        (16, 13, 6, 11, 1),
        (8, 12, 9, 9, 2),
        (5, 20, 8, 8, 1),
        // Wide with a long K (column blocks outside the row tiles).
        (40, 9, 9, 9, 1),
        // A 1x1 image: a matrix-vector product along K (with a K tail).
        (37, 11, 1, 1, 1),
        (64, 10, 1, 1, 2),
    ] {
        check(&model(
            &[("x", vec![1, c, h, w])],
            &[("w", vec![m, c / groups, 1, 1]), ("b", vec![m])],
            &format!("conv2d(%x, %w, %b) {{groups = {groups}, activation = relu6}}"),
        ));
    }
}

/// Pointwise convolutions whose pixels are a few 64-column blocks with a short last one (14×14
/// = 196: 64, 64, 64, 4) are cut by output channels in 6-row tiles (pose_detection's 14×14
/// layers): chunks of 12, 18 or 6 rows and a short last chunk, with a residual and a PReLU in
/// the epilogue as the imported models have them.
#[test]
fn pointwise_cut_by_channels_where_pixel_blocks_are_unequal() {
    for (c, m, h) in [(8, 192, 14), (24, 112, 14), (16, 80, 14), (8, 29, 13)] {
        check(&model(
            &[("x", vec![1, c, h, h])],
            &[("w", vec![m, c, 1, 1]), ("b", vec![m])],
            "conv2d(%x, %w, %b) {activation = relu6}",
        ));
    }
    check(&model(
        &[("x", vec![1, 24, 14, 14]), ("y", vec![1, 112, 14, 14])],
        &[
            ("w", vec![112, 24, 1, 1]),
            ("b", vec![112]),
            ("s", vec![112]),
        ],
        "conv2d(%x, %w, %b, %y, %s) {activation = prelu}",
    ));
}

#[test]
fn matmul_and_gemm() {
    for (m, k, n) in [(1, 7, 5), (7, 13, 37), (13, 5, 64), (6, 33, 16), (9, 41, 1)] {
        check(&model(
            &[("a", vec![m, k])],
            &[("bw", vec![k, n])],
            "matmul(%a, %bw)",
        ));
    }
    // Batched, broadcast over the batch, rank-1 operands.
    check(&model(
        &[("a", vec![2, 3, 5, 7]), ("b", vec![3, 7, 9])],
        &[],
        "matmul(%a, %b) {activation = relu}",
    ));
    check(&model(
        &[("a", vec![7]), ("b", vec![2, 7, 5])],
        &[],
        "matmul(%a, %b)",
    ));
    check(&model(
        &[("a", vec![4, 7]), ("b", vec![7])],
        &[],
        "matmul(%a, %b)",
    ));
    // Gemm: transposed A, transposed weight B, C broadcast, alpha/beta.
    check(&model(
        &[("a", vec![3, 10])],
        &[("gb", vec![10, 21]), ("gc", vec![21])],
        "gemm(%a, %gb, %gc)",
    ));
    check(&model(&[("a", vec![10, 3])], &[("gb", vec![21, 10]), ("gc", vec![3, 1])], "gemm(%a, %gb, %gc) {trans_a = true, trans_b = true, alpha = 0.5, beta = 2.0, activation = relu}"));
    check(&model(
        &[("a", vec![2, 40])],
        &[("gb", vec![40, 33])],
        "gemm(%a, %gb) {alpha = 1.5}",
    ));
}

#[test]
fn pools_and_global_avg_pool() {
    let mut rng = Rng::new(3);
    for case in 0..8 {
        let (kh, kw) = (rng.r(1, 3), rng.r(1, 3));
        let (sh, sw) = (rng.r(1, 2), rng.r(1, 3));
        let pads = [
            rng.r(0, kh - 1),
            rng.r(0, kw - 1),
            rng.r(0, kh - 1),
            rng.r(0, kw - 1),
        ];
        let (h, w) = (rng.r(kh, 9), rng.r(kw, 10));
        let op = if case % 2 == 0 {
            "max_pool"
        } else {
            "avg_pool"
        };
        let extra = match case % 4 {
            1 => ", count_include_pad = true",
            2 => ", ceil_mode = true",
            _ => "",
        };
        check(&model(
            &[("x", vec![2, 3, h, w])],
            &[],
            &format!(
                "{op}(%x) {{kernel = [{kh}, {kw}], strides = [{sh}, {sw}], pads = [{}, {}, {}, {}]{extra}}}",
                pads[0], pads[1], pads[2], pads[3]
            ),
        ));
    }
    check(&model(
        &[("x", vec![2, 5, 7, 3])],
        &[],
        "global_avg_pool(%x)",
    ));
}

/// Pools on rows of several vectors (issue 20): the clean middle vectors in a loop, masked
/// border vectors on both sides, a last vector past the row's end, kernel rows above and
/// below the plane; Inception v3's 3×3/1 average pools with padding (counted and not) and
/// its 3×3/2 max pools, strides 2 and 3 along the row (every `s`-th loaded lane kept),
/// ceil mode (windows past the padded row), asymmetric padding, rows narrower than a vector.
#[test]
fn pools_vectorised_rows() {
    let cases: [PoolCase; 15] = [
        // Windows too large to unroll per vector (more than 64 taps, or a stride above 4:
        // one window at a time, taps in loops): selfie_segmentation's whole-plane average
        // pools, with pads, partial windows and both counts.
        ("avg_pool", 32, 32, [32, 32], [32, 32], [0, 0, 0, 0], ""),
        ("avg_pool", 20, 23, [9, 8], [9, 8], [1, 2, 3, 4], ""),
        (
            "avg_pool",
            20,
            23,
            [9, 8],
            [9, 8],
            [1, 2, 3, 4],
            ", count_include_pad = true",
        ),
        (
            "max_pool",
            21,
            40,
            [5, 5],
            [5, 5],
            [2, 2, 2, 2],
            ", ceil_mode = true",
        ),
        ("max_pool", 16, 16, [16, 16], [16, 16], [0, 0, 0, 0], ""),
        // (op, h, w, kernel, strides, pads, extra)
        (
            "avg_pool",
            9,
            35,
            [3, 3],
            [1, 1],
            [1, 1, 1, 1],
            ", count_include_pad = true",
        ),
        ("avg_pool", 17, 17, [3, 3], [1, 1], [1, 1, 1, 1], ""),
        (
            "avg_pool",
            5,
            73,
            [3, 5],
            [1, 1],
            [0, 2, 2, 1],
            ", count_include_pad = true",
        ),
        ("avg_pool", 7, 8, [3, 3], [1, 1], [1, 1, 1, 1], ""),
        ("max_pool", 11, 73, [3, 3], [2, 2], [0, 0, 0, 0], ""),
        ("max_pool", 9, 35, [3, 3], [1, 1], [1, 1, 1, 1], ""),
        (
            "max_pool",
            8,
            100,
            [2, 3],
            [1, 3],
            [1, 2, 0, 2],
            ", ceil_mode = true",
        ),
        (
            "avg_pool",
            12,
            64,
            [3, 2],
            [2, 2],
            [1, 0, 1, 1],
            ", ceil_mode = true, count_include_pad = true",
        ),
        (
            "avg_pool",
            6,
            50,
            [2, 3],
            [1, 3],
            [0, 1, 1, 2],
            ", ceil_mode = true",
        ),
        ("max_pool", 4, 47, [1, 4], [1, 1], [0, 3, 0, 0], ""),
    ];
    check_pools(&cases);
}

/// A pool case: (op, h, w, kernel, strides, pads, extra attributes).
type PoolCase = (
    &'static str,
    u64,
    u64,
    [u64; 2],
    [u64; 2],
    [u64; 4],
    &'static str,
);

/// Checks each pool case on a `2 × 3 × h × w` input.
fn check_pools(cases: &[PoolCase]) {
    for &(op, h, w, [kh, kw], [sh, sw], p, extra) in cases {
        check(&model(
            &[("x", vec![2, 3, h, w])],
            &[],
            &format!(
                "{op}(%x) {{kernel = [{kh}, {kw}], strides = [{sh}, {sw}], pads = [{}, {}, {}, {}]{extra}}}",
                p[0], p[1], p[2], p[3]
            ),
        ));
    }
}

/// Pools unroll the output rows some of whose kernel rows fall outside the plane and run
/// the others in a loop without the row test: planes with no such inner row (a kernel
/// taller than the padded plane's inside, one-row planes), one inner row, GoogLeNet's
/// 3×3/1 max pools at 14×14 and 7×7 (ceil mode), and a stride-2 window whose last row is a
/// partial one; a 20-row window with 9 rows of padding on each side has too many border
/// rows to unroll (every row in the loop with the row test).
#[test]
fn pools_border_rows_unrolled_inner_rows_looped() {
    let cases: [PoolCase; 8] = [
        // (op, h, w, kernel, strides, pads, extra)
        ("max_pool", 2, 20, [3, 3], [1, 1], [1, 1, 1, 1], ""),
        ("avg_pool", 1, 9, [3, 3], [1, 1], [1, 1, 1, 1], ""),
        ("max_pool", 3, 18, [3, 3], [1, 1], [1, 1, 1, 1], ""),
        (
            "max_pool",
            14,
            14,
            [3, 3],
            [1, 1],
            [1, 1, 1, 1],
            ", ceil_mode = true",
        ),
        (
            "max_pool",
            7,
            7,
            [3, 3],
            [1, 1],
            [1, 1, 1, 1],
            ", ceil_mode = true",
        ),
        (
            "max_pool",
            14,
            14,
            [3, 3],
            [2, 2],
            [0, 0, 0, 0],
            ", ceil_mode = true",
        ),
        (
            "avg_pool",
            10,
            33,
            [4, 3],
            [2, 1],
            [2, 1, 1, 1],
            ", count_include_pad = true",
        ),
        (
            "avg_pool",
            24,
            20,
            [20, 3],
            [1, 1],
            [9, 1, 9, 1],
            ", count_include_pad = true",
        ),
    ];
    check_pools(&cases);
}

/// The max pool's bits are the interpreter's when windows hold NaNs (each with its own
/// payload: the last in `(i, j)` order wins, a later number never replaces one) and zeros
/// of both signs (the first of equal maxima wins), on inputs with NaNs (nearly every vector
/// takes the exact step) and without (the `vmaxps` step, ties of `±0` and `−∞`): the maxima
/// taken as an order-keeping tree, padded lanes −∞, on the flat
/// planes of GoogLeNet's 3×3/1 pools (28², 14², 7²), a plane too large to be flat (row
/// vectors, clean and border), its 3×3/2 ceil-mode pools (every other loaded lane), the
/// 3×3/2 pools on SqueezeNet's 109², GoogLeNet's 112² and Inception v3's 147² planes (kernel
/// rows' maxima shared along the rows, odd widths, a ceil-mode border) and a window too
/// large to unroll (one window at a time).
#[test]
fn max_pool_nan_and_signed_zero_bits_are_the_interpreters() {
    let mut rng = Rng::new(20);
    let cases: [(u64, u64, u64, u64, u64, &str); 11] = [
        // (h = w, kernel, stride, pad, channels, extra)
        (112, 3, 2, 0, 1, ", ceil_mode = true"),
        (147, 3, 2, 0, 1, ""),
        (28, 3, 1, 1, 2, ""),
        (14, 3, 1, 1, 3, ", ceil_mode = true"),
        (7, 3, 1, 1, 5, ", ceil_mode = true"),
        (40, 3, 1, 1, 2, ""),
        (56, 3, 2, 0, 2, ", ceil_mode = true"),
        (14, 3, 2, 0, 3, ", ceil_mode = true"),
        (12, 9, 1, 4, 2, ""),
        (109, 3, 2, 0, 2, ", ceil_mode = true"),
        (30, 3, 2, 1, 3, ""),
    ];
    for ((hw, k, s, p, c, extra), nans) in cases.iter().flat_map(|&c| [(c, true), (c, false)]) {
        let n = (c * hw * hw) as usize;
        // Few distinct values, so that windows tie: ±0, ±1, −∞ and 1 in 12 a NaN.
        let xs: Vec<f32> = (0..n)
            .map(|i| match rng.r(u64::from(!nans), 11) {
                0 => f32::from_bits(0x7fc0_0000 | i as u32),
                1 | 2 => -0.0,
                3 | 4 => 0.0,
                5 => f32::NEG_INFINITY,
                6 | 7 => 1.0,
                _ => -1.0,
            })
            .collect();
        let text = model(
            &[("x", vec![1, c, hw, hw])],
            &[],
            &format!(
                "max_pool(%x) {{kernel = [{k}, {k}], strides = [{s}, {s}], pads = [{p}, {p}, {p}, {p}]{extra}}}"
            ),
        );
        let given = vec![Tensor::f32(vec![1, c, hw, hw], xs).unwrap()];
        let (expected, got) = both_with(&text, "sharing=true", Some(given));
        for (e, g) in expected.iter().zip(&got) {
            assert_eq!(
                e.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                g.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{text}"
            );
        }
    }
}

/// The inner rows of a max pool whose windows overlap in rows share each input row's
/// maximum between output rows (`Window::shared_rows`), with the sum that tests its taps for
/// NaN: a single NaN in an input row that two output rows read (3×3/2: row 2·oy + 2; 3×3/1
/// and 4×4/2: two rows) must reach both, in a clean vector and a border one, bitwise the
/// interpreter's. Along the rows (`Walk::Rows`): 54², SqueezeNet's 109², GoogLeNet's 112²
/// (ceil mode: a last window past the plane), Inception v3's 147², a 4×4/2 window carrying
/// two rows on an odd width; down the columns (`Walk::Columns`): 3×3/1 on rows of 90 (6
/// vectors, 12 carried, too many for registers).
#[test]
fn max_pool_shared_rows_carry_a_nan_to_the_next_output_row() {
    for (h, w, k, s, p, row, col) in [
        (54, 54, 3, 2, 0, 10, 20),
        (54, 54, 3, 2, 0, 10, 52),
        (40, 40, 3, 1, 1, 17, 5),
        (40, 40, 3, 1, 1, 17, 39),
        (109, 109, 3, 2, 0, 50, 40),
        (109, 109, 3, 2, 0, 50, 106),
        (112, 112, 3, 2, 0, 60, 111),
        (147, 147, 3, 2, 0, 70, 96),
        (95, 95, 4, 2, 1, 41, 94),
        (24, 90, 3, 1, 1, 11, 70),
    ] {
        let n = (2 * h * w) as usize;
        let mut xs: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
        xs[(h * w + row * w + col) as usize] = f32::NAN;
        let text = model(
            &[("x", vec![1, 2, h, w])],
            &[],
            &format!(
                "max_pool(%x) {{kernel = [{k}, {k}], strides = [{s}, {s}], pads = [{p}, {p}, {p}, {p}], ceil_mode = true}}"
            ),
        );
        let given = vec![Tensor::f32(vec![1, 2, h, w], xs).unwrap()];
        let (expected, got) = both_with(&text, "sharing=true", Some(given));
        let nans = |t: &[f32]| t.iter().filter(|v| v.is_nan()).count();
        assert!(nans(&expected[0]) >= 2, "{text}");
        assert_eq!(
            expected[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            got[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{text}"
        );
    }
}

/// Runs one max pool (`h = w`, `k×k`, stride `s`, pad `p`, ceil mode) on `c` planes of
/// `xs` and asserts the output's bits are the interpreter's.
fn assert_max_pool_bits(c: u64, hw: u64, (k, s, p): (u64, u64, u64), xs: Vec<f32>) {
    let text = model(
        &[("x", vec![1, c, hw, hw])],
        &[],
        &format!(
            "max_pool(%x) {{kernel = [{k}, {k}], strides = [{s}, {s}], pads = [{p}, {p}, {p}, {p}], ceil_mode = true}}"
        ),
    );
    let given = vec![Tensor::f32(vec![1, c, hw, hw], xs).unwrap()];
    let (expected, got) = both_with(&text, "sharing=true", Some(given));
    assert_eq!(
        expected[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        got[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "{text}"
    );
}

/// Strided pools load one `sw·W`-lane vector per `sw` kernel columns and take each tap's
/// lanes from it (`Window::taps`): windows of 3, 4 and 5 columns at stride 2 (a last group
/// of one column, or of two), 2×2/2 (GoogLeNet's 7² pool, ceil mode), 3 columns at stride
/// 3, on odd widths with padding on either side and ceil-mode windows past the row, clean
/// and border vectors; a lane taken from the wrong column, or a mask of the wrong cell,
/// changes a max or an average.
#[test]
fn strided_pool_taps_share_one_load_per_stride() {
    let cases: [PoolCase; 7] = [
        // (op, h, w, kernel, strides, pads, extra)
        (
            "max_pool",
            9,
            57,
            [3, 3],
            [2, 2],
            [0, 0, 0, 0],
            ", ceil_mode = true",
        ),
        ("max_pool", 8, 45, [3, 5], [2, 2], [1, 2, 1, 2], ""),
        (
            "avg_pool",
            7,
            71,
            [2, 4],
            [1, 2],
            [0, 1, 1, 1],
            ", ceil_mode = true",
        ),
        (
            "avg_pool",
            6,
            39,
            [3, 3],
            [2, 2],
            [1, 1, 1, 1],
            ", count_include_pad = true",
        ),
        (
            "max_pool",
            7,
            7,
            [2, 2],
            [2, 2],
            [0, 0, 0, 0],
            ", ceil_mode = true",
        ),
        (
            "max_pool",
            5,
            101,
            [1, 3],
            [1, 3],
            [0, 1, 0, 0],
            ", ceil_mode = true",
        ),
        ("avg_pool", 5, 67, [2, 5], [2, 2], [0, 0, 0, 0], ""),
    ];
    check_pools(&cases);
}

/// A flat plane with no NaN and no `−0` takes the separable max (`Window::flat_max_plane`:
/// column maxima, then lane shifts masked at the row ends) with the interpreter's bits:
/// many ties of `+0`, `±1` and `−∞`, on GoogLeNet's 28², 14² and 7² planes, a plane whose
/// rows span vectors unevenly (13²), a 5×5 window (shifts of two lanes) and a 1-pixel pad
/// on a plane narrower than a vector. A shift that reads across a row end, or a column
/// mask off by one, takes a neighbouring row's cell.
#[test]
fn max_pool_flat_planes_without_nan_or_negative_zero_are_separable() {
    let mut rng = Rng::new(22);
    for (hw, k, p) in [
        (28, 3, 1),
        (14, 3, 1),
        (7, 3, 1),
        (13, 3, 1),
        (20, 5, 2),
        (5, 3, 1),
    ] {
        let c = 3;
        let xs: Vec<f32> = (0..c * hw * hw)
            .map(|_| match rng.r(0, 6) {
                0 | 1 => 0.0,
                2 => f32::NEG_INFINITY,
                3 | 4 => -1.0,
                5 => 1.0,
                _ => 2.5,
            })
            .collect();
        assert_max_pool_bits(c, hw, (k, 1, p), xs);
    }
}

/// A single NaN, or a `−0` that comes before a `+0` of the same window in `(i, j)` order but
/// after it column by column, sends its plane (and only it) to the order-keeping tree: the
/// plane test (`plane_needs_order`) must see it in its unrolled loop, its whole vectors after
/// it and its masked tail (28² = 12·64 + 16 cells, 14² = 3·64 + 4, 7² = 3·16 + 1). Missed,
/// the separable max drops a NaN that is a right operand and returns `+0` for that window.
#[test]
fn max_pool_one_nan_or_negative_zero_keeps_its_planes_order() {
    for (hw, at) in [
        (28, 0),
        (28, 300),
        (28, 775),
        (28, 783),
        (14, 100),
        (14, 195),
        (7, 40),
        (7, 48),
    ] {
        let n = (hw * hw) as usize;
        // Plane 1 holds the NaN; plane 0 is clean.
        let mut xs: Vec<f32> = (0..2 * n).map(|i| (i % 5) as f32 - 2.0).collect();
        xs[n + at] = f32::NAN;
        assert_max_pool_bits(2, hw, (3, 1, 1), xs);
    }
    for (hw, r, c) in [(28, 5, 3), (28, 26, 20), (14, 12, 9), (7, 5, 2)] {
        let n = (hw * hw) as usize;
        let mut xs = vec![-1.0f32; 2 * n];
        let at = |r: u64, c: u64| n + (r * hw + c) as usize;
        xs[at(r, c + 1)] = -0.0;
        xs[at(r + 1, c)] = 0.0;
        assert_max_pool_bits(2, hw, (3, 1, 1), xs);
    }
}

#[test]
fn layout_ops_and_softmax() {
    check(&model(
        &[("x", vec![2, 3, 4]), ("y", vec![2, 5, 4])],
        &[],
        "concat(%x, %y) {axis = 1}",
    ));
    check(&model(
        &[("x", vec![1, 3, 4]), ("y", vec![1, 2, 4])],
        &[],
        "concat(%x, %y) {axis = -2}",
    ));
    check(&model(
        &[("x", vec![3, 5, 7])],
        &[],
        "slice(%x) {starts = [1, -1], ends = [3, 0], axes = [0, 2], steps = [1, -2]}",
    ));
    check(&model(
        &[("x", vec![2, 3, 5])],
        &[],
        "transpose(%x) {perm = [2, 0, 1]}",
    ));
    check(&model(
        &[("x", vec![2, 3, 5])],
        &[],
        "pad(%x) {pads = [0, 1, 2, 1, 0, 1], mode = constant, value = 0.5}",
    ));
    check(&model(&[("x", vec![3, 7])], &[], "softmax(%x) {axis = -1}"));
    // Rows along the last axis of whole vectors, of vectors and a tail, and a long one
    // (PP-OCR's 6625 classes): the vector passes of `dynamic::softmax_rows`.
    for shape in [vec![2, 32], vec![3, 37], vec![2, 6625]] {
        check(&model(&[("x", shape)], &[], "softmax(%x) {axis = -1}"));
    }
    check(&model(
        &[("x", vec![2, 5, 3])],
        &[],
        "softmax(%x) {axis = 1}",
    ));
    check(&model(
        &[("x", vec![2, 3, 4, 5])],
        &[
            ("s", vec![3]),
            ("bb", vec![3]),
            ("mean", vec![3]),
            ("var", vec![3]),
        ],
        "batch_norm(%x, %s, %bb, %mean, %var) {epsilon = 0.001}",
    ));
}

#[test]
fn slices_with_inner_steps_move_whole_rows_by_vectors() {
    // Inner steps 2, 3 and 4 into rows of 28 (ResNet's 56x56 shortcut: a vector and a
    // 12-lane tail), 16 (one whole vector), 5 and 64 (four vectors, the most unrolled); 65
    // and step 5 stay on the scalar loop. The last row ends at the input's last element.
    for (x, ends, steps) in [
        (vec![1, 6, 56, 56], "[55, 55]", "[2, 2]"),
        (vec![2, 3, 9, 48], "[9, 48]", "[1, 3]"),
        (vec![1, 4, 7, 9], "[7, 9]", "[3, 2]"),
        (vec![2, 3, 5, 19], "[5, 19]", "[2, 4]"),
        (vec![1, 2, 3, 128], "[3, 128]", "[1, 2]"),
        (vec![1, 2, 3, 130], "[3, 130]", "[1, 2]"),
        (vec![1, 2, 3, 30], "[3, 30]", "[1, 5]"),
    ] {
        check(&model(
            &[("x", x)],
            &[],
            &format!(
                "slice(%x) {{starts = [0, 0], ends = {ends}, axes = [2, 3], steps = {steps}}}"
            ),
        ));
    }
}

#[test]
fn layer_norm_over_trailing_axes() {
    check(&model(
        &[("x", vec![3, 5, 7])],
        &[("g", vec![7]), ("bb", vec![7])],
        "layer_norm(%x, %g, %bb) {axis = -1, epsilon = 0.00001}",
    ));
    check(&model(
        &[("x", vec![2, 3, 4, 5])],
        &[("g", vec![4, 1])],
        "layer_norm(%x, %g) {axis = 2, epsilon = 0.001}",
    ));
}

#[test]
fn split_writes_every_piece() {
    let text = "module @s {\n  func @main(%x: tensor<2x7x3xf32>) {\n    %a, %b = split(%x) {axis = 1, sizes = [3, 4]}\n    %c = relu(%a)\n    %d = relu(%b)\n    return %c, %d\n  }\n}\n";
    check(text);
}

#[test]
fn resize_every_mode_randomised() {
    let mut rng = Rng::new(61);
    let coords = [
        "half_pixel",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
    ];
    let nearest = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"];
    for case in 0..16 {
        let (h, w) = (rng.r(1, 7), rng.r(1, 7));
        let (oh, ow) = (rng.r(1, 13), rng.r(1, 13));
        let c = rng.r(1, 3);
        let coord = coords[case % 4];
        let mode = if case % 2 == 0 {
            format!("mode = nearest, nearest_mode = {}", nearest[(case / 2) % 4])
        } else {
            "mode = bilinear".to_string()
        };
        check(&model(
            &[("x", vec![2, c, h, w])],
            &[],
            &format!("resize(%x) {{size = [{oh}, {ow}], {mode}, coordinate_transformation_mode = {coord}}}"),
        ));
    }
}

/// `resize` computes its output columns in vectors of four with a scalar tail: widths below,
/// at and past a whole vector, in both modes, every plane and thread cut bitwise alike
/// (`check`). Where every source coordinate is an exact binary fraction (×2 and ×4 with
/// half_pixel or asymmetric: BlazePose's 7→14 and 14→28 upsamplings) the kernel's bits are the
/// interpreter's, lane by lane.
#[test]
fn resize_vector_columns_and_tails() {
    for (w, ow) in [(3, 3), (2, 4), (4, 8), (5, 13), (7, 14), (14, 28), (3, 12)] {
        for mode in ["mode = bilinear", "mode = nearest, nearest_mode = floor"] {
            for coord in ["half_pixel", "asymmetric", "align_corners"] {
                let text = model(
                    &[("x", vec![1, 3, 4, w])],
                    &[],
                    &format!(
                        "resize(%x) {{size = [8, {ow}], {mode}, coordinate_transformation_mode = {coord}}}"
                    ),
                );
                check(&text);
                if coord != "align_corners" && ow % w == 0 && (ow / w).is_power_of_two() {
                    let (expected, got) = both_with(&text, "sharing=true", None);
                    for (e, g) in expected.iter().zip(&got) {
                        assert_eq!(
                            e.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            g.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            "{text}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_reduction_randomised_axes() {
    let mut rng = Rng::new(62);
    for kind in tir_ir::ReduceKind::ALL {
        for axes in ["[1]", "[-1]", "[0, 2]", "[1, 2, 3]", "[]", "[3, 0]"] {
            let s: Vec<u64> = (0..4).map(|_| rng.r(1, 6)).collect();
            let keep = rng.r(0, 1) == 1;
            check(&model(
                &[("x", s)],
                &[],
                &format!("{}(%x) {{axes = {axes}, keepdims = {keep}}}", kind.name()),
            ));
        }
    }
    // An empty reduction: each kind's identity.
    for kind in tir_ir::ReduceKind::ALL {
        check(&model(
            &[("x", vec![2, 0, 3])],
            &[],
            &format!("{}(%x) {{axes = [1], keepdims = false}}", kind.name()),
        ));
    }
}

/// A mean over every axis after the channels runs as a global average pool (cut by planes,
/// summed with vectors): the interpreter's values for every spelling of those axes, kept or
/// not, and for ranks 3 to 5.
#[test]
fn reduce_mean_over_the_planes_is_a_global_average_pool() {
    for (shape, axes) in [
        (vec![1, 16, 36, 64], "[2, 3]"),
        (vec![2, 5, 9, 7], "[-1, -2]"),
        (vec![1, 3, 37], "[2]"),
        (vec![1, 4, 3, 5, 6], "[4, 2, 3]"),
        (vec![1, 24, 1, 1], "[2, 3]"),
    ] {
        for keep in [true, false] {
            check(&model(
                &[("x", shape.clone())],
                &[],
                &format!("reduce_mean(%x) {{axes = {axes}, keepdims = {keep}}}"),
            ));
        }
    }
}

#[test]
fn log_softmax_along_every_axis() {
    for axis in [-1, 0, 1, 2] {
        check(&model(
            &[("x", vec![3, 5, 4])],
            &[],
            &format!("log_softmax(%x) {{axis = {axis}}}"),
        ));
    }
}

#[test]
fn pad_reflect_and_edge_randomised() {
    let mut rng = Rng::new(63);
    for case in 0..12 {
        let s: Vec<u64> = (0..3).map(|_| rng.r(2, 6)).collect();
        // Reflection needs pads < the axis length (ONNX); edge takes any.
        let mode = if case % 2 == 0 { "reflect" } else { "edge" };
        let lim = |d: u64| if case % 2 == 0 { d - 1 } else { 4 };
        let pads: Vec<String> = (0..6)
            .map(|i| rng.r(0, lim(s[i % 3])).to_string())
            .collect();
        check(&model(
            &[("x", s.clone())],
            &[],
            &format!("pad(%x) {{pads = [{}], mode = {mode}}}", pads.join(", ")),
        ));
    }
}

#[test]
fn gemm_with_a_computed_transposed_b() {
    let mut rng = Rng::new(64);
    for case in 0..6 {
        let (m, k, n) = (rng.r(1, 9), rng.r(1, 17), rng.r(1, 11));
        let ta = case % 2 == 1;
        let a = if ta { vec![k, m] } else { vec![m, k] };
        let c = if case % 3 == 0 { ", %gc" } else { "" };
        let consts = if case % 3 == 0 {
            vec![("gc", vec![n])]
        } else {
            vec![]
        };
        check(&model(
            &[("a", a), ("b", vec![n, k])],
            &consts,
            &format!(
                "gemm(%a, %b{c}) {{trans_a = {ta}, trans_b = true, alpha = 0.75, beta = 1.5, activation = relu}}"
            ),
        ));
    }
}

#[test]
fn unbufferized_modules_are_refused() {
    let mut m = tir_ir::parse_and_verify(
        "module @u {\n  func @main(%x: tensor<4xf32>) {\n    %y = relu(%x)\n    return %y\n  }\n}\n",
    )
    .unwrap();
    assert!(Bufferized::new(&mut m).is_err());
}

/// The inline exp (codegen/src/vexp.rs) behind every exp-based op, over the whole float
/// range: overflow (> 88.72) and underflow (< -103.97) edges, subnormal results, ±0, tiny
/// magnitudes, and a dense sweep of [-110, 110], against the interpreter's `f32::exp`.
#[test]
fn exp_based_ops_over_the_float_range() {
    let mut xs: Vec<f32> = vec![
        0.0,
        -0.0,
        1e-30,
        -1e-30,
        f32::MIN_POSITIVE,
        1e-7,
        -1e-7,
        0.5,
        -0.5,
        std::f32::consts::LN_2,
        -std::f32::consts::LN_2,
        1.0,
        -1.0,
        80.0,
        -80.0,
        87.0,
        -87.0,
        88.7,
        88.72,
        88.73,
        89.0,
        -88.0,
        -95.0,
        -103.0,
        -103.97,
        -104.0,
        100.0,
        -100.0,
        1e10,
        -1e10,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let n = 2048;
    xs.extend((0..n).map(|i| -110.0 + 220.0 * i as f32 / (n - 1) as f32));
    // Every ulp-scale neighbourhood of a reduction boundary (n·ln2 ± ln2/2).
    xs.extend((-150..=128).map(|i| (i as f32 + 0.5) * std::f32::consts::LN_2));
    xs.truncate(xs.len() / 8 * 8);
    let len = xs.len() as u64;
    // gelu computes its exp in f64 (as the reference does), the others in f32.
    for op in [
        "exp(%x)",
        "sigmoid(%x)",
        "gelu(%x)",
        "softmax(%x) {axis = 1}",
    ] {
        let shape = if op.starts_with("softmax") {
            vec![len / 8, 8]
        } else {
            vec![len]
        };
        let text = model(&[("x", shape.clone())], &[], op);
        check_with(&text, Some(vec![Tensor::f32(shape, xs.clone()).unwrap()]));
    }
}

#[test]
fn depthwise_stride_two_and_small_planes() {
    // Stride 2 on every odd width 1..39 (lane-picking loads, masked remainders, scalar
    // borders), with channel multipliers and padding; then small unit-stride planes with
    // "same" padding, which take the flat path (one masked load per tap and vector, the
    // vectors spanning rows): 7×7 and 14×14 as in MobileNet's late blocks, odd sizes, 5×5
    // kernels, dilation, and a plane just under and one just over the flat limit.
    let mut rng = Rng::new(23);
    for w in (1..40).step_by(2) {
        let c = rng.r(1, 3);
        let mult = rng.r(1, 2);
        let k = if w < 3 { 1 } else { 3 };
        let pad = rng.r(0, k / 2);
        let h = rng.r(k, 9);
        let act = ["", ", activation = relu6"][w as usize % 4 / 2];
        check(&model(
            &[("x", vec![1, c, h, w])],
            &[("w", vec![c * mult, 1, k, k]), ("b", vec![c * mult])],
            &format!(
                "conv2d(%x, %w, %b) {{strides = [2, 2], pads = [{pad}, {pad}, {pad}, {pad}], groups = {c}{act}}}"
            ),
        ));
    }
    for (h, w, k, d, mult, act) in [
        (7, 7, 3, 1, 1, ", activation = relu6"),
        (14, 14, 3, 1, 1, ", activation = relu6"),
        (7, 7, 5, 1, 1, ", activation = hard_swish"),
        (5, 9, 3, 2, 2, ""),
        (3, 17, 5, 1, 1, ", activation = relu"),
        (1, 1, 3, 1, 1, ""),
        (16, 16, 3, 1, 1, ""),
        (17, 16, 3, 1, 2, ", activation = relu6"),
    ] {
        let c = 3;
        let p = d * (k - 1) / 2;
        check(&model(
            &[("x", vec![2, c, h, w])],
            &[("w", vec![c * mult, 1, k, k]), ("b", vec![c * mult])],
            &format!(
                "conv2d(%x, %w, %b) {{dilations = [{d}, {d}], pads = [{p}, {p}, {p}, {p}], groups = {c}{act}}}"
            ),
        ));
    }
}

#[test]
fn pointwise_small_spatial_k_blocked_and_gemv() {
    // 1×1 convolutions on the spatial sizes of late layers (N = H·W in {1, 7, 49, 50, 196})
    // with odd K: the narrow path (N <= 64, one column block, cut by channels), the wide path with K long
    // enough to be cut into K blocks (first, middle loop and last block resuming from C) and
    // a masked column remainder; N = 1 is the unrolled gemv (with a K tail and a row tail).
    for (c, m, h, w) in [
        (1283, 13, 1, 1),
        (97, 6, 1, 1),
        (301, 7, 1, 7),
        (305, 17, 7, 7),
        (33, 30, 5, 10),
        (401, 14, 14, 14),
        (35, 25, 14, 14),
        // One column block with at least as many channels as pixels (iris_landmark's 8×8
        // layers): cut by output channels, not columns.
        (128, 64, 8, 8),
        (64, 128, 8, 8),
    ] {
        check(&model(
            &[("x", vec![1, c, h, w])],
            &[("w", vec![m, c, 1, 1]), ("b", vec![m])],
            "conv2d(%x, %w, %b) {activation = relu6}",
        ));
    }
    // A K-blocked matmul with row and column tails.
    check(&model(
        &[("a", vec![13, 389])],
        &[("bw", vec![389, 70])],
        "matmul(%a, %bw)",
    ));
}

#[test]
fn pointwise_narrow_packed_panels() {
    // 1×1 convolutions on narrow GEMMs (N = H·W at most 4 vectors) have their weights packed
    // at compile time into row panels `[M/MR][K][MR]` as high as the narrow tile: every tile
    // height (N of 1, 2, 3 and 4 vectors: 12, 12, 8 and 6 rows at 16 lanes), masked and full
    // last vectors, M tails inside the last 24-channel chunk of a thread cut (the tail panel),
    // odd K, a batch, and M below N (cut by pixels, one panel of M rows).
    for (n, c, m, h, w) in [
        (1, 37, 53, 7, 7),
        (1, 19, 29, 4, 4),
        (1, 8, 41, 5, 6),
        (1, 70, 31, 6, 7),
        (1, 5, 70, 8, 8),
        (2, 33, 27, 3, 5),
        (1, 9, 5, 7, 7),
    ] {
        check(&model(
            &[("x", vec![n, c, h, w])],
            &[("w", vec![m, c, 1, 1]), ("b", vec![m])],
            "conv2d(%x, %w, %b) {activation = relu}",
        ));
    }
    // A weight with two uses stays row-major (the other use may not read panels): a narrow
    // and a wide convolution on the same weights.
    let text = "module @k {\n  func @main(%x: tensor<1x21x7x7xf32>, %y: tensor<1x21x10x10xf32>) -> (tensor<1x30x7x7xf32>, tensor<1x30x10x10xf32>) {\n    %w = const {name = \"w\"} : tensor<30x21x1x1xf32>\n    %a = conv2d(%x, %w) : tensor<1x30x7x7xf32>\n    %b = conv2d(%y, %w) : tensor<1x30x10x10xf32>\n    return %a, %b\n  }\n}\n";
    check(text);
}

#[test]
fn pointwise_channel_vectors() {
    // 1×1 convolutions on small images (2..=289 pixels, not whole vectors from 48 on but 64)
    // with K >= 128 run with vectors along the output channels (`kernels/gemm/chanvec.rs`): 49
    // pixels (7-pixel tiles), 36 (6), 25 (8 and a 1-pixel tail), 21, 2; M tails of 5 lanes
    // (53 = 48 + 5), of a full vector and 6 lanes (70 = 48 + 22), M below 16, two full panels
    // with a batch, odd K; every fused activation, with and without a bias. 14×14 (7-pixel
    // tiles; 260 = 5·48 + 20 channels) and 17×17 (8 and a 1-pixel tail; 190 = 3·48 + 46,
    // fewer channels than pixels: cut by channels, not pixel columns). Past 8×8 where two
    // threads would share the 48-channel panels unevenly, cut by chunks of pixel tiles
    // instead: 99 pixels with 49 channels, 14×14 with 100 and with 64 (7-pixel tiles, 4
    // chunks of 49), 17×17 with 112 and a batch (8-pixel tiles, chunks of 80 and a last of
    // 49), 13×13 with 16 (a chunk of 48 pixels, a whole number of vectors, still on the
    // channel vectors); 14×14 with 256 (six panels that split evenly enough, 144 / 112,
    // but less equally than the pixels: cut by pixels too; K = 272, two K chunks and a
    // tail). The neighbours: N = 64 (8×8, whole vectors but on the
    // channel vectors: 8-pixel tiles, 100 = 2·48 + 4 channels), N = 256 (whole vectors), N = 306
    // (past 17×17: cut by pixel columns) and N = 1 (the gemv). Cut into 48-channel chunks on 0–3 threads
    // (`check`).
    for (n, c, m, h, w, act, bias) in [
        (1, 129, 53, 7, 7, "relu", true),
        (1, 131, 70, 6, 6, "sigmoid", true),
        (1, 128, 7, 5, 5, "tanh", false),
        (2, 137, 96, 7, 7, "hard_swish", true),
        (1, 150, 40, 3, 7, "relu6", false),
        (1, 160, 33, 2, 1, "relu", true),
        (1, 128, 100, 8, 8, "relu", true),
        (1, 200, 13, 1, 1, "relu", true),
        (1, 256, 260, 14, 14, "relu", true),
        (1, 130, 190, 17, 17, "relu6", false),
        (1, 256, 100, 14, 14, "relu", true),
        (1, 200, 64, 14, 14, "relu", true),
        (1, 272, 256, 14, 14, "relu", true),
        (2, 160, 112, 17, 17, "relu6", true),
        (1, 144, 16, 13, 13, "relu", false),
        (2, 128, 49, 9, 11, "sigmoid", true),
        (1, 128, 40, 16, 16, "relu", true),
        (1, 129, 40, 18, 17, "relu", true),
    ] {
        let (operands, consts) = if bias {
            ("%x, %w, %b", vec![("w", vec![m, c, 1, 1]), ("b", vec![m])])
        } else {
            ("%x, %w", vec![("w", vec![m, c, 1, 1])])
        };
        check(&model(
            &[("x", vec![n, c, h, w])],
            &consts,
            &format!("conv2d({operands}) {{activation = {act}}}"),
        ));
    }
}

#[test]
fn pointwise_channel_vectors_match_the_pixel_vector_tiles_bitwise() {
    // The same convolution twice on the same values: `%wa` has one use, so it is packed in
    // 48-row channel panels and runs with vectors along channels; `%wb` has a second use (a
    // wide convolution), so it stays row-major and runs on the narrow pixel-vector tiles.
    // Same FMA chain per output (zero, one FMA per k in order, the same epilogue), so the
    // same bits, whole and on 0–3 threads.
    for (c, m, hw, act) in [
        (131, 53, 7, "relu"),
        (160, 70, 6, "sigmoid"),
        (256, 260, 14, "relu"),
        (130, 190, 17, "relu"),
        (192, 100, 8, "relu"),
        (512, 128, 14, "relu"),
        (144, 16, 13, "relu"),
    ] {
        packed_and_row_major_weights_agree_bitwise(
            [c, hw, hw],
            [m, 1],
            &format!("activation = {act}"),
            [hw, hw],
        );
    }
}

#[test]
fn strided_panel_channel_vectors_match_the_pixel_vector_tiles_bitwise() {
    // A 3×3/2 convolution onto 7×7, 14×14, 17×17 and 28×28 (blocks of 7 rows cut by rows)
    // twice on the same values: `%wa` is
    // packed in 48-row channel panels (the channel-vector tiles on the packed im2col
    // panel, partial sums kept between K chunks), `%wb` has a second use and runs the
    // pixel-vector GEMM on the same panel. Same chains, so the same bits, on 0–3 threads.
    for (c, m, h, pad, o, act) in [
        (100, 100, 13, 1, 7, "relu"),
        (96, 96, 28, 1, 14, "relu6"),
        (40, 96, 35, 0, 17, "relu"),
        // Onto 17×17 in several K chunks (unpadded and padded) and onto 8×8: the packed
        // tiles read their taps in place, from the image or a padded copy.
        (72, 96, 35, 0, 17, "relu"),
        (72, 96, 33, 1, 17, "relu"),
        (160, 96, 17, 0, 8, "relu6"),
        (32, 40, 56, 1, 28, "relu"),
        // 260 channels cut 128/132 by vectors: the second chunk starts 32 rows into a
        // panel and ends in the 20-row last panel.
        (32, 260, 28, 1, 14, "relu"),
    ] {
        packed_and_row_major_weights_agree_bitwise(
            [c, h, h],
            [m, 3],
            &format!("strides = [2, 2], pads = [{pad}, {pad}, {pad}, {pad}], activation = {act}"),
            [o, o],
        );
    }
}

/// `conv2d(x, w, b) {attrs}` of a `[1, c, h, w]` image by `[m, c, k, k]` weights into
/// `[1, m, oh, ow]`, once with weights of one use (packed at compile time where the kernel
/// packs them) and once with the same values in a weight of two uses (row-major: its other
/// use is a stride-1 convolution of a 10×10 image), whole and on 0–3 threads: the outputs
/// are bitwise equal, and the convolution's.
fn packed_and_row_major_weights_agree_bitwise(
    [c, h, w]: [u64; 3],
    [m, k]: [u64; 2],
    attrs: &str,
    [oh, ow]: [u64; 2],
) {
    let x = t(&[1, c, h, w]);
    let o = t(&[1, m, oh, ow]);
    let text = format!(
        "module @k {{\n  func @main(%x: {x}, %y: {y}) -> ({o}, {o}, {wide}) {{\n    %wa = const {{name = \"wa\"}} : {wt}\n    %wb = const {{name = \"wb\"}} : {wt}\n    %ba = const {{name = \"ba\"}} : {bt}\n    %bb = const {{name = \"bb\"}} : {bt}\n    %a = conv2d(%x, %wa, %ba) {{{attrs}}} : {o}\n    %b = conv2d(%x, %wb, %bb) {{{attrs}}} : {o}\n    %d = conv2d(%y, %wb) : {wide}\n    return %a, %b, %d\n  }}\n}}\n",
        y = t(&[1, c, 10, 10]),
        wide = t(&[1, m, 11 - k, 11 - k]),
        wt = t(&[m, c, k, k]),
        bt = t(&[m]),
    );
    let module = tir_ir::parse_and_verify(&text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    let func = module.entry().expect("entry");
    let mut weights = Weights::generate(&module, 7).expect("weights");
    let wa = weights.get("wa").expect("wa").clone();
    let ba = weights.get("ba").expect("ba").clone();
    weights.insert("wb", wa);
    weights.insert("bb", ba);
    let inputs: Vec<Tensor> = func
        .params
        .iter()
        .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 3).unwrap())
        .collect();
    let mut md = module.clone();
    let passes = parse_pipeline("plan{sharing=true},bufferize").unwrap();
    run_pipeline(&mut md, &passes, true, |_, _| {}).expect("pipeline");
    let proof = Bufferized::new(&mut md).expect("bufferized");
    let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();
    let mut runs = vec![jit_run(&proof, &weights, &ins).expect("jit")];
    runs.extend(jit_run_threads(&proof, &weights, &ins, &[0, 1, 2, 3], 0, 1).expect("tiled"));
    for run in &runs {
        let (a, b) = (&run[0], &run[1]);
        assert!(a.iter().any(|&v| v != 0.0), "{text}");
        assert!(
            a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits()),
            "packed and row-major weights differ\n{text}"
        );
    }
    // And the values are the convolution's.
    check_with(&text, Some(inputs));
}

/// Strided dense convolutions onto small outputs with K ≥ 128 (ResNet's 3×3/2 onto 14×14 and
/// 7×7, Inception v3's onto 17×17) store their weights at compile time in 48-row channel
/// panels and run the packed im2col panel's GEMM on the channel-vector tiles, the partial
/// sums kept between K chunks: 7×7 (7-pixel tiles) with two K chunks and a 4-row tail panel,
/// with a bias and without, 14×14 with a batch and four chunks, 17×17 (8-pixel tiles and a
/// 1-pixel tail) in one chunk, 5×5 (25 pixels), a 5-row tail panel below 48 channels;
/// cut into 48-channel chunks on 0–3 threads (`check`). Bigger outputs cut by rows run the
/// same tiles per pixel block: 28×28 in blocks of 7 rows (196 pixels); 26×26 is three
/// blocks (9, 9 and an 8-row tail block) cut by channel panels.
#[test]
fn conv2d_strided_packed_panel_channel_vectors() {
    for (n, c, h, m, pad, act, bias) in [
        (1, 100, 13, 100, 1, "relu", true),
        (1, 100, 13, 100, 1, "relu6", false),
        (2, 96, 28, 96, 1, "relu", true),
        (1, 40, 35, 96, 0, "relu6", true),
        (1, 128, 9, 40, 1, "relu", true),
        (1, 29, 14, 53, 1, "sigmoid", false),
        (1, 32, 56, 40, 1, "relu", true),
        (1, 29, 52, 96, 1, "relu", false),
        // Chunks of whole vectors that start inside a panel (K at least the packed panels'
        // 256): 256 channels cut 128/128, and 260 (the last panel 20 rows, its second
        // vector 4 lanes) cut 128/132.
        (1, 32, 28, 256, 1, "relu", true),
        (1, 32, 28, 260, 1, "relu6", false),
    ] {
        let (operands, consts) = if bias {
            ("%x, %w, %b", vec![("w", vec![m, c, 3, 3]), ("b", vec![m])])
        } else {
            ("%x, %w", vec![("w", vec![m, c, 3, 3])])
        };
        check(&model(
            &[("x", vec![n, c, h, h])],
            &consts,
            &format!(
                "conv2d({operands}) {{strides = [2, 2], pads = [{pad}, {pad}, {pad}, {pad}], activation = {act}}}"
            ),
        ));
    }
}

#[test]
fn strided_convolutions_on_whole_channel_panels_read_their_taps_in_place() {
    // Strided convolutions on the channel-vector tiles with whole weight panels read every
    // tap in place, with no im2col panel: unpadded ones from the image, padded ones from a
    // padded copy of the block's window. Onto 17×17 in 5 K chunks of 15 channels and a tail
    // of 12 (Inception v3's 3×3/2 class), two images, an even input whose last row and
    // column no tap reads, a 5×5 kernel, onto 8×8 in 2 chunks of several K blocks, blocks of
    // 7 rows cut by rows (the block's first row an offset into the image), 256 channels cut
    // 128 / 128 by vectors; padded on every side, only at the bottom and right, only at the
    // top and left, and by rows with the first and last windows in the padding. Against the
    // interpreter and bitwise on 0–3 threads.
    for (n, c, h, m, k, pads, act) in [
        (1, 72, 35, 96, 3, [0, 0, 0, 0], "relu"),
        (2, 40, 35, 96, 3, [0, 0, 0, 0], "relu6"),
        (1, 40, 36, 48, 3, [0, 0, 0, 0], "relu"),
        (1, 16, 37, 96, 5, [0, 0, 0, 0], "relu"),
        (1, 160, 17, 96, 3, [0, 0, 0, 0], "relu"),
        (1, 32, 57, 96, 3, [0, 0, 0, 0], "relu"),
        (1, 32, 29, 256, 3, [0, 0, 0, 0], "relu6"),
        (1, 72, 33, 96, 3, [1, 1, 1, 1], "relu"),
        (2, 40, 34, 96, 3, [0, 0, 1, 1], "relu"),
        (1, 40, 34, 96, 3, [1, 1, 0, 0], "relu6"),
        (1, 16, 33, 48, 5, [2, 2, 2, 2], "relu"),
        (1, 32, 56, 96, 3, [1, 1, 1, 1], "relu"),
    ] {
        let [t, l, b, r] = pads;
        check(&model(
            &[("x", vec![n, c, h, h])],
            &[("w", vec![m, c, k, k]), ("b", vec![m])],
            &format!(
                "conv2d(%x, %w, %b) {{strides = [2, 2], pads = [{t}, {l}, {b}, {r}], activation = {act}}}"
            ),
        ));
    }
}

#[test]
fn whole_window_conv_is_a_gemv() {
    // A kernel as big as its unpadded input gives one output pixel and runs as the pointwise
    // convolution of a C·KH·KW-channel 1×1 image (iris_landmark's 2×2 heads): any stride,
    // two images, with and without a bias, odd channel counts for the gemv's tails, and big
    // enough to be cut into tiles of output channels.
    for (n, c, m, h, w, s, bias, act) in [
        (1, 128, 213, 2, 2, 1, true, ""),
        (1, 64, 15, 2, 2, 2, true, ", activation = relu"),
        (2, 7, 5, 3, 5, 1, false, ""),
        (2, 33, 70, 3, 3, 3, true, ", activation = relu6"),
        (1, 301, 97, 4, 4, 1, false, ""),
    ] {
        let (operands, consts) = if bias {
            ("%x, %w, %b", vec![("w", vec![m, c, h, w]), ("b", vec![m])])
        } else {
            ("%x, %w", vec![("w", vec![m, c, h, w])])
        };
        check(&model(
            &[("x", vec![n, c, h, w])],
            &consts,
            &format!("conv2d({operands}) {{strides = [{s}, {s}]{act}}}"),
        ));
    }
}

#[test]
fn element_wise_ops_in_place() {
    // A chain of element-wise ops each of which may write over its dying operand: an operand
    // read in place is read through the output's pointer (both operands of `mul(%r, %r)`),
    // cut into tiles (64×32×32 is above the cut), serially and on 3 threads, and through the
    // tile bodies' constant offsets.
    for (c, h, w) in [(64, 32, 32), (3, 5, 7), (16, 1, 33)] {
        let text = format!(
            "module @k {{\n  func @main(%x: {t}, %y: {t}) {{\n    %alpha = const {{name = \"alpha\"}} : {s}\n    %e = relu(%x) : {t}\n    %p = prelu(%e, %alpha) : {t}\n    %r = add(%p, %y) : {t}\n    %m = mul(%r, %r) : {t}\n    %s = sub(%m, %y) : {t}\n    %flat = reshape(%s) {{shape = [-1]}}\n    return %flat\n  }}\n}}\n",
            t = t(&[1, c, h, w]),
            s = t(&[1, c, 1, 1]),
        );
        check(&text);
    }
}

#[test]
fn element_wise_chains_on_images_with_broadcasts() {
    // A chain of element-wise ops on images of odd pixel counts (vector tails), one or two
    // images, with operands broadcast per channel (the PReLU slope, a bias), per pixel (one
    // channel over many) and along the width only, in place and not, cut into their smallest
    // tiles serially and on 1, 2 and 3 threads (`check`). (Cutting such ops by pixel ranges of
    // every channel was tried with this test and not kept: docs/codegen.md, "Where the time
    // goes at 2 threads".)
    for (n, c, h, w) in [(1, 5, 13, 11), (2, 3, 9, 15), (1, 1, 17, 19), (1, 7, 3, 67)] {
        let text = format!(
            "module @k {{\n  func @main(%x: {t}, %y: {t}, %q: {px}, %v: {row}) {{\n    %alpha = const {{name = \"alpha\"}} : {s}\n    %e = relu(%x) : {t}\n    %p = prelu(%e, %alpha) : {t}\n    %r = add(%p, %y) : {t}\n    %m = mul(%r, %q) : {t}\n    %b = add(%m, %alpha) {{activation = relu6}} : {t}\n    %u = sub(%b, %v) : {t}\n    %o = sigmoid(%u) : {t}\n    %flat = reshape(%o) {{shape = [-1]}}\n    return %flat\n  }}\n}}\n",
            t = t(&[n, c, h, w]),
            s = t(&[1, c, 1, 1]),
            px = t(&[n, 1, h, w]),
            row = t(&[1, 1, 1, w]),
        );
        check(&text);
    }
}

#[test]
fn global_avg_pool_vectorised_planes() {
    // Plane sizes for every part of the vectorised sum: unrolled steps of two vectors, a
    // single vector, the masked remainder, and planes of one element or one vector.
    for shape in [
        vec![1, 3, 13, 11],
        vec![2, 2, 37, 37],
        vec![1, 4, 1, 1],
        vec![1, 2, 4, 4],
        vec![1, 3, 112, 112],
    ] {
        check(&model(&[("x", shape)], &[], "global_avg_pool(%x)"));
    }
}

/// The math functions (codegen/src/kernels/math.rs) against the interpreter on values that
/// reach their edges: negatives (NaN from sqrt and log), ±0 (±inf from reciprocal and log),
/// halves (round half to even), ±inf, NaN, large magnitudes, and a sweep of [-12, 12].
#[test]
fn math_functions_at_their_edges() {
    let mut xs: Vec<f32> = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        1e-7,
        -1e-7,
        1e10,
        -1e10,
        100.0,
        -100.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    xs.extend((0..240).map(|i| -12.0 + 0.1 * i as f32));
    let len = xs.len() as u64;
    for op in [
        "abs",
        "neg",
        "sqrt",
        "reciprocal",
        "log",
        "floor",
        "ceil",
        "round",
        "erf",
        "sin",
        "cos",
        "softplus",
        "softsign",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "sign",
    ] {
        let text = model(&[("x", vec![len])], &[], &format!("{op}(%x)"));
        check_with(
            &text,
            Some(vec![Tensor::f32(vec![len], xs.clone()).unwrap()]),
        );
    }
    // The binary ones, every pair of a small set (NaN on either side included), then broadcast.
    let small = [-2.0f32, -0.5, 0.0, 0.5, 2.0, 3.0, f32::INFINITY, f32::NAN];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &p in &small {
        for &q in &small {
            a.push(p);
            b.push(q);
        }
    }
    let n = a.len() as u64;
    for op in ["pow", "max", "min"] {
        let text = model(
            &[("x", vec![n]), ("y", vec![n])],
            &[],
            &format!("{op}(%x, %y)"),
        );
        let given = vec![
            Tensor::f32(vec![n], a.clone()).unwrap(),
            Tensor::f32(vec![n], b.clone()).unwrap(),
        ];
        check_with(&text, Some(given));
        check(&model(
            &[("x", vec![2, 3, 5]), ("y", vec![3, 1])],
            &[],
            &format!("{op}(%x, %y) {{activation = relu}}"),
        ));
    }
}

/// The register tiles are sized to the target's register file (32 vector registers with
/// AVX-512, 16 with AVX2): GEMM, 1×1, row-packed and im2col convolutions and matmul generated
/// for an AVX2 CPU (`haswell`: 8 lanes, 16 registers) agree with the interpreter, whatever the
/// host (on an AVX-512 host `native` covers the 32-register tiles).
#[test]
fn register_tiles_for_a_sixteen_register_file() {
    let (_, features, _) = target_spec("native");
    if !features.split(',').any(|f| f == "+avx2") {
        eprintln!("skipped: the host cannot run AVX2 code");
        return;
    }
    assert_eq!(
        target_spec("haswell").2,
        8,
        "haswell's vectors hold 8 f32 lanes"
    );
    let cases = [
        // Narrow, wide with short and long K, row tails, masked column tails (1x1 = GEMM).
        model(
            &[("x", vec![1, 40, 9, 9])],
            &[("w", vec![13, 40, 1, 1]), ("b", vec![13])],
            "conv2d(%x, %w, %b) {activation = relu6}",
        ),
        model(
            &[("x", vec![1, 7, 12, 17])],
            &[("w", vec![20, 7, 1, 1])],
            "conv2d(%x, %w)",
        ),
        // Row-packed (small image, several input channels) and im2col (wide rows).
        model(
            &[("x", vec![1, 5, 7, 7])],
            &[("w", vec![14, 5, 3, 3]), ("b", vec![14])],
            "conv2d(%x, %w, %b) {pads = [1, 1, 1, 1], activation = relu}",
        ),
        // Row-packed with a periodic middle (200 vectors of 8 lanes, a period of 5).
        model(
            &[("x", vec![1, 3, 40, 40])],
            &[("w", vec![10, 3, 3, 3]), ("b", vec![10])],
            "conv2d(%x, %w, %b) {pads = [1, 1, 1, 1]}",
        ),
        model(
            &[("x", vec![1, 3, 9, 70])],
            &[("w", vec![11, 3, 3, 3])],
            "conv2d(%x, %w) {strides = [1, 2], pads = [0, 1, 1, 0]}",
        ),
        model(
            &[("a", vec![13, 70])],
            &[("bw", vec![70, 37])],
            "matmul(%a, %bw)",
        ),
    ];
    for text in cases {
        let module = tir_ir::parse_and_verify(&text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
        let func = module.entry().expect("entry");
        let weights = Weights::generate(&module, 7).expect("weights");
        let inputs: Vec<Tensor> = func
            .params
            .iter()
            .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 3).unwrap())
            .collect();
        let expected = tir_interp::run(&module, &weights, &inputs).expect("interp");
        let mut m = module.clone();
        let passes = parse_pipeline("plan{sharing=true},bufferize").unwrap();
        run_pipeline(&mut m, &passes, true, |_, _| {}).expect("pipeline");
        let proof = Bufferized::new(&mut m).expect("bufferized");
        let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();
        let got = jit_run_on(&proof, &weights, &ins, "haswell").unwrap_or_else(|e| panic!("{e}"));
        for (e, g) in expected.iter().zip(&got) {
            let e = e.as_f32().unwrap();
            assert_eq!(e.len(), g.len());
            for (i, (a, b)) in e.iter().zip(g).enumerate() {
                let ok = (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-5;
                assert!(ok, "element {i}: reference {a}, generated {b}\n{text}");
            }
        }
    }
}

/// `trilu` against the interpreter: both triangles, diagonals inside, at and past the edges
/// of wide, tall and batched matrices; NaN and infinities in the zeroed part are zeroed.
#[test]
fn trilu_both_triangles_and_offsets() {
    for shape in [vec![3u64, 5], vec![2, 6, 4], vec![2, 1, 3, 3]] {
        for upper in [true, false] {
            for k in [-7i64, -1, 0, 2, 7] {
                check(&model(
                    &[("x", shape.clone())],
                    &[],
                    &format!("trilu(%x) {{upper = {upper}, k = {k}}}"),
                ));
            }
        }
    }
    let odd = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
    let text = model(&[("x", vec![2, 2])], &[], "trilu(%x)");
    check_with(&text, Some(vec![Tensor::f32(vec![2, 2], odd).unwrap()]));
}

/// `grid_sample` computes its coordinates at run time in `f64`, in the interpreter's order:
/// the generated kernel must give the reference's bits, on grids reaching well outside
/// `[-1, 1]` (every padding mode's outside branch), at exact pixel centres and half-way points
/// (nearest's ties), and on one-pixel axes.
#[test]
fn grid_sample_every_mode_and_padding_bitwise() {
    let mut rng = Rng::new(83);
    let mut case = 0;
    for mode in ["bilinear", "nearest", "bicubic"] {
        for padding in ["zeros", "border", "reflection"] {
            for align in [false, true] {
                let (n, c) = (rng.r(1, 2), rng.r(1, 3));
                let (h, w) = if case % 4 == 3 {
                    (1, rng.r(1, 4))
                } else {
                    (rng.r(2, 6), rng.r(2, 6))
                };
                let (oh, ow) = (rng.r(1, 5), rng.r(1, 5));
                case += 1;
                let x: Vec<f32> = (0..n * c * h * w)
                    .map(|_| rng.r(0, 2000) as f32 / 100.0 - 10.0)
                    .collect();
                // Random positions in [-2.5, 2.5] on a 1/8 lattice (ties and exact corners),
                // and some off the lattice.
                let grid: Vec<f32> = (0..n * oh * ow * 2)
                    .map(|i| {
                        let q = rng.r(0, 40) as f32 / 8.0 - 2.5;
                        if i % 3 == 0 {
                            q + rng.r(0, 999) as f32 / 7919.0
                        } else {
                            q
                        }
                    })
                    .collect();
                let text = model(
                    &[("x", vec![n, c, h, w]), ("g", vec![n, oh, ow, 2])],
                    &[],
                    &format!(
                        "grid_sample(%x, %g) {{mode = {mode}, padding_mode = {padding}, align_corners = {align}}}"
                    ),
                );
                let given = vec![
                    Tensor::f32(vec![n, c, h, w], x).unwrap(),
                    Tensor::f32(vec![n, oh, ow, 2], grid).unwrap(),
                ];
                let (expected, got) = both_with(&text, "sharing=true", Some(given));
                for (e, g) in expected[0].iter().zip(&got[0]) {
                    assert_eq!(
                        e.to_bits(),
                        g.to_bits(),
                        "reference {e}, generated {g}\n{text}"
                    );
                }
            }
        }
    }
}
