//! Exact order search: minimum peak breadth over all topological orders.
//!
//! SERENITY (Ahn et al., "Ordering Chaos: Memory-Aware Scheduling of Irregularly Wired Neural
//! Networks for Edge Devices", MLSys 2020), §3: dynamic programming over the sets of scheduled
//! nodes. The memory held after a set `S` is scheduled depends on `S` alone (a tensor is freed
//! once all its consumers are in `S`), so only the peak depends on the path, and each set keeps
//! the path with the smallest peak (memoisation). Layers are built by set size; a transition
//! whose peak reaches the best known peak (the incumbent: the best heuristic order) is pruned
//! (SERENITY's "adaptive soft budgeting" with the incumbent as budget).
//!
//! SERENITY's divide and conquer (§3.2) splits the graph where it narrows to one node. Here the
//! cut points are the nodes that dominate a virtual sink in the DAG extended with a virtual
//! source and sink (petgraph's dominators): every other node is then an ancestor or a
//! descendant of the cut, so every topological order runs the pieces between consecutive cuts
//! one after the other and the memory held at a cut does not depend on the order. The pieces
//! are solved independently and the peak is the maximum over pieces.
//!
//! Budget: a layer larger than `states` is cut to its `states` best sets by (peak, memory) —
//! a beam, as HMCOS (Wang et al., DAC 2022) also bounds its search — and past the time limit
//! every remaining layer is cut to a narrow beam; either way the result is the best found and
//! is no longer a proof.

use super::dag::Dag;
use petgraph::algo::dominators::simple_fast;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How much search the exact scheduler may spend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Wall-clock limit for the whole search.
    pub time: Duration,
    /// Largest number of scheduled-node sets kept per DP layer; above it the search becomes a
    /// beam search and stops being exact.
    pub states: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            time: Duration::from_secs(10),
            states: 20_000,
        }
    }
}

/// Which budget stopped the search from proving optimality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    States,
    Time,
}

impl Stopped {
    pub fn name(self) -> &'static str {
        match self {
            Stopped::States => "state budget",
            Stopped::Time => "time budget",
        }
    }
}

/// What the exact search found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExactResult {
    pub order: Vec<usize>,
    /// Peak breadth of `order`.
    pub peak: u64,
    /// A proven lower bound on the peak breadth of every topological order.
    pub lower_bound: u64,
    /// `None` when the search finished: `peak` is then the optimum (`peak == lower_bound`).
    pub stopped: Option<Stopped>,
    /// Pieces between cut points, and the size of the largest.
    pub pieces: usize,
    pub largest_piece: usize,
    /// DP states created.
    pub states: u64,
}

impl ExactResult {
    pub fn proved(&self) -> bool {
        self.peak <= self.lower_bound
    }
}

/// Pieces of at most this many nodes are searched before the others.
pub const SMALL_PIECE: usize = 32;

/// Cut points: nodes every source-to-sink path goes through.
pub fn cut_points(dag: &Dag) -> Vec<bool> {
    let n = dag.len();
    let (source, sink) = (n, n + 1);
    let mut g = DiGraph::<(), ()>::with_capacity(n + 2, n * 2);
    for _ in 0..n + 2 {
        g.add_node(());
    }
    for v in 0..n {
        if dag.preds[v].is_empty() {
            g.add_edge(NodeIndex::new(source), NodeIndex::new(v), ());
        }
        if dag.succs[v].is_empty() {
            g.add_edge(NodeIndex::new(v), NodeIndex::new(sink), ());
        }
        for &p in &dag.preds[v] {
            g.add_edge(NodeIndex::new(p), NodeIndex::new(v), ());
        }
    }
    let doms = simple_fast(&g, NodeIndex::new(source));
    let mut cuts = vec![false; n];
    if let Some(iter) = doms.strict_dominators(NodeIndex::new(sink)) {
        for d in iter {
            if d.index() < n {
                cuts[d.index()] = true;
            }
        }
    }
    cuts
}

