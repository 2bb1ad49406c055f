//! The register-blocked GEMM micro-kernel that matmul, gemm and 1×1 convolutions run on,
//! emitted inside their kernel function: [`Gemm`] says what to multiply, [`Epilogue`] what to
//! do with each sum, [`gemm`] picks the tile shape.

mod chanvec;
mod gemv;
mod spec;
mod tile;
pub(crate) use tile::{acc_regs, narrow_rows, rows_for, wide, PANEL_BYTES, SHORT_K};
// Small images with vectors along the output channels (their weights' panel height).
pub(crate) use chanvec::{conv_panel_rows as chanvec_conv_rows, panel_rows as chanvec_rows};
// A pointwise layer on them is cut for the threads by channel panels or by pixel tiles.
pub(crate) use chanvec::{
    narrow_image as chanvec_narrow_image, panels_split_evenly as chanvec_split_evenly,
    pixels as chanvec_pixels,
};
// The run-time-shaped channel-vector tiles (`dynamic::chanvec`) follow the static ones.
pub(crate) use chanvec::{
    chains as chanvec_chains, contiguous as chanvec_contiguous,
    panel_vectors as chanvec_panel_vectors, BAt as ChanvecBAt, KC as CHANVEC_KC,
    VECTORS as CHANVEC_VECTORS,
};
// Where a GEMM's rows lie in weights packed as channel-vector panels.
pub(crate) use chanvec::Rows as PackedRows;
pub(crate) use tile::{k_blocks, KBlock};
// The matrix-vector product's rows at a run-time count (`crate::dynamic`).
pub(crate) use gemv::emit_rows as gemv_rows;
pub(crate) use gemv::emit_rows_strided as gemv_rows_strided;

use crate::nest::{K, R};
use inkwell::values::PointerValue;
use spec::Job;
pub(crate) use spec::{finish, finish_lanes, finish_with, Epilogue, Gemm, Grid};

/// Emits a GEMM at the builder's position, the tile shape picked per shape (issue 6):
/// - one column with contiguous A rows and B column (a 1×1 convolution on a 1×1 image, a
///   fully connected layer): a bandwidth-bound matrix-vector product ([`gemv`]);
/// - narrow N (at most [`tile::NARROW`] vectors): every column in one tile of up to
///   [`tile::acc_regs`] accumulators over the whole K, so A — the big operand there — streams
///   once (K blocks measured slower: they cut A's rows into short runs);
/// - otherwise `MR × NV·W` tiles ([`tile::wide`], sized to the register file), then one tile of the remaining columns (the last vector
///   masked with `llvm.masked.*`, never a latency-bound scalar chain) with as many rows as
///   fit [`tile::acc_regs`]. With a short K ([`tile::SHORT_K`]) the output rows, not the B
///   panel, are what streams, so the row tiles go outside (as when taps read in place touch
///   a whole B within [`tile::PANEL_BYTES`]); otherwise K is cut into blocks
///   whose B panel fits [`tile::PANEL_BYTES`] ([`tile::k_blocks`]) and the column blocks go
///   outside, so the panel stays in L1 across the row tiles. A block after the first resumes
///   from the partial sums it stored in C, so every output is still one FMA chain in K
///   order, and only the last block applies the epilogue.
pub(crate) fn gemm<'a, 'c>(k: &K<'a, 'c>, w: u32, gm: &Gemm<'c>, epi: Epilogue<'c>) -> R<()> {
    gemm_residual(k, w, gm, epi, None)
}

/// [`gemm`] whose epilogue also adds `res[i*c_rs + j]` (a residual laid out as C) after the
/// bias and before the activation, read by the same tile just before it stores `C[i, j]`.
pub(crate) fn gemm_residual<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    epi: Epilogue<'c>,
    res: Option<PointerValue<'c>>,
) -> R<()> {
    if gm.m <= 0 || gm.n <= 0 {
        // An empty output (a sequence of length 0): nothing to compute, and no tile shape.
        return Ok(());
    }
    if gm.n == 1 && gm.a_cs == 1 && gm.b_rs == 1 && gm.k >= w as i64 {
        return gemv::emit(Job::new(k, w, gm, epi, res));
    }
    tile::emit(Job::new(k, w, gm, epi, res))
}

