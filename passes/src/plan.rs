//! The judge: plan a function exactly as `tirc compile` will.
//!
//! [`plan_function`] is the `plan` pass, the score of every order the `reorder` pass tries and
//! of every candidate the `rewrite` pass extracts, and what `tirc compile` builds, so what a
//! search optimises is what compile allocates. It assigns buffers (with sharing: views alias
//! their source, element-wise ops write in place, producers write straight into a concat's
//! output), plans their usage records with the policy's offsets strategy, and hands the plan
//! to the independent checker (`planner::checker`, which shares no code with the strategies)
//! once, on the plan it returns.
//!
//! Sharing shortens lives and removes copies, but pinning producers into a concat's buffer can
//! raise the peak, so with sharing three variants are planned (all sharing, all but concat
//! slices, none) and the smallest slab kept, ties to more sharing: sharing never costs memory.
//!
//! A search judges many candidates within a time budget, so a judge may ask for less than
//! compile plans ([`Effort`]); the plan then says it is an upper bound of compile's
//! ([`FunctionPlan::complete`]), and the `plan` pass re-plans what it is handed (see
//! `pipeline`).

use crate::bufferize::is_bufferized;
use crate::buffers::{assign_buffers, BufferAssignment, Sharing};
use crate::liveness::LivenessError;
use crate::planner::{
    self, checker::check_offsets, lower_bounds, OffsetStrategy, OffsetsPlan, PlanError,
    UsageRecord, DEFAULT_ALIGNMENT,
};
use std::time::Instant;
use tir_ir::{Function, OpId};

/// How compile plans a function. `effort` is how much of it a judge may skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanPolicy {
    /// An offsets strategy, or [`OffsetStrategy::Best`]: the smallest slab of them all.
    pub strategy: OffsetStrategy,
    pub align: u64,
    /// Views, in-place and concat sharing (the smallest of the variants, see the module doc).
    pub sharing: bool,
    /// With `sharing`: whether producers may also write straight into their slice of a
    /// concat's output. Off for a model with run-time dims: the slice's offset would be an
    /// expression of the dims, while its run-time plan places whole buffers (`tirc compile`
    /// with symbolic dims, `docs/codegen.md`, "Run-time shapes").
    pub concat_slices: bool,
    /// Bytes of padding planned after every buffer (`tirc compile --guard` puts canary bytes
    /// there); 0 plans the true sizes.
    pub guard: u64,
    pub effort: Effort,
}

impl Default for PlanPolicy {
    /// The `plan` pass's defaults: the best strategy, no sharing, no guard, full effort.
    fn default() -> Self {
        PlanPolicy {
            strategy: OffsetStrategy::Best,
            align: DEFAULT_ALIGNMENT,
            sharing: false,
            concat_slices: true,
            guard: 0,
            effort: Effort::Full,
        }
    }
}

impl PlanPolicy {
    /// `tirc compile`'s: the best strategy with sharing.
    pub fn compile() -> PlanPolicy {
        PlanPolicy {
            sharing: true,
            ..PlanPolicy::default()
        }
    }

    pub fn with_effort(self, effort: Effort) -> PlanPolicy {
        PlanPolicy { effort, ..self }
    }

    /// The same plan as compile's, whatever effort each asked for.
    pub fn plans_like(&self, other: &PlanPolicy) -> bool {
        self.with_effort(Effort::Full) == other.with_effort(Effort::Full)
    }

    /// The sharing variants planned, in tie-breaking order.
    fn variants(&self) -> &'static [Sharing] {
        match (self.sharing, self.effort) {
            (false, _) => &[Sharing::NONE],
            (true, _) if !self.concat_slices => &[Sharing::NO_CONCAT, Sharing::NONE],
            // Compile keeps one of these two on every zoo model; the guide plans only them.
            (true, Effort::Guide) => &[Sharing::ALL, Sharing::NO_CONCAT],
            (true, _) => &[Sharing::ALL, Sharing::NO_CONCAT, Sharing::NONE],
        }
    }
}

