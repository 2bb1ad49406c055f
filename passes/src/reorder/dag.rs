//! The operator dataflow DAG the schedulers work on, and its memory simulation.
//!
//! Nodes are operators (`const` is data, see `Op::is_operator`) numbered in input order,
//! so `0..n` is itself a topological order. Tensors are the intermediates of `liveness.rs`:
//! results of operators that are not returned. A tensor is live from its producer's step to its
//! last consumer's step, both inclusive (the seed paper's closed usage records), so the breadth
//! at a step is the memory held before it plus everything the step defines; this is exactly
//! `planner::operator_breadths` over the records `liveness::analyze` gives for that order.

use crate::planner::{align_size, UsageRecord};
use tir_ir::{EntityRef, Function, OpId};

use super::ReorderError;

/// One intermediate tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    pub producer: usize,
    /// Aligned size in bytes.
    pub size: u64,
    /// Distinct consuming nodes, ascending.
    pub consumers: Vec<usize>,
}

/// Operators, their dependences and the tensors between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dag {
    /// `ops[i]` is node `i`; input order.
    pub ops: Vec<OpId>,
    /// Distinct producer nodes of each node's operands, in operand order.
    pub preds: Vec<Vec<usize>>,
    /// Distinct consumer nodes, ascending.
    pub succs: Vec<Vec<usize>>,
    pub tensors: Vec<Tensor>,
    /// Tensors defined by each node.
    pub outs: Vec<Vec<usize>>,
    /// Distinct tensors read by each node.
    pub ins: Vec<Vec<usize>>,
}

impl Dag {
    /// The DAG of a verified, not yet bufferized function, sizes rounded up to `align`.
    pub fn from_function(func: &Function, align: u64) -> Result<Dag, ReorderError> {
        let mut node_of = vec![None; func.ops.len()];
        let mut ops = Vec::new();
        for &id in &func.layout {
            let op = &func.ops[id].op;
            if op.is_buffer_op() {
                return Err(ReorderError::Bufferized(func.name.clone()));
            }
            if op.is_operator() {
                node_of[id.index()] = Some(ops.len());
                ops.push(id);
            }
        }
        let mut is_output = vec![false; func.values.len()];
        for &v in &func.returns {
            is_output[v.index()] = true;
        }
        let n = ops.len();
        let mut tensor_of = vec![None; func.values.len()];
        let mut tensors = Vec::new();
        let mut outs = vec![Vec::new(); n];
        for (i, &id) in ops.iter().enumerate() {
            for &v in &func.ops[id].results {
                if is_output[v.index()] {
                    continue;
                }
                let ty = func
                    .ty(v)
                    .ok_or_else(|| ReorderError::Untyped(func.value_name(v)))?;
                let size = ty
                    .byte_size()
                    .ok_or_else(|| ReorderError::Overflow(func.value_name(v)))?;
                let size = align_size(size, align)?;
                tensor_of[v.index()] = Some(tensors.len());
                outs[i].push(tensors.len());
                tensors.push(Tensor {
                    producer: i,
                    size,
                    consumers: Vec::new(),
                });
            }
        }
        let mut preds = vec![Vec::new(); n];
        let mut succs = vec![Vec::new(); n];
        let mut ins = vec![Vec::new(); n];
        for (i, &id) in ops.iter().enumerate() {
            for &v in &func.ops[id].operands {
                let Some(p) = func.producer(v).and_then(|p| node_of[p.index()]) else {
                    continue;
                };
                if p >= i {
                    return Err(ReorderError::NotTopological(func.value_name(v)));
                }
                if !preds[i].contains(&p) {
                    preds[i].push(p);
                    succs[p].push(i);
                }
                if let Some(t) = tensor_of[v.index()] {
                    if !ins[i].contains(&t) {
                        ins[i].push(t);
                        let c: &mut Vec<usize> = &mut tensors[t].consumers;
                        c.push(i);
                    }
                }
            }
        }
        for s in &mut succs {
            s.sort_unstable();
        }
        Ok(Dag {
            ops,
            preds,
            succs,
            tensors,
            outs,
            ins,
        })
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Whether `order` is a permutation of the nodes that respects every dependence.
    pub fn is_topological(&self, order: &[usize]) -> bool {
        if order.len() != self.len() {
            return false;
        }
        let mut pos = vec![usize::MAX; self.len()];
        for (k, &v) in order.iter().enumerate() {
            if v >= self.len() || pos[v] != usize::MAX {
                return false;
            }
            pos[v] = k;
        }
        (0..self.len()).all(|v| self.preds[v].iter().all(|&p| pos[p] < pos[v]))
    }

    /// Breadth (live intermediate bytes) at each step of a topological `order`.
    pub fn breadths(&self, order: &[usize]) -> Vec<u64> {
        let mut remaining: Vec<usize> = self.tensors.iter().map(|t| t.consumers.len()).collect();
        let mut mem = 0u64;
        let mut out = Vec::with_capacity(order.len());
        for &v in order {
            mem = self.outs[v]
                .iter()
                .fold(mem, |m, &t| m.saturating_add(self.tensors[t].size));
            out.push(mem);
            for &t in &self.ins[v] {
                remaining[t] = remaining[t].saturating_sub(1);
                if remaining[t] == 0 {
                    mem = mem.saturating_sub(self.tensors[t].size);
                }
            }
            for &t in &self.outs[v] {
                if self.tensors[t].consumers.is_empty() {
                    mem = mem.saturating_sub(self.tensors[t].size);
                }
            }
        }
        out
    }

    /// Peak breadth of an order: the offsets lower bound (seed paper §5).
    pub fn peak(&self, order: &[usize]) -> u64 {
        self.breadths(order).into_iter().max().unwrap_or(0)
    }

    /// The usage records of an order (the same multiset `liveness::analyze` gives after the
    /// order is applied), one per tensor.
    pub fn records(&self, order: &[usize]) -> Vec<UsageRecord> {
        let mut pos = vec![0usize; self.len()];
        for (k, &v) in order.iter().enumerate() {
            if let Some(p) = pos.get_mut(v) {
                *p = k;
            }
        }
        self.tensors
            .iter()
            .map(|t| {
                let first = pos[t.producer];
                let last = t.consumers.iter().map(|&c| pos[c]).max().unwrap_or(first);
                UsageRecord {
                    first_op: first,
                    last_op: last.max(first),
                    size: t.size,
                }
            })
            .collect()
    }

    /// Bytes an op defines minus the bytes it frees, given how many consumers each tensor still
    /// waits for.
    pub(super) fn freed_and_defined(&self, v: usize, remaining: &[usize]) -> (u64, u64) {
        let freed = self.ins[v]
            .iter()
            .filter(|&&t| remaining[t] == 1)
            .map(|&t| self.tensors[t].size)
            .sum::<u64>();
        let defined = self.outs[v].iter().map(|&t| self.tensors[t].size).sum();
        (freed, defined)
    }
}