/// The pieces in execution order: the nodes between consecutive cut points, and each cut
/// point alone. Nodes are ascending within a piece.
pub fn pieces(dag: &Dag) -> Vec<Vec<usize>> {
    let cuts = cut_points(dag);
    let n = dag.len();
    // Every node is an ancestor or a descendant of every cut, so the number of cuts above a
    // node places it; node numbering is topological.
    let mut above = vec![0usize; n];
    for v in 0..n {
        above[v] = dag.preds[v]
            .iter()
            .map(|&p| above[p] + usize::from(cuts[p]))
            .max()
            .unwrap_or(0);
    }
    let slots = 2 * (cuts.iter().filter(|&&c| c).count() + 1);
    let mut out = vec![Vec::new(); slots];
    for v in 0..n {
        out[2 * above[v] + usize::from(cuts[v])].push(v);
    }
    out.retain(|p| !p.is_empty());
    out
}

/// Minimises the peak breadth, starting from `incumbent` (a topological order).
pub fn schedule(dag: &Dag, incumbent: &[usize], budget: Budget) -> ExactResult {
    let deadline = Instant::now() + budget.time;
    let pieces = pieces(dag);
    let n = dag.len();
    let mut piece_of = vec![0usize; n];
    for (k, p) in pieces.iter().enumerate() {
        for &v in p {
            piece_of[v] = k;
        }
    }
    // The incumbent runs each piece contiguously; record its per-piece order, peak, and the
    // memory held when each piece starts (a function of the pieces before it only).
    let mut inc: Vec<Vec<usize>> = vec![Vec::new(); pieces.len()];
    for &v in incumbent {
        inc[piece_of[v]].push(v);
    }
    let mut base = vec![0u64; pieces.len()];
    let mut inc_peak = vec![0u64; pieces.len()];
    {
        let mut remaining: Vec<usize> = dag.tensors.iter().map(|t| t.consumers.len()).collect();
        let mut mem = 0u64;
        for (k, order) in inc.iter().enumerate() {
            base[k] = mem;
            for &v in order {
                let b = step(dag, v, &mut remaining, &mut mem);
                inc_peak[k] = inc_peak[k].max(b);
            }
        }
    }
    let mut done_before = vec![false; n];
    let mut solved: Vec<Option<Vec<usize>>> = vec![None; pieces.len()];
    let mut lower = vec![0u64; pieces.len()];
    let mut peak = vec![0u64; pieces.len()];
    let mut stopped = None;
    let mut states = 0u64;
    // Small pieces first (milliseconds each, and a plan with buffer sharing may be decided
    // there even when the peak breadth is not), then the pieces that decide the peak, so a
    // time budget is spent where it counts.
    let mut by_peak: Vec<usize> = (0..pieces.len()).collect();
    by_peak.sort_by_key(|&k| {
        let large = pieces[k].len() > SMALL_PIECE;
        (large, std::cmp::Reverse(inc_peak[k]), k)
    });
    let mut before_piece: Vec<Vec<bool>> = Vec::new();
    for piece in &pieces {
        before_piece.push(done_before.clone());
        for &v in piece {
            done_before[v] = true;
        }
    }
    for k in by_peak {
        let piece = Piece::new(dag, &pieces[k], &before_piece[k], base[k]);
        lower[k] = piece.static_lower_bound();
        peak[k] = inc_peak[k];
        if inc_peak[k] <= lower[k] || pieces[k].len() == 1 {
            lower[k] = inc_peak[k];
            continue;
        }
        let out = piece.search(inc_peak[k], budget.states, deadline);
        states += out.states;
        if let Some((order, p)) = out.found {
            solved[k] = Some(order);
            peak[k] = p;
        }
        match out.stopped {
            None => lower[k] = peak[k],
            Some(s) => {
                stopped = Some(match (stopped, s) {
                    (Some(Stopped::Time), _) | (_, Stopped::Time) => Stopped::Time,
                    _ => Stopped::States,
                })
            }
        }
    }
    let mut order = Vec::with_capacity(n);
    for (k, s) in solved.into_iter().enumerate() {
        order.extend(s.unwrap_or_else(|| inc[k].clone()));
    }
    let total_peak = dag.peak(&order);
    let lower_bound = lower.into_iter().max().unwrap_or(0);
    ExactResult {
        peak: total_peak,
        lower_bound,
        stopped: if total_peak <= lower_bound {
            None
        } else {
            stopped
        },
        pieces: pieces.len(),
        largest_piece: pieces.iter().map(Vec::len).max().unwrap_or(0),
        states,
        order,
    }
}

