//! Stride-1 k×k convolution on narrow images with *row packing* (issue 6/7): the output
//! pixels of a whole image are one flat axis along the vector lanes, so a 7- or 14-wide row
//! no longer leaves most of a 16-lane vector idle (the row kernel of [`super::im2col`] gets
//! 7/16 and 14/16 lane occupancy there, and with one vector per tile too few accumulators
//! to hide the FMA latency).
//!
//! The flat axis is a *grid* of points `q = oy·G + g` (`g` standing for output column `g`,
//! kept when `g < OW`). With unit strides and `OW ≤ Wi` the grid's row width `G` is the
//! input's, `Wi`: tap `(i, j)` of every lane then reads input element
//! `q + (i·dh − pt)·Wi + j·dw − pl` of its channel, so each tap of a vector of `W`
//! consecutive grid points is one contiguous load; when `OW < Wi` ("valid" convolutions)
//! the grid's extra columns are computed and dropped. Otherwise (strides, over-padding)
//! `G = OW` and a tap of a vector is one strided load per output row the vector touches:
//! `sw·W` lanes fetched, every `sw`-th kept, merged into the vector with constant lane
//! selects. Lanes whose tap falls in the padding (above/below the image, or past a row's
//! end, where the flat load would read the neighbouring row) are masked off at compile time
//! — a zero-filling `llvm.masked.load` — so there is no per-element test and no scratch
//! buffer. The epilogue stores each output-row segment of a vector with its own lane mask.
//!
//! Tiles are `MR` output channels × up to `NV` vectors of grid points (`MR·NV` vector
//! accumulators, [`tile`] sizes them to the register file, leaving room for the `NV` input
//! vectors and a weight broadcast), the K loop runs over input channels with the `KH·KW` taps unrolled, bias and
//! activation in the epilogue. Every grid vector of the image is unrolled (masks are
//! constants) when the image has at most [`MAX_VECTORS`] of them; a bigger stride-1 image
//! whose rows repeat (a 56-wide row is 7 vectors every 2 rows) unrolls only its border rows
//! and runs the middle as a loop over repetitions of one block of vectors ([`Periodic`]).
//! The channel-tile loop stays a runtime loop.

use super::geometry::{channel_tiles, Conv, Io};
use crate::kernels::common::{activation, prelu_vec, vector_registers};
use crate::nest::{llvm, K, R};
use inkwell::types::VectorType;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue, PointerValue, VectorValue};
use inkwell::AddressSpace;

/// The tile `(MR, NV)`: output channels per tile and grid vectors per tile (at most). With
/// AVX-512's 32 registers 8 × 3 (24 accumulators + 3 input vectors + a weight broadcast);
/// with 16 (AVX2) 6 × 2 (12 + 2 + 1), since 8 × 3 would spill on every tap.
pub(crate) fn tile(w: u32) -> (i64, i64) {
    if vector_registers(w) >= 32 {
        (8, 3)
    } else {
        (6, 2)
    }
}
/// Input bytes (per image and group) taken to stay in L2 across channel tiles.
const L2_INPUT_BYTES: i64 = 512 << 10;
/// Largest image (in grid vectors) that is unrolled; bigger ones use the row kernel, whose
/// rows are wide enough to fill its vectors.
pub const MAX_VECTORS: i64 = 100;

/// The grid's row width: the input's with unit strides (one load per tap and vector), else
/// the output's (one load per output row a vector touches).
fn grid_width(d: &Conv) -> i64 {
    if d.sh == 1 && d.sw == 1 && d.ow <= d.wi {
        d.wi
    } else {
        d.ow
    }
}

/// Grid points of an image: full rows, the last one cut at `OW`.
fn grid(d: &Conv) -> i64 {
    (d.oh - 1) * grid_width(d) + d.ow
}

