//! What every kernel family builds on: the extents and storage of values, the strided loop
//! nest that is the whole kernel of every element-wise op and copy ([`strided_kernel`]), and
//! the fused activations. It imports no kernel family: the families import it, and never one
//! another's internals.

use crate::nest::{llvm, K, R};
use crate::parallel::Tiling;
use crate::storage::{Loc, Storage};
use crate::{Arg, CodegenError, Gen};
use inkwell::values::{BasicValue, FloatValue, FunctionValue, IntValue, PointerValue, VectorValue};
use inkwell::FloatPredicate;
use tir_ir::{Activation, Function, OpData, Value};

/// A kernel function and the storage of its arguments, in order: one call of the entry point.
pub(crate) type Call<'ctx> = (FunctionValue<'ctx>, Vec<Loc>);

/// An operand of a strided loop nest: where it is, how many bytes it spans, and its element
/// strides over the iteration shape plus a base element offset.
#[derive(Clone, Debug)]
pub(crate) struct Strided {
    pub loc: Loc,
    pub bytes: u64,
    pub strides: Vec<i64>,
    pub base: i64,
}

pub(crate) type ScalarFn<'f> =
    &'f dyn for<'a, 'c> Fn(&K<'a, 'c>, &[FloatValue<'c>]) -> R<FloatValue<'c>>;

/// A `floats`-float, 64-byte-aligned buffer on the kernel's stack, allocated in its entry
/// block (so once per call, whatever loop the builder is in; each thread's on its own stack).
pub(crate) fn entry_scratch<'a, 'c>(k: &K<'a, 'c>, floats: i64, name: &str) -> R<PointerValue<'c>> {
    let entry = k
        .func
        .get_first_basic_block()
        .ok_or_else(|| CodegenError::Llvm("kernel without an entry block".into()))?;
    let b = k.ctx.create_builder();
    match entry.get_first_instruction() {
        Some(i) => b.position_before(&i),
        None => b.position_at_end(entry),
    }
    let p = llvm(b.build_array_alloca(k.f32t, k.c(floats), name))?;
    if let Some(inst) = p.as_instruction_value() {
        llvm(inst.set_alignment(64))?;
    }
    Ok(p)
}

pub(crate) fn dims(func: &Function, v: Value) -> R<Vec<i64>> {
    func.ty(v)
        .map(|t| t.shape.iter().map(|&d| d as i64).collect())
        .ok_or_else(|| CodegenError::NoStorage(func.value_name(v)))
}

pub(crate) fn contiguous(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![0; shape.len()];
    let mut acc = 1;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc *= shape[d];
    }
    s
}

/// NumPy broadcasting: strides of `shape` read over `target` (0 on broadcast axes).
pub(crate) fn broadcast(shape: &[i64], target: &[i64]) -> Vec<i64> {
    let own = contiguous(shape);
    let off = target.len() - shape.len().min(target.len());
    (0..target.len())
        .map(|d| {
            if d < off {
                0
            } else {
                let k = d - off;
                if shape[k] == 1 && target[d] != 1 {
                    0
                } else {
                    own[k]
                }
            }
        })
        .collect()
}

/// The kernel arguments for `vals`: each one's storage and byte size.
pub(crate) fn args_of(func: &Function, st: &Storage, vals: &[Value]) -> R<Vec<Arg>> {
    vals.iter()
        .map(|&v| {
            Ok(Arg {
                loc: st.of(func, v)?,
                bytes: bytes_of(&dims(func, v)?),
            })
        })
        .collect()
}

pub(crate) fn bytes_of(shape: &[i64]) -> u64 {
    shape.iter().product::<i64>().max(0) as u64 * 4
}

/// `v` walked contiguously over its own shape.
pub(crate) fn full(func: &Function, st: &Storage, v: Value) -> R<Strided> {
    let d = dims(func, v)?;
    Ok(Strided {
        loc: st.of(func, v)?,
        bytes: bytes_of(&d),
        strides: contiguous(&d),
        base: 0,
    })
}

