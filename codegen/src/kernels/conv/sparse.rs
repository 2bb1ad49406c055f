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
//! GEMM's ([`finish_with`]). The nonzeros are data, not code: compile time does not grow
//! with them.
//!
//! Each output is the dense kernel's FMA chain (zero, then `c` ascending) without its zero
//! terms, so it equals the dense kernel's except for the sign of a zero sum and products
//! of a zero weight with an infinite or NaN input; it agrees with the interpreter (which
//! sums in another order) within float rounding, not bitwise. A pixel's chain does not
//! depend on the block or tile it lands in, so every thread count gives the same bits.

use super::geometry::Conv;
use crate::kernels::common::Slope;
use crate::kernels::gemm::{finish_with, Epilogue};
use crate::nest::{llvm, K, R};
use crate::parallel::Tiling;
use crate::CodegenError;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
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

/// The row stride (`H·W` pixels) of the input of `op` and the count of nonzeros if its
/// weights (operand 1) are stored sparse: a pointwise convolution
/// ([`super::pointwise_dims`]) whose weights `data` are at least [`MIN_ZERO_FRACTION`] zeros, its offsets within `i32`.
pub(crate) fn row_stride(func: &Function, op: &OpData, data: &[f32]) -> Option<(i64, i64)> {
    let (xd, wd, _) = super::pointwise_dims(func, op)?;
    let hw = xd[2] * xd[3];
    let count = wd.iter().product::<i64>();
    if hw <= 0 || count <= 0 || data.len() as i64 != count {
        return None;
    }
    if xd[1].checked_mul(hw)? >= i32::MAX as i64 {
        return None;
    }
    let zeros = data.iter().filter(|&&v| v == 0.0).count();
    let nnz = count - zeros as i64;
    let sparse =
        zeros as f64 >= MIN_ZERO_FRACTION * count as f64 && nnz >= MIN_NONZEROS_PER_CHANNEL * wd[0];
    sparse.then_some((hw, nnz))
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

/// How `d` (pointwise, `nnz` nonzero weights) is cut for threads: chunks of whole pixel
/// blocks of [`VECTORS`] vectors, every tile all output channels; the work is the sparse
/// product's (`2·nnz` FLOPs per pixel) or its traffic.
pub(crate) fn tiling(d: &Conv, w: u32, nnz: i64, min_flops: u64) -> Tiling {
    let hw = d.oh * d.ow;
    let flops = 2 * (d.n * hw * nnz).max(0) as u64;
    let bytes = 4 * (d.n * (d.c + d.m) * hw + 2 * nnz + d.m).max(0) as u64;
    let work = crate::parallel::work(flops, bytes);
    Tiling::new(d.n, hw, VECTORS * w as i64, work, min_flops)
}

/// Pointers and epilogue of one sparse pointwise convolution tile.
#[derive(Clone, Copy)]
pub(crate) struct Sparse<'c> {
    /// Input at the tile's first pixel (rows `hw` apart).
    pub x: PointerValue<'c>,
    /// The CSR weights ([`csr_bytes`]).
    pub w: PointerValue<'c>,
    pub bias: Option<PointerValue<'c>>,
    pub slope: Option<Slope<'c>>,
    /// Residual and output at the tile's first pixel (rows `hw` apart).
    pub res: Option<PointerValue<'c>>,
    pub out: PointerValue<'c>,
}

/// The first `cols` pixels of one image of `d` (output channels `d.m`, rows `d.oh·d.ow`
/// apart) at the builder's position: blocks of [`VECTORS`] vectors, then one block of the
/// remaining vectors, the last masked.
pub(crate) fn emit<'a, 'c>(k: &K<'a, 'c>, w: u32, d: &Conv, cols: i64, s: Sparse<'c>) -> R<()> {
    let wl = w as i64;
    let block = VECTORS * wl;
    let full = cols / block;
    k.loop_(0, full, &mut |b| {
        let j0 = k.mul(b, block)?;
        emit_block(k, w, d, j0, VECTORS, None, s)
    })?;
    let rest = cols - full * block;
    if rest > 0 {
        let nv = (rest + wl - 1) / wl;
        let lanes = rest - (nv - 1) * wl;
        let last = (lanes < wl).then_some(lanes as u32);
        emit_block(k, w, d, k.c(full * block), nv, last, s)
    } else {
        Ok(())
    }
}

/// One block of `nv` vectors of pixels from pixel `j0`, every output channel; the last
/// vector only its first `last` lanes when `last` is given.
#[allow(clippy::too_many_arguments)]
fn emit_block<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &Conv,
    j0: IntValue<'c>,
    nv: i64,
    last: Option<u32>,
    s: Sparse<'c>,
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
    k.loop_(0, d.m, &mut |m| {
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
            let mut out = k.vty(w).get_undef();
            for l in 0..n.unwrap_or(w) {
                let rl = match rv {
                    Some(rv) => Some(k.lane(rv, l)?),
                    None => None,
                };
                let x = finish_with(k, epi, k.lane(a, l)?, m, rl)?;
                out = llvm(k.b.build_insert_element(
                    out,
                    x,
                    k.ctx.i32_type().const_int(l.into(), false),
                    "o",
                ))?;
            }
            match n {
                Some(n) => k.stv_masked(s.out, at, out, n)?,
                None => k.stv(s.out, at, out)?,
            }
        }
        Ok(())
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
}