/// Schedules `v`: returns the breadth at its step and updates the memory held.
fn step(dag: &Dag, v: usize, remaining: &mut [usize], mem: &mut u64) -> u64 {
    for &t in &dag.outs[v] {
        *mem = mem.saturating_add(dag.tensors[t].size);
    }
    let b = *mem;
    for &t in &dag.ins[v] {
        remaining[t] = remaining[t].saturating_sub(1);
        if remaining[t] == 0 {
            *mem = mem.saturating_sub(dag.tensors[t].size);
        }
    }
    for &t in &dag.outs[v] {
        if dag.tensors[t].consumers.is_empty() {
            *mem = mem.saturating_sub(dag.tensors[t].size);
        }
    }
    b
}

type Set = Box<[u64]>;

fn contains(set: &[u64], i: usize) -> bool {
    set[i / 64] >> (i % 64) & 1 == 1
}

fn subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}

/// One piece as a local DP problem.
struct Piece<'a> {
    nodes: &'a [usize],
    /// Local predecessors of each local node.
    preds: Vec<Set>,
    /// Bytes each node defines, and how many of them die at once (no consumers).
    defined: Vec<u64>,
    dead: Vec<u64>,
    /// Tensors read by each node that die once every local consumer in the mask has run.
    frees: Vec<Vec<(u64, Set)>>,
    /// Bytes read by each node (its inputs are live at its step).
    read: Vec<u64>,
    /// Memory held when the piece starts.
    base: u64,
    /// Part of `base` that stays live through the whole piece.
    through: u64,
    words: usize,
}

struct SearchOutcome {
    found: Option<(Vec<usize>, u64)>,
    stopped: Option<Stopped>,
    states: u64,
}

struct State {
    set: Set,
    peak: u64,
    mem: u64,
    parent: u32,
    node: u32,
}

