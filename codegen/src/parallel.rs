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

/// No op is cut finer than this much work per tile (FLOPs, or FLOP-equivalents of memory
/// traffic: [`work`]), about 15 µs of one core: below it the hand-off to another thread and
/// the lost cache locality cost more than they save.
pub const MIN_TILE_FLOPS: u64 = 1_000_000;
/// How much lower the least work per tile is for a cut into blocks of whole channels, groups
/// or planes whose traffic is mostly their own ([`channel_min_work`]): a quarter, about 4 µs
/// of one core, still several times the 0.5–1.8 µs a spinning worker takes to claim its first
/// tile (docs/codegen.md "Threads").
const CHANNEL_CUT_DIVISOR: u64 = 4;
/// At most this many chunks per image: enough to balance 2–8 threads when tiles are taken
/// dynamically, few enough that each chunk keeps the kernel's own register tiles full.
const MAX_CHUNKS: i64 = 8;
/// FLOPs one core does in the time it streams one byte from memory (about 80 GFLOP/s of
/// FMA against 20 GB/s of streaming on these cores): what converts an op's memory traffic
/// into the same currency as its arithmetic, so that a memory-bound op (a depthwise
/// convolution, a matrix–vector product) is cut as finely as its time, not its FLOPs, asks.
const FLOPS_PER_BYTE: u64 = 4;

/// The work of an op for cutting it into tiles: its FLOPs or its memory traffic (`bytes`
/// read and written, weights included) in FLOP-equivalents, whichever bounds its time.
pub(crate) fn work(flops: u64, bytes: u64) -> u64 {
    flops.max(bytes.saturating_mul(FLOPS_PER_BYTE))
}

/// The least work per tile (given the general one, [`MIN_TILE_FLOPS`] or the caller's) of a
/// cut whose tiles share little with each other or with the op before: a depthwise (or
/// grouped) convolution by groups, a convolution whose weights are most of its traffic by
/// output channels (each tile streams its own rows of the weights; the image, small, is read
/// by both), pools and row-wise ops by planes or rows (contiguous in NCHW). Such ops below the
/// general minimum ran whole on the calling thread — iris_landmark's 1×1 and 2×2
/// convolutions on 8×8 to 2×2 images, 4–16 µs each and bound by their weights' traffic, were
/// 30% of its one-thread time — while the second core waited (Amdahl: at most 1.5× on 2
/// threads). The cut still depends on the shape only, so the outputs stay the same bits for
/// every thread count.
pub(crate) fn channel_min_work(min_work: u64) -> u64 {
    (min_work / CHANNEL_CUT_DIVISOR).max(1)
}

/// How an op is cut: per image, `units` (channels, groups, columns) in `count` chunks of
/// whole `granule`s (the kernel's register tile), as equal as whole granules allow: of `G`
/// granules, chunk `c` starts at granule `⌊c·G/count⌋` (so chunks have `⌊G/count⌋` or one
/// more, spread evenly, and every half, quarter or eighth of the chunks holds its share to
/// within one granule), and the last chunk ends at `units` (its last granule may be
/// partial). Equal shares matter more than many chunks: with 2 threads, chunks of 64, 64, 64
/// and 4 columns give one thread twice the other's work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tiling {
    pub images: i64,
    pub units: i64,
    pub granule: i64,
    pub count: i64,
}

