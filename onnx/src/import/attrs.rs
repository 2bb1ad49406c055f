//! Reading attributes (their declared types checked) and the small conversions every op family
//! shares: non-negative lists, 2-D pairs, axes, f32 constants as f64.

use super::R;
use crate::error::{AttrError, NodeError};
use crate::proto::{attribute_proto::AttributeType, AttributeProto};
use crate::tensor::Tensor;
use tir_ir::DType;

/// A node's attributes, read with their declared types checked.
pub(super) struct Attrs<'a>(pub(super) &'a [AttributeProto]);

impl Attrs<'_> {
    fn get(&self, name: &'static str, want: AttributeType) -> R<Option<&AttributeProto>> {
        let Some(at) = self.0.iter().find(|at| at.name.as_deref() == Some(name)) else {
            return Ok(None);
        };
        match at.r#type {
            Some(t) if t == want as i32 => Ok(Some(at)),
            // Before IR version 2 the type was not recorded; trust the field that is set.
            None | Some(0) => Ok(Some(at)),
            Some(t) => Err(AttrError::WrongType {
                name,
                want: want.as_str_name(),
                found: AttributeType::try_from(t).ok().map(|t| t.as_str_name()),
            }
            .into()),
        }
    }

    pub(super) fn int(&self, name: &'static str) -> R<Option<i64>> {
        Ok(self
            .get(name, AttributeType::Int)?
            .map(|a| a.i.unwrap_or(0)))
    }

    /// An int attribute the op cannot do without.
    pub(super) fn req_int(&self, name: &'static str) -> R<i64> {
        self.int(name)?
            .ok_or_else(|| AttrError::Missing { name }.into())
    }

    pub(super) fn ints(&self, name: &'static str) -> R<Option<Vec<i64>>> {
        Ok(self.get(name, AttributeType::Ints)?.map(|a| a.ints.clone()))
    }

    pub(super) fn float(&self, name: &'static str) -> R<Option<f64>> {
        Ok(self
            .get(name, AttributeType::Float)?
            .map(|a| widen(a.f.unwrap_or(0.0))))
    }

    pub(super) fn floats(&self, name: &'static str) -> R<Option<Vec<f64>>> {
        Ok(self
            .get(name, AttributeType::Floats)?
            .map(|a| a.floats.iter().map(|&f| widen(f)).collect()))
    }

    pub(super) fn string(&self, name: &'static str) -> R<Option<String>> {
        match self.get(name, AttributeType::String)? {
            None => Ok(None),
            Some(a) => String::from_utf8(a.s.clone().unwrap_or_default())
                .map(Some)
                .map_err(|_| AttrError::NotUtf8 { name }.into()),
        }
    }

    pub(super) fn tensor(&self, name: &'static str) -> R<Option<Tensor>> {
        match self.get(name, AttributeType::Tensor)? {
            None => Ok(None),
            Some(a) => {
                let t = a.t.as_ref().ok_or(AttrError::NoTensor { name })?;
                // A Constant's tensor never has external data relative to anything useful.
                Tensor::from_proto(t, None)
                    .map(Some)
                    .map_err(|problem| AttrError::Tensor { name, problem }.into())
            }
        }
    }
}

/// The value of a `Constant` node.
pub(super) fn constant_attr(a: &Attrs) -> R<Tensor> {
    if let Some(t) = a.tensor("value")? {
        return Ok(t);
    }
    if let Some(f) = a.float("value_float")? {
        return Ok(Tensor::from_f64s(DType::F32, vec![], &[f]));
    }
    if let Some(v) = a.floats("value_floats")? {
        return Ok(Tensor::from_f64s(DType::F32, vec![v.len() as u64], &v));
    }
    if let Some(i) = a.int("value_int")? {
        return Ok(Tensor::from_i64s(DType::I64, vec![], &[i]));
    }
    if let Some(v) = a.ints("value_ints")? {
        return Ok(Tensor::from_i64s(DType::I64, vec![v.len() as u64], &v));
    }
    Err(NodeError::ConstantValue)
}

pub(super) fn to_u64s(what: &'static str, v: &[i64]) -> R<Vec<u64>> {
    v.iter()
        .map(|&x| {
            u64::try_from(x).map_err(|_| NodeError::Negative {
                what,
                values: v.to_vec(),
            })
        })
        .collect()
}

pub(super) fn two<T: Copy>(what: &'static str, v: &[T]) -> R<[T; 2]> {
    match v {
        [a, b] => Ok([*a, *b]),
        _ => Err(NodeError::NotTwoD {
            what,
            count: v.len(),
        }),
    }
}

pub(super) fn norm_axis(axis: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(NodeError::AxisOutOfRange { axis, rank });
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// An f32 attribute as the f64 with the same shortest decimal form (`1e-3f32` becomes `0.001`,
/// not `0.0010000000474974513`), so printed attributes read as the exporter wrote them.
pub(super) fn widen(f: f32) -> f64 {
    if f.is_finite() {
        f.to_string().parse().unwrap_or(f as f64)
    } else {
        f as f64
    }
}

/// The one element of a constant, widened like an attribute.
pub(super) fn scalar_of(t: &Tensor) -> f64 {
    let v = t.floats()[0];
    if t.dtype == DType::F32 {
        widen(v as f32)
    } else {
        v
    }
}
