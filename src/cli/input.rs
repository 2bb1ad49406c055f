//! Reading input files and writing output files, with located diagnostics and atomic writes.

use super::Failure;
use std::io::Write;
use std::path::Path;
use tir_ir::diag::{render, Diagnostic};
use tir_ir::{Module, ToDiagnostic};

/// Reads, parses and verifies a `.tir` file. On failure the diagnostics are printed.
pub fn load_module(path: &Path) -> Result<(String, Module), Failure> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        eprintln!("{name}: error: cannot read the file: {e}");
        Failure::Reported
    })?;
    let (source, mut module) = match tir_ir::parser::parse_bytes(&bytes) {
        Ok(ok) => ok,
        Err((source, errors)) => {
            let diags: Vec<Diagnostic> = errors.iter().map(ToDiagnostic::to_diagnostic).collect();
            report(&name, &source, &diags);
            return Err(Failure::Reported);
        }
    };
    if let Err(errors) = tir_ir::verify(&mut module) {
        let diags: Vec<Diagnostic> = errors.iter().map(ToDiagnostic::to_diagnostic).collect();
        report(&name, &source, &diags);
        return Err(Failure::Reported);
    }
    // Bufferized functions must also keep every value intact until its last read.
    for f in &module.funcs {
        if let Err(errors) = tir_passes::buffer_check::check_bufferized(f) {
            let diags: Vec<Diagnostic> = errors
                .into_iter()
                .map(|e| Diagnostic::error(format!("@{}: {e}", f.name), f.span))
                .collect();
            report(&name, &source, &diags);
            return Err(Failure::Reported);
        }
    }
    Ok((source, module))
}

pub fn report(file: &str, source: &str, diags: &[Diagnostic]) {
    eprint!("{}", render(file, source, diags));
    let n = diags.len();
    eprintln!("{file}: {n} error{}", if n == 1 { "" } else { "s" });
}

/// Writes `contents` to `path` through a temporary file in the same directory and a rename,
/// so a failure never leaves a half-written file behind.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Failure> {
    let fail = |what: &str, e: std::io::Error| {
        eprintln!("{}: error: cannot {what}: {e}", path.display());
        Failure::Reported
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{file_name}.tmp{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail("write it", e));
    }
    Ok(())
}
