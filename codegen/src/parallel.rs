//! Multi-threaded kernels (issue 20): an op's output is cut at compile time into *tiles*
//! (images × chunks of output channels, groups or GEMM column blocks), each computed by its
//! own copy of the op's shape-specialised kernel body, with constant extents. The cut depends
//! only on the op's shape, never on the thread count, so every output element is computed by
//! exactly the same instructions whether one thread runs every tile or N threads share them:
//! outputs are bitwise identical for every N.
//!
//! A tiled kernel is `void k(float *args..., int64_t begin, int64_t end)` computing tiles
//! `begin..end`. The entry points call it in one of two ways:
//! - `<model>_run` (and `_run_at`, the JIT's entry): `k(args..., 0, tiles)` on the calling
//!   thread;
//! - `<model>_run_parallel(inputs, outputs, slab, parallel_for, pool)`: the arguments are
//!   stored in a context array and `parallel_for(pool, body, ctx, tiles)` is called, where
//!   `body(ctx, begin, end)` (generated per kernel, [`Gen::tile_body`]) loads them and runs
//!   `k(args..., begin, end)`. `parallel_for` must call `body` on disjoint ranges covering
//!   `0..tiles` and return once every call has returned; which thread runs which range does
//!   not matter. The executable passes its pthread pool (`exe_main.c`); a library user lends
//!   their own.

use crate::nest::{llvm, K, R};
use crate::{Arg, CodegenError, Gen};
use inkwell::module::Linkage;
use inkwell::types::FunctionType;
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::AddressSpace;

/// No op is cut finer than this many FLOPs per tile (about 20 µs of one core): below it the
/// hand-off to another thread costs more than it saves.
pub const MIN_TILE_FLOPS: u64 = 2_000_000;
/// At most this many chunks per image: enough to balance 2–4 threads when tiles are taken
/// dynamically, few enough that each chunk keeps the kernel's own register tiles full.
const MAX_CHUNKS: i64 = 8;

/// How an op is cut: `count` chunks of `chunk` units per image (the last one `last` units).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tiling {
    pub images: i64,
    pub chunk: i64,
    pub count: i64,
    pub last: i64,
}

impl Tiling {
    /// `units` independent output units per image (channels, groups, columns), `flops` of
    /// work in all, chunks a multiple of `granule` units (the kernel's register tile), none
    /// below `min_flops` of work.
    pub(crate) fn new(images: i64, units: i64, granule: i64, flops: u64, min_flops: u64) -> Tiling {
        let images = images.max(1);
        let units = units.max(1);
        let per_image = flops / images as u64;
        let want = ((per_image / min_flops.max(1)) as i64).clamp(1, MAX_CHUNKS);
        let granule = granule.max(1);
        let chunk = ((units + want - 1) / want + granule - 1) / granule * granule;
        let chunk = chunk.clamp(1, units);
        let count = (units + chunk - 1) / chunk;
        Tiling {
            images,
            chunk,
            count,
            last: units - (count - 1) * chunk,
        }
    }

    /// Tiles in all.
    pub(crate) fn tiles(&self) -> i64 {
        self.images * self.count
    }

    /// Whether the op is worth more than one tile: otherwise it keeps a plain kernel.
    pub(crate) fn is_parallel(&self) -> bool {
        self.tiles() > 1
    }
}

