//! The reductions (`reduce_mean`, `reduce_sum`, `reduce_max`, … every [`ReduceKind`]) with
//! run-time extents (issue 18).
//!
//! **The static kernel's order, per element.** `kernels::gather::reduce` keeps the kept axes
//! outside and walks the reduced ones inside in the input's row-major order, one `f64`
//! accumulator from [`ReduceKind::init`] stepped by `reduce_step` per element, then the
//! kind's finish (mean's division by the count, L2's square root, the logarithms). Here the
//! same walk runs with run-time extents, the same step per element, and mean divides by the
//! same count (an integer, converted exactly).

use super::{args_dyn, finish_call, refuse, DynSpec, DynTiles};
use crate::kernels::common::Call;
use crate::kernels::gather::reduce_step;
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::{CodegenError, Gen};
use inkwell::values::IntValue;
use tir_ir::op::ReduceKind;
use tir_ir::{Function, OpData};

#[allow(clippy::too_many_arguments)]
pub(super) fn reduce<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    kind: ReduceKind,
    axes: &[i64],
    name: &str,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let xe = spec.dims(func, x)?;
    let rank = xe.len();
    let reduced: Vec<usize> = if axes.is_empty() {
        (0..rank).collect()
    } else {
        axes.iter()
            .map(|&a| tir_ir::shape::norm_axis(a, rank))
            .collect::<Result<_, _>>()
            .map_err(|_| refuse(spec, func, op, "a reduction axis"))?
    };
    let args = args_dyn(func, st, &[x, r])?;
    // Tiles (issue 20): the outputs (the kept axes' rows), each a whole reduction; a full
    // reduction is one output, on one tile.
    let tiles = (0..rank)
        .any(|a| !reduced.contains(&a))
        .then(|| DynTiles::new(xe.clone(), crate::parallel::work(2, 4), 8));
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, tiles)?;
    let k = &d.k;
    let f64t = k.ctx.f64_type();
    // The accumulator, in the entry block (where the builder still is) so it is promoted.
    let accp = llvm(k.b.build_alloca(f64t, "acc"))?;
    let xd = d.dims_of(&xe)?;
    let xs = d.contiguous(&xd)?;
    let kept: Vec<usize> = (0..rank).filter(|a| !reduced.contains(a)).collect();
    let red: Vec<usize> = (0..rank).filter(|a| reduced.contains(a)).collect();
    // The output's element order is the kept axes' (keepdims or not): their own strides.
    let kd: Vec<IntValue> = kept.iter().map(|&a| xd[a]).collect();
    let ko = d.contiguous(&kd)?;
    let kx: Vec<IntValue> = kept.iter().map(|&a| xs[a]).collect();
    let rd: Vec<IntValue> = red.iter().map(|&a| xd[a]).collect();
    let rx: Vec<IntValue> = red.iter().map(|&a| xs[a]).collect();
    let count = d.prod(&rd)?;
    let count_f = llvm(k.b.build_signed_int_to_float(count, f64t, "n"))?;
    let (px, po) = (d.param(0)?, d.param(1)?);
    d.nest_split(&kd, &[ko, kx], &mut |idx| {
        let (io, base) = (idx[0], idx[1]);
        llvm(k.b.build_store(accp, f64t.const_float(kind.init())))?;
        d.nest(&rd, std::slice::from_ref(&rx), &mut |ri| {
            let e = k.ld(px, k.add(base, ri[0])?)?;
            let v = llvm(k.b.build_float_ext(e, f64t, "d"))?;
            let a = llvm(k.b.build_load(accp, "a"))?.into_float_value();
            let s = reduce_step(k, kind, a, v)?;
            llvm(k.b.build_store(accp, s))?;
            Ok(())
        })?;
        let a = llvm(k.b.build_load(accp, "a"))?.into_float_value();
        let m = match kind {
            ReduceKind::Mean => k.fdiv(a, count_f)?,
            ReduceKind::L2 => k.sqrt(a)?,
            ReduceKind::LogSum | ReduceKind::LogSumExp => {
                let log = k.intrinsic("llvm.log", &[f64t.into()])?;
                llvm(k.b.build_call(log, &[a.into()], "l"))?
                    .try_as_basic_value()
                    .basic()
                    .map(|v| v.into_float_value())
                    .ok_or_else(|| CodegenError::Llvm("log returned no value".into()))?
            }
            _ => a,
        };
        k.st(po, io, llvm(k.b.build_float_trunc(m, k.f32t, "m"))?)
    })?;
    finish_call(g, d.f, &args)
}