/// Whether the row-packed kernel handles `d` with vectors of `w` lanes: small images
/// unrolled whole, bigger stride-1 ones when their rows repeat ([`Periodic`]).
pub fn applies(d: &Conv, w: u32) -> bool {
    let wl = w as i64;
    d.oh >= 1
        && d.ow >= 1
        && ((grid(d) + wl - 1) / wl <= MAX_VECTORS || Periodic::find(d, w).is_some())
}

/// Longest loop body (in grid vectors) of a [`Periodic`] run.
const MAX_PERIOD_VECTORS: i64 = 48;

/// A run of grid vectors computed by a runtime loop instead of being unrolled (stride-1
/// images bigger than [`MAX_VECTORS`], e.g. ResNet's and GoogLeNet's 56×56 layers, where the
/// row kernel of [`super::im2col`] runs 6 × 2 tiles and leaves 8 of every 64 lanes idle on a
/// 56-wide row). With a grid row of `G` points and `W` lanes, the lane pattern of vector `v`
/// (which lanes exist, which taps fall in the padding, where each output-row segment is
/// stored) repeats every `G / gcd(G, W)` vectors once no tap row is in the padding; the loop
/// body is `len` vectors (a multiple of that period and of the tile's `NV`), repetition `p`
/// computes vectors `v0 + p·len ..` with the masks of `v0 ..`, reading the input `p·x_step`
/// and writing the output `p·o_step` elements further on. Every vector's loads and stores
/// are checked against its representative's at compile time, so a vector whose pattern
/// differs is never looped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Periodic {
    v0: i64,
    len: i64,
    count: i64,
    x_step: i64,
    o_step: i64,
}

