//! `tirc zoo [--out DIR] [--list] [--size N|test] [NAME...]`: writes the model zoo's `.tir`
//! files, at the published input sizes (what `examples/` holds) or another one.

use super::{input, Failure};
use std::path::Path;

/// `--size`: a number (the image side, or BERT's sequence length) or `test`, each model's
/// smallest meaningful size ([`tir_zoo::ModelSpec::test_size`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Published,
    Test,
    Exactly(u64),
}

/// clap's parser for `--size`.
pub fn parse_size(s: &str) -> Result<Size, String> {
    match s {
        "published" => Ok(Size::Published),
        "test" => Ok(Size::Test),
        n => n
            .parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .map(Size::Exactly)
            .ok_or_else(|| {
                format!("expected a positive integer, `test` or `published`, got `{s}`")
            }),
    }
}

pub fn run(out: &Path, names: &[String], list: bool, size: Size) -> Result<(), Failure> {
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
        let at = match size {
            Size::Published => spec.size,
            Size::Test => spec.test_size,
            Size::Exactly(n) => n,
        };
        let text = match tir_zoo::generate_spec_at(spec, at) {
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
