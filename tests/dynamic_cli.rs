//! Dynamic models from the command line: `check` and `fmt` show inferred symbolic types,
//! `run` binds dims from the inputs' shapes, `plan` plans at `--dim` values, over a
//! `--dim-range` and with a bounded `--dim-max` plan (checked at smaller shapes by the
//! independent checker), and `compile` is refused without `--dim`. A dynamic model at given
//! dims must behave exactly as the static text with those numbers written in.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tir_interp::{npy, Tensor};
use tir_passes::planner::checker::check_offsets;
use tir_passes::planner::{OffsetsPlan, UsageRecord};

fn tirc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run tirc")
}

fn ok(args: &[&str]) -> String {
    let out = tirc(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tirc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs a command that must fail with `code`, returning its stderr.
fn fails(args: &[&str], code: i32) -> String {
    let out = tirc(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "tirc {args:?}: {stderr}");
    stderr
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-dyn-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write_npy(path: &Path, shape: &[u64]) {
    let n: u64 = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0).collect();
    let t = Tensor::f32(shape.to_vec(), data).expect("tensor");
    std::fs::write(path, npy::write(&t).expect("npy")).expect("write npy");
}

/// The model's text with numbers written in for its dims: what a dynamic model at those dims
/// must behave exactly like.
fn static_text(model: &str, dims: &[(&str, u64)], dir: &Path) -> PathBuf {
    let mut text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(model)).expect("model");
    for (n, v) in dims {
        text = text.replace(&format!("{{{n}}}"), &v.to_string());
    }
    let name = Path::new(model)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let path = dir.join(format!("static-{name}"));
    std::fs::write(&path, text).expect("write");
    path
}

#[test]
fn check_lists_dims_and_run_time_checks() {
    insta::assert_snapshot!(ok(&[
        "check",
        "tests/dynamic/cnn.tir",
        "tests/dynamic/shared.tir"
    ]));
}

#[test]
fn fmt_prints_inferred_symbolic_types() {
    insta::assert_snapshot!(ok(&["fmt", "tests/dynamic/shared.tir"]));
}

#[test]
fn run_binds_dims_from_the_inputs_and_matches_the_static_model() {
    let dir = scratch("run");
    let (x, mask) = (dir.join("x.npy"), dir.join("mask.npy"));
    write_npy(&x, &[2, 7, 64]);
    write_npy(&mask, &[2, 1, 7]);
    let xi = format!("x={}", x.display());
    let mi = format!("mask={}", mask.display());
    let dynamic = ok(&[
        "run",
        "tests/dynamic/bert.tir",
        "--input",
        &xi,
        "--input",
        &mi,
    ]);
    assert!(dynamic.contains("%out: tensor<2x7x64xf32>"), "{dynamic}");
    let fixed = static_text("tests/dynamic/bert.tir", &[("batch", 2), ("seq", 7)], &dir);
    let stat = ok(&[
        "run",
        fixed.to_str().unwrap(),
        "--input",
        &xi,
        "--input",
        &mi,
    ]);
    // Everything but the timing line: same values, same checksum.
    let body = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&dynamic), body(&stat));

    // Two inputs that disagree on a shared dim.
    write_npy(&mask, &[2, 1, 8]);
    let e = fails(
        &[
            "run",
            "tests/dynamic/bert.tir",
            "--input",
            &xi,
            "--input",
            &mi,
        ],
        1,
    );
    assert!(
        e.contains("the dim `seq` is 7 in `%x` (dimension 1) but 8 in `%mask` (dimension 2)"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_with_dims_and_without() {
    let out = ok(&[
        "run",
        "tests/dynamic/cnn.tir",
        "--dim",
        "h=20",
        "--dim",
        "w=9",
    ]);
    assert!(out.contains("%7: tensor<1x10xf32>"), "{out}");
    let e = fails(&["run", "tests/dynamic/cnn.tir"], 1);
    assert!(
        e.contains("give `h`, `w` a value with --input (its shape) or --dim NAME=N"),
        "{e}"
    );
    // A run-time check that fails at the given dims names them.
    let e = fails(
        &[
            "run",
            "tests/dynamic/shared.tir",
            "--dim",
            "n=2",
            "--dim",
            "a.d1=3",
            "--dim",
            "b.d1=4",
        ],
        1,
    );
    assert!(
        e.contains("run-time check a.d1 == b.d1 fails at a.d1 = 3, b.d1 = 4"),
        "{e}"
    );
    let e = fails(&["run", "tests/dynamic/cnn.tir", "--dim", "q=2"], 2);
    assert!(
        e.contains("the model has no dim `q`; its dims are h, w"),
        "{e}"
    );
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).expect("json")
}

fn records_of(v: &serde_json::Value) -> Vec<UsageRecord> {
    v["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| UsageRecord {
            first_op: r["first_op"].as_u64().unwrap() as usize,
            last_op: r["last_op"].as_u64().unwrap() as usize,
            size: r["size"].as_u64().unwrap(),
        })
        .collect()
}

