//! Convolution, by shape: 1×1 with unit strides and no padding is a GEMM per image and group
//! on the micro-kernel; depthwise (one input channel per group) is [`depthwise`]; a dense one
//! with at least 32 output channels and a stride, or with unit strides on rows too wide for
//! row packing, is a GEMM on a packed im2col panel ([`panel`]); every other convolution is
//! an implicit-im2col GEMM, row-packed ([`rowpack`]) on images narrow enough for it, else
//! one output row per tile ([`im2col`]). Transposed convolution is
//! [`transpose`]: one stride-1 sub-convolution per output phase on the same tiles.

mod depthwise;
mod geometry;
mod im2col;
mod panel;
mod rowpack;
mod sparse;
mod transpose;

pub(crate) use sparse::{csr_bytes as sparse_csr_bytes, row_stride as sparse_row_stride};

use super::common::{args_of, dims, unsupported, Call};
use super::gemm::{
    chanvec_narrow_image, chanvec_pixels, chanvec_rows, chanvec_split_evenly, gemm_chanvec,
    gemm_packed, gemm_residual, narrow_rows, Epilogue, Gemm, PackedRows,
};
use crate::nest::{llvm, K, R};
use crate::parallel::Tiling;
use crate::storage::Storage;
use crate::{CodegenError, Gen};
use geometry::{Conv, Io};
use tir_ir::op::{Conv2d, ConvTranspose};
use tir_ir::{Function, OpData};

