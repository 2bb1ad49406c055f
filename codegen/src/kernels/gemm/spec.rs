//! What a GEMM multiplies and what it does with each sum, shared by the tile shapes.

use crate::kernels::common::{activation, prelu, Slope};
use crate::nest::{K, R};
use inkwell::values::{FloatValue, IntValue, PointerValue, VectorValue};
use tir_ir::Activation;

/// The epilogue of a GEMM: `alpha * acc + bias[row]`, then the activation, then a PReLU
/// with the slope of the row (a convolution's output channel) if there is one.
#[derive(Clone, Copy)]
pub(crate) struct Epilogue<'c> {
    pub alpha: f64,
    pub row_bias: Option<PointerValue<'c>>,
    pub act: Option<Activation>,
    pub row_slope: Option<Slope<'c>>,
}

/// `C[i, j] = epi(Σ_k A[i*a_rs + k*a_cs] * B[k*b_rs + j])`, `C[i*c_rs + j]`.
#[derive(Clone, Copy)]
pub(crate) struct Gemm<'c> {
    pub a: PointerValue<'c>,
    pub a_rs: i64,
    pub a_cs: i64,
    pub b: PointerValue<'c>,
    pub b_rs: i64,
    pub c: PointerValue<'c>,
    pub c_rs: i64,
    pub m: i64,
    pub n: i64,
    pub k: i64,
}

/// One GEMM being emitted: the builder, the vector width, what to multiply, the epilogue and
/// the residual added in it (laid out as C) — what every tile shape hands down to its tiles.
/// `taps`: B's rows are not `b_rs` apart but come in groups of `taps.len()` (the taps of one
/// input channel of a stride-1 convolution, read in place from one copy of its input rows,
/// [`super::gemm_part_taps`]): row `(c, t)`, `kk = c·T + t`, at `c·b_rs + taps[t]`.
#[derive(Clone, Copy)]
pub(super) struct Job<'x, 'a, 'c> {
    pub k: &'x K<'a, 'c>,
    pub w: u32,
    pub gm: &'x Gemm<'c>,
    pub epi: Epilogue<'c>,
    pub res: Option<PointerValue<'c>>,
    pub taps: Option<&'x [i64]>,
    /// B's groups of taps come `per` to a channel, the channels `stride` floats apart: group
    /// `c·per + i` at `c·stride + i·gm.b_rs` ([`super::gemm_part_taps`]); `None`: group `g` at
    /// `g·gm.b_rs`.
    pub split: Option<(i64, i64)>,
    /// With `taps`, on the channel-vector tiles: B is an image read in place, pixel `p` of
    /// the GEMM at its [`Grid`] offset (`conv::panel`'s unpadded strided blocks).
    pub grid: Option<Grid>,
}

/// Where the pixels of a GEMM whose B is read in place from an image lie (the channel-vector
/// tiles of an unpadded strided convolution, [`super::gemm_packed_part`]): pixel `p` (output
/// row `p / ow`, column `p mod ow` of the block) at float `(p / ow)·row + (p mod ow)·col` of
/// B, whose K step `kk = c·T + t` is at `(c − c0)·b_rs + taps[t]` (B from the part's first
/// channel `c0`).
#[derive(Clone, Copy)]
pub(crate) struct Grid {
    pub ow: i64,
    pub col: i64,
    pub row: i64,
}

impl<'x, 'a, 'c> Job<'x, 'a, 'c> {
    /// The job of a GEMM whose B rows are `gm.b_rs` apart (no tap groups).
    pub(super) fn new(
        k: &'x K<'a, 'c>,
        w: u32,
        gm: &'x Gemm<'c>,
        epi: Epilogue<'c>,
        res: Option<PointerValue<'c>>,
    ) -> Self {
        Job {
            k,
            w,
            gm,
            epi,
            res,
            taps: None,
            grid: None,
            split: None,
        }
    }
}

/// Tiles of `step` over `0..n` as a loop from 0, then one tile of the `n mod step` left
/// (apart, so every tile's extent is a constant): `body(start, extent)`.
pub(super) fn step_tiles<'a, 'c>(
    k: &K<'a, 'c>,
    n: i64,
    step: i64,
    body: &mut dyn FnMut(IntValue<'c>, i64) -> R<()>,
) -> R<()> {
    let full = n / step * step;
    k.loop_step(0, full, step, &mut |i0| body(i0, step))?;
    if full < n {
        body(k.c(full), n - full)?;
    }
    Ok(())
}

/// `epi` applied to the sum `acc` of output row `row`.
pub(crate) fn finish<'a, 'c>(
    k: &K<'a, 'c>,
    epi: Epilogue<'c>,
    acc: FloatValue<'c>,
    row: IntValue<'c>,
) -> R<FloatValue<'c>> {
    finish_with(k, epi, acc, row, None)
}

/// [`finish`] with the output's residual element `res` added after the bias and before the
/// activation: `act((alpha·acc + bias) + res)`, the order of a separate `add` of the
/// residual to the unfused result, so fusing it changes no bit.
pub(crate) fn finish_with<'a, 'c>(
    k: &K<'a, 'c>,
    epi: Epilogue<'c>,
    acc: FloatValue<'c>,
    row: IntValue<'c>,
    res: Option<FloatValue<'c>>,
) -> R<FloatValue<'c>> {
    let mut v = acc;
    if epi.alpha != 1.0 {
        v = k.fmul(v, k.f(epi.alpha))?;
    }
    if let Some(b) = epi.row_bias {
        v = k.fadd(v, k.ld(b, row)?)?;
    }
    if let Some(r) = res {
        v = k.fadd(v, r)?;
    }
    let v = activation(k, epi.act, v)?;
    match epi.row_slope {
        Some(s) => prelu(k, s.load(k, row)?, v),
        None => Ok(v),
    }
}

/// [`finish_with`] on the first `lanes` lanes of the sums `acc` of output row `row` (the
/// residual's lanes from `res`), one lane at a time into a vector whose other lanes are
/// undefined (the callers store them masked): the epilogue of every tile that stores a vector
/// of one row's outputs.
pub(crate) fn finish_lanes<'a, 'c>(
    k: &K<'a, 'c>,
    epi: Epilogue<'c>,
    acc: VectorValue<'c>,
    row: IntValue<'c>,
    res: Option<VectorValue<'c>>,
    lanes: u32,
) -> R<VectorValue<'c>> {
    k.map_lanes(acc, lanes, &mut |l, x| {
        let rl = match res {
            Some(r) => Some(k.lane(r, l)?),
            None => None,
        };
        finish_with(k, epi, x, row, rl)
    })
}
