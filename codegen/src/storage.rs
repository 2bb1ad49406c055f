//! Where every value's bytes are: the slab at a constant offset, a caller's input or output
//! buffer, or a weight global. Read off the bufferized IR (`alloc_slab`, `alloc_tensor`,
//! `outs`), never recomputed from the plan.

use crate::CodegenError;
use tir_interp::Weights;
use tir_ir::{EntityRef, Function, Op, OpData, Value, ValueDef};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    Slab,
    Input(usize),
    Output(usize),
    /// Index into [`Storage::weights`].
    Weight(usize),
}

/// A byte address: a base and a constant offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub base: Base,
    pub offset: u64,
}

impl Loc {
    /// Whether `[self, self + n)` and `[other, other + m)` share a byte.
    pub fn overlaps(&self, n: u64, other: &Loc, m: u64) -> bool {
        self.base == other.base
            && self.offset < other.offset + m.max(1)
            && other.offset < self.offset + n.max(1)
    }

    pub fn at(self, bytes: u64) -> Loc {
        Loc {
            base: self.base,
            offset: self.offset + bytes,
        }
    }
}

pub struct Storage {
    /// Per value (indexed by `Value`).
    pub loc: Vec<Option<Loc>>,
    /// The const values, in the order of their globals.
    pub weights: Vec<Value>,
    /// Consts stored transposed (rank 2), because their only use is gemm's B with `trans_b`.
    pub transposed: Vec<Value>,
    /// Consts stored as row panels `[M/MR][K][MR]` (the value, MR), because their only use
    /// is the weight of a pointwise convolution on the narrow GEMM tiles
    /// ([`Storage::pack_panels`]).
    pub packed: Vec<(Value, i64)>,
    /// Consts that carry, after the layout above, a second copy as row panels of this height
    /// (the value, MR): a dynamic compile's pointwise convolution, whose image size picks at
    /// run time between two kernels that read different layouts ([`Storage::copy_panels_by`]).
    pub panel_copies: Vec<(Value, i64)>,
    /// Consts stored as compressed rows of their nonzeros (the value, the input's row
    /// stride, the nonzeros of each output channel), because their only use is the weight of
    /// a pointwise convolution and they are mostly zeros ([`Storage::pack_sparse`]).
    pub sparse: Vec<(Value, i64, Vec<i64>)>,
}

impl Storage {
    pub fn analyze(func: &Function) -> Result<Storage, CodegenError> {
        let mut loc: Vec<Option<Loc>> = vec![None; func.values.len()];
        for (i, &p) in func.params.iter().enumerate() {
            loc[p.index()] = Some(Loc {
                base: Base::Input(i),
                offset: 0,
            });
        }
        let mut weights = Vec::new();
        let mut transposed = Vec::new();
        for (_, op) in func.ops_in_order() {
            match &op.op {
                Op::AllocSlab { .. } => {
                    loc[op.results[0].index()] = Some(Loc {
                        base: Base::Slab,
                        offset: 0,
                    })
                }
                Op::AllocTensor { offset } => {
                    let parent = op
                        .operands
                        .first()
                        .and_then(|p| loc[p.index()])
                        .ok_or_else(|| CodegenError::NoStorage(func.value_name(op.results[0])))?;
                    loc[op.results[0].index()] = Some(parent.at(*offset));
                }
                Op::Const { .. } => {
                    for &r in &op.results {
                        loc[r.index()] = Some(Loc {
                            base: Base::Weight(weights.len()),
                            offset: 0,
                        });
                        weights.push(r);
                        if only_use_is_trans_b(func, r) {
                            transposed.push(r);
                        }
                    }
                }
                _ => {}
            }
        }
        // Returned values: the first return of a value owns it; later ones are copies.
        for (j, &r) in func.returns.iter().enumerate() {
            let is_result = matches!(func.values[r].def, ValueDef::Result(id, _)
                if !matches!(func.ops[id].op, Op::Const { .. }));
            if is_result && loc[r.index()].is_none() {
                loc[r.index()] = Some(Loc {
                    base: Base::Output(j),
                    offset: 0,
                });
            }
        }
        for (_, op) in func.ops_in_order() {
            if !op.op.is_operator() {
                continue;
            }
            for (i, &r) in op.results.iter().enumerate() {
                if let Some(&o) = op.outs.get(i) {
                    loc[r.index()] = loc[o.index()];
                }
                if loc[r.index()].is_none() && op.op.is_view() {
                    loc[r.index()] = op.operands.first().and_then(|s| loc[s.index()]);
                }
                if loc[r.index()].is_none() {
                    return Err(CodegenError::NoStorage(func.value_name(r)));
                }
            }
        }
        Ok(Storage {
            loc,
            weights,
            transposed,
            packed: Vec::new(),
            panel_copies: Vec::new(),
            sparse: Vec::new(),
        })
    }

