//! Pointwise convolutions whose constant weights are mostly zeros run on the sparse kernel
//! (`codegen/src/kernels/conv/sparse.rs`: the nonzeros stored by output channel, a run-time
//! loop over them with vectors along the pixels). Per case, with random sparse weights at
//! several densities and shapes (pixel tails, batches, all-zero and fully dense rows,
//! bias, activations, residual, PReLU):
//! - the weights are stored sparse (the constant's bytes are the compressed rows');
//! - the kernel gives exactly the bits of the dense kernel on the same weights given as an
//!   input (each output is the dense FMA chain without its zero terms), whole and cut into
//!   its smallest tiles on 0 (serial), 1, 2 and 3 threads: images of fewer than 16 pixel
//!   blocks are cut by output channels (balanced by their nonzeros), larger ones by pixel
//!   blocks (`few_pixel_blocks_and_channel_cuts`);
//! - and it agrees with the interpreter within float rounding.
//!
//! `integer_sums_are_exact` checks against the interpreter bit for bit
//! where rounding cannot hide a mistake: a skipped nonzero or a wrong offset changes bits.

use tir_codegen::{emit, jit_run, jit_run_threads, Artifact, Bufferized, Options};
use tir_interp::weights::{random_input, SplitMix64};
use tir_interp::{Tensor, Weights};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

fn t(shape: &[u64]) -> String {
    let d: Vec<String> = shape.iter().map(|x| x.to_string()).collect();
    format!("tensor<{}xf32>", d.join("x"))
}

/// What the convolution fuses besides its bias.
#[derive(Clone, Copy, Debug)]
struct Fused {
    act: &'static str,
    residual: bool,
    prelu: bool,
}

const PLAIN: Fused = Fused {
    act: "",
    residual: false,
    prelu: false,
};

/// The 1×1 convolution of `x` (`[N, C, H, W]`) by `m` filters, flattened so its result lives
/// in the slab. The weights are the const `w`, or (`dense`) the parameter `%w` after `%x`:
/// not a constant, so the dense kernel.
fn module(x: &[u64], m: u64, f: Fused, dense: bool) -> String {
    let w = [m, x[1], 1, 1];
    let o = [x[0], m, x[2], x[3]];
    let mut params = format!("%x: {}", t(x));
    let mut body = String::new();
    if dense {
        params += &format!(", %w: {}", t(&w));
    } else {
        body += &format!("    %w = const {{name = \"w\"}} : {}\n", t(&w));
    }
    if f.residual {
        params += &format!(", %s: {}", t(&o));
    }
    body += &format!("    %b = const {{name = \"b\"}} : {}\n", t(&[m]));
    let mut operands = "%x, %w, %b".to_string();
    if f.residual {
        operands += ", %s";
    }
    let mut attrs = Vec::new();
    if f.prelu {
        body += &format!("    %a = const {{name = \"a\"}} : {}\n", t(&[m]));
        operands += ", %a";
        attrs.push("activation = prelu".to_string());
    } else if !f.act.is_empty() {
        attrs.push(format!("activation = {}", f.act));
    }
    let attrs = if attrs.is_empty() {
        String::new()
    } else {
        format!(" {{{}}}", attrs.join(", "))
    };
    format!(
        "module @k {{\n  func @main({params}) {{\n{body}    %r = conv2d({operands}){attrs}\n    %flat = reshape(%r) {{shape = [-1]}}\n    return %flat\n  }}\n}}\n"
    )
}

/// `[m, c]` weights, each nonzero with probability `density`; rows in `zero_rows` all zeros,
/// rows in `dense_rows` without a zero.
fn sparse_weights(m: u64, c: u64, density: f64, zero_rows: &[u64], dense_rows: &[u64]) -> Vec<f32> {
    let mut rng = SplitMix64(0x5ba2_5e00 ^ (m * 1000 + c));
    let mut w = Vec::with_capacity((m * c) as usize);
    for r in 0..m {
        for _ in 0..c {
            // `next_unit` is uniform on [-1, 1).
            let keep = ((rng.next_unit() as f64) + 1.0) / 2.0 < density;
            let v = rng.next_unit();
            let v = if v == 0.0 { 0.5 } else { v };
            w.push(
                if dense_rows.contains(&r) || (keep && !zero_rows.contains(&r)) {
                    v
                } else {
                    0.0
                },
            );
        }
    }
    w
}

/// The bytes of the compressed rows of `w` (`[m, c]`): `m + 1` starts, two words a nonzero.
fn csr_len(w: &[f32], m: u64) -> usize {
    4 * (m as usize + 1) + 8 * w.iter().filter(|&&v| v != 0.0).count()
}

