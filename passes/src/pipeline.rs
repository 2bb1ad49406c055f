//! The pass manager: pipelines as values ([`Pass`]) or MLIR-style strings such as
//! `plan{strategy=greedy_by_size,sharing=false},bufferize`, run in order over a module, each
//! pass timed and reporting typed statistics ([`PassReport`]), with the verifier (and, once
//! bufferized, the buffer checker) optionally run after every pass.
//!
//! Passes hand each other data through an explicit [`PassContext`]: `plan` leaves its
//! [`FunctionPlan`] for `bufferize`; `reorder` leaves the judge's plan of the order it kept
//! (which `plan` reuses when it is compile's plan); and when the judging of a `reorder` or
//! `rewrite` was cut short (time budget, or the fast strategies on large programs), they leave
//! the program they started from, which `plan` keeps if it plans smaller. So a reordered or
//! rewritten program never plans larger than its input under the `plan` that follows.

use crate::buffer_check::check_bufferized;
use crate::bufferize::{bufferize, is_bufferized, BufferizeStats};
use crate::buffers::Sharing;
use crate::dynamic::{
    reorder_dynamic, rewrite_dynamic, specialize_function, DynamicStats, JudgeShapes,
};
use crate::plan::{plan_function, FunctionPlan, PlanPolicy};
use crate::planner::{self, OffsetStrategy};
use crate::reorder::{self, ReorderOptions, ReorderStats, Search};
use crate::rewrite::{RewriteOptions, RewriteStats};
use std::time::{Duration, Instant};
use tir_ir::{Function, Module};

/// One pass with its options.
#[derive(Clone, Debug, PartialEq)]
pub enum Pass {
    /// Choose a memory-aware operator order (changes only the layout), judged by its policy.
    Reorder(ReorderOptions),
    /// egg rewriting for memory (issue 8), then the order of its scheduler.
    Rewrite(RewriteOptions),
    /// Assign buffers and plan their offsets (`plan_function`); the plan is kept for
    /// `bufferize`.
    Plan(PlanPolicy),
    /// Make the plan explicit: `alloc_slab`, `alloc_tensor`, `outs`.
    Bufferize,
    /// Run the verifier (and the buffer checker on bufferized functions).
    Verify,
}

impl Pass {
    pub fn name(&self) -> &'static str {
        match self {
            Pass::Reorder(_) => "reorder",
            Pass::Rewrite(_) => "rewrite",
            Pass::Plan(_) => "plan",
            Pass::Bufferize => "bufferize",
            Pass::Verify => "verify",
        }
    }
}

/// Every pass and its options, for `--help` and "unknown pass" messages.
pub const PASSES: &str = "reorder{scheduler=NAME|heuristic,budget=TIME,states=N}, \
rewrite{scheduler=NAME,budget=TIME,states=N}, plan{strategy=NAME,align=N,sharing=BOOL,guard=N}, \
bufferize, verify";

/// A pipeline string that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("empty pass name in pipeline `{0}`")]
    Empty(String),
    #[error("unknown pass `{0}`; the passes are: {PASSES}")]
    UnknownPass(String),
    #[error("pass `{pass}` has no option `{option}`; it takes: {takes}")]
    UnknownOption {
        pass: String,
        option: String,
        takes: &'static str,
    },
    #[error("option `{option}` of `{pass}`: {message}")]
    BadValue {
        pass: String,
        option: String,
        message: String,
    },
    #[error("unbalanced braces in pipeline `{0}`")]
    Braces(String),
}

/// Parses `name{key=value,...},name,...`.
pub fn parse_pipeline(text: &str) -> Result<Vec<Pass>, PipelineError> {
    let mut passes = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let name_end = rest.find(['{', ',']).unwrap_or(rest.len());
        let name = rest[..name_end].trim();
        if name.is_empty() {
            return Err(PipelineError::Empty(text.to_string()));
        }
        rest = &rest[name_end..];
        let mut options: Vec<(String, String)> = Vec::new();
        if let Some(after) = rest.strip_prefix('{') {
            let close = after
                .find('}')
                .ok_or_else(|| PipelineError::Braces(text.to_string()))?;
            for item in after[..close]
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                let (k, v) = item.split_once('=').unwrap_or((item, "true"));
                options.push((k.trim().to_string(), v.trim().to_string()));
            }
            rest = &after[close + 1..];
        }
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start();
        } else if !rest.is_empty() {
            return Err(PipelineError::Braces(text.to_string()));
        }
        passes.push(make_pass(name, options)?);
    }
    judge_as_planned(&mut passes);
    Ok(passes)
}