/// `v` read over `target` with NumPy broadcasting.
pub(crate) fn over(func: &Function, st: &Storage, v: Value, target: &[i64]) -> R<Strided> {
    let d = dims(func, v)?;
    Ok(Strided {
        loc: st.of(func, v)?,
        bytes: bytes_of(&d),
        strides: broadcast(&d, target),
        base: 0,
    })
}

/// The op's first result and its extents.
pub(crate) fn result(func: &Function, op: &OpData) -> R<(Value, Vec<i64>)> {
    let r = op
        .results
        .first()
        .copied()
        .ok_or_else(|| unsupported(func, op, "no result"))?;
    Ok((r, dims(func, r)?))
}

/// Merges adjacent dimensions that every operand walks contiguously; drops unit dimensions.
pub(crate) fn collapse(shape: &[i64], ops: &mut [&mut Vec<i64>]) -> Vec<i64> {
    let mut out_shape: Vec<i64> = Vec::new();
    let mut out: Vec<Vec<i64>> = vec![Vec::new(); ops.len()];
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let merge = !out_shape.is_empty()
            && ops.iter().enumerate().all(|(i, s)| {
                let last = *out[i].last().unwrap_or(&0);
                last == s[d] * shape[d]
            });
        if merge {
            let n = out_shape.len() - 1;
            out_shape[n] *= shape[d];
            for (i, s) in ops.iter().enumerate() {
                let k = out[i].len() - 1;
                out[i][k] = s[d];
            }
        } else {
            out_shape.push(shape[d]);
            for (i, s) in ops.iter().enumerate() {
                out[i].push(s[d]);
            }
        }
    }
    for (i, s) in ops.iter_mut().enumerate() {
        **s = std::mem::take(&mut out[i]);
    }
    out_shape
}

