//! More operators imported as compositions of IR ops with checked kernels (decompose.rs holds
//! the first ones): Hardmax, IsInf, IsNaN, Shrink, EyeLike, OneHot, Expand, LpPool, Trilu on
//! integer and bool tensors, and the indexing family with constant indices — Gather,
//! GatherElements, GatherND, ScatterElements, Scatter (its opset-9 form) and ScatterND.
//!
//! The indexing ops need their indices (and a scatter its updates) as constants, which a
//! model that holds them as initializers has and `tirc import --bind` gives any other: the
//! element each output reads is then known at import. A gather becomes `where(mask, data, 0)`
//! summed along the data axis (`mask[j, n]`: output `j` reads data element `n`), which is
//! exact (one element plus zeros; the masked-off elements are never added, so an infinity or
//! NaN elsewhere cannot leak in); integer data, whose sums the IR lacks, is refused. A scatter with constant updates is
//! `where(hit, combine(data, c), data)`, `c` the updates each element receives folded at
//! import by the reduction.

use super::attrs::{norm_axis, Attrs};
use super::{Importer, Val, R};
use crate::error::NodeError;
use crate::proto::{attribute_proto::AttributeType, AttributeProto, NodeProto};
use crate::tensor::{self, Tensor};
use tir_ir::op::Slice;
use tir_ir::{BinaryOp, CompareOp, DType, LogicalOp, Op, ReduceKind, UnaryOp, Value};

/// The most mask elements (output elements × data elements) a gather with constant indices
/// builds: the mask is a constant of the model, and past this a gather kernel is the answer.
const MAX_MASK_ELEMENTS: u64 = 1 << 22;

fn refuse(op: &'static str, problem: impl Into<String>) -> NodeError {
    NodeError::Composite {
        op,
        problem: problem.into(),
    }
}

fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: None,
    }
}

/// The element of a constant as a scalar constant of the same type.
fn element(t: &Tensor, i: usize) -> Tensor {
    if t.is_int() {
        Tensor::from_i64s(t.dtype, vec![], &[t.ints()[i]])
    } else {
        Tensor::from_f64s(t.dtype, vec![], &[t.floats()[i]])
    }
}

/// An index into an axis of `len` elements, negative counting from the end, checked.
fn wrap_index(op: &'static str, i: i64, len: u64) -> R<u64> {
    let l = len as i64;
    let w = if i < 0 { i + l } else { i };
    if !(0..l).contains(&w) {
        return Err(refuse(
            op,
            format!("index {i} is out of range for an axis of {len}"),
        ));
    }
    Ok(w as u64)
}

fn flat(strides: &[usize], idx: &[u64]) -> usize {
    idx.iter().zip(strides).map(|(&i, &s)| i as usize * s).sum()
}

/// How a scatter combines an element with the updates it receives (ONNX `reduction`).
#[derive(Clone, Copy, PartialEq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

impl Reduction {
    fn parse(op: &'static str, a: &Attrs) -> R<Reduction> {
        Ok(match a.string("reduction")?.as_deref() {
            None | Some("none") => Reduction::None,
            Some("add") => Reduction::Add,
            Some("mul") => Reduction::Mul,
            Some("max") => Reduction::Max,
            Some("min") => Reduction::Min,
            Some(other) => return Err(refuse(op, format!("reduction `{other}` is unknown"))),
        })
    }

    fn fold(self, acc: f64, u: f64) -> f64 {
        match self {
            Reduction::None => u,
            Reduction::Add => acc + u,
            Reduction::Mul => acc * u,
            Reduction::Max => acc.max(u),
            Reduction::Min => acc.min(u),
        }
    }

    fn fold_int(self, acc: i64, u: i64) -> i64 {
        match self {
            Reduction::None => u,
            Reduction::Add => acc.wrapping_add(u),
            Reduction::Mul => acc.wrapping_mul(u),
            Reduction::Max => acc.max(u),
            Reduction::Min => acc.min(u),
        }
    }
}

impl Importer {
    fn push_op(&mut self, op: Op, operands: &[Value]) -> R<Value> {
        let name = self.em.fresh();
        Ok(self.em.push(op, operands, vec![name])?[0])
    }

    /// A constant named after the node's first output.
    fn konst_for(&mut self, node: &NodeProto, what: &str, t: Tensor) -> Value {
        let hint = format!("{}.{what}", node.output.first().map_or("c", |s| s));
        self.const_value(&hint, t)
    }

    fn scalar_of_type(&mut self, node: &NodeProto, what: &str, dtype: DType, v: f64) -> Value {
        self.konst_for(node, what, Tensor::from_f64s(dtype, vec![], &[v]))
    }

    fn float_input(&mut self, node: &NodeProto, op: &'static str) -> R<(Value, Vec<u64>, DType)> {
        let x = self.in_value(node, 0)?;
        let ty = self.em.ty(x)?.clone();
        if !ty.dtype.is_float() {
            return Err(refuse(
                op,
                format!("expected a float input, got {}", ty.dtype),
            ));
        }
        Ok((x, ty.shape, ty.dtype))
    }

