//! `tirc plan`: every strategy side by side against the paper's lower bounds.
//!
//! Every plan shown is first validated by the independent checker; a strategy that produced
//! an invalid plan is reported as an internal error rather than shown. A dynamic model is
//! planned at its `--dim` values, over a `--dim-range`, or at its `--dim-max` bounds
//! (`dynamic.rs`).

use super::plan_json::Pretty;
use super::records::{self, AnyInput, PlanInput};
use super::textures;
use super::{input, Failure};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tir_passes::planner::checker::{check_offsets, check_shared_objects};
use tir_passes::planner::csv::{write_records_csv, CsvIds};
use tir_passes::planner::{
    self, align_size, exact_offsets, lower_bounds, ExactOptions, ExactPlan, OffsetStrategy,
    OffsetsPlan, SharedObjectStrategy, SharedObjectsPlan, UsageRecord, BEST_QUADRATIC_LIMIT,
};

/// Which approaches the table shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approach {
    Both,
    Offsets,
    Objects,
}

pub struct Options {
    pub model: Option<PathBuf>,
    pub records: Option<PathBuf>,
    pub inclusive: bool,
    pub strategy: String,
    pub approach: Approach,
    pub align: u64,
    pub json: bool,
    pub emit_csv: Option<PathBuf>,
    pub annotate: bool,
    /// `--dim NAME=N`: a dynamic model's dims.
    pub dims: Vec<String>,
    /// `--dim-range NAME=A..B[:STEP]`: the slab over sizes of one dim.
    pub dim_range: Option<String>,
    /// `--dim-max NAME=N`: one plan for every shape up to the bounds.
    pub dim_max: Vec<String>,
}

const MIB: f64 = (1u64 << 20) as f64;

/// With `--strategy all`, the exact search (issue 9) runs for this long unless a time limit
/// is given, to judge the heuristics against a proven optimum where it finds one quickly.
const EXACT_TIME_IN_ALL: Duration = Duration::from_secs(1);

/// The exact search's answer, as JSON shows it.
#[derive(Serialize)]
struct ExactJson {
    best: u64,
    bound: u64,
    optimal: bool,
    /// `(best − bound) / bound`.
    gap: f64,
    nodes: u64,
    time_ms: f64,
}

impl ExactJson {
    fn new(e: &ExactPlan) -> Self {
        ExactJson {
            best: e.plan.total_size,
            bound: e.lower_bound,
            optimal: e.optimal,
            gap: e.gap(),
            nodes: e.nodes,
            time_ms: e.elapsed.as_secs_f64() * 1e3,
        }
    }
}

#[derive(Serialize)]
struct OffsetsRow {
    strategy: &'static str,
    total_size: u64,
    mib: f64,
    ratio_to_lower_bound: f64,
    time_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    winner: Option<&'static str>,
    offsets: Vec<u64>,
}

#[derive(Serialize)]
struct ObjectsRow {
    strategy: &'static str,
    cost: u64,
    mib: f64,
    ratio_to_lower_bound: f64,
    time_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    winner: Option<&'static str>,
    object_ids: Vec<usize>,
    object_sizes: Vec<u64>,
}

#[derive(Serialize)]
struct Skipped {
    strategy: &'static str,
    reason: String,
}

#[derive(Serialize)]
struct RecordJson<'a> {
    name: &'a str,
    first_op: usize,
    last_op: usize,
    size: u64,
}

/// The records as the report lists them, written straight from the input: a vector of a
/// million [`RecordJson`] would be 40 MB built for nothing.
struct RecordsJson<'a> {
    records: &'a [UsageRecord],
    names: &'a CsvIds,
}

impl RecordsJson<'_> {
    fn len(&self) -> usize {
        self.records.len()
    }

    fn iter(&self) -> impl Iterator<Item = RecordJson<'_>> {
        self.records
            .iter()
            .zip(self.names.iter())
            .map(|(r, name)| RecordJson {
                name,
                first_op: r.first_op,
                last_op: r.last_op,
                size: r.size,
            })
    }
}

impl Serialize for RecordsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

