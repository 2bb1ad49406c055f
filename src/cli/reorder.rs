//! `tirc plan MODEL --reorder`: operator orders side by side, each with its peak breadth (the
//! offsets lower bound), the slab the judge plans for it without buffer sharing
//! (`reorder::judge_order`, which runs the independent checker), the ratio to the input
//! order's slab, the time to schedule and judge it, and for `exact` whether the peak is proven
//! optimal; then every order in compile's currency and the egg row. The table, but for the egg
//! row, fits in `--time-limit` (see `run`). `--json` prints the same rows as one JSON object.

use super::{input, Failure};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tir_passes::plan::PlanPolicy;
use tir_passes::reorder::{self, Budget, Dag, Scheduler};

/// Which rows `--reorder` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Rows {
    /// Every scheduler, the compile row and the egg row.
    All,
    /// The fast schedulers.
    Heuristic,
    /// The exact search.
    Exact,
    /// Every scheduler and the egg row (as `all`).
    Egg,
}

pub struct Options {
    pub model: PathBuf,
    pub rows: Rows,
    /// Only this scheduler's row (`--scheduler`), or `all`.
    pub scheduler: Option<String>,
    pub align: u64,
    pub budget: Budget,
    pub json: bool,
}

/// One order's row.
#[derive(Serialize)]
struct OrderRow {
    scheduler: &'static str,
    peak_breadth: u64,
    slab: u64,
    vs_input: f64,
    time_ms: f64,
    /// The exact search's verdict, for `exact`.
    exact: Option<String>,
    /// The judge skipped quadratic strategies: `slab` is an upper bound.
    judge_stopped_by_time: bool,
}

/// The egg row.
#[derive(Serialize)]
struct EggRow {
    peak_breadth: u64,
    slab: u64,
    vs_input: f64,
    time_ms: f64,
    /// Compile's slab of the input program in the requested scheduler's order.
    slab_reordered: u64,
    /// Compile's slab of the kept program with every offsets strategy.
    planned: u64,
    chosen: String,
    candidates: Vec<Candidate>,
    sites: usize,
    sites_kept: usize,
    sliced_weights: usize,
    egraph_nodes: usize,
    stopped_by_time: bool,
}

#[derive(Serialize)]
struct Candidate {
    label: String,
    peak_breadth: u64,
    slab: Option<u64>,
}

