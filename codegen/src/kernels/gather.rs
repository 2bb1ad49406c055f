//! Kernels whose input index is a function of the output index known at compile time:
//! `pad` with `reflect`/`edge` modes, `resize` (nearest and bilinear) and the reductions (`reduce_*`).
//!
//! Shapes are static, so the per-axis index maps (and bilinear weights) are computed here, at
//! compile time, and stored as constant tables the kernel reads: the generated loops do no
//! coordinate arithmetic. The tables follow ONNX's definitions (Pad `reflect`/`edge`, Resize's
//! `coordinate_transformation_mode` and `nearest_mode`) written independently of the reference
//! interpreter, which checks them (`codegen/tests/kernels.rs`).

use super::common::{bytes_of, contiguous, dims, unsupported, Call};
use crate::nest::{llvm, K, R};
use crate::storage::Storage;
use crate::{Arg, CodegenError, Gen};
use inkwell::module::Linkage;
use inkwell::types::VectorType;
use inkwell::values::{FloatValue, IntValue, PointerValue, VectorValue};
use inkwell::AddressSpace;
use tir_ir::op::{CoordMode, NearestMode, PadMode, ReduceKind, Resize, ResizeMode};
use tir_ir::{Function, OpData};

/// The input index of the (possibly out-of-range) index `i` on an axis of `len` elements:
/// `reflect` mirrors without repeating the edge (ONNX: `-1 → 1`, `len → len - 2`), `edge`
/// clamps. Constant padding never asks.
fn pad_source(mode: PadMode, i: i64, len: i64) -> i64 {
    if (0..len).contains(&i) || len == 1 {
        return i.clamp(0, len - 1);
    }
    match mode {
        PadMode::Edge | PadMode::Constant => i.clamp(0, len - 1),
        PadMode::Reflect => {
            // Reflection is periodic with period 2(len - 1).
            let p = 2 * (len - 1);
            let m = i.rem_euclid(p);
            if m < len {
                m
            } else {
                p - m
            }
        }
    }
}

/// One output coordinate's source along an axis: two taps and the weight of the second.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ResizeTap {
    i0: i64,
    i1: i64,
    frac: f64,
}

/// The source taps of every output index along an axis of `input` → `output` elements. The
/// source coordinate is the exact fraction `num / den` (ONNX Resize's
/// `coordinate_transformation_mode`), so nearest-mode ties are decided exactly.
fn resize_taps(rz: &Resize, input: usize, output: usize) -> Vec<ResizeTap> {
    let (i, n) = (input as i128, output as i128);
    (0..n)
        .map(|o| {
            let (num, den) = match rz.coord {
                // x_in = (x_out + 0.5) * in / out - 0.5
                CoordMode::HalfPixel => ((2 * o + 1) * i - n, 2 * n),
                CoordMode::PytorchHalfPixel if n > 1 => ((2 * o + 1) * i - n, 2 * n),
                CoordMode::PytorchHalfPixel => (0, 1),
                // x_in = x_out * (in - 1) / (out - 1)
                CoordMode::AlignCorners if n > 1 => (o * (i - 1), n - 1),
                CoordMode::AlignCorners => (0, 1),
                // x_in = x_out * in / out
                CoordMode::Asymmetric => (o * i, n),
            };
            let last = i - 1;
            match rz.mode {
                ResizeMode::Nearest => {
                    let fl = num.div_euclid(den);
                    let rem = num.rem_euclid(den);
                    let idx = match rz.nearest {
                        NearestMode::Floor => fl,
                        NearestMode::Ceil => fl + i128::from(rem != 0),
                        NearestMode::RoundPreferFloor => fl + i128::from(2 * rem > den),
                        NearestMode::RoundPreferCeil => fl + i128::from(2 * rem >= den && rem != 0),
                    }
                    .clamp(0, last) as i64;
                    ResizeTap {
                        i0: idx,
                        i1: idx,
                        frac: 0.0,
                    }
                }
                ResizeMode::Bilinear => {
                    // The coordinate is clamped into [0, in - 1].
                    if num <= 0 {
                        ResizeTap {
                            i0: 0,
                            i1: 0,
                            frac: 0.0,
                        }
                    } else if num / den >= last {
                        let l = last as i64;
                        ResizeTap {
                            i0: l,
                            i1: l,
                            frac: 0.0,
                        }
                    } else {
                        let fl = (num / den) as i64;
                        ResizeTap {
                            i0: fl,
                            i1: fl + 1,
                            frac: (num % den) as f64 / den as f64,
                        }
                    }
                }
            }
        })
        .collect()
}

