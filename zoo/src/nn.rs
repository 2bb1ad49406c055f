//! A thin layer over [`tir_ir::builder::Builder`] for writing networks as code.
//!
//! Layers are named; a layer called `conv1` yields the result `%conv1` and the weights
//! `%conv1.weight` / `%conv1.bias`, so a generated file reads like the framework's own graph and
//! weight names are deterministic. Convolutions follow the fused form inference runtimes
//! execute (batch norm folded into the weights and bias, the activation fused into the op), as
//! the seed paper's TFLite models store them. Padding helpers compute TensorFlow's `SAME`
//! padding, which puts the odd pixel at the bottom/right.

use std::collections::HashSet;
use tir_ir::builder::{BuildError, Builder};
use tir_ir::op::{
    Conv2d, CoordMode, Gemm, NearestMode, PadMode, Pool2d, Resize, ResizeMode, Slice,
};
use tir_ir::{Activation, BinaryOp, DType, Module, Op, TensorType, UnaryOp, Value};

/// Why a network could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NetError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("the name `{0}` is used twice")]
    DuplicateName(String),
    #[error("{0}")]
    Invalid(String),
}

pub type NetResult<T> = Result<T, NetError>;

/// How a window op pads its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// TensorFlow `SAME`: output = ceil(input / stride); odd padding goes bottom/right.
    Same,
    /// No padding.
    Valid,
    /// `[top, left, bottom, right]`.
    Explicit([u64; 4]),
}

/// TensorFlow `SAME` padding of one spatial axis: `(before, after)`.
pub fn same_padding(input: u64, kernel: u64, stride: u64, dilation: u64) -> (u64, u64) {
    let k_eff = dilation * (kernel.max(1) - 1) + 1;
    let out = input.div_ceil(stride.max(1));
    let total = ((out.saturating_sub(1)) * stride + k_eff).saturating_sub(input);
    (total / 2, total - total / 2)
}

fn pads_for(p: Padding, hw: [u64; 2], k: [u64; 2], s: [u64; 2], d: [u64; 2]) -> [u64; 4] {
    match p {
        Padding::Valid => [0; 4],
        Padding::Explicit(x) => x,
        Padding::Same => {
            let (t, b) = same_padding(hw[0], k[0], s[0], d[0]);
            let (l, r) = same_padding(hw[1], k[1], s[1], d[1]);
            [t, l, b, r]
        }
    }
}

/// A 2-D convolution layer description (builder style).
#[derive(Clone, Debug)]
pub struct Conv {
    out: Option<u64>,
    kernel: [u64; 2],
    stride: [u64; 2],
    dilation: [u64; 2],
    groups: Option<u64>,
    padding: Padding,
    bias: bool,
    act: Option<Activation>,
}

impl Conv {
    /// `out` channels, square `k`×`k` kernel, stride 1, `SAME` padding, with bias.
    pub fn new(out: u64, k: u64) -> Self {
        Conv {
            out: Some(out),
            kernel: [k, k],
            stride: [1, 1],
            dilation: [1, 1],
            groups: Some(1),
            padding: Padding::Same,
            bias: true,
            act: None,
        }
    }
    /// A depthwise convolution (one filter per input channel).
    pub fn depthwise(k: u64) -> Self {
        Conv {
            out: None,
            groups: None,
            ..Conv::new(0, k)
        }
    }
    pub fn kernel(mut self, kh: u64, kw: u64) -> Self {
        self.kernel = [kh, kw];
        self
    }
    pub fn stride(mut self, s: u64) -> Self {
        self.stride = [s, s];
        self
    }
    pub fn dilation(mut self, d: u64) -> Self {
        self.dilation = [d, d];
        self
    }
    pub fn groups(mut self, g: u64) -> Self {
        self.groups = Some(g);
        self
    }
    pub fn padding(mut self, p: Padding) -> Self {
        self.padding = p;
        self
    }
    pub fn valid(self) -> Self {
        self.padding(Padding::Valid)
    }
    /// Symmetric padding of `p` on every side (PyTorch style).
    pub fn pad(self, p: u64) -> Self {
        self.padding(Padding::Explicit([p; 4]))
    }
    pub fn no_bias(mut self) -> Self {
        self.bias = false;
        self
    }
    pub fn act(mut self, a: Activation) -> Self {
        self.act = Some(a);
        self
    }
    pub fn act_opt(mut self, a: Option<Activation>) -> Self {
        self.act = a;
        self
    }
    pub fn relu(self) -> Self {
        self.act(Activation::Relu)
    }
    pub fn relu6(self) -> Self {
        self.act(Activation::Relu6)
    }
}

/// A network under construction: a [`Builder`] plus naming discipline.
pub struct Net {
    b: Builder,
    names: HashSet<String>,
}

fn f32t(shape: &[u64]) -> TensorType {
    TensorType::new(shape.to_vec(), DType::F32)
}

impl Net {
    pub fn new(module: &str) -> Self {
        Net {
            b: Builder::new(module),
            names: HashSet::new(),
        }
    }

