//! The `exact` offset strategy: an anytime search for the smallest slab that *proves* its
//! answer, or states the gap to a proven lower bound.
//!
//! The offsets problem with fixed lifetimes is a strip-packing / dynamic-storage-allocation
//! problem (NP-hard), so the search is bounded by a time limit and a node limit. It follows
//! MiniMalloc (Moffitt, "MiniMalloc: A Lightweight Memory Allocator for Hardware-Accelerated
//! Machine Learning", ASPLOS 2023), which solves the *decision* problem "is there a packing
//! within capacity C?" by depth-first search:
//!
//! - **canonical solutions only** (§4.1): every solution can be pushed down until each buffer
//!   rests on the top of a buffer below it (or on 0). Such a solution is built by placing
//!   buffers in non-decreasing offset order, each at its *minimum offset* — the highest top of
//!   the placed buffers it overlaps in time. Equal offsets are placed in preorder.
//! - **cross-section inference** (§4.2): in every section (a stretch of time where the set of
//!   live buffers does not change), the section's floor plus the sizes of its unplaced buffers
//!   must fit under C. A section's floor is at least the top of its placed buffers, at least
//!   the offset just placed (offsets only grow), and at least the smallest minimum offset of
//!   its unplaced buffers.
//! - **dominance** (§4.3): placing a buffer at or above the lowest top any unplaced buffer
//!   could reach leaves a gap that buffer would fill; that partial solution is dominated.
//! - **dynamic decomposition** (§4.4): once every buffer crossing a section boundary is
//!   placed, the two sides are independent problems and are solved separately.
//! - **dynamic ordering and round-robin preorders** (§5): candidates are tried by minimum
//!   offset, then by a static preorder; three preorders (by total, area and width) take turns
//!   with a doubling node limit, as MiniMalloc's solver does.
//!
//! The optimisation wraps the decision search: the incumbent is [`best_offsets`]'s plan, the
//! first capacity asked is the lower bound itself (max breadth, Pisarchyk & Lee §5: no plan
//! can be smaller than the largest operator breadth), then bisection between the proven bound
//! and the incumbent. An exhausted search at C proves that no slab of size C exists, which
//! raises the bound beyond max breadth. Slab sizes of canonical solutions are sums of sizes,
//! so the bound moves in steps of the gcd of the sizes.
//!
//! Independent time components (no buffer live across a point) are independent problems; each
//! keeps its own incumbent, and only components whose incumbent exceeds the capacity asked are
//! searched.

use std::cmp::Reverse;
use std::time::{Duration, Instant};

use super::items::{self, Item, Timeline};

mod search;

use super::{best_offsets, OffsetStrategy, OffsetsPlan, PlanError, UsageRecord};
use search::Search;

/// The default bound on the exact search's running time.
pub const DEFAULT_EXACT_TIME_LIMIT: Duration = Duration::from_secs(5);

/// Components with more buffers than this keep their heuristic plan: each search node costs
/// time linear in the component, and the recursion is as deep as the component.
pub const EXACT_MAX_COMPONENT: usize = 4096;

/// Components whose buffers span more (buffer, section) pairs, or overlap in more pairs, than
/// this keep their heuristic plan, so memory stays bounded on any input.
const MAX_COMPONENT_CELLS: usize = 4_000_000;

/// Marks a buffer without an earlier twin.
const NO_TWIN: u32 = u32::MAX;

/// Stack for the search thread: the depth-first search recurses once per placed buffer.
const SEARCH_STACK: usize = 64 << 20;

/// Bounds on the search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExactOptions {
    /// Wall-clock limit for the search (the heuristic incumbent is computed first and not
    /// counted against it).
    pub time_limit: Duration,
    /// Limit on search nodes over all decisions; 0 returns the incumbent unsearched.
    pub node_limit: u64,
}

impl Default for ExactOptions {
    fn default() -> Self {
        ExactOptions {
            time_limit: DEFAULT_EXACT_TIME_LIMIT,
            node_limit: u64::MAX,
        }
    }
}

/// The result of the exact search: the best plan found, and how far from optimal it can be.
#[derive(Clone, Debug, PartialEq)]
pub struct ExactPlan {
    /// The best plan found; never worse than `heuristic_size`.
    pub plan: OffsetsPlan,
    /// A proven lower bound on the slab of any valid plan: at least the max breadth.
    pub lower_bound: u64,
    /// Whether `plan.total_size == lower_bound`, i.e. the plan is proven optimal.
    pub optimal: bool,
    /// The max-breadth lower bound (aligned sizes) the search started from.
    pub max_breadth: u64,
    /// The heuristic whose plan was the starting incumbent, and its slab size.
    pub heuristic: OffsetStrategy,
    pub heuristic_size: u64,
    /// Search nodes visited over all decisions.
    pub nodes: u64,
    /// Time spent in the search (excluding the heuristics).
    pub elapsed: Duration,
    /// Buffers in components too large to search (their heuristic placement is kept).
    pub unsearched: usize,
}