    /// Hardmax: 1 where the first maximum along `axis` is, else 0, as
    /// `cast(argmax(x, axis, keepdims) == iota)`. Before opset 13 the input is coerced to a
    /// matrix at `axis` (default 1) and the maximum taken along its rows.
    pub(super) fn hardmax(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let (x, shape, dtype) = self.float_input(node, "Hardmax")?;
        let rank = shape.len();
        if rank == 0 {
            return Err(refuse("Hardmax", "the input needs rank 1 or more, got 0"));
        }
        let coerce = self.opset < 13;
        let axis = a.int("axis")?.unwrap_or(if coerce { 1 } else { -1 });
        let axis = norm_axis(axis, rank)?;
        let (x, s, axis) = if coerce {
            let outer: u64 = shape[..axis].iter().product();
            let inner: u64 = shape[axis..].iter().product();
            let m = self.push_op(Op::reshape(vec![outer as i64, inner as i64]), &[x])?;
            (m, vec![outer, inner], 1)
        } else {
            (x, shape.clone(), axis)
        };
        if s[axis] == 0 {
            return Err(refuse("Hardmax", "the reduced axis is empty"));
        }
        let idx = self.push_op(
            Op::ArgReduce {
                max: true,
                axis: axis as i64,
                keepdims: true,
                select_last_index: false,
            },
            &[x],
        )?;
        let mut is = vec![1u64; s.len()];
        is[axis] = s[axis];
        let iota: Vec<i64> = (0..s[axis] as i64).collect();
        let iota = self.konst_for(node, "iota", Tensor::from_i64s(DType::I64, is, &iota));
        let hit = self.push_op(Op::Compare(CompareOp::Equal), &[idx, iota])?;
        if !coerce {
            return self.emit(node, Op::Cast { to: dtype }, &[hit]);
        }
        let y = self.push_op(Op::Cast { to: dtype }, &[hit])?;
        let back = shape.iter().map(|&d| d as i64).collect();
        self.emit(node, Op::reshape(back), &[y])
    }

    /// IsInf: `x == +inf`, `x == -inf`, or either, as `detect_positive`/`detect_negative` ask.
    pub(super) fn is_inf(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let (x, _, dtype) = self.float_input(node, "IsInf")?;
        let pos = a.int("detect_positive")?.unwrap_or(1) != 0;
        let neg = a.int("detect_negative")?.unwrap_or(1) != 0;
        let pinf = self.scalar_of_type(node, "inf", dtype, f64::INFINITY);
        let ninf = self.scalar_of_type(node, "neg_inf", dtype, f64::NEG_INFINITY);
        let eq = Op::Compare(CompareOp::Equal);
        match (pos, neg) {
            (true, false) => self.emit(node, eq, &[x, pinf]),
            (false, true) => self.emit(node, eq, &[x, ninf]),
            // Neither: no element is both, so `and` gives the all-false mask of x's shape.
            (p, _) => {
                let a = self.push_op(eq.clone(), &[x, pinf])?;
                let b = self.push_op(eq, &[x, ninf])?;
                let l = if p { LogicalOp::Or } else { LogicalOp::And };
                self.emit(node, Op::Logical(l), &[a, b])
            }
        }
    }

    /// IsNaN: `not(x == x)`, NaN being the one value unequal to itself.
    pub(super) fn is_nan(&mut self, node: &NodeProto) -> R<()> {
        let (x, _, _) = self.float_input(node, "IsNaN")?;
        let eq = self.push_op(Op::Compare(CompareOp::Equal), &[x, x])?;
        self.emit(node, Op::Not, &[eq])
    }

    /// Shrink (unchanged since opset 9): `x + bias` below `-lambd`, `x - bias` above `lambd`,
    /// else 0.
    pub(super) fn shrink(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let lambd = a.float("lambd")?.unwrap_or(0.5);
        let bias = a.float("bias")?.unwrap_or(0.0);
        let x = self.in_value(node, 0)?;
        let dtype = self.em.ty(x)?.dtype;
        let lo = self.scalar_of_type(node, "neg_lambd", dtype, -lambd);
        let hi = self.scalar_of_type(node, "lambd", dtype, lambd);
        let b = self.scalar_of_type(node, "bias", dtype, bias);
        let zero = self.scalar_of_type(node, "zero", dtype, 0.0);
        let below = self.push_op(Op::Compare(CompareOp::Less), &[x, lo])?;
        let above = self.push_op(Op::Compare(CompareOp::Greater), &[x, hi])?;
        let up = self.push_op(bin(BinaryOp::Add), &[x, b])?;
        let down = self.push_op(bin(BinaryOp::Sub), &[x, b])?;
        let inner = self.push_op(Op::Where, &[above, down, zero])?;
        self.emit(node, Op::Where, &[below, up, inner])
    }

