//! `tirc opt FILE --passes PIPELINE`: run passes and print the resulting IR.

use super::{input, Failure};
use std::path::{Path, PathBuf};
use tir_ir::specialize::module_symbols;
use tir_passes::pipeline::{parse_pipeline, run_pipeline, Pass, PassError};

pub struct Options {
    pub file: PathBuf,
    pub passes: String,
    pub verify_each: bool,
    pub print_after_all: bool,
    pub stats: bool,
    pub output: Option<PathBuf>,
    /// `--dim NAME=N`: a dynamic model's dims.
    pub dims: Vec<String>,
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
    // `verify` works on symbolic types, so a pipeline of it alone runs on the dynamic model
    // as written; the other passes judge or place sizes in bytes, so they need every dim.
    let mut module = match passes.iter().find(|p| !matches!(p, Pass::Verify)) {
        Some(pass) if !free.is_empty() => {
            let list: Vec<String> = free.iter().map(|s| format!("`{s}`")).collect();
            eprintln!(
                "{name}: error: the pass `{}` needs every dim's value, and the model's {} {} none; give {} with --dim NAME=N (`tirc compile` plans a dynamic model at run time)",
                pass.name(),
                list.join(", "),
                if free.len() == 1 { "has" } else { "have" },
                if free.len() == 1 { "it a value" } else { "them values" },
            );
            return Err(Failure::Reported);
        }
        None if !free.is_empty() && dims.is_empty() => module,
        _ => input::specialize(&opts.file, &source, module, &dims, Some("--dim"))?,
    };
    let print_after = opts.print_after_all;
    let stats = run_pipeline(&mut module, &passes, opts.verify_each, |pass, m| {
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
