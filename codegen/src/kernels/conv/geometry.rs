//! What the convolution kernels share: a convolution's constant extents, and the interval
//! of rows or columns whose every tap lies inside the input (the kernels peel the borders
//! around it instead of testing each element); the tensors a kernel reads and writes
//! ([`Io`]); the column blocks and the walk over them, the channel tiles and one tap's FMAs
//! that the implicit-im2col and transposed kernels share.

use crate::kernels::common::Slope;
use crate::nest::{K, R};
use crate::Gen;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue, VectorValue};
use tir_ir::Activation;

/// A convolution's constant extents (NCHW, weight `[M, C/groups, KH, KW]`).
#[derive(Clone, Copy)]
pub struct Conv {
    pub n: i64,
    pub c: i64,
    pub h: i64,
    pub wi: i64,
    pub m: i64,
    pub groups: i64,
    pub kh: i64,
    pub kw: i64,
    pub oh: i64,
    pub ow: i64,
    pub sh: i64,
    pub sw: i64,
    pub dh: i64,
    pub dw: i64,
    pub pt: i64,
    pub pl: i64,
    pub act: Option<Activation>,
}

/// The first and one-past-last index in `0..n` for which `ok` holds, assuming those form an
/// interval (empty as `(0, 0)`).
pub(super) fn interval(n: i64, ok: impl Fn(i64) -> bool) -> (i64, i64) {
    match (0..n).find(|&i| ok(i)) {
        Some(a) => (a, (a..n).take_while(|&i| ok(i)).last().map_or(a, |b| b + 1)),
        None => (0, 0),
    }
}

/// The tensors a convolution kernel reads and writes, each where the kernel's part of them
/// starts: the input `x`, the weights `w`, the optional `bias`, a fused PReLU's `slope`
/// (indexed as the bias), the optional residual `res` (laid out as the output) and `out`.
#[derive(Clone, Copy)]
pub(crate) struct Io<'c> {
    pub x: PointerValue<'c>,
    pub w: PointerValue<'c>,
    pub bias: Option<PointerValue<'c>>,
    pub slope: Option<Slope<'c>>,
    pub res: Option<PointerValue<'c>>,
    pub out: PointerValue<'c>,
}

impl<'c> Io<'c> {
    /// The parameters of kernel `f` (of `nargs`, in the order `conv2d` passes them): x, w,
    /// the bias, the residual and the slope (`Some(per_channel)`) where present, the output
    /// last.
    pub fn params<'a>(
        g: &Gen<'a, 'c>,
        f: FunctionValue<'c>,
        nargs: u32,
        bias: bool,
        residual: bool,
        slope: Option<bool>,
    ) -> R<Io<'c>> {
        let slope = match slope {
            Some(per_channel) => Some(Slope {
                p: g.param(f, nargs - 2)?,
                per_channel,
            }),
            None => None,
        };
        let res = match residual {
            true => Some(g.param(f, nargs - 2 - slope.is_some() as u32)?),
            false => None,
        };
        Ok(Io {
            x: g.param(f, 0)?,
            w: g.param(f, 1)?,
            bias: match bias {
                true => Some(g.param(f, 2)?),
                false => None,
            },
            slope,
            res,
            out: g.param(f, nargs - 1)?,
        })
    }

    /// The input moved on by `xo` elements, the output and the residual by `oo`.
    pub fn at<'a>(self, k: &K<'a, 'c>, xo: IntValue<'c>, oo: IntValue<'c>) -> R<Io<'c>> {
        Ok(Io {
            x: k.gep(self.x, xo)?,
            res: match self.res {
                Some(p) => Some(k.gep(p, oo)?),
                None => None,
            },
            out: k.gep(self.out, oo)?,
            ..self
        })
    }

    /// The channel-indexed tensors moved on to output channel `m0`: the bias and the slope
    /// by `m0`, the weights by `wo` elements (`m0` times their row).
    pub fn channels<'a>(self, k: &K<'a, 'c>, m0: IntValue<'c>, wo: IntValue<'c>) -> R<Io<'c>> {
        Ok(Io {
            w: k.gep(self.w, wo)?,
            bias: match self.bias {
                Some(p) => Some(k.gep(p, m0)?),
                None => None,
            },
            slope: match self.slope {
                Some(s) => Some(s.at(k, m0)?),
                None => None,
            },
            ..self
        })
    }

    /// Image `b`, group `gi` of `d`: the group's input channels, output channels, weights
    /// and bias.
    pub fn group<'a>(
        self,
        k: &K<'a, 'c>,
        d: &Conv,
        b: IntValue<'c>,
        gi: IntValue<'c>,
    ) -> R<Io<'c>> {
        let (cg, mg) = (d.c / d.groups, d.m / d.groups);
        let xo = k.mul(k.add(k.mul(b, d.c)?, k.mul(gi, cg)?)?, d.h * d.wi)?;
        let oo = k.mul(k.add(k.mul(b, d.m)?, k.mul(gi, mg)?)?, d.oh * d.ow)?;
        let m0 = k.mul(gi, mg)?;
        self.at(k, xo, oo)?
            .channels(k, m0, k.mul(gi, mg * cg * d.kh * d.kw)?)
    }
}

/// A column block of the implicit-im2col and transposed kernels: `nv` vectors from output
/// (or phase) column `first`; per vector, which output lanes exist (`store`), and per vector
/// and kernel column, which of the loaded input lanes are read (`load`).
pub(super) struct Block {
    pub first: i64,
    pub nv: i64,
    pub store: Vec<Vec<bool>>,
    pub load: Vec<Vec<Vec<bool>>>,
}

