//! egg-driven rewriting for memory (issue 8): equivalent programs whose best operator order
//! has a smaller slab, as SERENITY's graph rewriting (Ahn et al., MLSys 2020, §3.3) does for
//! irregularly wired networks.
//!
//! The function enters an e-graph ([`convert::enter`]); the rules of [`rules`] grow it with
//! equivalents (channel-wise partitioning of conv/matmul over concat, element-wise ops and
//! batch norm distributed over concat, concat flattening, add reassociation and commutation,
//! transpose/reshape cancellation). Peak memory is not a local cost, so no single extraction
//! by a tree cost is trusted: the pass extracts several candidates —
//! - the input program itself (so the pass never makes the slab larger),
//! - the concat-averse extraction ([`ConcatAverse`]) under each rule set,
//! - a greedy walk over the rewrite sites (e-classes of the input whose concat-averse choice
//!   differs from the input's node), keeping each site whose rewrite lowers the peak —
//!
//! schedules each with the fast schedulers, guided by the peak breadth (the offsets lower
//! bound), and judges the best few by the slab the planner makes on the requested
//! scheduler's order, within the time budget. The winner leaves the e-graph as IR
//! ([`convert::leave`]), weights sliced into new consts ([`DerivedWeight`]), and is verified.

pub mod convert;
pub mod lang;
pub mod rules;

use crate::reorder::{self, Budget, Dag, ReorderError, Scheduler};
pub use convert::DerivedWeight;
use egg::{CostFunction, Extractor, Id, Language, Runner};
use lang::{EGraph, TirNode};
use rules::RuleSet;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tir_ir::{Function, Module};

/// Why a function could not be rewritten.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RewriteError {
    #[error("`@{0}` is already bufferized; rewrite before `plan`")]
    Bufferized(String),
    #[error("`{0}` has no type; run the verifier first")]
    Untyped(String),
    #[error("`{0}` is used before it is defined")]
    NotTopological(String),
    #[error("the extraction is cyclic")]
    Cyclic,
    #[error("a rewritten `{0}` is ill-typed: {1}")]
    Shape(&'static str, String),
    #[error("the rewritten program does not verify: {0}")]
    Verify(String),
    #[error(transparent)]
    Reorder(#[from] ReorderError),
}

/// Options of the rewrite pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RewriteOptions {
    /// The order search each finalist is judged with.
    pub scheduler: Scheduler,
    /// Time for the whole pass (saturation, candidates, judging); `states` goes to `exact`.
    pub budget: Budget,
    pub align: u64,
    /// Saturation limits per rule set.
    pub iter_limit: usize,
    pub node_limit: usize,
}

impl Default for RewriteOptions {
    fn default() -> Self {
        RewriteOptions {
            scheduler: Scheduler::Exact,
            budget: Budget::default(),
            align: crate::planner::DEFAULT_ALIGNMENT,
            iter_limit: 6,
            node_limit: 20_000,
        }
    }
}

/// One candidate program and how it was judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateStats {
    pub label: String,
    /// Lowest peak breadth over the fast schedulers.
    pub peak: u64,
    /// Planned slab on the requested scheduler's order, for finalists.
    pub slab: Option<u64>,
}

/// What the rewrite pass did.
#[derive(Clone, Debug, PartialEq)]
pub struct RewriteStats {
    pub scheduler: Scheduler,
    pub peak_before: u64,
    pub slab_before: u64,
    pub peak_after: u64,
    pub slab_after: u64,
    /// Label of the kept candidate (`input` when no rewrite lowered the slab).
    pub chosen: String,
    pub candidates: Vec<CandidateStats>,
    /// Rewrite sites found, and kept by the greedy walk.
    pub sites: usize,
    pub sites_kept: usize,
    pub egraph_nodes: usize,
    pub egraph_classes: usize,
    /// New consts of the kept program, each a slice of an original weight.
    pub derived: Vec<DerivedWeight>,
    /// The time budget ran out before every site was tried or every finalist judged.
    pub budget_stopped: bool,
    pub time: Duration,
}

/// Tree cost that makes a concat the most expensive node (its bytes times the node count
/// bound), so extraction prefers partitioned and distributed forms wherever they exist; the
/// pass then judges what this gives by planning, not by this cost.
pub struct ConcatAverse<'a> {
    pub egraph: &'a EGraph,
}

