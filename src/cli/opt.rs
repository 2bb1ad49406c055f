//! `tirc opt FILE --passes PIPELINE`: run passes and print the resulting IR.

use super::{input, Failure};
use std::path::{Path, PathBuf};
use tir_passes::pipeline::{parse_pipeline, run_pipeline, PassError};

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
    let (_, mut module) = input::load_static(&opts.file, &dims, Some("--dim"))?;
    let name = opts.file.display().to_string();
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
