//! egg rewriting (issue 8) end to end: rewritten programs verify, never plan a larger slab,
//! and compute what the original computes through the reference interpreter (within 1e-5
//! relative: partial sums change the summation order), with every sliced weight taken from
//! the original weights.

use tir_interp::{Data, Tensor, Weights};
use tir_ir::builder::Builder;
use tir_ir::op::{Conv2d, Pool2d};
use tir_ir::{Activation, BinaryOp, Module, Op, TensorType, UnaryOp};
use tir_passes::reorder::{Budget, Scheduler};
use tir_passes::rewrite::{rewrite, DerivedWeight, RewriteOptions};

fn opts(scheduler: Scheduler, secs: u64) -> RewriteOptions {
    RewriteOptions {
        scheduler,
        budget: Budget {
            time: std::time::Duration::from_secs(secs),
            states: 2_000,
        },
        ..RewriteOptions::default()
    }
}

/// `source[slices]`, row-major.
fn slice(t: &Tensor, slices: &[(usize, u64, u64)]) -> Tensor {
    let Data::F32(mut data) = t.data.clone() else {
        panic!("weights are f32");
    };
    let mut shape = t.ty.shape.clone();
    for &(axis, start, end) in slices {
        let outer: u64 = shape[..axis].iter().product();
        let inner: u64 = shape[axis + 1..].iter().product();
        let mut out = Vec::new();
        for o in 0..outer {
            let base = (o * shape[axis] * inner) as usize;
            out.extend_from_slice(
                &data[base + (start * inner) as usize..base + (end * inner) as usize],
            );
        }
        shape[axis] = end - start;
        data = out;
    }
    Tensor::f32(shape, data).expect("consistent")
}

fn weights_of(original: &Weights, derived: &[DerivedWeight]) -> Weights {
    let mut w = original.clone();
    for d in derived {
        let src = original
            .get(&d.source)
            .expect("the source is an original weight");
        w.insert(d.name.clone(), slice(src, &d.slices));
    }
    w
}

/// Rewrites `module`, checks the slab did not grow, and compares outputs through the
/// interpreter. Returns how many weights were sliced.
fn check(module: &Module, o: &RewriteOptions) -> usize {
    let weights = Weights::generate(module, 7).expect("weights");
    let func = module.entry().expect("entry");
    let inputs: Vec<Tensor> = func
        .params
        .iter()
        .map(|&p| {
            tir_interp::weights::random_input(&func.values[p].name, func.ty(p).unwrap(), 3)
                .expect("input")
        })
        .collect();
    let want = tir_interp::run(module, &weights, &inputs).expect("original runs");
    let mut rewritten = module.clone();
    let stats = rewrite(rewritten.entry_mut().unwrap(), o, &mut |_, _, _| {}).expect("rewrites");
    assert!(
        o.force_rewrite || stats.slab_after <= stats.slab_before,
        "{stats:?}"
    );
    tir_ir::verify(&mut rewritten).expect("the rewritten program verifies");
    let got = tir_interp::run(&rewritten, &weights_of(&weights, &stats.derived), &inputs)
        .expect("rewritten runs");
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w.ty, g.ty);
        let (Data::F32(w), Data::F32(g)) = (&w.data, &g.data) else {
            panic!("f32 outputs");
        };
        let scale = w.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-6);
        for (a, b) in w.iter().zip(g) {
            assert!((a - b).abs() <= 1e-5 * scale, "{a} vs {b} (scale {scale})");
        }
    }
    stats.derived.len()
}

