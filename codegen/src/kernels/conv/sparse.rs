//! Sparse pointwise convolution (issue 22: mediapipe's `face_detection_full_range_sparse`,
//! whose 1×1 weights are stored DENSIFY-sparse in the `.tflite` and are 70% zeros).
//!
//! A static 1×1 convolution (one group, unit strides, no padding) whose constant weights are
//! at least [`MIN_ZERO_FRACTION`] zeros (and not too few per channel) keeps only their
//! nonzeros, in the embedded constant data, as compressed rows by output channel (CSR,
//! [`csr_bytes`]):
//!
//! ```text
//! start: [M + 1] × i32      nonzeros of channel m are pairs start[m] .. start[m + 1]
//! pairs: [nnz] × (i32, f32) (offset c·H·W of input row c, weight w[m, c]), c ascending
//! ```
//!
//! The kernel is the NCHW sparse-times-dense product of XNNPACK's `f32-spmm` micro-kernels
//! (and of Elsen et al., "Fast Sparse ConvNets", CVPR 2020): input row `c` of a block of
//! pixels is contiguous, so for each block of [`VECTORS`] vectors of pixels and each output
//! channel, a run-time loop over the channel's nonzeros loads the weight, broadcasts it,
//! loads the block's vectors of input row `c` at the stored offset and multiplies-adds them
//! into the accumulators; the epilogue (bias, residual, activation, PReLU) is the dense
//! GEMM's ([`crate::kernels::gemm::finish_with`]). The nonzeros are data, not code:
//! compile time does not grow with them.
//!
//! Each output is the dense kernel's FMA chain (zero, then `c` ascending) without its zero
//! terms, so it equals the dense kernel's except for the sign of a zero sum and products
//! of a zero weight with an infinite or NaN input; it agrees with the interpreter (which
//! sums in another order) within float rounding, not bitwise. An output's chain does not
//! depend on the block or tile it lands in (threads cut large images by pixel blocks, small
//! ones by output channels: [`cut`]), so every thread count gives the same bits.

use super::geometry::{Conv, Io};
use crate::kernels::gemm::{finish_lanes, Epilogue};
use crate::nest::{llvm, K, R};
use crate::parallel::Tiling;
use crate::CodegenError;
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::{AddressSpace, IntPredicate};
use tir_ir::{Function, OpData};

/// Fewest zeros, as a fraction of the weights, for the sparse kernel: XNNPACK's two thirds,
/// which measurement agrees with (docs/codegen.md "Sparse pointwise convolutions": at half
/// zeros the sparse loop, one index load and one broadcast per nonzero, was slower than the
/// dense GEMM on 96→384 and 384→96 layers; at 70% zeros it was faster on both).
pub(crate) const MIN_ZERO_FRACTION: f64 = 2.0 / 3.0;

/// Fewest nonzeros per output channel, on average, for the sparse kernel: with fewer, the
/// time is the channel loop, the epilogue and the stores, which the dense kernel does as
/// well (face_detection_full_range_sparse's 8→32 layers at 96², 2.4 nonzeros a channel,
/// were about 10% slower sparse).
pub(crate) const MIN_NONZEROS_PER_CHANNEL: i64 = 4;

/// Vectors of pixels per block: each nonzero's weight is broadcast once for this many FMAs,
/// and the block's rows of the input (`C × VECTORS·W` floats) are re-read for every output
/// channel.
pub(crate) const VECTORS: i64 = 4;

/// The environment variable that, set to `1`, turns the sparse kernel off so that every
/// pointwise convolution compiles dense: for benchmarking the two kernels on the same model
/// only (docs/codegen.md "Sparse pointwise convolutions"); it changes no result beyond the
/// rounding the module doc describes.
pub const DENSE_ENV: &str = "TIR_DENSE_POINTWISE";

