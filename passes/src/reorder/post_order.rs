//! XLA's post-order scheduler (`PostOrderMemoryScheduler`): the computation's plain DFS
//! post-order (`MakeInstructionPostOrder`), operands visited in operand order, starting from
//! the outputs. Sinks (ops nobody reads) are the roots, taken in input order.

use super::dag::Dag;

pub fn schedule(dag: &Dag) -> Vec<usize> {
    let roots: Vec<usize> = (0..dag.len())
        .filter(|&v| dag.succs[v].is_empty())
        .collect();
    post_order(dag, &roots, |v| dag.preds[v].clone())
}

/// Iterative DFS post-order over predecessors from `roots`, visiting each node's predecessors
/// in the order `children` gives. Every node is reachable from some sink, so the result is a
/// permutation, and a post-order over predecessors is a topological order.
pub(super) fn post_order(
    dag: &Dag,
    roots: &[usize],
    children: impl Fn(usize) -> Vec<usize>,
) -> Vec<usize> {
    let mut visited = vec![false; dag.len()];
    let mut order = Vec::with_capacity(dag.len());
    let mut stack: Vec<(usize, Vec<usize>, usize)> = Vec::new();
    for &r in roots {
        if visited[r] {
            continue;
        }
        visited[r] = true;
        stack.push((r, children(r), 0));
        while let Some(top) = stack.last_mut() {
            if let Some(&c) = top.1.get(top.2) {
                top.2 += 1;
                if !visited[c] {
                    visited[c] = true;
                    stack.push((c, children(c), 0));
                }
            } else {
                order.push(top.0);
                stack.pop();
            }
        }
    }
    order
}