fn bufferize(text: &str) -> tir_ir::Module {
    let mut m = tir_ir::parse_and_verify(text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    let passes = parse_pipeline("plan{sharing=true},bufferize").unwrap();
    run_pipeline(&mut m, &passes, true, |_, _| {}).expect("pipeline");
    m
}

/// The generated code's outputs: run whole, then tiled on 0, 1, 2 and 3 threads.
fn runs(text: &str, weights: &Weights, ins: &[&[f32]]) -> Vec<Vec<f32>> {
    let mut m = bufferize(text);
    let proof = Bufferized::new(&mut m).expect("bufferized");
    let mut got = jit_run(&proof, weights, ins).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut all = vec![got.remove(0)];
    for mut r in jit_run_threads(&proof, weights, ins, &[0, 1, 2, 3], 0, 1)
        .unwrap_or_else(|e| panic!("tiled: {e}\n{text}"))
    {
        all.push(r.remove(0));
    }
    all
}

/// Whether the LLVM module of `text` holds a constant of `bytes` bytes (the weights stored
/// sparse: their dense size differs in every case below).
fn stores_constant_of(text: &str, weights: &Weights, bytes: usize) -> bool {
    let mut m = bufferize(text);
    let proof = Bufferized::new(&mut m).expect("bufferized");
    let opts = Options {
        opt_level: 0,
        ..Options::native("k")
    };
    let ir = emit(&proof, weights, &opts, Artifact::Llvm).expect("emit");
    String::from_utf8_lossy(&ir).contains(&format!("constant [{bytes} x i8]"))
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The module doc's checks on `x` by `w` (`[m, C]`).
fn check(x: &[u64], m: u64, w: Vec<f32>, f: Fused) {
    let sparse = module(x, m, f, false);
    let dense = module(x, m, f, true);
    let parsed = tir_ir::parse_and_verify(&sparse).unwrap_or_else(|d| panic!("{d:?}\n{sparse}"));
    let mut weights = Weights::generate(&parsed, 7).expect("weights");
    let wt = Tensor::f32(vec![m, x[1], 1, 1], w.clone()).expect("weights tensor");
    weights.insert("w", wt.clone());
    let func = parsed.entry().expect("entry");
    let inputs: Vec<Tensor> = func
        .params
        .iter()
        .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 3).unwrap())
        .collect();
    assert!(
        stores_constant_of(&sparse, &weights, csr_len(&w, m)),
        "weights not stored sparse\n{sparse}"
    );
    let interp = tir_interp::run(&parsed, &weights, &inputs).expect("interp")[0]
        .as_f32()
        .unwrap()
        .to_vec();
    let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();
    let got = runs(&sparse, &weights, &ins);
    // The dense module takes the weights as its second input.
    let mut dense_ins = vec![ins[0], wt.as_f32().unwrap()];
    dense_ins.extend(&ins[1..]);
    let want = runs(&dense, &weights, &dense_ins);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(bits(r), bits(&got[0]), "run {i}: threads differ\n{sparse}");
        // One pixel is the dense kernel's matrix–vector product, which sums in another order.
        if x[2] * x[3] > 1 {
            assert_eq!(
                bits(r),
                bits(&want[i]),
                "run {i}: sparse vs dense\n{sparse}"
            );
        }
        for (e, (a, b)) in interp.iter().zip(r).enumerate() {
            let ok = a == b || (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-5;
            assert!(ok, "element {e}: reference {a}, generated {b}\n{sparse}");
        }
    }
}

#[test]
fn densities_and_pixel_tails() {
    // 144 pixels: two blocks of 4 vectors and one whole vector; face_detection's 96 → 64.
    check(
        &[1, 96, 12, 12],
        64,
        sparse_weights(64, 96, 0.3, &[], &[]),
        PLAIN,
    );
    // 63 pixels: one block of 4 vectors, the last 15 lanes; a batch of two.
    check(
        &[2, 33, 7, 9],
        17,
        sparse_weights(17, 33, 0.25, &[], &[]),
        PLAIN,
    );
    // 70 pixels: a block, then one vector of 6 lanes; just over two thirds of the weights
    // zero (the threshold).
    let w = sparse_weights(12, 24, 0.31, &[], &[]);
    assert!(w.iter().filter(|&&v| v == 0.0).count() * 3 >= w.len() * 2);
    check(&[1, 24, 7, 10], 12, w, PLAIN);
    // One pixel, one lane.
    check(
        &[1, 48, 1, 1],
        8,
        sparse_weights(8, 48, 0.2, &[], &[]),
        PLAIN,
    );
    // More nonzeros than a 4-wide image has pixels: 300 pixels in 5 blocks and a tail.
    check(
        &[1, 384, 15, 20],
        40,
        sparse_weights(40, 384, 0.25, &[], &[]),
        PLAIN,
    );
}

