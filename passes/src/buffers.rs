//! Buffer assignment: which intermediate values share memory.
//!
//! Without sharing, every intermediate is its own buffer and the buffers' usage records are
//! exactly the liveness records. With sharing (MLIR's one-shot bufferization does the same
//! analyses, the thesis's MemoMalloc does it for TorchScript):
//! - a view (`reshape`, `flatten`, `squeeze`, `unsqueeze`) lives in its source's bytes;
//! - an element-wise op writes in place into an operand of its own type when nothing living in
//!   that operand's buffer is read after the op (of several, the buffer written last);
//! - a `concat` along its outermost non-unit axis owns one buffer, and each operand that is a
//!   whole buffer of its own is moved into its slice, so producers write straight into the
//!   output and the concat copies nothing; except an operand whose buffer was first written
//!   long before the operands exist (more than their span of definitions before the first),
//!   which would keep the whole concat live from then.
//!
//! Liveness then runs on buffers: a buffer is live from the first write of any value in it to
//! the last read of any value in it.

use crate::liveness::{self, LivenessError};
use crate::planner::UsageRecord;
use tir_ir::{EntityRef, Function, Op, Value};

/// Where each value lives and what each buffer needs.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferAssignment {
    /// For each value (indexed by `Value`): its buffer and byte offset inside it, for the
    /// values the slab holds; `None` for parameters, weights, and caller-owned outputs.
    pub place: Vec<Option<(usize, u64)>>,
    pub buffers: Vec<Buffer>,
    /// Number of operators (the time axis of the records).
    pub num_operators: usize,
}

/// One buffer of the slab.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// The value whose type the buffer has (the concat output, or the first value written).
    pub root: Value,
    /// Bytes (unaligned; planners align).
    pub size: u64,
    /// Lifetime over every value that lives in it.
    pub record: UsageRecord,
}

impl BufferAssignment {
    pub fn records(&self) -> Vec<UsageRecord> {
        self.buffers.iter().map(|b| b.record).collect()
    }

    /// Buffers holding more than one value.
    pub fn shared_buffers(&self) -> usize {
        let mut count = vec![0usize; self.buffers.len()];
        for (b, _) in self.place.iter().flatten() {
            count[*b] += 1;
        }
        count.iter().filter(|&&c| c > 1).count()
    }
}

/// A value's byte range relative to its node in the buffer forest.
#[derive(Clone, Copy)]
struct Slot {
    node: usize,
    offset: u64,
}

/// The forest of buffers while sharing is decided: a node is moved into a larger node (a
/// concat's) at an offset; everything placed in it moves along.
struct Forest {
    parent: Vec<Option<(usize, u64)>>,
    size: Vec<u64>,
    root_value: Vec<Value>,
}

impl Forest {
    fn add(&mut self, size: u64, root: Value) -> usize {
        self.parent.push(None);
        self.size.push(size);
        self.root_value.push(root);
        self.parent.len() - 1
    }

    /// The top node containing `node`, and `node`'s offset inside it.
    fn resolve(&self, mut node: usize) -> (usize, u64) {
        let mut offset = 0;
        while let Some((p, k)) = self.parent[node] {
            offset += k;
            node = p;
        }
        (node, offset)
    }
}

/// Which kinds of buffer sharing to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sharing {
    pub views: bool,
    pub in_place: bool,
    pub concat: bool,
}

impl Sharing {
    pub const NONE: Sharing = Sharing {
        views: false,
        in_place: false,
        concat: false,
    };
    pub const ALL: Sharing = Sharing {
        views: true,
        in_place: true,
        concat: true,
    };
    /// Everything but concat slices (which can lengthen a concat buffer's life).
    pub const NO_CONCAT: Sharing = Sharing {
        views: true,
        in_place: true,
        concat: false,
    };

    pub fn name(self) -> &'static str {
        match (self.views, self.in_place, self.concat) {
            (false, false, false) => "none",
            (true, true, true) => "views+in_place+concat",
            (true, true, false) => "views+in_place",
            _ => "custom",
        }
    }
}

