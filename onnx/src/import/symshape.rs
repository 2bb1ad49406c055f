//! Shape values with symbolic elements: `Shape` of a value whose type has symbolic dims, and
//! the integer ops of the shape subgraphs exporters write after it (`Gather`, `Slice`,
//! `Concat`, `Unsqueeze`, `Squeeze`, `Cast`, arithmetic), evaluated on [`DimExpr`]s at import
//! time as [`super::fold`] evaluates constants. A result whose elements are all constant
//! becomes an ordinary constant, so the static path never sees this module. What consumes
//! them is Reshape's target ([`Importer::reshape`]).

use super::attrs::{norm_axis, Attrs};
use super::{Importer, Val, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::Tensor;
use std::fmt;
use std::rc::Rc;
use tir_ir::sym::Dim;
use tir_ir::{DType, DimExpr};

/// An integer tensor of rank 0 or 1 whose elements are dim expressions.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SymInts {
    pub dtype: DType,
    /// `[]` (a scalar) or `[len]`.
    pub shape: Vec<u64>,
    pub elems: Vec<DimExpr>,
}

impl fmt::Display for SymInts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .elems
            .iter()
            .map(|d| match d.as_constant() {
                Some(c) => c.to_string(),
                None => format!("{{{d}}}"),
            })
            .collect();
        if self.shape.is_empty() {
            write!(f, "{}", parts.join(""))
        } else {
            write!(f, "[{}]", parts.join(", "))
        }
    }
}

impl SymInts {
    pub fn vector(elems: Vec<DimExpr>) -> Self {
        SymInts {
            dtype: DType::I64,
            shape: vec![elems.len() as u64],
            elems,
        }
    }

    /// As a value: a constant when no element is symbolic.
    pub fn into_val(self) -> Val {
        let consts: Option<Vec<i64>> = self
            .elems
            .iter()
            .map(|d| d.as_constant().and_then(|c| i64::try_from(c).ok()))
            .collect();
        match consts {
            Some(c) => Val::Const(Rc::new(Tensor::from_i64s(self.dtype, self.shape, &c))),
            None => Val::Dims(Rc::new(self)),
        }
    }
}

/// An operand of a shape op as dim expressions: a symbolic shape value, or a small integer
/// constant of rank 0 or 1.
fn operand(v: &Val) -> Option<SymInts> {
    match v {
        Val::Dims(d) => Some((**d).clone()),
        Val::Const(t) if t.is_int() && t.shape.len() <= 1 => Some(SymInts {
            dtype: t.dtype,
            shape: t.shape.clone(),
            elems: t
                .ints()
                .iter()
                .map(|&i| DimExpr::constant(i128::from(i)))
                .collect(),
        }),
        _ => None,
    }
}

impl Importer {
    /// `Shape` of a value with symbolic dims.
    pub(super) fn shape_value(&self, dims: &[DimExpr], a: &Attrs) -> R<Val> {
        let r = dims.len() as i64;
        let clamp = |v: i64| -> usize { (if v < 0 { v + r } else { v }).clamp(0, r) as usize };
        let start = clamp(a.int("start")?.unwrap_or(0));
        let end = clamp(a.int("end")?.unwrap_or(r));
        let elems = dims.get(start..end.max(start)).unwrap_or(&[]).to_vec();
        Ok(SymInts::vector(elems).into_val())
    }

