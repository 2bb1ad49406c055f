//! `tirc compile` of a model with run-time dims (issue 18: kernels with run-time extents and a
//! plan made by the executable): one executable compiled from `tests/dynamic/bert.tir` (and
//! one from `tests/dynamic/heads.tir`: views, a dim `batch*seq`, log_softmax along it, clip,
//! max, an output copied out of a view) with
//! its batch and sequence length free runs it at every shape with outputs bitwise equal to
//! the static compile at that shape (`--dim`) and within 1e-4 of the interpreter; every plan
//! it makes passes the independent checker, with every buffer as large as its value at that
//! shape; inputs that disagree on a dim are refused naming it and both values. The same for a
//! static library (a C program against it) and an ONNX model with `dim_param` dims.

#[path = "common/dynamic.rs"]
mod shared;

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use tir_interp::{npy, Tensor};

const MODEL: &str = "tests/dynamic/bert.tir";

fn tirc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run tirc")
}

fn ok(out: Output, what: &str) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn fails(out: Output, code: i32, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{what}: {stderr}");
    stderr
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-runtime-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn write_npy(path: &Path, shape: &[u64], seed: u64) {
    let n: u64 = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| (((i * 31 + seed * 17) % 101) as f32 - 50.0) / 40.0)
        .collect();
    let t = Tensor::f32(shape.to_vec(), data).expect("tensor");
    std::fs::write(path, npy::write(&t).expect("npy")).expect("write npy");
}

fn read(path: &Path) -> Tensor {
    npy::read(&std::fs::read(path).expect("output file")).expect("npy")
}

/// The one dynamic executable of `model` every test here runs (compiled once per test binary).
fn compiled(model: &str, cell: &'static OnceLock<PathBuf>) -> &'static Path {
    cell.get_or_init(|| {
        let stem = Path::new(model).file_stem().and_then(|x| x.to_str());
        let dir = scratch(&format!("exe-{}", stem.expect("model name")));
        let exe = dir.join("dyn");
        let e = tirc(&["compile", model, "-o", s(&exe), "--opt-level", "1"]);
        let stderr = String::from_utf8_lossy(&e.stderr).into_owned();
        assert_eq!(e.status.code(), Some(0), "dynamic compile: {stderr}");
        assert!(stderr.contains("run-time dims batch, seq"), "{stderr}");
        exe
    })
}

fn dynamic_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(MODEL, &EXE)
}

const HEADS: &str = "tests/dynamic/heads.tir";

fn heads_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(HEADS, &EXE)
}

/// The sizes each value has at `(batch, seq)`, by name: the model's own shapes, evaluated.
fn value_bytes(model: &str, batch: u64, seq: u64) -> std::collections::HashMap<String, u64> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(model)).expect("model");
    let m = tir_ir::parse_and_verify(&text).expect("parse and verify");
    let mut b = tir_ir::Bindings::new();
    b.insert("batch".into(), batch);
    b.insert("seq".into(), seq);
    let m = tir_ir::specialize(&m, &b).expect("specialize");
    let f = m.entry().expect("entry");
    f.values
        .iter()
        .filter_map(|(v, d)| Some((format!("%{}", d.name), f.ty(v)?.byte_size()?)))
        .collect()
}

/// Runs the dynamic executable and the static compile at `(batch, seq)` on the same files;
/// asserts bitwise-equal outputs, the interpreter within 1e-4, and the run-time plan valid.
fn check_shape(dir: &Path, batch: u64, seq: u64) {
    check_model(dir, MODEL, dynamic_exe(), batch, seq);
}

