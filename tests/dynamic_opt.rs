//! `tirc opt` on a dynamic model without values for its dims (issue 18): `reorder` and
//! `rewrite` keep the program symbolic, judge it at sample shapes (or the `--dim-max` bounds)
//! and keep it only when it plans no larger than the input order at every one; the result
//! re-parses and verifies, and compiled at a shape it computes bitwise what the original
//! computes there. `plan` needs sizes: refused without `--dim`/`--dim-max`, the bounded plan
//! with `--dim-max`.

mod common;

use common::dynamic::{self as dynamic, ok, s, tirc, write_npy};
use std::path::{Path, PathBuf};
use std::process::Command;

const BERT: &str = "tests/dynamic/bert.tir";
const MOBILENET: &str = "tests/dynamic/mobilenet_v2.tir";

fn scratch(test: &str) -> PathBuf {
    dynamic::scratch("opt", test)
}

/// `tirc opt MODEL --passes PASSES --stats -o OUT extra...`: the stats (stderr).
fn opt(model: &str, passes: &str, out: &Path, extra: &[&str]) -> String {
    let mut args = vec!["opt", model, "--passes", passes, "--stats", "-o", s(out)];
    args.extend(extra);
    let o = tirc(&args);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    stderr
}

/// The `(before, after)` slab at each judged shape, from a `--stats` line.
fn judged(stats: &str) -> Vec<(String, u64, u64)> {
    let line = stats
        .lines()
        .find(|l| l.contains("slab bytes at = "))
        .unwrap_or_else(|| panic!("no judged shapes in {stats}"));
    let list = line.split("slab bytes at = ").nth(1).expect("list");
    let list = list.split(", ").next().expect("list");
    list.split("; ")
        .map(|item| {
            let (shape, slabs) = item.split_once(": ").expect("shape: slabs");
            let (b, a) = slabs.split_once(" -> ").expect("before -> after");
            (
                shape.to_string(),
                b.parse().expect("before"),
                a.parse().expect("after"),
            )
        })
        .collect()
}

/// The model re-parses and verifies, still dynamic in the same dims, returning the same
/// types.
fn same_interface(original: &str, result: &Path) -> tir_ir::Module {
    let read = |p: &Path| {
        let text = std::fs::read_to_string(p).expect("read");
        tir_ir::parse_and_verify(&text).unwrap_or_else(|e| panic!("{}: {e:?}", p.display()))
    };
    let (a, b) = (read(Path::new(original)), read(result));
    assert!(b.is_dynamic());
    assert_eq!(
        tir_ir::specialize::module_symbols(&a),
        tir_ir::specialize::module_symbols(&b)
    );
    let results = |m: &tir_ir::Module| {
        let f = m.entry().expect("main");
        f.dynamic.as_ref().expect("dynamic").result_types.clone()
    };
    assert_eq!(results(&a), results(&b));
    b
}

/// Compiles `model` at `dims` (static, `--opt-level 1`; the plan goes through the checker in
/// `plan_function`), runs it on `inputs`, and returns each output's bytes.
fn run_static(
    dir: &Path,
    model: &str,
    tag: &str,
    dims: &[(&str, u64)],
    inputs: &[(&str, Vec<u64>)],
) -> Vec<(String, Vec<u8>)> {
    let exe = dir.join(format!("exe_{tag}"));
    let at: Vec<String> = dims.iter().map(|(n, v)| format!("{n}={v}")).collect();
    let mut args = vec!["compile", model, "-o", s(&exe), "--opt-level", "1"];
    for d in &at {
        args.extend(["--dim", d.as_str()]);
    }
    ok(tirc(&args), "static compile");
    let mut input_args = Vec::new();
    for (i, (name, shape)) in inputs.iter().enumerate() {
        let x = dir.join(format!("{name}_{}.npy", at.join("_")));
        write_npy(&x, shape, 17 + i as u64);
        input_args.push("--input".to_string());
        input_args.push(format!("{name}={}", s(&x)));
    }
    let out = dir.join(format!("out_{tag}"));
    std::fs::create_dir_all(&out).expect("out dir");
    ok(
        Command::new(&exe)
            .args(&input_args)
            .args(["--output", &format!("{}/", s(&out))])
            .output()
            .expect("run"),
        "static executable",
    );
    let mut outputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&out)
        .expect("outputs")
        .map(|e| {
            let p = e.expect("entry").path();
            (
                p.file_name().expect("name").to_string_lossy().into_owned(),
                std::fs::read(&p).expect("output"),
            )
        })
        .collect();
    outputs.sort();
    assert!(!outputs.is_empty());
    outputs
}

