//! `tirc compile --reorder` on a model compiled with run-time dims (issue 18): the order (or,
//! with `egg`, the rewritten program) is judged at sample shapes by the executable's own
//! plan and kept only when it plans no larger than the input order at each; the executable
//! still runs every shape, bitwise equal to the static compile of the original model at that
//! shape (within 1e-4 for a rewritten program: summation order), with a run-time plan that
//! passes the independent checker.

mod common;

use common::dynamic::{self as dynamic, ok, read, s, tirc, write_npy, Run};
use std::path::{Path, PathBuf};
use std::process::Command;
use tir_passes::planner::checker::check_offsets;
use tir_passes::planner::{OffsetsPlan, UsageRecord};

const BERT: &str = "tests/dynamic/bert.tir";
const MOBILENET: &str = "tests/dynamic/mobilenet_v2.tir";

fn scratch(test: &str) -> PathBuf {
    dynamic::scratch("compile-reorder", test)
}

/// `tirc compile model -o dir/name --opt-level 1 extra...`: the executable and stderr.
fn compile(dir: &Path, model: &str, name: &str, extra: &[&str]) -> (PathBuf, String) {
    let exe = dir.join(name);
    let mut args = vec!["compile", model, "-o", s(&exe), "--opt-level", "1"];
    args.extend(extra);
    let out = tirc(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("run-time dims"), "{stderr}");
    (exe, stderr)
}

#[test]
fn a_reordered_bert_block_runs_every_shape_like_the_static_compile() {
    let dir = scratch("bert");
    for mode in ["--reorder", "--reorder=exact", "--reorder=egg"] {
        let (exe, stderr) = compile(&dir, BERT, "bert", &[mode, "--time-limit", "5"]);
        assert!(stderr.contains("judged at 5 sample shapes"), "{stderr}");
        // At long sequences freeing the scores earlier plans smaller: the order is kept.
        assert!(stderr.contains("kept reordered"), "{stderr}");
        for (batch, seq) in [(1, 5), (2, 33), (4, 70)] {
            let run = Run {
                model: BERT,
                dims: &[("batch", batch), ("seq", seq)],
                inputs: &[
                    ("x", vec![batch, seq, 64], batch * 13 + seq),
                    ("mask", vec![batch, 1, seq], seq),
                ],
                interpret: false,
            };
            assert!(dynamic::check(&dir, &exe, &run) > 0, "{mode}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The run-time plan file through the independent checker (the rewritten program's buffers
/// have names the original does not, so sizes are not compared by name here).
fn check_plan(plan: &Path) {
    let text = std::fs::read_to_string(plan).expect("plan file");
    let (mut records, mut offsets, mut slab) = (Vec::new(), Vec::new(), None);
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[0] == "# slab" {
            slab = Some(f[1].parse::<u64>().expect("slab"));
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().expect("number");
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
    assert!(!records.is_empty());
    check_offsets(&records, &plan, 64).unwrap_or_else(|e| panic!("invalid plan: {e:?}\n{text}"));
}

#[test]
fn mobilenet_v2_rewritten_by_egg_runs_every_image_size_like_the_static_compile() {
    let dir = scratch("mobilenet");
    let (exe, stderr) = compile(
        &dir,
        MOBILENET,
        "mobilenet",
        &["--reorder=egg", "--time-limit", "10"],
    );
    assert!(stderr.contains("judged at 2 sample shapes"), "{stderr}");
    assert!(!stderr.contains("not shape-generic"), "{stderr}");
    for (h, w) in [(32, 32), (64, 48), (97, 130)] {
        let x = dir.join(format!("x{h}x{w}.npy"));
        write_npy(&x, &[1, 3, h, w], h + w);
        let input = format!("input={}", s(&x));
        let (got, want) = (
            dir.join(format!("dyn{h}x{w}")),
            dir.join(format!("st{h}x{w}")),
        );
        for d in [&got, &want] {
            std::fs::create_dir_all(d).expect("dir");
        }
        let plan = dir.join(format!("plan{h}x{w}.csv"));
        ok(
            Command::new(&exe)
                .args(["--input", &input, "--output", &format!("{}/", s(&got))])
                .args(["--print-plan", s(&plan)])
                .output()
                .expect("run"),
            "dynamic executable",
        );
        check_plan(&plan);
        let (hs, ws) = (format!("h={h}"), format!("w={w}"));
        let (stat, _) = {
            let exe = dir.join(format!("static{h}x{w}"));
            let args = [
                "compile",
                MOBILENET,
                "-o",
                s(&exe),
                "--opt-level",
                "1",
                "--dim",
                &hs,
                "--dim",
                &ws,
            ];
            ok(tirc(&args), "static compile");
            (exe, ())
        };
        ok(
            Command::new(&stat)
                .args(["--input", &input, "--output", &format!("{}/", s(&want))])
                .output()
                .expect("run"),
            "static executable",
        );
        // A convolution split by output channels runs other kernels (another vector tail),
        // so the rewritten program is equal up to summation order, as `--reorder=egg` on a
        // static model (tests/rewrite.rs).
        let name = "predictions.npy";
        let (a, b) = (read(&got.join(name)), read(&want.join(name)));
        assert_eq!(a.ty.shape, b.ty.shape);
        for (&p, &q) in a
            .as_f32()
            .expect("f32")
            .iter()
            .zip(b.as_f32().expect("f32"))
        {
            assert!(
                (p - q).abs() <= 1e-4 * p.abs().max(q.abs()) + 1e-6,
                "at {h}x{w}: {p} vs static {q}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
