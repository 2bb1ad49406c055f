//! The reference kernels: one plain loop nest per op family, on row-major `f32` buffers.
//!
//! Each kernel writes into an output buffer the driver has already allocated to the size of
//! the result type (destination-passing style, as bufferized code does), and may assume what
//! the op's shape rule guarantees: the driver re-infers every op's result types before
//! running anything. The aim is to be obviously correct — every kernel is the formula of
//! `docs/ir.md` with the loops written out — while staying fast enough for the zoo's
//! networks in a debug build: indices come from precomputed strides, and the innermost loop
//! of convolution runs over a contiguous output row.
//!
//! Accumulation: products are summed in `f32` (convolution, matmul, gemm), as a kernel
//! would; the statistics of normalisations and means (softmax's denominator, pooling
//! averages, `batch_norm`, `layer_norm`, `reduce_mean`) are computed in `f64` and rounded once.

use tir_ir::op::{
    Activation, BinaryOp, Conv2d, ConvTranspose, CoordMode, Gemm, NearestMode, PadMode, Pool2d,
    ReduceKind, Resize, ResizeMode, Slice, UnaryOp,
};
use tir_ir::op::{GridPadding, GridSample, SampleMode};

/// An operand: its shape and elements.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub shape: &'a [usize],
    pub data: &'a [f32],
}

/// A result buffer, allocated (zeroed) by the driver.
pub struct Out {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Row-major strides.
pub fn strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i] as isize;
    }
    s
}

/// Strides of `shape` read as `target` under NumPy broadcasting: right-aligned, and 0 on
/// every axis the operand does not have or has as 1 where the target does not.
pub fn broadcast_strides(shape: &[usize], target: &[usize]) -> Vec<isize> {
    let own = strides(shape);
    let lead = target.len() - shape.len();
    (0..target.len())
        .map(|i| {
            if i < lead || (shape[i - lead] == 1 && target[i] != 1) {
                0
            } else {
                own[i - lead]
            }
        })
        .collect()
}

/// Calls `f(flat, offsets)` for every index of `shape` in row-major order, where `flat` is the
/// index's position and `offsets[k] = base[k] + Σ_d index[d] * strides[k][d]`.
pub fn walk<const K: usize>(
    shape: &[usize],
    base: [isize; K],
    strides: [&[isize]; K],
    mut f: impl FnMut(usize, [usize; K]),
) {
    let n: usize = shape.iter().product();
    let rank = shape.len();
    let mut idx = vec![0usize; rank];
    let mut offs = base;
    for flat in 0..n {
        f(flat, offs.map(|o| o as usize));
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            for k in 0..K {
                offs[k] += strides[k][d];
            }
            if idx[d] < shape[d] {
                break;
            }
            for k in 0..K {
                offs[k] -= strides[k][d] * shape[d] as isize;
            }
            idx[d] = 0;
        }
    }
}

pub fn activation(a: Option<Activation>, x: f32) -> f32 {
    match a {
        None => x,
        Some(Activation::Relu) => relu(x),
        Some(Activation::Relu6) => clip(x, 0.0, 6.0),
        Some(Activation::ReluN1To1) => clip(x, -1.0, 1.0),
        Some(Activation::Tanh) => x.tanh(),
        Some(Activation::Sigmoid) => sigmoid(x),
        Some(Activation::HardSwish) => hard_swish(x),
    }
}

fn apply_activation(a: Option<Activation>, data: &mut [f32]) {
    if a.is_some() {
        for v in data {
            *v = activation(a, *v);
        }
    }
}

/// `max(x, 0)`; NaN stays NaN.
fn relu(x: f32) -> f32 {
    if x < 0.0 {
        0.0
    } else {
        x
    }
}

/// `min(max(x, lo), hi)`; NaN stays NaN.
fn clip(x: f32, lo: f32, hi: f32) -> f32 {
    if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn hard_swish(x: f32) -> f32 {
    x * clip(x + 3.0, 0.0, 6.0) / 6.0
}

/// The complementary error function, `erfc(x) = 1 - erf(x)`, with fractional error below
/// 1.2e-7 everywhere: the Chebyshev fit `erfcc` of Numerical Recipes in C (2nd ed., §6.2),
/// evaluated in `f64`.
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let ans = t * poly.exp();
    if x >= 0.0 {
        ans
    } else {
        2.0 - ans
    }
}

pub fn erf(x: f64) -> f64 {
    1.0 - erfc(x)
}

/// `0.5 x (1 + erf(x / √2))`, written as `0.5 x erfc(-x / √2)` so that large negative `x` keeps
/// its relative accuracy.
fn gelu(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * erfc(-x * std::f64::consts::FRAC_1_SQRT_2)) as f32
}

/// 1 for positive, -1 for negative, the operand itself for ±0 and NaN.
fn sign(x: f32) -> f32 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

