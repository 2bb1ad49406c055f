//! Static memory planning, independent of any IR: usage records in, plans out.
//!
//! The planner is its own crate (issue 21) so that a runtime can plan its buffers without the
//! compiler: it depends on no IR, egg or petgraph (`cargo tree -p tir-planner` shows it, and
//! `.ci/run` checks it). `tir-passes` re-exports it as `tir_passes::planner`. See `record.rs`
//! for the input contract.
//!
//! Vocabulary and algorithms follow Pisarchyk & Lee, "Efficient Memory Management for Deep
//! Neural Net Inference": a *shared objects* plan gives each tensor a whole buffer (§4), an
//! *offsets* plan gives each tensor a range in one slab (§5). Every strategy is a pure function
//! of the records and the alignment; sizes are rounded up to the alignment before planning, so
//! every offset, object size and slab size is a multiple of it. [`checker`] validates plans
//! without sharing any code with the strategies. [`multidim`] plans shared objects with 2D/3D
//! sizes (GPU textures, TFLite's `uint2`/`uint3`).
//!
//! ```
//! use tir_planner::checker::check_offsets;
//! use tir_planner::{lower_bounds, plan_offsets, OffsetStrategy, UsageRecord};
//!
//! // Three tensors of a chain a -> b -> c: each lives from its producer to its consumer.
//! let records = [
//!     UsageRecord::new(4096, 0, 1),
//!     UsageRecord::new(1024, 1, 2),
//!     UsageRecord::new(4096, 2, 3),
//! ];
//! let strategy: OffsetStrategy = "greedy_by_size".parse()?;
//! let plan = plan_offsets(&records, strategy, 64)?;
//! // `a` and `c` never live at once, so they share bytes; `b` overlaps both.
//! assert_eq!(plan.total_size, 4096 + 1024);
//! assert_eq!(lower_bounds(&records, 64)?.offsets, plan.total_size);
//! // Every plan can be checked by code that shares nothing with the strategies.
//! assert!(check_offsets(&records, &plan, 64).is_ok());
//! # Ok::<(), tir_planner::PlanError>(())
//! ```

pub mod csv;
pub mod heapmap;
mod record;

mod align;
pub mod checker;
mod error;
mod exact;
mod items;
pub mod multidim;
mod offsets;
mod profile;
mod replan;
mod shared_objects;
mod strategy;

pub use align::{align_size, DEFAULT_ALIGNMENT};
pub use error::PlanError;
pub use exact::{
    exact_offsets, ExactOptions, ExactPlan, DEFAULT_EXACT_TIME_LIMIT, EXACT_MAX_COMPONENT,
};
pub use offsets::objects_to_offsets;
pub use profile::{
    lower_bounds, operator_breadths, operator_profiles, positional_maxima, LowerBounds,
    OperatorProfile, MAX_TABULATED_OPERATORS,
};
pub use record::UsageRecord;
pub use replan::{replan_offsets, Replanned};
use std::time::Instant;
pub use strategy::{OffsetStrategy, SharedObjectStrategy};

/// Above this many records, `Best` skips the strategies whose running time is quadratic or
/// worse ([`SharedObjectStrategy::is_quadratic`]) and says so in [`Best::skipped`].
pub const BEST_QUADRATIC_LIMIT: usize = 4096;

impl<S, P> Best<S, P> {
    /// Whether a deadline stopped some strategy ([`PlanError::TimeBudget`]): the plan is then
    /// the best of those that ran, an upper bound of what every strategy would give.
    pub fn stopped_by_time(&self) -> bool {
        self.skipped
            .iter()
            .any(|(_, e)| matches!(e, PlanError::TimeBudget { .. }))
    }
}

/// Each tensor's shared object, and each object's size (paper §4).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SharedObjectsPlan {
    /// `object_ids[i]` is the object of record `i`.
    pub object_ids: Vec<usize>,
    /// Aligned size of each object: at least the size of every tensor assigned to it.
    pub object_sizes: Vec<u64>,
}

