//! Kernels with run-time extents and the entry point of a dynamic executable (issue 18, items
//! 3 and 4; design in `docs/codegen.md`, "Run-time shapes").
//!
//! A dynamic model is bufferized once at a *probe* shape (every dim given a value), which
//! fixes its structure: the ops in layout order, which `alloc_tensor` holds which value and
//! each buffer's live interval. The structure is checked to be the same at a second probe.
//! Sizes and offsets are then left to run time: the module gets
//!
//! ```c
//! void <model>_run_dyn(const void *const *inputs, void *const *outputs, void *slab,
//!                      const uint64_t *offsets, const int64_t *dims);
//! ```
//!
//! (and `<model>_run_dyn_parallel`, the same with `parallel_for, pool` after `dims`, which
//! hands each tiled kernel's tiles to the caller's pool: [`DynTiles`])
//! with one offset per `alloc_tensor` (as `<model>_run_at`) and the dims' values in
//! [`DynSpec::symbols`] order. Every op with a symbolic extent gets a kernel here that takes
//! `dims` as a last argument and evaluates its extents from it ([`DimExpr`] as LLVM integer
//! arithmetic); ops whose types are all static keep their static kernels.
//!
//! **Bitwise equal to the static compile.** Each kernel here computes every element with the
//! operations, in the order, of the static kernel of the same op: the GEMM's one FMA chain per
//! output in K order from zero (the static tiles' sums, whatever the tile shape, and the same
//! lane-by-lane epilogue), the matrix-vector product's own partial sums when N is 1 (the very
//! rows of `gemm::gemv`, at a run-time row count), softmax's and layer_norm's f64 statistics in
//! the same loops, the same scalar function per element of the element-wise ops. Only the
//! loops around them differ. `tests/dynamic_runtime.rs` compares the bytes.

use crate::guard::regions;
use crate::kernels::common::{unsupported, Call};
use crate::kernels::gemm::{finish, gemv_rows, rows_for, wide, Epilogue, Gemm, SHORT_K};
use crate::nest::{llvm, K, R};
use crate::storage::{Base, Storage};
use crate::{Arg, Bufferized, CodegenError, Gen};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::module::Linkage;
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{
    BasicValueEnum, FloatValue, FunctionValue, IntValue, PointerValue, VectorValue,
};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use std::collections::HashMap;
use tir_ir::op::PadMode;
use tir_ir::sym::{Atom, DimExpr};
use tir_ir::types::SymTensorType;
use tir_ir::{Activation, BinaryOp, Function, Op, OpData, UnaryOp, Value};

mod chanvec;
mod cnn;
mod gemm;
mod norm;
mod pointwise;
mod reduce;
mod shape_ops;
mod tconv;

/// Which arguments of a two-operand kernel it writes (`a`, `b` read, the result written).
pub(crate) const TWO_IN_ONE_OUT: [bool; 3] = [false, false, true];

/// The symbolic side of a dynamic compile: the dims (the order of the `dims` array) and every
/// value's symbolic type, by value name (specialization and bufferization keep the names).
#[derive(Clone, Debug, Default)]
pub struct DynSpec {
    pub symbols: Vec<String>,
    pub types: HashMap<String, SymTensorType>,
    /// The conditions verification left to run time: the executable and `<model>_plan` check
    /// them once the dims are known.
    pub checks: Vec<tir_ir::RuntimeCheck>,
    /// The dims given a value at compile time (`--dim NAME=N`): still symbols of the kernels,
    /// pinned by the executable, so a refusal names a dim left free instead.
    pub given: Vec<String>,
}

/// Sizes that are equal at every shape the run-time checks accept: the classes of the checks'
/// equalities (a `reshape` whose element counts are equal only where a dim is 1 records
/// `a == b`), scaled alike, so that a buffer shared by both sides has one size wherever the
/// program runs.
pub struct Equalities {
    class: HashMap<DimExpr, usize>,
}

impl Equalities {
    /// `a == b` at every accepted shape: the same expression, or two of one class.
    pub fn same(&self, a: &DimExpr, b: &DimExpr) -> bool {
        a == b || matches!((self.class.get(a), self.class.get(b)), (Some(i), Some(j)) if i == j)
    }
}

impl DynSpec {
    /// The equalities the run-time checks establish, as classes (union–find on their sides).
    pub fn equalities(&self) -> Equalities {
        let mut parent: Vec<usize> = Vec::new();
        let mut class: HashMap<DimExpr, usize> = HashMap::new();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        let mut id = |e: &DimExpr, parent: &mut Vec<usize>| -> usize {
            *class.entry(e.clone()).or_insert_with(|| {
                parent.push(parent.len());
                parent.len() - 1
            })
        };
        let mut pairs = Vec::new();
        for c in &self.checks {
            if c.cond.kind == tir_ir::sym::CondKind::Eq {
                let (a, b) = (id(&c.cond.lhs, &mut parent), id(&c.cond.rhs, &mut parent));
                pairs.push((a, b));
            }
        }
        for (a, b) in pairs {
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            parent[ra] = rb;
        }
        let class = class
            .into_iter()
            .map(|(e, i)| (e, root(&mut parent, i)))
            .collect();
        Equalities { class }
    }

    /// The spec of a verified dynamic function.
    pub fn of(f: &Function) -> DynSpec {
        let types = f
            .values
            .iter()
            .filter_map(|(_, d)| d.sym_type().map(|t| (d.name.clone(), t)))
            .collect();
        DynSpec {
            symbols: tir_ir::specialize::symbols(f),
            types,
            checks: f
                .dynamic
                .as_ref()
                .map(|d| d.checks.clone())
                .unwrap_or_default(),
            given: Vec::new(),
        }
    }

    /// [`DynSpec::of`] with the dims of `given` pinned at compile time.
    pub fn given(f: &Function, given: &tir_ir::Bindings) -> DynSpec {
        DynSpec {
            given: given.keys().cloned().collect(),
            ..DynSpec::of(f)
        }
    }

    /// The symbolic dims of `v` (a value of the probe function).
    pub fn dims(&self, func: &Function, v: Value) -> R<Vec<DimExpr>> {
        self.types
            .get(&func.values[v].name)
            .map(|t| t.shape.clone())
            .ok_or_else(|| CodegenError::NoStorage(func.value_name(v)))
    }

    /// Whether some operand or result of `op` has a symbolic dim.
    pub fn is_dynamic(&self, func: &Function, op: &OpData) -> bool {
        op.operands.iter().chain(&op.results).any(|&v| {
            self.dims(func, v)
                .map(|d| d.iter().any(|e| !e.is_constant()))
                .unwrap_or(false)
        })
    }
}

/// The first symbol of `op`'s types left free by the compile (not in [`DynSpec::given`]),
/// for messages: the dim a `--dim` would still have to give. With every one given, the first.
fn first_symbol(spec: &DynSpec, func: &Function, op: &OpData) -> String {
    let all: Vec<String> = op
        .operands
        .iter()
        .chain(&op.results)
        .filter_map(|&v| spec.dims(func, v).ok())
        .flatten()
        .flat_map(|e| e.symbols())
        .collect();
    all.iter()
        .find(|s| !spec.given.contains(s))
        .or(all.first())
        .cloned()
        .unwrap_or_default()
}

/// An op without a kernel taking that dim at run time: the refusal names the op, the dim and
/// what to pass.
fn refuse(spec: &DynSpec, func: &Function, op: &OpData, why: &str) -> CodegenError {
    let s = first_symbol(spec, func, op);
    unsupported(
        func,
        op,
        &format!("{why} with the run-time dim `{s}` is not supported yet; give it a value with --dim {s}=N"),
    )
}

/// How a kernel with run-time extents is cut into tiles (issue 20): its work is `per_elem`
/// FLOP-equivalents ([`crate::parallel::work`]) per element of a tensor of dims `elems`,
/// evaluated at run time; tiles of at least [`crate::Options::min_tile_flops`] each, a power
/// of two of them, at most `max` (a power of two). The kernel and the entry point compute the
/// count from the same dims with the same integer arithmetic, so they agree; how many tiles
/// there are never changes an output element's operations (each tile is a range of whole
/// output units, computed by the same code as when one tile holds them all), so the bytes are
/// the same for every thread count and every count of tiles.
#[derive(Clone, Debug)]
pub(crate) struct DynTiles {
    pub elems: Vec<DimExpr>,
    pub per_elem: u64,
    pub max: i64,
}

impl DynTiles {
    /// At most `units` tiles (rounded down to a power of two, at most 8).
    pub(crate) fn new(elems: Vec<DimExpr>, per_elem: u64, units: i64) -> DynTiles {
        let cap = units.clamp(1, 8);
        DynTiles {
            elems,
            per_elem: per_elem.max(1),
            max: 1i64 << (63 - cap.leading_zeros()),
        }
    }
}

/// A kernel of this module: `void name(float *args..., const int64_t *dims)` with its dims
/// loaded once in the entry block; a tiled one also takes `int64_t begin, int64_t end`, the
/// range of its `count` tiles it computes ([`Dk::split`]).
pub(crate) struct Dk<'a, 'c> {
    k: K<'a, 'c>,
    f: FunctionValue<'c>,
    dims: Vec<IntValue<'c>>,
    syms: &'a [String],
    /// `(begin, end, count)` of a tiled kernel.
    tiles: Option<(IntValue<'c>, IntValue<'c>, IntValue<'c>)>,
}

impl<'a, 'c> Gen<'a, 'c> {
    fn dyn_kernel(
        &self,
        name: &str,
        args: &[Arg],
        writes: &[bool],
        syms: &'a [String],
    ) -> R<Dk<'a, 'c>> {
        self.dyn_kernel_tiled(name, args, writes, syms, None)
    }

    /// [`Gen::dyn_kernel`], cut into tiles as `tiles` says (`None`: one call does all).
    fn dyn_kernel_tiled(
        &self,
        name: &str,
        args: &[Arg],
        writes: &[bool],
        syms: &'a [String],
        tiles: Option<DynTiles>,
    ) -> R<Dk<'a, 'c>> {
        let fp = self.ctx.f32_type().ptr_type(AddressSpace::default());
        let ip = self.ctx.i64_type().ptr_type(AddressSpace::default());
        let mut params: Vec<BasicMetadataTypeEnum> = vec![fp.into(); args.len()];
        params.push(ip.into());
        let tiles = tiles.filter(|t| t.max > 1);
        if tiles.is_some() {
            params.push(self.ctx.i64_type().into());
            params.push(self.ctx.i64_type().into());
        }
        let ty = self.ctx.void_type().fn_type(&params, false);
        let f = self.module.add_function(name, ty, Some(Linkage::Internal));
        self.attrs(f);
        let noalias = Attribute::get_named_enum_kind_id("noalias");
        for (i, a) in args.iter().enumerate() {
            // Two arguments of one op are live together, so under any valid plan they share
            // bytes only if they do in the probe's (see `relocate`).
            let clash = args.iter().enumerate().any(|(j, o)| {
                j != i && (writes[i] || writes[j]) && a.loc.overlaps(a.bytes, &o.loc, o.bytes)
            });
            if !clash {
                f.add_attribute(
                    AttributeLoc::Param(i as u32),
                    self.ctx.create_enum_attribute(noalias, 0),
                );
            }
        }
        let entry = self.ctx.append_basic_block(f, "entry");
        self.builder.position_at_end(entry);
        let k = self.k(f);
        let dp = f
            .get_nth_param(args.len() as u32)
            .ok_or_else(|| CodegenError::Llvm("missing dims parameter".into()))?
            .into_pointer_value();
        let dims = (0..syms.len())
            .map(|i| {
                let q = k.gep(dp, k.c(i as i64))?;
                Ok(llvm(self.builder.build_load(q, "dim"))?.into_int_value())
            })
            .collect::<R<_>>()?;
        let mut d = Dk {
            k,
            f,
            dims,
            syms,
            tiles: None,
        };
        if let Some(t) = tiles {
            let at = |i: usize| -> R<IntValue<'c>> {
                f.get_nth_param((args.len() + 1 + i) as u32)
                    .map(|p| p.into_int_value())
                    .ok_or_else(|| CodegenError::Llvm("missing tile range parameter".into()))
            };
            let count = d.tile_count(&t, self.min_tile_flops)?;
            d.tiles = Some((at(0)?, at(1)?, count));
            self.parallel
                .borrow_mut()
                .push((f, t.max as u64, Vec::new()));
            self.dyn_tiles.borrow_mut().push((f, t));
        }
        Ok(d)
    }
}

impl<'a, 'c> Dk<'a, 'c> {
    /// The run-time loops and masks of this module inside a static kernel `k` (no dims, one
    /// tile: its loops' bounds are the caller's), so that a static kernel can share a body
    /// written for run-time extents ([`softmax_rows`]).
    pub(crate) fn over(k: &K<'a, 'c>) -> Dk<'a, 'c> {
        Dk {
            k: K::new(k.ctx, k.module, k.b, k.func),
            f: k.func,
            dims: Vec::new(),
            syms: &[],
            tiles: None,
        }
    }

