//! From pest pairs to a [`Module`]: names resolved, attributes read into typed ops.
//!
//! Every statement is lowered even after an error, so that one run reports every undefined
//! name, bad attribute and unknown op in the file.

use super::{ParseError, Rule};
use crate::attr::{closest, Attr, AttrValue};
use crate::entity::Value;
use crate::module::{Dynamic, Function, Module, OpData, OpLoc, ValueData, ValueDef};
use crate::op::{Op, OP_NAMES};
use crate::span::Span;
use crate::sym::{derived_name, DimExpr};
use crate::types::{DType, SymTensorType, TensorType};
use indexmap::IndexMap;
use pest::iterators::{Pair, Pairs};
use std::collections::HashSet;

type P<'i> = Pair<'i, Rule>;

pub(crate) fn lower(source: &str, mut pairs: Pairs<'_, Rule>) -> Result<Module, Vec<ParseError>> {
    let mut errors = Vec::new();
    let file = pairs.next().expect("grammar: file");
    let module_pair = file.into_inner().next().expect("grammar: module");
    let module_span = Span::from_pest(module_pair.as_span());
    let mut inner = module_pair.into_inner();
    let name = inner.next().expect("grammar: module symbol").as_str()[1..].to_string();
    let mut module = Module::new(name);
    module.span = module_span;
    module.doc = leading_comments(&source[..module_span.start]);
    let mut seen: IndexMap<String, Span> = IndexMap::new();
    for f in inner {
        let func = lower_func(f, &mut errors);
        if seen.contains_key(&func.name) {
            errors.push(ParseError::DuplicateFunc {
                name: func.name.clone(),
                span: func.span,
            });
        } else {
            seen.insert(func.name.clone(), func.span);
        }
        module.funcs.push(func);
    }
    if errors.is_empty() {
        Ok(module)
    } else {
        // Names are resolved after each function is read; report in source order regardless.
        errors.sort_by_key(|e| e.span().start);
        Err(errors)
    }
}

/// The `//` lines before `module`, kept so that `fmt` preserves a file's header.
fn leading_comments(prefix: &str) -> Vec<String> {
    prefix
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("//"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end().to_string())
        .collect()
}

/// An operand reference waiting for all definitions to be known.
struct PendingOp {
    op: Op,
    operands: Vec<(String, Span)>,
    outs: Vec<(String, Span)>,
    results: Vec<(String, Span, Option<Written>)>,
    loc: OpLoc,
}

/// A type as written: static, or with symbolic dims (which makes the function dynamic).
#[derive(Clone)]
enum Written {
    Static(TensorType),
    Sym(SymTensorType),
}

impl Written {
    /// `(declared, declared_sym)` of a value.
    fn split(t: Option<Written>) -> (Option<TensorType>, Option<SymTensorType>) {
        match t {
            None => (None, None),
            Some(Written::Static(t)) => (Some(t), None),
            Some(Written::Sym(t)) => (None, Some(t)),
        }
    }

    fn to_sym(&self) -> SymTensorType {
        match self {
            Written::Static(t) => t.to_sym(),
            Written::Sym(t) => t.clone(),
        }
    }
}

