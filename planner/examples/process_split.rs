//! Where the CPU time of `tirc plan --records FILE.csv --strategy greedy_by_size --offsets
//! --json` goes, phase by phase, on the library calls that command makes: reading the file,
//! parsing the CSV, both lower bounds, the plan, the independent checker. (JSON writing lives
//! in tirc: the whole process's CPU time minus these is its share, plus start-up and exit.)
//! Thread CPU time (`CLOCK_THREAD_CPUTIME_ID`; the machine is shared, wall time is noise), the
//! median of `--runs` runs per phase.
//!
//! Usage: `cargo run --release -p tir-planner --example process_split -- [--runs N] FILE.csv...`

use std::process::ExitCode;
use std::time::Duration;

use tir_planner::checker::check_offsets;
use tir_planner::csv::{read_any_records_columns, AnyCsvRows};
use tir_planner::{lower_bounds, plan_offsets, OffsetStrategy, UsageRecord, DEFAULT_ALIGNMENT};

fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to write.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn timed<T>(times: &mut Vec<Duration>, f: impl FnOnce() -> T) -> T {
    let start = cpu_time();
    let value = f();
    times.push(cpu_time().saturating_sub(start));
    value
}

fn median(times: &mut [Duration]) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64()
}

fn main() -> ExitCode {
    let mut runs = 3;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--runs" {
            match args.next().and_then(|s| s.parse::<usize>().ok()) {
                Some(n) if n > 0 => runs = n,
                _ => {
                    eprintln!("error: --runs needs a positive number");
                    return ExitCode::from(2);
                }
            }
        } else {
            files.push(a);
        }
    }
    if files.is_empty() {
        eprintln!("usage: process_split [--runs N] FILE.csv...");
        return ExitCode::from(2);
    }
    println!(
        "{:<28} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "file", "read", "csv", "bounds", "plan", "check", "sum"
    );
    for file in &files {
        let mut phases: [Vec<Duration>; 5] = Default::default();
        for _ in 0..runs {
            let text = timed(&mut phases[0], || std::fs::read_to_string(file));
            let text = match text {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{file}: error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let rows = timed(&mut phases[1], || {
                // As `tirc plan --records` reads it: ids in one buffer, records in a vector.
                read_any_records_columns(&text, false).map(|rows| match rows {
                    AnyCsvRows::Bytes(rows) => (rows.ids, rows.records),
                    _ => (Default::default(), Vec::<UsageRecord>::new()),
                })
            });
            let (_names, records) = match rows {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{file}:{}: error: {}", e.line, e.kind);
                    return ExitCode::FAILURE;
                }
            };
            drop(text);
            let bounds = timed(&mut phases[2], || lower_bounds(&records, DEFAULT_ALIGNMENT));
            let plan = timed(&mut phases[3], || {
                plan_offsets(&records, OffsetStrategy::GreedyBySize, DEFAULT_ALIGNMENT)
            });
            let (Ok(_), Ok(plan)) = (bounds, plan) else {
                eprintln!("{file}: error: planning failed");
                return ExitCode::FAILURE;
            };
            let checked = timed(&mut phases[4], || {
                check_offsets(&records, &plan, DEFAULT_ALIGNMENT)
            });
            if checked.is_err() {
                eprintln!("{file}: error: the checker refused the plan");
                return ExitCode::FAILURE;
            }
        }
        let m: Vec<f64> = phases.iter_mut().map(|t| median(t)).collect();
        let name = std::path::Path::new(file)
            .file_name()
            .map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned());
        println!(
            "{name:<28} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m.iter().sum::<f64>()
        );
    }
    ExitCode::SUCCESS
}
