//! CNNs with run-time image sizes (issue 18): one executable compiled from a model whose
//! height and width are symbolic runs every image size with outputs bitwise equal to the
//! static compile at that size (`--dim h=.. --dim w=..`) and within 1e-4 of the interpreter,
//! and every plan it makes passes the independent checker with each buffer as large as its
//! value at that size. `tests/dynamic/cnn.tir` (strided conv, max_pool with ceil_mode,
//! global_avg_pool) at odd and minimal sizes and random ones; `tests/dynamic/conv_variants.tir`
//! (every convolution and pooling case side by side); MobileNet v2 with symbolic H and W
//! (`tests/dynamic/mobilenet_v2.tir`), whose 1×1 last image takes the matrix-vector branch.

use proptest::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use tir_interp::{npy, Tensor};
use tir_passes::planner::checker::check_offsets;
use tir_passes::planner::{OffsetsPlan, UsageRecord};

const CNN: &str = "tests/dynamic/cnn.tir";
const VARIANTS: &str = "tests/dynamic/conv_variants.tir";
const MOBILENET: &str = "tests/dynamic/mobilenet_v2.tir";

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

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-cnn-{}-{test}", std::process::id()));
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
        .map(|i| (((i * 37 + seed * 11) % 103) as f32 - 51.0) / 40.0)
        .collect();
    let t = Tensor::f32(shape.to_vec(), data).expect("tensor");
    std::fs::write(path, npy::write(&t).expect("npy")).expect("write npy");
}

fn read(path: &Path) -> Tensor {
    npy::read(&std::fs::read(path).expect("output file")).expect("npy")
}

/// The dynamic executable of `model`, compiled once per test binary.
fn compiled(model: &str, cell: &'static OnceLock<PathBuf>) -> &'static Path {
    cell.get_or_init(|| {
        let stem = Path::new(model).file_stem().and_then(|x| x.to_str());
        let dir = scratch(&format!("exe-{}", stem.expect("model name")));
        let exe = dir.join("dyn");
        let e = tirc(&["compile", model, "-o", s(&exe), "--opt-level", "1"]);
        let stderr = String::from_utf8_lossy(&e.stderr).into_owned();
        assert_eq!(e.status.code(), Some(0), "dynamic compile: {stderr}");
        assert!(stderr.contains("run-time dims h, w"), "{stderr}");
        exe
    })
}

fn cnn_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    compiled(CNN, &EXE)
}

/// The sizes each value has at `(h, w)`, by name: the model's own shapes, evaluated.
fn value_bytes(model: &str, h: u64, w: u64) -> HashMap<String, u64> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(model)).expect("model");
    let m = tir_ir::parse_and_verify(&text).expect("parse and verify");
    let mut b = tir_ir::Bindings::new();
    b.insert("h".into(), h);
    b.insert("w".into(), w);
    let m = tir_ir::specialize(&m, &b).expect("specialize");
    let f = m.entry().expect("entry");
    f.values
        .iter()
        .filter_map(|(v, d)| Some((format!("%{}", d.name), f.ty(v)?.byte_size()?)))
        .collect()
}

/// What one model is run with: its input's name and channels, and whether the interpreter
/// is run too (MobileNet's takes long in a debug build).
struct Case {
    model: &'static str,
    input: &'static str,
    channels: u64,
    interpret: bool,
}

/// Runs the dynamic executable `exe` and the static compile at `(h, w)` on the same input;
/// asserts every output bitwise equal, the interpreter's within 1e-4, and the run-time plan
/// valid with every buffer as large as its value at this size.
fn check(dir: &Path, case: &Case, exe: &Path, h: u64, w: u64) {
    let stem = Path::new(case.model).file_stem().and_then(|x| x.to_str());
    let tag = format!("{}{h}x{w}", stem.expect("model name"));
    let x = dir.join(format!("x{tag}.npy"));
    write_npy(&x, &[1, case.channels, h, w], h * 131 + w);
    let input = format!("{}={}", case.input, s(&x));
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
            .args(["--input", &input, "--output", &format!("{}/", s(&got))])
            .args(["--print-plan", s(&plan)])
            .output()
            .expect("run"),
        "dynamic executable",
    );
    assert!(stdout.contains(&format!("at h={h} w={w}")), "{stdout}");

    let dims = [format!("h={h}"), format!("w={w}")];
    let stat = dir.join(format!("s{tag}"));
    let pinned = ["--dim", &dims[0], "--dim", &dims[1]];
    let mut args = vec!["compile", case.model, "-o", s(&stat), "--opt-level", "1"];
    args.extend(pinned);
    ok(tirc(&args), "static compile");
    ok(
        Command::new(&stat)
            .args(["--input", &input, "--output", &format!("{}/", s(&want))])
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

    if case.interpret {
        let mut run = vec!["run", case.model];
        run.extend(pinned);
        run.extend(["--input", &input, "--output", s(&interp)]);
        ok(tirc(&run), "interpreter");
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

    // The plan: every record as large as its value at this size, through the checker.
    let sizes = value_bytes(case.model, h, w);
    let text = std::fs::read_to_string(&plan).expect("plan file");
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
    // Every value of the variants model is an output: its plan is empty.
    assert_eq!(records.is_empty(), case.model == VARIANTS, "{text}");
    let plan = OffsetsPlan {
        offsets,
        total_size: slab.expect("slab line"),
    };
    if let Err(errors) = check_offsets(&records, &plan, 64) {
        panic!("{tag}: the run-time plan is invalid: {errors:?}\n{text}");
    }
    assert!(stdout.contains(&format!("slab: {} bytes", plan.total_size)));
}

const CNN_CASE: Case = Case {
    model: CNN,
    input: "x",
    channels: 3,
    interpret: true,
};

#[test]
fn one_executable_runs_the_cnn_at_every_size_like_the_static_compile() {
    let dir = scratch("cnn");
    // 7×7 is the smallest the model's checks accept (its pool's ceil_mode adds a window
    // there); odd sizes, unequal sides, and rows wider than the interior vector blocks.
    for (h, w) in [(7, 7), (8, 9), (13, 30), (33, 70)] {
        check(&dir, &CNN_CASE, cnn_exe(), h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]
    #[test]
    fn random_image_sizes_match_the_static_compile(h in 7u64..=48, w in 7u64..=48) {
        let dir = scratch(&format!("prop{h}x{w}"));
        check(&dir, &CNN_CASE, cnn_exe(), h, w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn every_convolution_and_pooling_variant_matches_the_static_compile() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = compiled(VARIANTS, &EXE);
    let case = Case {
        model: VARIANTS,
        input: "x",
        channels: 4,
        interpret: true,
    };
    let dir = scratch("variants");
    // 3×5 is the smallest the checks accept (the dilated 1×3 taps need 5 columns): every
    // row and column a border one; 9×13 runs the "same" planes flat (at most 256 outputs
    // for depthwise, 1600 for the others); 30×70 runs every plane by rows, with interior
    // rows and vector blocks.
    for (h, w) in [(3, 5), (9, 13), (30, 70)] {
        check(&dir, &case, exe, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mobilenet_v2_runs_two_image_sizes_like_the_static_compile() {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = compiled(MOBILENET, &EXE);
    let case = Case {
        model: MOBILENET,
        input: "input",
        channels: 3,
        interpret: false,
    };
    let dir = scratch("mobilenet");
    // 32×32 leaves a 1×1 image for the last 1×1 convolutions (the matrix-vector branch);
    // 40×72 a 2×3 one.
    for (h, w) in [(32, 32), (40, 72)] {
        check(&dir, &case, exe, h, w);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
