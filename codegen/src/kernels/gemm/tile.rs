//! The tiled GEMM: `MR × NV·W` register tiles with vector accumulators, the contiguous output
//! dimension innermost, K cut into blocks whose B panel stays in L1 (see [`super::gemm`]).

use super::spec::{finish_lanes, step_tiles, Job};
use crate::kernels::common::vector_registers;
use crate::nest::{K, R};
use inkwell::values::{BasicValueEnum, IntValue};

/// The wide tile `(MR, NV)` for `w`-lane vectors: `MR × NV·W` accumulators, the rest of the
/// register file holding the `NV` B vectors and the broadcast A element. With AVX-512's 32
/// registers 6 × 4 (24 accumulators; per K step `NV + MR` = 10 loads for 24 FMAs, within the
/// two load ports' reach while the two FMA ports stay busy; measured against 12 × 2 (BLIS's
/// Skylake-X shape), 8 × 3 and 4 × 6 on a 512×512×512 GEMM and MobileNet's 1×1 layers, 6 × 4
/// was fastest, issue 6). With 16 registers (AVX2) 6 × 2, the shape of BLIS's and MLAS's
/// Haswell kernels: 12 accumulators + 2 B vectors + 1 broadcast; 6 × 4 there would spill
/// accumulators on every K step.
pub(crate) fn wide(w: u32) -> (i64, u32) {
    if vector_registers(w) >= 32 {
        (6, 4)
    } else {
        (6, 2)
    }
}

/// L1 bytes a K block's B panel (`kc × NV·W` floats) may fill: two thirds of the 48 KiB
/// L1d, the rest holding the A rows' lines and the C tile. Reused across every row tile of
/// a column block, the panel must stay in L1 or every FMA waits on L2 (unblocked, a
/// 512×512×512 GEMM's panel is 128 KiB).
pub(crate) const PANEL_BYTES: i64 = 32 * 1024;

/// The tile shapes of [`super::gemm`] but the matrix-vector product.
pub(super) fn emit(j: Job) -> R<()> {
    emit_part(j, true, true)
}

/// [`emit`] as one part of a longer K ([`super::gemm_part`]): `first` starts from zero, else
/// from the partial sums in C; `last` applies the epilogue (and adds `res`), else stores the
/// raw sums.
pub(super) fn emit_part<'c>(j: Job<'_, '_, 'c>, first: bool, last: bool) -> R<()> {
    let (k, w, gm) = (j.k, j.w, j.gm);
    let part = |kb: KBlock<'c>| KBlock {
        first: kb.first && first,
        last: kb.last && last,
        ..kb
    };
    let wl = w as i64;
    let (mr_wide, nv_wide) = wide(w);
    // K blocks count B's row groups (whole taps of one channel, or single rows).
    let group = group_len(j);
    let groups = gm.k / group;
    let outside = rows_outside(w, gm.n, gm.k, j.taps);
    if j.split
        .is_some_and(|(per, _)| outside.is_none() || groups % per != 0)
    {
        return Err(crate::CodegenError::Unsupported {
            op: "conv2d",
            value: String::new(),
            why: format!(
                "tap groups split by channel for a GEMM of {} columns and K = {}, whose row \
                 tiles do not run outside its column tiles",
                gm.n, gm.k
            ),
        });
    }
    if gm.n <= NARROW * wl {
        return narrow(j, part(KBlock::whole(k, groups)), false);
    }
    let nr = nv_wide as i64 * wl;
    let nfull = gm.n / nr * nr;
    // The columns after the full blocks: one tile of `nrest` vectors, the last one masked.
    let rest = gm.n - nfull;
    let nrest = ((rest + wl - 1) / wl) as u32;
    let lanes_rest = (rest % wl != 0).then_some((rest % wl) as u32);
    let at = |i0, j0, mr, nv, lanes| Tile {
        i0,
        j0,
        mr,
        nv,
        lanes,
        panel: false,
    };
    // A column block's row tiles, as many rows per tile as `nv` vectors leave accumulators.
    let rows = |kb, j0, nv: u32, lanes| {
        step_tiles(k, gm.m, rows_for(w, nv as i64), &mut |i0, mr| {
            tile(j, kb, at(i0, j0, mr, nv, lanes))
        })
    };
    let cols = |kb, i0, mr| -> R<()> {
        k.loop_step(0, nfull, nr, &mut |j0| {
            tile(j, kb, at(i0, j0, mr, nv_wide, None))
        })?;
        if rest > 0 {
            tile(j, kb, at(i0, k.c(nfull), mr, nrest, lanes_rest))?;
        }
        Ok(())
    };
    if outside.is_some() {
        let kb = part(KBlock::whole(k, groups));
        return step_tiles(k, gm.m, mr_wide, &mut |i0, mr| cols(kb, i0, mr));
    }
    let kc = (PANEL_BYTES / (runs_touched(j.taps, nr) * 4))
        .max(8 / group)
        .max(1);
    k_blocks(k, groups, one_block_within(groups, kc), &mut |kb| {
        let kb = part(kb);
        k.loop_step(0, nfull, nr, &mut |j0| rows(kb, j0, nv_wide, None))?;
        if rest > 0 {
            rows(kb, k.c(nfull), nrest, lanes_rest)?;
        }
        Ok(())
    })
}

