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
//! - the input with the shrinking rules applied ([`shrink`]: subsampling moved before pads
//!   and shifts, bitwise-equal values, strictly smaller intermediates); every candidate below
//!   starts from it,
//! - the concat-averse extraction ([`ConcatAverse`]) under each rule set,
//! - a greedy walk over the rewrite sites (e-classes of the input whose concat-averse choice
//!   differs from the input's node), keeping each site whose rewrite lowers the peak,
//! - kernel-wise partitioning at targeted convs ([`kernel`]: output-channel pieces consumed
//!   one by one, SERENITY §3.3), guided by compile's slab —
//!
//! schedules each with the fast schedulers, guided by the peak breadth (the offsets lower
//! bound), and judges the best few by the slab the planner makes on the requested
//! scheduler's order, within the time budget. The winner leaves the e-graph as IR
//! ([`convert::leave`]), weights sliced into new consts ([`DerivedWeight`]), and is verified.

pub mod convert;
pub mod kernel;
pub mod lang;
pub mod rules;
pub mod shrink;

use crate::plan::{plan_function, Effort, PlanPolicy};
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
    #[error("planning a candidate: {0}")]
    Plan(String),
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
    /// How candidates are judged: the plan compile will make (`plan_function`), with less
    /// effort on large programs (see [`JUDGE_FULL_LIMIT`]).
    pub policy: PlanPolicy,
    /// Saturation limits per rule set.
    pub iter_limit: usize,
    pub node_limit: usize,
    /// Keep the best rewritten candidate even when the input plans smaller (to inspect or
    /// test what the rules make; the pass itself never sets it).
    pub force_rewrite: bool,
}

impl Default for RewriteOptions {
    fn default() -> Self {
        RewriteOptions {
            scheduler: Scheduler::Exact,
            budget: Budget::default(),
            policy: PlanPolicy::compile(),
            // Partitioning an n-piece concat takes n iterations (one prefix each); the time
            // limit is what usually stops saturation.
            iter_limit: 64,
            node_limit: 60_000,
            force_rewrite: false,
        }
    }
}

/// One candidate program and how it was judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateStats {
    pub label: String,
    /// Lowest peak breadth over the fast schedulers.
    pub peak: u64,
    /// Compile slab on the requested scheduler's order, for the judged ones.
    pub slab: Option<u64>,
}

/// What the rewrite pass did.
#[derive(Clone, Debug, PartialEq)]
pub struct RewriteStats {
    pub scheduler: Scheduler,
    pub peak_before: u64,
    /// Slabs are compile's ([`compile_slab`]): of the input as laid out, ...
    pub slab_before: u64,
    /// ... of the input program under the requested scheduler's order (what reordering
    /// alone gives compile), ...
    pub slab_reordered: u64,
    pub peak_after: u64,
    /// ... and of the kept program under its order.
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

pub struct Candidate {
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
    let total = opts.budget.time;
    let input_dag = Dag::from_function(func, opts.policy.align)?;
    let input_order = reorder::input::schedule(&input_dag);
    let peak_before = input_dag.peak(&input_order);
    let slab_before = compile_slab(func, &opts.policy, false)?;

