//! `tirc run MODEL.tir [--input NAME=FILE.npy ...] [--output DIR|FILE.npy]
//! [--weights FILE.safetensors] [--seed N] [--engine interp]`: runs a model and summarises
//! (or writes) its outputs.
//!
//! Inputs not given on the command line, and every weight when no weights file is given, are
//! generated deterministically from the seed (`tir_interp::weights`). The engine is chosen
//! with `--engine`: `interp`, the reference interpreter, or `jit`, the compiled kernels
//! (planned with buffer sharing, bufferized, LLVM code generation) run in memory through the
//! LLVM JIT.
//!
//! A dynamic model (symbolic dims, docs/ir.md §3.1) takes its dims from the shapes of the
//! `--input` files and from `--dim NAME=N`, and is specialized at them before it runs: what
//! runs is exactly the static model at those dims.

use super::{input, Failure};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tir_interp::{npy, weights, Tensor, Weights};
use tir_ir::{Function, Module};

/// What executes the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// The reference interpreter (plain loops, f32).
    Interp,
    /// The generated kernels through the LLVM JIT (what `tirc compile` would link).
    Jit,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Interp => "interp",
            Engine::Jit => "jit",
        }
    }

    fn execute(
        self,
        module: &Module,
        weights: &Weights,
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, String> {
        match self {
            Engine::Interp => tir_interp::run(module, weights, inputs).map_err(|e| e.to_string()),
            Engine::Jit => jit(module, weights, inputs),
        }
    }
}

fn module_results_non_f32(b: &tir_codegen::Bufferized) -> bool {
    b.func()
        .result_types
        .iter()
        .any(|t| t.dtype != tir_ir::DType::F32)
}

/// Plans (with buffer sharing), bufferizes and runs the generated code in memory.
fn jit(module: &Module, weights: &Weights, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    use tir_passes::pipeline::{parse_pipeline, run_pipeline};
    let mut m = module.clone();
    let passes = parse_pipeline("plan{sharing=true},bufferize").map_err(|e| e.to_string())?;
    run_pipeline(&mut m, &passes, false, |_, _| {}).map_err(|e| e.to_string())?;
    let proof = tir_codegen::Bufferized::new(&mut m).map_err(|e| e.to_string())?;
    if inputs.iter().any(|t| t.ty.dtype != tir_ir::DType::F32) || module_results_non_f32(&proof) {
        return tir_codegen::jit_run_tensors(&proof, weights, inputs).map_err(|e| e.to_string());
    }
    let ins: Vec<&[f32]> = inputs
        .iter()
        .map(|t| {
            t.as_f32()
                .ok_or_else(|| format!("input of type {}: the JIT runs f32 only", t.ty))
        })
        .collect::<Result<_, _>>()?;
    let outs = tir_codegen::jit_run(&proof, weights, &ins).map_err(|e| e.to_string())?;
    let func = proof.func();
    func.result_types
        .iter()
        .zip(outs)
        .map(|(t, v)| {
            Tensor::f32(t.shape.clone(), v).ok_or_else(|| "an output has the wrong size".into())
        })
        .collect()
}

pub struct Options {
    pub model: PathBuf,
    pub inputs: Vec<String>,
    pub output: Option<PathBuf>,
    pub weights: Option<PathBuf>,
    pub seed: u64,
    pub engine: Engine,
    /// `--dim NAME=N`: pinned dims of a dynamic model.
    pub dims: Vec<String>,
}