/// Whether a GEMM of `n` columns and K `kk` (B rows in groups of `taps`, if given) runs its
/// row tiles outside its column tiles, each tile's rows of A read once per GEMM (the rows
/// of the wide tiles, [`wide`]): a short K (at most [`SHORT_K`]), or taps read in place
/// whose whole B fits the L1 panel. `None` for the narrow GEMMs (one column block) and the
/// K-blocked ones (column blocks outside).
fn rows_outside(w: u32, n: i64, kk: i64, taps: Option<&[i64]>) -> Option<i64> {
    if n <= NARROW * w as i64 {
        return None;
    }
    // The panel a K block keeps in L1 is what its groups touch: `nr` floats per row of B,
    // but the taps of one channel read overlapping runs of the same copied rows (a 3×3
    // kernel's nine runs of 64 floats cover three runs of 66), so they count once. On
    // Inception v3's 147² stems that makes the whole K (32 channels, 19 KiB touched per
    // column block) one block instead of three of 11 channels, and no tile stores and
    // reloads its partial sums (docs/codegen.md "The in-place stems: one K block, blocks
    // of three rows").
    // Taps read in place whose whole B fits the L1 panel (a strided stem's output row: 21
    // kernel rows of two column planes, 19 KiB at 112 wide): the row tiles go outside, as
    // with a short K, so each tile's A rows (the big operand here: 37–56 KiB of weights)
    // are read once per GEMM instead of once per column block, B staying in L1 across
    // them (docs/codegen.md "The 7×7/2 stems read their taps in place").
    let groups = kk / taps.map_or(1, |t| t.len().max(1) as i64);
    let fits = taps.is_some() && groups * runs_touched(taps, n) * 4 <= PANEL_BYTES;
    (kk <= SHORT_K || fits).then_some(wide(w).0)
}

/// The K block length for `groups` K groups whose L1 panel holds `kc`: all of them when
/// they exceed it by at most a quarter (a B panel of up to 40 KiB in the 48 KiB L1d).
/// Two blocks there store and reload every tile's sums once for a panel that nearly fits:
/// the 7×7/2 stems (K = 147, 3 channels × 49 taps, blocks of 74 and 73 against `kc` =
/// 128) of GoogLeNet, SqueezeNet and ResNet (docs/codegen.md "The 7×7/2 stems in one K
/// block").
pub(crate) fn one_block_within(groups: i64, kc: i64) -> i64 {
    if groups <= kc + kc / 4 {
        groups
    } else {
        kc
    }
}

/// Floats of B one K group touches in a column block `nr` wide: `nr` per row of B (without
/// taps: one row per group), the taps' runs `[off, off + nr)` merged where they overlap.
fn runs_touched(taps: Option<&[i64]>, nr: i64) -> i64 {
    let Some(taps) = taps else { return nr };
    let mut offs = taps.to_vec();
    offs.sort_unstable();
    let (mut total, mut end) = (0, i64::MIN);
    for o in offs {
        let lo = o.max(end);
        total += (o + nr - lo).max(0);
        end = end.max(o + nr);
    }
    total.max(1)
}

