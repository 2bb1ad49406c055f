//! MatMul and Gemm.

use super::attrs::Attrs;
use super::{Importer, R};
use crate::proto::NodeProto;
use tir_ir::op::Gemm;
use tir_ir::Op;

impl Importer {
    pub(super) fn matmul(&mut self, node: &NodeProto) -> R<()> {
        let x = self.in_value(node, 0)?;
        let y = self.in_value(node, 1)?;
        self.emit(node, Op::MatMul { activation: None }, &[x, y])
    }

    pub(super) fn gemm(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let g = Gemm {
            trans_a: a.int("transA")?.unwrap_or(0) != 0,
            trans_b: a.int("transB")?.unwrap_or(0) != 0,
            alpha: a.float("alpha")?.unwrap_or(1.0),
            beta: a.float("beta")?.unwrap_or(1.0),
            activation: None,
        };
        let x = self.in_value(node, 0)?;
        let y = self.in_value(node, 1)?;
        let mut ops = vec![x, y];
        ops.extend(self.opt_in_value(node, 2)?);
        self.emit(node, Op::Gemm(g), &ops)
    }
}
