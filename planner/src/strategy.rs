//! The closed sets of strategies, named as in the paper and the codebases they come from.

use std::fmt;
use std::str::FromStr;

use super::PlanError;

/// How to assign each tensor a whole shared object (paper §4; GPU textures).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedObjectStrategy {
    /// One object per tensor: the baseline every other strategy is compared with.
    Naive,
    /// Reuse a free object of exactly the tensor's size (TFLite `EqualityAssignment`).
    Equality,
    /// In execution order, reuse the free object closest in size (Lee et al. 2019, TFLite
    /// `GreedyInOrderAssignment`).
    GreedyInOrder,
    /// Paper Alg. 1: operators by breadth, their tensors by size (TFLite
    /// `GreedyByBreadthAssignment`).
    GreedyByBreadth,
    /// Paper Alg. 2: tensors by size, smallest suitable object.
    GreedyBySize,
    /// Paper §4.4: stages by positional maximum, smallest-gap pairing (TFLite
    /// `GreedyBySizeDistPriorityAssignment`, which TFLite calls GREEDY_BY_SIZE).
    GreedyBySizeImproved,
    /// Lee et al. 2019 min-cost flow (TFLite `MinCostFlowAssignment`).
    MinCostFlow,
    /// Every strategy in [`SharedObjectStrategy::ALL`], keeping the cheapest plan.
    Best,
}

impl SharedObjectStrategy {
    /// Every concrete strategy, in the order `Best` tries them (ties go to the earlier one).
    /// `Best` itself is not listed.
    pub const ALL: [SharedObjectStrategy; 7] = [
        SharedObjectStrategy::Naive,
        SharedObjectStrategy::Equality,
        SharedObjectStrategy::GreedyInOrder,
        SharedObjectStrategy::GreedyByBreadth,
        SharedObjectStrategy::GreedyBySize,
        SharedObjectStrategy::GreedyBySizeImproved,
        SharedObjectStrategy::MinCostFlow,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SharedObjectStrategy::Naive => "naive",
            SharedObjectStrategy::Equality => "equality",
            SharedObjectStrategy::GreedyInOrder => "greedy_in_order",
            SharedObjectStrategy::GreedyByBreadth => "greedy_by_breadth",
            SharedObjectStrategy::GreedyBySize => "greedy_by_size",
            SharedObjectStrategy::GreedyBySizeImproved => "greedy_by_size_improved",
            SharedObjectStrategy::MinCostFlow => "min_cost_flow",
            SharedObjectStrategy::Best => "best",
        }
    }

    /// The name of the offsets strategy that lays this strategy's objects end to end.
    pub fn objects_name(self) -> &'static str {
        match self {
            SharedObjectStrategy::Naive => "objects:naive",
            SharedObjectStrategy::Equality => "objects:equality",
            SharedObjectStrategy::GreedyInOrder => "objects:greedy_in_order",
            SharedObjectStrategy::GreedyByBreadth => "objects:greedy_by_breadth",
            SharedObjectStrategy::GreedyBySize => "objects:greedy_by_size",
            SharedObjectStrategy::GreedyBySizeImproved => "objects:greedy_by_size_improved",
            SharedObjectStrategy::MinCostFlow => "objects:min_cost_flow",
            SharedObjectStrategy::Best => "objects:best",
        }
    }

    /// Whether the running time grows quadratically (or worse) in the number of records in
    /// the usual case, not just in a worst case; `Best` skips these on large inputs.
    pub fn is_quadratic(self) -> bool {
        matches!(
            self,
            SharedObjectStrategy::GreedyBySizeImproved
                | SharedObjectStrategy::MinCostFlow
                | SharedObjectStrategy::Best
        )
    }
}