/// `reorder` and `rewrite` judge with the policy of the `plan` pass that follows them, so the
/// order they keep is the one that pass plans smallest; with no `plan` after them they keep
/// their own defaults.
pub fn judge_as_planned(passes: &mut [Pass]) {
    let mut next_plan: Option<PlanPolicy> = None;
    for pass in passes.iter_mut().rev() {
        match pass {
            Pass::Plan(p) => next_plan = Some(*p),
            Pass::Reorder(o) => {
                if let Some(p) = next_plan {
                    o.policy = p;
                }
            }
            Pass::Rewrite(o) => {
                if let Some(p) = next_plan {
                    o.policy = p;
                }
            }
            Pass::Bufferize | Pass::Verify => {}
        }
    }
}

fn make_pass(name: &str, options: Vec<(String, String)>) -> Result<Pass, PipelineError> {
    let bad = |option: &str, message: String| PipelineError::BadValue {
        pass: name.to_string(),
        option: option.to_string(),
        message,
    };
    match name {
        "reorder" | "rewrite" => {
            let mut opts = ReorderOptions::default();
            for (k, v) in options {
                match k.as_str() {
                    "scheduler" => {
                        opts.search = v.parse::<Search>().map_err(|e| bad(&k, e.to_string()))?
                    }
                    "budget" => {
                        opts.budget.time = parse_duration(&v).ok_or_else(|| {
                            bad(
                                &k,
                                format!("expected a time such as 10s or 500ms, got `{v}`"),
                            )
                        })?
                    }
                    "states" => {
                        opts.budget.states =
                            v.parse().ok().filter(|&n: &usize| n > 0).ok_or_else(|| {
                                bad(&k, format!("expected a positive integer, got `{v}`"))
                            })?
                    }
                    _ => {
                        return Err(PipelineError::UnknownOption {
                            pass: name.into(),
                            option: k,
                            takes: "scheduler, budget, states",
                        })
                    }
                }
            }
            if name == "rewrite" {
                let Search::Scheduler(scheduler) = opts.search else {
                    return Err(bad(
                        "scheduler",
                        "the rewrite pass judges with one scheduler, not `heuristic`".into(),
                    ));
                };
                return Ok(Pass::Rewrite(RewriteOptions {
                    scheduler,
                    budget: opts.budget,
                    ..Default::default()
                }));
            }
            Ok(Pass::Reorder(opts))
        }
        "plan" => {
            let mut policy = PlanPolicy::default();
            for (k, v) in options {
                match k.as_str() {
                    "strategy" => {
                        policy.strategy = v
                            .parse()
                            .map_err(|e: planner::PlanError| bad(&k, e.to_string()))?
                    }
                    "align" => {
                        policy.align = v
                            .parse()
                            .ok()
                            .filter(|a: &u64| *a > 0 && a.is_power_of_two())
                            .ok_or_else(|| bad(&k, format!("expected a power of two, got `{v}`")))?
                    }
                    "sharing" => {
                        policy.sharing = v
                            .parse()
                            .map_err(|_| bad(&k, format!("expected true or false, got `{v}`")))?
                    }
                    "guard" => {
                        policy.guard = v
                            .parse()
                            .map_err(|_| bad(&k, format!("expected a byte count, got `{v}`")))?
                    }
                    _ => {
                        return Err(PipelineError::UnknownOption {
                            pass: name.into(),
                            option: k,
                            takes: "strategy, align, sharing, guard",
                        })
                    }
                }
            }
            Ok(Pass::Plan(policy))
        }
        "bufferize" | "verify" => {
            if let Some((k, _)) = options.into_iter().next() {
                return Err(PipelineError::UnknownOption {
                    pass: name.into(),
                    option: k,
                    takes: "no options",
                });
            }
            Ok(if name == "bufferize" {
                Pass::Bufferize
            } else {
                Pass::Verify
            })
        }
        _ => Err(PipelineError::UnknownPass(name.to_string())),
    }
}

/// `10s`, `500ms` or plain seconds (`2.5`).
fn parse_duration(v: &str) -> Option<Duration> {
    let (num, scale) = if let Some(ms) = v.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = v.strip_suffix('s') {
        (s, 1.0)
    } else {
        (v, 1.0)
    };
    let secs = num.trim().parse::<f64>().ok()? * scale;
    Duration::try_from_secs_f64(secs).ok()
}