impl Periodic {
    fn find(d: &Conv, w: u32) -> Option<Periodic> {
        let wl = w as i64;
        let nvec = (grid(d) + wl - 1) / wl;
        if d.sh != 1 || d.sw != 1 || nvec <= MAX_VECTORS {
            return None;
        }
        let gw = grid_width(d);
        let g = gcd(gw, wl);
        let period = gw / g;
        let nv = tile(w).1;
        let len = period * nv / gcd(period, nv);
        if len > MAX_PERIOD_VECTORS {
            return None;
        }
        let rows = len * wl / gw;
        let (x_step, o_step) = (rows * d.sh * d.wi, rows * d.ow);
        let grid = Grid { d: *d, w: wl, gw };
        let sig: Vec<Signature> = (0..nvec).map(|v| grid.signature(v)).collect();
        // Vector `v` repeats `v - len` when its loads and stores are that vector's, shifted.
        let repeats = |v: i64| {
            let (a, b) = (&sig[(v - len) as usize], &sig[v as usize]);
            a.loads.len() == b.loads.len()
                && a.loads.iter().zip(&b.loads).all(|(x, y)| {
                    x.len() == y.len()
                        && x.iter().zip(y).all(|(p, q)| {
                            p.at + x_step == q.at && p.wide == q.wide && p.lanes == q.lanes
                        })
                })
                && a.stores.len() == b.stores.len()
                && a.stores
                    .iter()
                    .zip(&b.stores)
                    .all(|(p, q)| p.0 + o_step == q.0 && p.1 == q.1)
        };
        // The first block whose next block repeats it, then as many blocks as keep repeating.
        let v0 = (0..nvec - 2 * len + 1).find(|&v0| (v0 + len..v0 + 2 * len).all(repeats))?;
        let mut count = 2;
        while v0 + (count + 1) * len <= nvec
            && (v0 + count * len..v0 + (count + 1) * len).all(repeats)
        {
            count += 1;
        }
        let unrolled = nvec - (count - 1) * len;
        (unrolled <= MAX_VECTORS).then_some(Periodic {
            v0,
            len,
            count,
            x_step,
            o_step,
        })
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Balanced tiles over vectors `a..b`: as few as `nv` allows, sizes differing by at most one.
fn balanced(a: i64, b: i64, nv: i64) -> Vec<(i64, i64)> {
    let n = b - a;
    let ntiles = (n + nv - 1) / nv;
    (0..ntiles)
        .map(|t| {
            let v0 = a + t * n / ntiles;
            (v0, a + (t + 1) * n / ntiles - v0)
        })
        .collect()
}

/// Which of an image's pixels a kernel body computes: the threads cut a big stride-1 image
/// by pixels ([`pixel_units`], `super::tiling`), each tile a band of output rows.
#[derive(Clone, Copy)]
pub(crate) enum Part<'c> {
    /// Every grid vector.
    All,
    /// Pixel tiles `first..first + count` of an image with a periodic run, numbered in the
    /// order they are computed ([`pixel_tiles`]): those before the run, each repetition's,
    /// those after it. A band may start or end inside a repetition.
    Tiles { first: IntValue<'c>, count: i64 },
    /// Grid vectors `a..b` of an image without a periodic run (unrolled: constants).
    Vectors { a: i64, b: i64 },
}

/// The pixel tiles `(first vector, vectors)` of an image: those before its periodic run,
/// one repetition's (each computed `count` times), those after it; without a run, all of
/// them before.
#[allow(clippy::type_complexity)]
fn pixel_tiles(d: &Conv, w: u32) -> (Option<Periodic>, [Vec<(i64, i64)>; 3]) {
    let wl = w as i64;
    let nv = tile(w).1;
    let nvec = (grid(d) + wl - 1) / wl;
    match Periodic::find(d, w) {
        Some(p) => (
            Some(p),
            [
                balanced(0, p.v0, nv),
                balanced(p.v0, p.v0 + p.len, nv),
                balanced(p.v0 + p.count * p.len, nvec, nv),
            ],
        ),
        None => (None, [balanced(0, nvec, nv), Vec::new(), Vec::new()]),
    }
}

/// The units of the threads' cut by pixels: with a periodic run its pixel tiles, else the
/// grid vectors; and whether they are tiles of a periodic run. Cut by whole repetitions, the
/// 56² layers (2 tiles, 8 repetitions of 7, 8 tiles) gave two threads 88 and 108 of their
/// 196 vectors; cut by tiles, 33 + 33 tiles, 97 and 99 vectors.
pub(crate) fn pixel_units(d: &Conv, w: u32) -> (i64, bool) {
    match pixel_tiles(d, w) {
        (Some(p), [before, body, after]) => (
            (before.len() + after.len()) as i64 + p.count * body.len() as i64,
            true,
        ),
        (None, _) => ((grid(d) + w as i64 - 1) / w as i64, false),
    }
}

/// Emits the kernel body at the builder's position for the pixels `part`. Every output
/// element is the same chain of FMAs whatever the part (the K loop of its own accumulator),
/// so a cut by pixels gives the bits of the whole image.
pub fn emit<'a, 'c>(k: &K<'a, 'c>, w: u32, d: &Conv, part: Part<'c>, io: Io<'c>) -> R<()> {
    let cg = d.c / d.groups;
    let mg = d.m / d.groups;
    let wl = w as i64;
    let mr = tile(w).0;
    // Pixel tiles: unrolled before and after a periodic run (computed by a loop over its
    // repetitions, [`Periodic`]), or over the whole image.
    let (periodic, [before, body, after]) = match (pixel_tiles(d, w), part) {
        ((None, _), Part::Vectors { a, b }) => (None, [balanced(a, b, tile(w).1), vec![], vec![]]),
        (tiles, _) => tiles,
    };
    // The periodic run's repetitions this part computes, and (for a band of tiles) whether
    // it computes tile `u` of the image: `u − first` in `0..count`, one unsigned compare.
    let (nb, nr) = (before.len() as i64, body.len() as i64);
    let (reps, band) = match (periodic, part) {
        (Some(p), Part::All) => (Some((k.c(0), k.c(p.count))), None),
        (Some(p), Part::Tiles { first, count }) => {
            // Repetitions holding a tile of the band: ⌊(first − nb)/nr⌋ to ⌈(end − nb)/nr⌉,
            // clamped to the run.
            let rep_of = |u: IntValue<'c>, round_up: i64| -> R<IntValue<'c>> {
                let r = k.iclamp(k.add(u, k.c(round_up - nb))?, 0, p.count * nr + round_up)?;
                llvm(k.b.build_int_signed_div(r, k.c(nr), "rep"))
            };
            let end = k.add(first, k.c(count))?;
            (
                Some((rep_of(first, 0)?, rep_of(end, nr - 1)?)),
                Some((first, count)),
            )
        }
        (None, Part::All | Part::Vectors { .. }) => (None, None),
        (Some(_), Part::Vectors { .. }) | (None, Part::Tiles { .. }) => {
            return Err(crate::CodegenError::Llvm(
                "row-packed convolution: a part that does not match the image's periodic run"
                    .into(),
            ))
        }
    };
    // Runs `f` when the band holds tile `u` (always for a whole image).
    let guard = |u: IntValue<'c>, f: &mut dyn FnMut() -> R<()>| -> R<()> {
        match band {
            Some((first, count)) => {
                let off = llvm(k.b.build_int_sub(u, first, "off"))?;
                let c =
                    k.b.build_int_compare(inkwell::IntPredicate::ULT, off, k.c(count), "in");
                k.when(llvm(c)?, f)
            }
            None => f(),
        }
    };
    // Tile numbers: the `i`-th before the run, tile `t` of repetition `rep`, the `j`-th after.
    let after_at = nb + periodic.map_or(0, |p| p.count * nr);
    let body_at = |rep: IntValue<'c>, t: usize| k.add(k.mul(rep, nr)?, k.c(nb + t as i64));
    let ntiles = after_at + after.len() as i64;
    // Loop order by memory traffic: channel tiles outside re-read the group's whole input
    // once per tile of MR output channels, pixel tiles outside re-read its weights once per
    // pixel tile. An input that stays in L2 is cheap to re-read; a bigger one (ResNet's
    // stride-2 1×1 downsampling reads 0.8–3.2 MB per output-channel tile) is read once per
    // pixel tile instead when that moves fewer bytes.
    let input_bytes = cg * d.h * d.wi * 4;
    let weight_bytes = mg * cg * d.kh * d.kw * 4;
    let pixels_outer =
        input_bytes > L2_INPUT_BYTES && ntiles * weight_bytes < (mg + mr - 1) / mr * input_bytes;
    k.loop_(0, d.n, &mut |b| {
        k.loop_(0, d.groups, &mut |gi| {
            let img = Img {
                k,
                w,
                d,
                cg,
                grid: Grid {
                    d: *d,
                    w: wl,
                    gw: grid_width(d),
                },
                io: io.group(k, d, b, gi)?,
            };
            // Every pixel tile of the part in order, each with its shift (if in the run).
            let each = |f: &dyn Fn((i64, i64), Option<Shift<'c>>) -> R<()>| -> R<()> {
                for (i, &t) in before.iter().enumerate() {
                    guard(k.c(i as i64), &mut || f(t, None))?;
                }
                if let (Some(p), Some((lo, hi))) = (periodic, reps) {
                    k.loop_between(lo, hi, &mut |rep| {
                        let sh = Shift {
                            x: k.mul(rep, p.x_step)?,
                            o: k.mul(rep, p.o_step)?,
                        };
                        for (t, &tile) in body.iter().enumerate() {
                            guard(body_at(rep, t)?, &mut || f(tile, Some(sh)))?;
                        }
                        Ok(())
                    })?;
                }
                for (j, &t) in after.iter().enumerate() {
                    guard(k.c(after_at + j as i64), &mut || f(t, None))?;
                }
                Ok(())
            };
            if pixels_outer {
                // Every channel tile on each pixel tile.
                each(&|(v0, nv), sh| {
                    channel_tiles(k, mg, mr, &mut |m0, h| img.tile(m0, h, v0, nv, sh))
                })
            } else {
                // Channel tiles outside: each runs the part's pixels, the periodic run as a
                // loop inside it.
                channel_tiles(k, mg, mr, &mut |m0, h| {
                    each(&|(v0, nv), sh| img.tile(m0, h, v0, nv, sh))
                })
            }
        })
    })
}

/// A periodic run's offsets for one repetition: input and output elements.
#[derive(Clone, Copy)]
struct Shift<'c> {
    x: IntValue<'c>,
    o: IntValue<'c>,
}