pub(crate) fn conv2d<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    c: &Conv2d,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, wv, r) = (op.operands[0], op.operands[1], op.results[0]);
    let bias = op.operands.get(2).copied();
    // The residual (fourth operand, after the bias): read by every kernel at the index it
    // stores to, in the same tile and thread, and added after the bias.
    let residual = c.residual_index(op.operands.len()).map(|i| op.operands[i]);
    // A fused PReLU's slope (the last operand): loaded with each channel's bias and applied
    // after the activation, in the same epilogue.
    let slope = c.slope_index(op.operands.len()).map(|i| op.operands[i]);
    let per_channel = match slope {
        Some(s) => dims(func, s)?.iter().product::<i64>() != 1,
        None => false,
    };
    let xd = dims(func, x)?;
    let wd = dims(func, wv)?;
    let od = dims(func, r)?;
    if xd.len() != 4 || wd.len() != 4 || od.len() != 4 {
        return Err(unsupported(func, op, "conv2d needs rank-4 operands"));
    }
    let d = geometry(c, &xd, &wd, &od);
    let (n, ci, h, wi) = (d.n, d.c, d.h, d.wi);
    let (m, cg, kh, kw) = (d.m, wd[1], d.kh, d.kw);
    let (oh, ow) = (d.oh, d.ow);
    let groups = d.groups;
    let mg = m / groups.max(1);
    let (sh, sw, dh, dw) = (d.sh, d.sw, d.dh, d.dw);
    let mut vals = vec![x, wv];
    vals.extend(bias);
    vals.extend(residual);
    vals.extend(slope);
    vals.push(r);
    let args = args_of(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    // Weights packed at compile time into the narrow tiles' row panels (`Storage::
    // pack_panels`, which asked `panel_rows` of this op at this width).
    let packed = st.panel_rows(wv);
    if packed.is_some() && packed != panel_rows(func, op, g.width) {
        return Err(unsupported(
            func,
            op,
            "its weights were packed in panels for another kernel",
        ));
    }
    // Weights stored as their nonzeros at compile time (`Storage::pack_sparse`, which asked
    // `sparse::row_stride` of this op with these weights).
    let sparse_stride = st.sparse_stride(wv);
    // A kernel as big as its unpadded input (one output pixel: iris_landmark's 2×2 heads on
    // 2×2 images, a classifier written as a convolution) reads `x[c, i, j]` with `w[m, c, i,
    // j]`: both are `[C·KH·KW]` rows in the same order, so it is the pointwise convolution of
    // a `C·KH·KW`-channel 1×1 image, a matrix–vector product. The row-packed kernel spent 66
    // µs on iris_landmark's 128·2·2 → 213 head, one lane of each vector live.
    let whole = groups == 1
        && dh == 1
        && dw == 1
        && c.pads == [0; 4]
        && (kh, kw) == (h, wi)
        && (oh, ow) == (1, 1);
    let d = if whole {
        Conv {
            c: ci * h * wi,
            h: 1,
            wi: 1,
            kh: 1,
            kw: 1,
            sh: 1,
            sw: 1,
            ..d
        }
    } else {
        d
    };
    let (ci, h, wi) = (d.c, d.h, d.wi);
    let pointwise = whole || (kh == 1 && kw == 1 && sh == 1 && sw == 1 && c.pads == [0; 4]);
    if let Some(hw) = sparse_stride {
        if !pointwise || groups != 1 || (kh, kw) != (1, 1) || hw != oh * ow {
            return Err(unsupported(
                func,
                op,
                "its weights were stored sparse for another kernel",
            ));
        }
    }
    let sparse_cut =
        sparse_stride.map(|_| sparse::cut(&d, g.width, st.sparse_nonzeros(wv), g.min_tile_flops));
    let tiling = match &sparse_cut {
        Some(c) => c.tiling(),
        None => tiling(&d, pointwise, g.width, conv_work(&d), g.min_tile_flops),
    };
    let nargs = args.len() as u32;
    let f = kernel_for(g, name, &args, &writes, &tiling);
    let k = g.k(f);
    let per_channel = slope.map(|_| per_channel);
    let io = Io::params(g, f, nargs, bias.is_some(), residual.is_some(), per_channel)?;
    // Packed weights read from their first row (a kernel that is not cut by channels).
    let whole = PackedRows {
        first: k.c(0),
        total: m,
    };
    // Image `image`, its input from element `xo` and its output from `oo` of the image.
    let image_at = |image, xo, oo| {
        let xo = k.add(k.mul(image, ci * h * wi)?, xo)?;
        let oo = k.add(k.mul(image, m * oh * ow)?, oo)?;
        io.at(&k, xo, oo)
    };
    let all_channels = (k.c(0), k.c(m));
    if sparse_stride.is_some() && !tiling.is_parallel() {
        // Every image whole.
        k.loop_(0, n, &mut |image| {
            let s = image_at(image, k.c(0), k.c(0))?;
            sparse::emit(&k, g.width, &d, oh * ow, all_channels, s)
        })?;
    } else if let Some(sparse::Cut::Channels { bounds, .. }) = &sparse_cut {
        // Ranges of output channels: each tile runs its channels on every pixel.
        let range = |i: u32| {
            f.get_nth_param(i)
                .map(|p| p.into_int_value())
                .ok_or_else(|| CodegenError::Llvm("missing tile range parameter".into()))
        };
        let tiles = (range(nargs)?, range(nargs + 1)?);
        sparse::for_channel_tiles(&k, tiles, bounds, &mut |image, ms| {
            let s = image_at(image, k.c(0), k.c(0))?;
            sparse::emit(&k, g.width, &d, oh * ow, ms, s)
        })?;
    } else if sparse_stride.is_some() {
        // Chunks of whole pixel blocks: each tile runs every output channel on its pixels.
        g.for_tiles(&k, f, nargs, tiling, &mut |image, j0, cols| {
            let s = image_at(image, j0, j0)?;
            sparse::emit(&k, g.width, &d, cols, all_channels, s)
        })?;
    } else if !tiling.is_parallel() {
        emit(
            &k,
            g.width,
            &d,
            pointwise,
            None,
            packed.map(|mr| (mr, whole)),
            io,
        )?;
    } else if pointwise && groups == 1 && split_columns(&d, g.width, g.min_tile_flops) {
        // Chunks of output pixels: each tile multiplies all of W by its columns of x.
        g.for_tiles(&k, f, nargs, tiling, &mut |image, j0, cols| {
            let sub = Conv { n: 1, ..d };
            let at = image_at(image, j0, j0)?;
            let packed = packed.map(|mr| (mr, whole));
            emit(&k, g.width, &sub, true, Some(cols), packed, at)
        })?;
    } else if rowpack_pixels(&d, g.width) {
        // Bands of output rows: ranges of the periodic run's pixel tiles (at run time), or
        // ranges of grid vectors (constants: the tile picks its chunk's code).
        let (_, periodic) = rowpack::pixel_units(&d, g.width);
        let sub = Conv { n: 1, ..d };
        g.for_tiles(&k, f, nargs, tiling, &mut |image, u0, units| {
            let at = image_at(image, k.c(0), k.c(0))?;
            let body = |part| rowpack::emit(&k, g.width, &sub, part, at);
            if periodic {
                return body(rowpack::Part::Tiles {
                    first: u0,
                    count: units,
                });
            }
            for c in (0..tiling.count).filter(|&c| tiling.size(c) == units) {
                let a = tiling.first(c);
                let is =
                    llvm(k.b.build_int_compare(inkwell::IntPredicate::EQ, u0, k.c(a), "chunk"))?;
                k.when(is, &mut || body(rowpack::Part::Vectors { a, b: a + units }))?;
            }
            Ok(())
        })?;
    } else if !pointwise && im2col_rows(&d, g.width, conv_work(&d), g.min_tile_flops) {
        // Bands of output rows: the tile picks its chunk's code (each band's border rows are
        // known at compile time).
        let sub = Conv { n: 1, ..d };
        g.for_tiles(&k, f, nargs, tiling, &mut |image, u0, units| {
            let at = image_at(image, k.c(0), k.c(0))?;
            for c in (0..tiling.count).filter(|&c| tiling.size(c) == units) {
                let a = tiling.first(c);
                let is =
                    llvm(k.b.build_int_compare(inkwell::IntPredicate::EQ, u0, k.c(a), "chunk"))?;
                k.when(is, &mut || {
                    im2col::emit_rows(&k, g.width, &sub, a..a + units, at)
                })?;
            }
            Ok(())
        })?;
    } else if panel::applies(&d, g.width) {
        // Chunks of whole pixel blocks (output rows) or of output channels, each tile
        // packing its own panels.
        let scratch = panel::scratch(&k, &d, g.width, packed)?;
        let rows = panel::cut_rows(&d);
        g.for_tiles(&k, f, nargs, tiling, &mut |image, u0, units| {
            if rows {
                let at = image_at(image, k.c(0), k.c(0))?;
                return panel::emit_rows(&k, g.width, &d, scratch, at, u0, units);
            }
            let sub = Conv { m: units, ..d };
            // Packed weights stay at their start: the tile's first channel may lie inside
            // a panel (`scratch` says where).
            let wo = match packed {
                Some(_) => k.c(0),
                None => k.mul(u0, ci * kh * kw)?,
            };
            let at = image_at(image, k.c(0), k.mul(u0, oh * ow)?)?.channels(&k, u0, wo)?;
            let scratch = scratch.at_channel(u0);
            panel::emit_rows(&k, g.width, &sub, scratch, at, k.c(0), oh)
        })?;
    } else {
        // Chunks of output channels (of groups when there are several): each tile is the
        // convolution of one image by its chunk of filters.
        let (mu, cu) = if groups > 1 { (mg, cg) } else { (1, 0) };
        g.for_tiles(&k, f, nargs, tiling, &mut |image, u0, units| {
            let xo = k.mul(u0, cu * h * wi)?;
            let oo = k.mul(u0, mu * oh * ow)?;
            let sub = Conv {
                n: 1,
                c: if groups > 1 { units * cg } else { ci },
                m: units * mu,
                groups: if groups > 1 { units } else { 1 },
                ..d
            };
            // Packed weights stay at their start (the GEMM finds the tile's rows in them: a
            // chunk may start inside a panel).
            let wo = match packed {
                Some(_) => k.c(0),
                None => k.mul(u0, mu * cg * kh * kw)?,
            };
            let at = image_at(image, xo, oo)?.channels(&k, k.mul(u0, mu)?, wo)?;
            let rows = PackedRows {
                first: k.mul(u0, mu)?,
                total: m,
            };
            emit(
                &k,
                g.width,
                &sub,
                pointwise,
                None,
                packed.map(|mr| (mr, rows)),
                at,
            )
        })?;
    }
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

pub(crate) fn conv_transpose<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    c: &ConvTranspose,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, wv, r) = (op.operands[0], op.operands[1], op.results[0]);
    let bias = op.operands.get(2).copied();
    let xd = dims(func, x)?;
    let wd = dims(func, wv)?;
    let od = dims(func, r)?;
    if xd.len() != 4 || wd.len() != 4 || od.len() != 4 {
        return Err(unsupported(
            func,
            op,
            "conv_transpose needs rank-4 operands",
        ));
    }
    let (n, ci, h, wi) = (xd[0], xd[1], xd[2], xd[3]);
    let (mw, kh, kw) = (wd[1], wd[2], wd[3]);
    let (m, oh, ow) = (od[1], od[2], od[3]);
    let groups = (c.groups as i64).max(1);
    let cg = ci / groups;
    let [sh, sw] = c.strides.map(|v| v as i64);
    let [dh, dw] = c.dilations.map(|v| v as i64);
    let mut vals = vec![x, wv];
    vals.extend(bias);
    vals.push(r);
    let args = args_of(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    let d = transpose::TConv {
        n,
        c: ci,
        h,
        wi,
        m,
        mw,
        groups,
        kh,
        kw,
        oh,
        ow,
        sh,
        sw,
        dh,
        dw,
        pt: c.pads[0] as i64,
        pl: c.pads[1] as i64,
        act: c.activation,
    };
    // Each input pixel meets `M/groups · kH · kW` weights (fewer where the crop drops them).
    let flops = 2 * (n * ci * h * wi * mw * kh * kw).max(0) as u64;
    let bytes = 4 * (n * ci * h * wi + ci * mw * kh * kw + n * m * oh * ow).max(0) as u64;
    let work = crate::parallel::work(flops, bytes);
    // Cut by groups when there are several, else by chunks of whole channel tiles: both
    // depend on the shape only, so every thread count runs the same instructions per output.
    let by_rows = groups == 1 && tconv_by_rows(&d, work, g.min_tile_flops);
    let tiling = if groups > 1 {
        Tiling::new(n, groups, 1, work, g.min_tile_flops)
    } else if by_rows {
        Tiling::new(n, transpose::phase_rows(&d), 1, work, g.min_tile_flops)
    } else {
        Tiling::new(n, m, transpose::MR, work, g.min_tile_flops)
    };
    let nargs = args.len() as u32;
    let f = kernel_for(g, name, &args, &writes, &tiling);
    let k = g.k(f);
    let Io {
        x: px,
        w: pw,
        bias: pb,
        out: po,
        ..
    } = Io::params(g, f, nargs, bias.is_some(), false, None)?;
    if !tiling.is_parallel() {
        transpose::emit(&k, g.width, &d, px, pw, pb, po)?;
    } else if by_rows {
        // Bands of phase rows: the tile picks its chunk's code (each band's border rows are
        // known at compile time).
        let sub = transpose::TConv { n: 1, ..d };
        g.for_tiles(&k, f, nargs, tiling, &mut |image, u0, units| {
            let x = k.gep(px, k.mul(image, ci * h * wi)?)?;
            let o = k.gep(po, k.mul(image, m * oh * ow)?)?;
            for c in (0..tiling.count).filter(|&c| tiling.size(c) == units) {
                let a = tiling.first(c);
                let is =
                    llvm(k.b.build_int_compare(inkwell::IntPredicate::EQ, u0, k.c(a), "chunk"))?;
                k.when(is, &mut || {
                    transpose::emit_rows(&k, g.width, &sub, a..a + units, x, pw, pb, o)
                })?;
            }
            Ok(())
        })?;
    } else {
        let (mu, cu) = if groups > 1 { (mw, cg) } else { (1, 0) };
        g.for_tiles(&k, f, nargs, tiling, &mut |image, u0, units| {
            let xo = k.add(k.mul(image, ci * h * wi)?, k.mul(u0, cu * h * wi)?)?;
            let oo = k.add(k.mul(image, m * oh * ow)?, k.mul(u0, mu * oh * ow)?)?;
            // A chunk of channels keeps the weights' row stride; a chunk of groups starts at
            // its first group's input channel.
            let wo = if groups > 1 {
                k.mul(u0, cg * mw * kh * kw)?
            } else {
                k.mul(u0, kh * kw)?
            };
            let sub = transpose::TConv {
                n: 1,
                c: if groups > 1 { units * cg } else { ci },
                m: units * mu,
                groups: if groups > 1 { units } else { 1 },
                ..d
            };
            let bias = match pb {
                Some(p) => Some(k.gep(p, k.mul(u0, mu)?)?),
                None => None,
            };
            let x = k.gep(px, xo)?;
            let wt = k.gep(pw, wo)?;
            let o = k.gep(po, oo)?;
            transpose::emit(&k, g.width, &sub, x, wt, bias, o)
        })?;
    }
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

/// The kernel function of a convolution: with the tile range parameters when the threads
/// cut it.
fn kernel_for<'a, 'c>(
    g: &Gen<'a, 'c>,
    name: &str,
    args: &[crate::Arg],
    writes: &[bool],
    tiling: &Tiling,
) -> inkwell::values::FunctionValue<'c> {
    if tiling.is_parallel() {
        g.tiled_kernel(name, args, writes, tiling.tiles())
    } else {
        g.kernel(name, args, writes)
    }
}