    let guide = fast_peak(func, opts.policy.align)?;
    let mut candidates = vec![Candidate {
        label: "input".into(),
        func: func.clone(),
        derived: Vec::new(),
        peak: guide.0,
        pressure: guide.1,
    }];
    // Shrinking rewrites (strictly smaller intermediates, bitwise-equal values) apply to
    // every candidate but the input: they are the base the other rules start from.
    let base = match shrink::apply(func, opts.node_limit, start + total.mul_f64(0.05))? {
        Some(f) => {
            let (peak, pressure) = fast_peak(&f, opts.policy.align)?;
            candidates.push(Candidate {
                label: "shrink".into(),
                func: f.clone(),
                derived: Vec::new(),
                peak,
                pressure,
            });
            f
        }
        None => func.clone(),
    };
    let entered = convert::enter(&base)?;
    let mut sites_total = 0;
    let mut sites_kept = 0;
    let mut budget_stopped = false;
    let (mut nodes, mut classes) = (0, 0);
    // The input is judged first, as the `reorder` pass would judge it but with a share of
    // the budget, so the pass is never worse than its own input order and stays within
    // `budget.time` (the exact search overruns its own limit by up to one DP layer, so
    // every search here gets a share with slack).
    progress("judging input", 0, 1);
    let (input_slab, input_order, input_peak, _) =
        judge(func, opts, total.mul_f64(0.35), None, None)?;
    // Each input operator's step in that order, by result name, for judging candidates.
    let known: HashMap<String, usize> = input_order
        .iter()
        .enumerate()
        .map(|(k, &v)| (result_name(func, &input_dag, v), k))
        .collect();
    let mut stats_slab: Vec<Option<u64>> = vec![Some(input_slab)];
    let mut best: (u64, usize, Vec<usize>, u64) = (input_slab, 0, input_order, input_peak);
    let mut other: Option<(u64, usize, Vec<usize>, u64)> = None;
    let sets = [RuleSet::Split, RuleSet::All];
    let mut kernel_index = None;
    for (i, set) in sets.into_iter().enumerate() {
        if i == 1 {
            // Kernel-wise partitioning, until 30% of the budget is left.
            let end = deadline.checked_sub(total.mul_f64(0.3)).unwrap_or(start);
            let k = kernel::walk(
                &base,
                &entered,
                &opts.policy,
                opts.node_limit,
                end,
                progress,
            )?;
            nodes = nodes.max(k.egraph_nodes);
            classes = classes.max(k.egraph_classes);
            sites_total += k.sites;
            sites_kept += k.kept;
            budget_stopped |= k.stopped;
            if let Some(c) = k.candidate {
                kernel_index = Some(candidates.len());
                candidates.push(c);
            }
        }
        progress("saturating", i, sets.len());
        let left = deadline.saturating_duration_since(Instant::now());
        // Judging the finalists needs what is left after the search; `All` runs only while
        // more than 45% of the budget is left.
        if i > 0 && left < total.mul_f64(0.45) {
            budget_stopped = true;
            break;
        }
        let runner = Runner::default()
            .with_egraph(entered.egraph.clone())
            .with_iter_limit(opts.iter_limit)
            .with_node_limit(opts.node_limit)
            .with_time_limit(left.mul_f64(0.2))
            .run(&rules::rules(set));
        let eg = runner.egraph;
        nodes = nodes.max(eg.total_number_of_nodes());
        classes = classes.max(eg.number_of_classes());
        let extractor = Extractor::new(&eg, ConcatAverse { egraph: &eg });
        let best_node = |id: Id| extractor.find_best_node(id).clone();
        let label = match set {
            RuleSet::Split => "split",
            RuleSet::All => "split+add",
        };
        if let Some(c) = candidate(&base, &eg, &entered, &best_node, label, opts.policy.align) {
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
            .filter(|id| seen.insert(*id) && orig.get(id) != Some(&best_node(*id)))
            .collect();
        sites_total = sites.len();
        let mut chosen: HashSet<Id> = HashSet::new();
        let mut best_peak = (candidates[0].peak, candidates[0].pressure);
        let mut best_greedy = None;
        // The walk stops when 60% of the budget is left, for kernel-wise partitioning, the
        // other rule set and judging.
        let walk_end = deadline.checked_sub(total.mul_f64(0.6)).unwrap_or(start);
        for (k, &site) in sites.iter().enumerate() {
            if Instant::now() >= walk_end {
                budget_stopped = true;
                break;
            }
            progress("rewrite sites", k, sites.len());
            chosen.insert(site);
            let choice = |id: Id| match orig.get(&id) {
                Some(n) if !chosen.contains(&id) => n.clone(),
                _ => best_node(id),
            };
            match candidate(&base, &eg, &entered, &choice, "greedy", opts.policy.align) {
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

    // Finalists: the kernel walk's candidate (guided by compile's slab already, and its peak
    // breadth, which has no sharing, says little) and the lowest-peak candidates other than
    // the input, judged by the slab with what is left of the budget.
    let mut order: Vec<usize> = (1..candidates.len())
        .filter(|&i| Some(i) != kernel_index)
        .collect();
    order.sort_by_key(|&i| candidates[i].peak);
    order.splice(0..0, kernel_index);
    order.truncate(3);
    stats_slab.resize(candidates.len(), None);
    for (k, &i) in order.iter().enumerate() {
        progress("judging", k, order.len());
        // 5% of the budget is kept back: a search may finish its current layer past its
        // share, and the kept program still has to leave the e-graph and verify.
        let left = deadline
            .checked_sub(total.mul_f64(0.05))
            .unwrap_or(start)
            .saturating_duration_since(Instant::now());
        if left.is_zero() {
            budget_stopped = true;
            break;
        }
        // Each finalist's share: 60% for its order search, the rest to plan its orders. The
        // kernel walk's candidate, judged first, was chosen by compile's slab already and is
        // the likeliest winner, so it gets half of what is left when others follow it.
        let share = if k == 0 && kernel_index.is_some() && order.len() > 1 {
            left / 2
        } else {
            left / (order.len() - k) as u32
        };
        let (slab, o, peak, stopped) = judge(
            &candidates[i].func,
            opts,
            share.mul_f64(0.6),
            Some(Instant::now() + share),
            Some(&known),
        )?;
        budget_stopped |= stopped;
        stats_slab[i] = Some(slab);
        if other.as_ref().is_none_or(|b| slab < b.0) {
            other = Some((slab, i, o, peak));
        }
    }
    if let Some((slab, i, o, peak)) = other {
        if slab < best.0 || opts.force_rewrite {
            best = (slab, i, o, peak);
        }
    }
    let stats: Vec<CandidateStats> = candidates
        .iter()
        .zip(&stats_slab)
        .map(|(c, &slab)| CandidateStats {
            label: c.label.clone(),
            peak: c.peak,
            slab,
        })
        .collect();
    let (slab_after, i, order, peak_after) = best;
    let winner = candidates.swap_remove(i);
    let dag = Dag::from_function(&winner.func, opts.policy.align)?;
    let mut out = winner.func;
    out.layout = reorder::layout_of(&out, &dag, &order);
    *func = out;
    Ok(RewriteStats {
        scheduler: opts.scheduler,
        peak_before,
        slab_before,
        slab_reordered: input_slab,
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

/// Above this many buffers a candidate is judged without the quadratic offsets strategies:
/// shared objects by min-cost flow takes about half a second on DARTS' 548 buffers and
/// minutes on the thousands of a fully partitioned DenseNet, and every order of every
/// candidate is judged. The slab is then an upper bound of what compile's `plan` finds.
pub const JUDGE_FULL_LIMIT: usize = 256;

/// The slab `policy` plans for `func` (`plan_function`, checked): what compile allocates
/// with `full`, else an upper bound of it above [`JUDGE_FULL_LIMIT`] buffers.
pub fn compile_slab(func: &Function, policy: &PlanPolicy, full: bool) -> Result<u64, RewriteError> {
    let effort = if full {
        Effort::Full
    } else {
        Effort::FastAbove(JUDGE_FULL_LIMIT)
    };
    plan_function(func, &policy.with_effort(effort))
        .map(|p| p.slab())
        .map_err(|e| RewriteError::Plan(e.to_string()))
}

/// The compile slab of a program under the requested scheduler within `time` (at least
/// 1 ms), with that order and its peak breadth. For `exact`, the exact search's order and the
/// heuristics' orders are all planned and the smallest slab kept (the peak guides, the
/// planner judges, as in `reorder::schedule`). Planning each order takes tens of milliseconds
/// at NASNet's size, so past `until` only the first order (the search's) is planned and the
/// last value says the budget stopped the judging; the input is judged with no `until`, every
/// order planned, so the pass is never worse than any of them. `known` gives the step of each
/// operator (by result name) in the order the input was judged by: a candidate's search then
/// starts from that order where the candidate kept the input's operators (`reorder::follow`,
/// spliced with the heuristics), since its share of the budget is smaller than the input's.
fn judge(
    func: &Function,
    opts: &RewriteOptions,
    time: Duration,
    until: Option<Instant>,
    known: Option<&HashMap<String, usize>>,
) -> Result<(u64, Vec<usize>, u64, bool), RewriteError> {
    let dag = Dag::from_function(func, opts.policy.align)?;
    let share = Budget {
        time: time.max(Duration::from_millis(1)),
        states: opts.budget.states,
    };
    let mut orders: Vec<Vec<usize>> = Vec::new();
    if opts.scheduler == Scheduler::Exact {
        orders = reorder::fast_orders(&dag, opts.policy.align)?;
        if let Some(known) = known {
            // The input's judged order where the candidate kept its operators, spliced
            // piece by piece with the heuristics: the search starts from what the input's
            // search found instead of redoing it within a smaller share.
            let rank: Vec<Option<usize>> = (0..dag.len())
                .map(|v| known.get(&result_name(func, &dag, v)).copied())
                .collect();
            let followed = reorder::follow::schedule(&dag, &rank);
            if !dag.is_topological(&followed) {
                return Err(ReorderError::InvalidOrder("follow").into());
            }
            let mut pool = vec![followed];
            pool.extend(orders.iter().cloned());
            if let Some(spliced) = reorder::splice::schedule(&dag, &pool) {
                orders.push(spliced);
            }
            orders.push(pool.swap_remove(0));
        }
        let incumbent = orders
            .iter()
            .min_by_key(|o| dag.peak(o))
            .cloned()
            .unwrap_or_default();
        let exact = reorder::exact::schedule(&dag, &incumbent, share);
        if !dag.is_topological(&exact.order) {
            return Err(ReorderError::InvalidOrder("exact").into());
        }
        orders.insert(0, exact.order);
    } else {
        orders.push(reorder::schedule(&dag, opts.scheduler, share, opts.policy.align)?.order);
    }
    let mut seen = HashSet::new();
    orders.retain(|o| seen.insert(o.clone()));
    let mut best: Option<(u64, Vec<usize>, u64)> = None;
    let mut stopped = false;
    let mut f = func.clone();
    for (k, o) in orders.into_iter().enumerate() {
        if k > 0 && until.is_some_and(|u| Instant::now() >= u) {
            stopped = true;
            break;
        }
        f.layout = reorder::layout_of(func, &dag, &o);
        let slab = compile_slab(&f, &opts.policy, false)?;
        let peak = dag.peak(&o);
        if best.as_ref().is_none_or(|b| (slab, peak) < (b.0, b.2)) {
            best = Some((slab, o, peak));
        }
    }
    best.map(|(slab, o, peak)| (slab, o, peak, stopped))
        .ok_or_else(|| RewriteError::Plan("no order to judge".into()))
}

/// The name of node `v`'s first result (every operator has one).
fn result_name(func: &Function, dag: &Dag, v: usize) -> String {
    func.ops[dag.ops[v]]
        .results
        .first()
        .map(|&r| func.values[r].name.clone())
        .unwrap_or_default()
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
    for order in reorder::fast_orders(&dag, align)? {
        let breadths = dag.breadths(&order);
        let peak = breadths.iter().copied().max().unwrap_or(0);
        best = best.min((peak, breadths.iter().sum()));
    }
    Ok(best)
}
