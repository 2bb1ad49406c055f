//! XLA's DFS memory scheduler (`DFSMemoryScheduler` in `hlo_memory_scheduler.cc`): a DFS
//! post-order that visits first the operands whose subgraphs have the most extra users (values
//! read more than once, which stay live longest), then those with the largest cumulative
//! size, so that big subcomputations run early and their results are consumed soon.
//! Like XLA, the cumulative size sums over operands and may count shared ancestors twice.

use super::dag::Dag;
use super::post_order::post_order;
use std::cmp::Reverse;

pub fn schedule(dag: &Dag) -> Vec<usize> {
    let n = dag.len();
    let mut extra_users = vec![0u64; n];
    let mut total_size = vec![0u64; n];
    // Node numbering is a topological order, so operands are final before their users.
    for v in 0..n {
        let users = dag.succs[v].len() as u64;
        let mut extra = users.saturating_sub(1);
        let mut total = dag.outs[v]
            .iter()
            .fold(0u64, |a, &t| a.saturating_add(dag.tensors[t].size));
        for &p in &dag.preds[v] {
            extra = extra.saturating_add(extra_users[p]);
            total = total.saturating_add(total_size[p]);
        }
        extra_users[v] = extra;
        total_size[v] = total;
    }
    let key = |v: usize| (Reverse(extra_users[v]), Reverse(total_size[v]), v);
    let mut roots: Vec<usize> = (0..n).filter(|&v| dag.succs[v].is_empty()).collect();
    roots.sort_by_key(|&v| key(v));
    post_order(dag, &roots, |v| {
        let mut c = dag.preds[v].clone();
        c.sort_by_key(|&p| key(p));
        c
    })
}
