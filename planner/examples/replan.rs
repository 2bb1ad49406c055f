//! Incremental re-planning against full re-planning (issue 21): for each CSV instance given on
//! the command line and each change point k at 25/50/75/90% of its operators, the records
//! starting at k or later grow by 10% (a shape change from op k on); the previous plan is
//! greedy_by_size's. Side by side: CPU time of `replan_offsets` and of a full
//! `plan_offsets(greedy_by_size)` on the changed records (thread CPU time, interleaved rounds,
//! median of `--rounds`, at least 3), how many records kept their offset, and both slabs.
//! Every plan goes through the checker.
//!
//! Usage: `cargo run --release -p tir-planner --example replan -- [--rounds N]
//! [--inclusive] FILE.csv...` (run by `bench/replan.sh`).

use std::process::ExitCode;
use std::time::Duration;

use tir_planner::checker::check_offsets;
use tir_planner::csv::read_records_csv;
use tir_planner::{plan_offsets, replan_offsets, OffsetStrategy, UsageRecord};

/// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): the machine is shared.
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(status, 0, "CLOCK_THREAD_CPUTIME_ID unavailable");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn run() -> Result<(), String> {
    let mut rounds = 3;
    let mut inclusive = false;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|s| s.parse::<usize>().ok())
                    .ok_or("--rounds needs a number")?
                    .max(3)
            }
            "--inclusive" => inclusive = true,
            _ if a.starts_with("--") => return Err(format!("unknown option {a}")),
            _ => files.push(a),
        }
    }
    let align = 64;
    println!("thread CPU time, median of {rounds} interleaved rounds; align {align}");
    println!(
        "{:<28} {:>8} {:>5} {:>8} {:>10} {:>10} {:>7} {:>12} {:>12} {:>7}",
        "instance",
        "records",
        "k%",
        "kept",
        "replan ms",
        "full ms",
        "ratio",
        "replan slab",
        "full slab",
        "ratio"
    );
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let records: Vec<UsageRecord> = read_records_csv(&text, inclusive)
            .map_err(|e| format!("{file}:{e}"))?
            .into_iter()
            .map(|r| r.record)
            .collect();
        let name = std::path::Path::new(file)
            .file_stem()
            .map_or(file.clone(), |s| s.to_string_lossy().into_owned());
        let previous = plan_offsets(&records, OffsetStrategy::GreedyBySize, align)
            .map_err(|e| format!("{file}: {e}"))?;
        let ops = records.iter().map(|r| r.last_op + 1).max().unwrap_or(0);
        for percent in [25, 50, 75, 90] {
            let k = ops * percent / 100;
            let changed: Vec<UsageRecord> = records
                .iter()
                .map(|r| {
                    let mut r = *r;
                    if r.first_op >= k {
                        r.size += r.size / 10;
                    }
                    r
                })
                .collect();
            let (mut t_re, mut t_full) = (Vec::new(), Vec::new());
            let (mut re, mut full) = (None, None);
            for _ in 0..rounds {
                let start = cpu_time();
                re = Some(
                    replan_offsets(&records, &previous, &changed, k, align)
                        .map_err(|e| format!("{file}: {e}"))?,
                );
                t_re.push(cpu_time() - start);
                let start = cpu_time();
                full = Some(
                    plan_offsets(&changed, OffsetStrategy::GreedyBySize, align)
                        .map_err(|e| format!("{file}: {e}"))?,
                );
                t_full.push(cpu_time() - start);
            }
            let (re, full) = (re.expect("ran"), full.expect("ran"));
            check_offsets(&changed, &re.plan, align)
                .map_err(|e| format!("{file}: invalid re-plan: {e:?}"))?;
            check_offsets(&changed, &full, align)
                .map_err(|e| format!("{file}: invalid full plan: {e:?}"))?;
            let (a, b) = (median(t_re), median(t_full));
            println!(
                "{:<28} {:>8} {:>5} {:>8} {:>10.2} {:>10.2} {:>7.2} {:>12} {:>12} {:>7.3}",
                name,
                records.len(),
                percent,
                re.kept_count(),
                ms(a),
                ms(b),
                ms(a) / ms(b).max(1e-9),
                re.plan.total_size,
                full.total_size,
                re.plan.total_size as f64 / full.total_size.max(1) as f64
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