fn lower_func(pair: P<'_>, errors: &mut Vec<ParseError>) -> Function {
    let span = Span::from_pest(pair.as_span());
    let mut inner = pair.into_inner();
    let name = inner.next().expect("grammar: func symbol").as_str()[1..].to_string();
    let mut func = Function::new(name.clone());
    func.span = span;
    func.has_return = false;

    let mut names: IndexMap<String, (Value, Span)> = IndexMap::new();
    // Names whose defining statement failed to lower: uses of them are not reported again.
    let mut broken: HashSet<String> = HashSet::new();
    let mut pending: Vec<PendingOp> = Vec::new();
    let mut returns: Vec<(String, Span)> = Vec::new();
    let mut written_results: Vec<Written> = Vec::new();

    for p in inner {
        match p.as_rule() {
            Rule::params => {
                for param in p.into_inner() {
                    let mut it = param.into_inner();
                    let vn = it.next().expect("grammar: param name");
                    let vname = vn.as_str()[1..].to_string();
                    let written = lower_type(
                        it.next().expect("grammar: param type"),
                        errors,
                        Some(vname.as_str()),
                    );
                    let (ty, declared_sym) = Written::split(written);
                    let vspan = Span::from_pest(vn.as_span());
                    let idx = func.params.len();
                    let v = func.values.push(ValueData {
                        name: vname.clone(),
                        def: ValueDef::Param(idx),
                        declared: ty.clone(),
                        ty,
                        declared_sym,
                        sym: None,
                        span: vspan,
                    });
                    func.params.push(v);
                    define(&mut names, errors, vname, v, vspan);
                }
            }
            Rule::func_results => {
                for t in p.into_inner() {
                    func.result_type_spans.push(Span::from_pest(t.as_span()));
                    if let Some(ty) = lower_type(t, errors, None) {
                        written_results.push(ty);
                    }
                }
            }
            Rule::op_stmt => {
                let stmt_span = Span::from_pest(p.as_span());
                if func.has_return {
                    errors.push(ParseError::AfterReturn { span: stmt_span });
                }
                lower_op(p, errors, &mut pending, &mut broken);
            }
            Rule::return_op => {
                let rspan = Span::from_pest(p.as_span());
                if func.has_return {
                    errors.push(ParseError::DuplicateReturn {
                        name: name.clone(),
                        span: rspan,
                    });
                }
                func.has_return = true;
                func.return_span = rspan;
                returns = p
                    .into_inner()
                    .map(|v| (v.as_str()[1..].to_string(), Span::from_pest(v.as_span())))
                    .collect();
            }
            Rule::close_brace => {
                if !func.has_return {
                    func.return_span = Span::from_pest(p.as_span());
                }
            }
            r => unreachable!("grammar: unexpected {r:?} in func"),
        }
    }

    // Create every result value first, so operands may name values defined later in the text;
    // the verifier then reports such uses as "used before definition", not "undefined".
    let mut staged = Vec::with_capacity(pending.len());
    for p in pending {
        let id = func.ops.push(OpData {
            op: p.op,
            operands: Vec::new(),
            results: Vec::new(),
            outs: Vec::new(),
            loc: p.loc,
        });
        let mut results = Vec::with_capacity(p.results.len());
        for (i, (rname, rspan, declared)) in p.results.into_iter().enumerate() {
            let (declared, declared_sym) = Written::split(declared);
            let v = func.values.push(ValueData {
                name: rname.clone(),
                def: ValueDef::Result(id, i),
                declared,
                ty: None,
                declared_sym,
                sym: None,
                span: rspan,
            });
            define(&mut names, errors, rname, v, rspan);
            results.push(v);
        }
        func.ops[id].results = results;
        func.layout.push(id);
        staged.push((id, p.operands, p.outs));
    }
    let known: Vec<String> = names.keys().cloned().collect();
    for (id, operands, outs) in staged {
        let mut resolve_all = |list: Vec<(String, Span)>| {
            let mut vals = Vec::with_capacity(list.len());
            for (oname, ospan) in list {
                if let Some(v) = resolve(&names, &broken, &known, errors, &oname, ospan) {
                    vals.push(v);
                }
            }
            vals
        };
        func.ops[id].operands = resolve_all(operands);
        func.ops[id].outs = resolve_all(outs);
    }
    for (rname, rspan) in returns {
        if let Some(v) = resolve(&names, &broken, &known, errors, &rname, rspan) {
            func.returns.push(v);
            func.return_operand_spans.push(rspan);
        }
    }
    // A symbolic dim anywhere makes the function dynamic: its types live in the symbolic
    // fields until `specialize` gives them values.
    let dynamic = func.values.values().any(|v| v.declared_sym.is_some())
        || written_results.iter().any(|t| matches!(t, Written::Sym(_)));
    if dynamic {
        func.dynamic = Some(Box::new(Dynamic {
            result_types: written_results.iter().map(Written::to_sym).collect(),
            checks: Vec::new(),
        }));
    } else {
        func.result_types = written_results
            .into_iter()
            .filter_map(|t| match t {
                Written::Static(t) => Some(t),
                Written::Sym(_) => None,
            })
            .collect();
    }
    func
}

fn define(
    names: &mut IndexMap<String, (Value, Span)>,
    errors: &mut Vec<ParseError>,
    name: String,
    v: Value,
    span: Span,
) {
    if let Some((_, first)) = names.get(&name) {
        errors.push(ParseError::Redefined {
            name,
            span,
            first: *first,
        });
    } else {
        names.insert(name, (v, span));
    }
}

