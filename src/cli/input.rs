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

/// The weights of `module` (the model file `model`): from the safetensors file `file` when one
/// is given, else from `embedded` (an ONNX model's own weights), else generated from `seed`.
/// A fault of a weights file is reported against that file, in words; one of the module (two
/// consts naming one weight differently, say), against the model. `tirc run` and `tirc compile`
/// both load their weights here.
pub fn load_weights(
    module: &Module,
    model: &Path,
    file: Option<&Path>,
    embedded: Option<&[u8]>,
    seed: u64,
) -> Result<tir_interp::Weights, Failure> {
    use tir_interp::Weights;
    let blame = |path: &Path, e: tir_interp::WeightsError| {
        let at = if e.is_the_files_fault() { path } else { model };
        eprintln!("{}: error: {e}", at.display());
        Failure::Reported
    };
    match (file, embedded) {
        (Some(path), _) => {
            let bytes = std::fs::read(path).map_err(|e| {
                eprintln!("{}: error: cannot read the file: {e}", path.display());
                Failure::Reported
            })?;
            Weights::from_safetensors(module, &bytes).map_err(|e| blame(path, e))
        }
        // The model file holds these weights: it is at fault either way.
        (None, Some(bytes)) => {
            Weights::from_safetensors(module, bytes).map_err(|e| blame(model, e))
        }
        (None, None) => Weights::generate(module, seed).map_err(|e| blame(model, e)),
    }
}
