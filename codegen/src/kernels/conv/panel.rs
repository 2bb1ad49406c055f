//! Strided dense k×k convolution, and stride-1 ones on rows too wide for row packing, as a
//! GEMM on a packed im2col panel (issue 20).
//!
//! `out[m, p] = Σ_{(c,i,j)} W[m, (c, i, j)] · X[(c, i, j), p]`, where `X` is the im2col matrix
//! (`K = C·KH·KW` rows in `(c, i, j)` order, one column per output pixel). The implicit-im2col
//! kernels ([`super::im2col`], [`super::rowpack`]) load `X`'s columns straight from the input
//! inside the K loop, so with a stride every vector costs two loads and a shuffle per tap,
//! shared only by the 6 or 8 output channels of one register tile. Here, as in the im2col
//! packing of onnxruntime's MLAS and oneDNN's GEMM-based convolution, a block of whole output
//! rows (`rows · OW` consecutive pixels, so the block is contiguous in `[M, OH·OW]`) has its
//! panel of `X` gathered once into a scratch buffer (padding as zeros), and every output
//! channel then runs the ordinary GEMM micro-kernel ([`crate::kernels::gemm`]) on it: `M`
//! output channels, `N = rows · OW` pixels, `B` = the panel, `C` = the output at the block's
//! first pixel with row stride `OH·OW`. The strided gather is paid once per pixel block
//! instead of once per channel tile.
//!
//! K is cut into chunks of whole input channels whose panel fills at most [`PANEL_BYTES`]
//! (it stays in L2 while the GEMM's own K blocks bring it through L1): each chunk is packed,
//! then multiplied into the output; a chunk after the first resumes from the partial sums
//! stored in the output (exact in f32), so each output is still one FMA chain in `(c, i, j)`
//! order from zero, and only the last chunk adds the bias and applies the activation — the
//! same instructions per output whatever the pixel blocks or threads.
//!
//! Where a pixel block is a small image (ResNet's 3×3/2 onto 28×28, 14×14 and 7×7), the
//! weights are stored at compile time as the channel-vector tiles' 48-row panels
//! ([`packed_rows`]) and each K chunk runs on those tiles instead (vectors along output
//! channels, every lane an output), the partial sums of the whole block kept between chunks
//! in a second stack buffer; the FMA chain per output is the same.
//!
//! With unit strides on rows of at least [`IN_PLACE_OW`] (Inception v3's 147² stems) the
//! block's input rows are copied once, padded, instead of once per tap, and the GEMM reads
//! each tap in place at a constant offset ([`in_place`]); its sums wait beside the copy (at
//! most 64 output channels of the block, about 100 KiB) and are copied out through the
//! epilogue, the columns that straddle two rows dropped. Strided layers with kernels of 25
//! taps or more on rows of at least [`IN_PLACE_STRIDED_OW`] (the 7×7/2 stems) copy each
//! output row's input rows as planes of every `SW`-th column and read the taps in place
//! too, one GEMM per output row. The same FMA chain per output.
//!
//! Threads cut the output rows into whole pixel blocks, each packed by the thread that uses
//! it; an image of fewer than [`MIN_ROW_CUT`] blocks is cut along output channels instead,
//! every tile packing the panel for its own channels. Either way each output is the same FMA
//! chain, so the bits do not depend on the cut.
//!
//! The scratch panel is a fixed-size `alloca` in the kernel's entry block: one per call of
//! the kernel function, so each thread running a tile has its own on its own stack (the
//! pool's threads have the default 8 MiB stack; the panel is at most [`PANEL_BYTES`], or
//! one channel's rows). A slab tensor would need one panel per concurrent tile planned by
//! the memory planner for a buffer that lives only inside one kernel call.

use super::geometry::{Conv, Io};
use crate::kernels::gemm::{
    chanvec_conv_rows, chanvec_rows, finish_lanes, gemm_packed_part, gemm_part, gemm_part_taps,
    Epilogue, Gemm, Grid, PackedRows,
};
use crate::nest::{llvm, K, R};
use inkwell::values::{IntValue, PointerValue, VectorValue};

/// Bytes one K chunk of the panel may fill: within L2 (2 MiB here) beside the weights' rows
/// of the chunk, several times the 32 KiB the GEMM's own K blocks bring through L1. Chunks
/// of 48–384 KiB with blocks of 64–512 pixels were within the noise of each other on the
/// stems and ResNet's 3×3/2 layers; 64 KiB blocks of 128 pixels were up to 10% slower on
/// the layers with the largest K (2304–4608).
const PANEL_BYTES: i64 = 192 * 1024;

/// Output pixels a block aims at: four wide GEMM tiles (`4·16` columns each with AVX-512),
/// so each weight row read from L2 serves 256 columns.
const BLOCK_PIXELS: i64 = 256;

/// Fewest pixel blocks per image for which the threads cut along output rows; an image with
/// fewer (ResNet's 14×14 and 7×7 outputs: one block) is cut along output channels instead,
/// each tile packing the panel itself.
const MIN_ROW_CUT: i64 = 4;

/// Widest output row this kernel takes: the packing unrolls `KW × ⌈OW/W⌉` vectors per input
/// row, bounded here.
const MAX_OW: i64 = 256;

/// Fewest output channels for the panel: each packed element then serves at least this many
/// FMAs. Below it the old kernels' repeated gather is cheap too: BlazeFace's 3→24 5×5/2 stem
/// at 64² ran 0.15–0.17 ms row-tiled against 0.20–0.23 ms on the panel, while MobileNet's
/// 3→32 3×3/2 stem went 0.34–0.36 → 0.31–0.32 ms (one thread, `--profile 20`, load ≈ 11).
const MIN_CHANNELS: i64 = 32;

/// Whether `d` runs on the packed panel (with vectors of `w` lanes): dense (one group),
/// several input channels, at least [`MIN_CHANNELS`] output channels, a kernel bigger than
/// 1×1, and either a stride along some axis or unit strides on an image too wide for the
/// row-packed kernel ([`super::rowpack::applies`]: Inception v3's 147- and 71-wide stem
/// layers, whose rows repeat only every 149 or 73 vectors). Those ran the one-row tiles of
/// [`super::im2col`] at 40–51 GFLOP/s against the GEMM micro-kernel's 100–130 on the same
/// model's 1×1 layers: 6 × 2 tiles load two input vectors and six weights for 12 FMAs,
/// where the GEMM's 6 × 4 tiles on the packed panel load four for 24. With unit strides the
/// packing is one (masked) load and store per vector, shared by every output channel.
/// Kernels of 25 taps or more (5×5) take it on narrow rows too: Inception v3's three 48→64
/// 5×5 layers at 35×35 ran 2.87–2.90 ms row-packed against 2.56–2.61 here at one thread,
/// 1.46–1.50 against 1.34 at two (docs/codegen.md, "Inception v3, GoogLeNet and SqueezeNet
/// under real-time priority"). Depthwise, grouped and 1×1 convolutions keep their kernels.
pub(super) fn applies(d: &Conv, w: u32) -> bool {
    d.groups == 1
        && d.c > 1
        && d.m >= MIN_CHANNELS
        && d.kh * d.kw > 1
        && d.oh >= 1
        && (1..=MAX_OW).contains(&d.ow)
        && (d.sh > 1 || d.sw > 1 || d.kh * d.kw >= 25 || !super::rowpack::applies(d, w))
}

