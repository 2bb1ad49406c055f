//! Every zoo model end to end through the generated code:
//! - the outputs equal the reference interpreter's within 1e-4 relative;
//! - plans cannot change results: under every offset strategy, with buffer sharing on and
//!   off, the outputs are bitwise identical.
//!
//! Compile time dominates, so each bufferized structure is compiled once: plans that differ
//! only in their offsets run on the same kernels through `<model>_run_at` (see
//! `tir_codegen::relocate`); the first plan of each structure runs the compiled-in offsets
//! (`<model>_run`, what the executable calls).

use tir_codegen::{jit_run_plans, relocate, Bufferized};
use tir_interp::weights::random_input;
use tir_interp::{Tensor, Weights};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

/// Every offset strategy but `exact` (a search with a time budget, so its plan is not
/// reproducible); each with sharing on and off.
const STRATEGIES: &[&str] = &[
    "best",
    "naive",
    "greedy_by_size",
    "greedy_by_breadth",
    "strip_packing_best_fit",
    "first_fit",
    "greedy_by_lifetime",
];

/// A lower LLVM optimisation level than artifacts get: compile time dominates this suite, and
/// results do not depend on the level (no fast-math).
const OPT: u8 = 1;

fn load(name: &str) -> tir_ir::Module {
    let path = format!("{}/../examples/{name}.tir", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    tir_ir::parse_and_verify(&text).unwrap()
}

fn planned(module: &tir_ir::Module, plan: &str) -> tir_ir::Module {
    let mut m = module.clone();
    let passes = parse_pipeline(&format!("plan{{{plan}}},bufferize")).unwrap();
    run_pipeline(&mut m, &passes, true, |_, _| {}).unwrap();
    m
}

fn end_to_end(model: &str) {
    let module = load(model);
    let func = module.entry().unwrap();
    let weights = Weights::generate(&module, 0).unwrap();
    let inputs: Vec<Tensor> = func
        .params
        .iter()
        .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 0).unwrap())
        .collect();
    let expected = tir_interp::run(&module, &weights, &inputs).unwrap();
    let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();

    let mut plans: Vec<(String, tir_ir::Module)> = Vec::new();
    for sharing in [true, false] {
        for s in STRATEGIES {
            let p = format!("strategy={s},sharing={sharing}");
            let m = planned(&module, &p);
            plans.push((p, m));
        }
    }
    // Group the plans by bufferized structure; compile each group once.
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, (_, m)) in plans.iter().enumerate() {
        let key = relocate::structure(m.entry().unwrap());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let mut reference: Option<(String, Vec<Vec<u32>>)> = None;
    for (_, members) in &groups {
        let mut ms: Vec<tir_ir::Module> = members.iter().map(|&i| plans[i].1.clone()).collect();
        let mut proofs: Vec<Bufferized> =
            ms.iter_mut().map(|m| Bufferized::new(m).unwrap()).collect();
        let first = proofs.remove(0);
        let others: Vec<&Bufferized> = proofs.iter().collect();
        let runs = jit_run_plans(&first, &weights, &ins, &others, OPT)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        for (run, &i) in runs.iter().zip(members) {
            let bits: Vec<Vec<u32>> = run
                .iter()
                .map(|o| o.iter().map(|x| x.to_bits()).collect())
                .collect();
            match &reference {
                None => {
                    // The first run against the interpreter.
                    for (j, (e, g)) in expected.iter().zip(run).enumerate() {
                        let e = e.as_f32().unwrap();
                        assert_eq!(e.len(), g.len());
                        // 1e-4 relative per element, with a floor of 1e-5 of the output's
                        // largest magnitude: an element that is the small difference of large
                        // terms (accumulated in another order than the interpreter's) keeps
                        // only the absolute precision of those terms.
                        let scale = e.iter().fold(0f32, |m, x| m.max(x.abs()));
                        for (k, (a, b)) in e.iter().zip(g).enumerate() {
                            assert!(
                                (a - b).abs()
                                    <= 1e-4 * a.abs().max(b.abs()) + 1e-5 * scale.max(1.0),
                                "{model} output {j}[{k}]: reference {a}, generated {b}"
                            );
                        }
                    }
                    reference = Some((plans[i].0.clone(), bits));
                }
                Some((p0, r)) => assert!(
                    *r == bits,
                    "{model}: outputs under `{}` differ from those under `{p0}`",
                    plans[i].0
                ),
            }
        }
    }
}

macro_rules! zoo {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            end_to_end(stringify!($name));
        }
    )*};
}

/// Slow models (minutes each on 2 cores: large interpreter runs and many distinct kernels),
/// kept out of CI's time budget: `cargo test -p tir-codegen --test zoo -- --ignored`.
macro_rules! zoo_slow {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        #[ignore = "slow; run with `cargo test -p tir-codegen --test zoo -- --ignored`"]
        fn $name() {
            end_to_end(stringify!($name));
        }
    )*};
}

zoo!(
    blazeface,
    deeplab_v3,
    mobilenet_v2,
    mobilenet_v3_small,
    posenet,
    squeezenet,
    unet_small,
);

zoo_slow!(
    bert_base_layer,
    darts_imagenet,
    densenet121,
    efficientnet_b0,
    googlenet,
    inception_v3,
    mobilenet_v1,
    nasnet_a_mobile,
    randwire_ws,
    resnet50,
);