fn resolve(
    names: &IndexMap<String, (Value, Span)>,
    broken: &HashSet<String>,
    known: &[String],
    errors: &mut Vec<ParseError>,
    name: &str,
    span: Span,
) -> Option<Value> {
    if let Some((v, _)) = names.get(name) {
        return Some(*v);
    }
    if !broken.contains(name) {
        let candidates: Vec<&str> = known.iter().map(String::as_str).collect();
        let hint = closest(name, &candidates)
            .map_or(String::new(), |c| format!(" (did you mean `%{c}`?)"));
        errors.push(ParseError::Undefined {
            name: name.to_string(),
            hint,
            span,
        });
    }
    None
}

fn lower_op(
    pair: P<'_>,
    errors: &mut Vec<ParseError>,
    pending: &mut Vec<PendingOp>,
    broken: &mut HashSet<String>,
) {
    let stmt = Span::from_pest(pair.as_span());
    let mut results: Vec<(String, Span)> = Vec::new();
    let mut op_name = ("", Span::NONE);
    let mut operands: Vec<(String, Span)> = Vec::new();
    let mut outs: Vec<(String, Span)> = Vec::new();
    let mut attrs: Vec<Attr> = Vec::new();
    let mut types: Vec<(Option<Written>, Span)> = Vec::new();
    let mut types_span = Span::NONE;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::results => {
                results = p
                    .into_inner()
                    .map(|v| (v.as_str()[1..].to_string(), Span::from_pest(v.as_span())))
                    .collect();
            }
            Rule::op_name => op_name = (p.as_str(), Span::from_pest(p.as_span())),
            Rule::operands => {
                operands = p
                    .into_inner()
                    .map(|v| (v.as_str()[1..].to_string(), Span::from_pest(v.as_span())))
                    .collect();
            }
            Rule::outs => {
                outs = p
                    .into_inner()
                    .map(|v| (v.as_str()[1..].to_string(), Span::from_pest(v.as_span())))
                    .collect();
            }
            Rule::attr_dict => {
                for a in p.into_inner() {
                    attrs.push(lower_attr(a));
                }
            }
            Rule::result_types => {
                types_span = Span::from_pest(p.as_span());
                for t in p.into_inner() {
                    let s = Span::from_pest(t.as_span());
                    types.push((lower_type(t, errors, None), s));
                }
            }
            r => unreachable!("grammar: unexpected {r:?} in op"),
        }
    }

    let mark_broken = |broken: &mut HashSet<String>, results: &[(String, Span)]| {
        for (r, _) in results {
            broken.insert(r.clone());
        }
    };
    let op = match Op::from_parts(op_name.0, &attrs, op_name.1) {
        Ok(Some(op)) => op,
        Ok(None) => {
            let hint = closest(op_name.0, OP_NAMES)
                .map_or(String::new(), |c| format!(" (did you mean `{c}`?)"));
            errors.push(ParseError::UnknownOp {
                name: op_name.0.to_string(),
                hint,
                span: op_name.1,
            });
            mark_broken(broken, &results);
            return;
        }
        Err(es) => {
            errors.extend(es.into_iter().map(ParseError::Attr));
            mark_broken(broken, &results);
            return;
        }
    };
    if op.num_results() != results.len() {
        let span = Span::new(results[0].1.start, results[results.len() - 1].1.end);
        errors.push(ParseError::ResultCount {
            op: op.name().to_string(),
            expected: op.num_results(),
            found: results.len(),
            span,
        });
        mark_broken(broken, &results);
        return;
    }
    if !types.is_empty() && types.len() != results.len() {
        errors.push(ParseError::TypeCount {
            expected: results.len(),
            found: types.len(),
            span: types_span,
        });
        mark_broken(broken, &results);
        return;
    }
    let loc = OpLoc {
        name: op_name.1,
        operands: operands.iter().map(|(_, s)| *s).collect(),
        outs: outs.iter().map(|(_, s)| *s).collect(),
        types: types.iter().map(|(_, s)| *s).collect(),
        stmt,
    };
    let mut declared: Vec<Option<Written>> = types.into_iter().map(|(t, _)| t).collect();
    declared.resize(results.len(), None);
    pending.push(PendingOp {
        op,
        operands,
        outs,
        results: results
            .into_iter()
            .zip(declared)
            .map(|((n, s), t)| (n, s, t))
            .collect(),
        loc,
    });
}