/// How to give each tensor an offset in one slab (paper §5; CPU memory, GPU buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OffsetStrategy {
    /// Bump allocation: every tensor its own range, in input order.
    Naive,
    /// Paper Alg. 3: tensors by size, best-fitting gap (TFLite `GreedyBySizeAssignment`).
    GreedyBySize,
    /// Paper §5.3: operators by breadth, their tensors by size, best-fitting gap.
    GreedyByBreadth,
    /// Burke et al.'s best-fit strip packing as used by Sekiyama et al. 2018.
    StripPackingBestFit,
    /// TFLite Micro's `GreedyMemoryPlanner`: tensors by size, first gap that fits.
    FirstFit,
    /// Longest-lived first, then by size, best-fitting gap (the temporal order of XLA's
    /// heap simulator, PyTorch's GREEDY_BY_LONGEST_AND_SIZE).
    GreedyByLifetime,
    /// Gergov's algorithm as the memory-planning thesis describes it: a skyline solution `α′`,
    /// then Best Fit in increasing `α′` (see `offsets/gergov.rs` for what was chosen).
    Gergov,
    /// A shared-objects plan with its objects laid end to end in id order (TFLite
    /// `ObjectsToOffsets`).
    ObjectsToOffsets(SharedObjectStrategy),
    /// Every strategy in [`OffsetStrategy::ALL`], keeping the smallest slab.
    Best,
    /// `Best`'s plan improved by an anytime exact search that proves optimality when it can
    /// (MiniMalloc, Moffitt ASPLOS 2023; see `exact.rs`). Not in `ALL`: it is expensive.
    Exact,
}

impl OffsetStrategy {
    /// Every concrete strategy, in the order `Best` tries them (ties go to the earlier one).
    /// `Best` and `objects:best` are not listed.
    pub const ALL: [OffsetStrategy; 14] = [
        OffsetStrategy::Naive,
        OffsetStrategy::GreedyBySize,
        OffsetStrategy::GreedyByBreadth,
        OffsetStrategy::StripPackingBestFit,
        OffsetStrategy::FirstFit,
        OffsetStrategy::GreedyByLifetime,
        OffsetStrategy::Gergov,
        OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::Naive),
        OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::Equality),
        OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::GreedyInOrder),
        OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::GreedyByBreadth),
        OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::GreedyBySize),
        OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::GreedyBySizeImproved),
        OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::MinCostFlow),
    ];

    pub fn name(self) -> &'static str {
        match self {
            OffsetStrategy::Naive => "naive",
            OffsetStrategy::GreedyBySize => "greedy_by_size",
            OffsetStrategy::GreedyByBreadth => "greedy_by_breadth",
            OffsetStrategy::StripPackingBestFit => "strip_packing_best_fit",
            OffsetStrategy::FirstFit => "first_fit",
            OffsetStrategy::GreedyByLifetime => "greedy_by_lifetime",
            OffsetStrategy::Gergov => "gergov",
            OffsetStrategy::ObjectsToOffsets(s) => s.objects_name(),
            OffsetStrategy::Best => "best",
            OffsetStrategy::Exact => "exact",
        }
    }

    /// See [`SharedObjectStrategy::is_quadratic`].
    pub fn is_quadratic(self) -> bool {
        match self {
            OffsetStrategy::StripPackingBestFit | OffsetStrategy::Best | OffsetStrategy::Exact => {
                true
            }
            OffsetStrategy::ObjectsToOffsets(s) => s.is_quadratic(),
            _ => false,
        }
    }
}

impl SharedObjectStrategy {
    /// Every name `from_str` accepts: the concrete strategies, then `best`.
    pub fn names() -> Vec<&'static str> {
        Self::ALL
            .iter()
            .chain([&Self::Best])
            .map(|k| k.name())
            .collect()
    }
}

impl OffsetStrategy {
    /// Every name `from_str` accepts: the concrete strategies, `objects:best`, `best`, then
    /// `exact`.
    pub fn names() -> Vec<&'static str> {
        Self::every().iter().map(|k| k.name()).collect()
    }

    fn every() -> Vec<OffsetStrategy> {
        let mut all = Self::ALL.to_vec();
        all.push(OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::Best));
        all.push(OffsetStrategy::Best);
        all.push(OffsetStrategy::Exact);
        all
    }
}

impl FromStr for SharedObjectStrategy {
    type Err = PlanError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .chain([&Self::Best])
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| PlanError::UnknownStrategy {
                name: s.to_string(),
                expected: Self::names().join(", "),
            })
    }
}

impl FromStr for OffsetStrategy {
    type Err = PlanError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::every()
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| PlanError::UnknownStrategy {
                name: s.to_string(),
                expected: Self::names().join(", "),
            })
    }
}

impl fmt::Display for SharedObjectStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for OffsetStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
