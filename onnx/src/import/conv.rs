//! Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool: 2-D (NCHW) only, padding
//! resolved statically (`auto_pad` and ConvTranspose's `output_shape` included).

use super::attrs::{to_u64s, two, Attrs};
use super::{static_dims, Importer, R};
use crate::error::{AttrError, NodeError};
use crate::proto::NodeProto;
use tir_ir::op::{Conv2d, ConvTranspose, Pool2d};
use tir_ir::{DimExpr, Op};

/// What Conv and ConvTranspose read alike.
struct ConvAttrs {
    /// The input's shape (rank 4).
    /// The input's shape (symbolic dims allowed; only SAME padding and `output_shape` need
    /// them static).
    xs: Vec<DimExpr>,
    /// The weight's spatial size (a `kernel_shape` must match it).
    kernel: [u64; 2],
    strides: [u64; 2],
    dilations: [u64; 2],
    groups: i64,
}

impl Importer {
    /// The ranks (4-D input and weight), the kernel, strides, dilations (positive) and group
    /// (positive) of a Conv or ConvTranspose node.
    fn conv_attrs(&self, node: &NodeProto, a: &Attrs) -> R<ConvAttrs> {
        let x = self.req_in(node, 0)?;
        let w = self.req_in(node, 1)?;
        let xs = self.sym_shape_of(&x);
        let ws = self.shape_of(&w)?;
        if xs.len() != 4 || ws.len() != 4 {
            return Err(NodeError::ConvRank {
                input: xs.len(),
                weight: ws.len(),
            });
        }
        let kernel = [ws[2], ws[3]];
        if let Some(k) = a.ints("kernel_shape")? {
            if to_u64s("kernel_shape", &k)? != kernel {
                return Err(NodeError::KernelShape {
                    attribute: k,
                    weight: kernel,
                });
            }
        }
        let strides = two(
            "strides",
            &to_u64s("strides", &a.ints("strides")?.unwrap_or(vec![1, 1]))?,
        )?;
        let dilations = two(
            "dilations",
            &to_u64s("dilations", &a.ints("dilations")?.unwrap_or(vec![1, 1]))?,
        )?;
        if strides.contains(&0) || dilations.contains(&0) {
            return Err(NodeError::NotPositive {
                what: "strides and dilations",
            });
        }
        let groups = a.int("group")?.unwrap_or(1);
        if groups <= 0 {
            return Err(AttrError::NotPositive {
                name: "group",
                value: groups,
            }
            .into());
        }
        Ok(ConvAttrs {
            xs,
            kernel,
            strides,
            dilations,
            groups,
        })
    }

    pub(super) fn conv(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let ConvAttrs {
            xs,
            kernel,
            strides,
            dilations,
            groups,
        } = self.conv_attrs(node, a)?;
        let pads = spatial_pads(a, &xs, kernel, strides, dilations)?;
        let c = Conv2d {
            strides,
            dilations,
            pads,
            groups: groups as u64,
            activation: None,
            prelu: false,
        };
        let x = self.in_value(node, 0)?;
        let w = self.in_value(node, 1)?;
        let mut ops = vec![x, w];
        ops.extend(self.opt_in_value(node, 2)?);
        self.emit(node, Op::Conv2d(c), &ops)
    }

