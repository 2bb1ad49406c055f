//! `tirc plan MODEL --reorder`: operator orders side by side, each with its peak breadth (the
//! offsets lower bound), the slab the best offsets strategy plans on it (checked by the
//! independent checker inside `reorder::score`), the ratio to the input order's slab, the
//! scheduling time, and for `exact` whether the peak is proven optimal.

use super::{input, Failure};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tir_passes::reorder::{self, Budget, Dag, Scheduler};

pub struct Options {
    pub model: PathBuf,
    /// A scheduler name or `all`.
    pub scheduler: String,
    pub align: u64,
    pub budget: Budget,
}

pub fn run(opts: Options) -> Result<(), Failure> {
    let schedulers: Vec<Scheduler> = if opts.scheduler == "all" {
        Scheduler::ALL.to_vec()
    } else {
        vec![opts
            .scheduler
            .parse()
            .map_err(|e: reorder::ReorderError| Failure::Usage(e.to_string()))?]
    };
    let src = opts.model.display().to_string();
    let fail = |e: reorder::ReorderError| {
        eprintln!("{src}: error: {e}");
        Failure::Reported
    };
    let (_, module) = input::load_module(&opts.model)?;
    let Some(func) = module.entry() else {
        eprintln!("{src}: error: the module has no `@main` function to plan");
        return Err(Failure::Reported);
    };
    let dag = Dag::from_function(func, opts.align).map_err(fail)?;
    let input_order = reorder::input::schedule(&dag);
    let input_slab = reorder::score(&dag, &input_order, opts.align).map_err(fail)?;
    println!(
        "{src}: {} operators, {} intermediates, align {}; budget {:.1} s, {} states per layer",
        dag.len(),
        dag.tensors.len(),
        opts.align,
        opts.budget.time.as_secs_f64(),
        opts.budget.states
    );
    println!(
        "{:<11} {:>14} {:>14} {:>9} {:>10}  exact",
        "scheduler", "peak breadth", "slab", "vs input", "time ms"
    );
    for s in schedulers {
        let start = Instant::now();
        let sched = reorder::schedule(&dag, s, opts.budget, opts.align).map_err(fail)?;
        let time: Duration = start.elapsed();
        let slab = reorder::score(&dag, &sched.order, opts.align).map_err(fail)?;
        let note = match &sched.exact {
            None => String::new(),
            Some(e) => match e.stopped {
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
            },
        };
        println!(
            "{:<11} {:>14} {:>14} {:>9.3} {:>10.1}  {note}",
            s.name(),
            sched.peak,
            slab,
            if input_slab == 0 {
                1.0
            } else {
                slab as f64 / input_slab as f64
            },
            time.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
