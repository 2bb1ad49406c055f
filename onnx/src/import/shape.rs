//! Shape and layout: Shape, Reshape (ONNX's `0` and `-1` resolved statically), Flatten,
//! Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Pad. Their parameters must be constants;
//! with constant data too, [`super::fold`] evaluates them instead.

use super::attrs::{norm_axis, scalar_of, to_u64s, Attrs};
use super::{Importer, Val, R};
use crate::error::{AttrError, NodeError};
use crate::proto::NodeProto;
use crate::tensor::{numel, Tensor};
use std::collections::HashSet;
use tir_ir::op::{PadMode, Slice};
use tir_ir::sym::Dim;
use tir_ir::{DType, DimExpr, Op, ReshapeDim};

impl Importer {
    pub(super) fn concat(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let axis = a.req_int("axis")?;
        let mut ops = Vec::new();
        for i in 0..node.input.len() {
            ops.push(self.in_value(node, i)?);
        }
        self.emit(node, Op::Concat { axis }, &ops)
    }

    pub(super) fn split(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let xs = self.shape_of(&x)?;
        let axis = a.int("axis")?.unwrap_or(0);
        let ax = norm_axis(axis, xs.len())?;
        let d = xs[ax];
        let n_out = node.output.len() as u64;
        let sizes: Vec<i64> = if let Some(t) = self.const_in(node, 1, "split")? {
            t.ints()
        } else if let Some(s) = a.ints("split")? {
            s
        } else {
            let n = match a.int("num_outputs")? {
                Some(n) if n > 0 => n as u64,
                Some(n) => {
                    return Err(AttrError::NotPositive {
                        name: "num_outputs",
                        value: n,
                    }
                    .into())
                }
                None => n_out,
            };
            if n == 0 {
                return Err(NodeError::SplitNoOutputs);
            }
            if n != n_out {
                return Err(NodeError::SplitPieces {
                    pieces: n,
                    outputs: n_out,
                });
            }
            if a.int("num_outputs")?.is_some() {
                // Opset 18: pieces of ceil(d / n), the last one smaller.
                let piece = d.div_ceil(n);
                let mut left = d;
                (0..n)
                    .map(|_| {
                        let s = piece.min(left);
                        left -= s;
                        s as i64
                    })
                    .collect()
            } else {
                if !d.is_multiple_of(n) {
                    return Err(NodeError::SplitUneven {
                        axis: ax,
                        size: d,
                        outputs: n,
                    });
                }
                vec![(d / n) as i64; n as usize]
            }
        };
        if sizes.len() as u64 != n_out {
            return Err(NodeError::SplitSizes {
                sizes: sizes.len(),
                outputs: n_out,
            });
        }
        let sizes = to_u64s("split", &sizes)?;
        if sizes.contains(&0) {
            return Err(NodeError::SplitZero { sizes });
        }
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Split { axis, sizes }, &[x])
    }

    pub(super) fn slice(&mut self, node: &NodeProto) -> R<()> {
        let x = self.req_in(node, 0)?;
        let s = self.slice_params(node, self.rank_of(&x))?;
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Slice(s), &[x])
    }

    pub(super) fn slice_params(&self, node: &NodeProto, rank: usize) -> R<Slice> {
        let starts = self.req_const_in(node, 1, "starts")?.ints();
        let ends = self.req_const_in(node, 2, "ends")?.ints();
        let axes = match self.const_in(node, 3, "axes")? {
            Some(t) => t.ints(),
            None => (0..starts.len() as i64).collect(),
        };
        let steps = match self.const_in(node, 4, "steps")? {
            Some(t) => t.ints(),
            None => vec![1; starts.len()],
        };
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            return Err(NodeError::SliceLengths);
        }
        if steps.contains(&0) {
            return Err(NodeError::SliceStepZero);
        }
        let mut seen = HashSet::new();
        for &ax in &axes {
            if !seen.insert(norm_axis(ax, rank)?) {
                return Err(NodeError::AxisTwice { axis: ax });
            }
        }
        Ok(Slice {
            starts,
            ends,
            axes,
            steps,
        })
    }

    pub(super) fn reshape(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let sym_target = matches!(self.opt_in(node, 1)?, Some(Val::Dims(_)));
        let xs = match self.shape_of(&x) {
            Ok(xs) if !sym_target => xs,
            _ => return self.reshape_sym(node, a, &x),
        };
        let shape = self.reshape_target(node, a, &xs)?;
        let x = self.in_value(node, 0)?;
        let shape = shape.iter().map(|&d| d as i64).collect();
        self.emit(node, Op::reshape(shape), &[x])
    }

    /// Reshape of a symbolically shaped input, or to a target with symbolic entries: the
    /// target resolved to dim expressions (ONNX's `0` copies, `-1` is what is left), then
    /// written as [`reshape_dims`] says.
    fn reshape_sym(&mut self, node: &NodeProto, a: &Attrs, x: &Val) -> R<()> {
        let xs = self.sym_shape_of(x);
        let missing = NodeError::MissingInput {
            index: 1,
            what: Some("shape"),
        };
        let target: Vec<DimExpr> = match self.opt_in(node, 1)?.ok_or(missing)? {
            Val::Dims(d) => d.elems.clone(),
            Val::Const(t) => t
                .ints()
                .iter()
                .map(|&i| DimExpr::constant(i128::from(i)))
                .collect(),
            Val::Ir(_) => {
                return Err(NodeError::NotConstant {
                    index: 1,
                    what: "shape",
                })
            }
        };
        let allowzero = a.int("allowzero")?.unwrap_or(0) != 0;
        let mut out: Vec<Option<DimExpr>> = Vec::with_capacity(target.len());
        for (i, d) in target.iter().enumerate() {
            out.push(match d.as_constant() {
                Some(0) if !allowzero => {
                    Some(xs.get(i).cloned().ok_or(NodeError::ReshapeCopy {
                        entry: i,
                        rank: xs.len(),
                    })?)
                }
                Some(-1) => {
                    if out.iter().any(Option::is_none) {
                        return Err(NodeError::ReshapeInferTwice);
                    }
                    None
                }
                Some(c) if c < 0 => {
                    return Err(NodeError::ReshapeEntry {
                        entry: i,
                        value: c as i64,
                    })
                }
                _ => Some(d.clone()),
            });
        }
        let product = |ds: &[DimExpr]| {
            ds.iter()
                .try_fold(DimExpr::lit(1), |acc, d| acc.checked_mul(d))
                .ok_or(NodeError::Overflow {
                    what: "the target shape",
                })
        };
        let n = product(&xs)?;
        let known = product(&out.iter().flatten().cloned().collect::<Vec<_>>())?;
        let resolved: Vec<DimExpr> = out
            .into_iter()
            .map(|d| d.unwrap_or_else(|| n.floor_div(&known).unwrap_or_default()))
            .collect();
        let shape = reshape_dims(&resolved, &n).ok_or(NodeError::Overflow {
            what: "the target shape",
        })?;
        let xv = self.in_value(node, 0)?;
        self.emit(node, Op::Reshape { shape }, &[xv])
    }

    /// The static target shape of a Reshape: ONNX's `0` (copy) and `-1` (infer) resolved.
    pub(super) fn reshape_target(&self, node: &NodeProto, a: &Attrs, xs: &[u64]) -> R<Vec<u64>> {
        let target = self.req_const_in(node, 1, "shape")?.ints();
        let allowzero = a.int("allowzero")?.unwrap_or(0) != 0;
        resolve_reshape(&target, xs, allowzero)
    }

    pub(super) fn flatten(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let axis = a.int("axis")?.unwrap_or(1);
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Flatten { axis }, &[x])
    }

    pub(super) fn squeeze(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let axes = match self.shape_of(&x) {
            Ok(xs) => self.squeeze_axes(node, a, &xs)?,
            // Without `axes`, which dims are 1 must be known.
            Err(e) => self.axes_param(node, a, 13)?.ok_or(e)?,
        };
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Squeeze { axes }, &[x])
    }

    pub(super) fn squeeze_axes(&self, node: &NodeProto, a: &Attrs, xs: &[u64]) -> R<Vec<i64>> {
        match self.axes_param(node, a, 13)? {
            Some(ax) => Ok(ax),
            None => Ok(xs
                .iter()
                .enumerate()
                .filter(|(_, &d)| d == 1)
                .map(|(i, _)| i as i64)
                .collect()),
        }
    }

    pub(super) fn unsqueeze(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let axes = self
            .axes_param(node, a, 13)?
            .ok_or(NodeError::AxesRequired)?;
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Unsqueeze { axes }, &[x])
    }

    /// `axes` as an attribute before `input_from`, as input 1 from that opset on.
    pub(super) fn axes_param(
        &self,
        node: &NodeProto,
        a: &Attrs,
        input_from: i64,
    ) -> R<Option<Vec<i64>>> {
        if self.opset >= input_from {
            Ok(self.const_in(node, 1, "axes")?.map(|t| t.ints()))
        } else {
            a.ints("axes")
        }
    }

    pub(super) fn transpose(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let perm = transpose_perm(a, self.rank_of(&x))?;
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Transpose { perm }, &[x])
    }

    pub(super) fn pad(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let rank = self.rank_of(&x);
        let raw = if self.opset >= 11 {
            self.req_const_in(node, 1, "pads")?.ints()
        } else {
            a.ints("pads")?.ok_or(AttrError::Missing { name: "pads" })?
        };
        let pads: Vec<i64> = match self.const_in(node, 3, "axes")? {
            None => raw,
            Some(axes) => {
                let axes = axes.ints();
                if raw.len() != 2 * axes.len() {
                    return Err(NodeError::PadAxes {
                        pads: raw.len(),
                        axes: axes.len(),
                    });
                }
                let mut full = vec![0; 2 * rank];
                for (k, &ax) in axes.iter().enumerate() {
                    let ax = norm_axis(ax, rank)?;
                    full[ax] = raw[k];
                    full[rank + ax] = raw[axes.len() + k];
                }
                full
            }
        };
        if pads.iter().any(|&p| p < 0) {
            return Err(NodeError::NegativePads { pads });
        }
        let mode = match a.string("mode")?.as_deref().unwrap_or("constant") {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            "edge" => PadMode::Edge,
            other => {
                return Err(NodeError::StringValue {
                    what: "pad mode",
                    value: other.to_string(),
                    text: "",
                })
            }
        };
        let value = match self.const_in(node, 2, "constant_value")? {
            Some(t) if t.numel() == 1 => scalar_of(&t),
            Some(t) if t.numel() == 0 => 0.0,
            Some(t) => {
                return Err(NodeError::NotScalar {
                    what: "constant_value",
                    shape: t.shape.clone(),
                })
            }
            None => a.float("value")?.unwrap_or(0.0),
        };
        let pads = to_u64s("pads", &pads)?;
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Pad { pads, mode, value }, &[x])
    }
}