impl SharedObjectsPlan {
    /// Total memory of the objects, the quantity the strategies minimise. Strategies only
    /// return plans whose cost fits in u64; for hand-made plans this saturates.
    pub fn cost(&self) -> u64 {
        self.object_sizes
            .iter()
            .fold(0u64, |a, &s| a.saturating_add(s))
    }
}

/// Each tensor's offset in one slab of `total_size` bytes (paper §5).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OffsetsPlan {
    /// `offsets[i]` is the byte offset of record `i`; a multiple of the alignment.
    pub offsets: Vec<u64>,
    /// Slab size: the largest `offset + aligned size`, a multiple of the alignment.
    pub total_size: u64,
}

/// The winner of a `Best` run, and the strategies that could not take part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Best<S, P> {
    pub strategy: S,
    pub plan: P,
    /// Strategies skipped or failed, with the reason (e.g. [`PlanError::TooLarge`]). Those
    /// not run because an earlier plan met the offsets lower bound are not listed.
    pub skipped: Vec<(S, PlanError)>,
}

/// Plans shared objects for `records` with sizes rounded up to `align`.
pub fn plan_shared_objects(
    records: &[UsageRecord],
    strategy: SharedObjectStrategy,
    align: u64,
) -> Result<SharedObjectsPlan, PlanError> {
    if strategy == SharedObjectStrategy::Best {
        return best_shared_objects(records, align).map(|best| best.plan);
    }
    let items = items::prepare(records, align)?;
    shared_objects::plan(&items, strategy)
}

/// Plans offsets for `records` with sizes and offsets aligned to `align`.
pub fn plan_offsets(
    records: &[UsageRecord],
    strategy: OffsetStrategy,
    align: u64,
) -> Result<OffsetsPlan, PlanError> {
    match strategy {
        OffsetStrategy::Best => best_offsets(records, align).map(|best| best.plan),
        OffsetStrategy::Exact => exact::exact_plan(records, align),
        OffsetStrategy::ObjectsToOffsets(s) => {
            offsets::objects_to_offsets(&plan_shared_objects(records, s, align)?)
        }
        _ => {
            let items = items::prepare(records, align)?;
            offsets::plan(&items, strategy, align)
        }
    }
}

fn too_large_for_best(name: &'static str, records: usize) -> PlanError {
    PlanError::TooLarge {
        strategy: name,
        records,
        reason: "quadratic strategy skipped by `best` above BEST_QUADRATIC_LIMIT records",
    }
}

/// Runs every shared-object strategy and keeps the cheapest plan (ties: earliest in `ALL`).
pub fn best_shared_objects(
    records: &[UsageRecord],
    align: u64,
) -> Result<Best<SharedObjectStrategy, SharedObjectsPlan>, PlanError> {
    let items = items::prepare(records, align)?;
    let mut best: Option<(SharedObjectStrategy, SharedObjectsPlan)> = None;
    let mut skipped = Vec::new();
    for strategy in SharedObjectStrategy::ALL {
        if strategy.is_quadratic() && records.len() > BEST_QUADRATIC_LIMIT {
            skipped.push((strategy, too_large_for_best(strategy.name(), records.len())));
            continue;
        }
        match shared_objects::plan(&items, strategy) {
            Ok(plan) => {
                if best.as_ref().is_none_or(|(_, b)| plan.cost() < b.cost()) {
                    best = Some((strategy, plan));
                }
            }
            Err(e) => skipped.push((strategy, e)),
        }
    }
    match best {
        Some((strategy, plan)) => Ok(Best {
            strategy,
            plan,
            skipped,
        }),
        None => Err(skipped
            .into_iter()
            .next()
            .map(|(_, e)| e)
            .unwrap_or(PlanError::Internal("no shared-object strategy ran"))),
    }
}

