//! `--time-limit` reaches the judge in every front end of the `reorder` pass: with no time at
//! all, DARTS' input order (which every fast offsets strategy plans above its peak breadth)
//! is judged without the quadratic strategies, and each command says so rather than overrun.
//! Nothing here is timed.

use std::path::PathBuf;
use std::process::{Command, Output};

fn darts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/darts_imagenet.tir")
}

fn tirc(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .args(args)
        .output()
        .expect("tirc runs");
    assert!(
        out.status.success(),
        "tirc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tirc-time-limit-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d.join(name)
}

#[test]
fn plan_reorder_exact_names_the_budget_that_stopped_the_judge() {
    let model = darts();
    let out = tirc(&[
        "plan",
        model.to_str().expect("utf-8 path"),
        "--reorder=exact",
        "--time-limit",
        "0",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let row = stdout
        .lines()
        .find(|l| l.starts_with("exact "))
        .unwrap_or_else(|| panic!("no exact row in {stdout}"));
    assert!(
        row.ends_with("judge stopped by the time budget: quadratic offsets strategies skipped, slabs are upper bounds"),
        "{row}"
    );
}

#[test]
fn the_reorder_pass_budget_covers_its_judge() {
    let model = darts();
    let out_ir = scratch("opt.tir");
    let out = tirc(&[
        "opt",
        model.to_str().expect("utf-8 path"),
        "--passes",
        "reorder{scheduler=exact,budget=0s}",
        "--stats",
        "-o",
        out_ir.to_str().expect("utf-8 path"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("judge = stopped by the time budget (slabs are upper bounds)"),
        "{stderr}"
    );
}

#[test]
fn compile_reorder_exact_passes_its_time_limit_on() {
    let model = darts();
    let out_ll = scratch("darts.ll");
    let out = tirc(&[
        "compile",
        model.to_str().expect("utf-8 path"),
        "-o",
        out_ll.to_str().expect("utf-8 path"),
        "--emit",
        "llvm",
        "--opt-level",
        "0",
        "--reorder=exact",
        "--time-limit",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("reorder (exact): judge stopped by the time budget"),
        "{stderr}"
    );
}
