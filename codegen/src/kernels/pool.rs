//! Pooling: `max_pool` and `avg_pool` (`W` output columns at a time, [`Window`]), and
//! `global_avg_pool`, the mean of each `N·C` plane summed in `f64` like the reference.
//!
//! The squeeze-and-excitation blocks of EfficientNet and MobileNet v3 pool planes of up to
//! 112×112; one scalar `f64` add chain per plane ran at the add's latency (8.6% of
//! EfficientNet-B0's time, issue 6). Here each plane is summed as `W`-lane `f32` loads widened
//! to `f64` into [`ACCS`] independent vector accumulators (the last `< W` elements as one
//! masked load, zero-filled), then the lanes are added pairwise. The sum is exact to `f64`
//! rounding in any order, so the result is the reference's after the cast to `f32` but for
//! ties of the last `f64` bit.

use super::common::{args_of, dims, unsupported, Call};
use crate::nest::{llvm, K, R};
use crate::storage::Storage;
use crate::Gen;
use inkwell::types::VectorType;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue, PointerValue, VectorValue};
use inkwell::{FloatPredicate, IntPredicate};
use tir_ir::op::Pool2d;
use tir_ir::{Function, OpData};

/// Output rows with a kernel row outside the plane that a pool unrolls at most (each is a
/// copy of the row's code, every tap unrolled): past it, a large padded window (up to 64
/// kernel rows) runs every row in one loop with the row test.
const MAX_BORDER_ROWS: i64 = 8;

/// Taps a plane computed flat ([`Window::flat`]) unrolls at most: a 3×3 window over a
/// 28×28 plane (49 vectors of 16 lanes, 441 taps) is one.
const FLAT_TAPS: i64 = 512;

/// Largest plane (input bytes) whose max pool shares kernel rows' maxima down columns
/// ([`Walk::Columns`], for rows too wide to carry along the rows): a column walks down the
/// plane, so the plane must stay in L1 (48 KiB) for the next columns. SqueezeNet's 3×3/2 pools on 54² and 27² planes (11.4 and
/// 2.8 KiB) went 0.063–0.064 → 0.050–0.052 and 0.031 → 0.023–0.025 ms; on the 109² and
/// GoogLeNet's 112² planes (46 and 49 KiB, read from L3) the columns were no faster, or
/// slower (0.069–0.077 → 0.077–0.081 ms), even with the next rows prefetched
/// (docs/codegen.md "SqueezeNet's stem and max pools").
const SHARED_PLANE_BYTES: i64 = 32 * 1024;

/// Vectors of kernel-row maxima a max pool carries at most from one output row to the next
/// when it shares them along the rows ([`Walk::Rows`]; each with its NaN-testing sum, so
/// twice as many registers): Inception v3's 147² 3×3/2 pool carries 5 (73 output columns,
/// one row each), within AVX-512's 32 registers.
const SHARED_ROW_VECTORS: i64 = 8;

/// How [`Window::shared_rows`] walks a plane.
#[derive(Clone, Copy)]
enum Walk {
    /// Along each output row, every column vector unrolled.
    Rows,
    /// Down each column vector, then the next: the plane stays in L1.
    Columns,
}

/// Max or average pooling on NCHW; padded cells never win a max and count in an average's
/// divisor only with `count_include_pad`.
pub(crate) fn pool<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    p: &Pool2d,
    is_max: bool,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let xd = dims(func, x)?;
    let od = dims(func, r)?;
    if xd.len() != 4 {
        return Err(unsupported(func, op, "pooling needs rank 4"));
    }
    let (planes, h, w) = (xd[0] * xd[1], xd[2], xd[3]);
    let (oh, ow) = (od[2], od[3]);
    let [kh, kw] = p.kernel.map(|v| v as i64);
    let [sh, sw] = p.strides.map(|v| v as i64);
    let [pt, pl, pb, pr] = p.pads.map(|v| v as i64);
    let args = args_of(func, st, &[x, r])?;
    // Planes are independent: cut for threads by whole planes (memory-bound, so the work is
    // the traffic of each window's reads).
    let work = crate::parallel::work(
        (planes * oh * ow * kh * kw).max(0) as u64,
        4 * (planes * (h * w + oh * ow)).max(0) as u64,
    );
    let geo = Window {
        h,
        w,
        ow,
        kh,
        kw,
        sh,
        sw,
        pt,
        pl,
        pb,
        pr,
        is_max,
        include_pad: p.count_include_pad,
    };
    let width = g.width;
    let f = g.units_kernel(
        name,
        &args,
        &[false, true],
        planes,
        work,
        &mut |k, ps, p0, count| {
            let (px, po) = (ps[0], ps[1]);
            k.loop_(0, count, &mut |pl_| {
                let pl_ = k.add(pl_, p0)?;
                let xp = k.gep(px, k.mul(pl_, h * w)?)?;
                let op_ = k.gep(po, k.mul(pl_, oh * ow)?)?;
                match geo.flat(oh, width as i64) {
                    // A plane with a NaN or a `−0` takes the order-keeping tree with its
                    // per-vector NaN test, row by row; the others a separable max, in any
                    // order ([`plane_needs_order`]).
                    Some(nv) if geo.flat_max(width as i64) => k.if_else(
                        plane_needs_order(k, xp, h * w, width)?,
                        &mut |order| match order {
                            true => {
                                k.loop_(0, oh, &mut |oy| geo.row(k, width, (xp, op_), oy, false))
                            }
                            false => geo.flat_max_plane(k, width, (xp, op_), oh, nv),
                        },
                    ),
                    _ => geo.plane(k, width, (xp, op_), oh),
                }
            })
        },
    )?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

