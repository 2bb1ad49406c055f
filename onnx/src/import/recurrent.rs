//! RNN, GRU and LSTM unrolled at import over the static sequence length into matmuls and
//! activations, as ONNX's reference steps them (one direction, the default activations).
//! Every step's state is an ordinary value, planned in the slab like any tensor (the paper's
//! §7 case for staged planning: the states' lifetimes are short and staggered).
//!
//! The weights `W`, `R` and the bias `B` must be constants (initializers, or bound with
//! `tirc import --bind`): each gate's block is transposed and each bias pair summed at import,
//! as the reference sums `Wb + Rb` before adding it.

use super::attrs::Attrs;
use super::{Importer, Val, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::Tensor;
use tir_ir::op::Slice;
use tir_ir::{BinaryOp, DType, Op, UnaryOp, Value};

/// The three recurrent cells.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Gru => "GRU",
            Cell::Lstm => "LSTM",
        }
    }

    /// Gate blocks in W, R and each half of B, in ONNX's order.
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

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

/// Rows `[g*h, (g+1)*h)` of a `[1, G*h, k]` weight, transposed to `[k, h]`.
fn gate_t(w: &[f64], g: usize, h: usize, k: usize) -> Vec<f64> {
    let mut t = vec![0.0; k * h];
    for r in 0..h {
        for c in 0..k {
            t[c * h + r] = w[(g * h + r) * k + c];
        }
    }
    t
}

impl Importer {
    fn r_push(&mut self, op: Op, operands: &[Value]) -> R<Value> {
        let name = self.em.fresh();
        Ok(self.em.push(op, operands, vec![name])?[0])
    }

    fn r_const(&mut self, node: &NodeProto, what: &str, shape: Vec<u64>, v: &[f64]) -> Value {
        let hint = format!("{}.{what}", node.output.first().map_or("c", |s| s));
        self.const_value(&hint, Tensor::from_f64s(DType::F32, shape, v))
    }

    fn r_bin(&mut self, op: BinaryOp, a: Value, b: Value) -> R<Value> {
        self.r_push(bin(op), &[a, b])
    }

    fn r_un(&mut self, u: UnaryOp, a: Value) -> R<Value> {
        self.r_push(Op::Unary(u), &[a])
    }

    fn r_matmul(&mut self, a: Value, b: Value) -> R<Value> {
        self.r_push(Op::MatMul { activation: None }, &[a, b])
    }

    /// An optional initial state (`[1, batch, hidden]`, or `[batch, 1, hidden]` in layout 1)
    /// as `[batch, hidden]`, else zeros.
    fn initial_state(
        &mut self,
        node: &NodeProto,
        i: usize,
        what: &str,
        b: u64,
        h: u64,
    ) -> R<Value> {
        match self.opt_in_value(node, i)? {
            Some(v) => self.r_push(Op::reshape(vec![b as i64, h as i64]), &[v]),
            None => Ok(self.r_const(node, what, vec![b, h], &vec![0.0; (b * h) as usize])),
        }
    }

    /// Emits the node's output `index` (when it has one) from `op`.
    fn r_output(&mut self, node: &NodeProto, index: usize, op: Op, operands: &[Value]) -> R<()> {
        let out = node.output.get(index).cloned().unwrap_or_default();
        if out.is_empty() {
            return Ok(());
        }
        let name = if self.graph_outputs.contains(&out) {
            self.em.unique(&out)
        } else {
            self.em.fresh()
        };
        let r = self.em.push(op, operands, vec![name])?[0];
        self.env.insert(out, Val::Ir(r));
        Ok(())
    }

