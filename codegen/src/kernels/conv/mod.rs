//! Convolution, by shape: 1×1 with unit strides and no padding is a GEMM per image and group
//! on the micro-kernel; depthwise (one input channel per group) is [`depthwise`]; every other
//! convolution is an implicit-im2col GEMM, row-packed ([`rowpack`]) on images narrow enough
//! for it, else one output row per tile ([`im2col`]).

mod depthwise;
mod geometry;
mod im2col;
mod rowpack;

use super::common::{args_of, dims, unsupported, Call};
use super::gemm::{gemm, Epilogue, Gemm};
use crate::nest::{llvm, R};
use crate::storage::Storage;
use crate::Gen;
use geometry::Conv;
use tir_ir::op::Conv2d;
use tir_ir::{Function, OpData};

pub(crate) fn conv2d<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    c: &Conv2d,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (x, wv, r) = (op.operands[0], op.operands[1], op.results[0]);
    let bias = op.operands.get(2).copied();
    let xd = dims(func, x)?;
    let wd = dims(func, wv)?;
    let od = dims(func, r)?;
    if xd.len() != 4 || wd.len() != 4 || od.len() != 4 {
        return Err(unsupported(func, op, "conv2d needs rank-4 operands"));
    }
    let (n, ci, h, wi) = (xd[0], xd[1], xd[2], xd[3]);
    let (m, cg, kh, kw) = (wd[0], wd[1], wd[2], wd[3]);
    let (oh, ow) = (od[2], od[3]);
    let groups = c.groups as i64;
    let mg = m / groups.max(1);
    let [sh, sw] = c.strides.map(|v| v as i64);
    let [dh, dw] = c.dilations.map(|v| v as i64);
    let (pt, pl) = (c.pads[0] as i64, c.pads[1] as i64);
    let mut vals = vec![x, wv];
    vals.extend(bias);
    vals.push(r);
    let args = args_of(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    let f = g.kernel(name, &args, &writes);
    let k = g.k(f);
    let px = g.param(f, 0)?;
    let pw = g.param(f, 1)?;
    let pb = if bias.is_some() {
        Some(g.param(f, 2)?)
    } else {
        None
    };
    let po = g.param(f, args.len() as u32 - 1)?;
    let pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && c.pads == [0; 4];
    if pointwise {
        // Per image and group: out[M_g, HW] = W[M_g, C_g] · x[C_g, HW] + bias.
        let hw = h * wi;
        k.loop_(0, n, &mut |b| {
            k.loop_(0, groups, &mut |gi| {
                let xo = k.add(k.mul(b, ci * hw)?, k.mul(gi, cg * hw)?)?;
                let oo = k.add(k.mul(b, m * hw)?, k.mul(gi, mg * hw)?)?;
                let wo = k.mul(gi, mg * cg)?;
                let bo = k.mul(gi, mg)?;
                let gm = Gemm {
                    a: k.gep(pw, wo)?,
                    a_rs: cg,
                    a_cs: 1,
                    b: k.gep(px, xo)?,
                    b_rs: hw,
                    c: k.gep(po, oo)?,
                    c_rs: hw,
                    m: mg,
                    n: hw,
                    k: cg,
                };
                let row_bias = match pb {
                    Some(p) => Some(k.gep(p, bo)?),
                    None => None,
                };
                gemm(
                    &k,
                    g.width,
                    &gm,
                    Epilogue {
                        alpha: 1.0,
                        row_bias,
                        act: c.activation,
                    },
                )
            })
        })?;
    } else if cg == 1 {
        let d = depthwise::Depthwise {
            n,
            c: ci,
            h,
            wi,
            m,
            kh,
            kw,
            oh,
            ow,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
            act: c.activation,
        };
        depthwise::emit(&k, g.width, &d, px, pw, pb, po)?;
    } else {
        let d = Conv {
            n,
            c: ci,
            h,
            wi,
            m,
            groups,
            kh,
            kw,
            oh,
            ow,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
            act: c.activation,
        };
        if rowpack::applies(&d, g.width) {
            rowpack::emit(&k, g.width, &d, px, pw, pb, po)?;
        } else {
            im2col::emit(&k, g.width, &d, px, pw, pb, po)?;
        }
    }
    llvm(g.builder.build_return(None))?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}