/// The geometry of a pooling window over one `H × W` plane (pads top, left, bottom, right).
///
/// Each output row is computed `W` output columns at a time (issue 20: Inception v3's
/// 3×3/1 average pools ran one scalar window at a time, with a clamp, two range tests and
/// two selects per cell, at 2.5–3.8× onnxruntime's time). Per kernel tap a vector loads the
/// `sw·W` input lanes its columns read and keeps every `sw`-th; columns whose taps all lie
/// inside the row (the middle of the row) run in a loop of full-width loads, the border
/// vectors are unrolled with compile-time lane masks (`llvm.masked.load`: padded cells read
/// as zero, or −∞ for the max, and are not touched). Kernel rows above or below the plane
/// are a run-time select per row. A sum is the same chain as the scalar window's — cells
/// added in `(i, j)` order from `+0`, padded cells skipped (a zero lane added to a sum that
/// started at `+0` leaves it unchanged: it is never `−0`), divided by the same count; a max
/// is an order-keeping tree with the reference's bits ([`window_max`]). Stride-1 pools whose
/// rows are as wide as the input's on small planes run flat ([`Window::flat`]), a max there
/// separably when the plane holds no NaN and no `−0` ([`Window::flat_max_plane`]).
struct Window {
    h: i64,
    w: i64,
    ow: i64,
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    pt: i64,
    pl: i64,
    pb: i64,
    pr: i64,
    is_max: bool,
    include_pad: bool,
}

/// Where a vector of output columns starts: a compile-time column (a border vector, with
/// its lane masks) or a run-time one (a vector of the clean middle).
#[derive(Clone, Copy)]
enum Cols<'c> {
    Border(i64),
    Clean(IntValue<'c>),
}

impl<'c> Cols<'c> {
    /// The first output column, and how many of the vector's lanes exist (a border vector
    /// may run past the row's end, `ow` columns).
    fn at(self, k: &K<'_, 'c>, ow: i64, wl: i64) -> (IntValue<'c>, i64) {
        match self {
            Cols::Border(ox0) => (k.c(ox0), (ow - ox0).min(wl)),
            Cols::Clean(c) => (c, wl),
        }
    }
}

impl Window {
    /// Input column read by output column `ox` at kernel column `j` (may be padding).
    fn ix(&self, ox: i64, j: i64) -> i64 {
        ox * self.sw + j - self.pl
    }

    /// Whether vector `v` (output columns `v·W ..`) is whole and every tap of every lane
    /// reads inside the row.
    fn clean(&self, v: i64, wl: i64) -> bool {
        let (a, b) = (v * wl, v * wl + wl - 1);
        b < self.ow && self.ix(a, 0) >= 0 && self.ix(b, self.kw - 1) + self.sw - 1 < self.w
    }

    /// Whether rows are computed a vector of output columns at a time: the vector path
    /// unrolls every tap and loads `sw·W` lanes per tap, so a window of more than 64 taps or
    /// a stride above 4 takes [`Self::scalar_row`] (selfie_segmentation's whole-plane
    /// 128×128/128 average pool would be 16,384 unrolled masked loads of 2,048 lanes, and
    /// LLVM spent minutes on it).
    fn vectorise(&self, wl: i64) -> bool {
        self.kh * self.kw <= 64 && self.sw * wl <= 64
    }

