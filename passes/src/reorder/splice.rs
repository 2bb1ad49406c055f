//! Splicing heuristic orders piece by piece.
//!
//! The exact search splits the DAG at its cut points (nodes every source-to-sink path goes
//! through, `exact::pieces`), and so can any order: every topological order runs the pieces
//! in the same sequence at the same steps, and only a cut point's results cross into the next
//! piece. The breadth at a step inside a piece therefore depends on that piece's sub-order
//! alone, and the peak of an order is the maximum of its pieces' local peaks. Taking, for
//! every piece, the sub-order of whichever heuristic has the lowest local peak there gives an
//! order whose peak is at most every heuristic's — in microseconds, where the exact search
//! takes seconds. It matters where no one heuristic suits the whole program: after kernel-wise
//! partitioning the depth-first order interleaves each piece with its partial sum (SERENITY's
//! partitioned schedule), while the list scheduler suits the cells around it.

use super::dag::Dag;
use super::exact;

/// The spliced order of `orders` (topological orders of `dag`): per piece, the sub-order
/// with the lowest local peak, the earliest order on ties. `None` when `orders` is empty.
pub fn schedule(dag: &Dag, orders: &[Vec<usize>]) -> Option<Vec<usize>> {
    let first = orders.first()?;
    let breadths: Vec<Vec<u64>> = orders.iter().map(|o| dag.breadths(o)).collect();
    let mut out = Vec::with_capacity(dag.len());
    let mut at = 0;
    for piece in exact::pieces(dag) {
        let steps = at..at + piece.len();
        let local = |k: usize| breadths[k][steps.clone()].iter().copied().max();
        let k = (0..orders.len()).min_by_key(|&k| local(k)).unwrap_or(0);
        out.extend_from_slice(orders.get(k).unwrap_or(first).get(steps.clone())?);
        at = steps.end;
    }
    Some(out)
}
