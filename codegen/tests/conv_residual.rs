//! `conv2d` with a residual operand (`act(conv(x) + b + s)`, the skip add fused into the
//! convolution) on every kernel the convolution picks: the GEMM micro-kernel's wide tiles
//! (masked column tail, K blocks), its narrow tiles and the matrix-vector product, the
//! whole-window gemv, depthwise (rows, row pairs, borders, flat planes), row-packed and
//! implicit-im2col tiles, the packed panels of strided convolutions, with groups and batches. Per case:
//! - the interpreter gives the fused op exactly the bits of the unfused `add(conv, s)`;
//! - the generated kernel gives exactly the bits of the unfused conv and add kernels, run
//!   whole and cut into its smallest tiles on 1, 2 and 3 threads (every run the same bits);
//! - and it agrees with the interpreter within float rounding (the kernels' FMA order).

use tir_codegen::{emit, jit_run, jit_run_threads, Artifact, Bufferized, Options};
use tir_interp::weights::{random_input, SplitMix64};
use tir_interp::{Tensor, Weights};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

fn t(shape: &[u64]) -> String {
    let d: Vec<String> = shape.iter().map(|x| x.to_string()).collect();
    format!("tensor<{}xf32>", d.join("x"))
}

/// The output shape of a conv (as the shape rule gives it).
fn out_shape(x: &[u64], w: &[u64], s: u64, d: u64, p: [u64; 4]) -> Vec<u64> {
    let o = |i: usize| (x[2 + i] + p[i] + p[2 + i] - (d * (w[2 + i] - 1) + 1)) / s + 1;
    vec![x[0], w[0], o(0), o(1)]
}

/// `%x`, `%s` and the weights into `body` (`%r` the result), flattened so the result lives in
/// the slab.
fn module(x: &[u64], w: &[u64], o: &[u64], body: &str) -> String {
    format!(
        "module @k {{\n  func @main(%x: {}, %s: {}) {{\n    %w = const {{name = \"w\"}} : {}\n    %b = const {{name = \"b\"}} : {}\n{body}    %flat = reshape(%r) {{shape = [-1]}}\n    return %flat\n  }}\n}}\n",
        t(x),
        t(o),
        t(w),
        t(&[w[0]])
    )
}

/// The interpreter's output and the generated code's: whole, then tiled on 0 (serial), 1, 2
/// and 3 threads.
fn runs(text: &str) -> (Vec<f32>, Vec<Vec<f32>>) {
    let module = tir_ir::parse_and_verify(text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    let func = module.entry().expect("entry");
    let weights = Weights::generate(&module, 7).expect("weights");
    let inputs: Vec<Tensor> = func
        .params
        .iter()
        .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 3).unwrap())
        .collect();
    let interp = tir_interp::run(&module, &weights, &inputs).expect("interp")[0]
        .as_f32()
        .unwrap()
        .to_vec();
    let mut m = module.clone();
    let passes = parse_pipeline("plan{sharing=true},bufferize").unwrap();
    run_pipeline(&mut m, &passes, true, |_, _| {}).expect("pipeline");
    let proof = Bufferized::new(&mut m).expect("bufferized");
    let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();
    let mut got = jit_run(&proof, &weights, &ins).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut all = vec![got.remove(0)];
    for mut r in jit_run_threads(&proof, &weights, &ins, &[0, 1, 2, 3], 0, 1)
        .unwrap_or_else(|e| panic!("tiled: {e}\n{text}"))
    {
        all.push(r.remove(0));
    }
    (interp, all)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// One fused conv against its unfused form, as the module doc says.
