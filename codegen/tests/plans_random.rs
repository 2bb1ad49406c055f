//! "Plans cannot change results" and "orders cannot change results" on random graphs (the
//! codegen issue's end-to-end proof that planning and bufferization are right, and the
//! reorder issue's "the reordered program produces bitwise-identical outputs through the
//! compiled code ... tested on random DAGs").
//!
//! A fixed-seed generator builds random DAGs of convolutions (1×1, 3×3, strided, grouped,
//! depthwise), matmuls, adds, concats, splits (some pieces returned, some used inside: the
//! mixed case bufferize lowers to slices), pools and element-wise ops over random shapes,
//! several outputs. Each graph is
//! - compiled under every offset strategy with buffer sharing on and off ([`common`]): every
//!   plan goes through the independent buffer checker (`run_pipeline` with checks on, and
//!   `Bufferized::new`), the first run is compared with the interpreter, and all outputs must
//!   be bitwise identical;
//! - reordered by every scheduler (the heuristics and the exact search), each distinct order
//!   planned and compiled: a valid topological order (the verifier) with bitwise-identical
//!   outputs.

mod common;

use tir_codegen::{jit_run_plans, jit_run_threads, Bufferized};
use tir_interp::Weights;
use tir_ir::{Module, UnaryOp};
use tir_passes::reorder::{self, Budget, Dag, Scheduler};
use tir_zoo::nn::{Conv, Net, NetResult, Padding};

/// The number of random graphs.
const CASES: u64 = 30;

/// SplitMix64 (Steele et al., "Fast splittable pseudorandom number generators", 2014): a fixed
/// seed gives the same graphs on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.next() as usize % xs.len()]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A random DAG of 6–14 nodes over NCHW values. Every node reads earlier nodes (the input
/// when it reads none); values nothing reads are returned.
fn random_graph(seed: u64) -> NetResult<Module> {
    let mut rng = Rng(seed);
    let mut net = Net::new(&format!("random{seed}"));
    let side = rng.range(4, 9);
    let x = net.input("x", &[1, rng.range(1, 6), side, side])?;
    let mut nodes = vec![x];
    let mut read = vec![false];
    let n = rng.range(6, 14);
    for k in 0..n {
        let name = format!("n{k}");
        // Prefer recent nodes so that graphs are deep as well as wide.
        let a = nodes.len() - 1 - (rng.next() as usize % nodes.len().min(4));
        let xa = nodes[a];
        let [h, w] = net.hw(xa);
        let c = net.channels(xa);
        // Nodes with xa's spatial size, for the ops that join values.
        let same: Vec<usize> = (0..nodes.len())
            .filter(|&j| j != a && net.hw(nodes[j]) == [h, w])
            .collect();
        let kind = rng.range(0, 9);
        let mut used = vec![a];
        let v = match kind {
            0 => net.conv(&name, xa, &Conv::new(rng.range(1, 12), 1))?,
            1 => {
                let s = if h >= 4 && rng.chance(30) { 2 } else { 1 };
                let mut conv = Conv::new(rng.range(1, 12), 3).stride(s);
                if rng.chance(50) {
                    conv = conv.relu();
                }
                net.conv(&name, xa, &conv)?
            }
            2 => {
                // Grouped or depthwise.
                if c % 2 == 0 && rng.chance(50) {
                    net.conv(&name, xa, &Conv::new(c, 3).groups(2))?
                } else {
                    net.conv(&name, xa, &Conv::depthwise(3).relu6())?
                }
            }
            3 => {
                // Matmul over the last axis with a square weight (NumPy broadcasting).
                let wt = net.weight(&format!("{name}.w"), &[w, w])?;
                net.matmul(&name, xa, wt)?
            }
            4 if !same.is_empty() => {
                // An add needs equal shapes: project the other operand to xa's channels.
                let b = rng.pick(&same);
                used.push(b);
                let xb = if net.channels(nodes[b]) == c {
                    nodes[b]
                } else {
                    net.conv(&format!("{name}.proj"), nodes[b], &Conv::new(c, 1))?
                };
                net.add(&name, xa, xb)?
            }
            5 if !same.is_empty() => {
                let mut parts = vec![xa];
                for _ in 0..rng.range(1, 3) {
                    let b = rng.pick(&same);
                    used.push(b);
                    parts.push(nodes[b]);
                }
                net.concat(&name, &parts, 1)?
            }
            6 if c >= 2 => {
                let first = rng.range(1, c - 1);
                let pieces = net.split(&name, xa, 1, &[first, c - first])?;
                // One piece goes on; the other is read by a later node or returned, so some
                // splits have a returned and an internal result.
                nodes.push(pieces[1]);
                read.push(false);
                pieces[0]
            }
            7 => {
                if h >= 4 && rng.chance(50) {
                    net.max_pool(&name, xa, 2, 2, Padding::Valid)?
                } else if rng.chance(50) {
                    net.max_pool(&name, xa, 3, 1, Padding::Same)?
                } else {
                    net.avg_pool(&name, xa, 3, 1, Padding::Same)?
                }
            }
            _ => {
                let u = rng.pick(&[
                    UnaryOp::Relu,
                    UnaryOp::Sigmoid,
                    UnaryOp::Tanh,
                    UnaryOp::HardSwish,
                    UnaryOp::Gelu,
                ]);
                net.unary(&name, xa, u)?
            }
        };
        for u in used {
            read[u] = true;
        }
        nodes.push(v);
        read.push(false);
    }
    // The input is never returned; every other value nothing reads is an output.
    let outputs: Vec<_> = (1..nodes.len())
        .filter(|&j| !read[j])
        .map(|j| nodes[j])
        .collect();
    Ok(net.finish(&outputs))
}

