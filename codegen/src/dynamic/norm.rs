//! `batch_norm` with run-time extents (issue 18): inference batch normalisation over a
//! tensor whose batch or spatial extents are known only at run time (the channels, axis 1,
//! are the parameters' and stay constant in practice, but may be run-time too).
//!
//! **The static kernel's order, per element.** `kernels::elementwise::batch_norm` computes
//! each element from its five operands in `f64`: `s · (x − μ) · (1 / √(σ² + ε)) + b`, then
//! rounds to `f32`. Here the same expression per element, the parameters read at the
//! element's channel.

use super::{args_dyn, finish_call, refuse, DynSpec, DynTiles};
use crate::kernels::common::Call;
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::Gen;
use tir_ir::{Function, OpData};

pub(super) fn batch_norm<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    epsilon: f64,
    name: &str,
) -> R<Call<'c>> {
    let r = op.results[0];
    let oe = spec.dims(func, r)?;
    if oe.len() < 2 || op.operands.len() != 5 {
        return Err(refuse(spec, func, op, "a batch_norm below rank 2"));
    }
    let mut vals = op.operands.clone();
    vals.push(r);
    let args = args_dyn(func, st, &vals)?;
    // Tiles (issue 20): rows of the output; a square root and a division per element.
    let tiles = DynTiles::new(oe.clone(), crate::parallel::work(24, 8), 8);
    let d = g.dyn_kernel_tiled(
        name,
        &args,
        &[false, false, false, false, false, true],
        &spec.symbols,
        Some(tiles),
    )?;
    let od = d.dims_of(&oe)?;
    let own = d.contiguous(&od)?;
    let k = &d.k;
    // The parameters' strides: 1 along the channel axis, 0 elsewhere.
    let mut chan = vec![k.c(0); od.len()];
    chan[1] = k.c(1);
    let ps: Vec<_> = (0..6).map(|i| d.param(i)).collect::<R<_>>()?;
    let f64t = k.ctx.f64_type();
    d.nest_split(&od, &[own, chan], &mut |idx| {
        let mut e = Vec::with_capacity(5);
        for (i, &p) in ps[..5].iter().enumerate() {
            let at = if i == 0 { idx[0] } else { idx[1] };
            e.push(llvm(k.b.build_float_ext(k.ld(p, at)?, f64t, "e"))?);
        }
        let (x, s, b, mu, var) = (e[0], e[1], e[2], e[3], e[4]);
        let inv = k.fdiv(
            f64t.const_float(1.0),
            k.sqrt(k.fadd(var, f64t.const_float(epsilon))?)?,
        )?;
        let y = k.fadd(k.fmul(k.fmul(s, k.fsub(x, mu)?)?, inv)?, b)?;
        k.st(ps[5], idx[0], llvm(k.b.build_float_trunc(y, k.f32t, "t"))?)
    })?;
    finish_call(g, d.f, &args)
}
