//! The CNN kernels with run-time extents (issue 18): convolutions, max/average pooling and
//! global average pooling over images whose height, width (and batch) are known only at run
//! time. Channels, kernel sizes, strides, dilations, pads and groups are the weights' and the
//! attributes', so they stay constants.
//!
//! **The static kernels' order, per element.** What decides the bits of an output is the
//! sequence of float operations that produce it, not the loops around them, and the static
//! kernels (`kernels/conv/*`, `kernels/pool.rs`) compute each element in one of these orders:
//! - 1×1, unit strides, no padding: the GEMM's one FMA chain over the input channels from
//!   zero, then `+ bias` (only with a bias) and the activation (`gemm::finish`); when the
//!   image is one pixel and the channels at least a vector, the matrix-vector product's own
//!   partial sums (`gemm::gemv`) — that branch runs the static GEMM itself, its extents all
//!   constant there.
//! - depthwise (one input channel per group): the accumulator starts at the bias (`+0.0`
//!   without one), one FMA per tap in `(kh, kw)` order, then the activation.
//! - every other convolution (im2col and row-packed alike): zero, one FMA per input channel
//!   and tap in `(c, kh, kw)` order, then `+ bias` (`+ 0.0` without one) and the activation.
//!
//! The static kernels leave out the taps that no lane of a vector reads (peeled at compile
//! time); here such a tap is a masked load, zero-filled, so it adds `w · 0` to the chain. For
//! finite weights that is `±0`, which leaves a non-zero accumulator unchanged and can change
//! only the sign of a zero one; the im2col/row-packed chain ends in `+ bias` (`+0.0` without
//! one), which removes that sign, and a depthwise chain starts at the bias. So the bits are
//! the static kernel's for finite weights, up to the sign of an output that is exactly zero
//! in a depthwise chain whose partial sums underflowed to `-0` (denormal data).
//! - max/avg pooling: the static scalar window loop, the same selects and adds per cell.
//! - global_avg_pool: the static `f64` vector sums (two interleaved accumulators, then one,
//!   then a masked tail, then the lanes pairwise), at a run-time plane size.

use super::{args_dyn, finish_call, refuse, Dk, DynSpec, DynTiles, Panels};
use crate::kernels::common::{activation, vector_registers, Call};
use crate::kernels::gemm::{
    gemm, gemv_rows, gemv_rows_strided, rows_for, wide, Epilogue, Gemm, PANEL_BYTES, SHORT_K,
};
use crate::kernels::pool::{mean_add, mean_fold, ACCS};
use crate::nest::{llvm, R};
use crate::parallel::work;
use crate::storage::Storage;
use crate::Gen;
use inkwell::types::VectorType;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;
use tir_ir::op::{Conv2d, Pool2d};
use tir_ir::{Activation, Function, OpData};

/// Output channels per tile of the dense kernel (the static im2col's).
const MR: i64 = 6;
/// Vectors of output columns per tile of the dense kernel.
const NV_DENSE: u32 = 2;
/// Vectors of output columns per depthwise tile (the static depthwise kernel's blocks).
const NV_DEPTHWISE: u32 = 4;
/// Output elements up to which a depthwise plane runs as one flat run of vectors (the static
/// depthwise kernel's bound).
const FLAT_MAX: i64 = 256;
/// Groups per block of flat depthwise planes ([`Spatial::flat_groups`]).
const FLAT_GROUPS: i64 = 2;
/// Vectors of each plane per block of flat depthwise planes ([`Spatial::flat_groups`]).
const FLAT_VECS: i64 = 2;
/// Interior output rows per depthwise block ([`Spatial::rows_block`]).
const DW_ROWS: i64 = 4;
/// Interior output rows per depthwise block when a row has no block of `NV_DEPTHWISE`
/// vectors ([`Spatial::rows_block`]).
const DW_ROWS_NARROW: i64 = 8;
/// Vector positions per block of a depthwise row run by [`Spatial::dw_row`] (its independent
/// FMA chains); a power of two (the rest goes in blocks of its lower powers).
const DW_COLS: i64 = 4;
/// Vectors of output points up to which the other convolutions run flat (the static
/// row-packed kernel's bound).
const FLAT_VECTORS: i64 = 100;

impl<'a, 'c> Dk<'a, 'c> {
    fn sub(&self, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        llvm(self.k.b.build_int_sub(a, b, "s"))
    }

    fn icmp(&self, p: IntPredicate, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        llvm(self.k.b.build_int_compare(p, a, b, "c"))
    }

    fn imin(&self, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        let c = self.icmp(IntPredicate::SLT, a, b)?;
        Ok(llvm(self.k.b.build_select(c, a, b, "min"))?.into_int_value())
    }

    fn imax(&self, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        let c = self.icmp(IntPredicate::SGT, a, b)?;
        Ok(llvm(self.k.b.build_select(c, a, b, "max"))?.into_int_value())
    }

    /// `lo <= i < hi`, bounds at run time.
    fn between(&self, i: IntValue<'c>, lo: IntValue<'c>, hi: IntValue<'c>) -> R<IntValue<'c>> {
        let a = self.icmp(IntPredicate::SGE, i, lo)?;
        let b = self.icmp(IntPredicate::SLT, i, hi)?;
        llvm(self.k.b.build_and(a, b, "in"))
    }

    /// `a / q` rounded toward minus infinity for a constant `q > 0`.
    fn floor_div(&self, a: IntValue<'c>, q: i64) -> R<IntValue<'c>> {
        let k = &self.k;
        // (a - (q - 1)) / q truncates toward minus infinity for negative a.
        let neg = self.icmp(IntPredicate::SLT, a, k.c(0))?;
        let adj = llvm(k.b.build_select(neg, self.sub(a, k.c(q - 1))?, a, "adj"))?;
        llvm(k.b.build_int_signed_div(adj.into_int_value(), k.c(q), "fd"))
    }

    /// An `i64` vector of `n` lanes, every lane `x`.
    fn splat_i(&self, x: IntValue<'c>, n: u32) -> R<VectorValue<'c>> {
        let k = &self.k;
        let i32t = k.ctx.i32_type();
        let v = llvm(k.b.build_insert_element(
            k.i64t.vec_type(n).get_undef(),
            x,
            i32t.const_int(0, false),
            "x",
        ))?;
        let zeros = i32t.vec_type(n).const_zero();
        llvm(k.b.build_shuffle_vector(v, v, zeros, "splat"))
    }

    fn const_i(&self, f: impl Fn(u32) -> i64, n: u32) -> VectorValue<'c> {
        let lanes: Vec<IntValue> = (0..n).map(|q| self.k.c(f(q))).collect();
        VectorType::const_vector(&lanes)
    }

    fn vand(&self, a: VectorValue<'c>, b: VectorValue<'c>) -> R<VectorValue<'c>> {
        llvm(self.k.b.build_and(a, b, "m"))
    }

    fn vcmp(&self, p: IntPredicate, a: VectorValue<'c>, b: VectorValue<'c>) -> R<VectorValue<'c>> {
        llvm(self.k.b.build_int_compare(p, a, b, "vc"))
    }
}

/// Max or average pooling with run-time `N·C`, `H`, `W` and output extents: the static
/// kernel's scalar window loop (`kernels::pool::pool`), the same selects and adds per cell.
#[allow(clippy::too_many_arguments)]
pub(super) fn pool<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    p: &Pool2d,
    is_max: bool,
    name: &str,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let (xe, oe) = (spec.dims(func, x)?, spec.dims(func, r)?);
    if xe.len() != 4 || oe.len() != 4 {
        return Err(refuse(spec, func, op, "pooling of a tensor not of rank 4"));
    }
    let args = args_dyn(func, st, &[x, r])?;
    // Tiles: planes; two operations per window cell and output.
    let taps = p.kernel[0] * p.kernel[1];
    let tiles = DynTiles::new(oe.clone(), work(2 * taps, 8), 8);
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, Some(tiles))?;
    let (xd, od) = (d.dims_of(&xe)?, d.dims_of(&oe)?);
    let planes = d.imul(xd[0], xd[1])?;
    let (h, w, oh, ow) = (xd[2], xd[3], od[2], od[3]);
    let [kh, kw] = p.kernel.map(|v| v as i64);
    let [sh, sw] = p.strides.map(|v| v as i64);
    let [pt, pl, pb, pr] = p.pads.map(|v| v as i64);
    let (px, po) = (d.param(0)?, d.param(1)?);
    let k = &d.k;
    let zero = k.c(0);
    let hw = d.imul(h, w)?;
    let ohw = d.imul(oh, ow)?;
    // A window's cells are clamped into the image and read whether inside or not (the
    // static kernel's branch-free form); an empty image has no cell to clamp to, so its
    // windows read a zero of their own (every cell is outside, never selected).
    let dummy = llvm(k.b.build_alloca(k.f32t, "none"))?;
    llvm(k.b.build_store(dummy, k.f(0.0)))?;
    let empty = d.icmp(IntPredicate::SLE, hw, zero)?;
    let hm1 = d.imax(d.sub(h, k.c(1))?, zero)?;
    let wm1 = d.imax(d.sub(w, k.c(1))?, zero)?;
    let (hpb, wpr) = (k.add(h, k.c(pb))?, k.add(w, k.c(pr))?);
    let clamp =
        |i: IntValue<'c>, hi: IntValue<'c>| -> R<IntValue<'c>> { d.imin(d.imax(i, zero)?, hi) };
    let (p0, p1) = d.split(planes, 1)?;
    // The static kernel's window loop, every cell clamped and selected.
    let general = || -> R<()> {
        d.loop_step(p0, p1, 1, &mut |pl_| {
            let plane = k.gep(px, d.imul(pl_, hw)?)?;
            let xp = llvm(k.b.build_select(empty, dummy, plane, "xp"))?.into_pointer_value();
            let op_ = k.gep(po, d.imul(pl_, ohw)?)?;
            d.loop_step(zero, oh, 1, &mut |oy| {
                d.loop_step(zero, ow, 1, &mut |ox| {
                    let by = k.add(k.mul(oy, sh)?, k.c(-pt))?;
                    let bx = k.add(k.mul(ox, sw)?, k.c(-pl))?;
                    let mut acc = k.f(if is_max { f64::NEG_INFINITY } else { 0.0 });
                    let mut cnt = k.f(0.0);
                    for i in 0..kh {
                        let iy = k.add(by, k.c(i))?;
                        let iny = d.between(iy, zero, h)?;
                        let cy = clamp(iy, hm1)?;
                        let incl_y = d.between(iy, k.c(-pt), hpb)?;
                        for j in 0..kw {
                            let ix = k.add(bx, k.c(j))?;
                            let inx = d.between(ix, zero, w)?;
                            let cx = clamp(ix, wm1)?;
                            let inside = llvm(k.b.build_and(iny, inx, "in"))?;
                            let v = k.ld(xp, k.add(d.imul(cy, w)?, cx)?)?;
                            if is_max {
                                let m = k.max_nan(acc, v)?;
                                acc = k.fsel(inside, m, acc)?;
                            } else {
                                let s = k.fadd(acc, v)?;
                                acc = k.fsel(inside, s, acc)?;
                                let counted = if p.count_include_pad {
                                    let inclx = d.between(ix, k.c(-pl), wpr)?;
                                    llvm(k.b.build_and(incl_y, inclx, "c"))?
                                } else {
                                    inside
                                };
                                let c1 = k.fadd(cnt, k.f(1.0))?;
                                cnt = k.fsel(counted, c1, cnt)?;
                            }
                        }
                    }
                    let out = if is_max { acc } else { k.fdiv(acc, cnt)? };
                    k.st(op_, k.add(d.imul(oy, ow)?, ox)?, out)
                })
            })
        })
    };
    // Without padding, when every window lies inside the image (no ceil_mode window past
    // its end at this shape), every cell is selected and counted: the same adds (or
    // `max_nan`s) in the same order from the same start, divided by the same count (`kh·kw`
    // ones added, exact), without the clamps and selects. PP-OCRv4's 3×2/3×2 average pool
    // onto 1×20 took 0.019 ms the general way against the static 0.002 (`--profile`).
    let inside = || -> R<()> {
        d.loop_step(p0, p1, 1, &mut |pl_| {
            let plane = k.gep(px, d.imul(pl_, hw)?)?;
            let op_ = k.gep(po, d.imul(pl_, ohw)?)?;
            d.loop_step(zero, oh, 1, &mut |oy| {
                let rows = (0..kh)
                    .map(|i| d.imul(k.add(k.mul(oy, sh)?, k.c(i))?, w))
                    .collect::<R<Vec<_>>>()?;
                let orow = d.imul(oy, ow)?;
                d.loop_step(zero, ow, 1, &mut |ox| {
                    let bx = k.mul(ox, sw)?;
                    let mut acc = k.f(if is_max { f64::NEG_INFINITY } else { 0.0 });
                    for &row in &rows {
                        for j in 0..kw {
                            let v = k.ld(plane, k.add(k.add(row, bx)?, k.c(j))?)?;
                            acc = if is_max {
                                k.max_nan(acc, v)?
                            } else {
                                k.fadd(acc, v)?
                            };
                        }
                    }
                    let out = if is_max {
                        acc
                    } else {
                        k.fdiv(acc, k.f((kh * kw) as f64))?
                    };
                    k.st(op_, k.add(orow, ox)?, out)
                })
            })
        })
    };
    if p.pads == [0; 4] {
        let last_y = k.add(k.mul(d.sub(oh, k.c(1))?, sh)?, k.c(kh))?;
        let last_x = k.add(k.mul(d.sub(ow, k.c(1))?, sw)?, k.c(kw))?;
        let fits_y = d.icmp(IntPredicate::SLE, last_y, h)?;
        let fits_x = d.icmp(IntPredicate::SLE, last_x, w)?;
        let fits = llvm(k.b.build_and(fits_y, fits_x, "fits"))?;
        let some = llvm(k.b.build_not(empty, "some"))?;
        let fits = llvm(k.b.build_and(fits, some, "fits"))?;
        k.if_else(fits, &mut |yes| if yes { inside() } else { general() })?;
    } else {
        general()?;
    }
    finish_call(g, d.f, &args)
}