/// A small SplitMix64 for the random graphs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random DenseNet/Inception-like graph on `[1, C, 6, 6]` maps: branches of convs, concats
/// of earlier maps, batch norm / ReLU / pooling on the concats, convs over them, adds.
fn random_graph(seed: u64) -> Module {
    let mut rng = Rng(seed);
    let mut b = Builder::new(format!("random{seed}"));
    let x = b.input("x", TensorType::f32([1, 4, 6, 6]));
    let mut maps = vec![(x, 4u64)];
    let mut n = 0;
    let mut w = |b: &mut Builder, shape: Vec<u64>| {
        n += 1;
        b.weight(format!("w{n}"), TensorType::f32(shape))
    };
    let steps = 5 + rng.below(4);
    for _ in 0..steps {
        let k = 2 + rng.below(maps.len().min(3) as u64) as usize;
        let picks: Vec<(tir_ir::Value, u64)> = (0..k.min(maps.len()))
            .map(|_| maps[rng.below(maps.len() as u64) as usize])
            .collect();
        let c: u64 = picks.iter().map(|p| p.1).sum();
        let mut v = if picks.len() > 1 {
            b.op(
                Op::Concat { axis: 1 },
                &picks.iter().map(|p| p.0).collect::<Vec<_>>(),
            )
            .unwrap()
        } else {
            picks[0].0
        };
        match rng.below(4) {
            0 => {
                let ps: Vec<_> = (0..4).map(|_| w(&mut b, vec![c])).collect();
                v = b
                    .op(
                        Op::BatchNorm { epsilon: 1e-5 },
                        &[v, ps[0], ps[1], ps[2], ps[3]],
                    )
                    .unwrap();
                v = b.op(Op::Unary(UnaryOp::Relu), &[v]).unwrap();
            }
            1 => {
                let pool = Pool2d {
                    kernel: [3, 3],
                    strides: [1, 1],
                    pads: [1, 1, 1, 1],
                    ceil_mode: false,
                    count_include_pad: false,
                };
                v = b.op(Op::MaxPool(pool), &[v]).unwrap();
            }
            2 => v = b.op(Op::Unary(UnaryOp::Sigmoid), &[v]).unwrap(),
            _ => {}
        }
        let out = 2 + rng.below(4);
        let wt = w(&mut b, vec![out, c, 1, 1]);
        let bias = w(&mut b, vec![out]);
        let activation = [None, Some(Activation::Relu)][rng.below(2) as usize];
        v = b
            .op(
                Op::Conv2d(Conv2d {
                    activation,
                    ..Conv2d::default()
                }),
                &[v, wt, bias],
            )
            .unwrap();
        if rng.below(3) == 0 {
            if let Some(&(y, cy)) = maps.iter().find(|m| m.1 == out) {
                let _ = cy;
                v = b
                    .op(
                        Op::Binary {
                            op: BinaryOp::Add,
                            activation: None,
                        },
                        &[v, y],
                    )
                    .unwrap();
            }
        }
        maps.push((v, out));
    }
    let last: Vec<_> = maps.iter().rev().take(2).map(|m| m.0).collect();
    let out = b.op(Op::Concat { axis: 1 }, &last).unwrap();
    let out = b.op(Op::GlobalAvgPool, &[out]).unwrap();
    b.finish(&[out])
}

#[test]
fn random_graphs_compute_the_same_after_rewriting() {
    let mut sliced = 0;
    for seed in 0..12 {
        sliced += check(&random_graph(seed), &opts(Scheduler::List, 5));
    }
    // The rules do fire: some random graph kept a partitioned candidate.
    assert!(sliced > 0, "no random graph was rewritten");
}

#[test]
fn random_graphs_judged_by_the_exact_order_too() {
    for seed in 100..104 {
        check(&random_graph(seed), &opts(Scheduler::Exact, 5));
    }
}

fn zoo(name: &str) -> Module {
    let text = std::fs::read_to_string(format!("examples/{name}.tir")).expect("zoo model");
    let mut m = tir_ir::parse(&text).expect("parses");
    tir_ir::verify(&mut m).expect("verifies");
    m
}

#[test]
fn squeezenet_is_rewritten_and_computes_the_same() {
    // SqueezeNet's fire modules concat then conv: the best rewritten candidate (kept even
    // though compile's concat sharing plans the input as small) partitions them, its weights
    // slices of the originals, and computes what the original computes.
    let o = RewriteOptions {
        force_rewrite: true,
        ..opts(Scheduler::List, 10)
    };
    let sliced = check(&zoo("squeezenet"), &o);
    assert!(sliced > 0);
}

#[test]
fn rewriting_never_makes_a_zoo_slab_larger() {
    for name in ["googlenet", "mobilenet_v2", "unet_small"] {
        let mut m = zoo(name);
        let s = rewrite(
            m.entry_mut().unwrap(),
            &opts(Scheduler::Kahn, 2),
            &mut |_, _, _| {},
        )
        .expect("rewrites");
        assert!(s.slab_after <= s.slab_before, "{name}: {s:?}");
        tir_ir::verify(&mut m).expect("verifies");
    }
}