impl<'a, 'ctx> Gen<'a, 'ctx> {
    /// A kernel like [`Gen::kernel`] with two trailing `i64` parameters, the range of tiles
    /// it computes; the entry points learn its tile count from [`Gen::tiles_of`].
    pub(crate) fn tiled_kernel(
        &self,
        name: &str,
        args: &[Arg],
        writes: &[bool],
        tiles: i64,
    ) -> FunctionValue<'ctx> {
        let f = self.kernel_with(name, args, writes, 2);
        self.parallel.borrow_mut().push((f, tiles as u64, None));
        f
    }

    /// The tile count of a tiled kernel, `None` for a plain one.
    pub(crate) fn tiles_of(&self, f: FunctionValue<'ctx>) -> Option<u64> {
        self.parallel
            .borrow()
            .iter()
            .find(|(k, _, _)| *k == f)
            .map(|&(_, t, _)| t)
    }

    /// Emits, in the tiled kernel `f` of `nargs` pointer arguments, the loop over its range of
    /// tiles; `body(image, first_unit, units)` emits one tile, `units` a constant (`chunk`,
    /// or `last` for each image's last chunk, emitted apart when it differs).
    pub(crate) fn for_tiles(
        &self,
        k: &K<'a, 'ctx>,
        f: FunctionValue<'ctx>,
        nargs: u32,
        t: Tiling,
        body: &mut dyn FnMut(IntValue<'ctx>, IntValue<'ctx>, i64) -> R<()>,
    ) -> R<()> {
        let param = |i: u32| -> R<IntValue<'ctx>> {
            f.get_nth_param(i)
                .map(|p| p.into_int_value())
                .ok_or_else(|| CodegenError::Llvm("missing tile range parameter".into()))
        };
        let (begin, end) = (param(nargs)?, param(nargs + 1)?);
        k.loop_between(begin, end, &mut |tile| {
            let image = llvm(k.b.build_int_signed_div(tile, k.c(t.count), "image"))?;
            let chunk = llvm(k.b.build_int_signed_rem(tile, k.c(t.count), "chunk"))?;
            let first = k.mul(chunk, t.chunk)?;
            if t.last == t.chunk {
                return body(image, first, t.chunk);
            }
            let is_last = llvm(k.b.build_int_compare(
                inkwell::IntPredicate::EQ,
                chunk,
                k.c(t.count - 1),
                "is_last",
            ))?;
            k.if_else(is_last, &mut |last| {
                body(image, first, if last { t.last } else { t.chunk })
            })
        })
    }

    /// `void parallel_for(void *pool, void (*body)(void *, int64_t, int64_t), void *ctx,
    /// int64_t tiles)`, the callback `<model>_run_parallel` takes.
    pub(crate) fn parallel_for_type(&self) -> FunctionType<'ctx> {
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let i64t = self.ctx.i64_type();
        let body = self.body_type().ptr_type(AddressSpace::default());
        self.ctx
            .void_type()
            .fn_type(&[i8p.into(), body.into(), i8p.into(), i64t.into()], false)
    }

    fn body_type(&self) -> FunctionType<'ctx> {
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let i64t = self.ctx.i64_type();
        self.ctx
            .void_type()
            .fn_type(&[i8p.into(), i64t.into(), i64t.into()], false)
    }

    /// `void <kernel>_tiles(void *ctx, int64_t begin, int64_t end)`: the kernel's pointer
    /// arguments read from the array `ctx`, then the kernel on `begin..end`. Made once per
    /// kernel; the builder's position is kept.
    fn tile_body(&self, f: FunctionValue<'ctx>) -> R<FunctionValue<'ctx>> {
        if let Some(b) = self
            .parallel
            .borrow()
            .iter()
            .find(|(k, _, _)| *k == f)
            .and_then(|&(_, _, b)| b)
        {
            return Ok(b);
        }
        let here = self.builder.get_insert_block();
        let name = format!("{}_tiles", f.get_name().to_string_lossy());
        let b = self
            .module
            .add_function(&name, self.body_type(), Some(Linkage::Internal));
        self.attrs(b);
        let entry = self.ctx.append_basic_block(b, "entry");
        self.builder.position_at_end(entry);
        let k = self.k(b);
        let fp = self.ctx.f32_type().ptr_type(AddressSpace::default());
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let ctx = self.param(b, 0)?;
        let ctx = llvm(self.builder.build_pointer_cast(
            ctx,
            i8p.ptr_type(AddressSpace::default()),
            "ctx",
        ))?;
        let nargs = f.count_params() - 2;
        let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
        for i in 0..nargs {
            let q = k.gep(ctx, k.c(i as i64))?;
            let p = llvm(self.builder.build_load(q, "arg"))?.into_pointer_value();
            args.push(llvm(self.builder.build_pointer_cast(p, fp, "f"))?.into());
        }
        for i in 1..3 {
            let v = b
                .get_nth_param(i)
                .ok_or_else(|| CodegenError::Llvm("missing tile range parameter".into()))?;
            args.push(v.into());
        }
        llvm(self.builder.build_call(f, &args, ""))?;
        llvm(self.builder.build_return(None))?;
        if let Some(e) = self
            .parallel
            .borrow_mut()
            .iter_mut()
            .find(|(k, _, _)| *k == f)
        {
            e.2 = Some(b);
        }
        if let Some(h) = here {
            self.builder.position_at_end(h);
        }
        Ok(b)
    }

    /// One kernel call of an entry point. A tiled kernel runs on the calling thread over all
    /// its tiles when `pfor` is `None`; else its arguments go to `ctx` (an array of at least
    /// as many pointers) and `parallel_for(pool, body, ctx, tiles)` runs it.
    pub(crate) fn call_kernel(
        &self,
        kernel: FunctionValue<'ctx>,
        mut args: Vec<BasicMetadataValueEnum<'ctx>>,
        pfor: Option<ParallelFor<'ctx>>,
    ) -> R<()> {
        let Some(tiles) = self.tiles_of(kernel) else {
            llvm(self.builder.build_call(kernel, &args, ""))?;
            return Ok(());
        };
        let i64t = self.ctx.i64_type();
        let Some(pf) = pfor else {
            args.push(i64t.const_zero().into());
            args.push(i64t.const_int(tiles, false).into());
            llvm(self.builder.build_call(kernel, &args, ""))?;
            return Ok(());
        };
        let body = self.tile_body(kernel)?;
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        for (i, a) in args.iter().enumerate() {
            let BasicMetadataValueEnum::PointerValue(p) = *a else {
                return Err(CodegenError::Llvm(
                    "a kernel argument is not a pointer".into(),
                ));
            };
            let p = llvm(self.builder.build_pointer_cast(p, i8p, "a"))?;
            let i = i64t.const_int(i as u64, false);
            // SAFETY: `ctx` has room for every argument of the widest kernel (see callers).
            let q = llvm(unsafe { self.builder.build_in_bounds_gep(pf.ctx, &[i], "slot") })?;
            llvm(self.builder.build_store(q, p))?;
        }
        let f = inkwell::values::CallableValue::try_from(pf.function)
            .map_err(|_| CodegenError::Llvm("parallel_for is not a function pointer".into()))?;
        let ctx = llvm(self.builder.build_pointer_cast(pf.ctx, i8p, "ctx"))?;
        let body = body.as_global_value().as_pointer_value();
        llvm(self.builder.build_call(
            f,
            &[
                pf.pool.into(),
                body.into(),
                ctx.into(),
                i64t.const_int(tiles, false).into(),
            ],
            "",
        ))?;
        Ok(())
    }

    /// An array of `n` pointers on the stack of the function being built, for
    /// [`ParallelFor::ctx`]; emitted at the builder's position (an entry block).
    pub(crate) fn ctx_array(&self, n: u32) -> R<PointerValue<'ctx>> {
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let arr = llvm(self.builder.build_array_alloca(
            i8p,
            self.ctx.i64_type().const_int(n.max(1).into(), false),
            "ctx",
        ))?;
        Ok(arr)
    }

    /// The most pointer arguments of any tiled kernel (the size of a context array).
    pub(crate) fn max_tiled_args(&self) -> u32 {
        self.parallel
            .borrow()
            .iter()
            .map(|(f, _, _)| f.count_params().saturating_sub(2))
            .max()
            .unwrap_or(0)
    }
}

