//! Guard mode (`tirc compile --guard`): canary bytes after every buffer of the slab, checked
//! after every op, so that a kernel (or a plan) that writes out of bounds is caught at the op
//! that did it.
//!
//! The plan is made with padded sizes (`plan{guard=N}`: every usage record is `N` bytes
//! longer), so the `N` bytes after a buffer belong to it for its whole life and nothing else
//! may write them. The generated entry point fills a buffer's canary just before the first op
//! that touches the buffer and checks the canaries of every buffer live at an op right after
//! the op's kernels ran. A mismatch calls `tir_guard_check`'s report (in the executable's
//! `main.c`), which names the op (layout index, op name, result) and the buffer, and exits 3.
//!
//! Buffers are read off the bufferized IR: an `alloc_tensor` is a buffer; its live interval is
//! the first to the last op reading or writing a value stored in it (through `outs` and
//! views). An `alloc_tensor` inside another one's bytes during an overlapping interval (a
//! concat's operand placed in the concat's result) is part of that buffer.

use crate::nest::{llvm, R};
use crate::storage::{Base, Storage};
use crate::{CodegenError, Gen};
use inkwell::module::Linkage;
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, PointerValue};
use inkwell::AddressSpace;
use tir_ir::op::Role;
use tir_ir::{EntityRef, Function, Op, Value};

/// Guard-mode options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    /// Canary bytes after every buffer (the plan must pad by at least this much).
    pub bytes: u64,
    /// Test-only fault injection: after the op whose first result has this name, one float
    /// is stored just past the end of the result, as a kernel with an off-by-one would. The
    /// guard must report that op.
    pub fault_after: Option<String>,
}

/// A guarded buffer: slab bytes `[offset, offset + size)`, canary after it, live over the ops
/// of layout indices `first..=last`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub offset: u64,
    pub size: u64,
    pub name: String,
    pub first: usize,
    pub last: usize,
    /// Ordinal of the `alloc_tensor` (in layout order) that starts the buffer.
    pub alloc: usize,
}

/// The buffers of a bufferized function, with their live intervals over layout indices
/// (`ops_in_order` positions; the copies of returned values count as index `ops.len()`).
pub fn regions(func: &Function, st: &Storage) -> Vec<Region> {
    // The alloc_tensor each value is stored in (its root), through outs and views.
    let mut root: Vec<Option<Value>> = vec![None; func.values.len()];
    let mut allocs: Vec<Value> = Vec::new();
    for (_, op) in func.ops_in_order() {
        match op.op.role() {
            // The slab is the arena, not a buffer in it.
            Role::Buffer if matches!(op.op, Op::AllocSlab { .. }) => {}
            Role::Buffer => {
                // A buffer inside another (a concat's slice) belongs to the outer one,
                // whatever the times its own values are live: relocation then moves it with
                // its host, and the guard watches the host's end only.
                let r = op.results[0];
                let host = op.operands.first().and_then(|p| root[p.index()]);
                root[r.index()] = Some(host.unwrap_or(r));
                allocs.push(r);
            }
            Role::Weight => {}
            Role::Operator => {
                for (i, &r) in op.results.iter().enumerate() {
                    root[r.index()] = match op.outs.get(i) {
                        Some(&o) => root[o.index()],
                        None if op.op.is_view() => {
                            op.operands.first().and_then(|s| root[s.index()])
                        }
                        None => None,
                    };
                }
            }
        }
    }
    let mut first = vec![usize::MAX; func.values.len()];
    let mut last = vec![0usize; func.values.len()];
    for (idx, (_, op)) in func.ops_in_order().enumerate() {
        if !op.op.is_operator() {
            continue;
        }
        for &v in op.operands.iter().chain(&op.outs).chain(&op.results) {
            if let Some(a) = root[v.index()] {
                first[a.index()] = first[a.index()].min(idx);
                last[a.index()] = last[a.index()].max(idx);
            }
        }
    }
    let n_ops = func.layout.len();
    for &v in &func.returns {
        if let Some(a) = root[v.index()] {
            first[a.index()] = first[a.index()].min(n_ops);
            last[a.index()] = last[a.index()].max(n_ops);
        }
    }
    let mut out: Vec<Region> = allocs
        .iter()
        .enumerate()
        .filter(|(_, a)| first[a.index()] != usize::MAX)
        .filter_map(|(ordinal, &a)| {
            let loc = st.loc[a.index()]?;
            if loc.base != Base::Slab {
                return None;
            }
            let size = func.ty(a)?.byte_size()?;
            Some(Region {
                offset: loc.offset,
                size,
                name: func.value_name(a),
                first: first[a.index()],
                last: last[a.index()],
                alloc: ordinal,
            })
        })
        .collect();
    // Fold a buffer placed inside another live at the same time into it (largest first).
    out.sort_by(|a, b| b.size.cmp(&a.size).then(a.offset.cmp(&b.offset)));
    let mut kept: Vec<Region> = Vec::new();
    for r in out {
        let host = kept.iter_mut().find(|k| {
            k.offset <= r.offset
                && r.offset + r.size <= k.offset + k.size
                && k.first <= r.last
                && r.first <= k.last
        });
        match host {
            Some(k) => {
                k.first = k.first.min(r.first);
                k.last = k.last.max(r.last);
            }
            None => kept.push(r),
        }
    }
    kept.sort_by_key(|r| (r.first, r.offset));
    kept
}

