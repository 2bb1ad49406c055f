//! The exact strategy's benchmark table: for each CSV instance given on the command line
//! (`id,lower,upper,size`, half-open, planned unaligned as published), the max-breadth bound,
//! the best heuristic, the exact search's result (and its ratio to the heuristic) and proven
//! bound, its wall-clock time (the search) and CPU time (heuristics + search). Every plan
//! goes through the independent checker before it is printed.
//!
//! Usage: `cargo run --release -p tir-planner --example exact_table -- [--time-limit SECS]
//! [--align N] FILE.csv...` (run by `bench/exact.sh`).

use std::process::ExitCode;
use std::time::Duration;

use tir_planner::checker::check_offsets;
use tir_planner::csv::read_records_csv;
use tir_planner::{exact_offsets, ExactOptions, UsageRecord};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut options = ExactOptions::default();
    let mut align = 1u64;
    let mut files = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--time-limit" => {
                let Some(secs) = args.next().and_then(|s| s.parse::<f64>().ok()) else {
                    eprintln!("--time-limit needs seconds");
                    return ExitCode::from(2);
                };
                match Duration::try_from_secs_f64(secs) {
                    Ok(d) => options.time_limit = d,
                    Err(e) => {
                        eprintln!("--time-limit: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            "--align" => {
                let Some(n) = args.next().and_then(|s| s.parse::<u64>().ok()) else {
                    eprintln!("--align needs a number");
                    return ExitCode::from(2);
                };
                align = n;
            }
            _ => files.push(a),
        }
    }
    println!(
        "{:<28} {:>7} {:>12} {:>12} {:>12} {:>10} {:>12} {:>9} {:>8} {:>11} {:>9} {:>9}",
        "instance",
        "buffers",
        "max breadth",
        "heuristic",
        "exact",
        "exact/heur",
        "bound",
        "optimal?",
        "gap",
        "nodes",
        "time",
        "cpu"
    );
    let mut failed = false;
    for f in &files {
        let name = std::path::Path::new(f)
            .file_name()
            .map_or(f.clone(), |n| n.to_string_lossy().into_owned());
        let records: Vec<UsageRecord> = match std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| read_records_csv(&t, false).map_err(|e| e.to_string()))
        {
            Ok(rows) => rows.into_iter().map(|r| r.record).collect(),
            Err(e) => {
                eprintln!("{f}: {e}");
                failed = true;
                continue;
            }
        };
        let cpu_before = cpu_seconds();
        let outcome = exact_offsets(&records, align, &options);
        let cpu = cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
        let result = match outcome {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{f}: {e}");
                failed = true;
                continue;
            }
        };
        if let Err(errs) = check_offsets(&records, &result.plan, align) {
            eprintln!("{f}: the exact plan is invalid: {errs:?}");
            failed = true;
            continue;
        }
        println!(
            "{:<28} {:>7} {:>12} {:>12} {:>12} {:>10.4} {:>12} {:>9} {:>7.2}% {:>11} {:>8.2}s {:>9}",
            name,
            records.len(),
            result.max_breadth,
            result.heuristic_size,
            result.plan.total_size,
            result.plan.total_size as f64 / result.heuristic_size.max(1) as f64,
            result.lower_bound,
            if result.optimal { "yes" } else { "no" },
            result.gap() * 100.0,
            result.nodes,
            result.elapsed.as_secs_f64(),
            cpu.map_or("-".to_string(), |c| format!("{c:.2}s"))
        );
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// CPU time of this process so far (all threads, heuristics included), from
/// `/proc/self/stat` (utime + stime, in clock ticks of 1/100 s on Linux): on a loaded machine
/// wall-clock time says more about the neighbours than about the search. `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may contain spaces; the fields after it are plain numbers.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}