#[derive(Serialize)]
struct Report<'a> {
    source: &'a str,
    name: &'a str,
    align: u64,
    operators: usize,
    records: RecordsJson<'a>,
    /// Σ unaligned sizes: what allocating every intermediate separately costs.
    naive_total: u64,
    /// Σ aligned sizes.
    naive_aligned: u64,
    lower_bounds: Bounds,
    offsets: Vec<OffsetsRow>,
    shared_objects: Vec<ObjectsRow>,
    skipped: Vec<Skipped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exact: Option<ExactJson>,
}

#[derive(Serialize)]
struct Bounds {
    offsets: u64,
    shared_objects: u64,
}

pub(super) fn plan_error(source: &str, e: impl std::fmt::Display) -> Failure {
    eprintln!("{source}: error: {e}");
    Failure::Reported
}

pub(super) fn ratio(v: u64, bound: u64) -> f64 {
    if bound == 0 {
        if v == 0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        v as f64 / bound as f64
    }
}

fn offset_strategies(name: &str) -> Result<Vec<OffsetStrategy>, Failure> {
    if name == "all" {
        let mut all = OffsetStrategy::ALL.to_vec();
        all.push(OffsetStrategy::Best);
        return Ok(all);
    }
    name.parse::<OffsetStrategy>()
        .map(|s| vec![s])
        .map_err(|e| Failure::Usage(e.to_string()))
}

/// Whether `model` is a `.tir` model with symbolic dims that `dims` leaves without values
/// (a file that does not load is left to the usual path, which reports it).
fn model_has_free_dims(model: &Path, dims: &tir_ir::Bindings) -> bool {
    let Some(mut m) = std::fs::read(model)
        .ok()
        .and_then(|b| tir_ir::parser::parse_bytes(&b).ok())
        .map(|(_, m)| m)
    else {
        return false;
    };
    if tir_ir::verify(&mut m).is_err() {
        return false;
    }
    tir_ir::specialize::module_symbols(&m)
        .iter()
        .any(|s| !dims.contains_key(s))
}

fn object_strategies(name: &str) -> Result<Vec<SharedObjectStrategy>, Failure> {
    if name == "all" {
        let mut all = SharedObjectStrategy::ALL.to_vec();
        all.push(SharedObjectStrategy::Best);
        return Ok(all);
    }
    name.parse::<SharedObjectStrategy>()
        .map(|s| vec![s])
        .map_err(|e| Failure::Usage(e.to_string()))
}

// Kept for callers that do not pass a time limit.
#[allow(dead_code)]
pub fn run(opts: Options) -> Result<(), Failure> {
    run_with_time_limit(opts, None)
}

