//! Min-cost flow assignment (Lee et al. 2019, "On-device neural net inference with mobile
//! GPUs", §3.3; TFLite `MinCostFlowAssignment`).
//!
//! A shared object is a chain of tensors, each starting after the previous one ended. The flow
//! network has a left vertex `L_j` and a right vertex `R_i` per tensor: one unit reaching `R_i`
//! from `L_j` means "tensor i reuses the object of tensor j, which ended before i started", at
//! an approximate cost of the growth `max(0, size_i - size_j)`; a unit from the source straight
//! into `R_i` means "tensor i starts a new object" at cost `size_i`. Every `R_i` must send one
//! unit to the sink, every `L_j` can pass on at most one, so a maximum flow of minimum cost is
//! a set of chains of minimum approximate total size.
//!
//! The flow is solved by successive shortest paths with Johnson potentials and Dijkstra (all
//! original costs are non-negative, so zero potentials start valid). TFLite uses SPFA on the
//! same network; both find a minimum-cost maximum flow, but ties between equal-cost paths may
//! be broken differently.
//!
//! The network has an edge for every pair (j ended before i started): O(n^2) edges, and n
//! augmentations. Inputs whose network would exceed [`MAX_EDGES`] edges or [`MAX_WORK`]
//! edge-augmentations are refused with [`PlanError::TooLarge`]. Below those limits it still
//! takes seconds on the zoo's 500-700 records, so a caller with a time budget passes a
//! deadline, checked between augmentations (each is one Dijkstra over the network), and gets
//! [`PlanError::TimeBudget`] once it has passed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use super::execution_order;
use crate::items::Item;
use crate::{PlanError, SharedObjectsPlan};

pub(crate) const MAX_EDGES: u64 = 1 << 23;
pub(crate) const MAX_WORK: u64 = 1 << 34;

struct Network {
    /// Edge `e` and its residual twin `e ^ 1`; forward edges have even ids.
    to: Vec<u32>,
    cap: Vec<u8>,
    /// Cost of forward edge `2k` is `cost[k]`; its twin costs the negation.
    cost: Vec<u64>,
    adjacent: Vec<Vec<u32>>,
}

impl Network {
    fn new(vertices: usize, edges: usize) -> Self {
        Network {
            to: Vec::with_capacity(2 * edges),
            cap: Vec::with_capacity(2 * edges),
            cost: Vec::with_capacity(edges),
            adjacent: vec![Vec::new(); vertices],
        }
    }

    fn add_edge(&mut self, from: usize, to: usize, cost: u64) -> usize {
        let e = self.to.len();
        self.to.extend([to as u32, from as u32]);
        self.cap.extend([1, 0]);
        self.cost.push(cost);
        self.adjacent[from].push(e as u32);
        self.adjacent[to].push(e as u32 + 1);
        e
    }

    fn edge_cost(&self, e: usize) -> i128 {
        let c = self.cost[e / 2] as i128;
        if e.is_multiple_of(2) {
            c
        } else {
            -c
        }
    }

    /// Pushes one unit along a shortest path from `source` to `sink`; false when none is left.
    fn augment(&mut self, source: usize, sink: usize, potential: &mut [i128]) -> bool {
        let vertices = self.adjacent.len();
        let mut dist = vec![i128::MAX; vertices];
        let mut prev_edge = vec![u32::MAX; vertices];
        let mut done = vec![false; vertices];
        let mut heap = BinaryHeap::new();
        dist[source] = 0;
        heap.push(Reverse((0i128, source as u32)));
        while let Some(Reverse((d, v))) = heap.pop() {
            let v = v as usize;
            if done[v] {
                continue;
            }
            done[v] = true;
            if v == sink {
                break;
            }
            for &e in &self.adjacent[v] {
                let e = e as usize;
                if self.cap[e] == 0 {
                    continue;
                }
                let w = self.to[e] as usize;
                // Reduced costs are non-negative under valid potentials.
                let nd = d + self.edge_cost(e) + potential[v] - potential[w];
                if nd < dist[w] {
                    dist[w] = nd;
                    prev_edge[w] = e as u32;
                    heap.push(Reverse((nd, w as u32)));
                }
            }
        }
        if dist[sink] == i128::MAX {
            return false;
        }
        // Stopping at the sink stays valid if unsettled vertices are charged dist(sink).
        let reach = dist[sink];
        for (p, &d) in potential.iter_mut().zip(&dist) {
            *p += d.min(reach);
        }
        let mut v = sink;
        while v != source {
            let e = prev_edge[v] as usize;
            self.cap[e] -= 1;
            self.cap[e ^ 1] += 1;
            v = self.to[e ^ 1] as usize;
        }
        true
    }
}

