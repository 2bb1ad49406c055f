//! Attribute dictionaries as written in the text, and the typed reading and canonical writing
//! of them that each op family uses.

use crate::op::ReshapeDim;
use crate::span::Span;
use crate::sym::DimExpr;
use std::fmt::{self, Write};
use std::str::FromStr;

/// An attribute value as parsed, before an op gives it a meaning.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    /// A bare identifier, used for enumerations: `mode = bilinear`, `activation = relu6`.
    Word(String),
    /// A dimension expression in braces, `{n}` or `{h*w}` (the braces' text, read by the op).
    Dim(String),
    Array(Vec<AttrValue>),
}

impl AttrValue {
    pub fn kind(&self) -> &'static str {
        match self {
            AttrValue::Int(_) => "integer",
            AttrValue::Float(_) => "float",
            AttrValue::Bool(_) => "bool",
            AttrValue::Str(_) => "string",
            AttrValue::Word(_) => "identifier",
            AttrValue::Dim(_) => "dimension expression",
            AttrValue::Array(_) => "array",
        }
    }
}

/// One `name = value` entry with the spans of both halves.
#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub name: String,
    pub value: AttrValue,
    pub name_span: Span,
    pub value_span: Span,
}

/// What is wrong with an op's attributes.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AttrError {
    #[error("`{op}` requires attribute `{attr}`")]
    Missing {
        op: &'static str,
        attr: &'static str,
        span: Span,
    },
    #[error("`{op}` has no attribute `{attr}`{hint}")]
    Unknown {
        op: &'static str,
        attr: String,
        hint: String,
        span: Span,
    },
    #[error("attribute `{attr}` given twice")]
    Duplicate { attr: String, span: Span },
    #[error("attribute `{attr}` must be {expected}, found {found}")]
    WrongType {
        attr: &'static str,
        expected: &'static str,
        found: String,
        span: Span,
    },
    #[error("attribute `{attr}`: {message}")]
    BadValue {
        attr: &'static str,
        message: String,
        span: Span,
    },
}

impl AttrError {
    pub fn span(&self) -> Span {
        match self {
            AttrError::Missing { span, .. }
            | AttrError::Unknown { span, .. }
            | AttrError::Duplicate { span, .. }
            | AttrError::WrongType { span, .. }
            | AttrError::BadValue { span, .. } => *span,
        }
    }
}

/// Reads typed attributes out of a dictionary, collecting every error rather than stopping at
/// the first, and reporting any attribute that nobody asked for as unknown.
pub(crate) struct AttrReader<'a> {
    op: &'static str,
    attrs: &'a [Attr],
    used: Vec<bool>,
    /// Where to point a "missing attribute" error: the op name.
    op_span: Span,
    pub(crate) errors: Vec<AttrError>,
}

impl<'a> AttrReader<'a> {
    pub(crate) fn new(op: &'static str, attrs: &'a [Attr], op_span: Span) -> Self {
        let mut errors = Vec::new();
        for (i, a) in attrs.iter().enumerate() {
            if attrs[..i].iter().any(|b| b.name == a.name) {
                errors.push(AttrError::Duplicate {
                    attr: a.name.clone(),
                    span: a.name_span,
                });
            }
        }
        AttrReader {
            op,
            attrs,
            used: vec![false; attrs.len()],
            op_span,
            errors,
        }
    }