/// [`run`] with the exact strategy's time limit (`--time-limit`); `None` is its default
/// ([`planner::DEFAULT_EXACT_TIME_LIMIT`], or [`EXACT_TIME_IN_ALL`] with `--strategy all`).
pub fn run_with_time_limit(opts: Options, time_limit: Option<Duration>) -> Result<(), Failure> {
    if opts.align == 0 {
        return Err(Failure::Usage("--align must be at least 1".into()));
    }
    // Validate strategy names before any work, so misuse is reported as such (exit 2).
    let offs = if opts.approach != Approach::Objects {
        offset_strategies(&opts.strategy).or_else(|e| {
            // A shared-objects-only name (none today) is fine when offsets are not asked for.
            if opts.approach == Approach::Both && object_strategies(&opts.strategy).is_ok() {
                Ok(Vec::new())
            } else {
                Err(e)
            }
        })?
    } else {
        Vec::new()
    };
    let objs = if opts.approach != Approach::Offsets {
        match object_strategies(&opts.strategy) {
            Ok(s) => s,
            // `objects:greedy_by_size` and friends only exist as offset strategies.
            Err(_) if opts.approach == Approach::Both && !offs.is_empty() => Vec::new(),
            Err(e) => return Err(e),
        }
    } else {
        Vec::new()
    };
    let dims = input::parse_dims(&opts.dims)?;
    if let Some(range) = &opts.dim_range {
        let range = super::dynamic::parse_range(range)?;
        let Some(model) = opts.model.as_deref() else {
            return Err(Failure::Usage("--dim-range needs a model".into()));
        };
        return super::dynamic::range(model, &dims, &range, opts.align, opts.json);
    }
    let input = if !opts.dim_max.is_empty() {
        let Some(model) = opts.model.as_deref() else {
            return Err(Failure::Usage("--dim-max needs a model".into()));
        };
        let maxima = input::parse_dims(&opts.dim_max).map_err(|_| {
            Failure::Usage("--dim-max: expected NAME=N (repeatable, each name once)".into())
        })?;
        let (at, note) = super::dynamic::bounded(model, &dims, &maxima)?;
        if !opts.json {
            println!("{note}");
        }
        records::from_model(model, &at, Some("--dim"))?
    } else {
        if let Some(model) = opts.model.as_deref() {
            // A dynamic model with dims left free: its records with symbolic sizes.
            if model_has_free_dims(model, &dims) {
                if opts.annotate || opts.emit_csv.is_some() {
                    return Err(Failure::Usage(format!(
                        "{} needs sizes: give the model's dims values with --dim NAME=N (or bounds with --dim-max NAME=N)",
                        if opts.annotate { "--annotate" } else { "--emit-csv" }
                    )));
                }
                return super::dynamic::symbolic(model, &dims, opts.json);
            }
        }
        match (opts.model.as_deref(), opts.records.as_deref()) {
            // A CSV may have multi-dimensional sizes: those plan as textures, on their own path.
            (None, Some(path)) => match records::from_any_csv(path, opts.inclusive)? {
                AnyInput::Bytes(input) => input,
                AnyInput::Dims2(input) => return textures::run(&opts, &input),
                AnyInput::Dims3(input) => return textures::run(&opts, &input),
            },
            (model, csv) => records::load(model, csv, opts.inclusive, &dims, Some("--dim"))?,
        }
    };
    if opts.annotate {
        return annotate(&input, opts.align);
    }
    let src = input.source.as_str();
    let bounds = lower_bounds(&input.records, opts.align).map_err(|e| plan_error(src, e))?;
    let naive_total = input
        .records
        .iter()
        .try_fold(0u64, |a, r| a.checked_add(r.size));
    let naive_total =
        naive_total.ok_or_else(|| plan_error(src, "the naive total overflows u64"))?;
    let mut naive_aligned = 0u64;
    for r in &input.records {
        let s = align_size(r.size, opts.align).map_err(|e| plan_error(src, e))?;
        naive_aligned = naive_aligned
            .checked_add(s)
            .ok_or_else(|| plan_error(src, "the naive total overflows u64"))?;
    }
    let n = input.records.len();
    let run_all = opts.strategy == "all";
    let mut skipped = Vec::new();

    let mut offsets_rows = Vec::new();
    let mut exact = None;
    let exact_options = |default: Duration| ExactOptions {
        time_limit: time_limit.unwrap_or(default),
        ..ExactOptions::default()
    };
    for s in offs {
        if run_all && s.is_quadratic() && n > BEST_QUADRATIC_LIMIT {
            skipped.push(Skipped { strategy: s.name(), reason: format!("quadratic in the number of records; {n} > {BEST_QUADRATIC_LIMIT} (name it with --strategy to run it anyway)") });
            continue;
        }
        let start = Instant::now();
        let (plan, winner) = if s == OffsetStrategy::Best {
            let best = planner::best_offsets(&input.records, opts.align)
                .map_err(|e| plan_error(src, e))?;
            (best.plan, Some(best.strategy.name()))
        } else if s == OffsetStrategy::Exact {
            let e = exact_offsets(
                &input.records,
                opts.align,
                &exact_options(planner::DEFAULT_EXACT_TIME_LIMIT),
            )
            .map_err(|e| plan_error(src, e))?;
            let plan = e.plan.clone();
            let from = e.heuristic.name();
            exact = Some(e);
            (plan, Some(from))
        } else {
            match planner::plan_offsets(&input.records, s, opts.align) {
                Ok(p) => (p, None),
                Err(e) => {
                    skipped.push(Skipped {
                        strategy: s.name(),
                        reason: e.to_string(),
                    });
                    continue;
                }
            }
        };
        let time_ms = start.elapsed().as_secs_f64() * 1e3;
        verify_offsets(src, s.name(), &input, &plan, opts.align)?;
        offsets_rows.push(OffsetsRow {
            strategy: s.name(),
            total_size: plan.total_size,
            mib: plan.total_size as f64 / MIB,
            ratio_to_lower_bound: ratio(plan.total_size, bounds.offsets),
            time_ms,
            winner,
            offsets: plan.offsets,
        });
    }

    // `all` also asks the exact search, briefly, to judge the heuristics (issue 9).
    if run_all && !offsets_rows.is_empty() {
        if n > BEST_QUADRATIC_LIMIT {
            skipped.push(Skipped {
                strategy: OffsetStrategy::Exact.name(),
                reason: format!("{n} > {BEST_QUADRATIC_LIMIT} records (name it with --strategy to run it anyway)"),
            });
        } else {
            let start = Instant::now();
            let e = exact_offsets(
                &input.records,
                opts.align,
                &exact_options(EXACT_TIME_IN_ALL),
            )
            .map_err(|e| plan_error(src, e))?;
            let time_ms = start.elapsed().as_secs_f64() * 1e3;
            verify_offsets(src, "exact", &input, &e.plan, opts.align)?;
            offsets_rows.push(OffsetsRow {
                strategy: "exact",
                total_size: e.plan.total_size,
                mib: e.plan.total_size as f64 / MIB,
                ratio_to_lower_bound: ratio(e.plan.total_size, bounds.offsets),
                time_ms,
                winner: Some(e.heuristic.name()),
                offsets: e.plan.offsets.clone(),
            });
            exact = Some(e);
        }
    }

    let mut objects_rows = Vec::new();
    for s in objs {
        if run_all && s.is_quadratic() && n > BEST_QUADRATIC_LIMIT {
            skipped.push(Skipped { strategy: s.name(), reason: format!("quadratic in the number of records; {n} > {BEST_QUADRATIC_LIMIT} (name it with --strategy to run it anyway)") });
            continue;
        }
        let start = Instant::now();
        let (plan, winner) = if s == SharedObjectStrategy::Best {
            let best = planner::best_shared_objects(&input.records, opts.align)
                .map_err(|e| plan_error(src, e))?;
            (best.plan, Some(best.strategy.name()))
        } else {
            match planner::plan_shared_objects(&input.records, s, opts.align) {
                Ok(p) => (p, None),
                Err(e) => {
                    skipped.push(Skipped {
                        strategy: s.name(),
                        reason: e.to_string(),
                    });
                    continue;
                }
            }
        };
        let time_ms = start.elapsed().as_secs_f64() * 1e3;
        verify_objects(src, s.name(), &input, &plan)?;
        let cost = plan.cost();
        objects_rows.push(ObjectsRow {
            strategy: s.name(),
            cost,
            mib: cost as f64 / MIB,
            ratio_to_lower_bound: ratio(cost, bounds.shared_objects),
            time_ms,
            winner,
            object_ids: plan.object_ids,
            object_sizes: plan.object_sizes,
        });
    }

    if let Some(out) = &opts.emit_csv {
        emit_csv(out, &input, &offsets_rows)?;
    }

    let report = Report {
        source: src,
        name: &input.name,
        align: opts.align,
        operators: input.num_ops,
        records: RecordsJson {
            records: &input.records,
            names: &input.names,
        },
        naive_total,
        naive_aligned,
        lower_bounds: Bounds {
            offsets: bounds.offsets,
            shared_objects: bounds.shared_objects,
        },
        offsets: offsets_rows,
        shared_objects: objects_rows,
        skipped,
        exact: exact.as_ref().map(ExactJson::new),
    };
    if opts.json {
        // Streamed: at a million records the text is over 100 MB, and building it as one
        // String first costs a copy of all of it.
        write_json(&report, std::io::stdout().lock()).map_err(|e| plan_error(src, e))?;
    } else {
        print_table(&report);
    }
    Ok(())
}