    fn param(&self, i: u32) -> R<PointerValue<'c>> {
        self.f
            .get_nth_param(i)
            .map(|p| p.into_pointer_value())
            .ok_or_else(|| CodegenError::Llvm("missing kernel parameter".into()))
    }

    /// The value of `e` at run time (signed 64-bit; floor and ceiling divisions round as the
    /// IR's rules do, toward minus and plus infinity).
    fn dim(&self, e: &DimExpr) -> R<IntValue<'c>> {
        let k = &self.k;
        let mut acc: Option<IntValue<'c>> = None;
        for (atoms, coeff) in e.terms() {
            let mut t = k.c(coeff as i64);
            for a in atoms {
                let v = self.atom(a)?;
                t = llvm(k.b.build_int_mul(t, v, "dm"))?;
            }
            acc = Some(match acc {
                None => t,
                Some(s) => k.add(s, t)?,
            });
        }
        Ok(acc.unwrap_or_else(|| k.c(0)))
    }

    fn atom(&self, a: &Atom) -> R<IntValue<'c>> {
        let k = &self.k;
        let b = k.b;
        Ok(match a {
            Atom::Sym(s) => {
                let i = self
                    .syms
                    .iter()
                    .position(|x| x == s)
                    .ok_or_else(|| CodegenError::Llvm(format!("unknown dim `{s}`")))?;
                self.dims[i]
            }
            Atom::FloorDiv(x, y) | Atom::CeilDiv(x, y) => {
                let (x, y) = (self.dim(x)?, self.dim(y)?);
                let ceil = matches!(a, Atom::CeilDiv(..));
                // Truncated quotient, then one step toward the rounding direction when the
                // remainder is not zero and its sign says so.
                let q = llvm(b.build_int_signed_div(x, y, "q"))?;
                let r = llvm(b.build_int_signed_rem(x, y, "r"))?;
                let nz = llvm(b.build_int_compare(IntPredicate::NE, r, k.c(0), "nz"))?;
                let xs = llvm(b.build_int_compare(IntPredicate::SLT, x, k.c(0), "xs"))?;
                let ys = llvm(b.build_int_compare(IntPredicate::SLT, y, k.c(0), "ys"))?;
                let differ = llvm(b.build_xor(xs, ys, "d"))?;
                let step = if ceil {
                    llvm(b.build_not(differ, "s"))?
                } else {
                    differ
                };
                let adj = llvm(b.build_and(nz, step, "a"))?;
                let one = llvm(b.build_int_z_extend(adj, k.i64t, "o"))?;
                if ceil {
                    k.add(q, one)?
                } else {
                    llvm(b.build_int_sub(q, one, "f"))?
                }
            }
            Atom::Max(x, y) | Atom::Min(x, y) => {
                let (x, y) = (self.dim(x)?, self.dim(y)?);
                let pred = if matches!(a, Atom::Max(..)) {
                    IntPredicate::SGT
                } else {
                    IntPredicate::SLT
                };
                let c = llvm(b.build_int_compare(pred, x, y, "c"))?;
                llvm(b.build_select(c, x, y, "m"))?.into_int_value()
            }
        })
    }

    /// The count of tiles of `t` at this shape: `work / min_work` rounded down to a power of
    /// two, between 1 and `t.max` ([`crate::parallel::Tiling`]'s rule with run-time work).
    fn tile_count(&self, t: &DynTiles, min_work: u64) -> R<IntValue<'c>> {
        let k = &self.k;
        let elems = self.prod(&self.dims_of(&t.elems)?)?;
        let work = k.mul(elems, t.per_elem as i64)?;
        let want = llvm(k.b.build_int_signed_div(work, k.c(min_work.max(1) as i64), "want"))?;
        let mut count = k.c(1);
        let mut p = 2;
        while p <= t.max {
            let ge = llvm(k.b.build_int_compare(IntPredicate::SGE, want, k.c(p), "ge"))?;
            count = llvm(k.b.build_select(ge, k.c(p), count, "tiles"))?.into_int_value();
            p *= 2;
        }
        Ok(count)
    }

    /// This call's share `[lo, hi)` of `n` units (run-time) cut into the kernel's tiles in
    /// whole `granule`s: of `G = ⌈n / granule⌉` granules, tile `t` of `count` starts at
    /// granule `⌊t·G/count⌋` ([`crate::parallel::Tiling::first`]), the last ends at `n`.
    /// An untiled kernel's share is all of them.
    fn split(&self, n: IntValue<'c>, granule: i64) -> R<(IntValue<'c>, IntValue<'c>)> {
        let k = &self.k;
        let Some((begin, end, count)) = self.tiles else {
            return Ok((k.c(0), n));
        };
        let g = granule.max(1);
        let gs = llvm(k.b.build_int_signed_div(k.add(n, k.c(g - 1))?, k.c(g), "gs"))?;
        let at = |t: IntValue<'c>| -> R<IntValue<'c>> {
            let q = llvm(k.b.build_int_signed_div(self.imul(t, gs)?, count, "q"))?;
            let u = k.mul(q, g)?;
            let c = llvm(k.b.build_int_compare(IntPredicate::SLT, u, n, "c"))?;
            Ok(llvm(k.b.build_select(c, u, n, "u"))?.into_int_value())
        };
        let lo = at(begin)?;
        let last = llvm(k.b.build_int_compare(IntPredicate::SGE, end, count, "last"))?;
        let hi = llvm(k.b.build_select(last, n, at(end)?, "hi"))?.into_int_value();
        Ok((lo, hi))
    }

    fn dims_of(&self, es: &[DimExpr]) -> R<Vec<IntValue<'c>>> {
        es.iter().map(|e| self.dim(e)).collect()
    }

    fn imul(&self, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        llvm(self.k.b.build_int_mul(a, b, "m"))
    }

    fn prod(&self, xs: &[IntValue<'c>]) -> R<IntValue<'c>> {
        let mut p = self.k.c(1);
        for &x in xs {
            p = self.imul(p, x)?;
        }
        Ok(p)
    }

    /// Row-major strides of a shape.
    fn contiguous(&self, shape: &[IntValue<'c>]) -> R<Vec<IntValue<'c>>> {
        let mut s = vec![self.k.c(0); shape.len()];
        let mut acc = self.k.c(1);
        for d in (0..shape.len()).rev() {
            s[d] = acc;
            acc = self.imul(acc, shape[d])?;
        }
        Ok(s)
    }

    /// `for iv in lo..hi step step`, bounds known at run time; no iteration when `lo >= hi`.
    fn loop_step(
        &self,
        lo: IntValue<'c>,
        hi: IntValue<'c>,
        step: i64,
        body: &mut dyn FnMut(IntValue<'c>) -> R<()>,
    ) -> R<()> {
        self.carry(lo, hi, step, vec![], &mut |iv, _| {
            body(iv)?;
            Ok(vec![])
        })
        .map(|_| ())
    }

    /// [`K::loop_carry`] with run-time bounds.
    fn carry(
        &self,
        lo: IntValue<'c>,
        hi: IntValue<'c>,
        step: i64,
        init: Vec<BasicValueEnum<'c>>,
        body: &mut crate::nest::CarryBody<'_, 'c>,
    ) -> R<Vec<BasicValueEnum<'c>>> {
        let k = &self.k;
        let b = k.b;
        let pre = b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))?;
        let head = k.ctx.append_basic_block(self.f, "dloop");
        let exit = k.ctx.append_basic_block(self.f, "dexit");
        let any = llvm(b.build_int_compare(IntPredicate::SLT, lo, hi, "any"))?;
        llvm(b.build_conditional_branch(any, head, exit))?;
        b.position_at_end(head);
        let phi = llvm(b.build_phi(k.i64t, "iv"))?;
        phi.add_incoming(&[(&lo, pre)]);
        let mut phis = Vec::with_capacity(init.len());
        for v in &init {
            let p = llvm(b.build_phi(v.get_type(), "acc"))?;
            p.add_incoming(&[(v, pre)]);
            phis.push(p);
        }
        let iv = phi.as_basic_value().into_int_value();
        let cur: Vec<BasicValueEnum<'c>> = phis.iter().map(|p| p.as_basic_value()).collect();
        let next_vals = body(iv, &cur)?;
        let next = llvm(b.build_int_add(iv, k.c(step), "next"))?;
        let done = llvm(b.build_int_compare(IntPredicate::SGE, next, hi, "done"))?;
        let latch = b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))?;
        phi.add_incoming(&[(&next, latch)]);
        for (p, v) in phis.iter().zip(&next_vals) {
            p.add_incoming(&[(v, latch)]);
        }
        llvm(b.build_conditional_branch(done, exit, head))?;
        b.position_at_end(exit);
        // The carried values after the loop: the initial ones when it ran no iteration.
        let mut out = Vec::with_capacity(init.len());
        for (v, n) in init.iter().zip(&next_vals) {
            let p = llvm(b.build_phi(v.get_type(), "out"))?;
            p.add_incoming(&[(v, pre), (n, latch)]);
            out.push(p.as_basic_value());
        }
        Ok(out)
    }

    /// Nested loops over `shape`; the body gets each stride set's element index.
    fn nest(
        &self,
        shape: &[IntValue<'c>],
        sets: &[Vec<IntValue<'c>>],
        body: &mut dyn FnMut(&[IntValue<'c>]) -> R<()>,
    ) -> R<()> {
        let mut ivs = Vec::with_capacity(shape.len());
        self.nest_rec(shape, sets, &mut ivs, body)
    }

    /// [`Dk::nest`] over this call's share of the rows (every axis but the last, in
    /// row-major order; [`Dk::split`]): each row's indices from its number, then the last
    /// axis inside.
    fn nest_split(
        &self,
        shape: &[IntValue<'c>],
        sets: &[Vec<IntValue<'c>>],
        body: &mut dyn FnMut(&[IntValue<'c>]) -> R<()>,
    ) -> R<()> {
        if self.tiles.is_none() || shape.is_empty() {
            return self.nest(shape, sets, body);
        }
        if shape.len() == 1 {
            // One axis: this call's share of its elements (every tile running the whole
            // nest would compute each element once per tile).
            let (lo, hi) = self.split(shape[0], 64)?;
            return self.loop_step(lo, hi, 1, &mut |j| {
                let idx: Vec<IntValue<'c>> =
                    sets.iter().map(|s| self.imul(j, s[0])).collect::<R<_>>()?;
                body(&idx)
            });
        }
        let k = &self.k;
        let last = shape.len() - 1;
        let rows = self.prod(&shape[..last])?;
        let (lo, hi) = self.split(rows, 1)?;
        self.loop_step(lo, hi, 1, &mut |row| {
            // The row's index on each outer axis, innermost first.
            let mut ivs = vec![k.c(0); last];
            let mut rest = row;
            for a in (0..last).rev() {
                ivs[a] = llvm(k.b.build_int_signed_rem(rest, shape[a], "i"))?;
                rest = llvm(k.b.build_int_signed_div(rest, shape[a], "r"))?;
            }
            let bases: Vec<IntValue<'c>> = sets
                .iter()
                .map(|s| {
                    let mut acc = k.c(0);
                    for (&iv, &st) in ivs.iter().zip(s) {
                        acc = k.add(acc, self.imul(iv, st)?)?;
                    }
                    Ok(acc)
                })
                .collect::<R<_>>()?;
            self.loop_step(k.c(0), shape[last], 1, &mut |j| {
                let idx: Vec<IntValue<'c>> = bases
                    .iter()
                    .zip(sets)
                    .map(|(&b, s)| k.add(b, self.imul(j, s[last])?))
                    .collect::<R<_>>()?;
                body(&idx)
            })
        })
    }

    fn nest_rec(
        &self,
        shape: &[IntValue<'c>],
        sets: &[Vec<IntValue<'c>>],
        ivs: &mut Vec<IntValue<'c>>,
        body: &mut dyn FnMut(&[IntValue<'c>]) -> R<()>,
    ) -> R<()> {
        if ivs.len() == shape.len() {
            let mut idx = Vec::with_capacity(sets.len());
            for s in sets {
                let mut acc = self.k.c(0);
                for (&iv, &st) in ivs.iter().zip(s) {
                    acc = self.k.add(acc, self.imul(iv, st)?)?;
                }
                idx.push(acc);
            }
            return body(&idx);
        }
        let n = shape[ivs.len()];
        self.loop_step(self.k.c(0), n, 1, &mut |iv| {
            ivs.push(iv);
            let r = self.nest_rec(shape, sets, ivs, body);
            ivs.pop();
            r
        })
    }

    /// The `<w x i1>` mask of the lanes below `n` (`n` may exceed `w`).
    fn lanes_below(&self, n: IntValue<'c>, w: u32) -> R<VectorValue<'c>> {
        let k = &self.k;
        let i64v = k.i64t.vec_type(w);
        let lanes: Vec<IntValue> = (0..w).map(|l| k.c(l as i64)).collect();
        let lanes = inkwell::types::VectorType::const_vector(&lanes);
        let mut nv = i64v.get_undef();
        for l in 0..w {
            nv = llvm(k.b.build_insert_element(
                nv,
                n,
                k.ctx.i32_type().const_int(l.into(), false),
                "n",
            ))?;
        }
        llvm(k.b.build_int_compare(IntPredicate::SLT, lanes, nv, "lanes"))
    }

    fn masked_ptr(&self, p: PointerValue<'c>, i: IntValue<'c>, w: u32) -> R<PointerValue<'c>> {
        // SAFETY: a plain (not inbounds) GEP is defined for any offset; lanes off the mask are
        // never accessed.
        let q = llvm(unsafe { self.k.b.build_gep(p, &[i], "pm") })?;
        llvm(
            self.k
                .b
                .build_pointer_cast(q, self.k.vty(w).ptr_type(AddressSpace::default()), "vp"),
        )
    }

    fn ldv_mask(
        &self,
        p: PointerValue<'c>,
        i: IntValue<'c>,
        w: u32,
        mask: VectorValue<'c>,
    ) -> R<VectorValue<'c>> {
        let k = &self.k;
        let vt = k.vty(w);
        let vp = self.masked_ptr(p, i, w)?;
        let f = k.intrinsic(
            "llvm.masked.load",
            &[vt.into(), vt.ptr_type(AddressSpace::default()).into()],
        )?;
        let r = llvm(k.b.build_call(
            f,
            &[
                vp.into(),
                k.ctx.i32_type().const_int(4, false).into(),
                mask.into(),
                vt.const_zero().into(),
            ],
            "ml",
        ))?;
        r.try_as_basic_value()
            .basic()
            .map(|v| v.into_vector_value())
            .ok_or_else(|| CodegenError::Llvm("masked load returned no value".into()))
    }

    fn stv_mask(
        &self,
        p: PointerValue<'c>,
        i: IntValue<'c>,
        v: VectorValue<'c>,
        mask: VectorValue<'c>,
    ) -> R<()> {
        let k = &self.k;
        let vt = v.get_type();
        let vp = self.masked_ptr(p, i, vt.get_size())?;
        let f = k.intrinsic(
            "llvm.masked.store",
            &[vt.into(), vt.ptr_type(AddressSpace::default()).into()],
        )?;
        llvm(k.b.build_call(
            f,
            &[
                v.into(),
                vp.into(),
                k.ctx.i32_type().const_int(4, false).into(),
                mask.into(),
            ],
            "",
        ))?;
        Ok(())
    }
}

/// The kernels of `op` when it has a symbolic extent (`None`: all its types are static, the
/// static kernel serves), or a refusal naming the op and the dim.
pub(crate) fn emit_op<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
) -> R<Option<Vec<Call<'c>>>> {
    if !op.op.is_operator() || !spec.is_dynamic(func, op) {
        return Ok(None);
    }
    let all_f32 = op
        .operands
        .iter()
        .chain(&op.results)
        .all(|&v| func.ty(v).is_some_and(|t| t.dtype == tir_ir::DType::F32));
    if !all_f32 {
        return Err(refuse(spec, func, op, "a tensor that is not f32"));
    }
    let calls = match &op.op {
        Op::Unary(u) => {
            let u = *u;
            elementwise(g, spec, func, st, op, name, &move |k, x| unary_fn(k, u, x))?
        }
        Op::Clip { min, max } => {
            let (lo, hi) = (*min as f32 as f64, *max as f32 as f64);
            elementwise(g, spec, func, st, op, name, &move |k, x| k.clip(x, lo, hi))?
        }
        Op::Binary { op: b, activation } => binary(g, spec, func, st, op, *b, *activation, name)?,
        Op::Transpose { perm } => transpose(g, spec, func, st, op, perm, name)?,
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            // Aliased by bufferization: no kernel (the result is its operand's bytes).
            if st.of(func, op.operands[0])? == st.of(func, op.results[0])? {
                return Ok(Some(vec![]));
            }
            elementwise(g, spec, func, st, op, name, &|_, x| Ok(x))?
        }
        Op::Softmax { axis } => softmax(g, spec, func, st, op, *axis, false, name)?,
        Op::LogSoftmax { axis } => softmax(g, spec, func, st, op, *axis, true, name)?,
        Op::LayerNorm { axis, epsilon } => {
            layer_norm(g, spec, func, st, op, *axis, *epsilon, name)?
        }
        Op::MatMul { activation } => matmul(g, spec, func, st, op, *activation, name)?,
        // The run-time conv kernel has no residual or PReLU epilogue (import fuses neither
        // into a dynamic model's convolutions).
        Op::Conv2d(c) if c.prelu => {
            return Err(refuse(spec, func, op, "a conv2d with a fused prelu"))
        }
        Op::Conv2d(_) if op.operands.len() > 3 => {
            return Err(refuse(spec, func, op, "a conv2d with a residual operand"))
        }
        Op::Conv2d(c) => cnn::conv2d(g, spec, func, st, op, c, name)?,
        Op::MaxPool(p) => cnn::pool(g, spec, func, st, op, p, true, name)?,
        Op::AvgPool(p) => cnn::pool(g, spec, func, st, op, p, false, name)?,
        Op::GlobalAvgPool => cnn::global_avg_pool(g, spec, func, st, op, name)?,
        Op::Concat { axis } => shape_ops::concat(g, spec, func, st, op, *axis, name)?,
        Op::Pad {
            pads,
            mode: PadMode::Constant,
            value,
        } => shape_ops::pad_constant(g, spec, func, st, op, pads, *value, name)?,
        Op::Pad { pads, mode, .. } => {
            shape_ops::pad_gather(g, spec, func, st, op, pads, *mode, name)?
        }
        Op::Resize(rz) => shape_ops::resize(g, spec, func, st, op, rz, name)?,
        Op::Slice(sl) => shape_ops::slice(g, spec, func, st, op, sl, name)?,
        Op::HardSigmoid { alpha, beta } => {
            // The static kernel's `clip(alpha · x + beta, 0, 1)`, alpha and beta as f32.
            let (a, b) = (*alpha as f32 as f64, *beta as f32 as f64);
            elementwise(g, spec, func, st, op, name, &move |k, x| {
                let y = k.fadd(k.fmul(k.f(a), x)?, k.f(b))?;
                k.clip(y, 0.0, 1.0)
            })?
        }
        Op::Prelu => pointwise::prelu(g, spec, func, st, op, name)?,
        Op::Trilu { upper, k } => pointwise::trilu(g, spec, func, st, op, *upper, *k, name)?,
        Op::BatchNorm { epsilon } => norm::batch_norm(g, spec, func, st, op, *epsilon, name)?,
        Op::Reduce { kind, axes, .. } => reduce::reduce(g, spec, func, st, op, *kind, axes, name)?,
        Op::ConvTranspose(c) => tconv::conv_transpose(g, spec, func, st, op, c, name)?,
        Op::Gemm(gm) => return gemm::gemm(g, spec, func, st, op, gm, name).map(Some),
        other => return Err(refuse(spec, func, op, &format!("`{}`", other.name()))),
    };
    Ok(Some(vec![calls]))
}

fn args_dyn(func: &Function, st: &Storage, vals: &[Value]) -> R<Vec<Arg>> {
    crate::kernels::common::args_of(func, st, vals)
}

fn finish_call<'c>(g: &Gen<'_, 'c>, f: FunctionValue<'c>, args: &[Arg]) -> R<Call<'c>> {
    llvm(g.builder.build_return(None))?;
    Ok((f, args.iter().map(|a| a.loc).collect()))
}

/// The unary functions of the static `unary` kernel, per element.
fn unary_fn<'a, 'c>(k: &K<'a, 'c>, u: UnaryOp, x: FloatValue<'c>) -> R<FloatValue<'c>> {
    use crate::kernels::common::{activation, sigmoid};
    match u {
        UnaryOp::Relu => activation(k, Some(Activation::Relu), x),
        UnaryOp::Relu6 => activation(k, Some(Activation::Relu6), x),
        UnaryOp::Sigmoid => sigmoid(k, x),
        UnaryOp::Tanh => k.tanh(x),
        UnaryOp::HardSwish => activation(k, Some(Activation::HardSwish), x),
        UnaryOp::Gelu => crate::kernels::elementwise::gelu(k, x),
        UnaryOp::Exp => k.exp(x),
        other => crate::kernels::math::unary(k, other, x),
    }
}

/// The function of an element-wise op with one operand, per element.
type ScalarFn1<'f> = &'f dyn for<'x, 'y> Fn(&K<'x, 'y>, FloatValue<'y>) -> R<FloatValue<'y>>;

/// `out[i] = f(x[i])` over the result's elements, both contiguous (the static strided
/// kernel's merged loop: the same scalar function per element).
fn elementwise<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    name: &str,
    f: ScalarFn1<'_>,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let args = args_dyn(func, st, &[x, r])?;
    let re = spec.dims(func, r)?;
    let tiles = DynTiles::new(re.clone(), crate::parallel::work(8, 8), 8);
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, Some(tiles))?;
    let n = d.prod(&d.dims_of(&re)?)?;
    let (px, po) = (d.param(0)?, d.param(1)?);
    // In place (one buffer, so one address at every shape): stores through the operand's
    // pointer, so that LLVM sees the loop read and write the same elements and vectorises it
    // (two parameters that may overlap get a run-time overlap check, which an op in place
    // fails: the scalar loop, issue 22).
    let po = if args[0].loc == args[1].loc { px } else { po };
    let k = &d.k;
    // Whole cache lines of elements per tile.
    let (lo, hi) = d.split(n, 64)?;
    d.loop_step(lo, hi, 1, &mut |i| {
        let y = f(k, k.ld(px, i)?)?;
        k.st(po, i, y)
    })?;
    finish_call(g, d.f, &args)
}

/// The kernel of an op `r = f(a, b)` with both operands read over the result's shape by NumPy
/// broadcasting, its threads' tiles rows of the result (`flops` per element, 12 bytes): the
/// arguments, the kernel, the result's run-time shape and the strides of `a`, `b` and `r`.
#[allow(clippy::type_complexity)]
fn broadcast_kernel<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    flops: u64,
    name: &str,
) -> R<(
    Vec<Arg>,
    Dk<'a, 'c>,
    Vec<IntValue<'c>>,
    [Vec<IntValue<'c>>; 3],
)> {
    let (a, b, r) = (op.operands[0], op.operands[1], op.results[0]);
    let args = args_dyn(func, st, &[a, b, r])?;
    let od = spec.dims(func, r)?;
    let tiles = DynTiles::new(od.clone(), crate::parallel::work(flops, 12), 8);
    let d = g.dyn_kernel_tiled(name, &args, &TWO_IN_ONE_OUT, &spec.symbols, Some(tiles))?;
    let shape = d.dims_of(&od)?;
    let sa =
        broadcast_strides(&d, &spec.dims(func, a)?, &od).map_err(|w| refuse(spec, func, op, &w))?;
    let sb =
        broadcast_strides(&d, &spec.dims(func, b)?, &od).map_err(|w| refuse(spec, func, op, &w))?;
    let so = d.contiguous(&shape)?;
    Ok((args, d, shape, [sa, sb, so]))
}

/// Strides of an operand of shape `a` read over `target` with NumPy broadcasting: an axis of
/// constant extent 1 is broadcast; any other must be the target's own extent (a dim that is 1
/// only at run time is not broadcast here).
fn broadcast_strides<'c>(
    d: &Dk<'_, 'c>,
    a: &[DimExpr],
    target: &[DimExpr],
) -> Result<Vec<IntValue<'c>>, String> {
    let ad = d.dims_of(a).map_err(|e| e.to_string())?;
    let own = d.contiguous(&ad).map_err(|e| e.to_string())?;
    let off = target.len() - a.len().min(target.len());
    let mut out = Vec::with_capacity(target.len());
    for (t, te) in target.iter().enumerate() {
        if t < off {
            out.push(d.k.c(0));
            continue;
        }
        let ax = t - off;
        if a[ax].as_constant() == Some(1) && te.as_constant() != Some(1) {
            out.push(d.k.c(0));
        } else if a[ax] == *te {
            out.push(own[ax]);
        } else {
            return Err(format!("a broadcast of {} to {te}", a[ax]));
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn binary<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    bop: BinaryOp,
    act: Option<Activation>,
    name: &str,
) -> R<Call<'c>> {
    let (a, b, r) = (op.operands[0], op.operands[1], op.results[0]);
    let od = spec.dims(func, r)?;
    let (args, d, shape, [sa, sb, so]) = broadcast_kernel(g, spec, func, st, op, 8, name)?;
    let (pa, pb, po) = (d.param(0)?, d.param(1)?, d.param(2)?);
    // In place: stores through the operand's pointer (see `elementwise`).
    let po = if args[0].loc == args[2].loc {
        pa
    } else if args[1].loc == args[2].loc {
        pb
    } else {
        po
    };
    let k = &d.k;
    let arith = matches!(
        bop,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
    );
    let runs = pointwise::flat_runs(&spec.dims(func, a)?, &spec.dims(func, b)?, &od);
    if let Some(runs) = runs.filter(|_| arith) {
        // Flat runs of vectors (an operand of the result's shape, or one broadcast along the
        // innermost axes: a scalar, a per-channel vector), the last of each run masked
        // (written out: in place, the vectoriser's run-time overlap check fails and it would
        // run the scalar loop). Each lane is the scalar kernel's operation and activation.
        let w = g.width;
        let op = |x: VectorValue<'c>, y: VectorValue<'c>| -> R<VectorValue<'c>> {
            let v = match bop {
                BinaryOp::Add => k.b.build_float_add(x, y, "a"),
                BinaryOp::Sub => k.b.build_float_sub(x, y, "s"),
                BinaryOp::Mul => k.b.build_float_mul(x, y, "m"),
                _ => k.b.build_float_div(x, y, "d"),
            };
            cnn::vector_activation(&d, w, act, llvm(v)?)
        };
        pointwise::binary_runs(&d, w, &shape, [&sa, &sb], runs, [pa, pb, po], &op)?;
        return finish_call(g, d.f, &args);
    }
    d.nest_split(&shape, &[sa, sb, so], &mut |idx| {
        let (x, y) = (k.ld(pa, idx[0])?, k.ld(pb, idx[1])?);
        let v = match bop {
            BinaryOp::Add => k.fadd(x, y)?,
            BinaryOp::Sub => k.fsub(x, y)?,
            BinaryOp::Mul => k.fmul(x, y)?,
            BinaryOp::Div => k.fdiv(x, y)?,
            other => crate::kernels::math::binary(k, other, x, y)?,
        };
        let v = crate::kernels::common::activation(k, act, v)?;
        k.st(po, idx[2], v)
    })?;
    finish_call(g, d.f, &args)
}

#[allow(clippy::too_many_arguments)]
fn transpose<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    perm: &[u64],
    name: &str,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let args = args_dyn(func, st, &[x, r])?;
    // Tiles (issue 20): rows of the output, a copy per element.
    let tiles = DynTiles::new(spec.dims(func, r)?, crate::parallel::work(0, 8), 8);
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, Some(tiles))?;
    let xs = d.contiguous(&d.dims_of(&spec.dims(func, x)?)?)?;
    let shape = d.dims_of(&spec.dims(func, r)?)?;
    let so = d.contiguous(&shape)?;
    let si: Vec<IntValue> = perm.iter().map(|&p| xs[p as usize]).collect();
    let (px, po) = (d.param(0)?, d.param(1)?);
    let k = &d.k;
    d.nest_split(&shape, &[si, so], &mut |idx| {
        k.st(po, idx[1], k.ld(px, idx[0])?)
    })?;
    finish_call(g, d.f, &args)
}

/// The input's dims of a row op (softmax, layer_norm) and its axis, normalised.
fn along(spec: &DynSpec, func: &Function, op: &OpData, axis: i64) -> R<(Vec<DimExpr>, usize)> {
    let xe = spec.dims(func, op.operands[0])?;
    let ax = tir_ir::shape::norm_axis(axis, xe.len()).map_err(|_| unsupported(func, op, "axis"))?;
    Ok((xe, ax))
}

/// `kernels::norm::softmax` with run-time extents: the same loops per row (with `log`,
/// log_softmax's `(x - max) - ln(sum)` in f64).
#[allow(clippy::too_many_arguments)]
fn softmax<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    axis: i64,
    log: bool,
    name: &str,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let (xe, ax) = along(spec, func, op, axis)?;
    let args = args_dyn(func, st, &[x, r])?;
    // Tiles (issue 20): the rows before the axis; an exponential and a few operations per
    // element.
    let tiles = DynTiles::new(xe.clone(), crate::parallel::work(20, 8), 8);
    let d = g.dyn_kernel_tiled(name, &args, &[false, true], &spec.symbols, Some(tiles))?;
    let xd = d.dims_of(&xe)?;
    let len = xd[ax];
    let outer = d.prod(&xd[..ax])?;
    let (o0, o1) = d.split(outer, 1)?;
    let inner = d.prod(&xd[ax + 1..])?;
    let (px, po) = (d.param(0)?, d.param(1)?);
    let k = &d.k;
    let f64t = k.ctx.f64_type();
    let zero = k.c(0);
    let row = d.imul(len, inner)?;
    if !log && ax + 1 == xe.len() {
        softmax_rows(g, &d, (px, po), (o0, o1), len, args[0].loc == args[1].loc)?;
        return finish_call(g, d.f, &args);
    }
    d.loop_step(o0, o1, 1, &mut |o| {
        d.loop_step(zero, inner, 1, &mut |i| {
            let base = k.add(d.imul(o, row)?, i)?;
            let at = |l: IntValue<'c>| k.add(base, d.imul(l, inner)?);
            let ninf: BasicValueEnum = k.f(f64::NEG_INFINITY).into();
            let mx = d.carry(zero, len, 1, vec![ninf], &mut |l, cur| {
                let v = k.ld(px, at(l)?)?;
                let m = cur[0].into_float_value();
                let gt = llvm(k.b.build_float_compare(FloatPredicate::OGT, v, m, "g"))?;
                let uno = llvm(k.b.build_float_compare(FloatPredicate::UNO, m, m, "u"))?;
                let pick = llvm(k.b.build_or(gt, uno, "p"))?;
                Ok(vec![k.fsel(pick, v, m)?.into()])
            })?;
            let mx = mx[0].into_float_value();
            let z: BasicValueEnum = f64t.const_float(0.0).into();
            let sum = d.carry(zero, len, 1, vec![z], &mut |l, cur| {
                let e = k.exp(k.fsub(k.ld(px, at(l)?)?, mx)?)?;
                if !log {
                    k.st(po, at(l)?, e)?;
                }
                let ed = llvm(k.b.build_float_ext(e, f64t, "e"))?;
                Ok(vec![k.fadd(cur[0].into_float_value(), ed)?.into()])
            })?;
            let sum = sum[0].into_float_value();
            if log {
                let ln = k.intrinsic("llvm.log", &[f64t.into()])?;
                let log_sum = llvm(k.b.build_call(ln, &[sum.into()], "ls"))?
                    .try_as_basic_value()
                    .basic()
                    .map(|v| v.into_float_value())
                    .ok_or_else(|| CodegenError::Llvm("log returned no value".into()))?;
                return d.loop_step(zero, len, 1, &mut |l| {
                    let c = k.fsub(k.ld(px, at(l)?)?, mx)?;
                    let c = llvm(k.b.build_float_ext(c, f64t, "c"))?;
                    let y = llvm(k.b.build_float_sub(c, log_sum, "y"))?;
                    let y = llvm(k.b.build_float_trunc(y, k.f32t, "y"))?;
                    k.st(po, at(l)?, y)
                });
            }
            d.loop_step(zero, len, 1, &mut |l| {
                let e = llvm(k.b.build_float_ext(k.ld(po, at(l)?)?, f64t, "e"))?;
                let q = llvm(k.b.build_float_trunc(k.fdiv(e, sum)?, k.f32t, "q"))?;
                k.st(po, at(l)?, q)
            })
        })
    })?;
    finish_call(g, d.f, &args)
}