    /// EyeLike: a constant of the input's (static) shape, ones on the diagonal `k`.
    pub(super) fn eye_like(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let shape = self.shape_of(&x)?;
        let [n, m] = shape[..] else {
            return Err(refuse(
                "EyeLike",
                format!("the input needs rank 2, got {}", shape.len()),
            ));
        };
        let dtype = match a.int("dtype")? {
            Some(code) => tensor::dtype_from_onnx(code)?,
            None => self.dtype_of(&x),
        };
        let k = a.int("k")?.unwrap_or(0);
        let vals: Vec<i64> = (0..n as i64)
            .flat_map(|i| (0..m as i64).map(move |j| i64::from(j - i == k)))
            .collect();
        self.bind_const(node, Tensor::from_i64s(dtype, shape, &vals))
    }

    /// OneHot: `where(unsqueeze(i, axis) == iota(depth), on, off)`, a negative index counting
    /// from `depth`; an index outside `[-depth, depth)` gives a row of `off`.
    pub(super) fn one_hot(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let depth = self.req_const_in(node, 1, "depth")?;
        let values = self.req_const_in(node, 2, "values")?;
        let (&[d], 2) = (&depth.floats()[..], values.numel()) else {
            return Err(refuse(
                "OneHot",
                "depth must be a scalar and values [off, on] two elements",
            ));
        };
        let depth = d as i64;
        if depth < 1 {
            return Err(refuse(
                "OneHot",
                format!("depth must be positive, got {depth}"),
            ));
        }
        let mut i = self.in_value(node, 0)?;
        let ty = self.em.ty(i)?.clone();
        let axis = norm_axis(a.int("axis")?.unwrap_or(-1), ty.rank() + 1)?;
        if ty.dtype != DType::I64 {
            i = self.push_op(Op::Cast { to: DType::I64 }, &[i])?;
        }
        let zero = self.konst_for(node, "zero", Tensor::from_i64s(DType::I64, vec![], &[0]));
        let dc = self.konst_for(
            node,
            "depth",
            Tensor::from_i64s(DType::I64, vec![], &[depth]),
        );
        let neg = self.push_op(Op::Compare(CompareOp::Less), &[i, zero])?;
        let wrapped = self.push_op(bin(BinaryOp::Add), &[i, dc])?;
        let i = self.push_op(Op::Where, &[neg, wrapped, i])?;
        let i = self.push_op(
            Op::Unsqueeze {
                axes: vec![axis as i64],
            },
            &[i],
        )?;
        let mut is = vec![1u64; ty.rank() + 1];
        is[axis] = depth as u64;
        let iota: Vec<i64> = (0..depth).collect();
        let iota = self.konst_for(node, "iota", Tensor::from_i64s(DType::I64, is, &iota));
        let hit = self.push_op(Op::Compare(CompareOp::Equal), &[i, iota])?;
        let off = self.konst_for(node, "off", element(&values, 0));
        let on = self.konst_for(node, "on", element(&values, 1));
        self.emit(node, Op::Where, &[hit, on, off])
    }

    /// Expand with a constant shape: NumPy broadcasting of the input to it, as a reshape to
    /// the result's rank and a concat of copies along each axis that grows (as Tile does).
    pub(super) fn expand(&mut self, node: &NodeProto) -> R<()> {
        let want = self.req_const_in(node, 1, "shape")?.ints();
        let x = self.in_value(node, 0)?;
        let xs = self.em.ty(x)?.shape.clone();
        let rank = xs.len().max(want.len());
        let pad = |s: &[u64]| {
            let mut p = vec![1u64; rank - s.len()];
            p.extend_from_slice(s);
            p
        };
        let xp = pad(&xs);
        let wp: Vec<i64> = {
            let mut p = vec![1i64; rank - want.len()];
            p.extend_from_slice(&want);
            p
        };
        let mut out = Vec::with_capacity(rank);
        for (&a, &b) in xp.iter().zip(&wp) {
            out.push(match (a, b) {
                (a, b) if b == 1 || a as i64 == b => a,
                (1, b) if b > 1 => b as u64,
                _ => {
                    return Err(refuse(
                        "Expand",
                        format!("shape {want:?} does not broadcast with the input's {xs:?}"),
                    ))
                }
            });
        }
        let mut v = x;
        if xp.len() != xs.len() {
            let shape = xp.iter().map(|&d| d as i64).collect();
            v = self.push_op(Op::reshape(shape), &[v])?;
        }
        let grows: Vec<usize> = (0..rank).filter(|&i| xp[i] != out[i]).collect();
        let Some(&last) = grows.last() else {
            let shape = out.iter().map(|&d| d as i64).collect();
            return self.emit(node, Op::reshape(shape), &[v]);
        };
        for &axis in &grows {
            let copies = vec![v; out[axis] as usize];
            let op = Op::Concat { axis: axis as i64 };
            if axis == last {
                return self.emit(node, op, &copies);
            }
            v = self.push_op(op, &copies)?;
        }
        Ok(())
    }

