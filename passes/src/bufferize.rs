//! Bufferization: the plan made explicit in the IR (the thesis's `prim::AllocateSlab` /
//! `prim::AllocateTensor`, MLIR's destination-passing style).
//!
//! At function entry `%slab = alloc_slab() {size, align}`; before the first op that writes a
//! buffer, `alloc_tensor(%slab) {offset}`; a value living inside a larger buffer (a view, a
//! slice of a concat's output) gets `alloc_tensor(%buffer) {offset}` with its own type; every
//! producing op names its destinations with `outs(...)`. Parameters and returned values stay
//! caller-owned, weights stay constants.

use crate::buffers::BufferAssignment;
use crate::planner::OffsetsPlan;
use std::collections::HashSet;
use tir_ir::module::{OpLoc, ValueData, ValueDef};
use tir_ir::{EntityRef, Function, Op, OpData, OpId, Span, TensorType, Value};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BufferizeError {
    #[error("`@{0}` is already bufferized (it has an `alloc_slab`)")]
    AlreadyBufferized(String),
    #[error("the plan has {found} offsets for {expected} buffers: it was made for another version of the function")]
    PlanMismatch { expected: usize, found: usize },
    #[error("`{0}` has results that are returned and results that are not; bufferize cannot split its destinations")]
    MixedResults(String),
}

/// What bufferization did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferizeStats {
    pub slab_size: u64,
    pub buffers: usize,
    pub alloc_tensors: usize,
}

pub fn is_bufferized(func: &Function) -> bool {
    func.ops
        .values()
        .any(|d| matches!(d.op, Op::AllocSlab { .. }))
}

/// Rewrites `func` to use one slab laid out by `plan` (one offset per buffer of `assignment`).
pub fn bufferize(
    func: &mut Function,
    assignment: &BufferAssignment,
    plan: &OffsetsPlan,
    align: u64,
) -> Result<BufferizeStats, BufferizeError> {
    if is_bufferized(func) {
        return Err(BufferizeError::AlreadyBufferized(func.name.clone()));
    }
    if plan.offsets.len() != assignment.buffers.len() || assignment.place.len() != func.values.len()
    {
        return Err(BufferizeError::PlanMismatch {
            expected: assignment.buffers.len(),
            found: plan.offsets.len(),
        });
    }
    let mut names: HashSet<String> = func.values.values().map(|v| v.name.clone()).collect();
    let mut fresh = |base: String| {
        let mut name = base.clone();
        let mut k = 1;
        while names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        names.insert(name.clone());
        name
    };
    let mut stats = BufferizeStats {
        slab_size: plan.total_size,
        buffers: assignment.buffers.len(),
        alloc_tensors: 0,
    };
    let slab_ty = TensorType::new(vec![plan.total_size], tir_ir::DType::U8);
    let slab_name = fresh("slab".into());
    let (slab_op, slab) = new_op(
        func,
        Op::AllocSlab {
            size: plan.total_size,
            align,
        },
        vec![],
        slab_name,
        slab_ty,
    );
    let mut layout = vec![slab_op];
    let mut root_alloc: Vec<Option<Value>> = vec![None; assignment.buffers.len()];

    for id in func.layout.clone() {
        let results = func.ops[id].results.clone();
        let placed: Vec<Option<(usize, u64)>> = results
            .iter()
            .map(|r| assignment.place[r.index()])
            .collect();
        if placed.iter().all(Option::is_none) {
            layout.push(id);
            continue;
        }
        if placed.iter().any(Option::is_none) {
            return Err(BufferizeError::MixedResults(
                func.ops[id].op.name().to_string(),
            ));
        }
        let mut outs = Vec::with_capacity(results.len());
        for (&r, p) in results.iter().zip(placed) {
            let (b, offset) = p.expect("all placed");
            let rty = func.ty(r).cloned().expect("verified function");
            let root = match root_alloc[b] {
                Some(v) => v,
                None => {
                    let root_value = assignment.buffers[b].root;
                    let ty = func.ty(root_value).cloned().expect("verified function");
                    let name = fresh(format!("buf{b}"));
                    let (op, v) = new_op(
                        func,
                        Op::AllocTensor {
                            offset: plan.offsets[b],
                        },
                        vec![slab],
                        name,
                        ty,
                    );
                    layout.push(op);
                    stats.alloc_tensors += 1;
                    root_alloc[b] = Some(v);
                    v
                }
            };
            let root_ty = func.ty(root).cloned();
            let out = if offset == 0 && root_ty.as_ref() == Some(&rty) {
                root
            } else {
                let name = fresh(format!("buf{b}_at{offset}"));
                let (op, v) = new_op(func, Op::AllocTensor { offset }, vec![root], name, rty);
                layout.push(op);
                stats.alloc_tensors += 1;
                v
            };
            outs.push(out);
        }
        func.ops[id].outs = outs;
        layout.push(id);
    }
    func.layout = layout;
    Ok(stats)
}

fn new_op(
    func: &mut Function,
    op: Op,
    operands: Vec<Value>,
    name: String,
    ty: TensorType,
) -> (OpId, Value) {
    let id = func.ops.push(OpData {
        op,
        operands,
        results: Vec::new(),
        outs: Vec::new(),
        loc: OpLoc::default(),
    });
    let v = func.values.push(ValueData {
        name,
        def: ValueDef::Result(id, 0),
        declared: Some(ty.clone()),
        ty: Some(ty),
        span: Span::NONE,
    });
    func.ops[id].results = vec![v];
    (id, v)
}