/// Output rows per pixel block (the granule of the threads' cut along output rows): about
/// [`BLOCK_PIXELS`], balanced so that the last block is not a sliver (28 rows of 28: 4 × 7).
/// An image of at most 1.25 blocks is one block: every block streams all the weights, and
/// Inception v3's 288 → 384 3×3/2 at 17² (4 MiB of weights) ran 3.18 ms for its two 17²
/// layers as one block of 289 pixels against 3.33 as blocks of 153 and 136 (one thread,
/// docs/codegen.md "Inception v3 and GoogLeNet, issue 20").
pub(super) fn block_rows(d: &Conv) -> i64 {
    if let Some(r) = in_place_rows(d) {
        return r;
    }
    default_rows(d)
}

/// [`block_rows`] by pixel count alone (every block but the in-place ones).
fn default_rows(d: &Conv) -> i64 {
    let oh = d.oh.max(1);
    if oh * d.ow <= BLOCK_PIXELS * 5 / 4 {
        return oh;
    }
    let most = ((BLOCK_PIXELS + d.ow / 2) / d.ow).clamp(1, oh);
    let mut blocks = (oh + most - 1) / most;
    // A few blocks cut by rows, an odd count, split unequally between two threads (5
    // blocks: 3 + 2, 60%); one more block evens it (a choice by shape, not thread count).
    if (MIN_ROW_CUT..8).contains(&blocks) && blocks % 2 == 1 {
        blocks += 1;
    }
    (oh + blocks - 1) / blocks
}

/// Whether the threads cut `d` along output rows (whole pixel blocks, [`emit_rows`]) rather
/// than along output channels (each tile the whole image for its channels).
pub(super) fn cut_rows(d: &Conv) -> bool {
    let r = block_rows(d);
    (d.oh + r - 1) / r >= MIN_ROW_CUT
}

/// Narrowest output row whose stride-1 blocks read the taps in place ([`in_place`]).
const IN_PLACE_OW: i64 = 128;

/// Narrowest output row whose strided blocks read the taps in place ([`in_place`]): one
/// GEMM per output row, so a row is at least one wide tile (`4·16` columns) and ResNet's
/// 3×3/2 layers onto 28² and smaller (with their channel-vector tiles) keep the panel.
const IN_PLACE_STRIDED_OW: i64 = 64;

/// Fewest kernel taps for which a strided layer reads its taps in place ([`in_place`]):
/// the copy saves `KW / SW` of the per-tap gather (3.5× for a 7×7/2, 1.5× for a 3×3/2).
/// MobileNet v2's 3→32 3×3/2 stem onto 112² (K = 27) ran 0.157–0.165 ms in place against
/// 0.151–0.158 on the per-tap panel (one thread, `--profile 20`, under load).
const IN_PLACE_STRIDED_TAPS: i64 = 25;

/// Output channels whose sums an in-place block holds at a time ([`Block::in_place`]).
const IN_PLACE_GROUP: i64 = 64;

/// Whether the block's taps are read in place from one copy of its input rows instead of
/// one shifted copy per tap: unit dilations, every input channel's copy within
/// [`PANEL_BYTES`] (one K chunk), and either unit strides on rows of at least
/// [`IN_PLACE_OW`] or strides on rows of at least [`IN_PLACE_STRIDED_OW`] with kernels of
/// at least [`IN_PLACE_STRIDED_TAPS`]. The [`copied_rows`] input rows of each channel are
/// copied, padding included, each as its `SW` planes of every `SW`-th column ([`padded`]
/// wide, back to back): input column `SW·u + e − PL` at plane `e`, column `u`. Output
/// column `ox`'s tap `(i, j)` is then plane `j mod SW` of input row `oy·SH + i` at column
/// `ox + ⌊j / SW⌋`, so a vector of consecutive outputs reads each tap with one contiguous
/// load ([`tap_offsets`]). With unit strides the block's rows are copied once and the GEMM
/// runs over `rows·Wp − (KW − 1)` columns of the copy (the rows back to back,
/// [`crate::kernels::gemm::gemm_part_taps`]; the `KW − 1` columns per row that straddle
/// two rows are computed and dropped when the sums are copied out). With strides the rows
/// of consecutive output rows are `SH` input rows apart, which no single column index
/// spans, so each output row is its own GEMM of `OW` columns on its `KH` rows of the
/// block's copy, straight into the output: the 7×7/2 stems of ResNet, GoogLeNet (112²) and SqueezeNet
/// (109²) 6–8% faster than on the per-tap panel (docs/codegen.md "The 7×7/2 stems read
/// their taps in place").
fn in_place(d: &Conv) -> bool {
    in_place_rows(d).is_some()
}

/// The rows of an in-place block ([`in_place`]), if `d` reads its taps in place. With unit
/// strides, of [`default_rows`]` r` and `r + 1` the one whose blocks run the fewest GEMM
/// vectors over the image (a block of `rows` runs `⌈(rows·Wp − (KW − 1)) / 16⌉` vectors of
/// AVX-512's 16 lanes — a multiple of the narrower widths —, the tail block its own). A
/// block's last vector is partly idle and its `KW − 1` columns between rows are dropped: at
/// 147², blocks of 2 rows run 304 lanes for 294 outputs and a one-row tail, blocks of 3 run
/// 448 for 441 and divide 147; each block also copies `KH − 1` rows fewer per output row.
/// Stems 32→32 and 32→64 at 147²: 4–5% faster (docs/codegen.md "The in-place stems: one
/// K block, blocks of three rows"). With strides, [`default_rows`] when its rows' own GEMMs
/// run no more vectors than the block's pixels would (112 wide: 7 per row, as 224 pixels
/// run 14; 109 wide: 7 per row, 218 pixels 14; not 149: 10 per row against 19 for 298).
fn in_place_rows(d: &Conv) -> Option<i64> {
    if d.dh != 1 || d.dw != 1 {
        return None;
    }
    let fits = |r: i64| d.c * channel_copy(d, r) * 4 <= PANEL_BYTES;
    let r = default_rows(d);
    if d.sh > 1 || d.sw > 1 {
        let each = r * ((d.ow + 15) / 16) <= (r * d.ow + 15) / 16;
        let wide = d.ow >= IN_PLACE_STRIDED_OW && d.kh * d.kw >= IN_PLACE_STRIDED_TAPS;
        return (wide && each && fits(r)).then_some(r);
    }
    if d.ow < IN_PLACE_OW {
        return None;
    }
    let vectors = |r: i64| {
        let block = |rows: i64| (in_place_cols(d, rows) + 15) / 16;
        let tail = d.oh % r;
        d.oh / r * block(r) + if tail > 0 { block(tail) } else { 0 }
    };
    let r = if r < d.oh && fits(r + 1) && vectors(r + 1) < vectors(r) {
        r + 1
    } else {
        r
    };
    fits(r).then_some(r)
}