/// The whole table.
#[derive(Serialize)]
struct Table {
    model: String,
    operators: usize,
    intermediates: usize,
    align: u64,
    budget_seconds: f64,
    states: usize,
    orders: Vec<OrderRow>,
    /// Compile's slab (`plan{sharing=true}`, every strategy) of the unrewritten program in
    /// each order.
    compile: Vec<(&'static str, u64)>,
    egg: Option<EggRow>,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

pub fn run(opts: Options) -> Result<(), Failure> {
    let scheduler = opts.scheduler.as_deref().unwrap_or(match opts.rows {
        Rows::Heuristic => "heuristic",
        Rows::Exact => "exact",
        Rows::All | Rows::Egg => "all",
    });
    let schedulers: Vec<Scheduler> = match scheduler {
        "all" => Scheduler::ALL.to_vec(),
        "heuristic" => Scheduler::HEURISTICS.to_vec(),
        name => vec![name
            .parse()
            .map_err(|e: reorder::ReorderError| Failure::Usage(e.to_string()))?],
    };
    let egg = matches!(opts.rows, Rows::All | Rows::Egg);
    let src = opts.model.display().to_string();
    let fail = |e: reorder::ReorderError| {
        eprintln!("{src}: error: {e}");
        Failure::Reported
    };
    // `--time-limit` covers the whole table but the egg row (which has a budget of its own):
    // parsing, the input order's slab, and each row's order and judging. Each row gets what
    // is left; the exact scheduler splits it between its search and its judge.
    let start = Instant::now();
    let deadline = start + opts.budget.time;
    // The order rows plan without sharing: the orders' own currency, whose lower bound is
    // the peak breadth.
    let policy = PlanPolicy {
        align: opts.align,
        ..PlanPolicy::default()
    };
    let judge = policy.with_effort(tir_passes::plan::Effort::Until(deadline));
    let (_, mut module) = input::load_static(&opts.model, &tir_ir::Bindings::new(), None)?;
    let Some(func) = module.entry() else {
        eprintln!("{src}: error: the module has no `@main` function to plan");
        return Err(Failure::Reported);
    };
    let dag = Dag::from_function(func, opts.align).map_err(fail)?;
    let input_order = reorder::input::schedule(&dag);
    let input_plan = reorder::judge_order(func, &dag, &input_order, &judge).map_err(fail)?;
    let input_slab = input_plan.slab();
    let mut table = Table {
        model: src.clone(),
        operators: dag.len(),
        intermediates: dag.tensors.len(),
        align: opts.align,
        budget_seconds: opts.budget.time.as_secs_f64(),
        states: opts.budget.states,
        orders: Vec::new(),
        compile: Vec::new(),
        egg: None,
    };
    if !opts.json {
        println!(
            "{src}: {} operators, {} intermediates, align {}; budget {:.1} s (orders and their judging), {} states per layer",
            table.operators, table.intermediates, table.align, table.budget_seconds, table.states
        );
        println!(
            "{:<11} {:>14} {:>14} {:>9} {:>10}  exact",
            "scheduler", "peak breadth", "slab", "vs input", "time ms"
        );
    }
    // Each order, for the compile and egg rows.
    let mut orders: Vec<(Scheduler, Vec<usize>)> = Vec::new();
    for s in schedulers {
        let row_start = Instant::now();
        let budget = Budget {
            time: deadline.saturating_duration_since(row_start),
            ..opts.budget
        };
        let sched = if s == Scheduler::Exact {
            reorder::schedule_judged(func, &dag, s, budget, &policy).map_err(fail)?
        } else {
            reorder::schedule(&dag, s, budget, opts.align).map_err(fail)?
        };
        orders.push((s, sched.order.clone()));
        let judged = match sched.judged {
            Some(j) => j,
            None if sched.order == input_order => input_plan.clone(),
            None => reorder::judge_order(func, &dag, &sched.order, &judge).map_err(fail)?,
        };
        let time: Duration = row_start.elapsed();
        let exact = sched.exact.as_ref().map(|e| match e.stopped {
            None => format!(
                "optimal peak {} proved ({} pieces, largest {}, {} states)",
                e.peak, e.pieces, e.largest_piece, e.states
            ),
            Some(b) => format!(
                "stopped by the {}: best peak {}, lower bound {} ({} pieces, largest {}, {} states)",
                b.name(),
                e.peak,
                e.lower_bound,
                e.pieces,
                e.largest_piece,
                e.states
            ),
        });
        let row = OrderRow {
            scheduler: s.name(),
            peak_breadth: sched.peak,
            slab: judged.slab(),
            vs_input: ratio(judged.slab(), input_slab),
            time_ms: time.as_secs_f64() * 1e3,
            exact,
            judge_stopped_by_time: sched.judge_stopped_by_time
                || !judged.complete
                || !input_plan.complete,
        };
        if !opts.json {
            let mut note = row.exact.clone().unwrap_or_default();
            // Last on the line: bench/reorder.sh reports the last "stopped by the" it finds.
            if row.judge_stopped_by_time {
                if !note.is_empty() {
                    note.push_str("; ");
                }
                note.push_str(
                    "judge stopped by the time budget: quadratic offsets strategies skipped, slabs are upper bounds",
                );
            }
            println!(
                "{:<11} {:>14} {:>14} {:>9.3} {:>10.1}  {note}",
                row.scheduler, row.peak_breadth, row.slab, row.vs_input, row.time_ms
            );
        }
        table.orders.push(row);
    }
    if egg {
        let best = compile_row(
            &module, &dag, &orders, opts.align, &src, opts.json, &mut table,
        )?;
        // The egg row starts from the order compile plans smallest (as `reorder` then
        // `rewrite` in a pipeline would): the pass judges its input in its own layout among
        // its candidates, so its slab is never above that row's, whatever share of the budget
        // its own order search gets.
        if let (Some(order), Some(func)) = (best, module.entry_mut()) {
            func.layout = reorder::layout_of(func, &dag, &order);
        }
        table.egg = Some(egg_row(&mut module, &opts, input_slab, &src)?);
    }
    if opts.json {
        let text = serde_json::to_string_pretty(&table).map_err(|e| {
            eprintln!("{src}: error: {e}");
            Failure::Reported
        })?;
        println!("{text}");
    }
    Ok(())
}

/// The rows above plan each order without buffer sharing; the egg row's slabs are compile's
/// (`rewrite::compile_slab`: views, in-place element-wise ops, concat sharing). This row puts
/// the unrewritten program in every order in compile's currency too, so the egg row compares
/// with like. Returns the order compile plans smallest (the earliest row on ties).
fn compile_row(
    module: &tir_ir::Module,
    dag: &Dag,
    orders: &[(Scheduler, Vec<usize>)],
    align: u64,
    src: &str,
    json: bool,
    table: &mut Table,
) -> Result<Option<Vec<usize>>, Failure> {
    let Some(func) = module.entry() else {
        return Err(Failure::Reported);
    };
    let mut f = func.clone();
    let mut cells = Vec::new();
    let mut best: Option<(u64, &Vec<usize>)> = None;
    for (s, order) in orders {
        f.layout = reorder::layout_of(func, dag, order);
        // `full`: every offsets strategy, as `tirc compile` plans (the judge inside the pass
        // skips the quadratic ones above `JUDGE_FULL_LIMIT` buffers).
        let slab =
            tir_passes::rewrite::compile_slab(&f, &compile_policy(align), true).map_err(|e| {
                eprintln!("{src}: error: {e}");
                Failure::Reported
            })?;
        if best.is_none_or(|(b, _)| slab < b) {
            best = Some((slab, order));
        }
        cells.push(format!("{} {slab}", s.name()));
        table.compile.push((s.name(), slab));
    }
    if !json {
        println!("{:<11} slab by order: {}", "compile", cells.join(" "));
    }
    Ok(best.map(|(_, o)| o.clone()))
}

/// The egg row: rewriting, judged with the exact scheduler, within `--time-limit`; an
/// indicatif bar on stderr when it is a terminal.
fn egg_row(
    module: &mut tir_ir::Module,
    opts: &Options,
    input_slab: u64,
    src: &str,
) -> Result<EggRow, Failure> {
    use tir_passes::rewrite::{self, RewriteOptions};
    let Some(func) = module.entry_mut() else {
        return Err(Failure::Reported);
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        indicatif::ProgressBar::new(1).with_style(
            indicatif::ProgressStyle::with_template("{msg:>14} [{bar:30}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
    });
    let t0 = Instant::now();
    let mut progress = |phase: &str, done: usize, total: usize| {
        if std::env::var_os("TIR_EGG_TRACE").is_some() {
            eprintln!("{:8.2} {phase} {done}/{total}", t0.elapsed().as_secs_f64());
        }
        if let Some(b) = &bar {
            b.set_message(phase.to_string());
            b.set_length(total as u64);
            b.set_position(done as u64);
        }
    };
    let start = Instant::now();
    let stats = rewrite::rewrite(
        func,
        &RewriteOptions {
            scheduler: Scheduler::Exact,
            budget: opts.budget,
            policy: compile_policy(opts.align),
            ..RewriteOptions::default()
        },
        &mut progress,
    )
    .map_err(|e| {
        eprintln!("{src}: error: {e}");
        Failure::Reported
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let time = start.elapsed();
    // What `tirc compile` plans for the kept program (every offsets strategy), in the same
    // currency as the compile row.
    let planned = rewrite::compile_slab(func, &compile_policy(opts.align), true).map_err(|e| {
        eprintln!("{src}: error: {e}");
        Failure::Reported
    })?;
    let row = EggRow {
        peak_breadth: stats.peak_after,
        slab: stats.slab_after,
        vs_input: ratio(stats.slab_after, input_slab),
        time_ms: time.as_secs_f64() * 1e3,
        slab_reordered: stats.slab_reordered,
        planned,
        chosen: stats.chosen.clone(),
        candidates: stats
            .candidates
            .iter()
            .map(|c| Candidate {
                label: c.label.clone(),
                peak_breadth: c.peak,
                slab: c.slab,
            })
            .collect(),
        sites: stats.sites,
        sites_kept: stats.sites_kept,
        sliced_weights: stats.derived.len(),
        egraph_nodes: stats.egraph_nodes,
        stopped_by_time: stats.budget_stopped,
    };
    if opts.json {
        return Ok(row);
    }
    // Slabs here are compile's (`plan{sharing=true}`), which the pass judges by; the last
    // figures are the exact order of the input program and the kept program's, both in
    // compile's slab, and their ratio.
    println!(
        "{:<11} {:>14} {:>14} {:>9.3} {:>10.1}  compile slab: reordered {} rewritten {} ({:.3}), planned {planned}; kept `{}` of {} candidates; {} of {} rewrite sites, {} sliced weights; e-graph {} nodes{}",
        "egg",
        row.peak_breadth,
        row.slab,
        row.vs_input,
        row.time_ms,
        row.slab_reordered,
        row.slab,
        ratio(row.slab, row.slab_reordered),
        row.chosen,
        row.candidates.len(),
        row.sites_kept,
        row.sites,
        row.sliced_weights,
        row.egraph_nodes,
        if row.stopped_by_time {
            "; stopped by the time budget"
        } else {
            ""
        }
    );
    // Every candidate's guide (lowest heuristic peak) and, for the judged ones, its slab.
    let cands: Vec<String> = row
        .candidates
        .iter()
        .map(|c| match c.slab {
            Some(s) => format!("{} peak {} slab {s}", c.label, c.peak_breadth),
            None => format!("{} peak {}", c.label, c.peak_breadth),
        })
        .collect();
    println!("{:<11} candidates: {}", "", cands.join("; "));
    Ok(row)
}

/// `tirc compile`'s plan at this alignment.
fn compile_policy(align: u64) -> PlanPolicy {
    PlanPolicy {
        align,
        ..PlanPolicy::compile()
    }
}
