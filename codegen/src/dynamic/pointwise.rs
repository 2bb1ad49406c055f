//! `prelu`, `trilu` and the vector runs of arithmetic `binary` ops with run-time extents
//! (issue 18; `hard_sigmoid` is an element-wise function of `dynamic.rs`, `slice` and
//! `split` copies in `shape_ops.rs`).
//!
//! **The static kernels' values, per element.** `kernels::elementwise::prelu` computes
//! `x < 0 ? slope · x : x` with the slope broadcast to `x` (one `fmul`, one select), and
//! `trilu` keeps `x` where `j − i` is at least (upper) or at most (lower) `k` and stores
//! `+0.0` elsewhere. Here the same operations per element, over loops with run-time bounds.

use super::{args_dyn, broadcast_kernel, finish_call, refuse, Dk, DynSpec, DynTiles};
use crate::kernels::common::Call;
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::Gen;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;
use tir_ir::sym::DimExpr;
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

/// How an operand of an arithmetic `binary` is read along the result's innermost axes that
/// [`binary_runs`] computes as flat runs of vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Read {
    /// Its own elements, one per result element, contiguous along the run.
    Own,
    /// One element for the whole run (the operand is broadcast along every axis of it).
    Splat,
}

/// The count of the result's innermost axes along which each of `a` and `b` (NumPy
/// broadcasting onto `target`) is read one way, [`Read::Own`] or [`Read::Splat`], and how;
/// `None` when no axis qualifies. An axis of constant extent 1 goes with either. A scalar
/// operand (MobileNet's and PP-OCR's `x · w + b` with `w`, `b` of one element) is a splat
/// along every axis; a per-channel one (`[C, 1, 1]` onto `[N, C, H, W]`) along `H, W`.
pub(super) fn flat_runs(
    a: &[DimExpr],
    b: &[DimExpr],
    target: &[DimExpr],
) -> Option<(usize, [Read; 2])> {
    let read = |x: &[DimExpr], t: usize| -> Option<Read> {
        let off = target.len().checked_sub(x.len())?;
        if t < off {
            return Some(Read::Splat);
        }
        let xe = &x[t - off];
        if xe.as_constant() == Some(1) && target[t].as_constant() != Some(1) {
            Some(Read::Splat)
        } else if *xe == target[t] {
            Some(Read::Own)
        } else {
            None
        }
    };
    let mut modes: [Option<Read>; 2] = [None, None];
    let mut axes = 0;
    for t in (0..target.len()).rev() {
        if target[t].as_constant() == Some(1) {
            axes += 1;
            continue;
        }
        let now = [read(a, t)?, read(b, t)?];
        if modes
            .iter()
            .zip(now)
            .any(|(m, n)| m.is_some_and(|m| m != n))
        {
            break;
        }
        modes = now.map(Some);
        axes += 1;
    }
    match modes {
        [Some(ma), Some(mb)] => Some((axes, [ma, mb])),
        _ => None,
    }
}

/// `r = f(a, b)` over the result (`shape`, row-major) in flat runs of vectors along its
/// innermost `axes` ([`flat_runs`]), each operand loaded as a vector of its own elements or
/// splat from the one element the run reads (`strides`: the operands' broadcast strides),
/// the last vector of a run masked. A run is a row of the outer axes (each call's share of
/// the rows, [`Dk::split`]), or, with no outer axis, this call's share of the elements in
/// whole cache lines. Each lane is the scalar kernel's operation on the same two elements,
/// so the bytes are the nest's.
pub(super) fn binary_runs<'c>(
    d: &Dk<'_, 'c>,
    w: u32,
    shape: &[IntValue<'c>],
    strides: [&[IntValue<'c>]; 2],
    (axes, reads): (usize, [Read; 2]),
    [pa, pb, po]: [PointerValue<'c>; 3],
    f: &dyn Fn(VectorValue<'c>, VectorValue<'c>) -> R<VectorValue<'c>>,
) -> R<()> {
    let k = &d.k;
    let wl = w as i64;
    let outer = shape.len() - axes;
    let inner = d.prod(&shape[outer..])?;
    // One run `[lo, hi)` of the result's elements, the operands' runs starting at `bases`
    // and the result's at `bo` (an own operand advances with the result; a splat stays).
    let run = |lo: IntValue<'c>, hi: IntValue<'c>, bases: [IntValue<'c>; 2], bo: IntValue<'c>| {
        let splats = reads
            .iter()
            .zip(bases)
            .zip([pa, pb])
            .map(|((r, b), p)| match r {
                Read::Splat => Ok(Some(k.splat(k.ld(p, b)?, w)?)),
                Read::Own => Ok(None),
            })
            .collect::<R<Vec<_>>>()?;
        let operand = |x: usize, i: IntValue<'c>, mask: Option<VectorValue<'c>>| {
            if let Some(s) = splats[x] {
                return Ok(s);
            }
            let (p, at) = ([pa, pb][x], k.add(bases[x], i)?);
            match mask {
                Some(m) => d.ldv_mask(p, at, w, m),
                None => k.ldv(p, at, w),
            }
        };
        let span = llvm(k.b.build_int_sub(hi, lo, "span"))?;
        let whole = k.add(
            lo,
            k.mul(llvm(k.b.build_int_signed_div(span, k.c(wl), "v"))?, wl)?,
        )?;
        d.loop_step(lo, whole, wl, &mut |i| {
            let v = f(operand(0, i, None)?, operand(1, i, None)?)?;
            k.stv(po, k.add(bo, i)?, v)
        })?;
        let rest = llvm(k.b.build_int_sub(hi, whole, "rest"))?;
        let any = llvm(k.b.build_int_compare(IntPredicate::SGT, rest, k.c(0), "any"))?;
        k.when(any, &mut || {
            let mask = d.lanes_below(rest, w)?;
            let v = f(
                operand(0, whole, Some(mask))?,
                operand(1, whole, Some(mask))?,
            )?;
            d.stv_mask(po, k.add(bo, whole)?, v, mask)
        })
    };
    if outer == 0 {
        let (lo, hi) = d.split(inner, 64)?;
        let zero = k.c(0);
        return run(lo, hi, [zero, zero], zero);
    }
    let rows = d.prod(&shape[..outer])?;
    let (lo, hi) = d.split(rows, 1)?;
    d.loop_step(lo, hi, 1, &mut |row| {
        // The row's index on each outer axis, innermost first, then each operand's start.
        let mut bases = [k.c(0), k.c(0)];
        let mut rest = row;
        for a in (0..outer).rev() {
            let i = llvm(k.b.build_int_signed_rem(rest, shape[a], "i"))?;
            rest = llvm(k.b.build_int_signed_div(rest, shape[a], "r"))?;
            for (b, s) in bases.iter_mut().zip(strides) {
                *b = k.add(*b, d.imul(i, s[a])?)?;
            }
        }
        run(k.c(0), inner, bases, d.imul(row, inner)?)
    })
}