/// Whether an in-place block runs one GEMM per output row ([`in_place`]: strided).
fn row_gemms(d: &Conv) -> bool {
    d.sh > 1 || d.sw > 1
}

/// One plane of a copied input row of an in-place block ([`in_place`]): `OW + ⌊(KW − 1) /
/// SW⌋` columns (`OW + KW − 1`, the padded row, with unit strides).
fn padded(d: &Conv) -> i64 {
    d.ow + (d.kw - 1) / d.sw
}

/// Input rows an in-place block of `rows` output rows copies per channel: the block's
/// `(rows − 1)·SH + KH` (`rows + KH − 1` with unit strides). With strides consecutive
/// output rows share `KH − SH` of their input rows (5 of a 7×7/2's 7), so a block of 2 rows
/// copies 9 rows, not 14: the copy was 6–7% of the 7×7/2 stems' samples (`perf annotate`)
/// when each output row copied its own `KH`.
fn copied_rows(d: &Conv, rows: i64) -> i64 {
    (rows - 1) * d.sh + d.kh
}

/// Floats of one input channel's copy for an in-place block of `rows` output rows: its
/// copied rows, each as `SW` planes.
fn channel_copy(d: &Conv, rows: i64) -> i64 {
    copied_rows(d, rows) * d.sw * padded(d)
}

/// The taps of one K group of an in-place GEMM ([`crate::kernels::gemm::gemm_part_taps`]),
/// in `(i, j)` order, from the output column's own place in the copy. Unit strides: the
/// `KH·KW` taps of a channel, `i·Wp + j`. Strides: the `KW` taps of one kernel row `i` of
/// channel `c` (group `c·KH + i`, `SW·Wp` floats apart), plane `j mod SW`, `⌊j / SW⌋`
/// columns on: a K loop of `C·KH` groups of `KW` unrolled taps, not `C` of `KH·KW` (49
/// unrolled taps of a 7×7 made the tiles' loop body ~2,000 instructions, whose B loads
/// LLVM hoisted and spilled).
fn tap_offsets(d: &Conv) -> Vec<i64> {
    let wp = padded(d);
    if row_gemms(d) {
        return (0..d.kw).map(|j| j % d.sw * wp + j / d.sw).collect();
    }
    (0..d.kh * d.kw).map(|t| t / d.kw * wp + t % d.kw).collect()
}

/// The GEMM columns of a unit-stride in-place block of `rows` output rows: the padded rows
/// back to back, less the last row's `KW − 1` padding columns.
fn in_place_cols(d: &Conv, rows: i64) -> i64 {
    rows * padded(d) - (d.kw - 1)
}

/// Bytes of partial sums the channel-vector tiles may keep between K chunks
/// ([`packed_rows`]): every output of a pixel block (`M ·` its pixels floats, `M` rounded up
/// to whole panels) waits in a stack buffer
/// while the next chunk of the image is packed, so it must stay in L2 beside the panel.
const SUMS_BYTES: i64 = 512 * 1024;

/// Fewest K steps (`C·KH·KW`) for which a strided layer's blocks take the channel-vector
/// tiles ([`packed_rows`]). Those tiles end by storing every output as a scalar (48 × 8 per
/// tile against `24·K` FMAs: about `32 / K` of the tile's time) and keep their sums between
/// 128-step chunks, which a short K does not amortise. SqueezeNet's 3→96 7×7/2 stem (K =
/// 147, blocks of 2 × 109 = 218 pixels: 13.6 vectors, 97% of the pixel-vector tiles' lanes
/// live) ran 1.54–1.56 ms there against 1.36–1.40 on the pixel-vector tiles (one thread,
/// docs/codegen.md "SqueezeNet's stem and max pools"); ResNet's 3×3/2 layers (K =
/// 576 and more) gained there.
const PACKED_MIN_K: i64 = 256;

/// The panel height the weights of `d` are packed with at compile time (`[M/MR][K][MR]`,
/// `K = C·KH·KW` in `(c, i, j)` order, the pointwise layers' layout), if they are: `d` is
/// strided and its pixel blocks are small images whose GEMM the channel-vector tiles take
/// (3 vectors of output channels × up to 8 pixels, every lane an output): one block cut by
/// channels for the threads ([`chanvec_conv_rows`]: ResNet's 3×3/2 onto 14×14 and 7×7,
/// Inception v3's onto 17×17; whole panels, or chunks of vectors that may start inside a
/// panel where two threads then share the channels more equally), or blocks cut by rows, each running every channel
/// ([`chanvec_rows`]: ResNet's onto 28×28, blocks of 7 rows), with the partial sums within
/// [`SUMS_BYTES`], and K at least [`PACKED_MIN_K`]. On the pixel-vector tiles a 196-pixel
/// block (3·64 + 4) ended in a 12 × 1 tile with 4 live lanes, and read the unpacked weights
/// as 6 row streams `C·9` floats apart. Stride-1 convolutions on the panel (Inception's stem
/// rows, the 5×5 layers) keep their weights as stored (not measured here).
pub(crate) fn packed_rows(d: &Conv, w: u32) -> Option<i64> {
    let kk = d.c * d.kh * d.kw;
    if !applies(d, w) || d.n < 1 || (d.sh == 1 && d.sw == 1) || kk < PACKED_MIN_K || in_place(d) {
        return None;
    }
    let n = block_rows(d) * d.ow;
    let mr = match cut_rows(d) {
        true => chanvec_rows(w, n, kk),
        false => chanvec_conv_rows(w, n, kk, d.m),
    }?;
    ((d.m + mr - 1) / mr * mr * n * 4 <= SUMS_BYTES).then_some(mr)
}

/// Whether every tap of `d` lies inside the image (no padding on any side), so that the
/// channel-vector tiles of its packed weights ([`packed_rows`]) read each K step's pixels
/// straight from the input instead of from a packed panel: a tile's broadcasts are single
/// floats, so B need not be contiguous; K step `(c, i, j)` of output pixel `(oy, ox)` is
/// `x[c, oy·sh + i·dh, ox·sw + j·dw]`, a constant offset per tap from a per-pixel offset
/// held in a register over the K loop. Inception v3's 288→384 and 96→96 3×3/2 onto 17×17
/// and its 3×3/2 onto 8×8 (all unpadded) spent 12% of their time packing the panel (9
/// shifted, strided copies of every input row, 3 MiB per run written to L2 and read back
/// by every channel panel); read in place they went 2.66 → 2.29, 0.229 → 0.199 and 0.204 →
/// 0.182 ms (docs/codegen.md "Strided layers on the channel vectors read their taps in
/// place").
fn unpadded(d: &Conv) -> bool {
    d.pt == 0
        && d.pl == 0
        && (d.oh - 1) * d.sh + (d.kh - 1) * d.dh < d.h
        && (d.ow - 1) * d.sw + (d.kw - 1) * d.dw < d.wi
}

