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
//! constants), so the path is taken only when the image has at most [`MAX_VECTORS`] of
//! them; the channel-tile loop stays a runtime loop.

use super::geometry::Conv;
use crate::kernels::common::{activation, vector_registers};
use crate::nest::{llvm, K, R};
use inkwell::types::VectorType;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue, VectorValue};
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

/// Whether the row-packed kernel handles `d` with vectors of `w` lanes.
pub fn applies(d: &Conv, w: u32) -> bool {
    let w = w as i64;
    d.oh >= 1 && d.ow >= 1 && (grid(d) + w - 1) / w <= MAX_VECTORS
}

/// Emits the kernel body at the builder's position; `pb` is the optional bias.
pub fn emit<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    d: &Conv,
    px: PointerValue<'c>,
    pw: PointerValue<'c>,
    pb: Option<PointerValue<'c>>,
    po: PointerValue<'c>,
) -> R<()> {
    let cg = d.c / d.groups;
    let mg = d.m / d.groups;
    let wl = w as i64;
    let (mr, nv_max) = tile(w);
    let nvec = (grid(d) + wl - 1) / wl;
    // Balanced pixel tiles: as few as NV allows, sizes differing by at most one vector.
    let ntiles = (nvec + nv_max - 1) / nv_max;
    let tiles: Vec<(i64, i64)> = (0..ntiles)
        .map(|t| {
            let v0 = t * nvec / ntiles;
            (v0, (t + 1) * nvec / ntiles - v0)
        })
        .collect();
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
                gw: grid_width(d),
                x: k.gep(
                    px,
                    k.mul(k.add(k.mul(b, d.c)?, k.mul(gi, cg)?)?, d.h * d.wi)?,
                )?,
                o: k.gep(
                    po,
                    k.mul(k.add(k.mul(b, d.m)?, k.mul(gi, mg)?)?, d.oh * d.ow)?,
                )?,
                wt: k.gep(pw, k.mul(gi, mg * cg * d.kh * d.kw)?)?,
                bias: match pb {
                    Some(p) => Some(k.gep(p, k.mul(gi, mg)?)?),
                    None => None,
                },
            };
            let mfull = mg / mr * mr;
            let channels = |ts: &[(i64, i64)]| -> R<()> {
                k.loop_step(0, mfull, mr, &mut |m0| {
                    for &(v0, nv) in ts {
                        img.tile(m0, mr, v0, nv)?;
                    }
                    Ok(())
                })?;
                if mfull < mg {
                    for &(v0, nv) in ts {
                        img.tile(k.c(mfull), mg - mfull, v0, nv)?;
                    }
                }
                Ok(())
            };
            if pixels_outer {
                for t in &tiles {
                    channels(std::slice::from_ref(t))?;
                }
                Ok(())
            } else {
                channels(&tiles)
            }
        })
    })
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
    gw: i64,
    x: PointerValue<'c>,
    o: PointerValue<'c>,
    wt: PointerValue<'c>,
    bias: Option<PointerValue<'c>>,
}

impl<'k, 'a, 'c> Img<'k, 'a, 'c> {
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
        let d = self.d;
        let wl = self.w as i64;
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
            let wide = k.ldv_lanes(self.x, k.add(xc, k.c(ld.at))?, &ld.wide)?;
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

    /// `mr` output channels from `m0` × grid vectors `v0..v0 + nv`.
    fn tile(&self, m0: IntValue<'c>, mr: i64, v0: i64, nv: i64) -> R<()> {
        let (k, d, w) = (self.k, self.d, self.w);
        let wl = w as i64;
        let taps = d.kh * d.kw;
        let nvu = nv as usize;
        // Per tap and vector: the compile-time loads (None when no lane reads inside the
        // image); taps no lane of the tile reads are dropped.
        let mut plan: Vec<(i64, Vec<Option<Vec<Load>>>)> = Vec::new();
        for i in 0..d.kh {
            for j in 0..d.kw {
                let per: Vec<Option<Vec<Load>>> = (v0..v0 + nv)
                    .map(|v| {
                        let loads = self.tap_loads(v, i, j);
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
                        let a = k.splat(k.ld(self.wt, k.add(wr, wt)?)?, w)?;
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
            let bias = match self.bias {
                Some(p) => k.splat(k.ld(p, m)?, w)?,
                None => k.vty(w).const_zero(),
            };
            let plane = k.mul(m, d.oh * d.ow)?;
            for v in 0..nv {
                let a = acc[(r * nv + v) as usize].into_vector_value();
                let y = self.epilogue(llvm(k.b.build_float_add(a, bias, "b"))?)?;
                // One store per output row the vector touches: lanes of row `oy` go to
                // `oy·OW + g = q − oy·(Wi − OW)`.
                let q0 = (v0 + v) * wl;
                let mut rows: Vec<(i64, Vec<bool>)> = Vec::new();
                for l in 0..wl {
                    if let Some((oy, _)) = self.point(q0 + l) {
                        let shift = oy * (self.gw - d.ow);
                        match rows.iter_mut().find(|(s, _)| *s == shift) {
                            Some((_, on)) => on[l as usize] = true,
                            None => {
                                let mut on = vec![false; w as usize];
                                on[l as usize] = true;
                                rows.push((shift, on));
                            }
                        }
                    }
                }
                for (shift, on) in rows {
                    let at = k.add(plane, k.c(q0 - shift))?;
                    if on.iter().all(|&b| b) {
                        k.stv(self.o, at, y)?;
                    } else {
                        store_lanes(k, self.o, at, y, &on)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The fused activation on a vector: ReLU as a vector max, the others lane by lane
    /// through the scalar definitions the other kernels share.
    fn epilogue(&self, a: VectorValue<'c>) -> R<VectorValue<'c>> {
        let k = self.k;
        match self.d.act {
            None => Ok(a),
            Some(tir_ir::Activation::Relu) => {
                let z = a.get_type().const_zero();
                let neg = llvm(k.b.build_float_compare(inkwell::FloatPredicate::OLT, a, z, "neg"))?;
                Ok(llvm(k.b.build_select(neg, z, a, "relu"))?.into_vector_value())
            }
            act => {
                let mut out = a.get_type().get_undef();
                for l in 0..self.w {
                    let y = activation(k, act, k.lane(a, l)?)?;
                    out = llvm(k.b.build_insert_element(
                        out,
                        y,
                        k.ctx.i32_type().const_int(l.into(), false),
                        "o",
                    ))?;
                }
                Ok(out)
            }
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
