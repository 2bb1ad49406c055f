//! A small loop-nest builder over inkwell: counted loops, index arithmetic, scalar and vector
//! loads and stores, and the scalar math the kernels need. Every kernel is written with it
//! rather than with raw instructions.

use crate::CodegenError;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Module;
use inkwell::types::{FloatType, IntType, VectorType};
use inkwell::values::{
    BasicValue, BasicValueEnum, FloatMathValue, FloatValue, FunctionValue, IntValue, PointerValue,
    VectorValue,
};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};

pub type R<T> = Result<T, CodegenError>;

/// The body of [`K::loop_carry`]: induction variable and carried values in, next values out.
pub type CarryBody<'f, 'ctx> =
    dyn FnMut(IntValue<'ctx>, &[BasicValueEnum<'ctx>]) -> R<Vec<BasicValueEnum<'ctx>>> + 'f;

/// Turns inkwell's builder errors into [`CodegenError::Llvm`].
pub fn llvm<T, E: std::fmt::Display>(r: Result<T, E>) -> R<T> {
    r.map_err(|e| CodegenError::Llvm(e.to_string()))
}

/// The builder positioned inside one kernel function.
pub struct K<'a, 'ctx> {
    pub ctx: &'ctx Context,
    pub module: &'a Module<'ctx>,
    pub b: &'a Builder<'ctx>,
    pub func: FunctionValue<'ctx>,
    pub i64t: IntType<'ctx>,
    pub f32t: FloatType<'ctx>,
}

impl<'a, 'ctx> K<'a, 'ctx> {
    pub fn new(
        ctx: &'ctx Context,
        module: &'a Module<'ctx>,
        b: &'a Builder<'ctx>,
        func: FunctionValue<'ctx>,
    ) -> Self {
        K {
            ctx,
            module,
            b,
            func,
            i64t: ctx.i64_type(),
            f32t: ctx.f32_type(),
        }
    }

