//! The canonical text form. `print(parse(text))` is a fixed point: attributes in declared
//! order with defaults omitted, every known type written, two-space indentation.

use crate::entity::OpId;
use crate::module::{Function, Module};
use std::fmt::Write;

/// Optional trailing comments after ops, for annotated snapshots of analyses (MLIR's
/// `test-analysis-only` habit): given a function and an op, the comment text.
pub type Annotator<'a> = &'a dyn Fn(&Function, OpId) -> Option<String>;

/// Prints a module in canonical form.
pub fn print(module: &Module) -> String {
    print_annotated(module, None)
}

/// Prints a module, adding `// ...` after every op for which `annotate` returns a comment.
pub fn print_annotated(module: &Module, annotate: Option<Annotator<'_>>) -> String {
    let mut out = String::new();
    for line in &module.doc {
        if line.is_empty() {
            out.push_str("//\n");
        } else {
            let _ = writeln!(out, "// {line}");
        }
    }
    let _ = writeln!(out, "module @{} {{", module.name);
    for (i, f) in module.funcs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        print_function(&mut out, f, annotate);
    }
    out.push_str("}\n");
    out
}

fn print_function(out: &mut String, f: &Function, annotate: Option<Annotator<'_>>) {
    let _ = write!(out, "  func @{}(", f.name);
    for (i, &p) in f.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}", f.value_name(p));
        if let Some(t) = f.values[p].type_text() {
            let _ = write!(out, ": {t}");
        }
    }
    out.push(')');
    let result_types: Vec<String> = match f.dynamic.as_deref() {
        Some(d) => d.result_types.iter().map(ToString::to_string).collect(),
        None => f.result_types.iter().map(ToString::to_string).collect(),
    };
    match result_types.as_slice() {
        [] => {}
        [one] => {
            let _ = write!(out, " -> {one}");
        }
        many => {
            let _ = write!(out, " -> ({})", many.join(", "));
        }
    }
    out.push_str(" {\n");
    for &id in &f.layout {
        let data = &f.ops[id];
        out.push_str("    ");
        let results: Vec<String> = data.results.iter().map(|&r| f.value_name(r)).collect();
        let _ = write!(out, "{} = {}", results.join(", "), data.op.name());
        if !data.operands.is_empty() {
            let ops: Vec<String> = data.operands.iter().map(|&v| f.value_name(v)).collect();
            let _ = write!(out, "({})", ops.join(", "));
        }
        if !data.outs.is_empty() {
            let outs: Vec<String> = data.outs.iter().map(|&v| f.value_name(v)).collect();
            let _ = write!(out, " outs({})", outs.join(", "));
        }
        let attrs = data.op.attrs();
        if !attrs.is_empty() {
            let items: Vec<String> = attrs.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            let _ = write!(out, " {{{}}}", items.join(", "));
        }
        let tys: Option<Vec<String>> = data
            .results
            .iter()
            .map(|&r| f.values[r].type_text())
            .collect();
        if let Some(tys) = tys {
            let _ = write!(out, " : {}", tys.join(", "));
        }
        if let Some(note) = annotate.and_then(|a| a(f, id)) {
            let _ = write!(out, "  // {note}");
        }
        out.push('\n');
    }
    out.push_str("    return");
    let rets: Vec<String> = f.returns.iter().map(|&v| f.value_name(v)).collect();
    if !rets.is_empty() {
        let _ = write!(out, " {}", rets.join(", "));
    }
    out.push_str("\n  }\n");
}
