//! Copies and gathers with run-time extents (issue 18): `concat` along any axis, `slice`
//! (and `split`, bufferized as slices), `pad`
//! (constant, reflect, edge) and `resize` (nearest and bilinear, every coordinate mode) when
//! the extents they move are known only at run time.
//!
//! **The static kernels' values, per element.** `concat` and constant `pad` copy elements
//! (and `pad` fills with the constant the static fill stores), so any loop order gives the
//! static bits. Reflect and edge `pad` read the element [`pad_source`] names; `resize` reads
//! the taps of `resize_taps` and, bilinear, computes `a·(1−t) + b·t` in `f64` per axis, as the
//! static kernel (`kernels/gather.rs`) does. The static kernels read their index maps and
//! weights from tables built at compile time; here the same integer arithmetic runs per
//! output row and column (`i64`, exact at any size whose elements fit memory), and the
//! weight is the same quotient of two exactly converted integers, so the `f64` weights, and
//! the bits, are the static ones.
//!
//! `concat` copies each operand into its slice: a dynamic compile never lets a producer write
//! straight into the slice (`PlanPolicy::concat_slices` is off), whose offset would depend on
//! the shape.
//!
//! [`pad_source`]: crate::kernels::gather

use super::{args_dyn, finish_call, refuse, Dk, DynSpec, DynTiles};
use crate::kernels::common::Call;
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::Gen;
use inkwell::values::{FloatValue, IntValue, PointerValue};
use inkwell::IntPredicate;
use tir_ir::op::{CoordMode, NearestMode, PadMode, Resize, ResizeMode, Slice};
use tir_ir::shape::norm_axis;
use tir_ir::{Function, OpData};

impl<'a, 'c> Dk<'a, 'c> {
    fn isub(&self, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        llvm(self.k.b.build_int_sub(a, b, "s"))
    }

    fn cmp(&self, p: IntPredicate, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        llvm(self.k.b.build_int_compare(p, a, b, "c"))
    }

    fn pick(&self, c: IntValue<'c>, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        Ok(llvm(self.k.b.build_select(c, a, b, "p"))?.into_int_value())
    }

