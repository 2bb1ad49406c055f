//! `tirc zoo [--out DIR] [--list] [NAME...]`: writes the model zoo's `.tir` files.

use super::{input, Failure};
use std::path::Path;

pub fn run(out: &Path, names: &[String], list: bool) -> Result<(), Failure> {
    let all = tir_zoo::models();
    if list {
        for m in &all {
            println!("{:<16}{}", m.name, m.architecture);
        }
        return Ok(());
    }
    let selected = if names.is_empty() {
        all
    } else {
        let mut specs = Vec::with_capacity(names.len());
        for name in names {
            match tir_zoo::find(name) {
                Ok(spec) => specs.push(spec),
                Err(e) => return Err(Failure::Usage(e.to_string())),
            }
        }
        specs
    };
    if let Err(e) = std::fs::create_dir_all(out) {
        eprintln!("{}: error: cannot create the directory: {e}", out.display());
        return Err(Failure::Reported);
    }
    let mut failed = false;
    for spec in &selected {
        let text = match tir_zoo::generate_spec(spec) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
                continue;
            }
        };
        let path = out.join(spec.file);
        if input::write_atomic(&path, text.as_bytes()).is_err() {
            failed = true;
            continue;
        }
        println!("wrote {}", path.display());
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}