/// The output columns `resize` computes per vector (four doubles: one AVX2 register).
const RESIZE_LANES: u32 = 4;

/// A private constant `i64` table.
fn table_i64<'a, 'c>(g: &Gen<'a, 'c>, name: &str, data: &[i64]) -> PointerValue<'c> {
    let t = g.ctx.i64_type();
    let vals: Vec<_> = data.iter().map(|&v| t.const_int(v as u64, true)).collect();
    let init = t.const_array(&vals);
    let gv = g.module.add_global(init.get_type(), None, name);
    gv.set_initializer(&init);
    gv.set_constant(true);
    gv.set_linkage(Linkage::Private);
    gv.as_pointer_value()
        .const_cast(t.ptr_type(AddressSpace::default()))
}

/// A private constant `double` table.
fn table_f64<'a, 'c>(g: &Gen<'a, 'c>, name: &str, data: &[f64]) -> PointerValue<'c> {
    let t = g.ctx.f64_type();
    let vals: Vec<_> = data.iter().map(|&v| t.const_float(v)).collect();
    let init = t.const_array(&vals);
    let gv = g.module.add_global(init.get_type(), None, name);
    gv.set_initializer(&init);
    gv.set_constant(true);
    gv.set_linkage(Linkage::Private);
    gv.as_pointer_value()
        .const_cast(t.ptr_type(AddressSpace::default()))
}

fn ld_i64<'a, 'c>(k: &K<'a, 'c>, t: PointerValue<'c>, i: IntValue<'c>) -> R<IntValue<'c>> {
    let q = k.gep(t, i)?;
    Ok(llvm(k.b.build_load(q, "ix"))?.into_int_value())
}

fn ld_f64<'a, 'c>(k: &K<'a, 'c>, t: PointerValue<'c>, i: IntValue<'c>) -> R<FloatValue<'c>> {
    let q = k.gep(t, i)?;
    Ok(llvm(k.b.build_load(q, "wt"))?.into_float_value())
}