/// The module through the printer and parser (what a user's file would be).
fn graph(seed: u64) -> Module {
    let m = random_graph(seed).unwrap_or_else(|e| panic!("random graph {seed}: {e}"));
    tir_ir::parse_and_verify(&tir_ir::print(&m))
        .unwrap_or_else(|e| panic!("random graph {seed}: {e:?}\n{}", tir_ir::print(&m)))
}

/// The seeds of the graphs; the ops they contain, so a change to the generator that drops an
/// op kind fails loudly rather than silently testing less.
fn seeds() -> Vec<u64> {
    let seeds: Vec<u64> = (0..CASES).map(|k| 0x7152_0000 + k).collect();
    let mut kinds: Vec<&'static str> = Vec::new();
    for &s in &seeds {
        let m = graph(s);
        for (_, d) in m.entry().unwrap().ops_in_order() {
            kinds.push(d.op.name());
        }
    }
    for op in [
        "conv2d", "matmul", "add", "concat", "split", "max_pool", "avg_pool", "relu", "sigmoid",
        "tanh", "gelu",
    ] {
        assert!(kinds.contains(&op), "no random graph has a `{op}`");
    }
    seeds
}

#[test]
fn plans_cannot_change_results_on_random_graphs() {
    for seed in seeds() {
        common::end_to_end(&format!("random graph {seed}"), graph(seed));
    }
}