/// What a grid vector reads and writes, for comparing vectors ([`Periodic`]): per tap its
/// loads, and its output-row segments (first element, lanes).
struct Signature {
    loads: Vec<Vec<Load>>,
    stores: Vec<(i64, Vec<bool>)>,
}

/// One load of a tap: `sw·W` lanes from channel element `at`, `wide` the lanes fetched,
/// `lanes` the vector lanes they fill.
struct Load {
    at: i64,
    wide: Vec<bool>,
    lanes: Vec<bool>,
}

/// One image and group: where its input channels, output channels, weights and bias start.
struct Img<'k, 'a, 'c> {
    k: &'k K<'a, 'c>,
    w: u32,
    d: &'k Conv,
    cg: i64,
    grid: Grid,
    io: Io<'c>,
}

/// The grid of an image: its points, and what each vector reads and writes (compile-time).
#[derive(Clone, Copy)]
struct Grid {
    d: Conv,
    w: i64,
    gw: i64,
}

impl Grid {
    /// Grid point `q` as (output row, column), `None` past the last output.
    fn point(&self, q: i64) -> Option<(i64, i64)> {
        let (oy, g) = (q / self.gw, q % self.gw);
        (oy < self.d.oh && g < self.d.ow).then_some((oy, g))
    }

    /// How grid vector `v` reads tap `(i, j)`: lane `l` reads input element
    /// `iy·Wi + ox·sw + j·dw − pl` of its channel, i.e. `A + sw·l` with `A` constant along
    /// each run of lanes in one grid row — one (wide, strided) load per distinct `A`. Lanes
    /// past the last output or reading the padding are in no load.
    fn tap_loads(&self, v: i64, i: i64, j: i64) -> Vec<Load> {
        let d = &self.d;
        let wl = self.w;
        let mut loads: Vec<Load> = Vec::new();
        for l in 0..wl {
            let Some((oy, ox)) = self.point(v * wl + l) else {
                continue;
            };
            let iy = oy * d.sh + i * d.dh - d.pt;
            let ix = ox * d.sw + j * d.dw - d.pl;
            if !(0..d.h).contains(&iy) || !(0..d.wi).contains(&ix) {
                continue;
            }
            let at = iy * d.wi + ix - d.sw * l;
            let ld = match loads.iter_mut().position(|ld| ld.at == at) {
                Some(p) => &mut loads[p],
                None => {
                    loads.push(Load {
                        at,
                        wide: vec![false; (wl * d.sw) as usize],
                        lanes: vec![false; wl as usize],
                    });
                    loads.last_mut().expect("just pushed")
                }
            };
            ld.wide[(l * d.sw) as usize] = true;
            ld.lanes[l as usize] = true;
        }
        loads
    }