/// The C side of guard mode, linked into executables: the canary pattern, filling, checking
/// and the report. The pattern varies per byte so that a shifted copy does not match it.
pub const GUARD_C: &str = r#"
static unsigned char tir_canary(unsigned long long k) { return (unsigned char)(0xA5u + 61u * (unsigned)k); }
void tir_guard_fill(unsigned char *p, unsigned long long n) {
    for (unsigned long long k = 0; k < n; k++) p[k] = tir_canary(k);
}
void tir_guard_check(const unsigned char *p, unsigned long long n, long long op,
                     const char *op_name, const char *result, const char *buffer,
                     unsigned long long offset, unsigned long long size) {
    for (unsigned long long k = 0; k < n; k++) {
        if (p[k] != tir_canary(k)) {
            fprintf(stderr, "guard: op #%lld `%s` (%s) wrote out of bounds: the canary after `%s` "
                    "(slab bytes [%llu, %llu)) is overwritten at byte +%llu\n",
                    op, op_name, result, buffer, offset, offset + size, k);
            exit(3);
        }
    }
}
"#;

/// The C side of guard mode in a dynamic executable (`tir_codegen::dynamic`), placed after
/// the model's tables and the run-time planner (which pads every record by `TIR_GUARD`
/// bytes): a record's canary sits at its run-time offset plus its run-time size, both read
/// from the plan and the dims the entry point runs with, so that the bytes watched are the
/// ones after the buffer at this shape, not at the compile's probe.
pub const GUARD_DYN_C: &str = r#"
#if TIR_GUARD
void tir_guard_fill(unsigned char *p, unsigned long long n);
void tir_guard_check(const unsigned char *p, unsigned long long n, long long op,
                     const char *op_name, const char *result, const char *buffer,
                     unsigned long long offset, unsigned long long size);
static unsigned long long tir_guard_bytes(const long long *d, long long r) {
    unsigned long long b[NREC + 1];
    tir_rec_bytes(d, b);
    return b[r];
}
void tir_guard_dyn_fill(unsigned char *slab, const unsigned long long *offsets, const long long *d, long long r) {
    tir_guard_fill(slab + offsets[rec_alloc[r]] + tir_guard_bytes(d, r), TIR_GUARD);
}
void tir_guard_dyn_check(unsigned char *slab, const unsigned long long *offsets, const long long *d, long long r,
                         long long op, const char *op_name, const char *result) {
    unsigned long long at = offsets[rec_alloc[r]], n = tir_guard_bytes(d, r);
    tir_guard_check(slab + at + n, TIR_GUARD, op, op_name, result, rec_name[r], at, n);
}
/* Test-only fault injection (`--guard-fault-op`): one float just past the record's end. */
void tir_guard_dyn_fault(unsigned char *slab, const unsigned long long *offsets, const long long *d, long long r) {
    float f = 1.5f;
    __builtin_memcpy(slab + offsets[rec_alloc[r]] + tir_guard_bytes(d, r), &f, sizeof f);
}
#endif
"#;

/// The guard's state in the entry point: the regions and the two C helpers.
pub(crate) struct Guarded<'ctx> {
    regions: Vec<Region>,
    fill: FunctionValue<'ctx>,
    check: FunctionValue<'ctx>,
}

