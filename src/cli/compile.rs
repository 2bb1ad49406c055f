//! `tirc compile MODEL.tir|MODEL.onnx -o OUT [--emit exe|obj|lib|llvm|asm] [--guard]`: plan,
//! bufferize, generate code. An `.onnx` model is imported in memory with its own weights. `lib`
//! writes a static library at OUT and its C header next to it (`OUT` with extension `.h`);
//! `--guard` plans padded buffers and checks canaries after every op (`tir_codegen::guard`).
//! `--reorder[=heuristic|exact]` runs the `reorder` pass (issue 8) before planning: the best
//! heuristic order, or the exact search; `--reorder=egg` runs the `rewrite` pass instead (see
//! `egg.rs`). The pipeline is built as values, and both passes judge with this compile's own
//! plan policy (`plan_function`), so the `plan` pass after them never plans a larger slab
//! than the input program's. Every mode fits in `--time-limit`, judging included. A dynamic
//! model compiles at its `--dim` values, or with its dims free (`compile_dynamic`); there
//! `--reorder` judges at sample shapes with the executable's own plan (`reorder_dynamic`).

use super::{import, input, Failure};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tir_codegen::{Artifact, Bufferized, Options as CgOptions};
use tir_passes::dynamic::{sample_shapes, JudgeShapes};
use tir_passes::pipeline::{run_pipeline, run_pipeline_at, Pass, PassReport};
use tir_passes::plan::PlanPolicy;
use tir_passes::planner::PlanError;
use tir_passes::reorder::{Budget, ReorderOptions, Scheduler, Search};
use tir_passes::rewrite::RewriteOptions;

/// `--reorder`'s modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReorderMode {
    /// The order of the heuristic scheduler that plans smallest.
    Heuristic,
    /// The exact order search.
    Exact,
    /// egg rewriting (the `rewrite` pass), then the exact order search.
    Egg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    Exe,
    Obj,
    Lib,
    Llvm,
    Asm,
}

pub struct Options {
    pub model: PathBuf,
    pub output: PathBuf,
    pub emit: Emit,
    pub strategy: Option<String>,
    pub no_sharing: bool,
    pub weights: Option<PathBuf>,
    pub seed: u64,
    pub target_cpu: String,
    pub guard: bool,
    /// `--dim NAME=N`: the values of a dynamic model's dims (an ONNX model's symbolic input
    /// dims, as `tirc import --dim`).
    pub dims: Vec<String>,
    /// Test-only: inject an out-of-bounds store after the op defining this value.
    pub guard_fault_op: Option<String>,
    pub opt_level: u8,
    /// Reorder (egg: rewrite) the operators before planning.
    pub reorder: Option<ReorderMode>,
    /// The time budget of the `reorder` pass (all of it: search and judging) or, with `egg`,
    /// of the `rewrite` pass.
    pub time_limit: std::time::Duration,
}

/// Canary bytes after every buffer in guard mode (a cache line, so alignment is kept).
const GUARD_BYTES: u64 = 64;

