//! `tirc fmt`: canonical output (snapshots of hand-written files in `tests/fmt/`), idempotent
//! on those and on every model in `examples/`; `--check` and `--in-place` behave.

use std::path::Path;
use std::process::Command;

fn tirc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run tirc")
}

fn fmt_text(path: &Path) -> String {
    let out = tirc(&["fmt", path.to_str().expect("utf-8 path")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn fmt_string(text: &str) -> String {
    let m = tir_ir::parse_and_verify(text).expect("canonical text re-parses and verifies");
    tir_ir::print(&m)
}

#[test]
fn canonical_form_of_hand_written_files() {
    insta::glob!("fmt/*.tir", |path| {
        let once = fmt_text(path);
        assert_eq!(
            fmt_string(&once),
            once,
            "fmt is not idempotent on {}",
            path.display()
        );
        insta::assert_snapshot!(once);
    });
}

#[test]
fn fmt_is_idempotent_on_every_example() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "tir") {
            let once = fmt_text(&path);
            assert_eq!(
                fmt_string(&once),
                once,
                "fmt is not idempotent on {}",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n > 0, "no examples found");
}

#[test]
fn check_flag_and_in_place() {
    let dir = std::env::temp_dir().join(format!("tir-fmt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("messy.tir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fmt/messy.tir");
    std::fs::copy(&src, &path).expect("copy");
    let p = path.to_str().expect("utf-8");
    assert_eq!(
        tirc(&["fmt", "--check", p]).status.code(),
        Some(1),
        "messy input is not canonical"
    );
    assert_eq!(tirc(&["fmt", "--in-place", p]).status.code(), Some(0));
    assert_eq!(
        tirc(&["fmt", "--check", p]).status.code(),
        Some(0),
        "in-place output is canonical"
    );
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        fmt_text(&src)
    );
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name() != "messy.tir")
        .collect();
    assert!(leftovers.is_empty(), "leftover files: {leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn in_place_on_invalid_input_leaves_the_file_untouched() {
    let dir = std::env::temp_dir().join(format!("tir-fmt-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bad.tir");
    let text = "module @m {\n  func @main(%x: tensor<2xf32>) {\n    %0 = relu(%y)\n    return %0\n  }\n}\n";
    std::fs::write(&path, text).expect("write");
    let out = tirc(&["fmt", "--in-place", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&path).expect("read"), text);
    let _ = std::fs::remove_dir_all(&dir);
}
