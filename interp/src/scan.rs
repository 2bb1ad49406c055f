//! The reference kernels that walk each line along one axis: `cumsum` (a running sum) and
//! `top_k` (a selection), for every element type they take. Both are the formulas of
//! `docs/ir.md` with the loops written out; the generated kernels must give the same bits.

use std::cmp::Ordering;

/// A tensor's lines along `ax`: `(outer, n, inner)`, element `(o, j, i)` at
/// `o * n * inner + j * inner + i`.
pub fn lines(shape: &[usize], ax: usize) -> (usize, usize, usize) {
    (
        shape[..ax].iter().product(),
        shape[ax],
        shape[ax + 1..].iter().product(),
    )
}

/// The running sum of every line along `ax`, summed sequentially with `add` in the order the
/// line is walked (from its end with `reverse`): `y[first] = x[first]` and each next element
/// `y[j] = y[prev] + x[j]`; with `exclusive` the sum stops before `x[j]`, so `y[first]` is
/// `zero`.
pub fn cumsum<T: Copy>(
    x: &[T],
    shape: &[usize],
    ax: usize,
    exclusive: bool,
    reverse: bool,
    zero: T,
    add: impl Fn(T, T) -> T,
) -> Vec<T> {
    let (outer, n, inner) = lines(shape, ax);
    let mut y = vec![zero; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * n * inner + j * inner + i;
            let mut acc: Option<T> = None;
            for step in 0..n {
                let j = if reverse { n - 1 - step } else { step };
                let next = match acc {
                    None => x[at(j)],
                    Some(a) => add(a, x[at(j)]),
                };
                y[at(j)] = if exclusive { acc.unwrap_or(zero) } else { next };
                acc = Some(next);
            }
        }
    }
    y
}

/// The order `top_k` ranks floats by, ascending: numbers as IEEE compares them (`-0 == +0`),
/// every NaN above every number (NumPy's sort order).
pub fn float_order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// The `k` best elements of every line along `ax` and their indices along it, best first:
/// the largest (`largest`) or smallest by `order`, equal elements by lower index first (a
/// stable sort of the line's indices). Returns `(values, indices)` in the result's shape
/// (`shape` with `k` at `ax`).
pub fn top_k<T: Copy>(
    x: &[T],
    shape: &[usize],
    ax: usize,
    k: usize,
    largest: bool,
    order: impl Fn(T, T) -> Ordering,
) -> (Vec<T>, Vec<i64>) {
    let (outer, n, inner) = lines(shape, ax);
    let mut values = Vec::with_capacity(outer * k * inner);
    let mut indices = Vec::with_capacity(outer * k * inner);
    // Filled in result order (o, t, i): gather per line, then place.
    let mut chosen = vec![0usize; outer * k * inner];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * n * inner + j * inner + i;
            let mut line: Vec<usize> = (0..n).collect();
            // `sort_by` is stable: equal elements keep their index order.
            line.sort_by(|&a, &b| {
                let c = order(x[at(a)], x[at(b)]);
                if largest {
                    c.reverse()
                } else {
                    c
                }
            });
            for (t, &j) in line.iter().take(k).enumerate() {
                chosen[o * k * inner + t * inner + i] = j;
            }
        }
    }
    for (p, &j) in chosen.iter().enumerate() {
        let (o, i) = (p / (k * inner), p % inner);
        values.push(x[o * n * inner + j * inner + i]);
        indices.push(j as i64);
    }
    (values, indices)
}
