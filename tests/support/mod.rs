//! What the command-line tests share: a fresh directory per test, `tirc` (or a program it
//! built) run inside it, and the checks on how it exited. Each test file uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tir_interp::{npy, Tensor};

/// A fresh, empty directory for one test of one suite; the process id keeps concurrent
/// `cargo test` runs apart.
pub fn scratch(suite: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-{suite}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `program args` in `dir`.
pub fn run(dir: &Path, program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run a program")
}

/// Runs `tirc args` in `dir`.
pub fn tirc(dir: &Path, args: &[&str]) -> Output {
    run(dir, env!("CARGO_BIN_EXE_tirc"), args)
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that `out` exited 0; `what` names the step in the failure message.
pub fn ok(out: Output, what: &str) {
    assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
}

/// Runs `tirc args` in `dir` expecting exit `code`; returns its stderr.
pub fn exits(dir: &Path, args: &[&str], code: i32) -> String {
    let out = tirc(dir, args);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tirc {args:?}\nstdout: {}\nstderr: {err}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

/// The tensor of the `.npy` file `dir/file`.
pub fn read_npy(dir: &Path, file: &str) -> Tensor {
    npy::read(&std::fs::read(dir.join(file)).unwrap()).unwrap()
}

/// Runs the executable `name` that `tirc compile` built in `dir` on the input file `input`
/// (bound to the parameter `x`), writing `out`; the output it wrote.
pub fn run_exe_x(dir: &Path, name: &str, input: &str, out: &str) -> Tensor {
    let prog = dir.join(name).to_string_lossy().into_owned();
    ok(
        run(
            dir,
            &prog,
            &["--input", &format!("x={input}"), "--output", out],
        ),
        name,
    );
    read_npy(dir, out)
}