/// Nested counted loops over `shape`; the body gets each stride set's element index.
pub(crate) fn nest<'a, 'c>(
    k: &K<'a, 'c>,
    shape: &[i64],
    sets: &[(&[i64], i64)],
    body: &mut dyn FnMut(&[IntValue<'c>]) -> R<()>,
) -> R<()> {
    fn rec<'a, 'c>(
        k: &K<'a, 'c>,
        shape: &[i64],
        sets: &[(&[i64], i64)],
        ivs: &mut Vec<IntValue<'c>>,
        body: &mut dyn FnMut(&[IntValue<'c>]) -> R<()>,
    ) -> R<()> {
        if ivs.len() == shape.len() {
            let mut idx = Vec::with_capacity(sets.len());
            for (s, base) in sets {
                idx.push(k.index(*base, ivs, s)?);
            }
            return body(&idx);
        }
        let n = shape[ivs.len()];
        k.loop_(0, n, &mut |iv| {
            ivs.push(iv);
            let r = rec(k, shape, sets, ivs, body);
            ivs.pop();
            r
        })
    }
    rec(k, shape, sets, &mut Vec::new(), body)
}

/// A kernel `out[...] = f(ins[...])` over `shape`, the dimensions that every operand walks
/// contiguously merged (see [`collapse`]) so that LLVM vectorises the innermost loop.
pub(crate) fn strided_kernel<'a, 'c>(
    g: &Gen<'a, 'c>,
    name: &str,
    shape: &[i64],
    out: Strided,
    ins: Vec<Strided>,
    f: ScalarFn,
) -> R<Call<'c>> {
    strided_body(g, name, shape, out, ins, Some(f))
}

/// [`strided_kernel`] copying `from` into `out`: where the innermost dimension reads every
/// second to fourth element into consecutive ones (a slice with steps, ResNet's strided
/// shortcuts), its rows are moved by [`every_row`] instead of the scalar loop, which LLVM 14
/// vectorises with `vgatherqps` (8 lanes per gather).
pub(crate) fn strided_copy<'a, 'c>(
    g: &Gen<'a, 'c>,
    name: &str,
    shape: &[i64],
    out: Strided,
    from: Strided,
) -> R<Call<'c>> {
    strided_body(g, name, shape, out, vec![from], None)
}

/// Inner rows [`every_row`] takes: at most this many vectors, unrolled.
const EVERY_ROW_VECTORS: i64 = 4;

/// A row of `n` elements of `from` at `at`, `s` apart, into consecutive ones of `to` at
/// `out_at`: per `w`-lane vector, `s·w` consecutive lanes loaded (masked past the row's last
/// element, so nothing outside it is read) and every `s`-th kept — the gather of the packed
/// convolution panels ([`crate::nest::K::every`]). Values are moved, not computed, so the
/// bits are the scalar loop's.
#[allow(clippy::too_many_arguments)]
fn every_row<'a, 'c>(
    k: &K<'a, 'c>,
    w: u32,
    from: PointerValue<'c>,
    at: IntValue<'c>,
    to: PointerValue<'c>,
    out_at: IntValue<'c>,
    n: i64,
    s: i64,
) -> R<()> {
    let wl = w as i64;
    for v in 0..(n + wl - 1) / wl {
        let lanes = (n - v * wl).min(wl);
        let on: Vec<bool> = (0..wl * s).map(|q| q <= (lanes - 1) * s).collect();
        let wide = k.ldv_lanes(from, k.add(at, k.c(v * wl * s))?, &on)?;
        let val = k.every(wide, s, w)?;
        let o = k.add(out_at, k.c(v * wl))?;
        if lanes == wl {
            k.stv(to, o, val)?;
        } else {
            k.stv_masked(to, o, val, lanes as u32)?;
        }
    }
    Ok(())
}

/// [`strided_kernel`] with `f`, or (`None`) a copy of the one operand, whose rows with inner
/// steps go to [`every_row`].
fn strided_body<'a, 'c>(
    g: &Gen<'a, 'c>,
    name: &str,
    shape: &[i64],
    out: Strided,
    ins: Vec<Strided>,
    f: Option<ScalarFn>,
) -> R<Call<'c>> {
    let copy = f.is_none();
    let f = f.unwrap_or(&|_, v| Ok(v[0]));
    let mut all: Vec<Strided> = ins;
    all.push(out);
    let mut strides: Vec<Vec<i64>> = all.iter().map(|s| s.strides.clone()).collect();
    let shape = {
        let mut refs: Vec<&mut Vec<i64>> = strides.iter_mut().collect();
        collapse(shape, &mut refs)
    };
    // An operand read in place (the output's storage, strides and start) is read through the
    // output's pointer, not a parameter of its own: with two pointers to the same bytes the
    // kernel's parameters may not be `noalias`, and LLVM's vectoriser, unless the call is
    // inlined where it sees both offsets, guards the loop with a run-time overlap check that
    // an op in place always fails, running the scalar loop (face_landmark's 32×48×48 PReLUs
    // took 42 µs instead of 6, issue 22). Read at the same index as the store, the element is
    // loaded before it is overwritten, as in the reference.
    let last = all.len() - 1;
    let in_place: Vec<bool> = (0..all.len())
        .map(|i| {
            i < last
                && all[i].loc == all[last].loc
                && all[i].base == all[last].base
                && strides[i] == strides[last]
        })
        .collect();
    // The kernel's parameters: the operands not read in place, then the output.
    let params: Vec<usize> = (0..all.len()).filter(|&i| !in_place[i]).collect();
    let args: Vec<Arg> = params
        .iter()
        .map(|&i| Arg {
            loc: all[i].loc,
            bytes: all[i].bytes,
        })
        .collect();
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    // Cut for threads along the outermost merged dimension (whole rows of the inner loops, so
    // each element is computed by the same loop whatever the cut), or, when everything merged
    // into one dimension, in chunks of 64 elements (whole vectors of the vectorised loop).
    // Element-wise ops are memory-bound: their work is their traffic ([`crate::parallel::work`]).
    let elements: i64 = shape.iter().product();
    let bytes = 4 * elements.max(0) as u64 * all.len() as u64;
    let tiling = match shape.first() {
        Some(&units) if units > 1 => Some(Tiling::new(
            1,
            units,
            if shape.len() > 1 { 1 } else { 64 },
            crate::parallel::work(elements.max(0) as u64, bytes),
            g.min_tile_flops,
        )),
        _ => None,
    }
    .filter(|t| t.is_parallel());
    let func = match tiling {
        Some(t) => g.tiled_kernel(name, &args, &writes, t.tiles()),
        None => g.kernel(name, &args, &writes),
    };
    let k = g.k(func);
    let ptrs: Vec<PointerValue> = {
        let own: Vec<PointerValue> = (0..args.len() as u32)
            .map(|i| g.param(func, i))
            .collect::<R<_>>()?;
        (0..all.len())
            .map(|i| {
                let j = if in_place[i] { last } else { i };
                own[params
                    .iter()
                    .position(|&p| p == j)
                    .unwrap_or(args.len() - 1)]
            })
            .collect()
    };
    let sets: Vec<(&[i64], i64)> = strides
        .iter()
        .zip(&all)
        .map(|(s, a)| (s.as_slice(), a.base))
        .collect();
    let n = all.len();
    // A copy whose inner rows (not the dimension the threads cut) read `s`-strided elements
    // into consecutive ones: the outer dimensions as loops, each row by `every_row`.
    let every = match (strides[0].last(), strides[n - 1].last(), shape.last()) {
        (Some(&s), Some(&1), Some(&row))
            if copy
                && shape.len() >= 2
                && (2..=4).contains(&s)
                && (1..=EVERY_ROW_VECTORS * g.width as i64).contains(&row) =>
        {
            Some((s, row))
        }
        _ => None,
    };
    let outer: Vec<(&[i64], i64)> = sets
        .iter()
        .map(|&(s, b)| (&s[..s.len().saturating_sub(1)], b))
        .collect();
    let elementwise = |ptrs: &[PointerValue<'c>], shape: &[i64]| {
        if let Some((s, row)) = every {
            let rows = &shape[..shape.len() - 1];
            return nest(&k, rows, &outer, &mut |idx| {
                every_row(
                    &k,
                    g.width,
                    ptrs[0],
                    idx[0],
                    ptrs[n - 1],
                    idx[n - 1],
                    row,
                    s,
                )
            });
        }
        nest(&k, shape, &sets, &mut |idx| {
            let mut vals = Vec::with_capacity(n - 1);
            for i in 0..n - 1 {
                vals.push(k.ld(ptrs[i], idx[i])?);
            }
            let v = f(&k, &vals)?;
            k.st(ptrs[n - 1], idx[n - 1], v)
        })
    };
    match tiling {
        None => elementwise(&ptrs, &shape)?,
        Some(t) => g.for_tiles(&k, func, args.len() as u32, t, &mut |_, u0, units| {
            // The tile's operands start `u0` steps along the outer dimension.
            let moved: Vec<PointerValue<'c>> = ptrs
                .iter()
                .zip(&strides)
                .map(|(&p, s)| k.gep(p, k.mul(u0, s[0])?))
                .collect::<R<_>>()?;
            let mut sub = shape.clone();
            sub[0] = units;
            elementwise(&moved, &sub)
        })?,
    }
    llvm(g.builder.build_return(None))?;
    Ok((func, args.iter().map(|a| a.loc).collect()))
}

/// `a` applied to `x` (none: `x`), as the reference applies a fused activation.
pub(crate) fn activation<'a, 'c>(
    k: &K<'a, 'c>,
    a: Option<Activation>,
    x: FloatValue<'c>,
) -> R<FloatValue<'c>> {
    match a {
        None => Ok(x),
        Some(Activation::Relu) => k.select_lt(x, k.f(0.0), k.f(0.0), x),
        Some(Activation::Relu6) => k.clip(x, 0.0, 6.0),
        Some(Activation::ReluN1To1) => k.clip(x, -1.0, 1.0),
        Some(Activation::Tanh) => k.tanh(x),
        Some(Activation::Sigmoid) => sigmoid(k, x),
        Some(Activation::HardSwish) => {
            let t = k.clip(k.fadd(x, k.f(3.0))?, 0.0, 6.0)?;
            k.fdiv(k.fmul(x, t)?, k.f(6.0))
        }
    }
}

