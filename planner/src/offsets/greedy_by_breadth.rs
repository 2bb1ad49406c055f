//! Greedy by Breadth for offsets (paper §5.3): the record order of Alg. 1 (operators by
//! breadth, their tensors by size) with the gap choice of Alg. 3. TFLite has no native
//! version; the paper reports it behind Greedy by Size except on MobileNet v2.

use super::placement::{place, Fit};
use crate::items::{Item, Timeline};
use crate::profile::breadth_order;
use crate::{OffsetsPlan, PlanError};

pub(crate) fn greedy_by_breadth(items: &[Item], align: u64) -> Result<OffsetsPlan, PlanError> {
    let timeline = Timeline::new(items);
    let spans = timeline.spans(items);
    let order = breadth_order(items, &spans, timeline.len())?;
    place(items, &order, Fit::Best, align)
}