const GREEDY: [&str; 5] = [
    "--offsets",
    "--strategy",
    "greedy_by_size",
    "--json",
    "--align",
];

#[test]
fn plan_at_dims_is_the_static_plan() {
    let dir = scratch("plan");
    let fixed = static_text("tests/dynamic/cnn.tir", &[("h", 40), ("w", 24)], &dir);
    let mut a = vec![
        "plan",
        "tests/dynamic/cnn.tir",
        "--dim",
        "h=40",
        "--dim",
        "w=24",
    ];
    a.extend(GREEDY);
    a.push("64");
    let d = json(&a);
    let mut b = vec!["plan", fixed.to_str().unwrap()];
    b.extend(GREEDY);
    b.push("64");
    let s = json(&b);
    assert_eq!(d["records"], s["records"]);
    assert_eq!(d["lower_bounds"], s["lower_bounds"]);
    assert_eq!(d["offsets"][0]["total_size"], s["offsets"][0]["total_size"]);
    // With `w` left free, the records are listed with sizes in `w` (h pinned at 40).
    let out = ok(&["plan", "tests/dynamic/cnn.tir", "--dim", "h=40"]);
    assert!(out.contains("dims w without values"), "{out}");
    assert!(out.contains("--dim-max NAME=N"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plan_over_a_dim_range() {
    insta::assert_snapshot!(ok(&[
        "plan",
        "tests/dynamic/bert.tir",
        "--dim",
        "batch=1",
        "--dim-range",
        "seq=8..64:8"
    ]));
    // Each row is the static model's best plan at that size.
    let rows = json(&[
        "plan",
        "tests/dynamic/bert.tir",
        "--dim",
        "batch=2",
        "--dim-range",
        "seq=1..33:16",
        "--json",
    ]);
    let dir = scratch("range");
    for row in rows.as_array().expect("rows") {
        let seq = row["value"].as_u64().unwrap();
        let fixed = static_text(
            "tests/dynamic/bert.tir",
            &[("batch", 2), ("seq", seq)],
            &dir,
        );
        let s = json(&[
            "plan",
            fixed.to_str().unwrap(),
            "--offsets",
            "--strategy",
            "best",
            "--json",
        ]);
        assert_eq!(row["slab"], s["offsets"][0]["total_size"], "seq = {seq}");
        assert_eq!(
            row["lower_bound"], s["lower_bounds"]["offsets"],
            "seq = {seq}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let e = fails(
        &["plan", "tests/dynamic/bert.tir", "--dim-range", "seq=9..3"],
        2,
    );
    assert!(e.contains("expected NAME=A..B"), "{e}");
}

#[test]
fn a_bounded_plan_serves_every_smaller_shape() {
    let mut a = vec![
        "plan",
        "tests/dynamic/cnn.tir",
        "--dim-max",
        "h=48",
        "--dim-max",
        "w=40",
    ];
    a.extend(GREEDY);
    a.push("64");
    let bound = json(&a);
    let plan = OffsetsPlan {
        offsets: bound["offsets"][0]["offsets"]
            .as_array()
            .expect("offsets")
            .iter()
            .map(|o| o.as_u64().unwrap())
            .collect(),
        total_size: bound["offsets"][0]["total_size"].as_u64().unwrap(),
    };
    assert_eq!(records_of(&bound).len(), plan.offsets.len());
    // The plan at the bound, checked against the records of smaller shapes.
    for (h, w) in [(48, 40), (20, 20), (21, 40), (48, 22), (20, 21), (33, 25)] {
        let hs = format!("h={h}");
        let ws = format!("w={w}");
        let mut a = vec!["plan", "tests/dynamic/cnn.tir", "--dim", &hs, "--dim", &ws];
        a.extend(GREEDY);
        a.push("64");
        let small = records_of(&json(&a));
        assert!(
            check_offsets(&small, &plan, 64).is_ok(),
            "the bounded plan is invalid at h = {h}, w = {w}"
        );
    }
    let table = ok(&[
        "plan",
        "tests/dynamic/cnn.tir",
        "--dim-max",
        "h=48",
        "--dim-max",
        "w=40",
    ]);
    assert!(
        table.starts_with("bounded plan: one plan for every shape with h <= 48, w <= 40"),
        "{table}"
    );
}

#[test]
fn a_bounded_plan_is_refused_when_a_size_is_not_proven_monotone() {
    let dir = scratch("monotone");
    let model = dir.join("tail.tir");
    // The last three columns: min(n, 3) in truth, `n - max(0, n - 3)` to the proof.
    std::fs::write(
        &model,
        "module @tail {\n  func @main(%x: tensor<4x{n}xf32>) {\n    %0 = slice(%x) {starts = [-3], ends = [9223372036854775807], axes = [1]}\n    %1 = relu(%0)\n    %2 = relu(%1)\n    return %2\n  }\n}\n",
    )
    .expect("write");
    let e = fails(&["plan", model.to_str().unwrap(), "--dim-max", "n=10"], 1);
    assert!(e.contains("not provably non-decreasing in the dims"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_needs_dims() {
    let dir = scratch("compile");
    let out = dir.join("bert.o");
    let o = out.to_str().unwrap();
    let e = fails(
        &[
            "compile",
            "tests/dynamic/bert.tir",
            "-o",
            o,
            "--emit",
            "obj",
        ],
        1,
    );
    assert!(
        e.contains("the model has symbolic dims (batch, seq); give `batch`, `seq` a value with --dim NAME=N"),
        "{e}"
    );
    assert!(!out.exists());
    ok(&[
        "compile",
        "tests/dynamic/bert.tir",
        "-o",
        o,
        "--emit",
        "obj",
        "--dim",
        "batch=1",
        "--dim",
        "seq=5",
        "--opt-level",
        "0",
    ]);
    assert!(out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn static_only_commands_refuse_dynamic_models() {
    let e = fails(&["heapmap", "tests/dynamic/cnn.tir", "-o", "unused.svg"], 1);
    assert!(e.contains("this command takes static models only"), "{e}");
    assert!(!Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("unused.svg")
        .exists());
    // `opt` runs its passes on the model specialized at `--dim`.
    let out = ok(&[
        "opt",
        "tests/dynamic/cnn.tir",
        "--passes",
        "plan,bufferize",
        "--dim",
        "h=32",
        "--dim",
        "w=16",
    ]);
    assert!(out.contains("alloc_slab"), "{out}");
    assert!(out.contains("tensor<1x3x32x16xf32>"), "{out}");
    // Without dims, `verify` alone runs on the symbolic model; a pass that needs sizes is
    // refused by name, with the dims still free.
    let out = ok(&["opt", "tests/dynamic/cnn.tir", "--passes", "verify"]);
    assert!(out.contains("tensor<1x3x{h}x{w}xf32>"), "{out}");
    let e = fails(
        &["opt", "tests/dynamic/cnn.tir", "--passes", "verify,plan"],
        1,
    );
    assert!(e.contains("the pass `plan` needs sizes"), "{e}");
    assert!(e.contains("`h`, `w`"), "{e}");
    assert!(
        e.contains("--dim NAME=N") && e.contains("--dim-max NAME=N"),
        "{e}"
    );
    // `reorder` with `h` pinned: `h` is fixed in the program, `w` stays symbolic.
    let out = ok(&[
        "opt",
        "tests/dynamic/cnn.tir",
        "--passes",
        "reorder",
        "--dim",
        "h=8",
    ]);
    assert!(out.contains("tensor<1x3x8x{w}xf32>"), "{out}");
    let e = fails(&["plan", "tests/fmt/messy.tir", "--dim", "n=3"], 2);
    assert!(e.contains("the model has no symbolic dims"), "{e}");
}
