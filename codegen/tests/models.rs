//! A whole model as a linked executable against the reference interpreter (every zoo model
//! through the JIT, and "plans cannot change results", are in `zoo.rs`).

use std::process::Command;
use tir_codegen::{emit, exe, Artifact, Bufferized, Options};
use tir_interp::weights::random_input;
use tir_interp::{Tensor, Weights};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

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

/// Inputs as the executable generates them (seed 0).
fn inputs(module: &tir_ir::Module) -> Vec<Tensor> {
    let func = module.entry().unwrap();
    func.params
        .iter()
        .map(|&p| random_input(&func.values[p].name, func.ty(p).unwrap(), 0).unwrap())
        .collect()
}

#[test]
fn squeezenet_executable_matches_the_interpreter() {
    let module = load("squeezenet");
    let weights = Weights::generate(&module, 0).unwrap();
    let expected = tir_interp::run(&module, &weights, &inputs(&module)).unwrap();

    let mut m = planned(&module, "sharing=true");
    let proof = Bufferized::new(&mut m).unwrap();
    let obj = emit(
        &proof,
        &weights,
        &Options::native("squeezenet"),
        Artifact::Object,
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("tir-codegen-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("squeezenet");
    exe::link(&exe::main_c(proof.func(), "squeezenet"), &obj, &bin).unwrap();
    let out = Command::new(&bin)
        .arg("--output")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("slab: {} bytes", proof.slab_size())),
        "{stdout}"
    );
    let func = proof.func();
    for (j, &v) in func.returns.iter().enumerate() {
        let path = dir.join(format!("{}.npy", func.values[v].name));
        let got = tir_interp::npy::read(&std::fs::read(&path).unwrap()).unwrap();
        let (e, g) = (expected[j].as_f32().unwrap(), got.as_f32().unwrap());
        assert_eq!(expected[j].ty, got.ty);
        for (i, (a, b)) in e.iter().zip(g).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-6,
                "output {j}[{i}]: {a} vs {b}"
            );
        }
    }
    // `--profile N`: one row per op that runs kernels, with its kind, result and shape, and
    // GFLOP/s for the convolutions; then the time per kind.
    let out = Command::new(&bin)
        .args(["--profile", "2"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("profile over 2 runs"), "{text}");
    assert!(text.contains("by kind:"), "{text}");
    let convs = func
        .ops
        .values()
        .filter(|d| matches!(d.op, tir_ir::Op::Conv2d(_)))
        .count();
    assert!(convs > 0);
    for d in func.ops.values() {
        if let tir_ir::Op::Conv2d(_) = d.op {
            let r = d.results[0];
            let name = func.value_name(r);
            let shape: Vec<String> = func
                .ty(r)
                .unwrap()
                .shape
                .iter()
                .map(|x| x.to_string())
                .collect();
            let row = text[..text.find("by kind:").unwrap()]
                .lines()
                .find(|l| l.split_whitespace().any(|w| w == name))
                .unwrap_or_else(|| panic!("no profile row for {name}:\n{text}"));
            assert!(row.contains("conv2d."), "{row}");
            assert!(row.ends_with(&shape.join("x")), "{row}");
            // ms, %, GFLOP/s: numbers (a convolution does multiply-adds).
            let cols: Vec<&str> = row.split_whitespace().collect();
            for c in &cols[1..4] {
                assert!(c.parse::<f64>().is_ok(), "{row}");
            }
        }
    }
    let table = &text[..text.find("by kind:").unwrap()];
    assert_eq!(
        table.lines().filter(|l| l.contains("conv2d.")).count(),
        convs,
        "{text}"
    );
    // A wrong input is refused, naming it.
    let bad = dir.join("bad.npy");
    std::fs::write(&bad, b"not numpy").unwrap();
    let name = &func.values[func.params[0]].name;
    let out = Command::new(&bin)
        .arg("--input")
        .arg(format!("{name}={}", bad.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(name.as_str()));
    let _ = std::fs::remove_dir_all(&dir);
}