    /// LpPool: `(sum over the window of |x|^p)^(1/p)`, the sum an average pool that counts
    /// the padding, times the window size (1-D through the 2-D pool, as AveragePool).
    pub(super) fn lp_pool(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        self.only_first_outputs(node, 1)?;
        let p = a.int("p")?.unwrap_or(2);
        if p < 1 {
            return Err(refuse("LpPool", format!("p must be 1 or more, got {p}")));
        }
        let (x, shape, dtype) = self.float_input(node, "LpPool")?;
        if !matches!(shape.len(), 3 | 4) {
            return Err(refuse(
                "LpPool",
                format!(
                    "1-D and 2-D pooling only (rank 3 or 4), got rank {}",
                    shape.len()
                ),
            ));
        }
        let kernel = a.ints("kernel_shape")?.unwrap_or_default();
        let window: i64 = kernel.iter().product();
        let ax = self.push_op(Op::Unary(UnaryOp::Abs), &[x])?;
        let pw = if p == 1 {
            ax
        } else {
            let pc = self.scalar_of_type(node, "p", dtype, p as f64);
            self.push_op(bin(BinaryOp::Pow), &[ax, pc])?
        };
        let mut attrs: Vec<AttributeProto> =
            a.0.iter()
                .filter(|at| !matches!(at.name.as_deref(), Some("p" | "count_include_pad")))
                .cloned()
                .collect();
        attrs.push(AttributeProto {
            name: Some("count_include_pad".into()),
            i: Some(1),
            r#type: Some(AttributeType::Int as i32),
            ..Default::default()
        });
        let hint = node.output.first().map_or("lp_pool", |s| s);
        let (inner_in, inner_out) = (
            self.fresh_env_name(hint, "in"),
            self.fresh_env_name(hint, "out"),
        );
        self.env.insert(inner_in.clone(), Val::Ir(pw));
        let inner = NodeProto {
            input: vec![inner_in],
            output: vec![inner_out.clone()],
            op_type: Some("AveragePool".into()),
            ..Default::default()
        };
        if shape.len() == 3 {
            self.pool_1d(&inner, "AveragePool", &Attrs(&attrs))?;
        } else {
            self.pool(&inner, "AveragePool", &Attrs(&attrs))?;
        }
        let mean = self.value(&inner_out)?;
        let w = self.scalar_of_type(node, "window", dtype, window as f64);
        let sum = self.push_op(bin(BinaryOp::Mul), &[mean, w])?;
        if p == 1 {
            let shape = self.em.ty(sum)?.shape.iter().map(|&d| d as i64).collect();
            return self.emit(node, Op::reshape(shape), &[sum]);
        }
        let inv = self.scalar_of_type(node, "inv_p", dtype, 1.0 / p as f64);
        self.emit(node, bin(BinaryOp::Pow), &[sum, inv])
    }

    /// A name bound to nothing yet, for a stand-in node's input or output.
    fn fresh_env_name(&self, hint: &str, what: &str) -> String {
        let mut k = 0;
        loop {
            let n = format!("{hint}.{what}{k}");
            if !self.env.contains_key(&n) {
                return n;
            }
            k += 1;
        }
    }

    /// Trilu on a non-float tensor: `where(mask, x, 0)` with the triangle as a constant mask
    /// over the last two axes (the `trilu` op computes on floats).
    pub(super) fn trilu_masked(
        &mut self,
        node: &NodeProto,
        x: Value,
        upper: bool,
        k: i64,
    ) -> R<()> {
        let ty = self.em.ty(x)?.clone();
        let r = ty.rank();
        if r < 2 {
            return Err(refuse(
                "Trilu",
                format!("the input needs rank 2 or more, got {r}"),
            ));
        }
        let (n, m) = (ty.shape[r - 2], ty.shape[r - 1]);
        let keep: Vec<i64> = (0..n as i64)
            .flat_map(|i| {
                (0..m as i64).map(move |j| i64::from(if upper { j - i >= k } else { j - i <= k }))
            })
            .collect();
        let mask = self.konst_for(
            node,
            "mask",
            Tensor::from_i64s(DType::Bool, vec![n, m], &keep),
        );
        let zero = self.scalar_of_type(node, "zero", ty.dtype, 0.0);
        self.emit(node, Op::Where, &[mask, x, zero])
    }

