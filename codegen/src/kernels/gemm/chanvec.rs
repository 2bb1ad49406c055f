//! The GEMM of a pointwise convolution on a small image with vectors along the output
//! channels instead of the pixels (issue 20): `C[M, N] = A[M, K] · B[K, N]` with N = H·W at
//! most [`MAX_PIXELS`] (17×17).
//!
//! On the pixel-vector tiles ([`super::tile`]) N = 49 = 3·16 + 1 fills 49 of 48 + 16 lanes, so
//! a quarter of every FMA of the last vector is idle. Here a tile is [`VECTORS`] vectors of
//! `W` output channels × up to [`PIXELS`] pixels (3 × 7 = 21 accumulators for 49 pixels, 3 × 8
//! = 24 for 64): per K step it loads the three weight vectors and broadcasts one input value
//! per pixel, so every lane of every FMA is an output but in the last channel panel. The
//! weights are packed at compile time as `[M/MR][K][MR]` row panels with `MR = VECTORS·W`
//! (the layout of [`super::narrow_rows`], one panel per tile: the three vectors of one K step
//! are 192 contiguous bytes, the whole panel one stream), the last panel `M mod MR` rows wide.
//!
//! Every output is the narrow tile's chain: zero, then one fused multiply-add per k in
//! `k = 0..K` order (`x·w + acc`, the product commutes exactly), then the same per-element
//! epilogue ([`finish_with`]: bias, residual, activation, PReLU slope). So the outputs are
//! bitwise those of the pixel-vector kernel, and of every thread cut that starts chunks of
//! channels at a multiple of `W`: at a panel, or inside one ([`Rows`]: a tile's vectors then
//! read the rest of one panel and the start of the next).

use super::spec::{finish_with, step_tiles, Job};
use super::tile::{k_blocks, one_block_within, KBlock, NARROW};
use crate::kernels::common::{entry_scratch, vector_registers};
use crate::nest::{llvm, K, R};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue, VectorValue};

/// Channel vectors per tile.
pub(crate) const VECTORS: i64 = 3;
/// Pixels per tile at most: `3 × 8` accumulators, 3 weight vectors and the broadcast take 28
/// of AVX-512's 32 registers.
const PIXELS: i64 = 8;
/// Pixel counts up to which the kernel may be chosen: 17×17 (Inception v3's middle stage).
/// First the narrow tiles' 4 vectors at 16 lanes; raised when the 14×14 and 17×17 images
/// (196 = 12·16 + 4 and 289 = 18·16 + 1 pixels: the pixel-vector tiles end in a one-vector
/// tile with 4 or 1 live lanes, and read the unpacked weights as 6 row streams) measured
/// faster here (docs/codegen.md, "Vectors along output channels for small images"):
/// ResNet-50's thirteen 1×1 layers at 14×14 17.7 → 15.3 ms in the network, single
/// convolutions at 14×14 and 17×17 7–15%. Larger images are cut by pixel columns for the
/// threads, whose tiles are 64 pixels.
const MAX_PIXELS: i64 = 289;
/// The narrow tiles' reach at 16 lanes (4 vectors), the kernel's first range.
const NARROW_PIXELS: i64 = NARROW * 16;
/// K from which it is chosen. Measured (docs/codegen.md, "Vectors along output channels for
/// small images"): 96→576 and 96→200 at 7×7 ran 5–17% slower than the pixel-vector tiles,
/// K = 160 and more 5–27% faster.
const MIN_K: i64 = 128;