pub(crate) fn min_cost_flow(
    items: &[Item],
    deadline: Option<Instant>,
) -> Result<SharedObjectsPlan, PlanError> {
    let n = items.len();
    let order = execution_order(items);
    // Reuse edges: pairs (j, i) with last_j < first_i; counted before anything is allocated.
    let mut lasts: Vec<usize> = items.iter().map(|i| i.last_op).collect();
    lasts.sort_unstable();
    let reuse_edges: u64 = items
        .iter()
        .map(|i| lasts.partition_point(|&l| l < i.first_op) as u64)
        .sum();
    let edges = reuse_edges + 3 * n as u64;
    if edges > MAX_EDGES
        || edges.saturating_mul(n as u64) > MAX_WORK
        || 2 * n + 2 > u32::MAX as usize
    {
        return Err(PlanError::TooLarge {
            strategy: "min_cost_flow",
            records: n,
            reason: "its flow network has an edge per reusable pair and needs one shortest-path \
                     search per record; limits are 2^23 edges and 2^34 edge-augmentations",
        });
    }

    // Vertices by position k in execution order: L_k = k, R_k = n + k.
    let (source, sink) = (2 * n, 2 * n + 1);
    let mut net = Network::new(2 * n + 2, edges as usize);
    let mut new_object_edge = Vec::with_capacity(n);
    let mut ended: Vec<usize> = Vec::new();
    let mut in_use: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for (k, &i) in order.iter().enumerate() {
        let item = &items[i];
        while let Some(&Reverse((last, j))) = in_use.peek() {
            if last >= item.first_op {
                break;
            }
            in_use.pop();
            ended.push(j);
        }
        in_use.push(Reverse((item.last_op, k)));
        net.add_edge(source, k, 0);
        net.add_edge(n + k, sink, 0);
        new_object_edge.push(net.add_edge(source, n + k, item.size));
        for &j in &ended {
            net.add_edge(j, n + k, item.size.saturating_sub(items[order[j]].size));
        }
    }

    let mut potential = vec![0i128; 2 * n + 2];
    while net.augment(source, sink, &mut potential) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(PlanError::TimeBudget {
                strategy: "min_cost_flow",
            });
        }
    }

    let mut plan = SharedObjectsPlan {
        object_ids: vec![usize::MAX; n],
        object_sizes: vec![],
    };
    for (k, &edge) in new_object_edge.iter().enumerate() {
        if net.cap[edge] != 0 {
            continue;
        }
        let object = plan.object_sizes.len();
        let mut size = 0;
        let mut current = Some(k);
        while let Some(c) = current {
            let i = order[c];
            if plan.object_ids[i] != usize::MAX {
                return Err(PlanError::Internal("min-cost flow chains share a tensor"));
            }
            plan.object_ids[i] = object;
            size = size.max(items[i].size);
            current = net.adjacent[c].iter().map(|&e| e as usize).find_map(|e| {
                let w = net.to[e] as usize;
                (e.is_multiple_of(2) && net.cap[e] == 0 && (n..2 * n).contains(&w)).then(|| w - n)
            });
        }
        plan.object_sizes.push(size);
    }
    if plan.object_ids.contains(&usize::MAX) {
        return Err(PlanError::Internal(
            "min-cost flow left a tensor without an object",
        ));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items::prepare;
    use crate::UsageRecord;

    /// A chain of records, each starting after the previous ended: every augmentation is one
    /// more Dijkstra, so a passed deadline stops the flow after the first.
    fn chain(n: usize) -> Vec<Item> {
        let records: Vec<UsageRecord> = (0..n)
            .map(|k| UsageRecord {
                first_op: 2 * k,
                last_op: 2 * k + 1,
                size: 64 * (k as u64 + 1),
            })
            .collect();
        prepare(&records, 64).expect("valid records")
    }

    #[test]
    fn a_passed_deadline_stops_the_flow() {
        assert_eq!(
            min_cost_flow(&chain(8), Some(Instant::now())),
            Err(PlanError::TimeBudget {
                strategy: "min_cost_flow"
            })
        );
    }

    #[test]
    fn no_deadline_is_the_unbounded_flow() {
        let items = chain(8);
        let far = Instant::now() + std::time::Duration::from_secs(3600);
        let plan = min_cost_flow(&items, None).expect("plan");
        assert_eq!(min_cost_flow(&items, Some(far)), Ok(plan.clone()));
        // One object grown to the largest tensor: the chain reuses it throughout.
        assert_eq!(plan.object_sizes, vec![64 * 8]);
    }
}
