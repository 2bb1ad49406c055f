//! CumSum and TopK as the IR's `cumsum` and `top_k`, and NonZero, whose result shape depends
//! on its input's values: folded when the input is a constant, refused (naming why) when it is
//! computed at run time.

use super::attrs::Attrs;
use super::{Importer, Val, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::{for_each_index, Tensor};
use tir_ir::{DType, Op};

/// A constant integer operand holding one value (a scalar or a one-element vector).
fn single(t: &Tensor, what: &'static str) -> R<i64> {
    if !t.is_int() || t.numel() != 1 || t.shape.len() > 1 {
        return Err(NodeError::NotScalar {
            what,
            shape: t.shape.clone(),
        });
    }
    Ok(t.ints()[0])
}

impl Importer {
    /// CumSum (opset 11, 14): `axis` is a constant input; `exclusive` and `reverse` map to the
    /// op's attributes. The element type is checked by the op's shape rule (f32, i32, i64).
    pub(super) fn cumsum(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let axis = self.req_const_in(node, 1, "axis")?;
        let axis = single(&axis, "axis")?;
        let x = self.in_value(node, 0)?;
        let op = Op::CumSum {
            axis,
            exclusive: a.int("exclusive")?.unwrap_or(0) != 0,
            reverse: a.int("reverse")?.unwrap_or(0) != 0,
        };
        self.emit(node, op, &[x])
    }

    /// TopK (opset 11): `K` must be a constant, since the results' shape holds it. `sorted = 0`
    /// leaves the order to the implementation; the op's sorted order is one such order.
    pub(super) fn top_k(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let k = match self.const_in(
            node,
            1,
            "K (the number of elements, part of the results' shape)",
        )? {
            Some(t) => single(&t, "K")?,
            None => {
                return Err(NodeError::MissingInput {
                    index: 1,
                    what: Some("K"),
                })
            }
        };
        if k < 1 {
            return Err(NodeError::NotPositive { what: "K" });
        }
        let x = self.in_value(node, 0)?;
        let op = Op::TopK {
            axis: a.int("axis")?.unwrap_or(-1),
            k: k as u64,
            largest: a.int("largest")?.unwrap_or(1) != 0,
        };
        // `outs` in bufferized code names destinations for all of an op's results or none:
        // when only one result is a graph output, it is returned through a copy (a reshape to
        // its own shape), so both results of the op itself are intermediates.
        let returned: Vec<bool> = (0..2)
            .map(|i| {
                node.output
                    .get(i)
                    .is_some_and(|o| self.graph_outputs.contains(o))
            })
            .collect();
        if returned[0] == returned[1] {
            return self.emit(node, op, &[x]);
        }
        let names = vec![self.em.fresh(), self.em.fresh()];
        let results = self.em.push(op, &[x], names)?;
        for (i, &r) in results.iter().enumerate() {
            let Some(out) = node.output.get(i).filter(|o| !o.is_empty()) else {
                continue;
            };
            let v = if returned[i] {
                let shape = self.em.ty(r)?.shape.iter().map(|&d| d as i64).collect();
                let name = self.em.unique(out);
                self.em.push(Op::reshape(shape), &[r], vec![name])?[0]
            } else {
                r
            };
            self.env.insert(out.clone(), Val::Ir(v));
        }
        Ok(())
    }

    /// NonZero: the indices of the non-zero elements, `[rank, count]` in row-major order. The
    /// count is the input's values' business, so only a constant input (folded here) has a
    /// shape a static plan can hold.
    pub(super) fn non_zero(&mut self, node: &NodeProto) -> R<()> {
        let t = match self.req_in(node, 0)? {
            Val::Const(t) => t,
            _ => {
                return Err(NodeError::ValueDependentShape {
                    op_type: "NonZero".into(),
                    index: 0,
                    what: "the count of its non-zero elements",
                })
            }
        };
        let nonzero: Vec<bool> = if t.is_int() {
            t.ints().iter().map(|&v| v != 0).collect()
        } else {
            t.floats().iter().map(|&v| v != 0.0).collect()
        };
        let rank = t.shape.len();
        let mut coords: Vec<Vec<i64>> = vec![Vec::new(); rank];
        let mut flat = 0usize;
        for_each_index(&t.shape, |idx| {
            if nonzero[flat] {
                for (d, &i) in idx.iter().enumerate() {
                    coords[d].push(i as i64);
                }
            }
            flat += 1;
        });
        let count = nonzero.iter().filter(|&&b| b).count() as u64;
        let data: Vec<i64> = coords.concat();
        self.bind_const(
            node,
            Tensor::from_i64s(DType::I64, vec![rank as u64, count], &data),
        )
    }
}