/// Whether the threads cut a transposed convolution of one group by bands of phase rows
/// (output rows `sH` at a time) rather than by chunks of output channels: when the rows'
/// halves are clearly the more equal. selfie_segmentation's last layer (16 → 1 channel, 2×
/// upsampling to 144×256, 0.05–0.07 ms) has one output channel, so it ran whole on the
/// calling thread, and the other thread fell asleep before the next inference.
fn tconv_by_rows(d: &transpose::TConv, work: u64, min_flops: u64) -> bool {
    let channels = Tiling::new(d.n, d.m, transpose::MR, work, min_flops);
    let rows = Tiling::new(d.n, transpose::phase_rows(d), 1, work, min_flops);
    d.groups == 1 && rows.is_parallel() && rows.halves_below(&channels)
}

/// The panel height the weights of `op` are packed with at compile time for `width`-lane
/// vectors, if they are: a pointwise convolution (one group, 1×1, unit strides, no padding)
/// on a small image, which runs with vectors along the output channels ([`chanvec_rows`]:
/// 3 vectors of channels per panel), or else whose GEMM is narrow ([`narrow_rows`]: at most
/// a few vectors of pixels, ResNet's and Inception's last stages). Its weights `[M, C, 1, 1]`
/// are then the GEMM's A, stored `[M/MR][C][MR]` so that a tile's weights or broadcasts read
/// one contiguous stream. Every tile of every thread count starts at a multiple of MR (the
/// row granule of [`tiling`]: the panel height itself, or a multiple of every narrow tile
/// height), so a chunk of channels starts at a panel — but a strided convolution's on the
/// channel-vector panels, which may start at any vector inside one ([`inside_panels`]).
/// A dense k×k convolution on the packed im2col panel is packed as [`panel::packed_rows`]
/// says (its `[M, C, KH, KW]` weights are the `[M, C·KH·KW]` A of the panel's GEMM).
pub(crate) fn panel_rows(func: &Function, op: &OpData, width: u32) -> Option<i64> {
    let Some((xd, _, od)) = pointwise_dims(func, op) else {
        return dense_panel_rows(func, op, width);
    };
    let n = od[2] * od[3];
    chanvec_rows(width, n, xd[1]).or_else(|| narrow_rows(width, n))
}