    /// `x` clamped into `lo..=hi` (`hi >= lo`).
    fn clamp(&self, x: IntValue<'c>, lo: IntValue<'c>, hi: IntValue<'c>) -> R<IntValue<'c>> {
        let below = self.cmp(IntPredicate::SLT, x, lo)?;
        let x = self.pick(below, lo, x)?;
        let above = self.cmp(IntPredicate::SGT, x, hi)?;
        self.pick(above, hi, x)
    }

    /// `⌊a / b⌋` and `a − b·⌊a / b⌋` for `b > 0` (Rust's `div_euclid`, `rem_euclid`).
    fn div_rem_euclid(&self, a: IntValue<'c>, b: IntValue<'c>) -> R<(IntValue<'c>, IntValue<'c>)> {
        let k = &self.k;
        let q = llvm(k.b.build_int_signed_div(a, b, "q"))?;
        let r = llvm(k.b.build_int_signed_rem(a, b, "r"))?;
        let neg = self.cmp(IntPredicate::SLT, r, k.c(0))?;
        let q = self.pick(neg, self.isub(q, k.c(1))?, q)?;
        let r = self.pick(neg, k.add(r, b)?, r)?;
        Ok((q, r))
    }

    /// `any(xs == 0)`, as an `i1`.
    fn any_zero(&self, xs: &[IntValue<'c>]) -> R<IntValue<'c>> {
        let mut any = self.k.ctx.bool_type().const_zero();
        for &x in xs {
            let z = self.cmp(IntPredicate::EQ, x, self.k.c(0))?;
            any = llvm(self.k.b.build_or(any, z, "z"))?;
        }
        Ok(any)
    }
}

/// Each operand copied into its slice of the output: `outer × chunk` elements to the
/// output's `outer × out_chunk` rows at the slice's start, which is the run-time sum of the
/// chunks before it.
pub(super) fn concat<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    axis: i64,
    name: &str,
) -> R<Call<'c>> {
    let r = op.results[0];
    let oe = spec.dims(func, r)?;
    let ax = norm_axis(axis, oe.len()).map_err(|_| refuse(spec, func, op, "a concat axis"))?;
    let out = st.of(func, r)?;
    // An operand at the output's own bytes is already in its (first) slice only when there
    // is one outer row; concat slices are not shared in a dynamic compile, so this is a view.
    let mut copied = Vec::new();
    for (i, &x) in op.operands.iter().enumerate() {
        let here = st.of(func, x)? == out;
        let one_row = oe[..ax].iter().all(|e| e.as_constant() == Some(1));
        match (here, i == 0 && one_row) {
            (false, _) => copied.push(true),
            (true, true) => copied.push(false),
            (true, false) => {
                return Err(refuse(
                    spec,
                    func,
                    op,
                    "a concat operand sharing its output's bytes",
                ))
            }
        }
    }
    let mut vals = op.operands.clone();
    vals.push(r);
    let args = args_dyn(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    // Tiles of each operand's elements (a tile takes the same share of every operand): a
    // copy, so any cut gives the same bits.
    let tiles = DynTiles::new(oe.clone(), crate::parallel::work(0, 8), 8);
    let d = g.dyn_kernel_tiled(name, &args, &writes, &spec.symbols, Some(tiles))?;
    let od = d.dims_of(&oe)?;
    let outer = d.prod(&od[..ax])?;
    let inner = d.prod(&od[ax + 1..])?;
    let out_chunk = d.imul(od[ax], inner)?;
    let po = d.param(op.operands.len() as u32)?;
    let k = &d.k;
    let mut pos = k.c(0);
    for (i, &x) in op.operands.iter().enumerate() {
        let xe = spec.dims(func, x)?;
        let chunk = d.imul(d.dim(&xe[ax])?, inner)?;
        if copied[i] {
            let px = d.param(i as u32)?;
            let at = pos;
            // This tile's elements `[lo, hi)` of the operand's `outer × chunk`, by rows: the
            // rows they touch, each clipped to the range.
            let (lo, hi) = d.split(d.imul(outer, chunk)?, 64)?;
            let some = d.cmp(IntPredicate::SLT, lo, hi)?;
            k.when(some, &mut || {
                // `chunk` is not zero here (the range is not empty).
                let r0 = llvm(k.b.build_int_signed_div(lo, chunk, "r0"))?;
                let r1 = llvm(k.b.build_int_signed_div(
                    k.add(hi, d.isub(chunk, k.c(1))?)?,
                    chunk,
                    "r1",
                ))?;
                d.loop_step(r0, r1, 1, &mut |o| {
                    let src = d.imul(o, chunk)?;
                    let dst = k.add(d.imul(o, out_chunk)?, at)?;
                    let j0 =
                        d.pick(d.cmp(IntPredicate::SGT, lo, src)?, d.isub(lo, src)?, k.c(0))?;
                    let end = k.add(src, chunk)?;
                    let j1 = d.pick(d.cmp(IntPredicate::SLT, hi, end)?, d.isub(hi, src)?, chunk)?;
                    d.loop_step(j0, j1, 1, &mut |j| {
                        k.st(po, k.add(dst, j)?, k.ld(px, k.add(src, j)?)?)
                    })
                })
            })?;
        }
        pos = k.add(pos, chunk)?;
    }
    finish_call(g, d.f, &args)
}

/// What a kernel from one operand to one result starts with: both tensors' run-time extents
/// and row-major strides, and their pointers.
struct Io<'c> {
    xd: Vec<IntValue<'c>>,
    xs: Vec<IntValue<'c>>,
    od: Vec<IntValue<'c>>,
    os: Vec<IntValue<'c>>,
    px: PointerValue<'c>,
    po: PointerValue<'c>,
}

/// The kernel of `op` from its first operand `x` to its result (`void name(x, out, dims)`),
/// positioned in its entry block, with [`Io`]; with `tiled`, cut into tiles of the result's
/// rows (a copy per element), which its body must take with [`Dk::nest_split`].
fn copy_kernel<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
    tiled: bool,
) -> R<(Dk<'a, 'c>, Vec<crate::Arg>, Io<'c>)> {
    let (x, r) = (op.operands[0], op.results[0]);
    let args = args_dyn(func, st, &[x, r])?;
    let tiles = if tiled {
        Some(DynTiles::new(
            spec.dims(func, r)?,
            crate::parallel::work(0, 8),
            8,
        ))
    } else {
        None
    };
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, tiles)?;
    let xd = d.dims_of(&spec.dims(func, x)?)?;
    let od = d.dims_of(&spec.dims(func, r)?)?;
    let io = Io {
        xs: d.contiguous(&xd)?,
        os: d.contiguous(&od)?,
        xd,
        od,
        px: d.param(0)?,
        po: d.param(1)?,
    };
    Ok((d, args, io))
}