/// The mean of each plane with a run-time plane size: the static kernel's sums, the same
/// vector accumulators in the same order.
pub(super) fn global_avg_pool<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let xe = spec.dims(func, x)?;
    if xe.len() < 2 {
        return Err(refuse(spec, func, op, "global_avg_pool below rank 2"));
    }
    let args = args_dyn(func, st, &[x, r])?;
    // Tiles: planes; the input streamed once.
    let tiles = DynTiles::new(xe.clone(), work(1, 4), 8);
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, Some(tiles))?;
    let xd = d.dims_of(&xe)?;
    let planes = d.prod(&xd[..2])?;
    let size = d.prod(&xd[2..])?;
    let w = g.width;
    let wl = w as i64;
    let (px, po) = (d.param(0)?, d.param(1)?);
    let k = &d.k;
    let f64t = k.ctx.f64_type();
    let dv = f64t.vec_type(w);
    let step = ACCS * wl;
    let down = |x: IntValue<'c>, q: i64| -> R<IntValue<'c>> {
        k.mul(llvm(k.b.build_int_signed_div(x, k.c(q), "t"))?, q)
    };
    let unrolled = down(size, step)?;
    let whole = down(size, wl)?;
    let size_f = llvm(k.b.build_signed_int_to_float(size, f64t, "n"))?;
    let has_tail = d.icmp(IntPredicate::SLT, whole, size)?;
    let tail_mask = d.lanes_below(d.sub(size, whole)?, w)?;
    let (p0, p1) = d.split(planes, 1)?;
    d.loop_step(p0, p1, 1, &mut |pl| {
        let base = d.imul(pl, size)?;
        let zero: BasicValueEnum = dv.const_zero().into();
        let accs = d.carry(
            k.c(0),
            unrolled,
            step,
            vec![zero; ACCS as usize],
            &mut |i, cur| mean_add(k, px, k.add(base, i)?, w, cur),
        )?;
        let acc = mean_fold(k, &accs)?;
        let acc = d.carry(unrolled, whole, wl, vec![acc.into()], &mut |i, cur| {
            mean_add(k, px, k.add(base, i)?, w, cur)
        })?;
        let mut acc = acc[0].into_vector_value();
        // The static kernel adds the masked tail only when there is one.
        let v = d.ldv_mask(px, k.add(base, whole)?, w, tail_mask)?;
        let with = llvm(k.b.build_float_add(acc, llvm(k.b.build_float_ext(v, dv, "e"))?, "s"))?;
        acc = llvm(k.b.build_select(has_tail, with, acc, "tail"))?.into_vector_value();
        let mean = k.fdiv(k.lane_sum(acc, w)?, size_f)?;
        k.st(po, pl, llvm(k.b.build_float_trunc(mean, k.f32t, "t"))?)
    })?;
    finish_call(g, d.f, &args)
}

/// Output channels per tile of the dense kernel's rows ([`Spatial::tile`]): 8 with 32
/// vector registers when they divide a group's channels (16 accumulators; MobileNet v2's
/// 32-channel stem is then 4 tiles, not 5 and a 2-channel one, each tap's input vectors
/// loaded for 8 channels instead of 6: its stem alone 0.112 against 0.123 ms, static 0.105,
/// at 224, session 20), else `MR`. Each output's chain is the same whatever the tile.
fn dense_mr(w: u32, mg: i64) -> i64 {
    if vector_registers(w) >= 32 && mg % 8 == 0 {
        8
    } else {
        MR
    }
}

/// The output channels of the flat dense kernel's tile ([`Spatial::flat_dense`]).
fn flat_mr(w: u32) -> i64 {
    if vector_registers(w) >= 32 {
        8
    } else {
        6
    }
}

fn lcm(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// One call's share of a convolution (issue 20): groups `[g0, g1)`, and in each its output
/// channels `[m0, m1)` (all of them when the groups are cut; a start in whole register tiles
/// when the channels are).
struct Share<'c> {
    groups: (IntValue<'c>, IntValue<'c>),
    channels: (IntValue<'c>, IntValue<'c>),
}

/// A convolution's extents: the run-time ones as values, the rest constants.
struct Geo<'c> {
    n: IntValue<'c>,
    h: IntValue<'c>,
    wi: IntValue<'c>,
    oh: IntValue<'c>,
    ow: IntValue<'c>,
    ci: i64,
    m: i64,
    groups: i64,
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    dh: i64,
    dw: i64,
    pt: i64,
    pl: i64,
    act: Option<Activation>,
}

impl Geo<'_> {
    fn cg(&self) -> i64 {
        self.ci / self.groups
    }
    fn mg(&self) -> i64 {
        self.m / self.groups
    }
}

/// `conv2d` with run-time batch, height and width (channels, kernel, strides, dilations,
/// pads and groups are constants): the static kernel's per-element order (see the module's
/// docs), the 1×1 case on the run-time GEMM tiles, every other on [`Spatial`].
pub(super) fn conv2d<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    c: &Conv2d,
    name: &str,
) -> R<Call<'c>> {
    let (x, wv, r) = (op.operands[0], op.operands[1], op.results[0]);
    let bias = op.operands.get(2).copied();
    let (xe, we, oe) = (
        spec.dims(func, x)?,
        spec.dims(func, wv)?,
        spec.dims(func, r)?,
    );
    if xe.len() != 4 || we.len() != 4 || oe.len() != 4 {
        return Err(refuse(spec, func, op, "a convolution not of rank 4"));
    }
    let konst = |e: &tir_ir::sym::DimExpr| e.as_constant().map(|v| v as i64);
    let (Some(ci), Some(m), Some(kh), Some(kw)) =
        (konst(&xe[1]), konst(&oe[1]), konst(&we[2]), konst(&we[3]))
    else {
        return Err(refuse(
            spec,
            func,
            op,
            "a convolution with run-time channels",
        ));
    };
    let groups = (c.groups as i64).max(1);
    if ci % groups != 0 || m % groups != 0 {
        return Err(refuse(
            spec,
            func,
            op,
            "channels not divisible by the groups",
        ));
    }
    let mut vals = vec![x, wv];
    vals.extend(bias);
    vals.push(r);
    let args = args_dyn(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    let [sh, sw] = c.strides.map(|v| v as i64);
    let [dh, dw] = c.dilations.map(|v| v as i64);
    // The static kernel's choice (`kernels::conv::emit`), made on constants only.
    let pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && c.pads == [0; 4];
    // Weights packed at compile time in row panels ([`panel_rows`], asked of this op at
    // this width by `build_dynamic`).
    let packed = st.panel_rows(wv);
    if packed.is_some() && packed != panel_rows(spec, func, op, g.width) {
        return Err(refuse(
            spec,
            func,
            op,
            "weights packed in panels for another kernel",
        ));
    }
    // A second copy of the weights in the channel-vector panels ([`chanvec_rows`]).
    let copy = st.panel_copy_rows(wv);
    if copy != chanvec_rows(spec, func, op, g.width) {
        return Err(refuse(
            spec,
            func,
            op,
            "weights copied in panels for another kernel",
        ));
    }
    // Tiles (issue 20): groups when there are several, else output channels in whole
    // register tiles of every path this kernel may take (whole panels when packed).
    let granule = if groups > 1 {
        1
    } else if let Some(p) = packed {
        p
    } else if pointwise {
        wide(g.width).0
    } else if sh == 1 && sw == 1 && kh * kw <= 49 {
        lcm(dense_mr(g.width, m / groups), flat_mr(g.width))
    } else {
        dense_mr(g.width, m / groups)
    };
    let units = if groups > 1 { groups } else { m };
    let cg = ci / groups;
    let tiles = DynTiles::new(
        oe.clone(),
        work(2 * (cg * kh * kw) as u64, 8),
        (units + granule - 1) / granule,
    );
    let d = g.dyn_kernel_tiled(name, &args, &writes, &spec.symbols, Some(tiles))?;
    let (xd, od) = (d.dims_of(&xe)?, d.dims_of(&oe)?);
    let geo = Geo {
        n: xd[0],
        h: xd[2],
        wi: xd[3],
        oh: od[2],
        ow: od[3],
        ci,
        m,
        groups,
        kh,
        kw,
        sh,
        sw,
        dh,
        dw,
        pt: c.pads[0] as i64,
        pl: c.pads[1] as i64,
        act: c.activation,
    };
    let px = d.param(0)?;
    let pw = d.param(1)?;
    let pb = if bias.is_some() {
        Some(d.param(2)?)
    } else {
        None
    };
    let po = d.param(args.len() as u32 - 1)?;
    let share = if groups > 1 {
        let (lo, hi) = d.split(d.k.c(groups), 1)?;
        Share {
            groups: (lo, hi),
            channels: (d.k.c(0), d.k.c(m / groups)),
        }
    } else {
        Share {
            groups: (d.k.c(0), d.k.c(1)),
            channels: d.split(d.k.c(m), granule)?,
        }
    };
    // The static kernel also runs a kernel as big as its unpadded input as the 1×1
    // convolution of a `C·KH·KW`-channel 1×1 image (`kernels::conv::conv2d`'s `whole`); here
    // that depends on the run-time extents, so it is a run-time branch to the same path.
    let whole_possible = !pointwise && groups == 1 && dh == 1 && dw == 1 && c.pads == [0; 4];
    if pointwise {
        let a = match packed {
            Some(p) => WeightRows::Panels(p),
            None => WeightRows::RowMajor,
        };
        // The copy starts right after the first layout's `M·C` floats.
        let cv = match copy {
            Some(_) => Some(ChanVec {
                a: d.k.gep(pw, d.k.c(m * ci))?,
                mask: super::chanvec::PixelMask::of(g.width, ci),
            }),
            None => None,
        };
        pointwise_conv(&d, g.width, &geo, &share, a, cv, px, pw, pb, po)?;
    } else if whole_possible {
        let k = &d.k;
        let same_h = d.icmp(IntPredicate::EQ, geo.h, k.c(kh))?;
        let same_w = d.icmp(IntPredicate::EQ, geo.wi, k.c(kw))?;
        let whole = llvm(k.b.build_and(same_h, same_w, "whole"))?;
        k.if_else(whole, &mut |whole| {
            if whole {
                let one = k.c(1);
                let flat = Geo {
                    n: geo.n,
                    h: one,
                    wi: one,
                    oh: one,
                    ow: one,
                    ci: ci * kh * kw,
                    m,
                    groups: 1,
                    kh: 1,
                    kw: 1,
                    sh: 1,
                    sw: 1,
                    dh: 1,
                    dw: 1,
                    pt: 0,
                    pl: 0,
                    act: geo.act,
                };
                pointwise_conv(
                    &d,
                    g.width,
                    &flat,
                    &share,
                    WeightRows::RowMajor,
                    None,
                    px,
                    pw,
                    pb,
                    po,
                )
            } else {
                Spatial::new(&d, g.width, &geo, geo.cg() == 1, &share)?.emit(px, pw, pb, po)
            }
        })?;
    } else {
        let sp = Spatial::new(&d, g.width, &geo, geo.cg() == 1, &share)?;
        sp.emit(px, pw, pb, po)?;
    }
    finish_call(g, d.f, &args)
}

