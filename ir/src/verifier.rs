//! The verifier: checks a module's invariants and infers every value's type, reporting *all*
//! errors (Cranelift's habit), each under the offending text.

use crate::diag::{Diagnostic, ToDiagnostic};
use crate::entity::{EntityRef, OpId, Value};
use crate::module::{Function, Module, RuntimeCheck};
use crate::shape;
use crate::span::Span;
use crate::types::{SymTensorType, TensorType};

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum VerifyError {
    #[error("function `@{func}` has no `return`")]
    MissingReturn { func: String, span: Span },
    #[error("`{value}` is used before its definition")]
    UseBeforeDef {
        value: String,
        span: Span,
        def: Span,
    },
    #[error("`{op}` takes {expected}, got {found}")]
    Arity {
        op: &'static str,
        expected: String,
        found: usize,
        span: Span,
    },
    #[error("`{op}`: {message}")]
    Shape {
        op: &'static str,
        message: String,
        span: Span,
    },
    #[error("`{value}` is declared as {declared} but `{op}` produces {inferred}")]
    TypeMismatch {
        value: String,
        op: &'static str,
        /// The types as printed (static or symbolic).
        declared: String,
        inferred: String,
        span: Span,
    },
    #[error("`{op}` `{value}` needs a result type")]
    ConstWithoutType {
        op: &'static str,
        value: String,
        span: Span,
    },
    #[error("{message}")]
    Buffer { message: String, span: Span },
    #[error("`@{func}` returns {found} value(s) but declares {expected} result(s)")]
    ReturnCount {
        func: String,
        expected: usize,
        found: usize,
        span: Span,
    },
    #[error("`@{func}` result {index} is declared as {declared} but `{value}` is {actual}")]
    ReturnType {
        func: String,
        index: usize,
        value: String,
        declared: String,
        actual: String,
        span: Span,
    },
    #[error("{what} of `{value}` ({ty}) overflows 64 bits")]
    SizeOverflow {
        what: &'static str,
        value: String,
        ty: TensorType,
        span: Span,
    },
    #[error("{op} appears {count} times in the execution order of `@{func}`")]
    Layout {
        func: String,
        op: OpId,
        count: usize,
    },
    #[error("value name `%{name}` is defined more than once in `@{func}`")]
    DuplicateName {
        func: String,
        name: String,
        span: Span,
    },
    #[error("`%{name}` is not a valid value name (letters, digits, `_`, `.`, `$`)")]
    BadName { name: String, span: Span },
    #[error("`{op}` defines {found} result(s) but produces {expected}")]
    ResultCount {
        op: &'static str,
        expected: usize,
        found: usize,
        span: Span,
    },
}

impl VerifyError {
    pub fn span(&self) -> Span {
        use VerifyError::*;
        match self {
            MissingReturn { span, .. }
            | UseBeforeDef { span, .. }
            | Arity { span, .. }
            | Shape { span, .. }
            | TypeMismatch { span, .. }
            | ConstWithoutType { span, .. }
            | Buffer { span, .. }
            | ReturnCount { span, .. }
            | ReturnType { span, .. }
            | SizeOverflow { span, .. }
            | ResultCount { span, .. }
            | DuplicateName { span, .. }
            | BadName { span, .. } => *span,
            Layout { .. } => Span::NONE,
        }
    }
}

impl ToDiagnostic for VerifyError {
    fn to_diagnostic(&self) -> Diagnostic {
        let d = Diagnostic::error(self.to_string(), self.span());
        match self {
            VerifyError::UseBeforeDef { .. } => {
                d.with_note("in SSA form a value must be defined above every use (a cycle through names is never valid)")
            }
            VerifyError::ConstWithoutType { .. } => d.with_note("write it as `%w = const {name = \"...\"} : tensor<...>`"),
            _ => d,
        }
    }
}

