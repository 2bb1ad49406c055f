//! Resize: nearest or (bi)linear over the two spatial axes of an NCHW tensor, to an output size
//! known at import time.

use super::attrs::{norm_axis, widen, Attrs};
use super::{static_dims, Importer, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::Tensor;
use std::rc::Rc;
use tir_ir::op::{CoordMode, NearestMode, Resize, ResizeMode};
use tir_ir::{DType, Op};

/// A string attribute's value that the importer does not implement.
fn unsupported(what: &'static str, value: &str, text: &'static str) -> NodeError {
    NodeError::StringValue {
        what,
        value: value.to_string(),
        text,
    }
}

impl Importer {
    pub(super) fn resize(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let xsym = self.sym_shape_of(&x);
        if xsym.len() != 4 {
            return Err(NodeError::ResizeRank { rank: xsym.len() });
        }
        let mode = match a.string("mode")?.as_deref().unwrap_or("nearest") {
            "nearest" => ResizeMode::Nearest,
            "linear" | "bilinear" => ResizeMode::Bilinear,
            other => return Err(unsupported("mode", other, " (nearest or linear)")),
        };
        let coord = match a
            .string("coordinate_transformation_mode")?
            .as_deref()
            .unwrap_or("half_pixel")
        {
            "half_pixel" => CoordMode::HalfPixel,
            "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
            "align_corners" => CoordMode::AlignCorners,
            "asymmetric" => CoordMode::Asymmetric,
            other => return Err(unsupported("coordinate_transformation_mode", other, "")),
        };
        let nearest = match a
            .string("nearest_mode")?
            .as_deref()
            .unwrap_or("round_prefer_floor")
        {
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            other => return Err(unsupported("nearest_mode", other, "")),
        };
        if a.int("antialias")?.unwrap_or(0) != 0 {
            return Err(NodeError::FlagSet {
                attribute: "antialias",
            });
        }
        if a.int("exclude_outside")?.unwrap_or(0) != 0 {
            return Err(NodeError::FlagSet {
                attribute: "exclude_outside",
            });
        }
        if let Some(p) = a.string("keep_aspect_ratio_policy")? {
            if p != "stretch" {
                return Err(unsupported("keep_aspect_ratio_policy", &p, ""));
            }
        }
        let axes: Vec<usize> = match a.ints("axes")? {
            Some(ax) => ax.iter().map(|&v| norm_axis(v, 4)).collect::<R<_>>()?,
            None => (0..4).collect(),
        };
        let nonempty = |t: Option<Rc<Tensor>>| t.filter(|t| t.numel() > 0);
        let scales = nonempty(self.const_in(node, 2, "scales")?);
        let sizes = nonempty(self.const_in(node, 3, "sizes")?);
        let xs = match static_dims(&xsym, "Resize (other than by whole-number scales)") {
            Ok(xs) => xs,
            Err(e) => {
                // A symbolic input: whole-number scales of the spatial axes give an output
                // whose extent the IR's `scale` form states for every input.
                let scale = match (&scales, &sizes) {
                    (Some(sc), None) => whole_scales(&sc.floats(), &axes),
                    _ => None,
                };
                let Some(scale) = scale else { return Err(e) };
                let r = Resize {
                    size: [0, 0],
                    scale: Some(scale),
                    mode,
                    coord,
                    nearest,
                };
                let x = self.in_value(node, 0)?;
                return self.emit(node, Op::Resize(r), &[x]);
            }
        };
        let mut out = xs.clone();
        match (scales, sizes) {
            (Some(_), Some(_)) => return Err(NodeError::ScalesAndSizes),
            (None, None) => return Err(NodeError::NoScalesNorSizes),
            (None, Some(s)) => {
                let s = s.ints();
                if s.len() != axes.len() {
                    return Err(NodeError::ResizeCount {
                        what: "sizes",
                        count: s.len(),
                        axes: axes.len(),
                    });
                }
                for (&ax, &v) in axes.iter().zip(&s) {
                    out[ax] = u64::try_from(v).map_err(|_| NodeError::NegativeSize { size: v })?;
                }
            }
            (Some(sc), None) => {
                let sc: Vec<f64> = if sc.dtype == DType::F32 {
                    sc.floats().iter().map(|&v| widen(v as f32)).collect()
                } else {
                    sc.floats()
                };
                if sc.len() != axes.len() {
                    return Err(NodeError::ResizeCount {
                        what: "scales",
                        count: sc.len(),
                        axes: axes.len(),
                    });
                }
                for (&ax, &s) in axes.iter().zip(&sc) {
                    if !(s > 0.0 && s.is_finite()) {
                        return Err(NodeError::ScaleNotPositive { scale: s });
                    }
                    let exact = xs[ax] as f64 * s;
                    // The IR maps coordinates with the ratio O / I; ONNX uses the given scale
                    // (align_corners included: its `length_resized` is I * scale, not floored).
                    // They agree when I * scale is (within float rounding) a whole number.
                    if (exact - exact.round()).abs() > 1e-4 * exact.max(1.0) {
                        return Err(NodeError::FractionalScale {
                            scale: s,
                            axis: ax,
                            size: xs[ax],
                            exact,
                        });
                    }
                    out[ax] = exact.round() as u64;
                }
            }
        }
        if out[0] != xs[0] || out[1] != xs[1] {
            return Err(NodeError::ResizeBatchOrChannel {
                from: [xs[0], xs[1]],
                to: [out[0], out[1]],
            });
        }
        if out[2] == 0 || out[3] == 0 {
            return Err(NodeError::ResizeEmpty {
                size: [out[2], out[3]],
            });
        }
        let r = Resize {
            size: [out[2], out[3]],
            scale: None,
            mode,
            coord,
            nearest,
        };
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Resize(r), &[x])
    }
}

/// `[sh, sw]` when `scales` (one per axis of `axes`) keep the batch and channel axes and scale
/// both spatial axes by whole numbers.
fn whole_scales(scales: &[f64], axes: &[usize]) -> Option<[u64; 2]> {
    if scales.len() != axes.len() {
        return None;
    }
    let mut out = [1.0f64; 4];
    for (&ax, &s) in axes.iter().zip(scales) {
        out[ax] = s;
    }
    let whole = |s: f64| ((1.0..=1e6).contains(&s) && s.fract() == 0.0).then_some(s as u64);
    match (whole(out[0]), whole(out[1]), whole(out[2]), whole(out[3])) {
        (Some(1), Some(1), Some(h), Some(w)) => Some([h, w]),
        _ => None,
    }
}