/// The row stride (`H·W` pixels) of the input of `op` and the count of nonzeros of each
/// output channel if its weights (operand 1) are stored sparse: a pointwise convolution
/// ([`super::pointwise_dims`]) whose weights `data` are at least [`MIN_ZERO_FRACTION`]
/// zeros, its offsets within `i32`, unless [`DENSE_ENV`] is `1`.
pub(crate) fn row_stride(func: &Function, op: &OpData, data: &[f32]) -> Option<(i64, Vec<i64>)> {
    if std::env::var_os(DENSE_ENV).is_some_and(|v| v == "1") {
        return None;
    }
    let (xd, wd, _) = super::pointwise_dims(func, op)?;
    let hw = xd[2] * xd[3];
    let count = wd.iter().product::<i64>();
    if hw <= 0 || count <= 0 || data.len() as i64 != count {
        return None;
    }
    if xd[1].checked_mul(hw)? >= i32::MAX as i64 {
        return None;
    }
    let per_channel: Vec<i64> = data
        .chunks(xd[1].max(1) as usize)
        .map(|row| row.iter().filter(|&&v| v != 0.0).count() as i64)
        .collect();
    let nnz: i64 = per_channel.iter().sum();
    let zeros = count - nnz;
    let sparse =
        zeros as f64 >= MIN_ZERO_FRACTION * count as f64 && nnz >= MIN_NONZEROS_PER_CHANNEL * wd[0];
    sparse.then_some((hw, per_channel))
}

/// The weights `[M, C]` (row-major) as stored for the sparse kernel (the module doc's
/// layout), input rows `hw` floats apart. Negative zeros are zeros too.
pub(crate) fn csr_bytes(data: &[f32], m: usize, hw: i64) -> Vec<u8> {
    let c = data.len().checked_div(m).unwrap_or(0);
    let mut start = Vec::with_capacity(m + 1);
    let mut pairs = Vec::new();
    start.push(0i32);
    for row in data.chunks(c.max(1)).take(m) {
        for (ci, &v) in row.iter().enumerate() {
            if v != 0.0 {
                pairs.push((ci as i64 * hw) as i32);
                pairs.push(v.to_bits() as i32);
            }
        }
        start.push((pairs.len() / 2) as i32);
    }
    start
        .iter()
        .chain(&pairs)
        .flat_map(|x| x.to_le_bytes())
        .collect()
}

/// Fewest pixel blocks of [`VECTORS`] vectors per image for the cut by pixels: with fewer,
/// whole blocks cannot be shared evenly (face_detection_full_range_sparse's 12×12 images are
/// 3 blocks of 64 pixels, 2 threads get 64 and 80 pixels; its 6×6 images are one block, which
/// ran on one thread while the other waited), so the cut is by output channels instead,
/// balanced by their nonzeros ([`channel_bounds`]). At 16 blocks the halves of a pixel cut
/// differ by at most one block in 16.
pub(crate) const MIN_PIXEL_BLOCKS: i64 = 16;

/// The cost of an output channel apart from its nonzeros, in nonzeros, for balancing a cut
/// by channels: its loop's start (two index loads) and its epilogue and stores, about two
/// nonzeros' steps. An estimate; the channels of a layer stored sparse have at least
/// [`MIN_NONZEROS_PER_CHANNEL`] nonzeros on average, so it only nudges the bounds.
const CHANNEL_OVERHEAD: i64 = 2;

/// How a sparse pointwise convolution is cut for threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// Chunks of whole pixel blocks, every tile all output channels (the [`Tiling`]'s units
    /// are pixels).
    Pixels(Tiling),
    /// Every tile all pixels of its image and the output channels `bounds[c]..bounds[c + 1]`
    /// of its chunk `c` (the [`Tiling`]'s units are channels; `bounds` has `count + 1`
    /// entries, from 0 to `M`).
    Channels { tiling: Tiling, bounds: Vec<i64> },
}

