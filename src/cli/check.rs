//! `tirc check FILE...`: parse and verify, report every error of every file.

use super::{input, Failure};
use std::path::PathBuf;

pub fn run(files: &[PathBuf]) -> Result<(), Failure> {
    let mut failed = false;
    for path in files {
        match input::load_module(path) {
            Ok((_, module)) => {
                let ops: usize = module.funcs.iter().map(|f| f.layout.len()).sum();
                println!(
                    "{}: ok ({} function(s), {ops} ops)",
                    path.display(),
                    module.funcs.len()
                );
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