pub fn unary(u: UnaryOp, x: View, out: &mut Out) {
    let f: fn(f32) -> f32 = match u {
        UnaryOp::Relu => relu,
        UnaryOp::Relu6 => |x| clip(x, 0.0, 6.0),
        UnaryOp::Sigmoid => sigmoid,
        UnaryOp::Tanh => f32::tanh,
        UnaryOp::HardSwish => hard_swish,
        UnaryOp::Gelu => gelu,
        UnaryOp::Exp => f32::exp,
        UnaryOp::Abs => f32::abs,
        UnaryOp::Neg => |x| -x,
        UnaryOp::Sqrt => f32::sqrt,
        UnaryOp::Reciprocal => |x| 1.0 / x,
        UnaryOp::Log => f32::ln,
        UnaryOp::Floor => f32::floor,
        UnaryOp::Ceil => f32::ceil,
        UnaryOp::Round => f32::round_ties_even,
        UnaryOp::Erf => |x| erf(f64::from(x)) as f32,
        UnaryOp::Sin => f32::sin,
        UnaryOp::Cos => f32::cos,
        // In f64, so that `1 + e^x` keeps the digits of a small `e^x`.
        UnaryOp::Softplus => |x| f64::from(x).exp().ln_1p() as f32,
        UnaryOp::Softsign => |x| x / (1.0 + x.abs()),
        UnaryOp::Tan => f32::tan,
        UnaryOp::Asin => f32::asin,
        UnaryOp::Acos => f32::acos,
        UnaryOp::Atan => f32::atan,
        UnaryOp::Sinh => f32::sinh,
        UnaryOp::Cosh => f32::cosh,
        UnaryOp::Asinh => f32::asinh,
        UnaryOp::Acosh => f32::acosh,
        UnaryOp::Atanh => f32::atanh,
        UnaryOp::Sign => sign,
    };
    for (o, &v) in out.data.iter_mut().zip(x.data) {
        *o = f(v);
    }
}

pub fn clip_op(min: f64, max: f64, x: View, out: &mut Out) {
    let (lo, hi) = (min as f32, max as f32);
    for (o, &v) in out.data.iter_mut().zip(x.data) {
        *o = clip(v, lo, hi);
    }
}

pub fn hard_sigmoid(alpha: f64, beta: f64, x: View, out: &mut Out) {
    let (a, b) = (alpha as f32, beta as f32);
    for (o, &v) in out.data.iter_mut().zip(x.data) {
        *o = clip(a * v + b, 0.0, 1.0);
    }
}

pub fn binary(op: BinaryOp, act: Option<Activation>, a: View, b: View, out: &mut Out) {
    let f: fn(f32, f32) -> f32 = match op {
        BinaryOp::Add => |a, b| a + b,
        BinaryOp::Sub => |a, b| a - b,
        BinaryOp::Mul => |a, b| a * b,
        BinaryOp::Div => |a, b| a / b,
        BinaryOp::Pow => f32::powf,
        BinaryOp::Max => |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.max(b)
            }
        },
        BinaryOp::Min => |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.min(b)
            }
        },
    };
    let sa = broadcast_strides(a.shape, &out.shape);
    let sb = broadcast_strides(b.shape, &out.shape);
    let data = &mut out.data;
    walk(&out.shape, [0, 0], [&sa, &sb], |i, [ia, ib]| {
        data[i] = activation(act, f(a.data[ia], b.data[ib]));
    });
}

pub fn prelu(x: View, slope: View, out: &mut Out) {
    let ss = broadcast_strides(slope.shape, x.shape);
    let data = &mut out.data;
    walk(x.shape, [0], [&ss], |i, [is]| {
        let v = x.data[i];
        data[i] = if v < 0.0 { slope.data[is] * v } else { v };
    });
}

