//! `tirc compile`'s artifacts and modes: guard mode (clean runs, and a deliberately broken
//! kernel caught at the op that wrote out of bounds), `--emit lib` used from a C program, and
//! `tirc run --engine jit` against the interpreter.

use std::path::{Path, PathBuf};
use std::process::Command;

fn tirc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tirc-compile-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small model with the ops whose kernels are gathers (pad reflect, resize), a convolution
/// and a concat (placed in place with buffer sharing).
const SMALL: &str = "module @small {
  func @main(%x: tensor<1x3x9x7xf32>) -> tensor<1x8x18x14xf32> {
    %w = const {name = \"w\"} : tensor<4x3x3x3xf32>
    %p = pad(%x) {pads = [0, 0, 1, 1, 0, 0, 1, 1], mode = reflect} : tensor<1x3x11x9xf32>
    %c = conv2d(%p, %w) {activation = relu} : tensor<1x4x9x7xf32>
    %s = sigmoid(%c) : tensor<1x4x9x7xf32>
    %k = concat(%c, %s) {axis = 1} : tensor<1x8x9x7xf32>
    %r = resize(%k) {size = [18, 14], mode = bilinear} : tensor<1x8x18x14xf32>
    return %r
  }
}
";

fn small(dir: &Path) -> PathBuf {
    let p = dir.join("small.tir");
    std::fs::write(&p, SMALL).unwrap();
    p
}

fn compile(model: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut c = tirc();
    c.arg("compile").arg(model).arg("-o").arg(out).args(extra);
    c.output().unwrap()
}

