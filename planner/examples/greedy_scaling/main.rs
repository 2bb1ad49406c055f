//! greedy_by_size offsets (paper Alg. 3, best fit) at scale: the planner's placement against
//! the placement it replaced (`old.rs`) and against Alg. 3 as printed (the quadratic reference
//! of the tests), on the planner bench's synthetic record sets (chain, fan-out, random
//! lifetimes; 1k to 1M records, align 64) and on CSV instances given on the command line
//! (half-open `id,lower,upper,size`, align 1 as published). Every plan goes through the
//! independent checker, and the old and textbook plans must equal the new one offset for
//! offset. Times are CPU time of the planning thread (`CLOCK_THREAD_CPUTIME_ID`; this machine is
//! shared, so wall time mostly measures the other processes), best of `--runs` runs, side by
//! side as ratios.
//!
//! Usage: `cargo run --release -p tir-planner --example greedy_scaling -- [--max N]
//! [--textbook-max N] [--runs N] [--only chain|fan_out|random] [--no-old] [FILE.csv...]` (run by `bench/greedy_scaling.sh`).

#[path = "../../benches/common/instances.rs"]
mod instances;
mod old;
#[path = "../../tests/planner_common/textbook.rs"]
mod textbook;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use tir_planner::checker::check_offsets;
use tir_planner::csv::read_records_csv;
use tir_planner::{lower_bounds, plan_offsets, OffsetStrategy, OffsetsPlan, UsageRecord};

struct Options {
    max: usize,
    textbook_max: usize,
    runs: usize,
    only: Option<String>,
    /// `--no-old`: skip the previous placement (for profiling the new one alone).
    no_old: bool,
    files: Vec<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        max: 1_000_000,
        textbook_max: 10_000,
        runs: 3,
        only: None,
        no_old: false,
        files: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = |name: &str| {
            args.next()
                .and_then(|s| s.parse::<usize>().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match a.as_str() {
            "--max" => options.max = number("--max")?,
            "--textbook-max" => options.textbook_max = number("--textbook-max")?,
            "--runs" => options.runs = number("--runs")?.max(1),
            "--only" => options.only = Some(args.next().ok_or("--only needs a kind")?),
            "--no-old" => options.no_old = true,
            _ if a.starts_with("--") => return Err(format!("unknown option {a}")),
            _ => options.files.push(a),
        }
    }
    Ok(options)
}

/// This thread's CPU time so far (`CLOCK_THREAD_CPUTIME_ID`), so that figures taken on a
/// shared, loaded machine stay comparable; wall-clock time if the clock is unavailable.
fn cpu_time(epoch: Instant) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if status == 0 {
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    } else {
        epoch.elapsed()
    }
}

