//! Weights: the tensors that the `const` ops of a module name, loaded from a safetensors file
//! or generated deterministically from a seed.
//!
//! # Generated weights
//!
//! Without a file, every weight is drawn from its own small PRNG, so that a model runs with no
//! download and gives the same numbers on every machine:
//!
//! - **Stream.** The state starts at `FNV-1a-64(weight name) ^ (seed * 0x9E3779B97F4A7C15)`
//!   (wrapping) and advances with SplitMix64 (Steele, Lea & Flood, "Fast splittable
//!   pseudorandom number generators", OOPSLA 2014). Each element takes the next output's top
//!   24 bits as `u = k / 2^23 - 1`, uniform on `[-1, 1)` and exact in `f32`.
//! - **Value.** `center + half_width * u`, in `f32` arithmetic; `half_width` is computed once in
//!   `f64` (only `+ - * /` and the correctly rounded `sqrt`), so no platform-dependent float
//!   function is involved. The value is then converted to the const's dtype (integers round
//!   to nearest).
//! - **Scale per role.** The role of a const is read from its first use in the execution order
//!   ([`role_of`]):
//!
//! | role | used as | center | half width |
//! |---|---|---|---|
//! | [`Role::Weight`] | `conv2d`/`conv_transpose` weight, `gemm` B, `matmul` B | 0 | `sqrt(3 / fan_in)` (variance `1 / fan_in`, LeCun uniform) |
//! | [`Role::Bias`] | `conv2d`/`conv_transpose`/`gemm` bias, `batch_norm` bias and mean, `layer_norm` bias, the other operand of `add`/`sub` | 0 | 0.05 |
//! | [`Role::Scale`] | `batch_norm`/`layer_norm` scale, the other operand of `mul`/`div` | 1 | 0.1 |
//! | [`Role::Variance`] | `batch_norm` var | 1.1 | 0.1 (so always positive) |
//! | [`Role::Slope`] | `prelu` slope | 0.25 | 0.05 |
//! | [`Role::Uniform`] | anything else, and generated inputs | 0 | 1 |
//!
//! `fan_in` is the product of the weight's dimensions but the first for `conv2d`
//! (`C/groups * kH * kW`), `C * kH * kW` for `conv_transpose` (weight `[C, M/groups, kH, kW]`;
//! an output pixel sums at most that many products), and the contraction length `K` for `gemm` and `matmul`. Variance
//! `1 / fan_in` keeps a layer's output on the scale of its input (before the activation).
//! He scaling (`sqrt(6 / fan_in)`) was measured too and rejected: it keeps plain ReLU chains
//! steady but lets residual sums grow until ResNet-50's, RandWire's and NASNet's softmax
//! outputs are one-hot; with `1 / fan_in` every model of `examples/` ends with outputs of
//! magnitude 0.1 to 50 and softmax outputs that are not saturated, so the zoo's deep
//! networks neither explode nor vanish. A const that is never used, or used only by other ops,
//! falls back on its name: a name ending in `var` is a variance, one ending in `mean` or
//! `bias` a bias; else a rank ≥ 2 const is a weight with fan-in the product of all dimensions
//! but the first, and anything else uniform.

use crate::tensor::{Data, Tensor};
use std::collections::BTreeMap;
use tir_ir::{BinaryOp, DType, Function, Module, Op, TensorType, Value};

/// Why weights cannot be loaded or generated for a module.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WeightsError {
    #[error("the module has no entry function (`@main`, or a single function)")]
    NoEntry,
    #[error("`{value}` has no type: verify the module first")]
    Untyped { value: String },
    #[error("the weights file is not a valid safetensors file: {0}")]
    Safetensors(String),
    #[error("`{value}`: the weight `{name}` is not in the weights file")]
    Missing { value: String, name: String },
    #[error("`{value}`: the weight `{name}` is {found} in the weights file, but the IR declares {expected}")]
    Mismatch {
        value: String,
        name: String,
        expected: TensorType,
        found: String,
    },
    #[error(
        "`{value}`: the weight `{name}` has the element type {dtype}, which the IR does not have"
    )]
    UnsupportedDType {
        value: String,
        name: String,
        dtype: String,
    },
    #[error("`{value}`: the weight `{name}` is declared as {second}, but an earlier const declares it as {first}")]
    Conflict {
        value: String,
        name: String,
        first: TensorType,
        second: TensorType,
    },
    #[error("`{value}`: the weight `{name}` ({ty}) is too large to hold in memory")]
    TooLarge {
        value: String,
        name: String,
        ty: TensorType,
    },
}

/// How a const is used, which sets the scale of its generated values (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Role {
    /// A weight matrix or kernel contracted over `fan_in` inputs.
    Weight {
        fan_in: u64,
    },
    Bias,
    Scale,
    Variance,
    Slope,
    Uniform,
}