/// How much of compile's planning a judge runs. Only [`OffsetStrategy::Best`] has anything to
/// skip: a named strategy is always run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    /// Everything compile runs.
    Full,
    /// The quadratic offsets strategies only while the deadline has not passed
    /// (`planner::best_offsets_within`); an order search's budget covers its judge.
    Until(Instant),
    /// Without the quadratic strategies above this many buffers: min-cost flow takes about
    /// half a second on DARTS' 548 buffers and minutes on the thousands of a fully partitioned
    /// DenseNet, and the rewrite pass judges every order of every candidate.
    FastAbove(usize),
    /// The kernel walk's guide: the fast strategies on the two sharing variants compile
    /// usually keeps.
    Guide,
}

/// A function's buffers and their offsets in the slab, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionPlan {
    /// The function and op order it was made for.
    pub func: String,
    pub layout: Vec<OpId>,
    pub policy: PlanPolicy,
    /// The sharing variant kept.
    pub sharing: Sharing,
    pub assignment: BufferAssignment,
    /// The buffers' usage records as planned (guard bytes included).
    pub records: Vec<UsageRecord>,
    pub plan: OffsetsPlan,
    /// The strategy that made `plan`.
    pub strategy: OffsetStrategy,
    /// Whether every strategy and variant of the policy ran: false when the effort skipped
    /// some, and `slab()` is then an upper bound of what compile plans.
    pub complete: bool,
}

impl FunctionPlan {
    pub fn slab(&self) -> u64 {
        self.plan.total_size
    }

    /// The offsets lower bound of the kept variant's records (paper §5.1: max breadth).
    pub fn lower_bound(&self) -> Result<u64, PlanError> {
        Ok(lower_bounds(&self.records, self.policy.align)?.offsets)
    }

    /// Whether this plan is what `plan_function(func, policy)` with full effort gives.
    pub fn is_compile_plan_of(&self, func: &Function, policy: &PlanPolicy) -> bool {
        self.complete
            && self.func == func.name
            && self.layout == func.layout
            && self.policy.plans_like(policy)
    }
}

/// Why a function could not be planned.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanFunctionError {
    #[error("`@{0}` is already bufferized")]
    Bufferized(String),
    #[error(transparent)]
    Liveness(#[from] LivenessError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("the independent checker rejected the plan: {0}")]
    Check(String),
}

/// Plans `func` as the policy says (see the module doc); the returned plan has passed the
/// independent checker.
pub fn plan_function(
    func: &Function,
    policy: &PlanPolicy,
) -> Result<FunctionPlan, PlanFunctionError> {
    if is_bufferized(func) {
        return Err(PlanFunctionError::Bufferized(func.name.clone()));
    }
    let align = policy.align;
    let mut chosen: Option<(Sharing, BufferAssignment, Vec<UsageRecord>, OffsetsPlan, _)> = None;
    let mut complete = true;
    for &variant in policy.variants() {
        let assignment = assign_buffers(func, variant)?;
        let mut records = assignment.records();
        // Guard bytes belong to their buffer for its whole life: padded records.
        for r in &mut records {
            r.size = r.size.saturating_add(policy.guard);
        }
        let (plan, used) = if policy.strategy == OffsetStrategy::Best {
            let deadline = match policy.effort {
                Effort::Full => None,
                Effort::Until(d) => Some(d),
                Effort::FastAbove(n) if records.len() <= n => None,
                // A deadline already passed runs exactly the strategies that are not quadratic.
                Effort::FastAbove(_) | Effort::Guide => Some(Instant::now()),
            };
            let best = planner::best_offsets_within(&records, align, deadline)?;
            complete &= !best.stopped_by_time();
            (best.plan, best.strategy)
        } else {
            (
                planner::plan_offsets(&records, policy.strategy, align)?,
                policy.strategy,
            )
        };
        if chosen
            .as_ref()
            .is_none_or(|c| plan.total_size < c.3.total_size)
        {
            chosen = Some((variant, assignment, records, plan, used));
        }
    }
    let (sharing, assignment, records, plan, strategy) =
        chosen.ok_or(PlanError::Internal("no sharing variant"))?;
    check_offsets(&records, &plan, align).map_err(|es| {
        PlanFunctionError::Check(
            es.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    Ok(FunctionPlan {
        func: func.name.clone(),
        layout: func.layout.clone(),
        policy: *policy,
        sharing,
        assignment,
        records,
        plan,
        strategy,
        // The guide never plans the variant without sharing.
        complete: complete && !(policy.sharing && policy.effort == Effort::Guide),
    })
}
