//! Copies: `concat`, `split`, `slice`, `transpose`, `pad` with a constant, views that
//! bufferization did not alias, and the returned values not computed into their output.
//! Each is a strided loop nest ([`strided_kernel`]) over the elements it moves; a piece that is
//! already where it belongs (a concat operand in its slice, a split piece, a view over its
//! source's bytes) is not copied.

use super::common::{
    bytes_of, contiguous, dims, full, result, strided_copy, strided_kernel, unsupported, Call,
    Strided,
};
use crate::nest::R;
use crate::storage::{Base, Loc, Storage};
use crate::Gen;
use tir_ir::op::Slice;
use tir_ir::shape::norm_axis;
use tir_ir::{Function, OpData, Value};

/// Each operand copied into its slice of the output, unless its producer already wrote it
/// there (bufferization's concat sharing).
pub(crate) fn concat<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    axis: i64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let loc = |v: Value| st.of(func, v);
    let (r, out_dims) = result(func, op)?;
    let ax = norm_axis(axis, out_dims.len()).map_err(|_| unsupported(func, op, "axis"))?;
    let out_loc = loc(r)?;
    let outer: i64 = out_dims[..ax].iter().product();
    let inner: i64 = out_dims[ax + 1..].iter().product();
    let out_chunk = out_dims[ax] * inner;
    let mut pos = 0i64;
    let mut calls = Vec::new();
    for (i, &x) in op.operands.iter().enumerate() {
        let xd = dims(func, x)?;
        let chunk = xd[ax] * inner;
        let in_place = outer == 1 && loc(x)? == out_loc.at(pos as u64 * 4);
        if !in_place && chunk > 0 && outer > 0 {
            calls.push(strided_kernel(
                g,
                &format!("{name}_{i}"),
                &[outer, chunk],
                Strided {
                    loc: out_loc,
                    bytes: bytes_of(&out_dims),
                    strides: vec![out_chunk, 1],
                    base: pos,
                },
                vec![Strided {
                    loc: loc(x)?,
                    bytes: bytes_of(&xd),
                    strides: vec![chunk, 1],
                    base: 0,
                }],
                &|_, v| Ok(v[0]),
            )?);
        }
        pos += chunk;
    }
    Ok(calls)
}

/// Each piece copied out of the input, unless it already is that part of the input's bytes.
pub(crate) fn split<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    axis: i64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let loc = |v: Value| st.of(func, v);
    let x = op.operands[0];
    let xd = dims(func, x)?;
    let ax = norm_axis(axis, xd.len()).map_err(|_| unsupported(func, op, "axis"))?;
    let outer: i64 = xd[..ax].iter().product();
    let inner: i64 = xd[ax + 1..].iter().product();
    let in_chunk = xd[ax] * inner;
    let mut pos = 0;
    let mut calls = Vec::new();
    for (i, &y) in op.results.iter().enumerate() {
        let yd = dims(func, y)?;
        let chunk = yd[ax] * inner;
        let same = outer == 1 && loc(y)? == loc(x)?.at(pos as u64 * 4);
        if !same && chunk > 0 && outer > 0 {
            calls.push(strided_kernel(
                g,
                &format!("{name}_{i}"),
                &[outer, chunk],
                Strided {
                    loc: loc(y)?,
                    bytes: bytes_of(&yd),
                    strides: vec![chunk, 1],
                    base: 0,
                },
                vec![Strided {
                    loc: loc(x)?,
                    bytes: bytes_of(&xd),
                    strides: vec![in_chunk, 1],
                    base: pos,
                }],
                &|_, v| Ok(v[0]),
            )?);
        }
        pos += chunk;
    }
    Ok(calls)
}

pub(crate) fn slice<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    s: &Slice,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let loc = |v: Value| st.of(func, v);
    let (r, out_dims) = result(func, op)?;
    let x = op.operands[0];
    let xd = dims(func, x)?;
    let xs = contiguous(&xd);
    let mut strides = xs.clone();
    let mut base = 0i64;
    let axes: Vec<i64> = if s.axes.is_empty() {
        (0..s.starts.len() as i64).collect()
    } else {
        s.axes.clone()
    };
    #[allow(clippy::needless_range_loop)]
    for i in 0..s.starts.len() {
        let ax = norm_axis(axes[i], xd.len()).map_err(|_| unsupported(func, op, "axis"))?;
        let d = xd[ax];
        let step = s.steps.get(i).copied().unwrap_or(1);
        let mut start = s.starts[i];
        if start < 0 {
            start += d;
        }
        let start = if step > 0 {
            start.clamp(0, d)
        } else {
            start.clamp(-1, d - 1)
        };
        if out_dims[ax] > 0 {
            base += start * xs[ax];
        }
        strides[ax] = xs[ax] * step;
    }
    if out_dims.contains(&0) {
        return Ok(vec![]);
    }
    Ok(vec![strided_copy(
        g,
        name,
        &out_dims,
        full(func, st, r)?,
        Strided {
            loc: loc(x)?,
            bytes: bytes_of(&xd),
            strides,
            base,
        },
    )?])
}

