//! The check every kernel with run-time extents goes through (issue 18): one dynamic
//! executable run at a shape gives outputs bitwise equal to the static compile at that shape
//! (`--dim`), within 1e-4 of the interpreter, and a run-time plan that passes the independent
//! checker with every buffer as large as its value at that shape. Shared by
//! `tests/dynamic_cnn.rs` and `tests/dynamic_ops.rs`.

// Each test binary uses a part of these.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use tir_interp::{npy, Tensor};
use tir_passes::planner::checker::check_offsets;
use tir_passes::planner::{OffsetsPlan, UsageRecord};

pub fn tirc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run tirc")
}

pub fn ok(out: Output, what: &str) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A fresh directory for one test (`prefix` names the test binary).
pub fn scratch(prefix: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-{prefix}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Deterministic data in about `[-1.3, 1.3]`, varied by `seed`.
pub fn write_npy(path: &Path, shape: &[u64], seed: u64) {
    let n: u64 = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| (((i * 37 + seed * 11) % 103) as f32 - 51.0) / 40.0)
        .collect();
    let t = Tensor::f32(shape.to_vec(), data).expect("tensor");
    std::fs::write(path, npy::write(&t).expect("npy")).expect("write npy");
}

pub fn read(path: &Path) -> Tensor {
    npy::read(&std::fs::read(path).expect("output file")).expect("npy")
}

/// The dynamic executable of `model`, compiled once per test binary; its message names the
/// run-time dims `dims` (as the compile prints them, e.g. `h, w`).
pub fn compiled(
    prefix: &str,
    model: &str,
    dims: &str,
    cell: &'static OnceLock<PathBuf>,
) -> &'static Path {
    cell.get_or_init(|| {
        let stem = Path::new(model).file_stem().and_then(|x| x.to_str());
        let dir = scratch(prefix, &format!("exe-{}", stem.expect("model name")));
        let exe = dir.join("dyn");
        let e = tirc(&["compile", model, "-o", s(&exe), "--opt-level", "1"]);
        let stderr = String::from_utf8_lossy(&e.stderr).into_owned();
        assert_eq!(e.status.code(), Some(0), "dynamic compile: {stderr}");
        assert!(
            stderr.contains(&format!("run-time dims {dims}")),
            "{stderr}"
        );
        exe
    })
}

/// The sizes each value has at `dims`, by name: the model's own shapes, evaluated.
pub fn value_bytes(model: &str, dims: &[(&str, u64)]) -> HashMap<String, u64> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(model)).expect("model");
    let m = tir_ir::parse_and_verify(&text).expect("parse and verify");
    let mut b = tir_ir::Bindings::new();
    for &(n, v) in dims {
        b.insert(n.into(), v);
    }
    let m = tir_ir::specialize(&m, &b).expect("specialize");
    let f = m.entry().expect("entry");
    f.values
        .iter()
        .filter_map(|(v, d)| Some((format!("%{}", d.name), f.ty(v)?.byte_size()?)))
        .collect()
}

/// One run: the model, its dims' values (in the model's order), its inputs (name, shape,
/// data seed), and whether the interpreter is run too.
pub struct Run<'a> {
    pub model: &'a str,
    pub dims: &'a [(&'a str, u64)],
    pub inputs: &'a [(&'a str, Vec<u64>, u64)],
    pub interpret: bool,
}

