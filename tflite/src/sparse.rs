//! Sparse constants made dense at import.
//!
//! TFLite stores a sparse weight (the input of a DENSIFY operator, which the converter writes for
//! pruned models) in the TACO format of its schema: the tensor's dimensions are visited in
//! `traversal_order`, some of them split into blocks (`block_map` names the original dimension
//! each block dimension divides), and each visited level is either DENSE (all `dense_size`
//! indices) or SPARSE_CSR (the indices `array_indices[array_segments[p] .. array_segments[p + 1]]`
//! where `p` is the position reached at the level above). The buffer holds the values of the
//! visited leaves, in visiting order.
//!
//! This is the walk of TFLite's `FormatConverter::SparseToDense`
//! (tensorflow/lite/kernels/internal/utils/sparsity_format_converter.cc), written against a
//! model that may lie: every index, segment and count is checked, and a malformed tensor is an
//! error, never a panic or an unbounded loop.

/// One level of the traversal, as the schema's `DimensionMetadata` holds it.
#[derive(Clone, Debug)]
pub(crate) enum Level {
    Dense(usize),
    Csr {
        segments: Vec<usize>,
        indices: Vec<usize>,
    },
}

/// The sparse layout of a tensor of rank `shape.len()`.
#[derive(Clone, Debug)]
pub(crate) struct Sparsity {
    pub traversal_order: Vec<usize>,
    pub block_map: Vec<usize>,
    pub levels: Vec<Level>,
}

/// The most levels a layout may have (rank plus block dimensions); TFLite's tensors have rank
/// at most 6 and the converter blocks at most one dimension.
const MAX_LEVELS: usize = 16;

/// The dense row-major tensor of `shape` whose non-zero values `values` are laid out by
/// `sparsity`; positions no leaf reaches are zero.
pub(crate) fn densify<T: Copy + Default>(
    shape: &[u64],
    values: &[T],
    sparsity: &Sparsity,
) -> Result<Vec<T>, String> {
    let rank = shape.len();
    let Sparsity {
        traversal_order,
        block_map,
        levels,
    } = sparsity;
    let depth = rank + block_map.len();
    if levels.len() != depth || traversal_order.len() != depth || depth > MAX_LEVELS {
        return Err(format!(
            "sparsity: {} levels and a traversal order of {} for rank {rank} with {} block dimension(s)",
            levels.len(),
            traversal_order.len(),
            block_map.len()
        ));
    }
    // The original dimensions come first, in some order, then the block dimensions.
    let mut seen = vec![false; depth];
    for (i, &d) in traversal_order.iter().enumerate() {
        let ok = if i < rank {
            d < rank
        } else {
            d >= rank && d < depth
        };
        if !ok || std::mem::replace(&mut seen[d], true) {
            return Err(format!(
                "sparsity: traversal order {traversal_order:?} is not the original dimensions followed by the block dimensions"
            ));
        }
    }
    let mut blocked = vec![false; rank];
    for &d in block_map {
        if d >= rank || std::mem::replace(&mut blocked[d], true) {
            return Err(format!(
                "sparsity: bad block map {block_map:?} for rank {rank}"
            ));
        }
    }
    // A block dimension's size is its level's dense size.
    let mut block_size = vec![0usize; block_map.len()];
    for (level, &d) in traversal_order.iter().enumerate().skip(rank) {
        match levels[level] {
            Level::Dense(n) if n > 0 => block_size[d - rank] = n,
            _ => {
                return Err(format!(
                    "sparsity: block dimension {} is not dense with a positive size",
                    d - rank
                ))
            }
        }
    }
    let dims: Vec<usize> = shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| "sparsity: dimension too large".to_string()))
        .collect::<Result<_, _>>()?;
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or("sparsity: the dense tensor is too large")?;
    let mut walk = Walk {
        dims: &dims,
        traversal_order,
        block_map,
        block_size: &block_size,
        levels,
        values,
        next: 0,
        dense: vec![T::default(); n],
        indices: vec![0; depth],
        // Every step either consumes a value or an index, or moves through a dense level whose
        // subtree must end in values; anything beyond this many is a malformed layout.
        budget: 4 * (values.len() + index_count(levels)) + 1024,
    };
    walk.populate(0, 0)?;
    if walk.next != values.len() {
        return Err(format!(
            "sparsity: the layout visits {} values but the buffer holds {}",
            walk.next,
            values.len()
        ));
    }
    Ok(walk.dense)
}

fn index_count(levels: &[Level]) -> usize {
    levels
        .iter()
        .map(|l| match l {
            Level::Dense(_) => 0,
            Level::Csr { segments, indices } => segments.len() + indices.len(),
        })
        .sum()
}

struct Walk<'a, T> {
    dims: &'a [usize],
    traversal_order: &'a [usize],
    block_map: &'a [usize],
    block_size: &'a [usize],
    levels: &'a [Level],
    values: &'a [T],
    next: usize,
    dense: Vec<T>,
    /// The index reached at each level so far.
    indices: Vec<usize>,
    budget: usize,
}