    /// One plane (`xp`, `op` at the plane): flat ([`Self::flat`]), or by rows.
    fn plane<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        (xp, op): (PointerValue<'c>, PointerValue<'c>),
        oh: i64,
    ) -> R<()> {
        if let Some(nv) = self.flat(oh, w as i64) {
            for v in 0..nv {
                self.flat_vector(k, w, xp, op, oh, v)?;
            }
            return Ok(());
        }
        let row = |oy: IntValue<'c>, inner: bool| self.row(k, w, (xp, op), oy, inner);
        // Rows whose every kernel row lies in the plane run in a loop with no per-tap row
        // test; the others are unrolled (their tests fold away).
        let (r0, r1) = self.inner_rows(oh);
        if r1 == 0 {
            return k.loop_(0, oh, &mut |oy| row(oy, false));
        }
        for oy in 0..r0 {
            row(k.c(oy), false)?;
        }
        match self.shares_rows(w as i64, (r0, r1)) {
            Some(walk) => self.shared_rows(k, w, (xp, op), (r0, r1), walk)?,
            None => k.loop_(r0, r1, &mut |oy| row(oy, true))?,
        }
        for oy in r1..oh {
            row(k.c(oy), false)?;
        }
        Ok(())
    }

    /// Output row `oy` one window at a time, its taps in run-time loops: cells added, or
    /// maxed by the reference's step, in `(i, j)` order from `+0` or `−∞`, cells outside the
    /// plane skipped, divided by rows counted × columns counted: the same bits as the vector
    /// paths.
    fn scalar_row<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        xp: PointerValue<'c>,
        op: PointerValue<'c>,
        oy: IntValue<'c>,
    ) -> R<()> {
        let (lo_y, hi_y, lo_x, hi_x) = if self.include_pad {
            (-self.pt, self.h + self.pb, -self.pl, self.w + self.pr)
        } else {
            (0, self.h, 0, self.w)
        };
        let by = k.add(k.mul(oy, self.sh)?, k.c(-self.pt))?;
        let cnt_y = counted(k, by, self.kh, lo_y, hi_y)?;
        k.loop_(0, self.ow, &mut |ox| {
            let bx = k.add(k.mul(ox, self.sw)?, k.c(-self.pl))?;
            let start = k.f(if self.is_max { f64::NEG_INFINITY } else { 0.0 });
            let acc = k.loop_carry(0, self.kh, 1, vec![start.into()], &mut |i, cur| {
                let iy = k.add(by, i)?;
                let inside = k.in_range(iy, 0, self.h)?;
                let at = k.mul(k.iclamp(iy, 0, self.h - 1)?, self.w)?;
                k.loop_carry(0, self.kw, 1, cur.to_vec(), &mut |j, cur| {
                    let acc = cur[0].into_float_value();
                    let ix = k.add(bx, j)?;
                    let ok = llvm(k.b.build_and(inside, k.in_range(ix, 0, self.w)?, "ok"))?;
                    let v = k.ld(xp, k.add(at, k.iclamp(ix, 0, self.w - 1)?)?)?;
                    let next = if self.is_max {
                        k.max_nan(acc, v)?
                    } else {
                        k.fadd(acc, v)?
                    };
                    Ok(vec![k.fsel(ok, next, acc)?.into()])
                })
            })?[0]
                .into_float_value();
            let out = if self.is_max {
                acc
            } else {
                k.fdiv(acc, k.fmul(cnt_y, counted(k, bx, self.kw, lo_x, hi_x)?)?)?
            };
            k.st(op, k.add(k.mul(oy, self.ow)?, ox)?, out)
        })
    }

    /// How many `W`-lane vectors of flat output indices cover a plane, when a plane is
    /// computed that way ([`Self::flat_vector`]): stride 1 and rows as wide as the input's,
    /// so that every tap of output `o` reads input `o + (i − pt)·w + (j − pl)` whatever its
    /// row, with at most [`FLAT_TAPS`] taps unrolled per plane. GoogLeNet's 3×3/1 pools on
    /// 28², 14² and 7² planes (rows of 1.75, 0.875 and 0.44 vectors) ran as border vectors
    /// only, every one masked and part empty; flat, every lane but a plane's last works.
    fn flat(&self, oh: i64, wl: i64) -> Option<i64> {
        let nv = (oh * self.ow + wl - 1) / wl;
        let flat = self.sh == 1
            && self.sw == 1
            && self.ow == self.w
            && self.vectorise(wl)
            && nv * self.kh * self.kw <= FLAT_TAPS;
        flat.then_some(nv)
    }

    /// Vector `v` of a plane's flat outputs ([`Self::flat`]): per tap a load of the lanes
    /// whose cell lies in the plane (a compile-time mask: a lane's row and column are
    /// known), combined as in [`Row::vector`], so the same bits.
    fn flat_vector<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        xp: PointerValue<'c>,
        op: PointerValue<'c>,
        oh: i64,
        v: i64,
    ) -> R<()> {
        let wl = w as i64;
        let o0 = v * wl;
        let lanes = (oh * self.ow - o0).min(wl);
        let cell = |l: i64, i: i64, j: i64| {
            let (oy, ox) = ((o0 + l) / self.ow, (o0 + l) % self.ow);
            (oy + i - self.pt, ox + j - self.pl)
        };
        let start = if self.is_max { f64::NEG_INFINITY } else { 0.0 };
        let mut acc = k.splat(k.f(start), w)?;
        // The max's taps per kernel row, padded lanes −∞ (which never wins, anywhere).
        let mut rows = Vec::new();
        for i in 0..self.kh {
            let mut taps = Vec::new();
            for j in 0..self.kw {
                let on: Vec<bool> = (0..wl)
                    .map(|l| {
                        let (iy, ix) = cell(l, i, j);
                        l < lanes && (0..self.h).contains(&iy) && (0..self.w).contains(&ix)
                    })
                    .collect();
                if !on.contains(&true) {
                    continue;
                }
                let at = k.c(o0 + (i - self.pt) * self.w + j - self.pl);
                if self.is_max {
                    taps.push(k.ldv_lanes_or(xp, at, &on, f64::NEG_INFINITY)?);
                } else {
                    let x = k.ldv_lanes(xp, at, &on)?;
                    acc = llvm(k.b.build_float_add(acc, x, "sum"))?;
                }
            }
            if !taps.is_empty() {
                rows.push((None, taps));
            }
        }
        let store = |out: VectorValue<'c>| store_lanes(k, op, k.c(o0), out, lanes);
        if self.is_max {
            return window_max(k, w, &rows, &store);
        }
        let out = {
            let counted = |l: i64| {
                (0..self.kh * self.kw)
                    .filter(|&t| {
                        let (iy, ix) = cell(l, t / self.kw, t % self.kw);
                        if self.include_pad {
                            (-self.pt..self.h + self.pb).contains(&iy)
                                && (-self.pl..self.w + self.pr).contains(&ix)
                        } else {
                            (0..self.h).contains(&iy) && (0..self.w).contains(&ix)
                        }
                    })
                    .count() as f64
            };
            // Lanes past the plane's end are not stored.
            let cnt: Vec<_> = (0..wl)
                .map(|l| k.f32t.const_float(if l < lanes { counted(l) } else { 1.0 }))
                .collect();
            llvm(k.b.build_float_div(acc, VectorType::const_vector(&cnt), "avg"))?
        };
        store(out)
    }

    /// Whether a flat plane's max is taken separably ([`Self::flat_max_plane`]): a max whose
    /// kernel columns reach at most one vector to either side.
    fn flat_max(&self, wl: i64) -> bool {
        self.is_max && self.pl <= wl && self.kw - 1 - self.pl <= wl
    }

    /// A flat plane's max ([`Self::flat`]) taken separably, for a plane with no NaN and no
    /// `−0` ([`plane_needs_order`]: any grouping of the cells gives the reference's bits).
    /// Per vector of flat outputs `o`, the maximum `V[o]` over the kernel rows of input
    /// column `o`'s cells (one load per kernel row), then the window's maximum over the
    /// kernel columns of `V[o + j − PL]`, each a lane shift of this vector's `V` and its
    /// neighbour's (`valignd`), lanes whose column falls outside the row −∞. GoogLeNet's
    /// 3×3/1 pools on 28² and 14² planes loaded 9 vectors per output vector, most across two
    /// cache lines; here 3 (as MLAS's NCHWc pool, one load per tap, but along rows).
    fn flat_max_plane<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        (xp, op): (PointerValue<'c>, PointerValue<'c>),
        oh: i64,
        nv: i64,
    ) -> R<()> {
        let wl = w as i64;
        let n = oh * self.ow;
        let ninf = k.splat(k.f(f64::NEG_INFINITY), w)?;
        // `V` of vector `v` (−∞ outside the plane's outputs).
        let column_max = |v: i64| -> R<VectorValue<'c>> {
            if v < 0 || v >= nv {
                return Ok(ninf);
            }
            let o0 = v * wl;
            let mut rows = Vec::new();
            for i in 0..self.kh {
                let on: Vec<bool> = (0..wl)
                    .map(|l| {
                        let iy = (o0 + l) / self.ow + i - self.pt;
                        o0 + l < n && (0..self.h).contains(&iy)
                    })
                    .collect();
                if on.contains(&true) {
                    let at = k.c(o0 + (i - self.pt) * self.w);
                    rows.push(k.ldv_lanes_or(xp, at, &on, f64::NEG_INFINITY)?);
                }
            }
            if rows.is_empty() {
                return Ok(ninf);
            }
            tree(&rows, &|a, b| max_step(k, a, b, false))
        };
        let i32t = k.ctx.i32_type();
        let (mut prev, mut cur) = (ninf, column_max(0)?);
        for v in 0..nv {
            let next = column_max(v + 1)?;
            let o0 = v * wl;
            let lanes = (n - o0).min(wl);
            let mut cols = Vec::new();
            for j in 0..self.kw {
                let d = j - self.pl;
                let on: Vec<bool> = (0..wl)
                    .map(|l| {
                        let ox = (o0 + l) % self.ow + d;
                        l < lanes && (0..self.ow).contains(&ox)
                    })
                    .collect();
                if !on.contains(&true) {
                    continue;
                }
                // Lanes `l + d` of `prev ‖ cur` (d < 0) or `cur ‖ next`.
                let (a, b, off) = if d < 0 {
                    (prev, cur, wl + d)
                } else {
                    (cur, next, d)
                };
                let idx: Vec<_> = (0..wl)
                    .map(|l| i32t.const_int((l + off) as u64, false))
                    .collect();
                let shifted =
                    llvm(k.b.build_shuffle_vector(a, b, VectorType::const_vector(&idx), "shift"))?;
                let mask = k.lane_mask(&on);
                let col = llvm(k.b.build_select(mask, shifted, ninf, "col"))?;
                cols.push(col.into_vector_value());
            }
            let out = if cols.is_empty() {
                ninf
            } else {
                tree(&cols, &|a, b| max_step(k, a, b, false))?
            };
            store_lanes(k, op, k.c(o0), out, lanes)?;
            (prev, cur) = (cur, next);
        }
        Ok(())
    }

    /// The output rows `r0 .. r1` whose every kernel row lies in the plane (an interval),
    /// the others to be unrolled; `(0, 0)` when there are none or more than
    /// [`MAX_BORDER_ROWS`] others (all rows then run in the loop with the row test).
    fn inner_rows(&self, oh: i64) -> (i64, i64) {
        let inner =
            |oy: i64| oy * self.sh - self.pt >= 0 && oy * self.sh - self.pt + self.kh <= self.h;
        let (r0, r1) = match (0..oh).find(|&oy| inner(oy)) {
            Some(a) => (a, (a..oh).take_while(|&oy| inner(oy)).count() as i64 + a),
            None => (0, 0),
        };
        if r0 + (oh - r1) > MAX_BORDER_ROWS {
            return (0, 0);
        }
        (r0, r1)
    }

    /// The taps of one kernel row for the `W` output columns from `cols`, in `j` order: the
    /// input row at `at` of the plane `xp`, `sw·W` lanes loaded and every `sw`-th kept;
    /// padded lanes read as −∞ for the max, `+0` for the sum (border vectors only, by
    /// compile-time lane masks), and a tap with no lane in the row left out. Taps `j0 ..
    /// j0 + sw` (`j0` a multiple of `sw`) share one load: tap `j`'s lane `l` is input column
    /// `ix(l, j0) + j − j0`, loaded lane `l·sw + j − j0` (a 3×3/2 window loads 2 wide vectors
    /// per row instead of 3; the same values, so the same bits).
    fn taps<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        xp: PointerValue<'c>,
        at: IntValue<'c>,
        cols: Cols<'c>,
    ) -> R<Vec<VectorValue<'c>>> {
        let wl = w as i64;
        let s = self.sw;
        let (col0, lanes) = cols.at(k, self.ow, wl);
        let i32t = k.ctx.i32_type();
        let fill = if self.is_max { f64::NEG_INFINITY } else { 0.0 };
        // Whether output lane `l` exists and its cell at kernel column `j` lies in the row.
        let inside = |ox0: i64, l: i64, j: i64| {
            let ix = self.ix(ox0 + l, j);
            l < lanes && ix >= 0 && ix < self.w
        };
        let mut taps = Vec::new();
        for j0 in (0..self.kw).step_by(s as usize) {
            let js: Vec<i64> = (j0..(j0 + s).min(self.kw))
                .filter(|&j| match cols {
                    Cols::Border(ox0) => (0..lanes).any(|l| inside(ox0, l, j)),
                    Cols::Clean(_) => true,
                })
                .collect();
            if js.is_empty() {
                continue;
            }
            let base = k.add(k.add(at, k.mul(col0, s)?)?, k.c(j0 - self.pl))?;
            // Per loaded lane `q = l·s + t`: whether its cell (kernel column `j0 + t`) is
            // inside; border vectors only.
            let wide = match cols {
                Cols::Border(ox0) => {
                    let on: Vec<bool> = (0..wl * s)
                        .map(|q| inside(ox0, q / s, j0 + q % s))
                        .collect();
                    k.ldv_lanes_or(xp, base, &on, fill)?
                }
                Cols::Clean(_) => k.ldv(xp, base, (wl * s) as u32)?,
            };
            for j in js {
                taps.push(if s == 1 {
                    wide
                } else {
                    let every: Vec<_> = (0..w)
                        .map(|l| i32t.const_int((l as i64 * s + j - j0) as u64, false))
                        .collect();
                    llvm(k.b.build_shuffle_vector(
                        wide,
                        wide.get_type().get_undef(),
                        VectorType::const_vector(&every),
                        "every",
                    ))?
                });
            }
        }
        Ok(taps)
    }

    /// How the inner rows `r0 .. r1` of a max share their kernel rows' maxima
    /// ([`Self::shared_rows`]), if they do: consecutive windows overlap in rows (`KH > SH`)
    /// and there are at least two such rows; along the rows when a row's carried maxima fit
    /// [`SHARED_ROW_VECTORS`], else down each column vector when the plane fits
    /// [`SHARED_PLANE_BYTES`].
    fn shares_rows(&self, wl: i64, (r0, r1): (i64, i64)) -> Option<Walk> {
        let overlap = self.is_max && self.vectorise(wl) && self.kh > self.sh && r1 - r0 >= 2;
        let nvec = (self.ow + wl - 1) / wl;
        if !overlap {
            None
        } else if nvec * (self.kh - self.sh) <= SHARED_ROW_VECTORS {
            Some(Walk::Rows)
        } else if self.h * self.w * 4 <= SHARED_PLANE_BYTES {
            Some(Walk::Columns)
        } else {
            None
        }
    }

    /// The inner rows `r0 .. r1` of a max pool's plane ([`Self::inner_rows`]), each input
    /// row's maximum over its `KW` taps computed once: output row `oy` reads kernel row `i`
    /// at input row `oy·SH − PT + i`, which output row `oy + 1` reads as its kernel row
    /// `i − SH`, so the last `KH − SH` rows' maxima (and the sums that test them for NaN)
    /// are carried to the next output row (a 3×3/2 pool: two rows reduced per output row
    /// instead of three). The window is then the tree of its rows' maxima, the grouping
    /// [`window_max`] uses, so the same bits; a vector whose taps sum to NaN is recomputed
    /// by [`Row::vector`] and takes the exact step.
    ///
    /// [`Walk::Rows`]: one output row at a time, every column vector of it unrolled, the
    /// row's carried maxima in registers, so each input row is read once, in order (issue
    /// 20: SqueezeNet's 109², GoogLeNet's 112² and Inception v3's 147² 3×3/2 pools, planes
    /// of 46–84 KiB read from L2 or L3 that the column walk read 1.5 times; on the smaller
    /// planes it beat the column walk too, no per-column loop and row set-up).
    /// [`Walk::Columns`]: one column vector at a time down the rows, for rows too wide to
    /// carry in registers (the plane must stay in L1 for the next columns).
    fn shared_rows<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        io: (PointerValue<'c>, PointerValue<'c>),
        (r0, r1): (i64, i64),
        walk: Walk,
    ) -> R<()> {
        let wl = w as i64;
        let (va, vb) = self.clean_run(wl);
        let nvec = (self.ow + wl - 1) / wl;
        let keep = 2 * (self.kh - self.sh) as usize;
        let step = |oy: IntValue<'c>, cols: Cols<'c>, carried: &[BasicValueEnum<'c>]| {
            self.shared_step(k, w, io, oy, cols, carried)
        };
        match walk {
            Walk::Columns => {
                let column = |cols: Cols<'c>| -> R<()> {
                    let init = self.shared_init(k, w, io.0, r0, cols)?;
                    k.loop_carry(r0, r1, 1, init, &mut |oy, c| step(oy, cols, c))?;
                    Ok(())
                };
                if vb > va {
                    k.loop_(va, vb, &mut |v| column(Cols::Clean(k.mul(v, wl)?)))?;
                }
                for v in (0..nvec).filter(|&v| v < va || v >= vb) {
                    column(Cols::Border(v * wl))?;
                }
            }
            Walk::Rows => {
                // Every column vector at a compile-time column; clean ones without masks.
                let all: Vec<Cols<'c>> = (0..nvec)
                    .map(|v| match (va..vb).contains(&v) {
                        true => Cols::Clean(k.c(v * wl)),
                        false => Cols::Border(v * wl),
                    })
                    .collect();
                let mut init = Vec::with_capacity(keep * all.len());
                for &cols in &all {
                    init.extend(self.shared_init(k, w, io.0, r0, cols)?);
                }
                k.loop_carry(r0, r1, 1, init, &mut |oy, carried| {
                    let mut next = Vec::with_capacity(carried.len());
                    for (&cols, c) in all.iter().zip(carried.chunks(keep)) {
                        next.extend(step(oy, cols, c)?);
                    }
                    Ok(next)
                })?;
            }
        }
        Ok(())
    }

    /// A kernel row's maximum over the taps of the `W` output columns from `cols` and the
    /// sum of its taps (−∞ and +0 for a row of no tap), input row at `at`.
    fn reduce_row<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        xp: PointerValue<'c>,
        at: IntValue<'c>,
        cols: Cols<'c>,
    ) -> R<[BasicValueEnum<'c>; 2]> {
        let taps = self.taps(k, w, xp, at, cols)?;
        if taps.is_empty() {
            let ninf = k.splat(k.f(f64::NEG_INFINITY), w)?;
            return Ok([ninf.into(), k.vty(w).const_zero().into()]);
        }
        let m = tree(&taps, &|a, b| max_step(k, a, b, false))?;
        let s = tree(&taps, &|a, b| llvm(k.b.build_float_add(a, b, "nan")))?;
        Ok([m.into(), s.into()])
    }

    /// Input row `oy·SH − PT + i`'s offset in the plane.
    fn row_at<'c>(&self, k: &K<'_, 'c>, oy: IntValue<'c>, i: i64) -> R<IntValue<'c>> {
        k.mul(k.add(k.mul(oy, self.sh)?, k.c(i - self.pt))?, self.w)
    }

    /// The maxima and sums [`Self::shared_rows`] carries into output row `r0`: its first
    /// `KH − SH` kernel rows'.
    fn shared_init<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        xp: PointerValue<'c>,
        r0: i64,
        cols: Cols<'c>,
    ) -> R<Vec<BasicValueEnum<'c>>> {
        let mut init = Vec::new();
        for i in 0..self.kh - self.sh {
            init.extend(self.reduce_row(k, w, xp, self.row_at(k, k.c(r0), i)?, cols)?);
        }
        Ok(init)
    }

    /// Output row `oy` of [`Self::shared_rows`] at the columns `cols`, given the maxima and
    /// sums of its first `KH − SH` kernel rows: its other rows reduced, the window stored,
    /// and the last `KH − SH` rows' maxima and sums returned for output row `oy + 1`.
    fn shared_step<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        (xp, op): (PointerValue<'c>, PointerValue<'c>),
        oy: IntValue<'c>,
        cols: Cols<'c>,
        carried: &[BasicValueEnum<'c>],
    ) -> R<Vec<BasicValueEnum<'c>>> {
        let wl = w as i64;
        let (col0, lanes) = cols.at(k, self.ow, wl);
        let mut rows = carried.to_vec();
        for i in self.kh - self.sh..self.kh {
            rows.extend(self.reduce_row(k, w, xp, self.row_at(k, oy, i)?, cols)?);
        }
        let (maxima, sums): (Vec<_>, Vec<_>) = rows
            .chunks(2)
            .map(|r| (r[0].into_vector_value(), r[1].into_vector_value()))
            .unzip();
        let at = k.add(k.mul(oy, self.ow)?, col0)?;
        let offsets = (0..self.kh)
            .map(|i| Ok((None, self.row_at(k, oy, i)?)))
            .collect::<R<Vec<_>>>()?;
        let row = Row {
            win: self,
            k,
            w,
            xp,
            op,
            oy,
            rows: &offsets,
            cnt_y: k.f(self.kh as f64),
        };
        let any_nan = any_nan(
            k,
            tree(&sums, &|a, b| llvm(k.b.build_float_add(a, b, "nan")))?,
        )?;
        k.if_else(any_nan, &mut |nan| match nan {
            true => row.vector(cols),
            false => store_lanes(
                k,
                op,
                at,
                tree(&maxima, &|a, b| max_step(k, a, b, false))?,
                lanes,
            ),
        })?;
        Ok(rows[2 * self.sh as usize..].to_vec())
    }

    /// The run `va .. vb` of clean vectors in the middle of an output row (a vector is clean
    /// when its first lane's first tap and last lane's last tap are inside).
    fn clean_run(&self, wl: i64) -> (i64, i64) {
        let nvec = (self.ow + wl - 1) / wl;
        let clean: Vec<i64> = (0..nvec).filter(|&v| self.clean(v, wl)).collect();
        match (clean.first(), clean.last()) {
            (Some(&a), Some(&b)) => (a, b + 1),
            _ => (0, 0),
        }
    }

    /// Output row `oy` of one plane (`xp`, `op` at the plane); `inner`: every kernel row of
    /// it lies in the plane ([`Self::inner_rows`]), so no tap needs the row test.
    fn row<'a, 'c>(
        &self,
        k: &K<'a, 'c>,
        w: u32,
        (xp, op): (PointerValue<'c>, PointerValue<'c>),
        oy: IntValue<'c>,
        inner: bool,
    ) -> R<()> {
        let wl = w as i64;
        if !self.vectorise(wl) {
            return self.scalar_row(k, xp, op, oy);
        }
        let by = k.add(k.mul(oy, self.sh)?, k.c(-self.pt))?;
        // Per kernel row: whether it lies in the plane, and its (clamped) offset.
        let mut rows = Vec::new();
        let mut cnt_y = k.f(0.0);
        for i in 0..self.kh {
            let iy = k.add(by, k.c(i))?;
            if inner {
                cnt_y = k.fadd(cnt_y, k.f(1.0))?;
                rows.push((None, k.mul(iy, self.w)?));
                continue;
            }
            let inside = k.in_range(iy, 0, self.h)?;
            let at = k.mul(k.iclamp(iy, 0, self.h - 1)?, self.w)?;
            let counted = if self.include_pad {
                k.in_range(iy, -self.pt, self.h + self.pb)?
            } else {
                inside
            };
            cnt_y = k.fsel(counted, k.fadd(cnt_y, k.f(1.0))?, cnt_y)?;
            rows.push((Some(inside), at));
        }
        let nvec = (self.ow + wl - 1) / wl;
        let (va, vb) = self.clean_run(wl);
        let ctx = Row {
            win: self,
            k,
            w,
            xp,
            op,
            oy,
            rows: &rows,
            cnt_y,
        };
        if vb > va {
            k.loop_(va, vb, &mut |v| ctx.vector(Cols::Clean(k.mul(v, wl)?)))?;
        }
        for v in (0..nvec).filter(|&v| v < va || v >= vb) {
            ctx.vector(Cols::Border(v * wl))?;
        }
        Ok(())
    }
}

