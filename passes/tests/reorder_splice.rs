//! The orders built from other orders: `splice` (per cut-point piece, the lowest local peak)
//! and `follow` (a known order carried over to a program that shares its operators), on
//! random DAGs.

mod reorder_common;

use proptest::prelude::*;
use reorder_common::*;
use tir_passes::reorder::{self, layout_of, Dag, Scheduler};

const ALIGN: u64 = 64;

fn dag_spec(max_nodes: usize) -> impl Strategy<Value = Vec<(Vec<usize>, u8)>> {
    prop::collection::vec(
        (prop::collection::vec(0usize..64, 0..=3), 1u8..=16),
        1..=max_nodes,
    )
}

fn heuristic_orders(dag: &Dag) -> Vec<Vec<usize>> {
    Scheduler::HEURISTICS
        .iter()
        .map(|&s| {
            reorder::schedule(dag, s, Default::default(), ALIGN)
                .expect("schedule")
                .order
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_splice_is_valid_and_never_above_any_of_its_orders(spec in dag_spec(24)) {
        let module = parse(&random_tir(&spec));
        let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
        let orders = heuristic_orders(&dag);
        let spliced = reorder::splice::schedule(&dag, &orders).expect("orders given");
        prop_assert!(dag.is_topological(&spliced));
        let mut after = module.clone();
        after.entry_mut().expect("main").layout = layout_of(entry(&module), &dag, &spliced);
        check_reordered(&module, &mut after, &dag, &spliced, ALIGN);
        for o in &orders {
            prop_assert!(dag.peak(&spliced) <= dag.peak(o));
        }
        // `fast_orders` ends with the same splice.
        let fast = reorder::fast_orders(&dag, ALIGN).expect("fast orders");
        prop_assert_eq!(fast.last(), Some(&spliced));
    }

    #[test]
    fn following_a_complete_order_gives_it_back(spec in dag_spec(24), which in 0usize..5) {
        let module = parse(&random_tir(&spec));
        let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
        let known = heuristic_orders(&dag).swap_remove(which);
        let mut rank = vec![None; dag.len()];
        for (k, &v) in known.iter().enumerate() {
            rank[v] = Some(k);
        }
        prop_assert_eq!(reorder::follow::schedule(&dag, &rank), known);
    }

    #[test]
    fn following_a_partial_order_is_topological(
        spec in dag_spec(24),
        unknown in prop::collection::vec(any::<bool>(), 24),
    ) {
        let module = parse(&random_tir(&spec));
        let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
        let known = heuristic_orders(&dag).swap_remove(2);
        let mut rank = vec![None; dag.len()];
        for (k, &v) in known.iter().enumerate() {
            if !unknown[v % unknown.len()] {
                rank[v] = Some(k);
            }
        }
        let order = reorder::follow::schedule(&dag, &rank);
        prop_assert!(dag.is_topological(&order));
        // The known nodes keep their relative order.
        let pos: Vec<usize> = {
            let mut p = vec![0; dag.len()];
            for (k, &v) in order.iter().enumerate() {
                p[v] = k;
            }
            p
        };
        let kept: Vec<usize> = known.iter().copied().filter(|&v| rank[v].is_some()).collect();
        prop_assert!(kept.windows(2).all(|w| pos[w[0]] < pos[w[1]]));
    }
}

/// Two forks of two chains each (`n1 -> n2`, `n3 -> n4` from `n0`; `n6 -> n7`, `n8 -> n9`
/// from `n5`), joined by a cut point: running a fork's chains one after the other holds one
/// 16-channel map at a time, breadth-first holds two. Order `a` is depth-first in the first
/// fork only, `b` in the second only; the splice is depth-first in both, strictly below each.
#[test]
fn a_splice_takes_each_piece_from_the_order_best_there() {
    let spec: Vec<(Vec<usize>, u8)> = vec![
        (vec![], 1),
        (vec![0], 16),
        (vec![1], 1),
        (vec![0], 16),
        (vec![3], 1),
        (vec![2, 4], 1),
        (vec![5], 16),
        (vec![6], 1),
        (vec![5], 16),
        (vec![8], 1),
        (vec![7, 9], 1),
    ];
    let module = parse(&random_tir(&spec));
    let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
    let f = entry(&module);
    let find = |name: &str| {
        (0..dag.len())
            .find(|&v| f.values[f.ops[dag.ops[v]].results[0]].name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    };
    let n: Vec<usize> = (0..11).map(|k| find(&format!("n{k}"))).collect();
    let (cat5, cat10) = (find("cat5"), find("cat10"));
    let first_dfs = [n[0], n[1], n[2], n[3], n[4], cat5, n[5]];
    let first_bfs = [n[0], n[1], n[3], n[2], n[4], cat5, n[5]];
    let second_dfs = [n[6], n[7], n[8], n[9], cat10, n[10]];
    let second_bfs = [n[6], n[8], n[7], n[9], cat10, n[10]];
    let a: Vec<usize> = first_dfs.iter().chain(&second_bfs).copied().collect();
    let b: Vec<usize> = first_bfs.iter().chain(&second_dfs).copied().collect();
    let want: Vec<usize> = first_dfs.iter().chain(&second_dfs).copied().collect();
    assert!(dag.is_topological(&a) && dag.is_topological(&b));
    let spliced = reorder::splice::schedule(&dag, &[a.clone(), b.clone()]).expect("orders");
    assert_eq!(spliced, want);
    assert!(dag.peak(&spliced) < dag.peak(&a).min(dag.peak(&b)));
}
