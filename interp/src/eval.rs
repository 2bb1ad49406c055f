//! The reference interpreter: runs a module's entry function on host tensors.
//!
//! It is the oracle that every generated kernel is tested against, so it favours being
//! obviously right over being fast (see [`crate::kernels`]). Before anything runs, the
//! module is checked as far as the kernels rely on it: every value typed, every
//! op's result types equal to what the shape rules infer from its operands, every operand
//! defined before its use, and the inputs and weights of the declared types. A module that
//! fails these checks gives an [`InterpError`], never a panic.
//!
//! Ops run in layout order; a value's buffer is freed after its last use. A bufferized module
//! runs as the module before bufferization (its `alloc_*` ops are skipped).

use crate::kernels::{self, Out, View};
use crate::tensor::{Data, Tensor};
use crate::typed;
use crate::weights::{Weights, WeightsError};
use tir_ir::shape::{infer, norm_axis};
use tir_ir::{DType, EntityRef, Function, Module, Op, TensorType, Value};

/// Why a module could not be run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InterpError {
    #[error("the module has no entry function (`@main`, or a single function)")]
    NoEntry,
    #[error("the model takes {expected} input(s), but {found} were given")]
    InputCount { expected: usize, found: usize },
    #[error("input `{name}`: expected {expected}, got {found}")]
    InputType {
        name: String,
        expected: TensorType,
        found: String,
    },
    #[error("`{value}` ({op} of {types}): the reference interpreter has no kernel for these element types")]
    UnsupportedDType {
        value: String,
        op: &'static str,
        types: String,
    },
    #[error("`{value}` has no type: verify the module first")]
    Untyped { value: String },
    #[error("`{value}` ({op}): {message}; verify the module first")]
    NotVerified {
        op: &'static str,
        value: String,
        message: String,
    },
    #[error("`{value}` is used before its definition")]
    UseBeforeDef { value: String },
    #[error("`{value}` ({ty}) is too large to hold in memory")]
    TooLarge { value: String, ty: TensorType },
    #[error(transparent)]
    Weights(#[from] WeightsError),
}