    pub(super) fn recurrent(&mut self, node: &NodeProto, a: &Attrs, cell: Cell) -> R<()> {
        let op = cell.name();
        let h = a
            .int("hidden_size")?
            .filter(|&h| h > 0)
            .ok_or_else(|| refuse(op, "hidden_size must be given and positive"))?
            as usize;
        if let Some(d) = a.string("direction")? {
            if d != "forward" {
                return Err(refuse(
                    op,
                    format!("direction `{d}` is not supported (forward only)"),
                ));
            }
        }
        let acts =
            a.0.iter()
                .find(|at| at.name.as_deref() == Some("activations"));
        if let Some(acts) = acts.map(|at| {
            at.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
        }) {
            if acts != cell.default_activations() {
                return Err(refuse(
                    op,
                    format!(
                        "activations {acts:?} are not supported (only the defaults {:?})",
                        cell.default_activations()
                    ),
                ));
            }
        }
        if a.float("clip")?.is_some() {
            return Err(refuse(op, "clip is not supported"));
        }
        if a.int("input_forget")?.unwrap_or(0) != 0 {
            return Err(refuse(op, "input_forget is not supported"));
        }
        let layout = a.int("layout")?.unwrap_or(0);
        let lbr = a.int("linear_before_reset")?.unwrap_or(0) != 0;
        let x = self.in_value(node, 0)?;
        let xt = self.em.ty(x)?.clone();
        if xt.dtype != DType::F32 || xt.rank() != 3 {
            return Err(refuse(
                op,
                format!("X must be a rank-3 f32 tensor, got {xt}"),
            ));
        }
        let (seq, batch, input) = match layout {
            0 => (xt.shape[0], xt.shape[1], xt.shape[2]),
            1 => (xt.shape[1], xt.shape[0], xt.shape[2]),
            l => return Err(refuse(op, format!("layout {l} is unknown"))),
        };
        if seq == 0 {
            return Err(refuse(op, "an empty sequence is not supported"));
        }
        let g = cell.gates();
        let (k, hu) = (input as usize, h as u64);
        let w = self.req_const_in(node, 1, "W")?;
        let r = self.req_const_in(node, 2, "R")?;
        if w.shape != [1, (g * h) as u64, input] || r.shape != [1, (g * h) as u64, hu] {
            return Err(refuse(
                op,
                format!("W {:?} and R {:?} do not fit one direction of {g} gates of {h} over inputs of {input}", w.shape, r.shape),
            ));
        }
        let bias = match self.const_in(node, 3, "B")? {
            Some(b) if b.shape == [1, (2 * g * h) as u64] => b.floats(),
            Some(b) => return Err(refuse(op, format!("B of shape {:?} does not fit", b.shape))),
            None => vec![0.0; 2 * g * h],
        };
        if let Some(l) = self.const_in(node, 4, "sequence_lens")? {
            if l.ints().iter().any(|&v| v != seq as i64) {
                return Err(refuse(
                    op,
                    "sequence_lens shorter than the sequence are not supported",
                ));
            }
        }
        let peep = if cell == Cell::Lstm {
            match self.const_in(node, 7, "P")? {
                Some(p) if p.shape == [1, (3 * h) as u64] => Some(p.floats()),
                Some(p) => {
                    return Err(refuse(op, format!("P of shape {:?} does not fit", p.shape)))
                }
                None => None,
            }
        } else {
            None
        };
        let (wv, rv) = (w.floats(), r.floats());
        let mut wt = Vec::new();
        let mut rt = Vec::new();
        let mut bs = Vec::new();
        for gi in 0..g {
            wt.push(self.r_const(
                node,
                &format!("w{gi}"),
                vec![input, hu],
                &gate_t(&wv, gi, h, k),
            ));
            rt.push(self.r_const(
                node,
                &format!("r{gi}"),
                vec![hu, hu],
                &gate_t(&rv, gi, h, h),
            ));
            let wb = &bias[gi * h..(gi + 1) * h];
            let rb = &bias[(g + gi) * h..(g + gi + 1) * h];
            bs.push((wb.to_vec(), rb.to_vec()));
        }
        // The reference adds Wb + Rb as one bias, except GRU's h gate (kept apart).
        let summed: Vec<Value> = (0..g)
            .map(|gi| {
                let s: Vec<f64> = bs[gi].0.iter().zip(&bs[gi].1).map(|(a, b)| a + b).collect();
                self.r_const(node, &format!("b{gi}"), vec![hu], &s)
            })
            .collect();
        let mut ht = self.initial_state(node, 5, "h0", batch, hu)?;
        let mut ct = if cell == Cell::Lstm {
            Some(self.initial_state(node, 6, "c0", batch, hu)?)
        } else {
            None
        };
        let peeps: Option<Vec<Value>> = peep.map(|p| {
            (0..3)
                .map(|j| self.r_const(node, &format!("p{j}"), vec![hu], &p[j * h..(j + 1) * h]))
                .collect()
        });
        let one = self.r_const(node, "one", vec![], &[1.0]);
        let seq_axis = if layout == 0 { 0 } else { 1 };
        let mut hs = Vec::new();
        for t in 0..seq as i64 {
            let xs = self.r_push(
                Op::Slice(Slice {
                    starts: vec![t],
                    ends: vec![t + 1],
                    axes: vec![seq_axis],
                    steps: vec![1],
                }),
                &[x],
            )?;
            let xs = self.r_push(Op::reshape(vec![batch as i64, input as i64]), &[xs])?;
            // x W_g^T + H R_g^T + (Wb_g + Rb_g), as the reference sums them.
            let pre = |me: &mut Self, gi: usize, hstate: Value| -> R<Value> {
                let a = me.r_matmul(xs, wt[gi])?;
                let b = me.r_matmul(hstate, rt[gi])?;
                let s = me.r_bin(BinaryOp::Add, a, b)?;
                me.r_bin(BinaryOp::Add, s, summed[gi])
            };
            let hn = match cell {
                Cell::Rnn => {
                    let p = pre(self, 0, ht)?;
                    self.r_un(UnaryOp::Tanh, p)?
                }
                Cell::Gru => {
                    let z = pre(self, 0, ht)?;
                    let z = self.r_un(UnaryOp::Sigmoid, z)?;
                    let rg = pre(self, 1, ht)?;
                    let rg = self.r_un(UnaryOp::Sigmoid, rg)?;
                    let xw = self.r_matmul(xs, wt[2])?;
                    let (wbh, rbh) = bs[2].clone();
                    let wbh = self.r_const(node, "wbh", vec![hu], &wbh);
                    let rbh = self.r_const(node, "rbh", vec![hu], &rbh);
                    let inner = if lbr {
                        let hr = self.r_matmul(ht, rt[2])?;
                        let hr = self.r_bin(BinaryOp::Add, hr, rbh)?;
                        let rh = self.r_bin(BinaryOp::Mul, rg, hr)?;
                        let s = self.r_bin(BinaryOp::Add, xw, rh)?;
                        self.r_bin(BinaryOp::Add, s, wbh)?
                    } else {
                        let rh = self.r_bin(BinaryOp::Mul, rg, ht)?;
                        let hr = self.r_matmul(rh, rt[2])?;
                        let s = self.r_bin(BinaryOp::Add, xw, hr)?;
                        let s = self.r_bin(BinaryOp::Add, s, wbh)?;
                        self.r_bin(BinaryOp::Add, s, rbh)?
                    };
                    let cand = self.r_un(UnaryOp::Tanh, inner)?;
                    let keep = self.r_bin(BinaryOp::Sub, one, z)?;
                    let a = self.r_bin(BinaryOp::Mul, keep, cand)?;
                    let b = self.r_bin(BinaryOp::Mul, z, ht)?;
                    self.r_bin(BinaryOp::Add, a, b)?
                }
                Cell::Lstm => {
                    let c0 = ct.ok_or_else(|| refuse(op, "no cell state"))?;
                    // Gates in ONNX's order i, o, f, c; peepholes p_i, p_o, p_f.
                    let mut i = pre(self, 0, ht)?;
                    let mut o = pre(self, 1, ht)?;
                    let mut f = pre(self, 2, ht)?;
                    let c = pre(self, 3, ht)?;
                    if let Some(p) = &peeps {
                        let pi = self.r_bin(BinaryOp::Mul, p[0], c0)?;
                        i = self.r_bin(BinaryOp::Add, i, pi)?;
                        let pf = self.r_bin(BinaryOp::Mul, p[2], c0)?;
                        f = self.r_bin(BinaryOp::Add, f, pf)?;
                    }
                    let i = self.r_un(UnaryOp::Sigmoid, i)?;
                    let f = self.r_un(UnaryOp::Sigmoid, f)?;
                    let c = self.r_un(UnaryOp::Tanh, c)?;
                    let fc = self.r_bin(BinaryOp::Mul, f, c0)?;
                    let ic = self.r_bin(BinaryOp::Mul, i, c)?;
                    let cn = self.r_bin(BinaryOp::Add, fc, ic)?;
                    if let Some(p) = &peeps {
                        let po = self.r_bin(BinaryOp::Mul, p[1], cn)?;
                        o = self.r_bin(BinaryOp::Add, o, po)?;
                    }
                    let o = self.r_un(UnaryOp::Sigmoid, o)?;
                    let tc = self.r_un(UnaryOp::Tanh, cn)?;
                    ct = Some(cn);
                    self.r_bin(BinaryOp::Mul, o, tc)?
                }
            };
            ht = hn;
            hs.push(hn);
        }
        let (b, hh) = (batch as i64, h as i64);
        // Y: [seq, 1, batch, hidden], or [batch, seq, 1, hidden] in layout 1.
        if node.output.first().is_some_and(|o| !o.is_empty()) {
            let steps: Vec<Value> = hs
                .iter()
                .map(|&v| self.r_push(Op::Unsqueeze { axes: vec![0, 1] }, &[v]))
                .collect::<R<_>>()?;
            let y = if steps.len() == 1 {
                steps[0]
            } else {
                self.r_push(Op::Concat { axis: 0 }, &steps)?
            };
            if layout == 0 {
                self.r_output(node, 0, Op::reshape(vec![seq as i64, 1, b, hh]), &[y])?;
            } else {
                self.r_output(
                    node,
                    0,
                    Op::Transpose {
                        perm: vec![2, 0, 1, 3],
                    },
                    &[y],
                )?;
            }
        }
        let state = |layout| {
            if layout == 0 {
                vec![1, b, hh]
            } else {
                vec![b, 1, hh]
            }
        };
        self.r_output(node, 1, Op::reshape(state(layout)), &[ht])?;
        if let Some(c) = ct {
            self.r_output(node, 2, Op::reshape(state(layout)), &[c])?;
        }
        Ok(())
    }
}