impl Cut {
    pub(crate) fn tiling(&self) -> Tiling {
        match self {
            Cut::Pixels(t) | Cut::Channels { tiling: t, .. } => *t,
        }
    }
}

/// How `d` (pointwise, `per_channel[m]` nonzero weights in output channel `m`) is cut for
/// threads: by pixel blocks when an image has at least [`MIN_PIXEL_BLOCKS`], otherwise by
/// output channels; the work is the sparse product's (`2·nnz` FLOPs per pixel) or its
/// traffic. Either way the tiles share only the weights, read-only and small (a pixel tile
/// reads and writes its own pixels' rows; a channel tile re-reads the small image and writes
/// its own channels), so the least work per tile is the channel cut's
/// ([`crate::parallel::channel_min_work`]): with the general minimum the layers under about
/// 15 µs (face_detection_full_range_sparse's 16 → 16 at 48², 48 → 96 at 12², 96 → 96 at 6²)
/// ran on one thread. The cut depends on the shape and the weights only, never on the
/// thread count.
pub(crate) fn cut(d: &Conv, w: u32, per_channel: &[i64], min_flops: u64) -> Cut {
    let hw = d.oh * d.ow;
    let nnz: i64 = per_channel.iter().sum();
    let flops = 2 * (d.n * hw * nnz).max(0) as u64;
    let bytes = 4 * (d.n * (d.c + d.m) * hw + 2 * nnz + d.m).max(0) as u64;
    let work = crate::parallel::work(flops, bytes);
    let min_work = crate::parallel::channel_min_work(min_flops);
    let block = VECTORS * w as i64;
    if (hw + block - 1) / block >= MIN_PIXEL_BLOCKS || per_channel.len() as i64 != d.m {
        return Cut::Pixels(Tiling::new(d.n, hw, block, work, min_work));
    }
    let tiling = Tiling::new(d.n, d.m, 1, work, min_work);
    let bounds = channel_bounds(per_channel, tiling.count);
    Cut::Channels { tiling, bounds }
}

/// The bounds of `count` chunks of consecutive output channels of as equal cost as whole
/// channels allow (a channel costs its nonzeros and [`CHANNEL_OVERHEAD`]): chunk `c` starts
/// at the channel where the running cost comes nearest `c/count` of the total, and every
/// chunk has at least one channel. `count` is at most the channels.
pub(crate) fn channel_bounds(per_channel: &[i64], count: i64) -> Vec<i64> {
    let m = per_channel.len() as i64;
    let count = count.clamp(1, m.max(1));
    // prefix[i]: the cost of channels 0..i.
    let mut prefix = Vec::with_capacity(per_channel.len() + 1);
    prefix.push(0i64);
    for &n in per_channel {
        prefix.push(prefix[prefix.len() - 1] + n.max(0) + CHANNEL_OVERHEAD);
    }
    let total = prefix[prefix.len() - 1];
    let mut bounds = vec![0i64];
    for c in 1..count {
        let target = total * c / count;
        // The first channel whose prefix reaches the target, or the one before it if that
        // is nearer.
        let at = prefix.partition_point(|&p| p < target) as i64;
        let at = if at > 0 && target - prefix[at as usize - 1] < prefix[at as usize] - target {
            at - 1
        } else {
            at
        };
        let prev = bounds[bounds.len() - 1];
        bounds.push(at.clamp(prev + 1, m - (count - c)));
    }
    bounds.push(m);
    bounds
}

