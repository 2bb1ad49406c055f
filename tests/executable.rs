//! The compiled executable against hostile use (issue 17): its command line refuses every
//! misuse with a message and exit 2; its `.npy` reader follows `tirc run`'s policy file for
//! file (same verdict, same message); a failed write leaves nothing behind; and `tirc compile`
//! itself leaves nothing but its output, in the output's directory and in `TMPDIR`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::*;
use tir_interp::npy;

/// `relu` over one input: the output is the input's positive part, bit for bit, on the
/// interpreter and in the executable alike.
const MODEL: &str = "module @id {
  func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %y = relu(%x)
    return %y
  }
}
";

fn tirc(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tirc"));
    c.current_dir(dir);
    c
}

/// Writes `MODEL` to `dir/model.tir` and compiles it to `dir/model` (opt level 0: the code's
/// speed is not what these tests look at).
fn compiled(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("model.tir"), MODEL).unwrap();
    let out = tirc(dir)
        .args(["compile", "model.tir", "-o", "model", "--opt-level", "0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    dir.join("model")
}

fn exe(dir: &Path, args: &[&str]) -> Output {
    Command::new(dir.join("model"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---- the command line -----------------------------------------------------------------------

#[test]
fn a_run_count_of_2_to_the_32_is_refused_with_exit_2() {
    let dir = scratch("exe", "bench-2-32");
    compiled(&dir);
    for flag in ["--bench", "--profile"] {
        let out = exe(&dir, &[flag, "4294967296"]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "error: {flag} wants a whole number of runs from 1 to 100000000, got `4294967296`"
            )),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn every_misuse_of_the_command_line_exits_2_with_a_message() {
    let dir = scratch("exe", "misuse");
    compiled(&dir);
    let cases: &[(&[&str], &str)] = &[
        (&["--bench"], "--bench needs a value"),
        (&["--profile"], "--profile needs a value"),
        (&["--input"], "--input needs a value"),
        (&["--output"], "--output needs a value"),
        (&["--bench", "-1"], "got `-1`"),
        (&["--bench", "0"], "got `0`"),
        (&["--bench", "+3"], "got `+3`"),
        (&["--bench", " 3"], "got ` 3`"),
        (&["--bench", "3x"], "got `3x`"),
        (&["--bench", ""], "got ``"),
        (
            &["--bench", "99999999999999999999"],
            "got `99999999999999999999`",
        ),
        (&["--profile", "100000001"], "got `100000001`"),
        (
            &["--bench", "2", "--bench", "3"],
            "--bench is given more than once",
        ),
        (
            &["--output", "a", "--output", "b"],
            "--output is given more than once",
        ),
        (
            &["--output", ""],
            "--output wants a directory or a .npy file",
        ),
        (&["--input", "x.npy"], "expected NAME=FILE.npy"),
        (&["--input", "x="], "expected NAME=FILE.npy"),
        (&["--input", "=x.npy"], "expected NAME=FILE.npy"),
        (&["--input", "z=a.npy"], "the model has no input `%z`"),
        (
            &["--input", "x=a.npy", "--input", "%x=b.npy"],
            "`%x` is given more than once",
        ),
        (&["--threads"], "--threads needs a value"),
        (
            &["--threads", "0"],
            "--threads wants a whole number of threads from 1 to 1024, got `0`",
        ),
        (&["--threads", "-2"], "got `-2`"),
        (&["--threads", "2x"], "got `2x`"),
        (&["--threads", "1025"], "got `1025`"),
        (
            &["--threads", "99999999999999999999"],
            "got `99999999999999999999`",
        ),
        (
            &["--threads", "2", "--threads", "2"],
            "--threads is given more than once",
        ),
        (&["--frobnicate"], "unknown argument `--frobnicate`"),
        (&["extra"], "unknown argument `extra`"),
    ];
    for (args, message) in cases {
        let out = exe(&dir, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(message) && err.contains("usage:"),
            "{args:?}: {err}"
        );
    }
}

// ---- writing outputs ------------------------------------------------------------------------

#[test]
fn a_directory_where_an_output_goes_leaves_nothing_behind() {
    let dir = scratch("exe", "output-dir");
    compiled(&dir);
    std::fs::create_dir_all(dir.join("exe/y.npy")).unwrap();
    std::fs::create_dir_all(dir.join("run/y.npy")).unwrap();
    let out = exe(&dir, &["--output", "exe"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("exe/y.npy: error: cannot write it: Is a directory"),
        "{}",
        stderr(&out)
    );
    let out = tirc(&dir)
        .args(["run", "model.tir", "-o", "run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(listing(&dir.join("exe")), ["y.npy"]);
    assert_eq!(listing(&dir.join("run")), ["y.npy"]);
}

#[test]
fn outputs_replace_existing_files_and_leave_nothing_else() {
    let dir = scratch("exe", "output-replace");
    compiled(&dir);
    std::fs::create_dir_all(dir.join("out")).unwrap();
    std::fs::write(dir.join("out/y.npy"), b"stale").unwrap();
    let out = exe(&dir, &["--output", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(listing(&dir.join("out")), ["y.npy"]);
    let y = npy::read(&std::fs::read(dir.join("out/y.npy")).unwrap()).unwrap();
    assert_eq!(y.ty.to_string(), "tensor<2x3xf32>");
}

// ---- reading inputs: one policy with `tirc run` ---------------------------------------------

/// A version 1.0 `.npy` file with `dict` as its header and `data` after it.
fn npy_file(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn dict(descr: &str, fortran: &str, shape: &str) -> String {
    format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}")
}

const VALUES: [f32; 6] = [0.5, -1.25, 2.0, -0.0, 3.75, -8.5];

fn le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The table of inputs: name, bytes (`None`: no file at all; a directory for `dir.npy`).
fn table() -> Vec<(&'static str, Option<Vec<u8>>)> {
    let good = dict("<f4", "False", "(2, 3)");
    let be: Vec<u8> = VALUES.iter().flat_map(|v| v.to_be_bytes()).collect();
    let mut v2 = npy_file(&good, &le(&VALUES));
    // The same file as version 2.0: a 4-byte header length.
    v2[6] = 2;
    v2.splice(8..10, [v2[8], v2[9], 0, 0]);
    let mut non_utf8 = npy_file(&good, &le(&VALUES));
    non_utf8[20] = 0xff;
    vec![
        ("good.npy", Some(npy_file(&good, &le(&VALUES)))),
        ("v2.npy", Some(v2)),
        (
            "big_endian.npy",
            Some(npy_file(&dict(">f4", "False", "(2, 3)"), &be)),
        ),
        (
            "no_order.npy",
            Some(npy_file(&dict("|f4", "False", "(2, 3)"), &le(&VALUES))),
        ),
        ("truncated.npy", Some(npy_file(&good, &le(&VALUES)[..20]))),
        (
            "trailing.npy",
            Some(npy_file(&good, &[le(&VALUES), vec![0; 4]].concat())),
        ),
        (
            "f8.npy",
            Some(npy_file(&dict("<f8", "False", "(2, 3)"), &[0; 48])),
        ),
        (
            "i4.npy",
            Some(npy_file(&dict("<i4", "False", "(2, 3)"), &[0; 24])),
        ),
        (
            "fortran.npy",
            Some(npy_file(&dict("<f4", "True", "(2, 3)"), &le(&VALUES))),
        ),
        (
            "shape.npy",
            Some(npy_file(&dict("<f4", "False", "(3, 2)"), &le(&VALUES))),
        ),
        (
            "rank.npy",
            Some(npy_file(&dict("<f4", "False", "(6,)"), &le(&VALUES))),
        ),
        (
            "overflow.npy",
            Some(npy_file(
                &dict("<f4", "False", "(4294967296, 4294967296, 4294967296)"),
                &[],
            )),
        ),
        (
            "no_fortran.npy",
            Some(npy_file(
                "{'descr': '<f4', 'shape': (2, 3), }",
                &le(&VALUES),
            )),
        ),
        (
            "bad_header.npy",
            Some(npy_file("{'descr': '<f4' 'shape': (2, 3)}", &le(&VALUES))),
        ),
        (
            "unknown_key.npy",
            Some(npy_file(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}",
                &le(&VALUES),
            )),
        ),
        (
            "structured.npy",
            Some(npy_file(
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }",
                &le(&VALUES),
            )),
        ),
        (
            "huge_dim.npy",
            Some(npy_file(
                &dict("<f4", "False", "(99999999999999999999, 3)"),
                &le(&VALUES),
            )),
        ),
        ("non_utf8.npy", Some(non_utf8)),
        (
            "bad_magic.npy",
            Some(b"PK\x03\x04 not an npy file".to_vec()),
        ),
        ("short.npy", Some(b"\x93NUM".to_vec())),
        ("seven.npy", Some(b"\x93NUMPY\x01".to_vec())),
        ("header_cut.npy", Some(npy_file(&good, &[])[..40].to_vec())),
        ("version.npy", Some(b"\x93NUMPY\x09\x00xxxxxxxx".to_vec())),
        ("empty.npy", Some(Vec::new())),
        ("missing.npy", None),
        ("dir.npy", None),
    ]
}

#[test]
fn the_executable_and_tirc_run_give_every_npy_file_the_same_verdict() {
    let dir = scratch("exe", "npy-policy");
    compiled(&dir);
    std::fs::create_dir_all(dir.join("dir.npy")).unwrap();
    let mut accepted = Vec::new();
    for (name, bytes) in table() {
        if let Some(bytes) = bytes {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        let input = format!("x={name}");
        let (exe_out, run_out) = (format!("exe-{name}"), format!("run-{name}"));
        let by_exe = exe(&dir, &["--input", &input, "--output", &exe_out]);
        let by_run = tirc(&dir)
            .args(["run", "model.tir", "--input", &input, "-o", &run_out])
            .output()
            .unwrap();
        let (e, r) = (stderr(&by_exe), stderr(&by_run));
        assert_eq!(
            by_exe.status.code(),
            by_run.status.code(),
            "{name}: the executable says {e:?}, tirc run {r:?}"
        );
        assert!(matches!(by_exe.status.code(), Some(0 | 1)), "{name}: {e}");
        if by_exe.status.success() {
            // The same numbers in both (and they are the file's).
            let read = |f: &str| npy::read(&std::fs::read(dir.join(f)).unwrap()).unwrap();
            let (y_exe, y_run) = (read(&exe_out), read(&run_out));
            assert_eq!(y_exe, y_run, "{name}");
            let want: Vec<f32> = VALUES.iter().map(|v| v.max(0.0)).collect();
            assert_eq!(y_exe.as_f32().unwrap(), want, "{name}");
            accepted.push(name);
        } else {
            assert_eq!(e, r, "{name}: the messages differ");
            assert!(
                e.starts_with(&format!("{name}: error: input `%x`: ")) && e.lines().count() == 1,
                "{name}: {e}"
            );
        }
    }
    assert_eq!(
        accepted,
        ["good.npy", "v2.npy", "big_endian.npy", "no_order.npy"]
    );
}

#[test]
fn a_refused_npy_file_names_both_types() {
    let dir = scratch("exe", "npy-names");
    compiled(&dir);
    let cases = [
        (
            "shape.npy",
            npy_file(&dict("<f4", "False", "(3, 2)"), &le(&VALUES)),
            "expected tensor<2x3xf32>, found tensor<3x2xf32>",
        ),
        (
            "f8.npy",
            npy_file(&dict("<f8", "False", "(2, 3)"), &[0; 48]),
            "expected tensor<2x3xf32>, found dtype `<f8`",
        ),
        (
            "trailing.npy",
            npy_file(
                &dict("<f4", "False", "(2, 3)"),
                &[le(&VALUES), vec![0; 4]].concat(),
            ),
            "the shape [2, 3] has 24 bytes of data but the file holds 28",
        ),
    ];
    for (name, bytes, message) in cases {
        std::fs::write(dir.join(name), bytes).unwrap();
        let out = exe(&dir, &["--input", &format!("x={name}")]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(stderr(&out).contains(message), "{name}: {}", stderr(&out));
    }
    let out = exe(&dir, &["--input", "x=absent.npy"]);
    assert!(
        stderr(&out).contains(
            "absent.npy: error: input `%x`: cannot read the file: No such file or directory (os error 2)"
        ),
        "{}",
        stderr(&out)
    );
}

// ---- tirc compile leaves nothing behind -----------------------------------------------------

/// The real `cc`, found on the PATH.
fn real_cc() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("cc"))
        .find(|p| p.is_file())
        .expect("a cc on the PATH")
}

/// Compiles `MODEL` with `TMPDIR` set to the empty `dir/tmp` and the output going to the empty
/// `dir/out`, through a `cc` that first lists what those two directories hold at that moment
/// into `dir/seen` (the moment a scratch directory or a temporary would show), then does
/// `then` (a shell command). Returns tirc's output and what `cc` saw.
fn compile_watched(dir: &Path, extra: &[&str], then: &str) -> (Output, String) {
    for d in ["tmp", "out", "bin"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::write(dir.join("model.tir"), MODEL).unwrap();
    std::fs::write(dir.join("seen"), "").unwrap();
    let cc = dir.join("bin/cc");
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\necho \"cc $*\" >> '{seen}'\nfind '{tmp}' '{out}' -mindepth 1 >> '{seen}'\n{then}\n",
            seen = dir.join("seen").display(),
            tmp = dir.join("tmp").display(),
            out = dir.join("out").display(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(dir.join("bin")).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .unwrap();
    let out = tirc(dir)
        .args([
            "compile",
            "model.tir",
            "-o",
            "out/model",
            "--opt-level",
            "0",
        ])
        .args(extra)
        .env("TMPDIR", dir.join("tmp"))
        .env("PATH", path)
        .output()
        .unwrap();
    let seen = std::fs::read_to_string(dir.join("seen")).unwrap();
    (out, seen)
}

/// What `cc` saw, less its own command lines: the files it found.
fn files_seen(seen: &str) -> Vec<&str> {
    seen.lines().filter(|l| !l.starts_with("cc ")).collect()
}

#[test]
fn compiling_an_executable_names_no_file_but_the_output() {
    let dir = scratch("exe", "compile-clean");
    let then = format!("exec '{}' \"$@\"", real_cc().display());
    let (out, seen) = compile_watched(&dir, &[], &then);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        seen.lines().filter(|l| l.starts_with("cc ")).count(),
        2,
        "{seen}"
    );
    assert_eq!(files_seen(&seen), Vec::<&str>::new(), "{seen}");
    assert_eq!(listing(&dir.join("tmp")), Vec::<String>::new());
    assert_eq!(listing(&dir.join("out")), ["model"]);
    assert!(exe_at(&dir.join("out/model")).status.success());
}

fn exe_at(path: &Path) -> Output {
    Command::new(path).output().unwrap()
}

#[test]
fn a_sigkill_in_the_middle_of_compile_leaves_nothing() {
    let dir = scratch("exe", "compile-killed");
    // `cc`'s parent is tirc: killed as it waits for the C compiler, the moment the issue saw a
    // scratch directory with main.c and the object left behind.
    let (out, seen) = compile_watched(&dir, &[], "kill -9 $PPID\nexit 1");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", stderr(&out));
    assert_eq!(files_seen(&seen), Vec::<&str>::new(), "{seen}");
    assert_eq!(listing(&dir.join("tmp")), Vec::<String>::new());
    assert_eq!(listing(&dir.join("out")), Vec::<String>::new());
}

#[test]
fn a_failed_link_leaves_nothing() {
    let dir = scratch("exe", "compile-fails");
    let (out, seen) = compile_watched(&dir, &[], "echo 'cc: refused' >&2\nexit 1");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("cc: refused"), "{}", stderr(&out));
    assert_eq!(files_seen(&seen), Vec::<&str>::new(), "{seen}");
    assert_eq!(listing(&dir.join("tmp")), Vec::<String>::new());
    assert_eq!(listing(&dir.join("out")), Vec::<String>::new());
}

#[test]
fn a_static_library_leaves_nothing_but_itself_and_its_header() {
    let dir = scratch("exe", "compile-lib");
    let (out, _) = compile_watched(&dir, &["--emit", "lib"], "exit 1");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(listing(&dir.join("tmp")), Vec::<String>::new());
    assert_eq!(listing(&dir.join("out")), ["model", "model.h"]);
}

/// Integer and bool tensors through the executable's `.npy` reader and writer: an `i64` and
/// a `bool` input, `i64`, `bool` and `u8` outputs, each file's bytes equal to what `tirc run`
/// (the interpreter) writes for the same inputs.
#[test]
fn integer_and_bool_tensors_round_trip_through_npy_files_as_tirc_run_writes_them() {
    use tir_interp::{Data, Tensor};
    use tir_ir::{DType, TensorType};
    let dir = scratch("exe", "typed");
    std::fs::write(
        dir.join("model.tir"),
        "module @typed {
  func @main(%a: tensor<2x3xi64>, %m: tensor<3xbool>) -> (tensor<2x3xi64>, tensor<2x3xbool>, tensor<2x3xu8>) {
    %b = cast(%m) {to = i64} : tensor<3xi64>
    %q = div(%a, %b) : tensor<2x3xi64>
    %l = less(%a, %q) : tensor<2x3xbool>
    %u = cast(%a) {to = u8} : tensor<2x3xu8>
    return %q, %l, %u
  }
}
",
    )
    .unwrap();
    let out = tirc(&dir)
        .args(["compile", "model.tir", "-o", "model", "--opt-level", "0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let a = Tensor::new(
        TensorType::new([2, 3], DType::I64),
        Data::I64(vec![7, -7, 300, i64::MIN, 5, -1]),
    )
    .unwrap();
    let m = Tensor::new(
        TensorType::new([3], DType::Bool),
        Data::Bool(vec![true, false, true]),
    )
    .unwrap();
    std::fs::write(dir.join("a.npy"), npy::write(&a).unwrap()).unwrap();
    std::fs::write(dir.join("m.npy"), npy::write(&m).unwrap()).unwrap();
    for d in ["exe", "interp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let out = exe(
        &dir,
        &[
            "--input", "a=a.npy", "--input", "m=m.npy", "--output", "exe",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = tirc(&dir)
        .args([
            "run",
            "model.tir",
            "--input",
            "a=a.npy",
            "--input",
            "m=m.npy",
            "-o",
            "interp",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for name in ["q", "l", "u"] {
        let file = format!("{name}.npy");
        let e = std::fs::read(dir.join("exe").join(&file)).unwrap();
        let i = std::fs::read(dir.join("interp").join(&file)).unwrap();
        let (te, ti) = (npy::read(&e).unwrap(), npy::read(&i).unwrap());
        assert_eq!(te, ti, "{file}");
    }
    let q = npy::read(&std::fs::read(dir.join("exe/q.npy")).unwrap()).unwrap();
    // 7/1, -7/0 (0), 300/1, MIN/1, 5/0 (0), -1/1.
    assert_eq!(q.data, Data::I64(vec![7, 0, 300, i64::MIN, 0, -1]));
    let u = npy::read(&std::fs::read(dir.join("exe/u.npy")).unwrap()).unwrap();
    assert_eq!(u.data, Data::U8(vec![7, 249, 44, 0, 5, 255]));
    let _ = std::fs::remove_dir_all(&dir);
}