/// Narrow (late layers: N = H·W = 49, 196 at most a few vectors): every column in one tile,
/// more rows per tile, so A — the big operand here — is read once. `panel`: A is stored as
/// row panels ([`narrow_rows`]), so each tile's broadcasts come from one contiguous stream.
fn narrow<'c>(j: Job<'_, '_, 'c>, kb: KBlock<'c>, panel: bool) -> R<()> {
    let (k, w, gm) = (j.k, j.w, j.gm);
    let wl = w as i64;
    let nv = (gm.n + wl - 1) / wl;
    let lanes = (gm.n % wl != 0).then_some((gm.n % wl) as u32);
    step_tiles(k, gm.m, rows_for(w, nv), &mut |i0, mr| {
        let t = Tile {
            i0,
            j0: k.c(0),
            mr,
            nv: nv as u32,
            lanes,
            panel,
        };
        tile(j, kb, t)
    })
}

/// The rows of the narrow tile a GEMM with `n` columns runs on (`None` when it is not narrow,
/// or one column, the matrix-vector product): the height of the row panels its A may be
/// packed into at compile time (`[M/MR][K][MR]`, the last panel `M mod MR` rows wide), the
/// packing of the A operand in BLIS and MLAS. The rows of A a tile broadcasts then sit in
/// one contiguous stream instead of `MR` streams `K` floats apart: A is the big operand of a
/// narrow GEMM (ResNet-50's 512→2048 at 7×7: 4 MiB of weights, 100 KiB of activations),
/// read once, and `MR` short row streams (2 KiB each, half a page) are what the hardware
/// prefetcher follows worst.
pub(crate) fn narrow_rows(w: u32, n: i64) -> Option<i64> {
    let wl = w as i64;
    (n >= 2 && n <= NARROW * wl).then(|| rows_for(w, (n + wl - 1) / wl))
}

/// [`emit`] on an A stored as [`narrow_rows`]`(w, gm.n)`-row panels (`gm.a_rs`, `gm.a_cs`
/// unused): the narrow tiles, whose row count is the panel height.
pub(super) fn emit_packed(j: Job) -> R<()> {
    narrow(j, KBlock::whole(j.k, j.gm.k / group_len(j)), true)
}

/// B's rows per group of the K loop: the taps of one channel ([`Job::taps`]), else 1.
fn group_len(j: Job) -> i64 {
    j.taps.map_or(1, |t| t.len().max(1) as i64)
}

/// At most this many vectors of columns make a GEMM narrow (one column block).
pub(super) const NARROW: i64 = 4;
/// Vector accumulators a tile may hold: three quarters of the register file (24 of AVX-512's
/// 32, 12 of AVX2's 16), the rest holding B vectors and the broadcast A element. Every row
/// count `acc / nv` (nv = 1..=4) divides it, so it is also the row granule of a tiling.
pub(crate) fn acc_regs(w: u32) -> i64 {
    vector_registers(w) * 3 / 4
}

/// Rows of a tile `nv` vectors wide: as many as [`acc_regs`] allows, no more than leave a
/// register for each B vector and the broadcast A element, at most 12.
pub(crate) fn rows_for(w: u32, nv: i64) -> i64 {
    let regs = vector_registers(w);
    (acc_regs(w) / nv).min((regs - nv - 1) / nv).min(12)
}
/// K up to which the row tiles go outside the column blocks.
pub(crate) const SHORT_K: i64 = 32;

/// The K steps `k0 .. k0 + len` of a tile; the first block starts from zero, later ones
/// from the partial sums stored in C, and only the last applies the epilogue.
#[derive(Clone, Copy)]
pub(crate) struct KBlock<'c> {
    pub k0: IntValue<'c>,
    pub len: i64,
    pub first: bool,
    pub last: bool,
}

impl<'c> KBlock<'c> {
    fn whole<'a>(k: &K<'a, 'c>, len: i64) -> Self {
        KBlock {
            k0: k.c(0),
            len,
            first: true,
            last: true,
        }
    }
}