fn to_f64<'a, 'c>(k: &K<'a, 'c>, x: FloatValue<'c>) -> R<FloatValue<'c>> {
    llvm(k.b.build_float_ext(x, k.ctx.f64_type(), "d"))
}

/// The kernel of `pad` with `reflect` or `edge` mode: one loop per output axis; the input
/// offset of output index `o` on axis `d` is `map_d[o] * stride_d`, from a constant table
/// built at compile time by [`pad_source`].
pub(crate) fn pad_gather<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    pads: &[u64],
    mode: PadMode,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let (xd, od) = (dims(func, x)?, dims(func, r)?);
    if xd.contains(&0) || od.contains(&0) {
        return Ok(vec![]);
    }
    let xs = contiguous(&xd);
    let os = contiguous(&od);
    // Per axis: the table of input element offsets (input index × input stride), or None
    // where the axis is not padded (the input index is the output index).
    let mut maps: Vec<Option<PointerValue<'c>>> = Vec::new();
    for d in 0..xd.len() {
        if od[d] == xd[d] {
            maps.push(None);
            continue;
        }
        let offs: Vec<i64> = (0..od[d])
            .map(|o| pad_source(mode, o - pads[d] as i64, xd[d]) * xs[d])
            .collect();
        maps.push(Some(table_i64(g, &format!("{name}_map{d}"), &offs)));
    }
    let args = [
        Arg {
            loc: st.of(func, x)?,
            bytes: bytes_of(&xd),
        },
        Arg {
            loc: st.of(func, r)?,
            bytes: bytes_of(&od),
        },
    ];
    let f = g.kernel(name, &args, &[false, true]);
    let k = g.k(f);
    let (px, po) = (g.param(f, 0)?, g.param(f, 1)?);
    #[allow(clippy::too_many_arguments)]
    fn rec<'a, 'c>(
        k: &K<'a, 'c>,
        d: usize,
        od: &[i64],
        os: &[i64],
        xs: &[i64],
        maps: &[Option<PointerValue<'c>>],
        (ix, io): (IntValue<'c>, IntValue<'c>),
        (px, po): (PointerValue<'c>, PointerValue<'c>),
    ) -> R<()> {
        if d == od.len() {
            let v = k.ld(px, ix)?;
            return k.st(po, io, v);
        }
        k.loop_(0, od[d], &mut |iv| {
            let xo = match maps[d] {
                Some(t) => ld_i64(k, t, iv)?,
                None => k.mul(iv, xs[d])?,
            };
            let ix2 = k.add(ix, xo)?;
            let io2 = k.add(io, k.mul(iv, os[d])?)?;
            rec(k, d + 1, od, os, xs, maps, (ix2, io2), (px, po))
        })
    }
    rec(&k, 0, &od, &os, &xs, &maps, (k.c(0), k.c(0)), (px, po))?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

/// The kernel of `resize` on NCHW: per image plane, per output row, per output column, the
/// source taps come from constant tables (rows pre-multiplied by the input width). Bilinear
/// interpolation is computed in `f64` as the interpreter does.
pub(crate) fn resize<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    rz: &Resize,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let (xd, od) = (dims(func, x)?, dims(func, r)?);
    if xd.len() != 4 || od.len() != 4 {
        return Err(unsupported(func, op, "resize takes an NCHW tensor"));
    }
    if xd.contains(&0) || od.contains(&0) {
        return Ok(vec![]);
    }
    let (h, w, oh, ow) = (xd[2], xd[3], od[2], od[3]);
    let planes = xd[0] * xd[1];
    let ys: Vec<ResizeTap> = resize_taps(rz, h as usize, oh as usize);
    let xs: Vec<ResizeTap> = resize_taps(rz, w as usize, ow as usize);
    let y0 = table_i64(
        g,
        &format!("{name}_y0"),
        &ys.iter().map(|t| t.i0 * w).collect::<Vec<_>>(),
    );
    let y1 = table_i64(
        g,
        &format!("{name}_y1"),
        &ys.iter().map(|t| t.i1 * w).collect::<Vec<_>>(),
    );
    let ly = table_f64(
        g,
        &format!("{name}_ly"),
        &ys.iter().map(|t| t.frac).collect::<Vec<_>>(),
    );
    let x0 = table_i64(
        g,
        &format!("{name}_x0"),
        &xs.iter().map(|t| t.i0).collect::<Vec<_>>(),
    );
    let x1 = table_i64(
        g,
        &format!("{name}_x1"),
        &xs.iter().map(|t| t.i1).collect::<Vec<_>>(),
    );
    let lx = table_f64(
        g,
        &format!("{name}_lx"),
        &xs.iter().map(|t| t.frac).collect::<Vec<_>>(),
    );
    let args = [
        Arg {
            loc: st.of(func, x)?,
            bytes: bytes_of(&xd),
        },
        Arg {
            loc: st.of(func, r)?,
            bytes: bytes_of(&od),
        },
    ];
    // Planes are independent: cut for threads by whole planes.
    let work = crate::parallel::work(
        (planes * oh * ow * 8).max(0) as u64,
        4 * (planes * (h * w + oh * ow)).max(0) as u64,
    );
    // Output columns in vectors of `RESIZE_LANES`: the taps gathered lane by lane, the
    // interpolation in `<RESIZE_LANES x double>` with the scalar path's operations per lane
    // (so bitwise the same), one vector store; the columns past the last whole vector on the
    // scalar path. Scalar, the per-element f64 arithmetic was ~7% of BlazePose's time.
    let full = ow / RESIZE_LANES as i64 * RESIZE_LANES as i64;
    let f = g.units_kernel(
        name,
        &args,
        &[false, true],
        planes,
        work,
        &mut |k, ps, u0, count| {
            let (px, po) = (ps[0], ps[1]);
            let bilinear = rz.mode == ResizeMode::Bilinear;
            let f64t = g.ctx.f64_type();
            let f64v = f64t.vec_type(RESIZE_LANES);
            let lane = |l: u32| k.ctx.i32_type().const_int(l.into(), false);
            // One lane's source element of each of the vector's columns `ox..ox + W`.
            let gather = |row: IntValue<'c>, t: PointerValue<'c>, ox: IntValue<'c>| {
                let mut v = k.vty(RESIZE_LANES).get_undef();
                for l in 0..RESIZE_LANES {
                    let col = ld_i64(k, t, k.add(ox, k.c(l.into()))?)?;
                    let e = k.ld(px, k.add(row, col)?)?;
                    v = llvm(k.b.build_insert_element(v, e, lane(l), "g"))?;
                }
                Ok::<_, CodegenError>(v)
            };
            let weights = |t: PointerValue<'c>, ox: IntValue<'c>| {
                let mut v = f64v.get_undef();
                for l in 0..RESIZE_LANES {
                    let e = ld_f64(k, t, k.add(ox, k.c(l.into()))?)?;
                    v = llvm(k.b.build_insert_element(v, e, lane(l), "w"))?;
                }
                Ok::<_, CodegenError>(v)
            };
            let one_v =
                VectorType::const_vector(&vec![f64t.const_float(1.0); RESIZE_LANES as usize]);
            // a * (1 - t) + b * t, as the interpreter writes it, per lane.
            let lerp_v = |a: VectorValue<'c>, b: VectorValue<'c>, t: VectorValue<'c>| {
                let s = llvm(k.b.build_float_sub(one_v, t, "s"))?;
                let p = llvm(k.b.build_float_mul(a, s, "p"))?;
                let q = llvm(k.b.build_float_mul(b, t, "q"))?;
                llvm(k.b.build_float_add(p, q, "l"))
            };
            let ext = |v: VectorValue<'c>| llvm(k.b.build_float_ext(v, f64v, "d"));
            k.loop_(0, count, &mut |p| {
                let p = k.add(p, u0)?;
                let bx = k.mul(p, h * w)?;
                let bo = k.mul(p, oh * ow)?;
                k.loop_(0, oh, &mut |oy| {
                    let r0 = k.add(bx, ld_i64(k, y0, oy)?)?;
                    let r1 = k.add(bx, ld_i64(k, y1, oy)?)?;
                    let wy = ld_f64(k, ly, oy)?;
                    let ro = k.add(bo, k.mul(oy, ow)?)?;
                    k.loop_step(0, full, RESIZE_LANES.into(), &mut |ox| {
                        let v = if !bilinear {
                            gather(r0, x0, ox)?
                        } else {
                            let wx = weights(lx, ox)?;
                            let mut wyv = f64v.get_undef();
                            for l in 0..RESIZE_LANES {
                                wyv = llvm(k.b.build_insert_element(wyv, wy, lane(l), "wy"))?;
                            }
                            let top =
                                lerp_v(ext(gather(r0, x0, ox)?)?, ext(gather(r0, x1, ox)?)?, wx)?;
                            let bottom =
                                lerp_v(ext(gather(r1, x0, ox)?)?, ext(gather(r1, x1, ox)?)?, wx)?;
                            let y = lerp_v(top, bottom, wyv)?;
                            llvm(k.b.build_float_trunc(y, k.vty(RESIZE_LANES), "y"))?
                        };
                        k.stv(po, k.add(ro, ox)?, v)
                    })?;
                    k.loop_(full, ow, &mut |ox| {
                        let c0 = ld_i64(k, x0, ox)?;
                        let v = if !bilinear {
                            k.ld(px, k.add(r0, c0)?)?
                        } else {
                            let c1 = ld_i64(k, x1, ox)?;
                            let wx = ld_f64(k, lx, ox)?;
                            let one = f64t.const_float(1.0);
                            let v = |row: IntValue<'c>, col: IntValue<'c>| -> R<FloatValue<'c>> {
                                to_f64(k, k.ld(px, k.add(row, col)?)?)
                            };
                            let lerp = |a: FloatValue<'c>, b: FloatValue<'c>, t: FloatValue<'c>| {
                                // a * (1 - t) + b * t, as the interpreter writes it.
                                let s = llvm(k.b.build_float_sub(one, t, "s"))?;
                                let p = llvm(k.b.build_float_mul(a, s, "p"))?;
                                let q = llvm(k.b.build_float_mul(b, t, "q"))?;
                                llvm(k.b.build_float_add(p, q, "l"))
                            };
                            let top = lerp(v(r0, c0)?, v(r0, c1)?, wx)?;
                            let bottom = lerp(v(r1, c0)?, v(r1, c1)?, wx)?;
                            let y = lerp(top, bottom, wy)?;
                            llvm(k.b.build_float_trunc(y, k.f32t, "y"))?
                        };
                        k.st(po, k.add(ro, ox)?, v)
                    })
                })
            })
        },
    )?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

