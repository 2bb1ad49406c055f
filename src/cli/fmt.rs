//! `tirc fmt FILE [--in-place | --check]`: the canonical form.

use super::{input, Failure};
use std::path::Path;

pub fn run(path: &Path, in_place: bool, check: bool) -> Result<(), Failure> {
    let (source, module) = input::load_module(path)?;
    let text = tir_ir::print(&module);
    if check {
        if text != source {
            eprintln!(
                "{}: not in canonical form (run `tirc fmt --in-place`)",
                path.display()
            );
            return Err(Failure::Reported);
        }
        return Ok(());
    }
    if in_place {
        if text != source {
            input::write_atomic(path, text.as_bytes())?;
        }
        return Ok(());
    }
    print!("{text}");
    Ok(())
}