    fn take(&mut self, name: &'static str) -> Option<&'a Attr> {
        let i = self.attrs.iter().position(|a| a.name == name)?;
        for (j, a) in self.attrs.iter().enumerate() {
            if a.name == name {
                self.used[j] = true;
            }
        }
        Some(&self.attrs[i])
    }

    fn wrong(&mut self, attr: &'static str, expected: &'static str, a: &Attr) {
        self.errors.push(AttrError::WrongType {
            attr,
            expected,
            found: a.value.kind().to_string(),
            span: a.value_span,
        });
    }

    pub(crate) fn bad(&mut self, attr: &'static str, message: impl Into<String>) {
        let span = self
            .attrs
            .iter()
            .find(|a| a.name == attr)
            .map_or(self.op_span, |a| a.value_span);
        self.errors.push(AttrError::BadValue {
            attr,
            message: message.into(),
            span,
        });
    }

    fn missing(&mut self, attr: &'static str) {
        self.errors.push(AttrError::Missing {
            op: self.op,
            attr,
            span: self.op_span,
        });
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.attrs.iter().any(|a| a.name == name)
    }

    pub(crate) fn int_opt(&mut self, name: &'static str) -> Option<i64> {
        let a = self.take(name)?;
        match a.value {
            AttrValue::Int(v) => Some(v),
            _ => {
                self.wrong(name, "an integer", a);
                None
            }
        }
    }

    pub(crate) fn int_req(&mut self, name: &'static str) -> i64 {
        if !self.has(name) {
            self.missing(name);
            return 0;
        }
        self.int(name, 0)
    }

    pub(crate) fn int(&mut self, name: &'static str, default: i64) -> i64 {
        self.int_opt(name).unwrap_or(default)
    }

    pub(crate) fn uint(&mut self, name: &'static str, default: u64) -> u64 {
        match self.int_opt(name) {
            None => default,
            Some(v) if v >= 0 => v as u64,
            Some(v) => {
                self.bad(name, format!("must not be negative, got {v}"));
                default
            }
        }
    }

    pub(crate) fn float(&mut self, name: &'static str, default: f64) -> f64 {
        let Some(a) = self.take(name) else {
            return default;
        };
        match a.value {
            AttrValue::Float(v) => v,
            AttrValue::Int(v) => v as f64,
            _ => {
                self.wrong(name, "a number", a);
                default
            }
        }
    }

    pub(crate) fn bool(&mut self, name: &'static str, default: bool) -> bool {
        let Some(a) = self.take(name) else {
            return default;
        };
        match a.value {
            AttrValue::Bool(v) => v,
            _ => {
                self.wrong(name, "`true` or `false`", a);
                default
            }
        }
    }

    pub(crate) fn string_req(&mut self, name: &'static str) -> String {
        let Some(a) = self.take(name) else {
            self.missing(name);
            return String::new();
        };
        match &a.value {
            AttrValue::Str(s) => s.clone(),
            _ => {
                self.wrong(name, "a string", a);
                String::new()
            }
        }
    }

    pub(crate) fn ints_opt(&mut self, name: &'static str) -> Option<Vec<i64>> {
        let a = self.take(name)?;
        let AttrValue::Array(items) = &a.value else {
            self.wrong(name, "an array of integers", a);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                AttrValue::Int(v) => out.push(*v),
                _ => {
                    self.wrong(name, "an array of integers", a);
                    return None;
                }
            }
        }
        Some(out)
    }

    /// A `reshape` target: integers (`-1` infers one entry; other negatives are refused) and
    /// dimension expressions in braces (`{n}`), each read by [`DimExpr::parse`].
    pub(crate) fn reshape_dims(&mut self, name: &'static str) -> Vec<ReshapeDim> {
        let Some(a) = self.take(name) else {
            self.missing(name);
            return Vec::new();
        };
        let AttrValue::Array(items) = &a.value else {
            self.wrong(name, "an array of integers and dimension expressions", a);
            return Vec::new();
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let d = match item {
                AttrValue::Int(-1) => ReshapeDim::Infer,
                AttrValue::Int(v) if *v < 0 => {
                    self.bad(
                        name,
                        format!("dimensions must be -1 or non-negative, got {v}"),
                    );
                    continue;
                }
                AttrValue::Int(v) => ReshapeDim::from_int(*v),
                AttrValue::Dim(text) => match DimExpr::parse(text) {
                    Ok(e) if e.as_constant().is_some_and(|c| c < 0) => {
                        self.bad(name, format!("`{{{text}}}` is negative"));
                        continue;
                    }
                    Ok(e) => ReshapeDim::Size(e),
                    Err(message) => {
                        self.bad(name, format!("`{{{text}}}`: {message}"));
                        continue;
                    }
                },
                _ => {
                    self.wrong(name, "an array of integers and dimension expressions", a);
                    return Vec::new();
                }
            };
            out.push(d);
        }
        out
    }

    pub(crate) fn ints_req(&mut self, name: &'static str) -> Vec<i64> {
        if !self.has(name) {
            self.missing(name);
            return Vec::new();
        }
        self.ints_opt(name).unwrap_or_default()
    }

    /// A fixed-length array of non-negative integers (strides, pads, kernel sizes).
    pub(crate) fn uints_n<const N: usize>(
        &mut self,
        name: &'static str,
        default: [u64; N],
    ) -> [u64; N] {
        let Some(v) = self.ints_opt(name) else {
            return default;
        };
        if v.len() != N {
            self.bad(name, format!("expected {N} values, got {}", v.len()));
            return default;
        }
        let mut out = default;
        for (o, x) in out.iter_mut().zip(&v) {
            if *x < 0 {
                self.bad(name, format!("values must not be negative, got {x}"));
                return default;
            }
            *o = *x as u64;
        }
        out
    }