/// What every vector of one output row shares.
struct Row<'r, 'k, 'a, 'c> {
    win: &'r Window,
    k: &'k K<'a, 'c>,
    w: u32,
    xp: PointerValue<'c>,
    op: PointerValue<'c>,
    oy: IntValue<'c>,
    /// Per kernel row: whether it lies in the plane (`None`: known to) and its offset.
    rows: &'r [(Option<IntValue<'c>>, IntValue<'c>)],
    cnt_y: FloatValue<'c>,
}

impl<'r, 'k, 'a, 'c> Row<'r, 'k, 'a, 'c> {
    /// The `W` output columns from `cols`: every tap loaded, combined, divided, stored.
    fn vector(&self, cols: Cols<'c>) -> R<()> {
        let (k, win, w) = (self.k, self.win, self.w);
        let wl = w as i64;
        let (col0, lanes) = cols.at(k, win.ow, wl);
        let start = if win.is_max { f64::NEG_INFINITY } else { 0.0 };
        let mut acc = k.splat(k.f(start), w)?;
        // The max's taps per kernel row, with the row's test.
        let mut maxima = Vec::new();
        for &(inside, at) in self.rows {
            let taps = win.taps(k, w, self.xp, at, cols)?;
            if win.is_max {
                if !taps.is_empty() {
                    maxima.push((inside, taps));
                }
                continue;
            }
            for v in taps {
                let next = llvm(k.b.build_float_add(acc, v, "sum"))?;
                // A kernel row outside the plane leaves the window as it was.
                acc = match inside {
                    Some(inside) => {
                        llvm(k.b.build_select(inside, next, acc, "row"))?.into_vector_value()
                    }
                    None => next,
                };
            }
        }
        let at = k.add(k.mul(self.oy, win.ow)?, col0)?;
        let store = |out: VectorValue<'c>| store_lanes(k, self.op, at, out, lanes);
        if win.is_max {
            return window_max(k, w, &maxima, &store);
        }
        let out = {
            // The window's count: its rows' (run-time) times its columns' (per lane).
            let cnt_x: Vec<_> = (0..wl)
                .map(|l| {
                    let n = match cols {
                        // Every tap of a clean lane is inside the row: counted either way.
                        Cols::Clean(_) => win.kw,
                        Cols::Border(ox0) => (0..win.kw)
                            .filter(|&j| {
                                let ix = win.ix(ox0 + l, j);
                                if win.include_pad {
                                    ix >= -win.pl && ix < win.w + win.pr
                                } else {
                                    ix >= 0 && ix < win.w
                                }
                            })
                            .count() as i64,
                    };
                    // Lanes past the row's end are not stored.
                    k.f32t.const_float(if l < lanes { n as f64 } else { 1.0 })
                })
                .collect();
            let cnt = llvm(k.b.build_float_mul(
                k.splat(self.cnt_y, w)?,
                VectorType::const_vector(&cnt_x),
                "cnt",
            ))?;
            llvm(k.b.build_float_div(acc, cnt, "avg"))?
        };
        store(out)
    }
}

