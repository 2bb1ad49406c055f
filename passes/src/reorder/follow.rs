//! An order that follows a known one: for judging a rewritten program, most of whose
//! operators are the input program's, in the order already found for the input.
//!
//! The exact search on the input program may have taken most of a time budget; a rewritten
//! candidate shares most of its pieces, and re-searching them within a candidate's share of
//! the budget usually stops early with a worse order. Starting the candidate's search from
//! the input's order (spliced with the heuristics, piece by piece) keeps what was found.

use super::dag::Dag;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A topological order of `dag` in which nodes run as early as `rank` says (the position of
/// the same operator in the known order, `None` for a new one). A new node takes the smallest
/// rank of its successors — it runs right before the first known operator that needs it —
/// and ties go to the lower node index (input order).
pub fn schedule(dag: &Dag, rank: &[Option<usize>]) -> Vec<usize> {
    let n = dag.len();
    let mut key = vec![usize::MAX; n];
    // Node numbering is topological: successors are keyed before their predecessors.
    for v in (0..n).rev() {
        key[v] = rank.get(v).copied().flatten().unwrap_or_else(|| {
            dag.succs[v]
                .iter()
                .map(|&s| key[s])
                .min()
                .unwrap_or(usize::MAX)
        });
    }
    let mut waiting: Vec<usize> = dag.preds.iter().map(Vec::len).collect();
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..n)
        .filter(|&v| waiting[v] == 0)
        .map(|v| Reverse((key[v], v)))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse((_, v))) = ready.pop() {
        order.push(v);
        for &s in &dag.succs[v] {
            waiting[s] -= 1;
            if waiting[s] == 0 {
                ready.push(Reverse((key[s], s)));
            }
        }
    }
    order
}