    pub fn c(&self, v: i64) -> IntValue<'ctx> {
        self.i64t.const_int(v as u64, true)
    }

    pub fn f(&self, v: f64) -> FloatValue<'ctx> {
        self.f32t.const_float(v)
    }

    pub fn add(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        llvm(self.b.build_int_add(a, b, "i"))
    }

    pub fn mul(&self, a: IntValue<'ctx>, k: i64) -> R<IntValue<'ctx>> {
        if k == 1 {
            return Ok(a);
        }
        llvm(self.b.build_int_mul(a, self.c(k), "i"))
    }

    /// `base + Σ ivs[d] * strides[d]`.
    pub fn index(&self, base: i64, ivs: &[IntValue<'ctx>], strides: &[i64]) -> R<IntValue<'ctx>> {
        let mut acc = self.c(base);
        for (&iv, &s) in ivs.iter().zip(strides) {
            if s != 0 {
                let t = self.mul(iv, s)?;
                acc = self.add(acc, t)?;
            }
        }
        Ok(acc)
    }

    pub fn gep(&self, p: PointerValue<'ctx>, i: IntValue<'ctx>) -> R<PointerValue<'ctx>> {
        // SAFETY: every index the kernels compute lies inside the tensor the pointer starts
        // (the extents are the verified static shapes).
        llvm(unsafe { self.b.build_in_bounds_gep(p, &[i], "p") })
    }

    pub fn ld(&self, p: PointerValue<'ctx>, i: IntValue<'ctx>) -> R<FloatValue<'ctx>> {
        let q = self.gep(p, i)?;
        Ok(llvm(self.b.build_load(q, "x"))?.into_float_value())
    }

    pub fn st(&self, p: PointerValue<'ctx>, i: IntValue<'ctx>, v: FloatValue<'ctx>) -> R<()> {
        let q = self.gep(p, i)?;
        llvm(self.b.build_store(q, v))?;
        Ok(())
    }

    pub fn vty(&self, w: u32) -> VectorType<'ctx> {
        self.f32t.vec_type(w)
    }

    /// A `<w x float>` load at element `i` (4-byte aligned).
    pub fn ldv(&self, p: PointerValue<'ctx>, i: IntValue<'ctx>, w: u32) -> R<VectorValue<'ctx>> {
        let q = self.gep(p, i)?;
        let vp = llvm(self.b.build_pointer_cast(
            q,
            self.vty(w).ptr_type(AddressSpace::default()),
            "vp",
        ))?;
        let v = llvm(self.b.build_load(vp, "v"))?;
        if let Some(inst) = v.as_instruction_value() {
            llvm(inst.set_alignment(4))?;
        }
        Ok(v.into_vector_value())
    }

    pub fn stv(&self, p: PointerValue<'ctx>, i: IntValue<'ctx>, v: VectorValue<'ctx>) -> R<()> {
        let q = self.gep(p, i)?;
        let vp = llvm(self.b.build_pointer_cast(
            q,
            v.get_type().ptr_type(AddressSpace::default()),
            "vp",
        ))?;
        let inst = llvm(self.b.build_store(vp, v))?;
        llvm(inst.set_alignment(4))?;
        Ok(())
    }

    /// The constant `<w x i1>` mask of the first `n` lanes.
    fn first_lanes(&self, w: u32, n: u32) -> VectorValue<'ctx> {
        let on: Vec<bool> = (0..w).map(|l| l < n).collect();
        self.lane_mask(&on)
    }

    pub fn lane_mask(&self, on: &[bool]) -> VectorValue<'ctx> {
        let i1 = self.ctx.bool_type();
        let bits: Vec<_> = on
            .iter()
            .map(|&b| i1.const_int(u64::from(b), false))
            .collect();
        VectorType::const_vector(&bits)
    }

    /// A `<w x float>` load of the first `n` lanes at element `i` (`llvm.masked.load`: the
    /// other lanes are zero and their addresses are not touched).
    pub fn ldv_masked(
        &self,
        p: PointerValue<'ctx>,
        i: IntValue<'ctx>,
        w: u32,
        n: u32,
    ) -> R<VectorValue<'ctx>> {
        let on: Vec<bool> = (0..w).map(|l| l < n).collect();
        self.ldv_lanes(p, i, &on)
    }

    /// A `<on.len() x float>` load at element `i` of the lanes where `on` holds, zero elsewhere.
    /// The address is formed without `inbounds`: lanes that are off may lie outside the
    /// tensor (the zero padding of a convolution), and are never accessed.
    /// Lanes `0, s, 2s, …` of `wide` (`s·w` lanes): the first `w`, as one vector.
    pub fn every(&self, wide: VectorValue<'ctx>, s: i64, w: u32) -> R<VectorValue<'ctx>> {
        let i32t = self.ctx.i32_type();
        let mask: Vec<_> = (0..w)
            .map(|l| i32t.const_int((l as i64 * s) as u64, false))
            .collect();
        llvm(self.b.build_shuffle_vector(
            wide,
            wide.get_type().get_undef(),
            VectorType::const_vector(&mask),
            "every",
        ))
    }

    pub fn ldv_lanes(
        &self,
        p: PointerValue<'ctx>,
        i: IntValue<'ctx>,
        on: &[bool],
    ) -> R<VectorValue<'ctx>> {
        self.ldv_lanes_or(p, i, on, 0.0)
    }

    /// [`Self::ldv_lanes`] with `fill` in the lanes that are off.
    pub fn ldv_lanes_or(
        &self,
        p: PointerValue<'ctx>,
        i: IntValue<'ctx>,
        on: &[bool],
        fill: f64,
    ) -> R<VectorValue<'ctx>> {
        let vt = self.vty(on.len() as u32);
        if on.iter().all(|&b| b) {
            return self.ldv(p, i, on.len() as u32);
        }
        // SAFETY: a plain (not inbounds) GEP is defined for any offset.
        let q = llvm(unsafe { self.b.build_gep(p, &[i], "pm") })?;
        let vp = llvm(
            self.b
                .build_pointer_cast(q, vt.ptr_type(AddressSpace::default()), "vp"),
        )?;
        let f = self.intrinsic(
            "llvm.masked.load",
            &[vt.into(), vt.ptr_type(AddressSpace::default()).into()],
        )?;
        let r = llvm(self.b.build_call(
            f,
            &[
                vp.into(),
                self.ctx.i32_type().const_int(4, false).into(),
                self.lane_mask(on).into(),
                VectorType::const_vector(&vec![self.f32t.const_float(fill); on.len()]).into(),
            ],
            "ml",
        ))?;
        r.try_as_basic_value()
            .basic()
            .map(|v| v.into_vector_value())
            .ok_or_else(|| CodegenError::Llvm("masked load returned no value".into()))
    }

    /// Stores the first `n` lanes of `v` at element `i` (`llvm.masked.store`).
    pub fn stv_masked(
        &self,
        p: PointerValue<'ctx>,
        i: IntValue<'ctx>,
        v: VectorValue<'ctx>,
        n: u32,
    ) -> R<()> {
        let vt = v.get_type();
        let vp = llvm(self.b.build_pointer_cast(
            self.gep(p, i)?,
            vt.ptr_type(AddressSpace::default()),
            "vp",
        ))?;
        let f = self.intrinsic(
            "llvm.masked.store",
            &[vt.into(), vt.ptr_type(AddressSpace::default()).into()],
        )?;
        llvm(self.b.build_call(
            f,
            &[
                v.into(),
                vp.into(),
                self.ctx.i32_type().const_int(4, false).into(),
                self.first_lanes(vt.get_size(), n).into(),
            ],
            "",
        ))?;
        Ok(())
    }

    pub fn splat(&self, x: FloatValue<'ctx>, w: u32) -> R<VectorValue<'ctx>> {
        let mut v = self.vty(w).get_undef();
        for l in 0..w {
            v = llvm(self.b.build_insert_element(
                v,
                x,
                self.ctx.i32_type().const_int(l.into(), false),
                "s",
            ))?;
        }
        Ok(v)
    }

    /// The first `w` lanes of `v` summed as a pairwise tree (neighbours first, an odd one
    /// carried up): the matrix-vector rows' and the global mean's order.
    pub fn lane_sum(&self, v: VectorValue<'ctx>, w: u32) -> R<FloatValue<'ctx>> {
        let mut parts: Vec<FloatValue> = (0..w).map(|l| self.lane(v, l)).collect::<R<_>>()?;
        while parts.len() > 1 {
            parts = parts
                .chunks(2)
                .map(|p| {
                    if p.len() == 2 {
                        self.fadd(p[0], p[1])
                    } else {
                        Ok(p[0])
                    }
                })
                .collect::<R<_>>()?;
        }
        Ok(parts[0])
    }

    /// The vector of `v`'s type whose first `lanes` lanes are `f(l, lane l of v)`, one scalar
    /// at a time (the others undefined): an operation with no vector form applied per lane.
    pub fn map_lanes(
        &self,
        v: VectorValue<'ctx>,
        lanes: u32,
        f: &mut dyn FnMut(u32, FloatValue<'ctx>) -> R<FloatValue<'ctx>>,
    ) -> R<VectorValue<'ctx>> {
        let mut out = v.get_type().get_undef();
        for l in 0..lanes {
            let x = f(l, self.lane(v, l)?)?;
            out = llvm(self.b.build_insert_element(
                out,
                x,
                self.ctx.i32_type().const_int(l.into(), false),
                "o",
            ))?;
        }
        Ok(out)
    }

    pub fn lane(&self, v: VectorValue<'ctx>, l: u32) -> R<FloatValue<'ctx>> {
        Ok(llvm(self.b.build_extract_element(
            v,
            self.ctx.i32_type().const_int(l.into(), false),
            "l",
        ))?
        .into_float_value())
    }

    /// `for iv in lo..hi` (step 1) with constant bounds; the body gets the induction variable.
    pub fn loop_(&self, lo: i64, hi: i64, body: &mut dyn FnMut(IntValue<'ctx>) -> R<()>) -> R<()> {
        self.loop_step(lo, hi, 1, body)
    }

    pub fn loop_step(
        &self,
        lo: i64,
        hi: i64,
        step: i64,
        body: &mut dyn FnMut(IntValue<'ctx>) -> R<()>,
    ) -> R<()> {
        if lo >= hi {
            return Ok(());
        }
        if lo + step >= hi {
            return body(self.c(lo));
        }
        let pre = self
            .b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))?;
        let head = self.ctx.append_basic_block(self.func, "loop");
        let exit = self.ctx.append_basic_block(self.func, "exit");
        llvm(self.b.build_unconditional_branch(head))?;
        self.b.position_at_end(head);
        let phi = llvm(self.b.build_phi(self.i64t, "iv"))?;
        phi.add_incoming(&[(&self.c(lo), pre)]);
        let iv = phi.as_basic_value().into_int_value();
        body(iv)?;
        let next = llvm(self.b.build_int_add(iv, self.c(step), "next"))?;
        let done = llvm(
            self.b
                .build_int_compare(IntPredicate::SGE, next, self.c(hi), "done"),
        )?;
        let latch = self
            .b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))?;
        phi.add_incoming(&[(&next, latch)]);
        llvm(self.b.build_conditional_branch(done, exit, head))?;
        self.b.position_at_end(exit);
        Ok(())
    }

    /// `for iv in lo..hi` (step 1) with bounds known only at run time (a parallel kernel's
    /// range of tiles); runs no iteration when `lo >= hi`.
    pub fn loop_between(
        &self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        body: &mut dyn FnMut(IntValue<'ctx>) -> R<()>,
    ) -> R<()> {
        let pre = self
            .b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))?;
        let head = self.ctx.append_basic_block(self.func, "tiles");
        let exit = self.ctx.append_basic_block(self.func, "tiles_done");
        let any = llvm(self.b.build_int_compare(IntPredicate::SLT, lo, hi, "any"))?;
        llvm(self.b.build_conditional_branch(any, head, exit))?;
        self.b.position_at_end(head);
        let phi = llvm(self.b.build_phi(self.i64t, "tile"))?;
        phi.add_incoming(&[(&lo, pre)]);
        let iv = phi.as_basic_value().into_int_value();
        body(iv)?;
        let next = llvm(self.b.build_int_add(iv, self.c(1), "next"))?;
        let done = llvm(
            self.b
                .build_int_compare(IntPredicate::SGE, next, hi, "done"),
        )?;
        let latch = self
            .b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))?;
        phi.add_incoming(&[(&next, latch)]);
        llvm(self.b.build_conditional_branch(done, exit, head))?;
        self.b.position_at_end(exit);
        Ok(())
    }

    /// `for iv in lo..hi step step` carrying values (registers through phis): the body maps
    /// the carried values of one iteration to those of the next; returns the final ones.
    pub fn loop_carry(
        &self,
        lo: i64,
        hi: i64,
        step: i64,
        init: Vec<BasicValueEnum<'ctx>>,
        body: &mut CarryBody<'_, 'ctx>,
    ) -> R<Vec<BasicValueEnum<'ctx>>> {
        if lo >= hi {
            return Ok(init);
        }
        if lo + step >= hi {
            return body(self.c(lo), &init);
        }
        let pre = self
            .b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))?;
        let head = self.ctx.append_basic_block(self.func, "loop");
        let exit = self.ctx.append_basic_block(self.func, "exit");
        llvm(self.b.build_unconditional_branch(head))?;
        self.b.position_at_end(head);
        let phi = llvm(self.b.build_phi(self.i64t, "iv"))?;
        phi.add_incoming(&[(&self.c(lo), pre)]);
        let mut phis = Vec::with_capacity(init.len());
        for v in &init {
            let p = llvm(self.b.build_phi(v.get_type(), "acc"))?;
            p.add_incoming(&[(v, pre)]);
            phis.push(p);
        }
        let iv = phi.as_basic_value().into_int_value();
        let cur: Vec<BasicValueEnum<'ctx>> = phis.iter().map(|p| p.as_basic_value()).collect();
        let next_vals = body(iv, &cur)?;
        let next = llvm(self.b.build_int_add(iv, self.c(step), "next"))?;
        let done = llvm(
            self.b
                .build_int_compare(IntPredicate::SGE, next, self.c(hi), "done"),
        )?;
        let latch = self
            .b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Llvm("builder not positioned".into()))?;
        phi.add_incoming(&[(&next, latch)]);
        for (p, v) in phis.iter().zip(&next_vals) {
            p.add_incoming(&[(v, latch)]);
        }
        llvm(self.b.build_conditional_branch(done, exit, head))?;
        self.b.position_at_end(exit);
        Ok(next_vals)
    }

    /// Signed `max(a, lo)` then `min(_, hi)`.
    pub fn iclamp(&self, a: IntValue<'ctx>, lo: i64, hi: i64) -> R<IntValue<'ctx>> {
        let c = llvm(
            self.b
                .build_int_compare(IntPredicate::SLT, a, self.c(lo), "lt"),
        )?;
        let a = llvm(self.b.build_select(c, self.c(lo), a, "mx"))?.into_int_value();
        let c = llvm(
            self.b
                .build_int_compare(IntPredicate::SGT, a, self.c(hi), "gt"),
        )?;
        Ok(llvm(self.b.build_select(c, self.c(hi), a, "mn"))?.into_int_value())
    }

    /// `cond ? a : b` on floats.
    pub fn fsel(
        &self,
        cond: IntValue<'ctx>,
        a: FloatValue<'ctx>,
        b: FloatValue<'ctx>,
    ) -> R<FloatValue<'ctx>> {
        Ok(llvm(self.b.build_select(cond, a, b, "sel"))?.into_float_value())
    }

    /// Runs `body` only when `cond` holds.
    pub fn when(&self, cond: IntValue<'ctx>, body: &mut dyn FnMut() -> R<()>) -> R<()> {
        let then = self.ctx.append_basic_block(self.func, "then");
        let join = self.ctx.append_basic_block(self.func, "join");
        llvm(self.b.build_conditional_branch(cond, then, join))?;
        self.b.position_at_end(then);
        body()?;
        llvm(self.b.build_unconditional_branch(join))?;
        self.b.position_at_end(join);
        Ok(())
    }

    /// `if cond { body(true) } else { body(false) }`.
    pub fn if_else(&self, cond: IntValue<'ctx>, body: &mut dyn FnMut(bool) -> R<()>) -> R<()> {
        let yes = self.ctx.append_basic_block(self.func, "then");
        let no = self.ctx.append_basic_block(self.func, "else");
        let join = self.ctx.append_basic_block(self.func, "join");
        llvm(self.b.build_conditional_branch(cond, yes, no))?;
        self.b.position_at_end(yes);
        body(true)?;
        llvm(self.b.build_unconditional_branch(join))?;
        self.b.position_at_end(no);
        body(false)?;
        llvm(self.b.build_unconditional_branch(join))?;
        self.b.position_at_end(join);
        Ok(())
    }

    /// `lo <= i < hi` for a signed index.
    pub fn in_range(&self, i: IntValue<'ctx>, lo: i64, hi: i64) -> R<IntValue<'ctx>> {
        let a = llvm(
            self.b
                .build_int_compare(IntPredicate::SGE, i, self.c(lo), "ge"),
        )?;
        let b = llvm(
            self.b
                .build_int_compare(IntPredicate::SLT, i, self.c(hi), "lt"),
        )?;
        llvm(self.b.build_and(a, b, "in"))
    }

    // ---- scalar float math ----

    pub fn fadd(&self, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        llvm(self.b.build_float_add(a, b, "f"))
    }
    pub fn fsub(&self, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        llvm(self.b.build_float_sub(a, b, "f"))
    }
    pub fn fmul(&self, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        llvm(self.b.build_float_mul(a, b, "f"))
    }
    pub fn fdiv(&self, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        llvm(self.b.build_float_div(a, b, "f"))
    }

    /// `a * b + c`, fused where the target has FMA (`llvm.fmuladd`), scalar or vector.
    pub fn fma<V>(&self, a: V, b: V, c: V) -> R<V>
    where
        V: BasicValue<'ctx> + Copy + TryFrom<inkwell::values::BasicValueEnum<'ctx>>,
    {
        let ty = a.as_basic_value_enum().get_type();
        let f = self.intrinsic("llvm.fmuladd", &[ty])?;
        let r = llvm(self.b.build_call(
            f,
            &[
                a.as_basic_value_enum().into(),
                b.as_basic_value_enum().into(),
                c.as_basic_value_enum().into(),
            ],
            "fma",
        ))?;
        r.try_as_basic_value()
            .basic()
            .and_then(|v| V::try_from(v).ok())
            .ok_or_else(|| CodegenError::Llvm("fmuladd returned no value".into()))
    }

    pub fn intrinsic(
        &self,
        name: &str,
        tys: &[inkwell::types::BasicTypeEnum<'ctx>],
    ) -> R<FunctionValue<'ctx>> {
        Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, tys))
            .ok_or_else(|| CodegenError::Llvm(format!("no intrinsic {name}")))
    }

    fn call1(&self, f: FunctionValue<'ctx>, x: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        let r = llvm(self.b.build_call(f, &[x.into()], "c"))?;
        r.try_as_basic_value()
            .basic()
            .map(|v| v.into_float_value())
            .ok_or_else(|| CodegenError::Llvm("call returned no value".into()))
    }

    /// `llvm.exp` (a libm call); f32 element-wise code uses the inline [`K::exp`] instead.
    pub fn exp_libm(&self, x: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        let f = self.intrinsic("llvm.exp", &[x.get_type().into()])?;
        self.call1(f, x)
    }

    pub fn sqrt(&self, x: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        let f = self.intrinsic("llvm.sqrt", &[x.get_type().into()])?;
        self.call1(f, x)
    }

    /// `tanhf` from the C library (the reference uses the same function).
    pub fn tanh(&self, x: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        let f = match self.module.get_function("tanhf") {
            Some(f) => f,
            None => {
                let ty = self.f32t.fn_type(&[self.f32t.into()], false);
                self.module.add_function("tanhf", ty, None)
            }
        };
        self.call1(f, x)
    }

    /// `x < t ? a : b` (false on NaN, so NaN flows through the `b` side).
    pub fn select_lt(
        &self,
        x: FloatValue<'ctx>,
        t: FloatValue<'ctx>,
        a: FloatValue<'ctx>,
        b: FloatValue<'ctx>,
    ) -> R<FloatValue<'ctx>> {
        let c = llvm(self.b.build_float_compare(FloatPredicate::OLT, x, t, "lt"))?;
        Ok(llvm(self.b.build_select(c, a, b, "sel"))?.into_float_value())
    }

    /// `x > t ? a : b`.
    pub fn select_gt(
        &self,
        x: FloatValue<'ctx>,
        t: FloatValue<'ctx>,
        a: FloatValue<'ctx>,
        b: FloatValue<'ctx>,
    ) -> R<FloatValue<'ctx>> {
        let c = llvm(self.b.build_float_compare(FloatPredicate::OGT, x, t, "gt"))?;
        Ok(llvm(self.b.build_select(c, a, b, "sel"))?.into_float_value())
    }

    /// Max that lets NaN through (`v > m || v is NaN ? v : m`).
    pub fn max_nan(&self, m: FloatValue<'ctx>, v: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(self.max_nan_of(m, v)?.into_float_value())
    }

    /// [`Self::max_nan`] of scalars or lane by lane of vectors: the reference's step
    /// `v > m || v is NaN ? v : m`, so a NaN `m` stays against a number and a later NaN
    /// replaces it (issue 20: one `fcmp ugt` select, true when `m` is NaN, let the next
    /// number replace a NaN, which the interpreter keeps). `v > m ? v : m` (ordered) is
    /// `vmaxps v, m`; the NaN select depends on `v` alone.
    pub fn max_nan_of<T>(&self, m: T, v: T) -> R<BasicValueEnum<'ctx>>
    where
        T: FloatMathValue<'ctx> + BasicValue<'ctx> + Copy,
    {
        let gt = llvm(self.b.build_float_compare(FloatPredicate::OGT, v, m, "gt"))?;
        let max = llvm(self.b.build_select(gt, v, m, "max"))?;
        let nan = llvm(self.b.build_float_compare(FloatPredicate::UNO, v, v, "nan"))?;
        llvm(
            self.b
                .build_select(nan, v.as_basic_value_enum(), max, "max"),
        )
    }

    /// `min(max(x, lo), hi)` with NaN kept, as the reference's `clip`.
    pub fn clip(&self, x: FloatValue<'ctx>, lo: f64, hi: f64) -> R<FloatValue<'ctx>> {
        let t = self.select_gt(x, self.f(hi), self.f(hi), x)?;
        self.select_lt(x, self.f(lo), self.f(lo), t)
    }
}