/// The first `lanes` lanes of `out` stored at element `at` of `op` (all of them: a plain
/// store).
fn store_lanes<'c>(
    k: &K<'_, 'c>,
    op: PointerValue<'c>,
    at: IntValue<'c>,
    out: VectorValue<'c>,
    lanes: i64,
) -> R<()> {
    if lanes == i64::from(out.get_type().get_size()) {
        k.stv(op, at, out)
    } else {
        k.stv_masked(op, at, out, lanes as u32)
    }
}

/// A window's kernel rows for the max: each row's test of lying in the plane (`None`:
/// known to) and its taps in `(i, j)` order, padded lanes −∞.
type MaxRows<'c> = [(Option<IntValue<'c>>, Vec<VectorValue<'c>>)];

/// The max of a vector of windows, given to `store`, with the reference's bits.
///
/// The reference folds `m ← v if v > m or v is NaN, else m` from −∞ over the window's cells
/// in `(i, j)` order: the result is the last NaN among them if any, else the first of them
/// equal to their maximum (`−0` before `+0` gives `−0`). The same step applied to two
/// consecutive parts' results gives exactly that again, so any grouping that keeps the
/// order (left operands before right ones) gives the fold's bits: the taps are maxed as a
/// balanced tree, rows first, a chain of `log₂` taps instead of one per tap (a −∞ lane is
/// never taken over another value, nor changes one). Without NaNs the step is `v > m ? v :
/// m`, one `vmaxps v, m`; with them it needs a NaN test and a second select (twice the
/// work), so the taps are also summed (one add each: the sum is NaN when a tap is, or for
/// `∞ − ∞`) and only a vector whose sum is NaN takes the exact step.
fn window_max<'c>(
    k: &K<'_, 'c>,
    w: u32,
    rows: &MaxRows<'c>,
    store: &dyn Fn(VectorValue<'c>) -> R<()>,
) -> R<()> {
    let ninf = k.splat(k.f(f64::NEG_INFINITY), w)?;
    if rows.is_empty() {
        // A window with no cell in the plane (an empty input under padding): the reference's
        // start value, −∞.
        return store(ninf);
    }
    let max = |exact: bool| -> R<VectorValue<'c>> {
        let maxima = rows
            .iter()
            .map(|(inside, taps)| {
                let m = tree(taps, &|a, b| max_step(k, a, b, exact))?;
                Ok(match inside {
                    Some(c) => llvm(k.b.build_select(*c, m, ninf, "row"))?.into_vector_value(),
                    None => m,
                })
            })
            .collect::<R<Vec<_>>>()?;
        tree(&maxima, &|a, b| max_step(k, a, b, exact))
    };
    let taps: Vec<VectorValue<'c>> = rows.iter().flat_map(|r| r.1.iter().copied()).collect();
    let sum = tree(&taps, &|a, b| llvm(k.b.build_float_add(a, b, "nan")))?;
    k.if_else(any_nan(k, sum)?, &mut |exact| store(max(exact)?))
}