/// A pass that could not run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PassError {
    #[error("{pass}: {message}")]
    Failed { pass: &'static str, message: String },
    #[error("the IR is invalid after `{pass}`:\n  {}", errors.join("\n  "))]
    Invalid {
        pass: &'static str,
        errors: Vec<String>,
    },
}

/// What the `plan` pass did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanStats {
    /// The strategy that made the plan.
    pub strategy: OffsetStrategy,
    /// The sharing variant kept.
    pub sharing: Sharing,
    pub buffers: usize,
    pub shared_buffers: usize,
    pub slab: u64,
    pub lower_bound: u64,
    /// The slab of the program a `reorder` or `rewrite` started from, kept because it planned
    /// smaller than theirs (their budget had cut the judging short).
    pub kept_input: Option<u64>,
}

/// What a pass reports, typed; [`PassReport::items`] renders it for `tirc opt --stats`.
#[derive(Clone, Debug, PartialEq)]
pub enum PassReport {
    Reorder(ReorderStats),
    Rewrite(Box<RewriteStats>),
    Plan(PlanStats),
    Bufferize(BufferizeStats),
    Verify,
    /// `reorder` or `rewrite` on a dynamic function, judged at several shapes
    /// ([`crate::dynamic`]).
    Dynamic(DynamicStats),
}

impl PassReport {
    /// `name = value, ...`, as `--stats` prints it.
    pub fn summary(&self) -> String {
        self.items()
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `(name, value)` pairs, in the order `--stats` prints them.
    pub fn items(&self) -> Vec<(&'static str, String)> {
        match self {
            PassReport::Reorder(s) => {
                let mut items = vec![
                    ("scheduler", s.scheduler.name().to_string()),
                    ("peak bytes before", s.peak_before.to_string()),
                    ("peak bytes after", s.peak_after.to_string()),
                    ("slab bytes before", s.slab_before.to_string()),
                    ("slab bytes after", s.slab_after.to_string()),
                ];
                if s.kept_input {
                    items.push(("kept input order", "true".to_string()));
                }
                if s.judge_stopped_by_time {
                    items.push((
                        "judge",
                        "stopped by the time budget (slabs are upper bounds)".to_string(),
                    ));
                }
                if let Some(e) = &s.exact {
                    items.push((
                        "exact",
                        match e.stopped {
                            None => "optimal peak proved".to_string(),
                            Some(b) => format!(
                                "stopped by the {} (lower bound {})",
                                b.name(),
                                e.lower_bound
                            ),
                        },
                    ));
                }
                items
            }
            PassReport::Rewrite(s) => {
                let mut items = vec![
                    ("scheduler", s.scheduler.name().to_string()),
                    ("candidate", s.chosen.clone()),
                    (
                        "rewrite sites kept",
                        format!("{} of {}", s.sites_kept, s.sites),
                    ),
                    ("sliced weights", s.derived.len().to_string()),
                    ("peak bytes before", s.peak_before.to_string()),
                    ("peak bytes after", s.peak_after.to_string()),
                    ("slab bytes before", s.slab_before.to_string()),
                    ("slab bytes after", s.slab_after.to_string()),
                ];
                if s.budget_stopped {
                    items.push(("stopped by", "the time budget".to_string()));
                }
                items
            }
            PassReport::Plan(s) => {
                let mut items = vec![
                    ("strategy", s.strategy.name().to_string()),
                    ("sharing", s.sharing.name().to_string()),
                    ("buffers", s.buffers.to_string()),
                    ("shared buffers", s.shared_buffers.to_string()),
                    ("slab bytes", s.slab.to_string()),
                    ("lower bound bytes", s.lower_bound.to_string()),
                ];
                if let Some(input) = s.kept_input {
                    items.push(("kept input program", format!("{input} bytes")));
                }
                items
            }
            PassReport::Bufferize(s) => vec![
                ("slab bytes", s.slab_size.to_string()),
                ("buffers", s.buffers.to_string()),
                ("alloc_tensor ops", s.alloc_tensors.to_string()),
            ],
            PassReport::Verify => vec![],
            PassReport::Dynamic(s) => s.items(),
        }
    }
}

/// One pass's report and time.
#[derive(Clone, Debug, PartialEq)]
pub struct PassStats {
    pub pass: &'static str,
    pub time: Duration,
    pub report: PassReport,
}

/// What passes hand each other (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct PassContext {
    /// The `plan` pass's plan, for `bufferize`.
    pub planned: Option<FunctionPlan>,
    /// The judge's plan of the program as `reorder` or `rewrite` left it.
    pub judged: Option<FunctionPlan>,
    /// The program a `reorder` or `rewrite` started from, with the judge's plan of it, when
    /// their judging was cut short: nothing proves that what they kept plans no larger.
    pub fallback: Option<(Function, Option<FunctionPlan>)>,
    /// Where `reorder` and `rewrite` judge a dynamic function, and (bounds only) where `plan`
    /// specializes it: `None` refuses them on a dynamic function.
    pub shapes: Option<JudgeShapes>,
}