pub(crate) fn sigmoid<'a, 'c>(k: &K<'a, 'c>, x: FloatValue<'c>) -> R<FloatValue<'c>> {
    let e = k.exp(llvm(k.b.build_float_neg(x, "n"))?)?;
    k.fdiv(k.f(1.0), k.fadd(k.f(1.0), e)?)
}

pub(crate) fn unsupported(func: &Function, op: &OpData, why: &str) -> CodegenError {
    CodegenError::Unsupported {
        op: op.op.name(),
        value: op
            .results
            .first()
            .map(|&r| func.value_name(r))
            .unwrap_or_default(),
        why: why.into(),
    }
}

/// Vector registers of the target's widest class: AVX-512's 32 (zmm0–31) when vectors hold 16
/// f32 lanes, otherwise x86-64's 16 (ymm0–15 with AVX, xmm0–15 with SSE). Register tiles are
/// sized from it: a tile with more accumulators than the file holds spills on every K step
/// (on an AVX2 machine, AVX-512's 6 × 4 GEMM tile ran MobileNet v2's 1×1 layers at half speed).
pub(crate) fn vector_registers(w: u32) -> i64 {
    if w >= 16 {
        32
    } else {
        16
    }
}

/// A fused PReLU's slope (a conv2d's last operand, docs/ir.md): one value per output
/// channel, indexed as the bias is, or one value for every channel (`per_channel` false:
/// every channel reads element 0).
#[derive(Clone, Copy)]
pub(crate) struct Slope<'c> {
    pub p: PointerValue<'c>,
    pub per_channel: bool,
}