/// The panel height of the weights when a GEMM of `n` columns and `kk` steps runs on this
/// kernel at `w`-lane vectors, else `None`. Only with 32 vector registers (the tile needs
/// 28), at least two pixels (one is the matrix–vector product), at most [`MAX_PIXELS`], and
/// not where the pixel-vector tiles are full and at least 3 vectors wide (48, 80, …, 288
/// pixels: tiles with no idle lane) — but for 4 vectors (8×8, Inception v3's last stage):
/// there the narrow 6 × 4 tiles run the whole K per row tile, so each re-reads the whole
/// `K × 64` input (320–512 KiB at K = 1280–2048) from L2, where these tiles' [`KC`] chunks
/// keep a chunk of the weights and of the input in L1. Inception's eight 1×1 layers at 8×8
/// took 2.37 ms here against 2.96 on the narrow tiles at one thread, 1.37 against 1.58 at two
/// (Zen 5, docs/codegen.md "The 8×8 pointwise layers on the channel vectors"; on the Zen 4
/// host 1280→320 at 8×8 had measured 5–7% slower here, so 48 pixels, unmeasured, keeps the
/// narrow tiles).
pub(crate) fn panel_rows(w: u32, n: i64, kk: i64) -> Option<i64> {
    let wl = w as i64;
    let full = n % wl == 0 && n / wl >= 3 && n != NARROW * wl;
    (vector_registers(w) >= 32 && (2..=MAX_PIXELS).contains(&n) && !full && kk >= MIN_K)
        .then_some(VECTORS * wl)
}

/// [`panel_rows`] for a whole convolution of `m` output channels on `n` pixels that the
/// threads can only cut into chunks of whole panels (the strided panels of
/// `kernels::conv::panel`): where [`panels_split_evenly`]. Every choice that must agree — the
/// packing, the kernel, the thread cut — asks this with the op's `m`.
pub(crate) fn conv_panel_rows(w: u32, n: i64, kk: i64, m: i64) -> Option<i64> {
    panel_rows(w, n, kk).filter(|&mr| panels_split_evenly(n, m, mr))
}

/// Whether two threads share `m` channels on `n` pixels evenly enough in chunks of whole
/// `mr`-row panels: on images past the narrow tiles' [`NARROW_PIXELS`] only when the larger
/// half of the panels is at most 1/8 above half of `m` (256, 512, 1024, 192 and 96 channels
/// are; 64, 128 and 160 are not: 2 panels split 1 + 1 of which one is a third, 3 panels
/// split 2 + 1, 4 panels of which one is a third). A pointwise convolution whose panels do
/// not split evenly is cut by pixel tiles instead (`kernels::conv`'s `split_columns`), every
/// tile running every panel on its pixels.
pub(crate) fn panels_split_evenly(n: i64, m: i64, mr: i64) -> bool {
    let panels = (m + mr - 1) / mr;
    narrow_image(n) || 16 * ((panels + 1) / 2 * mr) <= 9 * m
}

/// Whether `n` pixels are within the narrow tiles' reach ([`NARROW_PIXELS`]), where the
/// threads keep whole panels however the channels split.
pub(crate) fn narrow_image(n: i64) -> bool {
    n <= NARROW_PIXELS
}

/// Pixels per tile for `n` pixels: a count that divides `n` if one of 8, 7, 6 does (64, 49,
/// 36), so no pixel tile is short, else 8 and a shorter last tile. A thread cut by pixels
/// ([`panels_split_evenly`]) is in chunks of whole tiles of the image's count.
pub(crate) fn pixels(n: i64) -> i64 {
    [PIXELS, 7, 6]
        .into_iter()
        .find(|p| n % p == 0)
        .unwrap_or(PIXELS)
        .min(n)
}

/// K steps per chunk: the chunk of a panel (128 · 48 floats, 24 KiB) is read from memory by
/// the first pixel tile and from L1 by the others, so the weights stream through the whole
/// computation as they do on the pixel-vector tiles (which read them once) instead of the
/// first tile of each panel waiting on 96–384 KiB of cold weights; the partial sums wait
/// in a stack buffer (exact in f32, so each output is still one FMA chain in K order).
pub(crate) const KC: i64 = 128;

/// Where a GEMM's rows lie in an A packed as [`panel_rows`] panels (`[M/MR][K][MR]`, the
/// last panel `M mod MR` rows): its row 0 is row `first` of the packed matrix (a multiple of
/// `W`, not necessarily of `MR`: a thread's chunk of channels may start inside a panel), and
/// the packed matrix has `total` rows (`gm.a` is its start, `gm.k` its K).
#[derive(Clone, Copy)]
pub(crate) struct Rows<'c> {
    pub first: IntValue<'c>,
    pub total: i64,
}

