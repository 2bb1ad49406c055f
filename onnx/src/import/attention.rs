//! Attention (opset 23), decomposed into the IR's ops as the ONNX reference computes it
//! (`onnx/reference/ops/op_attention.py`): 3-D inputs split into heads (reshape, transpose),
//! `sqrt(scale)` on Q and on K, the KV cache (`past_*` concatenated before K and V, returned as
//! `present_*`), the additive bias (a float mask, the causal triangle offset by the past length,
//! padding of a short mask with −∞, `nonpad_kv_seqlen` when it is a constant), grouped-query
//! heads repeated in place (`h0, h0, h1, h1, ...`), `QKᵀ`, softcap, softmax, `·V`, and the
//! `qk_matmul_output` of the requested mode. Boolean masks need a boolean tensor type at run
//! time and are refused unless constant.

use super::attrs::Attrs;
use super::{Importer, Val, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::Tensor;
use tir_ir::{BinaryOp, DType, Op, UnaryOp, Value};

fn bad(problem: impl Into<String>) -> NodeError {
    NodeError::Attention {
        problem: problem.into(),
    }
}

fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: None,
    }
}

impl Importer {
    /// One op on `operands` with a fresh name; its single result.
    fn op1(&mut self, op: Op, operands: &[Value]) -> R<Value> {
        let name = self.em.fresh();
        Ok(self.em.push(op, operands, vec![name])?[0])
    }

    /// Binds `v` to output `i` of `node` (when the node names one). A graph output takes the
    /// ONNX name when `v` is one of this node's own results (fresh names are all digits), as
    /// `emit` names graph outputs.
    fn bind_out(&mut self, node: &NodeProto, i: usize, v: Value) {
        if let Some(out) = node.output.get(i).filter(|o| !o.is_empty()) {
            let fresh = self.em.func.values[v]
                .name
                .bytes()
                .all(|b| b.is_ascii_digit());
            if fresh && self.graph_outputs.contains(out) {
                let name = self.em.unique(out);
                self.em.func.values[v].name = name;
            }
            self.env.insert(out.clone(), Val::Ir(v));
        }
    }

    /// A name to derive the node's constants' names from: its first output.
    fn hint(&self, node: &NodeProto) -> String {
        node.output.first().cloned().unwrap_or_default()
    }

    /// `[B, L, H·D]` as `[B, H, L, D]`.
    fn split_heads(&mut self, x: Value, heads: u64, what: &str) -> R<Value> {
        let s = self.em.ty(x)?.shape.clone();
        if heads == 0 || !s[2].is_multiple_of(heads) {
            return Err(bad(format!(
                "{what}'s hidden size {} is not a multiple of its {heads} heads",
                s[2]
            )));
        }
        let shape = vec![
            s[0] as i64,
            s[1] as i64,
            heads as i64,
            (s[2] / heads) as i64,
        ];
        let r = self.op1(Op::reshape(shape), &[x])?;
        self.op1(
            Op::Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[r],
        )
    }