/// `slice` (and `split`, which bufferization rewrites as one slice per result): the output
/// read from the input at each sliced axis's start with the step as a stride, the static
/// kernel's start (`kernels/copy.rs`: a negative start counted from the end, clamped into
/// `0..=d`, or `-1..=d-1` for a negative step) computed at run time from the axis's extent.
/// A copy: any loop order gives the static bits.
pub(super) fn slice<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    s: &Slice,
    name: &str,
) -> R<Call<'c>> {
    let (d, args, io) = copy_kernel(g, spec, func, st, op, name, true)?;
    let k = &d.k;
    let rank = io.xd.len();
    let mut strides = io.xs.clone();
    let mut base = k.c(0);
    for (i, &start) in s.starts.iter().enumerate() {
        let axis = s.axes.get(i).copied().unwrap_or(i as i64);
        let ax = norm_axis(axis, rank).map_err(|_| refuse(spec, func, op, "a slice axis"))?;
        let ext = io.xd[ax];
        let step = s.steps.get(i).copied().unwrap_or(1);
        let from = if start < 0 {
            k.add(k.c(start), ext)?
        } else {
            k.c(start)
        };
        let from = if step > 0 {
            d.clamp(from, k.c(0), ext)?
        } else {
            d.clamp(from, k.c(-1), d.isub(ext, k.c(1))?)?
        };
        base = k.add(base, d.imul(from, io.xs[ax])?)?;
        strides[ax] = d.imul(io.xs[ax], k.c(step))?;
    }
    // Nothing is read when the output is empty (the static kernel has no kernel then).
    d.nest_split(&io.od, &[strides, io.os], &mut |idx| {
        k.st(io.po, idx[1], k.ld(io.px, k.add(base, idx[0])?)?)
    })?;
    finish_call(g, d.f, &args)
}

/// `pad` with a constant: the output filled with the value, then the input copied inside at
/// the pads' offset (the static kernel's two steps, in one kernel).
#[allow(clippy::too_many_arguments)]
pub(super) fn pad_constant<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    pads: &[u64],
    value: f64,
    name: &str,
) -> R<Call<'c>> {
    let rank = spec.dims(func, op.results[0])?.len();
    let (d, args, io) = copy_kernel(g, spec, func, st, op, name, rank > 0)?;
    let Io {
        xd,
        xs,
        od,
        os: _,
        px,
        po,
    } = io;
    let k = &d.k;
    let fill = k.f(value);
    if rank == 0 {
        k.st(po, k.c(0), k.ld(px, k.c(0))?)?;
        return finish_call(g, d.f, &args);
    }
    // Tiles of output rows: each row filled with the value, then, when the row lies inside
    // the input on every outer axis, the input's row copied in at the last pad's offset.
    // Every element is written the value or its input element, as the static kernel's fill
    // then copy, so any cut gives the same bits.
    let last = rank - 1;
    let rows = d.prod(&od[..last])?;
    let (lo, hi) = d.split(rows, 1)?;
    d.loop_step(lo, hi, 1, &mut |row| {
        let mut rest = row;
        let mut src = k.c(0);
        let mut inside = k.ctx.bool_type().const_all_ones();
        for a in (0..last).rev() {
            // `od[a]` is not zero: the row loop runs only when no outer axis is empty.
            let i = llvm(k.b.build_int_signed_rem(rest, od[a], "i"))?;
            rest = llvm(k.b.build_int_signed_div(rest, od[a], "r"))?;
            let j = d.isub(i, k.c(pads[a] as i64))?;
            let ge = d.cmp(IntPredicate::SGE, j, k.c(0))?;
            let lt = d.cmp(IntPredicate::SLT, j, xd[a])?;
            inside = llvm(k.b.build_and(inside, llvm(k.b.build_and(ge, lt, "in"))?, "in"))?;
            src = k.add(src, d.imul(j, xs[a])?)?;
        }
        let dst = d.imul(row, od[last])?;
        d.loop_step(k.c(0), od[last], 1, &mut |c| k.st(po, k.add(dst, c)?, fill))?;
        let at = k.add(dst, k.c(pads[last] as i64))?;
        k.when(inside, &mut || {
            d.loop_step(k.c(0), xd[last], 1, &mut |c| {
                k.st(po, k.add(at, c)?, k.ld(px, k.add(src, c)?)?)
            })
        })
    })?;
    finish_call(g, d.f, &args)
}

