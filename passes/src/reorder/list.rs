//! XLA's list scheduler (`ListScheduler` in `xla/service/hlo_memory_scheduler.cc`): a greedy
//! list schedule that, among the ready ops, picks the one with the largest
//! `bytes_freed - bytes_defined`, i.e. the op that frees the most or allocates the least.
//! Ties go to the earlier op in the input order, as XLA breaks them by original position.

use super::dag::Dag;
use std::collections::BTreeSet;

pub fn schedule(dag: &Dag) -> Vec<usize> {
    let mut indegree: Vec<usize> = dag.preds.iter().map(Vec::len).collect();
    let mut remaining: Vec<usize> = dag.tensors.iter().map(|t| t.consumers.len()).collect();
    let mut ready: BTreeSet<usize> = (0..dag.len()).filter(|&v| indegree[v] == 0).collect();
    let mut order = Vec::with_capacity(dag.len());
    while !ready.is_empty() {
        let mut best: Option<(i128, usize)> = None;
        for &v in &ready {
            let (freed, defined) = dag.freed_and_defined(v, &remaining);
            let priority = i128::from(freed) - i128::from(defined);
            if best.is_none_or(|(p, _)| priority > p) {
                best = Some((priority, v));
            }
        }
        let Some((_, v)) = best else { break };
        ready.remove(&v);
        order.push(v);
        for &t in &dag.ins[v] {
            remaining[t] = remaining[t].saturating_sub(1);
        }
        for &s in &dag.succs[v] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.insert(s);
            }
        }
    }
    order
}
