//! Output paths that are not plain files. Outputs are published atomically (written unnamed,
//! renamed over the old file), but a rename must not replace what is not a regular file: run as
//! root, `tirc … -o /dev/null` once turned `/dev/null` into a regular file, and every later
//! reader of `/dev/null` (cargo's `rustc -` probes among them) read back what others had
//! discarded. So a FIFO or a device is written into and stays what it was, and a symbolic link
//! stays a link while the file it names is replaced. Both `tirc` (`codegen::toolchain::publish`)
//! and the compiled executable (`exe_main.c`) follow this; these tests use a FIFO, which needs
//! no privilege, in place of `/dev/null`.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tir_interp::{npy, Tensor};

const MODEL: &str = "module @id {
  func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %y = relu(%x)
    return %y
  }
}
";

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tirc-special-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.tir"), MODEL).unwrap();
    dir
}

fn tirc(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// Reads `fifo` to its end on another thread, so that a writer opening it does not block.
fn drain(fifo: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let fifo = fifo.to_path_buf();
    std::thread::spawn(move || std::fs::read(fifo).unwrap())
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_fifo()
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_symlink()
}

#[test]
fn tirc_writes_into_a_fifo_and_leaves_it_a_fifo() {
    let dir = scratch("tirc-fifo");
    let fifo = dir.join("out.tir");
    mkfifo(&fifo);
    let reader = drain(&fifo);
    let out = tirc(
        &dir,
        &["opt", "model.tir", "--passes", "verify", "-o", "out.tir"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // Checked before joining: a replaced FIFO never gets its writer, and the reader waits.
    assert!(is_fifo(&fifo), "the FIFO was replaced");
    let written = String::from_utf8(reader.join().unwrap()).unwrap();
    assert!(written.contains("relu(%x)"), "{written}");
}

#[test]
fn tirc_replaces_the_file_a_symlink_names_and_keeps_the_link() {
    let dir = scratch("tirc-link");
    std::fs::create_dir_all(dir.join("real")).unwrap();
    std::fs::write(dir.join("real/out.tir"), "stale").unwrap();
    // A relative link, a link to that link, and a dangling link whose target appears.
    std::os::unix::fs::symlink("real/out.tir", dir.join("link.tir")).unwrap();
    std::os::unix::fs::symlink("link.tir", dir.join("link2.tir")).unwrap();
    std::os::unix::fs::symlink("real/new.tir", dir.join("dangling.tir")).unwrap();
    for (link, target) in [
        ("link2.tir", "real/out.tir"),
        ("dangling.tir", "real/new.tir"),
    ] {
        let out = tirc(
            &dir,
            &["opt", "model.tir", "--passes", "verify", "-o", link],
        );
        assert!(out.status.success(), "{link}: {}", stderr(&out));
        assert!(is_symlink(&dir.join(link)), "{link} was replaced");
        let text = std::fs::read_to_string(dir.join(target)).unwrap();
        assert!(text.contains("relu(%x)"), "{target}: {text}");
    }
    assert!(is_symlink(&dir.join("link.tir")));
    let mut names: Vec<_> = std::fs::read_dir(dir.join("real"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["new.tir", "out.tir"], "a temporary file was left");
}

#[test]
fn a_symlink_loop_is_an_error_not_a_hang() {
    let dir = scratch("tirc-loop");
    std::os::unix::fs::symlink("b.tir", dir.join("a.tir")).unwrap();
    std::os::unix::fs::symlink("a.tir", dir.join("b.tir")).unwrap();
    let out = tirc(
        &dir,
        &["opt", "model.tir", "--passes", "verify", "-o", "a.tir"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("a.tir: error: cannot write it:"),
        "{}",
        stderr(&out)
    );
    assert!(is_symlink(&dir.join("a.tir")) && is_symlink(&dir.join("b.tir")));
}

#[test]
fn the_executable_writes_into_a_fifo_and_through_a_symlink() {
    let dir = scratch("exe");
    let out = tirc(
        &dir,
        &["compile", "model.tir", "-o", "model", "--opt-level", "0"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // The input is all ones, so the output is too (relu).
    let ones = Tensor::f32([2, 3], vec![1.0; 6]).unwrap();
    std::fs::write(dir.join("x.npy"), npy::write(&ones).unwrap()).unwrap();
    std::fs::create_dir_all(dir.join("fifo")).unwrap();
    std::fs::create_dir_all(dir.join("real")).unwrap();
    std::fs::create_dir_all(dir.join("link")).unwrap();
    mkfifo(&dir.join("fifo/y.npy"));
    std::os::unix::fs::symlink("../real/y.npy", dir.join("link/y.npy")).unwrap();
    let reader = drain(&dir.join("fifo/y.npy"));
    for out_dir in ["fifo", "link"] {
        let out = Command::new(dir.join("model"))
            .current_dir(&dir)
            .args(["--input", "x=x.npy", "--output", out_dir])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out_dir}: {}", stderr(&out));
    }
    assert!(is_fifo(&dir.join("fifo/y.npy")), "the FIFO was replaced");
    let through_fifo = npy::read(&reader.join().unwrap()).unwrap();
    let through_link = npy::read(&std::fs::read(dir.join("real/y.npy")).unwrap()).unwrap();
    for y in [&through_fifo, &through_link] {
        assert_eq!(y, &ones);
    }
    assert!(is_symlink(&dir.join("link/y.npy")));
}