/// Runs `body` over K blocks of at most `kc` steps (balanced: equal blocks but the last):
/// the first and last are emitted apart, the middle ones as one loop.
pub(crate) fn k_blocks<'a, 'c>(
    k: &K<'a, 'c>,
    kk: i64,
    kc: i64,
    body: &mut dyn FnMut(KBlock<'c>) -> R<()>,
) -> R<()> {
    let nb = (kk + kc - 1) / kc;
    if nb <= 1 {
        return body(KBlock::whole(k, kk));
    }
    let balanced = (kk + nb - 1) / nb;
    let kc = if balanced * (nb - 1) < kk {
        balanced
    } else {
        kc
    };
    let last = kc * (nb - 1);
    body(KBlock {
        k0: k.c(0),
        len: kc,
        first: true,
        last: false,
    })?;
    k.loop_step(kc, last, kc, &mut |k0| {
        body(KBlock {
            k0,
            len: kc,
            first: false,
            last: false,
        })
    })?;
    body(KBlock {
        k0: k.c(last),
        len: kk - last,
        first: false,
        last: true,
    })
}

/// Where a tile sits: rows `i0 .. i0 + mr`, columns `j0 .. j0 + nv·W` (with `lanes = Some(n)`
/// only the first `n` columns of the last vector); `panel`: A is stored as row panels, this
/// tile's `mr` rows (the panel height, or the last panel's) as `[K][mr]` from `i0·K`.
#[derive(Clone, Copy)]
struct Tile<'c> {
    i0: IntValue<'c>,
    j0: IntValue<'c>,
    mr: i64,
    nv: u32,
    lanes: Option<u32>,
    panel: bool,
}

