//! `tirc opt FILE --passes PIPELINE`: run passes and print the resulting IR.
//!
//! A dynamic model whose dims all have `--dim` values runs specialized at them. With dims left
//! free it stays symbolic: `reorder` and `rewrite` judge at the `--dim-max` bounds, else at
//! sample shapes (`tir_passes::dynamic`), so their program serves every shape; `plan` makes
//! the bounded plan at `--dim-max` (proven valid for every smaller shape, `dynamic.rs`) and is
//! refused without it, saying what to give.

use super::{input, Failure};
use std::path::{Path, PathBuf};
use tir_ir::specialize::module_symbols;
use tir_passes::dynamic::{sample_shapes, JudgeShapes};
use tir_passes::pipeline::{parse_pipeline, run_pipeline_at, Pass, PassError};

pub struct Options {
    pub file: PathBuf,
    pub passes: String,
    pub verify_each: bool,
    pub print_after_all: bool,
    pub stats: bool,
    pub output: Option<PathBuf>,
    /// `--dim NAME=N`: a dynamic model's dims.
    pub dims: Vec<String>,
    /// `--dim-max NAME=N`: bounds for the free dims (judging and the bounded plan).
    pub dim_max: Vec<String>,
}

pub fn run(opts: Options) -> Result<(), Failure> {
    let passes = parse_pipeline(&opts.passes).map_err(|e| Failure::Usage(e.to_string()))?;
    let dims = input::parse_dims(&opts.dims)?;
    let name = opts.file.display().to_string();
    let (source, module) = input::load_module(&opts.file)?;
    input::check_dim_names(&module, &dims, "--dim")?;
    let free: Vec<String> = module_symbols(&module)
        .into_iter()
        .filter(|s| !dims.contains_key(s))
        .collect();
    let maxima = input::parse_dims(&opts.dim_max).map_err(|_| {
        Failure::Usage("--dim-max: expected NAME=N (repeatable, each name once)".into())
    })?;
    // With every dim given, the passes run on the static model; else on the symbolic one,
    // judged at the bounds or at sample shapes.
    let verify_only = passes.iter().all(|p| matches!(p, Pass::Verify));
    let (mut module, shapes) = if !module.is_dynamic() {
        if !maxima.is_empty() {
            return Err(Failure::Usage(
                "--dim-max: the model has no symbolic dims".into(),
            ));
        }
        (module, None)
    } else if free.is_empty() && maxima.is_empty() {
        let m = input::specialize(&opts.file, &source, module, &dims, Some("--dim"))?;
        (m, None)
    } else if verify_only && dims.is_empty() && maxima.is_empty() {
        // `verify` works on symbolic types: the model as written.
        (module, None)
    } else if !maxima.is_empty() {
        let (at, note) = super::dynamic::bounded(&opts.file, &dims, &maxima)?;
        eprintln!("{name}: {note}");
        let module = input::pin(&opts.file, &source, module, &dims)?;
        (module, Some(JudgeShapes::Bounds(at)))
    } else {
        if let Some(pass) = passes
            .iter()
            .find(|p| matches!(p, Pass::Plan(_) | Pass::Bufferize))
        {
            let list: Vec<String> = free.iter().map(|s| format!("`{s}`")).collect();
            eprintln!(
                "{name}: error: the pass `{}` needs sizes, and the model's {} {} no value; give {} with --dim NAME=N, or {} with --dim-max NAME=N for one plan valid for every shape up to {} (`tirc compile` plans a dynamic model at run time)",
                pass.name(),
                list.join(", "),
                if free.len() == 1 { "dim has" } else { "dims have" },
                if free.len() == 1 { "it a value" } else { "them values" },
                if free.len() == 1 { "a bound" } else { "bounds" },
                if free.len() == 1 { "it" } else { "them" },
            );
            return Err(Failure::Reported);
        }
        // Dims given values are fixed in the program; the others stay symbolic.
        let module = input::pin(&opts.file, &source, module, &dims)?;
        let samples = sample_shapes(&module, &dims);
        if samples.is_empty() {
            eprintln!(
                "{name}: error: the model's run-time checks accept none of the sample shapes (every dim at {:?}); give its dims values with --dim NAME=N or bounds with --dim-max NAME=N",
                tir_passes::dynamic::SAMPLE_VALUES
            );
            return Err(Failure::Reported);
        }
        (module, Some(JudgeShapes::Samples(samples)))
    };
    let print_after = opts.print_after_all;
    let stats = run_pipeline_at(&mut module, &passes, opts.verify_each, shapes, |pass, m| {
        if print_after {
            eprintln!("// ----- IR after {} -----", pass.name());
            eprint!("{}", tir_ir::print(m));
        }
    })
    .map_err(|e| {
        match e {
            PassError::Failed { .. } => eprintln!("{name}: error: {e}"),
            PassError::Invalid { .. } => eprintln!("{name}: internal error: {e}"),
        }
        Failure::Reported
    })?;
    if opts.stats {
        for s in &stats {
            eprintln!(
                "{:<10} {:>10.3} ms  {}",
                s.pass,
                s.time.as_secs_f64() * 1e3,
                s.report.summary()
            );
        }
    }
    let text = tir_ir::print(&module);
    match &opts.output {
        Some(out) => input::write_atomic(Path::new(out), text.as_bytes()),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}