/// Whether any lane of `sum` (the taps of a vector of windows added) is NaN: a NaN tap, or
/// `∞ − ∞`, which then take the exact step.
fn any_nan<'c>(k: &K<'_, 'c>, sum: VectorValue<'c>) -> R<IntValue<'c>> {
    let nan = llvm(k.b.build_float_compare(FloatPredicate::UNO, sum, sum, "nan"))?;
    let or = k.intrinsic("llvm.vector.reduce.or", &[nan.get_type().into()])?;
    Ok(llvm(k.b.build_call(or, &[nan.into()], "nan"))?
        .try_as_basic_value()
        .basic()
        .ok_or_else(|| crate::CodegenError::Llvm("reduce.or returned no value".into()))?
        .into_int_value())
}

/// Whether the `n` floats from `xp` (a plane) hold a NaN or a `−0`, the two values for
/// which the order of a max's cells matters ([`window_max`]): without them every two cells
/// that tie are the same bits, so a max over the plane may group its cells in any order
/// ([`Window::flat_max_plane`]) and needs no NaN test. One compare per input vector (issue 20: the
/// per-vector NaN test added every tap).
fn plane_needs_order<'c>(k: &K<'_, 'c>, xp: PointerValue<'c>, n: i64, w: u32) -> R<IntValue<'c>> {
    let wl = w as i64;
    let step = ORDER_ACCS * wl;
    let unrolled = n / step * step;
    let whole = n / wl * wl;
    let i32t = k.ctx.i32_type();
    let neg0 = VectorType::const_vector(&vec![i32t.const_int(0x8000_0000, false); w as usize]);
    let flag = |x: VectorValue<'c>| -> R<VectorValue<'c>> {
        let nan = llvm(k.b.build_float_compare(FloatPredicate::UNO, x, x, "nan"))?;
        let bits = llvm(k.b.build_bit_cast(x, i32t.vec_type(w), "bits"))?.into_vector_value();
        let z = llvm(k.b.build_int_compare(IntPredicate::EQ, bits, neg0, "neg0"))?;
        llvm(k.b.build_or(nan, z, "order"))
    };
    let or = |a: VectorValue<'c>, b: VectorValue<'c>| llvm(k.b.build_or(a, b, "order"));
    let none: BasicValueEnum = k.ctx.bool_type().vec_type(w).const_zero().into();
    let accs = k.loop_carry(
        0,
        unrolled,
        step,
        vec![none; ORDER_ACCS as usize],
        &mut |i, cur| {
            (0..ORDER_ACCS)
                .map(|a| {
                    let x = k.ldv(xp, k.add(i, k.c(a * wl))?, w)?;
                    Ok(or(cur[a as usize].into_vector_value(), flag(x)?)?.into())
                })
                .collect()
        },
    )?;
    let accs: Vec<_> = accs.iter().map(|a| a.into_vector_value()).collect();
    let mut acc = tree(&accs, &|a, b| or(a, b))?;
    for at in (unrolled..whole).step_by(w as usize) {
        acc = or(acc, flag(k.ldv(xp, k.c(at), w)?)?)?;
    }
    if whole < n {
        // The lanes past the plane load as +0.
        acc = or(
            acc,
            flag(k.ldv_masked(xp, k.c(whole), w, (n - whole) as u32)?)?,
        )?;
    }
    let any = k.intrinsic("llvm.vector.reduce.or", &[acc.get_type().into()])?;
    Ok(llvm(k.b.build_call(any, &[acc.into()], "order"))?
        .try_as_basic_value()
        .basic()
        .ok_or_else(|| crate::CodegenError::Llvm("reduce.or returned no value".into()))?
        .into_int_value())
}

