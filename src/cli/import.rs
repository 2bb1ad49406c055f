//! `tirc import MODEL.onnx -o MODEL.tir [--weights OUT.safetensors] [--dim name=value ...]`:
//! ONNX or TFLite (`.tflite`) → a verified `.tir` plus the safetensors file its `const` ops name.

use super::{input, Failure};
use std::path::{Path, PathBuf};

pub struct Options {
    pub model: PathBuf,
    pub output: PathBuf,
    pub weights: Option<PathBuf>,
    pub dims: Vec<String>,
    pub bind: Vec<String>,
    pub no_cleanup: bool,
}

/// `NAME=FILE.npy` as a graph input's bound value.
fn bound_input(spec: &str) -> Result<(String, tir_onnx::Tensor), Failure> {
    use tir_interp::tensor::Data;
    let Some((name, file)) = spec
        .split_once('=')
        .filter(|(n, f)| !n.is_empty() && !f.is_empty())
    else {
        return Err(Failure::Usage(format!(
            "--bind `{spec}`: expected NAME=FILE.npy"
        )));
    };
    let bytes = std::fs::read(file).map_err(|e| {
        eprintln!("{file}: error: {e}");
        Failure::Reported
    })?;
    let t = tir_interp::npy::read(&bytes).map_err(|e| {
        eprintln!("{file}: error: {e}");
        Failure::Reported
    })?;
    let data: Vec<u8> = match &t.data {
        Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::U8(v) => v.clone(),
        Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
    };
    let tensor = tir_onnx::Tensor {
        dtype: t.ty.dtype,
        shape: t.ty.shape.clone(),
        data,
    };
    Ok((name.trim().to_string(), tensor))
}

pub fn run(o: Options) -> Result<(), Failure> {
    let mut dims = Vec::with_capacity(o.dims.len());
    for d in &o.dims {
        let parsed = d
            .split_once('=')
            .and_then(|(n, v)| Some((n.trim().to_string(), v.trim().parse::<u64>().ok()?)))
            .filter(|(n, _)| !n.is_empty());
        match parsed {
            Some(p) => dims.push(p),
            None => {
                return Err(Failure::Usage(format!(
                    "--dim `{d}`: expected NAME=VALUE with a non-negative integer VALUE"
                )))
            }
        }
    }
    let bound = o
        .bind
        .iter()
        .map(|b| bound_input(b))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = tir_onnx::ImportOptions {
        dims,
        bound,
        no_cleanup: o.no_cleanup,
        keep_symbols: true,
        ..Default::default()
    };
    let model_name = o.model.display().to_string();
    let imported = if is_tflite(&o.model) {
        if !o.bind.is_empty() {
            return Err(Failure::Usage(
                "--bind applies to ONNX models only (a TFLite model has no shape inputs)".into(),
            ));
        }
        let opts = tir_tflite::ImportOptions {
            no_cleanup: o.no_cleanup,
            dims: opts.dims.clone(),
            ..Default::default()
        };
        tir_tflite::import_file(&o.model, &opts).map_err(|e| {
            eprintln!("{model_name}: error: {e}");
            Failure::Reported
        })?
    } else {
        tir_onnx::import_file(&o.model, &opts).map_err(|e| {
            eprintln!("{model_name}: error: {e}");
            Failure::Reported
        })?
    };
    let weights_path = o
        .weights
        .clone()
        .unwrap_or_else(|| o.output.with_extension("safetensors"));
    if !imported.weights.is_empty() {
        let bytes = imported.weights.to_safetensors().map_err(|e| {
            eprintln!(
                "{}: error: cannot encode the weights: {e}",
                weights_path.display()
            );
            Failure::Reported
        })?;
        input::write_atomic(&weights_path, &bytes)?;
    }
    let text = tir_ir::print(&imported.module);
    input::write_atomic(&o.output, text.as_bytes())?;
    let ops: usize = imported.module.funcs.iter().map(|f| f.layout.len()).sum();
    eprintln!(
        "{}: {ops} ops{}",
        o.output.display(),
        weights_summary(&imported.weights, &weights_path)
    );
    Ok(())
}