/// The GEMM `gm` (A stored as [`panel_rows`] panels, `rows` of them; `gm.a_rs`, `gm.a_cs`
/// unused) at the builder's position: tiles of `MR` rows in a loop, the last (`M mod MR`
/// rows) apart; within each, the K chunks, and within each chunk the pixel tiles. `res`: a
/// residual laid out as C, added after the bias.
pub(crate) fn emit<'c>(j: Job<'_, '_, 'c>, rows: Rows<'c>) -> R<()> {
    let k = j.k;
    // One slot of `VECTORS · pr` accumulators per pixel tile: `VECTORS · W` floats per pixel.
    let sums = entry_scratch(k, VECTORS * j.w as i64 * j.gm.n, "sums")?;
    let whole = Part {
        sums,
        per_panel: false,
        rows,
        k0: k.c(0),
        len: j.gm.k,
        first: true,
        last: true,
    };
    run(j, whole)
}

/// [`emit`] as one part of a longer K, for callers that cut K themselves (the packed im2col
/// panels of `kernels::conv::panel`): K steps `k0 .. k0 + len` of A (panels of `gm.k`
/// steps), B holding only those rows (step `kk` at row `kk − k0`). The partial sums wait in
/// `sums` between parts, one slot per channel panel and pixel tile (`MR · gm.n` floats per
/// panel, the last one's too):
/// `first` starts from zero, `last` applies the epilogue, as in `gemm_part`.
pub(crate) fn emit_part<'c>(
    j: Job<'_, '_, 'c>,
    rows: Rows<'c>,
    sums: PointerValue<'c>,
    (k0, len): (IntValue<'c>, i64),
    first: bool,
    last: bool,
) -> R<()> {
    let part = Part {
        sums,
        per_panel: true,
        rows,
        k0,
        len,
        first,
        last,
    };
    run(j, part)
}

/// The K steps one call multiplies and where their sums wait.
#[derive(Clone, Copy)]
struct Part<'c> {
    /// The slots of the pixel tiles: of the current row tile only, or (`per_panel`) of every
    /// row tile, the tile from row `i0` from float `i0 · N`.
    sums: PointerValue<'c>,
    per_panel: bool,
    rows: Rows<'c>,
    k0: IntValue<'c>,
    len: i64,
    first: bool,
    last: bool,
}

/// The K block of a part, in groups of `group` K steps: [`KC`] steps, or the whole part
/// where it exceeds that by at most a quarter (a caller's K chunk, [`emit_part`]). The
/// strided panels' chunks of whole input channels are 17 × 9 = 153 steps for Inception
/// v3's 288→384 3×3/2 onto 17×17: two blocks of 77 and 76 stored and reloaded every tile's
/// 24 sums twice per chunk, one block once (no faster on the panel, within the noise;
/// read in place, the blocks are whole channels: 14 of 9 steps would leave a block of 3).
/// The weights of 160 steps of a panel (30 KiB) and the tile's B lines (10 KiB) still fit
/// the 48 KiB L1d.
fn part_kc(p: Part, group: i64) -> i64 {
    let kc = (KC / group).max(1);
    match p.per_panel {
        true => one_block_within(p.len / group, kc),
        false => kc,
    }
}

/// K steps per group of the K loop: the taps of one input channel when B is an image read
/// in place ([`Job::grid`]), else 1.
fn group_len(j: Job) -> i64 {
    j.taps.map_or(1, |t| t.len().max(1) as i64)
}

