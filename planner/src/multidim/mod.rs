//! Shared objects with multi-dimensional sizes: 2D and 3D textures, as TFLite's GPU memory
//! manager plans them (`TensorUsageRecord<uint2>` and `<uint3>`; see
//! `../shared/seeds/tflite-memory-management-walkthrough-zh.txt`).
//!
//! A texture is not a byte range: a tensor fits an object only when the object is at least as
//! large in *every* dimension, and objects are never laid end to end in one slab, so only the
//! shared-objects approach (paper §4) exists here, and only the strategies TFLite defines for
//! these sizes: `naive`, `equality` and `greedy_in_order` (`AssignObjectsToTensors` refuses
//! the others for `uint2`/`uint3` with "not supported with current tensor size type"), plus
//! `best` over those three. A plan's cost is the sum of its objects' volumes (area in 2D), in
//! elements.
//!
//! The lower bound is the paper's §4.1 bound taken on volumes, and it stays valid: at any
//! operator the i largest live tensors sit in i distinct objects, each covering one of them and
//! so at least as voluminous as the i-th largest; hence the i-th largest object volume is at
//! least the i-th positional maximum of the volumes, and the cost at least their sum. (TFLite
//! defines no bound for these sizes.) There is no offsets bound (max breadth): textures are
//! not laid in one slab.

mod equality;
mod greedy_in_order;

use crate::error::overflow;
use crate::{positional_maxima, Best, PlanError, SharedObjectStrategy, UsageRecord};

/// One tensor's lifetime and multi-dimensional size (TFLite `TensorUsageRecord<uint2>` for
/// `D = 2`, `<uint3>` for `D = 3`): `size[0]` is the width, then height, then depth, in
/// elements.
///
/// Invariant: `first_op <= last_op` (checked by every function taking records).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UsageRecordNd<const D: usize> {
    /// Index of the first operator that uses the tensor.
    pub first_op: usize,
    /// Index of the last operator that uses the tensor (inclusive).
    pub last_op: usize,
    /// Extent in each dimension, in elements.
    pub size: [u64; D],
}

/// A 2D texture's record (`w, h`).
pub type UsageRecord2d = UsageRecordNd<2>;
/// A 3D texture's record (`w, h, d`).
pub type UsageRecord3d = UsageRecordNd<3>;

impl<const D: usize> UsageRecordNd<D> {
    pub fn new(size: [u64; D], first_op: usize, last_op: usize) -> Self {
        debug_assert!(first_op <= last_op, "usage record with first_op > last_op");
        UsageRecordNd {
            first_op,
            last_op,
            size,
        }
    }
}

/// Each tensor's object, and each object's multi-dimensional size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedObjectsPlanNd<const D: usize> {
    /// `object_ids[i]` is the object of record `i`.
    pub object_ids: Vec<usize>,
    /// Each object's size: the component-wise maximum of its tensors' sizes.
    pub object_sizes: Vec<[u64; D]>,
}

impl<const D: usize> SharedObjectsPlanNd<D> {
    /// Sum of the objects' volumes (areas in 2D) in elements, the quantity TFLite's texture
    /// strategies reduce; `None` if it overflows u64 (strategies never return such a plan).
    pub fn cost(&self) -> Option<u64> {
        self.object_sizes
            .iter()
            .try_fold(0u64, |a, s| volume(s).and_then(|v| a.checked_add(v)))
    }
}

/// Product of the extents, `None` on overflow.
pub fn volume<const D: usize>(size: &[u64; D]) -> Option<u64> {
    size.iter().try_fold(1u64, |a, &e| a.checked_mul(e))
}

/// The strategies TFLite defines for multi-dimensional sizes, in the order `best` tries them.
pub const STRATEGIES_ND: [SharedObjectStrategy; 3] = [
    SharedObjectStrategy::Naive,
    SharedObjectStrategy::Equality,
    SharedObjectStrategy::GreedyInOrder,
];

/// Validated records: lifetimes ordered and every volume (and their sum, the naive cost)
/// within u64, so no strategy can overflow computing a cost.
fn validate<const D: usize>(records: &[UsageRecordNd<D>]) -> Result<(), PlanError> {
    let mut total = 0u64;
    for (record, r) in records.iter().enumerate() {
        if r.first_op > r.last_op {
            return Err(PlanError::InvalidLifetime {
                record,
                first_op: r.first_op,
                last_op: r.last_op,
            });
        }
        let v = volume(&r.size).ok_or_else(|| overflow("a tensor's volume"))?;
        total = total
            .checked_add(v)
            .ok_or_else(|| overflow("the sum of the tensors' volumes"))?;
    }
    Ok(())
}

