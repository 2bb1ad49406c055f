//! The system toolchain (`cc`, `ar`) run in a scratch directory, its product published
//! atomically: the output file appears complete or not at all, and a failed build leaves
//! nothing behind (the scratch directory is removed either way).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `build` in a fresh scratch directory; the path it returns (inside that directory) is
/// copied next to `out` and renamed onto it.
pub(crate) fn build_then_publish(
    out: &Path,
    build: impl FnOnce(&Path) -> Result<PathBuf, String>,
) -> Result<(), String> {
    let scratch = tempfile::Builder::new()
        .prefix("tirc-")
        .tempdir()
        .map_err(|e| format!("cannot create a scratch directory: {e}"))?;
    let product = build(scratch.path())?;
    // Staged beside `out` so the rename stays on one file system.
    let staged = out.with_file_name(format!(
        ".{}.tmp{}",
        out.file_name().and_then(|n| n.to_str()).unwrap_or("out"),
        std::process::id()
    ));
    let published = std::fs::copy(&product, &staged)
        .map_err(|e| format!("{}: {e}", staged.display()))
        .and_then(|_| std::fs::rename(&staged, out).map_err(|e| format!("{}: {e}", out.display())));
    if published.is_err() {
        let _ = std::fs::remove_file(&staged);
    }
    published
}

/// Writes `contents` to `path` (inside the scratch directory).
pub(crate) fn write(path: &Path, contents: &[u8]) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs `cmd` (the tool named `tool`), turning a failure to start or a non-zero exit into a
/// message carrying the tool's stderr.
pub(crate) fn run(cmd: &mut Command, tool: &str) -> Result<(), String> {
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run `{tool}`: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{tool}` failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