#[test]
fn few_pixel_blocks_and_channel_cuts() {
    // face_detection_full_range_sparse's small images: 6×6 (one block of pixels, cut only
    // by channels) into 160 channels, 12×12 (three blocks) with channels of no nonzero and
    // of no zero, which skew the balance by nonzeros.
    check(
        &[1, 96, 6, 6],
        160,
        sparse_weights(160, 96, 0.3, &[], &[]),
        PLAIN,
    );
    check(
        &[1, 40, 12, 12],
        24,
        sparse_weights(24, 40, 0.25, &[0, 1, 2, 3], &[20, 21]),
        Fused {
            act: "relu6",
            ..PLAIN
        },
    );
    // Fewer output channels than chunks a thread count could want.
    check(
        &[1, 64, 5, 5],
        3,
        sparse_weights(3, 64, 0.3, &[], &[]),
        PLAIN,
    );
    // A batch cut by channels, with the residual and the PReLU read at each chunk's rows.
    check(
        &[2, 32, 6, 6],
        24,
        sparse_weights(24, 32, 0.3, &[5], &[]),
        Fused {
            act: "",
            residual: true,
            prelu: true,
        },
    );
    // 33×32 = 1056 pixels, 17 blocks of 4 AVX-512 vectors (34 of AVX2's): cut by pixel
    // blocks, the last one partial.
    check(
        &[1, 24, 33, 32],
        16,
        sparse_weights(16, 24, 0.3, &[], &[]),
        PLAIN,
    );
}

#[test]
fn all_zero_and_fully_dense_rows() {
    // Channels 0, 5 and 16 have no nonzero (their output is the bias through the
    // activation), channels 3 and 9 no zero.
    let w = sparse_weights(17, 40, 0.2, &[0, 5, 16], &[3, 9]);
    check(
        &[1, 40, 10, 13],
        17,
        w.clone(),
        Fused {
            act: "relu",
            ..PLAIN
        },
    );
    check(&[2, 40, 3, 5], 17, w, PLAIN);
}

#[test]
fn epilogues() {
    let w = sparse_weights(24, 32, 0.25, &[7], &[]);
    for act in ["relu", "relu6", "sigmoid", "tanh", "hard_swish"] {
        check(&[1, 32, 9, 9], 24, w.clone(), Fused { act, ..PLAIN });
    }
    // The residual after the bias; the PReLU after it.
    let residual = Fused {
        residual: true,
        ..PLAIN
    };
    check(&[2, 32, 9, 9], 24, w.clone(), residual);
    check(
        &[1, 32, 11, 7],
        24,
        w.clone(),
        Fused {
            prelu: true,
            ..residual
        },
    );
    check(
        &[1, 32, 6, 6],
        24,
        w,
        Fused {
            prelu: true,
            ..PLAIN
        },
    );
}