    fn claim(&mut self, name: &str) -> NetResult<()> {
        if self.names.insert(name.to_string()) {
            Ok(())
        } else {
            Err(NetError::DuplicateName(name.to_string()))
        }
    }

    /// A float32 graph input.
    pub fn input(&mut self, name: &str, shape: &[u64]) -> NetResult<Value> {
        self.claim(name)?;
        Ok(self.b.input(name, f32t(shape)))
    }

    /// A float32 weight `const` named `name`.
    pub fn weight(&mut self, name: &str, shape: &[u64]) -> NetResult<Value> {
        self.claim(name)?;
        Ok(self.b.weight(name, f32t(shape)))
    }

    /// The shape of a value built so far.
    pub fn shape(&self, v: Value) -> &[u64] {
        &self.b.ty(v).shape
    }

    /// Dimension 1 (channels of NCHW, features of `[N, F]`).
    pub fn channels(&self, v: Value) -> u64 {
        self.shape(v).get(1).copied().unwrap_or(0)
    }

    /// Spatial size `[H, W]` of an NCHW value.
    pub fn hw(&self, v: Value) -> [u64; 2] {
        let s = self.shape(v);
        [
            s.get(2).copied().unwrap_or(1),
            s.get(3).copied().unwrap_or(1),
        ]
    }

    /// Any op, its result named `%name`.
    pub fn op(&mut self, name: &str, op: Op, operands: &[Value]) -> NetResult<Value> {
        self.claim(name)?;
        Ok(self.b.op_named(name, op, operands)?)
    }

    pub fn conv(&mut self, name: &str, x: Value, c: &Conv) -> NetResult<Value> {
        let cin = self.channels(x);
        let groups = c.groups.unwrap_or(cin);
        let out = c.out.unwrap_or(cin);
        if cin.checked_rem(groups) != Some(0) {
            return Err(NetError::Invalid(format!(
                "{name}: {groups} groups do not divide {cin} input channels"
            )));
        }
        let w = self.weight(
            &format!("{name}.weight"),
            &[out, cin / groups, c.kernel[0], c.kernel[1]],
        )?;
        let mut operands = vec![x, w];
        if c.bias {
            operands.push(self.weight(&format!("{name}.bias"), &[out])?);
        }
        let pads = pads_for(c.padding, self.hw(x), c.kernel, c.stride, c.dilation);
        let op = Op::Conv2d(Conv2d {
            strides: c.stride,
            dilations: c.dilation,
            pads,
            groups,
            activation: c.act,
            prelu: false,
        });
        self.op(name, op, &operands)
    }

    /// Fully connected layer on `[N, F]`: `gemm(x, W^T) + b` with `W: [out, F]`.
    pub fn dense(
        &mut self,
        name: &str,
        x: Value,
        out: u64,
        act: Option<Activation>,
    ) -> NetResult<Value> {
        let fin = self.shape(x).last().copied().unwrap_or(0);
        let w = self.weight(&format!("{name}.weight"), &[out, fin])?;
        let b = self.weight(&format!("{name}.bias"), &[out])?;
        let op = Op::Gemm(Gemm {
            trans_b: true,
            activation: act,
            ..Gemm::default()
        });
        self.op(name, op, &[x, w, b])
    }

    /// Batched matmul of `x: [.., K]` with a weight `[K, out]`, plus a bias `[out]`.
    pub fn linear(&mut self, name: &str, x: Value, out: u64) -> NetResult<Value> {
        let fin = self.shape(x).last().copied().unwrap_or(0);
        let w = self.weight(&format!("{name}.weight"), &[fin, out])?;
        let mm = self.op(
            &format!("{name}.matmul"),
            Op::MatMul { activation: None },
            &[x, w],
        )?;
        let b = self.weight(&format!("{name}.bias"), &[out])?;
        self.binary(name, BinaryOp::Add, mm, b, None)
    }

    fn pool(
        &mut self,
        name: &str,
        x: Value,
        k: u64,
        s: u64,
        padding: Padding,
        max: bool,
    ) -> NetResult<Value> {
        let pads = pads_for(padding, self.hw(x), [k, k], [s, s], [1, 1]);
        let p = Pool2d {
            kernel: [k, k],
            strides: [s, s],
            pads,
            ceil_mode: false,
            count_include_pad: false,
        };
        let op = if max { Op::MaxPool(p) } else { Op::AvgPool(p) };
        self.op(name, op, &[x])
    }

    pub fn max_pool(
        &mut self,
        name: &str,
        x: Value,
        k: u64,
        s: u64,
        p: Padding,
    ) -> NetResult<Value> {
        self.pool(name, x, k, s, p, true)
    }

    pub fn avg_pool(
        &mut self,
        name: &str,
        x: Value,
        k: u64,
        s: u64,
        p: Padding,
    ) -> NetResult<Value> {
        self.pool(name, x, k, s, p, false)
    }