/// `pad` with `reflect` or `edge`: every output element read from the input element
/// `pad_source` names along each axis (`kernels/gather.rs`), computed here per index.
#[allow(clippy::too_many_arguments)]
pub(super) fn pad_gather<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    pads: &[u64],
    mode: PadMode,
    name: &str,
) -> R<Call<'c>> {
    let rank = spec.dims(func, op.results[0])?.len();
    let (d, args, io) = copy_kernel(g, spec, func, st, op, name, rank > 0)?;
    let Io {
        xd,
        xs,
        od,
        os,
        px,
        po,
    } = io;
    let k = &d.k;
    // The static kernel writes nothing when either tensor is empty.
    let mut sizes = xd.clone();
    sizes.extend(&od);
    let empty = d.any_zero(&sizes)?;
    let full = llvm(k.b.build_not(empty, "full"))?;
    k.when(full, &mut || {
        if rank == 0 {
            return rec(
                &d,
                mode,
                pads,
                0,
                (&xd, &xs, &od, &os),
                (k.c(0), k.c(0)),
                (px, po),
            );
        }
        // Tiles of output rows: each row's source on every outer axis, then the row
        // (each element read alone, so any cut gives the same bits).
        let last = rank - 1;
        let (lo, hi) = d.split(d.prod(&od[..last])?, 1)?;
        d.loop_step(lo, hi, 1, &mut |row| {
            let mut rest = row;
            let mut ix = k.c(0);
            for a in (0..last).rev() {
                let o = llvm(k.b.build_int_signed_rem(rest, od[a], "i"))?;
                rest = llvm(k.b.build_int_signed_div(rest, od[a], "r"))?;
                let src = pad_source(&d, mode, d.isub(o, k.c(pads[a] as i64))?, xd[a])?;
                ix = k.add(ix, d.imul(src, xs[a])?)?;
            }
            let io = d.imul(row, od[last])?;
            rec(
                &d,
                mode,
                pads,
                last,
                (&xd, &xs, &od, &os),
                (ix, io),
                (px, po),
            )
        })
    })?;
    finish_call(g, d.f, &args)
}

type Shapes<'s, 'c> = (
    &'s [IntValue<'c>],
    &'s [IntValue<'c>],
    &'s [IntValue<'c>],
    &'s [IntValue<'c>],
);

fn rec<'a, 'c>(
    d: &Dk<'a, 'c>,
    mode: PadMode,
    pads: &[u64],
    axis: usize,
    (xd, xs, od, os): Shapes<'_, 'c>,
    (ix, io): (IntValue<'c>, IntValue<'c>),
    (px, po): (PointerValue<'c>, PointerValue<'c>),
) -> R<()> {
    let k = &d.k;
    if axis == od.len() {
        return k.st(po, io, k.ld(px, ix)?);
    }
    d.loop_step(k.c(0), od[axis], 1, &mut |o| {
        let i = d.isub(o, k.c(pads[axis] as i64))?;
        let src = pad_source(d, mode, i, xd[axis])?;
        let ix2 = k.add(ix, d.imul(src, xs[axis])?)?;
        let io2 = k.add(io, d.imul(o, os[axis])?)?;
        rec(
            d,
            mode,
            pads,
            axis + 1,
            (xd, xs, od, os),
            (ix2, io2),
            (px, po),
        )
    })
}

/// `kernels::gather::pad_source` at run time: inside the axis (or on an axis of one element)
/// the index clamped; else `edge` clamps and `reflect` folds with period `2(len − 1)`.
fn pad_source<'a, 'c>(
    d: &Dk<'a, 'c>,
    mode: PadMode,
    i: IntValue<'c>,
    len: IntValue<'c>,
) -> R<IntValue<'c>> {
    let k = &d.k;
    let last = d.isub(len, k.c(1))?;
    let clamped = d.clamp(i, k.c(0), last)?;
    if mode != PadMode::Reflect {
        return Ok(clamped);
    }
    let inside_lo = d.cmp(IntPredicate::SGE, i, k.c(0))?;
    let inside_hi = d.cmp(IntPredicate::SLT, i, len)?;
    let inside = llvm(k.b.build_and(inside_lo, inside_hi, "in"))?;
    let single = d.cmp(IntPredicate::EQ, len, k.c(1))?;
    let plain = llvm(k.b.build_or(inside, single, "plain"))?;
    // The period, kept positive where it is not used (a division by zero is undefined even
    // in the arm a select drops).
    let p = d.imul(last, k.c(2))?;
    let p_pos = d.cmp(IntPredicate::SGT, p, k.c(0))?;
    let p = d.pick(p_pos, p, k.c(1))?;
    let (_, m) = d.div_rem_euclid(i, p)?;
    let low = d.cmp(IntPredicate::SLT, m, len)?;
    let folded = d.pick(low, m, d.isub(p, m)?)?;
    d.pick(plain, clamped, folded)
}