/// Decides which values share buffers. The function must be verified and not bufferized.
pub fn assign_buffers(
    func: &Function,
    sharing: Sharing,
) -> Result<BufferAssignment, LivenessError> {
    let live = liveness::analyze(func)?;
    let nvals = func.values.len();
    let mut is_output = vec![false; nvals];
    for &v in &func.returns {
        is_output[v.index()] = true;
    }
    let size_of = |v: Value| -> Result<u64, LivenessError> {
        let ty = func
            .ty(v)
            .ok_or_else(|| LivenessError::Untyped(func.value_name(v)))?;
        ty.byte_size()
            .ok_or_else(|| LivenessError::Overflow(func.value_name(v)))
    };
    // Operator index of each value's producer, and of its last reader.
    let mut def_at = vec![usize::MAX; nvals];
    let mut last_use = vec![0usize; nvals];
    for &id in &func.layout {
        let Some(i) = live.operator_index(id) else {
            continue;
        };
        for &r in &func.ops[id].results {
            def_at[r.index()] = i;
            last_use[r.index()] = i;
        }
    }
    for &id in &func.layout {
        let Some(i) = live.operator_index(id) else {
            continue;
        };
        for &v in &func.ops[id].operands {
            last_use[v.index()] = last_use[v.index()].max(i);
        }
    }
    for &v in &func.returns {
        // A returned value is read by the caller after the last operator.
        last_use[v.index()] = live.num_operators;
    }

    let first_write = |vals: &[Value]| {
        vals.iter()
            .map(|w| def_at[w.index()])
            .min()
            .unwrap_or(usize::MAX)
    };
    let mut forest = Forest {
        parent: Vec::new(),
        size: Vec::new(),
        root_value: Vec::new(),
    };
    let mut slot: Vec<Option<Slot>> = vec![None; nvals];
    // Values placed in each node (directly or through children), for the in-place test.
    let mut members: Vec<Vec<Value>> = Vec::new();

    for &id in &func.layout {
        let Some(i) = live.operator_index(id) else {
            continue;
        };
        let data = &func.ops[id];
        let intermediate = |v: Value| !is_output[v.index()];
        let any = sharing.views || sharing.in_place || sharing.concat;
        if any && data.results.len() == 1 && intermediate(data.results[0]) {
            let r = data.results[0];
            let src = data.operands.first().copied();
            // View: the result is the same bytes as its source.
            if sharing.views && data.op.is_view() {
                if let Some(s) = src.and_then(|s| slot[s.index()]) {
                    slot[r.index()] = Some(s);
                    let (top, _) = forest.resolve(s.node);
                    members[top].push(r);
                    continue;
                }
            }
            // In place: an element-wise op over an operand of its own type whose buffer holds
            // nothing read after this op.
            if sharing.in_place && data.op.is_elementwise() {
                // Of several candidates, the buffer written most recently: the result may
                // later move into a concat's slice, and the concat's buffer then lives from
                // its members' first write (a residual `add` over a long-lived operand would
                // pin the whole concat from that operand's definition).
                let rty = func.ty(r);
                let candidate = data
                    .operands
                    .iter()
                    .copied()
                    .enumerate()
                    .filter(|&(_, u)| {
                        let Some(s) = slot[u.index()] else {
                            return false;
                        };
                        let (top, _) = forest.resolve(s.node);
                        func.ty(u) == rty && members[top].iter().all(|&w| last_use[w.index()] <= i)
                    })
                    .max_by_key(|&(k, u)| {
                        let (top, _) = forest.resolve(slot[u.index()].expect("filtered").node);
                        // Ties (the same buffer, or equal first writes) go to the first operand.
                        (first_write(&members[top]), std::cmp::Reverse(k))
                    })
                    .map(|(_, u)| u);
                if let Some(u) = candidate {
                    let s = slot[u.index()].expect("candidate has a slot");
                    slot[r.index()] = Some(s);
                    let (top, _) = forest.resolve(s.node);
                    members[top].push(r);
                    continue;
                }
            }
            // Concat: one buffer; whole-buffer operands move into their slices.
            if let (true, Op::Concat { axis }) = (sharing.concat, &data.op) {
                let axis = *axis;
                let ty = func
                    .ty(r)
                    .ok_or_else(|| LivenessError::Untyped(func.value_name(r)))?;
                let rank = ty.rank() as i64;
                let ax = if axis < 0 { axis + rank } else { axis } as usize;
                if ty.shape[..ax].iter().all(|&d| d == 1) {
                    let node = forest.add(size_of(r)?, r);
                    members.push(vec![r]);
                    slot[r.index()] = Some(Slot { node, offset: 0 });
                    let earliest = data
                        .operands
                        .iter()
                        .map(|u| def_at[u.index()])
                        .filter(|&d| d <= i)
                        .min()
                        .unwrap_or(i);
                    let mut offset = 0u64;
                    let mut seen: Vec<Value> = Vec::new();
                    for &u in &data.operands {
                        let usize_ = size_of(u)?;
                        if !seen.contains(&u) {
                            seen.push(u);
                            if let Some(s) = slot[u.index()] {
                                let whole = s.offset == 0
                                    && forest.parent[s.node].is_none()
                                    && forest.size[s.node] == usize_;
                                // An in-place chain that began long before the operand
                                // itself (a residual `add` over a pool run early) would make
                                // the whole concat live from then: past twice the span of its
                                // operands' definitions, the operand stays apart and is copied.
                                let recent = first_write(&members[s.node])
                                    >= earliest.saturating_sub(i - earliest);
                                if whole && s.node != node && recent {
                                    forest.parent[s.node] = Some((node, offset));
                                    let moved = std::mem::take(&mut members[s.node]);
                                    members[node].extend(moved);
                                }
                            }
                        }
                        offset += usize_;
                    }
                    continue;
                }
            }
        }
        for &r in &data.results {
            if !intermediate(r) {
                continue;
            }
            let node = forest.add(size_of(r)?, r);
            members.push(vec![r]);
            slot[r.index()] = Some(Slot { node, offset: 0 });
        }
    }

    // Top nodes become buffers; lifetimes span every member.
    let mut buffer_of_top = vec![usize::MAX; forest.parent.len()];
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut place = vec![None; nvals];
    // In definition order, so that without sharing the records are exactly liveness's.
    let defined = func
        .layout
        .iter()
        .flat_map(|&id| func.ops[id].results.iter().copied());
    for v in defined {
        let Some(s) = slot[v.index()] else { continue };
        let (node_top, node_off) = forest.resolve(s.node);
        if buffer_of_top[node_top] == usize::MAX {
            buffer_of_top[node_top] = buffers.len();
            buffers.push(Buffer {
                root: forest.root_value[node_top],
                size: forest.size[node_top],
                record: UsageRecord {
                    first_op: usize::MAX,
                    last_op: 0,
                    size: forest.size[node_top],
                },
            });
        }
        let b = buffer_of_top[node_top];
        place[v.index()] = Some((b, node_off + s.offset));
        let rec = &mut buffers[b].record;
        rec.first_op = rec.first_op.min(def_at[v.index()]);
        rec.last_op = rec.last_op.max(last_use[v.index()]);
    }
    Ok(BufferAssignment {
        place,
        buffers,
        num_operators: live.num_operators,
    })
}