/// [`panel::packed_rows`] of `op` if it is a rank-4 convolution.
fn dense_panel_rows(func: &Function, op: &OpData, width: u32) -> Option<i64> {
    let tir_ir::Op::Conv2d(c) = &op.op else {
        return None;
    };
    let xd = dims(func, *op.operands.first()?).ok()?;
    let wd = dims(func, *op.operands.get(1)?).ok()?;
    let od = dims(func, *op.results.first()?).ok()?;
    if xd.len() != 4 || wd.len() != 4 || od.len() != 4 {
        return None;
    }
    panel::packed_rows(&geometry(c, &xd, &wd, &od), width)
}

/// The extents of a convolution with rank-4 input, weight and output dims.
fn geometry(c: &Conv2d, xd: &[i64], wd: &[i64], od: &[i64]) -> Conv {
    let [sh, sw] = c.strides.map(|v| v as i64);
    let [dh, dw] = c.dilations.map(|v| v as i64);
    Conv {
        n: xd[0],
        c: xd[1],
        h: xd[2],
        wi: xd[3],
        m: wd[0],
        groups: c.groups as i64,
        kh: wd[2],
        kw: wd[3],
        oh: od[2],
        ow: od[3],
        sh,
        sw,
        dh,
        dw,
        pt: c.pads[0] as i64,
        pl: c.pads[1] as i64,
        act: c.activation,
    }
}

/// The input, weight and output dims of `op` if it is a pointwise convolution (one group,
/// 1×1, unit strides, no padding, rank 4): the weights-layout choices at compile time
/// ([`panel_rows`], `sparse::row_stride`) apply only to those.
pub(crate) fn pointwise_dims(
    func: &Function,
    op: &OpData,
) -> Option<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    let c = match &op.op {
        tir_ir::Op::Conv2d(c) => c,
        _ => return None,
    };
    let xd = dims(func, *op.operands.first()?).ok()?;
    let wd = dims(func, *op.operands.get(1)?).ok()?;
    let od = dims(func, *op.results.first()?).ok()?;
    let pointwise = xd.len() == 4
        && wd.len() == 4
        && od.len() == 4
        && c.groups == 1
        && wd[1] == xd[1]
        && wd[2..] == [1, 1]
        && c.strides == [1, 1]
        && c.pads == [0; 4]
        && od[2..] == xd[2..];
    pointwise.then_some((xd, wd, od))
}

/// Whether a 1×1 convolution is cut along its pixels rather than its output channels: each
/// tile then re-reads the weights instead of the input, the smaller of the two in all but the
/// last layers of a network. Not when the pixels' halves are less equal than the channels':
/// 196 pixels in 64-column blocks are cut 64, 64, 64 and 4, one of two threads getting 128
/// columns and the other 68, and pose_detection's 14×14 layers (192 or 112 channels, half
/// its one-thread time) ran 1.5–1.6× faster on 2 threads where its other layers ran 1.8–1.9×.
fn split_columns(d: &Conv, w: u32, min_flops: u64) -> bool {
    // With one block of columns there is nothing to cut by columns: cut by channels instead
    // (iris_landmark's 64-channel 8×8 layers, 64 columns in one 64-column block, ran whole).
    // The channel-vector tiles ([`chanvec_rows`]) are cut by their channel panels where two
    // threads share those evenly, else by their pixel tiles, every tile running every panel
    // on its pixels (GoogLeNet's 512 → 64, 112, 128, 160 at 14×14: 2 or 3 panels, or 4 of
    // which one is a third; ResNet-50's 1024 → 256, 512: [`chanvec_pixel_cut`]).
    let block = crate::kernels::gemm::wide(w).1 as i64 * w as i64;
    let pixels = d.oh * d.ow;
    if let Some(mr) = chanvec_rows(w, pixels, d.c) {
        return chanvec_pixel_cut(pixels, d.m, mr);
    }
    if pixels < d.m || pixels <= block {
        return false;
    }
    let work = conv_work(d);
    let columns = Tiling::new(d.n, pixels, block, work, min_flops);
    !columns.is_parallel() || !channel_tiling(d, true, w, work, min_flops).halves_below(&columns)
}

/// Whether the threads cut a pointwise convolution on the channel-vector tiles (`m` output
/// channels in `mr`-row panels, `pixels` pixels) by chunks of pixel tiles rather than by
/// whole panels: where the panels split unevenly ([`chanvec_split_evenly`], GoogLeNet's),
/// and where they split less equally than the pixels do. Whole panels give two threads the
/// larger half 144 of 256 channels and 288 of 512 (1.78× at best from the second thread);
/// 196 pixels split 98 / 98: ResNet-50's five 1024 → 256 layers at 14×14 went from 1.22 to
/// 1.11 ms at two threads, the same at one (docs/codegen.md, "ResNet-50's reducing 1×1
/// layers cut by pixels"). Cut inside the panels by vectors instead (128 / 128, chunks of
/// 48 + 48 + 32 rows) they measured slower ([`inside_panels`]). Panels whose larger half is
/// within 1/16 of half the channels (1024 → 528, 192 → 96) stay the cut: by pixels every
/// thread streams every weight, and the seven 1×1 layers onto 1024 channels read 1.91 → 1.92
/// ms at two threads so. Images
/// within the narrow tiles' reach keep whole panels (not measured).
fn chanvec_pixel_cut(pixels: i64, m: i64, mr: i64) -> bool {
    let chunk = chanvec_pixel_chunk(pixels);
    let pixel_halves_equal =
        !chanvec_narrow_image(pixels) && pixels % chunk == 0 && (pixels / chunk) % 2 == 0;
    let panels = (m + mr - 1) / mr;
    let panel_halves_equal = 32 * ((panels + 1) / 2 * mr) <= 17 * m;
    !chanvec_split_evenly(pixels, m, mr) || (pixel_halves_equal && !panel_halves_equal)
}