impl<'a> Piece<'a> {
    fn new(dag: &Dag, nodes: &'a [usize], before: &[bool], base: u64) -> Piece<'a> {
        let m = nodes.len();
        let words = m.div_ceil(64).max(1);
        let mut local = HashMap::with_capacity(m);
        for (i, &v) in nodes.iter().enumerate() {
            local.insert(v, i);
        }
        let mask = |vs: &mut dyn Iterator<Item = usize>| -> Set {
            let mut s = vec![0u64; words].into_boxed_slice();
            for v in vs {
                if let Some(&i) = local.get(&v) {
                    s[i / 64] |= 1 << (i % 64);
                }
            }
            s
        };
        let mut preds = Vec::with_capacity(m);
        let mut defined = Vec::with_capacity(m);
        let mut dead = Vec::with_capacity(m);
        let mut frees = Vec::with_capacity(m);
        let mut read = Vec::with_capacity(m);
        for &v in nodes {
            preds.push(mask(&mut dag.preds[v].iter().copied()));
            defined.push(dag.outs[v].iter().map(|&t| dag.tensors[t].size).sum());
            dead.push(
                dag.outs[v]
                    .iter()
                    .filter(|&&t| dag.tensors[t].consumers.is_empty())
                    .map(|&t| dag.tensors[t].size)
                    .sum(),
            );
            read.push(dag.ins[v].iter().map(|&t| dag.tensors[t].size).sum());
            let mut f = Vec::new();
            for &t in &dag.ins[v] {
                let cs = &dag.tensors[t].consumers;
                if cs.iter().all(|c| before[*c] || local.contains_key(c)) {
                    f.push((dag.tensors[t].size, mask(&mut cs.iter().copied())));
                }
            }
            frees.push(f);
        }
        // Tensors live at the start with no consumer in the piece stay live throughout.
        let mut through = 0u64;
        for t in &dag.tensors {
            let live = before[t.producer] && t.consumers.iter().any(|c| !before[*c]);
            if live && !t.consumers.iter().any(|c| local.contains_key(c)) {
                through = through.saturating_add(t.size);
            }
        }
        Piece {
            nodes,
            preds,
            defined,
            dead,
            frees,
            read,
            base,
            through,
            words,
        }
    }

    /// Each node's step holds its inputs, its outputs and what passes through the piece.
    fn static_lower_bound(&self) -> u64 {
        (0..self.nodes.len())
            .map(|i| {
                self.through
                    .saturating_add(self.defined[i])
                    .saturating_add(self.read[i])
            })
            .max()
            .unwrap_or(0)
            .max(self.first_step())
    }

    /// The first node's step holds the memory held at the start plus what that node defines.
    fn first_step(&self) -> u64 {
        (0..self.nodes.len())
            .filter(|&i| self.preds[i].iter().all(|&w| w == 0))
            .map(|i| self.base.saturating_add(self.defined[i]))
            .min()
            .unwrap_or(0)
    }

    /// DP over scheduled sets, pruning every path whose peak reaches `bound`. `found` is `None`
    /// when no order has a smaller peak than `bound`.
    fn search(&self, bound: u64, width: usize, deadline: Instant) -> SearchOutcome {
        let m = self.nodes.len();
        let mut layers: Vec<Vec<State>> = vec![vec![State {
            set: vec![0u64; self.words].into_boxed_slice(),
            peak: 0,
            mem: self.base,
            parent: 0,
            node: 0,
        }]];
        let mut stopped = None;
        let mut states = 1u64;
        let mut width = width.max(1);
        for _ in 0..m {
            let Some(layer) = layers.last() else { break };
            let mut next: Vec<State> = Vec::new();
            let mut index: HashMap<Set, usize> = HashMap::new();
            for (si, s) in layer.iter().enumerate() {
                // Past the deadline a layer is not finished: the states expanded so far (the
                // layer is sorted best first once it has been cut) already make a next layer,
                // so a wide layer cannot overrun the time budget by its whole width.
                if si % 64 == 63 && !next.is_empty() && Instant::now() > deadline {
                    stopped = Some(Stopped::Time);
                    width = width.min(64);
                    break;
                }
                for i in 0..m {
                    if contains(&s.set, i) || !subset(&self.preds[i], &s.set) {
                        continue;
                    }
                    let b = s.mem.saturating_add(self.defined[i]);
                    let peak = s.peak.max(b);
                    if peak >= bound {
                        continue;
                    }
                    let mut set = s.set.clone();
                    set[i / 64] |= 1 << (i % 64);
                    let mut mem = b.saturating_sub(self.dead[i]);
                    for (size, mask) in &self.frees[i] {
                        if subset(mask, &set) {
                            mem = mem.saturating_sub(*size);
                        }
                    }
                    let cand = State {
                        set,
                        peak,
                        mem,
                        parent: si as u32,
                        node: i as u32,
                    };
                    match index.get(&cand.set) {
                        Some(&j) => {
                            if peak < next[j].peak {
                                next[j] = cand;
                            }
                        }
                        None => {
                            index.insert(cand.set.clone(), next.len());
                            next.push(cand);
                            states += 1;
                        }
                    }
                }
            }
            if next.is_empty() {
                return SearchOutcome {
                    found: None,
                    stopped,
                    states,
                };
            }
            if stopped != Some(Stopped::Time) && Instant::now() > deadline {
                stopped = Some(Stopped::Time);
                width = width.min(64);
            }
            if next.len() > width {
                next.sort_by_key(|s| (s.peak, s.mem));
                next.truncate(width);
                if stopped.is_none() {
                    stopped = Some(Stopped::States);
                }
            }
            layers.push(next);
        }
        // Walk the parents back from the full set.
        let mut order = Vec::with_capacity(m);
        let Some(last) = layers.last().and_then(|l| l.first()) else {
            return SearchOutcome {
                found: None,
                stopped,
                states,
            };
        };
        let peak = last.peak;
        let mut idx = 0usize;
        for layer in layers.iter().rev() {
            let Some(s) = layer.get(idx) else { break };
            if layer.len() == 1 && s.set.iter().all(|&w| w == 0) {
                break;
            }
            order.push(self.nodes[s.node as usize]);
            idx = s.parent as usize;
        }
        order.reverse();
        SearchOutcome {
            found: (order.len() == m).then_some((order, peak)),
            stopped,
            states,
        }
    }
}
