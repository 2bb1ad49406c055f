//! `tirc` writing into a pipe whose reader has gone (`tirc fmt big.tir | head -1`) ends quietly,
//! as any Unix filter does, instead of panicking in `println!`.

use std::process::{Command, Stdio};

#[cfg(unix)]
#[test]
fn closed_stdout_does_not_panic() {
    for args in [
        &["fmt", "examples/inception_v3.tir"][..],
        &["plan", "examples/inception_v3.tir", "--annotate"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tirc"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tirc");
        // Close the read end before tirc writes a byte: every write then fails with EPIPE.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            !out.status.success(),
            "{args:?}: a closed pipe is not success"
        );
    }
}