impl Tiling {
    /// `units` independent output units per image, `work` ([`work`]) in all, chunks of whole
    /// `granule`s, none below `min_work`. The count of chunks is a power of two (so that 2, 4
    /// or 8 threads get equal shares) at most [`MAX_CHUNKS`], and at most the granules.
    pub(crate) fn new(images: i64, units: i64, granule: i64, work: u64, min_work: u64) -> Tiling {
        let images = images.max(1);
        let units = units.max(1);
        let granule = granule.clamp(1, units);
        let granules = (units + granule - 1) / granule;
        let per_image = work / images as u64;
        let want = ((per_image / min_work.max(1)).min(MAX_CHUNKS as u64) as i64).max(1);
        // The largest power of two not above `want`: 1, 2, 4 or 8.
        let want = 1i64 << (63 - want.leading_zeros());
        Tiling {
            images,
            units,
            granule,
            count: want.min(granules),
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

    /// The units of the larger half of an image's chunks (the first `count / 2` against the
    /// rest: what each of two threads owns, [`crate::parallel`]'s shares), or all of them
    /// when the op is one chunk.
    pub(crate) fn larger_half(&self) -> i64 {
        if self.count < 2 {
            return self.units;
        }
        let mid = self.first(self.count / 2);
        mid.max(self.units - mid)
    }

    /// Whether two threads share this cut more equally than `other`'s by more than a sixteenth
    /// of the op: `other`'s larger half is a fraction of its units that exceeds this one's by
    /// more than 1/16. A smaller difference (13 blocks of 64 columns cut 384/400 against 96
    /// channels cut 48/48) is worth less than what the other cut keeps in each core's cache.
    pub(crate) fn halves_below(&self, other: &Tiling) -> bool {
        let (a, u) = (self.larger_half() as i128, self.units as i128);
        let (b, v) = (other.larger_half() as i128, other.units as i128);
        // b/v − a/u > 1/16
        16 * (b * u - a * v) > u * v
    }

    /// Granules in all.
    fn granules(&self) -> i64 {
        (self.units + self.granule - 1) / self.granule
    }

    /// The first unit of chunk `c` of an image.
    pub(crate) fn first(&self, c: i64) -> i64 {
        c * self.granules() / self.count * self.granule
    }

    /// The units of chunk `c` of an image.
    pub(crate) fn size(&self, c: i64) -> i64 {
        let end = if c + 1 == self.count {
            self.units
        } else {
            self.first(c + 1)
        };
        end - self.first(c)
    }
}

/// The body of [`Gen::units_kernel`]: the builder, the kernel's pointer parameters, the first
/// unit and the count of units to emit.
pub(crate) type UnitsBody<'f, 'a, 'ctx> =
    dyn FnMut(&K<'a, 'ctx>, &[PointerValue<'ctx>], IntValue<'ctx>, i64) -> R<()> + 'f;

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
        self.parallel
            .borrow_mut()
            .push((f, tiles as u64, Vec::new()));
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
    /// tiles; `body(image, first_unit, units)` emits one tile, `units` a constant: one body
    /// per distinct chunk size of [`Tiling`] (at most three: `q` granules, `q + 1`, and the
    /// last chunk).
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
        let q = t.granules() / t.count;
        let last = t.count - 1;
        // The sizes of chunks before the last: `q` granules or `q + 1`.
        let sizes: Vec<i64> = {
            let mut v: Vec<i64> = (0..last).map(|c| t.size(c)).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let last_size = t.size(last);
        k.loop_between(begin, end, &mut |tile| {
            let image = llvm(k.b.build_int_signed_div(tile, k.c(t.count), "image"))?;
            let chunk = llvm(k.b.build_int_signed_rem(tile, k.c(t.count), "chunk"))?;
            // Granule ⌊chunk·G/count⌋ and the next chunk's: their difference picks the size.
            let at = |c: IntValue<'ctx>| -> R<IntValue<'ctx>> {
                let cg = k.mul(c, t.granules())?;
                llvm(k.b.build_int_signed_div(cg, k.c(t.count), "granule"))
            };
            let g0 = at(chunk)?;
            let first = k.mul(g0, t.granule)?;
            if sizes.is_empty() || sizes == [last_size] {
                return body(image, first, last_size);
            }
            let is_last = llvm(k.b.build_int_compare(
                inkwell::IntPredicate::EQ,
                chunk,
                k.c(last),
                "is_last",
            ))?;
            k.if_else(is_last, &mut |l| {
                if l {
                    return body(image, first, last_size);
                }
                if let [one] = sizes.as_slice() {
                    return body(image, first, *one);
                }
                let g1 = at(k.add(chunk, k.c(1))?)?;
                let span = llvm(k.b.build_int_sub(g1, g0, "span"))?;
                let is_big = llvm(k.b.build_int_compare(
                    inkwell::IntPredicate::SGT,
                    span,
                    k.c(q),
                    "is_big",
                ))?;
                k.if_else(is_big, &mut |b| {
                    body(image, first, (q + b as i64) * t.granule)
                })
            })
        })
    }

    /// A kernel over `units` independent units (planes, rows) of `work` in all ([`work`]):
    /// cut into tiles of whole units when the work is worth it, otherwise a plain kernel.
    /// `body(k, params, first, count)` emits the loop over units `first..first + count`
    /// (`count` a constant) at the builder's position; it runs once for a plain kernel and
    /// once per distinct tile size for a tiled one.
    pub(crate) fn units_kernel(
        &self,
        name: &str,
        args: &[Arg],
        writes: &[bool],
        units: i64,
        work: u64,
        body: &mut UnitsBody<'_, 'a, 'ctx>,
    ) -> R<FunctionValue<'ctx>> {
        let t = Tiling::new(1, units, 1, work, channel_min_work(self.min_tile_flops));
        let f = if t.is_parallel() {
            self.tiled_kernel(name, args, writes, t.tiles())
        } else {
            self.kernel(name, args, writes)
        };
        let k = self.k(f);
        let ptrs: Vec<PointerValue<'ctx>> = (0..args.len() as u32)
            .map(|i| self.param(f, i))
            .collect::<R<_>>()?;
        if t.is_parallel() {
            self.for_tiles(&k, f, args.len() as u32, t, &mut |_, u0, n| {
                body(&k, &ptrs, u0, n)
            })?;
        } else {
            body(&k, &ptrs, k.c(0), units)?;
        }
        llvm(self.builder.build_return(None))?;
        Ok(f)
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

    /// `void <kernel>_tiles(void *ctx, int64_t begin, int64_t end)`: the kernel on
    /// `begin..end`, its pointer arguments `ctx[slot] + offset` for each `(slot, offset)` of
    /// `layout` (`ctx` an array of byte pointers: the slab, the caller's buffers, the
    /// weights). The offsets are constants in the body, so once the kernel is inlined into it
    /// LLVM sees, as in `<model>_run`, that an element-wise op writing in place reads and
    /// writes the same addresses: with opaque pointers its vectoriser guarded every loop with
    /// a run-time overlap check, which an op in place fails, and ran the scalar loop (a
    /// 64×32×32 `add` took 33 µs instead of 7 at one thread, issue 22). Made once per kernel
    /// and layout; the builder's position is kept.
    fn tile_body(&self, f: FunctionValue<'ctx>, layout: &[(u32, u64)]) -> R<FunctionValue<'ctx>> {
        if let Some(b) = self
            .parallel
            .borrow()
            .iter()
            .find(|(k, _, _)| *k == f)
            .and_then(|(_, _, bodies)| bodies.iter().find(|(l, _)| l == layout).map(|p| p.1))
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
        let mut bases: Vec<(u32, PointerValue<'ctx>)> = Vec::new();
        let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
        for &(slot, offset) in layout {
            let base = match bases.iter().find(|(s, _)| *s == slot) {
                Some(&(_, p)) => p,
                None => {
                    let q = k.gep(ctx, k.c(slot as i64))?;
                    let p = llvm(self.builder.build_load(q, "base"))?.into_pointer_value();
                    bases.push((slot, p));
                    p
                }
            };
            // SAFETY: the offset lies inside the base's allocation (the plan is checked).
            let p = llvm(unsafe {
                self.builder
                    .build_in_bounds_gep(base, &[k.c(offset as i64)], "t")
            })?;
            // The kernel's own pointer type: `f32*` for tensors, `i64*` for the dims of a
            // kernel with run-time extents (`crate::dynamic`).
            let ty = f
                .get_nth_param(args.len() as u32)
                .map(|p| p.get_type().into_pointer_type())
                .unwrap_or(fp);
            args.push(llvm(self.builder.build_pointer_cast(p, ty, "f"))?.into());
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
            e.2.push((layout.to_vec(), b));
        }
        if let Some(h) = here {
            self.builder.position_at_end(h);
        }
        Ok(b)
    }

    /// One kernel call of an entry point, its pointer arguments given as `(base, offset)`:
    /// a byte pointer and a constant byte offset. A tiled kernel runs on the calling thread
    /// over all its tiles when `pfor` is `None`; else the distinct bases go to `ctx` (an array
    /// of at least as many pointers as the widest kernel has arguments) and
    /// `parallel_for(pool, body, ctx, tiles)` runs it, the body adding the offsets
    /// ([`Gen::tile_body`]).
    pub(crate) fn call_kernel_at(
        &self,
        kernel: FunctionValue<'ctx>,
        based: &[(PointerValue<'ctx>, u64)],
        pfor: Option<ParallelFor<'ctx>>,
    ) -> R<()> {
        let i64t = self.ctx.i64_type();
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let (Some(tiles), Some(pf)) = (self.tiles_of(kernel), pfor) else {
            let fp = self.ctx.f32_type().ptr_type(AddressSpace::default());
            let mut args: Vec<BasicMetadataValueEnum<'ctx>> = Vec::with_capacity(based.len());
            for &(base, offset) in based {
                let base = llvm(self.builder.build_pointer_cast(base, i8p, "b"))?;
                // SAFETY: the offset lies inside the base's allocation (the plan is checked).
                let p = llvm(unsafe {
                    self.builder
                        .build_in_bounds_gep(base, &[i64t.const_int(offset, false)], "t")
                })?;
                args.push(llvm(self.builder.build_pointer_cast(p, fp, "f"))?.into());
            }
            return self.call_kernel(kernel, args, None);
        };
        let mut slots: Vec<PointerValue<'ctx>> = Vec::new();
        let mut layout: Vec<(u32, u64)> = Vec::with_capacity(based.len());
        for &(base, offset) in based {
            let slot = match slots.iter().position(|&p| p == base) {
                Some(s) => s,
                None => {
                    slots.push(base);
                    slots.len() - 1
                }
            };
            layout.push((slot as u32, offset));
        }
        let body = self.tile_body(kernel, &layout)?;
        for (i, &p) in slots.iter().enumerate() {
            let p = llvm(self.builder.build_pointer_cast(p, i8p, "a"))?;
            let i = i64t.const_int(i as u64, false);
            // SAFETY: `ctx` has room for every argument of the widest kernel, and a call has
            // no more distinct bases than arguments.
            let q = llvm(unsafe { self.builder.build_in_bounds_gep(pf.ctx, &[i], "slot") })?;
            llvm(self.builder.build_store(q, p))?;
        }
        let tiles = self.ctx.i64_type().const_int(tiles, false);
        self.call_parallel_for(pf, body, tiles)
    }

    /// One kernel call with its pointer arguments computed by the caller. A tiled kernel runs
    /// on the calling thread over all its tiles when `pfor` is `None`; else its arguments go
    /// to `ctx` (an array of at least as many pointers) and `parallel_for(pool, body, ctx,
    /// tiles)` runs it.
    pub(crate) fn call_kernel(
        &self,
        kernel: FunctionValue<'ctx>,
        args: Vec<BasicMetadataValueEnum<'ctx>>,
        pfor: Option<ParallelFor<'ctx>>,
    ) -> R<()> {
        self.call_kernel_tiles(kernel, args, pfor, None)
    }

    /// [`Gen::call_kernel`] with the tile count computed at run time (`tiles`, at most the
    /// registered count): a kernel with run-time extents cuts its work by the shape
    /// (`crate::dynamic`). `None`: the registered count.
    pub(crate) fn call_kernel_tiles(
        &self,
        kernel: FunctionValue<'ctx>,
        mut args: Vec<BasicMetadataValueEnum<'ctx>>,
        pfor: Option<ParallelFor<'ctx>>,
        tiles: Option<IntValue<'ctx>>,
    ) -> R<()> {
        let Some(count) = self.tiles_of(kernel) else {
            llvm(self.builder.build_call(kernel, &args, ""))?;
            return Ok(());
        };
        let i64t = self.ctx.i64_type();
        let tiles = tiles.unwrap_or_else(|| i64t.const_int(count, false));
        let Some(pf) = pfor else {
            args.push(i64t.const_zero().into());
            args.push(tiles.into());
            llvm(self.builder.build_call(kernel, &args, ""))?;
            return Ok(());
        };
        // Each argument its own slot at offset 0.
        let layout: Vec<(u32, u64)> = (0..args.len() as u32).map(|i| (i, 0)).collect();
        let body = self.tile_body(kernel, &layout)?;
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
        self.call_parallel_for(pf, body, tiles)
    }

    /// `parallel_for(pool, body, ctx, tiles)`.
    fn call_parallel_for(
        &self,
        pf: ParallelFor<'ctx>,
        body: FunctionValue<'ctx>,
        tiles: IntValue<'ctx>,
    ) -> R<()> {
        let i8p = self.ctx.i8_type().ptr_type(AddressSpace::default());
        let f = inkwell::values::CallableValue::try_from(pf.function)
            .map_err(|_| CodegenError::Llvm("parallel_for is not a function pointer".into()))?;
        let ctx = llvm(self.builder.build_pointer_cast(pf.ctx, i8p, "ctx"))?;
        let body = body.as_global_value().as_pointer_value();
        llvm(self.builder.build_call(
            f,
            &[pf.pool.into(), body.into(), ctx.into(), tiles.into()],
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every chunk's (first, size) for one image.
    fn chunks(t: &Tiling) -> Vec<(i64, i64)> {
        (0..t.count).map(|c| (t.first(c), t.size(c))).collect()
    }

    #[test]
    fn chunks_cover_the_units_in_whole_granules_as_equal_as_they_can() {
        for units in 1..300 {
            for granule in [1, 6, 12, 16] {
                for work in [0, 500_000, 3_000_000, 9_000_000, 100_000_000] {
                    let t = Tiling::new(1, units, granule, work, MIN_TILE_FLOPS);
                    assert!(
                        (t.count as u64).is_power_of_two()
                            || t.count == (units + t.granule - 1) / t.granule
                    );
                    assert!(t.count <= MAX_CHUNKS);
                    let cs = chunks(&t);
                    let mut next = 0;
                    for (i, &(first, size)) in cs.iter().enumerate() {
                        assert_eq!(first, next, "{t:?}");
                        assert!(size > 0, "{t:?}");
                        if i + 1 < cs.len() {
                            assert_eq!(size % t.granule, 0, "{t:?}");
                        }
                        next += size;
                    }
                    assert_eq!(next, units, "{t:?}");
                    // Nominal sizes (the last chunk before truncation) differ by one granule
                    // at most.
                    let nominal: Vec<i64> = (0..t.count)
                        .map(|c| {
                            if c + 1 < t.count {
                                t.size(c)
                            } else {
                                (t.size(c) + t.granule - 1) / t.granule * t.granule
                            }
                        })
                        .collect();
                    let (lo, hi) = (nominal.iter().min().unwrap(), nominal.iter().max().unwrap());
                    assert!(hi - lo <= t.granule, "{t:?}: {cs:?}");
                }
            }
        }
    }

    #[test]
    fn two_threads_get_equal_shares_of_a_pointwise_convolution() {
        // MobileNet v2's 14×14 pointwise layers: 196 columns in 16-column granules.
        let t = Tiling::new(1, 196, 16, 9_600_000, MIN_TILE_FLOPS);
        assert_eq!(t.count, 8);
        let cs = chunks(&t);
        let half: i64 = cs[..4].iter().map(|c| c.1).sum();
        assert_eq!((half, 196 - half), (96, 100));
    }

    #[test]
    fn a_cut_is_preferred_only_when_its_halves_are_clearly_more_equal() {
        // 196 columns in 64-column blocks: 64, 64, 64, 4, halves 128 and 68.
        let columns = Tiling::new(1, 196, 64, 9_600_000, MIN_TILE_FLOPS);
        assert_eq!((columns.count, columns.larger_half()), (4, 128));
        let channels = Tiling::new(1, 192, 6, 9_600_000, MIN_TILE_FLOPS);
        assert_eq!(channels.larger_half(), 96);
        assert!(channels.halves_below(&columns));
        assert!(!columns.halves_below(&channels));
        // 784 columns (13 blocks, halves 384 and 400) against 96 channels (48 and 48): 1/50
        // apart, below the margin.
        let columns = Tiling::new(1, 784, 64, 6_000_000, MIN_TILE_FLOPS);
        let channels = Tiling::new(1, 96, 6, 6_000_000, MIN_TILE_FLOPS);
        assert_eq!(columns.larger_half(), 400);
        assert!(!channels.halves_below(&columns));
        // One chunk is no cut: any cut into equal halves is below it.
        let whole = Tiling::new(1, 196, 64, 1000, MIN_TILE_FLOPS);
        assert_eq!(whole.larger_half(), 196);
        assert!(channels.halves_below(&whole));
    }

    #[test]
    fn memory_bound_ops_are_cut_by_their_traffic() {
        // A 1280 → 1001 matrix–vector product: 2.6 MFLOP but 5 MB of weights.
        let flops = 2 * 1280 * 1001;
        let bytes = 4 * (1280 * 1001 + 1280 + 1001);
        assert_eq!(Tiling::new(1, 1001, 12, flops, 2 * MIN_TILE_FLOPS).count, 1);
        assert_eq!(
            Tiling::new(1, 1001, 12, work(flops, bytes), MIN_TILE_FLOPS).count,
            8
        );
    }
}
