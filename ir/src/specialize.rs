//! Specialization: a dynamic module at given dim values becomes today's static module, so that
//! planning, bufferization, code generation and the interpreter need no change.
//!
//! The dims get their values from [`Bindings`] (the CLI's `--dim NAME=N`, or [`bind_shapes`]
//! from the shapes of actual inputs). The run-time checks that verification recorded are
//! checked first, so that a failure names the dims and their values; then every parameter's
//! type is evaluated, every other type dropped, and the static verifier infers the rest — the
//! same rules, on numbers. The result therefore is exactly what the static text would give.

use crate::diag::{Diagnostic, ToDiagnostic};
use crate::module::{Function, Module};
use crate::op::{Op, ReshapeDim};
use crate::span::Span;
use crate::sym::{CondKind, DimExpr, EvalError};
use crate::types::{SymTensorType, TensorType};
use indexmap::IndexMap;

/// Values of the dims, by name.
pub type Bindings = IndexMap<String, u64>;

/// Why a dynamic module does not specialize at some bindings.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SpecializeError {
    pub message: String,
    pub span: Span,
}

impl ToDiagnostic for SpecializeError {
    fn to_diagnostic(&self) -> Diagnostic {
        Diagnostic::error(self.message.clone(), self.span)
    }
}

/// The dims of a function: every symbol of its parameter types, in order of first appearance.
pub fn symbols(f: &Function) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for &p in &f.params {
        if let Some(t) = f.values[p].sym_type() {
            for d in &t.shape {
                for s in d.symbols() {
                    if !out.contains(&s) {
                        out.push(s);
                    }
                }
            }
        }
    }
    out
}