pub(crate) fn transpose<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    perm: &[u64],
    name: &str,
) -> R<Vec<Call<'c>>> {
    let loc = |v: Value| st.of(func, v);
    let (r, out_dims) = result(func, op)?;
    let x = op.operands[0];
    let xd = dims(func, x)?;
    let xs = contiguous(&xd);
    let strides: Vec<i64> = perm.iter().map(|&p| xs[p as usize]).collect();
    Ok(vec![strided_kernel(
        g,
        name,
        &out_dims,
        full(func, st, r)?,
        vec![Strided {
            loc: loc(x)?,
            bytes: bytes_of(&xd),
            strides,
            base: 0,
        }],
        &|_, v| Ok(v[0]),
    )?])
}

/// `reshape`, `flatten`, `squeeze`, `unsqueeze`: the same elements in the same order, so
/// nothing to do when bufferization gave the result its source's bytes.
pub(crate) fn view<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let loc = |v: Value| st.of(func, v);
    let (r, out_dims) = result(func, op)?;
    let x = op.operands[0];
    if loc(x)? == loc(r)? {
        return Ok(vec![]);
    }
    let n: i64 = out_dims.iter().product();
    Ok(vec![copy(g, name, loc(x)?, loc(r)?, n)?])
}

/// `pad` with a constant: the fill, then the input copied inside it.
pub(crate) fn pad<'a, 'c>(
    g: &Gen<'a, 'c>,
    func: &Function,
    st: &Storage,
    op: &OpData,
    pads: &[u64],
    value: f64,
    name: &str,
) -> R<Vec<Call<'c>>> {
    let loc = |v: Value| st.of(func, v);
    let (r, out_dims) = result(func, op)?;
    let x = op.operands[0];
    let xd = dims(func, x)?;
    let os = contiguous(&out_dims);
    let base: i64 = (0..xd.len()).map(|d| pads[d] as i64 * os[d]).sum();
    let n: i64 = out_dims.iter().product();
    let mut calls = vec![fill(g, &format!("{name}_fill"), loc(r)?, n, value)?];
    if xd.iter().all(|&d| d > 0) {
        calls.push(strided_kernel(
            g,
            name,
            &xd,
            Strided {
                loc: loc(r)?,
                bytes: bytes_of(&out_dims),
                strides: os,
                base,
            },
            vec![full(func, st, x)?],
            &|_, v| Ok(v[0]),
        )?);
    }
    Ok(calls)
}

/// A kernel that fills `[loc, loc + n floats)` with `value`.
fn fill<'a, 'c>(g: &Gen<'a, 'c>, name: &str, loc: Loc, n: i64, value: f64) -> R<Call<'c>> {
    let out = Strided {
        loc,
        bytes: n as u64 * 4,
        strides: vec![1],
        base: 0,
    };
    strided_kernel(g, name, &[n], out, vec![], &move |k, _| Ok(k.f(value)))
}

/// A kernel that copies `n` floats from `from` to `to`.
fn copy<'a, 'c>(g: &Gen<'a, 'c>, name: &str, from: Loc, to: Loc, n: i64) -> R<Call<'c>> {
    let s = |loc| Strided {
        loc,
        bytes: n as u64 * 4,
        strides: vec![1],
        base: 0,
    };
    strided_kernel(g, name, &[n], s(to), vec![s(from)], &|_, v| Ok(v[0]))
}

/// Copies for returned values that are not computed into their output (parameters, weights,
/// values returned twice).
pub(crate) fn returns<'a, 'c>(g: &Gen<'a, 'c>, func: &Function, st: &Storage) -> R<Vec<Call<'c>>> {
    let mut calls = Vec::new();
    for (j, &v) in func.returns.iter().enumerate() {
        let to = Loc {
            base: Base::Output(j),
            offset: 0,
        };
        let from = st.of(func, v)?;
        let ty = func
            .ty(v)
            .ok_or_else(|| crate::CodegenError::NoStorage(func.value_name(v)))?;
        if from != to && ty.dtype != tir_ir::DType::F32 {
            let bytes = ty.byte_size().unwrap_or(0);
            let name = format!("ret{j}");
            calls.push(super::typed::copy_bytes(g, &name, from, to, bytes)?);
        } else if from != to {
            let n: i64 = dims(func, v)?.iter().product();
            calls.push(copy(g, &format!("ret{j}"), from, to, n)?);
        }
    }
    Ok(calls)
}
