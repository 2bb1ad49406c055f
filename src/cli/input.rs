//! Reading input files and writing output files, with located diagnostics and atomic writes.

use super::Failure;
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

/// Writes `contents` to `path` so that it appears whole or not at all, and nothing is left
/// behind on any failure, a kill included (`tir_codegen::toolchain::publish`: written unnamed,
/// then linked in under its name).
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Failure> {
    tir_codegen::toolchain::publish(path, contents, 0o666).map_err(|e| {
        eprintln!("{}: error: cannot write it: {e}", path.display());
        Failure::Reported
    })
}