    /// ConvTranspose: `pads`, `auto_pad` and `output_shape` all become the IR's crop (`pads`)
    /// and `output_padding`, as ONNX's reference computes them: the full output is
    /// `s·(in - 1) + output_padding + d·(k - 1) + 1`; with `output_shape` (or SAME, whose
    /// output is `in·s`) the difference to it is split SAME_UPPER-style (the odd pixel at the
    /// end) or else at the start, unless explicit `pads` fix the start; an output larger than
    /// the full one gets the extra rows as output padding.
    pub(super) fn conv_transpose(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let ConvAttrs {
            xs,
            kernel,
            strides,
            dilations,
            groups,
        } = self.conv_attrs(node, a)?;
        let output_padding = two(
            "output_padding",
            &to_u64s(
                "output_padding",
                &a.ints("output_padding")?.unwrap_or(vec![0, 0]),
            )?,
        )?;
        let auto = a.string("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
        let explicit = match a.ints("pads")? {
            Some(p) if auto == "NOTSET" => {
                let p = to_u64s("pads", &p)?;
                match p.as_slice() {
                    [t, l, b, r] => Some([*t, *l, *b, *r]),
                    _ => return Err(NodeError::PadsCount { count: p.len() }),
                }
            }
            _ => None,
        };
        let output_shape = match a.ints("output_shape")? {
            // The spatial dimensions, or (as some exporters write it) the whole shape.
            Some(o) if o.len() == 2 || o.len() == 4 => Some(two(
                "output_shape",
                &to_u64s("output_shape", &o[o.len() - 2..])?,
            )?),
            Some(o) => {
                return Err(NodeError::NotTwoD {
                    what: "output_shape",
                    count: o.len(),
                })
            }
            None => None,
        };
        let same = match auto.as_str() {
            "NOTSET" | "VALID" => false,
            "SAME_UPPER" | "SAME_LOWER" => true,
            _ => return Err(NodeError::AutoPad { value: auto }),
        };
        let mut pads = explicit.unwrap_or([0; 4]);
        let mut extra = output_padding;
        for i in 0..2 {
            if output_shape.is_none() && !same {
                continue;
            }
            let xs = static_dims(&xs, "ConvTranspose's SAME padding or output_shape")?;
            let full = i128::from(strides[i]) * (i128::from(xs[2 + i]) - 1)
                + i128::from(output_padding[i])
                + i128::from(dilations[i]) * (i128::from(kernel[i]) - 1)
                + 1;
            let out = match output_shape {
                Some(o) => i128::from(o[i]),
                None => i128::from(xs[2 + i]) * i128::from(strides[i]),
            };
            let total = full - out;
            let begin = if auto == "VALID" {
                0
            } else if explicit.is_some() {
                i128::from(pads[i])
            } else if auto == "SAME_UPPER" {
                total.div_euclid(2)
            } else {
                total - total.div_euclid(2)
            };
            let end = total - begin;
            if begin < 0 || begin > i128::from(u64::MAX) || end > i128::from(u64::MAX) {
                return Err(NodeError::ConvTransposeOutput { axis: i, full, out });
            }
            pads[i] = begin as u64;
            if end >= 0 {
                pads[2 + i] = end as u64;
            } else {
                pads[2 + i] = 0;
                extra[i] = u64::try_from(i128::from(output_padding[i]) - end).map_err(|_| {
                    NodeError::Overflow {
                        what: "output_padding",
                    }
                })?;
            }
        }
        let c = ConvTranspose {
            strides,
            dilations,
            pads,
            output_padding: extra,
            groups: groups as u64,
            activation: None,
        };
        let x = self.in_value(node, 0)?;
        let w = self.in_value(node, 1)?;
        let mut ops = vec![x, w];
        ops.extend(self.opt_in_value(node, 2)?);
        self.emit(node, Op::ConvTranspose(c), &ops)
    }

    pub(super) fn pool(&mut self, node: &NodeProto, op_type: &str, a: &Attrs) -> R<()> {
        self.only_first_outputs(node, 1)?;
        let x = self.req_in(node, 0)?;
        let xs = self.sym_shape_of(&x);
        if xs.len() != 4 {
            return Err(NodeError::PoolRank { rank: xs.len() });
        }
        let kernel = two(
            "kernel_shape",
            &to_u64s(
                "kernel_shape",
                &a.ints("kernel_shape")?.ok_or(AttrError::Missing {
                    name: "kernel_shape",
                })?,
            )?,
        )?;
        if kernel.contains(&0) {
            return Err(NodeError::NotPositive {
                what: "kernel_shape",
            });
        }
        let strides = two(
            "strides",
            &to_u64s("strides", &a.ints("strides")?.unwrap_or(vec![1, 1]))?,
        )?;
        if strides.contains(&0) {
            return Err(NodeError::NotPositive { what: "strides" });
        }
        if let Some(d) = a.ints("dilations")? {
            if d.iter().any(|&v| v != 1) {
                return Err(NodeError::PoolDilations { dilations: d });
            }
        }
        if a.int("storage_order")?.unwrap_or(0) != 0 {
            return Err(NodeError::FlagSet {
                attribute: "storage_order",
            });
        }
        let pads = spatial_pads(a, &xs, kernel, strides, [1, 1])?;
        let p = Pool2d {
            kernel,
            strides,
            pads,
            ceil_mode: a.int("ceil_mode")?.unwrap_or(0) != 0,
            count_include_pad: a.int("count_include_pad")?.unwrap_or(0) != 0,
        };
        let op = if op_type == "MaxPool" {
            Op::MaxPool(p)
        } else {
            Op::AvgPool(p)
        };
        let x = self.in_value(node, 0)?;
        self.emit(node, op, &[x])
    }

    pub(super) fn global_avg_pool(&mut self, node: &NodeProto) -> R<()> {
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::GlobalAvgPool, &[x])
    }
}

/// `pads` or the padding `auto_pad` implies, as `[top, left, bottom, right]`.
fn spatial_pads(
    a: &Attrs,
    xs: &[DimExpr],
    kernel: [u64; 2],
    strides: [u64; 2],
    dilations: [u64; 2],
) -> R<[u64; 4]> {
    let auto = a.string("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
    match auto.as_str() {
        "NOTSET" => {
            let p = to_u64s("pads", &a.ints("pads")?.unwrap_or(vec![0; 4]))?;
            match p.as_slice() {
                [t, l, b, r] => Ok([*t, *l, *b, *r]),
                _ => Err(NodeError::PadsCount { count: p.len() }),
            }
        }
        "VALID" => Ok([0; 4]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let xs = static_dims(xs, "SAME padding")?;
            let mut p = [0u64; 4];
            for i in 0..2 {
                let inp = xs[2 + i];
                let out = inp.div_ceil(strides[i]);
                let eff = dilations[i]
                    .saturating_mul(kernel[i].max(1) - 1)
                    .saturating_add(1);
                let total = (out.saturating_sub(1))
                    .saturating_mul(strides[i])
                    .saturating_add(eff)
                    .saturating_sub(inp);
                let small = total / 2;
                let (begin, end) = if auto == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                p[i] = begin;
                p[i + 2] = end;
            }
            Ok(p)
        }
        _ => Err(NodeError::AutoPad { value: auto }),
    }
}