/// The row tiles of `p` (`MR` rows, whole panels when the GEMM starts at one): per tile its
/// K chunks, each run by every pixel tile.
fn run<'c>(j: Job<'_, '_, 'c>, p: Part<'c>) -> R<()> {
    let k = j.k;
    let slot_floats = VECTORS * j.w as i64;
    step_tiles(k, j.gm.m, slot_floats, &mut |i0, mr| {
        let sums = match p.per_panel {
            true => k.gep(p.sums, k.mul(i0, j.gm.n)?)?,
            false => p.sums,
        };
        let a = vectors(k, j.w, j.gm.k, p.rows, (i0, mr))?;
        // K blocks of whole groups (an image's channels when B is read in place).
        let group = group_len(j);
        k_blocks(k, p.len / group, part_kc(p, group), &mut |kb| {
            let kb = KBlock {
                k0: k.add(p.k0, k.mul(kb.k0, group)?)?,
                len: kb.len * group,
                first: kb.first && p.first,
                last: kb.last && p.last,
            };
            step_tiles(k, j.gm.n, pixels(j.gm.n), &mut |j0, np| {
                let slot = k.gep(sums, k.mul(j0, slot_floats)?)?;
                tile(j, &a, slot, kb, p.k0, (i0, mr), (j0, np))
            })
        })
    })
}

/// Where each vector of the row tile `i0 .. i0 + mr` of a GEMM on `rows` reads A: the float
/// of its first row at K step 0, and its panel's height (the floats per K step). Row `g =
/// first + i0 + v·W` is lane 0 of vector `v`; it lies in panel `g / MR` at row `g mod MR`
/// (every vector within one panel: `first`, `i0` and `MR` are multiples of `W`), and that
/// panel holds `MR` rows, or `total mod MR` if it is the last. A tile whose rows start at a
/// panel reads one panel, as the panels' own tiles did; one that starts inside a panel (a
/// thread's chunk of 16 or 32 rows into it) reads the rest of that panel and the start of
/// the next. Each output's chain is the same either way.
pub(crate) fn vectors<'c>(
    k: &K<'_, 'c>,
    w: u32,
    kk: i64,
    rows: Rows<'c>,
    (i0, mr): (IntValue<'c>, i64),
) -> R<Vec<(IntValue<'c>, IntValue<'c>)>> {
    let wl = w as i64;
    let panel = VECTORS * wl;
    let full = rows.total / panel;
    let last = rows.total % panel;
    (0..(mr + wl - 1) / wl)
        .map(|v| {
            let g = k.add(k.add(rows.first, i0)?, k.c(v * wl))?;
            let p = llvm(k.b.build_int_unsigned_div(g, k.c(panel), "panel"))?;
            let r = llvm(k.b.build_int_sub(g, k.mul(p, panel)?, "row"))?;
            let height = match last {
                0 => k.c(panel),
                _ => {
                    let is_last = llvm(k.b.build_int_compare(
                        inkwell::IntPredicate::EQ,
                        p,
                        k.c(full),
                        "last_panel",
                    ))?;
                    llvm(k.b.build_select(is_last, k.c(last), k.c(panel), "height"))?
                        .into_int_value()
                }
            };
            Ok((k.add(k.mul(p, panel * kk)?, r)?, height))
        })
        .collect()
}

/// [`vectors`] of the row tile `i0 .. i0 + mr` when it is one whole panel (or the last,
/// shorter one) of an A packed from its row 0: the run-time-shaped tiles' case.
pub(crate) fn panel_vectors<'c>(
    k: &K<'_, 'c>,
    w: u32,
    kk: i64,
    (i0, mr): (IntValue<'c>, i64),
) -> R<Vec<(IntValue<'c>, IntValue<'c>)>> {
    let wl = w as i64;
    let base = k.mul(i0, kk)?;
    (0..(mr + wl - 1) / wl)
        .map(|v| Ok((k.add(base, k.c(v * wl))?, k.c(mr))))
        .collect()
}