/// `y[n, m, oh, ow] = b[m] + Σ x[n, g*Cg + c, oh*sH + i*dH - pad_top, ow*sW + j*dW - pad_left]
/// * w[m, c, i, j]`, zero outside the input.
/// `act(bias + Σ x·w + residual)`: the sum starts from the bias, the residual is added once
/// the sum is complete and before the activation, so a fused residual gives the bits of a
/// separate `add` of the convolution's result and the residual. A fused PReLU (`slope`:
/// one value per output channel, or one for all) is then `v < 0 ? slope[oc]·v : v`, as
/// [`prelu`] computes it on the unfused result.
pub fn conv2d(
    c: &Conv2d,
    x: View,
    w: View,
    bias: Option<View>,
    residual: Option<View>,
    slope: Option<View>,
    out: &mut Out,
) {
    let [n, ci, h, wd] = dims4(x.shape);
    let [m, cg, kh, kw] = dims4(w.shape);
    let [_, _, oh, ow] = dims4(&out.shape);
    let mg = m / c.groups as usize;
    let [sh, sw] = c.strides.map(|v| v as usize);
    let [dh, dw] = c.dilations.map(|v| v as usize);
    let (pt, pl) = (c.pads[0] as usize, c.pads[1] as usize);
    let pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && c.pads == [0; 4];
    for b in 0..n {
        for oc in 0..m {
            let g = oc / mg;
            let plane = &mut out.data[(b * m + oc) * oh * ow..][..oh * ow];
            plane.fill(bias.map_or(0.0, |bv| bv.data[oc]));
            for ic in 0..cg {
                let xplane = &x.data[(b * ci + g * cg + ic) * h * wd..][..h * wd];
                if pointwise {
                    // A 1x1 kernel with unit strides and no padding reads the whole plane.
                    let wv = w.data[oc * cg + ic];
                    for (o, &xv) in plane.iter_mut().zip(xplane) {
                        *o += xv * wv;
                    }
                    continue;
                }
                for i in 0..kh {
                    for j in 0..kw {
                        let wv = w.data[((oc * cg + ic) * kh + i) * kw + j];
                        // The output columns whose input column ox*sW + j*dW - pad_left lies
                        // inside [0, W).
                        let off = j * dw;
                        let lo = if pl > off { (pl - off).div_ceil(sw) } else { 0 };
                        let hi = if wd + pl > off {
                            (wd + pl - off).div_ceil(sw)
                        } else {
                            0
                        }
                        .min(ow);
                        for oy in 0..oh {
                            let iy = oy * sh + i * dh;
                            if iy < pt || iy - pt >= h {
                                continue;
                            }
                            if lo >= hi {
                                continue;
                            }
                            // Input columns lo*sW + off - pad_left, then every sW-th.
                            let row = &xplane[(iy - pt) * wd + lo * sw + off - pl..];
                            let orow = &mut plane[oy * ow + lo..oy * ow + hi];
                            if sw == 1 {
                                // (A separate loop so that it vectorises.)
                                for (o, &xv) in orow.iter_mut().zip(row) {
                                    *o += xv * wv;
                                }
                            } else {
                                for (o, &xv) in orow.iter_mut().zip(row.iter().step_by(sw)) {
                                    *o += xv * wv;
                                }
                            }
                        }
                    }
                }
            }
            if let Some(r) = residual {
                let rplane = &r.data[(b * m + oc) * oh * ow..][..oh * ow];
                for (o, &rv) in plane.iter_mut().zip(rplane) {
                    *o += rv;
                }
            }
            apply_activation(c.activation, plane);
            if let Some(sl) = slope {
                let a = sl.data[if sl.data.len() == 1 { 0 } else { oc }];
                for o in plane.iter_mut() {
                    if *o < 0.0 {
                        *o *= a;
                    }
                }
            }
        }
    }
}

/// The scatter form of docs/ir.md's `conv_transpose`: every input pixel adds
/// `x[n, g*Cg + c, iy, ix] * w[g*Cg + c, m, i, j]` to output pixel
/// `(iy*sH + i*dH - pad_top, ix*sW + j*dW - pad_left)` of channel `g*Mg + m`, where that lies
/// inside the output; the output starts as the bias. Per input row and tap the input row is
/// read contiguously and the output row written every `sW`-th element.
pub fn conv_transpose(c: &ConvTranspose, x: View, w: View, bias: Option<View>, out: &mut Out) {
    let [n, ci, h, wd] = dims4(x.shape);
    let [_, mg, kh, kw] = dims4(w.shape);
    let [_, m, oh, ow] = dims4(&out.shape);
    let cg = ci / c.groups as usize;
    let [sh, sw] = c.strides.map(|v| v as usize);
    let [dh, dw] = c.dilations.map(|v| v as usize);
    let (pt, pl) = (c.pads[0] as usize, c.pads[1] as usize);
    for b in 0..n {
        for oc in 0..m {
            let plane = &mut out.data[(b * m + oc) * oh * ow..][..oh * ow];
            plane.fill(bias.map_or(0.0, |bv| bv.data[oc]));
        }
        for ic in 0..ci {
            let g = ic / cg;
            let xplane = &x.data[(b * ci + ic) * h * wd..][..h * wd];
            for mo in 0..mg {
                let oc = g * mg + mo;
                let plane = &mut out.data[(b * m + oc) * oh * ow..][..oh * ow];
                for i in 0..kh {
                    for j in 0..kw {
                        let wv = w.data[((ic * mg + mo) * kh + i) * kw + j];
                        // The input columns whose output column ix*sW + j*dW - pad_left
                        // lies inside [0, OW).
                        let off = j * dw;
                        let lo = if pl > off { (pl - off).div_ceil(sw) } else { 0 };
                        let hi = if ow + pl > off {
                            (ow + pl - off).div_ceil(sw)
                        } else {
                            0
                        }
                        .min(wd);
                        if lo >= hi {
                            continue;
                        }
                        for iy in 0..h {
                            let oy = iy * sh + i * dh;
                            if oy < pt || oy - pt >= oh {
                                continue;
                            }
                            let row = &xplane[iy * wd + lo..iy * wd + hi];
                            let orow = &mut plane[(oy - pt) * ow + lo * sw + off - pl..];
                            for (o, &xv) in orow.iter_mut().step_by(sw).zip(row) {
                                *o += xv * wv;
                            }
                        }
                    }
                }
            }
        }
        for oc in 0..m {
            let plane = &mut out.data[(b * m + oc) * oh * ow..][..oh * ow];
            apply_activation(c.activation, plane);
        }
    }
}