impl<T: Copy> Walk<'_, T> {
    /// Visits level `level`, reached at position `prev` of the level above (the CSR segment to
    /// read).
    fn populate(&mut self, level: usize, prev: usize) -> Result<(), String> {
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or("sparsity: the layout visits more positions than its data can fill")?;
        if level == self.levels.len() {
            return self.leaf();
        }
        match &self.levels[level] {
            &Level::Dense(size) => {
                for i in 0..size {
                    self.indices[level] = i;
                    let pos = prev
                        .checked_mul(size)
                        .and_then(|p| p.checked_add(i))
                        .ok_or("sparsity: position overflow")?;
                    self.populate(level + 1, pos)?;
                }
            }
            Level::Csr { segments, indices } => {
                let (start, end) = match (segments.get(prev), segments.get(prev + 1)) {
                    (Some(&s), Some(&e)) if s <= e && e <= indices.len() => (s, e),
                    _ => {
                        return Err(format!(
                            "sparsity: level {level} has no valid segment {prev} ({} segment bounds, {} indices)",
                            segments.len(),
                            indices.len()
                        ))
                    }
                };
                for (i, &index) in indices.iter().enumerate().take(end).skip(start) {
                    self.indices[level] = index;
                    self.populate(level + 1, i)?;
                }
            }
        }
        Ok(())
    }

    /// Stores the next value at the original position the traversal indices name.
    fn leaf(&mut self) -> Result<(), String> {
        let rank = self.dims.len();
        let mut orig = vec![0usize; rank];
        for (i, &d) in self.traversal_order.iter().enumerate() {
            let idx = self.indices[i];
            if d < rank {
                orig[d] = idx;
            } else {
                let b = d - rank;
                let dim = self.block_map[b];
                orig[dim] = orig[dim]
                    .checked_mul(self.block_size[b])
                    .and_then(|o| o.checked_add(idx))
                    .ok_or("sparsity: index overflow")?;
            }
        }
        let mut flat = 0usize;
        for (&o, &d) in orig.iter().zip(self.dims) {
            if o >= d {
                return Err(format!(
                    "sparsity: a value lands at {orig:?}, outside the shape {:?}",
                    self.dims
                ));
            }
            flat = flat * d + o;
        }
        let v = *self.values.get(self.next).ok_or_else(|| {
            format!(
                "sparsity: the buffer holds only {} values",
                self.values.len()
            )
        })?;
        self.dense[flat] = v;
        self.next += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4×4 matrix, rows dense and columns CSR.
    #[test]
    fn csr_rows() {
        let dense = [6, 0, 9, 8, 0, 0, 0, 0, 5, 0, 0, 7, 0, 0, 0, 0];
        let s = Sparsity {
            traversal_order: vec![0, 1],
            block_map: vec![],
            levels: vec![
                Level::Dense(4),
                Level::Csr {
                    segments: vec![0, 3, 3, 5, 5],
                    indices: vec![0, 2, 3, 0, 3],
                },
            ],
        };
        assert_eq!(densify(&[4, 4], &[6, 9, 8, 5, 7], &s).unwrap(), dense);
    }

    /// A 4×4 matrix in 2×2 blocks: block rows dense, block columns CSR, each block dense and
    /// stored whole.
    #[test]
    fn blocks() {
        let dense = [1, 0, 2, 3, 0, 4, 0, 0, 0, 0, 5, 0, 0, 0, 0, 6];
        let s = Sparsity {
            traversal_order: vec![0, 1, 2, 3],
            block_map: vec![0, 1],
            levels: vec![
                Level::Dense(2),
                Level::Csr {
                    segments: vec![0, 2, 3],
                    indices: vec![0, 1, 1],
                },
                Level::Dense(2),
                Level::Dense(2),
            ],
        };
        let values = [1, 0, 0, 4, 2, 3, 0, 0, 5, 0, 0, 6];
        assert_eq!(densify(&[4, 4], &values, &s).unwrap(), dense);
    }

    /// A traversal that visits columns before rows fills the transpose's order.
    #[test]
    fn column_major_traversal() {
        let s = Sparsity {
            traversal_order: vec![1, 0],
            block_map: vec![],
            levels: vec![Level::Dense(3), Level::Dense(2)],
        };
        assert_eq!(
            densify(&[2, 3], &[1, 4, 2, 5, 3, 6], &s).unwrap(),
            [1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn malformed_layouts_are_errors() {
        let csr = |segments: Vec<usize>, indices: Vec<usize>| Sparsity {
            traversal_order: vec![0, 1],
            block_map: vec![],
            levels: vec![Level::Dense(2), Level::Csr { segments, indices }],
        };
        let cases = [
            (csr(vec![0, 1], vec![0]), vec![1.0], "segment 1"),
            (csr(vec![0, 2, 1], vec![0, 1]), vec![1.0; 2], "segment 1"),
            (csr(vec![0, 1, 5], vec![0, 1]), vec![1.0; 2], "segment 1"),
            (
                csr(vec![0, 1, 2], vec![0, 7]),
                vec![1.0; 2],
                "outside the shape",
            ),
            (
                csr(vec![0, 1, 2], vec![0, 1]),
                vec![1.0; 3],
                "visits 2 values",
            ),
            (csr(vec![0, 1, 2], vec![0, 1]), vec![1.0; 1], "holds only 1"),
            (
                Sparsity {
                    traversal_order: vec![0, 0],
                    block_map: vec![],
                    levels: vec![Level::Dense(2), Level::Dense(2)],
                },
                vec![1.0; 4],
                "traversal order",
            ),
            (
                Sparsity {
                    traversal_order: vec![0, 1],
                    block_map: vec![],
                    // Levels that never reach a leaf: no value ever stops the walk.
                    levels: vec![Level::Dense(usize::MAX), Level::Dense(0)],
                },
                vec![1.0; 4],
                "more positions",
            ),
            (
                Sparsity {
                    traversal_order: vec![0, 1, 2],
                    block_map: vec![5],
                    levels: vec![Level::Dense(2), Level::Dense(2), Level::Dense(1)],
                },
                vec![1.0; 4],
                "block map",
            ),
        ];
        for (s, values, want) in cases {
            let e = densify(&[2, 2], &values, &s).unwrap_err();
            assert!(e.contains(want), "{s:?}: {e}");
        }
    }
}
