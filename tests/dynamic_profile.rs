//! `--profile N` of an executable with run-time dims (issue 18 follow-up): the profiled run
//! is at the shape of the run (from `--dim` or the input files), and its table has one row
//! per op that runs kernels with that shape's concrete dims, the rows of the static compile at
//! that shape (`--dim h=.. --dim w=..`). Nothing here is timed: the tests read the rows' kinds,
//! results and shapes, and that the convolutions' GFLOP/s are numbers.

mod common;

use common::dynamic::{self as dynamic, s};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const CNN: &str = "tests/dynamic/cnn.tir";
const VARIANTS: &str = "tests/dynamic/conv_variants.tir";

fn scratch(test: &str) -> PathBuf {
    dynamic::scratch("profile", test)
}

/// The executable's stdout (it must succeed).
fn run(exe: &Path, args: &[&str]) -> String {
    let out = Command::new(exe)
        .args(args)
        .output()
        .expect("run executable");
    dynamic::ok(out, &format!("{} {args:?}", exe.display()))
}

/// The profile's rows, each without its three timed columns (ms, %, GFLOP/s): `# kind result
/// shape`, fields joined by one space.
fn rows(text: &str) -> Vec<String> {
    table(text)
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            std::iter::once(t[0])
                .chain(t[4..].iter().copied())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// The lines of the profile's table, between its header and `by kind:`.
fn table(text: &str) -> impl Iterator<Item = &str> {
    let start = text.find("GFLOP/s").expect("a profile table");
    let end = text.find("by kind:").expect("the per-kind totals");
    text[start..end].lines().skip(1)
}

/// The static compile of `model` at `dims`, profiled over 2 runs.
fn static_rows(dir: &Path, model: &str, dims: &[(&str, u64)]) -> Vec<String> {
    let exe = dir.join(format!(
        "static-{}",
        dims.iter()
            .map(|(_, v)| v.to_string())
            .collect::<Vec<_>>()
            .join("x")
    ));
    let mut args = vec![
        "compile".to_string(),
        model.into(),
        "-o".into(),
        s(&exe).into(),
    ];
    args.extend(dim_flags(dims));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    dynamic::ok(dynamic::tirc(&args), "static compile");
    let r = rows(&run(&exe, &["--profile", "2"]));
    assert!(!r.is_empty(), "the static profile has no rows");
    r
}

/// `--dim NAME=N` for each dim.
fn dim_flags(dims: &[(&str, u64)]) -> Vec<String> {
    dims.iter()
        .flat_map(|(n, v)| ["--dim".to_string(), format!("{n}={v}")])
        .collect()
}

/// The dynamic executable's `--profile 2` at `dims` (given with `--dim`).
fn profile_at(exe: &Path, dims: &[(&str, u64)]) -> String {
    let mut args = dim_flags(dims);
    args.extend(["--profile".to_string(), "2".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(exe, &args)
}

#[test]
fn profile_rows_are_the_static_compiles_at_each_run_time_shape() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = dynamic::compiled("profile", CNN, "h, w", &EXE);
    let dir = scratch("cnn-shapes");
    // Its smallest size, an odd one and a wide one: one executable, three shapes.
    for (h, w) in [(7, 7), (16, 20), (33, 70)] {
        let dims = [("h", h), ("w", w)];
        let text = profile_at(exe, &dims);
        assert!(text.contains("profile over 2 runs"), "{text}");
        assert_eq!(
            rows(&text),
            static_rows(&dir, CNN, &dims),
            "at {h}x{w}:\n{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn profile_takes_the_shape_from_the_input_file() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = dynamic::compiled("profile", CNN, "h, w", &EXE);
    let dir = scratch("cnn-file");
    let x = dir.join("x.npy");
    dynamic::write_npy(&x, &[1, 3, 13, 30], 1);
    let text = run(exe, &["--input", &format!("x={}", s(&x)), "--profile", "2"]);
    assert_eq!(
        rows(&text),
        static_rows(&dir, CNN, &[("h", 13), ("w", 30)]),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn profile_rows_cover_every_convolution_kind_with_its_gflops() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = dynamic::compiled("profile", VARIANTS, "h, w", &EXE);
    let dir = scratch("variants");
    let dims = [("h", 11), ("w", 70)];
    let text = profile_at(exe, &dims);
    assert_eq!(rows(&text), static_rows(&dir, VARIANTS, &dims), "{text}");
    // Every convolution does multiply-adds at this shape, so its GFLOP/s is a number.
    let convs: Vec<&str> = table(&text).filter(|l| l.contains("conv2d.")).collect();
    assert!(convs.len() > 3, "{text}");
    for row in convs {
        let gflops = row.split_whitespace().nth(3).unwrap_or("");
        assert!(gflops.parse::<f64>().is_ok(), "{row}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
