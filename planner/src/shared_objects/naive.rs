//! Naive: one shared object per tensor (paper §6's baseline, TFLite `NaiveAssignment`).

use crate::items::Item;
use crate::SharedObjectsPlan;

pub(crate) fn naive(items: &[Item]) -> SharedObjectsPlan {
    SharedObjectsPlan {
        object_ids: (0..items.len()).collect(),
        object_sizes: items.iter().map(|i| i.size).collect(),
    }
}