/// Output channels `ms.0..ms.1` (known at run time) of the first `cols` pixels of one image
/// of `d` (rows `d.oh·d.ow` apart) at the builder's position: blocks of [`VECTORS`] vectors,
/// then one block of the remaining vectors, the last masked. `s` is at the tile's first pixel
/// (its rows `hw` apart), `s.w` the CSR weights ([`csr_bytes`]).
pub(crate) fn emit<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &Conv,
    cols: i64,
    ms: (IntValue<'c>, IntValue<'c>),
    s: Io<'c>,
) -> R<()> {
    let wl = w as i64;
    let block = VECTORS * wl;
    let full = cols / block;
    k.loop_(0, full, &mut |b| {
        let j0 = k.mul(b, block)?;
        emit_block(k, w, d, j0, VECTORS, None, ms, s)
    })?;
    let rest = cols - full * block;
    if rest > 0 {
        let nv = (rest + wl - 1) / wl;
        let lanes = rest - (nv - 1) * wl;
        let last = (lanes < wl).then_some(lanes as u32);
        emit_block(k, w, d, k.c(full * block), nv, last, ms, s)
    } else {
        Ok(())
    }
}

/// One block of `nv` vectors of pixels from pixel `j0`, output channels `ms.0..ms.1`; the
/// last vector only its first `last` lanes when `last` is given.
///
/// One channel at a time: its nonzero steps wait on each other (one FMA into each of the
/// `nv` accumulators, 4 cycles of latency), but the next channel's loop does not wait on
/// this one's, and out-of-order execution overlaps them; stepping two channels together
/// measured no faster (docs/codegen.md, "Sparse pointwise convolutions").
#[allow(clippy::too_many_arguments)]
fn emit_block<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &Conv,
    j0: IntValue<'c>,
    nv: i64,
    last: Option<u32>,
    ms: (IntValue<'c>, IntValue<'c>),
    s: Io<'c>,
) -> R<()> {
    let wl = w as i64;
    let hw = d.oh * d.ow;
    let i32p = k.ctx.i32_type().ptr_type(AddressSpace::default());
    let ints = llvm(k.b.build_pointer_cast(s.w, i32p, "csr"))?;
    let pairs = d.m + 1;
    let masked = |v: i64| last.filter(|_| v + 1 == nv);
    let epi = Epilogue {
        alpha: 1.0,
        row_bias: s.bias,
        act: d.act,
        row_slope: s.slope,
    };
    let load_i32 = |i: IntValue<'c>| -> R<IntValue<'c>> {
        let v = llvm(k.b.build_load(k.gep(ints, i)?, "i"))?.into_int_value();
        llvm(k.b.build_int_s_extend(v, k.i64t, "i64"))
    };
    k.loop_between(ms.0, ms.1, &mut |m| {
        let lo = load_i32(m)?;
        let hi = load_i32(k.add(m, k.c(1))?)?;
        let zero: BasicValueEnum = k.vty(w).const_zero().into();
        let init = vec![zero; nv as usize];
        let acc = loop_carry_between(k, lo, hi, init, &mut |j, cur| {
            let at = k.add(k.c(pairs), k.mul(j, 2)?)?;
            let off = load_i32(at)?;
            let wv = k.splat(k.ld(s.w, k.add(at, k.c(1))?)?, w)?;
            let base = k.add(off, j0)?;
            let mut next = Vec::with_capacity(cur.len());
            for (v, c) in cur.iter().enumerate() {
                let at = k.add(base, k.c(v as i64 * wl))?;
                let xv = match masked(v as i64) {
                    Some(n) => k.ldv_masked(s.x, at, w, n)?,
                    None => k.ldv(s.x, at, w)?,
                };
                next.push(k.fma(wv, xv, c.into_vector_value())?.into());
            }
            Ok(next)
        })?;
        let row = k.add(k.mul(m, hw)?, j0)?;
        for (v, a) in acc.iter().enumerate() {
            let at = k.add(row, k.c(v as i64 * wl))?;
            let n = masked(v as i64);
            let rv = match (s.res, n) {
                (None, _) => None,
                (Some(p), Some(n)) => Some(k.ldv_masked(p, at, w, n)?),
                (Some(p), None) => Some(k.ldv(p, at, w)?),
            };
            let a = a.into_vector_value();
            let out = finish_lanes(k, epi, a, m, rv, n.unwrap_or(w))?;
            match n {
                Some(n) => k.stv_masked(s.out, at, out, n)?,
                None => k.stv(s.out, at, out)?,
            }
        }
        Ok(())
    })
}

