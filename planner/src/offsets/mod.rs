//! Offset strategies (paper §5): each tensor gets a range in one slab.

mod first_fit;
mod gergov;
mod greedy_by_breadth;
mod greedy_by_lifetime;
mod greedy_by_size;
mod naive;
mod objects_to_offsets;
pub(crate) mod placement;
mod strip_packing;

pub use objects_to_offsets::objects_to_offsets;

use super::items::Item;
use super::{OffsetStrategy, OffsetsPlan, PlanError};

pub(crate) fn plan(
    items: &[Item],
    strategy: OffsetStrategy,
    align: u64,
) -> Result<OffsetsPlan, PlanError> {
    match strategy {
        OffsetStrategy::Naive => naive::naive(items),
        OffsetStrategy::GreedyBySize => greedy_by_size::greedy_by_size(items, align),
        OffsetStrategy::GreedyByBreadth => greedy_by_breadth::greedy_by_breadth(items, align),
        OffsetStrategy::StripPackingBestFit => strip_packing::strip_packing_best_fit(items),
        OffsetStrategy::FirstFit => first_fit::first_fit(items, align),
        OffsetStrategy::GreedyByLifetime => greedy_by_lifetime::greedy_by_lifetime(items, align),
        OffsetStrategy::Gergov => gergov::gergov(items, align),
        OffsetStrategy::ObjectsToOffsets(_) | OffsetStrategy::Best | OffsetStrategy::Exact => Err(
            PlanError::Internal("composite offset strategies are resolved by the caller"),
        ),
    }
}
