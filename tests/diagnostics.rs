//! Every file in `tests/invalid/` is refused by `tirc check` with exit code 1 and a located
//! diagnostic; the rendered diagnostics (caret lines included) are snapshots.

use std::process::Command;

fn tirc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tirc"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

#[test]
fn invalid_inputs_are_reported_with_location() {
    insta::glob!("invalid/*.tir", |path| {
        let rel = path
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .expect("inside the repo");
        let out = tirc().arg("check").arg(rel).output().expect("run tirc");
        let code = out.status.code();
        assert_eq!(
            code,
            Some(1),
            "{} must exit 1 (101 is a panic)",
            rel.display()
        );
        assert!(
            out.stdout.is_empty(),
            "nothing on stdout for an invalid file"
        );
        let stderr = String::from_utf8(out.stderr).expect("diagnostics are UTF-8");
        insta::assert_snapshot!(stderr);
    });
}
