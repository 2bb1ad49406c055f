//! Liveness analysis: the IR's execution order turned into tensor usage records.
//!
//! Following the seed paper (§3) and TFLite: operators are numbered in execution order,
//! counting only real operators (`const` is data, not an operator); each *intermediate* tensor
//! — an op result that is neither a graph output nor a weight — gets the closed interval from
//! its producer to its last consumer. Graph inputs and outputs are caller-owned and weights are
//! constants, so none of them is planned.

use crate::planner::UsageRecord;
use tir_ir::{EntityRef, Function, OpId, Value};

/// Usage records of one function, with the value each record describes.
#[derive(Clone, Debug, PartialEq)]
pub struct Liveness {
    /// One record per intermediate tensor, in definition order.
    pub records: Vec<UsageRecord>,
    /// `values[i]` is the tensor of `records[i]`.
    pub values: Vec<Value>,
    /// Operator index of each op in the layout (`None` for `const`).
    pub op_index: Vec<Option<usize>>,
    /// Number of operators.
    pub num_operators: usize,
}

impl Liveness {
    /// The record index of a value, if it is an intermediate.
    pub fn record_of(&self, v: Value) -> Option<usize> {
        self.values.iter().position(|&x| x == v)
    }

    /// The operator index of an op (`None` for `const`).
    pub fn operator_index(&self, op: OpId) -> Option<usize> {
        self.op_index.get(op.index()).copied().flatten()
    }
}

/// Why a function cannot be analysed: it has not been verified.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LivenessError {
    #[error("`{0}` has no type; run the verifier first")]
    Untyped(String),
    #[error("the size of `{0}` overflows 64 bits")]
    Overflow(String),
}

/// Computes usage records for a verified function.
pub fn analyze(func: &Function) -> Result<Liveness, LivenessError> {
    let mut op_index = vec![None; func.ops.len()];
    let mut n = 0;
    for &id in &func.layout {
        if func.ops[id].op.is_operator() {
            op_index[id.index()] = Some(n);
            n += 1;
        }
    }
    // Last operator reading each value.
    let mut last_use: Vec<Option<usize>> = vec![None; func.values.len()];
    for &id in &func.layout {
        let Some(i) = op_index[id.index()] else {
            continue;
        };
        for &v in &func.ops[id].operands {
            let slot = &mut last_use[v.index()];
            *slot = Some(slot.map_or(i, |l: usize| l.max(i)));
        }
    }
    let mut is_output = vec![false; func.values.len()];
    for &v in &func.returns {
        is_output[v.index()] = true;
    }
    let mut records = Vec::new();
    let mut values = Vec::new();
    for &id in &func.layout {
        let Some(first) = op_index[id.index()] else {
            continue;
        };
        for &v in &func.ops[id].results {
            if is_output[v.index()] {
                continue;
            }
            let ty = func
                .ty(v)
                .ok_or_else(|| LivenessError::Untyped(func.value_name(v)))?;
            let size = ty
                .byte_size()
                .ok_or_else(|| LivenessError::Overflow(func.value_name(v)))?;
            let last = last_use[v.index()].unwrap_or(first).max(first);
            records.push(UsageRecord {
                first_op: first,
                last_op: last,
                size,
            });
            values.push(v);
        }
    }
    Ok(Liveness {
        records,
        values,
        op_index,
        num_operators: n,
    })
}