/// Softmax over contiguous rows `o0..o1` of `len` (the axis is the last): the static loops'
/// operations in their order, the element-wise passes a vector at a time. The maximum is the
/// same scalar scan; the exponentials `exp(x - max)` are computed lane by lane over a vector
/// of the row (the last one masked), which the SLP vectoriser widens, and stored; their f64
/// sum is taken from the stored values in row order; the f64 quotients run in vectors of f64
/// lanes. Each element gets the scalar kernel's operations, so the bits are the same. The
/// static kernel's row of constant length is unrolled and vectorised by LLVM; the scalar loop
/// over a run-time length was not (4× the static time at length 8, issue 18), nor was its
/// loop of exponentials and their f64 sum in one over a long row (PP-OCR's 6625 classes:
/// 3× this one), so the static kernel runs this one too (`kernels::norm::softmax`).
pub(crate) fn softmax_rows<'a, 'c>(
    g: &Gen<'a, 'c>,
    d: &Dk<'a, 'c>,
    (px, po): (PointerValue<'c>, PointerValue<'c>),
    (o0, o1): (IntValue<'c>, IntValue<'c>),
    len: IntValue<'c>,
    in_place: bool,
) -> R<()> {
    let k = &d.k;
    let w = g.width;
    let wl = w as i64;
    // In place: every access through one pointer (see `elementwise`).
    let po = if in_place { px } else { po };
    let f64t = k.ctx.f64_type();
    let f64v = f64t.vec_type(w);
    let zero = k.c(0);
    let whole = k.mul(llvm(k.b.build_int_signed_div(len, k.c(wl), "v"))?, wl)?;
    let rest = llvm(k.b.build_int_sub(len, whole, "rest"))?;
    let any = llvm(k.b.build_int_compare(IntPredicate::SGT, rest, zero, "any"))?;
    let mask = d.lanes_below(rest, w)?;
    let lane_at = |l: u32| k.ctx.i32_type().const_int(l.into(), false);
    d.loop_step(o0, o1, 1, &mut |o| {
        let base = d.imul(o, len)?;
        let ninf: BasicValueEnum = k.f(f64::NEG_INFINITY).into();
        let mx = d.carry(zero, len, 1, vec![ninf], &mut |l, cur| {
            let v = k.ld(px, k.add(base, l)?)?;
            let m = cur[0].into_float_value();
            let gt = llvm(k.b.build_float_compare(FloatPredicate::OGT, v, m, "g"))?;
            let uno = llvm(k.b.build_float_compare(FloatPredicate::UNO, m, m, "u"))?;
            let pick = llvm(k.b.build_or(gt, uno, "p"))?;
            Ok(vec![k.fsel(pick, v, m)?.into()])
        })?;
        let mx = mx[0].into_float_value();
        let exps = |xv: VectorValue<'c>| -> R<VectorValue<'c>> {
            let mut out = k.vty(w).get_undef();
            for l in 0..w {
                let e = k.exp(k.fsub(k.lane(xv, l)?, mx)?)?;
                out = llvm(k.b.build_insert_element(out, e, lane_at(l), "e"))?;
            }
            Ok(out)
        };
        d.loop_step(zero, whole, wl, &mut |l0| {
            let at = k.add(base, l0)?;
            k.stv(po, at, exps(k.ldv(px, at, w)?)?)
        })?;
        let tail = k.add(base, whole)?;
        k.when(any, &mut || {
            let v = exps(d.ldv_mask(px, tail, w, mask)?)?;
            d.stv_mask(po, tail, v, mask)
        })?;
        let z: BasicValueEnum = f64t.const_float(0.0).into();
        let sum = d.carry(zero, len, 1, vec![z], &mut |l, cur| {
            let e = llvm(k.b.build_float_ext(k.ld(po, k.add(base, l)?)?, f64t, "e"))?;
            Ok(vec![k.fadd(cur[0].into_float_value(), e)?.into()])
        })?;
        let sum = sum[0].into_float_value();
        let mut sums = f64v.get_undef();
        for l in 0..w {
            sums = llvm(k.b.build_insert_element(sums, sum, lane_at(l), "s"))?;
        }
        let quot = |v: VectorValue<'c>| -> R<VectorValue<'c>> {
            let e = llvm(k.b.build_float_ext(v, f64v, "e"))?;
            let q = llvm(k.b.build_float_div(e, sums, "q"))?;
            llvm(k.b.build_float_trunc(q, k.vty(w), "q"))
        };
        d.loop_step(zero, whole, wl, &mut |l0| {
            let at = k.add(base, l0)?;
            k.stv(po, at, quot(k.ldv(po, at, w)?)?)
        })?;
        k.when(any, &mut || {
            let v = quot(d.ldv_mask(po, tail, w, mask)?)?;
            d.stv_mask(po, tail, v, mask)
        })
    })
}