#[test]
fn orders_cannot_change_results_on_random_graphs() {
    // A states budget makes the exact search deterministic; the time limit only bounds a slow
    // machine.
    let budget = Budget {
        states: 2_000,
        ..Budget::default()
    };
    for seed in seeds() {
        let module = graph(seed);
        let name = format!("random graph {seed}");
        let weights = Weights::generate(&module, 0).unwrap();
        let inputs = common::inputs(&module);
        let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();
        let func = module.entry().unwrap();
        let dag = Dag::from_function(func, 64).unwrap();
        let mut orders: Vec<(Scheduler, Vec<usize>)> = Vec::new();
        for scheduler in Scheduler::ALL {
            let s = reorder::schedule(&dag, scheduler, budget, 64)
                .unwrap_or_else(|e| panic!("{name}: {scheduler}: {e}"));
            assert!(dag.is_topological(&s.order), "{name}: {scheduler}");
            if !orders.iter().any(|(_, o)| *o == s.order) {
                orders.push((scheduler, s.order));
            }
        }
        let mut reference: Option<(Scheduler, Vec<Vec<u32>>)> = None;
        for (scheduler, order) in orders {
            let mut m = module.clone();
            let f = m.entry_mut().unwrap();
            f.layout = reorder::layout_of(f, &dag, &order);
            // The verifier checks the new layout is a valid order; planning, bufferization
            // and the buffer checker run on it.
            let mut m = common::planned(&m, "strategy=best,sharing=true");
            let proof = Bufferized::new(&mut m).unwrap();
            let run = jit_run_plans(&proof, &weights, &ins, &[], common::OPT)
                .unwrap_or_else(|e| panic!("{name}: {scheduler}: {e}"));
            let bits = common::bits(&run[0]);
            match &reference {
                None => {
                    let expected = tir_interp::run(&module, &weights, &inputs).unwrap();
                    common::check_against_interpreter(&name, &expected, &run[0]);
                    reference = Some((scheduler, bits));
                }
                Some((s0, r)) => assert!(
                    *r == bits,
                    "{name}: outputs in the `{scheduler}` order differ from the `{s0}` order's"
                ),
            }
        }
    }
}

/// Threads cannot change results (issue 20): every op cut into as many tiles as it has units
/// (the smallest tile size, so even these small graphs run tiled kernels), the outputs of
/// `<model>_run` and of `<model>_run_parallel` on 1 to 4 threads are the same bits, and
/// match the interpreter.
#[test]
fn threads_cannot_change_results_on_random_graphs() {
    for seed in seeds() {
        let module = graph(seed);
        let name = format!("random graph {seed}");
        let weights = Weights::generate(&module, 0).unwrap();
        let inputs = common::inputs(&module);
        let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();
        let mut m = common::planned(&module, "strategy=best,sharing=true");
        let proof = Bufferized::new(&mut m).unwrap();
        let runs = jit_run_threads(&proof, &weights, &ins, &[0, 1, 2, 3, 4], 0, common::OPT)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = tir_interp::run(&module, &weights, &inputs).unwrap();
        common::check_against_interpreter(&name, &expected, &runs[0]);
        let serial = common::bits(&runs[0]);
        for (threads, run) in [1, 2, 3, 4].iter().zip(&runs[1..]) {
            assert!(
                common::bits(run) == serial,
                "{name}: {threads} threads differ from the serial run"
            );
        }
    }
}

/// A `split` with a returned result and internal ones (ONNX conformance's `concat_split`):
/// bufferize lowers it to one `slice` per result, since `outs` names destinations for all of
/// an op's results or none. Every plan, against the interpreter and bitwise across plans.
#[test]
fn a_split_with_returned_and_internal_results_compiles() {
    let text = "module @concat_split {
  func @main(%x: tensor<1x5x3xf32>, %z: tensor<1x2x3xf32>) {
    %c = concat(%x, %z) {axis = 1}
    %p, %q, %r = split(%c) {axis = -2, sizes = [3, 1, 3]}
    %y = add(%p, %r)
    %t, %u = split(%y) {axis = 2, sizes = [1, 2]}
    %v = sigmoid(%u)
    return %y, %q, %t, %v
  }
}
";
    let module = tir_ir::parse_and_verify(text).unwrap();
    let bufferized = tir_ir::print(&common::planned(&module, "sharing=true"));
    assert!(!bufferized.contains("split("), "{bufferized}");
    assert!(bufferized.contains("slice("), "{bufferized}");
    common::end_to_end("concat_split", module);
}
