//! `tirc plan` on a dynamic model: `--dim-range NAME=A..B[:STEP]` (the slab as a function of
//! one dim, a table over sizes) and `--dim-max NAME=N` (one static plan valid for every shape
//! up to the bounds).
//!
//! A bounded plan is planned at the bounds, and it is valid for every smaller shape because
//! (1) lifetimes do not depend on dims (liveness is a function of the graph and the order
//! only) and (2) every intermediate's byte size is non-decreasing in every dim: each of its
//! dims is proven so ([`tir_ir::DimExpr::monotone`]), and a product of non-negative
//! non-decreasing factors is non-decreasing. A tensor planned at `[offset, offset + size_at_bound)`
//! holds its smaller self at the same offset, and two intervals that did not overlap still do
//! not. A size the proof cannot show monotone refuses the bounded plan.

use super::records;
use super::{input, Failure};
use serde::Serialize;
use std::path::Path;
use tir_ir::specialize::module_symbols;
use tir_ir::sym::Dim;
use tir_ir::{Bindings, DimExpr, Module};
use tir_passes::planner::checker::check_offsets;
use tir_passes::planner::{self, lower_bounds};

/// `NAME=A..B[:STEP]`.
pub struct DimRange {
    pub name: String,
    pub from: u64,
    pub to: u64,
    pub step: u64,
}

/// More rows than this is a mistake, not a table.
const MAX_ROWS: u64 = 10_000;

pub fn parse_range(arg: &str) -> Result<DimRange, Failure> {
    let bad = || {
        Failure::Usage(format!(
            "--dim-range `{arg}`: expected NAME=A..B or NAME=A..B:STEP with integers 0 <= A <= B and STEP >= 1"
        ))
    };
    let (name, range) = arg.split_once('=').ok_or_else(bad)?;
    let (range, step) = match range.split_once(':') {
        Some((r, s)) => (r, s.trim().parse::<u64>().map_err(|_| bad())?),
        None => (range, 1),
    };
    let (a, b) = range.split_once("..").ok_or_else(bad)?;
    let (from, to) = (
        a.trim().parse::<u64>().map_err(|_| bad())?,
        b.trim().parse::<u64>().map_err(|_| bad())?,
    );
    let name = name.trim().to_string();
    if name.is_empty() || from > to || step == 0 {
        return Err(bad());
    }
    if (to - from) / step >= MAX_ROWS {
        return Err(Failure::Usage(format!(
            "--dim-range `{arg}`: more than {MAX_ROWS} sizes; use a larger STEP"
        )));
    }
    Ok(DimRange {
        name,
        from,
        to,
        step,
    })
}

fn load_dynamic(path: &Path, flag: &str) -> Result<(String, Module), Failure> {
    let (source, module) = input::load_module(path)?;
    if !module.is_dynamic() {
        return Err(Failure::Usage(format!(
            "{flag}: the model has no symbolic dims"
        )));
    }
    Ok((source, module))
}

#[derive(Serialize)]
struct RangeRow {
    value: u64,
    records: usize,
    lower_bound: u64,
    slab: u64,
    strategy: &'static str,
}