/// One tile over the K chunk `kb`: rows `i0 .. i0 + mr` (the last vector masked when `mr`
/// is not a multiple of `w`), A's vectors where [`vectors`] says, × pixels `j0 .. j0 + np`. A chunk after the
/// first resumes from the sums in `slot`; one before the last leaves them there. The last
/// stores lane `l` of vector `v`, output row `i0 + v·w + l`, one element at a time at stride
/// `c_rs` (336 scalar stores against 21·K FMAs). B's first row is K step `b_k0`.
fn tile<'c>(
    j: Job<'_, '_, 'c>,
    a: &[(IntValue<'c>, IntValue<'c>)],
    slot: PointerValue<'c>,
    kb: KBlock<'c>,
    b_k0: IntValue<'c>,
    (i0, mr): (IntValue<'c>, i64),
    (j0, np): (IntValue<'c>, i64),
) -> R<()> {
    let (k, w, gm, epi, res) = (j.k, j.w, j.gm, j.epi, j.res);
    let wl = w as i64;
    let nv = (mr + wl - 1) / wl;
    let lanes = |v: i64| -> u32 { (mr - v * wl).min(wl) as u32 };
    let panel_row = |kk: IntValue<'c>, _| k.mul(llvm(k.b.build_int_sub(kk, b_k0, "kb"))?, gm.b_rs);
    let taps = j.taps.unwrap_or(&[0]);
    // Channel `c` of the image at `(c − c0)·b_rs`: B starts at the part's first channel.
    let c0 = llvm(k.b.build_int_unsigned_div(b_k0, k.c(group_len(j)), "c0"))?;
    let image_row = |c: IntValue<'c>, t: i64| {
        let c = llvm(k.b.build_int_sub(c, c0, "c"))?;
        k.add(k.mul(c, gm.b_rs)?, k.c(taps[t as usize]))
    };
    let bat = match j.grid {
        Some(grid) => BAt {
            row: &image_row,
            group: group_len(j),
            pix: (0..np)
                .map(|q| {
                    let p = k.add(j0, k.c(q))?;
                    let oy = llvm(k.b.build_int_unsigned_div(p, k.c(grid.ow), "oy"))?;
                    let ox = k.add(p, k.mul(oy, -grid.ow)?)?;
                    k.add(k.mul(oy, grid.row)?, k.mul(ox, grid.col)?)
                })
                .collect::<R<_>>()?,
        },
        None => BAt {
            row: &panel_row,
            group: 1,
            pix: contiguous(k, j0, np)?,
        },
    };
    let acc = chains(k, w, (gm.a, gm.b), a, &bat, slot, kb, mr)?;
    if !kb.last {
        for (i, a) in acc.iter().enumerate() {
            k.stv(slot, k.c(i as i64 * wl), a.into_vector_value())?;
        }
        return Ok(());
    }
    for v in 0..nv {
        for l in 0..lanes(v) {
            let row = k.add(i0, k.c(v * wl + l as i64))?;
            let rowc = k.add(k.mul(row, gm.c_rs)?, j0)?;
            for j in 0..np {
                let at = k.add(rowc, k.c(j))?;
                let sum = k.lane(acc[(v * np + j) as usize].into_vector_value(), l)?;
                let r = match res {
                    Some(p) => Some(k.ld(p, at)?),
                    None => None,
                };
                k.st(gm.c, at, finish_with(k, epi, sum, row, r)?)?;
            }
        }
    }
    Ok(())
}

/// Where a tile reads B: K step `kk = g·T + t` (group `g`, `T = group` steps, tap `t`) of
/// pixel `j` at float `row(g, t) + pix[j]` of `b`. A packed panel (`T` = 1) has its rows
/// `b_rs` apart and the pixels contiguous ([`contiguous`]); an image read in place
/// ([`super::Grid`]) has a channel per group, its taps at constant offsets and each pixel's
/// window at its own offset.
pub(crate) struct BAt<'x, 'c> {
    pub row: &'x dyn Fn(IntValue<'c>, i64) -> R<IntValue<'c>>,
    pub group: i64,
    pub pix: Vec<IntValue<'c>>,
}

/// Pixels `j0 .. j0 + np` of a B whose pixels are contiguous.
pub(crate) fn contiguous<'c>(k: &K<'_, 'c>, j0: IntValue<'c>, np: i64) -> R<Vec<IntValue<'c>>> {
    (0..np).map(|j| k.add(j0, k.c(j))).collect()
}

