//! Hostile inputs to `tirc plan --records` and `tirc run` (issue 17): each ends in a diagnostic
//! naming the file that is at fault, exit code 1, never a panic, a wrapped number or a
//! megabyte-long message.

use std::path::{Path, PathBuf};
use std::process::Output;

/// A fresh directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-hostile-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tirc(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run tirc")
}

/// Runs `tirc args` expecting exit 1, returning its stderr.
fn refused(dir: &Path, args: &[&str]) -> String {
    let out = tirc(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "tirc {args:?}\nstdout: {}\nstderr: {stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

// ---- usage records as CSV -------------------------------------------------------------------

#[test]
fn an_inclusive_upper_of_u64_max_is_refused_at_its_line_and_column() {
    let dir = scratch("csv-max");
    std::fs::write(
        dir.join("big.csv"),
        "id,lower,upper,size\na,0,3,16\nb,0,18446744073709551615,16\n",
    )
    .unwrap();
    let err = refused(&dir, &["plan", "--records", "big.csv", "--inclusive"]);
    assert!(
        err.starts_with("big.csv:3: error: `upper` must be below 18446744073709551615"),
        "{err}"
    );
}

#[test]
fn a_megabyte_csv_field_is_shortened_in_the_diagnostic() {
    let dir = scratch("csv-long");
    let field = "9x".repeat(1 << 19);
    std::fs::write(
        dir.join("long.csv"),
        format!("id,lower,upper,size\na,0,{field},16\n"),
    )
    .unwrap();
    let err = refused(&dir, &["plan", "--records", "long.csv"]);
    assert!(err.starts_with("long.csv:2: error: `upper`"), "{err:.300}");
    assert!(err.len() < 400, "{} bytes: {err:.300}", err.len());
}
