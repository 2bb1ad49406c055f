//! The CLI says what it does: `tirc opt --help` lists every pass, `tirc plan --reorder` alone
//! shows every row the README lists (the egg row included), and `--reorder --json` prints the
//! same rows as JSON.

use std::path::PathBuf;
use std::process::{Command, Output};

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

fn model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/models/fanout.tir")
}

#[test]
fn opt_help_lists_every_pass() {
    let out = tirc(&["opt", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for pass in ["reorder{", "rewrite{", "plan{", "bufferize", "verify"] {
        assert!(help.contains(pass), "`{pass}` missing from:\n{help}");
    }
}

#[test]
fn reorder_alone_shows_the_compile_and_egg_rows() {
    let m = model();
    let out = tirc(&[
        "plan",
        m.to_str().expect("utf-8"),
        "--reorder",
        "--time-limit",
        "20",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for row in ["input ", "kahn ", "exact ", "compile ", "egg "] {
        assert!(
            stdout.lines().any(|l| l.starts_with(row)),
            "no `{row}` row in:\n{stdout}"
        );
    }
}

#[test]
fn reorder_json_has_every_row() {
    let m = model();
    let out = tirc(&[
        "plan",
        m.to_str().expect("utf-8"),
        "--reorder=heuristic",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let orders = v["orders"].as_array().expect("orders");
    let names: Vec<&str> = orders
        .iter()
        .map(|r| r["scheduler"].as_str().expect("scheduler"))
        .collect();
    assert_eq!(names, ["input", "kahn", "list", "dfs", "post_order"]);
    for r in orders {
        assert!(r["slab"].as_u64().expect("slab") >= r["peak_breadth"].as_u64().expect("peak"));
    }
    assert!(v["egg"].is_null(), "heuristic rows have no egg row");
}
