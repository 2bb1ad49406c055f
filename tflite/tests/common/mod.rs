//! Builds small `.tflite` flatbuffers with the generated builder API, and the NHWC reference
//! computations the tests compare tir's interpreter with.
#![allow(dead_code)]

use flatbuffers::FlatBufferBuilder;
use tir_tflite::schema::{self as s, ActivationFunctionType as Act, Padding};

pub use s::{BuiltinOperator, TensorType};

pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<i32>,
    pub ty: TensorType,
    /// Little-endian bytes of a constant.
    pub data: Option<Vec<u8>>,
    pub sparsity: Option<SparseSpec>,
    /// The schema's `shape_signature` (`-1` marks a free dim), when set.
    pub signature: Option<Vec<i32>>,
}

/// A sparse layout (the schema's `SparsityParameters`): per level, `Dense(size)` or
/// `Csr(segments, indices)`.
pub struct SparseSpec {
    pub traversal_order: Vec<i32>,
    pub block_map: Vec<i32>,
    pub levels: Vec<SparseLevel>,
}

pub enum SparseLevel {
    Dense(i32),
    Csr(Vec<i32>, Vec<i32>),
}

pub enum Opts {
    None,
    Conv {
        padding: Padding,
        stride: [i32; 2],
        dilation: [i32; 2],
        act: Act,
    },
    Depthwise {
        padding: Padding,
        stride: [i32; 2],
        multiplier: i32,
        act: Act,
    },
    Pool {
        padding: Padding,
        stride: [i32; 2],
        filter: [i32; 2],
        act: Act,
    },
    Fc {
        act: Act,
    },
    Softmax {
        beta: f32,
    },
    Concat {
        axis: i32,
        act: Act,
    },
    Add {
        act: Act,
    },
    Mul {
        act: Act,
    },
    Reducer {
        keep_dims: bool,
    },
    LeakyRelu {
        alpha: f32,
    },
    ResizeNearest {
        align_corners: bool,
        half_pixel: bool,
    },
    DepthToSpace {
        block: i32,
    },
    SplitV {
        num: i32,
    },
    TransposeConv {
        padding: Padding,
        stride: [i32; 2],
        act: Act,
    },
}

pub struct OpSpec {
    pub code: BuiltinOperator,
    pub custom: Option<String>,
    /// A custom operator's raw options bytes.
    pub custom_options: Option<Vec<u8>>,
    pub inputs: Vec<i32>,
    pub outputs: Vec<i32>,
    pub opts: Opts,
}

#[derive(Default)]
pub struct Spec {
    pub tensors: Vec<TensorSpec>,
    pub ops: Vec<OpSpec>,
    pub inputs: Vec<i32>,
    pub outputs: Vec<i32>,
    /// The operator-code version of a custom operator, by name (1 when absent).
    pub custom_versions: Vec<(String, i32)>,
}

impl Spec {
    /// A non-constant float32 tensor; returns its index.
    pub fn act(&mut self, name: &str, shape: &[i32]) -> i32 {
        self.tensor(name, shape, TensorType::FLOAT32, None)
    }

    pub fn input(&mut self, name: &str, shape: &[i32]) -> i32 {
        let t = self.act(name, shape);
        self.inputs.push(t);
        t
    }

    pub fn f32(&mut self, name: &str, shape: &[i32], v: &[f32]) -> i32 {
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.tensor(name, shape, TensorType::FLOAT32, Some(bytes))
    }

    pub fn f16(&mut self, name: &str, shape: &[i32], v: &[f32]) -> i32 {
        let bytes = v
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect();
        self.tensor(name, shape, TensorType::FLOAT16, Some(bytes))
    }

    pub fn i32(&mut self, name: &str, shape: &[i32], v: &[i32]) -> i32 {
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.tensor(name, shape, TensorType::INT32, Some(bytes))
    }

