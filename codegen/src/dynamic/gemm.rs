//! `gemm` (ONNX Gemm: `alpha · op(A) · op(B) + beta · C`) with run-time extents (issue 18);
//! in practice a batch `M` known only at run time against weights of constant `K × N`.
//!
//! **The static kernel's order, per element** (`kernels::matmul::gemm_op`):
//! - B transposed and computed (no contiguous row of B for the micro-kernel): per output one
//!   `f32` sum of `a · b` in K order from zero, times `alpha`, then (without C) the
//!   activation. Here the same loop.
//! - otherwise the tiled GEMM with `alpha` in its epilogue: [`super::dgemm`], the one FMA
//!   chain per output in K order (or the matrix-vector product's partial sums when N is 1),
//!   and the same lane-by-lane epilogue. A transposed A is refused here (the dynamic tiles
//!   read rows of A).
//! - with C, a second kernel: `act(fma(beta, c, y))` per element, C broadcast.

use super::{
    args_dyn, broadcast_strides, dgemm_share, finish_call, refuse, row_share, DynSpec, DynTiles,
    TWO_IN_ONE_OUT,
};
use crate::kernels::common::{activation, Call};
use crate::kernels::gemm::Epilogue;
use crate::nest::R;
use crate::storage::Storage;
use crate::Gen;
use tir_ir::{Function, OpData};

pub(super) fn gemm<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    gm: &tir_ir::op::Gemm,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (a, b, r) = (op.operands[0], op.operands[1], op.results[0]);
    let cin = op.operands.get(2).copied();
    let (ae, oe) = (spec.dims(func, a)?, spec.dims(func, r)?);
    if ae.len() != 2 || oe.len() != 2 {
        return Err(refuse(spec, func, op, "a gemm of operands not of rank 2"));
    }
    let ke = if gm.trans_a { &ae[0] } else { &ae[1] };
    let b_pre_transposed = gm.trans_b && st.transposed.contains(&b);
    // With C, the activation waits for `+ beta * C`.
    let act = if cin.is_some() { None } else { gm.activation };
    let alpha = gm.alpha as f32 as f64;
    let args = args_dyn(func, st, &[a, b, r])?;
    let mut calls = Vec::new();
    // Tiles (issue 20): rows of the product; two FLOPs per output and K.
    let mut elems = oe.clone();
    elems.push(ke.clone());
    let tiles = DynTiles::new(elems, 2, 8);
    if gm.trans_b && !b_pre_transposed {
        let d = g.dyn_kernel_tiled(name, &args, &TWO_IN_ONE_OUT, &spec.symbols, Some(tiles))?;
        let (m, n, kk) = (d.dim(&oe[0])?, d.dim(&oe[1])?, d.dim(ke)?);
        let (lo, hi) = d.split(m, 1)?;
        let (a_rs, a_cs) = if gm.trans_a {
            (d.k.c(1), m)
        } else {
            (kk, d.k.c(1))
        };
        let (pa, pb, po) = (d.param(0)?, d.param(1)?, d.param(2)?);
        let k = &d.k;
        d.loop_step(lo, hi, 1, &mut |i| {
            let ar = d.imul(i, a_rs)?;
            d.loop_step(k.c(0), n, 1, &mut |j| {
                let br = d.imul(j, kk)?;
                let acc = d.carry(k.c(0), kk, 1, vec![k.f(0.0).into()], &mut |l, cur| {
                    let av = k.ld(pa, k.add(ar, d.imul(l, a_cs)?)?)?;
                    let bv = k.ld(pb, k.add(br, l)?)?;
                    let p = k.fmul(av, bv)?;
                    Ok(vec![k.fadd(cur[0].into_float_value(), p)?.into()])
                })?;
                let v = k.fmul(k.f(alpha), acc[0].into_float_value())?;
                let v = activation(k, act, v)?;
                k.st(po, k.add(d.imul(i, n)?, j)?, v)
            })
        })?;
        calls.push(finish_call(g, d.f, &args)?);
    } else {
        if gm.trans_a {
            return Err(refuse(spec, func, op, "a gemm with trans_a"));
        }
        let k_static = ke.as_constant().map(|x| x as i64);
        let n_static = oe[1].as_constant().map(|x| x as i64);
        // As matmul: the static kernel's choice of the matrix-vector product needs K here.
        if k_static.is_none() && n_static.map_or(true, |n| n == 1) {
            return Err(refuse(
                spec,
                func,
                op,
                "a gemm whose K and N are both run-time",
            ));
        }
        let d = g.dyn_kernel_tiled(name, &args, &TWO_IN_ONE_OUT, &spec.symbols, Some(tiles))?;
        let (m, n, kk) = (d.dim(&oe[0])?, d.dim(&oe[1])?, d.dim(ke)?);
        let (pa, pb, po) = (d.param(0)?, d.param(1)?, d.param(2)?);
        // A share of whole 6-row tiles; each row summed as the whole product sums it.
        let share = row_share(&d, g.width, m)?;
        let epi = Epilogue {
            alpha,
            row_bias: None,
            row_slope: None,
            act,
        };
        dgemm_share(
            &d,
            g.width,
            (pa, pb, po),
            share,
            (kk, n),
            (k_static, n_static),
            epi,
        )?;
        calls.push(finish_call(g, d.f, &args)?);
    }
    if let Some(cv) = cin {
        let beta = gm.beta as f32 as f64;
        let act = gm.activation;
        let cargs = args_dyn(func, st, &[r, cv])?;
        // Tiles (issue 20): rows of the product, one FMA per element.
        let ctiles = DynTiles::new(oe.clone(), crate::parallel::work(2, 12), 8);
        let d = g.dyn_kernel_tiled(
            &format!("{name}_c"),
            &cargs,
            &[true, false],
            &spec.symbols,
            Some(ctiles),
        )?;
        let od = d.dims_of(&oe)?;
        let so = d.contiguous(&od)?;
        let sc = broadcast_strides(&d, &spec.dims(func, cv)?, &oe)
            .map_err(|w| refuse(spec, func, op, &w))?;
        let (po, pc) = (d.param(0)?, d.param(1)?);
        let k = &d.k;
        d.nest_split(&od, &[so, sc], &mut |idx| {
            let y = k.ld(po, idx[0])?;
            let c = k.ld(pc, idx[1])?;
            let v = activation(k, act, k.fma(k.f(beta), c, y)?)?;
            k.st(po, idx[0], v)
        })?;
        calls.push(finish_call(g, d.f, &cargs)?);
    }
    Ok(calls)
}