/// `kernels::norm::layer_norm` with run-time extents: the same f64 statistics per row.
#[allow(clippy::too_many_arguments)]
fn layer_norm<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    axis: i64,
    epsilon: f64,
    name: &str,
) -> R<Call<'c>> {
    let (x, r) = (op.operands[0], op.results[0]);
    let (xe, ax) = along(spec, func, op, axis)?;
    let mut vals = vec![x];
    vals.extend(op.operands[1..].iter().copied());
    vals.push(r);
    let args = args_dyn(func, st, &vals)?;
    let mut writes = vec![false; args.len()];
    writes[args.len() - 1] = true;
    // Tiles (issue 20): the rows before the axis; three passes over each.
    let tiles = DynTiles::new(xe.clone(), crate::parallel::work(8, 12), 8);
    let d = g.dyn_kernel_tiled(name, &args, &writes, &spec.symbols, Some(tiles))?;
    let xd = d.dims_of(&xe)?;
    let norm_e = &xe[ax..];
    let norm = &xd[ax..];
    let inner = d.prod(norm)?;
    let outer = d.prod(&xd[..ax])?;
    let mut sets = vec![d.contiguous(norm)?];
    for &p in &op.operands[1..] {
        sets.push(
            broadcast_strides(&d, &spec.dims(func, p)?, norm_e)
                .map_err(|w| refuse(spec, func, op, &w))?,
        );
    }
    let px = d.param(0)?;
    let pp: Vec<PointerValue> = (1..args.len() as u32 - 1)
        .map(|i| d.param(i))
        .collect::<R<_>>()?;
    let po = d.param(args.len() as u32 - 1)?;
    let k = &d.k;
    let f64t = k.ctx.f64_type();
    let ext = |v: FloatValue<'c>| llvm(k.b.build_float_ext(v, f64t, "e"));
    // The static kernel divides by the constant `inner as f64`; an integer converts exactly.
    let inner_f = llvm(k.b.build_signed_int_to_float(inner, f64t, "n"))?;
    let zero = k.c(0);
    let (o0, o1) = d.split(outer, 1)?;
    d.loop_step(o0, o1, 1, &mut |o| {
        let base = d.imul(o, inner)?;
        let z: BasicValueEnum = f64t.const_float(0.0).into();
        let s = d.carry(zero, inner, 1, vec![z], &mut |i, cur| {
            let v = ext(k.ld(px, k.add(base, i)?)?)?;
            Ok(vec![k.fadd(cur[0].into_float_value(), v)?.into()])
        })?;
        let mean = k.fdiv(s[0].into_float_value(), inner_f)?;
        let s2 = d.carry(zero, inner, 1, vec![z], &mut |i, cur| {
            let v = k.fsub(ext(k.ld(px, k.add(base, i)?)?)?, mean)?;
            Ok(vec![k
                .fadd(cur[0].into_float_value(), k.fmul(v, v)?)?
                .into()])
        })?;
        let var = k.fdiv(s2[0].into_float_value(), inner_f)?;
        let inv = k.fdiv(
            f64t.const_float(1.0),
            k.sqrt(k.fadd(var, f64t.const_float(epsilon))?)?,
        )?;
        d.nest(norm, &sets, &mut |idx| {
            let at = k.add(base, idx[0])?;
            let v = k.fsub(ext(k.ld(px, at)?)?, mean)?;
            let mut y = k.fmul(k.fmul(v, inv)?, ext(k.ld(pp[0], idx[1])?)?)?;
            if pp.len() > 1 {
                y = k.fadd(y, ext(k.ld(pp[1], idx[2])?)?)?;
            }
            k.st(po, at, llvm(k.b.build_float_trunc(y, k.f32t, "t"))?)
        })
    })?;
    finish_call(g, d.f, &args)
}

/// NumPy matmul with run-time extents: per broadcast batch index, [`dgemm`].
#[allow(clippy::too_many_arguments)]
fn matmul<'a, 'c>(
    g: &Gen<'a, 'c>,
    spec: &'a DynSpec,
    func: &Function,
    st: &Storage,
    op: &OpData,
    act: Option<Activation>,
    name: &str,
) -> R<Call<'c>> {
    let (a, b, r) = (op.operands[0], op.operands[1], op.results[0]);
    let ae = spec.dims(func, a)?;
    let be = spec.dims(func, b)?;
    let one = DimExpr::constant(1);
    let ash = if ae.len() == 1 {
        vec![one.clone(), ae[0].clone()]
    } else {
        ae.clone()
    };
    let bsh = if be.len() == 1 {
        vec![be[0].clone(), one.clone()]
    } else {
        be.clone()
    };
    let (ab, bb) = (&ash[..ash.len() - 2], &bsh[..bsh.len() - 2]);
    let rank = ab.len().max(bb.len());
    let pick = |s: &[DimExpr], i: usize| {
        if i < rank - s.len() {
            one.clone()
        } else {
            s[i - (rank - s.len())].clone()
        }
    };
    let mut batch_e = Vec::with_capacity(rank);
    for i in 0..rank {
        let (x, y) = (pick(ab, i), pick(bb, i));
        batch_e.push(if x.as_constant() == Some(1) {
            y
        } else if y.as_constant() == Some(1) || x == y {
            x
        } else {
            return Err(refuse(spec, func, op, "a batch broadcast"));
        });
    }
    let k_static = ash[ash.len() - 1].as_constant().map(|x| x as i64);
    let n_static = bsh[bsh.len() - 1].as_constant().map(|x| x as i64);
    // The static kernel takes the matrix-vector product when N is 1 and K at least a
    // vector: its order needs K known here.
    if k_static.is_none() && n_static.map_or(true, |n| n == 1) {
        return Err(refuse(
            spec,
            func,
            op,
            "a matmul whose K and N are both run-time",
        ));
    }
    let args = args_dyn(func, st, &[a, b, r])?;
    // Tiles: rows of each product, whole register tiles of them; two FLOPs per output and K.
    let mut elems = spec.dims(func, r)?;
    elems.push(ash[ash.len() - 1].clone());
    let tiles = DynTiles::new(elems, 2, 8);
    let d = g.dyn_kernel_tiled(name, &args, &TWO_IN_ONE_OUT, &spec.symbols, Some(tiles))?;
    let m = d.dim(&ash[ash.len() - 2])?;
    let kk = d.dim(&ash[ash.len() - 1])?;
    let nn = d.dim(&bsh[bsh.len() - 1])?;
    let batch = d.dims_of(&batch_e)?;
    let mk = d.imul(m, kk)?;
    let kn = d.imul(kk, nn)?;
    let mn = d.imul(m, nn)?;
    let scale = |s: Vec<IntValue<'c>>, by: IntValue<'c>| -> R<Vec<IntValue<'c>>> {
        s.into_iter().map(|x| d.imul(x, by)).collect()
    };
    let sa = scale(
        broadcast_strides(&d, ab, &batch_e).map_err(|w| refuse(spec, func, op, &w))?,
        mk,
    )?;
    let sb = scale(
        broadcast_strides(&d, bb, &batch_e).map_err(|w| refuse(spec, func, op, &w))?,
        kn,
    )?;
    let so = scale(d.contiguous(&batch)?, mn)?;
    let (pa, pb, po) = (d.param(0)?, d.param(1)?, d.param(2)?);
    let k = &d.k;
    let epi = Epilogue {
        alpha: 1.0,
        row_bias: None,
        row_slope: None,
        act,
    };
    let share = row_share(&d, g.width, m)?;
    d.nest(&batch, &[sa, sb, so], &mut |idx| {
        let a = k.gep(pa, idx[0])?;
        let c = k.gep(po, idx[2])?;
        let b = k.gep(pb, idx[1])?;
        dgemm_share(
            &d,
            g.width,
            (a, b, c),
            share,
            (kk, nn),
            (k_static, n_static),
            epi,
        )
    })?;
    finish_call(g, d.f, &args)
}

