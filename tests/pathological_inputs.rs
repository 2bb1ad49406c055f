//! Inputs built to break a parser: huge lines, deep nesting, binary noise. Each must end in a
//! diagnostic and exit code 1 — never a panic (101), a stack overflow or a hang.

use std::io::Write;
use std::process::{Command, Output};

fn check_bytes(name: &str, bytes: &[u8]) -> Output {
    let dir = std::env::temp_dir().join(format!("tir-pathological-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(bytes))
        .expect("write input");
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .arg("check")
        .arg(&path)
        .output()
        .expect("run tirc");
    let _ = std::fs::remove_file(&path);
    out
}

fn assert_refused(out: &Output, line_col: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains(line_col),
        "expected a diagnostic at {line_col}, got: {}",
        &stderr[..stderr.len().min(2000)]
    );
    // Long lines are elided around the caret, so the report stays readable.
    assert!(
        stderr.lines().all(|l| l.len() < 400),
        "a diagnostic line is too long"
    );
}

const HEAD: &str = "module @m {\n  func @main(%x: tensor<2xf32>) {\n";

#[test]
fn ten_megabyte_line_is_located() {
    let mut s = String::from(HEAD);
    s.push_str("    %0 = relu(%x) {a = [");
    for _ in 0..(10 << 20) / 3 {
        s.push_str("1, ");
    }
    s.push_str("1]}\n    return %0\n  }\n}\n");
    let out = check_bytes("long_line.tir", s.as_bytes());
    // The attribute is unknown to `relu`: reported at its name on line 3, column 20.
    assert_refused(&out, ":3:20: error: `relu` has no attribute `a`");
}

#[test]
fn ten_megabyte_line_with_syntax_error_at_its_end() {
    let mut s = String::from(HEAD);
    s.push_str("    %0 = add(%x");
    for _ in 0..(10 << 20) / 5 {
        s.push_str(", %x");
    }
    s.push_str(" ?\n");
    let out = check_bytes("long_syntax.tir", s.as_bytes());
    assert_refused(&out, ":3:");
    assert!(String::from_utf8_lossy(&out.stderr).contains("found `?`"));
}

#[test]
fn deeply_nested_brackets_are_refused() {
    let mut s = String::from(HEAD);
    s.push_str("    %0 = relu(%x) {a = ");
    s.push_str(&"[".repeat(100_000));
    s.push_str(&"]".repeat(100_000));
    s.push_str("}\n    return %0\n  }\n}\n");
    let out = check_bytes("deep.tir", s.as_bytes());
    assert_refused(&out, "error: brackets nested more than 64 deep");
}

#[test]
fn nothing_but_open_parens() {
    let out = check_bytes("parens.tir", "(".repeat(1 << 20).as_bytes());
    assert_refused(&out, ":1:65: error: brackets nested");
}

#[test]
fn binary_noise_is_not_utf8() {
    let bytes: Vec<u8> = (0..65536u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let out = check_bytes("noise.tir", &bytes);
    assert_refused(&out, "error:");
}

#[test]
fn a_missing_file_is_an_error_not_a_panic() {
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .args(["check", "/nonexistent/model.tir"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the file"));
}

#[test]
fn command_line_misuse_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .args(["check"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .args(["frobnicate"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}