    /// Where vector `v`'s lanes are stored: one segment per output row it touches, lanes of
    /// row `oy` at `oy·OW + g = q − oy·(G − OW)` (the first lane's element, the lanes).
    fn stores(&self, v: i64) -> Vec<(i64, Vec<bool>)> {
        let q0 = v * self.w;
        let mut rows: Vec<(i64, Vec<bool>)> = Vec::new();
        for l in 0..self.w {
            if let Some((oy, _)) = self.point(q0 + l) {
                let at = q0 - oy * (self.gw - self.d.ow);
                match rows.iter_mut().find(|(a, _)| *a == at) {
                    Some((_, on)) => on[l as usize] = true,
                    None => {
                        let mut on = vec![false; self.w as usize];
                        on[l as usize] = true;
                        rows.push((at, on));
                    }
                }
            }
        }
        rows
    }

    fn signature(&self, v: i64) -> Signature {
        let d = &self.d;
        Signature {
            loads: (0..d.kh)
                .flat_map(|i| (0..d.kw).map(move |j| (i, j)))
                .map(|(i, j)| self.tap_loads(v, i, j))
                .collect(),
            stores: self.stores(v),
        }
    }
}

impl<'k, 'a, 'c> Img<'k, 'a, 'c> {
    /// The vector one tap reads for its lanes (zero elsewhere): each load fetches `sw·W`
    /// lanes from `xc + at` (masked: only the lanes it needs) and keeps every `sw`-th; loads
    /// after the first are merged in with constant lane selects.
    fn gather(&self, xc: IntValue<'c>, loads: &[Load]) -> R<VectorValue<'c>> {
        let (k, w) = (self.k, self.w);
        let s = self.d.sw as u32;
        let i32t = k.ctx.i32_type();
        let i1 = k.ctx.bool_type();
        let pick: Vec<_> = (0..w)
            .map(|l| i32t.const_int(u64::from(l * s), false))
            .collect();
        let pick = VectorType::const_vector(&pick);
        let mut out: Option<VectorValue<'c>> = None;
        for ld in loads {
            let wide = k.ldv_lanes(self.io.x, k.add(xc, k.c(ld.at))?, &ld.wide)?;
            let v = if s == 1 {
                wide
            } else {
                llvm(k.b.build_shuffle_vector(wide, wide.get_type().get_undef(), pick, "every"))?
            };
            out = Some(match out {
                None => v,
                Some(prev) => {
                    let m: Vec<_> = ld
                        .lanes
                        .iter()
                        .map(|&b| i1.const_int(b.into(), false))
                        .collect();
                    llvm(k.b.build_select(VectorType::const_vector(&m), v, prev, "seg"))?
                        .into_vector_value()
                }
            });
        }
        out.ok_or_else(|| crate::CodegenError::Llvm("a tap with no load".into()))
    }

    /// `mr` output channels from `m0` × grid vectors `v0..v0 + nv`; with `shift`, the
    /// vectors one periodic repetition further on, which read and write that much further.
    fn tile(&self, m0: IntValue<'c>, mr: i64, v0: i64, nv: i64, shift: Option<Shift<'c>>) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let taps = d.kh * d.kw;
        let nvu = nv as usize;
        // Per tap and vector: the compile-time loads (None when no lane reads inside the
        // image); taps no lane of the tile reads are dropped.
        let mut plan: Vec<(i64, Vec<Option<Vec<Load>>>)> = Vec::new();
        for i in 0..d.kh {
            for j in 0..d.kw {
                let per: Vec<Option<Vec<Load>>> = (v0..v0 + nv)
                    .map(|v| {
                        let loads = self.grid.tap_loads(v, i, j);
                        (!loads.is_empty()).then_some(loads)
                    })
                    .collect();
                if per.iter().any(|p| p.is_some()) {
                    plan.push((i * d.kw + j, per));
                }
            }
        }
        let zero: BasicValueEnum = k.vty(w).const_zero().into();
        let wrows: Vec<IntValue<'c>> = (0..mr)
            .map(|r| k.mul(k.add(m0, k.c(r))?, self.cg * taps))
            .collect::<R<_>>()?;
        let acc = k.loop_carry(
            0,
            self.cg,
            1,
            vec![zero; mr as usize * nvu],
            &mut |c, cur| {
                let mut acc: Vec<VectorValue<'c>> =
                    cur.iter().map(|v| v.into_vector_value()).collect();
                let xc = k.mul(c, d.h * d.wi)?;
                let xc = match shift {
                    Some(sh) => k.add(xc, sh.x)?,
                    None => xc,
                };
                let wc = k.mul(c, taps)?;
                for (t, per) in &plan {
                    let bv: Vec<Option<VectorValue<'c>>> = per
                        .iter()
                        .map(|p| match p {
                            Some(loads) => Ok(Some(self.gather(xc, loads)?)),
                            None => Ok(None),
                        })
                        .collect::<R<_>>()?;
                    let wt = k.add(wc, k.c(*t))?;
                    for (r, &wr) in wrows.iter().enumerate() {
                        let a = k.splat(k.ld(self.io.w, k.add(wr, wt)?)?, w)?;
                        for (v, b) in bv.iter().enumerate() {
                            if let Some(b) = b {
                                acc[r * nvu + v] = k.fma(a, *b, acc[r * nvu + v])?;
                            }
                        }
                    }
                }
                Ok(acc.into_iter().map(|v| v.into()).collect())
            },
        )?;
        for r in 0..mr {
            let m = k.add(m0, k.c(r))?;
            let bias = match self.io.bias {
                Some(p) => k.splat(k.ld(p, m)?, w)?,
                None => k.vty(w).const_zero(),
            };
            let slope = match self.io.slope {
                Some(s) => Some(s.load(k, m)?),
                None => None,
            };
            let plane = k.mul(m, d.oh * d.ow)?;
            for v in 0..nv {
                let a = acc[(r * nv + v) as usize].into_vector_value();
                let biased = llvm(k.b.build_float_add(a, bias, "b"))?;
                let y = match self.io.res {
                    Some(_) => biased,
                    None => self.epilogue(biased, slope)?,
                };
                // One store per output row the vector touches ([`Grid::stores`]).
                let rows = self.grid.stores(v0 + v);
                for (at, on) in rows {
                    let at = k.add(plane, k.c(at))?;
                    let at = match shift {
                        Some(sh) => k.add(at, sh.o)?,
                        None => at,
                    };
                    // With a residual, each segment reads it at the indices it stores to
                    // (its other lanes zero, and not stored) and adds it after the bias.
                    let y = match self.io.res {
                        Some(p) => {
                            let r = k.ldv_lanes(p, at, &on)?;
                            self.epilogue(llvm(k.b.build_float_add(y, r, "res"))?, slope)?
                        }
                        None => y,
                    };
                    if on.iter().all(|&b| b) {
                        k.stv(self.io.out, at, y)?;
                    } else {
                        store_lanes(k, self.io.out, at, y, &on)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The fused activation on a vector: ReLU as a vector max, the others lane by lane
    /// through the scalar definitions the other kernels share; then a fused PReLU with the
    /// channel's `slope`, if any.
    fn epilogue(&self, a: VectorValue<'c>, slope: Option<FloatValue<'c>>) -> R<VectorValue<'c>> {
        let y = self.activation(a)?;
        match slope {
            Some(s) => prelu_vec(self.k, s, y),
            None => Ok(y),
        }
    }

    fn activation(&self, a: VectorValue<'c>) -> R<VectorValue<'c>> {
        let k = self.k;
        match self.d.act {
            None => Ok(a),
            Some(tir_ir::Activation::Relu) => {
                let z = a.get_type().const_zero();
                let neg = llvm(k.b.build_float_compare(inkwell::FloatPredicate::OLT, a, z, "neg"))?;
                Ok(llvm(k.b.build_select(neg, z, a, "relu"))?.into_vector_value())
            }
            act => k.map_lanes(a, self.w, &mut |_, x| activation(k, act, x)),
        }
    }
}

/// Stores the lanes of `v` that are `on` at element `i` of `p` (`llvm.masked.store`).
fn store_lanes<'a, 'c>(
    k: &K<'a, 'c>,
    p: PointerValue<'c>,
    i: IntValue<'c>,
    v: VectorValue<'c>,
    on: &[bool],
) -> R<()> {
    let vt: VectorType<'c> = v.get_type();
    let pt = vt.ptr_type(AddressSpace::default());
    // SAFETY: a plain (not inbounds) GEP is defined for any offset; only `on` lanes are
    // written, and those are inside the output.
    let q = llvm(unsafe { k.b.build_gep(p, &[i], "sm") })?;
    let vp = llvm(k.b.build_pointer_cast(q, pt, "vp"))?;
    let f = k.intrinsic("llvm.masked.store", &[vt.into(), pt.into()])?;
    let i1 = k.ctx.bool_type();
    let mask: Vec<_> = on.iter().map(|&b| i1.const_int(b.into(), false)).collect();
    llvm(k.b.build_call(
        f,
        &[
            v.into(),
            vp.into(),
            k.ctx.i32_type().const_int(4, false).into(),
            VectorType::const_vector(&mask).into(),
        ],
        "",
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(h: i64, wi: i64, k: i64, pad: i64) -> Conv {
        Conv {
            n: 1,
            c: 4,
            h,
            wi,
            m: 8,
            groups: 1,
            kh: k,
            kw: k,
            oh: h + 2 * pad - k + 1,
            ow: wi + 2 * pad - k + 1,
            sh: 1,
            sw: 1,
            dh: 1,
            dw: 1,
            pt: pad,
            pl: pad,
            act: None,
        }
    }

    /// ResNet's 56×56 "same" 3×3: 196 vectors of 16, a period of 7 vectors (2 rows), the body
    /// 21 vectors (3 tiles of 3); only the first and last rows' vectors are unrolled.
    #[test]
    fn a_56_wide_image_loops_over_its_middle_rows() {
        let d = conv(56, 56, 3, 1);
        let p = Periodic::find(&d, 16).expect("periodic");
        assert_eq!((p.len, p.x_step, p.o_step), (21, 6 * 56, 6 * 56));
        assert!(p.v0 >= 3 && p.v0 < 10, "{p:?}");
        assert!(p.v0 + p.count * p.len <= 196 && p.v0 + (p.count + 1) * p.len > 196 - 10);
        assert!(applies(&d, 16));
        // Small images are unrolled whole; a 147-wide row's period (147 vectors) is too long.
        assert_eq!(Periodic::find(&conv(28, 28, 3, 1), 16), None);
        assert_eq!(Periodic::find(&conv(20, 147, 3, 1), 16), None);
        assert!(!applies(&conv(20, 147, 3, 1), 16));
    }

    /// The threads' units on a periodic image are its pixel tiles (those around the run and
    /// each repetition's), so that two threads share the 56² image to within a tile: by whole
    /// repetitions (8 of them) one thread took 4 and the 24 vectors after the run.
    #[test]
    fn periodic_images_are_cut_by_pixel_tiles() {
        let d = conv(56, 56, 3, 1);
        let p = Periodic::find(&d, 16).expect("periodic");
        let (_, [before, body, after]) = pixel_tiles(&d, 16);
        assert_eq!(
            (before.len(), body.len(), after.len(), p.count),
            (2, 7, 8, 8)
        );
        let units = 2 + 8 + 8 * 7;
        assert_eq!(pixel_units(&d, 16), (units, true));
        // Every grid vector in exactly one tile, in order.
        let mut next = 0;
        let reps = (0..p.count).flat_map(|r| body.iter().map(move |&(v, n)| (v + r * p.len, n)));
        for (v, n) in before
            .iter()
            .copied()
            .chain(reps)
            .chain(after.iter().copied())
        {
            assert_eq!(v, next);
            next += n;
        }
        assert_eq!(next, 196);
        // Halves of a cut into 8 chunks within a tile of each other.
        let t = crate::parallel::Tiling::new(1, units, 1, u64::MAX, 1);
        assert_eq!(t.count, 8);
        assert!(2 * t.larger_half() <= units + 1, "{t:?}");
        // A 28-wide image has no run: its units stay grid vectors.
        assert_eq!(pixel_units(&conv(28, 28, 3, 1), 16), (49, false));
    }

    /// Accumulators, the input vectors of one tap and the weight broadcast fit the registers.
    #[test]
    fn tiles_fit_the_register_file() {
        for w in [4, 8, 16] {
            let (mr, nv) = tile(w);
            // Accumulators, the input vectors and the weight broadcast.
            let used = mr * nv + nv + 1;
            assert!(used <= vector_registers(w), "{mr}x{nv} at {w} lanes");
        }
    }
}