/// The report as `serde_json::to_writer_pretty` writes it, plus a final newline, by hand
/// ([`Pretty`]): at a million records serde's generic path was a quarter of the command.
fn write_json(r: &Report<'_>, out: impl std::io::Write) -> std::io::Result<()> {
    let mut j = Pretty::new(out);
    j.begin_object();
    j.key_str("source", r.source);
    j.key_str("name", r.name);
    j.key_u64("align", r.align);
    j.key_u64("operators", r.operators as u64);
    j.key("records");
    j.begin_array();
    for rec in r.records.iter() {
        j.record(rec.name, rec.first_op as u64, rec.last_op as u64, rec.size)?;
    }
    j.end_array()?;
    j.key_u64("naive_total", r.naive_total);
    j.key_u64("naive_aligned", r.naive_aligned);
    j.key("lower_bounds");
    j.begin_object();
    j.key_u64("offsets", r.lower_bounds.offsets);
    j.key_u64("shared_objects", r.lower_bounds.shared_objects);
    j.end_object()?;
    j.key("offsets");
    j.begin_array();
    for row in &r.offsets {
        j.element();
        j.begin_object();
        j.key_str("strategy", row.strategy);
        j.key_u64("total_size", row.total_size);
        j.key_f64("mib", row.mib);
        j.key_f64("ratio_to_lower_bound", row.ratio_to_lower_bound);
        j.key_f64("time_ms", row.time_ms);
        if let Some(w) = row.winner {
            j.key_str("winner", w);
        }
        j.key_u64s("offsets", row.offsets.iter().copied())?;
        j.end_object()?;
    }
    j.end_array()?;
    j.key("shared_objects");
    j.begin_array();
    for row in &r.shared_objects {
        j.element();
        j.begin_object();
        j.key_str("strategy", row.strategy);
        j.key_u64("cost", row.cost);
        j.key_f64("mib", row.mib);
        j.key_f64("ratio_to_lower_bound", row.ratio_to_lower_bound);
        j.key_f64("time_ms", row.time_ms);
        if let Some(w) = row.winner {
            j.key_str("winner", w);
        }
        j.key_u64s("object_ids", row.object_ids.iter().map(|&i| i as u64))?;
        j.key_u64s("object_sizes", row.object_sizes.iter().copied())?;
        j.end_object()?;
    }
    j.end_array()?;
    j.key("skipped");
    j.begin_array();
    for s in &r.skipped {
        j.element();
        j.begin_object();
        j.key_str("strategy", s.strategy);
        j.key_str("reason", &s.reason);
        j.end_object()?;
    }
    j.end_array()?;
    if let Some(e) = &r.exact {
        j.key("exact");
        j.begin_object();
        j.key_u64("best", e.best);
        j.key_u64("bound", e.bound);
        j.key("optimal");
        j.bool(e.optimal);
        j.key_f64("gap", e.gap);
        j.key_u64("nodes", e.nodes);
        j.key_f64("time_ms", e.time_ms);
        j.end_object()?;
    }
    j.end_object()?;
    j.end_line();
    j.finish().map(drop)
}