    /// Evaluates a shape op one of whose inputs is a symbolic shape value; `None` when the op
    /// is not one of the shape ops (the dispatcher then reports it).
    pub(super) fn fold_sym(
        &mut self,
        node: &NodeProto,
        op_type: &str,
        a: &Attrs,
        inputs: &[Option<Val>],
    ) -> R<Option<Val>> {
        let ins: Vec<Option<SymInts>> = inputs
            .iter()
            .map(|v| v.as_ref().and_then(operand))
            .collect();
        let x = |i: usize| -> R<SymInts> {
            ins.get(i)
                .cloned()
                .flatten()
                .ok_or(NodeError::MissingInput {
                    index: i,
                    what: None,
                })
        };
        let out = match op_type {
            "Identity" => x(0)?,
            "Cast" => {
                let to = super::cast_target(a)?;
                if !matches!(to, DType::I64 | DType::I32) {
                    return Ok(None);
                }
                SymInts { dtype: to, ..x(0)? }
            }
            "Gather" => {
                let d = x(0)?;
                let idx = x(1)?;
                if d.shape.len() != 1 || norm_axis(a.int("axis")?.unwrap_or(0), 1)? != 0 {
                    return Ok(None);
                }
                let n = d.elems.len() as i64;
                let mut elems = Vec::new();
                for e in &idx.elems {
                    let Some(i) = e.as_constant().and_then(|c| i64::try_from(c).ok()) else {
                        return Ok(None);
                    };
                    let j = if i < 0 { i + n } else { i };
                    if !(0..n).contains(&j) {
                        return Err(NodeError::GatherIndex {
                            index: i,
                            axis: 0,
                            size: n,
                        });
                    }
                    elems.push(d.elems[j as usize].clone());
                }
                SymInts {
                    dtype: d.dtype,
                    shape: idx.shape.clone(),
                    elems,
                }
            }
            "Unsqueeze" | "Squeeze" => {
                let d = x(0)?;
                let want = if op_type == "Unsqueeze" { 0 } else { 1 };
                if d.shape.len() != want || d.elems.len() != 1 {
                    return Ok(None);
                }
                SymInts {
                    shape: if want == 0 { vec![1] } else { vec![] },
                    ..d
                }
            }
            "Concat" => {
                let mut elems = Vec::new();
                let mut dtype = DType::I64;
                for i in 0..inputs.len() {
                    let p = x(i)?;
                    if p.shape.len() != 1 {
                        return Ok(None);
                    }
                    dtype = p.dtype;
                    elems.extend(p.elems);
                }
                SymInts {
                    dtype,
                    shape: vec![elems.len() as u64],
                    elems,
                }
            }
            "Slice" => {
                let d = x(0)?;
                if d.shape.len() != 1 {
                    return Ok(None);
                }
                let s = self.slice_params(node, 1)?;
                let n = d.elems.len() as u64;
                let (start, step) = (s.starts[0], s.steps[0]);
                let len = n.slice_len(start, s.ends[0], step);
                let n = n as i64;
                let fix = |v: i64| if v < 0 { v + n } else { v };
                let first = if step > 0 {
                    fix(start).clamp(0, n)
                } else {
                    fix(start).clamp(-1, n - 1)
                };
                let elems = (0..len as i64)
                    .map(|k| d.elems[(first + k * step) as usize].clone())
                    .collect();
                SymInts::vector(elems)
            }
            "Add" | "Sub" | "Mul" | "Div" => {
                let (p, q) = (x(0)?, x(1)?);
                let (n, shape) = match (p.elems.len(), q.elems.len()) {
                    (a, b) if a == b => (
                        a,
                        if p.shape.len() >= q.shape.len() {
                            p.shape.clone()
                        } else {
                            q.shape.clone()
                        },
                    ),
                    (1, b) => (b, q.shape.clone()),
                    (a, 1) => (a, p.shape.clone()),
                    _ => return Ok(None),
                };
                let at =
                    |v: &SymInts, k: usize| v.elems[if v.elems.len() == 1 { 0 } else { k }].clone();
                let mut elems = Vec::with_capacity(n);
                for k in 0..n {
                    let (l, r) = (at(&p, k), at(&q, k));
                    let e = match op_type {
                        "Add" => l.checked_add(&r),
                        "Sub" => l.checked_sub(&r),
                        "Mul" => l.checked_mul(&r),
                        // A symbolic shape is non-negative, so ONNX's truncating integer
                        // division is the floor division when the divisor is positive.
                        _ => match r.as_constant() {
                            Some(c) if c > 0 => l.floor_div(&r),
                            Some(0) => return Err(NodeError::DivisionByZero),
                            _ => return Ok(None),
                        },
                    };
                    elems.push(e.ok_or(NodeError::Overflow {
                        what: "a shape value",
                    })?);
                }
                SymInts {
                    dtype: p.dtype,
                    shape,
                    elems,
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(out.into_val()))
    }
}