/// NumPy `matmul` over broadcast batch dimensions.
pub fn matmul(act: Option<Activation>, a: View, b: View, out: &mut Out) {
    let ash: Vec<usize> = if a.shape.len() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.to_vec()
    };
    let bsh: Vec<usize> = if b.shape.len() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.to_vec()
    };
    let (m, k) = (ash[ash.len() - 2], ash[ash.len() - 1]);
    let n = bsh[bsh.len() - 1];
    let (abatch, bbatch) = (&ash[..ash.len() - 2], &bsh[..bsh.len() - 2]);
    let rank = abatch.len().max(bbatch.len());
    let batch: Vec<usize> = (0..rank)
        .map(|i| {
            let pick = |s: &[usize]| {
                if i < rank - s.len() {
                    1
                } else {
                    s[i - (rank - s.len())]
                }
            };
            pick(abatch).max(pick(bbatch))
        })
        .collect();
    let sa: Vec<isize> = broadcast_strides(abatch, &batch)
        .iter()
        .map(|s| s * (m * k) as isize)
        .collect();
    let sb: Vec<isize> = broadcast_strides(bbatch, &batch)
        .iter()
        .map(|s| s * (k * n) as isize)
        .collect();
    let data = &mut out.data;
    walk(&batch, [0, 0], [&sa, &sb], |p, [ao, bo]| {
        let o = &mut data[p * m * n..][..m * n];
        for i in 0..m {
            let orow = &mut o[i * n..][..n];
            for kk in 0..k {
                let av = a.data[ao + i * k + kk];
                let brow = &b.data[bo + kk * n..][..n];
                for (ov, &bv) in orow.iter_mut().zip(brow) {
                    *ov += av * bv;
                }
            }
        }
    });
    apply_activation(act, data);
}

/// `alpha * A' B' + beta * C`, with `A'`, `B'` the (optionally) transposed operands.
pub fn gemm(g: &Gemm, a: View, b: View, c: Option<View>, out: &mut Out) {
    let [m, n] = [out.shape[0], out.shape[1]];
    let k = if g.trans_a { a.shape[0] } else { a.shape[1] };
    // A' as row-major [M, K] and B' as row-major [K, N].
    let at: Vec<f32> = if g.trans_a {
        (0..m * k).map(|p| a.data[(p % k) * m + p / k]).collect()
    } else {
        a.data.to_vec()
    };
    let bt: Vec<f32> = if g.trans_b {
        (0..k * n).map(|p| b.data[(p % n) * k + p / n]).collect()
    } else {
        b.data.to_vec()
    };
    let mut acc = vec![0f32; m * n];
    for i in 0..m {
        let orow = &mut acc[i * n..][..n];
        for kk in 0..k {
            let av = at[i * k + kk];
            for (ov, &bv) in orow.iter_mut().zip(&bt[kk * n..][..n]) {
                *ov += av * bv;
            }
        }
    }
    let (alpha, beta) = (g.alpha as f32, g.beta as f32);
    match c {
        Some(c) => {
            let sc = broadcast_strides(c.shape, &out.shape);
            let data = &mut out.data;
            walk(&[m, n], [0], [&sc], |p, [ic]| {
                data[p] = activation(g.activation, alpha * acc[p] + beta * c.data[ic]);
            });
        }
        None => {
            for (o, v) in out.data.iter_mut().zip(acc) {
                *o = activation(g.activation, alpha * v);
            }
        }
    }
}

/// The input range `[start, end)` on one axis of the window starting at `begin` (which may be
/// negative, inside the begin padding), clipped to the input.
fn window(begin: isize, k: usize, len: usize) -> (usize, usize) {
    let s = begin.max(0) as usize;
    let e = (begin + k as isize).clamp(0, len as isize) as usize;
    (s.min(len), e)
}

/// Max pooling (`is_max`) or average pooling; padded cells never take part in a maximum, and
/// count in an average's divisor only with `count_include_pad` (ONNX AveragePool): then the
/// divisor is the window clipped to the padded input `[-pad_begin, I + pad_end)`.
pub fn pool2d(p: &Pool2d, is_max: bool, x: View, out: &mut Out) {
    let [n, c, h, w] = dims4(x.shape);
    let [_, _, oh, ow] = dims4(&out.shape);
    let [kh, kw] = p.kernel.map(|v| v as usize);
    let [sh, sw] = p.strides.map(|v| v as usize);
    let [pt, pl, pb, pr] = p.pads.map(|v| v as isize);
    for plane in 0..n * c {
        let xp = &x.data[plane * h * w..][..h * w];
        let op = &mut out.data[plane * oh * ow..][..oh * ow];
        for oy in 0..oh {
            let by = (oy * sh) as isize - pt;
            let (y0, y1) = window(by, kh, h);
            for ox in 0..ow {
                let bx = (ox * sw) as isize - pl;
                let (x0, x1) = window(bx, kw, w);
                let cells = (y0..y1).flat_map(|y| xp[y * w + x0..y * w + x1].iter().copied());
                op[oy * ow + ox] = if is_max {
                    // NaN propagates, as in NumPy's max.
                    // (The shape rule guarantees every window holds an input cell.)
                    cells.fold(
                        f32::NEG_INFINITY,
                        |m, v| if v > m || v.is_nan() { v } else { m },
                    )
                } else {
                    let sum: f64 = cells.map(f64::from).sum();
                    let count = if p.count_include_pad {
                        let ye = (by + kh as isize).min(h as isize + pb) - by;
                        let xe = (bx + kw as isize).min(w as isize + pr) - bx;
                        (ye * xe) as f64
                    } else {
                        ((y1 - y0) * (x1 - x0)) as f64
                    };
                    (sum / count) as f32
                };
            }
        }
    }
}