/// The FMA chains of one tile over the K chunk `kb`: rows `i0 .. i0 + mr` of the panels at
/// `a` (vector `v` at float `vecs[v].0 + k·vecs[v].1` for K step `k`, [`vectors`]; the last
/// vector masked when `mr` is not a multiple of `w`) × the pixels of `bat` (K step `kk` of
/// pixel `j` where [`BAt`] says; `kb` whole groups), vector `v` of pixel `j` at `v·np + j`.
/// The loop runs over groups with their `T` steps unrolled in `kk` order. A chunk after the
/// first starts from the sums in `slot`. The static tile and the run-time-sized one
/// (`dynamic::chanvec`) share it, so their chains are the same.
#[allow(clippy::too_many_arguments)]
pub(crate) fn chains<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    (a, b): (PointerValue<'c>, PointerValue<'c>),
    vecs: &[(IntValue<'c>, IntValue<'c>)],
    bat: &BAt<'_, 'c>,
    slot: PointerValue<'c>,
    kb: KBlock<'c>,
    mr: i64,
) -> R<Vec<BasicValueEnum<'c>>> {
    let wl = w as i64;
    let np = bat.pix.len() as i64;
    let group = bat.group;
    let nv = (mr + wl - 1) / wl;
    let lanes = |v: i64| -> u32 { (mr - v * wl).min(wl) as u32 };
    // The weights one chunk on (below), per vector.
    let ahead: Vec<IntValue> = vecs
        .iter()
        .map(|&(_, h)| llvm(k.b.build_int_mul(h, k.c(KC), "ahead")))
        .collect::<R<_>>()?;
    let init: Vec<BasicValueEnum> = if kb.first {
        let zero: BasicValueEnum = k.vty(w).const_zero().into();
        vec![zero; (nv * np) as usize]
    } else {
        (0..nv * np)
            .map(|i| Ok(k.ldv(slot, k.c(i * wl), w)?.into()))
            .collect::<R<_>>()?
    };
    let g0 = match group {
        1 => kb.k0,
        _ => llvm(k.b.build_int_unsigned_div(kb.k0, k.c(group), "g0"))?,
    };
    k.loop_carry(0, kb.len / group, 1, init, &mut |gi, cur| {
        let g = k.add(g0, gi)?;
        let mut cur = cur.to_vec();
        for t in 0..group {
            let kq = k.add(k.mul(g, group)?, k.c(t))?;
            let at: Vec<IntValue> = vecs
                .iter()
                .map(|&(base, h)| k.add(base, llvm(k.b.build_int_mul(kq, h, "kh"))?))
                .collect::<R<_>>()?;
            let wv: Vec<VectorValue> = (0..nv)
                .map(|v| {
                    let p = at[v as usize];
                    match lanes(v) {
                        n if n == w => k.ldv(a, p, w),
                        n => k.ldv_masked(a, p, w, n),
                    }
                })
                .collect::<R<_>>()?;
            // The same weights one chunk on, into L2 (`prefetcht1`): the next chunk's first
            // pixel tile then finds its panel slice there instead of waiting on memory. Past
            // the panel's end the prefetch touches nothing (it never faults).
            for (&p, &h) in at.iter().zip(&ahead) {
                prefetch(k, a, k.add(p, h)?)?;
            }
            let bi = (bat.row)(g, t)?;
            let mut next = cur.clone();
            for (j, &pj) in bat.pix.iter().enumerate() {
                let x = k.splat(k.ld(b, k.add(bi, pj)?)?, w)?;
                for (v, &wvv) in wv.iter().enumerate() {
                    let i = v * np as usize + j;
                    next[i] = k.fma(x, wvv, cur[i].into_vector_value())?.into();
                }
            }
            cur = next;
        }
        Ok(cur)
    })
}

/// `llvm.prefetch` of the line holding float `i` of `p`, for reading, into L2.
pub(crate) fn prefetch<'a, 'c>(k: &K<'a, 'c>, p: PointerValue<'c>, i: IntValue<'c>) -> R<()> {
    prefetch_into(k, p, i, 2)
}