/// Best time of `runs` runs, and the plan of the last.
fn timed<E: std::fmt::Display>(
    runs: usize,
    mut f: impl FnMut() -> Result<OffsetsPlan, E>,
) -> Result<(Duration, OffsetsPlan), String> {
    let mut best = Duration::MAX;
    let mut plan = None;
    let epoch = Instant::now();
    for _ in 0..runs {
        let start = cpu_time(epoch);
        let p = f().map_err(|e| e.to_string())?;
        best = best.min(cpu_time(epoch).saturating_sub(start));
        plan = Some(p);
    }
    plan.map(|p| (best, p)).ok_or_else(|| "no run".to_string())
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// One table row; false if a plan is invalid or differs from the new one.
fn row(name: &str, records: &[UsageRecord], align: u64, options: &Options) -> bool {
    let n = records.len();
    // The big instances are planned once: a 1M-record run takes seconds for the old placement.
    let runs = if n >= 100_000 { 1 } else { options.runs };
    let new = timed(runs, || {
        plan_offsets(records, OffsetStrategy::GreedyBySize, align)
    });
    let Ok((new_time, new_plan)) = new else {
        println!(
            "{name:<28} {n:>9}  error: {}",
            new.err().unwrap_or_default()
        );
        return false;
    };
    let mut ok = check_offsets(records, &new_plan, align).is_ok();
    let bound = lower_bounds(records, align).map(|b| b.offsets).unwrap_or(0);
    let mut cells = Vec::new();
    let mut peer =
        |label: &str, result: Option<Result<(Duration, OffsetsPlan), String>>| match result {
            None => cells.push(format!("{:>10} {:>9}", "skip", "-")),
            Some(Ok((time, plan))) => {
                let same = plan == new_plan;
                ok &= same;
                cells.push(format!(
                    "{:>10} {:>8.1}x{}",
                    ms(time),
                    time.as_secs_f64() / new_time.as_secs_f64().max(1e-9),
                    if same { "" } else { " DIFFERS" }
                ));
                let _ = label;
            }
            Some(Err(e)) => {
                ok = false;
                cells.push(format!("{label} error: {e}"));
            }
        };
    peer(
        "old",
        (!options.no_old).then(|| timed(runs, || old::greedy_by_size(records, align))),
    );
    if n <= options.textbook_max {
        peer(
            "textbook",
            Some(timed(1, || {
                Ok::<_, String>(textbook::textbook_offsets(
                    records,
                    textbook::Order::Size,
                    textbook::Fit::Best,
                    align,
                ))
            })),
        );
    } else {
        cells.push(format!("{:>10} {:>9}", "skip", "-"));
    }
    // Gergov's algorithm (phase 1 skyline + Best Fit, `offsets/gergov.rs`) on the same
    // records: its time as a ratio to greedy_by_size's and its slab against the same bound.
    match timed(runs, || {
        plan_offsets(records, OffsetStrategy::Gergov, align)
    }) {
        Ok((time, plan)) => {
            ok &= check_offsets(records, &plan, align).is_ok();
            cells.push(format!(
                "{:>8.4} {:>10} {:>8.1}x {:>8.4}",
                new_plan.total_size as f64 / bound.max(1) as f64,
                ms(time),
                time.as_secs_f64() / new_time.as_secs_f64().max(1e-9),
                plan.total_size as f64 / bound.max(1) as f64
            ));
        }
        Err(e) => {
            ok = false;
            cells.push(format!("gergov error: {e}"));
        }
    }
    println!(
        "{name:<28} {n:>9} {:>10} {}{}",
        ms(new_time),
        cells.join(" "),
        if ok { "" } else { "  INVALID" }
    );
    ok
}

fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("greedy_scaling: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "greedy_by_size offsets: new = this planner, old = placement before the start-block \
         tree, textbook = Alg. 3 as printed; times in ms of CPU time (best of {} runs below 100k \
         records), \
         ratios = peer time / new time; slab/LB = footprint over the max-breadth bound; \
         gergov = Gergov's algorithm (skyline + Best Fit) on the same records",
        options.runs
    );
    println!(
        "{:<28} {:>9} {:>10} {:>10} {:>9} {:>10} {:>9} {:>8} {:>10} {:>9} {:>8}",
        "instance",
        "records",
        "new ms",
        "old ms",
        "old/new",
        "textbk ms",
        "tb/new",
        "slab/LB",
        "gergov ms",
        "gv/new",
        "gv/LB"
    );
    let mut ok = true;
    for n in [1_000, 10_000, 100_000, 1_000_000] {
        if n > options.max {
            continue;
        }
        for (kind, make) in [
            ("chain", instances::chain as fn(usize) -> Vec<UsageRecord>),
            ("fan_out", instances::fan_out),
            ("random", instances::random_lifetimes),
        ] {
            if options.only.as_ref().is_some_and(|only| only != kind) {
                continue;
            }
            ok &= row(&format!("{kind}/{n}"), &make(n), 64, &options);
        }
    }
    for file in &options.files {
        let name = std::path::Path::new(file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| file.clone());
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("greedy_scaling: {file}: {e}");
                return ExitCode::FAILURE;
            }
        };
        match read_records_csv(&text, false) {
            Ok(rows) => {
                let records: Vec<UsageRecord> = rows.into_iter().map(|r| r.record).collect();
                ok &= row(&name, &records, 1, &options);
            }
            Err(e) => {
                eprintln!("greedy_scaling: {file}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("greedy_scaling: some plan was invalid or differed from the new one");
        ExitCode::FAILURE
    }
}