pub fn global_avg_pool(x: View, out: &mut Out) {
    let planes = x.shape[0] * x.shape[1];
    let size: usize = x.shape[2..].iter().product();
    for p in 0..planes {
        let sum: f64 = x.data[p * size..][..size]
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        out.data[p] = (sum / size as f64) as f32;
    }
}

pub fn concat(axis: usize, ins: &[View], out: &mut Out) {
    let outer: usize = out.shape[..axis].iter().product();
    let inner: usize = out.shape[axis + 1..].iter().product();
    let mut pos = 0;
    for o in 0..outer {
        for x in ins {
            let chunk = x.shape[axis] * inner;
            out.data[pos..pos + chunk].copy_from_slice(&x.data[o * chunk..][..chunk]);
            pos += chunk;
        }
    }
}

pub fn split(axis: usize, x: View, outs: &mut [Out]) {
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let mut pos = 0;
    for o in 0..outer {
        for y in outs.iter_mut() {
            let chunk = y.shape[axis] * inner;
            y.data[o * chunk..][..chunk].copy_from_slice(&x.data[pos..pos + chunk]);
            pos += chunk;
        }
    }
}

/// Elements `s, s + t, s + 2t, ...` on each sliced axis, with the start clamped as in the
/// shape rule (`[0, d]` for positive steps, `[-1, d - 1]` for negative ones).
pub fn slice(s: &Slice, x: View, out: &mut Out) {
    let xs = strides(x.shape);
    let mut step_strides = xs.clone();
    let mut base = 0isize;
    for i in 0..s.starts.len() {
        let r = x.shape.len() as i64;
        let ax = if s.axes[i] < 0 {
            s.axes[i] + r
        } else {
            s.axes[i]
        } as usize;
        let d = x.shape[ax] as i128;
        let step = s.steps[i] as i128;
        let mut start = s.starts[i] as i128;
        if start < 0 {
            start += d;
        }
        let start = if step > 0 {
            start.clamp(0, d)
        } else {
            start.clamp(-1, d - 1)
        };
        if out.shape[ax] > 0 {
            base += start as isize * xs[ax];
        }
        step_strides[ax] = xs[ax] * step as isize;
    }
    let data = &mut out.data;
    walk(&out.shape, [base], [&step_strides], |p, [ix]| {
        data[p] = x.data[ix];
    });
}

pub fn transpose(perm: &[u64], x: View, out: &mut Out) {
    let xs = strides(x.shape);
    let ps: Vec<isize> = perm.iter().map(|&p| xs[p as usize]).collect();
    let data = &mut out.data;
    walk(&out.shape, [0], [&ps], |p, [ix]| data[p] = x.data[ix]);
}

/// Calls `f(at, max)` for every lane along `axis`: `at(l)` is the flat index of the lane's
/// `l`-th element, `max` its largest element (f32, NaN skipped as `f32::max` does).
fn along_axis(axis: usize, x: &View, mut f: impl FnMut(&dyn Fn(usize) -> usize, f32)) {
    let len = x.shape[axis];
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    for o in 0..outer {
        for i in 0..inner {
            let at = |l: usize| (o * len + l) * inner + i;
            let max = (0..len)
                .map(|l| x.data[at(l)])
                .fold(f32::NEG_INFINITY, f32::max);
            f(&at, max);
        }
    }
}

/// `exp(x - max) / Σ exp(x - max)` along `axis`.
pub fn softmax(axis: usize, x: View, out: &mut Out) {
    let len = x.shape[axis];
    along_axis(axis, &x, |at, max| {
        let mut sum = 0f64;
        for l in 0..len {
            let e = (x.data[at(l)] - max).exp();
            out.data[at(l)] = e;
            sum += f64::from(e);
        }
        for l in 0..len {
            out.data[at(l)] = (f64::from(out.data[at(l)]) / sum) as f32;
        }
    });
}

/// `x - max - ln(Σ exp(x - max))` along `axis`: as [`softmax`] (max in f32, the exponentials'
/// sum in f64) but the logarithm of the sum is subtracted instead of dividing by it.
pub fn log_softmax(axis: usize, x: View, out: &mut Out) {
    let len = x.shape[axis];
    along_axis(axis, &x, |at, max| {
        let sum: f64 = (0..len)
            .map(|l| f64::from((x.data[at(l)] - max).exp()))
            .sum();
        let log_sum = sum.ln();
        for l in 0..len {
            out.data[at(l)] = (f64::from(x.data[at(l)] - max) - log_sum) as f32;
        }
    });
}