    pub fn tensor(
        &mut self,
        name: &str,
        shape: &[i32],
        ty: TensorType,
        data: Option<Vec<u8>>,
    ) -> i32 {
        self.tensors.push(TensorSpec {
            name: name.into(),
            shape: shape.to_vec(),
            ty,
            data,
            sparsity: None,
            signature: None,
        });
        self.tensors.len() as i32 - 1
    }

    pub fn op(&mut self, code: BuiltinOperator, inputs: &[i32], outputs: &[i32], opts: Opts) {
        self.ops.push(OpSpec {
            code,
            custom: None,
            custom_options: None,
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
            opts,
        });
    }

    /// The serialized model (schema version 3, identifier `TFL3`).
    pub fn build(&self) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        // Buffer 0 is the empty sentinel; each constant gets its own.
        let mut buffers = vec![s::Buffer::create(&mut fbb, &s::BufferArgs::default())];
        let mut tensors = Vec::new();
        for t in &self.tensors {
            let buffer = match &t.data {
                Some(d) => {
                    let data = fbb.create_vector(d);
                    buffers.push(s::Buffer::create(
                        &mut fbb,
                        &s::BufferArgs {
                            data: Some(data),
                            ..Default::default()
                        },
                    ));
                    buffers.len() as u32 - 1
                }
                None => 0,
            };
            let sparsity = t.sparsity.as_ref().map(|sp| sparsity(&mut fbb, sp));
            let shape = fbb.create_vector(&t.shape);
            let shape_signature = t.signature.as_ref().map(|s| fbb.create_vector(s));
            let name = fbb.create_string(&t.name);
            tensors.push(s::Tensor::create(
                &mut fbb,
                &s::TensorArgs {
                    shape: Some(shape),
                    type_: t.ty,
                    buffer,
                    name: Some(name),
                    sparsity,
                    shape_signature,
                    ..Default::default()
                },
            ));
        }
        // One operator code per distinct (code, custom name).
        let mut codes: Vec<(BuiltinOperator, Option<String>)> = Vec::new();
        let mut ops = Vec::new();
        for o in &self.ops {
            let key = (o.code, o.custom.clone());
            let index = match codes.iter().position(|c| *c == key) {
                Some(i) => i,
                None => {
                    codes.push(key);
                    codes.len() - 1
                }
            };
            let (ty, opts) = options(&mut fbb, &o.opts);
            let inputs = fbb.create_vector(&o.inputs);
            let outputs = fbb.create_vector(&o.outputs);
            let custom_options = o.custom_options.as_ref().map(|b| fbb.create_vector(b));
            ops.push(s::Operator::create(
                &mut fbb,
                &s::OperatorArgs {
                    opcode_index: index as u32,
                    inputs: Some(inputs),
                    outputs: Some(outputs),
                    builtin_options_type: ty,
                    builtin_options: opts,
                    custom_options,
                    ..Default::default()
                },
            ));
        }
        let codes: Vec<_> = codes
            .iter()
            .map(|(code, custom)| {
                let version = custom
                    .as_ref()
                    .and_then(|c| self.custom_versions.iter().find(|(n, _)| n == c))
                    .map_or(1, |(_, v)| *v);
                let custom_name = custom.as_ref().map(|c| fbb.create_string(c));
                s::OperatorCode::create(
                    &mut fbb,
                    &s::OperatorCodeArgs {
                        deprecated_builtin_code: code.0.min(127) as i8,
                        custom_code: custom_name,
                        version,
                        builtin_code: *code,
                    },
                )
            })
            .collect();
        let tensors = fbb.create_vector(&tensors);
        let inputs = fbb.create_vector(&self.inputs);
        let outputs = fbb.create_vector(&self.outputs);
        let ops = fbb.create_vector(&ops);
        let name = fbb.create_string("main");
        let sg = s::SubGraph::create(
            &mut fbb,
            &s::SubGraphArgs {
                tensors: Some(tensors),
                inputs: Some(inputs),
                outputs: Some(outputs),
                operators: Some(ops),
                name: Some(name),
            },
        );
        let subgraphs = fbb.create_vector(&[sg]);
        let codes = fbb.create_vector(&codes);
        let buffers = fbb.create_vector(&buffers);
        let description = fbb.create_string("built by tir-tflite's tests");
        let model = s::Model::create(
            &mut fbb,
            &s::ModelArgs {
                version: 3,
                operator_codes: Some(codes),
                subgraphs: Some(subgraphs),
                description: Some(description),
                buffers: Some(buffers),
            },
        );
        s::finish_model_buffer(&mut fbb, model);
        fbb.finished_data().to_vec()
    }
}