/// Plans multi-dimensional shared objects with `naive`, `equality`, `greedy_in_order` or
/// `best` (the cheapest of the three; ties to the earlier in [`STRATEGIES_ND`]). Any other
/// strategy is [`PlanError::UnsupportedDimensions`].
///
/// ```
/// use tir_planner::multidim::{plan_shared_objects_nd, UsageRecord2d};
/// use tir_planner::SharedObjectStrategy;
///
/// // A 64x64 texture, then a 32x64 one that fits inside it once it is free, then a 128x8
/// // one that does not (too wide), all in a chain.
/// let records = [
///     UsageRecord2d::new([64, 64], 0, 1),
///     UsageRecord2d::new([32, 64], 2, 3),
///     UsageRecord2d::new([128, 8], 4, 5),
/// ];
/// let plan = plan_shared_objects_nd(&records, SharedObjectStrategy::GreedyInOrder)?;
/// assert_eq!(plan.object_ids, [0, 0, 1]);
/// assert_eq!(plan.object_sizes, [[64, 64], [128, 8]]);
/// assert_eq!(plan.cost(), Some(64 * 64 + 128 * 8));
/// # Ok::<(), tir_planner::PlanError>(())
/// ```
pub fn plan_shared_objects_nd<const D: usize>(
    records: &[UsageRecordNd<D>],
    strategy: SharedObjectStrategy,
) -> Result<SharedObjectsPlanNd<D>, PlanError> {
    if strategy == SharedObjectStrategy::Best {
        return best_shared_objects_nd(records).map(|b| b.plan);
    }
    validate(records)?;
    plan_validated(records, strategy)
}

fn plan_validated<const D: usize>(
    records: &[UsageRecordNd<D>],
    strategy: SharedObjectStrategy,
) -> Result<SharedObjectsPlanNd<D>, PlanError> {
    Ok(match strategy {
        SharedObjectStrategy::Naive => SharedObjectsPlanNd {
            object_ids: (0..records.len()).collect(),
            object_sizes: records.iter().map(|r| r.size).collect(),
        },
        SharedObjectStrategy::Equality => equality::equality(records),
        SharedObjectStrategy::GreedyInOrder => greedy_in_order::greedy_in_order(records),
        _ => {
            return Err(PlanError::UnsupportedDimensions {
                strategy: strategy.name(),
                dims: D,
            })
        }
    })
}

/// Runs every strategy of [`STRATEGIES_ND`] and keeps the cheapest plan (ties: the earlier).
pub fn best_shared_objects_nd<const D: usize>(
    records: &[UsageRecordNd<D>],
) -> Result<Best<SharedObjectStrategy, SharedObjectsPlanNd<D>>, PlanError> {
    validate(records)?;
    let mut best: Option<(SharedObjectStrategy, SharedObjectsPlanNd<D>, u64)> = None;
    for strategy in STRATEGIES_ND {
        let plan = plan_validated(records, strategy)?;
        // Object volumes are bounded by tensor volumes, whose sum `validate` bounded.
        let cost = plan.cost().ok_or_else(|| overflow("shared objects cost"))?;
        if best.as_ref().is_none_or(|(_, _, c)| cost < *c) {
            best = Some((strategy, plan, cost));
        }
    }
    let (strategy, plan, _) = best.ok_or(PlanError::Internal("no strategy ran"))?;
    Ok(Best {
        strategy,
        plan,
        skipped: Vec::new(),
    })
}

/// The paper's §4.1 lower bound on volumes (see the module comment): the sum of the
/// positional maxima of the tensors' volumes. No plan of multi-dimensional objects costs less.
pub fn lower_bound_nd<const D: usize>(records: &[UsageRecordNd<D>]) -> Result<u64, PlanError> {
    validate(records)?;
    let volumes: Vec<UsageRecord> = records
        .iter()
        .map(|r| UsageRecord {
            first_op: r.first_op,
            last_op: r.last_op,
            // `validate` checked every volume.
            size: volume(&r.size).unwrap_or(u64::MAX),
        })
        .collect();
    positional_maxima(&volumes, 1)?
        .into_iter()
        .try_fold(0u64, |a, m| a.checked_add(m))
        .ok_or_else(|| overflow("sum of positional maxima"))
}

/// Records in execution order (by `first_op`, ties in input order), the order TFLite's
/// in-order strategies expect their input in.
fn execution_order<const D: usize>(records: &[UsageRecordNd<D>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| records[i].first_op);
    order
}