/// [`gemm_residual`] on an A packed at compile time into row panels of `mr` rows
/// (`[M/MR][K][MR]`, the last panel `M mod MR` rows wide; `gm.a_rs` and `gm.a_cs` are not
/// read; `gm.a` is the packed matrix's start and `rows` where the GEMM's rows lie in it): with
/// [`chanvec_rows`]`(w, gm.n, gm.k)` rows the channel-vector tiles of [`chanvec`] (from any
/// row that is a multiple of `w`), with [`narrow_rows`]`(w, gm.n)` the narrow tiles, each
/// panel one tile's rows (from a panel's first row). Refused for any other height (the caller
/// packed for another shape).
pub(crate) fn gemm_packed<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    epi: Epilogue<'c>,
    res: Option<PointerValue<'c>>,
    (mr, rows): (i64, PackedRows<'c>),
) -> R<()> {
    if gm.m <= 0 {
        return Ok(());
    }
    if chanvec_rows(w, gm.n, gm.k) == Some(mr) {
        return gemm_chanvec(k, w, gm, epi, res, rows);
    }
    if narrow_rows(w, gm.n) != Some(mr) {
        return Err(crate::CodegenError::Unsupported {
            op: "conv2d",
            value: String::new(),
            why: format!(
                "weights packed in {mr}-row panels for a GEMM of {} columns, whose tiles are \
                 not {mr} rows high",
                gm.n
            ),
        });
    }
    // The narrow tiles' chunks start at a panel: their A is the panels from it on.
    let gm = &Gemm {
        a: k.gep(gm.a, k.mul(rows.first, gm.k)?)?,
        ..*gm
    };
    tile::emit_packed(Job::new(k, w, gm, epi, res))
}

/// [`gemm_residual`] on the channel-vector tiles of [`chanvec`], A packed at compile time into
/// [`chanvec_rows`]-row panels for the whole image: for a chunk of its pixels too (`gm.n` the
/// chunk's, `gm.b_rs` and `gm.c_rs` the image's), whose own count may not be one
/// [`chanvec_rows`] takes (a whole number of vectors); `rows`: where its rows lie in the
/// panels, as for [`gemm_packed`].
pub(crate) fn gemm_chanvec<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    epi: Epilogue<'c>,
    res: Option<PointerValue<'c>>,
    rows: PackedRows<'c>,
) -> R<()> {
    if gm.m <= 0 || gm.n <= 0 {
        return Ok(());
    }
    chanvec::emit(Job::new(k, w, gm, epi, res), rows)
}

/// [`gemm_part`] on an A packed at compile time into [`chanvec_rows`]-row panels (the whole
/// of `gm.k` per panel): the channel-vector tiles on K steps `k0 .. k0 + len`, B holding only
/// those rows; the partial sums wait in `sums` (`MR · gm.n` floats per panel) between parts.
/// `gm.a` is the packed matrix's start, `rows` where the GEMM's rows lie in it. `direct`:
/// B is not a panel but the image itself (or a padded copy of it), read in place (`(taps,
/// grid)`: K step `c·T + t` of pixel `p` at `(c − c0)·gm.b_rs + taps[t]` plus the pixel's
/// [`Grid`] offset, B starting at the part's first channel `c0`; `len` and `k0` whole
/// channels).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_packed_part<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    epi: Epilogue<'c>,
    res: Option<PointerValue<'c>>,
    rows: PackedRows<'c>,
    sums: PointerValue<'c>,
    steps: (inkwell::values::IntValue<'c>, i64),
    (first, last): (bool, bool),
    direct: Option<(&[i64], Grid)>,
) -> R<()> {
    if gm.m <= 0 || gm.n <= 0 {
        return Ok(());
    }
    let job = Job {
        taps: direct.map(|d| d.0),
        grid: direct.map(|d| d.1),
        ..Job::new(k, w, gm, epi, res)
    };
    chanvec::emit_part(job, rows, sums, steps, first, last)
}

/// [`gemm`] as one part of a longer K sum, for callers that cut K themselves (the packed
/// convolution panels of [`crate::kernels::conv`]): `first` starts from zero, else from the
/// partial sums stored in C (exact in f32, so every output is still one FMA chain in K
/// order); `last` applies the epilogue (adding `res`, laid out as C, as [`gemm_residual`]
/// does), else stores the raw sums. Always the tile shapes.
pub(crate) fn gemm_part<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    epi: Epilogue<'c>,
    res: Option<PointerValue<'c>>,
    first: bool,
    last: bool,
) -> R<()> {
    gemm_part_taps(k, w, gm, None, epi, res, (first, last), None)
}

/// [`gemm_part`] whose B rows come in groups of `taps.len()` (the taps of one input channel
/// read in place from a copy of its input rows: `conv::panel`'s stride-1 blocks): B row
/// `kk = c·T + t` at `c·gm.b_rs + taps[t]`, `gm.k` a multiple of `T`. The K loop runs over
/// the groups with the taps unrolled and K blocks are cut at whole groups, so each output is
/// still one FMA chain in `kk` order. `None`: rows `gm.b_rs` apart ([`gemm_part`]).
/// `split`: `(per, stride)`, the groups come `per` to an input channel whose rows are
/// `stride` floats apart (group `c·per + i` at `c·stride + i·gm.b_rs`), for a GEMM whose
/// row tiles run outside its column tiles (one K block; refused otherwise).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_part_taps<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    gm: &Gemm<'c>,
    taps: Option<&[i64]>,
    epi: Epilogue<'c>,
    res: Option<PointerValue<'c>>,
    (first, last): (bool, bool),
    split: Option<(i64, i64)>,
) -> R<()> {
    if gm.m <= 0 || gm.n <= 0 {
        return Ok(());
    }
    tile::emit_part(
        Job {
            k,
            w,
            gm,
            epi,
            res,
            taps,
            grid: None,
            split,
        },
        first,
        last,
    )
}