fn sparsity<'a>(
    fbb: &mut FlatBufferBuilder<'a>,
    sp: &SparseSpec,
) -> flatbuffers::WIPOffset<s::SparsityParameters<'a>> {
    let mut levels = Vec::new();
    for l in &sp.levels {
        let args = match l {
            SparseLevel::Dense(n) => s::DimensionMetadataArgs {
                format: s::DimensionType::DENSE,
                dense_size: *n,
                ..Default::default()
            },
            SparseLevel::Csr(segments, indices) => {
                let seg = fbb.create_vector(segments);
                let seg = s::Int32Vector::create(fbb, &s::Int32VectorArgs { values: Some(seg) });
                let idx = fbb.create_vector(indices);
                let idx = s::Int32Vector::create(fbb, &s::Int32VectorArgs { values: Some(idx) });
                s::DimensionMetadataArgs {
                    format: s::DimensionType::SPARSE_CSR,
                    dense_size: 0,
                    array_segments_type: s::SparseIndexVector::Int32Vector,
                    array_segments: Some(seg.as_union_value()),
                    array_indices_type: s::SparseIndexVector::Int32Vector,
                    array_indices: Some(idx.as_union_value()),
                }
            }
        };
        levels.push(s::DimensionMetadata::create(fbb, &args));
    }
    let traversal_order = fbb.create_vector(&sp.traversal_order);
    let block_map = fbb.create_vector(&sp.block_map);
    let dim_metadata = fbb.create_vector(&levels);
    s::SparsityParameters::create(
        fbb,
        &s::SparsityParametersArgs {
            traversal_order: Some(traversal_order),
            block_map: Some(block_map),
            dim_metadata: Some(dim_metadata),
        },
    )
}

type UnionOffset = Option<flatbuffers::WIPOffset<flatbuffers::UnionWIPOffset>>;

