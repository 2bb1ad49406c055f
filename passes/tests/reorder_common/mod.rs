//! Shared helpers of the reorder tests: random DAGs written as `.tir`, the checks every
//! reordered function must pass, and a brute force over topological orders.
#![allow(dead_code)]

use tir_ir::{Function, Module};
use tir_passes::liveness;
use tir_passes::planner::{self, checker::check_offsets, lower_bounds, OffsetStrategy};
use tir_passes::reorder::Dag;

/// A random DAG: node `k` reads the nodes `preds[k] mod k` (the graph input when empty) and
/// defines `channels[k]` channels of 4x4 float32 (64 bytes a channel). Several inputs are
/// joined by a `concat` first; each node is a 1x1 `conv2d`; the sinks are concatenated into
/// the output.
pub fn random_tir(nodes: &[(Vec<usize>, u8)]) -> String {
    let mut text = String::new();
    let mut channels: Vec<u32> = Vec::new();
    let mut used = vec![false; nodes.len()];
    let mut body = String::new();
    for (k, (raw, c)) in nodes.iter().enumerate() {
        let c = u32::from(*c).max(1);
        let mut preds: Vec<usize> = if k == 0 {
            Vec::new()
        } else {
            raw.iter().map(|p| p % k).collect()
        };
        preds.dedup();
        preds.sort_unstable();
        preds.dedup();
        let (input, in_c) = match preds.as_slice() {
            [] => ("%x".to_string(), 4),
            [p] => (format!("%n{p}"), channels[*p]),
            ps => {
                let s: u32 = ps.iter().map(|&p| channels[p]).sum();
                let args: Vec<String> = ps.iter().map(|p| format!("%n{p}")).collect();
                body += &format!(
                    "    %cat{k} = concat({}) {{axis = 1}} : tensor<1x{s}x4x4xf32>\n",
                    args.join(", ")
                );
                (format!("%cat{k}"), s)
            }
        };
        for &p in &preds {
            used[p] = true;
        }
        body += &format!("    %w{k} = const {{name = \"w{k}\"}} : tensor<{c}x{in_c}x1x1xf32>\n");
        body += &format!("    %n{k} = conv2d({input}, %w{k}) : tensor<1x{c}x4x4xf32>\n");
        channels.push(c);
    }
    let sinks: Vec<usize> = (0..nodes.len()).filter(|&k| !used[k]).collect();
    let (ret, out_c) = match sinks.as_slice() {
        [s] => (format!("%n{s}"), channels[*s]),
        ss => {
            let total: u32 = ss.iter().map(|&s| channels[s]).sum();
            let args: Vec<String> = ss.iter().map(|s| format!("%n{s}")).collect();
            body += &format!(
                "    %out = concat({}) {{axis = 1}} : tensor<1x{total}x4x4xf32>\n",
                args.join(", ")
            );
            ("%out".to_string(), total)
        }
    };
    text += "module @random {\n";
    text += &format!("  func @main(%x: tensor<1x4x4x4xf32>) -> tensor<1x{out_c}x4x4xf32> {{\n");
    text += &body;
    text += &format!("    return {ret}\n  }}\n}}\n");
    text
}

pub fn parse(text: &str) -> Module {
    match tir_ir::parse_and_verify(text) {
        Ok(m) => m,
        Err(e) => panic!("does not verify: {e:?}\n{text}"),
    }
}

pub fn entry(m: &Module) -> &Function {
    m.entry().expect("a @main function")
}

/// Only the layout may change: same ops, operands, values and returns; the layout is a
/// permutation of the old one; the module verifies; the plan on the new order passes the
/// checker; and the DAG's peak equals the liveness lower bound.
pub fn check_reordered(
    before: &Module,
    after: &mut Module,
    dag: &Dag,
    order: &[usize],
    align: u64,
) {
    {
        let (b, a) = (entry(before), entry(after));
        assert_eq!(b.ops, a.ops, "ops changed");
        assert_eq!(b.values, a.values, "values changed");
        assert_eq!(b.returns, a.returns, "returns changed");
        let mut lb = b.layout.clone();
        let mut la = a.layout.clone();
        lb.sort();
        la.sort();
        assert_eq!(lb, la, "the layout is not a permutation");
    }
    if let Err(es) = tir_ir::verify(after) {
        panic!("the reordered module does not verify: {es:?}");
    }
    let live = liveness::analyze(entry(after)).expect("liveness");
    // One fast strategy is enough here; `reorder::score` checks `best_offsets` plans.
    let plan =
        planner::plan_offsets(&live.records, OffsetStrategy::GreedyBySize, align).expect("plan");
    check_offsets(&live.records, &plan, align).expect("checker");
    let bound = lower_bounds(&live.records, align).expect("bounds").offsets;
    assert_eq!(
        dag.peak(order),
        bound,
        "the DAG's peak is not the liveness bound"
    );
}

/// The smallest peak over all topological orders, by enumeration.
pub fn brute_force_peak(dag: &Dag) -> u64 {
    fn go(dag: &Dag, order: &mut Vec<usize>, placed: &mut Vec<bool>, best: &mut u64) {
        if order.len() == dag.len() {
            *best = (*best).min(dag.peak(order));
            return;
        }
        for v in 0..dag.len() {
            if !placed[v] && dag.preds[v].iter().all(|&p| placed[p]) {
                placed[v] = true;
                order.push(v);
                go(dag, order, placed, best);
                order.pop();
                placed[v] = false;
            }
        }
    }
    let mut best = u64::MAX;
    go(dag, &mut Vec::new(), &mut vec![false; dag.len()], &mut best);
    best
}