fn verify_offsets(
    src: &str,
    name: &str,
    input: &PlanInput,
    plan: &OffsetsPlan,
    align: u64,
) -> Result<(), Failure> {
    check_offsets(&input.records, plan, align).map_err(|errs| {
        eprintln!("{src}: internal error: strategy `{name}` produced an invalid plan:");
        for e in errs.iter().take(10) {
            eprintln!("  {e}");
        }
        Failure::Reported
    })
}

fn verify_objects(
    src: &str,
    name: &str,
    input: &PlanInput,
    plan: &SharedObjectsPlan,
) -> Result<(), Failure> {
    check_shared_objects(&input.records, plan).map_err(|errs| {
        eprintln!("{src}: internal error: strategy `{name}` produced an invalid plan:");
        for e in errs.iter().take(10) {
            eprintln!("  {e}");
        }
        Failure::Reported
    })
}

fn emit_csv(out: &Path, input: &PlanInput, rows: &[OffsetsRow]) -> Result<(), Failure> {
    // The plan written is the smallest one shown (the only one, with --strategy NAME).
    let Some(best) = rows.iter().min_by_key(|r| r.total_size) else {
        return Err(Failure::Usage(
            "--emit-csv needs an offsets strategy".into(),
        ));
    };
    let rows: Vec<_> = input
        .records
        .iter()
        .zip(input.names.iter())
        .map(|(r, name)| tir_passes::planner::csv::CsvRecord {
            id: name.to_string(),
            record: *r,
        })
        .collect();
    let text = write_records_csv(&rows, Some(&best.offsets), false);
    input::write_atomic(out, text.as_bytes())
}

