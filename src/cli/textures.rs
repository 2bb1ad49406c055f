//! `tirc plan --records` of a CSV with `w,h[,d]` sizes: 2D/3D textures (TFLite's GPU memory
//! manager, `uint2`/`uint3` sizes), planned as shared objects with the strategies TFLite
//! defines for them, against the positional-maxima bound on volumes. Every plan shown has
//! passed the independent checker first.

use super::plan::{fmt_time, plan_error, ratio, Approach, Options};
use super::records::NdInput;
use super::Failure;
use serde::Serialize;
use std::io::Write as _;
use std::time::Instant;
use tir_passes::planner::checker::check_shared_objects_nd;
use tir_passes::planner::multidim::{
    best_shared_objects_nd, lower_bound_nd, plan_shared_objects_nd, volume, STRATEGIES_ND,
};
use tir_passes::planner::SharedObjectStrategy;

#[derive(Serialize)]
struct RecordJson<'a> {
    name: &'a str,
    first_op: usize,
    last_op: usize,
    size: &'a [u64],
}

#[derive(Serialize)]
struct ObjectsRow {
    strategy: &'static str,
    /// Σ object volumes, in elements.
    cost: u64,
    ratio_to_lower_bound: f64,
    time_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    winner: Option<&'static str>,
    object_ids: Vec<usize>,
    object_sizes: Vec<Vec<u64>>,
}

#[derive(Serialize)]
struct Report<'a> {
    source: &'a str,
    name: &'a str,
    /// 2 (`w,h`) or 3 (`w,h,d`).
    dims: usize,
    operators: usize,
    records: Vec<RecordJson<'a>>,
    /// Σ tensor volumes: every tensor its own object.
    naive_total: u64,
    /// Σ positional maxima of the volumes (paper §4.1 on volumes).
    lower_bound: u64,
    shared_objects: Vec<ObjectsRow>,
}

fn columns(dims: usize) -> &'static str {
    if dims == 2 {
        "w,h"
    } else {
        "w,h,d"
    }
}

/// The strategies `--strategy NAME` asks for on multi-dimensional sizes; `None` for a name
/// (known to the 1D planner: the caller refused the others) that TFLite does not define here.
fn strategies(name: &str) -> Option<Vec<SharedObjectStrategy>> {
    if name == "all" {
        let mut all = STRATEGIES_ND.to_vec();
        all.push(SharedObjectStrategy::Best);
        return Some(all);
    }
    let s = name.parse::<SharedObjectStrategy>().ok()?;
    (s == SharedObjectStrategy::Best || STRATEGIES_ND.contains(&s)).then(|| vec![s])
}

pub fn run<const D: usize>(opts: &Options, input: &NdInput<D>) -> Result<(), Failure> {
    let src = input.source.as_str();
    if opts.approach == Approach::Offsets || opts.emit_csv.is_some() {
        eprintln!(
            "{src}: error: the sizes are multi-dimensional (`{}`): textures are not laid in one \
             slab, so there are no offsets to plan; plan them as shared objects (--objects)",
            columns(D)
        );
        return Err(Failure::Reported);
    }
    let Some(names) = strategies(&opts.strategy) else {
        eprintln!(
            "{src}: error: strategy `{}` is not defined for {D}-dimensional sizes; expected one \
             of: naive, equality, greedy_in_order, best, all",
            opts.strategy
        );
        return Err(Failure::Reported);
    };
    let bound = lower_bound_nd(&input.records).map_err(|e| plan_error(src, e))?;
    // `lower_bound_nd` validated every volume and their sum.
    let naive_total = input
        .records
        .iter()
        .filter_map(|r| volume(&r.size))
        .fold(0u64, u64::saturating_add);
    let mut rows = Vec::new();
    for s in names {
        let start = Instant::now();
        let (plan, winner) = if s == SharedObjectStrategy::Best {
            let best = best_shared_objects_nd(&input.records).map_err(|e| plan_error(src, e))?;
            (best.plan, Some(best.strategy.name()))
        } else {
            let plan = plan_shared_objects_nd(&input.records, s).map_err(|e| plan_error(src, e))?;
            (plan, None)
        };
        let time_ms = start.elapsed().as_secs_f64() * 1e3;
        check_shared_objects_nd(&input.records, &plan).map_err(|errs| {
            eprintln!(
                "{src}: internal error: strategy `{}` produced an invalid plan:",
                s.name()
            );
            for e in errs.iter().take(10) {
                eprintln!("  {e}");
            }
            Failure::Reported
        })?;
        // The checker verified that the cost fits in u64.
        let cost = plan.cost().unwrap_or(u64::MAX);
        rows.push(ObjectsRow {
            strategy: s.name(),
            cost,
            ratio_to_lower_bound: ratio(cost, bound),
            time_ms,
            winner,
            object_ids: plan.object_ids,
            object_sizes: plan.object_sizes.iter().map(|s| s.to_vec()).collect(),
        });
    }
    let report = Report {
        source: src,
        name: &input.name,
        dims: D,
        operators: input.num_ops,
        records: input
            .records
            .iter()
            .zip(&input.names)
            .map(|(r, name)| RecordJson {
                name,
                first_op: r.first_op,
                last_op: r.last_op,
                size: &r.size,
            })
            .collect(),
        naive_total,
        lower_bound: bound,
        shared_objects: rows,
    };
    if opts.json {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
        serde_json::to_writer_pretty(&mut out, &report).map_err(|e| plan_error(src, e))?;
        writeln!(out)
            .and_then(|()| out.flush())
            .map_err(|e| plan_error(src, e))?;
    } else {
        print_table(&report);
    }
    Ok(())
}

fn print_table(r: &Report<'_>) {
    println!(
        "{} ({}): {} operators, {} intermediate tensors, {}D sizes (`{}`) in elements",
        r.name,
        r.source,
        r.operators,
        r.records.len(),
        r.dims,
        columns(r.dims)
    );
    println!(
        "naive total (every tensor its own object): {} elements",
        r.naive_total
    );
    println!();
    println!(
        "{:<40} {:>14} {:>9} {:>10}",
        "shared objects (Σ object volumes)", "elements", "/ bound", "time"
    );
    let row = |label: &str, cost: u64, time: Option<f64>| {
        println!(
            "  {label:<38} {cost:>14} {:>9.3} {:>10}",
            ratio(cost, r.lower_bound),
            time.map_or(String::new(), fmt_time)
        );
    };
    row("lower bound: Σ positional maxima", r.lower_bound, None);
    for o in &r.shared_objects {
        let label = match o.winner {
            Some(w) => format!("{} ({w})", o.strategy),
            None => o.strategy.to_string(),
        };
        row(&label, o.cost, Some(o.time_ms));
    }
}