pub fn pad(pads: &[u64], mode: PadMode, value: f64, x: View, out: &mut Out) {
    let r = x.shape.len();
    let xs = strides(x.shape);
    // For each axis, the input index of every output index (None: the constant).
    let maps: Vec<Vec<Option<usize>>> = (0..r)
        .map(|d| {
            let (len, begin) = (x.shape[d] as isize, pads[d] as isize);
            (0..out.shape[d] as isize)
                .map(|o| {
                    let i = o - begin;
                    match mode {
                        _ if (0..len).contains(&i) => Some(i as usize),
                        PadMode::Constant => None,
                        // Mirror without repeating the edge: -1 → 1, len → len - 2.
                        PadMode::Reflect if i < 0 => Some((-i) as usize),
                        PadMode::Reflect => Some((2 * (len - 1) - i) as usize),
                        PadMode::Edge => Some(i.clamp(0, len - 1) as usize),
                    }
                })
                .collect()
        })
        .collect();
    let n = out.data.len();
    let mut idx = vec![0usize; r];
    for p in 0..n {
        let mut off = Some(0usize);
        for d in 0..r {
            off = match (off, maps[d][idx[d]]) {
                (Some(o), Some(i)) => Some(o + i * xs[d] as usize),
                _ => None,
            };
        }
        out.data[p] = off.map_or(value as f32, |o| x.data[o]);
        for d in (0..r).rev() {
            idx[d] += 1;
            if idx[d] < out.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// `scale[c] * (x - mean[c]) / sqrt(var[c] + epsilon) + bias[c]`.
pub fn batch_norm(epsilon: f64, x: View, params: [View; 4], out: &mut Out) {
    let [scale, bias, mean, var] = params;
    let (n, c) = (x.shape[0], x.shape[1]);
    let inner: usize = x.shape[2..].iter().product();
    for b in 0..n {
        for ch in 0..c {
            let inv = 1.0 / (f64::from(var.data[ch]) + epsilon).sqrt();
            let (s, sh, mu) = (
                f64::from(scale.data[ch]),
                f64::from(bias.data[ch]),
                f64::from(mean.data[ch]),
            );
            let at = (b * c + ch) * inner;
            for (o, &v) in out.data[at..at + inner]
                .iter_mut()
                .zip(&x.data[at..at + inner])
            {
                *o = (s * (f64::from(v) - mu) * inv + sh) as f32;
            }
        }
    }
}

/// `(x - μ) / sqrt(σ² + epsilon) * scale + bias` over the axes from `axis` on.
pub fn layer_norm(
    axis: usize,
    epsilon: f64,
    x: View,
    scale: View,
    bias: Option<View>,
    out: &mut Out,
) {
    let norm = &x.shape[axis..];
    let inner: usize = norm.iter().product();
    let outer: usize = x.shape[..axis].iter().product();
    let expand = |p: View| {
        let ps = broadcast_strides(p.shape, norm);
        let mut v = vec![0f64; inner];
        walk(norm, [0], [&ps], |i, [ip]| v[i] = f64::from(p.data[ip]));
        v
    };
    let s = expand(scale);
    let b = bias.map_or_else(|| vec![0f64; inner], expand);
    for o in 0..outer {
        let row = &x.data[o * inner..][..inner];
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / inner as f64;
        let var = row
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / inner as f64;
        let inv = 1.0 / (var + epsilon).sqrt();
        for (i, (o, &v)) in out.data[o * inner..][..inner]
            .iter_mut()
            .zip(row)
            .enumerate()
        {
            *o = ((f64::from(v) - mean) * inv * s[i] + b[i]) as f32;
        }
    }
}

/// The mean over `axes` (already normalised; the shape rule reduces every axis when the
/// attribute is empty).
/// A reduction over `axes` ([`ReduceKind`]): each output accumulates its elements in f64 in
/// the input's row-major order, then is finished (divided, rooted, logged) and rounded once.
pub fn reduce(kind: ReduceKind, axes: &[usize], x: View, out: &mut Out) {
    let r = x.shape.len();
    // Strides of the kept axes in the output; 0 on the reduced ones.
    let mut os = vec![0isize; r];
    let mut acc = 1isize;
    for d in (0..r).rev() {
        if !axes.contains(&d) {
            os[d] = acc;
            acc *= x.shape[d] as isize;
        }
    }
    let count: usize = axes.iter().map(|&a| x.shape[a]).product();
    let mut accs = vec![kind.init(); out.data.len()];
    walk(x.shape, [0], [&os], |i, [io]| {
        accs[io] = kind.step(accs[io], f64::from(x.data[i]))
    });
    for (o, a) in out.data.iter_mut().zip(accs) {
        *o = kind.finish(a, count) as f32;
    }
}

/// The input coordinate of output coordinate `o` as an exact fraction `p / q` (`q > 0`), so
/// that the ties of the nearest modes are true ties.
fn source_coord(mode: CoordMode, o: usize, input: usize, output: usize) -> (i128, i128) {
    let (o, i, n) = (o as i128, input as i128, output as i128);
    match mode {
        // (o + 0.5) / (n / i) - 0.5 = ((2o + 1) i - n) / 2n
        CoordMode::HalfPixel => ((2 * o + 1) * i - n, 2 * n),
        CoordMode::PytorchHalfPixel if n > 1 => ((2 * o + 1) * i - n, 2 * n),
        CoordMode::AlignCorners if n > 1 => (o * (i - 1), n - 1),
        CoordMode::PytorchHalfPixel | CoordMode::AlignCorners => (0, 1),
        CoordMode::Asymmetric => (o * i, n),
    }
}

/// Nearest: the rounded source index, clamped into the input.
fn nearest_index(mode: NearestMode, (p, q): (i128, i128), len: usize) -> usize {
    let (fl, rem) = (p.div_euclid(q), p.rem_euclid(q));
    let idx = match mode {
        NearestMode::Floor => fl,
        NearestMode::Ceil => fl + i128::from(rem != 0),
        NearestMode::RoundPreferFloor => fl + i128::from(2 * rem > q),
        NearestMode::RoundPreferCeil => fl + i128::from(2 * rem >= q && rem != 0),
    };
    idx.clamp(0, len as i128 - 1) as usize
}

/// Bilinear: the two neighbouring source indices and the weight of the second, with the
/// coordinate clamped into `[0, len - 1]`.
fn linear_taps((p, q): (i128, i128), len: usize) -> (usize, usize, f64) {
    if p <= 0 {
        return (0, 0, 0.0);
    }
    let (fl, rem) = (p / q, p % q);
    if fl >= len as i128 - 1 {
        return (len - 1, len - 1, 0.0);
    }
    let i0 = fl as usize;
    (i0, i0 + 1, rem as f64 / q as f64)
}

pub fn resize(r: &Resize, x: View, out: &mut Out) {
    let [n, c, h, w] = dims4(x.shape);
    let [_, _, oh, ow] = dims4(&out.shape);
    let ys: Vec<(i128, i128)> = (0..oh).map(|o| source_coord(r.coord, o, h, oh)).collect();
    let xs: Vec<(i128, i128)> = (0..ow).map(|o| source_coord(r.coord, o, w, ow)).collect();
    for plane in 0..n * c {
        let xp = &x.data[plane * h * w..][..h * w];
        let op = &mut out.data[plane * oh * ow..][..oh * ow];
        for (oy, &cy) in ys.iter().enumerate() {
            for (ox, &cx) in xs.iter().enumerate() {
                op[oy * ow + ox] = match r.mode {
                    ResizeMode::Nearest => {
                        xp[nearest_index(r.nearest, cy, h) * w + nearest_index(r.nearest, cx, w)]
                    }
                    ResizeMode::Bilinear => {
                        let (y0, y1, ly) = linear_taps(cy, h);
                        let (x0, x1, lx) = linear_taps(cx, w);
                        let v = |y: usize, x: usize| f64::from(xp[y * w + x]);
                        let top = v(y0, x0) * (1.0 - lx) + v(y0, x1) * lx;
                        let bottom = v(y1, x0) * (1.0 - lx) + v(y1, x1) * lx;
                        (top * (1.0 - ly) + bottom * ly) as f32
                    }
                };
            }
        }
    }
}

fn dims4(s: &[usize]) -> [usize; 4] {
    [s[0], s[1], s[2], s[3]]
}

/// ONNX Trilu: each `n × m` matrix of the last two axes keeps element `(i, j)` when
/// `j - i >= k` (`upper`) or `j - i <= k`, and is zero elsewhere (NaN and infinities included).
pub fn trilu(upper: bool, k: i64, x: View, out: &mut Out) {
    let r = x.shape.len();
    let (n, m) = (x.shape[r - 2], x.shape[r - 1]);
    for (e, (o, &v)) in out.data.iter_mut().zip(x.data).enumerate() {
        let (i, j) = (((e / m.max(1)) % n.max(1)) as i64, (e % m.max(1)) as i64);
        let keep = if upper { j - i >= k } else { j - i <= k };
        *o = if keep { v } else { 0.0 };
    }
}

/// ONNX GridSample's reflection of a coordinate into `[lo, hi]`: mirrored at the nearer border
/// until inside (the reference's `_gs_reflect`). A one-pixel axis with `align_corners` has
/// `lo == hi`; every coordinate then reflects to it.
pub fn grid_reflect(c: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    if c < lo {
        let dx = lo - c;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n % 2.0 == 0.0 {
            lo + r
        } else {
            hi - r
        }
    } else if c > hi {
        let dx = c - hi;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n % 2.0 == 0.0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        c
    }
}

/// The source coordinate, in pixels, of grid entry `g` on an axis of `len` pixels, after the
/// padding mode has moved an outside coordinate in (`border` clamps it to the pixel centres,
/// `reflection` mirrors it into the sampled extent); nearest mode rounds half to even first.
/// Computed in `f64`, in this order, by the generated kernel too.
pub fn grid_coord(gs: &GridSample, g: f32, len: usize) -> f64 {
    let (g, l) = (f64::from(g), len as f64);
    let mut c = if gs.align_corners {
        (g + 1.0) / 2.0 * (l - 1.0)
    } else {
        ((g + 1.0) * l - 1.0) / 2.0
    };
    if gs.mode == SampleMode::Nearest {
        c = c.round_ties_even();
    }
    let (lo, hi) = grid_bounds(gs.align_corners, len);
    if c < lo || c > hi {
        c = match gs.padding {
            GridPadding::Zeros => c,
            GridPadding::Border => c.clamp(0.0, l - 1.0),
            GridPadding::Reflection => grid_reflect(c, lo, hi),
        };
    }
    c
}

/// The extent a grid spans on an axis of `len` pixels: the corner pixels' centres with
/// `align_corners`, their outer edges without.
pub fn grid_bounds(align_corners: bool, len: usize) -> (f64, f64) {
    let l = len as f64;
    if align_corners {
        (0.0, l - 1.0)
    } else {
        (-0.5, l - 0.5)
    }
}

/// The pixel read for integer position `i` (`i64::MIN`..`MAX`, saturated from the float) on
/// an axis of `len` pixels, or `None` for a zero (padding `zeros` outside the image).
pub fn grid_tap(gs: &GridSample, i: i64, len: usize) -> Option<usize> {
    let last = len as i64 - 1;
    match gs.padding {
        GridPadding::Zeros => (0..=last).contains(&i).then_some(i as usize),
        GridPadding::Border => Some(i.clamp(0, last) as usize),
        GridPadding::Reflection => {
            let (lo, hi) = grid_bounds(gs.align_corners, len);
            Some(((grid_reflect(i as f64, lo, hi) as i64).clamp(0, last)) as usize)
        }
    }
}

/// Keys' cubic convolution weights (`a = -0.75`, ONNX GridSample's) of the pixels at
/// `floor(x) - 1 ..= floor(x) + 2` for the fraction `t = x - floor(x)`, in the reference's
/// order of operations.
pub fn cubic_weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let t = t.abs();
    let (t1, u, u1) = (t + 1.0, 1.0 - t, 2.0 - t);
    [
        ((A * t1 - 5.0 * A) * t1 + 8.0 * A) * t1 - 4.0 * A,
        ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0,
        ((A + 2.0) * u - (A + 3.0)) * u * u + 1.0,
        ((A * u1 - 5.0 * A) * u1 + 8.0 * A) * u1 - 4.0 * A,
    ]
}

/// The taps of source coordinate `cc` on an axis of `len` pixels: (pixel or `None` for a
/// zero, weight); one for nearest (weight 1), two for bilinear, four for bicubic.
pub fn grid_taps(gs: &GridSample, cc: f64, len: usize) -> Vec<(Option<usize>, f64)> {
    match gs.mode {
        SampleMode::Nearest => vec![(grid_tap(gs, cc as i64, len), 1.0)],
        SampleMode::Bilinear => {
            let f = cc.floor();
            let w1 = cc - f;
            vec![
                (grid_tap(gs, f as i64, len), 1.0 - w1),
                (grid_tap(gs, (f + 1.0) as i64, len), w1),
            ]
        }
        SampleMode::Bicubic => {
            let f = cc.floor();
            let ws = cubic_weights(cc - f);
            (0..4)
                .map(|k| (grid_tap(gs, (f + (k as f64 - 1.0)) as i64, len), ws[k]))
                .collect()
        }
    }
}

/// ONNX GridSample on NCHW (see [`GridSample`]): per output pixel, the grid's `(x, y)` gives a
/// source position; bilinear weights are `1 - f` and `f` of its fractional part, the rows
/// interpolated along x first, all in `f64`.
pub fn grid_sample(gs: &GridSample, x: View, grid: View, out: &mut Out) {
    let [n, c, h, w] = dims4(x.shape);
    let [_, oh, ow, _] = dims4(grid.shape);
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                let gi = ((b * oh + oy) * ow + ox) * 2;
                let cx = grid_coord(gs, grid.data[gi], w);
                let cy = grid_coord(gs, grid.data[gi + 1], h);
                let (tx, ty) = (grid_taps(gs, cx, w), grid_taps(gs, cy, h));
                for ch in 0..c {
                    let plane = &x.data[(b * c + ch) * h * w..][..h * w];
                    let v = |r: Option<usize>, col: Option<usize>| match (r, col) {
                        (Some(r), Some(col)) => f64::from(plane[r * w + col]),
                        _ => 0.0,
                    };
                    let o = &mut out.data[((b * c + ch) * oh + oy) * ow + ox];
                    *o = if gs.mode == SampleMode::Nearest {
                        v(ty[0].0, tx[0].0) as f32
                    } else {
                        // Σ_j wy_j · (Σ_i wx_i · x[y_j, x_i]): along x first, each sum
                        // left to right from its first term.
                        let row = |r: Option<usize>| {
                            tx.iter()
                                .map(|&(col, wx)| wx * v(r, col))
                                .reduce(|a, b| a + b)
                                .unwrap_or(0.0)
                        };
                        ty.iter()
                            .map(|&(r, wy)| wy * row(r))
                            .reduce(|a, b| a + b)
                            .unwrap_or(0.0) as f32
                    };
                }
            }
        }
    }
}