impl Role {
    /// `(center, half_width)` of the uniform distribution.
    pub fn distribution(self) -> (f32, f32) {
        match self {
            Role::Weight { fan_in } => (0.0, (3.0 / fan_in.max(1) as f64).sqrt() as f32),
            Role::Bias => (0.0, 0.05),
            Role::Scale => (1.0, 0.1),
            Role::Variance => (1.1, 0.1),
            Role::Slope => (0.25, 0.05),
            Role::Uniform => (0.0, 1.0),
        }
    }
}

/// A `const` of the entry function.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstRef {
    pub value: Value,
    /// `%name` of the value.
    pub value_name: String,
    /// The weight's name (the `name` attribute).
    pub name: String,
    pub ty: TensorType,
}

/// Every `const` of `func`, in execution order.
pub fn consts(func: &Function) -> Result<Vec<ConstRef>, WeightsError> {
    let mut out = Vec::new();
    for (_, op) in func.ops_in_order() {
        if let Op::Const { name } = &op.op {
            for &v in &op.results {
                let ty = func.ty(v).ok_or_else(|| WeightsError::Untyped {
                    value: func.value_name(v),
                })?;
                out.push(ConstRef {
                    value: v,
                    value_name: func.value_name(v),
                    name: name.clone(),
                    ty: ty.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// The role of `value` in `func`, from its first use in the execution order (see the module
/// docs).
pub fn role_of(func: &Function, value: Value) -> Role {
    let ty = func.ty(value);
    let dims = |t: Option<&TensorType>| t.map(|t| t.shape.clone()).unwrap_or_default();
    let shape = dims(ty);
    let tail_product = |s: &[u64]| s.iter().skip(1).product::<u64>();
    for (_, op) in func.ops_in_order() {
        let Some(i) = op.operands.iter().position(|&o| o == value) else {
            continue;
        };
        let role = match (&op.op, i) {
            (Op::Conv2d(_), 1) => Some(Role::Weight {
                fan_in: tail_product(&shape),
            }),
            (Op::ConvTranspose(_), 1) if shape.len() == 4 => Some(Role::Weight {
                fan_in: shape[0].saturating_mul(shape[2]).saturating_mul(shape[3]),
            }),
            (Op::Conv2d(_) | Op::ConvTranspose(_) | Op::Gemm(_), 2) => Some(Role::Bias),
            (Op::Gemm(g), 1) if shape.len() == 2 => Some(Role::Weight {
                fan_in: if g.trans_b { shape[1] } else { shape[0] },
            }),
            (Op::MatMul { .. }, 1) => Some(Role::Weight {
                fan_in: match shape.len() {
                    0 => 1,
                    1 => shape[0],
                    r => shape[r - 2],
                },
            }),
            (Op::BatchNorm { .. }, 1) | (Op::LayerNorm { .. }, 1) => Some(Role::Scale),
            (Op::BatchNorm { .. }, 2 | 3) | (Op::LayerNorm { .. }, 2) => Some(Role::Bias),
            (Op::BatchNorm { .. }, 4) => Some(Role::Variance),
            (Op::Prelu, 1) => Some(Role::Slope),
            (Op::Conv2d(c), i) if c.slope_index(op.operands.len()) == Some(i) => Some(Role::Slope),
            (
                Op::Binary {
                    op: BinaryOp::Add | BinaryOp::Sub,
                    ..
                },
                _,
            ) => Some(Role::Bias),
            (
                Op::Binary {
                    op: BinaryOp::Mul | BinaryOp::Div,
                    ..
                },
                _,
            ) => Some(Role::Scale),
            _ => None,
        };
        if let Some(r) = role {
            return r;
        }
        break;
    }
    let name = match func.producer(value).map(|id| &func.ops[id].op) {
        Some(Op::Const { name }) => name.as_str(),
        _ => "",
    };
    if name.ends_with("var") {
        Role::Variance
    } else if name.ends_with("mean") || name.ends_with("bias") {
        Role::Bias
    } else if shape.len() >= 2 {
        Role::Weight {
            fan_in: tail_product(&shape),
        }
    } else {
        Role::Uniform
    }
}

/// FNV-1a, 64-bit (Fowler, Noll, Vo).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64: a 64-bit state, one output per step.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The stream of the tensor called `name` under `seed`.
    pub fn for_name(name: &str, seed: u64) -> Self {
        SplitMix64(fnv1a64(name.as_bytes()) ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform on `[-1, 1)`, exact in `f32`: `k / 2^23 - 1` with `k` the top 24 bits.
    pub fn next_unit(&mut self) -> f32 {
        let k = (self.next_u64() >> 40) as u32;
        k as f32 * (1.0 / 8_388_608.0) - 1.0
    }
}

/// The element count of `ty` as a `usize` that can be allocated, or `None`.
pub(crate) fn alloc_len(ty: &TensorType) -> Option<usize> {
    let n = usize::try_from(ty.num_elements()?).ok()?;
    let mut v: Vec<f32> = Vec::new();
    v.try_reserve_exact(n).ok()?;
    Some(n)
}

/// `count` values of `role`'s distribution from the stream of `name` under `seed`.
pub fn generate_values(name: &str, count: usize, role: Role, seed: u64) -> Vec<f32> {
    let (center, half) = role.distribution();
    let mut rng = SplitMix64::for_name(name, seed);
    (0..count)
        .map(|_| center + half * rng.next_unit())
        .collect()
}

/// The generated tensor called `name` of type `ty`. `None` if it is too large to allocate.
pub fn generate_tensor(name: &str, ty: &TensorType, role: Role, seed: u64) -> Option<Tensor> {
    let n = alloc_len(ty)?;
    let values = generate_values(name, n, role, seed);
    Tensor::new(ty.clone(), Data::from_f32(ty.dtype, &values))
}

/// A pseudo-random input (uniform on `[-1, 1)`, [`Role::Uniform`]), named after the
/// parameter, from the same generator as the weights.
pub fn random_input(name: &str, ty: &TensorType, seed: u64) -> Option<Tensor> {
    generate_tensor(&format!("input:{name}"), ty, Role::Uniform, seed)
}

/// Tensors by weight name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Weights {
    tensors: BTreeMap<String, Tensor>,
}

impl Weights {
    pub fn new() -> Self {
        Weights::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, t: Tensor) {
        self.tensors.insert(name.into(), t);
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.get(name)
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Weights in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.tensors.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Generates every weight of the module's entry function from `seed` (see the module docs).
    pub fn generate(module: &Module, seed: u64) -> Result<Weights, WeightsError> {
        let func = module.entry().ok_or(WeightsError::NoEntry)?;
        let mut w = Weights::new();
        for c in unique_consts(func)? {
            let role = role_of(func, c.value);
            let t = generate_tensor(&c.name, &c.ty, role, seed).ok_or_else(|| {
                WeightsError::TooLarge {
                    value: c.value_name.clone(),
                    name: c.name.clone(),
                    ty: c.ty.clone(),
                }
            })?;
            w.insert(c.name, t);
        }
        Ok(w)
    }

    /// Loads the weights the module's entry function names from the bytes of a safetensors
    /// file, checking each one's dtype and shape against its `const`. Tensors of the file
    /// that no `const` names are ignored.
    pub fn from_safetensors(module: &Module, bytes: &[u8]) -> Result<Weights, WeightsError> {
        let func = module.entry().ok_or(WeightsError::NoEntry)?;
        let file = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| WeightsError::Safetensors(describe_safetensors_error(&e)))?;
        let mut w = Weights::new();
        for c in unique_consts(func)? {
            let missing = || WeightsError::Missing {
                value: c.value_name.clone(),
                name: c.name.clone(),
            };
            let view = file.tensor(&c.name).map_err(|_| missing())?;
            let shape: Vec<u64> = view.shape().iter().map(|&d| d as u64).collect();
            let dtype =
                safetensors_dtype(view.dtype()).ok_or_else(|| WeightsError::UnsupportedDType {
                    value: c.value_name.clone(),
                    name: c.name.clone(),
                    dtype: format!("{:?}", view.dtype()),
                })?;
            let found = TensorType::new(shape, dtype);
            if found != c.ty {
                return Err(WeightsError::Mismatch {
                    value: c.value_name.clone(),
                    name: c.name.clone(),
                    expected: c.ty.clone(),
                    found: found.to_string(),
                });
            }
            let t = Data::from_bytes(dtype, view.data(), false)
                .and_then(|d| Tensor::new(found.clone(), d))
                .ok_or_else(|| WeightsError::Mismatch {
                    value: c.value_name.clone(),
                    name: c.name.clone(),
                    expected: c.ty.clone(),
                    found: format!("{} bytes of data", view.data().len()),
                })?;
            w.insert(c.name, t);
        }
        Ok(w)
    }

    /// Checks that every `const` of the entry function has a weight of its declared type.
    pub fn check(&self, module: &Module) -> Result<(), WeightsError> {
        let func = module.entry().ok_or(WeightsError::NoEntry)?;
        for c in consts(func)? {
            match self.get(&c.name) {
                None => {
                    return Err(WeightsError::Missing {
                        value: c.value_name,
                        name: c.name,
                    })
                }
                Some(t) if t.ty != c.ty || !t.is_consistent() => {
                    return Err(WeightsError::Mismatch {
                        value: c.value_name,
                        name: c.name,
                        expected: c.ty,
                        found: t.ty.to_string(),
                    })
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The weights as a safetensors file.
    pub fn to_safetensors(&self) -> Result<Vec<u8>, WeightsError> {
        let mut owned = Vec::with_capacity(self.tensors.len());
        for (name, t) in &self.tensors {
            let shape: Vec<usize> = t.ty.shape.iter().map(|&d| d as usize).collect();
            owned.push((
                name.clone(),
                to_safetensors_dtype(t.ty.dtype),
                shape,
                t.data.to_le_bytes(),
            ));
        }
        let views = owned
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes)
                    .map(|v| (name.clone(), v))
                    .map_err(|e| WeightsError::Safetensors(describe_safetensors_error(&e)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        safetensors::serialize(views, &None)
            .map_err(|e| WeightsError::Safetensors(describe_safetensors_error(&e)))
    }
}

impl WeightsError {
    /// Whether the weights file is at fault (a diagnostic names it), rather than the module
    /// (its consts, its entry function).
    pub fn is_the_files_fault(&self) -> bool {
        match self {
            WeightsError::Safetensors(_)
            | WeightsError::Missing { .. }
            | WeightsError::Mismatch { .. }
            | WeightsError::UnsupportedDType { .. } => true,
            WeightsError::NoEntry
            | WeightsError::Untyped { .. }
            | WeightsError::Conflict { .. }
            | WeightsError::TooLarge { .. } => false,
        }
    }
}

/// What is wrong with a safetensors file, in words: the crate's own `Display` shows only its
/// variant names (`TensorInvalidInfo`).
fn describe_safetensors_error(e: &safetensors::SafeTensorError) -> String {
    use safetensors::SafeTensorError as E;
    match e {
        E::InvalidHeader => "its header is not valid UTF-8".into(),
        E::InvalidHeaderStart => "its header does not start with `{`".into(),
        E::InvalidHeaderDeserialization => "its header is not the JSON object of tensors safetensors expects".into(),
        E::HeaderTooLarge => "its header is larger than the 100 MB safetensors allows".into(),
        E::HeaderTooSmall => "it is shorter than the 8 bytes that give the header's length".into(),
        E::InvalidHeaderLength => "the header's length (its first 8 bytes) reaches past the end of the file".into(),
        E::TensorNotFound(name) => format!("it has no tensor `{name}`"),
        E::TensorInvalidInfo => "a tensor's data offsets in the header do not span its shape times its dtype's size".into(),
        E::InvalidOffset(name) => format!("the data offsets of tensor `{name}` do not start where the previous tensor's end"),
        E::IoError(e) => e.to_string(),
        E::JsonError(e) => format!("its header is not valid JSON: {e}"),
        E::InvalidTensorView(dtype, shape, len) => {
            format!("a {dtype:?} tensor of shape {shape:?} cannot hold {len} bytes")
        }
        E::MetadataIncompleteBuffer => "the tensors' data does not cover the file: the last tensor must end where the file does".into(),
        E::ValidationOverflow => "a tensor's shape or byte size does not fit in 64 bits".into(),
    }
}

/// The consts of `func` with one entry per weight name; two consts naming one weight with
/// different types are an error.
fn unique_consts(func: &Function) -> Result<Vec<ConstRef>, WeightsError> {
    let mut seen: BTreeMap<String, TensorType> = BTreeMap::new();
    let mut out = Vec::new();
    for c in consts(func)? {
        match seen.get(&c.name) {
            Some(first) if *first != c.ty => {
                return Err(WeightsError::Conflict {
                    value: c.value_name,
                    name: c.name,
                    first: first.clone(),
                    second: c.ty,
                })
            }
            Some(_) => {}
            None => {
                seen.insert(c.name.clone(), c.ty.clone());
                out.push(c);
            }
        }
    }
    Ok(out)
}

fn safetensors_dtype(d: safetensors::Dtype) -> Option<DType> {
    use safetensors::Dtype as S;
    Some(match d {
        S::F32 => DType::F32,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::I8 => DType::I8,
        S::U8 => DType::U8,
        S::I32 => DType::I32,
        S::I64 => DType::I64,
        S::BOOL => DType::Bool,
        _ => return None,
    })
}

fn to_safetensors_dtype(d: DType) -> safetensors::Dtype {
    use safetensors::Dtype as S;
    match d {
        DType::F32 => S::F32,
        DType::F16 => S::F16,
        DType::BF16 => S::BF16,
        DType::I8 => S::I8,
        DType::U8 => S::U8,
        DType::I32 => S::I32,
        DType::I64 => S::I64,
        DType::Bool => S::BOOL,
    }
}
