//! The pass manager: MLIR-style pipeline strings such as
//! `plan{strategy=greedy_by_size,sharing=false},bufferize`, run in order over a module, each
//! pass timed and reporting statistics, with the verifier (and, once bufferized, the buffer
//! checker) optionally run after every pass.

use crate::buffer_check::check_bufferized;
use crate::bufferize::{bufferize, is_bufferized};
use crate::buffers::{assign_buffers, BufferAssignment, Sharing};
use crate::planner::{self, lower_bounds, OffsetStrategy, OffsetsPlan, DEFAULT_ALIGNMENT};
use crate::reorder::{self, ReorderOptions, Scheduler};
use std::time::{Duration, Instant};
use tir_ir::{Module, OpId};

/// One pass with its options.
#[derive(Clone, Debug, PartialEq)]
pub enum Pass {
    /// Choose a memory-aware operator order (changes only the layout).
    Reorder(ReorderOptions),
    /// egg rewriting for memory (issue 8), then the order of its scheduler.
    Rewrite(crate::rewrite::RewriteOptions),
    /// Assign buffers and plan their offsets; the plan is kept for `bufferize`.
    Plan {
        strategy: OffsetStrategy,
        align: u64,
        sharing: bool,
        /// Bytes of padding planned after every buffer (`tirc compile --guard` puts canary
        /// bytes there); 0 plans the true sizes.
        guard: u64,
    },
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
            Pass::Plan { .. } => "plan",
            Pass::Bufferize => "bufferize",
            Pass::Verify => "verify",
        }
    }
}

