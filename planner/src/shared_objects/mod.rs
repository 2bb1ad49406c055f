//! Shared-object strategies (paper §4). Each returns a plan whose object sizes are aligned
//! sizes; the cost is checked for overflow here, once, for all of them.

mod equality;
mod greedy_by_breadth;
mod greedy_by_size;
mod greedy_by_size_improved;
mod greedy_in_order;
mod min_cost_flow;
mod naive;

use std::collections::BTreeMap;
use std::time::Instant;

use super::error::overflow;
use super::items::Item;
use super::{PlanError, SharedObjectStrategy, SharedObjectsPlan};

pub(crate) fn plan(
    items: &[Item],
    strategy: SharedObjectStrategy,
) -> Result<SharedObjectsPlan, PlanError> {
    plan_until(items, strategy, None)
}

/// [`plan`], giving up with [`PlanError::TimeBudget`] once `deadline` has passed. Only
/// min-cost flow looks at the deadline: it alone takes seconds at zoo sizes (one shortest-path
/// search per record over a quadratic network), so it alone can overrun a caller's budget.
pub(crate) fn plan_until(
    items: &[Item],
    strategy: SharedObjectStrategy,
    deadline: Option<Instant>,
) -> Result<SharedObjectsPlan, PlanError> {
    let plan = match strategy {
        SharedObjectStrategy::Naive => naive::naive(items),
        SharedObjectStrategy::Equality => equality::equality(items),
        SharedObjectStrategy::GreedyInOrder => greedy_in_order::greedy_in_order(items),
        SharedObjectStrategy::GreedyByBreadth => greedy_by_breadth::greedy_by_breadth(items)?,
        SharedObjectStrategy::GreedyBySize => greedy_by_size::greedy_by_size(items),
        SharedObjectStrategy::GreedyBySizeImproved => {
            greedy_by_size_improved::greedy_by_size_improved(items)?
        }
        SharedObjectStrategy::MinCostFlow => min_cost_flow::min_cost_flow(items, deadline)?,
        SharedObjectStrategy::Best => {
            return Err(PlanError::Internal(
                "`best` is resolved before reaching a strategy",
            ))
        }
    };
    let mut cost = 0u64;
    for &s in &plan.object_sizes {
        cost = cost
            .checked_add(s)
            .ok_or_else(|| overflow("shared objects cost"))?;
    }
    Ok(plan)
}

/// Records in execution order (by `first_op`, ties in input order): the order TFLite's
/// in-order strategies assume their input is already in.
pub(crate) fn execution_order(items: &[Item]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| items[i].first_op);
    order
}

/// The lifetimes already assigned to one shared object: disjoint, keyed by `first_op`
/// (TFLite's `SharedObjectSchedule`), so suitability is two lookups instead of a scan.
#[derive(Default)]
pub(crate) struct Schedule(BTreeMap<usize, usize>);

impl Schedule {
    pub fn is_free(&self, item: &Item) -> bool {
        if let Some((&first, _)) = self.0.range(item.first_op..).next() {
            if first <= item.last_op {
                return false;
            }
        }
        if let Some((_, &last)) = self.0.range(..item.first_op).next_back() {
            if last >= item.first_op {
                return false;
            }
        }
        true
    }

    pub fn insert(&mut self, item: &Item) {
        self.0.insert(item.first_op, item.last_op);
    }
}