/// The tiles `begin..end` of a [`Cut::Channels`] cut (`count` chunks an image, chunk `c`
/// output channels `bounds[c]..bounds[c + 1]`): `body(image, (m0, m1))` for each, the
/// chunk's bounds picked at run time from the constants.
pub(crate) fn for_channel_tiles<'a, 'c>(
    k: &K<'a, 'c>,
    (begin, end): (IntValue<'c>, IntValue<'c>),
    bounds: &[i64],
    body: &mut dyn FnMut(IntValue<'c>, (IntValue<'c>, IntValue<'c>)) -> R<()>,
) -> R<()> {
    let count = bounds.len() as i64 - 1;
    if count < 1 {
        return Err(CodegenError::Llvm("a channel cut without chunks".into()));
    }
    let pick = |chunk: IntValue<'c>, of: &[i64]| -> R<IntValue<'c>> {
        let mut v = k.c(of[of.len() - 1]);
        for (c, &b) in of.iter().enumerate().rev().skip(1) {
            let is = llvm(k.b.build_int_compare(IntPredicate::EQ, chunk, k.c(c as i64), "is"))?;
            v = llvm(k.b.build_select(is, k.c(b), v, "bound"))?.into_int_value();
        }
        Ok(v)
    };
    k.loop_between(begin, end, &mut |tile| {
        let image = llvm(k.b.build_int_signed_div(tile, k.c(count), "image"))?;
        let chunk = llvm(k.b.build_int_signed_rem(tile, k.c(count), "chunk"))?;
        let m0 = pick(chunk, &bounds[..count as usize])?;
        let m1 = pick(chunk, &bounds[1..])?;
        body(image, (m0, m1))
    })
}

/// `for j in lo..hi` (bounds known at run time, none when `lo >= hi`: a channel with no
/// nonzero) carrying values through phis; returns the final ones.
fn loop_carry_between<'a, 'c>(
    k: &K<'a, 'c>,
    lo: IntValue<'c>,
    hi: IntValue<'c>,
    init: Vec<BasicValueEnum<'c>>,
    body: &mut crate::nest::CarryBody<'_, 'c>,
) -> R<Vec<BasicValueEnum<'c>>> {
    let block = || {
        k.b.get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))
    };
    let pre = block()?;
    let head = k.ctx.append_basic_block(k.func, "nonzeros");
    let exit = k.ctx.append_basic_block(k.func, "nonzeros_done");
    let any = llvm(k.b.build_int_compare(IntPredicate::SLT, lo, hi, "any"))?;
    llvm(k.b.build_conditional_branch(any, head, exit))?;
    k.b.position_at_end(head);
    let phi = llvm(k.b.build_phi(k.i64t, "j"))?;
    phi.add_incoming(&[(&lo, pre)]);
    let mut phis = Vec::with_capacity(init.len());
    for v in &init {
        let p = llvm(k.b.build_phi(v.get_type(), "acc"))?;
        p.add_incoming(&[(v, pre)]);
        phis.push(p);
    }
    let j = phi.as_basic_value().into_int_value();
    let cur: Vec<BasicValueEnum<'c>> = phis.iter().map(|p| p.as_basic_value()).collect();
    let next_vals = body(j, &cur)?;
    let next = llvm(k.b.build_int_add(j, k.c(1), "next"))?;
    let done = llvm(k.b.build_int_compare(IntPredicate::SGE, next, hi, "done"))?;
    let latch = block()?;
    phi.add_incoming(&[(&next, latch)]);
    for (p, v) in phis.iter().zip(&next_vals) {
        p.add_incoming(&[(v, latch)]);
    }
    llvm(k.b.build_conditional_branch(done, exit, head))?;
    k.b.position_at_end(exit);
    // The carried values after the loop: the initial ones when it ran no iteration.
    let mut out = Vec::with_capacity(init.len());
    for (v, n) in init.iter().zip(&next_vals) {
        let p = llvm(k.b.build_phi(v.get_type(), "sum"))?;
        p.add_incoming(&[(v, pre), (n, latch)]);
        out.push(p.as_basic_value());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_keeps_the_nonzeros_of_each_channel_in_input_order() {
        // 3 output channels of 4 inputs, rows 10 floats apart; channel 1 all zeros.
        let data = [0.0, 2.0, 0.0, -3.0, 0.0, -0.0, 0.0, 0.0, 1.5, 0.0, 0.0, 4.0];
        let bytes = csr_bytes(&data, 3, 10);
        let words: Vec<i32> = bytes
            .chunks(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(&words[..4], &[0, 2, 2, 4]);
        let pairs: Vec<(i32, f32)> = words[4..]
            .chunks(2)
            .map(|p| (p[0], f32::from_bits(p[1] as u32)))
            .collect();
        assert_eq!(pairs, vec![(10, 2.0), (30, -3.0), (0, 1.5), (30, 4.0)]);
    }

    #[test]
    fn channel_bounds_balance_the_nonzeros() {
        // Equal channels split in the middle.
        assert_eq!(channel_bounds(&[10, 10, 10, 10], 2), vec![0, 2, 4]);
        // A heavy first channel is a chunk of its own: costs 32 | 3 + 3 + 3 + 3 + ...
        let mut skew = vec![30];
        skew.extend([1; 9]);
        assert_eq!(channel_bounds(&skew, 2), vec![0, 1, 10]);
        // Every chunk keeps at least one channel, even with no nonzeros left for it.
        assert_eq!(channel_bounds(&[100, 0, 0, 0], 4), vec![0, 1, 2, 3, 4]);
        // One chunk: all channels.
        assert_eq!(channel_bounds(&[5, 6, 7], 1), vec![0, 3]);
        // Costs 6, 6, 22, 22: the half (28) falls inside channel 2, nearer its end, so it
        // goes to the first chunk (34 | 22, not 12 | 44).
        assert_eq!(channel_bounds(&[4, 4, 20, 20], 2), vec![0, 3, 4]);
    }

    /// A 1×1 convolution of a `c`-channel `h`×`w` image into `m` channels.
    fn pointwise(c: i64, h: i64, w: i64, m: i64) -> Conv {
        Conv {
            n: 1,
            c,
            h,
            wi: w,
            m,
            groups: 1,
            kh: 1,
            kw: 1,
            oh: h,
            ow: w,
            sh: 1,
            sw: 1,
            dh: 1,
            dw: 1,
            pt: 0,
            pl: 0,
            act: None,
        }
    }

    #[test]
    fn few_pixel_blocks_cut_by_channels() {
        let min = crate::parallel::MIN_TILE_FLOPS;
        // face_detection_full_range_sparse's 96 → 384 at 6×6 (one block of 64 pixels) and
        // 128 → 96 at 12×12 (three), 30% of the weights nonzero: by channels, in two
        // chunks of equal nonzeros.
        for (c, hw, m) in [(96, 6, 384), (128, 12, 96)] {
            let per = vec![c * 3 / 10; m as usize];
            let cut = cut(&pointwise(c, hw, hw, m), 16, &per, min);
            let Cut::Channels { tiling, bounds } = cut else {
                panic!("{c}→{m} at {hw}²: {cut:?}");
            };
            assert!(tiling.count >= 2, "{tiling:?}");
            assert_eq!(bounds, channel_bounds(&per, tiling.count));
        }
        // 48×48 is 36 blocks: by pixels.
        let per = vec![20; 64];
        let cut = cut(&pointwise(64, 48, 48, 64), 16, &per, min);
        assert!(
            matches!(cut, Cut::Pixels(t) if t.granule == 64 && t.count >= 2),
            "{cut:?}"
        );
    }
}