fn weights_summary(w: &tir_onnx::Weights, path: &Path) -> String {
    if w.is_empty() {
        String::new()
    } else {
        format!(
            "; {}: {} tensors, {} bytes",
            path.display(),
            w.len(),
            w.byte_size()
        )
    }
}

/// Whether `tirc compile` should treat `path` as an ONNX model rather than a `.tir` file.
pub fn is_onnx(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// Whether `path` is a TFLite model (`import` and `compile` dispatch on the extension).
pub fn is_tflite(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("tflite"))
}

/// What `tirc compile` gets from a `.tflite`: a static module (with the free batch it runs
/// at batch 1 for), or a dynamic one for kernels with run-time extents.
pub enum TfliteLoaded {
    Static(tir_ir::Module, Option<Vec<u8>>, Option<String>),
    RunTime(tir_ir::Module, Option<Vec<u8>>),
}

/// `tirc compile MODEL.tflite`: the model imported in memory (cleanup on, `--dim` pinning its
/// free input dims), with the weights it carries as safetensors bytes (`None` when it has no
/// constants). Free dims left, as for ONNX: an executable or library whose ops all have
/// kernels with run-time extents compiles with run-time dims, a lone free leading batch the
/// model is independent along compiles at batch 1 for every batch (an executable), and any
/// other free dim is refused, naming it.
pub fn load_tflite(
    path: &Path,
    dims: &tir_ir::Bindings,
    exe: bool,
    lib: bool,
) -> Result<TfliteLoaded, Failure> {
    let name = path.display().to_string();
    let opts = tir_tflite::ImportOptions {
        dims: dims.iter().map(|(n, v)| (n.clone(), *v)).collect(),
        ..Default::default()
    };
    let imported = tir_tflite::import_file(path, &opts).map_err(|e| {
        eprintln!("{name}: error: {e}");
        Failure::Reported
    })?;
    let syms = tir_ir::specialize::module_symbols(&imported.module);
    if !syms.is_empty() {
        // As for ONNX (`load_onnx_dynamic`): kernels with run-time extents for every op, and
        // not a lone leading batch (that keeps the batch-1 program), compile with run-time
        // dims; the import pinned the `--dim` values already.
        if exe || lib {
            let run_time = imported.module.entry().is_some_and(|f| {
                tir_codegen::dynamic::unsupported_op(f, &tir_ir::Bindings::new()).is_none()
                    && (lib
                        || !matches!(syms.as_slice(), [b] if tir_ir::batch::check_leading_batch(f, b).is_ok()))
            });
            if run_time {
                let weights = (!imported.weights.is_empty())
                    .then(|| imported.weights.to_safetensors())
                    .transpose()
                    .map_err(|e| {
                        eprintln!("{name}: error: cannot encode the weights: {e}");
                        Failure::Reported
                    })?;
                return Ok(TfliteLoaded::RunTime(imported.module, weights));
            }
        }
        if exe {
            if let Some((m, w, b)) = batched_from(imported) {
                return Ok(TfliteLoaded::Static(m, w, b));
            }
        }
        eprintln!(
            "{name}: error: the input dims {} are free (`-1` in `shape_signature`): `--dim NAME=N` pins each{}",
            syms.join(", "),
            if exe || lib {
                " (without it, a model compiles for every value when each of its ops has a kernel with run-time extents, or the dim is a lone leading batch it is independent along)"
            } else {
                ""
            }
        );
        return Err(Failure::Reported);
    }
    if imported.weights.is_empty() {
        return Ok(TfliteLoaded::Static(imported.module, None, None));
    }
    let bytes = imported.weights.to_safetensors().map_err(|e| {
        eprintln!("{name}: error: cannot encode the weights: {e}");
        Failure::Reported
    })?;
    Ok(TfliteLoaded::Static(imported.module, Some(bytes), None))
}