#[test]
fn reorder_and_rewrite_of_the_bert_block_serve_every_shape() {
    let dir = scratch("bert");
    for passes in ["reorder", "reorder{scheduler=heuristic}", "rewrite"] {
        let out = dir.join(format!("{}.tir", passes.replace(['{', '}', '='], "_")));
        let stats = opt(BERT, passes, &out, &[]);
        let shapes = judged(&stats);
        // 8, 64, 512 for both dims, and the two mixed corners.
        assert_eq!(shapes.len(), 5, "{stats}");
        for (shape, before, after) in &shapes {
            assert!(after <= before, "{passes} at {shape}: {before} -> {after}");
        }
        // At long sequences the order that frees the scores earlier plans smaller.
        assert!(shapes.iter().any(|(_, b, a)| a < b), "{passes}: {stats}");
        same_interface(BERT, &out);
        for (batch, seq) in [(1, 24), (3, 7)] {
            let dims = [("batch", batch), ("seq", seq)];
            let inputs = [("x", vec![batch, seq, 64]), ("mask", vec![batch, 1, seq])];
            let want = run_static(&dir, BERT, &format!("orig{batch}x{seq}"), &dims, &inputs);
            let got = run_static(
                &dir,
                s(&out),
                &format!("{passes}{batch}x{seq}"),
                &dims,
                &inputs,
            );
            assert_eq!(want, got, "{passes} at batch={batch} seq={seq}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reorder_of_mobilenet_v2_with_a_run_time_image_size_serves_every_shape() {
    let dir = scratch("mobilenet");
    let out = dir.join("reordered.tir");
    let stats = opt(MOBILENET, "reorder", &out, &[]);
    let shapes = judged(&stats);
    // 8x8 is below the model's smallest image (the run-time checks refuse it).
    assert_eq!(
        shapes.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["h=64,w=64", "h=512,w=512"]
    );
    for (shape, before, after) in &shapes {
        assert!(after <= before, "{shape}: {before} -> {after}");
    }
    same_interface(MOBILENET, &out);
    let dims = [("h", 40), ("w", 72)];
    let inputs = [("input", vec![1, 3, 40, 72])];
    let want = run_static(&dir, MOBILENET, "orig", &dims, &inputs);
    let got = run_static(&dir, s(&out), "reordered", &dims, &inputs);
    assert_eq!(want, got);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rewrite_of_mobilenet_v2_is_shape_generic_and_never_larger() {
    let dir = scratch("mobilenet_rewrite");
    let out = dir.join("rewritten.tir");
    let stats = opt(MOBILENET, "rewrite{budget=10s}", &out, &[]);
    let shapes = judged(&stats);
    assert_eq!(shapes.len(), 2, "{stats}");
    for (shape, before, after) in &shapes {
        assert!(after <= before, "{shape}: {before} -> {after}");
    }
    assert!(!stats.contains("not shape-generic"), "{stats}");
    let m = same_interface(MOBILENET, &out);
    // Every shape the input accepts plans (through the checker) and the judged figure is the
    // rewritten program's own plan.
    let f = m.entry().expect("main");
    for (h, w) in [(32, 32), (64, 64), (100, 37)] {
        let b: tir_ir::Bindings = [("h".to_string(), h), ("w".to_string(), w)]
            .into_iter()
            .collect();
        let g = tir_passes::dynamic::specialize_function(f, &b).expect("specializes");
        tir_passes::plan::plan_function(&g, &tir_passes::plan::PlanPolicy::compile())
            .expect("plans");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plan_needs_sizes_and_makes_the_bounded_plan_at_dim_max() {
    let dir = scratch("plan");
    let out = dir.join("planned.tir");
    let o = tirc(&["opt", BERT, "--passes", "reorder,plan,bufferize"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("the pass `plan` needs sizes"), "{e}");
    assert!(
        e.contains("--dim NAME=N") && e.contains("--dim-max NAME=N"),
        "{e}"
    );

    let bounds = ["--dim-max", "batch=2", "--dim-max", "seq=96"];
    let stats = opt(BERT, "reorder,plan,bufferize", &out, &bounds);
    assert!(stats.contains("bounded plan"), "{stats}");
    let text = std::fs::read_to_string(&out).expect("read");
    let m = tir_ir::parse_and_verify(&text).expect("bufferized IR verifies");
    assert!(!m.is_dynamic());
    // `bufferize` allocates the slab at the bounds: the bounded plan `tirc plan` reports
    // (best offsets, no sharing, the `plan` pass's default) or smaller, reordered.
    let mut args = vec!["plan", BERT, "--json", "--strategy", "best", "--offsets"];
    args.extend(bounds);
    let report: serde_json::Value = serde_json::from_str(&ok(tirc(&args), "plan")).expect("json");
    let bounded = report["offsets"][0]["total_size"].as_u64().expect("slab");
    let slab: u64 = text
        .split("alloc_slab {size = ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no alloc_slab in {text}"));
    assert!(slab <= bounded, "{slab} > {bounded}");
    assert!(slab > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
