//! Shared by the end-to-end suites: "plans cannot change results" on one module.
#![allow(dead_code)]

use tir_codegen::{jit_run_plans, relocate, Bufferized};
use tir_interp::weights::random_input;
use tir_interp::{Tensor, Weights};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

/// Every offset strategy but `exact` (a search with a time budget, so its plan is not
/// reproducible); each with sharing on and off.
pub const STRATEGIES: &[&str] = &[
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
pub const OPT: u8 = 1;

/// The published model, as `examples/` holds it.
pub fn load(name: &str) -> tir_ir::Module {
    let path = format!("{}/../examples/{name}.tir", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    tir_ir::parse_and_verify(&text).unwrap()
}

/// The model at its test size, through the printer and parser as `tirc zoo --size test`
/// writes it.
pub fn reduced(name: &str) -> tir_ir::Module {
    let spec = tir_zoo::find(name).unwrap();
    let module = tir_zoo::build_at(&spec, spec.test_size).unwrap();
    tir_ir::parse_and_verify(&tir_ir::print(&module)).unwrap()
}

pub fn planned(module: &tir_ir::Module, plan: &str) -> tir_ir::Module {
    let mut m = module.clone();
    let passes = parse_pipeline(&format!("plan{{{plan}}},bufferize")).unwrap();
    run_pipeline(&mut m, &passes, true, |_, _| {}).unwrap();
    m
}

/// Runs `module` under every plan (see [`STRATEGIES`]) and returns the outputs' bits, after
/// checking the first run against the interpreter (1e-4 relative) and every other run for
/// bitwise equality with it.
pub fn end_to_end(model: &str, module: tir_ir::Module) -> Vec<Vec<u32>> {
    end_to_end_sharing(model, module, &[true, false])
}

/// [`end_to_end`] with buffer sharing only as `sharings` says: each setting is one more
/// compilation of the model, the suite's main cost.
pub fn end_to_end_sharing(model: &str, module: tir_ir::Module, sharings: &[bool]) -> Vec<Vec<u32>> {
    let weights = Weights::generate(&module, 0).unwrap();
    let inputs = inputs(&module);
    let expected = tir_interp::run(&module, &weights, &inputs).unwrap();
    let ins: Vec<&[f32]> = inputs.iter().map(|t| t.as_f32().unwrap()).collect();

    let mut plans: Vec<(String, tir_ir::Module)> = Vec::new();
    for &sharing in sharings {
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
            let bits = bits(run);
            match &reference {
                None => {
                    // The first run against the interpreter.
                    check_against_interpreter(model, &expected, run);
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
    reference.expect("at least one plan").1
}

/// Inputs as the executable generates them (seed 0).
pub fn inputs(module: &tir_ir::Module) -> Vec<Tensor> {
    let func = module.entry().unwrap();
    func.params
        .iter()
        .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 0).unwrap())
        .collect()
}

/// The outputs' bit patterns, for bitwise comparison (NaN-proof, unlike `==` on floats).
pub fn bits(run: &[Vec<f32>]) -> Vec<Vec<u32>> {
    run.iter()
        .map(|o| o.iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// The generated code's outputs against the interpreter's.
pub fn check_against_interpreter(model: &str, expected: &[Tensor], run: &[Vec<f32>]) {
    assert_eq!(expected.len(), run.len(), "{model}: number of outputs");
    for (j, (e, g)) in expected.iter().zip(run).enumerate() {
        let e = e.as_f32().unwrap();
        assert_eq!(e.len(), g.len());
        // 1e-4 relative per element, with a floor of 1e-5 of the output's largest magnitude:
        // an element that is the small difference of large terms (accumulated in another
        // order than the interpreter's) keeps only the absolute precision of those terms.
        let scale = e.iter().fold(0f32, |m, x| m.max(x.abs()));
        for (k, (a, b)) in e.iter().zip(g).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-5 * scale.max(1.0),
                "{model} output {j}[{k}]: reference {a}, generated {b}"
            );
        }
    }
}
