//! `matmul` and `gemm`, on the GEMM micro-kernel ([`super::gemm`]).

use super::common::{
    activation, args_of, broadcast, bytes_of, contiguous, dims, strided_kernel, Call, Strided,
};
use super::gemm::{gemm, Epilogue, Gemm};
use crate::nest::{llvm, R};
use crate::parallel::Tiling;
use crate::storage::Storage;
use crate::{Arg, Gen};
use tir_ir::{Activation, Function, OpData};

/// NumPy matmul: a GEMM per broadcast batch index.
pub(crate) fn matmul<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    act: Option<Activation>,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (a, b, r) = (op.operands[0], op.operands[1], op.results[0]);
    let ad = dims(func, a)?;
    let bd = dims(func, b)?;
    let ash = if ad.len() == 1 {
        vec![1, ad[0]]
    } else {
        ad.clone()
    };
    let bsh = if bd.len() == 1 {
        vec![bd[0], 1]
    } else {
        bd.clone()
    };
    let (m, kk) = (ash[ash.len() - 2], ash[ash.len() - 1]);
    let nn = bsh[bsh.len() - 1];
    let (ab, bb) = (&ash[..ash.len() - 2], &bsh[..bsh.len() - 2]);
    let rank = ab.len().max(bb.len());
    let pick = |s: &[i64], i: usize| {
        if i < rank - s.len() {
            1
        } else {
            s[i - (rank - s.len())]
        }
    };
    let batch: Vec<i64> = (0..rank).map(|i| pick(ab, i).max(pick(bb, i))).collect();
    let sa: Vec<i64> = broadcast(ab, &batch).iter().map(|s| s * m * kk).collect();
    let sb: Vec<i64> = broadcast(bb, &batch).iter().map(|s| s * kk * nn).collect();
    let so: Vec<i64> = contiguous(&batch).iter().map(|s| s * m * nn).collect();
    let args = args_of(func, st, &[a, b, r])?;
    let epi = Epilogue {
        alpha: 1.0,
        row_bias: None,
        row_slope: None,
        act,
    };
    if batch.iter().product::<i64>() == 1 {
        // One GEMM (BERT's projections, a fully connected layer): cut for threads.
        let spec = Gemm {
            a: g.ctx.f32_type().ptr_type(Default::default()).get_undef(),
            a_rs: kk,
            a_cs: 1,
            b: g.ctx.f32_type().ptr_type(Default::default()).get_undef(),
            b_rs: nn,
            c: g.ctx.f32_type().ptr_type(Default::default()).get_undef(),
            c_rs: nn,
            m,
            n: nn,
            k: kk,
        };
        return Ok(vec![tiled_gemm(g, name, &args, spec, epi)?]);
    }
    // The batch's GEMMs are independent: cut for threads by whole GEMMs (attention's heads),
    // each computed by the same micro-kernel whatever the cut.
    let units: i64 = batch.iter().product();
    let work = crate::parallel::work(
        2 * (units * m * nn * kk).max(0) as u64,
        4 * (units * (m * kk + kk * nn + m * nn)).max(0) as u64,
    );
    let f = g.units_kernel(
        name,
        &args,
        &[false, false, true],
        units,
        work,
        &mut |k, ps, u0, count| {
            let (pa, pb, po) = (ps[0], ps[1], ps[2]);
            k.loop_(0, count, &mut |u| {
                // The GEMM's batch index, row-major over `batch`, and each operand's offset.
                let mut rest = k.add(u, u0)?;
                let mut offs = [k.c(0), k.c(0), k.c(0)];
                for d in (0..rank).rev() {
                    let i = llvm(k.b.build_int_signed_rem(rest, k.c(batch[d]), "i"))?;
                    rest = llvm(k.b.build_int_signed_div(rest, k.c(batch[d]), "q"))?;
                    for (o, s) in offs.iter_mut().zip([&sa, &sb, &so]) {
                        *o = k.add(*o, k.mul(i, s[d])?)?;
                    }
                }
                let gm = Gemm {
                    a: k.gep(pa, offs[0])?,
                    a_rs: kk,
                    a_cs: 1,
                    b: k.gep(pb, offs[1])?,
                    b_rs: nn,
                    c: k.gep(po, offs[2])?,
                    c_rs: nn,
                    m,
                    n: nn,
                    k: kk,
                };
                gemm(k, g.width, &gm, epi)
            })
        },
    )?;
    Ok(vec![(f, args.iter().map(|a| a.loc).collect())])
}