/// At most this many chunks of pixels for a layer on the channel-vector tiles cut by pixels
/// ([`split_columns`]): every chunk streams every weight and starts each K chunk of each panel
/// cold, so fewer, longer chunks keep more of the kernel's reuse. GoogLeNet's nineteen 1×1
/// layers at 14×14 at one thread (the tiles run one after the other): 1.71–1.77 ms cut by
/// channels on the pixel-vector tiles, 1.65–1.66 in 4 chunks, 1.62–1.65 in 2, 1.75 in 8
/// (docs/codegen.md "GoogLeNet's uneven pointwise layers cut by pixels").
const CHANVEC_PIXEL_CHUNKS: i64 = 4;

/// The granule of a pixel cut of the channel-vector tiles on `pixels` pixels: whole pixel
/// tiles, at most [`CHANVEC_PIXEL_CHUNKS`] granules.
fn chanvec_pixel_chunk(pixels: i64) -> i64 {
    let t = chanvec_pixels(pixels);
    let tiles = (pixels + t - 1) / t;
    (tiles + CHANVEC_PIXEL_CHUNKS - 1) / CHANVEC_PIXEL_CHUNKS * t
}

/// Whether the threads cut `d`, a stride-1 row-packed convolution, by bands of output rows
/// rather than by output channels: when its image has at least as many pixels as it has
/// output channels, as the pointwise convolutions around it are then cut by pixels
/// ([`split_columns`]). Cut by channels, each of two threads read the whole input, half of
/// it written by the other core, and wrote every pixel of its channels, half of them read by
/// the other core next: ResNet-50's 3×3 layers on 56×56 and 28×28 images ran 1.74–1.84×
/// faster on 2 threads than on 1 where its other layers ran 1.9–2.0× (docs/codegen.md
/// "Threads"). A band reads its rows (and a row of halo) and every weight.
fn rowpack_pixels(d: &Conv, w: u32) -> bool {
    d.groups == 1
        && d.c > 1
        && d.kh * d.kw > 1
        && d.sh == 1
        && d.sw == 1
        && d.oh * d.ow >= d.m
        && !panel::applies(d, w)
        && rowpack::applies(d, w)
}

/// Whether the threads cut `d` by bands of output rows: it runs on the implicit-im2col kernel
/// (one group of several input channels, no packed panel, no row packing), its image and
/// output are more than its weights, and its channels' halves are not clearly the more equal.
/// Cut by channels, every tile reads the whole image (a band reads its rows and a halo):
/// selfie_segmentation's first layer (3 → 16 channels, 3×3 stride 2, 144×256 → 72×128) had
/// 6-row tiles cut 6/10 between two threads and ran as fast on 2 threads as on 1, and
/// pose_detection's (3 → 24, 112×112 out), cut 12/12, 1.2× faster.
fn im2col_rows(d: &Conv, w: u32, work: u64, min_flops: u64) -> bool {
    let weights = d.m * d.c * d.kh * d.kw;
    let images = d.n * (d.c * d.h * d.wi + d.m * d.oh * d.ow);
    if d.groups != 1
        || d.c <= 1
        || d.kh * d.kw <= 1
        || panel::applies(d, w)
        || rowpack::applies(d, w)
        || weights >= images
    {
        return false;
    }
    let rows = Tiling::new(d.n, d.oh, 1, work, min_flops);
    let channels = channel_tiling(d, false, w, work, min_flops);
    rows.is_parallel() && !channels.halves_below(&rows)
}

/// The work of `d` for cutting it into tiles ([`crate::parallel::work`]): its FLOPs or its
/// traffic (image, weights, output).
fn conv_work(d: &Conv) -> u64 {
    let cg = d.c / d.groups.max(1);
    let flops = 2 * (d.n * d.m * d.oh * d.ow * cg * d.kh * d.kw).max(0) as u64;
    let bytes = 4
        * (d.n * d.c * d.h * d.wi + d.m * cg * d.kh * d.kw + d.n * d.m * d.oh * d.ow).max(0) as u64;
    crate::parallel::work(flops, bytes)
}

/// How `d` is cut into tiles for threads ([`crate::parallel`]): chunks of whole register
/// tiles of the kernel that computes it.
fn tiling(d: &Conv, pointwise: bool, w: u32, work: u64, min_flops: u64) -> Tiling {
    if d.groups > 1 {
        // Each group reads only its own input planes and weights.
        let min = crate::parallel::channel_min_work(min_flops);
        return Tiling::new(d.n, d.groups, 1, work, min);
    }
    if pointwise && split_columns(d, w, min_flops) {
        // Whole `NV·W`-column blocks of the GEMM micro-kernel, or whole pixel tiles of the
        // channel-vector tiles.
        let pixels = d.oh * d.ow;
        let nv = crate::kernels::gemm::wide(w).1 as i64;
        let granule = match chanvec_rows(w, pixels, d.c) {
            Some(_) => chanvec_pixel_chunk(pixels),
            None => nv * w as i64,
        };
        return Tiling::new(d.n, pixels, granule, work, min_flops);
    }
    if !pointwise && rowpack_pixels(d, w) {
        return Tiling::new(d.n, rowpack::pixel_units(d, w).0, 1, work, min_flops);
    }
    if !pointwise && panel::applies(d, w) && panel::cut_rows(d) {
        return Tiling::new(d.n, d.oh, panel::block_rows(d), work, min_flops);
    }
    if !pointwise && im2col_rows(d, w, work, min_flops) {
        return Tiling::new(d.n, d.oh, 1, work, min_flops);
    }
    channel_tiling(d, pointwise, w, work, min_flops)
}