impl<'a, 'ctx> Gen<'a, 'ctx> {
    pub(crate) fn guard_setup(
        &self,
        func: &Function,
        st: &Storage,
        _gd: &Guard,
    ) -> R<Guarded<'ctx>> {
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let i64t = self.ctx.i64_type();
        let void = self.ctx.void_type();
        let fill = self.module.add_function(
            "tir_guard_fill",
            void.fn_type(&[i8p.into(), i64t.into()], false),
            Some(Linkage::External),
        );
        let check = self.module.add_function(
            "tir_guard_check",
            void.fn_type(
                &[
                    i8p.into(),
                    i64t.into(),
                    i64t.into(),
                    i8p.into(),
                    i8p.into(),
                    i8p.into(),
                    i64t.into(),
                    i64t.into(),
                ],
                false,
            ),
            Some(Linkage::External),
        );
        Ok(Guarded {
            regions: regions(func, st),
            fill,
            check,
        })
    }

    fn canary(&self, slab: PointerValue<'ctx>, r: &Region) -> R<PointerValue<'ctx>> {
        let i = self.ctx.i64_type().const_int(r.offset + r.size, false);
        // SAFETY: the padded plan keeps `offset + size + guard` inside the slab.
        llvm(unsafe { self.builder.build_in_bounds_gep(slab, &[i], "canary") })
    }

    /// Before the op of layout index `idx`: the canaries of the buffers it starts.
    pub(crate) fn guard_fill(
        &self,
        gs: &Guarded<'ctx>,
        gd: &Guard,
        slab: PointerValue<'ctx>,
        idx: usize,
    ) -> R<()> {
        let n = self.ctx.i64_type().const_int(gd.bytes, false);
        for r in gs.regions.iter().filter(|r| r.first == idx) {
            let p = self.canary(slab, r)?;
            llvm(self.builder.build_call(gs.fill, &[p.into(), n.into()], ""))?;
        }
        Ok(())
    }

    /// After the op of layout index `idx`: the injected fault (tests), then the canaries of
    /// every buffer live at the op.
    pub(crate) fn guard_after(
        &self,
        gs: &Guarded<'ctx>,
        gd: &Guard,
        func: &Function,
        st: &Storage,
        slab: PointerValue<'ctx>,
        idx: usize,
    ) -> R<()> {
        let i64t = self.ctx.i64_type();
        let op = func.ops_in_order().nth(idx).map(|(_, d)| d);
        let first = op.and_then(|d| d.results.first().copied());
        let faulty = match (&gd.fault_after, first) {
            (Some(n), Some(r)) => func.values[r].name == n.trim_start_matches('%'),
            _ => false,
        };
        if let (true, Some(r)) = (faulty, first) {
            let loc = st.of(func, r)?;
            let bytes = func.ty(r).and_then(|t| t.byte_size()).unwrap_or(0);
            if loc.base != Base::Slab {
                return Err(CodegenError::Llvm(format!(
                    "guard fault: the result of op #{idx} is not in the slab"
                )));
            }
            let i = i64t.const_int(loc.offset + bytes, false);
            // SAFETY: inside the padded slab (the guard bytes after the result).
            let p = llvm(unsafe { self.builder.build_in_bounds_gep(slab, &[i], "fault") })?;
            let fp = llvm(self.builder.build_pointer_cast(
                p,
                self.ctx.f32_type().ptr_type(AddressSpace::default()),
                "fault",
            ))?;
            llvm(
                self.builder
                    .build_store(fp, self.ctx.f32_type().const_float(1.5)),
            )?;
        }
        let live: Vec<&Region> = gs
            .regions
            .iter()
            .filter(|r| r.first <= idx && idx <= r.last)
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let (op_name, result) = match op {
            Some(d) => (
                d.op.name().to_string(),
                d.results
                    .first()
                    .map(|&r| func.value_name(r))
                    .unwrap_or_default(),
            ),
            None => ("return".to_string(), String::new()),
        };
        let s_op = llvm(self.builder.build_global_string_ptr(&op_name, "op"))?;
        let s_res = llvm(self.builder.build_global_string_ptr(&result, "res"))?;
        for r in live {
            let p = self.canary(slab, r)?;
            let s_buf = llvm(self.builder.build_global_string_ptr(&r.name, "buf"))?;
            llvm(self.builder.build_call(
                gs.check,
                &[
                    p.into(),
                    i64t.const_int(gd.bytes, false).into(),
                    i64t.const_int(idx as u64, false).into(),
                    s_op.as_pointer_value().into(),
                    s_res.as_pointer_value().into(),
                    s_buf.as_pointer_value().into(),
                    i64t.const_int(r.offset, false).into(),
                    i64t.const_int(r.size, false).into(),
                ],
                "",
            ))?;
        }
        Ok(())
    }
}

/// The guard's state in a dynamic entry point (`<model>_run_dyn`): the regions (in record
/// order: region `r` is the run-time plan's record `r`) and the C helpers of [`GUARD_DYN_C`].
pub(crate) struct DynGuarded<'ctx> {
    pub(crate) regions: Vec<Region>,
    fill: FunctionValue<'ctx>,
    check: FunctionValue<'ctx>,
    fault: FunctionValue<'ctx>,
}

