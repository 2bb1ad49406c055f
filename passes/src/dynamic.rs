//! `reorder` and `rewrite` on a dynamic function (symbolic dims, no values): one program for
//! every shape, judged at a few shapes.
//!
//! Any topological order is valid at every shape, so the question is only the judge. A
//! dynamic function is judged at a set of [`JudgeShapes`]: the bounds when the caller has them
//! (`--dim-max`: the bounded plan is made there), else [`sample_shapes`] (every free dim at 8,
//! 64 and 512, and, for two or three dims, every corner of {8, 512}, each kept when the
//! model's run-time checks accept it). At each shape the function is specialized
//! (`tir_ir::specialize`, the same op ids and layout) and planned by the policy's judge
//! (`plan_function`, checked by the independent checker). The rule:
//!
//! - a candidate (an order, or a rewritten program in its order) is **admissible** when at
//!   every shape its slab is at most the input order's slab there, so "never a larger slab than
//!   the input order" holds at every judged shape;
//! - among the admissible ones, the pass keeps the smallest mean of `slab / input slab` over
//!   the shapes (every shape counts alike, whatever its size); ties keep the earlier
//!   candidate, the input order first.
//!
//! The candidates of `reorder` are the pass's own choice at each shape (the static pass on the
//! function specialized there, which keeps its order only when it plans no larger there).
//! `rewrite` runs the static pass at the largest shape, and its program is a candidate only
//! when it is **shape-generic** ([`generalize`]): with the parameters' symbolic types put
//! back, it verifies symbolically, adds no run-time check the input does not have, and every
//! value it kept from the input has the input's symbolic type, so no rule used an extent
//! that is only true at that shape. The rewritten program and the input program are each
//! reordered by the rule above, then judged against the input order.

use crate::plan::{plan_function, Effort, PlanPolicy};
use crate::reorder::{self, Budget, ReorderError, ReorderOptions, Search};
use crate::rewrite::{self, DerivedWeight, RewriteOptions, JUDGE_FULL_LIMIT};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use tir_ir::specialize::module_symbols;
use tir_ir::{Bindings, Function, Module};

/// The values every free dim takes in [`sample_shapes`]: small, medium and large, powers of
/// two (sequence lengths and image sizes are usually multiples of 8).
pub const SAMPLE_VALUES: [u64; 3] = [8, 64, 512];

/// Where a dynamic function is judged.
#[derive(Clone, Debug, PartialEq)]
pub enum JudgeShapes {
    /// `--dim-max`: the bounded plan's shape (every dim at its bound or pinned value).
    Bounds(Bindings),
    /// No bounds: [`sample_shapes`], or the caller's own.
    Samples(Vec<Bindings>),
}

impl JudgeShapes {
    pub fn shapes(&self) -> Vec<Bindings> {
        match self {
            JudgeShapes::Bounds(b) => vec![b.clone()],
            JudgeShapes::Samples(s) => s.clone(),
        }
    }
}

/// `batch=8, seq=64`.
pub fn shape_name(b: &Bindings) -> String {
    let mut s = String::new();
    for (i, (n, v)) in b.iter().enumerate() {
        let _ = write!(s, "{}{n}={v}", if i > 0 { "," } else { "" });
    }
    s
}

/// The sample shapes of a dynamic module (see the module doc), with `pinned` dims at their
/// values: every free dim at each of [`SAMPLE_VALUES`], then, for two or three free dims, the
/// mixed corners of {8, 512}. A shape the model's run-time checks refuse is left out (a
/// reshape may need a product, a window a minimum size).
pub fn sample_shapes(module: &Module, pinned: &Bindings) -> Vec<Bindings> {
    let free: Vec<String> = module_symbols(module)
        .into_iter()
        .filter(|s| !pinned.contains_key(s))
        .collect();
    let at = |values: &[u64]| -> Bindings {
        let mut b = pinned.clone();
        for (s, &v) in free.iter().zip(values) {
            b.insert(s.clone(), v);
        }
        b
    };
    let mut shapes: Vec<Bindings> = SAMPLE_VALUES
        .iter()
        .map(|&v| at(&vec![v; free.len()]))
        .collect();
    if (2..=3).contains(&free.len()) {
        let (lo, hi) = (SAMPLE_VALUES[0], SAMPLE_VALUES[SAMPLE_VALUES.len() - 1]);
        for mask in 1..(1u32 << free.len()) - 1 {
            let values: Vec<u64> = (0..free.len())
                .map(|i| if mask & (1 << i) != 0 { hi } else { lo })
                .collect();
            shapes.push(at(&values));
        }
    }
    shapes.dedup();
    shapes.retain(|b| tir_ir::specialize(module, b).is_ok());
    shapes
}