/// The accumulator after element `v`, as [`ReduceKind::step`] computes it (the reference):
/// max and min keep a NaN once seen (`v > a || v is NaN`, ordered comparisons).
pub(crate) fn reduce_step<'a, 'c>(
    k: &K<'a, 'c>,
    kind: ReduceKind,
    a: FloatValue<'c>,
    v: FloatValue<'c>,
) -> R<FloatValue<'c>> {
    use inkwell::FloatPredicate::{OGT, OLT, UNO};
    let b = k.b;
    let pick = |better: inkwell::FloatPredicate| -> R<FloatValue<'c>> {
        let c = llvm(b.build_float_compare(better, v, a, "better"))?;
        let nan = llvm(b.build_float_compare(UNO, v, v, "nan"))?;
        let take = llvm(b.build_or(c, nan, "take"))?;
        Ok(llvm(b.build_select(take, v, a, "m"))?.into_float_value())
    };
    Ok(match kind {
        ReduceKind::Mean | ReduceKind::Sum | ReduceKind::LogSum => {
            llvm(b.build_float_add(a, v, "s"))?
        }
        ReduceKind::Max => pick(OGT)?,
        ReduceKind::Min => pick(OLT)?,
        ReduceKind::Prod => llvm(b.build_float_mul(a, v, "p"))?,
        ReduceKind::L1 => {
            let fabs = k.intrinsic("llvm.fabs", &[v.get_type().into()])?;
            let m = call_f(k, fabs, &[v])?;
            llvm(b.build_float_add(a, m, "s"))?
        }
        ReduceKind::L2 | ReduceKind::SumSquare => {
            let sq = llvm(b.build_float_mul(v, v, "sq"))?;
            llvm(b.build_float_add(a, sq, "s"))?
        }
        ReduceKind::LogSumExp => llvm(b.build_float_add(a, k.exp_libm(v)?, "s"))?,
    })
}

