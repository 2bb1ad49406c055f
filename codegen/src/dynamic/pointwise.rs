//! `prelu` and `trilu` with run-time extents (issue 18; `hard_sigmoid` is an element-wise
//! function of `dynamic.rs`, `slice` and `split` copies in `shape_ops.rs`).
//!
//! **The static kernels' values, per element.** `kernels::elementwise::prelu` computes
//! `x < 0 ? slope · x : x` with the slope broadcast to `x` (one `fmul`, one select), and
//! `trilu` keeps `x` where `j − i` is at least (upper) or at most (lower) `k` and stores
//! `+0.0` elsewhere. Here the same operations per element, over loops with run-time bounds.

use super::{args_dyn, broadcast_kernel, finish_call, refuse, DynSpec, DynTiles};
use crate::kernels::common::Call;
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::Gen;
use inkwell::values::IntValue;
use inkwell::IntPredicate;
use tir_ir::{Function, OpData};

/// `x < 0 ? slope · x : x`, the slope read with NumPy broadcasting over `x`'s shape.
pub(super) fn prelu<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Call<'c>> {
    // Tiles (issue 20): rows of the output; `x` is of the output's shape.
    let (args, d, shape, [_, ss, so]) = broadcast_kernel(g, spec, func, st, op, 2, name)?;
    let (px, ps, po) = (d.param(0)?, d.param(1)?, d.param(2)?);
    let k = &d.k;
    d.nest_split(&shape, &[so, ss], &mut |idx| {
        let v = k.ld(px, idx[0])?;
        let m = k.fmul(k.ld(ps, idx[1])?, v)?;
        k.st(po, idx[0], k.select_lt(v, k.f(0.0), m, v)?)
    })?;
    finish_call(g, d.f, &args)
}

/// The upper (`j − i ≥ k`) or lower (`j − i ≤ k`) triangle of each matrix of the last two
/// axes, `+0.0` elsewhere.
#[allow(clippy::too_many_arguments)]
pub(super) fn trilu<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    upper: bool,
    diag: i64,
    name: &str,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let od = spec.dims(func, r)?;
    let rank = od.len();
    if rank < 2 {
        return Err(refuse(spec, func, op, "a trilu below rank 2"));
    }
    let args = args_dyn(func, st, &[x, r])?;
    // Tiles (issue 20): rows of the output.
    let tiles = DynTiles::new(od.clone(), crate::parallel::work(1, 8), 8);
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, Some(tiles))?;
    let shape = d.dims_of(&od)?;
    let so = d.contiguous(&shape)?;
    let k = &d.k;
    // The row and column of each element, as two more stride sets of the nest.
    let unit = |axis: usize| -> Vec<IntValue<'c>> {
        (0..rank)
            .map(|a| if a == axis { k.c(1) } else { k.c(0) })
            .collect()
    };
    let (si, sj) = (unit(rank - 2), unit(rank - 1));
    let pred = if upper {
        IntPredicate::SGE
    } else {
        IntPredicate::SLE
    };
    let (px, po) = (d.param(0)?, d.param(1)?);
    d.nest_split(&shape, &[so, si, sj], &mut |idx| {
        let v = k.ld(px, idx[0])?;
        let off = llvm(k.b.build_int_sub(idx[2], idx[1], "d"))?;
        let keep = llvm(k.b.build_int_compare(pred, off, k.c(diag), "keep"))?;
        k.st(po, idx[0], k.fsel(keep, v, k.f(0.0))?)
    })?;
    finish_call(g, d.f, &args)
}