    /// The output of a gather whose every element `j` (row-major over `out_shape`) is the
    /// data element `src[j]` (row-major), or 0 where `src[j]` is `None`, emitted as the
    /// node's output.
    fn gather_const(
        &mut self,
        node: &NodeProto,
        op: &'static str,
        data: Value,
        out_shape: Vec<u64>,
        src: &[Option<usize>],
    ) -> R<()> {
        let ty = self.em.ty(data)?.clone();
        let n = tensor::numel(&ty.shape).unwrap_or(u64::MAX);
        let j = src.len() as u64;
        let out: Vec<i64> = out_shape.iter().map(|&d| d as i64).collect();
        if j == 0 || n == 0 {
            return Err(refuse(op, "an empty gather is not supported"));
        }
        let flat_data = self.push_op(Op::reshape(vec![n as i64]), &[data])?;
        if !ty.dtype.is_float() {
            return Err(refuse(
                op,
                format!("on {} data: the IR has no gather kernel, and the sum that selects an element is on floats", ty.dtype),
            ));
        }
        if j.saturating_mul(n) > MAX_MASK_ELEMENTS {
            return Err(refuse(
                op,
                format!("{j} gathered elements from {n} need a {j}x{n} selection mask, more than the {MAX_MASK_ELEMENTS} elements it builds (the IR has no gather kernel)"),
            ));
        }
        let mut mask = vec![0i64; (j * n) as usize];
        for (row, s) in src.iter().enumerate() {
            if let Some(s) = s {
                mask[row * n as usize + s] = 1;
            }
        }
        let mask = self.konst_for(
            node,
            "select",
            Tensor::from_i64s(DType::Bool, vec![j, n], &mask),
        );
        let row = self.push_op(Op::reshape(vec![1, n as i64]), &[flat_data])?;
        let zero = self.scalar_of_type(node, "zero", ty.dtype, 0.0);
        let picked = self.push_op(Op::Where, &[mask, row, zero])?;
        let sum = self.push_op(
            Op::Reduce {
                kind: ReduceKind::Sum,
                axes: vec![1],
                keepdims: false,
            },
            &[picked],
        )?;
        self.emit(node, Op::reshape(out), &[sum])
    }

    fn data_and_indices(&mut self, node: &NodeProto) -> R<(Value, Vec<u64>, Tensor)> {
        // Run-time indices are refused by name (the IR has no gather or scatter kernel).
        let indices = self.req_const_in(node, 1, "indices")?;
        let data = self.in_value(node, 0)?;
        let shape = self.em.ty(data)?.shape.clone();
        Ok((data, shape, (*indices).clone()))
    }

    /// Gather with constant indices along `axis` (data computed at run time).
    pub(super) fn gather(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let (data, ds, idx) = self.data_and_indices(node)?;
        if ds.is_empty() {
            return Err(refuse("Gather", "the data needs rank 1 or more"));
        }
        let axis = norm_axis(a.int("axis")?.unwrap_or(0), ds.len())?;
        let is = idx.shape.clone();
        let iv = idx.ints();
        let mut out = ds[..axis].to_vec();
        out.extend_from_slice(&is);
        out.extend_from_slice(&ds[axis + 1..]);
        let st = tensor::strides(&ds);
        let ist = tensor::strides(&is);
        let mut src = Vec::new();
        let mut bad = None;
        tensor::for_each_index(&out, |o| {
            let at = flat(&ist, &o[axis..axis + is.len()]);
            match wrap_index("Gather", iv[at], ds[axis]) {
                Ok(i) => {
                    let mut d = o[..axis].to_vec();
                    d.push(i);
                    d.extend_from_slice(&o[axis + is.len()..]);
                    src.push(Some(flat(&st, &d)));
                }
                Err(e) => bad = Some(e),
            }
        });
        if let Some(e) = bad {
            return Err(e);
        }
        self.gather_const(node, "Gather", data, out, &src)
    }