/// The dims of every function of the module, in order of first appearance.
pub fn module_symbols(m: &Module) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in &m.funcs {
        for s in symbols(f) {
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

/// `name = value` for each symbol of `e`, for messages: `h = 3, w = 4`.
fn values_of(e: &[&DimExpr], b: &Bindings) -> String {
    let mut names: Vec<String> = Vec::new();
    for x in e {
        for s in x.symbols() {
            if !names.contains(&s) {
                names.push(s);
            }
        }
    }
    names
        .iter()
        .filter_map(|n| b.get(n).map(|v| format!("{n} = {v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

fn env(b: &Bindings) -> impl Fn(&str) -> Option<u64> + '_ {
    move |s| b.get(s).copied()
}

/// Evaluates a symbolic type at the bindings.
pub fn eval_type(t: &SymTensorType, b: &Bindings) -> Result<TensorType, EvalError> {
    let e = env(b);
    let shape = t
        .shape
        .iter()
        .map(|d| d.eval_dim(&e))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TensorType::new(shape, t.dtype))
}

/// The static module `m` denotes at the bindings `b`. Static functions are copied unchanged.
/// Every dim of a dynamic function must be bound (extra bindings are ignored: the CLI reports
/// names that no function uses).
pub fn specialize(m: &Module, b: &Bindings) -> Result<Module, Vec<SpecializeError>> {
    let mut out = m.clone();
    let mut errors = Vec::new();
    for f in &mut out.funcs {
        if let Err(e) = specialize_function(f, b) {
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    reverify(&mut out)?;
    Ok(out)
}

fn specialize_function(f: &mut Function, b: &Bindings) -> Result<(), SpecializeError> {
    let Some(dynamic) = f.dynamic.take() else {
        return Ok(());
    };
    let e = env(b);
    let unbound = |s: String, span: Span| SpecializeError {
        message: format!("the dim `{s}` of `@{}` has no value", f.name),
        span,
    };
    let fail = |err: EvalError, span: Span| match err {
        EvalError::Unbound(s) => unbound(s, span),
        other => SpecializeError {
            message: format!("`@{}`: {other}", f.name),
            span,
        },
    };
    // Parameters first: an unbound dim is best reported against the parameter that has it.
    for &p in &f.params {
        let v = &f.values[p];
        if let Some(t) = v.declared_sym.as_ref() {
            eval_type(t, b).map_err(|err| fail(err, v.span))?;
        }
    }
    for c in &dynamic.checks {
        let l = c.cond.lhs.eval(&e).map_err(|err| fail(err, c.span))?;
        let r = c.cond.rhs.eval(&e).map_err(|err| fail(err, c.span))?;
        let holds = match c.cond.kind {
            CondKind::Eq => l == r,
            CondKind::Ge => l >= r,
        };
        if !holds {
            return Err(SpecializeError {
                message: format!(
                    "`{}`: {} (the run-time check {} fails at {}: {l} vs {r})",
                    c.op,
                    c.cond.message,
                    c.cond,
                    values_of(&[&c.cond.lhs, &c.cond.rhs], b)
                ),
                span: c.span,
            });
        }
    }
    // Sizes a `reshape` writes in the dims become their values: the static verifier then
    // reads literals, as in the static text.
    let ops: Vec<_> = f.ops.keys().collect();
    for o in ops {
        let data = &mut f.ops[o];
        if let Op::Reshape { shape } = &mut data.op {
            for d in shape.iter_mut() {
                if let ReshapeDim::Size(x) = d {
                    if !x.is_constant() {
                        let v = x.eval_dim(&e).map_err(|err| fail(err, data.loc.name))?;
                        *x = DimExpr::constant(i128::from(v));
                    }
                }
            }
        }
    }
    let params = f.params.clone();
    let keys: Vec<_> = f.values.keys().collect();
    for v in keys {
        let is_param = params.contains(&v);
        let data = &mut f.values[v];
        if let Some(t) = data.declared_sym.take() {
            if is_param {
                let t = eval_type(&t, b).map_err(|err| fail(err, data.span))?;
                data.declared = Some(t);
            }
        }
        data.sym = None;
        // Re-inferred by the static verifier from the parameters (declared types kept).
        data.ty = if is_param {
            data.declared.clone()
        } else {
            None
        };
    }
    f.result_types = if f.result_type_spans.is_empty() {
        Vec::new()
    } else {
        let span = f.span;
        dynamic
            .result_types
            .iter()
            .map(|t| eval_type(t, b).map_err(|err| fail(err, span)))
            .collect::<Result<_, _>>()?
    };
    Ok(())
}

/// Where a dim got its value from an input: the parameter and the axis.
struct Source {
    param: String,
    axis: usize,
    value: u64,
}

/// Binds the dims of `f` from the shapes of actual inputs (`None`: that input is not given),
/// starting from `given` (pinned values, `--dim`). A dim written alone in a parameter type
/// takes the input's extent; two inputs sharing a dim must agree, and every other dim (a
/// constant or an expression) must match its evaluated value.
pub fn bind_shapes(
    f: &Function,
    shapes: &[Option<Vec<u64>>],
    given: &Bindings,
) -> Result<Bindings, String> {
    let mut b = given.clone();
    let mut sources: IndexMap<String, Source> = IndexMap::new();
    // One entry per parameter, in order (a verified function types every parameter).
    let types = f
        .params
        .iter()
        .map(|&p| {
            let t = f.values[p].sym_type();
            t.map(|t| (f.value_name(p), t))
                .ok_or_else(|| format!("`{}` has no type", f.value_name(p)))
        })
        .collect::<Result<Vec<(String, SymTensorType)>, String>>()?;
    for ((param, t), shape) in types.iter().zip(shapes) {
        let Some(shape) = shape else { continue };
        if shape.len() != t.rank() {
            return Err(format!(
                "input `{param}` has rank {} ({shape:?}), the model wants {t}",
                shape.len()
            ));
        }
        for (axis, (d, &n)) in t.shape.iter().zip(shape).enumerate() {
            let Some(s) = d.as_symbol() else { continue };
            if let Some(src) = sources.get(s) {
                if src.value != n {
                    return Err(format!(
                        "the dim `{s}` is {} in `{}` (dimension {}) but {n} in `{param}` (dimension {axis})",
                        src.value, src.param, src.axis
                    ));
                }
                continue;
            }
            if let Some(&pinned) = given.get(s) {
                if pinned != n {
                    return Err(format!(
                        "the dim `{s}` is pinned to {pinned} (--dim) but `{param}` has {n} in dimension {axis}"
                    ));
                }
            }
            b.insert(s.to_string(), n);
            sources.insert(
                s.to_string(),
                Source {
                    param: param.clone(),
                    axis,
                    value: n,
                },
            );
        }
    }
    // Constants and expressions, now that every dim written alone has its value.
    check_expressions(&types, shapes, &b)?;
    Ok(b)
}

/// Every dim of the given inputs that is not a lone symbol (a constant, an expression) must
/// equal its value at `b` (a dim still without a value is left to `specialize` to name).
fn check_expressions(
    types: &[(String, SymTensorType)],
    shapes: &[Option<Vec<u64>>],
    b: &Bindings,
) -> Result<(), String> {
    let e = env(b);
    for ((param, t), shape) in types.iter().zip(shapes) {
        let Some(shape) = shape else { continue };
        for (axis, (d, &n)) in t.shape.iter().zip(shape).enumerate() {
            if d.as_symbol().is_some() {
                continue;
            }
            match d.eval_dim(&e) {
                Ok(want) if want != n => {
                    let wants = if d.is_constant() {
                        want.to_string()
                    } else {
                        format!("{d} = {want} at {}", values_of(&[d], b))
                    };
                    return Err(format!(
                        "input `{param}` has {n} in dimension {axis}, the model wants {wants}"
                    ));
                }
                Ok(_) | Err(EvalError::Unbound(_)) => {}
                Err(err) => return Err(format!("input `{param}`: {err}")),
            }
        }
    }
    Ok(())
}

/// `m` with the dims `b` names fixed at their values and the others left symbolic: each
/// parameter's written type and each written result type has those dims replaced by their
/// values, and the verifier infers every other type again (a run-time check that is now
/// decided is either gone or an error). A function left with no free dim is specialized
/// ([`specialize`]); a binding no function uses is ignored.
pub fn pin(m: &Module, b: &Bindings) -> Result<Module, Vec<SpecializeError>> {
    let mut out = m.clone();
    let mut errors = Vec::new();
    let value = |s: &str| b.get(s).map(|&n| <DimExpr as crate::sym::Dim>::lit(n));
    for f in &mut out.funcs {
        if f.dynamic.is_none() {
            continue;
        }
        if symbols(f).iter().all(|s| b.contains_key(s)) {
            if let Err(e) = specialize_function(f, b) {
                errors.push(e);
            }
            continue;
        }
        let overflow = |span: Span, name: &str| SpecializeError {
            message: format!("`@{name}`: a dim overflows at the given values"),
            span,
        };
        let subst = |t: &SymTensorType| -> Option<SymTensorType> {
            let shape = t
                .shape
                .iter()
                .map(|d| d.substitute(&value))
                .collect::<Option<Vec<_>>>()?;
            Some(SymTensorType::new(shape, t.dtype))
        };
        let params = f.params.clone();
        let keys: Vec<_> = f.values.keys().collect();
        for v in keys {
            let data = &mut f.values[v];
            if params.contains(&v) {
                if let Some(t) = data.declared_sym.as_ref() {
                    let t = subst(t).ok_or_else(|| overflow(data.span, &f.name));
                    match t {
                        Ok(t) => data.declared_sym = Some(t),
                        Err(e) => errors.push(e),
                    }
                }
            }
            data.sym = None;
            data.ty = if params.contains(&v) {
                data.declared.clone()
            } else {
                None
            };
        }
        let span = f.span;
        let name = f.name.clone();
        if let Some(d) = f.dynamic.as_deref_mut() {
            d.checks.clear();
            if !f.result_type_spans.is_empty() {
                match d.result_types.iter().map(subst).collect::<Option<Vec<_>>>() {
                    Some(ts) => d.result_types = ts,
                    None => errors.push(overflow(span, &name)),
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    reverify(&mut out)?;
    Ok(out)
}

/// Re-derives every type of `out` after its dims were substituted: the verifier's errors, at
/// their spans, are the substitution's (a bound that breaks a shape rule).
fn reverify(out: &mut Module) -> Result<(), Vec<SpecializeError>> {
    crate::verify(out).map_err(|es| {
        es.iter()
            .map(|e| SpecializeError {
                message: e.to_string(),
                span: e.span(),
            })
            .collect()
    })
}