pub fn run(o: Options) -> Result<(), Failure> {
    let start = Instant::now();
    if o.guard && o.emit != Emit::Exe {
        return Err(Failure::Usage(
            "--guard needs --emit exe (the executable holds the canary checks' report)".into(),
        ));
    }
    if o.guard_fault_op.is_some() && !o.guard {
        return Err(Failure::Usage("--guard-fault-op needs --guard".into()));
    }
    let dims = input::parse_dims(&o.dims)?;
    // The symbolic leading dim of a `.tir` model compiled at batch 1 for every batch.
    let mut batch: Option<String> = None;
    // An `.onnx` or `.tflite` model is imported in memory and brings its own weights.
    // Kernels with run-time extents are not built yet: a dynamic model compiles at the values
    // `--dim` gives its dims, and without them is refused.
    // An ONNX model is imported once with its symbols kept: compiled with run-time dims, or
    // at batch 1 for a lone leading batch (or by `load_onnx`'s rules).
    let mut kept = None;
    if import::is_onnx(&o.model) && matches!(o.emit, Emit::Exe | Emit::Lib) {
        match import::load_onnx_dynamic(&o.model, &dims, o.emit == Emit::Lib) {
            Ok((m, w)) => {
                // The import pinned the `--dim` values already.
                let source = tir_ir::print(&m);
                let none = tir_ir::Bindings::new();
                return compile_dynamic(&o, &source, m, &none, w.as_deref(), start);
            }
            Err(imported) => kept = imported,
        }
    }
    let onnx_batched = (import::is_onnx(&o.model) && o.emit == Emit::Exe)
        .then(|| kept.and_then(|k| import::batched_from(*k)))
        .flatten();
    let (mut module, model_weights) = if let Some((m, w, b)) = onnx_batched {
        batch = b;
        (m, w)
    } else if import::is_onnx(&o.model) {
        import::load_onnx(&o.model, &dims)?
    } else if import::is_tflite(&o.model) {
        match import::load_tflite(&o.model, &dims, o.emit == Emit::Exe, o.emit == Emit::Lib)? {
            import::TfliteLoaded::Static(m, w, b) => {
                batch = b;
                (m, w)
            }
            import::TfliteLoaded::RunTime(m, w) => {
                // The import pinned the `--dim` values already.
                let source = tir_ir::print(&m);
                let none = tir_ir::Bindings::new();
                return compile_dynamic(&o, &source, m, &none, w.as_deref(), start);
            }
        }
    } else {
        let (m, b) = match load_batched(&o.model, &dims, o.emit)? {
            Loaded::Static(m, b) => (m, b),
            Loaded::Dynamic(source, m) => {
                return compile_dynamic(&o, &source, m, &dims, None, start)
            }
        };
        batch = b;
        (m, None)
    };
    let name = o.model.display().to_string();
    let err = |msg: String| {
        eprintln!("{name}: error: {msg}");
        Failure::Reported
    };
    let mut weights = input::load_weights(
        &module,
        &o.model,
        o.weights.as_deref(),
        model_weights.as_deref(),
        o.seed,
    )?;
    let mut policy = PlanPolicy {
        sharing: !o.no_sharing,
        guard: if o.guard { GUARD_BYTES } else { 0 },
        ..PlanPolicy::compile()
    };
    if let Some(s) = &o.strategy {
        policy.strategy = s
            .parse()
            .map_err(|e: PlanError| Failure::Usage(format!("--strategy: {e}")))?;
    }
    let budget = Budget {
        time: o.time_limit,
        ..Budget::default()
    };
    let mut passes = Vec::new();
    match o.reorder {
        None => {}
        Some(mode @ (ReorderMode::Heuristic | ReorderMode::Exact)) => {
            passes.push(Pass::Reorder(ReorderOptions {
                search: match mode {
                    ReorderMode::Exact => Search::Scheduler(Scheduler::Exact),
                    _ => Search::Heuristics,
                },
                budget,
                policy,
            }))
        }
        Some(ReorderMode::Egg) => passes.push(Pass::Rewrite(RewriteOptions {
            scheduler: Scheduler::Exact,
            budget,
            policy,
            ..RewriteOptions::default()
        })),
    }
    passes.extend([Pass::Plan(policy), Pass::Bufferize]);
    let reports =
        run_pipeline(&mut module, &passes, false, |_, _| {}).map_err(|e| err(e.to_string()))?;
    for r in &reports {
        match &r.report {
            PassReport::Reorder(s) => {
                let mode = match o.reorder {
                    Some(ReorderMode::Exact) => "exact",
                    _ => "heuristic",
                };
                eprintln!(
                    "{name}: reorder ({mode}): slab {} -> {} bytes",
                    s.slab_before, s.slab_after
                );
                if let Some(b) = s.exact.as_ref().and_then(|e| e.stopped) {
                    eprintln!(
                        "{name}: reorder ({mode}): search stopped by the {}",
                        b.name()
                    );
                }
                if s.judge_stopped_by_time {
                    eprintln!(
                        "{name}: reorder ({mode}): judge stopped by the time budget (slabs are upper bounds)"
                    );
                }
            }
            PassReport::Rewrite(s) => {
                super::egg::add_derived_weights(&mut weights, &s.derived).map_err(err)?;
                super::egg::report(s, &name);
            }
            PassReport::Plan(p) => {
                if let Some(input) = p.kept_input {
                    eprintln!(
                        "{name}: the reordered program plans larger than the input program ({input} bytes) under this compile's plan: keeping the input program"
                    );
                }
            }
            PassReport::Bufferize(_) | PassReport::Verify | PassReport::Dynamic(_) => {}
        }
    }
    let symbol = tir_codegen::symbol_name(
        o.model
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(&module.name),
    );
    let proof = Bufferized::new(&mut module).map_err(|e| err(e.to_string()))?;
    let slab = proof.slab_size();
    let cg = CgOptions {
        name: symbol.clone(),
        target_cpu: o.target_cpu.clone(),
        guard: o.guard.then_some(tir_codegen::guard::Guard {
            bytes: GUARD_BYTES,
            fault_after: o.guard_fault_op.clone(),
        }),
        opt_level: o.opt_level,
        ..CgOptions::native(&symbol)
    };
    let artifact = match o.emit {
        Emit::Exe | Emit::Obj | Emit::Lib => Artifact::Object,
        Emit::Llvm => Artifact::Llvm,
        Emit::Asm => Artifact::Asm,
    };
    let bytes =
        tir_codegen::emit(&proof, &weights, &cg, artifact).map_err(|e| err(e.to_string()))?;
    match o.emit {
        Emit::Exe => {
            let main = tir_codegen::exe::main_c_batched(proof.func(), &symbol, batch.as_deref());
            tir_codegen::exe::link(&main, &bytes, Path::new(&o.output)).map_err(err)?;
        }
        Emit::Lib => {
            let header = tir_codegen::embed::header(proof.func(), &symbol);
            tir_codegen::embed::archive(&bytes, &symbol, &o.output).map_err(err)?;
            input::write_atomic(&o.output.with_extension("h"), header.as_bytes())?;
        }
        _ => input::write_atomic(&o.output, &bytes)?,
    }
    eprintln!(
        "{}: slab {slab} bytes, compiled in {:.2} s",
        o.output.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What `load_batched` gives: a static module (with the symbolic batch it runs at 1), or a
/// dynamic one (with its source) to compile with run-time dims.
enum Loaded {
    Static(tir_ir::Module, Option<String>),
    Dynamic(String, tir_ir::Module),
}

/// A `.tir` model specialized at `dims`. A dynamic model left with exactly one dim without a
/// value, built as an executable, compiles at batch 1 when it is independent along that dim
/// as its leading one (`tir_ir::batch`): the executable then runs every batch size. Any other
/// dynamic executable whose ops all have kernels with run-time extents is compiled with
/// run-time dims (`Loaded::Dynamic`, see `compile_dynamic`); else every dim must be given
/// (refused naming the dims, or why the one left is not a batch, and the op that has no
/// run-time kernel).
fn load_batched(path: &Path, dims: &tir_ir::Bindings, emit: Emit) -> Result<Loaded, Failure> {
    let (source, module) = input::load_module(path)?;
    let missing: Vec<String> = tir_ir::specialize::module_symbols(&module)
        .into_iter()
        .filter(|s| !dims.contains_key(s))
        .collect();
    // Kernels with run-time extents: an executable runs any shape of the model when none of
    // its ops lacks them (a lone leading batch keeps the batch-1 program).
    let run_time = (matches!(emit, Emit::Exe | Emit::Lib) && !missing.is_empty())
        .then(|| {
            module
                .entry()
                .map(|f| tir_codegen::dynamic::unsupported_op(f, dims))
        })
        .flatten();
    let leading_batch = match (missing.as_slice(), module.entry()) {
        ([b], Some(f)) => tir_ir::batch::check_leading_batch(f, b).is_ok(),
        _ => false,
    };
    if run_time == Some(None) && (!leading_batch || emit == Emit::Lib) {
        input::check_dim_names(&module, dims, "--dim")?;
        return Ok(Loaded::Dynamic(source, module));
    }
    let note = |r: Result<Loaded, Failure>| {
        if let (Err(_), Some(Some(why))) = (&r, &run_time) {
            eprintln!("{}: note: {why}", path.display());
        }
        r
    };
    let [b] = missing.as_slice() else {
        return note(
            input::specialize(path, &source, module, dims, Some("--dim"))
                .map(|m| Loaded::Static(m, None)),
        );
    };
    let name = path.display().to_string();
    if emit != Emit::Exe {
        eprintln!(
            "{name}: error: the model's dim `{b}` has no value: give it one with --dim {b}=N (only --emit exe runs a symbolic batch)"
        );
        return Err(Failure::Reported);
    }
    if let Some(f) = module.entry() {
        if let Err(why) = tir_ir::batch::check_leading_batch(f, b) {
            eprintln!("{name}: error: the dim `{b}` has no value, and it cannot be a run-time batch: {why}; give it one with --dim {b}=N");
            return note(Err(Failure::Reported));
        }
    }
    let mut at_one = dims.clone();
    at_one.insert(b.clone(), 1);
    let m = input::specialize(path, &source, module, &at_one, Some("--dim"))?;
    Ok(Loaded::Static(m, Some(b.clone())))
}

/// `tirc compile` of a dynamic `.tir` model to an executable that runs any shape
/// (`tir_codegen::dynamic`): planned and bufferized at a probe shape for its structure
/// (checked equal at a second probe), kernels with run-time extents, and a `main` that binds
/// the dims from the input files, plans at run time and caches plans per shape. Dims given
/// with `--dim` stay run-time dims whose value is pinned (a file that disagrees is refused).
fn compile_dynamic(
    o: &Options,
    source: &str,
    module: tir_ir::Module,
    dims: &tir_ir::Bindings,
    embedded: Option<&[u8]>,
    start: Instant,
) -> Result<(), Failure> {
    let name = o.model.display().to_string();
    let err = |msg: String| {
        eprintln!("{name}: error: {msg}");
        Failure::Reported
    };
    if o.strategy.is_some() {
        return Err(Failure::Usage(
            "--strategy needs every dim given a value with --dim NAME=N (a model with run-time dims is planned by its executable, greedy by size)".into(),
        ));
    }
    let original = module.clone();
    let mut module = module;
    let derived = match o.reorder {
        Some(mode) => reorder_dynamic(o, &mut module, dims, mode)?,
        None => Vec::new(),
    };
    let f = module
        .entry()
        .ok_or_else(|| err("the module has no entry function".into()))?;
    let spec = tir_codegen::dynamic::DynSpec::given(f, dims);
    let (spec_symbols, given) = (spec.symbols.clone(), dims.clone());
    // Two probe shapes, every dim distinct from the others (and from small constants), so
    // that a structure that depends on the shape shows as a difference.
    let probe = |base: u64, step: u64| -> tir_ir::Bindings {
        spec.symbols
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    s.clone(),
                    dims.get(s).copied().unwrap_or(base + step * i as u64),
                )
            })
            .collect()
    };
    // No producer writes into a concat's slice: its offset would depend on the shape, and
    // the run-time plan places whole buffers.
    let policy = PlanPolicy {
        sharing: !o.no_sharing,
        concat_slices: false,
        ..PlanPolicy::compile()
    };
    let bufferize = |b: &tir_ir::Bindings| -> Result<tir_ir::Module, Failure> {
        let mut m = input::specialize(&o.model, source, module.clone(), b, Some("--dim"))?;
        run_pipeline(
            &mut m,
            &[Pass::Plan(policy), Pass::Bufferize],
            false,
            |_, _| {},
        )
        .map_err(|e| err(e.to_string()))?;
        Ok(m)
    };
    // The first two probes the model's run-time checks accept (a reshape may need the dims'
    // product even); without two, the first one's failure is the message.
    let candidates = [
        (18, 6),
        (30, 8),
        (16, 16),
        (24, 24),
        (32, 32),
        (64, 64),
        (17, 6),
        (29, 8),
    ];
    // Then, for a model whose checks hold only on a narrow set of dims (a height that must be
    // 48, a dim that must be 1), values drawn from 1..=64, each draw's range doubling from 1
    // (xorshift, so every compile draws the same).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let drawn = (0..448u64).map(move |t| {
        let range = 1u64 << (t % 7);
        spec_symbols
            .iter()
            .map(|s| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (
                    s.clone(),
                    given.get(s).copied().unwrap_or(1 + state % range),
                )
            })
            .collect::<tir_ir::Bindings>()
    });
    let mut accepted = candidates
        .iter()
        .map(|&(base, step)| probe(base, step))
        .chain(drawn)
        .filter(|b| tir_ir::specialize(&module, b).is_ok());
    let (pa, pb) = match accepted.next() {
        Some(a) => match accepted.find(|b| *b != a) {
            Some(b) => (a, b),
            None => (probe(18, 6), probe(30, 8)),
        },
        None => (probe(18, 6), probe(30, 8)),
    };
    let mut probe_a = bufferize(&pa)?;
    let probe_b = bufferize(&pb)?;
    let structure = |m: &tir_ir::Module| m.entry().map(tir_codegen::relocate::structure);
    let records = |m: &tir_ir::Module| {
        m.entry()
            .ok_or_else(|| "no entry".to_string())
            .and_then(|f| tir_codegen::dynamic::records(f, &spec))
    };
    let (recs, n_allocs) = records(&probe_a).map_err(&err)?;
    let (recs_b, _) = records(&probe_b).map_err(&err)?;
    let same_lives = recs.len() == recs_b.len()
        && recs
            .iter()
            .zip(&recs_b)
            .all(|(x, y)| (x.alloc, x.first, x.last) == (y.alloc, y.first, y.last));
    if structure(&probe_a) != structure(&probe_b) || !same_lives {
        return Err(err(
            "the model's buffers are shared differently at different shapes, so one executable cannot run them all; give its dims values with --dim NAME=N".into(),
        ));
    }
    // The weights of the program as given; the consts `--reorder=egg` made are cut from them.
    let mut weights = if derived.is_empty() {
        input::load_weights(&probe_a, &o.model, o.weights.as_deref(), embedded, o.seed)?
    } else {
        let at = input::specialize(&o.model, source, original, &pa, Some("--dim"))?;
        input::load_weights(&at, &o.model, o.weights.as_deref(), embedded, o.seed)?
    };
    super::egg::add_derived_weights(&mut weights, &derived).map_err(&err)?;
    let symbol = tir_codegen::symbol_name(
        o.model
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(&module.name),
    );
    let proof = Bufferized::new(&mut probe_a).map_err(|e| err(e.to_string()))?;
    let cg = CgOptions {
        name: symbol.clone(),
        target_cpu: o.target_cpu.clone(),
        opt_level: o.opt_level,
        // Guard mode: the canaries at the run-time ends of the buffers, the executable's plan
        // padded to match (`main_c`).
        guard: o.guard.then_some(tir_codegen::guard::Guard {
            bytes: GUARD_BYTES,
            fault_after: o.guard_fault_op.clone(),
        }),
        ..CgOptions::native(&symbol)
    };
    let bytes = tir_codegen::dynamic::emit_dynamic(&proof, &weights, &cg, &spec, Artifact::Object)
        .map_err(|e| err(e.to_string()))?;
    let pinned: Vec<(usize, u64)> = spec
        .symbols
        .iter()
        .enumerate()
        .filter_map(|(i, s)| dims.get(s).map(|&v| (i, v)))
        .collect();
    if o.emit == Emit::Lib {
        let dynamic = tir_codegen::dynamic::compile_c(
            &tir_codegen::dynamic::lib_c(proof.func(), &symbol, &spec, &recs, n_allocs, &pinned)
                .map_err(&err)?,
        )
        .map_err(&err)?;
        let header =
            tir_codegen::dynamic::header(proof.func(), &symbol, &spec, n_allocs).map_err(&err)?;
        tir_codegen::embed::archive_objects(
            &[
                (&bytes, format!("{symbol}.o")),
                (&dynamic, format!("{symbol}_plan.o")),
            ],
            &o.output,
        )
        .map_err(&err)?;
        input::write_atomic(&o.output.with_extension("h"), header.as_bytes())?;
    } else {
        let main = tir_codegen::dynamic::main_c(
            proof.func(),
            &symbol,
            &spec,
            &recs,
            n_allocs,
            &pinned,
            if o.guard { GUARD_BYTES } else { 0 },
        )
        .map_err(&err)?;
        tir_codegen::exe::link(&main, &bytes, Path::new(&o.output)).map_err(err)?;
    }
    eprintln!(
        "{}: run-time dims {}: slab planned by {} per shape, compiled in {:.2} s",
        o.output.display(),
        spec.symbols.join(", "),
        if o.emit == Emit::Lib {
            format!("`{symbol}_plan`")
        } else {
            "the executable".to_string()
        },
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `--reorder` on a model compiled with run-time dims: the `reorder` (or, with `egg`,
/// `rewrite`) pass on the symbolic program, judged at sample shapes by the executable's own
/// plan (greedy by size, whole buffers, `tir_passes::dynamic`): an order or program is kept
/// only when it plans no larger than the input order at every sample shape. Returns the
/// sliced weights of a rewritten program.
fn reorder_dynamic(
    o: &Options,
    module: &mut tir_ir::Module,
    dims: &tir_ir::Bindings,
    mode: ReorderMode,
) -> Result<Vec<tir_passes::rewrite::DerivedWeight>, Failure> {
    let name = o.model.display().to_string();
    let shapes = sample_shapes(module, dims);
    if shapes.is_empty() {
        eprintln!(
            "{name}: error: --reorder: the model's run-time checks accept none of the sample shapes (every dim at {:?}); give its dims values with --dim NAME=N",
            tir_passes::dynamic::SAMPLE_VALUES
        );
        return Err(Failure::Reported);
    }
    let policy = PlanPolicy {
        strategy: tir_passes::planner::OffsetStrategy::GreedyBySize,
        sharing: !o.no_sharing,
        concat_slices: false,
        ..PlanPolicy::compile()
    };
    let budget = Budget {
        time: o.time_limit,
        ..Budget::default()
    };
    let pass = match mode {
        ReorderMode::Egg => Pass::Rewrite(RewriteOptions {
            scheduler: Scheduler::Exact,
            budget,
            policy,
            ..RewriteOptions::default()
        }),
        _ => Pass::Reorder(ReorderOptions {
            search: match mode {
                ReorderMode::Exact => Search::Scheduler(Scheduler::Exact),
                _ => Search::Heuristics,
            },
            budget,
            policy,
        }),
    };
    let n = shapes.len();
    let reports = run_pipeline_at(
        module,
        &[pass],
        false,
        Some(JudgeShapes::Samples(shapes)),
        |_, _| {},
    )
    .map_err(|e| {
        eprintln!("{name}: error: {e}");
        Failure::Reported
    })?;
    let mut derived = Vec::new();
    for r in reports {
        if let PassReport::Dynamic(s) = r.report {
            let mode = match mode {
                ReorderMode::Heuristic => "heuristic",
                ReorderMode::Exact => "exact",
                ReorderMode::Egg => "egg",
            };
            let (before, after): (u64, u64) = s
                .shapes
                .iter()
                .fold((0, 0), |(b, a), x| (b.max(x.before), a.max(x.after)));
            eprintln!(
                "{name}: reorder ({mode}) judged at {n} sample shapes: kept {}, largest slab {before} -> {after} bytes{}",
                s.kept,
                s.not_generic
                    .as_ref()
                    .map(|w| format!(" (the rewritten program is not shape-generic: {w})"))
                    .unwrap_or_default()
            );
            derived = s.derived;
        }
    }
    Ok(derived)
}