    pub(super) fn attention(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let q_in = self.req_in(node, 0)?;
        let rank = self.rank_of(&q_in);
        for i in 1..3 {
            let r = self.rank_of(&self.req_in(node, i)?);
            if r != rank {
                return Err(bad(format!(
                    "Q is rank {rank} but input {i} is rank {r}; Q, K and V must have one rank"
                )));
            }
        }
        if rank != 3 && rank != 4 {
            return Err(bad(format!(
                "Q, K and V must be 3-D or 4-D, got rank {rank}"
            )));
        }
        let mut q = self.in_value(node, 0)?;
        let mut k = self.in_value(node, 1)?;
        let mut v = self.in_value(node, 2)?;
        if rank == 3 {
            let (Some(qh), Some(kvh)) = (a.int("q_num_heads")?, a.int("kv_num_heads")?) else {
                return Err(bad("3-D inputs need both q_num_heads and kv_num_heads"));
            };
            if qh <= 0 || kvh <= 0 {
                return Err(bad("q_num_heads and kv_num_heads must be positive"));
            }
            q = self.split_heads(q, qh as u64, "Q")?;
            k = self.split_heads(k, kvh as u64, "K")?;
            v = self.split_heads(v, kvh as u64, "V")?;
        }
        let qs = self.em.ty(q)?.shape.clone();
        let head = qs[3];
        let scale = match a.float("scale")? {
            Some(s) => s,
            None => 1.0 / (head as f64).sqrt(),
        };
        // The reference scales Q and K by sqrt(scale) each, in f32.
        let root = Tensor::from_f64s(DType::F32, vec![], &[(scale as f32).sqrt() as f64]);
        let root = self.const_value(&format!("{}.scale", self.hint(node)), root);
        let q = self.op1(bin(BinaryOp::Mul), &[q, root])?;

        // The KV cache.
        let past_len = match self.opt_in_value(node, 4)? {
            Some(pk) => {
                let n = self.em.ty(pk)?.shape.get(2).copied().unwrap_or(0);
                k = self.op1(Op::Concat { axis: 2 }, &[pk, k])?;
                n
            }
            None => 0,
        };
        if let Some(pv) = self.opt_in_value(node, 5)? {
            v = self.op1(Op::Concat { axis: 2 }, &[pv, v])?;
        }
        self.bind_out(node, 1, k);
        self.bind_out(node, 2, v);
        let ks = self.em.ty(k)?.shape.clone();
        let (lq, lkv) = (qs[2], ks[2]);

        // The additive bias: constant parts folded into one [Lq, Lkv] table, a run-time float
        // mask added as an operand.
        let mut table: Option<Vec<f32>> = None;
        let mut mask_value: Option<Value> = None;
        if let Some(m) = self.opt_in(node, 3)? {
            let ms = self.shape_of(&m)?;
            let short = ms.last().map_or(0, |&d| lkv.saturating_sub(d));
            match (&m, self.dtype_of(&m)) {
                (Val::Const(t), DType::Bool) if ms.len() <= 2 => {
                    let f: Vec<f32> = t
                        .ints()
                        .iter()
                        .map(|&b| if b != 0 { 0.0 } else { f32::NEG_INFINITY })
                        .collect();
                    table = Some(pad_table(&f, &ms, lq, lkv)?);
                }
                (_, DType::Bool) => {
                    return Err(bad(
                        "a boolean attn_mask computed at run time (or of rank > 2) is not supported: the IR computes on float tensors",
                    ))
                }
                (_, DType::F32) => {
                    let mut mv = self.in_value(node, 3)?;
                    if short > 0 {
                        let r = ms.len();
                        let mut pads = vec![0u64; 2 * r];
                        pads[2 * r - 1] = short;
                        mv = self.op1(
                            Op::Pad {
                                pads,
                                mode: tir_ir::op::PadMode::Constant,
                                value: f64::NEG_INFINITY,
                            },
                            &[mv],
                        )?;
                    }
                    mask_value = Some(mv);
                }
                (_, other) => {
                    return Err(bad(format!("attn_mask of type {other} is not supported")))
                }
            }
        }
        if a.int("is_causal")?.unwrap_or(0) != 0 {
            let t = table.get_or_insert_with(|| vec![0.0; (lq * lkv) as usize]);
            for i in 0..lq {
                for j in 0..lkv.saturating_sub(past_len) {
                    if j > i {
                        t[(i * lkv + past_len + j) as usize] = f32::NEG_INFINITY;
                    }
                }
            }
        }
        if self.opt_in(node, 6)?.is_some() {
            return Err(bad("nonpad_kv_seqlen is not supported"));
        }

        // Grouped-query attention: each KV head repeated for its group of Q heads.
        let (hq, hkv) = (qs[1], ks[1]);
        if hq != hkv {
            if hkv == 0 || hq % hkv != 0 {
                return Err(bad(format!(
                    "{hq} query heads cannot share {hkv} key/value heads (not a multiple)"
                )));
            }
            let reps = (hq / hkv) as usize;
            k = self.repeat_heads(k, reps)?;
            v = self.repeat_heads(v, reps)?;
        }
        let k = self.op1(bin(BinaryOp::Mul), &[k, root])?;
        let kt = self.op1(
            Op::Transpose {
                perm: vec![0, 1, 3, 2],
            },
            &[k],
        )?;
        let qk = self.op1(Op::MatMul { activation: None }, &[q, kt])?;
        let mode = a.int("qk_matmul_output_mode")?.unwrap_or(0);
        let mut out3 = qk;
        let mut x = qk;
        if let Some(t) = table {
            let t = Tensor::from_f64s(
                DType::F32,
                vec![lq, lkv],
                &t.iter().map(|&f| f as f64).collect::<Vec<_>>(),
            );
            let b = self.const_value(&format!("{}.bias", self.hint(node)), t);
            x = self.op1(bin(BinaryOp::Add), &[x, b])?;
        }
        if let Some(m) = mask_value {
            x = self.op1(bin(BinaryOp::Add), &[x, m])?;
        }
        if mode == 1 {
            out3 = x;
        }
        if let Some(c) = a.float("softcap")?.filter(|&c| c > 0.0) {
            let c = Tensor::from_f64s(DType::F32, vec![], &[c]);
            let c = self.const_value(&format!("{}.softcap", self.hint(node)), c);
            let d = self.op1(bin(BinaryOp::Div), &[x, c])?;
            let t = self.op1(Op::Unary(UnaryOp::Tanh), &[d])?;
            x = self.op1(bin(BinaryOp::Mul), &[t, c])?;
            if mode == 2 {
                out3 = x;
            }
        }
        let p = self.op1(Op::Softmax { axis: -1 }, &[x])?;
        if mode == 3 {
            out3 = p;
        }
        if !(0..=3).contains(&mode) {
            return Err(bad(format!(
                "qk_matmul_output_mode {mode} is not one of 0-3"
            )));
        }
        self.bind_out(node, 3, out3);
        let mut y = self.op1(Op::MatMul { activation: None }, &[p, v])?;
        if rank == 3 {
            let t = self.op1(
                Op::Transpose {
                    perm: vec![0, 2, 1, 3],
                },
                &[y],
            )?;
            let s = self.em.ty(t)?.shape.clone();
            let shape = vec![s[0] as i64, s[1] as i64, (s[2] * s[3]) as i64];
            y = self.op1(Op::reshape(shape), &[t])?;
        }
        self.bind_out(node, 0, y);
        Ok(())
    }