/// Guard mode on the whole zoo at the test sizes (`tirc zoo --size test`, each model's
/// smallest meaningful input) plus `SMALL`: every model compiles with `--guard` and its
/// executable runs without a canary hit (exit 0; a hit exits 3 naming the op) with 1 to 4
/// threads, giving bitwise-identical outputs. Two models at a time: compile time dominates.
#[test]
fn the_zoo_runs_clean_under_guard() {
    let dir = scratch("guard");
    let zoo_dir = dir.join("zoo");
    let out = tirc()
        .args(["zoo", "--size", "test", "--out"])
        .arg(&zoo_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut models = vec![small(&dir)];
    for spec in tir_zoo::models() {
        let path = zoo_dir.join(spec.file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(&format!("Input: size {}, reduced", spec.test_size)),
            "{}",
            path.display()
        );
        models.push(path);
    }
    assert_eq!(models.len(), 18);
    let next = std::sync::Mutex::new(models.into_iter().enumerate());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let Some((k, m)) = next.lock().unwrap().next() else {
                    break;
                };
                let bin = dir.join(format!("model{k}"));
                let out = compile(&m, &bin, &["--guard", "--opt-level", "1"]);
                assert!(
                    out.status.success(),
                    "{}: {}",
                    m.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                // Every thread count, more than the machine's cores included: no canary hit,
                // and the outputs are the same bytes (issue 20).
                let mut first: Option<Vec<Vec<u8>>> = None;
                for threads in ["1", "2", "3", "4"] {
                    let outs = dir.join(format!("out{k}-{threads}"));
                    std::fs::create_dir_all(&outs).unwrap();
                    let run = Command::new(&bin)
                        .args(["--threads", threads, "--output"])
                        .arg(&outs)
                        .output()
                        .unwrap();
                    assert!(
                        run.status.success(),
                        "{} --threads {threads}: {}",
                        m.display(),
                        String::from_utf8_lossy(&run.stderr)
                    );
                    let mut files: Vec<PathBuf> = std::fs::read_dir(&outs)
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .collect();
                    files.sort();
                    assert!(!files.is_empty(), "{}: no outputs", m.display());
                    let bytes: Vec<Vec<u8>> =
                        files.iter().map(|f| std::fs::read(f).unwrap()).collect();
                    match &first {
                        None => first = Some(bytes),
                        Some(one) => assert!(
                            *one == bytes,
                            "{}: --threads {threads} differs from --threads 1",
                            m.display()
                        ),
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn guard_reports_the_op_that_wrote_out_of_bounds() {
    let dir = scratch("fault");
    let m = small(&dir);
    let bin = dir.join("broken");
    let out = compile(
        &m,
        &bin,
        &["--guard", "--opt-level", "1", "--guard-fault-op", "p"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&bin).output().unwrap();
    assert_eq!(run.status.code(), Some(3));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("`pad` (%p) wrote out of bounds"), "{err}");
    // Without the fault the same model runs clean (the report is about the fault).
    let out = compile(&m, &bin, &["--guard", "--opt-level", "1"]);
    assert!(out.status.success());
    assert!(Command::new(&bin).output().unwrap().status.success());
    // Misuse is a usage error.
    let out = compile(&m, &dir.join("x.o"), &["--guard", "--emit", "obj"]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

const C_MAIN: &str = r#"
#include "libsmall.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* A `parallel_for` that runs the tiles one by one from the last; counts its calls in `pool`. */
static void backwards(void *pool, void (*body)(void *, int64_t, int64_t), void *ctx, int64_t tiles) {
    ++*(int *)pool;
    for (int64_t t = tiles; t-- > 0;) body(ctx, t, t + 1);
}
int main(void) {
    static float x[small_INPUT0_ELEMENTS];
    static float y[small_OUTPUT0_ELEMENTS];
    for (unsigned long long i = 0; i < small_INPUT0_ELEMENTS; i++) x[i] = (float)(i % 7) * 0.25f - 0.5f;
    void *slab = NULL;
    if (posix_memalign(&slab, 64, small_slab_size() ? small_slab_size() : 64)) return 1;
    const void *ins[1] = {x};
    void *outs[1] = {y};
    small_run(ins, outs, slab);
    /* The parallel entry point with a schedule no thread pool would pick (last tile first):
       the same bits. */
    static float y2[small_OUTPUT0_ELEMENTS];
    void *outs2[1] = {y2};
    int pool = 0;
    small_run_parallel(ins, outs2, slab, backwards, &pool);
    if (memcmp(y, y2, sizeof y) != 0 || pool < 0) return 2;
    printf("%s %d %llu\n", small_OUTPUT0_NAME, small_OUTPUT0_RANK, (unsigned long long)small_output0_shape[3]);
    for (unsigned long long i = 0; i < small_OUTPUT0_ELEMENTS; i++) printf("%.9g\n", y[i]);
    return 0;
}
"#;

#[test]
fn a_c_program_links_the_static_library() {
    let dir = scratch("lib");
    let m = small(&dir);
    let lib = dir.join("libsmall.a");
    let out = compile(&m, &lib, &["--emit", "lib", "--opt-level", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("libsmall.h").exists());
    std::fs::write(dir.join("main.c"), C_MAIN).unwrap();
    let bin = dir.join("prog");
    let cc = Command::new("cc")
        .current_dir(&dir)
        .args([
            "-std=c11",
            "-D_POSIX_C_SOURCE=200112L",
            "main.c",
            "libsmall.a",
            "-lm",
            "-o",
        ])
        .arg(&bin)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(&bin).output().unwrap();
    assert!(run.status.success());
    let text = String::from_utf8_lossy(&run.stdout).to_string();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("r 4 14"));
    let got: Vec<f32> = lines.map(|l| l.parse().unwrap()).collect();

    // The interpreter on the same input (same generated weights, seed 0).
    let module = tir_ir::parse_and_verify(SMALL).unwrap();
    let weights = tir_interp::Weights::generate(&module, 0).unwrap();
    let x: Vec<f32> = (0..3 * 9 * 7)
        .map(|i| (i % 7) as f32 * 0.25 - 0.5)
        .collect();
    let input = tir_interp::Tensor::f32(vec![1, 3, 9, 7], x).unwrap();
    let expected = tir_interp::run(&module, &weights, &[input]).unwrap();
    let e = expected[0].as_f32().unwrap();
    assert_eq!(e.len(), got.len());
    for (i, (a, b)) in e.iter().zip(&got).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-6,
            "[{i}]: {a} vs {b}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_with_the_jit_engine_matches_the_interpreter() {
    let dir = scratch("jit");
    let m = small(&dir);
    let mut outs = Vec::new();
    for engine in ["interp", "jit"] {
        let o = dir.join(format!("{engine}.npy"));
        let run = tirc()
            .arg("run")
            .arg(&m)
            .args(["--engine", engine, "--output"])
            .arg(&o)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{engine}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        outs.push(tir_interp::npy::read(&std::fs::read(&o).unwrap()).unwrap());
    }
    assert_eq!(outs[0].ty, outs[1].ty);
    let (e, g) = (outs[0].as_f32().unwrap(), outs[1].as_f32().unwrap());
    for (i, (a, b)) in e.iter().zip(g).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-6,
            "[{i}]: {a} vs {b}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