/// Verifies every function and fills in every value's inferred type. On error the module may
/// be partially typed.
pub fn verify(module: &mut Module) -> Result<(), Vec<VerifyError>> {
    let mut errors = Vec::new();
    for f in &mut module.funcs {
        verify_function(f, &mut errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn verify_function(f: &mut Function, errors: &mut Vec<VerifyError>) {
    if !f.has_return {
        errors.push(VerifyError::MissingReturn {
            func: f.name.clone(),
            span: f.return_span,
        });
    }
    // Names: unique and spellable, so that the printed text parses back (modules built in
    // code are not checked by the parser).
    let mut seen = std::collections::HashSet::new();
    for v in f.values.values() {
        let valid = !v.name.is_empty()
            && v.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.$".contains(c));
        if !valid {
            errors.push(VerifyError::BadName {
                name: v.name.clone(),
                span: v.span,
            });
        } else if !seen.insert(v.name.as_str()) {
            errors.push(VerifyError::DuplicateName {
                func: f.name.clone(),
                name: v.name.clone(),
                span: v.span,
            });
        }
    }
    // Every op exactly once in the layout.
    let mut count = vec![0usize; f.ops.len()];
    for &id in &f.layout {
        if let Some(c) = count.get_mut(id.index()) {
            *c += 1;
        }
    }
    for (op, c) in f.ops.keys().zip(&count) {
        if *c != 1 {
            errors.push(VerifyError::Layout {
                func: f.name.clone(),
                op,
                count: *c,
            });
        }
    }

    // Position in the layout where each value becomes available (params: before everything).
    let mut defined_at: Vec<Option<usize>> = vec![None; f.values.len()];
    for &p in &f.params {
        defined_at[p.index()] = Some(0);
    }
    for (pos, &id) in f.layout.iter().enumerate() {
        for &r in &f.ops[id].results {
            defined_at[r.index()].get_or_insert(pos + 1);
        }
    }

    if f.is_dynamic() {
        verify_dynamic(f, &defined_at, errors);
        return;
    }
    for v in f.params.clone() {
        check_size(f, v, errors);
    }
    let layout = f.layout.clone();
    for (pos, &id) in layout.iter().enumerate() {
        verify_op(f, id, pos + 1, &defined_at, errors);
    }

    check_returns_defined(f, &defined_at, errors);
    if f.has_return && f.result_type_spans.len() + f.result_types.len() > 0 {
        if f.result_types.len() != f.returns.len() {
            errors.push(VerifyError::ReturnCount {
                func: f.name.clone(),
                expected: f.result_types.len(),
                found: f.returns.len(),
                span: f.return_span,
            });
        } else {
            for (i, (&v, declared)) in f.returns.iter().zip(&f.result_types).enumerate() {
                if let Some(actual) = f.values[v].ty.as_ref() {
                    if actual != declared {
                        errors.push(VerifyError::ReturnType {
                            func: f.name.clone(),
                            index: i,
                            value: f.value_name(v),
                            declared: declared.to_string(),
                            actual: actual.to_string(),
                            span: f
                                .return_operand_spans
                                .get(i)
                                .copied()
                                .unwrap_or(f.return_span),
                        });
                    }
                }
            }
        }
    } else if f.result_types.is_empty() {
        // No `->` written: the results are whatever is returned.
        let tys: Option<Vec<TensorType>> =
            f.returns.iter().map(|&v| f.values[v].ty.clone()).collect();
        if let Some(tys) = tys {
            f.result_types = tys;
        }
    }
}

fn check_returns_defined(
    f: &Function,
    defined_at: &[Option<usize>],
    errors: &mut Vec<VerifyError>,
) {
    for (i, &v) in f.returns.iter().enumerate() {
        if defined_at[v.index()].is_none() {
            let span = f
                .return_operand_spans
                .get(i)
                .copied()
                .unwrap_or(f.return_span);
            errors.push(VerifyError::UseBeforeDef {
                value: f.value_name(v),
                span,
                def: f.values[v].span,
            });
        }
    }
}

/// A dynamic function: types are inferred symbolically ([`shape::infer_sym`]), and what the
/// rules could not decide is recorded in `f.dynamic.checks` for `specialize` to check.
fn verify_dynamic(f: &mut Function, defined_at: &[Option<usize>], errors: &mut Vec<VerifyError>) {
    for p in f.params.clone() {
        f.values[p].sym = f.values[p].sym_type();
    }
    let mut checks = Vec::new();
    let layout = f.layout.clone();
    for (pos, &id) in layout.iter().enumerate() {
        if operands_ok(f, id, pos + 1, defined_at, errors) {
            verify_op_dynamic(f, id, &mut checks, errors);
        }
    }
    check_returns_defined(f, defined_at, errors);
    let actual: Option<Vec<SymTensorType>> =
        f.returns.iter().map(|&v| f.values[v].sym.clone()).collect();
    let Some(dynamic) = f.dynamic.as_deref() else {
        return;
    };
    let declared = dynamic.result_types.clone();
    if f.has_return && !f.result_type_spans.is_empty() {
        if declared.len() != f.returns.len() {
            errors.push(VerifyError::ReturnCount {
                func: f.name.clone(),
                expected: declared.len(),
                found: f.returns.len(),
                span: f.return_span,
            });
        } else {
            for (i, (&v, d)) in f.returns.iter().zip(&declared).enumerate() {
                if let Some(a) = f.values[v].sym.as_ref().filter(|a| *a != d) {
                    errors.push(VerifyError::ReturnType {
                        func: f.name.clone(),
                        index: i,
                        value: f.value_name(v),
                        declared: d.to_string(),
                        actual: a.to_string(),
                        span: f
                            .return_operand_spans
                            .get(i)
                            .copied()
                            .unwrap_or(f.return_span),
                    });
                }
            }
        }
    }
    if let Some(d) = f.dynamic.as_deref_mut() {
        if f.result_type_spans.is_empty() {
            if let Some(a) = actual {
                d.result_types = a;
            }
        }
        d.checks = checks;
    }
}

fn verify_op_dynamic(
    f: &mut Function,
    id: OpId,
    checks: &mut Vec<RuntimeCheck>,
    errors: &mut Vec<VerifyError>,
) {
    use crate::op::Op;
    let data = &f.ops[id];
    let name = data.op.name();
    if !data.outs.is_empty() || matches!(data.op, Op::AllocTensor { .. } | Op::AllocSlab { .. }) {
        errors.push(VerifyError::Buffer {
            message: format!("`{name}`: buffers need static shapes; a dynamic function is specialized (its dims given values) before it is planned"),
            span: data.loc.stmt,
        });
        return;
    }
    if let Op::Reshape { shape } = &data.op {
        // A size written in dims can name only the function's own: nothing else gives them
        // values when the function is specialized or run.
        let dims = crate::specialize::symbols(f);
        let named = shape.iter().filter_map(|d| match d {
            crate::op::ReshapeDim::Size(e) => Some(e.symbols()),
            crate::op::ReshapeDim::Infer => None,
        });
        if let Some(s) = named.flatten().find(|s| !dims.contains(s)) {
            errors.push(VerifyError::Shape {
                op: name,
                message: format!(
                    "the target {} names `{s}`, which is not a dim of `@{}` (its dims: {})",
                    crate::op::reshape_text(shape),
                    f.name,
                    dims.join(", ")
                ),
                span: data.loc.name,
            });
            return;
        }
    }
    let inferred = if data.op.props().declared_type {
        let r = data.results[0];
        match f.values[r].sym_type() {
            Some(t) => vec![t],
            None => {
                errors.push(VerifyError::ConstWithoutType {
                    op: name,
                    value: f.value_name(r),
                    span: data.loc.stmt,
                });
                return;
            }
        }
    } else {
        let ins: Option<Vec<SymTensorType>> = data
            .operands
            .iter()
            .map(|&v| f.values[v].sym.clone())
            .collect();
        // An operand whose own op failed has no type; its error is already reported.
        let Some(ins) = ins else { return };
        let refs: Vec<&SymTensorType> = ins.iter().collect();
        let mut cx = shape::Checks::new();
        match shape::infer_sym(&data.op, &refs, &mut cx) {
            Ok(t) => {
                checks.extend(cx.conds.into_iter().map(|cond| RuntimeCheck {
                    cond,
                    op: name,
                    span: data.loc.name,
                }));
                t
            }
            Err(e) => {
                let span = e
                    .operand
                    .and_then(|i| data.loc.operands.get(i).copied())
                    .unwrap_or(data.loc.name);
                errors.push(VerifyError::Shape {
                    op: name,
                    message: e.message,
                    span,
                });
                return;
            }
        }
    };
    let data = &f.ops[id];
    let results = data.results.clone();
    let type_spans = data.loc.types.clone();
    let stmt = data.loc.stmt;
    for (i, (r, t)) in results.into_iter().zip(inferred).enumerate() {
        let v = &f.values[r];
        let declared = v
            .declared_sym
            .clone()
            .or_else(|| v.declared.as_ref().map(TensorType::to_sym));
        if let Some(d) = declared.filter(|d| *d != t) {
            errors.push(VerifyError::TypeMismatch {
                value: f.value_name(r),
                op: name,
                declared: d.to_string(),
                inferred: t.to_string(),
                span: type_spans.get(i).copied().unwrap_or(stmt),
            });
        }
        f.values[r].ty = t.to_static();
        f.values[r].sym = Some(t);
    }
}

/// Operands, results and `outs` defined before use, in the numbers the op takes.
fn operands_ok(
    f: &Function,
    id: OpId,
    pos: usize,
    defined_at: &[Option<usize>],
    errors: &mut Vec<VerifyError>,
) -> bool {
    let data = &f.ops[id];
    let name = data.op.name();
    let mut ok = true;
    for (i, &v) in data.operands.iter().enumerate() {
        let before = matches!(defined_at[v.index()], Some(d) if d < pos);
        if !before {
            let span = data.loc.operands.get(i).copied().unwrap_or(data.loc.stmt);
            errors.push(VerifyError::UseBeforeDef {
                value: f.value_name(v),
                span,
                def: f.values[v].span,
            });
            ok = false;
        }
    }
    if !data.op.arity().accepts(data.operands.len()) {
        errors.push(VerifyError::Arity {
            op: name,
            expected: data.op.arity().to_string(),
            found: data.operands.len(),
            span: data.loc.name,
        });
        return false;
    }
    if data.results.len() != data.op.num_results() {
        errors.push(VerifyError::ResultCount {
            op: name,
            expected: data.op.num_results(),
            found: data.results.len(),
            span: data.loc.stmt,
        });
        return false;
    }
    for (i, &v) in data.outs.iter().enumerate() {
        if !matches!(defined_at[v.index()], Some(d) if d < pos) {
            let span = data.loc.outs.get(i).copied().unwrap_or(data.loc.stmt);
            errors.push(VerifyError::UseBeforeDef {
                value: f.value_name(v),
                span,
                def: f.values[v].span,
            });
            ok = false;
        }
    }
    ok
}

fn verify_op(
    f: &mut Function,
    id: OpId,
    pos: usize,
    defined_at: &[Option<usize>],
    errors: &mut Vec<VerifyError>,
) {
    if !operands_ok(f, id, pos, defined_at, errors) {
        return;
    }
    let name = f.ops[id].op.name();
    verify_buffers(f, id, errors);
    let data = &f.ops[id];
    let inferred = if data.op.props().declared_type {
        let r = data.results[0];
        match f.values[r].declared.clone() {
            Some(t) => vec![t],
            None => {
                errors.push(VerifyError::ConstWithoutType {
                    op: name,
                    value: f.value_name(r),
                    span: data.loc.stmt,
                });
                return;
            }
        }
    } else {
        let ins: Option<Vec<&TensorType>> = data
            .operands
            .iter()
            .map(|&v| f.values[v].ty.as_ref())
            .collect();
        // An operand whose own op failed has no type; its error is already reported.
        let Some(ins) = ins else { return };
        match shape::infer(&data.op, &ins) {
            Ok(t) => t,
            Err(e) => {
                let span = e
                    .operand
                    .and_then(|i| data.loc.operands.get(i).copied())
                    .unwrap_or(data.loc.name);
                errors.push(VerifyError::Shape {
                    op: name,
                    message: e.message,
                    span,
                });
                return;
            }
        }
    };
    let results = data.results.clone();
    let type_spans = data.loc.types.clone();
    let stmt = data.loc.stmt;
    for (i, (r, t)) in results.into_iter().zip(inferred).enumerate() {
        if let Some(d) = &f.values[r].declared {
            if *d != t {
                errors.push(VerifyError::TypeMismatch {
                    value: f.value_name(r),
                    op: name,
                    declared: d.to_string(),
                    inferred: t.to_string(),
                    span: type_spans.get(i).copied().unwrap_or(stmt),
                });
            }
        }
        f.values[r].ty = Some(t);
        check_size(f, r, errors);
    }
    // A destination buffer has exactly its result's type.
    let data = &f.ops[id];
    for (i, (&out, &r)) in data.outs.iter().zip(&data.results).enumerate() {
        let (Some(bt), Some(rt)) = (f.values[out].ty.as_ref(), f.values[r].ty.as_ref()) else {
            continue;
        };
        if bt != rt {
            errors.push(VerifyError::Buffer {
                message: format!(
                    "`{}` is {bt} but `{}` is {rt}",
                    f.value_name(out),
                    f.value_name(r)
                ),
                span: data.loc.outs.get(i).copied().unwrap_or(data.loc.stmt),
            });
        }
    }
}

/// Bufferized form: an `alloc_tensor` lies inside its parent and a root buffer is aligned to its
/// slab; `outs` name one `alloc_tensor` of the right type per result. (Whether live buffers
/// overlap is the planner's checker's job, run on the IR by the passes crate.)
fn verify_buffers(f: &Function, id: OpId, errors: &mut Vec<VerifyError>) {
    use crate::op::Op;
    let data = &f.ops[id];
    let producer_op = |v: Value| f.producer(v).map(|p| &f.ops[p].op);
    if let Op::AllocTensor { offset } = data.op {
        let parent = data.operands[0];
        let Some(ty) = f.values[data.results[0]].declared.as_ref() else {
            return;
        };
        let span = data.loc.stmt;
        let size = ty.byte_size().unwrap_or(u64::MAX);
        let parent_size = f.ty(parent).and_then(TensorType::byte_size).unwrap_or(0);
        match producer_op(parent) {
            Some(Op::AllocSlab { align, .. }) if offset % align != 0 => {
                errors.push(VerifyError::Buffer {
                    message: format!(
                        "offset {offset} of `{}` is not a multiple of the slab's alignment {align}",
                        f.value_name(data.results[0])
                    ),
                    span,
                })
            }
            Some(Op::AllocSlab { .. }) | Some(Op::AllocTensor { .. }) => {}
            _ => {
                errors.push(VerifyError::Buffer {
                    message: format!("`alloc_tensor` must allocate inside an `alloc_slab` or another `alloc_tensor`, not `{}`", f.value_name(parent)),
                    span: data.loc.operands.first().copied().unwrap_or(span),
                });
                return;
            }
        }
        if offset.checked_add(size).is_none_or(|end| end > parent_size) {
            errors.push(VerifyError::Buffer {
                message: format!(
                    "`{}` ({size} bytes at offset {offset}) does not fit in `{}` ({parent_size} bytes)",
                    f.value_name(data.results[0]),
                    f.value_name(parent)
                ),
                span,
            });
        }
        return;
    }
    if data.outs.is_empty() {
        return;
    }
    if !data.op.is_operator() || data.outs.len() != data.results.len() {
        errors.push(VerifyError::Buffer {
            message: format!(
                "`{}` has {} result(s) but {} `outs`",
                data.op.name(),
                data.results.len(),
                data.outs.len()
            ),
            span: data.loc.stmt,
        });
        return;
    }
    for (i, &out) in data.outs.iter().enumerate() {
        let span = data.loc.outs.get(i).copied().unwrap_or(data.loc.stmt);
        if !matches!(producer_op(out), Some(Op::AllocTensor { .. })) {
            errors.push(VerifyError::Buffer {
                message: format!(
                    "`outs` must name `alloc_tensor` results; `{}` is not one",
                    f.value_name(out)
                ),
                span,
            });
            continue;
        }
    }
}

fn check_size(f: &Function, v: Value, errors: &mut Vec<VerifyError>) {
    let Some(t) = f.values[v].ty.as_ref() else {
        return;
    };
    if t.byte_size().is_none() {
        errors.push(VerifyError::SizeOverflow {
            what: "the byte size",
            value: f.value_name(v),
            ty: t.clone(),
            span: f.values[v].span,
        });
    }
}