/// Vector accumulators of [`plane_needs_order`]: independent ors, so that the loads set the
/// pace.
const ORDER_ACCS: i64 = 4;

/// One step of the max: the reference's ([`K::max_nan_of`]) when `exact`, else `v > m ? v :
/// m`, the same when neither is NaN.
fn max_step<'c>(
    k: &K<'_, 'c>,
    m: VectorValue<'c>,
    v: VectorValue<'c>,
    exact: bool,
) -> R<VectorValue<'c>> {
    if exact {
        return Ok(k.max_nan_of(m, v)?.into_vector_value());
    }
    let gt = llvm(k.b.build_float_compare(FloatPredicate::OGT, v, m, "gt"))?;
    Ok(llvm(k.b.build_select(gt, v, m, "max"))?.into_vector_value())
}

/// `v` (not empty) reduced by `op` as a balanced tree that keeps the order.
fn tree<'c>(
    v: &[VectorValue<'c>],
    op: &dyn Fn(VectorValue<'c>, VectorValue<'c>) -> R<VectorValue<'c>>,
) -> R<VectorValue<'c>> {
    match v {
        [] => return Err(crate::CodegenError::Llvm("a max over no taps".into())),
        [x] => return Ok(*x),
        _ => {}
    }
    let (a, b) = v.split_at(v.len() / 2);
    op(tree(a, op)?, tree(b, op)?)
}