/// A conv whose big output only a max pool reads (GoogLeNet's and ResNet's stem, small): split
/// along its output channels, each piece pooled into the pool's concat before the next exists.
const STEM: &str = "module @stem {
  func @main(%x: tensor<1x3x32x32xf32>) -> tensor<1x8x16x16xf32> {
    %w1 = const {name = \"conv1.weight\"} : tensor<32x3x3x3xf32>
    %b1 = const {name = \"conv1.bias\"} : tensor<32xf32>
    %w2 = const {name = \"conv2.weight\"} : tensor<8x32x1x1xf32>
    %conv1 = conv2d(%x, %w1, %b1) {pads = [1, 1, 1, 1], activation = relu} : tensor<1x32x32x32xf32>
    %pool1 = max_pool(%conv1) {kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]} : tensor<1x32x16x16xf32>
    %y = conv2d(%pool1, %w2) : tensor<1x8x16x16xf32>
    return %y
  }
}
";

/// MobileNet v2's inverted residual, small: a 1×1 expansion (6×), a depthwise 3×3 and a 1×1
/// projection, with the residual add. Split, each expansion piece flows through its slice of
/// the depthwise conv into a partial projection, accumulated in place.
const INVERTED_RESIDUAL: &str = "module @block {
  func @main(%x: tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32> {
    %we = const {name = \"expand.weight\"} : tensor<48x8x1x1xf32>
    %be = const {name = \"expand.bias\"} : tensor<48xf32>
    %wd = const {name = \"dw.weight\"} : tensor<48x1x3x3xf32>
    %bd = const {name = \"dw.bias\"} : tensor<48xf32>
    %wp = const {name = \"project.weight\"} : tensor<8x48x1x1xf32>
    %bp = const {name = \"project.bias\"} : tensor<8xf32>
    %expand = conv2d(%x, %we, %be) {activation = relu6} : tensor<1x48x16x16xf32>
    %dw = conv2d(%expand, %wd, %bd) {pads = [1, 1, 1, 1], groups = 48, activation = relu6} : tensor<1x48x16x16xf32>
    %project = conv2d(%dw, %wp, %bp) : tensor<1x8x16x16xf32>
    %y = add(%x, %project) : tensor<1x8x16x16xf32>
    return %y
  }
}
";

fn parsed(text: &str) -> Module {
    let mut m = tir_ir::parse(text).expect("parses");
    tir_ir::verify(&mut m).expect("verifies");
    m
}

/// The kernel-wise split is kept (compile's slab falls), slices the weights of the original,
/// and the rewritten program computes what the original computes.
fn kernel_split_computes_the_same(text: &str, split_ops: &[&str]) {
    let module = parsed(text);
    let mut probe = module.clone();
    let stats = rewrite(
        probe.entry_mut().unwrap(),
        &opts(Scheduler::Exact, 5),
        &mut |_, _, _| {},
    )
    .expect("rewrites");
    assert_eq!(stats.chosen, "kernel", "{stats:?}");
    assert!(stats.slab_after < stats.slab_reordered, "{stats:?}");
    for op in split_ops {
        // Every split op's filters (by const name) are sliced from the original's on axis 0.
        assert!(
            stats
                .derived
                .iter()
                .any(|d| d.source == *op && d.slices.first().is_some_and(|s| s.0 == 0)),
            "{op} not split: {stats:?}"
        );
    }
    assert!(check(&module, &opts(Scheduler::Exact, 5)) > 0);
}

#[test]
fn a_stem_split_by_output_channels_computes_the_same() {
    kernel_split_computes_the_same(STEM, &["conv1.weight", "conv1.bias"]);
}

#[test]
fn an_inverted_residual_split_through_its_depthwise_conv_computes_the_same() {
    kernel_split_computes_the_same(
        INVERTED_RESIDUAL,
        &["expand.weight", "dw.weight", "dw.bias"],
    );
}

/// NASNet-A's factorized reduction (both paths) and DARTS' shifted stride-2 conv, small: the
/// shifted path pads and copies the whole input before keeping a quarter of it.
const FACTORIZED: &str = include_str!("models/factorized.tir");

#[test]
fn factorized_reductions_subsample_first_and_compute_bitwise_the_same() {
    let module = parsed(FACTORIZED);
    let weights = Weights::generate(&module, 7).expect("weights");
    let input = tir_interp::weights::random_input("x", &TensorType::f32(vec![1, 8, 15, 15]), 3)
        .expect("input");
    let want = tir_interp::run(&module, &weights, std::slice::from_ref(&input)).expect("runs");
    let mut rewritten = module.clone();
    let stats = rewrite(
        rewritten.entry_mut().unwrap(),
        &opts(Scheduler::Exact, 5),
        &mut |_, _, _| {},
    )
    .expect("rewrites");
    assert!(stats.slab_after < stats.slab_reordered, "{stats:?}");
    tir_ir::verify(&mut rewritten).expect("verifies");
    let text = tir_ir::print(&rewritten);
    // No op of the kept program pads or copies a full-size map any more.
    assert!(!text.contains("tensor<1x8x16x16xf32>"), "{text}");
    assert!(!text.contains("avg_pool"), "{text}");
    assert!(text.contains("steps = [2, 2]"), "{text}");
    let got = tir_interp::run(&rewritten, &weights_of(&weights, &stats.derived), &[input])
        .expect("rewritten runs");
    // The same elements, the same arithmetic: bitwise equal.
    assert_eq!(want, got);
}