/// Runs the entry function of `module` on `inputs` (one per parameter, in order) with the
/// `const`s taken from `weights`, and returns the returned values in order.
pub fn run(
    module: &Module,
    weights: &Weights,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, InterpError> {
    let func = module.entry().ok_or(InterpError::NoEntry)?;
    let types = check_function(func)?;
    if inputs.len() != func.params.len() {
        return Err(InterpError::InputCount {
            expected: func.params.len(),
            found: inputs.len(),
        });
    }
    let mut env: Vec<Option<Data>> = vec![None; func.values.len()];
    for (&p, t) in func.params.iter().zip(inputs) {
        let expected = &types[p.index()];
        if t.ty != *expected || !t.is_consistent() {
            return Err(InterpError::InputType {
                name: func.value_name(p),
                expected: expected.clone(),
                found: if t.is_consistent() {
                    t.ty.to_string()
                } else {
                    format!("{} with {} elements", t.ty, t.data.len())
                },
            });
        }
        env[p.index()] = Some(t.data.clone());
    }
    // The position in the layout of each value's last use (returned values live to the end).
    let mut last_use = vec![0usize; func.values.len()];
    for (pos, (_, op)) in func.ops_in_order().enumerate() {
        for &v in &op.operands {
            last_use[v.index()] = pos;
        }
    }
    for &v in &func.returns {
        last_use[v.index()] = usize::MAX;
    }
    for (pos, (_, op)) in func.ops_in_order().enumerate() {
        // `alloc_slab` and `alloc_tensor` say where results live (the ops' `outs`), which does
        // not change what the results are: a bufferized module runs exactly as the module
        // before bufferization.
        if op.op.is_buffer_op() {
            continue;
        }
        if let Op::Const { name } = &op.op {
            let t = weights.get(name).ok_or_else(|| WeightsError::Missing {
                value: func.value_name(op.results[0]),
                name: name.clone(),
            })?;
            let r = op.results[0];
            if t.ty != types[r.index()] || !t.is_consistent() {
                return Err(WeightsError::Mismatch {
                    value: func.value_name(r),
                    name: name.clone(),
                    expected: types[r.index()].clone(),
                    found: t.ty.to_string(),
                }
                .into());
            }
            env[r.index()] = Some(t.data.clone());
            continue;
        }
        for &v in &op.operands {
            if env[v.index()].is_none() {
                return Err(InterpError::UseBeforeDef {
                    value: func.value_name(v),
                });
            }
        }
        // `mod` has only the generic kernel, whatever its type.
        let all_f32 = !matches!(op.op, Op::Mod { .. })
            && op
                .operands
                .iter()
                .chain(&op.results)
                .all(|v| types[v.index()].dtype == DType::F32);
        if all_f32 {
            let mut outs = Vec::with_capacity(op.results.len());
            for &r in &op.results {
                outs.push(alloc(func, r, &types[r.index()])?);
            }
            let shapes: Vec<Vec<usize>> = op
                .operands
                .iter()
                .map(|v| dims(&types[v.index()]))
                .collect();
            let ins: Vec<View> = op
                .operands
                .iter()
                .zip(&shapes)
                .map(|(v, shape)| View {
                    shape,
                    data: match &env[v.index()] {
                        Some(Data::F32(d)) => d,
                        _ => &[],
                    },
                })
                .collect();
            exec(&op.op, &ins, &mut outs);
            for (&r, out) in op.results.iter().zip(outs) {
                env[r.index()] = Some(Data::F32(out.data));
            }
        } else {
            // Another element type somewhere: the dtype-generic kernels ([`crate::typed`]).
            let ins: Vec<typed::In> = op
                .operands
                .iter()
                .map(|v| typed::In {
                    ty: &types[v.index()],
                    data: env[v.index()].as_ref().unwrap_or(&EMPTY),
                })
                .collect();
            let rtypes: Vec<&TensorType> = op.results.iter().map(|r| &types[r.index()]).collect();
            let outs = typed::exec(&op.op, &ins, &rtypes).ok_or_else(|| {
                let r = op.results[0];
                InterpError::UnsupportedDType {
                    value: func.value_name(r),
                    op: op.op.name(),
                    types: op
                        .operands
                        .iter()
                        .map(|v| types[v.index()].to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            })?;
            for (&r, out) in op.results.iter().zip(outs) {
                env[r.index()] = Some(out);
            }
        }
        for &v in &op.operands {
            if last_use[v.index()] == pos {
                env[v.index()] = None;
            }
        }
    }
    let mut results = Vec::with_capacity(func.returns.len());
    for &v in &func.returns {
        let data = env[v.index()]
            .clone()
            .ok_or_else(|| InterpError::UseBeforeDef {
                value: func.value_name(v),
            })?;
        results.push(Tensor {
            ty: types[v.index()].clone(),
            data,
        });
    }
    Ok(results)
}

/// Stands in for an operand the check above found defined.
static EMPTY: Data = Data::Bool(Vec::new());

/// Checks what the kernels rely on and returns every value's type, indexed by value.
fn check_function(func: &Function) -> Result<Vec<TensorType>, InterpError> {
    let malformed = |message: &str| InterpError::NotVerified {
        op: "function",
        value: format!("@{}", func.name),
        message: message.to_string(),
    };
    if func.layout.iter().any(|&id| func.ops.get(id).is_none()) {
        return Err(malformed("the layout names an op that does not exist"));
    }
    let exists = |v: &Value| func.values.get(*v).is_some();
    for (_, op) in func.ops_in_order() {
        if !op.operands.iter().chain(&op.results).all(exists) {
            return Err(malformed("an op refers to a value that does not exist"));
        }
    }
    if !func.params.iter().chain(&func.returns).all(exists) {
        return Err(malformed("a parameter or returned value does not exist"));
    }
    let mut types = Vec::with_capacity(func.values.len());
    for (v, data) in func.values.iter() {
        let ty = data.known_type().ok_or_else(|| InterpError::Untyped {
            value: func.value_name(v),
        })?;
        let is_buffer = func
            .producer(v)
            .is_some_and(|id| func.ops[id].op.is_buffer_op());
        if is_buffer {
            types.push(ty.clone());
            continue;
        }
        if ty
            .num_elements()
            .and_then(|n| usize::try_from(n).ok())
            .is_none()
        {
            return Err(InterpError::TooLarge {
                value: func.value_name(v),
                ty: ty.clone(),
            });
        }
        types.push(ty.clone());
    }
    for (_, op) in func.ops_in_order() {
        let first = op
            .results
            .first()
            .map_or_else(|| op.op.name().to_string(), |&r| func.value_name(r));
        let not_verified = |message: String| InterpError::NotVerified {
            op: op.op.name(),
            value: first.clone(),
            message,
        };
        if op.op.is_buffer_op() {
            continue;
        }
        if let Op::Const { .. } = op.op {
            if op.results.len() != 1 || !op.operands.is_empty() {
                return Err(not_verified(
                    "a const has no operands and one result".into(),
                ));
            }
            continue;
        }
        let ins: Vec<&TensorType> = op.operands.iter().map(|v| &types[v.index()]).collect();
        let inferred = infer(&op.op, &ins).map_err(|e| not_verified(e.message))?;
        let declared: Vec<&TensorType> = op.results.iter().map(|v| &types[v.index()]).collect();
        if inferred.iter().collect::<Vec<_>>() != declared {
            return Err(not_verified(format!(
                "the result types differ from the inferred {}",
                inferred
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(types)
}

/// A zeroed buffer for `v`, or an error if it cannot be allocated.
fn alloc(func: &Function, v: Value, ty: &TensorType) -> Result<Out, InterpError> {
    let too_large = || InterpError::TooLarge {
        value: func.value_name(v),
        ty: ty.clone(),
    };
    let n = ty
        .num_elements()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(too_large)?;
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| too_large())?;
    data.resize(n, 0.0);
    Ok(Out {
        shape: dims(ty),
        data,
    })
}

fn dims(ty: &TensorType) -> Vec<usize> {
    // Every element count fits in usize (checked), so every dimension does.
    ty.shape.iter().map(|&d| d as usize).collect()
}

fn axis(a: i64, rank: usize) -> usize {
    // Normalised by the shape rule, which already accepted it.
    norm_axis(a, rank).unwrap_or(0)
}

/// Runs one (non-`const`) op; operand and result shapes satisfy its shape rule.
fn exec(op: &Op, ins: &[View], outs: &mut [Out]) {
    let out = &mut outs[0];
    match op {
        Op::Const { .. } => {}
        Op::Conv2d(c) => kernels::conv2d(
            c,
            ins[0],
            ins[1],
            ins.get(2).copied(),
            c.residual_index(ins.len()).map(|i| ins[i]),
            c.slope_index(ins.len()).map(|i| ins[i]),
            out,
        ),
        Op::ConvTranspose(c) => {
            kernels::conv_transpose(c, ins[0], ins[1], ins.get(2).copied(), out)
        }
        Op::MatMul { activation } => kernels::matmul(*activation, ins[0], ins[1], out),
        Op::Gemm(g) => kernels::gemm(g, ins[0], ins[1], ins.get(2).copied(), out),
        Op::Binary { op, activation } => kernels::binary(*op, *activation, ins[0], ins[1], out),
        Op::Unary(u) => kernels::unary(*u, ins[0], out),
        Op::Clip { min, max } => kernels::clip_op(*min, *max, ins[0], out),
        Op::HardSigmoid { alpha, beta } => kernels::hard_sigmoid(*alpha, *beta, ins[0], out),
        Op::Prelu => kernels::prelu(ins[0], ins[1], out),
        Op::MaxPool(p) => kernels::pool2d(p, true, ins[0], out),
        Op::AvgPool(p) => kernels::pool2d(p, false, ins[0], out),
        Op::GlobalAvgPool => kernels::global_avg_pool(ins[0], out),
        Op::Concat { axis: a } => kernels::concat(axis(*a, ins[0].shape.len()), ins, out),
        Op::Split { axis: a, .. } => kernels::split(axis(*a, ins[0].shape.len()), ins[0], outs),
        Op::Slice(s) => kernels::slice(s, ins[0], out),
        // Views: the same elements in row-major order.
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            out.data.copy_from_slice(ins[0].data)
        }
        Op::Transpose { perm } => kernels::transpose(perm, ins[0], out),
        Op::Softmax { axis: a } => kernels::softmax(axis(*a, ins[0].shape.len()), ins[0], out),
        Op::LogSoftmax { axis: a } => {
            kernels::log_softmax(axis(*a, ins[0].shape.len()), ins[0], out)
        }
        Op::Pad { pads, mode, value } => kernels::pad(pads, *mode, *value, ins[0], out),
        Op::BatchNorm { epsilon } => {
            kernels::batch_norm(*epsilon, ins[0], [ins[1], ins[2], ins[3], ins[4]], out)
        }
        Op::LayerNorm { axis: a, epsilon } => kernels::layer_norm(
            axis(*a, ins[0].shape.len()),
            *epsilon,
            ins[0],
            ins[1],
            ins.get(2).copied(),
            out,
        ),
        Op::Reduce { kind, axes, .. } => {
            let r = ins[0].shape.len();
            // As the shape rule: no axes means every axis.
            let axes: Vec<usize> = if axes.is_empty() {
                (0..r).collect()
            } else {
                axes.iter().map(|&a| axis(a, r)).collect()
            };
            kernels::reduce(*kind, &axes, ins[0], out)
        }
        Op::Resize(r) => kernels::resize(r, ins[0], out),
        Op::Trilu { upper, k } => kernels::trilu(*upper, *k, ins[0], out),
        // A cast from f32 to f32.
        Op::Cast { .. } => out.data.copy_from_slice(ins[0].data),
        // Their results are bool or i64, never f32: `typed` runs them.
        Op::Compare(_) | Op::Where | Op::Logical(_) | Op::Not | Op::ArgReduce { .. } => {}
        // Run by `typed` on every element type.
        Op::Mod { .. } => {}
        // Buffers only: a bufferized op's `outs` say where its result lives, not what it is.
        Op::AllocSlab { .. } | Op::AllocTensor { .. } => {}
        Op::GridSample(gs) => kernels::grid_sample(gs, ins[0], ins[1], out),
        Op::CumSum {
            axis: a,
            exclusive,
            reverse,
        } => {
            let ax = axis(*a, ins[0].shape.len());
            // Summed in f32, one rounding per step: NumPy's `cumsum` on float32.
            let y = crate::scan::cumsum(
                ins[0].data,
                ins[0].shape,
                ax,
                *exclusive,
                *reverse,
                0.0f32,
                |a, b| a + b,
            );
            out.data.copy_from_slice(&y)
        }
        // Its indices are i64, never f32: `typed` runs it.
        Op::TopK { .. } => {}
    }
}