fn options(fbb: &mut FlatBufferBuilder, o: &Opts) -> (s::BuiltinOptions, UnionOffset) {
    use s::BuiltinOptions as O;
    match *o {
        Opts::None => (O::NONE, None),
        Opts::DepthToSpace { block } => {
            let t = s::DepthToSpaceOptions::create(
                fbb,
                &s::DepthToSpaceOptionsArgs { block_size: block },
            );
            (O::DepthToSpaceOptions, Some(t.as_union_value()))
        }
        Opts::TransposeConv {
            padding,
            stride,
            act,
        } => {
            let t = s::TransposeConvOptions::create(
                fbb,
                &s::TransposeConvOptionsArgs {
                    padding,
                    stride_h: stride[0],
                    stride_w: stride[1],
                    fused_activation_function: act,
                },
            );
            (O::TransposeConvOptions, Some(t.as_union_value()))
        }
        Opts::SplitV { num } => {
            let t = s::SplitVOptions::create(fbb, &s::SplitVOptionsArgs { num_splits: num });
            (O::SplitVOptions, Some(t.as_union_value()))
        }
        Opts::Conv {
            padding,
            stride,
            dilation,
            act,
        } => {
            let t = s::Conv2DOptions::create(
                fbb,
                &s::Conv2DOptionsArgs {
                    padding,
                    stride_h: stride[0],
                    stride_w: stride[1],
                    fused_activation_function: act,
                    dilation_h_factor: dilation[0],
                    dilation_w_factor: dilation[1],
                },
            );
            (O::Conv2DOptions, Some(t.as_union_value()))
        }
        Opts::Depthwise {
            padding,
            stride,
            multiplier,
            act,
        } => {
            let t = s::DepthwiseConv2DOptions::create(
                fbb,
                &s::DepthwiseConv2DOptionsArgs {
                    padding,
                    stride_h: stride[0],
                    stride_w: stride[1],
                    depth_multiplier: multiplier,
                    fused_activation_function: act,
                    dilation_h_factor: 1,
                    dilation_w_factor: 1,
                },
            );
            (O::DepthwiseConv2DOptions, Some(t.as_union_value()))
        }
        Opts::Pool {
            padding,
            stride,
            filter,
            act,
        } => {
            let t = s::Pool2DOptions::create(
                fbb,
                &s::Pool2DOptionsArgs {
                    padding,
                    stride_h: stride[0],
                    stride_w: stride[1],
                    filter_height: filter[0],
                    filter_width: filter[1],
                    fused_activation_function: act,
                },
            );
            (O::Pool2DOptions, Some(t.as_union_value()))
        }
        Opts::Fc { act } => {
            let t = s::FullyConnectedOptions::create(
                fbb,
                &s::FullyConnectedOptionsArgs {
                    fused_activation_function: act,
                    ..Default::default()
                },
            );
            (O::FullyConnectedOptions, Some(t.as_union_value()))
        }
        Opts::Softmax { beta } => {
            let t = s::SoftmaxOptions::create(fbb, &s::SoftmaxOptionsArgs { beta });
            (O::SoftmaxOptions, Some(t.as_union_value()))
        }
        Opts::Concat { axis, act } => {
            let t = s::ConcatenationOptions::create(
                fbb,
                &s::ConcatenationOptionsArgs {
                    axis,
                    fused_activation_function: act,
                },
            );
            (O::ConcatenationOptions, Some(t.as_union_value()))
        }
        Opts::Add { act } => {
            let t = s::AddOptions::create(
                fbb,
                &s::AddOptionsArgs {
                    fused_activation_function: act,
                    pot_scale_int16: true,
                },
            );
            (O::AddOptions, Some(t.as_union_value()))
        }
        Opts::Mul { act } => {
            let t = s::MulOptions::create(
                fbb,
                &s::MulOptionsArgs {
                    fused_activation_function: act,
                },
            );
            (O::MulOptions, Some(t.as_union_value()))
        }
        Opts::Reducer { keep_dims } => {
            let t = s::ReducerOptions::create(fbb, &s::ReducerOptionsArgs { keep_dims });
            (O::ReducerOptions, Some(t.as_union_value()))
        }
        Opts::LeakyRelu { alpha } => {
            let t = s::LeakyReluOptions::create(fbb, &s::LeakyReluOptionsArgs { alpha });
            (O::LeakyReluOptions, Some(t.as_union_value()))
        }
        Opts::ResizeNearest {
            align_corners,
            half_pixel,
        } => {
            let t = s::ResizeNearestNeighborOptions::create(
                fbb,
                &s::ResizeNearestNeighborOptionsArgs {
                    align_corners,
                    half_pixel_centers: half_pixel,
                },
            );
            (O::ResizeNearestNeighborOptions, Some(t.as_union_value()))
        }
    }
}

