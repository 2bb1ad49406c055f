//! The independent check of bufferized IR: reads only the IR (not the buffer assignment or the
//! plan that produced it) and proves that no value is overwritten while it is still needed.
//!
//! 1. Root buffers (`alloc_tensor(%slab)`) whose lifetimes intersect must not overlap: their
//!    usage records and offsets go through the planner's independent checker.
//! 2. Within a buffer, when an op writes its destination, every value stored in overlapping
//!    bytes that is still to be read must be one the write leaves intact: anything under a view
//!    placed in its operand's bytes (it writes nothing), a concat operand already in its slice,
//!    or the operand an element-wise op consumes in place.

use crate::planner::checker::check_offsets;
use crate::planner::{OffsetsPlan, UsageRecord};
use tir_ir::{EntityRef, Function, Op, Value};

/// Summary of a bufferized function that passed the check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferCheck {
    pub slab_size: u64,
    pub align: u64,
    /// Root buffers (one usage record each).
    pub buffers: usize,
}

/// A value's bytes: root buffer index and absolute range in the slab.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Bytes {
    root: usize,
    start: u64,
    end: u64,
}

impl Bytes {
    fn overlaps(&self, o: &Bytes) -> bool {
        self.start < o.end && o.start < self.end
    }
}

pub fn check_bufferized(func: &Function) -> Result<Option<BufferCheck>, Vec<String>> {
    let mut errors = Vec::new();
    let Some((slab, size, align)) = func.layout.iter().find_map(|&id| match func.ops[id].op {
        Op::AllocSlab { size, align } => Some((func.ops[id].results[0], size, align)),
        _ => None,
    }) else {
        return Ok(None);
    };
    let nvals = func.values.len();
    // Absolute byte range of every alloc_tensor, and its root.
    let mut alloc_bytes: Vec<Option<Bytes>> = vec![None; nvals];
    let mut roots: Vec<Value> = Vec::new();
    for &id in &func.layout {
        let d = &func.ops[id];
        let Op::AllocTensor { offset } = d.op else {
            continue;
        };
        let r = d.results[0];
        let len = func.ty(r).and_then(|t| t.byte_size()).unwrap_or(0);
        let parent = d.operands[0];
        if parent == slab {
            alloc_bytes[r.index()] = Some(Bytes {
                root: roots.len(),
                start: offset,
                end: offset + len,
            });
            roots.push(r);
        } else if let Some(p) = alloc_bytes[parent.index()] {
            alloc_bytes[r.index()] = Some(Bytes {
                root: p.root,
                start: p.start + offset,
                end: p.start + offset + len,
            });
        } else {
            errors.push(format!("`{}` is not inside the slab", func.value_name(r)));
        }
    }
    // Where each value lives, and when it is written and last read (operator indices).
    let mut bytes: Vec<Option<Bytes>> = vec![None; nvals];
    let mut def_at = vec![usize::MAX; nvals];
    let mut last_use = vec![0usize; nvals];
    let mut n = 0;
    let mut order = Vec::new();
    for &id in &func.layout {
        let d = &func.ops[id];
        if !d.op.is_operator() {
            continue;
        }
        for &v in &d.operands {
            last_use[v.index()] = last_use[v.index()].max(n);
        }
        for (&r, &o) in d.results.iter().zip(&d.outs) {
            bytes[r.index()] = alloc_bytes[o.index()];
            def_at[r.index()] = n;
            last_use[r.index()] = n;
        }
        order.push(id);
        n += 1;
    }
    for &v in &func.returns {
        last_use[v.index()] = n;
    }

    // 1. Root buffers: records over every value stored in them, then the planner's checker.
    let mut records: Vec<UsageRecord> = roots
        .iter()
        .map(|&r| UsageRecord {
            first_op: usize::MAX,
            last_op: 0,
            size: func.ty(r).and_then(|t| t.byte_size()).unwrap_or(0),
        })
        .collect();
    for v in func.values.keys() {
        if let Some(b) = bytes[v.index()] {
            let rec = &mut records[b.root];
            rec.first_op = rec.first_op.min(def_at[v.index()]);
            rec.last_op = rec.last_op.max(last_use[v.index()]);
        }
    }
    let used: Vec<usize> = (0..roots.len())
        .filter(|&i| records[i].first_op != usize::MAX)
        .collect();
    let recs: Vec<UsageRecord> = used.iter().map(|&i| records[i]).collect();
    let offsets: Vec<u64> = used
        .iter()
        .map(
            |&i| match func.producer(roots[i]).map(|p| &func.ops[p].op) {
                Some(Op::AllocTensor { offset }) => *offset,
                _ => 0,
            },
        )
        .collect();
    if let Err(es) = check_offsets(
        &recs,
        &OffsetsPlan {
            offsets,
            total_size: size,
        },
        align,
    ) {
        for e in es {
            errors.push(format!("slab plan: {e}"));
        }
    }

    // 2. No write clobbers a value still to be read.
    let placed: Vec<Value> = func
        .values
        .keys()
        .filter(|v| bytes[v.index()].is_some())
        .collect();
    for (t, &id) in order.iter().enumerate() {
        let d = &func.ops[id];
        for (&r, &o) in d.results.iter().zip(&d.outs) {
            let Some(w) = alloc_bytes[o.index()] else {
                continue;
            };
            for &v in &placed {
                let Some(b) = bytes[v.index()] else { continue };
                if b.root != w.root || !b.overlaps(&w) || d.results.contains(&v) {
                    continue;
                }
                // Only values written before this op and read at or after it can be hurt.
                if def_at[v.index()] >= t || last_use[v.index()] < t {
                    continue;
                }
                let is_operand = d.operands.contains(&v);
                // A view in its operand's own bytes writes nothing (codegen emits no kernel
                // for it), so every value there stays intact: the operand, and also what the
                // operand is a view of and the operand's other views.
                let aliased_view =
                    d.op.is_view() && d.operands.first().and_then(|&x| bytes[x.index()]) == Some(w);
                let intact = aliased_view
                    || (matches!(d.op, Op::Concat { .. })
                        && is_operand
                        && concat_slice(func, d, v, w) == Some(b))
                    || (d.op.is_elementwise()
                        && is_operand
                        && b == w
                        && last_use[v.index()] == t
                        && same_type(func, v, r));
                if !intact {
                    errors.push(format!(
                        "`{}` writes bytes [{}, {}) that still hold `{}` (read until operator {})",
                        d.op.name(),
                        w.start,
                        w.end,
                        func.value_name(v),
                        last_use[v.index()]
                    ));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(Some(BufferCheck {
            slab_size: size,
            align,
            buffers: used.len(),
        }))
    } else {
        Err(errors)
    }
}

fn same_type(func: &Function, a: Value, b: Value) -> bool {
    func.ty(a) == func.ty(b)
}

/// The bytes where a concat puts operand `v`, if the concat's axis makes slices contiguous.
fn concat_slice(func: &Function, d: &tir_ir::OpData, v: Value, out: Bytes) -> Option<Bytes> {
    let Op::Concat { axis } = d.op else {
        return None;
    };
    let shape = &func.ty(d.results[0])?.shape;
    let ax = tir_ir::shape::norm_axis(axis, shape.len()).ok()?;
    if shape[..ax].iter().any(|&dim| dim != 1) {
        return None;
    }
    let mut offset = 0;
    for &u in &d.operands {
        let len = func.ty(u)?.byte_size()?;
        if u == v {
            return Some(Bytes {
                root: out.root,
                start: out.start + offset,
                end: out.start + offset + len,
            });
        }
        offset += len;
    }
    None
}