fn check(x: &[u64], w: &[u64], stride: u64, dil: u64, pads: [u64; 4], groups: u64, act: &str) {
    let o = out_shape(x, w, stride, dil, pads);
    let attrs = format!(
        "strides = [{stride}, {stride}], dilations = [{dil}, {dil}], pads = [{}, {}, {}, {}], groups = {groups}",
        pads[0], pads[1], pads[2], pads[3]
    );
    let act_attr = if act.is_empty() {
        String::new()
    } else {
        format!(" {{activation = {act}}}")
    };
    let act_conv = if act.is_empty() {
        String::new()
    } else {
        format!(", activation = {act}")
    };
    let fused = module(
        x,
        w,
        &o,
        &format!("    %r = conv2d(%x, %w, %b, %s) {{{attrs}{act_conv}}}\n"),
    );
    let unfused = module(
        x,
        w,
        &o,
        &format!("    %c = conv2d(%x, %w, %b) {{{attrs}}}\n    %r = add(%c, %s){act_attr}\n"),
    );
    let (fi, fr) = runs(&fused);
    let (ui, ur) = runs(&unfused);
    assert_eq!(
        bits(&fi),
        bits(&ui),
        "interpreter, fused vs unfused\n{fused}"
    );
    for (i, (f, u)) in fr.iter().zip(&ur).enumerate() {
        assert_eq!(
            bits(f),
            bits(u),
            "run {i}: fused vs unfused kernels\n{fused}"
        );
    }
    for (i, r) in fr.iter().enumerate().skip(2) {
        assert_eq!(bits(r), bits(&fr[1]), "run {i}: threads differ\n{fused}");
    }
    for r in &fr {
        for (i, (a, b)) in fi.iter().zip(r).enumerate() {
            let ok = a == b || (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-5;
            assert!(ok, "element {i}: reference {a}, generated {b}\n{fused}");
        }
    }
}

#[test]
fn pointwise_gemm_tiles_and_gemv() {
    // Wide tiles with a masked column tail; K long enough to be cut into K blocks (the
    // residual is read only by the last); narrow tiles; the 1×1-image gemv; groups; a batch.
    check(&[1, 35, 14, 14], &[25, 35, 1, 1], 1, 1, [0; 4], 1, "relu");
    check(&[1, 401, 20, 20], &[14, 401, 1, 1], 1, 1, [0; 4], 1, "");
    check(&[2, 64, 9, 11], &[30, 64, 1, 1], 1, 1, [0; 4], 1, "relu6");
    check(&[1, 305, 7, 7], &[17, 305, 1, 1], 1, 1, [0; 4], 1, "relu");
    check(
        &[1, 97, 1, 1],
        &[6, 97, 1, 1],
        1,
        1,
        [0; 4],
        1,
        "hard_swish",
    );
    check(&[2, 12, 8, 8], &[18, 6, 1, 1], 1, 1, [0; 4], 2, "relu");
    // Narrow tiles on weights packed into row panels: a 6-row panel tail of 5 rows in the
    // last 24-channel chunk, and 8-row panels with a batch.
    check(&[1, 37, 7, 7], &[53, 37, 1, 1], 1, 1, [0; 4], 1, "relu");
    check(&[2, 70, 6, 7], &[31, 70, 1, 1], 1, 1, [0; 4], 1, "");
    // Vectors along output channels (small image, K >= 128): the residual read lane by lane
    // at stride H·W; a 48-row panel and a 5-row tail, a batch with a 22-row tail.
    check(&[1, 130, 7, 7], &[53, 130, 1, 1], 1, 1, [0; 4], 1, "relu");
    check(&[2, 129, 6, 6], &[70, 129, 1, 1], 1, 1, [0; 4], 1, "");
    // And on the 14×14 and 17×17 images (7-pixel tiles; 8-pixel tiles and a 1-pixel tail),
    // fewer channels than pixels (cut by channels all the same), K in two and three chunks;
    // 14 channels at 14×14 stay on the pixel-vector tiles (one panel: no 2-thread cut).
    check(
        &[1, 256, 14, 14],
        &[260, 256, 1, 1],
        1,
        1,
        [0; 4],
        1,
        "relu",
    );
    check(&[1, 401, 14, 14], &[14, 401, 1, 1], 1, 1, [0; 4], 1, "");
    check(
        &[1, 140, 17, 17],
        &[190, 140, 1, 1],
        1,
        1,
        [0; 4],
        1,
        "relu",
    );
}

/// The unoptimised LLVM IR of `text`.
fn llvm_ir(text: &str) -> String {
    let mut m = tir_ir::parse_and_verify(text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    let weights = Weights::generate(&m, 7).expect("weights");
    let passes = parse_pipeline("plan{sharing=true},bufferize").unwrap();
    run_pipeline(&mut m, &passes, true, |_, _| {}).expect("pipeline");
    let proof = Bufferized::new(&mut m).expect("bufferized");
    let opts = Options {
        opt_level: 0,
        ..Options::native("k")
    };
    let ir = emit(&proof, &weights, &opts, Artifact::Llvm).expect("emit");
    String::from_utf8_lossy(&ir).into_owned()
}

#[test]
fn the_wide_tiles_prefetch_the_residual_into_l1_and_only_it() {
    // A 1×1 convolution on the wide GEMM tiles (K = 64 > SHORT_K, 400 pixels): with the
    // residual each tile asks for its residual lines with `prefetcht0` (locality 3) before
    // its K loop; without one, no such prefetch.
    let (x, w) = ([1, 64, 20, 20], [40, 64, 1, 1]);
    let o = out_shape(&x, &w, 1, 1, [0; 4]);
    let attrs = "strides = [1, 1], dilations = [1, 1], pads = [0, 0, 0, 0], groups = 1";
    let fused = module(
        &x,
        &w,
        &o,
        &format!("    %r = conv2d(%x, %w, %b, %s) {{{attrs}}}\n"),
    );
    let plain = module(
        &x,
        &w,
        &o,
        &format!("    %c = conv2d(%x, %w, %b) {{{attrs}}}\n    %r = add(%c, %s)\n"),
    );
    let to_l1 = "i32 0, i32 3, i32 1)";
    assert!(llvm_ir(&fused).contains(to_l1), "{fused}");
    assert!(!llvm_ir(&plain).contains(to_l1), "{plain}");
}

#[test]
fn whole_window_gemv() {
    // A kernel as big as its unpadded input: one output pixel, the gemv on C·KH·KW rows.
    check(&[1, 33, 3, 3], &[70, 33, 3, 3], 1, 1, [0; 4], 1, "relu");
    check(&[2, 7, 3, 5], &[5, 7, 3, 5], 2, 1, [0; 4], 1, "");
}

#[test]
fn depthwise_rows_pairs_borders_and_flat_planes() {
    check(&[1, 8, 9, 21], &[8, 1, 3, 3], 1, 1, [1; 4], 8, "relu");
    check(
        &[2, 6, 11, 40],
        &[6, 1, 3, 3],
        2,
        1,
        [1, 1, 0, 1],
        6,
        "relu6",
    );
    check(&[1, 5, 7, 7], &[5, 1, 3, 3], 1, 1, [1; 4], 5, "");
    check(
        &[1, 4, 12, 12],
        &[4, 1, 3, 3],
        1,
        2,
        [2; 4],
        4,
        "hard_swish",
    );
    check(&[1, 6, 9, 9], &[12, 1, 5, 5], 1, 1, [2; 4], 6, "relu");
}

#[test]
fn row_packed_and_implicit_im2col() {
    // Narrow images (row-packed, grid vectors spanning output rows), strided; wide rows
    // (implicit im2col, masked border blocks); groups; a channel tail of the tiles.
    check(&[1, 16, 7, 7], &[20, 16, 3, 3], 1, 1, [1; 4], 1, "relu");
    check(&[2, 8, 14, 14], &[13, 8, 3, 3], 2, 1, [1; 4], 1, "");
    check(&[1, 6, 5, 9], &[8, 3, 3, 3], 1, 2, [2, 1, 2, 1], 2, "relu6");
    check(&[1, 5, 9, 70], &[13, 5, 3, 3], 1, 1, [1; 4], 1, "relu");
    // Cut by bands of rows (at least as many pixels as output channels): the periodic run's
    // repetitions of two images, the residual at each band's offsets.
    check(&[2, 4, 56, 56], &[12, 4, 3, 3], 1, 1, [1; 4], 1, "relu");
    check(
        &[1, 4, 8, 90],
        &[7, 4, 3, 3],
        2,
        1,
        [1, 0, 1, 2],
        1,
        "hard_swish",
    );
    check(&[1, 3, 20, 33], &[9, 3, 7, 7], 2, 1, [3; 4], 1, "relu");
}

#[test]
fn packed_panels() {
    // Strided convolutions with at least 32 output channels take the packed im2col panels:
    // cut by output channels (one pixel block), by blocks of output rows (five blocks), and
    // with K in chunks (64 channels of 3×3 taps over 256 pixels pass the 192 KiB chunk), the
    // residual read by the last chunk's epilogue only.
    check(&[1, 8, 14, 14], &[40, 8, 3, 3], 2, 1, [1; 4], 1, "relu");
    check(&[1, 4, 70, 70], &[32, 4, 3, 3], 2, 1, [1; 4], 1, "");
    check(
        &[2, 5, 23, 30],
        &[33, 5, 5, 5],
        2,
        1,
        [2, 1, 2, 2],
        1,
        "relu6",
    );
    check(&[1, 64, 32, 32], &[32, 64, 3, 3], 2, 1, [1; 4], 1, "relu");
    // Onto 7×7 with K = 900 (two chunks): weights packed in 48-row channel panels (a 4-row
    // tail), the channel-vector tiles reading the residual lane by lane in the last chunk.
    check(
        &[1, 100, 13, 13],
        &[100, 100, 3, 3],
        2,
        1,
        [1; 4],
        1,
        "relu",
    );
    // A stride-1 layer on 147-wide rows reads its taps in place and adds the residual when
    // its sums are copied out (70 channels: a group of 64 and a tail of 6).
    check(&[1, 4, 9, 147], &[70, 4, 3, 3], 1, 1, [1; 4], 1, "relu");
}

#[test]
fn randomised_shapes() {
    let mut rng = SplitMix64(11);
    let mut r = |lo: u64, hi: u64| lo + rng.next_u64() % (hi - lo + 1);
    for case in 0..12 {
        let depthwise = case % 4 == 3;
        let groups = if depthwise {
            r(2, 5)
        } else {
            [1, 1, 2][r(0, 2) as usize]
        };
        let cg = if depthwise { 1 } else { r(1, 4) };
        let m = if depthwise { groups } else { groups * r(1, 5) };
        let (k, s, d) = (r(1, 3), r(1, 2), r(1, 2));
        let pads = [r(0, 2), r(0, 2), r(0, 2), r(0, 1)];
        let (h, w) = (r(k * d, 10), r(k * d, 24));
        let act = ["", "relu", "relu6", "hard_swish"][r(0, 3) as usize];
        check(
            &[r(1, 2), cg * groups, h, w],
            &[m, cg, k, k],
            s,
            d,
            pads,
            groups,
            act,
        );
    }
}

#[test]
fn a_residual_conv_with_a_free_dim_is_refused_naming_it() {
    // The kernels with run-time extents have no residual epilogue: the op is named as one
    // without such a kernel, with the dim to pin (and the same op without the residual is not).
    let text = |operands: &str| {
        format!(
            "module @m {{\n  func @main(%x: tensor<{{n}}x4x6x6xf32>, %s: tensor<{{n}}x4x6x6xf32>) {{\n    %w = const {{name = \"w\"}} : tensor<4x4x3x3xf32>\n    %b = const {{name = \"b\"}} : tensor<4xf32>\n    %y = conv2d({operands}) {{pads = [1, 1, 1, 1], activation = relu}}\n    %r = add(%y, %s)\n    return %r\n  }}\n}}\n"
        )
    };
    let check = |operands: &str| {
        let m = tir_ir::parse_and_verify(&text(operands)).unwrap_or_else(|d| panic!("{d:?}"));
        assert!(m.is_dynamic());
        tir_codegen::dynamic::unsupported_op(m.entry().unwrap(), &tir_ir::Bindings::default())
    };
    let why = check("%x, %w, %b, %s").expect("refused");
    assert!(
        why.contains("`conv2d` (%y)") && why.contains("--dim n=N"),
        "{why}"
    );
    assert_eq!(check("%x, %w, %b"), None);
}
