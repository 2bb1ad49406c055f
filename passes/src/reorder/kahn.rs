//! Kahn's algorithm with a FIFO ready queue: a breadth-first topological order, the order a
//! naive framework (and TFLite's converter on branchy graphs) tends to produce. It starts every
//! branch before finishing any, so it is the memory-oblivious baseline of SERENITY's §5.

use super::dag::Dag;
use std::collections::VecDeque;

pub fn schedule(dag: &Dag) -> Vec<usize> {
    let mut indegree: Vec<usize> = dag.preds.iter().map(Vec::len).collect();
    let mut ready: VecDeque<usize> = (0..dag.len()).filter(|&v| indegree[v] == 0).collect();
    let mut order = Vec::with_capacity(dag.len());
    while let Some(v) = ready.pop_front() {
        order.push(v);
        for &s in &dag.succs[v] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push_back(s);
            }
        }
    }
    order
}