impl CostFunction<TirNode> for ConcatAverse<'_> {
    type Cost = u64;
    fn cost<C>(&mut self, enode: &TirNode, mut costs: C) -> u64
    where
        C: FnMut(Id) -> u64,
    {
        let own = match enode {
            TirNode::Leaf(_) | TirNode::Attr(_) => 0,
            TirNode::Op(name, ch) if name.as_str() == "concat" => {
                let bytes = ch
                    .get(1)
                    .and_then(|&a| self.egraph[a].data.as_ref())
                    .map_or(1, |m| m.bytes().max(1));
                bytes.saturating_mul(1_000)
            }
            // A weight slice is computed at compile time.
            TirNode::Op(name, _) if name.as_str() == "slice" => 0,
            TirNode::Op(..) => 1,
        };
        enode.fold(own, |sum, id| sum.saturating_add(costs(id)))
    }
}

/// Progress of a long search: phase, done, total.
pub type Progress<'a> = &'a mut dyn FnMut(&str, usize, usize);

struct Candidate {
    label: String,
    func: Function,
    derived: Vec<DerivedWeight>,
    peak: u64,
    /// Sum of the breadths of the lowest-peak order: the greedy walk's tie-breaker, since a
    /// site away from the peak cannot lower it but frees memory for later sites.
    pressure: u64,
}

/// The rewrite pass on one function: replaces it by the candidate with the smallest slab
/// (the input program when none is smaller) laid out in its scheduler's order.
pub fn rewrite(
    func: &mut Function,
    opts: &RewriteOptions,
    progress: Progress,
) -> Result<RewriteStats, RewriteError> {
    let start = Instant::now();
    let deadline = start + opts.budget.time;
    let input_dag = Dag::from_function(func, opts.align)?;
    let input_order = reorder::input::schedule(&input_dag);
    let peak_before = input_dag.peak(&input_order);
    let slab_before = reorder::score(&input_dag, &input_order, opts.align)?;

    let entered = convert::enter(func)?;
    let guide = fast_peak(func, opts.align)?;
    let mut candidates = vec![Candidate {
        label: "input".into(),
        func: func.clone(),
        derived: Vec::new(),
        peak: guide.0,
        pressure: guide.1,
    }];
    let mut sites_total = 0;
    let mut sites_kept = 0;
    let mut budget_stopped = false;
    let (mut nodes, mut classes) = (0, 0);
    let sets = [RuleSet::Split, RuleSet::All];
    for (i, set) in sets.into_iter().enumerate() {
        progress("saturating", i, sets.len());
        // The walk and the judging need most of the budget: a rule set starts only while
        // more than half of it is left.
        if i > 0 && Instant::now() + opts.budget.time / 2 > deadline {
            budget_stopped = true;
            break;
        }
        // Saturation gets at most a third of what is left, shared by the rule sets.
        let left = deadline.saturating_duration_since(Instant::now());
        let runner = Runner::default()
            .with_egraph(entered.egraph.clone())
            .with_iter_limit(opts.iter_limit)
            .with_node_limit(opts.node_limit)
            .with_time_limit(left / (3 * (sets.len() - i) as u32))
            .run(&rules::rules(set));
        let eg = runner.egraph;
        nodes = nodes.max(eg.total_number_of_nodes());
        classes = classes.max(eg.number_of_classes());
        let extractor = Extractor::new(&eg, ConcatAverse { egraph: &eg });
        let best = |id: Id| extractor.find_best_node(id).clone();
        let label = match set {
            RuleSet::Split => "split",
            RuleSet::All => "split+add",
        };
        if let Some(c) = candidate(func, &eg, &entered, &best, label, opts.align) {
            candidates.push(c);
        }
        if set != RuleSet::Split {
            continue;
        }
        // Greedy walk over the rewrite sites, in input order.
        let orig = original_choice(&eg, &entered);
        let mut seen = HashSet::new();
        let sites: Vec<Id> = entered
            .original
            .iter()
            .map(|(id, _)| eg.find(*id))
            .filter(|id| seen.insert(*id) && orig.get(id) != Some(&best(*id)))
            .collect();
        sites_total = sites.len();
        let mut chosen: HashSet<Id> = HashSet::new();
        let mut best_peak = (candidates[0].peak, candidates[0].pressure);
        let mut best_greedy = None;
        // The walk stops at half the budget; the rest is for the other rule set and judging.
        let walk_end = deadline - opts.budget.time / 2;
        for (k, &site) in sites.iter().enumerate() {
            if Instant::now() >= walk_end {
                budget_stopped = true;
                break;
            }
            progress("rewrite sites", k, sites.len());
            chosen.insert(site);
            let choice = |id: Id| match orig.get(&id) {
                Some(n) if !chosen.contains(&id) => n.clone(),
                _ => best(id),
            };
            match candidate(func, &eg, &entered, &choice, "greedy", opts.align) {
                Some(c) if (c.peak, c.pressure) < best_peak => {
                    best_peak = (c.peak, c.pressure);
                    best_greedy = Some(c);
                }
                _ => {
                    chosen.remove(&site);
                }
            }
        }
        sites_kept = chosen.len();
        candidates.extend(best_greedy);
    }

    // Finalists: the input and the lowest-peak others, judged by the slab.
    let mut order: Vec<usize> = (1..candidates.len()).collect();
    order.sort_by_key(|&i| candidates[i].peak);
    order.truncate(3);
    order.insert(0, 0);
    let mut stats: Vec<CandidateStats> = candidates
        .iter()
        .map(|c| CandidateStats {
            label: c.label.clone(),
            peak: c.peak,
            slab: None,
        })
        .collect();
    let mut best: Option<(u64, usize, Vec<usize>, u64)> = None;
    for (k, &i) in order.iter().enumerate() {
        progress("judging", k, order.len());
        let left = deadline.saturating_duration_since(Instant::now());
        if k > 0 && left.is_zero() {
            budget_stopped = true;
            break;
        }
        // The input is judged as the `reorder` pass alone would judge it (the whole budget),
        // so rewriting is never worse than reordering; the others share what is left.
        let share = if k == 0 {
            opts.budget
        } else {
            Budget {
                time: (left / (order.len() - k) as u32).max(Duration::from_millis(1)),
                states: opts.budget.states,
            }
        };
        let c = &candidates[i];
        let dag = Dag::from_function(&c.func, opts.align)?;
        let s = reorder::schedule(&dag, opts.scheduler, share, opts.align)?;
        let slab = reorder::score(&dag, &s.order, opts.align)?;
        stats[i].slab = Some(slab);
        if best.as_ref().is_none_or(|b| slab < b.0) {
            best = Some((slab, i, s.order, s.peak));
        }
    }
    let (slab_after, i, order, peak_after) = best.expect("the input is always judged");
    let winner = candidates.swap_remove(i);
    let dag = Dag::from_function(&winner.func, opts.align)?;
    let mut out = winner.func;
    out.layout = reorder::layout_of(&out, &dag, &order);
    *func = out;
    Ok(RewriteStats {
        scheduler: opts.scheduler,
        peak_before,
        slab_before,
        peak_after,
        slab_after,
        chosen: winner.label,
        candidates: stats,
        sites: sites_total,
        sites_kept,
        egraph_nodes: nodes,
        egraph_classes: classes,
        derived: winner.derived,
        budget_stopped,
        time: start.elapsed(),
    })
}