/// [`prefetch`] with LLVM's `locality` (0–3: 3 is `prefetcht0`, into L1; 2 `prefetcht1`).
pub(crate) fn prefetch_into<'a, 'c>(
    k: &K<'a, 'c>,
    p: PointerValue<'c>,
    i: IntValue<'c>,
    locality: u64,
) -> R<()> {
    // SAFETY: a plain (not inbounds) GEP is defined for any offset; the prefetch does not
    // access memory.
    let q = llvm(unsafe { k.b.build_gep(p, &[i], "pf") })?;
    let i8p = k.ctx.i8_type().ptr_type(inkwell::AddressSpace::default());
    let q = llvm(k.b.build_pointer_cast(q, i8p, "pf8"))?;
    let f = k.intrinsic("llvm.prefetch", &[i8p.into()])?;
    let i32t = k.ctx.i32_type();
    llvm(k.b.build_call(
        f,
        &[
            q.into(),
            i32t.const_int(0, false).into(),
            i32t.const_int(locality, false).into(),
            i32t.const_int(1, false).into(),
        ],
        "",
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixel_tiles_divide_the_small_images() {
        assert_eq!(pixels(49), 7);
        assert_eq!(pixels(64), 8);
        assert_eq!(pixels(36), 6);
        assert_eq!(pixels(16), 8);
        assert_eq!(pixels(2), 2);
        assert_eq!(pixels(196), 7);
        // 289 = 36 · 8 + 1.
        assert_eq!(pixels(289), 8);
        assert_eq!(pixels(5), 5);
        // No divisor among 8, 7, 6: tiles of 8 and a last one of 61 mod 8 = 5.
        assert_eq!(pixels(61), 8);
    }

    #[test]
    fn eight_by_eight_takes_the_channel_vectors() {
        // Inception v3's last stage: 1280 and 2048 input channels on 64 pixels, whole
        // vectors, yet here (any 2-thread cut of the panels: 8×8 is within the narrow reach).
        for kk in [1280, 2048] {
            assert_eq!(panel_rows(16, 64, kk), Some(48));
            for m in [192, 320, 384, 448] {
                assert_eq!(conv_panel_rows(16, 64, kk, m), Some(48));
            }
        }
        // Below MIN_K and with AVX2's 16 registers, still the pixel-vector tiles.
        assert_eq!(panel_rows(16, 64, 96), None);
        assert_eq!(panel_rows(8, 64, 1280), None);
    }

    #[test]
    fn the_tile_fits_the_register_file() {
        // Accumulators, the weight vectors of one K step and the broadcast input value.
        let used = VECTORS * PIXELS + VECTORS + 1;
        assert!(used <= vector_registers(16));
        assert_eq!(panel_rows(16, 49, 512), Some(48));
        assert_eq!(panel_rows(16, 36, 128), Some(48));
        assert_eq!(panel_rows(16, 49, 96), None);
        assert_eq!(panel_rows(16, 48, 512), None);
        assert_eq!(panel_rows(16, 1, 512), None);
        // 14×14 and 17×17 (ResNet-50, GoogLeNet, Inception v3); 12×12 and 16×16 fill
        // whole vectors; past 17×17 the threads cut by pixel columns.
        assert_eq!(panel_rows(16, 65, 512), Some(48));
        assert_eq!(panel_rows(16, 196, 256), Some(48));
        assert_eq!(panel_rows(16, 289, 768), Some(48));
        assert_eq!(panel_rows(16, 144, 768), None);
        assert_eq!(panel_rows(16, 256, 768), None);
        assert_eq!(panel_rows(16, 290, 768), None);
        assert_eq!(panel_rows(16, 784, 512), None);
        assert_eq!(panel_rows(8, 49, 512), None);
        // Cut for two threads: balanced enough from 14×14 on, any split at 7×7.
        for m in [96, 192, 256, 260, 512, 1024] {
            assert_eq!(conv_panel_rows(16, 196, 256, m), Some(48), "{m}");
        }
        for m in [14, 64, 100, 128, 160, 200] {
            assert_eq!(conv_panel_rows(16, 289, 768, m), None, "{m}");
            assert_eq!(conv_panel_rows(16, 49, 768, m), Some(48), "{m}");
        }
    }
}