pub(super) fn transpose_perm(a: &Attrs, rank: usize) -> R<Vec<u64>> {
    match a.ints("perm")? {
        Some(p) => to_u64s("perm", &p),
        None => Ok((0..rank as u64).rev().collect()),
    }
}

/// ONNX Reshape's target with `0` (copy the input's dimension, unless `allowzero`) and `-1`
/// (the remaining elements) resolved to a static shape.
fn resolve_reshape(target: &[i64], xs: &[u64], allowzero: bool) -> R<Vec<u64>> {
    let n = numel(xs).ok_or(NodeError::Overflow {
        what: "the input's element count",
    })?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            0 if !allowzero => out.push(*xs.get(i).ok_or(NodeError::ReshapeCopy {
                entry: i,
                rank: xs.len(),
            })?),
            -1 => {
                if infer.replace(i).is_some() {
                    return Err(NodeError::ReshapeInferTwice);
                }
                out.push(1);
            }
            d if d < 0 => return Err(NodeError::ReshapeEntry { entry: i, value: d }),
            d => out.push(d as u64),
        }
    }
    let known = numel(&out).ok_or(NodeError::Overflow {
        what: "the target shape",
    })?;
    let refuse = |target_elements| NodeError::Reshape {
        from: xs.to_vec(),
        elements: n,
        target: target.to_vec(),
        target_elements,
    };
    if let Some(i) = infer {
        if known == 0 || n % known != 0 {
            return Err(refuse(None));
        }
        out[i] = n / known;
    } else if known != n {
        return Err(refuse(Some(known)));
    }
    Ok(out)
}