/// [`check_shape`] for `model` (inputs `%x: [batch, seq, 64]` and, if the model has it,
/// `%mask: [batch, 1, seq]`; one output) and its dynamic executable `exe`.
fn check_model(dir: &Path, model: &str, exe: &Path, batch: u64, seq: u64) {
    let bert = model == MODEL;
    let stem = Path::new(model).file_stem().and_then(|x| x.to_str());
    let tag = format!("{}{batch}x{seq}", stem.expect("model name"));
    let (x, mask) = (
        dir.join(format!("x{tag}.npy")),
        dir.join(format!("m{tag}.npy")),
    );
    write_npy(&x, &[batch, seq, 64], batch + seq);
    write_npy(&mask, &[batch, 1, seq], seq);
    let mut ins = vec![format!("x={}", s(&x))];
    if bert {
        ins.push(format!("mask={}", s(&mask)));
    }
    let input_args: Vec<&str> = ins.iter().flat_map(|i| ["--input", i.as_str()]).collect();
    let got = dir.join(format!("dyn{tag}.npy"));
    let plan = dir.join(format!("plan{tag}.csv"));
    let stdout = ok(
        Command::new(exe)
            .args(&input_args)
            .args(["--output", s(&got)])
            .args(["--print-plan", s(&plan)])
            .output()
            .expect("run"),
        "dynamic executable",
    );
    assert!(
        stdout.contains(&format!("at batch={batch} seq={seq}")),
        "{stdout}"
    );

    let stat = dir.join(format!("s{tag}"));
    let dims = [format!("batch={batch}"), format!("seq={seq}")];
    ok(
        tirc(&[
            "compile",
            model,
            "-o",
            s(&stat),
            "--opt-level",
            "1",
            "--dim",
            &dims[0],
            "--dim",
            &dims[1],
        ]),
        "static compile",
    );
    let want = dir.join(format!("s{tag}.npy"));
    ok(
        Command::new(&stat)
            .args(&input_args)
            .args(["--output", s(&want)])
            .output()
            .expect("run"),
        "static executable",
    );
    let (a, b) = (read(&got), read(&want));
    let shape = if bert {
        vec![batch, seq, 64]
    } else {
        vec![batch * seq, 64]
    };
    assert_eq!(a.ty.shape, shape);
    assert_eq!(
        std::fs::read(&got).expect("dyn"),
        std::fs::read(&want).expect("static"),
        "dynamic and static outputs differ at {tag}"
    );

    let interp = dir.join(format!("i{tag}"));
    let mut run = vec!["run", model, "--dim", &dims[0], "--dim", &dims[1]];
    run.extend(&input_args);
    run.extend(["--output", s(&interp)]);
    ok(tirc(&run), "interpreter");
    let r = read(&interp.join(if bert { "out.npy" } else { "y.npy" }));
    for (&p, &q) in a
        .as_f32()
        .expect("f32")
        .iter()
        .zip(r.as_f32().expect("f32"))
    {
        assert!(
            (p - q).abs() <= 1e-4 * p.abs().max(q.abs()) + 1e-5,
            "{tag}: {p} vs interpreter {q}"
        );
    }
    drop(b);

    // The plan: every record as large as its value at this shape, through the checker.
    let sizes = value_bytes(model, batch, seq);
    let records = shared::check_plan_file(&tag, &plan, &sizes, &stdout);
    assert!(records > 0, "{tag}: an empty run-time plan");
}