/// `C[m×n] = epi(A[m×k] · B[k×n])`, all contiguous rows, extents at run time. When N is 1 at
/// run time and K (known here) is at least a vector, the static GEMM is a matrix-vector
/// product with its own partial sums: that branch runs its very rows ([`gemv_rows`]). Else
/// each output is one FMA chain in K order from zero, the epilogue lane by lane, as the
/// static tiles compute it.
/// A thread's share of `m` rows for [`dgemm_share`]: whole tiles of the wide GEMM's rows
/// (`(first row, row count)`).
fn row_share<'c>(d: &Dk<'_, 'c>, w: u32, m: IntValue<'c>) -> R<(IntValue<'c>, IntValue<'c>)> {
    let (lo, hi) = d.split(m, wide(w).0)?;
    Ok((lo, llvm(d.k.b.build_int_sub(hi, lo, "rows"))?))
}

/// [`dgemm`] of the rows `share` ([`row_share`]) of `C = A · B` (A's rows `kk`, C's `nn`
/// floats long): each row summed as the whole product sums it.
#[allow(clippy::too_many_arguments)]
fn dgemm_share<'a, 'c>(
    d: &Dk<'a, 'c>,
    w: u32,
    (a, b, c): (PointerValue<'c>, PointerValue<'c>, PointerValue<'c>),
    (lo, rows): (IntValue<'c>, IntValue<'c>),
    (kk, nn): (IntValue<'c>, IntValue<'c>),
    (k_static, n_static): (Option<i64>, Option<i64>),
    epi: Epilogue<'c>,
) -> R<()> {
    let a = d.k.gep(a, d.imul(lo, kk)?)?;
    let c = d.k.gep(c, d.imul(lo, nn)?)?;
    dgemm(d, w, (a, b, c), (rows, kk, nn), k_static, n_static, epi)
}

fn dgemm<'a, 'c>(
    d: &Dk<'a, 'c>,
    w: u32,
    (a, b, c): (PointerValue<'c>, PointerValue<'c>, PointerValue<'c>),
    (m, kk, nn): (IntValue<'c>, IntValue<'c>, IntValue<'c>),
    k_static: Option<i64>,
    n_static: Option<i64>,
    epi: Epilogue<'c>,
) -> R<()> {
    let k = &d.k;
    let gemv_possible =
        n_static.map_or(true, |n| n == 1) && k_static.is_some_and(|x| x >= w as i64);
    let short = k_static.is_some_and(|x| x <= SHORT_K);
    if !gemv_possible {
        return tiles(d, w, (a, b, c), (m, kk, nn), epi, None, short);
    }
    let kx = k_static.unwrap_or(0);
    let is_vec = llvm(k.b.build_int_compare(IntPredicate::EQ, nn, k.c(1), "n1"))?;
    let (gv, tl, join) = (
        k.ctx.append_basic_block(d.f, "gemv"),
        k.ctx.append_basic_block(d.f, "tiles"),
        k.ctx.append_basic_block(d.f, "gemm_done"),
    );
    llvm(k.b.build_conditional_branch(is_vec, gv, tl))?;
    k.b.position_at_end(gv);
    let gm = Gemm {
        a,
        a_rs: kx,
        a_cs: 1,
        b,
        b_rs: 1,
        c,
        c_rs: 1,
        m: 0,
        n: 1,
        k: kx,
    };
    gemv_rows(k, w, &gm, epi, m)?;
    llvm(k.b.build_unconditional_branch(join))?;
    k.b.position_at_end(tl);
    tiles(d, w, (a, b, c), (m, kk, nn), epi, None, short)?;
    llvm(k.b.build_unconditional_branch(join))?;
    k.b.position_at_end(join);
    Ok(())
}

/// Row tiles of `MR` rows (the static wide tile's) × `NV` vectors, then the columns after
/// the last full block as one tile of up to `NV` vectors, the last one masked, with as many
/// rows as its vectors leave accumulators (the static narrow and remainder tiles: a 7×7
/// image's 49 columns are 4 vectors × 6 rows, not 4 single-vector tiles); the rows after the
/// last whole tile as [`tail_rows`]. `pan`: A is stored in row panels ([`Panels`]).
/// `short`: K is at most [`SHORT_K`], and the row tiles go outside the column blocks, as in
/// the static kernel: each tile's work is small, and rows outside write C in `MR` streams
/// instead of one per row of the product (MobileNet v2's 16→96 expansion at 112×112 took
/// 1.8× the static time column blocks outside).
fn tiles<'a, 'c>(
    d: &Dk<'a, 'c>,
    w: u32,
    ptrs: (PointerValue<'c>, PointerValue<'c>, PointerValue<'c>),
    (m, kk, nn): (IntValue<'c>, IntValue<'c>, IntValue<'c>),
    epi: Epilogue<'c>,
    pan: Option<Panels<'c>>,
    short: bool,
) -> R<()> {
    let k = &d.k;
    let (mr, nv) = wide(w);
    let wl = w as i64;
    let nr = nv as i64 * wl;
    let down = |x: IntValue<'c>, q: i64| -> R<IntValue<'c>> {
        let t = llvm(k.b.build_int_signed_div(x, k.c(q), "t"))?;
        k.mul(t, q)
    };
    let nfull = down(nn, nr)?;
    let mfull = down(m, mr)?;
    // Column blocks outside, so a block's `K × NV·W` panel of B is reused from cache by
    // every row tile (the static kernel's order; it also cuts K so the panel fits L1).
    if short {
        d.loop_step(k.c(0), mfull, mr, &mut |i0| {
            d.loop_step(k.c(0), nfull, nr, &mut |j0| {
                tile(d, w, ptrs, (kk, nn), epi, i0, j0, mr, nv, None, pan)
            })
        })?;
        d.loop_step(k.c(0), nfull, nr, &mut |j0| {
            tail_rows(d, w, ptrs, (m, kk, nn), epi, mfull, mr, j0, nv, None, pan)
        })?;
    } else {
        d.loop_step(k.c(0), nfull, nr, &mut |j0| {
            d.loop_step(k.c(0), mfull, mr, &mut |i0| {
                tile(d, w, ptrs, (kk, nn), epi, i0, j0, mr, nv, None, pan)
            })?;
            tail_rows(d, w, ptrs, (m, kk, nn), epi, mfull, mr, j0, nv, None, pan)
        })?;
    }
    // The remaining `rest` columns: `vecs` vectors, known at run time, one case each.
    let rest = llvm(k.b.build_int_sub(nn, nfull, "rest"))?;
    let vecs = llvm(k.b.build_int_signed_div(k.add(rest, k.c(wl - 1))?, k.c(wl), "vecs"))?;
    // With panels, as many vectors per tile as keep the tile a whole panel high (2 of 16
    // lanes, 1 of 8), the rest's vectors in groups of that many: a tile shorter than its
    // panel reads part of each line of it, and the panel's other tiles read them again (a
    // 6-row tile of 4 vectors on MobileNet v2's 49-pixel layers took 1.35× the static time).
    let group = match pan {
        Some(p) => (1..=nv)
            .rev()
            .find(|&g| rows_for(w, g as i64) >= p.rows)
            .unwrap_or(1),
        None => nv,
    };
    for c in 1..=nv {
        let this = llvm(k.b.build_int_compare(IntPredicate::EQ, vecs, k.c(c as i64), "nv"))?;
        k.when(this, &mut || {
            let last = llvm(k.b.build_int_sub(rest, k.c((c as i64 - 1) * wl), "last"))?;
            let mask = d.lanes_below(last, w)?;
            let mut v0 = 0;
            while v0 < c {
                let cv = group.min(c - v0);
                let mask = (v0 + cv == c).then_some(mask);
                let j0 = k.add(nfull, k.c(v0 as i64 * wl))?;
                let rows = rows_for(w, cv as i64);
                let mtiles = down(m, rows)?;
                d.loop_step(k.c(0), mtiles, rows, &mut |i0| {
                    tile(d, w, ptrs, (kk, nn), epi, i0, j0, rows, cv, mask, pan)
                })?;
                tail_rows(
                    d,
                    w,
                    ptrs,
                    (m, kk, nn),
                    epi,
                    mtiles,
                    rows,
                    j0,
                    cv,
                    mask,
                    pan,
                )?;
                v0 += cv;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// The rows `from..m` after the last whole `mr`-row tile (fewer than `mr`, a count known
/// only at run time) as at most one tile of each power of two below `mr` rows: its binary
/// digits, so 4 rows are one 4-row tile and 5 are 4 + 1. The static kernel's tail is one
/// tile of all of them; one row at a time (a single-row tile: `nv` independent FMA chains,
/// too few to hide the FMA latency, and the B vectors loaded again for every row) made a
/// 64-row product's 4 tail rows, and a length-8 attention's every row, cost several times
/// their share (issue 18). Each output is still one FMA chain in K order from zero, whatever
/// tile holds it, so the bytes do not change.
#[allow(clippy::too_many_arguments)]
fn tail_rows<'a, 'c>(
    d: &Dk<'a, 'c>,
    w: u32,
    ptrs: (PointerValue<'c>, PointerValue<'c>, PointerValue<'c>),
    (m, kk, nn): (IntValue<'c>, IntValue<'c>, IntValue<'c>),
    epi: Epilogue<'c>,
    from: IntValue<'c>,
    mr: i64,
    j0: IntValue<'c>,
    nv: u32,
    mask: Option<VectorValue<'c>>,
    pan: Option<Panels<'c>>,
) -> R<()> {
    let k = &d.k;
    let t = llvm(k.b.build_int_sub(m, from, "tail"))?;
    let mut at = from;
    let mut p = 1i64;
    while p * 2 < mr {
        p *= 2;
    }
    while p >= 1 {
        let bit = llvm(k.b.build_and(t, k.c(p), "bit"))?;
        let on = llvm(k.b.build_int_compare(IntPredicate::NE, bit, k.c(0), "on"))?;
        let i0 = at;
        k.when(on, &mut || {
            tile(d, w, ptrs, (kk, nn), epi, i0, j0, p, nv, mask, pan)
        })?;
        at = k.add(at, bit)?;
        p /= 2;
    }
    Ok(())
}

/// A GEMM's A stored as row panels `[M/P][K][P]`, the last one `M mod P` rows wide (the
/// layout of the static narrow tiles' packed weights, `Storage::pack_panels`, written by the
/// same code): a tile's broadcasts then come from one stream instead of one per row. `P`
/// is a multiple of every tile height of [`tiles`] and the shares start at multiples of it
/// ([`Dk::split`] in whole panels), so no tile crosses a panel.
#[derive(Clone, Copy)]
pub(super) struct Panels<'c> {
    /// `P`.
    pub rows: i64,
    /// A's row of the GEMM's row 0 (the share's first output channel).
    pub first: IntValue<'c>,
    /// `M`, every row of A.
    pub m: i64,
}

impl<'c> Panels<'c> {
    /// Where row `row` (of the GEMM) starts, and A's K stride there: its panel `p0` holds
    /// `pw = min(P, M − p0)` rows, so `A[row, x]` is at `p0·K + (row − p0) + x·pw`.
    pub(super) fn row<'a>(
        &self,
        k: &K<'a, 'c>,
        kk: IntValue<'c>,
        row: IntValue<'c>,
    ) -> R<(IntValue<'c>, IntValue<'c>)> {
        let gr = k.add(self.first, row)?;
        let off = llvm(k.b.build_int_signed_rem(gr, k.c(self.rows), "poff"))?;
        let p0 = llvm(k.b.build_int_sub(gr, off, "p0"))?;
        let left = llvm(k.b.build_int_sub(k.c(self.m), p0, "pleft"))?;
        let full = llvm(k.b.build_int_compare(IntPredicate::SLT, left, k.c(self.rows), "plast"))?;
        let pw = llvm(k.b.build_select(full, left, k.c(self.rows), "pw"))?.into_int_value();
        let at = k.add(llvm(k.b.build_int_mul(p0, kk, "pk"))?, off)?;
        Ok((at, pw))
    }
}

/// One `rows × nv·W` tile over the whole K; with `mask`, the last vector's lanes masked;
/// with `pan`, A read from its panel.
#[allow(clippy::too_many_arguments)]
fn tile<'a, 'c>(
    d: &Dk<'a, 'c>,
    w: u32,
    (a, b, c): (PointerValue<'c>, PointerValue<'c>, PointerValue<'c>),
    (kk, nn): (IntValue<'c>, IntValue<'c>),
    epi: Epilogue<'c>,
    i0: IntValue<'c>,
    j0: IntValue<'c>,
    rows: i64,
    nv: u32,
    mask: Option<VectorValue<'c>>,
    pan: Option<Panels<'c>>,
) -> R<()> {
    let k = &d.k;
    let wl = w as i64;
    let rs: Vec<IntValue> = (0..rows).map(|r| k.add(i0, k.c(r))).collect::<R<_>>()?;
    // `A[r, x]` at `a_rows[r] + x·a_cs`: rows K apart, or one panel's `[K][pw]`.
    let (a_rows, a_cs): (Vec<IntValue>, Option<IntValue>) = match pan {
        None => (rs.iter().map(|&r| d.imul(r, kk)).collect::<R<_>>()?, None),
        Some(p) => {
            let (at, pw) = p.row(k, kk, i0)?;
            let rows = (0..rows).map(|r| k.add(at, k.c(r))).collect::<R<_>>()?;
            (rows, Some(pw))
        }
    };
    let zero: BasicValueEnum = k.vty(w).const_zero().into();
    let init = vec![zero; rows as usize * nv as usize];
    let acc = d.carry(k.c(0), kk, 1, init, &mut |x, cur| {
        let bi = k.add(d.imul(x, nn)?, j0)?;
        let bv: Vec<VectorValue> = (0..nv)
            .map(|v| {
                let at = k.add(bi, k.c(v as i64 * wl))?;
                match mask.filter(|_| v + 1 == nv) {
                    Some(mk) => d.ldv_mask(b, at, w, mk),
                    None => k.ldv(b, at, w),
                }
            })
            .collect::<R<_>>()?;
        let mut next = Vec::with_capacity(cur.len());
        let ax = match a_cs {
            Some(s) => d.imul(x, s)?,
            None => x,
        };
        for &ar in &a_rows {
            let av = k.splat(k.ld(a, k.add(ar, ax)?)?, w)?;
            for &bb in &bv {
                let cv = cur[next.len()].into_vector_value();
                next.push(k.fma(av, bb, cv)?.into());
            }
        }
        Ok(next)
    })?;
    for (r, &row) in rs.iter().enumerate() {
        for v in 0..nv {
            let vec = acc[r * nv as usize + v as usize].into_vector_value();
            let mut out = k.vty(w).get_undef();
            for l in 0..w {
                // The static tiles' epilogue, lane by lane: alpha, the row's bias, activation.
                let x = finish(k, epi, k.lane(vec, l)?, row)?;
                out = llvm(k.b.build_insert_element(
                    out,
                    x,
                    k.ctx.i32_type().const_int(l.into(), false),
                    "o",
                ))?;
            }
            let at = k.add(k.add(d.imul(row, nn)?, j0)?, k.c(v as i64 * wl))?;
            match mask.filter(|_| v + 1 == nv) {
                Some(mk) => d.stv_mask(c, at, out, mk)?,
                None => k.stv(c, at, out)?,
            }
        }
    }
    Ok(())
}

/// One buffer of the slab, as the executable plans it: its live interval (layout indices,
/// inclusive) and its bytes as an expression of the dims.
#[derive(Clone, Debug)]
pub struct DynRecord {
    /// Ordinal of its `alloc_tensor` (the index into `offsets`).
    pub alloc: usize,
    pub first: usize,
    pub last: usize,
    pub bytes: DimExpr,
    /// The value it holds, for the plan dump.
    pub name: String,
}

/// The usage records of the probe's buffers with symbolic sizes. Refused (with why) when a
/// buffer's size cannot be read off a value's symbolic type, or a value sits inside another
/// buffer at an offset (a concat's slice): its place would depend on the shape.
pub fn records(func: &Function, spec: &DynSpec) -> Result<(Vec<DynRecord>, usize), String> {
    let st = Storage::analyze(func).map_err(|e| e.to_string())?;
    let regs = regions(func, &st);
    // The values written into each alloc_tensor (through `outs`), and each nested buffer's
    // host (a view's buffer at offset 0 of its source's).
    let mut held: HashMap<Value, Vec<Value>> = HashMap::new();
    let mut host: HashMap<Value, Value> = HashMap::new();
    let mut allocs: Vec<Value> = Vec::new();
    for (_, op) in func.ops_in_order() {
        if let Op::AllocTensor { offset } = op.op {
            // A buffer at the start of another (a view's) moves with it; one further in
            // (a concat's slice) would sit at an offset that depends on the shape.
            let inside = offset != 0
                && op.operands.first().is_some_and(|&h| {
                    !matches!(
                        func.producer(h).map(|id| &func.ops[id].op),
                        Some(Op::AllocSlab { .. })
                    )
                });
            if inside {
                return Err(format!(
                    "{} is placed inside another buffer, at an offset that depends on the shape",
                    func.value_name(op.results[0])
                ));
            }
            if let Some(&h) = op.operands.first() {
                if let Some(&root) = host.get(&h).or(allocs.contains(&h).then_some(&h)) {
                    host.insert(op.results[0], root);
                }
            }
            allocs.push(op.results[0]);
        }
        for (i, &o) in op.outs.iter().enumerate() {
            if let Some(&r) = op.results.get(i) {
                let root = host.get(&o).copied().unwrap_or(o);
                held.entry(root).or_default().push(r);
            }
        }
    }
    // (element size, element count): the checks compare counts.
    let size_of = |v: Value| -> Result<(i128, DimExpr), String> {
        let dims = spec.dims(func, v).map_err(|e| e.to_string())?;
        let elem = func.ty(v).map(|t| t.dtype.byte_size()).unwrap_or(4) as i128;
        let mut count = DimExpr::constant(1);
        for e in &dims {
            count = count
                .checked_mul(e)
                .ok_or_else(|| format!("the size of {} overflows", func.value_name(v)))?;
        }
        Ok((elem, count))
    };
    let equal = spec.equalities();
    let mut out = Vec::new();
    for r in &regs {
        let alloc = allocs[r.alloc];
        let vals = held.get(&alloc).cloned().unwrap_or_else(|| vec![alloc]);
        let v = vals[0];
        let (elem, count) = size_of(v)?;
        // Values that share a buffer (written in place, views) must have its size at every
        // shape the run-time checks accept, not only at the probe's.
        for &o in &vals[1..] {
            let (e, c) = size_of(o)?;
            if e != elem || !equal.same(&c, &count) {
                return Err(format!(
                    "{} and {} share a buffer at the compiled shape but differ in size at others; give the dims values with --dim NAME=N",
                    func.value_name(v),
                    func.value_name(o)
                ));
            }
        }
        let bytes = count
            .checked_mul(&DimExpr::constant(elem))
            .ok_or_else(|| format!("the size of {} overflows", func.value_name(v)))?;
        out.push(DynRecord {
            alloc: r.alloc,
            first: r.first,
            last: r.last,
            bytes,
            name: func.value_name(v),
        });
    }
    Ok((out, allocs.len()))
}

impl<'a, 'ctx> Gen<'a, 'ctx> {
    /// The copies of returned values that are not computed in their output (a view of a slab
    /// buffer, an input, a value returned twice), `n` elements each at run time.
    fn dyn_returns(&self, func: &Function, st: &Storage, spec: &'a DynSpec) -> R<Vec<Call<'ctx>>> {
        let mut calls = Vec::new();
        for (j, &v) in func.returns.iter().enumerate() {
            let to = crate::storage::Loc {
                base: Base::Output(j),
                offset: 0,
            };
            let from = st.of(func, v)?;
            if from == to {
                continue;
            }
            if func.ty(v).map_or(true, |t| t.dtype != tir_ir::DType::F32) {
                return Err(CodegenError::Unsupported {
                    op: "return",
                    value: func.value_name(v),
                    why: "an output copy of a tensor that is not f32, with run-time dims, is not supported yet; give its dims values with --dim NAME=N".into(),
                });
            }
            let bytes = func.ty(v).and_then(|t| t.byte_size()).unwrap_or(0);
            let args = [Arg { loc: from, bytes }, Arg { loc: to, bytes }];
            let d = self.dyn_kernel(&format!("ret{j}"), &args, &[false, true], &spec.symbols)?;
            let n = d.prod(&d.dims_of(&spec.dims(func, v)?)?)?;
            let (px, po) = (d.param(0)?, d.param(1)?);
            let k = &d.k;
            d.loop_step(k.c(0), n, 1, &mut |i| k.st(po, i, k.ld(px, i)?))?;
            calls.push(finish_call(self, d.f, &args)?);
        }
        Ok(calls)
    }

    /// The kernels of a dynamic compile and `<name>_run_dyn` (see the module's docs).
    pub(crate) fn build_dynamic(
        &self,
        b: &Bufferized,
        weights: &tir_interp::Weights,
        name: &str,
        spec: &'a DynSpec,
        guard: Option<&crate::guard::Guard>,
    ) -> R<()> {
        let func = b.func();
        let mut storage = Storage::analyze(func)?;
        // Pointwise convolutions with run-time images read their weights in row panels.
        storage.pack_panels_by(func, |op| cnn::panel_rows(spec, func, op, self.width));
        // And those that may run on the channel-vector tiles also in their panels.
        storage.copy_panels_by(func, |op| cnn::chanvec_rows(spec, func, op, self.width));
        let globals = self.weight_globals(func, weights, &storage)?;
        let mut per_op: Vec<Vec<Call<'ctx>>> = Vec::new();
        let mut dynamic: Vec<bool> = Vec::new();
        for (idx, (id, op)) in func.ops_in_order().enumerate() {
            let kname = format!("k{idx}_{}", op.op.name());
            match emit_op(self, spec, func, &storage, op, &kname)? {
                Some(calls) => {
                    per_op.push(calls);
                    dynamic.push(true);
                }
                None => {
                    per_op.push(crate::dispatch::emit_op(self, func, &storage, id, &kname)?);
                    dynamic.push(false);
                }
            }
        }
        // The outputs not written in place: copied, with run-time extents when they have them.
        let sym_out = func.returns.iter().any(|&v| {
            spec.dims(func, v)
                .map(|d| d.iter().any(|e| !e.is_constant()))
                .unwrap_or(true)
        });
        if sym_out {
            per_op.push(self.dyn_returns(func, &storage, spec)?);
            dynamic.push(true);
        } else {
            per_op.push(crate::kernels::copy::returns(self, func, &storage)?);
            dynamic.push(false);
        }

        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let i8pp = i8p.ptr_type(AddressSpace::default());
        let i64p = self.ctx.i64_type().ptr_type(AddressSpace::default());
        let plan_params: [BasicMetadataTypeEnum; 5] = [
            i8pp.into(),
            i8pp.into(),
            i8p.into(),
            i64p.into(),
            i64p.into(),
        ];
        // Guard mode: the canaries at the run-time ends of the buffers (`guard`'s docs).
        let guarded = guard.map(|gd| (gd, self.dyn_guard_setup(func, &storage)));
        let ops = DynOps {
            func,
            storage: &storage,
            per_op: &per_op,
            dynamic: &dynamic,
            globals: &globals,
            guarded: guarded.as_ref().map(|(gd, gs)| (*gd, gs)),
            syms: &spec.symbols,
        };
        // An entry point `<name>_<suffix>(inputs, outputs, slab, offsets, dims, extra...)`.
        let entry = |suffix: &str, extra: &[BasicMetadataTypeEnum<'ctx>]| {
            let mut params = plan_params.to_vec();
            params.extend_from_slice(extra);
            let ty = self.ctx.void_type().fn_type(&params, false);
            self.module
                .add_function(&format!("{name}_{suffix}"), ty, None)
        };
        // `<name>_run_dyn(inputs, outputs, slab, offsets, dims)`: every tile on this thread.
        self.dyn_calls(entry("run_dyn", &[]), &ops, None, None)?;
        // `<name>_run_dyn_parallel(..., parallel_for, pool)`: the tiled kernels handed to the
        // caller's `parallel_for` (`crate::parallel`).
        let pfor_ptr = self.parallel_for_type().ptr_type(AddressSpace::default());
        let pool = [pfor_ptr.into(), i8p.into()];
        self.dyn_calls(entry("run_dyn_parallel", &pool), &ops, Some(5), None)?;
        // The profiled twin (`crate::profile`): `<name>_run_dyn_profiled(..., dims, tick,
        // parallel_for, pool)` makes the parallel entry's calls with `tick(i)` before the
        // kernels of the i-th op that has kernels and `tick(count)` after the last;
        // `<name>_profile_ops` lists those ops' layout indices (the outputs' copy last, at the
        // op count), then -1, for the executable to label them at the shape that runs
        // (`main_c`'s `tir_prof_line`).
        let f = entry(
            "run_dyn_profiled",
            &[self.tick_ptr_type().into(), pool[0], pool[1]],
        );
        // Unguarded, as the static profiled entry: the profile times the kernels alone.
        let unguarded = DynOps {
            guarded: None,
            ..ops
        };
        self.dyn_calls(f, &unguarded, Some(6), Some(5))?;
        let i32t = self.ctx.i32_type();
        let listed: Vec<_> = profiled_ops(&per_op)
            .map(|i| i32t.const_int(i as u64, false))
            .chain([i32t.const_int(u64::MAX, true)])
            .collect();
        let init = i32t.const_array(&listed);
        let g = self
            .module
            .add_global(init.get_type(), None, &format!("{name}_profile_ops"));
        g.set_initializer(&init);
        g.set_constant(true);
        Ok(())
    }

    /// The body of an entry point `f(inputs, outputs, slab, offsets, dims[, tick][,
    /// parallel_for, pool])`: every op's kernels at the run-time plan's offsets, tiled ones
    /// with their run-time tile count, through `parallel_for` when `pfor` gives its parameter;
    /// with `tick` (its parameter), `tick(i)` before the i-th op that has kernels and
    /// `tick(count)` at the end, as the static profiled entry (`Gen::emit_calls`).
    fn dyn_calls(
        &self,
        f: FunctionValue<'ctx>,
        o: &DynOps<'_, 'ctx>,
        pfor: Option<u32>,
        tick: Option<u32>,
    ) -> R<()> {
        self.attrs(f);
        let entry = self.ctx.append_basic_block(f, "entry");
        self.builder.position_at_end(entry);
        let k = self.k(f);
        let (inputs, outputs, slab, offsets, dims) = (
            self.param(f, 0)?,
            self.param(f, 1)?,
            self.param(f, 2)?,
            self.param(f, 3)?,
            self.param(f, 4)?,
        );
        let pf = match pfor {
            Some(i) => Some(self.parallel_for_at(f, i)?),
            None => None,
        };
        // The dims, for the tiled kernels' counts.
        let d = Dk {
            k: self.k(f),
            f,
            dims: (0..o.syms.len())
                .map(|i| {
                    let q = k.gep(dims, k.c(i as i64))?;
                    Ok(llvm(self.builder.build_load(q, "dim"))?.into_int_value())
                })
                .collect::<R<_>>()?,
            syms: o.syms,
            tiles: None,
        };
        let regs = regions(o.func, o.storage);
        let fp = self.ctx.f32_type().ptr_type(AddressSpace::default());
        let plan = [slab, offsets, dims];
        let tick = match tick {
            Some(i) => Some(self.param(f, i)?),
            None => None,
        };
        let mut ticked = 0u32;
        for (idx, calls) in o.per_op.iter().enumerate() {
            if let Some(t) = tick.filter(|_| !calls.is_empty()) {
                self.tick(t, ticked)?;
                ticked += 1;
            }
            if let Some((_, gs)) = &o.guarded {
                self.dyn_guard_fill(gs, plan, idx)?;
            }
            for (kernel, locs) in calls {
                let mut args: Vec<inkwell::values::BasicMetadataValueEnum> =
                    Vec::with_capacity(locs.len() + 1);
                for loc in locs {
                    let (base, off) = match loc.base {
                        Base::Slab => {
                            let r = regs
                                .iter()
                                .find(|r| {
                                    r.first <= idx
                                        && idx <= r.last
                                        && r.offset <= loc.offset
                                        && (loc.offset < r.offset + r.size
                                            || loc.offset == r.offset)
                                })
                                .ok_or_else(|| {
                                    CodegenError::Llvm(format!(
                                        "op #{idx}: slab byte {} is in no live buffer",
                                        loc.offset
                                    ))
                                })?;
                            if loc.offset != r.offset {
                                return Err(CodegenError::Llvm(format!(
                                    "op #{idx}: a value inside the buffer `{}` at an offset",
                                    r.name
                                )));
                            }
                            let q = k.gep(offsets, k.c(r.alloc as i64))?;
                            let at = llvm(self.builder.build_load(q, "at"))?.into_int_value();
                            (slab, at)
                        }
                        Base::Input(i) | Base::Output(i) => {
                            if o.dynamic[idx] && loc.offset != 0 {
                                return Err(CodegenError::Llvm(format!(
                                    "op #{idx}: a view at an offset into an input or output"
                                )));
                            }
                            let arr = if matches!(loc.base, Base::Input(_)) {
                                inputs
                            } else {
                                outputs
                            };
                            let q = k.gep(arr, k.c(i as i64))?;
                            let p = llvm(self.builder.build_load(q, "base"))?.into_pointer_value();
                            (p, k.c(loc.offset as i64))
                        }
                        Base::Weight(w) => (o.globals[w], k.c(loc.offset as i64)),
                    };
                    // SAFETY: the executable's offsets are a checked plan of this structure at
                    // the shape of `dims`.
                    let p = llvm(unsafe { self.builder.build_in_bounds_gep(base, &[off], "t") })?;
                    args.push(llvm(self.builder.build_pointer_cast(p, fp, "f"))?.into());
                }
                if o.dynamic[idx] {
                    args.push(dims.into());
                }
                let count = self
                    .dyn_tiles
                    .borrow()
                    .iter()
                    .find(|(f, _)| f == kernel)
                    .map(|(_, t)| t.clone());
                let count = match count {
                    Some(t) => Some(d.tile_count(&t, self.min_tile_flops)?),
                    None => None,
                };
                self.call_kernel_tiles(*kernel, args, pf, count)?;
            }
            if let Some((gd, gs)) = &o.guarded {
                self.dyn_guard_after(gs, gd, o.func, o.storage, plan, idx)?;
            }
        }
        if let Some(t) = tick {
            self.tick(t, ticked)?;
        }
        llvm(self.builder.build_return(None))?;
        Ok(())
    }
}

/// What the entry points of a dynamic compile call ([`Gen::dyn_calls`]).
struct DynOps<'o, 'c> {
    func: &'o Function,
    storage: &'o Storage,
    per_op: &'o [Vec<Call<'c>>],
    dynamic: &'o [bool],
    globals: &'o [PointerValue<'c>],
    guarded: Option<(&'o crate::guard::Guard, &'o crate::guard::DynGuarded<'c>)>,
    syms: &'o [String],
}

/// The layout indices of the ops that have kernels (the outputs' copy is the last entry of
/// `per_op`, at the op count): the rows of the profile, in the order of its ticks.
fn profiled_ops<T>(per_op: &[Vec<T>]) -> impl Iterator<Item = usize> + '_ {
    per_op
        .iter()
        .enumerate()
        .filter(|(_, calls)| !calls.is_empty())
        .map(|(i, _)| i)
}

/// `tir_prof_line(d, op, buf, n)`: the profile line (`crate::profile`'s format: kind, result,
/// shape, flops) of the op at layout index `op` at the dims `d`, its shape and flops evaluated
/// from the symbolic types (the outputs' copy at the op count). The executable's `--profile`
/// builds its table from it for the ops `<name>_profile_ops` lists.
fn profile_c(func: &Function, spec: &DynSpec) -> String {
    use std::fmt::Write as _;
    let syms = &spec.symbols;
    let mut x = String::from(
        "static int tir_prof_line(const long long *d, int op, char *buf, unsigned long n) {\n    (void)d;\n    switch (op) {\n",
    );
    let mut count = 0;
    for (idx, (id, op)) in func.ops_in_order().enumerate() {
        count = idx + 1;
        let (kind, name) = crate::profile::label(func, id, false);
        let shape = op
            .results
            .first()
            .and_then(|&v| spec.dims(func, v).ok())
            .unwrap_or_default();
        let flops = crate::profile::flop_factors(op, |v| spec.dims(func, v).ok()).map_or(
            "(tir_i128)0".to_string(),
            |f| {
                let mut e = "(tir_i128)2".to_string();
                for d in &f {
                    let _ = write!(e, " * {}", c_expr(d, syms));
                }
                e
            },
        );
        let fmt = vec!["%llu"; shape.len()].join("x");
        let dims: String = shape
            .iter()
            .map(|e| format!(", tir_clamp({})", c_expr(e, syms)))
            .collect();
        let _ = writeln!(
            x,
            "    case {idx}: return snprintf(buf, n, \"%s\\t%s\\t{fmt}\\t%llu\\n\", \"{}\", \"{}\"{dims}, tir_clamp({flops}));",
            c_string_body(&kind, false),
            c_string_body(&name, false),
        );
    }
    let _ = writeln!(
        x,
        "    case {count}: return snprintf(buf, n, \"copy\\t(outputs)\\t\\t0\\n\");\n    default: return snprintf(buf, n, \"?\\t\\t\\t0\\n\");\n    }}\n}}"
    );
    x
}

/// The C expression of `e` over `d[i]` (the dims in `syms` order), with the helpers
/// `tir_fdiv`, `tir_cdiv`, `tir_max`, `tir_min` of the dynamic `main.c`.
pub fn c_expr(e: &DimExpr, syms: &[String]) -> String {
    let mut terms: Vec<String> = Vec::new();
    for (atoms, coeff) in e.terms() {
        let mut f: Vec<String> = vec![format!("(__int128){coeff}LL")];
        for a in atoms {
            f.push(c_atom(a, syms));
        }
        terms.push(format!("({})", f.join(" * ")));
    }
    if terms.is_empty() {
        "(__int128)0".into()
    } else {
        format!("({})", terms.join(" + "))
    }
}

fn c_atom(a: &Atom, syms: &[String]) -> String {
    match a {
        Atom::Sym(s) => {
            let i = syms.iter().position(|x| x == s).unwrap_or(usize::MAX);
            format!("d[{i}]")
        }
        Atom::FloorDiv(x, y) => format!("tir_fdiv({}, {})", c_expr(x, syms), c_expr(y, syms)),
        Atom::CeilDiv(x, y) => format!("tir_cdiv({}, {})", c_expr(x, syms), c_expr(y, syms)),
        Atom::Max(x, y) => format!("tir_max({}, {})", c_expr(x, syms), c_expr(y, syms)),
        Atom::Min(x, y) => format!("tir_min({}, {})", c_expr(x, syms), c_expr(y, syms)),
    }
}

/// Compiles a dynamic model bufferized at a probe shape: its kernels with run-time extents and
/// `<name>_run_dyn`, as an object file (`what` as [`crate::emit`]).
pub fn emit_dynamic(
    b: &Bufferized,
    weights: &tir_interp::Weights,
    opts: &crate::Options,
    spec: &DynSpec,
    what: crate::Artifact,
) -> Result<Vec<u8>, CodegenError> {
    use inkwell::context::Context;
    use inkwell::passes::PassBuilderOptions;
    use inkwell::targets::FileType;
    let machine = crate::target_machine(&opts.target_cpu, opts.opt_level)?;
    let ctx = Context::create();
    let module = ctx.create_module(&opts.name);
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    let builder = ctx.create_builder();
    let (cpu, features, width) = crate::target_spec(&opts.target_cpu);
    let gen = Gen {
        ctx: &ctx,
        module: &module,
        builder: &builder,
        cpu,
        features,
        width,
        min_tile_flops: opts.min_tile_flops,
        parallel: Default::default(),
        dyn_tiles: Default::default(),
    };
    gen.build_dynamic(b, weights, &opts.name, spec, opts.guard.as_ref())?;
    module
        .verify()
        .map_err(|e| CodegenError::Llvm(e.to_string()))?;
    module
        .run_passes(
            &crate::pipeline(opts.opt_level),
            &machine,
            PassBuilderOptions::create(),
        )
        .map_err(|e| CodegenError::Llvm(e.to_string()))?;
    match what {
        crate::Artifact::Llvm => Ok(module.print_to_string().to_bytes().to_vec()),
        crate::Artifact::Object | crate::Artifact::Asm => {
            let ft = if what == crate::Artifact::Object {
                FileType::Object
            } else {
                FileType::Assembly
            };
            machine
                .write_to_memory_buffer(&module, ft)
                .map(|m| m.as_slice().to_vec())
                .map_err(|e| CodegenError::Llvm(e.to_string()))
        }
    }
}

/// The run-time planner (greedy by size, cached per shape) of executables and libraries.
const PLAN_C: &str = include_str!("dynamic_plan.c");

/// The model's tables for the run-time planner and the executable: the dims' names, which
/// input axis gives which dim, the outputs' dims and the records' sizes as C expressions of
/// the dims, the records' live intervals. Refused when an input axis is an expression of dims
/// (not a dim alone or a constant): its value could not be read off a file.
fn tables_c(
    func: &Function,
    spec: &DynSpec,
    records: &[DynRecord],
    n_allocs: usize,
) -> Result<String, String> {
    use std::fmt::Write as _;
    let syms = &spec.symbols;
    let mut x = String::new();
    let _ = writeln!(
        x,
        "#define DYNAMIC 1\n#define NSYM {}\n#define NREC {}\n#define NALLOC {}",
        syms.len(),
        records.len(),
        n_allocs
    );
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "0".to_string()
        } else {
            v.join(",")
        }
    };
    let _ = writeln!(
        x,
        "static const char *sym_names[] = {{{}}};",
        list(syms.iter().map(|s| format!("{s:?}")).collect())
    );
    let mut in_sym = Vec::new();
    for &p in &func.params {
        let dims = spec.dims(func, p).map_err(|e| e.to_string())?;
        let mut row = Vec::new();
        for (axis, e) in dims.iter().enumerate() {
            if e.is_constant() {
                row.push("-1".to_string());
            } else if let Some(s) = e.as_symbol() {
                row.push(syms.iter().position(|x| x == s).unwrap_or(0).to_string());
            } else {
                return Err(format!(
                    "the input {} has `{e}` in dimension {axis}: an input's dim must be a dim name or a constant to run with run-time dims",
                    func.value_name(p)
                ));
            }
        }
        in_sym.push(format!("{{{}}}", list(row)));
    }
    let _ = writeln!(
        x,
        "static const int in_sym[][MAXR] = {{{}}};",
        if in_sym.is_empty() {
            "{0}".into()
        } else {
            in_sym.join(",")
        }
    );
    let _ = writeln!(
        x,
        "/* Dim expressions in 128 bits (dims are below 2^63, products of a few stay exact); a\n   \
         result outside 0..2^62 is clamped to TIR_TOO_BIG (refused by the planner). */\n\
         typedef __int128 tir_i128;\n\
         static tir_i128 tir_fdiv(tir_i128 a, tir_i128 b) {{ if (!b) return 0; tir_i128 q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }}\n\
         static tir_i128 tir_cdiv(tir_i128 a, tir_i128 b) {{ if (!b) return 0; tir_i128 q = a / b; return (a % b != 0 && ((a < 0) == (b < 0))) ? q + 1 : q; }}\n\
         static tir_i128 tir_max(tir_i128 a, tir_i128 b) {{ return a > b ? a : b; }}\n\
         static tir_i128 tir_min(tir_i128 a, tir_i128 b) {{ return a < b ? a : b; }}\n\
         static unsigned long long tir_clamp(tir_i128 v) {{ return v < 0 || v > (tir_i128)(1ULL << 62) ? (1ULL << 62) + 1 : (unsigned long long)v; }}"
    );
    let _ = writeln!(
        x,
        "static void tir_out_dims(const long long *d, int j, unsigned long long *od) {{\n    (void)d; (void)od;\n    switch (j) {{"
    );
    for (j, &v) in func.returns.iter().enumerate() {
        let dims = spec.dims(func, v).map_err(|e| e.to_string())?;
        let _ = write!(x, "    case {j}:");
        for (k, e) in dims.iter().enumerate() {
            let _ = write!(x, " od[{k}] = tir_clamp({});", c_expr(e, syms));
        }
        let _ = writeln!(x, " break;");
    }
    let _ = writeln!(x, "    default: break;\n    }}\n}}");
    let _ = writeln!(
        x,
        "static void tir_rec_bytes(const long long *d, unsigned long long *b) {{\n    (void)d; (void)b;"
    );
    for (r, rec) in records.iter().enumerate() {
        let _ = writeln!(x, "    b[{r}] = tir_clamp({});", c_expr(&rec.bytes, syms));
    }
    let _ = writeln!(x, "}}");
    // The run-time checks, with `specialize`'s message: 0, or 1 with the message in `msg`.
    let _ = writeln!(
        x,
        "static int tir_checks(const long long *d, char *msg, unsigned long n) {{\n    (void)d; (void)msg; (void)n;"
    );
    for c in &spec.checks {
        let cmp = match c.cond.kind {
            tir_ir::sym::CondKind::Eq => "==",
            tir_ir::sym::CondKind::Ge => ">=",
        };
        let mut names: Vec<String> = Vec::new();
        for e in [&c.cond.lhs, &c.cond.rhs] {
            for n in e.symbols() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        let fmt: Vec<String> = names
            .iter()
            .map(|n| format!("{} = %lld", c_string_body(n, true)))
            .collect();
        let args: String = names
            .iter()
            .map(|n| format!(", d[{}]", syms.iter().position(|x| x == n).unwrap_or(0)))
            .collect();
        let _ = writeln!(
            x,
            "    {{ tir_i128 l = {}, r = {};\n      if (!(l {cmp} r)) {{ snprintf(msg, n, \"`%s`: %s (the run-time check %s fails at {}: %lld vs %lld)\", \"{}\", \"{}\", \"{}\"{args}, (long long)l, (long long)r); return 1; }} }}",
            c_expr(&c.cond.lhs, syms),
            c_expr(&c.cond.rhs, syms),
            fmt.join(", "),
            c_string_body(c.op, false),
            c_string_body(&c.cond.message, false),
            c_string_body(&c.cond.to_string(), false),
        );
    }
    let _ = writeln!(x, "    return 0;\n}}");
    let col = |f: &dyn Fn(&DynRecord) -> String| list(records.iter().map(f).collect());
    let _ = writeln!(
        x,
        "static const int rec_first[] = {{{}}};\nstatic const int rec_last[] = {{{}}};\nstatic const int rec_alloc[] = {{{}}};\nstatic const char *rec_name[] = {{{}}};",
        col(&|r| r.first.to_string()),
        col(&|r| r.last.to_string()),
        col(&|r| r.alloc.to_string()),
        col(&|r| format!("{:?}", r.name)),
    );
    Ok(x)
}

/// The C source of a dynamic executable's `main`: `exe_main.c` with `DYNAMIC` on, the model's
/// tables ([`tables_c`]), the planner, the dims pinned at compile time. With `guard` bytes
/// (`--guard`; 0 for none) every record is planned that much longer and the guard's C side
/// ([`crate::guard::GUARD_DYN_C`]) is included, for a module built with the same guard.
pub fn main_c(
    func: &Function,
    name: &str,
    spec: &DynSpec,
    records: &[DynRecord],
    n_allocs: usize,
    pinned: &[(usize, u64)],
    guard: u64,
) -> Result<String, String> {
    use std::fmt::Write as _;
    let mut x = tables_c(func, spec, records, n_allocs)?;
    // Dims pinned at compile time (`tirc compile --dim`): as if given with the executable's own.
    let _ = write!(
        x,
        "static void tir_pin(long long *d, int *src) {{ (void)d; (void)src;"
    );
    for &(i, v) in pinned {
        let _ = write!(x, " d[{i}] = {v}LL; src[{i}] = -1;");
    }
    let _ = writeln!(x, " }}");
    let _ = writeln!(
        x,
        "void {name}_run_dyn_parallel(const void *const *inputs, void *const *outputs, void *slab, const unsigned long long *offsets, const long long *dims, tir_parallel_for parallel_for, void *pool);\n#define MODEL_RUN_DYN {name}_run_dyn_parallel\n\
         void {name}_run_dyn_profiled(const void *const *inputs, void *const *outputs, void *slab, const unsigned long long *offsets, const long long *dims, void (*tick)(int), tir_parallel_for parallel_for, void *pool);\n#define MODEL_RUN_DYN_PROFILED {name}_run_dyn_profiled\n\
         extern const int {name}_profile_ops[];\n#define MODEL_PROFILE_OPS {name}_profile_ops"
    );
    x.push_str(&profile_c(func, spec));
    if guard > 0 {
        let _ = writeln!(x, "#define TIR_GUARD {guard}");
    }
    x.push_str(PLAN_C);
    x.push_str(crate::guard::GUARD_DYN_C);
    Ok(crate::exe::main_c_with(func, name, None, &x))
}

/// The first op of the dynamic function `f` with a symbolic extent that has no kernel with
/// run-time extents here, as a sentence naming the op, the dim and what to pass (`None`: every
/// such op has one). A check before compiling: kernels may still refuse a case (a dim that
/// broadcasts only at run time), naming it the same way.
pub fn unsupported_op(f: &Function, given: &tir_ir::Bindings) -> Option<String> {
    let spec = DynSpec::given(f, given);
    for (_, op) in f.ops_in_order() {
        if !op.op.is_operator() || !spec.is_dynamic(f, op) {
            continue;
        }
        let f32 = op.operands.iter().chain(&op.results).all(|&v| {
            spec.types
                .get(&f.values[v].name)
                .is_some_and(|t| t.dtype == tir_ir::DType::F32)
        });
        let ok =
            f32 && matches!(
                op.op,
                Op::Unary(_)
                    | Op::Clip { .. }
                    | Op::Binary { .. }
                    | Op::Transpose { .. }
                    | Op::Reshape { .. }
                    | Op::Flatten { .. }
                    | Op::Squeeze { .. }
                    | Op::Unsqueeze { .. }
                    | Op::Softmax { .. }
                    | Op::LogSoftmax { .. }
                    | Op::LayerNorm { .. }
                    | Op::MatMul { .. }
                    | Op::Conv2d(_)
                    | Op::MaxPool(_)
                    | Op::AvgPool(_)
                    | Op::GlobalAvgPool
                    | Op::Concat { .. }
                    | Op::Pad { .. }
                    | Op::Resize(_)
                    | Op::BatchNorm { .. }
                    | Op::Reduce { .. }
                    | Op::Gemm(_)
                    | Op::ConvTranspose(_)
                    | Op::Slice(_)
                    | Op::Split { .. }
                    | Op::Prelu
                    | Op::HardSigmoid { .. }
                    | Op::Trilu { .. }
            ) && !(matches!(op.op, Op::Conv2d(_)) && op.operands.len() > 3);
        if !ok {
            let s = first_symbol(&spec, f, op);
            let r = op
                .results
                .first()
                .map(|&r| f.value_name(r))
                .unwrap_or_default();
            return Some(format!(
                "`{}` ({r}) has no kernel with the run-time dim `{s}` yet; give it a value with --dim {s}=N",
                op.op.name()
            ));
        }
    }
    None
}

/// The C source of the planning half of a dynamic `--emit lib` archive (the kernels are the
/// other object): `<name>_plan` and `<name>_output_shape` over the model's tables.
pub fn lib_c(
    func: &Function,
    name: &str,
    spec: &DynSpec,
    records: &[DynRecord],
    n_allocs: usize,
    pinned: &[(usize, u64)],
) -> Result<String, String> {
    let pins: String = pinned
        .iter()
        .map(|(i, v)| format!("    if (dims[{i}] != {v}LL) return UINT64_MAX;\n"))
        .collect();
    let mut x = String::from(
        "#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n#define MAXR 8\n",
    );
    x += &tables_c(func, spec, records, n_allocs)?;
    x += PLAN_C;
    x += &format!(
        "uint64_t {name}_plan(const int64_t *dims, uint64_t *offsets) {{\n    \
         int fresh;\n    char msg[512];\n{pins}    if (tir_checks((const long long *)dims, msg, sizeof msg)) return UINT64_MAX;\n    plan_t *p = plan_for((const long long *)dims, &fresh);\n    \
         if (!p) return UINT64_MAX;\n    \
         if (offsets) memcpy(offsets, p->offsets, sizeof(uint64_t) * NALLOC);\n    \
         return p->size;\n}}\n\
         void {name}_output_shape(const int64_t *dims, int output, uint64_t *shape) {{\n    \
         if (output >= 0 && output < {}) tir_out_dims((const long long *)dims, output, (unsigned long long *)shape);\n}}\n",
        func.returns.len()
    );
    Ok(x)
}

/// The C header of a dynamic `--emit lib` archive: the dims, the inputs' and outputs' ranks
/// and which dim each axis is, and the three entry points.
pub fn header(
    func: &Function,
    name: &str,
    spec: &DynSpec,
    n_allocs: usize,
) -> Result<String, String> {
    use std::fmt::Write as _;
    let guard = format!("TIR_{}_H", name.to_ascii_uppercase());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "/* Generated by `tirc compile --emit lib`: the model `{name}` with run-time dims. */\n\
         #ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n\
         #ifdef __cplusplus\nextern \"C\" {{\n#endif\n"
    );
    let syms = &spec.symbols;
    let names: Vec<String> = syms.iter().map(|x| format!("{x:?}")).collect();
    let _ = writeln!(
        s,
        "/* The dims, in the order of every `dims` array below. */\n#define {name}_NUM_DIMS {}\n\
         static const char *const {name}_dim_names[] = {{{}}};\n\
         /* Entries of the `offsets` array: one per buffer. */\n#define {name}_NUM_BUFFERS {n_allocs}\n",
        syms.len(),
        if names.is_empty() { "0".into() } else { names.join(", ") }
    );
    let mut list = |what: &str, vals: Vec<(String, Vec<DimExpr>)>| {
        let upper = what.to_ascii_uppercase();
        let _ = writeln!(s, "#define {name}_NUM_{upper}S {}", vals.len());
        for (i, (n, dims)) in vals.iter().enumerate() {
            let text: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            let idx: Vec<String> = dims
                .iter()
                .map(|d| match d.as_symbol() {
                    Some(x) => syms.iter().position(|y| y == x).map_or(-2, |p| p as i64),
                    None if d.is_constant() => -1,
                    None => -2,
                })
                .map(|v| v.to_string())
                .collect();
            let consts: Vec<String> = dims
                .iter()
                .map(|d| d.as_constant().unwrap_or(0).to_string())
                .collect();
            let or1 = |v: Vec<String>| {
                if v.is_empty() {
                    "0".to_string()
                } else {
                    v.join(", ")
                }
            };
            let _ = writeln!(
                s,
                "/* {what} {i}: %{n}, float[{}] */\n\
                 #define {name}_{upper}{i}_NAME {n:?}\n\
                 #define {name}_{upper}{i}_RANK {}\n\
                 /* Per axis: the index of its dim in `dims`, -1 for a constant (in _shape), -2 for\n   \
                 an expression of the dims ({name}_output_shape gives it). */\n\
                 static const int {name}_{what}{i}_dim[] = {{{}}};\n\
                 static const uint64_t {name}_{what}{i}_shape[] = {{{}}};",
                text.join("]["),
                dims.len(),
                or1(idx),
                or1(consts),
            );
        }
        s.push('\n');
    };
    let ins = func
        .params
        .iter()
        .map(|&p| Ok((func.values[p].name.clone(), spec.dims(func, p)?)))
        .collect::<R<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    list("input", ins);
    let outs = func
        .returns
        .iter()
        .map(|&v| Ok((func.values[v].name.clone(), spec.dims(func, v)?)))
        .collect::<R<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    list("output", outs);
    let _ = writeln!(
        s,
        "/* Plans the working memory at `dims` (greedy by size for offsets; the last few shapes'\n   \
         plans are cached per thread): fills `offsets` ({name}_NUM_BUFFERS entries, may be NULL)\n   \
         and returns the slab's bytes (allocate them 64-byte aligned), or UINT64_MAX when a\n   \
         buffer would exceed 2^62 bytes, a dim differs from the value the compile's --dim\n   \
         gave it, or the dims fail a run-time check of the model. */\n\
         uint64_t {name}_plan(const int64_t *dims, uint64_t *offsets);\n\n\
         /* The shape of output `output` at `dims` ({name}_OUTPUTj_RANK entries). */\n\
         void {name}_output_shape(const int64_t *dims, int output, uint64_t *shape);\n\n\
         /* Runs the model at `dims` on one thread: `inputs[i]` and `outputs[j]` point to tensors\n   \
         of the shapes the dims give (the caller checks its inputs agree with `dims`), `slab`\n   \
         to the bytes and `offsets` to the plan of `{name}_plan(dims, offsets)`. None of them\n   \
         may overlap. The outputs are bitwise those of the model compiled at those dims. */\n\
         void {name}_run_dyn(const void *const *inputs, void *const *outputs, void *slab,\n    \
         const uint64_t *offsets, const int64_t *dims);\n\n\
         /* The same on the caller's threads: each kernel's tiles (a count fixed by the dims,\n   \
         never by the threads) are handed to `parallel_for(pool, body, ctx, tiles)`, which must\n   \
         call `body(ctx, begin, end)` on disjoint ranges covering 0..tiles and return once all\n   \
         have returned. The outputs are the same bytes for every thread count. */\n\
         typedef void (*{name}_parallel_for)(void *pool, void (*body)(void *ctx, int64_t begin, int64_t end),\n    \
         void *ctx, int64_t tiles);\n\
         void {name}_run_dyn_parallel(const void *const *inputs, void *const *outputs, void *slab,\n    \
         const uint64_t *offsets, const int64_t *dims, {name}_parallel_for parallel_for, void *pool);\n\n\
         #ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */"
    );
    Ok(s)
}

/// Compiles C `source` to an object with the system `cc`, naming no file (see
/// [`crate::toolchain`]).
pub fn compile_c(source: &str) -> Result<Vec<u8>, String> {
    use crate::toolchain::{run, MemFile};
    let src = MemFile::new("plan.c", source.as_bytes())?;
    let obj = MemFile::new("plan.o", &[])?;
    run(
        std::process::Command::new("cc")
            .args(["-O2", "-pipe", "-fPIC", "-x", "c", "-c", "-", "-o"])
            .arg(obj.path())
            .stdin(src.stdin()?),
        "cc",
    )?;
    obj.contents()
}

/// `text` as the body of a C string literal: quotes, backslashes and non-ASCII bytes escaped
/// (octal); with `format`, `%` doubled (the literal is a printf format).
fn c_string_body(text: &str, format: bool) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'%' if format => out.push_str("%%"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out
}
