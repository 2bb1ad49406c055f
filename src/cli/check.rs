//! `tirc check FILE...`: parse and verify, report every error of every file. For a dynamic
//! model it also names the dims and lists the run-time checks that verification recorded.

use super::{input, Failure};
use std::path::PathBuf;

pub fn run(files: &[PathBuf]) -> Result<(), Failure> {
    let mut failed = false;
    for path in files {
        match input::load_module(path) {
            Ok((source, module)) => {
                let ops: usize = module.funcs.iter().map(|f| f.layout.len()).sum();
                println!(
                    "{}: ok ({} function(s), {ops} ops)",
                    path.display(),
                    module.funcs.len()
                );
                if module.is_dynamic() {
                    print_dynamic(path, &source, &module);
                }
            }
            Err(_) => failed = true,
        }
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

fn print_dynamic(path: &std::path::Path, source: &str, module: &tir_ir::Module) {
    let dims = tir_ir::specialize::module_symbols(module);
    println!("  dynamic: dims {}", dims.join(", "));
    for f in &module.funcs {
        let Some(d) = f.dynamic.as_deref() else {
            continue;
        };
        let tys: Vec<String> = d.result_types.iter().map(ToString::to_string).collect();
        println!("  @{} returns {}", f.name, tys.join(", "));
        if d.checks.is_empty() {
            println!("  @{}: no run-time checks", f.name);
        }
        for c in &d.checks {
            let (line, col) = tir_ir::diag::line_col(source, c.span.start);
            println!(
                "  {}:{line}:{col}: run-time check `{}`: {} ({})",
                path.display(),
                c.op,
                c.cond,
                c.cond.message
            );
        }
    }
}
