//! `tirc compile --reorder=egg`: the `rewrite` pass (issue 8) before planning, and the
//! weights of the consts it made. A partitioned convolution or a distributed batch norm reads
//! a slice of an original weight ([`DerivedWeight`]); its data is cut from the weights the
//! original program was given (file or generated), never generated anew, so the executable
//! computes what the original computes up to summation order.

use tir_interp::{Data, Tensor, Weights};
use tir_passes::rewrite::{DerivedWeight, RewriteStats};

/// Adds the data of the consts the `rewrite` pass made, each cut from the weight it slices.
pub fn add_derived_weights(weights: &mut Weights, derived: &[DerivedWeight]) -> Result<(), String> {
    for d in derived {
        let t = derived_tensor(weights, d)?;
        weights.insert(d.name.clone(), t);
    }
    Ok(())
}

/// The rewrite pass's line on stderr.
pub fn report(stats: &RewriteStats, name: &str) {
    eprintln!(
        "{name}: reorder (egg): slab {} -> {} bytes (reordering alone {}), kept `{}`, {} sliced weights{}",
        stats.slab_before,
        stats.slab_after,
        stats.slab_reordered,
        stats.chosen,
        stats.derived.len(),
        if stats.budget_stopped {
            "; stopped by the time budget"
        } else {
            ""
        }
    );
}

/// `source[slices]`: each `(axis, start, end)` keeps a contiguous range of one axis
/// (row-major data).
pub fn derived_tensor(weights: &Weights, d: &DerivedWeight) -> Result<Tensor, String> {
    let src = weights
        .get(&d.source)
        .ok_or_else(|| format!("the sliced weight `{}` has no data", d.source))?;
    let mut ty = src.ty.clone();
    let mut data = src.data.clone();
    for &(axis, start, end) in &d.slices {
        if axis >= ty.shape.len() || start > end || end > ty.shape[axis] {
            return Err(format!(
                "slice {start}..{end} of axis {axis} is outside `{}` ({:?})",
                d.source, ty.shape
            ));
        }
        let outer: u64 = ty.shape[..axis].iter().product();
        let inner: u64 = ty.shape[axis + 1..].iter().product();
        let dim = ty.shape[axis];
        let ranges: Vec<std::ops::Range<usize>> = (0..outer)
            .map(|o| {
                let base = o * dim * inner;
                (base + start * inner) as usize..(base + end * inner) as usize
            })
            .collect();
        data = match data {
            Data::F32(v) => Data::F32(ranges.iter().flat_map(|r| v[r.clone()].to_vec()).collect()),
            other => {
                return Err(format!(
                    "`{}` is {:?}: only f32 weights are sliced",
                    d.source,
                    other.dtype()
                ))
            }
        };
        ty.shape[axis] = end - start;
    }
    Tensor::new(ty, data).ok_or_else(|| format!("the slice of `{}` is inconsistent", d.source))
}