impl<'c> Slope<'c> {
    /// The slopes of the channels from `at` on, as `gep(bias, at)` is their biases.
    pub fn at<'a>(self, k: &K<'a, 'c>, at: IntValue<'c>) -> R<Slope<'c>> {
        Ok(if self.per_channel {
            Slope {
                p: k.gep(self.p, at)?,
                ..self
            }
        } else {
            self
        })
    }

    /// The slope of channel `ch` (relative to where `self` starts).
    pub fn load<'a>(self, k: &K<'a, 'c>, ch: IntValue<'c>) -> R<FloatValue<'c>> {
        k.ld(self.p, if self.per_channel { ch } else { k.c(0) })
    }
}

/// `x < 0 ? a·x : x`, the bits of the `prelu` kernel on the unfused result.
pub(crate) fn prelu<'a, 'c>(
    k: &K<'a, 'c>,
    a: FloatValue<'c>,
    x: FloatValue<'c>,
) -> R<FloatValue<'c>> {
    let m = k.fmul(a, x)?;
    k.select_lt(x, k.f(0.0), m, x)
}

/// [`prelu`] on every lane of `x`, the slope `a` the same for all.
pub(crate) fn prelu_vec<'a, 'c>(
    k: &K<'a, 'c>,
    a: FloatValue<'c>,
    x: VectorValue<'c>,
) -> R<VectorValue<'c>> {
    let w = x.get_type().get_size();
    let av = k.splat(a, w)?;
    let m = llvm(k.b.build_float_mul(av, x, "pm"))?;
    let z = x.get_type().const_zero();
    let neg = llvm(k.b.build_float_compare(FloatPredicate::OLT, x, z, "neg"))?;
    Ok(llvm(k.b.build_select(neg, m, x, "prelu"))?.into_vector_value())
}