    /// `[B, H, L, D]` with each head repeated `reps` times in place: `[B, H·reps, L, D]`.
    fn repeat_heads(&mut self, x: Value, reps: usize) -> R<Value> {
        let s = self.em.ty(x)?.shape.clone();
        let u = self.op1(Op::Unsqueeze { axes: vec![2] }, &[x])?;
        let c = self.op1(Op::Concat { axis: 2 }, &vec![u; reps])?;
        let shape = vec![
            s[0] as i64,
            (s[1] as usize * reps) as i64,
            s[2] as i64,
            s[3] as i64,
        ];
        self.op1(Op::reshape(shape), &[c])
    }
}

/// A constant mask of shape `ms` (rank ≤ 2, broadcast over the batch and heads) as the
/// `[Lq, Lkv]` table, its columns past the mask's padded with −∞ as the reference pads them.
fn pad_table(f: &[f32], ms: &[u64], lq: u64, lkv: u64) -> R<Vec<f32>> {
    let (rows, cols) = match ms {
        [] => (1, 1),
        [c] => (1, *c),
        [r, c] => (*r, *c),
        _ => {
            return Err(bad(format!(
                "a constant attn_mask of shape {ms:?} (rank > 2)"
            )))
        }
    };
    if (rows != 1 && rows != lq) || cols > lkv || (cols != lkv && cols == 0) {
        return Err(bad(format!(
            "attn_mask of shape {ms:?} does not broadcast to [{lq}, {lkv}]"
        )));
    }
    let mut t = vec![0.0; (lq * lkv) as usize];
    for i in 0..lq {
        for j in 0..lkv {
            let r = if rows == 1 { 0 } else { i };
            t[(i * lkv + j) as usize] = if j < cols {
                f[(r * cols + j) as usize]
            } else {
                f32::NEG_INFINITY
            };
        }
    }
    Ok(t)
}