/// How `d` is cut by chunks of output channels (whole register tiles of its kernel), for a
/// convolution that is not cut by groups, columns, rows or pixel bands.
fn channel_tiling(d: &Conv, pointwise: bool, w: u32, work: u64, min_flops: u64) -> Tiling {
    let cg = d.c / d.groups.max(1);
    let pixels = d.oh * d.ow;
    let packed = match pointwise {
        true => chanvec_rows(w, pixels, d.c),
        false => panel::packed_rows(d, w),
    };
    let granule = match packed {
        // A chunk of channels starts at a channel panel ([`panel_rows`]): the pointwise
        // layers' or the packed im2col panel's weights.
        Some(mr) => mr,
        // The wide GEMM's row tiles (its weights are not packed into panels): chunks of 6
        // rows share 112 or 80 channels as 56/56 or 42/38 between two threads, where
        // 24-row granules gave 64/48 and 48/32.
        _ if pointwise && pixels > 1 && narrow_rows(w, pixels).is_none() => {
            crate::kernels::gemm::wide(w).0
        }
        _ if pointwise || panel::applies(d, w) => crate::kernels::gemm::acc_regs(w),
        _ if cg > 1 && rowpack::applies(d, w) => rowpack::tile(w).0,
        _ => 6,
    };
    // By output channels, each tile streams its own rows of the weights and reads the whole
    // image: a pointwise convolution cut so has a small image (fewer pixels than channels, one
    // column block, or a few blocks that two threads would share unequally), and so has any
    // convolution whose weights are most of its traffic;
    // others (the packed panels) pack the image again in every tile and keep the general
    // minimum.
    let weights = d.m * cg * d.kh * d.kw;
    let images = d.n * (d.c * d.h * d.wi + d.m * d.oh * d.ow);
    let min = if pointwise || weights >= images {
        crate::parallel::channel_min_work(min_flops)
    } else {
        min_flops
    };
    let panels = Tiling::new(d.n, d.m, granule, work, min);
    match packed {
        Some(mr) if !pointwise => inside_panels(panels, w as i64, mr, work, min),
        _ => panels,
    }
}

/// The cut of a strided convolution on the channel-vector panels (weights in `mr`-row
/// panels, cut by whole panels as `panels`) into chunks of whole `w`-lane vectors that may
/// start inside a panel, when two threads then share its channels more equally: 256 channels
/// in 48-row panels (5 and a 16-row one) split 144 / 112 and 512 split 240 / 272, where
/// vectors split them in halves. Each chunk holds at least two panels' rows, so its row tiles
/// are mostly whole (a chunk of 128 runs 48 + 48 + 32 rows), where chunks of 32 would run
/// every row on two-vector tiles; and every chunk packs the image panel again, so fewer
/// chunks pack less: ResNet-50's 3×3/2 onto 14×14 went from 1.10 to 0.99 ms at one thread
/// and 0.70 to 0.55 at two, onto 7×7 1.13 → 1.08 and 0.66 → 0.62 (docs/codegen.md, "Strided
/// panels cut inside a panel"). The GEMM finds a chunk's rows in the panels
/// ([`crate::kernels::gemm::PackedRows`]); each output's FMA chain is the same whatever its
/// tile, so the bits do not change. Pointwise layers are not cut so: ResNet-50's five
/// 1024 → 256 layers at 14×14 cut 128 / 128 took 1.56–1.60 ms at two threads against
/// 1.46–1.50 cut 144 / 112 (the same at one); they are cut by pixels
/// ([`chanvec_pixel_cut`]).
fn inside_panels(panels: Tiling, w: i64, mr: i64, work: u64, min: u64) -> Tiling {
    let vectors = Tiling::new(panels.images, panels.units, w, work, min);
    let most = (panels.units / (2 * mr)).max(1);
    // The largest power of two not above it (the counts of [`Tiling::new`]).
    let most = 1i64 << (63 - most.leading_zeros());
    let vectors = Tiling {
        count: vectors.count.min(most),
        ..vectors
    };
    match vectors.larger_half() < panels.larger_half() {
        true => vectors,
        false => panels,
    }
}