/// Runs the passes in order. `after_each` sees the module after every pass (for
/// `--print-after-all`); `verify_each` verifies after every pass.
pub fn run_pipeline(
    module: &mut Module,
    passes: &[Pass],
    verify_each: bool,
    after_each: impl FnMut(&Pass, &Module),
) -> Result<Vec<PassStats>, PassError> {
    run_pipeline_at(module, passes, verify_each, None, after_each)
}

/// [`run_pipeline`] on a module that may be dynamic: `reorder` and `rewrite` judge a dynamic
/// entry function at `shapes` ([`crate::dynamic`]), and `plan` specializes it at the bounds
/// when `shapes` are bounds (the bounded plan); with sample shapes or none, `plan` on a
/// dynamic function is refused.
pub fn run_pipeline_at(
    module: &mut Module,
    passes: &[Pass],
    verify_each: bool,
    shapes: Option<JudgeShapes>,
    mut after_each: impl FnMut(&Pass, &Module),
) -> Result<Vec<PassStats>, PassError> {
    let mut cx = PassContext {
        shapes,
        ..PassContext::default()
    };
    let mut all = Vec::new();
    for pass in passes {
        let start = Instant::now();
        let report = run_one(module, pass, &mut cx)?;
        all.push(PassStats {
            pass: pass.name(),
            time: start.elapsed(),
            report,
        });
        if verify_each || cfg!(debug_assertions) {
            verify_module(module).map_err(|errors| PassError::Invalid {
                pass: pass.name(),
                errors,
            })?;
        }
        after_each(pass, module);
    }
    Ok(all)
}

/// The verifier, then the buffer checker on every bufferized function.
pub fn verify_module(module: &mut Module) -> Result<(), Vec<String>> {
    tir_ir::verify(module).map_err(|es| es.iter().map(ToString::to_string).collect::<Vec<_>>())?;
    // A dynamic function holds no buffers (the verifier refuses them), so only static ones
    // have a bufferized form to check.
    for f in module.funcs.iter().filter(|f| !f.is_dynamic()) {
        check_bufferized(f).map_err(|es| {
            es.iter()
                .map(|e| format!("@{}: {e}", f.name))
                .collect::<Vec<_>>()
        })?;
    }
    Ok(())
}

/// The shapes a dynamic function is judged at, or the refusal that says what to give.
fn judge_shapes(
    cx: &PassContext,
    fail: &dyn Fn(String) -> PassError,
) -> Result<Vec<tir_ir::Bindings>, PassError> {
    match &cx.shapes {
        Some(s) if !s.shapes().is_empty() => Ok(s.shapes()),
        Some(_) => Err(fail(
            "the model's run-time checks accept none of the sample shapes; give its dims values with --dim NAME=N or bounds with --dim-max NAME=N".into(),
        )),
        None => Err(fail(
            "the function has symbolic dims; give them values with --dim NAME=N, or bounds with --dim-max NAME=N".into(),
        )),
    }
}

/// After `reorder` or `rewrite` on a dynamic function: the plans of other orders are stale,
/// and the program they started from is left for a bounded `plan`, which keeps it when it
/// plans smaller at the bounds (they judge with less effort than `plan` spends).
fn after_dynamic(cx: &mut PassContext, func: &Function, original: Function) {
    cx.planned = None;
    cx.judged = None;
    cx.fallback = (*func != original).then_some((original, None));
}