/// One tile over the K block `kb`; the last vector's columns past `lanes` are neither loaded
/// nor stored (masked). The last K block reads the residual `res` (if any) at the index it
/// stores to, and adds it after the bias.
fn tile<'c>(j: Job<'_, '_, 'c>, kb: KBlock<'c>, t: Tile<'c>) -> R<()> {
    let (k, w, gm, epi, res) = (j.k, j.w, j.gm, j.epi, j.res);
    let Tile {
        i0,
        j0,
        mr,
        nv,
        lanes,
        panel,
    } = t;
    let wl = w as i64;
    let rows: Vec<IntValue> = (0..mr).map(|r| k.add(i0, k.c(r))).collect::<R<_>>()?;
    // A[r, kk] at `a_rows[r] + ak`: `r·a_rs + kk·a_cs`, or in a panel `i0·K + r + kk·mr`.
    let a_rows: Vec<IntValue> = if panel {
        let base = k.mul(i0, gm.k)?;
        (0..mr).map(|r| k.add(base, k.c(r))).collect::<R<_>>()?
    } else {
        rows.iter().map(|&r| k.mul(r, gm.a_rs)).collect::<R<_>>()?
    };
    let a_cs = if panel { mr } else { gm.a_cs };
    let c_at = |r: usize, v: u32| -> R<IntValue<'c>> {
        let ci = k.add(k.mul(rows[r], gm.c_rs)?, j0)?;
        k.add(ci, k.c(v as i64 * wl))
    };
    let masked = |v: u32| lanes.filter(|_| v + 1 == nv);
    let init: Vec<BasicValueEnum> = if kb.first {
        let zero: BasicValueEnum = k.vty(w).const_zero().into();
        vec![zero; (mr as usize) * nv as usize]
    } else {
        let mut init = Vec::with_capacity((mr as usize) * nv as usize);
        for r in 0..mr as usize {
            for v in 0..nv {
                let at = c_at(r, v)?;
                init.push(
                    match masked(v) {
                        Some(n) => k.ldv_masked(gm.c, at, w, n)?,
                        None => k.ldv(gm.c, at, w)?,
                    }
                    .into(),
                );
            }
        }
        init
    };
    // The residual's lines of this tile into L1 (`prefetcht0`), asked for before the K loop
    // and read after it: the residual was written several ops earlier (3.2 MB per 56×56
    // block of ResNet-50, out of L2), and its `MR × NV` loads in the epilogue would each wait
    // on L3 with no FMA left to overlap them (ResNet-50's three 64→256 layers at 56×56 with
    // the residual: 1.83 → 1.44 ms, docs/codegen.md "The residual's lines prefetched").
    if let (true, Some(p)) = (kb.last, res) {
        for r in 0..mr as usize {
            for v in 0..nv {
                super::chanvec::prefetch_into(k, p, c_at(r, v)?, 3)?;
            }
        }
    }
    // K steps `kb` counts in groups: B row `kk = g·T + t` at `g·b_rs + taps[t]` (one row,
    // offset 0, per group without taps), the group's rows unrolled in `kk` order.
    let taps = j.taps.unwrap_or(&[0]);
    let group = taps.len() as i64;
    // Group `g` (`gb`: its B row's index at column `j0`) on the sums `cur`.
    let step = |g: IntValue<'c>, gb: IntValue<'c>, cur: &[BasicValueEnum<'c>]| {
        let mut cur = cur.to_vec();
        for (t, &off) in taps.iter().enumerate() {
            let kk = k.add(k.mul(g, group)?, k.c(t as i64))?;
            let bi = k.add(gb, k.c(off))?;
            let bv: Vec<_> = (0..nv)
                .map(|v| {
                    let at = k.add(bi, k.c(v as i64 * wl))?;
                    match masked(v) {
                        Some(n) => k.ldv_masked(gm.b, at, w, n),
                        None => k.ldv(gm.b, at, w),
                    }
                })
                .collect::<R<_>>()?;
            let ak = k.mul(kk, a_cs)?;
            let mut next = Vec::with_capacity(cur.len());
            for &ar in &a_rows {
                let a = k.splat(k.ld(gm.a, k.add(ar, ak)?)?, w)?;
                for &b in &bv {
                    let c = cur[next.len()].into_vector_value();
                    next.push(k.fma(a, b, c)?.into());
                }
            }
            cur = next;
        }
        Ok(cur)
    };
    let acc = match j.split {
        None => k.loop_carry(0, kb.len, 1, init, &mut |g, cur| {
            let g = k.add(kb.k0, g)?;
            step(g, k.add(k.mul(g, gm.b_rs)?, j0)?, cur)
        })?,
        // Groups `per` to a channel (`kb` the whole K, [`emit_part`]): group `c·per + i` at
        // `c·stride + i·b_rs`, a loop over channels around one over their groups.
        Some((per, stride)) => k.loop_carry(0, kb.len / per, 1, init, &mut |c, cur| {
            let cb = k.add(k.mul(c, stride)?, j0)?;
            let g0 = k.mul(c, per)?;
            k.loop_carry(0, per, 1, cur.to_vec(), &mut |i, cur| {
                step(k.add(g0, i)?, k.add(cb, k.mul(i, gm.b_rs)?)?, cur)
            })
        })?,
    };
    for (r, &row) in rows.iter().enumerate() {
        for v in 0..nv {
            let vec = acc[r * nv as usize + v as usize].into_vector_value();
            let at = c_at(r, v)?;
            let out = if kb.last {
                let rv = match (res, masked(v)) {
                    (None, _) => None,
                    (Some(p), Some(n)) => Some(k.ldv_masked(p, at, w, n)?),
                    (Some(p), None) => Some(k.ldv(p, at, w)?),
                };
                finish_lanes(k, epi, vec, row, rv, masked(v).unwrap_or(w))?
            } else {
                vec
            };
            match masked(v) {
                Some(n) => k.stv_masked(gm.c, at, out, n)?,
                None => k.stv(gm.c, at, out)?,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tile shape fits the register file it is picked for: accumulators, the B vectors
    /// of one K step and the broadcast A element (a tile that does not fit spills every step).
    #[test]
    fn tiles_fit_the_register_file() {
        for w in [4, 8, 16] {
            let regs = vector_registers(w);
            let (mr, nv) = wide(w);
            let used = mr * nv as i64 + nv as i64 + 1;
            assert!(used <= regs, "wide tile at {w} lanes");
            for nv in 1..=NARROW {
                let mr = rows_for(w, nv);
                let used = mr * nv + nv + 1;
                assert!(used <= regs, "narrow tile {mr}x{nv} at {w} lanes");
                assert_eq!(acc_regs(w) % mr, 0, "row granule at {w} lanes");
            }
        }
    }

    /// A K of at most 1.25 panels is one block; a longer one keeps the panel's blocks.
    #[test]
    fn a_k_within_a_quarter_of_the_panel_is_one_block() {
        assert_eq!(one_block_within(147, 128), 147);
        assert_eq!(one_block_within(160, 128), 160);
        assert_eq!(one_block_within(161, 128), 128);
        assert_eq!(one_block_within(100, 128), 100);
    }

    /// A K group's taps count the B floats they touch once: a 3×3 kernel read in place from
    /// rows 149 apart touches three runs of `nr + 2`; taps farther apart than `nr` (or no
    /// taps: one row) count `nr` each.
    #[test]
    fn tap_groups_count_overlapping_runs_once() {
        let w = 16;
        let taps: Vec<i64> = (0..9).map(|t| t / 3 * 149 + t % 3).collect();
        assert_eq!(runs_touched(Some(&taps), 64), 3 * 66);
        assert_eq!(runs_touched(Some(&[0, 100, 200]), 64), 3 * 64);
        assert_eq!(runs_touched(Some(&[0, 0]), 64), 64);
        assert_eq!(runs_touched(None, 16 * w), 256);
    }
}