impl ExactPlan {
    /// `(best − bound) / bound`: 0 when optimal.
    pub fn gap(&self) -> f64 {
        if self.lower_bound == 0 {
            if self.plan.total_size == 0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            (self.plan.total_size - self.lower_bound.min(self.plan.total_size)) as f64
                / self.lower_bound as f64
        }
    }
}

/// Runs the exact search under the default limits and returns its plan.
pub(crate) fn exact_plan(records: &[UsageRecord], align: u64) -> Result<OffsetsPlan, PlanError> {
    exact_offsets(records, align, &ExactOptions::default()).map(|e| e.plan)
}

/// Plans offsets for `records` (sizes aligned to `align`) by the exact search, starting from
/// the best heuristic plan. Pure: the same input gives a plan at least as good as the
/// heuristics, and `optimal` is only claimed with a proof; what is found within the limits
/// may depend on the machine's speed.
pub fn exact_offsets(
    records: &[UsageRecord],
    align: u64,
    options: &ExactOptions,
) -> Result<ExactPlan, PlanError> {
    let items = items::prepare(records, align)?;
    let best = best_offsets(records, align)?;
    let start = Instant::now();
    let deadline = start.checked_add(options.time_limit);
    let problem = Instance::new(&items, best.plan.offsets.clone());
    let heuristic_size = best.plan.total_size;

    // The search recurses once per placed buffer; run it on a thread with a stack to match.
    let outcome = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("tir-exact".into())
            .stack_size(SEARCH_STACK)
            .spawn_scoped(scope, || problem.optimise(deadline, options.node_limit))
            .ok()
            .and_then(|handle| handle.join().ok())
    });
    let Some(outcome) = outcome else {
        return Err(PlanError::Internal("the exact search thread failed"));
    };
    let total_size = outcome
        .offsets
        .iter()
        .zip(&items)
        .map(|(&o, it)| o.saturating_add(it.size))
        .max()
        .unwrap_or(0);
    // Never return anything worse than the incumbent (the search only replaces a component's
    // placement by a lower one, so this is a safeguard, not a path).
    let searched = OffsetsPlan {
        offsets: outcome.offsets,
        total_size,
    };
    // The independent checker vouches for every plan the search changed (a safeguard: an
    // invalid plan would be an internal error, and the valid incumbent is returned instead).
    let plan = if searched == best.plan
        || (total_size <= heuristic_size
            && super::checker::check_offsets(records, &searched, align).is_ok())
    {
        searched
    } else {
        best.plan
    };
    let lower_bound = outcome.lower_bound.min(plan.total_size);
    Ok(ExactPlan {
        optimal: lower_bound == plan.total_size,
        lower_bound,
        max_breadth: outcome.max_breadth,
        heuristic: best.strategy,
        heuristic_size,
        nodes: outcome.nodes,
        elapsed: start.elapsed(),
        unsearched: outcome.unsearched,
        plan,
    })
}

/// What the optimisation hands back to [`exact_offsets`].
struct Outcome {
    offsets: Vec<u64>,
    lower_bound: u64,
    max_breadth: u64,
    nodes: u64,
    unsearched: usize,
}

/// The whole instance: its independent components and the current best offsets.
struct Instance {
    components: Vec<Component>,
    /// Offsets of every item (input order); starts as the heuristic plan.
    offsets: Vec<u64>,
    /// gcd of the nonzero sizes: every canonical slab size is a multiple of it.
    grain: u64,
    unsearched: usize,
}

/// One connected component of the interval graph, in local indices.
struct Component {
    /// Input index of each local buffer.
    items: Vec<usize>,
    size: Vec<u64>,
    /// Closed section span of each buffer, local to the component.
    lo: Vec<u32>,
    hi: Vec<u32>,
    /// Real lifetime length, for the preorders.
    width: Vec<u64>,
    overlaps: Vec<Vec<u32>>,
    /// `twin[j]`: the previous buffer (local index) with the same section span and size as
    /// `j`, or `NO_TWIN`. Twins are interchangeable, so the search places them in index order.
    twin: Vec<u32>,
    /// Buffers live in each section.
    sections: Vec<Vec<u32>>,
    /// Largest section total: the component's max breadth.
    breadth: u64,
    /// Best proven bound and best known height.
    lower: u64,
    upper: u64,
    /// Too large to search: keeps its heuristic placement.
    frozen: bool,
}