/// One output index's taps along an axis of `input` → `output` elements:
/// `kernels::gather::resize_taps` at run time (the exact fraction `num / den` of the
/// coordinate mode, nearest's rounding, bilinear's clamp and weight).
struct Tap<'c> {
    i0: IntValue<'c>,
    i1: IntValue<'c>,
    frac: Option<FloatValue<'c>>,
}

fn tap<'a, 'c>(
    d: &Dk<'a, 'c>,
    rz: &Resize,
    o: IntValue<'c>,
    input: IntValue<'c>,
    output: IntValue<'c>,
) -> R<Tap<'c>> {
    let k = &d.k;
    let (i, n) = (input, output);
    let two_o1 = k.add(d.imul(o, k.c(2))?, k.c(1))?;
    let half_pixel = (d.isub(d.imul(two_o1, i)?, n)?, d.imul(n, k.c(2))?);
    let more = d.cmp(IntPredicate::SGT, n, k.c(1))?;
    let if_more = |(a, b): (IntValue<'c>, IntValue<'c>)| -> R<(IntValue<'c>, IntValue<'c>)> {
        Ok((d.pick(more, a, k.c(0))?, d.pick(more, b, k.c(1))?))
    };
    let (num, den) = match rz.coord {
        CoordMode::HalfPixel => half_pixel,
        CoordMode::PytorchHalfPixel => if_more(half_pixel)?,
        CoordMode::AlignCorners => {
            // `n - 1` is 0 when `n` is 1: kept at 1 there (the select drops it).
            let nm1 = d.isub(n, k.c(1))?;
            let den = d.pick(more, nm1, k.c(1))?;
            if_more((d.imul(o, d.isub(i, k.c(1))?)?, den))?
        }
        CoordMode::Asymmetric => (d.imul(o, i)?, n),
    };
    let last = d.isub(i, k.c(1))?;
    let zero = k.c(0);
    match rz.mode {
        ResizeMode::Nearest => {
            let (fl, rem) = d.div_rem_euclid(num, den)?;
            let up = match rz.nearest {
                NearestMode::Floor => k.ctx.bool_type().const_zero(),
                NearestMode::Ceil => d.cmp(IntPredicate::NE, rem, zero)?,
                NearestMode::RoundPreferFloor => {
                    d.cmp(IntPredicate::SGT, d.imul(rem, k.c(2))?, den)?
                }
                NearestMode::RoundPreferCeil => {
                    let ge = d.cmp(IntPredicate::SGE, d.imul(rem, k.c(2))?, den)?;
                    let nz = d.cmp(IntPredicate::NE, rem, zero)?;
                    llvm(k.b.build_and(ge, nz, "rc"))?
                }
            };
            let upi = llvm(k.b.build_int_z_extend(up, k.i64t, "u"))?;
            let idx = d.clamp(k.add(fl, upi)?, zero, last)?;
            Ok(Tap {
                i0: idx,
                i1: idx,
                frac: None,
            })
        }
        ResizeMode::Bilinear => {
            let f64t = k.ctx.f64_type();
            let nonpos = d.cmp(IntPredicate::SLE, num, zero)?;
            // Truncated, as `num / den` and `num % den` in i128 (used only where `num > 0`).
            let q = llvm(k.b.build_int_signed_div(num, den, "q"))?;
            let r = llvm(k.b.build_int_signed_rem(num, den, "r"))?;
            let beyond = d.cmp(IntPredicate::SGE, q, last)?;
            let i0 = d.pick(nonpos, zero, d.pick(beyond, last, q)?)?;
            let i1 = d.pick(nonpos, zero, d.pick(beyond, last, k.add(q, k.c(1))?)?)?;
            let rf = llvm(k.b.build_signed_int_to_float(r, f64t, "rf"))?;
            let df = llvm(k.b.build_signed_int_to_float(den, f64t, "df"))?;
            let w = k.fdiv(rf, df)?;
            let edge = llvm(k.b.build_or(nonpos, beyond, "edge"))?;
            let frac = llvm(k.b.build_select(edge, f64t.const_float(0.0), w, "fr"))?;
            Ok(Tap {
                i0,
                i1,
                frac: Some(frac.into_float_value()),
            })
        }
    }
}