    /// A required fixed-length array of positive integers (kernel sizes, output sizes).
    pub(crate) fn uints_n_req<const N: usize>(&mut self, name: &'static str) -> [u64; N] {
        if !self.has(name) {
            self.missing(name);
            return [1; N];
        }
        let v = self.uints_n(name, [1; N]);
        if v.contains(&0) {
            self.bad(name, "values must be positive");
        }
        v
    }

    /// An enumeration written as a bare word.
    pub(crate) fn word<T: FromStr>(
        &mut self,
        name: &'static str,
        expected: &'static str,
    ) -> Option<T> {
        let a = self.take(name)?;
        match &a.value {
            AttrValue::Word(w) | AttrValue::Str(w) => match w.parse() {
                Ok(v) => Some(v),
                Err(_) => {
                    self.errors.push(AttrError::BadValue {
                        attr: name,
                        message: format!("expected {expected}, found `{w}`"),
                        span: a.value_span,
                    });
                    None
                }
            },
            _ => {
                self.wrong(name, expected, a);
                None
            }
        }
    }

    /// Reports every attribute nobody read, then hands back the errors.
    pub(crate) fn finish(mut self, known: &[&str]) -> Vec<AttrError> {
        for (a, used) in self.attrs.iter().zip(&self.used) {
            if !used {
                let hint = match closest(&a.name, known) {
                    Some(k) => format!(" (did you mean `{k}`?)"),
                    None if known.is_empty() => " (it takes none)".to_string(),
                    None => format!(" (it takes {})", list(known)),
                };
                self.errors.push(AttrError::Unknown {
                    op: self.op,
                    attr: a.name.clone(),
                    hint,
                    span: a.name_span,
                });
            }
        }
        self.errors
    }
}

fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The candidate within edit distance 2, for "did you mean" hints.
pub(crate) fn closest<'k>(name: &str, candidates: &[&'k str]) -> Option<&'k str> {
    candidates
        .iter()
        .map(|c| (edit_distance(name, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > 2 || a.len() > 64 {
        return usize::MAX;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Writes attributes in canonical form: in the op's declared order, defaults omitted.
#[derive(Default)]
pub(crate) struct AttrWriter {
    pub(crate) items: Vec<(&'static str, String)>,
}

impl AttrWriter {
    pub(crate) fn raw(&mut self, name: &'static str, value: String) {
        self.items.push((name, value));
    }

    pub(crate) fn int(&mut self, name: &'static str, v: i64, default: Option<i64>) {
        if Some(v) != default {
            self.raw(name, v.to_string());
        }
    }

    pub(crate) fn float(&mut self, name: &'static str, v: f64, default: Option<f64>) {
        // Bitwise, so that `-0.0` is not taken for the default `0.0`.
        if Some(v.to_bits()) != default.map(f64::to_bits) {
            self.raw(name, fmt_float(v));
        }
    }

    pub(crate) fn bool(&mut self, name: &'static str, v: bool, default: bool) {
        if v != default {
            self.raw(name, v.to_string());
        }
    }

    pub(crate) fn ints<T: Copy + Into<i128> + PartialEq>(
        &mut self,
        name: &'static str,
        v: &[T],
        default: Option<&[T]>,
    ) {
        if Some(v) != default {
            let mut s = String::from("[");
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                let x: i128 = (*x).into();
                let _ = write!(s, "{x}");
            }
            s.push(']');
            self.raw(name, s);
        }
    }

    pub(crate) fn reshape_dims(&mut self, name: &'static str, v: &[ReshapeDim]) {
        self.raw(name, crate::op::reshape_text(v));
    }

    pub(crate) fn word(&mut self, name: &'static str, v: impl fmt::Display) {
        self.raw(name, v.to_string());
    }

    pub(crate) fn string(&mut self, name: &'static str, v: &str) {
        self.raw(name, quote(v));
    }
}

/// A float that reads back bit for bit and always looks like a float (`6.0`, `1e-5`, `-inf`).
pub fn fmt_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{v:?}");
    if s.contains(['.', 'e', 'E']) {
        s
    } else {
        format!("{s}.0")
    }
}

/// A string literal with `"`, `\`, newline and tab escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