impl Instance {
    fn new(items: &[Item], offsets: Vec<u64>) -> Self {
        let timeline = Timeline::new(items);
        let spans = timeline.spans(items);
        let mut order: Vec<usize> = (0..items.len()).filter(|&i| items[i].size > 0).collect();
        order.sort_by_key(|&i| spans[i]);
        let grain = order.iter().fold(0u64, |g, &i| gcd(g, items[i].size));

        // Components: a new one starts where no earlier buffer is still live.
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut reach: Option<usize> = None;
        for &i in &order {
            let (lo, hi) = spans[i];
            match reach {
                Some(r) if lo <= r => {
                    reach = Some(r.max(hi));
                    if let Some(g) = groups.last_mut() {
                        g.push(i);
                    }
                }
                _ => {
                    reach = Some(hi);
                    groups.push(vec![i]);
                }
            }
        }
        let mut unsearched = 0;
        let components = groups
            .into_iter()
            .map(|g| {
                let c = Component::new(items, &spans, &offsets, g);
                if c.frozen {
                    unsearched += c.items.len();
                }
                c
            })
            .collect();
        Instance {
            components,
            offsets,
            grain: grain.max(1),
            unsearched,
        }
    }

    fn lower(&self) -> u64 {
        self.components.iter().map(|c| c.lower).max().unwrap_or(0)
    }

    fn upper(&self) -> u64 {
        self.components.iter().map(|c| c.upper).max().unwrap_or(0)
    }

    fn round_up(&self, v: u64) -> u64 {
        v.div_ceil(self.grain).saturating_mul(self.grain)
    }

    /// Bisection on the capacity between the proven bound and the incumbent (MiniMalloc
    /// answers one capacity; the minimum is found by asking several).
    fn optimise(mut self, deadline: Option<Instant>, node_limit: u64) -> Outcome {
        let max_breadth = self.components.iter().map(|c| c.breadth).max().unwrap_or(0);
        for c in &mut self.components {
            c.lower = c.breadth.div_ceil(self.grain).saturating_mul(self.grain);
        }
        let mut nodes_left = node_limit;
        let mut nodes = 0u64;
        let mut lb = self.lower();
        let mut ub = self.upper();
        // The highest capacity whose decision ran out of budget, and the node budget of one
        // decision after the first: it starts small (a few dives) and grows fourfold each time
        // every capacity left was tried without an answer, so easy improvements come first.
        let mut unknown: Option<u64> = None;
        let largest = self
            .components
            .iter()
            .filter(|c| !c.frozen)
            .map(|c| c.items.len() as u64)
            .max()
            .unwrap_or(0);
        let mut budget = largest.saturating_mul(16).max(256);
        let mut asked_bound = false;
        // A component too large to search keeps its height: no capacity below it can be
        // answered, so the search stops rather than ask such capacities until the deadline.
        let frozen_top = self
            .components
            .iter()
            .filter(|c| c.frozen)
            .map(|c| c.upper)
            .max()
            .unwrap_or(0);
        while ub > lb.max(frozen_top) && nodes_left > 0 {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            let top = ub - self.grain.min(ub);
            let floor = lb.max(frozen_top);
            let first = !asked_bound;
            let capacity = if first {
                asked_bound = true;
                floor
            } else {
                let lo = unknown.map_or(floor, |u| floor.max(u.saturating_add(self.grain)));
                if lo > top {
                    // Every capacity left was tried without an answer: try again, longer.
                    unknown = None;
                    budget = budget.saturating_mul(4);
                    continue;
                }
                lo + (top - lo) / self.grain / 2 * self.grain
            };
            // The bound itself is asked first and may take three quarters of the time: when it
            // is reachable (most instances), that one answer proves optimality, and the round
            // robin's doubling node limits need the time in one piece to get deep enough.
            let decision_deadline = if first {
                deadline.map(|d| now + (d - now) / 4 * 3)
            } else {
                deadline
            };
            let cap = if first {
                nodes_left
            } else {
                budget.min(nodes_left)
            };
            let mut left = cap;
            let answer = self.decide(capacity, decision_deadline, &mut left);
            nodes += cap - left;
            nodes_left -= cap - left;
            match answer {
                Decision::Feasible => ub = self.upper(),
                Decision::Infeasible(k) => {
                    let raised = self.round_up(capacity.saturating_add(1));
                    let c = &mut self.components[k];
                    c.lower = c.lower.max(raised);
                    lb = self.lower();
                }
                Decision::Unknown => unknown = Some(unknown.map_or(capacity, |u| u.max(capacity))),
            }
        }
        Outcome {
            lower_bound: self.lower().min(self.upper()),
            offsets: self.offsets,
            max_breadth,
            nodes,
            unsearched: self.unsearched,
        }
    }