fn lower_attr(pair: P<'_>) -> Attr {
    let mut it = pair.into_inner();
    let name = it.next().expect("grammar: attr name");
    let value = it.next().expect("grammar: attr value");
    Attr {
        name: name.as_str().to_string(),
        name_span: Span::from_pest(name.as_span()),
        value_span: Span::from_pest(value.as_span()),
        value: lower_value(value),
    }
}

fn lower_value(pair: P<'_>) -> AttrValue {
    let p = if pair.as_rule() == Rule::attr_value {
        pair.into_inner().next().expect("grammar: value")
    } else {
        pair
    };
    match p.as_rule() {
        Rule::int => match p.as_str().parse::<i64>() {
            Ok(v) => AttrValue::Int(v),
            // Out of i64 range: keep it as a float so the op reports a type error on it.
            Err(_) => AttrValue::Float(p.as_str().parse::<f64>().unwrap_or(f64::INFINITY)),
        },
        Rule::float => AttrValue::Float(match p.as_str() {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            "nan" | "-nan" => f64::NAN,
            s => s.parse().unwrap_or(f64::NAN),
        }),
        Rule::bool => AttrValue::Bool(p.as_str() == "true"),
        Rule::word => AttrValue::Word(p.as_str().to_string()),
        Rule::string => AttrValue::Str(unescape(p.into_inner().next().map_or("", |b| b.as_str()))),
        Rule::array => AttrValue::Array(p.into_inner().map(lower_value).collect()),
        Rule::dim_expr => {
            let text = p.as_str();
            AttrValue::Dim(text[1..text.len() - 1].to_string())
        }
        r => unreachable!("grammar: unexpected {r:?} as attribute value"),
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c) => out.push(c),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A type; `param` names the parameter whose type it is (where `?` is accepted).
fn lower_type(pair: P<'_>, errors: &mut Vec<ParseError>, param: Option<&str>) -> Option<Written> {
    let mut shape: Vec<DimExpr> = Vec::new();
    let mut dtype = None;
    let mut ok = true;
    for p in pair.into_inner() {
        let span = Span::from_pest(p.as_span());
        match p.as_rule() {
            Rule::dim => match p.as_str().parse::<u64>() {
                Ok(d) => shape.push(DimExpr::constant(i128::from(d))),
                Err(_) => {
                    errors.push(ParseError::DimOverflow {
                        text: p.as_str().to_string(),
                        span,
                    });
                    ok = false;
                }
            },
            Rule::sym_dim => {
                let text = p.as_str();
                let parsed = if text == "?" {
                    match param {
                        Some(name) => Ok(DimExpr::sym(derived_name(name, shape.len()))),
                        None => Err("`?` is accepted in parameter types only (it is named after the parameter, as `%x` dimension 0 is `x.d0`); write the dimension's expression in braces".to_string()),
                    }
                } else {
                    DimExpr::parse(&text[1..text.len() - 1])
                };
                let parsed = parsed.and_then(|e| match e.as_constant() {
                    Some(c) if u64::try_from(c).is_err() => {
                        Err(format!("{c} is not a dimension (0 to 2^64 - 1)"))
                    }
                    _ => Ok(e),
                });
                match parsed {
                    Ok(e) => shape.push(e),
                    Err(message) => {
                        errors.push(ParseError::BadDim {
                            text: text.to_string(),
                            message,
                            span,
                        });
                        ok = false;
                    }
                }
            }
            Rule::dtype => match p.as_str().parse::<DType>() {
                Ok(d) => dtype = Some(d),
                Err(()) => {
                    errors.push(ParseError::UnknownDType {
                        name: p.as_str().to_string(),
                        span,
                    });
                    ok = false;
                }
            },
            r => unreachable!("grammar: unexpected {r:?} in type"),
        }
    }
    let (true, Some(dtype)) = (ok, dtype) else {
        return None;
    };
    let t = SymTensorType::new(shape, dtype);
    // A constant written in braces (`{2*3}`) is just a number.
    Some(match t.to_static() {
        Some(st) => Written::Static(st),
        None => Written::Sym(t),
    })
}
