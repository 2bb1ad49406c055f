//! Planner benchmark: time *and* quality in one run.
//!
//! Instances: synthetic record sets (chains, wide fan-outs, random lifetimes; 1k to 1M
//! records, 64-byte alignment) and the public benchmark CSVs in `../shared/benchmarks`
//! relative to the repository root (`id,lower,upper,size`, half-open; planned unaligned, as
//! published). For each instance the footprint of every strategy is first printed as a ratio
//! to its lower bound (every plan also goes through the checker), then criterion times the
//! strategies. Strategies that are quadratic in the records are skipped above a size where
//! one run would take seconds to minutes, and the table says so.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use tir_planner::checker::{check_offsets, check_shared_objects};
use tir_planner::{
    lower_bounds, plan_offsets, plan_shared_objects, OffsetStrategy, SharedObjectStrategy,
    UsageRecord,
};

/// Largest instance each strategy is run on; `usize::MAX` means near n log n, run everywhere.
fn offsets_limit(strategy: OffsetStrategy) -> usize {
    match strategy {
        OffsetStrategy::StripPackingBestFit => 20_000,
        OffsetStrategy::ObjectsToOffsets(s) => objects_limit(s),
        _ => usize::MAX,
    }
}

fn objects_limit(strategy: SharedObjectStrategy) -> usize {
    match strategy {
        SharedObjectStrategy::GreedyBySizeImproved => 10_000,
        // ~12-15 s per run at 1k records (n Dijkstra runs over ~n^2 / 2 reuse edges).
        SharedObjectStrategy::MinCostFlow => 500,
        // Near n log n for short lifetimes, but each tensor may test every object: O(n k).
        SharedObjectStrategy::GreedyByBreadth | SharedObjectStrategy::GreedyBySize => 100_000,
        _ => usize::MAX,
    }
}

#[path = "common/instances.rs"]
mod instances;
use instances::{chain, fan_out, random_lifetimes, record};

/// `id,lower,upper,size` with `upper` exclusive; buffers with an empty interval are dropped.
fn read_csv(path: &Path) -> Option<Vec<UsageRecord>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut records = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let fields: Vec<u64> = line
            .split(',')
            .map(|f| f.trim().parse().ok())
            .collect::<Option<_>>()?;
        let &[_, lower, upper, size] = fields.as_slice() else {
            return None;
        };
        if upper > lower {
            records.push(record(size, lower as usize, (upper - 1) as usize));
        }
    }
    Some(records)
}

fn benchmark_csvs() -> Vec<(String, Vec<UsageRecord>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/benchmarks");
    let mut found = Vec::new();
    for suite in ["minimalloc-challenging", "idealloc-traces"] {
        let Ok(dir) = std::fs::read_dir(root.join(suite)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.retain(|p| p.extension().is_some_and(|e| e == "csv"));
        paths.sort();
        for path in paths {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            match read_csv(&path) {
                Some(records) => found.push((format!("{suite}/{name}"), records)),
                None => eprintln!("planner bench: cannot parse {}, skipped", path.display()),
            }
        }
    }
    if found.is_empty() {
        eprintln!(
            "planner bench: no CSVs under {}, skipping that part",
            root.display()
        );
    }
    found
}

struct Instance {
    name: String,
    records: Vec<UsageRecord>,
    align: u64,
}

fn instances() -> Vec<Instance> {
    let mut all = Vec::new();
    for n in [1_000, 10_000, 100_000, 1_000_000] {
        for (kind, make) in [
            ("chain", chain as fn(usize) -> Vec<UsageRecord>),
            ("fan_out", fan_out),
            ("random", random_lifetimes),
        ] {
            all.push(Instance {
                name: format!("{kind}/{n}"),
                records: make(n),
                align: 64,
            });
        }
    }
    for (name, records) in benchmark_csvs() {
        all.push(Instance {
            name,
            records,
            align: 1,
        });
    }
    all
}

/// Runs every strategy once, checks its plan, and prints footprint / lower bound.
fn print_quality(instance: &Instance) {
    let Instance {
        name,
        records,
        align,
    } = instance;
    let n = records.len();
    let Ok(bounds) = lower_bounds(records, *align) else {
        eprintln!("{name}: no lower bound");
        return;
    };
    let mut offsets_row = Vec::new();
    let mut best: Option<(f64, &str)> = None;
    for strategy in OffsetStrategy::ALL {
        if n > offsets_limit(strategy) {
            offsets_row.push(format!("{}=skip", strategy.name()));
            continue;
        }
        let start = Instant::now();
        match plan_offsets(records, strategy, *align) {
            Ok(plan) => {
                let took = start.elapsed();
                let verdict = if check_offsets(records, &plan, *align).is_ok() {
                    ""
                } else {
                    " INVALID"
                };
                let ratio = plan.total_size as f64 / bounds.offsets.max(1) as f64;
                if best.is_none_or(|(b, _)| ratio < b) {
                    best = Some((ratio, strategy.name()));
                }
                offsets_row.push(format!(
                    "{}={ratio:.4}{verdict} ({})",
                    strategy.name(),
                    ms(took)
                ));
            }
            Err(e) => offsets_row.push(format!("{}=error({e})", strategy.name())),
        }
    }
    let mut objects_row = Vec::new();
    for strategy in SharedObjectStrategy::ALL {
        if n > objects_limit(strategy) {
            objects_row.push(format!("{}=skip", strategy.name()));
            continue;
        }
        match plan_shared_objects(records, strategy, *align) {
            Ok(plan) => {
                let verdict = if check_shared_objects(records, &plan).is_ok() {
                    ""
                } else {
                    " INVALID"
                };
                let ratio = plan.cost() as f64 / bounds.shared_objects.max(1) as f64;
                objects_row.push(format!("{}={ratio:.4}{verdict}", strategy.name()));
            }
            Err(e) => objects_row.push(format!("{}=error({e})", strategy.name())),
        }
    }
    let (best_ratio, best_name) = best.unwrap_or((f64::NAN, "-"));
    eprintln!(
        "\n[quality] {name}: {n} records, align {align}, offsets LB {} B, shared-objects LB {} B\n  \
         best offsets: {best_name} at {best_ratio:.4} x LB\n  offsets / LB: {}\n  shared objects / LB: {}",
        bounds.offsets,
        bounds.shared_objects,
        offsets_row.join(", "),
        objects_row.join(", ")
    );
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn bench(c: &mut Criterion) {
    for instance in instances() {
        print_quality(&instance);
        let Instance {
            name,
            records,
            align,
        } = &instance;
        let n = records.len();
        let mut group = c.benchmark_group(format!("planner/{name}"));
        group.sample_size(10);
        for strategy in OffsetStrategy::ALL {
            if n > offsets_limit(strategy) {
                continue;
            }
            group.bench_function(BenchmarkId::new("offsets", strategy.name()), |b| {
                b.iter(|| plan_offsets(records, strategy, *align))
            });
        }
        for strategy in SharedObjectStrategy::ALL {
            if n > objects_limit(strategy) {
                continue;
            }
            group.bench_function(BenchmarkId::new("shared_objects", strategy.name()), |b| {
                b.iter(|| plan_shared_objects(records, strategy, *align))
            });
        }
        group.bench_function("lower_bounds", |b| b.iter(|| lower_bounds(records, *align)));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