impl Block {
    /// Whether the block is `full` vectors wide with every lane stored and read: such blocks
    /// run the same code, so a run of them is one loop.
    fn clean(&self, full: i64) -> bool {
        self.nv == full
            && self.store.iter().flatten().all(|&b| b)
            && self.load.iter().flatten().flatten().all(|&b| b)
    }
}

/// One output row's tiles: per column block in order, output channels `0..mg` in tiles of
/// `mr` (a run-time loop, then the narrower last tile). A run of clean blocks (`full`
/// vectors of `w` lanes) is one run-time loop over their first columns, every other block
/// runs on its own constant first column. `tile` gets the block's first column, the block,
/// the tile's first channel and its height.
pub(super) fn walk_tiles<'a, 'c>(
    k: &K<'a, 'c>,
    blocks: &[Block],
    w: u32,
    full: i64,
    (mg, mr): (i64, i64),
    tile: &mut dyn FnMut(IntValue<'c>, &Block, IntValue<'c>, i64) -> R<()>,
) -> R<()> {
    let mut bi = 0;
    while bi < blocks.len() {
        let blk = &blocks[bi];
        let mut channels = |c0| channel_tiles(k, mg, mr, &mut |m0, h| tile(c0, blk, m0, h));
        if blk.clean(full) {
            let mut end = bi;
            while end < blocks.len() && blocks[end].clean(full) {
                end += 1;
            }
            let last = blocks[end - 1].first;
            k.loop_step(blk.first, last + 1, blk.nv * w as i64, &mut channels)?;
            bi = end;
        } else {
            channels(k.c(blk.first))?;
            bi += 1;
        }
    }
    Ok(())
}

/// Output channels per tile of the implicit-im2col and transposed kernels.
pub(super) const ROW_MR: i64 = 6;
/// Vectors of output (or phase) columns per tile of those kernels.
pub(super) const ROW_NV: i64 = 2;

/// One tile of an output row of the implicit-im2col and transposed kernels: the row's
/// kernel rows with their input-row offsets, the row's first output index, the block's
/// first column and the block, the tile's first output channel and its height.
pub(super) struct RowTile<'b, 'c> {
    pub rows: &'b [(i64, IntValue<'c>)],
    pub orow: IntValue<'c>,
    pub x0: IntValue<'c>,
    pub blk: &'b Block,
    pub m0: IntValue<'c>,
    pub mr: i64,
}

impl<'c> RowTile<'_, 'c> {
    /// The tile's accumulators before its K loop: `mr × nv` zero vectors of `w` lanes.
    pub fn zeros(&self, k: &K<'_, 'c>, w: u32) -> Vec<BasicValueEnum<'c>> {
        vec![k.vty(w).const_zero().into(); self.mr as usize * self.blk.nv as usize]
    }
}

/// An output row of those kernels: [`walk_tiles`] in [`ROW_MR`] × [`ROW_NV`] tiles over
/// `mg` output channels, each handed to `tile` with the row's `rows` and `orow`.
pub(super) fn row_tiles<'a, 'c>(
    k: &K<'a, 'c>,
    (blocks, w, mg): (&[Block], u32, i64),
    rows: &[(i64, IntValue<'c>)],
    orow: IntValue<'c>,
    tile: &mut dyn FnMut(RowTile<'_, 'c>) -> R<()>,
) -> R<()> {
    walk_tiles(
        k,
        blocks,
        w,
        ROW_NV,
        (mg, ROW_MR),
        &mut |x0, blk, m0, mr| {
            tile(RowTile {
                rows,
                orow,
                x0,
                blk,
                m0,
                mr,
            })
        },
    )
}

/// One kernel tap of a tile's K step in the implicit-im2col and transposed kernels: `load(v)`
/// is vector `v` of the tap's input (`None` where every lane is off); then each tile row `r`
/// broadcasts its weight at `wrows[r] + t` in `wt` and adds its products into
/// `acc[r·nv + v]`, rows outer, vectors inner. Nothing when no vector reads.
pub(super) fn tap_fmas<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    acc: &mut [VectorValue<'c>],
    load: &mut dyn FnMut(usize) -> R<Option<VectorValue<'c>>>,
    (wt, wrows, t): (PointerValue<'c>, &[IntValue<'c>], IntValue<'c>),
) -> R<()> {
    let nv = acc.len() / wrows.len().max(1);
    let bv: Vec<Option<VectorValue<'c>>> = (0..nv).map(&mut *load).collect::<R<_>>()?;
    if bv.iter().all(|b| b.is_none()) {
        return Ok(());
    }
    for (r, &wr) in wrows.iter().enumerate() {
        let a = k.splat(k.ld(wt, k.add(wr, t)?)?, w)?;
        for (v, b) in bv.iter().enumerate() {
            if let Some(b) = b {
                acc[r * nv + v] = k.fma(a, *b, acc[r * nv + v])?;
            }
        }
    }
    Ok(())
}

/// Tiles of `mr` output channels over `0..mg`, a run-time loop, then the narrower last
/// tile: `tile` gets the first channel and the tile's height.
pub(super) fn channel_tiles<'a, 'c>(
    k: &K<'a, 'c>,
    mg: i64,
    mr: i64,
    tile: &mut dyn FnMut(IntValue<'c>, i64) -> R<()>,
) -> R<()> {
    let mfull = mg / mr * mr;
    k.loop_step(0, mfull, mr, &mut |m0| tile(m0, mr))?;
    if mfull < mg {
        tile(k.c(mfull), mg - mfull)?;
    }
    Ok(())
}