    /// Max pooling with `ceil_mode` (Caffe/PyTorch style, as in SqueezeNet and GoogLeNet).
    pub fn max_pool_ceil(
        &mut self,
        name: &str,
        x: Value,
        k: u64,
        s: u64,
        pad: u64,
    ) -> NetResult<Value> {
        let p = Pool2d {
            kernel: [k, k],
            strides: [s, s],
            pads: [pad; 4],
            ceil_mode: true,
            count_include_pad: false,
        };
        self.op(name, Op::MaxPool(p), &[x])
    }

    pub fn global_avg_pool(&mut self, name: &str, x: Value) -> NetResult<Value> {
        self.op(name, Op::GlobalAvgPool, &[x])
    }

    pub fn concat(&mut self, name: &str, xs: &[Value], axis: i64) -> NetResult<Value> {
        self.op(name, Op::Concat { axis }, xs)
    }

    pub fn binary(
        &mut self,
        name: &str,
        op: BinaryOp,
        a: Value,
        b: Value,
        act: Option<Activation>,
    ) -> NetResult<Value> {
        self.op(
            name,
            Op::Binary {
                op,
                activation: act,
            },
            &[a, b],
        )
    }

    pub fn add(&mut self, name: &str, a: Value, b: Value) -> NetResult<Value> {
        self.binary(name, BinaryOp::Add, a, b, None)
    }

    pub fn mul(&mut self, name: &str, a: Value, b: Value) -> NetResult<Value> {
        self.binary(name, BinaryOp::Mul, a, b, None)
    }

    pub fn unary(&mut self, name: &str, x: Value, u: UnaryOp) -> NetResult<Value> {
        self.op(name, Op::Unary(u), &[x])
    }

    pub fn reshape(&mut self, name: &str, x: Value, shape: &[i64]) -> NetResult<Value> {
        self.op(name, Op::reshape(shape.to_vec()), &[x])
    }

    pub fn transpose(&mut self, name: &str, x: Value, perm: &[u64]) -> NetResult<Value> {
        self.op(
            name,
            Op::Transpose {
                perm: perm.to_vec(),
            },
            &[x],
        )
    }

    pub fn softmax(&mut self, name: &str, x: Value, axis: i64) -> NetResult<Value> {
        self.op(name, Op::Softmax { axis }, &[x])
    }

    pub fn matmul(&mut self, name: &str, a: Value, b: Value) -> NetResult<Value> {
        self.op(name, Op::MatMul { activation: None }, &[a, b])
    }

    /// Constant zero padding; `pads` is ONNX's `[begins..., ends...]`.
    pub fn pad(&mut self, name: &str, x: Value, pads: &[u64]) -> NetResult<Value> {
        let op = Op::Pad {
            pads: pads.to_vec(),
            mode: PadMode::Constant,
            value: 0.0,
        };
        self.op(name, op, &[x])
    }

    /// Bilinear resize of an NCHW value to `[h, w]`.
    pub fn resize_bilinear(
        &mut self,
        name: &str,
        x: Value,
        size: [u64; 2],
        align_corners: bool,
    ) -> NetResult<Value> {
        let op = Op::Resize(Resize {
            size,
            scale: None,
            mode: ResizeMode::Bilinear,
            coord: if align_corners {
                CoordMode::AlignCorners
            } else {
                CoordMode::HalfPixel
            },
            nearest: NearestMode::RoundPreferFloor,
        });
        self.op(name, op, &[x])
    }

    /// Nearest-neighbour resize of an NCHW value to `[h, w]`.
    pub fn resize_nearest(&mut self, name: &str, x: Value, size: [u64; 2]) -> NetResult<Value> {
        let op = Op::Resize(Resize {
            size,
            scale: None,
            mode: ResizeMode::Nearest,
            coord: CoordMode::Asymmetric,
            nearest: NearestMode::Floor,
        });
        self.op(name, op, &[x])
    }

    pub fn split(
        &mut self,
        name: &str,
        x: Value,
        axis: i64,
        sizes: &[u64],
    ) -> NetResult<Vec<Value>> {
        let op = Op::Split {
            axis,
            sizes: sizes.to_vec(),
        };
        let results = self.b.op_multi(op, &[x])?;
        // Split results are auto-named; `name` only reserves the layer name.
        self.claim(name)?;
        Ok(results)
    }

    pub fn slice(
        &mut self,
        name: &str,
        x: Value,
        axis: i64,
        start: i64,
        end: i64,
    ) -> NetResult<Value> {
        let op = Op::Slice(Slice {
            starts: vec![start],
            ends: vec![end],
            axes: vec![axis],
            steps: vec![1],
        });
        self.op(name, op, &[x])
    }

    /// Layer normalisation over the last axis, with scale and bias weights.
    pub fn layer_norm(&mut self, name: &str, x: Value) -> NetResult<Value> {
        let d = self.shape(x).last().copied().unwrap_or(0);
        let s = self.weight(&format!("{name}.weight"), &[d])?;
        let b = self.weight(&format!("{name}.bias"), &[d])?;
        let op = Op::LayerNorm {
            axis: -1,
            epsilon: 1e-12,
        };
        self.op(name, op, &[x, s, b])
    }

    /// Finishes the network returning `outputs`.
    pub fn finish(self, outputs: &[Value]) -> Module {
        self.b.finish(outputs)
    }
}