pub fn run(o: Options) -> Result<(), Failure> {
    let dims = input::parse_dims(&o.dims)?;
    let (source, module) = input::load_module(&o.model)?;
    let model_name = o.model.display().to_string();
    let no_entry = || {
        eprintln!(
            "{model_name}: error: the module has no entry function (`@main`, or a single function)"
        );
        Failure::Reported
    };
    let module = if module.is_dynamic() {
        // The dims take their values from the inputs' shapes (and --dim), then the model is
        // specialized at them.
        input::check_dim_names(&module, &dims, "--dim")?;
        let func = module.entry().ok_or_else(no_entry)?;
        let given = parse_input_args(func, &o.inputs)?;
        let mut shapes = Vec::with_capacity(given.len());
        for path in &given {
            shapes.push(match path {
                Some(path) => Some(input_shape(path)?),
                None => None,
            });
        }
        let bindings = tir_ir::specialize::bind_shapes(func, &shapes, &dims).map_err(|e| {
            eprintln!("{model_name}: error: {e}");
            Failure::Reported
        })?;
        input::specialize(
            &o.model,
            &source,
            module,
            &bindings,
            Some("--input (its shape) or --dim"),
        )?
    } else {
        input::specialize(&o.model, &source, module, &dims, Some("--dim"))?
    };
    let func = module.entry().ok_or_else(no_entry)?;
    let given = parse_input_args(func, &o.inputs)?;
    let single_file = o
        .output
        .as_ref()
        .is_some_and(|p| p.extension().is_some_and(|e| e == "npy"));
    if single_file && func.returns.len() != 1 {
        return Err(Failure::Usage(format!(
            "the model has {} outputs: give --output a directory, not a .npy file",
            func.returns.len()
        )));
    }

    let weights = input::load_weights(&module, &o.model, o.weights.as_deref(), None, o.seed)?;

    let mut inputs = Vec::with_capacity(func.params.len());
    for (i, &p) in func.params.iter().enumerate() {
        let value = func.value_name(p);
        let ty = func.ty(p).cloned().ok_or_else(|| {
            eprintln!("{model_name}: error: `{value}` has no type");
            Failure::Reported
        })?;
        let t = match &given[i] {
            Some(path) => read_input(path, &value, &ty)?,
            None => weights::random_input(&func.values[p].name, &ty, o.seed).ok_or_else(|| {
                eprintln!("{model_name}: error: input `{value}` ({ty}) is too large to generate");
                Failure::Reported
            })?,
        };
        inputs.push(t);
    }

    let start = Instant::now();
    let outputs = o.engine.execute(&module, &weights, &inputs).map_err(|e| {
        eprintln!("{model_name}: error: {e}");
        Failure::Reported
    })?;
    let elapsed = start.elapsed();

    println!(
        "@{} on {} (seed {}{}): {} output{} in {:.3} s",
        module.name,
        o.engine.name(),
        o.seed,
        if o.weights.is_some() {
            ", weights from file"
        } else {
            ""
        },
        outputs.len(),
        if outputs.len() == 1 { "" } else { "s" },
        elapsed.as_secs_f64()
    );
    for (&v, t) in func.returns.iter().zip(&outputs) {
        print_summary(&func.value_name(v), t);
    }

    if let Some(out) = &o.output {
        let files = output_paths(func, out, single_file)?;
        for (path, t) in files.iter().zip(&outputs) {
            let bytes = npy::write(t).map_err(|e| {
                eprintln!("{}: error: {e}", path.display());
                Failure::Reported
            })?;
            input::write_atomic(path, &bytes)?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// Resolves `NAME=FILE` arguments to one optional file per parameter.
fn parse_input_args(func: &Function, args: &[String]) -> Result<Vec<Option<PathBuf>>, Failure> {
    let mut given: Vec<Option<PathBuf>> = vec![None; func.params.len()];
    let names: Vec<&str> = func
        .params
        .iter()
        .map(|&p| func.values[p].name.as_str())
        .collect();
    for arg in args {
        let Some((name, file)) = arg.split_once('=') else {
            return Err(Failure::Usage(format!(
                "--input `{arg}`: expected NAME=FILE.npy"
            )));
        };
        let bare = name.strip_prefix('%').unwrap_or(name);
        let Some(i) = names.iter().position(|n| *n == bare) else {
            let known: Vec<String> = names.iter().map(|n| format!("%{n}")).collect();
            return Err(Failure::Usage(format!(
                "--input `{arg}`: the model has no input `%{bare}`; its inputs are {}",
                known.join(", ")
            )));
        };
        if given[i].replace(PathBuf::from(file)).is_some() {
            return Err(Failure::Usage(format!(
                "--input: `%{bare}` is given more than once"
            )));
        }
    }
    Ok(given)
}

/// The shape of a `.npy` file, for binding a dynamic model's dims.
fn input_shape(path: &Path) -> Result<Vec<u64>, Failure> {
    let file = path.display();
    let bytes = std::fs::read(path).map_err(|e| {
        eprintln!("{file}: error: cannot read the file: {e}");
        Failure::Reported
    })?;
    let t = npy::read(&bytes).map_err(|e| {
        eprintln!("{file}: error: {e}");
        Failure::Reported
    })?;
    Ok(t.ty.shape)
}

fn read_input(path: &Path, value: &str, ty: &tir_ir::TensorType) -> Result<Tensor, Failure> {
    let file = path.display();
    let bytes = std::fs::read(path).map_err(|e| {
        eprintln!("{file}: error: input `{value}`: cannot read the file: {e}");
        Failure::Reported
    })?;
    // One policy with the compiled executable's reader (see `npy::read_input`).
    npy::read_input(&bytes, ty).map_err(|e| {
        eprintln!("{file}: error: input `{value}`: {e}");
        Failure::Reported
    })
}

/// One path per output: the file itself, or `DIR/NAME.npy` (made unique if a value is
/// returned twice).
fn output_paths(func: &Function, out: &Path, single_file: bool) -> Result<Vec<PathBuf>, Failure> {
    if single_file {
        return Ok(vec![out.to_path_buf()]);
    }
    std::fs::create_dir_all(out).map_err(|e| {
        eprintln!("{}: error: cannot create the directory: {e}", out.display());
        Failure::Reported
    })?;
    let mut paths: Vec<PathBuf> = Vec::with_capacity(func.returns.len());
    for (i, &v) in func.returns.iter().enumerate() {
        let name = &func.values[v].name;
        let mut path = out.join(format!("{name}.npy"));
        if paths.contains(&path) {
            path = out.join(format!("{name}.{i}.npy"));
        }
        paths.push(path);
    }
    Ok(paths)
}

fn print_summary(name: &str, t: &Tensor) {
    let v = t.to_f64();
    let first: Vec<String> = v.iter().take(6).map(|x| format!("{x:.6}")).collect();
    let more = if v.len() > 6 { ", ..." } else { "" };
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let mean = finite.iter().sum::<f64>() / finite.len().max(1) as f64;
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let checksum = weights::fnv1a64(&t.data.to_le_bytes());
    println!("{name}: {}", t.ty);
    println!("  values   [{}{more}]", first.join(", "));
    if finite.is_empty() {
        println!("  no finite values");
    } else {
        println!("  mean {mean:.6e}  min {min:.6e}  max {max:.6e}");
    }
    if finite.len() != v.len() {
        println!("  {} non-finite value(s)", v.len() - finite.len());
    }
    println!("  checksum {checksum:016x} (FNV-1a of the little-endian bytes)");
}