/// The panel height the weights of `op` are packed with at compile time for a kernel with
/// run-time extents at `width` lanes, if they are: a pointwise convolution (one group, 1×1,
/// unit strides, no padding) whose image size is known only at run time and whose panel
/// (`K × P` floats) fits the L1 share of [`PANEL_BYTES`]. Its GEMM may be narrow at one
/// shape and wide at another, so the height is not the static kernel's
/// (`kernels::conv::panel_rows`, from N) but the rows of the one-vector tile
/// (`rows_for(w, 1)`, 12): [`super::tiles`] runs panels' rest columns in tiles of that
/// height (two vectors at 16 lanes, one at 8, a 4-vector rest as two 2-vector tiles), and
/// its 6-row wide tiles are half a panel. Each tile then reads one panel, a contiguous
/// stream, rather than one stream per row. The static compile at 9 pixels (MobileNet v2's
/// last stages at 96×96) packs 12-row panels; reading the weights row-major there cost the
/// run-time kernel about 1.4× its time. A tile shorter than its panel reads part of each
/// line, and the panel's other tiles read them again: from L1 when the panel fits there,
/// else from L2 (MobileNet v2's 960-channel projections at 7×7 lost about 1.3× packed in
/// 24-row panels), while rows that long are streams the prefetcher follows well anyway.
pub(crate) fn panel_rows(spec: &DynSpec, func: &Function, op: &OpData, width: u32) -> Option<i64> {
    let tir_ir::Op::Conv2d(c) = &op.op else {
        return None;
    };
    if !op.op.is_operator() || !spec.is_dynamic(func, op) || c.prelu || op.operands.len() > 3 {
        return None;
    }
    let we = spec.dims(func, *op.operands.get(1)?).ok()?;
    let xe = spec.dims(func, *op.operands.first()?).ok()?;
    let pointwise = we.len() == 4
        && xe.len() == 4
        && c.groups == 1
        && we[1]
            .as_constant()
            .is_some_and(|k| k as i64 * rows_for(width, 1) * 4 <= PANEL_BYTES)
        && we[1] == xe[1]
        && we[2].as_constant() == Some(1)
        && we[3].as_constant() == Some(1)
        && c.strides == [1, 1]
        && c.pads == [0; 4]
        && !one_pixel_image(&xe);
    pointwise.then(|| rows_for(width, 1))
}

/// Whether an image's height and width are both the constant 1 (the squeeze-and-excitation
/// convolutions after a global pool, dynamic only by their batch). Such a convolution is
/// always the matrix-vector product, which reads its weights row-major: packed in panels,
/// each row's vectors were gathered from its panel, and PP-OCRv4's 120→480 one took 0.029 ms
/// against the static 0.005 (`--profile`, width 160).
fn one_pixel_image(xe: &[tir_ir::sym::DimExpr]) -> bool {
    xe.len() == 4 && xe[2].as_constant() == Some(1) && xe[3].as_constant() == Some(1)
}

/// The height of the channel-vector panels (`gemm::chanvec_rows`) in which a dynamic compile
/// stores a second copy of the weights of `op` at `width` lanes, if it does: a pointwise
/// convolution as in [`panel_rows`] (whatever its K) at which the static compile takes the
/// channel-vector tiles at some pixel count (enough registers and input channels). Which
/// kernel runs is chosen at run time by the pixel count, by the static rule
/// ([`super::chanvec`]).
pub(crate) fn chanvec_rows(
    spec: &DynSpec,
    func: &Function,
    op: &OpData,
    width: u32,
) -> Option<i64> {
    let tir_ir::Op::Conv2d(c) = &op.op else {
        return None;
    };
    if !op.op.is_operator() || !spec.is_dynamic(func, op) || c.prelu || op.operands.len() > 3 {
        return None;
    }
    let we = spec.dims(func, *op.operands.get(1)?).ok()?;
    let xe = spec.dims(func, *op.operands.first()?).ok()?;
    let kk = we.get(1)?.as_constant()? as i64;
    let pointwise = we.len() == 4
        && xe.len() == 4
        && c.groups == 1
        && we[1] == xe[1]
        && we[2].as_constant() == Some(1)
        && we[3].as_constant() == Some(1)
        && c.strides == [1, 1]
        && c.pads == [0; 4]
        && !one_pixel_image(&xe);
    (pointwise && !super::chanvec::PixelMask::of(width, kk).is_empty())
        .then(|| crate::kernels::gemm::CHANVEC_VECTORS * width as i64)
}

/// The channel-vector copy of a pointwise convolution's weights ([`chanvec_rows`]): where it
/// starts, and the pixel counts that take it ([`super::chanvec::PixelMask`]).
#[derive(Clone, Copy)]
struct ChanVec<'c> {
    a: PointerValue<'c>,
    mask: super::chanvec::PixelMask,
}

/// How a pointwise convolution's weights `[M, C]` are stored.
#[derive(Clone, Copy)]
enum WeightRows {
    RowMajor,
    /// In panels of this many rows ([`panel_rows`]).
    Panels(i64),
}

/// A 1×1 convolution per image and group: `out[M_g, H·W] = W[M_g, C_g] · x[C_g, H·W]` on the
/// run-time tiles, bias and activation in the GEMM's epilogue. A one-pixel image with at
/// least a vector of channels is the static matrix-vector product, all its extents constant
/// (with packed weights, its rows one at a time, each row's vectors gathered from its panel).
#[allow(clippy::too_many_arguments)]
fn pointwise_conv<'a, 'c>(
    d: &Dk<'a, 'c>,
    w: u32,
    geo: &Geo<'c>,
    share: &Share<'c>,
    wr: WeightRows,
    cv: Option<ChanVec<'c>>,
    px: PointerValue<'c>,
    pw: PointerValue<'c>,
    pb: Option<PointerValue<'c>>,
    po: PointerValue<'c>,
) -> R<()> {
    let k = &d.k;
    let (cg, mg) = (geo.cg(), geo.mg());
    let hw = d.imul(geo.h, geo.wi)?;
    if let Some(cv) = cv {
        // The static compile at this pixel count runs the channel-vector tiles: so do we.
        let on = cv.mask.chosen(d, hw)?;
        let mut taken = Ok(());
        k.if_else(on, &mut |yes| {
            if !yes {
                taken = pointwise_conv(d, w, geo, share, wr, None, px, pw, pb, po);
                return Ok(());
            }
            // One group: a thread's share in whole channel panels of its own.
            let mr = crate::kernels::gemm::CHANVEC_VECTORS * w as i64;
            let rows = d.split(k.c(geo.m), mr)?;
            let epi = Epilogue {
                alpha: 1.0,
                row_bias: pb,
                act: geo.act,
                row_slope: None,
            };
            d.loop_step(k.c(0), geo.n, 1, &mut |b| {
                let xo = d.imul(k.mul(b, geo.ci)?, hw)?;
                let oo = d.imul(k.mul(b, geo.m)?, hw)?;
                let ptrs = (cv.a, k.gep(px, xo)?, k.gep(po, oo)?);
                super::chanvec::emit(d, w, ptrs, (geo.m, geo.ci), hw, rows, epi, &cv.mask)
            })
        })?;
        return taken;
    }
    let gemv_possible = cg >= w as i64;
    let short = cg <= SHORT_K;
    let one_pixel = d.icmp(IntPredicate::EQ, hw, k.c(1))?;
    let (m0, m1) = share.channels;
    let rows = d.sub(m1, m0)?;
    let (g0, g1) = share.groups;
    d.loop_step(k.c(0), geo.n, 1, &mut |b| {
        d.loop_step(g0, g1, 1, &mut |gi| {
            let first = k.add(k.mul(gi, mg)?, m0)?;
            let xo = d.imul(k.add(k.mul(b, geo.ci)?, k.mul(gi, cg)?)?, hw)?;
            let oo = d.imul(k.add(k.mul(b, geo.m)?, first)?, hw)?;
            // Packed weights (one group): the panels from the start, the share's rows found
            // by `Panels::row`.
            let (a, pan) = match wr {
                WeightRows::RowMajor => (k.gep(pw, k.mul(first, cg)?)?, None),
                WeightRows::Panels(p) => (
                    pw,
                    Some(Panels {
                        rows: p,
                        first,
                        m: mg,
                    }),
                ),
            };
            let (bx, cx) = (k.gep(px, xo)?, k.gep(po, oo)?);
            let epi = Epilogue {
                alpha: 1.0,
                row_bias: match pb {
                    Some(p) => Some(k.gep(p, first)?),
                    None => None,
                },
                act: geo.act,
                row_slope: None,
            };
            if !gemv_possible {
                return super::tiles(d, w, (a, bx, cx), (rows, k.c(cg), hw), epi, pan, short);
            }
            k.if_else(one_pixel, &mut |gemv| {
                if let (true, Some(p)) = (gemv, pan) {
                    let gm = Gemm {
                        a,
                        a_rs: 0,
                        a_cs: 1,
                        b: bx,
                        b_rs: 1,
                        c: cx,
                        c_rs: 1,
                        m: 0,
                        n: 1,
                        k: cg,
                    };
                    gemv_rows_strided(k, w, &gm, epi, rows, &|i| p.row(k, k.c(cg), i))
                } else if gemv && d.tiles.is_some() && geo.groups == 1 {
                    // A share of the rows: each row summed as the whole product sums it.
                    let gm = Gemm {
                        a,
                        a_rs: cg,
                        a_cs: 1,
                        b: bx,
                        b_rs: 1,
                        c: cx,
                        c_rs: 1,
                        m: 0,
                        n: 1,
                        k: cg,
                    };
                    gemv_rows(k, w, &gm, epi, rows)
                } else if gemv {
                    let gm = Gemm {
                        a,
                        a_rs: cg,
                        a_cs: 1,
                        b: bx,
                        b_rs: 1,
                        c: cx,
                        c_rs: 1,
                        m: mg,
                        n: 1,
                        k: cg,
                    };
                    gemm(k, w, &gm, epi)
                } else {
                    super::tiles(d, w, (a, bx, cx), (rows, k.c(cg), hw), epi, pan, short)
                }
            })
        })
    })
}

