//! Reading input files and writing output files, with located diagnostics and atomic writes.

use super::Failure;
use std::path::Path;
use tir_ir::diag::{render, Diagnostic};
use tir_ir::specialize::module_symbols;
use tir_ir::{Bindings, Module, ToDiagnostic};

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
    // Bufferized functions must also keep every value intact until its last read. (A dynamic
    // function holds no buffers: the verifier refuses them.)
    for f in module.funcs.iter().filter(|f| !f.is_dynamic()) {
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

/// Reads, parses and verifies a `.tir` file and gives a static module: a dynamic one is
/// specialized at `dims` (`--dim NAME=N`), or refused with what to pass. `flag` is how the
/// command takes dims (`None`: it takes none, and a dynamic model is refused).
pub fn load_static(
    path: &Path,
    dims: &Bindings,
    flag: Option<&str>,
) -> Result<(String, Module), Failure> {
    let (source, module) = load_module(path)?;
    let module = specialize(path, &source, module, dims, flag)?;
    Ok((source, module))
}

/// `--dim NAME=N` arguments (repeatable; a name given twice is misuse).
pub fn parse_dims(args: &[String]) -> Result<Bindings, Failure> {
    let mut out = Bindings::new();
    for d in args {
        let parsed = d
            .split_once('=')
            .and_then(|(n, v)| Some((n.trim().to_string(), v.trim().parse::<u64>().ok()?)))
            .filter(|(n, _)| !n.is_empty());
        let Some((name, value)) = parsed else {
            return Err(Failure::Usage(format!(
                "--dim `{d}`: expected NAME=VALUE with a non-negative integer VALUE"
            )));
        };
        if out.insert(name.clone(), value).is_some() {
            return Err(Failure::Usage(format!(
                "--dim: `{name}` is given more than once"
            )));
        }
    }
    Ok(out)
}

/// Checks that every name in `dims` is a dim of `module` (misuse otherwise, exit 2).
pub fn check_dim_names(module: &Module, dims: &Bindings, flag: &str) -> Result<(), Failure> {
    let known = module_symbols(module);
    for name in dims.keys() {
        if !known.contains(name) {
            let have = if known.is_empty() {
                "the model has no symbolic dims".to_string()
            } else {
                format!("its dims are {}", known.join(", "))
            };
            return Err(Failure::Usage(format!(
                "{flag} `{name}`: the model has no dim `{name}`; {have}"
            )));
        }
    }
    Ok(())
}

/// A dynamic module at `dims` (static modules pass through, a `--dim` they cannot use is
/// misuse). A dim without a value is refused, naming the flag to pass.
/// `module` with the `--dim` values of some dims fixed and the others left symbolic
/// (`tir_ir::specialize::pin`); a failure is reported against the source.
pub fn pin(path: &Path, source: &str, module: Module, dims: &Bindings) -> Result<Module, Failure> {
    check_dim_names(&module, dims, "--dim")?;
    if dims.is_empty() || !module.is_dynamic() {
        return Ok(module);
    }
    tir_ir::specialize::pin(&module, dims).map_err(|errors| {
        let diags: Vec<Diagnostic> = errors.iter().map(ToDiagnostic::to_diagnostic).collect();
        report(&path.display().to_string(), source, &diags);
        Failure::Reported
    })
}

pub fn specialize(
    path: &Path,
    source: &str,
    module: Module,
    dims: &Bindings,
    flag: Option<&str>,
) -> Result<Module, Failure> {
    let name = path.display().to_string();
    check_dim_names(&module, dims, "--dim")?;
    if !module.is_dynamic() {
        return Ok(module);
    }
    let known = module_symbols(&module);
    let missing: Vec<&String> = known.iter().filter(|s| !dims.contains_key(*s)).collect();
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|s| format!("`{s}`")).collect();
        match flag {
            Some(flag) => eprintln!(
                "{name}: error: the model has symbolic dims ({}); give {} a value with {flag} NAME=N",
                known.join(", "),
                list.join(", ")
            ),
            None => eprintln!(
                "{name}: error: the model has symbolic dims ({}); this command takes static models only (`tirc plan`, `run`, `opt` and `compile` give dims values with --dim NAME=N)",
                known.join(", ")
            ),
        }
        return Err(Failure::Reported);
    }
    tir_ir::specialize(&module, dims).map_err(|errors| {
        let diags: Vec<Diagnostic> = errors.iter().map(ToDiagnostic::to_diagnostic).collect();
        report(&name, source, &diags);
        Failure::Reported
    })
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
