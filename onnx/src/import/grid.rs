//! GridSample: the IR's `grid_sample` (two spatial axes; volumetric grids are refused).

use super::attrs::Attrs;
use super::{Importer, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use tir_ir::op::{GridPadding, GridSample, SampleMode};
use tir_ir::Op;

impl Importer {
    pub(super) fn grid_sample(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        // Opset 16 spells the modes `bilinear`/`bicubic`, opset 20 `linear`/`cubic`.
        let mode = match a.string("mode")?.as_deref().unwrap_or("linear") {
            "linear" | "bilinear" => SampleMode::Bilinear,
            "nearest" => SampleMode::Nearest,
            "cubic" | "bicubic" => SampleMode::Bicubic,
            other => {
                return Err(NodeError::StringValue {
                    what: "mode",
                    value: other.to_string(),
                    text: " (linear, nearest or cubic)",
                })
            }
        };
        let padding = match a.string("padding_mode")?.as_deref().unwrap_or("zeros") {
            "zeros" => GridPadding::Zeros,
            "border" => GridPadding::Border,
            "reflection" => GridPadding::Reflection,
            other => {
                return Err(NodeError::StringValue {
                    what: "padding_mode",
                    value: other.to_string(),
                    text: "",
                })
            }
        };
        let align_corners = a.int("align_corners")?.unwrap_or(0) != 0;
        let x = self.req_in(node, 0)?;
        let rank = self.sym_shape_of(&x).len();
        if rank != 4 {
            return Err(NodeError::ResizeRank { rank });
        }
        let (x, grid) = (self.in_value(node, 0)?, self.in_value(node, 1)?);
        self.emit(
            node,
            Op::GridSample(GridSample {
                mode,
                padding,
                align_corners,
            }),
            &[x, grid],
        )
    }
}