#[test]
fn one_executable_runs_bert_at_every_shape_like_the_static_compile() {
    let dir = scratch("shapes");
    // seq 1 takes the matrix-vector product in q·kᵀ; 17 and 33 leave vector tails.
    for (batch, seq) in [(1, 1), (2, 7), (1, 17), (3, 33)] {
        check_shape(&dir, batch, seq);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The rows after a product's last whole register tile run as tiles of each binary digit of
/// their count (issue 18): lengths whose tails (rows mod 6 of the wide tiles, mod 12 or 8 of
/// the narrow q·kᵀ tiles of one to three vectors) take every digit: 8 (2; 12-row tiles: 8),
/// 11 (5; 11 = 8 + 2 + 1), 22 (4; 10 = 8 + 2), 64 (4, the whole-block N of q·kᵀ).
#[test]
fn every_row_tail_of_the_products_runs_like_the_static_compile() {
    let dir = scratch("tails");
    for seq in [8, 11, 22, 64] {
        check_shape(&dir, 1, seq);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn views_and_a_product_dim_run_at_every_shape_like_the_static_compile() {
    let dir = scratch("heads");
    for (batch, seq) in [(1, 1), (2, 7), (3, 33)] {
        check_model(&dir, HEADS, heads_exe(), batch, seq);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A C program against the `--emit lib` archive: plans at the dims it is given (twice: the
/// second call comes from the cache and must agree), runs, writes the raw output.
const LIB_MAIN: &str = r#"#include "libbert.h"
#include <stdio.h>
#include <stdlib.h>
static float *load(const char *path, size_t n) {
    float *p = malloc(n * sizeof(float) + 4);
    FILE *f = fopen(path, "rb");
    if (!f || fread(p, sizeof(float), n, f) != n) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
    fclose(f);
    return p;
}
int main(int argc, char **argv) {
    if (argc != 6) return 2;
    int64_t dims[bert_NUM_DIMS] = {atoll(argv[1]), atoll(argv[2])};
    size_t b = (size_t)dims[0], s = (size_t)dims[1];
    const void *ins[2] = {load(argv[3], b * s * 64), load(argv[4], b * s)};
    uint64_t offsets[bert_NUM_BUFFERS], again[bert_NUM_BUFFERS];
    uint64_t size = bert_plan(dims, offsets);
    if (size == UINT64_MAX || bert_plan(dims, again) != size) return 3;
    for (int i = 0; i < bert_NUM_BUFFERS; i++) if (again[i] != offsets[i]) return 3;
    void *slab = aligned_alloc(64, size ? (size + 63) / 64 * 64 : 64);
    uint64_t shape[bert_OUTPUT0_RANK];
    bert_output_shape(dims, 0, shape);
    size_t n = 1;
    for (int k = 0; k < bert_OUTPUT0_RANK; k++) n *= shape[k];
    float *out = malloc(n * sizeof(float) + 4);
    void *outs[1] = {out};
    bert_run_dyn(ins, outs, slab, offsets, dims);
    FILE *f = fopen(argv[5], "wb");
    if (!f || fwrite(out, sizeof(float), n, f) != n) return 1;
    fclose(f);
    printf("slab %llu\n", (unsigned long long)size);
    return 0;
}
"#;

#[test]
fn a_static_library_plans_and_runs_every_shape_like_the_executable() {
    let dir = scratch("lib");
    let lib = dir.join("libbert.a");
    let e = tirc(&[
        "compile",
        MODEL,
        "--emit",
        "lib",
        "-o",
        s(&lib),
        "--opt-level",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&e.stderr).into_owned();
    assert_eq!(e.status.code(), Some(0), "lib: {stderr}");
    let header = std::fs::read_to_string(dir.join("libbert.h")).expect("header");
    assert!(header.contains("uint64_t bert_plan(const int64_t *dims, uint64_t *offsets);"));
    assert!(header.contains("static const int bert_input1_dim[] = {0, -1, 1};"));
    std::fs::write(dir.join("main.c"), LIB_MAIN).expect("main.c");
    let app = dir.join("app");
    let cc = Command::new("cc")
        .arg(dir.join("main.c"))
        .arg(&lib)
        .arg("-I")
        .arg(&dir)
        .args(["-lm", "-o"])
        .arg(&app)
        .output()
        .expect("cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    for (batch, seq) in [(2u64, 7u64), (1, 1), (3, 33)] {
        let (x, mask) = (dir.join("x.npy"), dir.join("m.npy"));
        write_npy(&x, &[batch, seq, 64], seq);
        write_npy(&mask, &[batch, 1, seq], batch);
        let raw = |npy_path: &Path, raw_path: &Path| {
            let t = read(npy_path);
            let bytes: Vec<u8> = t
                .as_f32()
                .expect("f32")
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            std::fs::write(raw_path, bytes).expect("raw");
        };
        let (xr, mr, out) = (dir.join("x.raw"), dir.join("m.raw"), dir.join("out.raw"));
        raw(&x, &xr);
        raw(&mask, &mr);
        let (b, sq) = (batch.to_string(), seq.to_string());
        ok(
            Command::new(&app)
                .args([b.as_str(), sq.as_str(), s(&xr), s(&mr), s(&out)])
                .output()
                .expect("app"),
            "library program",
        );
        let want = dir.join("want.npy");
        ok(
            Command::new(dynamic_exe())
                .args(["--input", &format!("x={}", s(&x))])
                .args(["--input", &format!("mask={}", s(&mask))])
                .args(["--output", s(&want)])
                .output()
                .expect("run"),
            "dynamic executable",
        );
        let want: Vec<u8> = read(&want)
            .as_f32()
            .expect("f32")
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(std::fs::read(&out).expect("out"), want, "{batch}x{seq}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--bench` also plans shapes the process has not seen (after an inference each, through the
/// plan cache's lookup and replacement): the 4-entry cache turns over many times, and the
/// outputs written after it are still the bytes of a run without `--bench` (the plan in use
/// is never the one replaced).
#[test]
fn new_shapes_planned_by_bench_leave_the_run_unchanged() {
    let dir = scratch("newshape");
    let (x, mask) = (dir.join("x.npy"), dir.join("m.npy"));
    write_npy(&x, &[2, 7, 64], 3);
    write_npy(&mask, &[2, 1, 7], 4);
    let run = |out: &Path, extra: &[&str]| {
        ok(
            Command::new(dynamic_exe())
                .args(["--input", &format!("x={}", s(&x))])
                .args(["--input", &format!("mask={}", s(&mask))])
                .args(["--output", s(out)])
                .args(extra)
                .output()
                .expect("run"),
            "dynamic executable",
        )
    };
    let (plain, benched) = (dir.join("plain.npy"), dir.join("bench.npy"));
    run(&plain, &[]);
    let stdout = run(&benched, &["--bench", "9", "--threads", "2"]);
    assert!(stdout.contains("re-plan over 9 runs: median "), "{stdout}");
    assert!(
        stdout.contains("new shape over 9 runs: median "),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(&plain).expect("plain"),
        std::fs::read(&benched).expect("bench"),
        "the outputs after planning new shapes differ"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inputs_that_disagree_on_a_dim_are_refused() {
    let dir = scratch("refused");
    let (x, mask) = (dir.join("x.npy"), dir.join("m.npy"));
    write_npy(&x, &[2, 7, 64], 0);
    write_npy(&mask, &[2, 1, 8], 0);
    let run = |extra: &[&str]| {
        Command::new(dynamic_exe())
            .args(["--input", &format!("x={}", s(&x))])
            .args(["--input", &format!("mask={}", s(&mask))])
            .args(extra)
            .output()
            .expect("run")
    };
    let e = fails(run(&[]), 1, "seq 7 and 8");
    assert!(
        e.contains("the dim `seq` is 7 (from the input `%x`), but this file gives it 8"),
        "{e}"
    );
    let e = fails(run(&["--dim", "batch=3"]), 1, "batch pinned");
    assert!(
        e.contains("the dim `batch` is 3 (from --dim), but this file gives it 2"),
        "{e}"
    );
    // A constant dim is the model's.
    let bad = dir.join("bad.npy");
    write_npy(&bad, &[2, 7, 32], 0);
    let e = fails(
        Command::new(dynamic_exe())
            .args(["--input", &format!("x={}", s(&bad))])
            .output()
            .expect("run"),
        1,
        "hidden 32",
    );
    assert!(
        e.contains("expected tensor<2x7x64xf32>, found tensor<2x7x32xf32>"),
        "{e}"
    );
    // A dim no file gives.
    let e = fails(
        Command::new(dynamic_exe()).output().expect("run"),
        1,
        "no dims",
    );
    assert!(e.contains("the dim `batch` has no value"), "{e}");
    // Misuse of the executable's own flags.
    let e = fails(
        Command::new(dynamic_exe())
            .args(["--dim", "heads=2"])
            .output()
            .expect("run"),
        2,
        "unknown dim",
    );
    assert!(e.contains("the model has no dim `heads`"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_op_without_run_time_kernels_is_refused_naming_it() {
    let dir = scratch("unsupported");
    let out = dir.join("cnn");
    // tests/dynamic/cnn.tir with a cumsum, which has no kernel with run-time extents.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dynamic/cnn.tir"),
    )
    .expect("cnn")
    .replace("%1 = relu(%0)", "%1 = cumsum(%0) {axis = 1}");
    let model = dir.join("cnn.tir");
    std::fs::write(&model, text).expect("write");
    let e = fails(tirc(&["compile", s(&model), "-o", s(&out)]), 1, "cnn");
    assert!(e.contains("give `h`, `w` a value with --dim NAME=N"), "{e}");
    assert!(
        e.contains("note: `cumsum` (%1) has no kernel with the run-time dim `h` yet; give it a value with --dim h=N"),
        "{e}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]
    #[test]
    fn random_sequence_lengths_match_the_static_compile(batch in 1u64..=3, seq in 1u64..=80) {
        let dir = scratch(&format!("prop{batch}x{seq}"));
        check_shape(&dir, batch, seq);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[path = "../onnx/tests/common/mod.rs"]
mod common;

/// MatMul, Add, Softmax along the sequence, Transpose, Relu: `[batch, seq, 16]` in, both dims
/// `dim_param`s.
fn onnx_bytes() -> Vec<u8> {
    use common::*;
    use prost::Message;
    use tir_onnx::proto::tensor_proto::DataType;
    model(
        13,
        vec![input_sym(
            "x",
            &[D::S("batch"), D::S("seq"), D::N(16)],
            DataType::Float,
        )],
        &["y"],
        vec![tseq("w", &[16, 16]), tseq("b", &[16])],
        vec![
            node("MatMul", &["x", "w"], &["h"], vec![]),
            node("Add", &["h", "b"], &["a"], vec![]),
            node("Softmax", &["a"], &["p"], vec![ai("axis", 1)]),
            node("Transpose", &["p"], &["t"], vec![ais("perm", &[0, 2, 1])]),
            node("Relu", &["t"], &["y"], vec![]),
        ],
    )
    .encode_to_vec()
}

#[test]
fn an_onnx_model_with_free_dims_compiles_to_one_executable() {
    let dir = scratch("onnx");
    let m = dir.join("m.onnx");
    std::fs::write(&m, onnx_bytes()).expect("write model");
    let dynamic = dir.join("dyn");
    let e = tirc(&["compile", s(&m), "-o", s(&dynamic), "--opt-level", "1"]);
    let stderr = String::from_utf8_lossy(&e.stderr).into_owned();
    assert_eq!(e.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("run-time dims batch, seq"), "{stderr}");
    for (batch, seq) in [(2u64, 5u64), (1, 1), (3, 20)] {
        let x = dir.join(format!("x{batch}x{seq}.npy"));
        write_npy(&x, &[batch, seq, 16], seq);
        let input = format!("x={}", s(&x));
        let stat = dir.join(format!("s{batch}x{seq}"));
        let dims = [format!("batch={batch}"), format!("seq={seq}")];
        ok(
            tirc(&[
                "compile",
                s(&m),
                "-o",
                s(&stat),
                "--opt-level",
                "1",
                "--dim",
                &dims[0],
                "--dim",
                &dims[1],
            ]),
            "static compile",
        );
        let mut outs = Vec::new();
        for (exe, name) in [(&dynamic, "dyn.npy"), (&stat, "static.npy")] {
            let out = dir.join(name);
            ok(
                Command::new(exe)
                    .args(["--input", &input, "--output", s(&out)])
                    .output()
                    .expect("run"),
                "executable",
            );
            outs.push(std::fs::read(&out).expect("output"));
        }
        assert_eq!(outs[0], outs[1], "{batch}x{seq}");
        assert_eq!(
            npy::read(&outs[0]).expect("npy").ty.shape,
            vec![batch, 16, seq]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tests/dynamic/reshape_check.tir`: a dim that is a floor division of the dims (in the
/// kernels, the record sizes and the output's shape) and the run-time check that it divides
/// exactly, which the executable makes with `tirc`'s own message.
#[test]
fn the_models_run_time_checks_are_the_executables() {
    let dir = scratch("checks");
    let model = "tests/dynamic/reshape_check.tir";
    let exe = dir.join("dyn");
    ok(
        tirc(&["compile", model, "-o", s(&exe), "--opt-level", "1"]),
        "dynamic compile",
    );
    for (batch, seq) in [(2u64, 3u64), (1, 4), (4, 5)] {
        let dims = [format!("batch={batch}"), format!("seq={seq}")];
        let stat = dir.join(format!("s{batch}x{seq}"));
        ok(
            tirc(&[
                "compile",
                model,
                "-o",
                s(&stat),
                "--opt-level",
                "1",
                "--dim",
                &dims[0],
                "--dim",
                &dims[1],
            ]),
            "static compile",
        );
        let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
        ok(
            Command::new(&stat)
                .args(["--output", s(&a)])
                .output()
                .expect("run"),
            "static",
        );
        ok(
            Command::new(&exe)
                .args(["--dim", &dims[0], "--dim", &dims[1], "--output", s(&b)])
                .output()
                .expect("run"),
            "dynamic",
        );
        let (a, b) = (std::fs::read(&a).expect("a"), std::fs::read(&b).expect("b"));
        assert_eq!(a, b, "{batch}x{seq}");
        assert_eq!(
            npy::read(&b).expect("npy").ty.shape,
            vec![batch * seq * 3 / 2, 32]
        );
    }
    let e = fails(
        Command::new(&exe)
            .args(["--dim", "batch=3", "--dim", "seq=5"])
            .output()
            .expect("run"),
        1,
        "odd product",
    );
    assert!(
        e.contains("(the run-time check 32*batch*seq + 32*((batch*seq) / 2) == 48*batch*seq fails at batch = 3, seq = 5: 704 vs 720)"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