/// ONNX Gemm: the micro-kernel (or dot products when B is computed and transposed), then
/// `+ beta * C` and the activation as a second kernel.
pub(crate) fn gemm_op<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    gm: &tir_ir::op::Gemm,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let (a, b, r) = (op.operands[0], op.operands[1], op.results[0]);
    let cin = op.operands.get(2).copied();
    let od = dims(func, r)?;
    let ad = dims(func, a)?;
    let bd = dims(func, b)?;
    let (m, n) = (od[0], od[1]);
    let kk = if gm.trans_a { ad[0] } else { ad[1] };
    let b_pre_transposed = gm.trans_b && st.transposed.contains(&b);
    let _ = bd;
    let args = args_of(func, st, &[a, b, r])?;
    // With C, the activation waits for `+ beta * C` (a second, element-wise kernel).
    let act = if cin.is_some() { None } else { gm.activation };
    let mut calls = Vec::new();
    if gm.trans_b && !b_pre_transposed {
        // B is computed, so no contiguous B row for the micro-kernel: dot products instead.
        let a3 = [args[0], args[1], args[2]];
        let alpha = gm.alpha as f32 as f64;
        calls.push(gemm_nt(g, &a3, (m, n, kk), gm.trans_a, alpha, act, name)?);
    } else {
        let undef = g.ctx.f32_type().ptr_type(Default::default()).get_undef();
        let spec = Gemm {
            a: undef,
            a_rs: if gm.trans_a { 1 } else { kk },
            a_cs: if gm.trans_a { m } else { 1 },
            b: undef,
            b_rs: n,
            c: undef,
            c_rs: n,
            m,
            n,
            k: kk,
        };
        let epi = Epilogue {
            alpha: gm.alpha as f32 as f64,
            row_bias: None,
            row_slope: None,
            act,
        };
        calls.push(tiled_gemm(g, name, &args, spec, epi)?);
    }
    if let Some(cv) = cin {
        let cd = dims(func, cv)?;
        let beta = gm.beta as f32 as f64;
        let act = gm.activation;
        let out = Strided {
            loc: st.of(func, r)?,
            bytes: bytes_of(&od),
            strides: contiguous(&od),
            base: 0,
        };
        calls.push(strided_kernel(
            g,
            &format!("{name}_c"),
            &od,
            out.clone(),
            vec![
                out,
                Strided {
                    loc: st.of(func, cv)?,
                    bytes: bytes_of(&cd),
                    strides: broadcast(&cd, &od),
                    base: 0,
                },
            ],
            &move |k, v| activation(k, act, k.fma(k.f(beta), v[1], v[0])?),
        )?);
    }
    Ok(calls)
}

/// Gemm whose B is transposed but not a weight (a computed `[N, K]` tensor): each output
/// element is a dot product of a row of A and a row of B, both contiguous along K (A unless
/// `trans_a`), summed in `f32` in K order as the interpreter does; `alpha` and, without C,
/// the activation in the epilogue.
#[allow(clippy::too_many_arguments)]
fn gemm_nt<'a, 'c>(
    g: &Gen<'a, 'c>,
    args: &[Arg; 3],
    (m, n, kk): (i64, i64, i64),
    trans_a: bool,
    alpha: f64,
    act: Option<Activation>,
    name: &str,
) -> R<Call<'c>> {
    let f = g.kernel(name, args, &[false, false, true]);
    let k = g.k(f);
    let (pa, pb, po) = (g.param(f, 0)?, g.param(f, 1)?, g.param(f, 2)?);
    let (a_rs, a_cs) = if trans_a { (1, m) } else { (kk, 1) };
    k.loop_(0, m, &mut |i| {
        let ar = k.mul(i, a_rs)?;
        k.loop_(0, n, &mut |j| {
            let br = k.mul(j, kk)?;
            let acc = k.loop_carry(0, kk, 1, vec![k.f(0.0).into()], &mut |l, cur| {
                let av = k.ld(pa, k.add(ar, k.mul(l, a_cs)?)?)?;
                let bv = k.ld(pb, k.add(br, l)?)?;
                let p = k.fmul(av, bv)?;
                Ok(vec![k.fadd(cur[0].into_float_value(), p)?.into()])
            })?;
            let v = k.fmul(k.f(alpha), acc[0].into_float_value())?;
            let v = activation(&k, act, v)?;
            k.st(po, k.add(k.mul(i, n)?, j)?, v)
        })
    })?;
    llvm(g.builder.build_return(None))?;
    Ok((f, args.iter().map(|a| a.loc).collect()))
}

/// A kernel computing the GEMM `spec` (its pointers are replaced by the kernel's parameters
/// A, B, C), cut for threads ([`crate::parallel`]) into chunks of whole column blocks of the
/// micro-kernel when N is the larger side (each tile re-reads A), else chunks of rows (each
/// re-reads B).
fn tiled_gemm<'a, 'c>(
    g: &Gen<'a, 'c>,
    name: &str,
    args: &[Arg],
    spec: Gemm<'c>,
    epi: Epilogue<'c>,
) -> R<Call<'c>> {
    let flops = 2 * (spec.m * spec.n * spec.k) as u64;
    let bytes = 4 * (spec.m * spec.k + spec.k * spec.n + spec.m * spec.n).max(0) as u64;
    let work = crate::parallel::work(flops, bytes);
    let min_flops = g.min_tile_flops;
    let by_columns = spec.n >= spec.m;
    let tiling = if by_columns {
        let nv = crate::kernels::gemm::wide(g.width).1 as i64;
        Tiling::new(1, spec.n, nv * g.width as i64, work, min_flops)
    } else {
        Tiling::new(
            1,
            spec.m,
            crate::kernels::gemm::acc_regs(g.width),
            work,
            min_flops,
        )
    };
    let writes = [false, false, true];
    let f = if tiling.is_parallel() {
        g.tiled_kernel(name, args, &writes, tiling.tiles())
    } else {
        g.kernel(name, args, &writes)
    };
    let k = g.k(f);
    let (pa, pb, pc) = (g.param(f, 0)?, g.param(f, 1)?, g.param(f, 2)?);
    let whole = Gemm {
        a: pa,
        b: pb,
        c: pc,
        ..spec
    };
    if !tiling.is_parallel() {
        gemm(&k, g.width, &whole, epi)?;
    } else {
        g.for_tiles(&k, f, 3, tiling, &mut |_, u0, units| {
            let sub = if by_columns {
                Gemm {
                    b: k.gep(pb, u0)?,
                    c: k.gep(pc, u0)?,
                    n: units,
                    ..whole
                }
            } else {
                Gemm {
                    a: k.gep(pa, k.mul(u0, whole.a_rs)?)?,
                    c: k.gep(pc, k.mul(u0, whole.c_rs)?)?,
                    m: units,
                    ..whole
                }
            };
            gemm(&k, g.width, &sub, epi)
        })?;
    }
    llvm(g.builder.build_return(None))?;
    Ok((f, args.iter().map(|a| a.loc).collect()))
}