/// `tirc compile MODEL.onnx`: the model imported in memory (symbolic batch → 1, cleanup on),
/// with the weights it carries as safetensors bytes (`None` when it has no constants).
pub fn load_onnx(
    path: &Path,
    dims: &tir_ir::Bindings,
) -> Result<(tir_ir::Module, Option<Vec<u8>>), Failure> {
    let name = path.display().to_string();
    let opts = tir_onnx::ImportOptions {
        dims: dims.iter().map(|(n, v)| (n.clone(), *v)).collect(),
        ..tir_onnx::ImportOptions::default()
    };
    let imported = tir_onnx::import_file(path, &opts).map_err(|e| {
        eprintln!("{name}: error: {e}");
        Failure::Reported
    })?;
    if imported.weights.is_empty() {
        return Ok((imported.module, None));
    }
    let bytes = imported.weights.to_safetensors().map_err(|e| {
        eprintln!("{name}: error: cannot encode the weights: {e}");
        Failure::Reported
    })?;
    Ok((imported.module, Some(bytes)))
}

/// `tirc compile MODEL.onnx -o EXE`, the model imported with its symbols kept: static once
/// `--dim` has pinned them (by `dim_param` or derived name), or with one input dim left that
/// is a leading batch it is independent along (`tir_ir::batch`), then specialized at batch 1
/// and the batch's name returned (the model imported with its symbols kept, as
/// [`load_onnx_dynamic`] gives it back). `None` for any other model (then [`load_onnx`]'s rules
/// apply, with its messages).
pub fn batched_from(
    imported: tir_onnx::Imported,
) -> Option<(tir_ir::Module, Option<Vec<u8>>, Option<String>)> {
    let syms = tir_ir::specialize::module_symbols(&imported.module);
    let (module, batch) = match syms.as_slice() {
        [] => (imported.module, None),
        [b] => {
            tir_ir::batch::check_leading_batch(imported.module.entry()?, b).ok()?;
            let mut at_one = tir_ir::Bindings::new();
            at_one.insert(b.clone(), 1);
            let m = tir_ir::specialize(&imported.module, &at_one).ok()?;
            (m, Some(b.clone()))
        }
        _ => return None,
    };
    let weights = if imported.weights.is_empty() {
        None
    } else {
        Some(imported.weights.to_safetensors().ok()?)
    };
    Some((module, weights, batch))
}

/// `tirc compile MODEL.onnx` with run-time dims: the model imported with its symbols kept
/// (`--dim` pins some at import), when dims are left free, every op with a symbolic extent has
/// a kernel with run-time extents (`tir_codegen::dynamic::unsupported_op`) and, for an
/// executable, the dims are not a lone leading batch (that keeps the batch-1 program of
/// [`batched_from`]). Otherwise `Err` with the import, if it succeeded, for
/// [`batched_from`] (one import either way), and the other loaders' rules apply.
#[allow(clippy::type_complexity)]
pub fn load_onnx_dynamic(
    path: &Path,
    dims: &tir_ir::Bindings,
    lib: bool,
) -> Result<(tir_ir::Module, Option<Vec<u8>>), Option<Box<tir_onnx::Imported>>> {
    let opts = tir_onnx::ImportOptions {
        dims: dims.iter().map(|(n, v)| (n.clone(), *v)).collect(),
        keep_symbols: true,
        ..tir_onnx::ImportOptions::default()
    };
    let imported = tir_onnx::import_file(path, &opts).map_err(|_| None)?;
    let syms = tir_ir::specialize::module_symbols(&imported.module);
    let run_time = match imported.module.entry() {
        Some(f) if !syms.is_empty() && tir_codegen::dynamic::unsupported_op(f, dims).is_none() => {
            lib || !matches!(syms.as_slice(), [b] if tir_ir::batch::check_leading_batch(f, b).is_ok())
        }
        _ => false,
    };
    if !run_time {
        return Err(Some(Box::new(imported)));
    }
    let weights = if imported.weights.is_empty() {
        None
    } else {
        Some(imported.weights.to_safetensors().map_err(|_| None)?)
    };
    Ok((imported.module, weights))
}