/// Why a dynamic function could not be reordered or rewritten.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DynamicError {
    #[error("no shape to judge at")]
    NoShapes,
    #[error("at {shape}: {message}")]
    Specialize { shape: String, message: String },
    #[error("at {shape}: {error}")]
    Reorder { shape: String, error: ReorderError },
    #[error("at {shape}: {message}")]
    Rewrite { shape: String, message: String },
    #[error("at {shape}: planning: {message}")]
    Plan { shape: String, message: String },
}

/// `func` (one function of a dynamic module) at `b`: the static function `tir_ir::specialize`
/// makes, with the same op ids and layout.
pub fn specialize_function(func: &Function, b: &Bindings) -> Result<Function, DynamicError> {
    let mut m = Module::new("judge");
    m.funcs.push(func.clone());
    let fail = |message: String| DynamicError::Specialize {
        shape: shape_name(b),
        message,
    };
    let mut m = tir_ir::specialize(&m, b).map_err(|es| {
        fail(
            es.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    m.funcs.pop().ok_or_else(|| fail("no function".into()))
}

/// One judged shape: the input order's slab and the kept program's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeSlab {
    pub shape: Bindings,
    pub before: u64,
    pub after: u64,
}

/// What `reorder` or `rewrite` did on a dynamic function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynamicStats {
    /// The kept candidate: `input`, `reordered`, `rewritten`.
    pub kept: &'static str,
    /// Each shape judged at, in order.
    pub shapes: Vec<ShapeSlab>,
    /// Candidates refused because they planned larger than the input order at some shape.
    pub refused_larger: usize,
    /// Why the rewritten program was not a candidate (not shape-generic), if it was not.
    pub not_generic: Option<String>,
    /// The sliced weights of the kept program (empty unless `rewritten`).
    pub derived: Vec<DerivedWeight>,
    pub time: Duration,
}

impl DynamicStats {
    /// `(name, value)` pairs for `--stats`.
    pub fn items(&self) -> Vec<(&'static str, String)> {
        let mut items = vec![("kept", self.kept.to_string())];
        let per: Vec<String> = self
            .shapes
            .iter()
            .map(|s| format!("{}: {} -> {}", shape_name(&s.shape), s.before, s.after))
            .collect();
        items.push(("slab bytes at", per.join("; ")));
        if self.refused_larger > 0 {
            items.push((
                "refused (larger at some shape)",
                self.refused_larger.to_string(),
            ));
        }
        if let Some(why) = &self.not_generic {
            items.push(("rewrite not shape-generic", why.clone()));
        }
        if !self.derived.is_empty() {
            items.push(("sliced weights", self.derived.len().to_string()));
        }
        items
    }
}

/// The judge's slab of a dynamic function (as laid out) at each shape. Every candidate and
/// the input are judged with the same effort: compile's plan, without the quadratic offsets
/// strategies above [`JUDGE_FULL_LIMIT`] buffers (as the rewrite pass judges).
fn slabs_at(
    func: &Function,
    shapes: &[Bindings],
    policy: &PlanPolicy,
) -> Result<Vec<u64>, DynamicError> {
    let judge = policy.with_effort(Effort::FastAbove(JUDGE_FULL_LIMIT));
    shapes
        .iter()
        .map(|b| {
            let f = specialize_function(func, b)?;
            plan_function(&f, &judge)
                .map(|p| p.slab())
                .map_err(|e| DynamicError::Plan {
                    shape: shape_name(b),
                    message: e.to_string(),
                })
        })
        .collect()
}

/// The rule of the module doc: the index of the admissible candidate with the smallest mean
/// relative slab, `None` when no candidate is better than the input order; and how many were
/// refused for planning larger at some shape.
fn choose(input: &[u64], candidates: &[Vec<u64>]) -> (Option<usize>, usize) {
    let rel = |c: &[u64]| -> f64 {
        c.iter()
            .zip(input)
            .map(|(&a, &b)| if b == 0 { 1.0 } else { a as f64 / b as f64 })
            .sum::<f64>()
            / input.len().max(1) as f64
    };
    let mut best: Option<(usize, f64)> = None;
    let mut refused = 0;
    let input_score = rel(input);
    for (i, c) in candidates.iter().enumerate() {
        if c.iter().zip(input).any(|(a, b)| a > b) {
            refused += 1;
            continue;
        }
        let score = rel(c);
        let to_beat = best.map_or(input_score, |b| b.1);
        if score < to_beat {
            best = Some((i, score));
        }
    }
    (best.map(|b| b.0), refused)
}

/// The `reorder` pass on a dynamic function, judged at `shapes` (see the module doc).
pub fn reorder_dynamic(
    func: &mut Function,
    opts: &ReorderOptions,
    shapes: &[Bindings],
) -> Result<DynamicStats, DynamicError> {
    let start = Instant::now();
    if shapes.is_empty() {
        return Err(DynamicError::NoShapes);
    }
    let input = slabs_at(func, shapes, &opts.policy)?;
    let (layouts, slabs) = reordered_candidates(func, opts, shapes, opts.budget.time)?;
    let (pick, refused_larger) = choose(&input, &slabs);
    let after = match pick {
        Some(i) => {
            func.layout = layouts[i].clone();
            slabs[i].clone()
        }
        None => input.clone(),
    };
    Ok(DynamicStats {
        kept: if pick.is_some() { "reordered" } else { "input" },
        shapes: per_shape(shapes, &input, &after),
        refused_larger,
        not_generic: None,
        derived: Vec::new(),
        time: start.elapsed(),
    })
}

fn per_shape(shapes: &[Bindings], before: &[u64], after: &[u64]) -> Vec<ShapeSlab> {
    shapes
        .iter()
        .zip(before.iter().zip(after))
        .map(|(s, (&b, &a))| ShapeSlab {
            shape: s.clone(),
            before: b,
            after: a,
        })
        .collect()
}

/// The static pass's order at each shape (each within an equal share of `time`), distinct
/// and different from the input's, with their slabs at every shape.
#[allow(clippy::type_complexity)]
fn reordered_candidates(
    func: &Function,
    opts: &ReorderOptions,
    shapes: &[Bindings],
    time: Duration,
) -> Result<(Vec<Vec<tir_ir::OpId>>, Vec<Vec<u64>>), DynamicError> {
    let start = Instant::now();
    let mut layouts: Vec<Vec<tir_ir::OpId>> = Vec::new();
    for (i, b) in shapes.iter().enumerate() {
        // The search gets 60% of the time, the judging at every shape the rest.
        let left = time
            .mul_f64(0.6)
            .saturating_sub(start.elapsed())
            .max(Duration::from_millis(1));
        let share = left / (shapes.len() - i) as u32;
        let mut f = specialize_function(func, b)?;
        let o = ReorderOptions {
            budget: Budget {
                time: share,
                ..opts.budget
            },
            ..*opts
        };
        reorder::reorder(&mut f, &o).map_err(|error| DynamicError::Reorder {
            shape: shape_name(b),
            error,
        })?;
        if f.layout != func.layout && !layouts.contains(&f.layout) {
            layouts.push(f.layout);
        }
    }
    let mut slabs = Vec::new();
    let mut g = func.clone();
    for l in &layouts {
        g.layout = l.clone();
        slabs.push(slabs_at(&g, shapes, &opts.policy)?);
    }
    Ok((layouts, slabs))
}

/// The `rewrite` pass on a dynamic function, judged at `shapes` (see the module doc): the
/// static pass at the largest shape, kept only when shape-generic and admissible.
pub fn rewrite_dynamic(
    func: &mut Function,
    opts: &RewriteOptions,
    shapes: &[Bindings],
) -> Result<DynamicStats, DynamicError> {
    let start = Instant::now();
    let total = opts.budget.time;
    let Some(largest) = largest_shape(func, shapes, &opts.policy)? else {
        return Err(DynamicError::NoShapes);
    };
    let input = slabs_at(func, shapes, &opts.policy)?;
    let reorder_opts = ReorderOptions {
        search: Search::Scheduler(opts.scheduler),
        budget: opts.budget,
        policy: opts.policy,
    };
    // Half of the budget rewrites at the largest shape; the rest reorders the input and the
    // rewritten program by the rule, and judges them.
    let mut at = specialize_function(func, &shapes[largest])?;
    let static_opts = RewriteOptions {
        budget: Budget {
            time: total / 2,
            ..opts.budget
        },
        ..*opts
    };
    let stats = rewrite::rewrite(&mut at, &static_opts, &mut |_, _, _| {}).map_err(|e| {
        DynamicError::Rewrite {
            shape: shape_name(&shapes[largest]),
            message: e.to_string(),
        }
    })?;
    let left = || total.saturating_sub(start.elapsed());
    let mut candidates: Vec<(&'static str, Function, Vec<u64>, Vec<DerivedWeight>)> = Vec::new();
    let mut not_generic = None;
    if stats.chosen != "input" {
        match generalize(&at, func) {
            Ok(mut g) => {
                let (layouts, slabs) = reordered_candidates(&g, &reorder_opts, shapes, left() / 2)?;
                let own = slabs_at(&g, shapes, &opts.policy)?;
                candidates.push(("rewritten", g.clone(), own, stats.derived.clone()));
                for (l, s) in layouts.into_iter().zip(slabs) {
                    g.layout = l;
                    candidates.push(("rewritten", g.clone(), s, stats.derived.clone()));
                }
            }
            Err(why) => not_generic = Some(why),
        }
    }
    let (layouts, slabs) = reordered_candidates(func, &reorder_opts, shapes, left())?;
    for (l, s) in layouts.into_iter().zip(slabs) {
        let mut f = func.clone();
        f.layout = l;
        candidates.push(("reordered", f, s, Vec::new()));
    }
    let all: Vec<Vec<u64>> = candidates.iter().map(|c| c.2.clone()).collect();
    let (pick, refused_larger) = choose(&input, &all);
    let (kept, after, derived) = match pick {
        Some(i) => {
            let (kept, f, s, d) = candidates.swap_remove(i);
            *func = f;
            (kept, s, d)
        }
        None => ("input", input.clone(), Vec::new()),
    };
    Ok(DynamicStats {
        kept,
        shapes: per_shape(shapes, &input, &after),
        refused_larger,
        not_generic,
        derived,
        time: start.elapsed(),
    })
}

/// The shape at which the input plans largest (the first of equals).
fn largest_shape(
    func: &Function,
    shapes: &[Bindings],
    policy: &PlanPolicy,
) -> Result<Option<usize>, DynamicError> {
    let slabs = slabs_at(func, shapes, policy)?;
    Ok(slabs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
        .map(|(i, _)| i))
}

/// A program rewritten at one shape, made dynamic again: the parameters get the input's
/// symbolic types back and every other type is inferred symbolically. Refused (with why) when
/// that is not the same program at every shape as far as the types can tell: it does not
/// verify, it needs a run-time check the input does not, or a value it kept from the input
/// (by name) or a result has another symbolic type than the input's.
pub fn generalize(rewritten: &Function, original: &Function) -> Result<Function, String> {
    let mut g = rewritten.clone();
    if g.params.len() != original.params.len() {
        return Err("the parameters changed".into());
    }
    for (&p, &q) in g.params.clone().iter().zip(&original.params) {
        let o = &original.values[q];
        let v = &mut g.values[p];
        v.declared_sym = o.declared_sym.clone();
        v.declared = o.declared.clone();
        v.sym = None;
        v.ty = None;
    }
    let params = g.params.clone();
    let consts: Vec<bool> = g
        .values
        .keys()
        .map(|v| {
            g.producer(v)
                .is_some_and(|id| matches!(g.ops[id].op, tir_ir::Op::Const { .. }))
        })
        .collect();
    for (i, v) in g.values.keys().collect::<Vec<_>>().into_iter().enumerate() {
        if params.contains(&v) {
            continue;
        }
        let d = &mut g.values[v];
        d.sym = None;
        d.ty = None;
        if !consts[i] {
            d.declared = None;
            d.declared_sym = None;
        }
    }
    g.result_types = original.result_types.clone();
    g.result_type_spans = original.result_type_spans.clone();
    g.dynamic = original.dynamic.clone();
    if let Some(d) = g.dynamic.as_deref_mut() {
        d.checks.clear();
    }
    let g = rewrite::verified(g).map_err(|e| e.to_string())?;
    let checks = |f: &Function| -> Vec<String> {
        f.dynamic
            .as_deref()
            .map(|d| d.checks.iter().map(|c| c.cond.to_string()).collect())
            .unwrap_or_default()
    };
    let known = checks(original);
    if let Some(c) = checks(&g).into_iter().find(|c| !known.contains(c)) {
        return Err(format!("it needs the run-time check {c}"));
    }
    let types: HashMap<&str, String> = original
        .values
        .keys()
        .filter_map(|v| {
            let d = &original.values[v];
            d.sym_type().map(|t| (d.name.as_str(), t.to_string()))
        })
        .collect();
    for v in g.values.keys() {
        let d = &g.values[v];
        if let (Some(t), Some(want)) = (d.sym_type(), types.get(d.name.as_str())) {
            if &t.to_string() != want {
                return Err(format!("`{}` is {t}, not {want}", g.value_name(v)));
            }
        }
    }
    Ok(g)
}
