//! The synthetic record sets of the planner benchmarks (issue 3): chains, wide fan-outs and
//! random DAG-like lifetimes, deterministic. Shared by `benches/planner.rs` and
//! `examples/greedy_scaling` through `#[path]`.
#![allow(dead_code)]

use tir_planner::UsageRecord;

/// SplitMix64: deterministic instances without a `rand` dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Tensor-like sizes: 64 B to 4 MiB, log-uniform.
    pub fn size(&mut self) -> u64 {
        let shift = 6 + self.below(17);
        (1 << shift) + self.below(1 << shift)
    }
}

pub fn record(size: u64, first_op: usize, last_op: usize) -> UsageRecord {
    UsageRecord {
        first_op,
        last_op,
        size,
    }
}

/// Each tensor consumed by the next operator only.
pub fn chain(n: usize) -> Vec<UsageRecord> {
    let mut rng = Rng(1);
    (0..n).map(|i| record(rng.size(), i, i + 1)).collect()
}

/// Inception-like blocks: one input fanned out to 8 branches of 3 ops each, joined by a
/// concat; branch outputs live until the concat.
pub fn fan_out(n: usize) -> Vec<UsageRecord> {
    let mut rng = Rng(2);
    let mut records = Vec::with_capacity(n);
    let mut op = 0;
    while records.len() < n {
        let input = op;
        let join = op + 1 + 8 * 3;
        records.push(record(rng.size(), input, input + 8 * 3));
        for branch in 0..8 {
            let start = input + 1 + branch * 3;
            records.push(record(rng.size(), start, start + 1));
            records.push(record(rng.size(), start + 1, start + 2));
            records.push(record(rng.size(), start + 2, join));
        }
        op = join;
    }
    records.truncate(n);
    records
}

/// Random starts, short lifetimes (mean ~8 ops) and 1% long-lived tensors (up to 1,000 ops).
/// With long lifetimes proportional to n instead, the tensors intersecting each long one grow
/// with n and every Alg. 3 variant is quadratic in total: greedy_by_size measured 0.39 s at
/// 100k and 39 s at 1M records with lengths up to n / 10.
pub fn random_lifetimes(n: usize) -> Vec<UsageRecord> {
    let mut rng = Rng(3);
    (0..n)
        .map(|_| {
            let first = rng.below(n as u64) as usize;
            let len = if rng.below(100) == 0 {
                rng.below(1_000)
            } else {
                rng.below(16)
            };
            record(rng.size(), first, first + len as usize)
        })
        .collect()
}