/// Runs the dynamic executable `exe` and the static compile at `run.dims` on the same inputs;
/// asserts every output bitwise equal, the interpreter's within 1e-4, and the run-time plan
/// valid with every buffer as large as its value at this shape. Returns the plan's number
/// of buffers.
pub fn check(dir: &Path, exe: &Path, run: &Run) -> usize {
    let stem = Path::new(run.model).file_stem().and_then(|x| x.to_str());
    let dims_tag: Vec<String> = run.dims.iter().map(|(_, v)| v.to_string()).collect();
    let tag = format!("{}{}", stem.expect("model name"), dims_tag.join("x"));
    let mut inputs = Vec::new();
    for (name, shape, seed) in run.inputs {
        let x = dir.join(format!("{name}{tag}.npy"));
        write_npy(&x, shape, *seed);
        inputs.push(format!("{name}={}", s(&x)));
    }
    let input_args: Vec<&str> = inputs
        .iter()
        .flat_map(|i| ["--input", i.as_str()])
        .collect();
    let (got, want, interp) = (
        dir.join(format!("dyn{tag}")),
        dir.join(format!("static{tag}")),
        dir.join(format!("interp{tag}")),
    );
    for d in [&got, &want] {
        std::fs::create_dir_all(d).expect("output dir");
    }
    let plan = dir.join(format!("plan{tag}.csv"));
    let stdout = ok(
        Command::new(exe)
            .args(&input_args)
            .args(["--output", &format!("{}/", s(&got))])
            .args(["--print-plan", s(&plan)])
            .output()
            .expect("run"),
        "dynamic executable",
    );
    let at: Vec<String> = run.dims.iter().map(|(n, v)| format!("{n}={v}")).collect();
    assert!(stdout.contains(&format!("at {}", at.join(" "))), "{stdout}");

    let stat = dir.join(format!("s{tag}"));
    let pinned: Vec<&str> = at.iter().flat_map(|d| ["--dim", d.as_str()]).collect();
    let mut args = vec!["compile", run.model, "-o", s(&stat), "--opt-level", "1"];
    args.extend(&pinned);
    ok(tirc(&args), "static compile");
    ok(
        Command::new(&stat)
            .args(&input_args)
            .args(["--output", &format!("{}/", s(&want))])
            .output()
            .expect("run"),
        "static executable",
    );
    let mut outputs: Vec<PathBuf> = std::fs::read_dir(&want)
        .expect("static outputs")
        .map(|e| e.expect("entry").path())
        .collect();
    outputs.sort();
    assert!(!outputs.is_empty());
    for o in &outputs {
        let name = o.file_name().expect("name");
        assert_eq!(
            std::fs::read(got.join(name)).expect("dynamic output"),
            std::fs::read(o).expect("static output"),
            "dynamic and static {name:?} differ at {tag}"
        );
    }

    if run.interpret {
        let mut cmd = vec!["run", run.model];
        cmd.extend(&pinned);
        cmd.extend(&input_args);
        cmd.extend(["--output", s(&interp)]);
        ok(tirc(&cmd), "interpreter");
        for o in &outputs {
            let name = o.file_name().expect("name");
            let a = read(o);
            let r = read(&interp.join(name));
            assert_eq!(a.ty.shape, r.ty.shape, "{tag} {name:?}");
            for (&p, &q) in a
                .as_f32()
                .expect("f32")
                .iter()
                .zip(r.as_f32().expect("f32"))
            {
                assert!(
                    (p - q).abs() <= 1e-4 * p.abs().max(q.abs()) + 1e-5,
                    "{tag} {name:?}: {p} vs interpreter {q}"
                );
            }
        }
    }

    // The plan: every record as large as its value at this shape, through the checker.
    let sizes = value_bytes(run.model, run.dims);
    check_plan_file(&tag, &plan, &sizes, &stdout)
}

/// Reads the run-time plan the executable printed (`--print-plan`), asserts every record is as
/// large as its value at this shape (`sizes`), checks the plan with the independent checker and
/// that the executable reported its slab; returns the number of records.
pub fn check_plan_file(
    tag: &str,
    plan: &Path,
    sizes: &HashMap<String, u64>,
    stdout: &str,
) -> usize {
    let text = std::fs::read_to_string(plan).expect("plan file");
    let mut records = Vec::new();
    let mut offsets = Vec::new();
    let mut slab = None;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[0] == "# slab" {
            slab = Some(f[1].parse::<u64>().expect("slab"));
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().expect("number");
        assert_eq!(Some(&n(3)), sizes.get(f[0]), "{tag}: size of {}", f[0]);
        records.push(UsageRecord {
            first_op: n(1) as usize,
            last_op: n(2) as usize,
            size: n(3),
        });
        offsets.push(n(4));
    }
    let plan = OffsetsPlan {
        offsets,
        total_size: slab.expect("slab line"),
    };
    if let Err(errors) = check_offsets(&records, &plan, 64) {
        panic!("{tag}: the run-time plan is invalid: {errors:?}\n{text}");
    }
    assert!(stdout.contains(&format!("slab: {} bytes", plan.total_size)));
    records.len()
}