#[test]
fn integer_sums_are_exact() {
    // Small integers in the input and the weights: every product and partial sum is exact
    // in f32, so the kernel's bits are the interpreter's whatever order either sums in. A
    // skipped nonzero, one read at the wrong row or pixel, or a weight paired with another
    // row changes bits. Channel m has 8 nonzeros at input channels (5m + 3 + 11j) mod 29.
    let (c, m) = (29u64, 23u64);
    let mut w = vec![0.0f32; (m * c) as usize];
    for r in 0..m {
        for j in 0..8 {
            let at = (r * c + (5 * r + 3 + 11 * j) % c) as usize;
            w[at] = [1.0, -2.0, 3.0, -4.0, 2.0][((r + j) % 5) as usize];
        }
    }
    for x in [[1u64, c, 11, 13], [2, c, 4, 4]] {
        let text = module(&x, m, PLAIN, false);
        let parsed = tir_ir::parse_and_verify(&text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
        let mut weights = Weights::new();
        weights.insert("w", Tensor::f32(vec![m, c, 1, 1], w.clone()).unwrap());
        let bias: Vec<f32> = (0..m).map(|r| r as f32 - 11.0).collect();
        weights.insert("b", Tensor::f32(vec![m], bias).unwrap());
        assert!(stores_constant_of(&text, &weights, csr_len(&w, m)));
        let n = (x.iter().product::<u64>()) as usize;
        let xs: Vec<f32> = (0..n).map(|i| ((i * 7919) % 17) as f32 - 8.0).collect();
        let input = Tensor::f32(x.to_vec(), xs).unwrap();
        let interp = tir_interp::run(&parsed, &weights, std::slice::from_ref(&input))
            .expect("interp")[0]
            .as_f32()
            .unwrap()
            .to_vec();
        for r in runs(&text, &weights, &[input.as_f32().unwrap()]) {
            assert_eq!(bits(&r), bits(&interp), "{text}");
        }
    }
}

/// Whether the weights `w` of a 1×1 convolution of `x` into `m` channels are stored sparse,
/// dense (their dense bytes), or neither.
fn stored_sparse(x: &[u64], m: u64, w: &[f32]) -> Option<bool> {
    let text = module(x, m, PLAIN, false);
    let parsed = tir_ir::parse_and_verify(&text).unwrap();
    let mut weights = Weights::generate(&parsed, 7).expect("weights");
    weights.insert("w", Tensor::f32(vec![m, x[1], 1, 1], w.to_vec()).unwrap());
    let sparse = stores_constant_of(&text, &weights, csr_len(w, m));
    let dense = stores_constant_of(&text, &weights, w.len() * 4);
    (sparse != dense).then_some(sparse)
}

#[test]
fn the_threshold() {
    let zeros = |w: &[f32]| w.iter().filter(|&&v| v == 0.0).count();
    // Under two thirds zeros: dense.
    let (x, m) = ([1u64, 32, 8, 8], 16u64);
    let w = sparse_weights(m, x[1], 0.4, &[], &[]);
    assert!(zeros(&w) * 3 < w.len() * 2 && zeros(&w) * 2 > w.len());
    assert_eq!(stored_sparse(&x, m, &w), Some(false));
    // Two thirds zeros exactly: sparse (every third weight nonzero, 32 of 96 per channel).
    let (x, m) = ([1u64, 96, 8, 8], 16u64);
    let w: Vec<f32> = (0..m * 96)
        .map(|i| if i % 3 == 0 { 0.5 } else { 0.0 })
        .collect();
    assert_eq!(zeros(&w) * 3, w.len() * 2);
    assert_eq!(stored_sparse(&x, m, &w), Some(true));
    // Sparse enough, but fewer than 4 nonzeros per channel on average (8 input channels,
    // 3 nonzeros each): dense.
    let (x, m) = ([1u64, 8, 16, 16], 32u64);
    let w: Vec<f32> = (0..m * 8)
        .map(|i| if i % 8 < 3 { 1.5 } else { 0.0 })
        .collect();
    assert_eq!(stored_sparse(&x, m, &w), Some(false));
}

#[test]
fn the_profile_names_the_sparse_kernel() {
    // `--profile`'s table (`<model>_profile_info`, a constant string of the module) labels
    // the layer `conv2d.sparse` and counts the FLOPs it does: 2 per nonzero and pixel, here
    // 2 · 64 pixels · (16 channels × 32 nonzeros) = 65536, not the dense 196608.
    let (x, m) = ([1u64, 96, 8, 8], 16u64);
    let w: Vec<f32> = (0..m * 96)
        .map(|i| if i % 3 == 0 { 0.5 } else { 0.0 })
        .collect();
    let ir = |w: &[f32]| {
        let text = module(&x, m, PLAIN, false);
        let parsed = tir_ir::parse_and_verify(&text).unwrap();
        let mut weights = Weights::generate(&parsed, 7).expect("weights");
        weights.insert("w", Tensor::f32(vec![m, x[1], 1, 1], w.to_vec()).unwrap());
        let mut b = bufferize(&text);
        let proof = Bufferized::new(&mut b).expect("bufferized");
        let opts = Options {
            opt_level: 0,
            ..Options::native("k")
        };
        let ir = emit(&proof, &weights, &opts, Artifact::Llvm).expect("emit");
        String::from_utf8_lossy(&ir).into_owned()
    };
    let sparse = ir(&w);
    assert!(
        sparse.contains("conv2d.sparse 1x1/1\\09%r\\091x16x8x8\\0965536\\0A"),
        "{}",
        sparse
            .lines()
            .filter(|l| l.contains("profile"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Every weight nonzero: dense, labelled as before with the dense count.
    let dense = ir(&vec![0.25; (m * 96) as usize]);
    assert!(!dense.contains("conv2d.sparse"));
    assert!(dense.contains("conv2d.1x1 1x1/1\\09%r\\091x16x8x8\\09196608\\0A"));
}