/// A pipeline string that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("empty pass name in pipeline `{0}`")]
    Empty(String),
    #[error("unknown pass `{0}`; the passes are: reorder, rewrite, plan, bufferize, verify")]
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
    Ok(passes)
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
                        opts.scheduler =
                            v.parse::<Scheduler>().map_err(|e| bad(&k, e.to_string()))?
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
                return Ok(Pass::Rewrite(crate::rewrite::RewriteOptions {
                    scheduler: opts.scheduler,
                    budget: opts.budget,
                    align: opts.align,
                    ..Default::default()
                }));
            }
            Ok(Pass::Reorder(opts))
        }
        "plan" => {
            let (mut strategy, mut align, mut sharing, mut guard) =
                (OffsetStrategy::Best, DEFAULT_ALIGNMENT, false, 0);
            for (k, v) in options {
                match k.as_str() {
                    "strategy" => {
                        strategy = v
                            .parse()
                            .map_err(|e: planner::PlanError| bad(&k, e.to_string()))?
                    }
                    "align" => {
                        align = v
                            .parse()
                            .ok()
                            .filter(|a: &u64| *a > 0 && a.is_power_of_two())
                            .ok_or_else(|| bad(&k, format!("expected a power of two, got `{v}`")))?
                    }
                    "sharing" => {
                        sharing = v
                            .parse()
                            .map_err(|_| bad(&k, format!("expected true or false, got `{v}`")))?
                    }
                    "guard" => {
                        guard = v
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
            Ok(Pass::Plan {
                strategy,
                align,
                sharing,
                guard,
            })
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

/// What a pass reports.
#[derive(Clone, Debug, PartialEq)]
pub struct PassStats {
    pub pass: &'static str,
    pub time: Duration,
    pub stats: Vec<(&'static str, String)>,
}

/// The plan carried from `plan` to `bufferize`, with the op order it was made for.
struct Planned {
    func: String,
    layout: Vec<OpId>,
    assignment: BufferAssignment,
    plan: OffsetsPlan,
    align: u64,
}

/// Runs the passes in order. `after_each` sees the module after every pass (for
/// `--print-after-all`); `verify_each` verifies after every pass.
pub fn run_pipeline(
    module: &mut Module,
    passes: &[Pass],
    verify_each: bool,
    mut after_each: impl FnMut(&Pass, &Module),
) -> Result<Vec<PassStats>, PassError> {
    let mut planned: Option<Planned> = None;
    let mut all = Vec::new();
    for pass in passes {
        let start = Instant::now();
        let stats = run_one(module, pass, &mut planned)?;
        all.push(PassStats {
            pass: pass.name(),
            time: start.elapsed(),
            stats,
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
    for f in &module.funcs {
        check_bufferized(f).map_err(|es| {
            es.iter()
                .map(|e| format!("@{}: {e}", f.name))
                .collect::<Vec<_>>()
        })?;
    }
    Ok(())
}

fn run_one(
    module: &mut Module,
    pass: &Pass,
    planned: &mut Option<Planned>,
) -> Result<Vec<(&'static str, String)>, PassError> {
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
            Ok(vec![])
        }
        Pass::Reorder(opts) => {
            let func = module
                .entry_mut()
                .ok_or_else(|| fail("the module has no `@main` function".into()))?;
            let s = reorder::reorder(func, opts).map_err(|e| fail(e.to_string()))?;
            // Any earlier plan was made for the old order.
            *planned = None;
            let mut stats = vec![
                ("scheduler", s.scheduler.name().to_string()),
                ("peak bytes before", s.peak_before.to_string()),
                ("peak bytes after", s.peak_after.to_string()),
                ("slab bytes before", s.slab_before.to_string()),
                ("slab bytes after", s.slab_after.to_string()),
            ];
            if s.kept_input {
                stats.push(("kept input order", "true".to_string()));
            }
            if s.judge_stopped_by_time {
                stats.push((
                    "judge",
                    "stopped by the time budget (slabs are upper bounds)".to_string(),
                ));
            }
            if let Some(e) = &s.exact {
                stats.push((
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
            Ok(stats)
        }
        Pass::Rewrite(opts) => {
            let func = module
                .entry_mut()
                .ok_or_else(|| fail("the module has no `@main` function".into()))?;
            let s = crate::rewrite::rewrite(func, opts, &mut |_, _, _| {})
                .map_err(|e| fail(e.to_string()))?;
            *planned = None;
            let mut stats = vec![
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
                stats.push(("stopped by", "the time budget".to_string()));
            }
            Ok(stats)
        }
        Pass::Plan {
            strategy,
            align,
            sharing,
            guard,
        } => {
            let func = module
                .entry()
                .ok_or_else(|| fail("the module has no `@main` function".into()))?;
            if is_bufferized(func) {
                return Err(fail(format!("`@{}` is already bufferized", func.name)));
            }
            // Sharing shortens lives and removes copies, but pinning producers into a concat's
            // buffer can raise the peak; the variants are planned and the smallest slab kept
            // (ties go to more sharing), so sharing never costs memory.
            let variants: &[Sharing] = if *sharing {
                &[Sharing::ALL, Sharing::NO_CONCAT, Sharing::NONE]
            } else {
                &[Sharing::NONE]
            };
            let mut chosen: Option<(Sharing, BufferAssignment, OffsetsPlan, &'static str)> = None;
            for &variant in variants {
                let assignment = assign_buffers(func, variant).map_err(|e| fail(e.to_string()))?;
                let mut records = assignment.records();
                // Guard bytes belong to their buffer for its whole life: padded records.
                for r in &mut records {
                    r.size += *guard;
                }
                let (plan, used) = if *strategy == OffsetStrategy::Best {
                    let best =
                        planner::best_offsets(&records, *align).map_err(|e| fail(e.to_string()))?;
                    (best.plan, best.strategy.name())
                } else {
                    let plan = planner::plan_offsets(&records, *strategy, *align)
                        .map_err(|e| fail(e.to_string()))?;
                    (plan, strategy.name())
                };
                if chosen
                    .as_ref()
                    .is_none_or(|c| plan.total_size < c.2.total_size)
                {
                    chosen = Some((variant, assignment, plan, used));
                }
            }
            let (variant, assignment, plan, used) =
                chosen.ok_or_else(|| fail("no sharing variant".into()))?;
            let mut records = assignment.records();
            for r in &mut records {
                r.size += *guard;
            }
            let bound = lower_bounds(&records, *align)
                .map_err(|e| fail(e.to_string()))?
                .offsets;
            let stats = vec![
                ("strategy", used.to_string()),
                ("sharing", variant.name().to_string()),
                ("buffers", records.len().to_string()),
                ("shared buffers", assignment.shared_buffers().to_string()),
                ("slab bytes", plan.total_size.to_string()),
                ("lower bound bytes", bound.to_string()),
            ];
            *planned = Some(Planned {
                func: func.name.clone(),
                layout: func.layout.clone(),
                assignment,
                plan,
                align: *align,
            });
            Ok(stats)
        }
        Pass::Bufferize => {
            let p = planned.take().ok_or_else(|| {
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
            let s = bufferize(func, &p.assignment, &p.plan, p.align)
                .map_err(|e| fail(e.to_string()))?;
            Ok(vec![
                ("slab bytes", s.slab_size.to_string()),
                ("buffers", s.buffers.to_string()),
                ("alloc_tensor ops", s.alloc_tensors.to_string()),
            ])
        }
    }
}