    /// Marks for the sparse pointwise kernel the f32 weights whose only use is a pointwise
    /// convolution and which are mostly zeros (`kernels::conv::sparse_row_stride`). Only the
    /// static code generator calls it, before [`Storage::pack_panels`] (a weight stored sparse
    /// is not packed in panels).
    pub fn pack_sparse(&mut self, func: &Function, weights: &Weights) {
        for &v in &self.weights {
            let data = match func.producer(v).map(|id| &func.ops[id].op) {
                Some(Op::Const { name }) => weights.get(name).and_then(|t| t.as_f32()),
                _ => None,
            };
            let Some(data) = data else { continue };
            if let Some(op) = only_use(func, v, 1) {
                if let Some((hw, per_channel)) =
                    crate::kernels::conv::sparse_row_stride(func, op, data)
                {
                    self.sparse.push((v, hw, per_channel));
                }
            }
        }
    }

    /// The input row stride `v` is stored sparse for, if it is ([`Storage::pack_sparse`]).
    pub fn sparse_stride(&self, v: Value) -> Option<i64> {
        self.sparse
            .iter()
            .find(|(p, _, _)| *p == v)
            .map(|&(_, hw, _)| hw)
    }

    /// The nonzeros of each output channel of `v` as stored sparse (none when it is not).
    pub fn sparse_nonzeros(&self, v: Value) -> &[i64] {
        self.sparse
            .iter()
            .find(|(p, _, _)| *p == v)
            .map_or(&[], |(_, _, per_channel)| per_channel.as_slice())
    }

    /// Marks for packing into row panels the weights whose only use is a convolution that
    /// runs on the narrow GEMM tiles at `width` lanes (`kernels::conv::panel_rows`): the
    /// static code generator's choice.
    pub fn pack_panels(&mut self, func: &Function, width: u32) {
        self.pack_panels_by(func, |op| crate::kernels::conv::panel_rows(func, op, width));
    }

    /// Marks for packing into row panels of `rows(op)` rows the weights whose only use is
    /// the weight operand of `op` (a kernel generator's own choice: the static one above,
    /// the run-time-shaped one in `dynamic::cnn::panel_rows`).
    pub fn pack_panels_by(&mut self, func: &Function, rows: impl Fn(&OpData) -> Option<i64>) {
        let marked = self.weight_operands_by(func, rows);
        self.packed.extend(marked);
    }

    /// Marks for a second copy, as row panels of `rows(op)` rows after the stored layout,
    /// the weights whose only use is the weight operand of `op` (the dynamic channel-vector
    /// tiles, `dynamic::cnn::chanvec_rows`).
    pub fn copy_panels_by(&mut self, func: &Function, rows: impl Fn(&OpData) -> Option<i64>) {
        let marked = self.weight_operands_by(func, rows);
        self.panel_copies.extend(marked);
    }

    /// The panel height of the second copy of `v`, if it has one ([`Storage::copy_panels_by`]).
    pub fn panel_copy_rows(&self, v: Value) -> Option<i64> {
        self.panel_copies
            .iter()
            .find(|&&(p, _)| p == v)
            .map(|&(_, mr)| mr)
    }

    /// The (weight, `rows(op)`) of every weight, not stored sparse, whose only use is the
    /// weight operand of an op `op` for which `rows` gives a height.
    fn weight_operands_by(
        &self,
        func: &Function,
        rows: impl Fn(&OpData) -> Option<i64>,
    ) -> Vec<(Value, i64)> {
        let mut marked = Vec::new();
        for &v in &self.weights {
            let mut uses = func
                .ops_in_order()
                .flat_map(|(_, d)| d.operands.iter().enumerate().map(move |(i, &o)| (d, i, o)))
                .filter(|&(_, _, o)| o == v);
            let first = uses.next();
            if uses.next().is_some() || func.returns.contains(&v) {
                continue;
            }
            if self.sparse_stride(v).is_some() {
                continue;
            }
            if let Some((op, 1, _)) = first {
                if let Some(mr) = rows(op) {
                    marked.push((v, mr));
                }
            }
        }
        marked
    }

    /// The panel height `v` is packed with, if it is ([`Storage::pack_panels`]).
    pub fn panel_rows(&self, v: Value) -> Option<i64> {
        self.packed
            .iter()
            .find(|&&(p, _)| p == v)
            .map(|&(_, mr)| mr)
    }

    pub fn of(&self, func: &Function, v: Value) -> Result<Loc, CodegenError> {
        self.loc[v.index()].ok_or_else(|| CodegenError::NoStorage(func.value_name(v)))
    }
}

/// The op whose operand `index` is `v`, when that is `v`'s only use and `v` is not returned.
fn only_use(func: &Function, v: Value, index: usize) -> Option<&tir_ir::OpData> {
    let mut uses = func
        .ops_in_order()
        .flat_map(|(_, d)| d.operands.iter().enumerate().map(move |(i, &o)| (d, i, o)))
        .filter(|&(_, _, o)| o == v);
    let (op, i, _) = uses.next()?;
    (i == index && uses.next().is_none() && !func.returns.contains(&v)).then_some(op)
}

fn only_use_is_trans_b(func: &Function, v: Value) -> bool {
    let mut uses = func
        .ops_in_order()
        .flat_map(|(_, d)| d.operands.iter().enumerate().map(move |(i, &o)| (d, i, o)))
        .filter(|&(_, _, o)| o == v);
    let first = uses.next();
    let only = uses.next().is_none() && !func.returns.contains(&v);
    match first {
        Some((d, 1, _)) if only => matches!(&d.op, Op::Gemm(g) if g.trans_b),
        _ => false,
    }
}
