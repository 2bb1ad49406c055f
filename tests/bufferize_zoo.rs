//! Every zoo model bufferizes: the result re-parses, verifies, passes the buffer checker, and
//! its slab equals `tirc plan`'s for the same strategy; buffer sharing never makes it larger.

use std::path::Path;
use std::process::Command;
use tir_passes::pipeline::{parse_pipeline, run_pipeline, verify_module};

fn examples() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("examples/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "tir"))
        .collect();
    v.sort();
    v
}

fn slab_after(text: &str, pipeline: &str) -> u64 {
    let mut m = tir_ir::parse_and_verify(text).expect("valid model");
    run_pipeline(
        &mut m,
        &parse_pipeline(pipeline).expect("pipeline"),
        true,
        |_, _| {},
    )
    .expect("runs");
    let printed = tir_ir::print(&m);
    let mut again =
        tir_ir::parse_and_verify(&printed).expect("bufferized IR re-parses and verifies");
    verify_module(&mut again).expect("buffer checker");
    let f = again.entry().expect("main");
    let slab = f
        .ops
        .values()
        .find_map(|d| match d.op {
            tir_ir::Op::AllocSlab { size, .. } => Some(size),
            _ => None,
        })
        .expect("an alloc_slab");
    slab
}

#[test]
fn every_example_bufferizes_with_the_planned_slab() {
    for path in examples() {
        let text = std::fs::read_to_string(&path).expect("read");
        for strategy in ["greedy_by_size", "best"] {
            let slab = slab_after(&text, &format!("plan{{strategy={strategy}}},bufferize"));
            let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
                .args([
                    "plan",
                    path.to_str().expect("utf-8"),
                    "--offsets",
                    "--strategy",
                    strategy,
                    "--json",
                ])
                .output()
                .expect("run tirc");
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
            assert_eq!(
                json["offsets"][0]["total_size"].as_u64(),
                Some(slab),
                "{} {strategy}",
                path.display()
            );
        }
        let shared = slab_after(&text, "plan{strategy=best,sharing=true},bufferize");
        let unshared = slab_after(&text, "plan{strategy=best},bufferize");
        assert!(
            shared <= unshared,
            "{}: sharing gives {shared} > {unshared}",
            path.display()
        );
    }
}

#[test]
fn tirc_opt_writes_bufferized_ir() {
    let out = std::env::temp_dir().join(format!("tir-opt-{}.tir", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "opt",
            "examples/mobilenet_v1.tir",
            "--passes",
            "plan,bufferize",
            "--verify-each",
            "-o",
            out.to_str().expect("utf-8"),
        ])
        .status()
        .expect("run");
    assert!(status.success());
    let check = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .args(["check", out.to_str().expect("utf-8")])
        .output()
        .expect("run");
    let _ = std::fs::remove_file(&out);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn bad_pipelines_are_refused() {
    let run = |passes: &str| {
        Command::new(env!("CARGO_BIN_EXE_tirc"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["opt", "tests/fmt/messy.tir", "--passes", passes])
            .output()
            .expect("run")
    };
    for (passes, code, needle) in [
        ("frobnicate", 2, "unknown pass `frobnicate`"),
        ("plan{colour=red}", 2, "has no option `colour`"),
        ("plan{strategy=nope}", 2, "unknown strategy"),
        ("plan{align=3}", 2, "power of two"),
        ("bufferize", 1, "there is no plan"),
        ("plan,bufferize,plan,bufferize", 1, "already bufferized"),
    ] {
        let out = run(passes);
        assert_eq!(out.status.code(), Some(code), "{passes}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{passes}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout.is_empty(),
            "{passes}: nothing is printed on failure"
        );
    }
}

#[test]
fn the_checker_catches_a_clobbering_plan() {
    // %1 is still read by the add when %2 is written over it.
    let bad = "module @m {\n  func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n    %slab = alloc_slab {size = 64, align = 16} : tensor<64xu8>\n    %b0 = alloc_tensor(%slab) {offset = 0} : tensor<4xf32>\n    %1 = relu(%x) outs(%b0)\n    %2 = exp(%x) outs(%b0)\n    %3 = add(%1, %2)\n    return %3\n  }\n}\n";
    let mut m = tir_ir::parse_and_verify(bad).expect("structurally valid");
    let errs = verify_module(&mut m).expect_err("clobber detected");
    assert!(
        errs.iter().any(|e| e.contains("still hold `%1`")),
        "{errs:?}"
    );
    // Overlapping live roots are caught by the planner's checker.
    let bad = "module @m {\n  func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n    %slab = alloc_slab {size = 64, align = 16} : tensor<64xu8>\n    %b0 = alloc_tensor(%slab) {offset = 0} : tensor<4xf32>\n    %1 = relu(%x) outs(%b0)\n    %b1 = alloc_tensor(%slab) {offset = 0} : tensor<4xf32>\n    %2 = exp(%x) outs(%b1)\n    %3 = add(%1, %2)\n    return %3\n  }\n}\n";
    let mut m = tir_ir::parse_and_verify(bad).expect("structurally valid");
    assert!(verify_module(&mut m).is_err());
    // An offset outside the slab is a verifier error.
    let bad = "module @m {\n  func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n    %slab = alloc_slab {size = 16, align = 16} : tensor<16xu8>\n    %b0 = alloc_tensor(%slab) {offset = 16} : tensor<4xf32>\n    %1 = relu(%x) outs(%b0)\n    %2 = exp(%1)\n    return %2\n  }\n}\n";
    assert!(tir_ir::parse_and_verify(bad).is_err());
}