/// A call of `f` on float arguments, its float result.
fn call_f<'a, 'c>(
    k: &K<'a, 'c>,
    f: inkwell::values::FunctionValue<'c>,
    args: &[FloatValue<'c>],
) -> R<FloatValue<'c>> {
    let args: Vec<_> = args.iter().map(|&x| x.into()).collect();
    llvm(k.b.build_call(f, &args, "c"))?
        .try_as_basic_value()
        .basic()
        .map(|v| v.into_float_value())
        .ok_or_else(|| CodegenError::Llvm("call returned no value".into()))
}

/// The kernel of `reduce_mean`: the kept axes outside, the reduced axes inside, summed in
/// `f64` in the input's row-major order (the interpreter's order), then divided by the count.
pub(crate) fn reduce<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    kind: ReduceKind,
    axes: &[i64],
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let (xd, od) = (dims(func, x)?, dims(func, r)?);
    let rank = xd.len();
    let reduced: Vec<usize> = if axes.is_empty() {
        (0..rank).collect()
    } else {
        axes.iter()
            .map(|&a| tir_ir::shape::norm_axis(a, rank).unwrap_or(0))
            .collect()
    };
    let xs = contiguous(&xd);
    // Output strides of the kept axes (the output's element order is theirs, keepdims or not).
    let mut ostr = vec![0i64; rank];
    let mut acc = 1i64;
    for d in (0..rank).rev() {
        if !reduced.contains(&d) {
            ostr[d] = acc;
            acc *= xd[d];
        }
    }
    let kept: Vec<usize> = (0..rank).filter(|d| !reduced.contains(d)).collect();
    let red: Vec<usize> = (0..rank).filter(|d| reduced.contains(d)).collect();
    let count: i64 = red.iter().map(|&d| xd[d]).product();
    if od.contains(&0) {
        return Ok(vec![]);
    }
    let args = [
        Arg {
            loc: st.of(func, x)?,
            bytes: bytes_of(&xd),
        },
        Arg {
            loc: st.of(func, r)?,
            bytes: bytes_of(&od),
        },
    ];
    let f = g.kernel(name, &args, &[false, true]);
    let k = g.k(f);
    let (px, po) = (g.param(f, 0)?, g.param(f, 1)?);
    let f64t = g.ctx.f64_type();
    // The accumulator, in the entry block so it is promoted to a register.
    let accp = llvm(g.builder.build_alloca(f64t, "acc"))?;
    type Body<'b, 'c> = dyn FnMut(IntValue<'c>) -> R<()> + 'b;
    fn walk<'a, 'c>(
        k: &K<'a, 'c>,
        axes: &[usize],
        xd: &[i64],
        xs: &[i64],
        ix: IntValue<'c>,
        body: &mut Body<'_, 'c>,
    ) -> R<()> {
        match axes.split_first() {
            None => body(ix),
            Some((&d, rest)) => k.loop_(0, xd[d], &mut |iv| {
                let ix2 = k.add(ix, k.mul(iv, xs[d])?)?;
                walk(k, rest, xd, xs, ix2, body)
            }),
        }
    }
    // The output index of the kept indices: the kept-axis strides of the output.
    let ox_strides: Vec<i64> = kept.iter().map(|&d| ostr[d]).collect();
    let kx_strides: Vec<i64> = kept.iter().map(|&d| xs[d]).collect();
    let kd: Vec<i64> = kept.iter().map(|&d| xd[d]).collect();
    let mut ivs: Vec<IntValue<'c>> = Vec::new();
    fn outer<'a, 'c>(
        k: &K<'a, 'c>,
        kd: &[i64],
        ivs: &mut Vec<IntValue<'c>>,
        body: &mut dyn FnMut(&[IntValue<'c>]) -> R<()>,
    ) -> R<()> {
        if ivs.len() == kd.len() {
            return body(ivs);
        }
        k.loop_(0, kd[ivs.len()], &mut |iv| {
            ivs.push(iv);
            let r = outer(k, kd, ivs, body);
            ivs.pop();
            r
        })
    }
    outer(&k, &kd, &mut ivs, &mut |ivs| {
        let io = k.index(0, ivs, &ox_strides)?;
        let base = k.index(0, ivs, &kx_strides)?;
        llvm(k.b.build_store(accp, f64t.const_float(kind.init())))?;
        walk(&k, &red, &xd, &xs, base, &mut |ix| {
            let v = to_f64(&k, k.ld(px, ix)?)?;
            let a = llvm(k.b.build_load(accp, "a"))?.into_float_value();
            let s = reduce_step(&k, kind, a, v)?;
            llvm(k.b.build_store(accp, s))?;
            Ok(())
        })?;
        let a = llvm(k.b.build_load(accp, "a"))?.into_float_value();
        let m = match kind {
            ReduceKind::Mean => llvm(k.b.build_float_div(a, f64t.const_float(count as f64), "m"))?,
            ReduceKind::L2 => k.sqrt(a)?,
            ReduceKind::LogSum | ReduceKind::LogSumExp => {
                let log = k.intrinsic("llvm.log", &[f64t.into()])?;
                call_f(&k, log, &[a])?
            }
            _ => a,
        };
        let m = llvm(k.b.build_float_trunc(m, k.f32t, "m"))?;
        k.st(po, io, m)
    })?;
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}