/// Every convolution but the 1×1 ones: `MR` output channels (one for depthwise) × `nv`
/// vectors of one output row per tile, the input channels in the K loop with the taps
/// unrolled. Rows and columns whose every tap reads inside the image (bounds computed at run
/// time) load whole vectors; the others load each tap with a run-time lane mask
/// (zero-filled), as the static kernels' compile-time masks.
struct Spatial<'d, 'a, 'c> {
    d: &'d Dk<'a, 'c>,
    w: u32,
    geo: &'d Geo<'c>,
    share: &'d Share<'c>,
    depthwise: bool,
    hw: IntValue<'c>,
    ohw: IntValue<'c>,
    /// A depthwise convolution's masks per vector position ([`Spatial::mask_table`]).
    table: Option<(PointerValue<'c>, PointerValue<'c>)>,
    /// Output rows `[r0, r1)` read only inside the image.
    r0: IntValue<'c>,
    r1: IntValue<'c>,
    /// Within an interior row: masked vectors up to `lead`, blocks of `nv` vectors up to
    /// `big`, single vectors up to `single`, masked ones after (the same for every row).
    lead: IntValue<'c>,
    big: IntValue<'c>,
    single: IntValue<'c>,
}

/// One output row's kernel rows: the tap row, its input row's offset in a plane, and
/// whether it lies inside the image (`None`: known to).
type TapRow<'c> = (i64, IntValue<'c>, Option<IntValue<'c>>);

impl<'d, 'a, 'c> Spatial<'d, 'a, 'c> {
    fn new(
        d: &'d Dk<'a, 'c>,
        w: u32,
        geo: &'d Geo<'c>,
        depthwise: bool,
        share: &'d Share<'c>,
    ) -> R<Self> {
        let k = &d.k;
        let zero = k.c(0);
        let hw = d.imul(geo.h, geo.wi)?;
        let ohw = d.imul(geo.oh, geo.ow)?;
        // Rows: oy·sh − pt ≥ 0 and oy·sh + (kh−1)·dh − pt ≤ h − 1.
        let r0s = (geo.pt + geo.sh - 1) / geo.sh;
        let r0 = d.imin(k.c(r0s), geo.oh)?;
        let t = k.add(geo.h, k.c(geo.pt - 1 - (geo.kh - 1) * geo.dh))?;
        let r1 = k.add(d.floor_div(t, geo.sh)?, k.c(1))?;
        let r1 = d.imin(d.imax(r1, r0)?, geo.oh)?;
        // Columns: every lane's `sw` loaded inputs inside the row for every tap.
        let c0 = (geo.pl + geo.sw - 1) / geo.sw;
        let t = k.add(geo.wi, k.c(geo.pl - geo.sw - (geo.kw - 1) * geo.dw))?;
        let c1 = k.add(d.floor_div(t, geo.sw)?, k.c(1))?;
        let c1 = d.imin(d.imax(c1, zero)?, geo.ow)?;
        let wl = w as i64;
        // Before the interior: whole vectors from column 0 (a border column is rare, so the
        // interior starts at the next vector boundary), masked.
        let lead = if c0 > 0 {
            d.imin(k.c((c0 + wl - 1) / wl * wl), geo.ow)?
        } else {
            k.c(0)
        };
        let nv = if depthwise { NV_DEPTHWISE } else { NV_DENSE } as i64;
        let span = d.imax(d.sub(c1, lead)?, zero)?;
        let down = |x: IntValue<'c>, q: i64| -> R<IntValue<'c>> {
            k.mul(llvm(k.b.build_int_signed_div(x, k.c(q), "t"))?, q)
        };
        let big = k.add(lead, down(span, nv * wl)?)?;
        let single = k.add(lead, down(span, wl)?)?;
        let mut sp = Spatial {
            d,
            w,
            geo,
            share,
            depthwise,
            table: None,
            hw,
            ohw,
            r0,
            r1,
            lead,
            big,
            single,
        };
        if depthwise {
            sp.table = Some(sp.mask_table()?);
        }
        Ok(sp)
    }