/// `resize` on NCHW: per image plane, per output row, per output column, the static
/// kernel's reads and (bilinear) `f64` interpolation, the taps computed per row and column.
pub(super) fn resize<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    rz: &Resize,
    name: &str,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let (xe, oe) = (spec.dims(func, x)?, spec.dims(func, r)?);
    if xe.len() != 4 || oe.len() != 4 {
        return Err(refuse(
            spec,
            func,
            op,
            "a resize of a tensor that is not NCHW",
        ));
    }
    let args = args_dyn(func, st, &[x, r])?;
    // Tiles of output rows (every image plane's rows in turn): each element is computed
    // alone, so any cut gives the same bits.
    let per = if matches!(rz.mode, ResizeMode::Bilinear) {
        12
    } else {
        0
    };
    let tiles = DynTiles::new(oe.clone(), crate::parallel::work(per, 8), 8);
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, Some(tiles))?;
    let xd = d.dims_of(&xe)?;
    let od = d.dims_of(&oe)?;
    let (h, w, oh, ow) = (xd[2], xd[3], od[2], od[3]);
    let planes = d.imul(xd[0], xd[1])?;
    let (px, po) = (d.param(0)?, d.param(1)?);
    let k = &d.k;
    let f64t = k.ctx.f64_type();
    let hw = d.imul(h, w)?;
    let ohw = d.imul(oh, ow)?;
    let mut sizes = xd.clone();
    sizes.extend(&od);
    let empty = d.any_zero(&sizes)?;
    let full = llvm(k.b.build_not(empty, "full"))?;
    k.when(full, &mut || {
        let (lo, hi) = d.split(d.imul(planes, oh)?, 1)?;
        d.loop_step(lo, hi, 1, &mut |row| {
            // `oh` is not zero here (the output is not empty).
            let p = llvm(k.b.build_int_signed_div(row, oh, "p"))?;
            let oy = d.isub(row, d.imul(p, oh)?)?;
            let bx = d.imul(p, hw)?;
            let bo = d.imul(p, ohw)?;
            {
                let ty = tap(&d, rz, oy, h, oh)?;
                let r0 = k.add(bx, d.imul(ty.i0, w)?)?;
                let r1 = k.add(bx, d.imul(ty.i1, w)?)?;
                let ro = k.add(bo, d.imul(oy, ow)?)?;
                d.loop_step(k.c(0), ow, 1, &mut |ox| {
                    let tx = tap(&d, rz, ox, w, ow)?;
                    let v = match (ty.frac, tx.frac) {
                        (Some(wy), Some(wx)) => {
                            let one = f64t.const_float(1.0);
                            let v = |row: IntValue<'c>, col: IntValue<'c>| -> R<FloatValue<'c>> {
                                let e = k.ld(px, k.add(row, col)?)?;
                                llvm(k.b.build_float_ext(e, f64t, "d"))
                            };
                            let lerp = |a: FloatValue<'c>, b: FloatValue<'c>, t: FloatValue<'c>| {
                                // a * (1 - t) + b * t, as the static kernel and the interpreter.
                                let s = llvm(k.b.build_float_sub(one, t, "s"))?;
                                let p = llvm(k.b.build_float_mul(a, s, "p"))?;
                                let q = llvm(k.b.build_float_mul(b, t, "q"))?;
                                llvm(k.b.build_float_add(p, q, "l"))
                            };
                            let top = lerp(v(r0, tx.i0)?, v(r0, tx.i1)?, wx)?;
                            let bottom = lerp(v(r1, tx.i0)?, v(r1, tx.i1)?, wx)?;
                            let y = lerp(top, bottom, wy)?;
                            llvm(k.b.build_float_trunc(y, k.f32t, "y"))?
                        }
                        _ => k.ld(px, k.add(r0, tx.i0)?)?,
                    };
                    k.st(po, k.add(ro, ox)?, v)
                })
            }
        })
    })?;
    finish_call(g, d.f, &args)
}
