//! Bufferization: the plan made explicit in the IR (the thesis's `prim::AllocateSlab` /
//! `prim::AllocateTensor`, MLIR's destination-passing style).
//!
//! At function entry `%slab = alloc_slab() {size, align}`; before the first op that writes a
//! buffer, `alloc_tensor(%slab) {offset}`; a value living inside a larger buffer (a view, a
//! slice of a concat's output) gets `alloc_tensor(%buffer) {offset}` with its own type; every
//! producing op names its destinations with `outs(...)`. Parameters and returned values stay
//! caller-owned, weights stay constants. A `split` whose results go to both (some returned,
//! some intermediates) becomes one `slice` per result first, since `outs` names the
//! destinations of all of an op's results or of none.

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
            // Some results are caller-owned (returned), others slab buffers: `outs` names
            // destinations for all of an op's results or none, so the op is lowered to one
            // single-result op per result first. Only `split` has several results.
            let pieces = split_to_slices(func, id)
                .ok_or_else(|| BufferizeError::MixedResults(func.ops[id].op.name().to_string()))?;
            for piece in pieces {
                let r = func.ops[piece].results[0];
                match assignment.place[r.index()] {
                    None => layout.push(piece),
                    Some(p) => {
                        let out = destination(
                            func,
                            assignment,
                            plan,
                            slab,
                            &mut root_alloc,
                            &mut layout,
                            &mut stats,
                            &mut fresh,
                            r,
                            p,
                        );
                        func.ops[piece].outs = vec![out];
                        layout.push(piece);
                    }
                }
            }
            continue;
        }
        let mut outs = Vec::with_capacity(results.len());
        for (&r, p) in results.iter().zip(placed) {
            let p = p.expect("all placed");
            outs.push(destination(
                func,
                assignment,
                plan,
                slab,
                &mut root_alloc,
                &mut layout,
                &mut stats,
                &mut fresh,
                r,
                p,
            ));
        }
        func.ops[id].outs = outs;
        layout.push(id);
    }
    func.layout = layout;
    Ok(stats)
}

/// The destination of result `r` placed at `(buffer, offset)`: the buffer's root
/// `alloc_tensor` (created before its first writer) or an `alloc_tensor` inside it.
#[allow(clippy::too_many_arguments)]
fn destination(
    func: &mut Function,
    assignment: &BufferAssignment,
    plan: &OffsetsPlan,
    slab: Value,
    root_alloc: &mut [Option<Value>],
    layout: &mut Vec<OpId>,
    stats: &mut BufferizeStats,
    fresh: &mut impl FnMut(String) -> String,
    r: Value,
    (b, offset): (usize, u64),
) -> Value {
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
    if offset == 0 && root_ty.as_ref() == Some(&rty) {
        return root;
    }
    let name = fresh(format!("buf{b}_at{offset}"));
    let (op, v) = new_op(func, Op::AllocTensor { offset }, vec![root], name, rty);
    layout.push(op);
    stats.alloc_tensors += 1;
    v
}

/// Rewrites the `split` `id` as one `slice` per result (the first reuses `id`), each result
/// keeping its value; returns the ops in order, or `None` if `id` is not a split. The slices
/// follow each other with nothing in between, so every value live at the split is live at
/// each of them and no buffer overlap the plan allowed becomes a conflict.
fn split_to_slices(func: &mut Function, id: OpId) -> Option<Vec<OpId>> {
    let (axis, sizes) = match &func.ops[id].op {
        Op::Split { axis, sizes } => (*axis, sizes.clone()),
        _ => return None,
    };
    let input = *func.ops[id].operands.first()?;
    let rank = func.ty(input)?.rank() as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    let results = func.ops[id].results.clone();
    let loc = func.ops[id].loc.clone();
    let mut ops = Vec::with_capacity(results.len());
    let mut start = 0i64;
    for (k, (&r, &size)) in results.iter().zip(&sizes).enumerate() {
        let slice = Op::Slice(tir_ir::op::Slice {
            starts: vec![start],
            ends: vec![start + size as i64],
            axes: vec![axis],
            steps: vec![1],
        });
        start += size as i64;
        let piece = if k == 0 {
            let d = &mut func.ops[id];
            d.op = slice;
            d.results = vec![r];
            d.outs = Vec::new();
            id
        } else {
            func.ops.push(OpData {
                op: slice,
                operands: vec![input],
                results: vec![r],
                outs: Vec::new(),
                loc: loc.clone(),
            })
        };
        func.values[r].def = ValueDef::Result(piece, 0);
        ops.push(piece);
    }
    Some(ops)
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
        declared_sym: None,
        sym: None,
        span: Span::NONE,
    });
    func.ops[id].results = vec![v];
    (id, v)
}

#[cfg(test)]
mod tests {
    use crate::buffer_check::check_bufferized;
    use crate::pipeline::{parse_pipeline, run_pipeline};
    use tir_ir::Op;

    /// A split whose first and last results are intermediates and whose middle one is
    /// returned becomes three slices: the intermediates write the slab through `outs`, the
    /// returned one the caller's buffer; the buffer checker accepts the result.
    #[test]
    fn a_split_with_returned_and_internal_results_becomes_slices() {
        let text = "module @m {
  func @main(%x: tensor<1x5x3xf32>, %z: tensor<1x2x3xf32>) {
    %c = concat(%x, %z) {axis = 1}
    %p, %q, %r = split(%c) {axis = -2, sizes = [3, 1, 3]}
    %y = add(%p, %r)
    return %y, %q
  }
}
";
        for sharing in [false, true] {
            let mut m = tir_ir::parse_and_verify(text).unwrap();
            let passes = parse_pipeline(&format!("plan{{sharing={sharing}}},bufferize")).unwrap();
            run_pipeline(&mut m, &passes, true, |_, _| {}).unwrap();
            let f = m.entry().unwrap();
            check_bufferized(f).unwrap();
            let slices: Vec<_> = f
                .ops_in_order()
                .filter_map(|(_, d)| match &d.op {
                    Op::Slice(s) => Some((s.starts[0], s.ends[0], s.axes[0], d.outs.len())),
                    Op::Split { .. } => panic!("a split is left:\n{}", tir_ir::print(&m)),
                    _ => None,
                })
                .collect();
            // Axis -2 of a rank-3 value is axis 1; the returned piece has no `outs`.
            assert_eq!(slices, vec![(0, 3, 1, 1), (3, 4, 1, 0), (4, 7, 1, 1)]);
            // Each result keeps its name and is defined by its slice.
            let printed = tir_ir::print(&m);
            for v in ["%p = slice(%c)", "%q = slice(%c)", "%r = slice(%c)"] {
                assert!(printed.contains(v), "{v} missing:\n{printed}");
            }
        }
    }
}