    /// Group `gi` of image `b`: its input and output planes, weights and bias (the planes'
    /// taps not yet broadcast).
    fn img(
        &self,
        b: IntValue<'c>,
        gi: IntValue<'c>,
        (px, pw, pb, po): (
            PointerValue<'c>,
            PointerValue<'c>,
            Option<PointerValue<'c>>,
            PointerValue<'c>,
        ),
    ) -> R<Img<'c>> {
        let (d, geo) = (self.d, self.geo);
        let k = &d.k;
        let (cg, mg) = (geo.cg(), geo.mg());
        Ok(Img {
            x: k.gep(
                px,
                d.imul(k.add(k.mul(b, geo.ci)?, k.mul(gi, cg)?)?, self.hw)?,
            )?,
            o: k.gep(
                po,
                d.imul(k.add(k.mul(b, geo.m)?, k.mul(gi, mg)?)?, self.ohw)?,
            )?,
            wt: k.gep(pw, k.mul(gi, mg * cg * geo.kh * geo.kw)?)?,
            bias: match pb {
                Some(p) => Some(k.gep(p, k.mul(gi, mg)?)?),
                None => None,
            },
            taps: None,
        })
    }

    fn emit(
        &self,
        px: PointerValue<'c>,
        pw: PointerValue<'c>,
        pb: Option<PointerValue<'c>>,
        po: PointerValue<'c>,
    ) -> R<()> {
        let (d, geo) = (self.d, self.geo);
        let k = &d.k;
        let mg = geo.mg();
        let taps = geo.kh * geo.kw;
        // Up to 7×7 taps: the masks of a flat plane sit on the stack.
        let flat = if geo.sh == 1 && geo.sw == 1 && taps <= 49 {
            Some(self.flat_masks()?)
        } else {
            None
        };
        let (g0, g1) = self.share.groups;
        // A depthwise convolution with one channel per group runs its flat planes several
        // groups at a time ([`Spatial::flat_groups`]); its per-group loop then only has rows.
        let blocked = self.depthwise && mg == 1 && geo.groups > 1;
        d.loop_step(k.c(0), geo.n, 1, &mut |b| {
            let groups = |flat_here: bool| -> R<()> {
                d.loop_step(g0, g1, 1, &mut |gi| {
                    let img = self.img(b, gi, (px, pw, pb, po))?;
                    let img = Img {
                        taps: if self.depthwise && mg == 1 {
                            Some(
                                (0..taps)
                                    .map(|t| k.splat(k.ld(img.wt, k.c(t))?, self.w))
                                    .collect::<R<_>>()?,
                            )
                        } else {
                            None
                        },
                        ..img
                    };
                    // Depthwise: blocks of `n` interior rows, then the rest alone.
                    let interior = |n: i64| -> R<()> {
                        let from = if img.taps.is_some() {
                            let q = d.sub(self.r1, self.r0)?;
                            let q = llvm(k.b.build_int_signed_div(q, k.c(n), "blocks"))?;
                            let end = k.add(self.r0, k.mul(q, n)?)?;
                            d.loop_step(self.r0, end, n, &mut |oy| self.rows_block(&img, oy, n))?;
                            end
                        } else {
                            self.r0
                        };
                        d.loop_step(from, self.r1, 1, &mut |oy| self.row(&img, oy, true))
                    };
                    // Rows with a kernel row outside the image: a depthwise plane's as
                    // [`Spatial::dw_row`], the others masked as [`Spatial::row`].
                    let border = |oy: IntValue<'c>| -> R<()> {
                        if img.taps.is_some() {
                            self.dw_row(&img, oy)
                        } else {
                            self.row(&img, oy, false)
                        }
                    };
                    let rows = || -> R<()> {
                        d.loop_step(k.c(0), self.r0, 1, &mut |oy| border(oy))?;
                        if img.taps.is_some() && geo.sh == 1 {
                            // Rows without blocks of `NV_DEPTHWISE` vectors (a 3×3 "same"
                            // row of at most 80 outputs at 16 lanes) in taller blocks: more
                            // independent chains per column position, and with unit row
                            // strides 8 rows read 10 input rows (4 rows read 6). With stride
                            // 2, 8 rows read 17 input rows and were slower than 4; rows with
                            // blocks were slower in blocks of 8 (session 20, docs/codegen.md).
                            let narrow = d.icmp(IntPredicate::EQ, self.big, self.lead)?;
                            k.if_else(narrow, &mut |yes| {
                                interior(if yes { DW_ROWS_NARROW } else { DW_ROWS })
                            })?;
                        } else {
                            interior(DW_ROWS)?;
                        }
                        d.loop_step(self.r1, geo.oh, 1, &mut |oy| border(oy))
                    };
                    match flat {
                        Some((cond, masks)) if flat_here => k.if_else(cond, &mut |yes| {
                            if yes {
                                if self.depthwise {
                                    self.flat(&img, masks)
                                } else {
                                    self.flat_dense(&img, masks)
                                }
                            } else {
                                rows()
                            }
                        }),
                        _ => rows(),
                    }
                })
            };
            // Planes of at most one vector per row that do not run flat (strided: MobileNet
            // v2's 6×6 → 3×3 and 14×14 → 7×7 planes of 576 channels) go row by row over all
            // the groups ([`Spatial::narrow_rows`]); others plane by plane.
            let narrow = d.icmp(IntPredicate::SLE, geo.ow, k.c(self.w as i64))?;
            let planes = |flat_here: bool| -> R<()> {
                if !blocked {
                    return groups(flat_here);
                }
                k.if_else(narrow, &mut |yes| {
                    if yes {
                        self.narrow_rows(b, (px, pw, pb, po))
                    } else {
                        groups(flat_here)
                    }
                })
            };
            match flat {
                Some((cond, masks)) if blocked => k.if_else(cond, &mut |yes| {
                    if yes {
                        self.flat_groups(b, masks, (px, pw, pb, po))
                    } else {
                        planes(false)
                    }
                }),
                _ => planes(true),
            }
        })
    }

    /// The planes of a depthwise convolution with one channel per group whose rows are at
    /// most one vector (`OW ≤ W`), row by row outside and the share's groups inside: a row's
    /// tap masks ([`Spatial::masks`], each row masked) are made once for all the groups
    /// instead of once per group and row, which on a 3×3 output plane was most of the work
    /// (576 channels 6×6 → 3×3 took 3.6× the static kernel's time, which peels its borders at
    /// compile time). Per output the chain of [`Spatial::tile`] with the masks the plane by
    /// plane rows give it (a row inside the image: every row lane on), so the bytes are the
    /// same.
    fn narrow_rows(
        &self,
        b: IntValue<'c>,
        (px, pw, pb, po): (
            PointerValue<'c>,
            PointerValue<'c>,
            Option<PointerValue<'c>>,
            PointerValue<'c>,
        ),
    ) -> R<()> {
        let (d, geo) = (self.d, self.geo);
        let k = &d.k;
        let (g0, g1) = self.share.groups;
        d.loop_step(k.c(0), geo.oh, 1, &mut |oy| {
            let rows: Vec<TapRow<'c>> = (0..geo.kh)
                .map(|i| {
                    let iy = k.add(k.mul(oy, geo.sh)?, k.c(i * geo.dh - geo.pt))?;
                    let valid = d.between(iy, k.c(0), geo.h)?;
                    Ok((i, d.imul(iy, geo.wi)?, Some(valid)))
                })
                .collect::<R<_>>()?;
            let masks = self.masks(&rows, k.c(0))?;
            let orow = d.imul(oy, geo.ow)?;
            d.loop_step(g0, g1, 1, &mut |gi| {
                let img = self.img(b, gi, (px, pw, pb, po))?;
                self.tile(&img, &rows, Some(&masks), orow, k.c(0), 1, k.c(0), 1)
            })
        })
    }

    /// The flat planes ([`Spatial::flat`]) of a depthwise convolution with one channel per
    /// group, `FLAT_GROUPS` groups at a time: each group's chains are its own (the bias, one
    /// FMA per tap in order, the activation: the same ops as alone), and the block shares
    /// each vector's tap masks and output mask, so a block loads each mask once for all its
    /// planes. A 16×16 plane alone has 4 chains of 9 masked loads and 9 mask loads each per
    /// block of vectors (the load ports bound it); the planes of a block share the mask
    /// loads. Two planes of `FLAT_VECS` (2) vectors each: four planes of one vector had
    /// their 36 tap vectors spilled from the 32 registers (each FMA then also reloads its
    /// tap); 2 × 2 keeps the 18 taps in registers with the same four chains (MobileNet v2
    /// 1.12 → 1.09× the static CPU time at 96, 1.13 → 1.09 at 224, under load; 2 × 4 was
    /// slower, see docs/codegen.md). The groups after the last whole block one at a time, as
    /// [`Spatial::flat`]; in a block, the vectors after the last pair one at a time.
    fn flat_groups(
        &self,
        b: IntValue<'c>,
        masks: PointerValue<'c>,
        (px, pw, pb, po): (
            PointerValue<'c>,
            PointerValue<'c>,
            Option<PointerValue<'c>>,
            PointerValue<'c>,
        ),
    ) -> R<()> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let wl = w as i64;
        let taps = geo.kh * geo.kw;
        let (vecs, offs) = self.flat_runs()?;
        let block = |g0: IntValue<'c>, ng: i64| -> R<()> {
            let mut planes = Vec::new();
            for c in 0..ng {
                // One channel per group: group `g` reads input channel `g`, writes output
                // channel `g`.
                let g = k.add(g0, k.c(c))?;
                let x = k.gep(px, d.imul(k.add(k.mul(b, geo.ci)?, g)?, self.hw)?)?;
                let o = k.gep(po, d.imul(k.add(k.mul(b, geo.m)?, g)?, self.ohw)?)?;
                let wt = k.mul(g, taps)?;
                let tap: Vec<VectorValue<'c>> = (0..taps)
                    .map(|t| k.splat(k.ld(pw, k.add(wt, k.c(t))?)?, w))
                    .collect::<R<_>>()?;
                let bias = match pb {
                    Some(p) => k.ld(p, g)?,
                    None => k.f(0.0),
                };
                planes.push((x, o, tap, k.splat(bias, w)?));
            }
            // `nb` vectors of every plane at a time: `nb · ng` independent chains with the
            // `ng · taps` tap vectors in registers.
            let vectors = |v0: IntValue<'c>, nb: i64| -> R<()> {
                let vs: Vec<IntValue<'c>> = (0..nb).map(|i| k.add(v0, k.c(i))).collect::<R<_>>()?;
                let p0s: Vec<IntValue<'c>> = vs.iter().map(|&v| k.mul(v, wl)).collect::<R<_>>()?;
                let mut acc: Vec<Vec<VectorValue<'c>>> =
                    vec![planes.iter().map(|p| p.3).collect(); nb as usize];
                for (t, &off) in offs.iter().enumerate() {
                    for (i, (&v, &p0)) in vs.iter().zip(&p0s).enumerate() {
                        let q = k.gep(masks, k.add(k.mul(v, taps)?, k.c(t as i64))?)?;
                        let on = llvm(k.b.build_load(q, "on"))?.into_vector_value();
                        for (c, p) in planes.iter().enumerate() {
                            let x = d.ldv_mask(p.0, k.add(p0, off)?, w, on)?;
                            acc[i][c] = k.fma(x, p.2[t], acc[i][c])?;
                        }
                    }
                }
                for (i, &p0) in p0s.iter().enumerate() {
                    let mask = d.lanes_below(d.sub(self.ohw, p0)?, w)?;
                    for (c, p) in planes.iter().enumerate() {
                        let y = vector_activation(d, w, geo.act, acc[i][c])?;
                        d.stv_mask(p.1, p0, y, mask)?;
                    }
                }
                Ok(())
            };
            let vfull = k.mul(
                llvm(k.b.build_int_signed_div(vecs, k.c(FLAT_VECS), "vf"))?,
                FLAT_VECS,
            )?;
            d.loop_step(k.c(0), vfull, FLAT_VECS, &mut |v| vectors(v, FLAT_VECS))?;
            d.loop_step(vfull, vecs, 1, &mut |v| vectors(v, 1))
        };
        let (g0, g1) = self.share.groups;
        let n = llvm(k.b.build_int_signed_div(d.sub(g1, g0)?, k.c(FLAT_GROUPS), "gb"))?;
        let end = k.add(g0, k.mul(n, FLAT_GROUPS)?)?;
        d.loop_step(g0, end, FLAT_GROUPS, &mut |g| block(g, FLAT_GROUPS))?;
        d.loop_step(end, g1, 1, &mut |g| block(g, 1))
    }

    /// Whether a plane is run as one flat run of vectors ([`Spatial::flat`],
    /// [`Spatial::flat_dense`]: unit strides, input rows as wide as output rows, at most
    /// [`Spatial::flat_max`] outputs), and then the lane masks of every vector and tap, the
    /// same for every plane, made once per call.
    fn flat_masks(&self) -> R<(IntValue<'c>, PointerValue<'c>)> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let wl = w as i64;
        let taps = geo.kh * geo.kw;
        let same = d.icmp(IntPredicate::EQ, geo.wi, geo.ow)?;
        let small = d.icmp(IntPredicate::SLE, self.ohw, k.c(self.flat_max()))?;
        let cond = llvm(k.b.build_and(same, small, "flat"))?;
        let mty = k.ctx.bool_type().vec_type(w);
        let slots = ((self.flat_max() + wl - 1) / wl * taps) as u32;
        let masks = llvm(k.b.build_array_alloca(
            mty,
            k.ctx.i32_type().const_int(slots.into(), false),
            "masks",
        ))?;
        let vecs = llvm(k.b.build_int_signed_div(k.add(self.ohw, k.c(wl - 1))?, k.c(wl), "vecs"))?;
        k.when(cond, &mut || {
            let lanes = d.const_i(|l| l as i64, w);
            let (ow_v, h_v, wi_v) = (
                d.splat_i(geo.ow, w)?,
                d.splat_i(geo.h, w)?,
                d.splat_i(geo.wi, w)?,
            );
            let zero_v = d.splat_i(k.c(0), w)?;
            let total_v = d.splat_i(self.ohw, w)?;
            d.loop_step(k.c(0), vecs, 1, &mut |v| {
                let p = llvm(k.b.build_int_add(d.splat_i(k.mul(v, wl)?, w)?, lanes, "p"))?;
                let oy = llvm(k.b.build_int_signed_div(p, ow_v, "oy"))?;
                let ox = llvm(k.b.build_int_sub(p, llvm(k.b.build_int_mul(oy, ow_v, "m"))?, "ox"))?;
                let live = d.vcmp(IntPredicate::SLT, p, total_v)?;
                for i in 0..geo.kh {
                    let iy =
                        llvm(k.b.build_int_add(oy, d.splat_i(k.c(i * geo.dh - geo.pt), w)?, "iy"))?;
                    let row = d.vand(
                        d.vcmp(IntPredicate::SGE, iy, zero_v)?,
                        d.vcmp(IntPredicate::SLT, iy, h_v)?,
                    )?;
                    for j in 0..geo.kw {
                        let ix = llvm(k.b.build_int_add(
                            ox,
                            d.splat_i(k.c(j * geo.dw - geo.pl), w)?,
                            "ix",
                        ))?;
                        let col = d.vand(
                            d.vcmp(IntPredicate::SGE, ix, zero_v)?,
                            d.vcmp(IntPredicate::SLT, ix, wi_v)?,
                        )?;
                        let on = d.vand(live, d.vand(row, col)?)?;
                        let slot = k.add(k.mul(v, taps)?, k.c(i * geo.kw + j))?;
                        let q = k.gep(masks, slot)?;
                        llvm(k.b.build_store(q, on))?;
                    }
                }
                Ok(())
            })
        })?;
        Ok((cond, masks))
    }

    /// The most outputs a plane may have to run flat: the static depthwise kernel's bound, and
    /// for the others the static row-packed kernel's ([`FLAT_VECTORS`] vectors).
    fn flat_max(&self) -> i64 {
        if self.depthwise {
            FLAT_MAX
        } else {
            FLAT_VECTORS * self.w as i64
        }
    }

    /// Every other unit-stride convolution on a plane whose input rows are as wide as its
    /// output rows, flat (the static row-packed kernel's layout: a 7- or 14-wide row no longer
    /// leaves most of a vector idle): `MR` output channels × up to `NV` vectors of output
    /// points per tile, the input channels in the K loop, each tap of a vector one masked
    /// load at `p + (i·dh − pt)·W + (j·dw − pl)`.
    fn flat_dense(&self, img: &Img<'c>, masks: PointerValue<'c>) -> R<()> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let wl = w as i64;
        let taps = geo.kh * geo.kw;
        let cg = geo.cg();
        let (mr, nv) = if vector_registers(w) >= 32 {
            (8, 3)
        } else {
            (6, 2)
        };
        let vecs = llvm(k.b.build_int_signed_div(k.add(self.ohw, k.c(wl - 1))?, k.c(wl), "vecs"))?;
        let vfull = k.mul(llvm(k.b.build_int_signed_div(vecs, k.c(nv), "vf"))?, nv)?;
        let offs: Vec<IntValue<'c>> = (0..geo.kh)
            .flat_map(|i| (0..geo.kw).map(move |j| (i, j)))
            .map(|(i, j)| {
                let r = d.imul(k.c(i * geo.dh - geo.pt), geo.wi)?;
                k.add(r, k.c(j * geo.dw - geo.pl))
            })
            .collect::<R<_>>()?;
        let tile = |m0: IntValue<'c>, mr: i64, v0: IntValue<'c>, nv: i64| -> R<()> {
            let ms: Vec<IntValue<'c>> = (0..mr).map(|r| k.add(m0, k.c(r))).collect::<R<_>>()?;
            let wrows: Vec<IntValue<'c>> =
                ms.iter().map(|&m| k.mul(m, cg * taps)).collect::<R<_>>()?;
            let vs: Vec<IntValue<'c>> = (0..nv).map(|v| k.add(v0, k.c(v))).collect::<R<_>>()?;
            let p0s: Vec<IntValue<'c>> = vs.iter().map(|&v| k.mul(v, wl)).collect::<R<_>>()?;
            let zero: BasicValueEnum = k.vty(w).const_zero().into();
            let n = (mr * nv) as usize;
            let acc = k.loop_carry(0, cg, 1, vec![zero; n], &mut |c, cur| {
                let mut acc: Vec<VectorValue<'c>> =
                    cur.iter().map(|v| v.into_vector_value()).collect();
                let xc = d.imul(c, self.hw)?;
                let wc = k.mul(c, taps)?;
                for (t, &off) in offs.iter().enumerate() {
                    let bv: Vec<VectorValue<'c>> = vs
                        .iter()
                        .zip(&p0s)
                        .map(|(&v, &p0)| {
                            let q = k.gep(masks, k.add(k.mul(v, taps)?, k.c(t as i64))?)?;
                            let on = llvm(k.b.build_load(q, "on"))?.into_vector_value();
                            d.ldv_mask(img.x, k.add(k.add(xc, p0)?, off)?, w, on)
                        })
                        .collect::<R<_>>()?;
                    let wt = k.add(wc, k.c(t as i64))?;
                    for (r, &wr) in wrows.iter().enumerate() {
                        let a = k.splat(k.ld(img.wt, k.add(wr, wt)?)?, w)?;
                        for (v, &b) in bv.iter().enumerate() {
                            let i = r * nv as usize + v;
                            acc[i] = k.fma(a, b, acc[i])?;
                        }
                    }
                }
                Ok(acc.into_iter().map(|v| v.into()).collect())
            })?;
            for (r, &m) in ms.iter().enumerate() {
                let plane = k.gep(img.o, d.imul(m, self.ohw)?)?;
                let b = match img.bias {
                    Some(p) => k.ld(p, m)?,
                    None => k.f(0.0),
                };
                let b = k.splat(b, w)?;
                for (v, &p0) in p0s.iter().enumerate() {
                    let y = acc[r * nv as usize + v].into_vector_value();
                    let y = llvm(k.b.build_float_add(y, b, "b"))?;
                    let y = vector_activation(d, w, geo.act, y)?;
                    let mask = d.lanes_below(d.sub(self.ohw, p0)?, w)?;
                    d.stv_mask(plane, p0, y, mask)?;
                }
            }
            Ok(())
        };
        self.for_channels(mr, &mut |m0, mr| {
            d.loop_step(k.c(0), vfull, nv, &mut |v0| tile(m0, mr, v0, nv))?;
            d.loop_step(vfull, vecs, 1, &mut |v0| tile(m0, mr, v0, 1))
        })
    }

    /// This call's output channels of a group ([`Share`]) in tiles of `mr` from its first,
    /// then the group's last `mg mod mr` as one tile when the share reaches them (a share
    /// starts in whole tiles: its granule is a multiple of `mr`).
    fn for_channels(&self, mr: i64, body: &mut dyn FnMut(IntValue<'c>, i64) -> R<()>) -> R<()> {
        let d = self.d;
        let k = &d.k;
        let mg = self.geo.mg();
        let mfull = mg / mr * mr;
        let (m0, m1) = self.share.channels;
        d.loop_step(m0, d.imin(m1, k.c(mfull))?, mr, &mut |m| body(m, mr))?;
        if mfull < mg {
            let rest = d.icmp(IntPredicate::SGT, m1, k.c(mfull))?;
            k.when(rest, &mut || body(k.c(mfull), mg - mfull))?;
        }
        Ok(())
    }

    /// A flat plane's vector count (`⌈OH·OW / W⌉`, at run time) and each tap `(i, j)`'s input
    /// offset from an output pixel, `(i·dh − pt)·W + (j·dw − pl)`, in tap order.
    fn flat_runs(&self) -> R<(IntValue<'c>, Vec<IntValue<'c>>)> {
        let (d, geo, wl) = (self.d, self.geo, self.w as i64);
        let k = &d.k;
        let vecs = llvm(k.b.build_int_signed_div(k.add(self.ohw, k.c(wl - 1))?, k.c(wl), "vecs"))?;
        let offs = (0..geo.kh)
            .flat_map(|i| (0..geo.kw).map(move |j| (i, j)))
            .map(|(i, j)| {
                let r = d.imul(k.c(i * geo.dh - geo.pt), geo.wi)?;
                k.add(r, k.c(j * geo.dw - geo.pl))
            })
            .collect::<R<_>>()?;
        Ok((vecs, offs))
    }

    /// A depthwise plane with unit strides whose input rows are as wide as its output rows, as
    /// one flat run of vectors (the static kernel's `Plane::flat`): the input under output
    /// `p` for tap `(i, j)` is `p + (i·dh − pt)·W + (j·dw − pl)`, one masked load per tap and
    /// vector whatever rows its lanes span. A 7×7 plane is 4 vectors instead of 7 rows.
    fn flat(&self, img: &Img<'c>, masks: PointerValue<'c>) -> R<()> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let wl = w as i64;
        let taps = geo.kh * geo.kw;
        let (vecs, offs) = self.flat_runs()?;
        // Vectors `NV_DEPTHWISE` at a time: their chains are independent (the same ops in the
        // same order as alone), so a block keeps that many FMA chains in flight where one
        // vector alone waits on its chain of taps (4× the static kernel's time on a 16×16
        // plane, whose constant trip counts LLVM unrolls into independent chains). The
        // vectors after the last whole block one at a time.
        let nb = NV_DEPTHWISE as i64;
        let vfull = k.mul(llvm(k.b.build_int_signed_div(vecs, k.c(nb), "vf"))?, nb)?;
        let (m0, m1) = self.share.channels;
        d.loop_step(m0, m1, 1, &mut |m| {
            let plane = k.gep(img.o, d.imul(m, self.ohw)?)?;
            let wt = k.mul(m, taps)?;
            let tap: Vec<VectorValue<'c>> = (0..taps)
                .map(|t| k.splat(k.ld(img.wt, k.add(wt, k.c(t))?)?, w))
                .collect::<R<_>>()?;
            let bias = match img.bias {
                Some(p) => k.ld(p, m)?,
                None => k.f(0.0),
            };
            let init = k.splat(bias, w)?;
            let block = |v0: IntValue<'c>, nv: i64| -> R<()> {
                let vs: Vec<IntValue<'c>> = (0..nv).map(|i| k.add(v0, k.c(i))).collect::<R<_>>()?;
                let p0s: Vec<IntValue<'c>> = vs.iter().map(|&v| k.mul(v, wl)).collect::<R<_>>()?;
                let mut acc = vec![init; nv as usize];
                for (t, &off) in offs.iter().enumerate() {
                    for (i, (&v, &p0)) in vs.iter().zip(&p0s).enumerate() {
                        let q = k.gep(masks, k.add(k.mul(v, taps)?, k.c(t as i64))?)?;
                        let on = llvm(k.b.build_load(q, "on"))?.into_vector_value();
                        let x = d.ldv_mask(img.x, k.add(p0, off)?, w, on)?;
                        acc[i] = k.fma(x, tap[t], acc[i])?;
                    }
                }
                for (i, &p0) in p0s.iter().enumerate() {
                    let y = vector_activation(d, w, geo.act, acc[i])?;
                    let mask = d.lanes_below(d.sub(self.ohw, p0)?, w)?;
                    d.stv_mask(plane, p0, y, mask)?;
                }
                Ok(())
            };
            d.loop_step(k.c(0), vfull, nb, &mut |v0| block(v0, nb))?;
            d.loop_step(vfull, vecs, 1, &mut |v| block(v, 1))
        })
    }

    /// Output row `oy`; `inside`: every kernel row reads inside the image.
    fn row(&self, img: &Img<'c>, oy: IntValue<'c>, inside: bool) -> R<()> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let wl = w as i64;
        let rows: Vec<TapRow<'c>> = (0..geo.kh)
            .map(|i| {
                let iy = k.add(k.mul(oy, geo.sh)?, k.c(i * geo.dh - geo.pt))?;
                let valid = if inside {
                    None
                } else {
                    Some(d.between(iy, k.c(0), geo.h)?)
                };
                Ok((i, d.imul(iy, geo.wi)?, valid))
            })
            .collect::<R<_>>()?;
        let orow = d.imul(oy, geo.ow)?;
        let masked = |from: IntValue<'c>| -> R<()> {
            d.loop_step(from, geo.ow, wl, &mut |ox0| {
                self.channels(img, &rows, orow, ox0, 1, true)
            })
        };
        if !inside {
            return masked(k.c(0));
        }
        let nv = if self.depthwise {
            NV_DEPTHWISE
        } else {
            NV_DENSE
        };
        let (lead, big, single) = (self.lead, self.big, self.single);
        d.loop_step(k.c(0), lead, wl, &mut |ox0| {
            self.channels(img, &rows, orow, ox0, 1, true)
        })?;
        d.loop_step(lead, big, nv as i64 * wl, &mut |ox0| {
            self.channels(img, &rows, orow, ox0, nv, false)
        })?;
        d.loop_step(big, single, wl, &mut |ox0| {
            self.channels(img, &rows, orow, ox0, 1, false)
        })?;
        masked(single)
    }

    /// `nrows` interior output rows from `oy0` of a depthwise plane (one output channel per
    /// group): at each masked or single-vector column position one tile of a vector in each
    /// row, `nrows` independent chains (a row alone has one FMA chain there, latency-bound
    /// on narrow planes); the blocks of `NV_DEPTHWISE` vectors row by row as [`Spatial::row`].
    fn rows_block(&self, img: &Img<'c>, oy0: IntValue<'c>, nrows: i64) -> R<()> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let wl = w as i64;
        let rows: Vec<(Vec<TapRow<'c>>, IntValue<'c>)> = (0..nrows)
            .map(|r| {
                let oy = k.add(oy0, k.c(r))?;
                let taps = (0..geo.kh)
                    .map(|i| {
                        let iy = k.add(k.mul(oy, geo.sh)?, k.c(i * geo.dh - geo.pt))?;
                        Ok((i, d.imul(iy, geo.wi)?, None))
                    })
                    .collect::<R<_>>()?;
                Ok((taps, d.imul(oy, geo.ow)?))
            })
            .collect::<R<_>>()?;
        let (lead, big, single) = (self.lead, self.big, self.single);
        d.loop_step(k.c(0), lead, wl, &mut |ox0| {
            self.dw_tile(img, &rows, ox0, true)
        })?;
        d.loop_step(lead, big, NV_DEPTHWISE as i64 * wl, &mut |ox0| {
            for (taps, orow) in &rows {
                self.channels(img, taps, *orow, ox0, NV_DEPTHWISE, false)?;
            }
            Ok(())
        })?;
        d.loop_step(big, single, wl, &mut |ox0| {
            self.dw_tile(img, &rows, ox0, false)
        })?;
        d.loop_step(single, geo.ow, wl, &mut |ox0| {
            self.dw_tile(img, &rows, ox0, true)
        })
    }

    /// Border row `oy` of a depthwise plane (one output channel per group, taps broadcast;
    /// some kernel row outside the image). The static kernel emits such a row with only its
    /// kernel rows inside the image (known at compile time) and every vector position in one
    /// straight run, so the positions' chains overlap. Here the kernel rows inside,
    /// `[ilo, ihi)`, are computed from `oy` and `h` and only they are loaded (a run-time loop
    /// over them, the taps loaded by index), and the positions go `DW_COLS` at a time
    /// (independent chains), every load and store masked by the mask table. Per output: the
    /// bias, one FMA per tap of the rows inside in `(kh, kw)` order, the activation: the
    /// static border row's chain (the rows outside are the taps it drops; the masked-off
    /// columns add `w·0`, as its edge vectors do). The interior rows no block takes stay
    /// with [`Spatial::row`]: through here (every position masked) the 3×3 layers of
    /// PP-OCRv4 at 24×80 were slower (docs/codegen.md).
    fn dw_row(&self, img: &Img<'c>, oy: IntValue<'c>) -> R<()> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let (cols, stores) = self
            .table
            .ok_or_else(|| crate::CodegenError::Llvm("depthwise mask table not made".into()))?;
        // Kernel row `i` reads input row `base + i·dh`, inside for `0 ≤ base + i·dh < h`:
        // `i ≥ ⌈−base / dh⌉` and `i < ⌈(h − base) / dh⌉`, both clamped to `[0, kh]`.
        let base = k.add(k.mul(oy, geo.sh)?, k.c(-geo.pt))?;
        let ceil = |a: IntValue<'c>| -> R<IntValue<'c>> {
            let q = d.floor_div(k.add(a, k.c(geo.dh - 1))?, geo.dh)?;
            d.imin(d.imax(q, k.c(0))?, k.c(geo.kh))
        };
        let ilo = ceil(d.sub(k.c(0), base)?)?;
        let ihi = d.imax(ceil(d.sub(geo.h, base)?)?, ilo)?;
        let orow = d.imul(oy, geo.ow)?;
        let s = geo.sw;
        let wl = w as i64;
        let bias = match img.bias {
            Some(p) => k.ld(p, k.c(0))?,
            None => k.f(0.0),
        };
        // `n` positions from `v0`, each its own chain.
        let block = |v0: IntValue<'c>, n: i64| -> R<()> {
            let init: Vec<BasicValueEnum<'c>> = vec![k.splat(bias, w)?.into(); n as usize];
            let acc = d.carry(ilo, ihi, 1, init, &mut |i, cur| {
                let mut acc: Vec<VectorValue<'c>> =
                    cur.iter().map(|v| v.into_vector_value()).collect();
                let row = d.imul(k.add(base, k.mul(i, geo.dh)?)?, geo.wi)?;
                for j in 0..geo.kw {
                    let tap = k.splat(k.ld(img.wt, k.add(k.mul(i, geo.kw)?, k.c(j))?)?, w)?;
                    for (p, a) in acc.iter_mut().enumerate() {
                        let v = k.add(v0, k.c(p as i64))?;
                        let q = k.gep(cols, k.add(k.mul(v, geo.kw)?, k.c(j))?)?;
                        let m = llvm(k.b.build_load(q, "cm"))?.into_vector_value();
                        let at = k.add(row, k.c(j * geo.dw - geo.pl))?;
                        let at = k.add(at, k.mul(v, wl * s)?)?;
                        let x = self.every(d.ldv_mask(img.x, at, s as u32 * w, m)?)?;
                        *a = k.fma(tap, x, *a)?;
                    }
                }
                Ok(acc.into_iter().map(|v| v.into()).collect())
            })?;
            for (p, a) in acc.into_iter().enumerate() {
                let v = k.add(v0, k.c(p as i64))?;
                let y = vector_activation(d, w, geo.act, a.into_vector_value())?;
                let m = llvm(k.b.build_load(k.gep(stores, v)?, "sm"))?.into_vector_value();
                d.stv_mask(img.o, k.add(orow, k.mul(v, wl)?)?, y, m)?;
            }
            Ok(())
        };
        // Blocks of `DW_COLS` positions, then the rest as blocks of 2 and 1 (at most one
        // each): no position past the row is computed.
        let vecs = llvm(k.b.build_int_signed_div(k.add(geo.ow, k.c(wl - 1))?, k.c(wl), "vecs"))?;
        let whole = k.mul(
            llvm(k.b.build_int_signed_div(vecs, k.c(DW_COLS), "blocks"))?,
            DW_COLS,
        )?;
        d.loop_step(k.c(0), whole, DW_COLS, &mut |v0| block(v0, DW_COLS))?;
        let rest = d.sub(vecs, whole)?;
        let mut at = whole;
        let mut n = DW_COLS / 2;
        while n >= 1 {
            let bit = llvm(k.b.build_and(rest, k.c(n), "bit"))?;
            let on = d.icmp(IntPredicate::NE, bit, k.c(0))?;
            k.if_else(on, &mut |yes| if yes { block(at, n) } else { Ok(()) })?;
            at = k.add(at, bit)?;
            n /= 2;
        }
        Ok(())
    }

    /// One vector at `ox0` in each of `rows` (interior rows of a depthwise plane, one output
    /// channel per group), masked by the column masks of the position: per output the chain
    /// of [`Spatial::tile`] (from the bias, one FMA per tap in `(kh, kw)` order, then the
    /// activation).
    fn dw_tile(
        &self,
        img: &Img<'c>,
        rows: &[(Vec<TapRow<'c>>, IntValue<'c>)],
        ox0: IntValue<'c>,
        masked: bool,
    ) -> R<()> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let s = geo.sw;
        let (table, stores) = match self.table {
            Some(t) if masked => (Some(t.0), Some(t.1)),
            _ => (None, None),
        };
        let v = llvm(k.b.build_int_signed_div(ox0, k.c(w as i64), "v"))?;
        let cols: Vec<Option<VectorValue<'c>>> = (0..geo.kw)
            .map(|j| match table {
                Some(t) => {
                    let q = k.gep(t, k.add(k.mul(v, geo.kw)?, k.c(j))?)?;
                    Ok(Some(llvm(k.b.build_load(q, "cm"))?.into_vector_value()))
                }
                None => Ok(None),
            })
            .collect::<R<_>>()?;
        let taps = img
            .taps
            .as_ref()
            .ok_or_else(|| crate::CodegenError::Llvm("depthwise taps not loaded".into()))?;
        let bias = match img.bias {
            Some(p) => k.ld(p, k.c(0))?,
            None => k.f(0.0),
        };
        let mut acc: Vec<VectorValue<'c>> = vec![k.splat(bias, w)?; rows.len()];
        let ix0 = k.mul(ox0, s)?;
        for i in 0..geo.kh as usize {
            for j in 0..geo.kw {
                for (r, (tr, _)) in rows.iter().enumerate() {
                    let at = k.add(k.add(tr[i].1, ix0)?, k.c(j * geo.dw - geo.pl))?;
                    let wide = match cols[j as usize] {
                        Some(m) => d.ldv_mask(img.x, at, s as u32 * w, m)?,
                        None => k.ldv(img.x, at, s as u32 * w)?,
                    };
                    let x = self.every(wide)?;
                    acc[r] = k.fma(taps[i * geo.kw as usize + j as usize], x, acc[r])?;
                }
            }
        }
        let mask = match stores {
            Some(st) => Some(llvm(k.b.build_load(k.gep(st, v)?, "sm"))?.into_vector_value()),
            None => None,
        };
        for (r, (_, orow)) in rows.iter().enumerate() {
            let y = vector_activation(d, w, geo.act, acc[r])?;
            let at = k.add(*orow, ox0)?;
            match mask {
                Some(m) => d.stv_mask(img.o, at, y, m)?,
                None => k.stv(img.o, at, y)?,
            }
        }
        Ok(())
    }

    /// Every tile of output channels at one column position.
    fn channels(
        &self,
        img: &Img<'c>,
        rows: &[TapRow<'c>],
        orow: IntValue<'c>,
        ox0: IntValue<'c>,
        nv: u32,
        masked: bool,
    ) -> R<()> {
        let mr = if self.depthwise {
            1
        } else {
            dense_mr(self.w, self.geo.mg())
        };
        let masks = if masked {
            Some(self.masks(rows, ox0)?)
        } else {
            None
        };
        self.for_channels(mr, &mut |m0, mr| {
            self.tile(img, rows, masks.as_deref(), orow, ox0, nv, m0, mr)
        })
    }

    /// Per kernel row and column, the `sw·W` lanes a tap loads at `ox0`: every `sw`-th, for
    /// output columns below `ow`, reading inside the row, of a kernel row inside the image.
    fn masks(&self, rows: &[TapRow<'c>], ox0: IntValue<'c>) -> R<Vec<Vec<VectorValue<'c>>>> {
        let (d, geo) = (self.d, self.geo);
        let k = &d.k;
        let cols = match self.table {
            Some((table, _)) => {
                // Masked positions are whole vectors from column 0.
                let v = llvm(k.b.build_int_signed_div(ox0, k.c(self.w as i64), "v"))?;
                let at = k.mul(v, geo.kw)?;
                (0..geo.kw)
                    .map(|j| {
                        let q = k.gep(table, k.add(at, k.c(j))?)?;
                        Ok(llvm(k.b.build_load(q, "cm"))?.into_vector_value())
                    })
                    .collect::<R<_>>()?
            }
            None => self.col_masks(ox0)?,
        };
        let n = geo.sw as u32 * self.w;
        let off = k.ctx.bool_type().vec_type(n).const_zero();
        rows.iter()
            .map(|&(_, _, valid)| {
                cols.iter()
                    .map(|&c| match valid {
                        None => Ok(c),
                        Some(v) => Ok(llvm(k.b.build_select(v, c, off, "rm"))?.into_vector_value()),
                    })
                    .collect()
            })
            .collect()
    }

    /// A depthwise convolution's masks for every vector position of a row, made once per
    /// call (they are the same for every row and plane, and a depthwise tile has too few
    /// FMAs to make them per position): the column masks of [`Spatial::col_masks`] per
    /// position and kernel column, and the store masks of the output columns below `ow`.
    fn mask_table(&self) -> R<(PointerValue<'c>, PointerValue<'c>)> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let wl = w as i64;
        let n = geo.sw as u32 * w;
        let vecs = llvm(k.b.build_int_signed_div(k.add(geo.ow, k.c(wl - 1))?, k.c(wl), "vecs"))?;
        let vecs = d.imax(vecs, k.c(1))?;
        let cols = llvm(k.b.build_array_alloca(
            k.ctx.bool_type().vec_type(n),
            d.imul(vecs, k.c(geo.kw))?,
            "colmasks",
        ))?;
        let stores =
            llvm(k.b.build_array_alloca(k.ctx.bool_type().vec_type(w), vecs, "storemasks"))?;
        d.loop_step(k.c(0), vecs, 1, &mut |v| {
            let ox0 = k.mul(v, wl)?;
            for (j, c) in self.col_masks(ox0)?.into_iter().enumerate() {
                let q = k.gep(cols, k.add(k.mul(v, geo.kw)?, k.c(j as i64))?)?;
                llvm(k.b.build_store(q, c))?;
            }
            let m = d.lanes_below(d.sub(geo.ow, ox0)?, w)?;
            llvm(k.b.build_store(k.gep(stores, v)?, m))?;
            Ok(())
        })?;
        Ok((cols, stores))
    }

    /// Per kernel column, the `sw·W` lanes a tap loads at `ox0`: every `sw`-th, for output
    /// columns below `ow`, reading inside the row.
    fn col_masks(&self, ox0: IntValue<'c>) -> R<Vec<VectorValue<'c>>> {
        let (d, geo) = (self.d, self.geo);
        let k = &d.k;
        let s = geo.sw;
        let n = s as u32 * self.w;
        let i32t = k.ctx.i32_type();
        let lanes: Vec<IntValue> = (0..n).map(|q| i32t.const_int(q.into(), false)).collect();
        let q = VectorType::const_vector(&lanes);
        let kept: Vec<IntValue> = (0..n)
            .map(|q| {
                k.ctx
                    .bool_type()
                    .const_int(u64::from(q as i64 % s == 0), false)
            })
            .collect();
        let keep = VectorType::const_vector(&kept);
        // Lane `q` loads element `at + q` for output column `ox0 + q / s`: inside the row for
        // `q` in `[-at, wi - at)`, an output column for `q < s·(ow − ox0)`; both bounds
        // clamped to `[0, n]` (then exact in 32 bits) and compared per lane.
        let clamp = |x: IntValue<'c>| -> R<VectorValue<'c>> {
            let c = d.imin(d.imax(x, k.c(0))?, k.c(n as i64))?;
            let c = llvm(k.b.build_int_truncate(c, i32t, "c"))?;
            let v = llvm(k.b.build_insert_element(
                i32t.vec_type(n).get_undef(),
                c,
                i32t.const_zero(),
                "v",
            ))?;
            llvm(k.b.build_shuffle_vector(v, v, i32t.vec_type(n).const_zero(), "splat"))
        };
        let cols_left = k.mul(d.sub(geo.ow, ox0)?, s)?;
        let ix0 = k.mul(ox0, s)?;
        (0..geo.kw)
            .map(|j| {
                let at = k.add(ix0, k.c(j * geo.dw - geo.pl))?;
                let lo = clamp(d.sub(k.c(0), at)?)?;
                let hi = clamp(d.imin(d.sub(geo.wi, at)?, cols_left)?)?;
                let ge = d.vcmp(IntPredicate::SGE, q, lo)?;
                let lt = d.vcmp(IntPredicate::SLT, q, hi)?;
                d.vand(keep, d.vand(ge, lt)?)
            })
            .collect()
    }

    /// `mr` output channels from `m0` × `nv` vectors from `ox0` (one, masked, with `masks`).
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &self,
        img: &Img<'c>,
        rows: &[TapRow<'c>],
        masks: Option<&[Vec<VectorValue<'c>>]>,
        orow: IntValue<'c>,
        ox0: IntValue<'c>,
        nv: u32,
        m0: IntValue<'c>,
        mr: i64,
    ) -> R<()> {
        let (d, geo, w) = (self.d, self.geo, self.w);
        let k = &d.k;
        let wl = w as i64;
        let s = geo.sw;
        let taps = geo.kh * geo.kw;
        let cg = geo.cg();
        let nvu = nv as usize;
        let ms: Vec<IntValue<'c>> = (0..mr).map(|r| k.add(m0, k.c(r))).collect::<R<_>>()?;
        let bias = |m: IntValue<'c>| -> R<FloatValue<'c>> {
            match img.bias {
                Some(p) => k.ld(p, m),
                None => Ok(k.f(0.0)),
            }
        };
        // Depthwise chains start at the bias, the others at zero (`+ bias` at the end).
        let mut init: Vec<BasicValueEnum<'c>> = Vec::with_capacity(ms.len() * nvu);
        for &m in &ms {
            let v = if self.depthwise {
                k.splat(bias(m)?, w)?
            } else {
                k.vty(w).const_zero()
            };
            init.extend(std::iter::repeat(BasicValueEnum::from(v)).take(nvu));
        }
        let wrows: Vec<IntValue<'c>> = ms.iter().map(|&m| k.mul(m, cg * taps)).collect::<R<_>>()?;
        let ix0 = k.mul(ox0, s)?;
        let acc = k.loop_carry(0, cg, 1, init, &mut |c, cur| {
            let mut acc: Vec<VectorValue<'c>> = cur.iter().map(|v| v.into_vector_value()).collect();
            let xc = d.imul(c, self.hw)?;
            let wc = k.mul(c, taps)?;
            for (ri, &(i, rowoff, _)) in rows.iter().enumerate() {
                let xrow = k.add(xc, rowoff)?;
                for j in 0..geo.kw {
                    let bv: Vec<VectorValue<'c>> = (0..nv)
                        .map(|v| {
                            let at = k.add(
                                k.add(xrow, ix0)?,
                                k.c(v as i64 * wl * s + j * geo.dw - geo.pl),
                            )?;
                            let wide = match masks {
                                Some(mk) => {
                                    d.ldv_mask(img.x, at, s as u32 * w, mk[ri][j as usize])?
                                }
                                None => k.ldv(img.x, at, s as u32 * w)?,
                            };
                            self.every(wide)
                        })
                        .collect::<R<_>>()?;
                    let t = k.add(wc, k.c(i * geo.kw + j))?;
                    for (r, &wr) in wrows.iter().enumerate() {
                        let a = match &img.taps {
                            Some(tv) => tv[(i * geo.kw + j) as usize],
                            None => k.splat(k.ld(img.wt, k.add(wr, t)?)?, w)?,
                        };
                        for (v, &b) in bv.iter().enumerate() {
                            acc[r * nvu + v] = k.fma(a, b, acc[r * nvu + v])?;
                        }
                    }
                }
            }
            Ok(acc.into_iter().map(|v| v.into()).collect())
        })?;
        for (r, &m) in ms.iter().enumerate() {
            let plane = d.imul(m, self.ohw)?;
            let b = if self.depthwise {
                None
            } else {
                Some(k.splat(bias(m)?, w)?)
            };
            for v in 0..nvu {
                let mut y = acc[r * nvu + v].into_vector_value();
                if let Some(b) = b {
                    y = llvm(k.b.build_float_add(y, b, "b"))?;
                }
                let y = vector_activation(d, w, geo.act, y)?;
                let col = k.add(ox0, k.c(v as i64 * wl))?;
                let at = k.add(k.add(plane, orow)?, col)?;
                if masks.is_some() {
                    let mask = match self.table {
                        Some((_, stores)) => {
                            let v = llvm(k.b.build_int_signed_div(col, k.c(wl), "v"))?;
                            llvm(k.b.build_load(k.gep(stores, v)?, "sm"))?.into_vector_value()
                        }
                        None => d.lanes_below(d.sub(geo.ow, col)?, w)?,
                    };
                    d.stv_mask(img.o, at, y, mask)?;
                } else {
                    k.stv(img.o, at, y)?;
                }
            }
        }
        Ok(())
    }

    /// Every `sw`-th lane of a `sw·W`-lane load.
    fn every(&self, wide: VectorValue<'c>) -> R<VectorValue<'c>> {
        let k = &self.d.k;
        let s = self.geo.sw as u32;
        if s == 1 {
            return Ok(wide);
        }
        let i32t = k.ctx.i32_type();
        let mask: Vec<_> = (0..self.w)
            .map(|l| i32t.const_int(u64::from(l * s), false))
            .collect();
        llvm(k.b.build_shuffle_vector(
            wide,
            wide.get_type().get_undef(),
            VectorType::const_vector(&mask),
            "every",
        ))
    }
}

/// Where one image and group's input channels, output channels, weights and bias start.
struct Img<'c> {
    x: PointerValue<'c>,
    o: PointerValue<'c>,
    wt: PointerValue<'c>,
    bias: Option<PointerValue<'c>>,
    /// A depthwise plane's taps, broadcast once per plane (one output channel per group).
    taps: Option<Vec<VectorValue<'c>>>,
}

/// The activation on a vector, each lane as the scalar `kernels::common::activation`: ReLU
/// and the clips as the same vector selects, the others lane by lane.
pub(super) fn vector_activation<'a, 'c>(
    d: &Dk<'a, 'c>,
    w: u32,
    act: Option<Activation>,
    y: VectorValue<'c>,
) -> R<VectorValue<'c>> {
    use inkwell::FloatPredicate::{OGT, OLT};
    let k = &d.k;
    let splat = |v: f64| k.splat(k.f(v), w);
    let sel = |p,
               x: VectorValue<'c>,
               t: VectorValue<'c>,
               a: VectorValue<'c>,
               b: VectorValue<'c>|
     -> R<VectorValue<'c>> {
        let c = llvm(k.b.build_float_compare(p, x, t, "c"))?;
        Ok(llvm(k.b.build_select(c, a, b, "sel"))?.into_vector_value())
    };
    // `clip(x, lo, hi)`: `x > hi ? hi : x`, then `x < lo ? lo : that` (`K::clip`).
    let clip = |lo: f64, hi: f64| -> R<VectorValue<'c>> {
        let (lo, hi) = (splat(lo)?, splat(hi)?);
        let t = sel(OGT, y, hi, hi, y)?;
        sel(OLT, y, lo, lo, t)
    };
    match act {
        None => Ok(y),
        Some(Activation::Relu) => {
            let z = splat(0.0)?;
            sel(OLT, y, z, z, y)
        }
        Some(Activation::Relu6) => clip(0.0, 6.0),
        Some(Activation::ReluN1To1) => clip(-1.0, 1.0),
        other => k.map_lanes(y, w, &mut |_, x| activation(k, other, x)),
    }
}
