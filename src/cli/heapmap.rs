//! `tirc heapmap`: an SVG picture of an offsets plan.

use super::records;
use super::{input, Failure};
use std::path::PathBuf;
use tir_passes::planner::checker::check_offsets;
use tir_passes::planner::heapmap::{render_heapmap_svg, HeapmapInput};
use tir_passes::planner::{self, align_size, lower_bounds, OffsetStrategy};

pub struct Options {
    pub model: Option<PathBuf>,
    pub records: Option<PathBuf>,
    pub inclusive: bool,
    pub output: PathBuf,
    pub strategy: String,
    pub align: u64,
}

pub fn run(opts: Options) -> Result<(), Failure> {
    if opts.align == 0 {
        return Err(Failure::Usage("--align must be at least 1".into()));
    }
    let strategy: OffsetStrategy = opts
        .strategy
        .parse()
        .map_err(|e: planner::PlanError| Failure::Usage(e.to_string()))?;
    let input = records::load(
        opts.model.as_deref(),
        opts.records.as_deref(),
        opts.inclusive,
        &tir_ir::Bindings::new(),
        None,
    )?;
    let src = input.source.as_str();
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("{src}: error: {e}");
        Failure::Reported
    };
    let (plan, label) = if strategy == OffsetStrategy::Best {
        let best = planner::best_offsets(&input.records, opts.align).map_err(|e| fail(&e))?;
        (best.plan, format!("best ({})", best.strategy.name()))
    } else {
        (
            planner::plan_offsets(&input.records, strategy, opts.align).map_err(|e| fail(&e))?,
            strategy.name().to_string(),
        )
    };
    check_offsets(&input.records, &plan, opts.align).map_err(|errs| {
        eprintln!(
            "{src}: internal error: strategy `{label}` produced an invalid plan: {}",
            errs[0]
        );
        Failure::Reported
    })?;
    let bounds = lower_bounds(&input.records, opts.align).map_err(|e| fail(&e))?;
    let sizes: Vec<u64> = input
        .records
        .iter()
        .map(|r| align_size(r.size, opts.align))
        .collect::<Result<_, _>>()
        .map_err(|e| fail(&e))?;
    let title = format!("{} · {label}", input.name);
    let names: Vec<String> = input.names.iter().map(str::to_string).collect();
    let svg = render_heapmap_svg(&HeapmapInput {
        title: &title,
        records: &input.records,
        names: &names,
        sizes: &sizes,
        offsets: &plan.offsets,
        slab_size: plan.total_size,
        num_ops: input.num_ops,
        lower_bound: bounds.offsets,
    });
    input::write_atomic(&opts.output, svg.as_bytes())?;
    println!(
        "{}: {} tensors, slab {} bytes ({:.3} MiB), lower bound {} bytes; wrote {}",
        input.name,
        input.records.len(),
        plan.total_size,
        plan.total_size as f64 / (1u64 << 20) as f64,
        bounds.offsets,
        opts.output.display()
    );
    Ok(())
}