/// The slab of the best offsets plan (and the lower bound) at every size of one dim.
pub fn range(
    path: &Path,
    dims: &Bindings,
    r: &DimRange,
    align: u64,
    json: bool,
) -> Result<(), Failure> {
    let (source, module) = load_dynamic(path, "--dim-range")?;
    input::check_dim_names(&module, dims, "--dim")?;
    let mut one = Bindings::new();
    one.insert(r.name.clone(), r.from);
    input::check_dim_names(&module, &one, "--dim-range")?;
    if dims.contains_key(&r.name) {
        return Err(Failure::Usage(format!(
            "`{}` is given both --dim and --dim-range",
            r.name
        )));
    }
    let src = path.display().to_string();
    let mut rows = Vec::new();
    let mut v = r.from;
    loop {
        let mut b = dims.clone();
        b.insert(r.name.clone(), v);
        let m = input::specialize(path, &source, module.clone(), &b, Some("--dim"))?;
        let input = records::from_module(path, m)?;
        let bounds = lower_bounds(&input.records, align).map_err(|e| fail(&src, e))?;
        let best = planner::best_offsets(&input.records, align).map_err(|e| fail(&src, e))?;
        check_offsets(&input.records, &best.plan, align).map_err(|errs| {
            eprintln!(
                "{src}: internal error: the plan at {} = {v} is invalid: {}",
                r.name,
                errs.first().map_or(String::new(), ToString::to_string)
            );
            Failure::Reported
        })?;
        rows.push(RangeRow {
            value: v,
            records: input.records.len(),
            lower_bound: bounds.offsets,
            slab: best.plan.total_size,
            strategy: best.strategy.name(),
        });
        match v.checked_add(r.step) {
            Some(next) if next <= r.to => v = next,
            _ => break,
        }
    }
    if json {
        let text = serde_json::to_string_pretty(&rows).map_err(|e| fail(&src, e))?;
        println!("{text}");
        return Ok(());
    }
    let pinned: Vec<String> = dims.iter().map(|(n, v)| format!("{n} = {v}")).collect();
    println!(
        "{} ({src}): the slab over {} = {}..{} step {}{}, alignment {align} B",
        module.name,
        r.name,
        r.from,
        r.to,
        r.step,
        if pinned.is_empty() {
            String::new()
        } else {
            format!(" ({})", pinned.join(", "))
        }
    );
    println!();
    println!(
        "{:>10} {:>8} {:>16} {:>16} {:>9}  strategy",
        r.name, "records", "lower bound (B)", "slab (B)", "/ bound"
    );
    for row in &rows {
        let ratio = if row.lower_bound == 0 {
            1.0
        } else {
            row.slab as f64 / row.lower_bound as f64
        };
        println!(
            "{:>10} {:>8} {:>16} {:>16} {:>9.3}  {}",
            row.value, row.records, row.lower_bound, row.slab, ratio, row.strategy
        );
    }
    Ok(())
}

fn fail(src: &str, e: impl std::fmt::Display) -> Failure {
    eprintln!("{src}: error: {e}");
    Failure::Reported
}

/// `--dim-max`: proves that a plan at the bounds serves every smaller shape and returns the
/// bindings to plan at (the bounds, and the `--dim` values of the other dims), with the
/// sentence that says so.
pub fn bounded(
    path: &Path,
    dims: &Bindings,
    maxima: &Bindings,
) -> Result<(Bindings, String), Failure> {
    let (_, module) = load_dynamic(path, "--dim-max")?;
    input::check_dim_names(&module, dims, "--dim")?;
    input::check_dim_names(&module, maxima, "--dim-max")?;
    if let Some(n) = maxima.keys().find(|n| dims.contains_key(*n)) {
        return Err(Failure::Usage(format!(
            "`{n}` is given both --dim and --dim-max"
        )));
    }
    let src = path.display().to_string();
    let Some(func) = module.entry() else {
        return Err(fail(&src, "the module has no `@main` function to plan"));
    };
    // The dims that stay free below their bounds; pinned ones are constants.
    let pinned = |s: &str| dims.get(s).map(|&n| DimExpr::lit(n));
    let returned: Vec<_> = func.returns.clone();
    for (_, data) in func.ops_in_order() {
        if !data.op.is_operator() {
            continue;
        }
        for &v in &data.results {
            if returned.contains(&v) {
                continue;
            }
            let Some(t) = func.values[v].sym.as_ref() else {
                continue;
            };
            // Dims are non-negative wherever the model is valid, so a size (a product of
            // dims) is non-decreasing when each of its dims is.
            for (i, d) in t.shape.iter().enumerate() {
                let d = d.substitute(&pinned).ok_or_else(|| {
                    fail(&src, format!("a dim of `{}` overflows", func.value_name(v)))
                })?;
                if !d.monotone() {
                    eprintln!(
                        "{src}: error: --dim-max: dimension {i} of `{}` ({t}) is `{d}`, not provably non-decreasing in the dims, so a plan at the bounds is not proven valid for smaller shapes; plan at given sizes with --dim",
                        func.value_name(v)
                    );
                    return Err(Failure::Reported);
                }
            }
        }
    }
    let free: Vec<String> = module_symbols(&module)
        .into_iter()
        .filter(|s| !dims.contains_key(s))
        .collect();
    let unbounded: Vec<&String> = free.iter().filter(|s| !maxima.contains_key(*s)).collect();
    if !unbounded.is_empty() {
        let list: Vec<String> = unbounded.iter().map(|s| format!("`{s}`")).collect();
        eprintln!(
            "{src}: error: --dim-max: give {} a bound with --dim-max NAME=N (or a value with --dim)",
            list.join(", ")
        );
        return Err(Failure::Reported);
    }
    let mut b = dims.clone();
    b.extend(maxima.iter().map(|(n, v)| (n.clone(), *v)));
    let bounds: Vec<String> = maxima.iter().map(|(n, v)| format!("{n} <= {v}")).collect();
    let note = format!(
        "bounded plan: one plan for every shape with {} (every intermediate's size is non-decreasing in the dims and lifetimes do not depend on them); the slab below is at the bounds",
        bounds.join(", ")
    );
    Ok((b, note))
}