impl<'a, 'ctx> Gen<'a, 'ctx> {
    pub(crate) fn dyn_guard_setup(&self, func: &Function, st: &Storage) -> DynGuarded<'ctx> {
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let i64t = self.ctx.i64_type();
        let i64p = i64t.ptr_type(AddressSpace::default());
        let void = self.ctx.void_type();
        let rec: [BasicMetadataTypeEnum; 4] = [i8p.into(), i64p.into(), i64p.into(), i64t.into()];
        let mut with_op = rec.to_vec();
        with_op.extend::<[BasicMetadataTypeEnum; 3]>([i64t.into(), i8p.into(), i8p.into()]);
        let ext = Some(Linkage::External);
        DynGuarded {
            regions: regions(func, st),
            fill: self
                .module
                .add_function("tir_guard_dyn_fill", void.fn_type(&rec, false), ext),
            check: self.module.add_function(
                "tir_guard_dyn_check",
                void.fn_type(&with_op, false),
                ext,
            ),
            fault: self
                .module
                .add_function("tir_guard_dyn_fault", void.fn_type(&rec, false), ext),
        }
    }

    /// Before the op of layout index `idx` of a dynamic entry point: the canaries of the
    /// buffers it starts, at their run-time ends (`plan` is `[slab, offsets, dims]`).
    pub(crate) fn dyn_guard_fill(
        &self,
        gs: &DynGuarded<'ctx>,
        plan: [PointerValue<'ctx>; 3],
        idx: usize,
    ) -> R<()> {
        let i64t = self.ctx.i64_type();
        for (r, _) in gs
            .regions
            .iter()
            .enumerate()
            .filter(|(_, g)| g.first == idx)
        {
            let args: Vec<BasicMetadataValueEnum> = plan
                .iter()
                .map(|&p| p.into())
                .chain([i64t.const_int(r as u64, false).into()])
                .collect();
            llvm(self.builder.build_call(gs.fill, &args, ""))?;
        }
        Ok(())
    }

    /// After the op of layout index `idx` of a dynamic entry point: the injected fault
    /// (tests: after the record holding the op's first result, `fault` when it is in the
    /// slab), then the canaries of every buffer live at the op, at their run-time ends.
    pub(crate) fn dyn_guard_after(
        &self,
        gs: &DynGuarded<'ctx>,
        gd: &Guard,
        func: &Function,
        st: &Storage,
        plan: [PointerValue<'ctx>; 3],
        idx: usize,
    ) -> R<()> {
        let i64t = self.ctx.i64_type();
        let call = |f: FunctionValue<'ctx>, r: usize, extra: &[BasicMetadataValueEnum<'ctx>]| {
            let mut args: Vec<BasicMetadataValueEnum> = plan.iter().map(|&p| p.into()).collect();
            args.push(i64t.const_int(r as u64, false).into());
            args.extend_from_slice(extra);
            llvm(self.builder.build_call(f, &args, "")).map(|_| ())
        };
        let op = func.ops_in_order().nth(idx).map(|(_, d)| d);
        let first = op.and_then(|d| d.results.first().copied());
        if let (Some(n), Some(v)) = (&gd.fault_after, first) {
            if func.values[v].name == n.trim_start_matches('%') {
                let loc = st.of(func, v)?;
                let r = gs
                    .regions
                    .iter()
                    .position(|g| g.first <= idx && idx <= g.last && g.offset == loc.offset)
                    .filter(|_| loc.base == Base::Slab)
                    .ok_or_else(|| {
                        CodegenError::Llvm(format!(
                            "guard fault: the result of op #{idx} is not a buffer of the slab"
                        ))
                    })?;
                call(gs.fault, r, &[])?;
            }
        }
        let (op_name, result) = match op {
            Some(d) => (
                d.op.name().to_string(),
                d.results
                    .first()
                    .map(|&r| func.value_name(r))
                    .unwrap_or_default(),
            ),
            None => ("return".to_string(), String::new()),
        };
        let live: Vec<usize> = (0..gs.regions.len())
            .filter(|&r| gs.regions[r].first <= idx && idx <= gs.regions[r].last)
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let s_op = llvm(self.builder.build_global_string_ptr(&op_name, "op"))?;
        let s_res = llvm(self.builder.build_global_string_ptr(&result, "res"))?;
        for r in live {
            call(
                gs.check,
                r,
                &[
                    i64t.const_int(idx as u64, false).into(),
                    s_op.as_pointer_value().into(),
                    s_res.as_pointer_value().into(),
                ],
            )?;
        }
        Ok(())
    }
}