pub(super) fn fmt_time(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.0} µs", ms * 1e3)
    } else if ms < 1000.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

fn print_table(r: &Report<'_>) {
    println!(
        "{} ({}): {} operators, {} intermediate tensors, alignment {} B",
        r.name,
        r.source,
        r.operators,
        r.records.len(),
        r.align
    );
    println!(
        "naive total (every intermediate separately): {} bytes ({:.3} MiB)",
        r.naive_total,
        r.naive_total as f64 / MIB
    );
    let header = |title: &str| {
        println!();
        println!(
            "{title:<36} {:>14} {:>10} {:>9} {:>10}",
            "bytes", "MiB", "/ bound", "time"
        );
    };
    // Each heuristic's distance from the optimum, when the exact search proved one.
    let optimum = r.exact.as_ref().filter(|e| e.optimal).map(|e| e.best);
    let vs_optimum = |bytes: u64| match optimum {
        Some(opt) if opt > 0 => format!("  {:+.1}% vs optimum", (ratio(bytes, opt) - 1.0) * 100.0),
        _ => String::new(),
    };
    let row = |label: &str, bytes: u64, bound: u64, time: Option<f64>, note: &str| {
        println!(
            "  {label:<34} {bytes:>14} {:>10.3} {:>9.3} {:>10}{note}",
            bytes as f64 / MIB,
            ratio(bytes, bound),
            time.map_or(String::new(), fmt_time)
        );
    };
    if !r.offsets.is_empty() {
        header("offsets (one slab)");
        row(
            "lower bound: max breadth",
            r.lower_bounds.offsets,
            r.lower_bounds.offsets,
            None,
            "",
        );
        for o in &r.offsets {
            let label = match o.winner {
                Some(w) => format!("{} ({w})", o.strategy),
                None => o.strategy.to_string(),
            };
            let note = if o.strategy == "exact" {
                String::new()
            } else {
                vs_optimum(o.total_size)
            };
            row(
                &label,
                o.total_size,
                r.lower_bounds.offsets,
                Some(o.time_ms),
                &note,
            );
        }
        if let Some(e) = &r.exact {
            let verdict = if e.optimal {
                "optimal (proven)".to_string()
            } else {
                format!(
                    "not proven: bound {}, gap (best − bound) / bound = {:.2}%",
                    e.bound,
                    e.gap * 100.0
                )
            };
            println!(
                "  exact: {} bytes, {verdict}; {} nodes, {}",
                e.best,
                e.nodes,
                fmt_time(e.time_ms)
            );
        }
    }
    if !r.shared_objects.is_empty() {
        header("shared objects");
        row(
            "lower bound: Σ positional maxima",
            r.lower_bounds.shared_objects,
            r.lower_bounds.shared_objects,
            None,
            "",
        );
        for o in &r.shared_objects {
            let label = match o.winner {
                Some(w) => format!("{} ({w})", o.strategy),
                None => o.strategy.to_string(),
            };
            row(
                &label,
                o.cost,
                r.lower_bounds.shared_objects,
                Some(o.time_ms),
                "",
            );
        }
    }
    if !r.skipped.is_empty() {
        println!();
        for s in &r.skipped {
            println!("  skipped {}: {}", s.strategy, s.reason);
        }
    }
}

