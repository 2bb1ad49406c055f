//! `.tir` text → parse + verify, as `tirc check` / `fmt` / `plan MODEL.tir` load a model
//! (`src/cli/input.rs`): diagnostics rendered with their caret lines, bufferized functions
//! checked, the entry function's liveness analysed. A module that verifies must print to a
//! canonical form that parses and verifies again and prints the same (`docs/ir.md`,
//! "Canonical form": `print(parse(text))` is a fixed point).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tir_ir::diag::{render, Diagnostic};
use tir_ir::ToDiagnostic;

fn render_all<E: ToDiagnostic>(source: &str, errors: &[E]) {
    let diags: Vec<Diagnostic> = errors.iter().map(ToDiagnostic::to_diagnostic).collect();
    assert!(!diags.is_empty(), "a rejection without a diagnostic");
    let text = render("fuzz.tir", source, &diags);
    assert!(!text.is_empty(), "diagnostics rendered as nothing");
}

fuzz_target!(|data: &[u8]| {
    let (source, mut module) = match tir_ir::parser::parse_bytes(data) {
        Ok(ok) => ok,
        Err((source, errors)) => return render_all(&source, &errors),
    };
    if let Err(errors) = tir_ir::verify(&mut module) {
        return render_all(&source, &errors);
    }
    for f in &module.funcs {
        if let Err(errors) = tir_passes::buffer_check::check_bufferized(f) {
            let diags: Vec<Diagnostic> = errors
                .into_iter()
                .map(|e| Diagnostic::error(format!("@{}: {e}", f.name), f.span))
                .collect();
            render("fuzz.tir", &source, &diags);
            return;
        }
    }
    if let Some(func) = module.entry() {
        // `tirc plan MODEL.tir` starts here; an error is an answer, a panic is not.
        let _ = tir_passes::liveness::analyze(func);
    }

    let printed = tir_ir::print(&module);
    let mut again = match tir_ir::parse(&printed) {
        Ok(m) => m,
        Err(e) => panic!("the canonical form does not parse: {e:?}\n{printed}"),
    };
    if let Err(e) = tir_ir::verify(&mut again) {
        panic!("the canonical form does not verify: {e:?}\n{printed}");
    }
    let reprinted = tir_ir::print(&again);
    assert_eq!(printed, reprinted, "print(parse(print(m))) != print(m)");
});
