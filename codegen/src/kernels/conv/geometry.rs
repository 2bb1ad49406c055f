//! What the convolution kernels share: a convolution's constant extents, and the interval
//! of rows or columns whose every tap lies inside the input (the kernels peel the borders
//! around it instead of testing each element).

use tir_ir::Activation;

/// A convolution's constant extents (NCHW, weight `[M, C/groups, KH, KW]`).
#[derive(Clone, Copy)]
pub struct Conv {
    pub n: i64,
    pub c: i64,
    pub h: i64,
    pub wi: i64,
    pub m: i64,
    pub groups: i64,
    pub kh: i64,
    pub kw: i64,
    pub oh: i64,
    pub ow: i64,
    pub sh: i64,
    pub sw: i64,
    pub dh: i64,
    pub dw: i64,
    pub pt: i64,
    pub pl: i64,
    pub act: Option<Activation>,
}

/// The first and one-past-last index in `0..n` for which `ok` holds, assuming those form an
/// interval (empty as `(0, 0)`).
pub(super) fn interval(n: i64, ok: impl Fn(i64) -> bool) -> (i64, i64) {
    match (0..n).find(|&i| ok(i)) {
        Some(a) => (a, (a..n).take_while(|&i| ok(i)).last().map_or(a, |b| b + 1)),
        None => (0, 0),
    }
}