/// How many of the cells `b .. b + n` lie in `lo .. hi`, as an `f32` (exact: a small integer).
fn counted<'c>(k: &K<'_, 'c>, b: IntValue<'c>, n: i64, lo: i64, hi: i64) -> R<FloatValue<'c>> {
    let end = k.iclamp(k.add(b, k.c(n))?, lo, hi)?;
    let cnt = llvm(k.b.build_int_sub(end, k.iclamp(b, lo, hi)?, "cnt"))?;
    llvm(k.b.build_signed_int_to_float(cnt, k.f32t, "cntf"))
}

/// Independent vector accumulators per plane (each `W` lanes of `f64`: two AVX-512 registers).
pub(crate) const ACCS: i64 = 2;

/// A global average pool's step over a plane from float `at` of `px`: the vectors at
/// `at + a·W` widened to `f64` and added to the accumulators `cur` (`ACCS` of them, or one
/// after the unrolled part). The static and the run-time-sized kernel share it, so their sums
/// are the same chain.
pub(crate) fn mean_add<'a, 'c>(
    k: &K<'a, 'c>,
    px: PointerValue<'c>,
    at: IntValue<'c>,
    w: u32,
    cur: &[BasicValueEnum<'c>],
) -> R<Vec<BasicValueEnum<'c>>> {
    let dv = k.ctx.f64_type().vec_type(w);
    (0..cur.len() as i64)
        .map(|a| {
            let x = k.ldv(px, k.add(at, k.c(a * w as i64))?, w)?;
            let v = llvm(k.b.build_float_ext(x, dv, "e"))?;
            let c = cur[a as usize].into_vector_value();
            Ok(llvm(k.b.build_float_add(c, v, "s"))?.into())
        })
        .collect()
}

/// The `ACCS` accumulators added in order.
pub(crate) fn mean_fold<'c>(k: &K<'_, 'c>, accs: &[BasicValueEnum<'c>]) -> R<VectorValue<'c>> {
    let mut acc = accs[0].into_vector_value();
    for a in &accs[1..] {
        acc = llvm(k.b.build_float_add(acc, a.into_vector_value(), "s"))?;
    }
    Ok(acc)
}

pub(crate) fn global_avg_pool<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let xd = dims(func, x)?;
    if xd.len() < 2 {
        return Err(unsupported(func, op, "rank below 2"));
    }
    let planes = xd[0] * xd[1];
    let size: i64 = xd[2..].iter().product();
    let args = args_of(func, st, &[x, r])?;
    let w = g.width;
    let wl = w as i64;
    let d = g.ctx.f64_type();
    let dv = d.vec_type(w);
    let step = ACCS * wl;
    let unrolled = size / step * step;
    let whole = size / wl * wl;
    // Planes are independent: cut for threads by whole planes (a memory-bound read).
    let work = crate::parallel::work(
        (planes * size).max(0) as u64,
        4 * (planes * (size + 1)).max(0) as u64,
    );
    let f = g.units_kernel(
        name,
        &args,
        &[false, true],
        planes,
        work,
        &mut |k, ps, p0, count| {
            let (px, po) = (ps[0], ps[1]);
            k.loop_(0, count, &mut |pl| {
                let pl = k.add(pl, p0)?;
                let base = k.mul(pl, size)?;
                let zero: BasicValueEnum = dv.const_zero().into();
                let accs = k.loop_carry(
                    0,
                    unrolled,
                    step,
                    vec![zero; ACCS as usize],
                    &mut |i, cur| mean_add(k, px, k.add(base, i)?, w, cur),
                )?;
                let acc = mean_fold(k, &accs)?;
                let acc = k.loop_carry(unrolled, whole, wl, vec![acc.into()], &mut |i, cur| {
                    mean_add(k, px, k.add(base, i)?, w, cur)
                })?;
                let mut acc = acc[0].into_vector_value();
                if whole < size {
                    let v = k.ldv_masked(px, k.add(base, k.c(whole))?, w, (size - whole) as u32)?;
                    acc = llvm(k.b.build_float_add(
                        acc,
                        llvm(k.b.build_float_ext(v, dv, "e"))?,
                        "s",
                    ))?;
                }
                let mean = k.fdiv(k.lane_sum(acc, w)?, d.const_float(size as f64))?;
                k.st(po, pl, llvm(k.b.build_float_trunc(mean, k.f32t, "t"))?)
            })
        },
    )?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}