#[derive(Serialize)]
struct SymRecord {
    name: String,
    first_op: usize,
    last_op: usize,
    /// Bytes, an expression in the dims (`DimExpr`'s canonical form).
    size: String,
}

#[derive(Serialize)]
struct SymReport<'a> {
    source: &'a str,
    name: &'a str,
    dims: Vec<String>,
    operators: usize,
    records: Vec<SymRecord>,
    naive_total: String,
    note: String,
}

/// `tirc plan` on a dynamic model with dims left free and no `--dim-range` / `--dim-max`:
/// what is known without values. Lifetimes do not depend on the dims (liveness is a function
/// of the graph and the order), so they are read at one shape the model accepts; each
/// record's size is its value's symbolic type in bytes, an expression in the dims.
pub fn symbolic(path: &Path, dims: &Bindings, json: bool) -> Result<(), Failure> {
    let (source, module) = load_dynamic(path, "plan")?;
    input::check_dim_names(&module, dims, "--dim")?;
    let src = path.display().to_string();
    let free: Vec<String> = module_symbols(&module)
        .into_iter()
        .filter(|s| !dims.contains_key(s))
        .collect();
    let Some(at) = tir_passes::dynamic::sample_shapes(&module, dims)
        .into_iter()
        .next()
    else {
        return Err(fail(
            &src,
            format!(
                "the model's run-time checks accept none of the sample shapes (every dim at {:?}), so its lifetimes cannot be read; give its dims values with --dim NAME=N",
                tir_passes::dynamic::SAMPLE_VALUES
            ),
        ));
    };
    let m = input::specialize(path, &source, module.clone(), &at, Some("--dim"))?;
    let input = records::from_module(path, m)?;
    let Some((_, live)) = input.model.as_ref() else {
        return Err(fail(&src, "no liveness"));
    };
    let Some(func) = module.entry() else {
        return Err(fail(&src, "the module has no `@main` function to plan"));
    };
    let pinned = |s: &str| dims.get(s).map(|&n| DimExpr::lit(n));
    let mut records_out = Vec::new();
    let mut naive = DimExpr::lit(0);
    for (r, &v) in input.records.iter().zip(&live.values) {
        let overflow = || {
            fail(
                &src,
                format!("the size of `{}` overflows", func.value_name(v)),
            )
        };
        let t = func.values[v]
            .sym_type()
            .ok_or_else(|| fail(&src, format!("`{}` has no type", func.value_name(v))))?;
        let mut bytes = DimExpr::lit(t.dtype.byte_size());
        for d in &t.shape {
            let d = d.substitute(&pinned).ok_or_else(overflow)?;
            bytes = bytes.checked_mul(&d).ok_or_else(overflow)?;
        }
        naive = naive.checked_add(&bytes).ok_or_else(overflow)?;
        records_out.push(SymRecord {
            name: func.value_name(v),
            first_op: r.first_op,
            last_op: r.last_op,
            size: bytes.to_string(),
        });
    }
    let note = format!(
        "sizes are in bytes, expressions in the dims {}; for numbers give them values with --dim NAME=N (a plan at those values), a range with --dim-range NAME=A..B[:STEP] (the slab at each size), or bounds with --dim-max NAME=N (one plan valid for every shape up to them)",
        free.join(", ")
    );
    if json {
        let report = SymReport {
            source: &src,
            name: &module.name,
            dims: free,
            operators: input.num_ops,
            records: records_out,
            naive_total: naive.to_string(),
            note,
        };
        let text = serde_json::to_string_pretty(&report).map_err(|e| fail(&src, e))?;
        println!("{text}");
        return Ok(());
    }
    println!(
        "{} ({src}): {} operators, {} intermediate tensors, dims {} without values",
        module.name,
        input.num_ops,
        records_out.len(),
        free.join(", ")
    );
    println!("naive total (every intermediate separately): {naive} bytes");
    println!();
    let width = records_out
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(0)
        .max(6);
    println!(
        "  {:<width$} {:>8} {:>8}  size (bytes)",
        "tensor", "first op", "last op"
    );
    for r in &records_out {
        println!(
            "  {:<width$} {:>8} {:>8}  {}",
            r.name, r.first_op, r.last_op, r.size
        );
    }
    println!();
    println!("{note}");
    Ok(())
}