/// Whether the channel-vector tiles of `d`, its weights packed in `packed`-row panels
/// ([`packed_rows`]), read their taps in place instead of from the im2col panel: from the
/// image where [`unpadded`], else from a padded copy of each K chunk's [`window`] (about
/// 4/9 of the panel's floats for a 3×3/2, plain row copies: 288→384 3×3/2 pad 1 onto 17×17
/// 2.61 → 2.44 ms). Only where every weight panel is whole (`M` a multiple of the panel
/// height): a shorter last panel makes each vector's panel height a run-time value, and
/// the tap-unrolled K loop then kept one weight pointer per tap and vector and spilled
/// them (192→320 3×3/2 onto 8×8: 0.287 → 0.296 ms, where 192→192 went 0.183 → 0.163).
fn reads_image(d: &Conv, packed: Option<i64>) -> bool {
    packed.is_some_and(|mr| d.m % mr == 0)
}

/// The input window of a block of `rows` output rows: `(rows − 1)·sh + (KH − 1)·dh + 1`
/// input rows of `(OW − 1)·sw + (KW − 1)·dw + 1` columns, padding included.
fn window(d: &Conv, rows: i64) -> (i64, i64) {
    (
        (rows - 1) * d.sh + (d.kh - 1) * d.dh + 1,
        (d.ow - 1) * d.sw + (d.kw - 1) * d.dw + 1,
    )
}

/// The panel's row stride for `rows` output rows: whole vectors, so every row starts aligned.
fn row_stride(d: &Conv, w: u32, rows: i64) -> i64 {
    let wl = w as i64;
    (rows * d.ow + wl - 1) / wl * wl
}

/// Floats one input channel fills in the panel of a block of `rows` output rows.
fn channel_floats(d: &Conv, w: u32, rows: i64) -> i64 {
    if in_place(d) {
        channel_copy(d, rows)
    } else {
        d.kh * d.kw * row_stride(d, w, rows)
    }
}

/// Input channels per K chunk (balanced: equal chunks but the last) and the chunk count.
fn chunks(d: &Conv, w: u32) -> (i64, i64) {
    let per_channel = channel_floats(d, w, block_rows(d)) * 4;
    let most = (PANEL_BYTES / per_channel).max(1);
    let count = (d.c + most - 1) / most;
    ((d.c + count - 1) / count, count)
}

/// A kernel function's scratch: the panel (a fixed `alloca` at the top of its entry block,
/// whatever the builder's position (a loop body), so the stack frame does not grow per
/// call; its size depends on the shape only, not on `d.m`: a channel tile packs the same
/// panel) and, for weights packed in `mr`-row panels ([`packed_rows`]), the partial sums and
/// where the kernel's output channels lie in the packed weights (from row 0, or from a
/// thread's chunk's first channel: [`Scratch::at_channel`]).
#[derive(Clone, Copy)]
pub(super) struct Scratch<'c> {
    panel: PointerValue<'c>,
    sums: Option<(PointerValue<'c>, PackedRows<'c>)>,
    /// The channel-vector tiles read their taps in place ([`reads_image`]), packing no
    /// panel.
    direct: bool,
}

impl<'c> Scratch<'c> {
    /// The scratch of a tile whose output channels start at `m0` of the packed weights (a
    /// multiple of the vector width, perhaps inside a panel); the weights' pointer stays at
    /// their start.
    pub(super) fn at_channel(self, m0: IntValue<'c>) -> Self {
        Scratch {
            sums: self
                .sums
                .map(|(p, rows)| (p, PackedRows { first: m0, ..rows })),
            ..self
        }
    }
}

/// The [`Scratch`] of `d`; `packed`: its weights' panel height ([`packed_rows`]), if packed.
pub(super) fn scratch<'a, 'c>(
    k: &K<'a, 'c>,
    d: &Conv,
    w: u32,
    packed: Option<i64>,
) -> R<Scratch<'c>> {
    let (cc, _) = chunks(d, w);
    let direct = reads_image(d, packed);
    let mut floats = match direct {
        // The tiles read the image in place ([`reads_image`]): no panel, or a padded copy
        // of each chunk's window.
        true if unpadded(d) => 0,
        true => {
            let (wr, wp) = window(d, block_rows(d));
            cc * wr * wp
        }
        false => cc * channel_floats(d, w, block_rows(d)),
    };
    if in_place(d) && !row_gemms(d) {
        // The sums of one group of output channels after the copy ([`Block::in_place`]),
        // and a vector's slack for the copy's last masked row.
        floats += w as i64 + IN_PLACE_GROUP * in_place_cols(d, block_rows(d));
    }
    let panel = crate::kernels::common::entry_scratch(k, floats, "panel")?;
    // One slot of `mr` floats per pixel for every panel, the last one's too (it may be
    // fewer than `mr` rows: its slots are whole vectors).
    let sums = match packed {
        Some(mr) => {
            let panels = (d.m + mr - 1) / mr;
            let floats = panels * mr * block_rows(d) * d.ow;
            let rows = PackedRows {
                first: k.c(0),
                total: d.m,
            };
            Some((
                crate::kernels::common::entry_scratch(k, floats, "sums")?,
                rows,
            ))
        }
        None => None,
    };
    Ok(Scratch {
        panel,
        sums,
        direct,
    })
}

/// The whole convolution (every image) at the builder's position.
pub(super) fn emit<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &Conv,
    packed: Option<i64>,
    io: Io<'c>,
) -> R<()> {
    let scratch = scratch(k, d, w, packed)?;
    k.loop_(0, d.n, &mut |b| {
        let xo = k.mul(b, d.c * d.h * d.wi)?;
        let at = io.at(k, xo, k.mul(b, d.m * d.oh * d.ow)?)?;
        emit_rows(k, w, d, scratch, at, k.c(0), d.oh)
    })
}

/// Output rows `oy0 .. oy0 + rows` of one image (`io` at the image), in blocks of
/// [`block_rows`] rows; `oy0` is a multiple of it. For a tile of output channels, `d.m` is
/// the tile's count and `io` starts at its first channel (`d.c` keeps the weights' row
/// length; packed weights stay at their start, the tile's first channel in `scratch`).
pub(super) fn emit_rows<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &Conv,
    scratch: Scratch<'c>,
    io: Io<'c>,
    oy0: IntValue<'c>,
    rows: i64,
) -> R<()> {
    let r = block_rows(d);
    let full = rows / r * r;
    let blk = Block {
        k,
        w,
        d,
        panel: scratch.panel,
        sums: scratch.sums,
        direct: scratch.direct,
        io,
    };
    k.loop_step(0, full, r, &mut |dy| blk.run(k.add(oy0, dy)?, r))?;
    if full < rows {
        blk.run(k.add(oy0, k.c(full))?, rows - full)?;
    }
    Ok(())
}

