//! A second entry point, `<model>_run_at(inputs, outputs, slab, offsets)`, that calls the same
//! kernels as `<model>_run` but takes every buffer's slab offset from `offsets` (one per
//! `alloc_tensor`, in layout order) instead of the compiled-in plan.
//!
//! Kernels are specialised to shapes, never to offsets, and their `noalias` facts hold under
//! every valid plan (two buffers live at the same op never share bytes), so one compiled
//! module runs any plan of the same bufferized structure. Tests use it to run a model under
//! every offset strategy with one compilation ("plans cannot change results", issue 6).

use crate::guard::{regions, Region};
use crate::kernels::common::Call;
use crate::nest::{llvm, R};
use crate::storage::{Base, Storage};
use crate::{CodegenError, Gen};
use inkwell::values::PointerValue;
use inkwell::AddressSpace;
use tir_ir::{Function, Op};

/// The offset of every `alloc_tensor`, in layout order: what `<model>_run_at` takes.
pub fn alloc_offsets(func: &Function) -> Vec<u64> {
    func.ops_in_order()
        .filter_map(|(_, d)| match d.op {
            Op::AllocTensor { offset } => Some(offset),
            _ => None,
        })
        .collect()
}

/// The bufferized structure of `func` with the plan's numbers left out (slab size and
/// `alloc_tensor` offsets): two plans with the same structure run on the same kernels.
pub fn structure(func: &Function) -> String {
    let mut s = String::new();
    for (_, d) in func.ops_in_order() {
        let name = match d.op {
            Op::AllocTensor { .. } => "alloc_tensor".to_string(),
            Op::AllocSlab { .. } => "alloc_slab".to_string(),
            // Its sizes may be the dims' values (`[{n}, 120, -1]` specialized), and the result's
            // type says them anyway.
            Op::Reshape { .. } => "reshape".to_string(),
            ref op => format!("{op:?}"),
        };
        s += &format!("{name} {:?} {:?} {:?}\n", d.operands, d.outs, d.results);
    }
    s += &format!("return {:?}\n", func.returns);
    s
}

/// The buffer holding slab byte `offset` while the op of layout index `idx` runs.
fn holder(regs: &[Region], idx: usize, offset: u64) -> Option<&Region> {
    regs.iter().find(|r| {
        r.first <= idx
            && idx <= r.last
            && r.offset <= offset
            && (offset < r.offset + r.size || offset == r.offset)
    })
}

impl<'a, 'ctx> Gen<'a, 'ctx> {
    /// `void <name>_run_at(const void *const *inputs, void *const *outputs, void *slab,
    /// const uint64_t *offsets)`.
    pub(crate) fn emit_run_at(
        &self,
        name: &str,
        func: &Function,
        st: &Storage,
        per_op: &[Vec<Call<'ctx>>],
        globals: &[PointerValue<'ctx>],
    ) -> R<()> {
        let regs = regions(func, st);
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let i8pp = i8p.ptr_type(AddressSpace::default());
        let i64p = self.ctx.i64_type().ptr_type(AddressSpace::default());
        let ty = self
            .ctx
            .void_type()
            .fn_type(&[i8pp.into(), i8pp.into(), i8p.into(), i64p.into()], false);
        let f = self
            .module
            .add_function(&format!("{name}_run_at"), ty, None);
        self.attrs(f);
        let entry = self.ctx.append_basic_block(f, "entry");
        self.builder.position_at_end(entry);
        let k = self.k(f);
        let (inputs, outputs, slab, offsets) = (
            self.param(f, 0)?,
            self.param(f, 1)?,
            self.param(f, 2)?,
            self.param(f, 3)?,
        );
        let fp = self.ctx.f32_type().ptr_type(AddressSpace::default());
        for (idx, calls) in per_op.iter().enumerate() {
            for (kernel, locs) in calls {
                let mut args = Vec::with_capacity(locs.len());
                for loc in locs {
                    let (base, off) = match loc.base {
                        Base::Slab => {
                            let r = holder(&regs, idx, loc.offset).ok_or_else(|| {
                                CodegenError::Llvm(format!(
                                    "op #{idx}: slab byte {} is in no live buffer",
                                    loc.offset
                                ))
                            })?;
                            let q = k.gep(offsets, k.c(r.alloc as i64))?;
                            let at = llvm(self.builder.build_load(q, "at"))?.into_int_value();
                            let at = k.add(at, k.c((loc.offset - r.offset) as i64))?;
                            (slab, at)
                        }
                        Base::Input(i) | Base::Output(i) => {
                            let arr = if matches!(loc.base, Base::Input(_)) {
                                inputs
                            } else {
                                outputs
                            };
                            let q = k.gep(arr, k.c(i as i64))?;
                            let p = llvm(self.builder.build_load(q, "base"))?.into_pointer_value();
                            (p, k.c(loc.offset as i64))
                        }
                        Base::Weight(w) => (globals[w], k.c(loc.offset as i64)),
                    };
                    // SAFETY: the caller's offsets are a valid plan of this structure.
                    let p = llvm(unsafe { self.builder.build_in_bounds_gep(base, &[off], "t") })?;
                    args.push(llvm(self.builder.build_pointer_cast(p, fp, "f"))?.into());
                }
                self.call_kernel(*kernel, args, None)?;
            }
        }
        llvm(self.builder.build_return(None))?;
        Ok(())
    }
}