/// Each class's node in the input program, canonicalised (the first when several input
/// classes were merged).
fn original_choice(eg: &EGraph, entered: &convert::Entered) -> HashMap<Id, TirNode> {
    let mut orig = HashMap::new();
    for (id, node) in &entered.original {
        let n = node.clone().map_children(|c| eg.find(c));
        orig.entry(eg.find(*id)).or_insert(n);
    }
    orig
}

/// Builds and verifies a candidate; `None` when the choice is cyclic or does not verify
/// (then it is simply not a candidate).
fn candidate(
    func: &Function,
    eg: &EGraph,
    entered: &convert::Entered,
    choice: &dyn Fn(Id) -> TirNode,
    label: &str,
    align: u64,
) -> Option<Candidate> {
    let (f, derived) = convert::leave(func, eg, entered, choice).ok()?;
    let f = verified(f).ok()?;
    let (peak, pressure) = fast_peak(&f, align).ok()?;
    Some(Candidate {
        label: label.to_string(),
        func: f,
        derived,
        peak,
        pressure,
    })
}

/// Runs the IR verifier on a rewritten function.
pub fn verified(func: Function) -> Result<Function, RewriteError> {
    let mut m = Module::new("rewrite");
    m.funcs.push(func);
    tir_ir::verify(&mut m).map_err(|es| {
        RewriteError::Verify(
            es.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    Ok(m.funcs.pop().expect("pushed above"))
}

/// The lowest peak breadth over the fast schedulers (the search's guide), and the sum of the
/// breadths of that order.
fn fast_peak(func: &Function, align: u64) -> Result<(u64, u64), RewriteError> {
    let dag = Dag::from_function(func, align)?;
    let mut best = (u64::MAX, u64::MAX);
    for s in Scheduler::HEURISTICS {
        let sched = reorder::schedule(&dag, s, Budget::default(), align)?;
        let pressure = dag.breadths(&sched.order).iter().sum();
        best = best.min((sched.peak, pressure));
    }
    Ok(best)
}