/// Deterministic values in [-1, 1) from a seed (a small LCG: the tests need varied numbers,
/// not good randomness).
/// The free-batch test model (`tflite/tests/free_batch.rs` and the main crate's
/// `tests/compile_tflite_free_batch.rs`): CONV_2D (SAME, RELU) → ADD (a per-channel constant)
/// → RESHAPE to `[-1, 256]`, with the input's static shape `[batch, 8, 8, 3]`; `signature`
/// sets the input's `shape_signature`.
pub fn free_batch_model(batch: i32, signature: Option<&[i32]>) -> Vec<u8> {
    use s::BuiltinOperator as B;
    let mut m = Spec::default();
    let tx = m.input("x", &[batch, 8, 8, 3]);
    m.tensors[tx as usize].signature = signature.map(<[i32]>::to_vec);
    let tf = m.f32("conv/filter", &[4, 3, 3, 3], &values(4 * 3 * 3 * 3, 2));
    let tfb = m.f32("conv/bias", &[4], &values(4, 3));
    let tc = m.act("conv", &[batch, 8, 8, 4]);
    m.op(
        B::CONV_2D,
        &[tx, tf, tfb],
        &[tc],
        Opts::Conv {
            padding: Padding::SAME,
            stride: [1, 1],
            dilation: [1, 1],
            act: Act::RELU,
        },
    );
    let tk = m.f32("k", &[4], &values(4, 4));
    let ta = m.act("sum", &[batch, 8, 8, 4]);
    m.op(B::ADD, &[tc, tk], &[ta], Opts::Add { act: Act::NONE });
    let shape = m.i32("shape", &[2], &[-1, 256]);
    let tr = m.act("flat", &[batch, 256]);
    m.op(B::RESHAPE, &[ta, shape], &[tr], Opts::None);
    m.outputs.push(tr);
    m.build()
}

/// A model with a free height and width (`shape_signature` `[1, -1, -1, 3]` when `free`) at
/// the static `[1, h, w, 3]`: CONV_2D (SAME, stride 1, RELU) → AVERAGE_POOL_2D (SAME, stride
/// 1, 3×3) → MAX_POOL_2D (VALID, stride 2, 3×3), beside DEPTHWISE_CONV_2D (VALID, stride 2) of
/// the conv, CONCATENATION of the two on the channels.
pub fn free_hw_model(h: i32, w: i32, free: bool) -> Vec<u8> {
    use s::BuiltinOperator as B;
    let (h2, w2) = ((h - 3) / 2 + 1, (w - 3) / 2 + 1);
    let mut m = Spec::default();
    let tx = m.input("x", &[1, h, w, 3]);
    if free {
        m.tensors[tx as usize].signature = Some(vec![1, -1, -1, 3]);
    }
    let tf = m.f32("conv/filter", &[4, 3, 3, 3], &values(4 * 3 * 3 * 3, 5));
    let tfb = m.f32("conv/bias", &[4], &values(4, 6));
    let tc = m.act("conv", &[1, h, w, 4]);
    m.op(
        B::CONV_2D,
        &[tx, tf, tfb],
        &[tc],
        Opts::Conv {
            padding: Padding::SAME,
            stride: [1, 1],
            dilation: [1, 1],
            act: Act::RELU,
        },
    );
    let tdf = m.f32("dw/filter", &[1, 3, 3, 4], &values(36, 7));
    let tdb = m.f32("dw/bias", &[4], &values(4, 8));
    let td = m.act("dw", &[1, h2, w2, 4]);
    m.op(
        B::DEPTHWISE_CONV_2D,
        &[tc, tdf, tdb],
        &[td],
        Opts::Depthwise {
            padding: Padding::VALID,
            stride: [2, 2],
            multiplier: 1,
            act: Act::NONE,
        },
    );
    let ta = m.act("avg", &[1, h, w, 4]);
    m.op(
        B::AVERAGE_POOL_2D,
        &[tc],
        &[ta],
        Opts::Pool {
            padding: Padding::SAME,
            stride: [1, 1],
            filter: [3, 3],
            act: Act::NONE,
        },
    );
    let tm = m.act("max", &[1, h2, w2, 4]);
    m.op(
        B::MAX_POOL_2D,
        &[ta],
        &[tm],
        Opts::Pool {
            padding: Padding::VALID,
            stride: [2, 2],
            filter: [3, 3],
            act: Act::NONE,
        },
    );
    let ty = m.act("y", &[1, h2, w2, 8]);
    m.op(
        B::CONCATENATION,
        &[td, tm],
        &[ty],
        Opts::Concat {
            axis: 3,
            act: Act::NONE,
        },
    );
    m.outputs.push(ty);
    m.build()
}