    /// GatherElements with constant indices: `out[i] = data[i with i[axis] = indices[i]]`.
    /// The selection runs along `axis` only: the data (cut to the indices' extent on the
    /// other axes) gains an axis of length 1 before `axis`, a mask `[.., K, C, ..]` marks
    /// `indices[.., k, ..] == c`, and the sum over the `C` axis is the result, so the mask
    /// has `indices × C` elements, not `indices × data`.
    pub(super) fn gather_elements(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "GatherElements";
        let (data, ds, idx) = self.data_and_indices(node)?;
        let axis = norm_axis(a.int("axis")?.unwrap_or(0), ds.len().max(1))?;
        // Checks the shapes and every index.
        self.element_targets(OP, &ds, &idx, axis)?;
        let dtype = self.em.ty(data)?.dtype;
        if !dtype.is_float() {
            return Err(refuse(
                OP,
                format!("on {dtype} data: the IR has no gather kernel, and the sum that selects an element is on floats"),
            ));
        }
        let is = idx.shape.clone();
        let c = ds[axis];
        let j = tensor::numel(&is).unwrap_or(u64::MAX);
        if j == 0 {
            return Err(refuse(OP, "an empty gather is not supported"));
        }
        if j.saturating_mul(c) > MAX_MASK_ELEMENTS {
            return Err(refuse(
                OP,
                format!("{j} gathered elements along an axis of {c} need a selection mask of {j}x{c}, more than the {MAX_MASK_ELEMENTS} elements it builds (the IR has no gather kernel)"),
            ));
        }
        let cut: Vec<usize> = (0..ds.len())
            .filter(|&d| d != axis && is[d] != ds[d])
            .collect();
        let mut v = data;
        if !cut.is_empty() {
            let slice = Slice {
                starts: vec![0; cut.len()],
                ends: cut.iter().map(|&d| is[d] as i64).collect(),
                axes: cut.iter().map(|&d| d as i64).collect(),
                steps: vec![1; cut.len()],
            };
            v = self.push_op(Op::Slice(slice), &[v])?;
        }
        let v = self.push_op(
            Op::Unsqueeze {
                axes: vec![axis as i64],
            },
            &[v],
        )?;
        let mut ms = is.clone();
        ms.insert(axis + 1, c);
        let ist = tensor::strides(&is);
        let iv = idx.ints();
        let mut mask = Vec::with_capacity((j * c) as usize);
        tensor::for_each_index(&ms, |m| {
            let mut i = m.to_vec();
            let want = i.remove(axis + 1);
            let k = iv[flat(&ist, &i)];
            let k = if k < 0 { k + c as i64 } else { k };
            mask.push(i64::from(k == want as i64));
        });
        let mask = self.konst_for(node, "select", Tensor::from_i64s(DType::Bool, ms, &mask));
        let zero = self.scalar_of_type(node, "zero", dtype, 0.0);
        let picked = self.push_op(Op::Where, &[mask, v, zero])?;
        self.emit(
            node,
            Op::Reduce {
                kind: ReduceKind::Sum,
                axes: vec![axis as i64 + 1],
                keepdims: false,
            },
            &[picked],
        )
    }

    /// For each index position (row-major), the data element it names along `axis`.
    fn element_targets(
        &self,
        op: &'static str,
        ds: &[u64],
        idx: &Tensor,
        axis: usize,
    ) -> R<Vec<usize>> {
        if idx.shape.len() != ds.len()
            || idx
                .shape
                .iter()
                .zip(ds)
                .enumerate()
                .any(|(d, (&i, &n))| d != axis && i > n)
        {
            return Err(refuse(
                op,
                format!(
                    "indices of shape {:?} do not fit data of shape {ds:?}",
                    idx.shape
                ),
            ));
        }
        let st = tensor::strides(ds);
        let iv = idx.ints();
        let mut src = Vec::with_capacity(iv.len());
        let mut bad = None;
        let mut k = 0;
        tensor::for_each_index(&idx.shape, |o| {
            match wrap_index(op, iv[k], ds[axis]) {
                Ok(i) => {
                    let mut d = o.to_vec();
                    d[axis] = i;
                    src.push(flat(&st, &d));
                }
                Err(e) => bad = Some(e),
            }
            k += 1;
        });
        match bad {
            Some(e) => Err(e),
            None => Ok(src),
        }
    }

