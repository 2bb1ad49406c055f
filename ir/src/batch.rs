//! Whether a dynamic function is *independent along a symbolic leading dimension* (a batch):
//! then running it at batch `B` is running the same function at batch 1 on each of the `B`
//! samples, and a program compiled once at batch 1 serves every batch size (the executable's
//! per-sample loop, `tirc compile` of a model whose only symbolic dim is its batch).
//!
//! The condition, checked on the verified symbolic types: every output is computed from the
//! parameters, and every value computed from the parameters has `b` as its first dim and nowhere else (so no
//! op moves, merges, reduces, pads, slices or concatenates the batch axis: each of those
//! changes the first dim), every parameter too, and no op that keeps the shape but mixes
//! along an axis (`softmax`, `log_softmax`, `layer_norm`) works along axis 0. Values not
//! computed from the parameters (weights, and what folds from them) are static.

use crate::op::Op;
use crate::sym::DimExpr;
use crate::{EntityRef, Function};

/// `Ok` if `f` is independent along the symbol `b` (see the module doc; other symbols may
/// appear where `b` does not: they are given values before compiling), else why not.
pub fn check_leading_batch(f: &Function, b: &str) -> Result<(), String> {
    let batch = DimExpr::sym(b);
    let mut dependent = vec![false; f.values.len()];
    let leading = |v: crate::Value, what: &str| -> Result<(), String> {
        let t = f.values[v]
            .sym_type()
            .ok_or_else(|| format!("{} has no type", f.value_name(v)))?;
        let first_ok = t.shape.first() == Some(&batch);
        let rest_ok = t.shape.iter().skip(1).all(|d| !d.symbols().contains(b));
        if first_ok && rest_ok {
            Ok(())
        } else {
            Err(format!(
                "{what} {} has type {t}: the dim `{b}` must be its first dim and nowhere else",
                f.value_name(v)
            ))
        }
    };
    for &p in &f.params {
        dependent[p.index()] = true;
        leading(p, "the input")?;
    }
    for &id in &f.layout {
        let data = &f.ops[id];
        if !data.operands.iter().any(|v| dependent[v.index()]) {
            continue;
        }
        let name = data.op.name();
        let along = match &data.op {
            Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::LayerNorm { axis, .. } => {
                Some(*axis)
            }
            _ => None,
        };
        if let Some(axis) = along {
            let rank = f.values[data.operands[0]]
                .sym_type()
                .map_or(0, |t| t.rank()) as i64;
            if axis == 0 || axis == -rank {
                return Err(format!(
                    "`{name}` along axis 0 mixes the samples of the batch `{b}`"
                ));
            }
        }
        for &r in &data.results {
            dependent[r.index()] = true;
            leading(r, &format!("the result of `{name}`"))?;
        }
    }
    // Every output gets the batch first, per sample: one computed from weights alone has none.
    for &v in &f.returns {
        if !dependent[v.index()] {
            return Err(format!(
                "the output {} does not depend on the inputs, so it has no batch",
                f.value_name(v)
            ));
        }
    }
    Ok(())
}