/// A free batch (`shape_signature` `[-1, 2, 2, 3]` when `free`) through RELU → FULLY_CONNECTED
/// (12 → 5, RELU6), which flattens the `[batch, 2, 2, 3]` input to `[batch, 12]`.
pub fn free_batch_fc_model(batch: i32, free: bool) -> Vec<u8> {
    use s::BuiltinOperator as B;
    let mut m = Spec::default();
    let tx = m.input("x", &[batch, 2, 2, 3]);
    if free {
        m.tensors[tx as usize].signature = Some(vec![-1, 2, 2, 3]);
    }
    let tr = m.act("r", &[batch, 2, 2, 3]);
    m.op(B::RELU, &[tx], &[tr], Opts::None);
    let tw = m.f32("fc/w", &[5, 12], &values(60, 9));
    let tb = m.f32("fc/b", &[5], &values(5, 10));
    let ty = m.act("y", &[batch, 5]);
    m.op(
        B::FULLY_CONNECTED,
        &[tr, tw, tb],
        &[ty],
        Opts::Fc { act: Act::RELU6 },
    );
    m.outputs.push(ty);
    m.build()
}

pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Imports `bytes` and runs the result on tir's reference interpreter.
pub fn run_tir(bytes: &[u8], inputs: &[(Vec<u64>, Vec<f32>)]) -> Vec<(Vec<u64>, Vec<f32>)> {
    let imported =
        tir_tflite::import_bytes(bytes, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let st = imported.weights.to_safetensors().unwrap();
    let weights = if imported.weights.is_empty() {
        tir_interp::Weights::new()
    } else {
        tir_interp::Weights::from_safetensors(&imported.module, &st).unwrap()
    };
    let ins: Vec<_> = inputs
        .iter()
        .map(|(s, d)| tir_interp::Tensor::f32(s.clone(), d.clone()).unwrap())
        .collect();
    tir_interp::run(&imported.module, &weights, &ins)
        .unwrap_or_else(|e| panic!("{e}\n{}", tir_ir::print(&imported.module)))
        .into_iter()
        .map(|t| (t.shape().to_vec(), t.as_f32().unwrap().to_vec()))
        .collect()
}

/// The import error's message.
pub fn refusal(bytes: &[u8]) -> String {
    match tir_tflite::import_bytes(bytes, &Default::default()) {
        Ok(_) => panic!("the model imported"),
        Err(e) => e.to_string(),
    }
}

pub fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-4, "element {i}: tir {g}, reference {w}");
    }
}

// ---- NHWC reference computations (TFLite's definitions, written out naively) ----

pub struct Nhwc {
    pub shape: [usize; 4],
    pub data: Vec<f32>,
}

impl Nhwc {
    pub fn new(shape: [usize; 4], data: Vec<f32>) -> Self {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        Nhwc { shape, data }
    }
    pub fn at(&self, n: usize, h: usize, w: usize, c: usize) -> f32 {
        let [_, hh, ww, cc] = self.shape;
        self.data[((n * hh + h) * ww + w) * cc + c]
    }
}

pub fn act(x: f32, a: Act) -> f32 {
    match a {
        Act::RELU => x.max(0.0),
        Act::RELU6 => x.clamp(0.0, 6.0),
        Act::RELU_N1_TO_1 => x.clamp(-1.0, 1.0),
        Act::TANH => x.tanh(),
        _ => x,
    }
}