fn run_one(
    module: &mut Module,
    pass: &Pass,
    cx: &mut PassContext,
) -> Result<PassReport, PassError> {
    let fail = |message: String| PassError::Failed {
        pass: pass.name(),
        message,
    };
    match pass {
        Pass::Verify => {
            verify_module(module).map_err(|errors| PassError::Invalid {
                pass: "verify",
                errors,
            })?;
            Ok(PassReport::Verify)
        }
        Pass::Reorder(opts) => {
            let func = module
                .entry_mut()
                .ok_or_else(|| fail("the module has no `@main` function".into()))?;
            let original = func.clone();
            if func.is_dynamic() {
                let shapes = judge_shapes(cx, &fail)?;
                let stats =
                    reorder_dynamic(func, opts, &shapes).map_err(|e| fail(e.to_string()))?;
                after_dynamic(cx, func, original);
                return Ok(PassReport::Dynamic(stats));
            }
            let r = reorder::reorder(func, opts).map_err(|e| fail(e.to_string()))?;
            // Any earlier plan was made for the old order.
            cx.planned = None;
            let unproven = r.stats.judge_stopped_by_time && func.layout != original.layout;
            cx.fallback = unproven.then_some((original, Some(r.input_plan)));
            cx.judged = Some(r.plan);
            Ok(PassReport::Reorder(r.stats))
        }
        Pass::Rewrite(opts) => {
            let func = module
                .entry_mut()
                .ok_or_else(|| fail("the module has no `@main` function".into()))?;
            let original = func.clone();
            if func.is_dynamic() {
                let shapes = judge_shapes(cx, &fail)?;
                let stats =
                    rewrite_dynamic(func, opts, &shapes).map_err(|e| fail(e.to_string()))?;
                after_dynamic(cx, func, original);
                return Ok(PassReport::Dynamic(stats));
            }
            let stats = crate::rewrite::rewrite(func, opts, &mut |_, _, _| {})
                .map_err(|e| fail(e.to_string()))?;
            cx.planned = None;
            // The rewrite pass judges large programs with the fast strategies only, so its
            // choice is proven only when it kept the input as laid out.
            cx.fallback = (*func != original).then_some((original, None));
            cx.judged = None;
            Ok(PassReport::Rewrite(Box::new(stats)))
        }
        Pass::Plan(policy) => {
            let dynamic = module.entry().is_some_and(Function::is_dynamic);
            if dynamic {
                // The bounded plan: the program at the bounds, valid for every smaller shape
                // (the caller proved every size non-decreasing in the dims).
                let Some(JudgeShapes::Bounds(b)) = &cx.shapes else {
                    return Err(fail(
                        "the function has symbolic dims and planning needs sizes: give every dim a value with --dim NAME=N, or a bound with --dim-max NAME=N for one plan valid up to the bounds".into(),
                    ));
                };
                let b = b.clone();
                *module = tir_ir::specialize(module, &b).map_err(|es| {
                    fail(format!(
                        "at the bounds: {}",
                        es.iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    ))
                })?;
                if let Some((f, _)) = cx.fallback.take() {
                    let f = specialize_function(&f, &b).map_err(|e| fail(e.to_string()))?;
                    cx.fallback = Some((f, None));
                }
            }
            let func = module
                .entry_mut()
                .ok_or_else(|| fail("the module has no `@main` function".into()))?;
            if is_bufferized(func) {
                return Err(fail(format!("`@{}` is already bufferized", func.name)));
            }
            let plan_of = |f: &Function, judged: Option<FunctionPlan>| match judged {
                Some(p) if p.is_compile_plan_of(f, policy) => Ok(p),
                _ => plan_function(f, policy).map_err(|e| fail(e.to_string())),
            };
            let mut plan = plan_of(func, cx.judged.take())?;
            let mut kept_input = None;
            if let Some((original, judged)) = cx.fallback.take() {
                let input = plan_of(&original, judged)?;
                if input.slab() < plan.slab() {
                    kept_input = Some(input.slab());
                    *func = original;
                    plan = input;
                }
            }
            let lower_bound = plan.lower_bound().map_err(|e| fail(e.to_string()))?;
            let stats = PlanStats {
                strategy: plan.strategy,
                sharing: plan.sharing,
                buffers: plan.records.len(),
                shared_buffers: plan.assignment.shared_buffers(),
                slab: plan.slab(),
                lower_bound,
                kept_input,
            };
            cx.planned = Some(plan);
            Ok(PassReport::Plan(stats))
        }
        Pass::Bufferize => {
            let p = cx.planned.take().ok_or_else(|| {
                fail("there is no plan: run `plan` first (e.g. `plan,bufferize`)".into())
            })?;
            let func = module
                .funcs
                .iter_mut()
                .find(|f| f.name == p.func)
                .ok_or_else(|| fail("the planned function is gone".into()))?;
            if func.layout != p.layout {
                return Err(fail(
                    "the plan was made for another op order; run `plan` again".into(),
                ));
            }
            let s = bufferize(func, &p.assignment, &p.plan, p.policy.align)
                .map_err(|e| fail(e.to_string()))?;
            Ok(PassReport::Bufferize(s))
        }
    }
}