/// What `<model>_run_parallel` hands its tiled kernels: the `parallel_for` callback, the
/// caller's pool, and the context array the arguments are passed in.
#[derive(Clone, Copy)]
pub(crate) struct ParallelFor<'ctx> {
    pub function: PointerValue<'ctx>,
    pub pool: PointerValue<'ctx>,
    pub ctx: PointerValue<'ctx>,
}

/// A tiled kernel's `body(ctx, begin, end)`.
pub type BodyFn = unsafe extern "C" fn(*mut u8, i64, i64);
/// `parallel_for(pool, body, ctx, tiles)`.
pub type ForFn = unsafe extern "C" fn(*mut u8, BodyFn, *mut u8, i64);

/// A `parallel_for` for the JIT's tests: `pool` points to a thread count N; N scoped threads
/// (this one included) take the tiles one at a time.
///
/// # Safety
/// `pool` points to a `usize`; `body` and `ctx` are a generated kernel's body and context.
pub unsafe extern "C" fn rust_parallel_for(pool: *mut u8, body: BodyFn, ctx: *mut u8, tiles: i64) {
    let threads = *(pool as *const usize);
    let next = std::sync::atomic::AtomicI64::new(0);
    // The context is read-only to the bodies and outlives the scope.
    let ctx = ctx as usize;
    let take = || loop {
        let t = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if t >= tiles {
            break;
        }
        // SAFETY: the caller's contract: a generated body on its own context.
        unsafe { body(ctx as *mut u8, t, t + 1) };
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(take);
        }
        take();
    });
}