/// TFLite's output size and leading padding for one spatial axis.
pub fn out_and_pad(input: usize, k: usize, s: usize, d: usize, p: Padding) -> (usize, usize) {
    let keff = (k - 1) * d + 1;
    if p == Padding::VALID {
        ((input - keff) / s + 1, 0)
    } else {
        let out = input.div_ceil(s);
        let total = ((out - 1) * s + keff).saturating_sub(input);
        (out, total / 2)
    }
}

/// Convolution with an OHWI filter (`groups` = in channels / filter in channels), or
/// depthwise with a 1HW(C·M) filter when `depthwise`.
#[allow(clippy::too_many_arguments)]
pub fn conv(
    x: &Nhwc,
    f: &[f32],
    fshape: [usize; 4],
    bias: &[f32],
    stride: [usize; 2],
    dil: [usize; 2],
    p: Padding,
    a: Act,
    depthwise: bool,
) -> Nhwc {
    let [n, h, w, c] = x.shape;
    let (kh, kw) = (fshape[1], fshape[2]);
    let (oh, ph) = out_and_pad(h, kh, stride[0], dil[0], p);
    let (ow, pw) = out_and_pad(w, kw, stride[1], dil[1], p);
    let oc = if depthwise { fshape[3] } else { fshape[0] };
    let mut out = vec![0f32; n * oh * ow * oc];
    for b in 0..n {
        for y in 0..oh {
            for xx in 0..ow {
                for o in 0..oc {
                    let mut acc = bias.get(o).copied().unwrap_or(0.0);
                    for i in 0..kh {
                        for j in 0..kw {
                            let iy = (y * stride[0] + i * dil[0]) as isize - ph as isize;
                            let ix = (xx * stride[1] + j * dil[1]) as isize - pw as isize;
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            let (iy, ix) = (iy as usize, ix as usize);
                            if depthwise {
                                let m = oc / c;
                                let ci = o / m;
                                acc += x.at(b, iy, ix, ci) * f[(i * kw + j) * oc + o];
                            } else {
                                let fin = fshape[3];
                                let g = o / (oc / (c / fin));
                                for ci in 0..fin {
                                    acc += x.at(b, iy, ix, g * fin + ci)
                                        * f[((o * kh + i) * kw + j) * fin + ci];
                                }
                            }
                        }
                    }
                    out[((b * oh + y) * ow + xx) * oc + o] = act(acc, a);
                }
            }
        }
    }
    Nhwc::new([n, oh, ow, oc], out)
}

/// Max or average pooling (the average over the cells inside the input).
pub fn pool(x: &Nhwc, k: [usize; 2], s: [usize; 2], p: Padding, max: bool) -> Nhwc {
    let [n, h, w, c] = x.shape;
    let (oh, ph) = out_and_pad(h, k[0], s[0], 1, p);
    let (ow, pw) = out_and_pad(w, k[1], s[1], 1, p);
    let mut out = Vec::new();
    for b in 0..n {
        for y in 0..oh {
            for xx in 0..ow {
                for ch in 0..c {
                    let (mut m, mut sum, mut cnt) = (f32::NEG_INFINITY, 0f32, 0);
                    for i in 0..k[0] {
                        for j in 0..k[1] {
                            let iy = (y * s[0] + i) as isize - ph as isize;
                            let ix = (xx * s[1] + j) as isize - pw as isize;
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            let v = x.at(b, iy as usize, ix as usize, ch);
                            m = m.max(v);
                            sum += v;
                            cnt += 1;
                        }
                    }
                    out.push(if max { m } else { sum / cnt as f32 });
                }
            }
        }
    }
    Nhwc::new([n, oh, ow, c], out)
}

pub fn softmax(v: &[f32]) -> Vec<f32> {
    let m = v.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let e: Vec<f32> = v.iter().map(|x| (x - m).exp()).collect();
    let s: f32 = e.iter().sum();
    e.iter().map(|x| x / s).collect()
}