/// What every pixel block of one image shares.
struct Block<'k, 'a, 'c> {
    k: &'k K<'a, 'c>,
    w: u32,
    d: &'k Conv,
    panel: PointerValue<'c>,
    /// The partial sums of the channel-vector tiles when the weights are packed, and where
    /// the block's channels lie in them.
    sums: Option<(PointerValue<'c>, PackedRows<'c>)>,
    /// As [`Scratch::direct`].
    direct: bool,
    io: Io<'c>,
}

impl<'k, 'a, 'c> Block<'k, 'a, 'c> {
    /// The block of `rows` output rows from `oy0`: per K chunk, pack then multiply.
    fn run(&self, oy0: IntValue<'c>, rows: i64) -> R<()> {
        let (k, d) = (self.k, self.d);
        let taps = d.kh * d.kw;
        let (cc, count) = chunks(d, self.w);
        let np = row_stride(d, self.w, rows);
        let c_at = k.gep(self.io.out, k.mul(oy0, d.ow)?)?;
        // The residual is read by the last chunk's epilogue, at the index it stores.
        let r_at = match self.io.res {
            Some(p) => Some(k.gep(p, k.mul(oy0, d.ow)?)?),
            None => None,
        };
        if in_place(d) {
            return self.in_place(oy0, rows, c_at, r_at);
        }
        let direct = self.direct;
        // The channel-vector tiles read their taps in place: from the image where no tap
        // is padding, else from a padded copy of the block's window (rows `wp` apart).
        let copy = direct && !unpadded(d);
        let (wr, wp) = match copy {
            true => window(d, rows),
            false => (d.h, d.wi),
        };
        let tap_at: Vec<i64> = (0..taps)
            .map(|t| t / d.kw * d.dh * wp + t % d.kw * d.dw)
            .collect();
        let grid = Grid {
            ow: d.ow,
            col: d.sw,
            row: d.sh * wp,
        };
        let chunk = |c0: IntValue<'c>, cn: i64, first: bool, last: bool| -> R<()> {
            match (direct, copy) {
                (false, _) => self.pack(c0, cn, oy0, rows, np)?,
                (true, true) => self.copy_window(c0, cn, oy0, rows)?,
                (true, false) => {}
            }
            let epi = Epilogue {
                alpha: 1.0,
                row_bias: self.io.bias,
                act: d.act,
                row_slope: self.io.slope,
            };
            if let Some((sums, packed)) = self.sums {
                // Packed panels hold every K step of their rows: A is the whole of them, and
                // the chunk is K steps `c0·taps ..` of it.
                // B holds the chunk's channels from its first (`c0`).
                let (b, b_rs) = match (direct, copy) {
                    (false, _) => (self.panel, np),
                    (true, true) => (self.panel, wr * wp),
                    (true, false) => {
                        let at = k.add(k.mul(c0, d.h * d.wi)?, k.mul(oy0, d.sh * d.wi)?)?;
                        (k.gep(self.io.x, at)?, d.h * d.wi)
                    }
                };
                let gm = Gemm {
                    a: self.io.w,
                    a_rs: d.c * taps,
                    a_cs: 1,
                    b,
                    b_rs,
                    c: c_at,
                    c_rs: d.oh * d.ow,
                    m: d.m,
                    n: rows * d.ow,
                    k: d.c * taps,
                };
                let steps = (k.mul(c0, taps)?, cn * taps);
                let part = (first, last);
                let direct = direct.then_some((&tap_at[..], grid));
                return gemm_packed_part(
                    k, self.w, &gm, epi, r_at, packed, sums, steps, part, direct,
                );
            }
            let gm = Gemm {
                a: k.gep(self.io.w, k.mul(c0, taps)?)?,
                a_rs: d.c * taps,
                a_cs: 1,
                b: self.panel,
                b_rs: np,
                c: c_at,
                c_rs: d.oh * d.ow,
                m: d.m,
                n: rows * d.ow,
                k: cn * taps,
            };
            gemm_part(k, self.w, &gm, epi, r_at, first, last)
        };
        if count == 1 {
            return chunk(k.c(0), d.c, true, true);
        }
        let last = cc * (count - 1);
        chunk(k.c(0), cc, true, false)?;
        k.loop_step(cc, last, cc, &mut |c0| chunk(c0, cc, false, false))?;
        chunk(k.c(last), d.c - last, false, true)
    }

    /// The block of `rows` output rows from `oy0` read in place ([`in_place`]): every
    /// input channel's rows copied once, then, with unit strides, per group of
    /// [`IN_PLACE_GROUP`] output channels the GEMM's raw sums into the scratch after the copy
    /// and the sums of the block's pixels copied out through the epilogue (`c_at`, `r_at`:
    /// the output and the residual at the block's first pixel); with strides one GEMM per
    /// output row straight into the output ([`Block::row_gemms`]). Each output is the
    /// per-tap panel's chain: zero, one FMA per `(c, i, j)` in order, the same epilogue
    /// ([`crate::kernels::gemm::finish_with`]).
    fn in_place(
        &self,
        oy0: IntValue<'c>,
        rows: i64,
        c_at: PointerValue<'c>,
        r_at: Option<PointerValue<'c>>,
    ) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let taps = d.kh * d.kw;
        let copied = copied_rows(d, rows);
        let n = in_place_cols(d, rows);
        let offsets = tap_offsets(d);
        let epi = Epilogue {
            alpha: 1.0,
            row_bias: self.io.bias,
            act: d.act,
            row_slope: self.io.slope,
        };
        self.copy_rows(oy0, copied)?;
        if row_gemms(d) {
            return self.row_gemms(rows, &offsets, (c_at, r_at), epi);
        }
        let sums = k.gep(
            self.panel,
            k.c(d.c * channel_floats(d, w, block_rows(d)) + w as i64),
        )?;
        let group = |m0: IntValue<'c>, mn: i64| -> R<()> {
            let gm = Gemm {
                a: k.gep(self.io.w, k.mul(m0, d.c * taps)?)?,
                a_rs: d.c * taps,
                a_cs: 1,
                b: self.panel,
                b_rs: channel_copy(d, rows),
                c: sums,
                c_rs: n,
                m: mn,
                n,
                k: d.c * taps,
            };
            let part = (true, false);
            gemm_part_taps(k, w, &gm, Some(&offsets), epi, None, part, None)?;
            self.copy_out(sums, (m0, mn), rows, (c_at, r_at), epi)
        };
        let full = d.m / IN_PLACE_GROUP * IN_PLACE_GROUP;
        k.loop_step(0, full, IN_PLACE_GROUP, &mut |m0| group(m0, IN_PLACE_GROUP))?;
        if full < d.m {
            group(k.c(full), d.m - full)?;
        }
        Ok(())
    }

    /// A strided in-place block of `rows` output rows, its input rows of every channel
    /// copied as planes ([`Block::copy_rows`], [`copied_rows`]): per output row `dy` a GEMM
    /// of `OW` columns on its `KH` rows from row `dy·SH` of each channel (`offsets`:
    /// [`tap_offsets`]; the `C·KH` groups split by channel, as the channels' copies are
    /// `copied_rows` rows apart, not `KH`) whose epilogue stores straight into
    /// the output at `c_at` (the residual at `r_at`), row by row: `OW` columns are all
    /// outputs, no copy-out. At 112 wide a row is 7 whole vectors, as many as a block of 224
    /// pixels on the per-tap panel runs per row, and the copy is `C·KH·SW` plane rows per
    /// output row instead of `C·KH·KW` gathered panel rows.
    fn row_gemms(
        &self,
        rows: i64,
        offsets: &[i64],
        (c_at, r_at): (PointerValue<'c>, Option<PointerValue<'c>>),
        epi: Epilogue<'c>,
    ) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let row = d.sw * padded(d);
        let split = Some((d.kh, copied_rows(d, rows) * row));
        k.loop_(0, rows, &mut |dy| {
            let px = k.mul(dy, d.ow)?;
            let gm = Gemm {
                a: self.io.w,
                a_rs: d.c * d.kh * d.kw,
                a_cs: 1,
                b: k.gep(self.panel, k.mul(dy, d.sh * row)?)?,
                b_rs: row,
                c: k.gep(c_at, px)?,
                c_rs: d.oh * d.ow,
                m: d.m,
                n: d.ow,
                k: d.c * d.kh * d.kw,
            };
            let res = match r_at {
                Some(p) => Some(k.gep(p, px)?),
                None => None,
            };
            gemm_part_taps(k, w, &gm, Some(offsets), epi, res, (true, true), split)
        })
    }

    /// Output channels `m0 .. m0 + mn` of an in-place block: the raw sums at `sums` (row
    /// `m − m0`, `n` columns, output row `dy` from column `dy·Wp`) through the epilogue into
    /// the output at `c_at` (the residual at `r_at`), the columns between rows dropped.
    fn copy_out(
        &self,
        sums: PointerValue<'c>,
        (m0, mn): (IntValue<'c>, i64),
        rows: i64,
        (c_at, r_at): (PointerValue<'c>, Option<PointerValue<'c>>),
        epi: Epilogue<'c>,
    ) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let n = in_place_cols(d, rows);
        k.loop_(0, mn, &mut |mi| {
            let row = k.add(m0, mi)?;
            let src = k.mul(mi, n)?;
            let dst = k.mul(row, d.oh * d.ow)?;
            k.loop_(0, rows, &mut |dy| {
                let s0 = k.add(src, k.mul(dy, padded(d))?)?;
                let d0 = k.add(dst, k.mul(dy, d.ow)?)?;
                for v in 0..(d.ow + wl - 1) / wl {
                    let lanes = (d.ow - v * wl).min(wl) as u32;
                    let (sa, da) = (k.add(s0, k.c(v * wl))?, k.add(d0, k.c(v * wl))?);
                    let ld = |p: PointerValue<'c>, at: IntValue<'c>| {
                        if lanes == w {
                            k.ldv(p, at, w)
                        } else {
                            k.ldv_masked(p, at, w, lanes)
                        }
                    };
                    let acc = ld(sums, sa)?;
                    let res = match r_at {
                        Some(p) => Some(ld(p, da)?),
                        None => None,
                    };
                    let out = finish_lanes(k, epi, acc, row, res, lanes)?;
                    if lanes == w {
                        k.stv(c_at, da, out)?;
                    } else {
                        k.stv_masked(c_at, da, out, lanes)?;
                    }
                }
                Ok(())
            })
        })
    }

    /// Copies input rows `oy0·SH − PT .. oy0·SH − PT + copied` of every input channel into
    /// the panel as `SW` planes each ([`in_place`]), back to back: channel `c`, row `q`,
    /// plane `e`, column `u` at `((c·copied + q)·SW + e)·Wp + u`, holding input column
    /// `SW·u + e − PL` (zero in the padding, rows outside the image all zero). With unit
    /// strides a plane is the padded row.
    fn copy_rows(&self, oy0: IntValue<'c>, copied: i64) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let wp = padded(d);
        let zero = k.vty(w).const_zero();
        k.loop_(0, d.c, &mut |c| {
            let xc = k.mul(c, d.h * d.wi)?;
            let row_c = k.mul(c, copied)?;
            let iy0 = k.add(k.mul(oy0, d.sh)?, k.c(-d.pt))?;
            k.loop_(0, copied, &mut |q| {
                let iy = k.add(iy0, q)?;
                let inside = k.in_range(iy, 0, d.h)?;
                let xrow = k.add(xc, k.mul(k.iclamp(iy, 0, d.h - 1)?, d.wi)?)?;
                let prow = k.mul(k.add(row_c, q)?, d.sw * wp)?;
                for (e, v) in (0..d.sw).flat_map(|e| (0..(wp + wl - 1) / wl).map(move |v| (e, v))) {
                    // Column `v·W + l` of plane `e` is the input's `SW·(v·W + l) + e − PL`:
                    // kernel column `e`'s tap of output column `v·W + l` (lanes past the
                    // plane not stored).
                    let lanes = (wp - v * wl).min(wl);
                    let val = match self.tap(xrow, e, v, lanes)? {
                        Some(vec) => {
                            llvm(k.b.build_select(inside, vec, zero, "pad"))?.into_vector_value()
                        }
                        None => zero,
                    };
                    let at = k.add(prow, k.c(e * wp + v * wl))?;
                    if lanes == wl {
                        k.stv(self.panel, at, val)?;
                    } else {
                        k.stv_masked(self.panel, at, val, lanes as u32)?;
                    }
                }
                Ok(())
            })
        })
    }

    /// Packs input channels `c0 .. c0 + cn` for output rows `oy0 .. oy0 + rows`: panel row
    /// `(c, i, j)` (from `c0`), column `dy·OW + ox` holds `x[c, oy·sh + i·dh − pt, ox·sw +
    /// j·dw − pl]`, zero in the padding. Kernel rows in the padding (top and bottom) are a
    /// run-time test per input row (the block's rows are not known at compile time); columns
    /// in the padding are compile-time lane masks per tap and vector.
    fn pack(&self, c0: IntValue<'c>, cn: i64, oy0: IntValue<'c>, rows: i64, np: i64) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let nvec = (d.ow + wl - 1) / wl;
        let zero = k.vty(w).const_zero();
        k.loop_(0, cn, &mut |c| {
            let xc = k.mul(k.add(c0, c)?, d.h * d.wi)?;
            let row_c = k.mul(c, d.kh * d.kw)?;
            k.loop_(0, d.kh, &mut |i| {
                let row_i = k.add(row_c, k.mul(i, d.kw)?)?;
                let iy_i = k.add(k.mul(oy0, d.sh)?, k.add(k.mul(i, d.dh)?, k.c(-d.pt))?)?;
                k.loop_(0, rows, &mut |dy| {
                    let iy = k.add(iy_i, k.mul(dy, d.sh)?)?;
                    let inside = k.in_range(iy, 0, d.h)?;
                    let xrow = k.add(xc, k.mul(k.iclamp(iy, 0, d.h - 1)?, d.wi)?)?;
                    let col = k.mul(dy, d.ow)?;
                    for j in 0..d.kw {
                        let prow = k.mul(k.add(row_i, k.c(j))?, np)?;
                        for v in 0..nvec {
                            let lanes = (d.ow - v * wl).min(wl);
                            let v_at = self.tap(xrow, j, v, lanes)?;
                            let val = match v_at {
                                Some(vec) => llvm(k.b.build_select(inside, vec, zero, "pad"))?
                                    .into_vector_value(),
                                None => zero,
                            };
                            let at = k.add(k.add(prow, col)?, k.c(v * wl))?;
                            if lanes == wl {
                                k.stv(self.panel, at, val)?;
                            } else {
                                k.stv_masked(self.panel, at, val, lanes as u32)?;
                            }
                        }
                    }
                    Ok(())
                })
            })
        })
    }

    /// Vector `v` of output columns (its first `lanes` exist) for kernel column `j` from the
    /// input row at `xrow`: `sw·W` lanes loaded, every `sw`-th kept; lanes in the padding or
    /// past the row read as zero and are not touched. `None` when every lane is padding.
    fn tap(&self, xrow: IntValue<'c>, j: i64, v: i64, lanes: i64) -> R<Option<VectorValue<'c>>> {
        let d = self.d;
        let x0 = v * self.w as i64 * d.sw + j * d.dw - d.pl;
        self.gather(xrow, x0, d.sw, lanes)
    }

    /// Lanes `l < lanes` of the input row at `xrow`, column `x0 + l·s` each (`s·W` lanes
    /// loaded, every `s`-th kept); columns outside the row read as zero and are not touched.
    /// `None` when every lane is outside.
    fn gather(
        &self,
        xrow: IntValue<'c>,
        x0: i64,
        s: i64,
        lanes: i64,
    ) -> R<Option<VectorValue<'c>>> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let ix = |l: i64| x0 + l * s;
        let on: Vec<bool> = (0..wl * s)
            .map(|q| {
                let (l, t) = (q / s, q % s);
                l < lanes && ix(l) >= 0 && ix(l) < d.wi && ix(l) + t < d.wi
            })
            .collect();
        if !(0..lanes).any(|l| on[(l * s) as usize]) {
            return Ok(None);
        }
        let at = k.add(xrow, k.c(ix(0)))?;
        let wide = k.ldv_lanes(self.io.x, at, &on)?;
        if s == 1 {
            return Ok(Some(wide));
        }
        Ok(Some(k.every(wide, s, w)?))
    }

    /// Copies input channels `c0 .. c0 + cn` of the [`window`] of output rows `oy0 .. oy0 +
    /// rows` into the panel, padding as zeros: channel `c` (from `c0`), window row `q`,
    /// column `x` at `(c·R + q)·Wp + x` is `x[c, oy0·sh − pt + q, x − pl]` (`R`, `Wp`: the
    /// window's rows and width). Kernel rows in the padding are a run-time test per row,
    /// columns compile-time lane masks, as in [`Block::pack`]. The in-place stems copy their
    /// rows with [`Block::copy_rows`] instead: as planes per stride phase (one plane with unit
    /// strides, `SW` for the strided stems' [`Block::row_gemms`]), which a window is not.
    fn copy_window(&self, c0: IntValue<'c>, cn: i64, oy0: IntValue<'c>, rows: i64) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let (wr, wp) = window(d, rows);
        let zero = k.vty(w).const_zero();
        k.loop_(0, cn, &mut |c| {
            let xc = k.mul(k.add(c0, c)?, d.h * d.wi)?;
            let iy0 = k.add(k.mul(oy0, d.sh)?, k.c(-d.pt))?;
            k.loop_(0, wr, &mut |q| {
                let iy = k.add(iy0, q)?;
                let inside = k.in_range(iy, 0, d.h)?;
                let xrow = k.add(xc, k.mul(k.iclamp(iy, 0, d.h - 1)?, d.wi)?)?;
                let prow = k.mul(k.add(k.mul(c, wr)?, q)?, wp)?;
                for v in 0..(wp + wl - 1) / wl {
                    let lanes = (wp - v * wl).min(wl);
                    let val = match self.gather(xrow, v * wl - d.pl, 1, lanes)? {
                        Some(vec) => {
                            llvm(k.b.build_select(inside, vec, zero, "pad"))?.into_vector_value()
                        }
                        None => zero,
                    };
                    let at = k.add(prow, k.c(v * wl))?;
                    if lanes == wl {
                        k.stv(self.panel, at, val)?;
                    } else {
                        k.stv_masked(self.panel, at, val, lanes as u32)?;
                    }
                }
                Ok(())
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `k`×`k` stride-2 convolution with padding `k / 2` of a `c`×`h`×`h` image into `m`
    /// channels.
    fn strided(c: i64, m: i64, h: i64, k: i64) -> Conv {
        let o = (h + 2 * (k / 2) - k) / 2 + 1;
        Conv {
            n: 1,
            c,
            h,
            wi: h,
            m,
            groups: 1,
            kh: k,
            kw: k,
            oh: o,
            ow: o,
            sh: 2,
            sw: 2,
            dh: 1,
            dw: 1,
            pt: k / 2,
            pl: k / 2,
            act: None,
        }
    }

    #[test]
    fn small_strided_outputs_pack_their_weights_for_the_channel_vectors() {
        // ResNet's 3×3/2 onto 14×14 and 7×7 (ResNet-50's and ResNet-18's).
        for (c, m, h) in [
            (256, 256, 28),
            (512, 512, 14),
            (128, 256, 28),
            (256, 512, 14),
        ] {
            assert_eq!(
                packed_rows(&strided(c, m, h, 3), 16),
                Some(48),
                "{c}->{m} at {h}"
            );
        }
        // Inception v3's 288 → 384 onto 17×17 ("valid": 35 → 17).
        let mut d = strided(288, 384, 35, 3);
        (d.pt, d.pl, d.oh, d.ow) = (0, 0, 17, 17);
        assert_eq!(packed_rows(&d, 16), Some(48));
        // Onto 28×28: blocks of 7 rows (196 pixels) cut by rows, whatever the channels'
        // panels (ResNet-18's 64 → 128, three panels).
        assert_eq!(block_rows(&strided(128, 128, 56, 3)), 7);
        assert_eq!(packed_rows(&strided(128, 128, 56, 3), 16), Some(48));
        assert_eq!(packed_rows(&strided(64, 128, 56, 3), 16), Some(48));
        // The stem (blocks of 224 pixels: whole vectors), AVX2's 16 registers, K below 128,
        // partial sums past SUMS_BYTES (2048 channels at 14×14) and stride 1 keep their
        // weights as stored.
        assert_eq!(packed_rows(&strided(3, 64, 224, 7), 16), None);
        assert_eq!(packed_rows(&strided(256, 256, 28, 3), 8), None);
        assert_eq!(packed_rows(&strided(8, 64, 14, 3), 16), None);
        assert_eq!(packed_rows(&strided(256, 2048, 28, 3), 16), None);
        // (A 5×5 stride-1 layer at 14×14 is on the panel, one block.)
        let mut d = strided(256, 256, 14, 5);
        (d.sh, d.sw, d.oh, d.ow) = (1, 1, 14, 14);
        assert!(applies(&d, 16) && !cut_rows(&d));
        assert_eq!(packed_rows(&d, 16), None);
    }

    #[test]
    fn strided_layers_on_whole_panels_read_their_taps_in_place() {
        let valid = |c, m, h| Conv {
            pt: 0,
            pl: 0,
            oh: (h - 3) / 2 + 1,
            ow: (h - 3) / 2 + 1,
            ..strided(c, m, h, 3)
        };
        let reads = |d: &Conv| reads_image(d, packed_rows(d, 16));
        // Inception v3's 288→384 and 96→96 onto 17×17, 192→192 onto 8×8.
        assert!(reads(&valid(288, 384, 35)));
        assert!(reads(&valid(96, 96, 35)));
        assert!(reads(&valid(192, 192, 17)));
        // 192→320 onto 8×8: a 32-row last panel.
        assert!(!reads(&valid(192, 320, 17)));
        // Padded: from a copy of the window. ResNet's 256 channels end in a 16-row panel.
        assert!(reads(&strided(96, 96, 28, 3)));
        assert!(!reads(&strided(256, 256, 28, 3)));
        // Weights not packed (the pixel-vector tiles) read the panel.
        assert!(!reads_image(&valid(288, 384, 35), None));
    }

    #[test]
    fn in_place_blocks_take_the_rows_with_fewer_vectors() {
        // 147²: blocks of 2 rows run 73 · 19 + 10 (a one-row tail) = 1397 vectors, blocks
        // of 3 run 49 · 28 = 1372.
        let d = stride_one(32, 32, 147, 3);
        assert_eq!(default_rows(&d), 2);
        assert_eq!(block_rows(&d), 3);
        // 11 rows of 140: 5 · 18 + 9 against 3 · 27 + 18, no fewer: blocks of 2 stay.
        let mut d = stride_one(4, 32, 140, 3);
        d.oh = 11;
        assert_eq!(block_rows(&d), 2);
        // Not in place (a copy past one chunk): the rows by pixel count.
        let d = stride_one(90, 32, 147, 3);
        assert_eq!(block_rows(&d), default_rows(&d));
    }

    #[test]
    fn squeezenet_stem_keeps_its_weights_for_the_pixel_vectors() {
        // 3→96 7×7/2, no padding, 224 → 109: blocks of 2 rows (218 pixels, not whole
        // vectors, so the channel-vector tiles would take them), but K = 147 is short.
        let mut d = strided(3, 96, 224, 7);
        (d.pt, d.pl, d.oh, d.ow) = (0, 0, 109, 109);
        assert!(applies(&d, 16) && cut_rows(&d));
        assert_eq!(block_rows(&d), 2);
        assert_eq!(packed_rows(&d, 16), None);
        // The same block with K = 64·49 = 3136 packs (16 channels would read in place).
        d.c = 64;
        assert_eq!(packed_rows(&d, 16), Some(48));
    }

    #[test]
    fn strided_stems_read_their_taps_in_place() {
        // ResNet's and GoogLeNet's 3→64 7×7/2 onto 112² (pad 3): blocks of 2 rows, each
        // output row 7 vectors (224 pixels: 14), a block copying 9 rows (2 output rows' 7,
        // 5 shared) of 2 planes of 115 floats.
        let d = strided(3, 64, 224, 7);
        assert!(applies(&d, 16) && in_place(&d) && row_gemms(&d));
        assert_eq!((block_rows(&d), padded(&d)), (2, 115));
        assert_eq!(chunks(&d, 16), (3, 1));
        assert_eq!((copied_rows(&d, 2), copied_rows(&d, 1)), (9, 7));
        assert_eq!(tap_offsets(&d), [0, 115, 1, 116, 2, 117, 3]);
        // SqueezeNet's 3→96 onto 109² (no padding): 7 vectors per row, 218 pixels 14.
        let mut d = strided(3, 96, 224, 7);
        (d.pt, d.pl, d.oh, d.ow) = (0, 0, 109, 109);
        assert!(in_place(&d) && packed_rows(&d, 16).is_none());
        // The kernel tests' odd widths: 94 (6 per row, blocks of 3 rows: 18 for 282), and
        // 7×7/3 onto 96.
        let mut d = strided(3, 40, 189, 7);
        (d.ow, d.oh) = (94, 20);
        assert!(in_place(&d));
        let mut d = strided(2, 33, 286, 5);
        (d.sw, d.ow, d.oh) = (3, 96, 15);
        assert!(in_place(&d));
        assert_eq!(tap_offsets(&d), [0, 97, 194, 1, 98]);
        // Not in place: MobileNet v2's 3→32 3×3/2 stem (9 taps), a 7×7/2 onto 149 (10
        // vectors per row against 19 for 298 pixels) or 66 (5 per row, 4 rows 20 against
        // 17): rows whose own GEMMs run more vectors than the block; ResNet's
        // 3×3/2 onto 28², a dilated 7×7/2, and a copy past one chunk.
        assert!(!in_place(&strided(3, 32, 224, 3)));
        let mut d = strided(3, 32, 299, 7);
        (d.oh, d.ow) = (149, 149);
        assert!(!in_place(&d));
        let mut d = strided(3, 40, 131, 7);
        (d.oh, d.ow) = (66, 66);
        assert!(!in_place(&d));
        assert!(!in_place(&strided(128, 128, 56, 3)));
        let mut d = strided(3, 64, 224, 7);
        d.dw = 2;
        assert!(!in_place(&d));
        assert!(!in_place(&strided(64, 64, 224, 7)));
    }

    /// [`strided`] at stride 1: a "same" `k`×`k` convolution.
    fn stride_one(c: i64, m: i64, h: i64, k: i64) -> Conv {
        let mut d = strided(c, m, h, k);
        (d.sh, d.sw, d.oh, d.ow) = (1, 1, h, h);
        d
    }

    #[test]
    fn inception_stems_at_147_read_their_taps_in_place() {
        // The 32→32 and 32→64 3×3/1 stems: 32 channels of 5 padded rows of 149 floats (95
        // KiB) in one chunk, the sums of 64 channels beside them.
        for m in [32, 64] {
            let d = stride_one(32, m, 147, 3);
            assert!(applies(&d, 16) && in_place(&d));
            assert_eq!(chunks(&d, 16), (32, 1));
            assert_eq!(in_place_cols(&d, block_rows(&d)), 3 * 149 - 2);
        }
        // The 71-wide 80→192 stem keeps the per-tap copies (measured slower in place), as do
        // strided layers and inputs whose copy would not fit one chunk.
        assert!(!in_place(&stride_one(80, 192, 71, 3)));
        assert!(!in_place(&strided(32, 32, 299, 3)));
        assert!(!in_place(&stride_one(90, 32, 147, 3)));
    }
}