/// Runs every offset strategy and keeps the smallest slab (ties: earliest in `ALL`).
pub fn best_offsets(
    records: &[UsageRecord],
    align: u64,
) -> Result<Best<OffsetStrategy, OffsetsPlan>, PlanError> {
    best_offsets_within(records, align, None)
}

/// [`best_offsets`] within a deadline, for callers whose time budget covers planning (the
/// order search's judge, issue 8). The strategies that are not quadratic run first, every one
/// of them whatever the time: they take milliseconds at zoo sizes and always give a plan. The
/// quadratic ones ([`OffsetStrategy::is_quadratic`]) follow, each only if the deadline has not
/// passed, and min-cost flow gives up at it. A strategy the deadline stopped is listed in
/// `skipped` with [`PlanError::TimeBudget`] ([`Best::stopped_by_time`]); the plan is then an
/// upper bound of `best_offsets`'s. Without a deadline, or when none was reached, the result is
/// exactly what running every strategy in `ALL` order gives: ties still go to the earliest.
pub fn best_offsets_within(
    records: &[UsageRecord],
    align: u64,
    deadline: Option<Instant>,
) -> Result<Best<OffsetStrategy, OffsetsPlan>, PlanError> {
    let items = items::prepare(records, align)?;
    // No offsets plan is smaller than the largest operator breadth (paper §5.1). Once a plan
    // meets it, a strategy later in `ALL` could at best tie, and ties go to the earlier one, so
    // it need not run: on the zoo's reordered programs a fast strategy usually meets the bound,
    // and min-cost flow (seconds) is then never started. An overflowing breadth gives no bound;
    // the strategies then report the overflow themselves.
    let bound = {
        let (timeline, spans) = items::Timeline::with_spans(&items);
        profile::breadths_at_points(&items, &spans, timeline.len())
            .ok()
            .map(|b| b.into_iter().max().unwrap_or(0))
    };
    let mut best: Option<(usize, OffsetStrategy, OffsetsPlan)> = None;
    let mut skipped = Vec::new();
    let (fast, quadratic): (Vec<_>, Vec<_>) = OffsetStrategy::ALL
        .into_iter()
        .enumerate()
        .partition(|(_, s)| !s.is_quadratic());
    for (rank, strategy) in fast.into_iter().chain(quadratic) {
        let at_bound = |(r, _, b): &(usize, OffsetStrategy, OffsetsPlan)| {
            Some(b.total_size) == bound && *r < rank
        };
        if best.as_ref().is_some_and(at_bound) {
            continue;
        }
        if strategy.is_quadratic() {
            if records.len() > BEST_QUADRATIC_LIMIT {
                skipped.push((strategy, too_large_for_best(strategy.name(), records.len())));
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let e = PlanError::TimeBudget {
                    strategy: strategy.name(),
                };
                skipped.push((strategy, e));
                continue;
            }
        }
        let result = match strategy {
            OffsetStrategy::ObjectsToOffsets(s) => shared_objects::plan_until(&items, s, deadline)
                .and_then(|p| offsets::objects_to_offsets(&p)),
            _ => offsets::plan(&items, strategy, align),
        };
        match result {
            Ok(plan) => {
                let key = (plan.total_size, rank);
                if best
                    .as_ref()
                    .is_none_or(|(r, _, b)| key < (b.total_size, *r))
                {
                    best = Some((rank, strategy, plan));
                }
            }
            // Min-cost flow names itself; the offsets strategy is what `skipped` lists.
            Err(PlanError::TimeBudget { .. }) => skipped.push((
                strategy,
                PlanError::TimeBudget {
                    strategy: strategy.name(),
                },
            )),
            Err(e) => skipped.push((strategy, e)),
        }
    }
    match best {
        Some((_, strategy, plan)) => Ok(Best {
            strategy,
            plan,
            skipped,
        }),
        None => Err(skipped
            .into_iter()
            .next()
            .map(|(_, e)| e)
            .unwrap_or(PlanError::Internal("no offset strategy ran"))),
    }
}