    /// For each tuple of ScatterND/GatherND indices (`indices.shape[..q-1]` row-major), the
    /// data elements it names (its slice over the trailing data axes), after `batch` leading
    /// axes shared by data and indices.
    fn nd_targets(
        &self,
        op: &'static str,
        ds: &[u64],
        idx: &Tensor,
        batch: usize,
    ) -> R<Vec<Vec<usize>>> {
        let is = &idx.shape;
        let q = is.len();
        let k = is.last().copied().unwrap_or(0) as usize;
        if q < 1 + batch || k == 0 || batch + k > ds.len() || is[..batch] != ds[..batch] {
            return Err(refuse(
                op,
                format!(
                    "indices of shape {is:?} do not fit data of shape {ds:?} (batch_dims {batch})"
                ),
            ));
        }
        let st = tensor::strides(ds);
        let iv = idx.ints();
        let rest = &ds[batch + k..];
        let mut out = Vec::new();
        let mut bad = None;
        let mut t = 0;
        tensor::for_each_index(&is[..q - 1], |o| {
            let mut base = o[..batch].to_vec();
            for (c, &n) in ds[batch..batch + k].iter().enumerate() {
                match wrap_index(op, iv[t * k + c], n) {
                    Ok(i) => base.push(i),
                    Err(e) => bad = Some(e),
                }
            }
            t += 1;
            if base.len() != batch + k {
                return;
            }
            let mut slice = Vec::new();
            tensor::for_each_index(rest, |r| {
                let mut d = base.clone();
                d.extend_from_slice(r);
                slice.push(flat(&st, &d));
            });
            out.push(slice);
        });
        match bad {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// GatherND with constant indices.
    pub(super) fn gather_nd(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let (data, ds, idx) = self.data_and_indices(node)?;
        let batch = a.int("batch_dims")?.unwrap_or(0);
        let batch = usize::try_from(batch)
            .map_err(|_| refuse("GatherND", format!("batch_dims {batch} is negative")))?;
        let tuples = self.nd_targets("GatherND", &ds, &idx, batch)?;
        let k = *idx.shape.last().unwrap_or(&0) as usize;
        let mut out = idx.shape[..idx.shape.len() - 1].to_vec();
        out.extend_from_slice(&ds[batch + k..]);
        let src: Vec<Option<usize>> = tuples.into_iter().flatten().map(Some).collect();
        self.gather_const(node, "GatherND", data, out, &src)
    }

    /// ScatterElements (and Scatter, its opset-9 form) with constant indices and updates.
    pub(super) fn scatter_elements(
        &mut self,
        node: &NodeProto,
        a: &Attrs,
        op: &'static str,
    ) -> R<()> {
        let (data, ds, idx) = self.data_and_indices(node)?;
        let axis = norm_axis(a.int("axis")?.unwrap_or(0), ds.len().max(1))?;
        let red = Reduction::parse(op, a)?;
        let targets = self.element_targets(op, &ds, &idx, axis)?;
        let per_update: Vec<Vec<usize>> = targets.into_iter().map(|t| vec![t]).collect();
        self.scatter_const(node, op, data, &ds, &per_update, red)
    }

    /// ScatterND with constant indices and updates.
    pub(super) fn scatter_nd(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let (data, ds, idx) = self.data_and_indices(node)?;
        let red = Reduction::parse("ScatterND", a)?;
        let tuples = self.nd_targets("ScatterND", &ds, &idx, 0)?;
        self.scatter_const(node, "ScatterND", data, &ds, &tuples, red)
    }

    /// `where(hit, combine(data, c), data)`: update group `g` (row-major over the updates,
    /// `targets[g].len()` consecutive updates each) writes the data elements `targets[g]`;
    /// `c` holds, per element, the updates it receives folded in order by `red`.
    fn scatter_const(
        &mut self,
        node: &NodeProto,
        op: &'static str,
        data: Value,
        ds: &[u64],
        targets: &[Vec<usize>],
        red: Reduction,
    ) -> R<()> {
        let updates = self.req_const_in(node, 2, "updates")?;
        let dtype = self.em.ty(data)?.dtype;
        let n = tensor::numel(ds).unwrap_or(0) as usize;
        let count: usize = targets.iter().map(Vec::len).sum();
        if updates.numel() != count || updates.dtype != dtype {
            return Err(refuse(
                op,
                format!(
                    "updates of shape {:?} ({}) do not match the indices and data ({dtype})",
                    updates.shape, updates.dtype
                ),
            ));
        }
        let mut hit = vec![0i64; n];
        let c = if updates.is_int() {
            let u = updates.ints();
            let mut c = vec![0i64; n];
            for (i, &t) in targets.iter().flatten().enumerate() {
                c[t] = if hit[t] == 0 {
                    u[i]
                } else {
                    red.fold_int(c[t], u[i])
                };
                hit[t] = 1;
            }
            Tensor::from_i64s(dtype, ds.to_vec(), &c)
        } else {
            let u = updates.floats();
            let mut c = vec![0f64; n];
            for (i, &t) in targets.iter().flatten().enumerate() {
                c[t] = if hit[t] == 0 {
                    u[i]
                } else {
                    red.fold(c[t], u[i])
                };
                hit[t] = 1;
            }
            Tensor::from_f64s(dtype, ds.to_vec(), &c)
        };
        let hit = self.konst_for(
            node,
            "hit",
            Tensor::from_i64s(DType::Bool, ds.to_vec(), &hit),
        );
        let c = self.konst_for(node, "updates", c);
        let combined = match red {
            Reduction::None => c,
            Reduction::Add => self.push_op(bin(BinaryOp::Add), &[data, c])?,
            Reduction::Mul => self.push_op(bin(BinaryOp::Mul), &[data, c])?,
            Reduction::Max => self.push_op(bin(BinaryOp::Max), &[data, c])?,
            Reduction::Min => self.push_op(bin(BinaryOp::Min), &[data, c])?,
        };
        self.emit(node, Op::Where, &[hit, combined, data])
    }

    /// Compress with a constant condition: the slices (or, without `axis`, the elements of
    /// the flattened input) whose condition is true, in order.
    pub(super) fn compress(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "Compress";
        let cond = self.req_const_in(node, 1, "condition")?.ints();
        let data = self.in_value(node, 0)?;
        let ds = self.em.ty(data)?.shape.clone();
        let (shape, axis) = match a.int("axis")? {
            Some(ax) => (ds.clone(), norm_axis(ax, ds.len().max(1))?),
            None => (vec![tensor::numel(&ds).unwrap_or(0)], 0),
        };
        if shape.is_empty() {
            return Err(refuse(OP, "the input needs rank 1 or more"));
        }
        let keep: Vec<u64> = (0..shape[axis].min(cond.len() as u64))
            .filter(|&i| cond[i as usize] != 0)
            .collect();
        let mut out = shape.clone();
        out[axis] = keep.len() as u64;
        let st = tensor::strides(&shape);
        let mut src = Vec::new();
        tensor::for_each_index(&out, |o| {
            let mut d = o.to_vec();
            d[axis] = keep[o[axis] as usize];
            src.push(Some(flat(&st, &d)));
        });
        self.gather_const(node, OP, data, out, &src)
    }

    /// ReverseSequence (unchanged since opset 10) with constant lengths: along `time_axis`,
    /// the first `sequence_lens[b]` elements of batch entry `b` reversed, the rest as they are.
    pub(super) fn reverse_sequence(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "ReverseSequence";
        let lens = self.req_const_in(node, 1, "sequence_lens")?.ints();
        let data = self.in_value(node, 0)?;
        let ds = self.em.ty(data)?.shape.clone();
        if ds.len() < 2 {
            return Err(refuse(OP, "the input needs rank 2 or more"));
        }
        let bax = norm_axis(a.int("batch_axis")?.unwrap_or(1), ds.len())?;
        let tax = norm_axis(a.int("time_axis")?.unwrap_or(0), ds.len())?;
        if bax == tax || lens.len() as u64 != ds[bax] {
            return Err(refuse(
                OP,
                format!(
                    "{} sequence lengths for batch axis {bax} and time axis {tax} of {ds:?}",
                    lens.len()
                ),
            ));
        }
        if let Some(&l) = lens.iter().find(|&&l| l < 0 || l as u64 > ds[tax]) {
            return Err(refuse(
                OP,
                format!("sequence length {l} is outside 0..={}", ds[tax]),
            ));
        }
        let st = tensor::strides(&ds);
        let mut src = Vec::new();
        tensor::for_each_index(&ds, |o| {
            let l = lens[o[bax] as usize] as u64;
            let mut d = o.to_vec();
            if d[tax] < l {
                d[tax] = l - 1 - d[tax];
            }
            src.push(Some(flat(&st, &d)));
        });
        self.gather_const(node, OP, data, ds, &src)
    }

    /// MaxUnpool with constant indices: each input element written where its index (into the
    /// unpooled shape `(in - 1) * stride - pads + kernel`) points, zeros elsewhere, and that
    /// result placed at the start of `output_shape` when one is given.
    pub(super) fn max_unpool(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        const OP: &str = "MaxUnpool";
        let idx = self.req_const_in(node, 1, "indices")?;
        let data = self.in_value(node, 0)?;
        let xs = self.em.ty(data)?.shape.clone();
        let kernel = a.ints("kernel_shape")?.unwrap_or_default();
        let sp = xs.len().saturating_sub(2);
        if sp == 0 || kernel.len() != sp || idx.shape != xs {
            return Err(refuse(
                OP,
                format!(
                    "kernel_shape {kernel:?} and indices {:?} do not fit the input {xs:?}",
                    idx.shape
                ),
            ));
        }
        let strides = a.ints("strides")?.unwrap_or(vec![1; sp]);
        let pads = a.ints("pads")?.unwrap_or(vec![0; 2 * sp]);
        if strides.len() != sp || pads.len() != 2 * sp {
            return Err(refuse(
                OP,
                "strides and pads must have one (two) entries per spatial axis",
            ));
        }
        let mut inferred = xs[..2].to_vec();
        for d in 0..sp {
            let v = (xs[d + 2] as i64 - 1) * strides[d] - pads[d] - pads[sp + d] + kernel[d];
            if v < 1 {
                return Err(refuse(
                    OP,
                    format!("the unpooled axis {} would be {v} long", d + 2),
                ));
            }
            inferred.push(v as u64);
        }
        let out = match self.const_in(node, 2, "output_shape")? {
            Some(t) => super::attrs::to_u64s("output_shape", &t.ints())?,
            None => inferred.clone(),
        };
        if out.len() != inferred.len() || out.iter().zip(&inferred).any(|(o, i)| o < i) {
            return Err(refuse(
                OP,
                format!("output_shape {out:?} is smaller than the unpooled shape {inferred:?}"),
            ));
        }
        let total = tensor::numel(&inferred).unwrap_or(0);
        let mut at: Vec<Option<usize>> = vec![None; total as usize];
        for (e, &i) in idx.ints().iter().enumerate() {
            if !(0..total as i64).contains(&i) {
                return Err(refuse(
                    OP,
                    format!("index {i} is outside the unpooled tensor of {total} elements"),
                ));
            }
            at[i as usize] = Some(e);
        }
        let ist = tensor::strides(&inferred);
        let mut src = Vec::new();
        tensor::for_each_index(&out, |o| {
            let inside = o.iter().zip(&inferred).all(|(&c, &n)| c < n);
            src.push(if inside { at[flat(&ist, o)] } else { None });
        });
        self.gather_const(node, OP, data, out, &src)
    }
}