/// The kernel body of `d` at the builder's position. `cols`: only the first `cols` output
/// pixels of a pointwise convolution (a column chunk, the pixel strides unchanged).
/// `packed`: the weights are row panels of this height ([`panel_rows`]), `d`'s output
/// channels the packed rows from the given one on (the pointer `io.w` at the panels' start).
fn emit<'a, 'c>(
    k: &K<'a, 'c>,
    width: u32,
    d: &Conv,
    pointwise: bool,
    cols: Option<i64>,
    packed: Option<(i64, PackedRows<'c>)>,
    io: Io<'c>,
) -> R<()> {
    let Io {
        x: px,
        w: pw,
        bias: pb,
        slope: ps,
        res: pr,
        out: po,
    } = io;
    let (n, ci, h, wi, m, groups) = (d.n, d.c, d.h, d.wi, d.m, d.groups);
    let cg = ci / groups.max(1);
    let mg = m / groups.max(1);
    if pointwise {
        // Per image and group: out[M_g, HW] = W[M_g, C_g] · x[C_g, HW] + bias.
        let hw = h * wi;
        k.loop_(0, n, &mut |b| {
            k.loop_(0, groups, &mut |gi| {
                let xo = k.add(k.mul(b, ci * hw)?, k.mul(gi, cg * hw)?)?;
                let oo = k.add(k.mul(b, m * hw)?, k.mul(gi, mg * hw)?)?;
                let wo = k.mul(gi, mg * cg)?;
                let bo = k.mul(gi, mg)?;
                let gm = Gemm {
                    a: k.gep(pw, wo)?,
                    a_rs: cg,
                    a_cs: 1,
                    b: k.gep(px, xo)?,
                    b_rs: hw,
                    c: k.gep(po, oo)?,
                    c_rs: hw,
                    m: mg,
                    n: cols.unwrap_or(hw),
                    k: cg,
                };
                let row_bias = match pb {
                    Some(p) => Some(k.gep(p, bo)?),
                    None => None,
                };
                let row_slope = match ps {
                    Some(s) => Some(s.at(k, bo)?),
                    None => None,
                };
                let res = match pr {
                    Some(p) => Some(k.gep(p, oo)?),
                    None => None,
                };
                let epi = Epilogue {
                    alpha: 1.0,
                    row_bias,
                    act: d.act,
                    row_slope,
                };
                // The kernel the whole image's shape picks, for a chunk of its pixels too.
                match packed {
                    Some((mr, rows)) if chanvec_rows(width, hw, cg) == Some(mr) => {
                        gemm_chanvec(k, width, &gm, epi, res, rows)
                    }
                    Some(p) => gemm_packed(k, width, &gm, epi, res, p),
                    None => gemm_residual(k, width, &gm, epi, res),
                }
            })
        })
    } else if cg == 1 {
        let dw = depthwise::Depthwise {
            n,
            c: ci,
            h,
            wi,
            m,
            kh: d.kh,
            kw: d.kw,
            oh: d.oh,
            ow: d.ow,
            sh: d.sh,
            sw: d.sw,
            dh: d.dh,
            dw: d.dw,
            pt: d.pt,
            pl: d.pl,
            act: d.act,
        };
        depthwise::emit(k, width, &dw, io)
    } else if panel::applies(d, width) {
        panel::emit(k, width, d, packed.map(|(mr, _)| mr), io)
    } else if rowpack::applies(d, width) {
        rowpack::emit(k, width, d, rowpack::Part::All, io)
    } else {
        im2col::emit(k, width, d, io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::MIN_TILE_FLOPS;

    /// A stride-`s`, unpadded `k`×`k` convolution of a `c`×`h`×`h` image into `m` channels
    /// in `groups` groups.
    fn conv(c: i64, m: i64, groups: i64, h: i64, k: i64, s: i64, pad: i64) -> Conv {
        let o = (h + 2 * pad - k) / s + 1;
        Conv {
            n: 1,
            c,
            h,
            wi: h,
            m,
            groups,
            kh: k,
            kw: k,
            oh: o,
            ow: o,
            sh: s,
            sw: s,
            dh: 1,
            dw: 1,
            pt: pad,
            pl: pad,
            act: None,
        }
    }

    /// The tiles of `d` at the default minimum, AVX-512's 16 lanes.
    fn tiles(d: &Conv) -> i64 {
        let pointwise = d.kh == 1 && d.kw == 1 && d.sh == 1 && d.sw == 1 && d.pt == 0;
        tiling(d, pointwise, 16, conv_work(d), MIN_TILE_FLOPS).tiles()
    }

    #[test]
    fn small_images_are_cut_by_channels_at_a_quarter_of_the_minimum() {
        // iris_landmark's 8×8 layers: 64 pixels, one column block, 1 MFLOP (8 µs): cut by
        // output channels.
        assert!(tiles(&conv(128, 64, 1, 8, 1, 1, 0)) >= 2);
        assert!(tiles(&conv(64, 128, 1, 8, 1, 1, 0)) >= 2);
        // Its 2×2 stride-2 layers, bound by their weights (16–64 K of them against 5–10 K
        // pixel values).
        assert!(tiles(&conv(128, 128, 1, 8, 2, 2, 0)) >= 2);
        // MobileNet v2's 7×7 depthwise layers (20 µs each), by groups.
        assert!(tiles(&conv(960, 960, 960, 7, 3, 1, 1)) >= 2);
        // A convolution of as much work whose image is most of its traffic keeps the
        // general minimum (the packed panels pack the image again in every tile).
        let d = conv(16, 16, 1, 16, 3, 1, 1);
        assert!(conv_work(&d) > MIN_TILE_FLOPS && conv_work(&d) < 2 * MIN_TILE_FLOPS);
        assert_eq!(tiles(&d), 1);
    }

    #[test]
    fn pointwise_layers_go_to_the_cut_that_two_threads_share_more_equally() {
        // pose_detection's 14×14 layers: 196 pixels in 64-column blocks would be cut 64, 64,
        // 64, 4 (halves 128 and 68). On the channel-vector tiles, 1152 → 192 is cut by its
        // four 48-channel panels; 192 → 112 and 480 → 80 (3 and 2 panels, halves 96/16 and
        // 48/32) by chunks of 7-pixel tiles, 49 pixels each; 100 → 112 (K below the
        // channel-vector tiles' minimum) by 6-row tiles of channels.
        for (c, m, halves) in [
            (1152, 192, (96, 96)),
            (192, 112, (98, 98)),
            (480, 80, (98, 98)),
            (100, 112, (54, 58)),
            (1024, 256, (98, 98)),
            (1024, 512, (98, 98)),
            (256, 1024, (528, 496)),
        ] {
            let d = conv(c, m, 1, 14, 1, 1, 0);
            let t = tiling(&d, true, 16, conv_work(&d), MIN_TILE_FLOPS);
            match chanvec_rows(16, 196, c) {
                Some(mr) if !chanvec_pixel_cut(196, m, mr) => {
                    assert!(!split_columns(&d, 16, MIN_TILE_FLOPS), "{c}->{m}");
                    assert_eq!((t.units, t.granule), (m, mr), "{c}->{m}");
                }
                Some(_) => {
                    assert!(split_columns(&d, 16, MIN_TILE_FLOPS), "{c}->{m}");
                    assert_eq!((t.units, t.granule, t.count), (196, 49, 4), "{c}->{m}");
                }
                None => {
                    assert!(!split_columns(&d, 16, MIN_TILE_FLOPS), "{c}->{m}");
                    assert_eq!((t.units, t.granule, t.count), (m, 6, 8), "{c}->{m}")
                }
            }
            let mid = t.first(t.count / 2);
            assert_eq!((mid, t.units - mid), halves, "{c}->{m}");
        }
        // 28×28 and 56×56 (13 and 49 blocks, halves within a block of each other) and 72×72
        // stay cut by columns, even where the channels' halves are a little more equal.
        for (c, m, h) in [(40, 96, 28), (24, 144, 56), (16, 16, 72)] {
            assert!(
                split_columns(&conv(c, m, 1, h, 1, 1, 0), 16, MIN_TILE_FLOPS),
                "{h}x{h}"
            );
        }
    }

    #[test]
    fn strided_panels_are_cut_inside_a_panel_where_the_halves_are_more_equal() {
        // ResNet's 3×3/2 layers onto 14×14 and 7×7 (one pixel block, weights in 48-row
        // panels): whole panels split 256 channels 144/112 and 512 240/272; chunks of whole
        // vectors of at least two panels split them in halves, 8 and 16 vectors each side.
        for (c, m, h, count) in [(128, 256, 28, 2), (256, 256, 28, 2), (512, 512, 14, 4)] {
            let d = conv(c, m, 1, h, 3, 2, 1);
            assert_eq!(panel::packed_rows(&d, 16), Some(48), "{c}->{m}");
            let t = tiling(&d, false, 16, conv_work(&d), MIN_TILE_FLOPS);
            assert_eq!((t.units, t.granule, t.count), (m, 16, count), "{c}->{m}");
            assert_eq!(t.larger_half(), m / 2, "{c}->{m}");
        }
        // Whole panels that split evenly stay whole panels (Inception v3's 384 at 17×17).
        let d = conv(288, 384, 1, 35, 3, 2, 0);
        let t = tiling(&d, false, 16, conv_work(&d), MIN_TILE_FLOPS);
        assert_eq!((t.granule, t.larger_half()), (48, 192));
        // The pointwise layers on the same panels are not cut by vectors (ResNet-50's 14×14
        // ones measured slower at 2 threads): at 7×7, whose pixel tiles do not split in
        // halves, they keep whole panels.
        let d = conv(2048, 512, 1, 7, 1, 1, 0);
        let t = tiling(&d, true, 16, conv_work(&d), MIN_TILE_FLOPS);
        assert_eq!((t.units, t.granule, t.larger_half()), (512, 48, 272));
    }

    #[test]
    fn reducing_pointwise_layers_at_14x14_are_cut_by_pixels_where_panels_split_unequally() {
        // Whole 48-row panels split 256 and 512 channels 144 / 112 and 288 / 224, the pixel
        // tiles 98 / 98; 1024 channels split 528 / 496, within 1/16 of halves, stay panels.
        assert!(chanvec_pixel_cut(196, 256, 48));
        assert!(chanvec_pixel_cut(196, 512, 48));
        assert!(!chanvec_pixel_cut(196, 1024, 48));
        assert!(!chanvec_pixel_cut(196, 192, 48));
        // 49 pixels in 7-pixel tiles do not split in halves, nor does an image within the
        // narrow tiles' reach keep anything but whole panels.
        assert!(!chanvec_pixel_cut(49, 512, 48));
        assert!(!chanvec_pixel_cut(64, 256, 48));
    }

    #[test]
    fn channel_vector_pixel_cuts_are_at_most_four_chunks_of_whole_pixel_tiles() {
        // 14×14: 28 tiles of 7; 17×17: 36 tiles of 8 and one of 1; 13×13: 21 tiles of 8 and
        // one of 1 (a chunk of 48 pixels, whole vectors).
        assert_eq!(chanvec_pixel_chunk(196), 49);
        assert_eq!(chanvec_pixel_chunk(289), 80);
        assert_eq!(chanvec_pixel_chunk(169), 48);
        let d = conv(1024, 32, 1, 17, 1, 1, 0);
        assert!(split_columns(&d, 16, MIN_TILE_FLOPS));
        let t = tiling(&d, true, 16, conv_work(&d), MIN_TILE_FLOPS);
        assert_eq!((t.units, t.granule, t.count), (289, 80, 4));
    }

    #[test]
    fn im2col_convolutions_of_large_images_are_cut_by_rows() {
        // selfie_segmentation's first layer: 3 → 16 channels, 3×3 stride 2, 144×256 → 72×128
        // (its 16 channels in 6-row tiles would be cut 6/10).
        let mut d = conv(3, 16, 1, 144, 3, 2, 1);
        d.wi = 256;
        d.ow = 128;
        assert!(!panel::applies(&d, 16) && !rowpack::applies(&d, 16));
        assert!(im2col_rows(&d, 16, conv_work(&d), MIN_TILE_FLOPS));
        let t = tiling(&d, false, 16, conv_work(&d), MIN_TILE_FLOPS);
        assert_eq!((t.units, t.granule, t.count), (72, 1, 4));
        // pose_detection's: 3 → 24 channels at 112×112 out.
        let d = conv(3, 24, 1, 226, 3, 2, 0);
        assert!(im2col_rows(&d, 16, conv_work(&d), MIN_TILE_FLOPS));
        // Weights heavier than the image stay cut by channels.
        let d = conv(256, 64, 1, 20, 3, 2, 1);
        assert!(!im2col_rows(&d, 16, conv_work(&d), MIN_TILE_FLOPS));
    }

    #[test]
    fn a_transposed_convolution_with_one_output_channel_is_cut_by_rows() {
        // selfie_segmentation's last layer: 16 → 1 channel, 2×2 stride 2, 72×128 → 144×256.
        let mut d = transpose::TConv {
            n: 1,
            c: 16,
            h: 72,
            wi: 128,
            m: 1,
            mw: 1,
            groups: 1,
            kh: 2,
            kw: 2,
            oh: 144,
            ow: 256,
            sh: 2,
            sw: 2,
            dh: 1,
            dw: 1,
            pt: 0,
            pl: 0,
            act: None,
        };
        let work = crate::parallel::work(2 * 16 * 72 * 128 * 4, 4 * (16 * 72 * 128 + 36_864));
        assert_eq!(transpose::phase_rows(&d), 72);
        assert!(tconv_by_rows(&d, work, MIN_TILE_FLOPS));
        // 48 output channels split 24/24: they stay cut by channels.
        d.m = 48;
        d.mw = 48;
        assert!(!tconv_by_rows(&d, work, MIN_TILE_FLOPS));
    }

    #[test]
    fn resnet_3x3_layers_are_cut_by_pixels_where_their_neighbours_are() {
        // 56×56 and 28×28 (at least as many pixels as channels, as the 1×1 layers around them,
        // which are cut by columns): bands of rows, the 56-wide image by repetitions of its
        // periodic run, the 28-wide one by grid vectors; 14×14 and 7×7 by channels.
        for (c, h, periodic) in [(64, 56, true), (128, 28, false)] {
            let d = conv(c, c, 1, h, 3, 1, 1);
            assert!(rowpack_pixels(&d, 16), "{h}x{h}");
            assert_eq!(rowpack::pixel_units(&d, 16).1, periodic, "{h}x{h}");
            assert_eq!(tiles(&d), 8, "{h}x{h}");
        }
        for (c, h) in [(256, 14), (512, 7)] {
            let d = conv(c, c, 1, h, 3, 1, 1);
            assert!(!rowpack_pixels(&d, 16), "{h}x{h}");
            assert_eq!(tiles(&d), 8, "{h}x{h}");
        }
        // Strided and grouped convolutions keep their cuts.
        assert!(!rowpack_pixels(&conv(64, 64, 1, 56, 3, 2, 1), 16));
        assert!(!rowpack_pixels(&conv(64, 64, 2, 56, 3, 1, 1), 16));
    }
}