    /// Is there a plan within `capacity`? Components already within it are not searched;
    /// the others are, highest incumbent first, and each success is kept.
    fn decide(
        &mut self,
        capacity: u64,
        deadline: Option<Instant>,
        nodes_left: &mut u64,
    ) -> Decision {
        let mut todo: Vec<usize> = (0..self.components.len())
            .filter(|&k| self.components[k].upper > capacity)
            .collect();
        todo.sort_by_key(|&k| Reverse(self.components[k].upper));
        let mut answer = Decision::Feasible;
        for k in todo {
            let c = &mut self.components[k];
            if c.lower > capacity {
                return Decision::Infeasible(k);
            }
            if c.frozen {
                answer = Decision::Unknown;
                continue;
            }
            match c.decide(capacity, deadline, nodes_left) {
                Search::Found(local) => {
                    for (j, &off) in local.iter().enumerate() {
                        self.offsets[c.items[j]] = off;
                    }
                    c.upper = local
                        .iter()
                        .zip(&c.size)
                        .map(|(&o, &s)| o.saturating_add(s))
                        .max()
                        .unwrap_or(0);
                }
                Search::Infeasible => return Decision::Infeasible(k),
                Search::Unknown => return Decision::Unknown,
            }
        }
        answer
    }
}

enum Decision {
    Feasible,
    /// Component `k` has no plan within the capacity.
    Infeasible(usize),
    Unknown,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Component {
    fn new(items: &[Item], spans: &[(usize, usize)], offsets: &[u64], group: Vec<usize>) -> Self {
        let base = group.iter().map(|&i| spans[i].0).min().unwrap_or(0);
        let last = group.iter().map(|&i| spans[i].1).max().unwrap_or(0);
        let n_sections = last - base + 1;
        let upper = group
            .iter()
            .map(|&i| offsets[i].saturating_add(items[i].size))
            .max()
            .unwrap_or(0);
        let cells: usize = group
            .iter()
            .map(|&i| spans[i].1 - spans[i].0 + 1)
            .fold(0usize, |a, b| a.saturating_add(b));
        let frozen = group.len() > EXACT_MAX_COMPONENT || cells > MAX_COMPONENT_CELLS;
        let mut c = Component {
            size: group.iter().map(|&i| items[i].size).collect(),
            lo: Vec::new(),
            hi: Vec::new(),
            width: group
                .iter()
                .map(|&i| {
                    (items[i].last_op - items[i].first_op)
                        .try_into()
                        .unwrap_or(u64::MAX)
                })
                .collect(),
            overlaps: Vec::new(),
            twin: Vec::new(),
            sections: Vec::new(),
            breadth: 0,
            lower: 0,
            upper,
            frozen,
            items: group,
        };
        // The breadth of the component is needed even when it is not searched.
        let mut delta = vec![0i128; n_sections + 1];
        for &i in &c.items {
            delta[spans[i].0 - base] += i128::from(items[i].size);
            delta[spans[i].1 - base + 1] -= i128::from(items[i].size);
        }
        let mut run = 0i128;
        for d in &delta[..n_sections] {
            run += d;
            c.breadth = c.breadth.max(u64::try_from(run).unwrap_or(u64::MAX));
        }
        if frozen {
            return c;
        }
        c.lo = c
            .items
            .iter()
            .map(|&i| (spans[i].0 - base) as u32)
            .collect();
        c.hi = c
            .items
            .iter()
            .map(|&i| (spans[i].1 - base) as u32)
            .collect();
        c.sections = vec![Vec::new(); n_sections];
        for j in 0..c.items.len() {
            for s in c.lo[j]..=c.hi[j] {
                c.sections[s as usize].push(j as u32);
            }
        }
        // Two buffers overlap iff one is live where the other starts; count each pair once.
        let mut overlaps = vec![Vec::new(); c.items.len()];
        let mut pairs = 0usize;
        for b in 0..c.items.len() {
            for &a in &c.sections[c.lo[b] as usize] {
                let a = a as usize;
                if a != b && (c.lo[a] < c.lo[b] || (c.lo[a] == c.lo[b] && a < b)) {
                    overlaps[a].push(b as u32);
                    overlaps[b].push(a as u32);
                    pairs += 1;
                    if pairs > MAX_COMPONENT_CELLS {
                        c.frozen = true;
                        c.sections = Vec::new();
                        return c;
                    }
                }
            }
        }
        c.overlaps = overlaps;
        // Twins: equal (span, size), chained in index order.
        let mut by_shape: Vec<u32> = (0..c.items.len() as u32).collect();
        by_shape.sort_unstable_by_key(|&j| {
            let j = j as usize;
            (c.lo[j], c.hi[j], c.size[j], j)
        });
        c.twin = vec![NO_TWIN; c.items.len()];
        for w in by_shape.windows(2) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            if (c.lo[a], c.hi[a], c.size[a]) == (c.lo[b], c.hi[b], c.size[b]) {
                c.twin[b] = a as u32;
            }
        }
        c
    }
}