pub(super) fn shape_tensor(shape: &[u64], a: &Attrs) -> R<Tensor> {
    let r = shape.len() as i64;
    let clamp = |v: i64| -> usize { (if v < 0 { v + r } else { v }).clamp(0, r) as usize };
    let start = clamp(a.int("start")?.unwrap_or(0));
    let end = clamp(a.int("end")?.unwrap_or(r));
    let dims: Vec<i64> = shape
        .get(start..end.max(start))
        .unwrap_or(&[])
        .iter()
        .map(|&d| d as i64)
        .collect();
    Ok(Tensor::from_i64s(
        DType::I64,
        vec![dims.len() as u64],
        &dims,
    ))
}

/// The IR's target for a resolved symbolic one (`n` elements): literals as they are, a lone
/// symbolic entry as `-1`; of several, the last as `-1` when the rest divide `n` into exactly
/// it (`[n, 120, h*w]` from `n*120*h*w` elements: `[{n}, 120, -1]`, from which the IR infers
/// the same expression), every other one as its expression in the dims. `None` on a literal
/// beyond `i64`.
fn reshape_dims(resolved: &[DimExpr], n: &DimExpr) -> Option<Vec<ReshapeDim>> {
    let symbolic = resolved.iter().filter(|d| !d.is_constant()).count();
    let last = (0..resolved.len())
        .rev()
        .find(|&i| !resolved[i].is_constant())
        .filter(|&i| {
            if symbolic == 1 {
                return true;
            }
            let rest = resolved
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .try_fold(DimExpr::lit(1), |a, (_, d)| a.checked_mul(d));
            rest.and_then(|r| n.floor_div(&r)).as_ref() == Some(&resolved[i])
        });
    resolved
        .iter()
        .enumerate()
        .map(|(i, d)| match d.as_constant() {
            Some(c) => i64::try_from(c).ok().map(ReshapeDim::from_int),
            None if Some(i) == last => Some(ReshapeDim::Infer),
            None => Some(ReshapeDim::Size(d.clone())),
        })
        .collect()
}