/// The model printed with each operator's profile as a trailing comment: its index, breadth
/// and the tensors live at it (largest first), as the paper's Fig. 2 tabulates them.
fn annotate(input: &PlanInput, align: u64) -> Result<(), Failure> {
    let Some((module, live)) = &input.model else {
        return Err(Failure::Usage(
            "--annotate needs a MODEL.tir, not --records".into(),
        ));
    };
    let mut profiles: Vec<Vec<usize>> = vec![Vec::new(); live.num_operators];
    let mut breadth = vec![0u64; live.num_operators];
    for (i, r) in live.records.iter().enumerate() {
        let size = align_size(r.size, align).map_err(|e| plan_error(&input.source, e))?;
        for op in r.first_op..=r.last_op {
            profiles[op].push(i);
            breadth[op] = breadth[op].saturating_add(size);
        }
    }
    for p in &mut profiles {
        p.sort_by_key(|&i| std::cmp::Reverse(live.records[i].size));
    }
    let entry = module.entry().map(|f| f.name.clone());
    let note = |f: &tir_ir::Function, id: tir_ir::OpId| {
        if Some(&f.name) != entry.as_ref() {
            return None;
        }
        let i = live.operator_index(id)?;
        let names: Vec<String> = profiles[i]
            .iter()
            .map(|&r| f.value_name(live.values[r]))
            .collect();
        Some(format!(
            "op {i}: breadth {} [{}]",
            breadth[i],
            names.join(" ")
        ))
    };
    print!("{}", tir_ir::print_annotated(module, Some(&note)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(n: usize) -> Vec<UsageRecord> {
        (0..n)
            .map(|i| UsageRecord {
                first_op: i,
                last_op: i + 3,
                size: u64::MAX - i as u64,
            })
            .collect()
    }

    fn by_serde(r: &Report<'_>) -> String {
        serde_json::to_string_pretty(r).expect("serialises") + "\n"
    }

    fn by_hand(r: &Report<'_>) -> String {
        let mut out = Vec::new();
        write_json(r, &mut out).expect("writes");
        String::from_utf8(out).expect("utf-8")
    }

    fn report<'a>(records: &'a [UsageRecord], names: &'a CsvIds, offsets: Vec<u64>) -> Report<'a> {
        Report {
            source: "dir/with \"quotes\" and \\ back\tslash.csv",
            name: "n\u{e9}\u{7f}\u{1}",
            align: 64,
            operators: 7,
            records: RecordsJson { records, names },
            naive_total: 0,
            naive_aligned: 10,
            lower_bounds: Bounds {
                offsets: 99,
                shared_objects: 100,
            },
            offsets: vec![
                OffsetsRow {
                    strategy: "greedy_by_size",
                    total_size: 1 << 40,
                    mib: 1.0 / 3.0,
                    ratio_to_lower_bound: f64::INFINITY,
                    time_ms: 1e-9,
                    winner: None,
                    offsets,
                },
                OffsetsRow {
                    strategy: "best",
                    total_size: 0,
                    mib: 0.0,
                    ratio_to_lower_bound: 1.0,
                    time_ms: 12345678.9,
                    winner: Some("gergov"),
                    offsets: Vec::new(),
                },
            ],
            shared_objects: vec![ObjectsRow {
                strategy: "greedy_by_size",
                cost: 5,
                mib: 1e21,
                ratio_to_lower_bound: f64::NAN,
                time_ms: 0.5,
                winner: Some("x"),
                object_ids: vec![0, 1, 0],
                object_sizes: vec![9, 10],
            }],
            skipped: vec![Skipped {
                strategy: "exact",
                reason: "because \"reasons\"\n".into(),
            }],
            exact: Some(ExactJson {
                best: 3,
                bound: 2,
                optimal: false,
                gap: 0.5,
                nodes: 10,
                time_ms: 2.25,
            }),
        }
    }

    #[test]
    fn the_hand_written_report_is_serde_json_s_byte_for_byte() {
        let names: CsvIds = ["0", "a\"b", "\u{3000}x\r", "", "9"].into_iter().collect();
        let records = records(names.len());
        let offsets = vec![0, 1, 9, 10, 99, 100, 12345, u64::MAX];
        let full = report(&records, &names, offsets);
        assert_eq!(by_hand(&full), by_serde(&full));
        let no_names = CsvIds::new();
        let empty = Report {
            offsets: Vec::new(),
            shared_objects: Vec::new(),
            skipped: Vec::new(),
            exact: None,
            ..report(&[], &no_names, Vec::new())
        };
        assert_eq!(by_hand(&empty), by_serde(&empty));
    }

    #[test]
    fn a_report_larger_than_a_chunk_is_written_whole() {
        let names: CsvIds = (0..40_000).map(|i| i.to_string()).collect();
        let records = records(names.len());
        let full = report(&records, &names, (0..40_000).map(|i| i * 64).collect());
        assert_eq!(by_hand(&full), by_serde(&full));
    }
}
