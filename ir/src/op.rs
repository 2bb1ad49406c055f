//! The closed set of operations, with ONNX semantics on NCHW tensors.
//!
//! Adding a variant breaks the build everywhere that must handle it: attribute reading and
//! writing here, the shape rule in `shape.rs`, and every later pass and backend.

use crate::attr::{Attr, AttrError, AttrReader, AttrWriter};
use crate::span::Span;
use crate::sym::DimExpr;
use std::fmt;
use std::str::FromStr;

/// An activation fused into the op that produces its input, as TFLite stores its models
/// (`fused_activation_function`). The seed paper's figures count such fused graphs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    Relu,
    Relu6,
    /// `min(max(x, -1), 1)`, TFLite's `RELU_N1_TO_1`.
    ReluN1To1,
    Tanh,
    Sigmoid,
    HardSwish,
}

impl Activation {
    pub const ALL: [Activation; 6] = [
        Activation::Relu,
        Activation::Relu6,
        Activation::ReluN1To1,
        Activation::Tanh,
        Activation::Sigmoid,
        Activation::HardSwish,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Relu6 => "relu6",
            Activation::ReluN1To1 => "relu_n1_to_1",
            Activation::Tanh => "tanh",
            Activation::Sigmoid => "sigmoid",
            Activation::HardSwish => "hard_swish",
        }
    }
}

macro_rules! word_enum {
    ($ty:ident { $($variant:ident => $name:literal),* $(,)? }) => {
        impl FromStr for $ty {
            type Err = ();
            fn from_str(s: &str) -> Result<Self, ()> {
                match s { $($name => Ok($ty::$variant),)* _ => Err(()) }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $($ty::$variant => $name,)* })
            }
        }
    };
}

word_enum!(Activation {
    Relu => "relu", Relu6 => "relu6", ReluN1To1 => "relu_n1_to_1", Tanh => "tanh",
    Sigmoid => "sigmoid", HardSwish => "hard_swish",
});

/// Element-wise binary arithmetic with NumPy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `a ^ b` (ONNX Pow on f32: `powf`, NaN for a negative base and a non-integer exponent).
    Pow,
    /// The larger of the two (ONNX Max with two inputs; NaN if either is NaN).
    Max,
    /// The smaller of the two (ONNX Min with two inputs; NaN if either is NaN).
    Min,
}

/// Element-wise unary functions without attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Relu,
    /// `min(max(x, 0), 6)`.
    Relu6,
    Sigmoid,
    Tanh,
    /// `x * relu6(x + 3) / 6` (MobileNet v3).
    HardSwish,
    /// `0.5 x (1 + erf(x / sqrt 2))`, the exact form (ONNX Gelu, `approximate = "none"`).
    Gelu,
    Exp,
    Abs,
    Neg,
    Sqrt,
    /// `1 / x`.
    Reciprocal,
    /// The natural logarithm.
    Log,
    Floor,
    Ceil,
    /// Round half to even (ONNX Round).
    Round,
    /// The error function.
    Erf,
    Sin,
    Cos,
    /// `ln(1 + e^x)`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `tan(x)`.
    Tan,
    /// `asin(x)`, NaN outside [-1, 1].
    Asin,
    /// `acos(x)`, NaN outside [-1, 1].
    Acos,
    /// `atan(x)`.
    Atan,
    /// `sinh(x)`.
    Sinh,
    /// `cosh(x)`.
    Cosh,
    /// `asinh(x)`.
    Asinh,
    /// `acosh(x)`, NaN below 1.
    Acosh,
    /// `atanh(x)`, NaN outside [-1, 1].
    Atanh,
    /// 1 for positive, -1 for negative, `x` itself for ±0 and NaN (ONNX Sign).
    Sign,
}

impl UnaryOp {
    /// Every unary function, in declaration order (tests and the parser walk it).
    pub const ALL: [UnaryOp; 30] = [
        UnaryOp::Relu,
        UnaryOp::Relu6,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::HardSwish,
        UnaryOp::Gelu,
        UnaryOp::Exp,
        UnaryOp::Abs,
        UnaryOp::Neg,
        UnaryOp::Sqrt,
        UnaryOp::Reciprocal,
        UnaryOp::Log,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Erf,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Softplus,
        UnaryOp::Softsign,
        UnaryOp::Tan,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
        UnaryOp::Sign,
    ];

    /// The op's name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Relu => "relu",
            UnaryOp::Relu6 => "relu6",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::HardSwish => "hard_swish",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Exp => "exp",
            UnaryOp::Abs => "abs",
            UnaryOp::Neg => "neg",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Log => "log",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Erf => "erf",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Softplus => "softplus",
            UnaryOp::Softsign => "softsign",
            UnaryOp::Tan => "tan",
            UnaryOp::Asin => "asin",
            UnaryOp::Acos => "acos",
            UnaryOp::Atan => "atan",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Asinh => "asinh",
            UnaryOp::Acosh => "acosh",
            UnaryOp::Atanh => "atanh",
            UnaryOp::Sign => "sign",
        }
    }
}

/// What a [`Op::Reduce`] computes over the reduced elements `x` (ONNX's Reduce* ops); over no
/// elements each gives its identity (0 for the sums, 1 for the product, −∞ for max, log-sum
/// and log-sum-exp, +∞ for min; the mean of nothing is NaN, 0/0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// `Σx / n`.
    Mean,
    /// `Σx`.
    Sum,
    /// The largest element (NaN if any is NaN).
    Max,
    /// The smallest element (NaN if any is NaN).
    Min,
    /// `Πx`.
    Prod,
    /// `Σ|x|`.
    L1,
    /// `sqrt(Σx²)`.
    L2,
    /// `Σx²`.
    SumSquare,
    /// `ln(Σx)`.
    LogSum,
    /// `ln(Σ exp(x))`.
    LogSumExp,
}

impl ReduceKind {
    /// Every reduction, in declaration order (tests and the parser walk it).
    pub const ALL: [ReduceKind; 10] = [
        ReduceKind::Mean,
        ReduceKind::Sum,
        ReduceKind::Max,
        ReduceKind::Min,
        ReduceKind::Prod,
        ReduceKind::L1,
        ReduceKind::L2,
        ReduceKind::SumSquare,
        ReduceKind::LogSum,
        ReduceKind::LogSumExp,
    ];

    /// The op's name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Mean => "reduce_mean",
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Max => "reduce_max",
            ReduceKind::Min => "reduce_min",
            ReduceKind::Prod => "reduce_prod",
            ReduceKind::L1 => "reduce_l1",
            ReduceKind::L2 => "reduce_l2",
            ReduceKind::SumSquare => "reduce_sum_square",
            ReduceKind::LogSum => "reduce_log_sum",
            ReduceKind::LogSumExp => "reduce_log_sum_exp",
        }
    }

    /// The accumulator before any element.
    pub fn init(self) -> f64 {
        match self {
            ReduceKind::Max => f64::NEG_INFINITY,
            ReduceKind::Min => f64::INFINITY,
            ReduceKind::Prod => 1.0,
            _ => 0.0,
        }
    }

    /// The accumulator after element `x` (in f64).
    pub fn step(self, acc: f64, x: f64) -> f64 {
        match self {
            ReduceKind::Mean | ReduceKind::Sum | ReduceKind::LogSum => acc + x,
            // NaN propagates: once the accumulator is NaN no comparison replaces it.
            ReduceKind::Max => {
                if x > acc || x.is_nan() {
                    x
                } else {
                    acc
                }
            }
            ReduceKind::Min => {
                if x < acc || x.is_nan() {
                    x
                } else {
                    acc
                }
            }
            ReduceKind::Prod => acc * x,
            ReduceKind::L1 => acc + x.abs(),
            ReduceKind::L2 | ReduceKind::SumSquare => acc + x * x,
            ReduceKind::LogSumExp => acc + x.exp(),
        }
    }

    /// The result from the accumulator of `count` elements.
    pub fn finish(self, acc: f64, count: usize) -> f64 {
        match self {
            ReduceKind::Mean => acc / count as f64,
            ReduceKind::L2 => acc.sqrt(),
            ReduceKind::LogSum | ReduceKind::LogSumExp => acc.ln(),
            _ => acc,
        }
    }
}

impl BinaryOp {
    /// Every binary function, in declaration order.
    pub const ALL: [BinaryOp; 7] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
    ];

    /// The op's name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
        }
    }
}

/// Element-wise comparison with NumPy broadcasting; the result is `bool` (ONNX Equal, Less,
/// LessOrEqual, Greater, GreaterOrEqual). Any comparison with a NaN is false.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl CompareOp {
    pub const ALL: [CompareOp; 5] = [
        CompareOp::Equal,
        CompareOp::Less,
        CompareOp::LessOrEqual,
        CompareOp::Greater,
        CompareOp::GreaterOrEqual,
    ];

    /// The op's name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Equal => "equal",
            CompareOp::Less => "less",
            CompareOp::LessOrEqual => "less_or_equal",
            CompareOp::Greater => "greater",
            CompareOp::GreaterOrEqual => "greater_or_equal",
        }
    }

    /// `a op b` on values of one ordered type.
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CompareOp::Equal => a == b,
            CompareOp::Less => a < b,
            CompareOp::LessOrEqual => a <= b,
            CompareOp::Greater => a > b,
            CompareOp::GreaterOrEqual => a >= b,
        }
    }
}

/// Element-wise logic on `bool` tensors with NumPy broadcasting (ONNX And, Or, Xor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogicalOp {
    And,
    Or,
    Xor,
}

impl LogicalOp {
    pub const ALL: [LogicalOp; 3] = [LogicalOp::And, LogicalOp::Or, LogicalOp::Xor];

    /// The op's name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            LogicalOp::And => "and",
            LogicalOp::Or => "or",
            LogicalOp::Xor => "xor",
        }
    }

    pub fn apply(self, a: bool, b: bool) -> bool {
        match self {
            LogicalOp::And => a && b,
            LogicalOp::Or => a || b,
            LogicalOp::Xor => a != b,
        }
    }
}

/// Padding mode of `pad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
}
word_enum!(PadMode { Constant => "constant", Reflect => "reflect", Edge => "edge" });

/// Interpolation of `resize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResizeMode {
    Nearest,
    Bilinear,
}
word_enum!(ResizeMode { Nearest => "nearest", Bilinear => "bilinear" });

/// How `resize` maps an output coordinate to an input coordinate (ONNX
/// `coordinate_transformation_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoordMode {
    HalfPixel,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
}
word_enum!(CoordMode {
    HalfPixel => "half_pixel", PytorchHalfPixel => "pytorch_half_pixel",
    AlignCorners => "align_corners", Asymmetric => "asymmetric",
});

/// Rounding of the source index in nearest-neighbour `resize` (ONNX `nearest_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}
word_enum!(NearestMode {
    RoundPreferFloor => "round_prefer_floor", RoundPreferCeil => "round_prefer_ceil",
    Floor => "floor", Ceil => "ceil",
});

/// How `grid_sample` reads between pixels (ONNX GridSample `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleMode {
    Bilinear,
    Nearest,
    /// Keys' cubic convolution with `a = -0.75` over 4×4 pixels.
    Bicubic,
}
word_enum!(SampleMode { Bilinear => "bilinear", Nearest => "nearest", Bicubic => "bicubic" });

/// What `grid_sample` reads outside the input (ONNX GridSample `padding_mode`): zeros, the
/// nearest border pixel, or the input mirrored at its border.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GridPadding {
    Zeros,
    Border,
    Reflection,
}
word_enum!(GridPadding { Zeros => "zeros", Border => "border", Reflection => "reflection" });

/// 2-D convolution (ONNX Conv on NCHW). Operands: input `[N, C, H, W]`, weight
/// `[M, C/groups, kH, kW]`, optional bias `[M]`, optional residual of the result's type
/// (only after a bias): `act(conv(x) + bias + residual)`, a ResNet block's skip add fused
/// into its last convolution as onnxruntime does.
///
/// With `prelu` (written `activation = prelu`) the activation is a PReLU whose slope is the
/// last operand, one value per output channel (`[M]`, `[M, 1, 1]`, `[1, M, 1, 1]`) or one
/// for all (any shape of one element): `prelu((bias + Σ) + residual, slope[m])`, a
/// mediapipe block's `conv → add → prelu` as one op. The bias is then required, so the
/// operands are `x, w, b, slope` or `x, w, b, residual, slope`.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv2d {
    pub strides: [u64; 2],
    pub dilations: [u64; 2],
    /// `[top, left, bottom, right]`, ONNX's `[x1_begin, x2_begin, x1_end, x2_end]`.
    pub pads: [u64; 4],
    pub groups: u64,
    pub activation: Option<Activation>,
    /// A PReLU activation with a slope operand (then `activation` is `None`).
    pub prelu: bool,
}

impl Default for Conv2d {
    fn default() -> Self {
        Conv2d {
            strides: [1, 1],
            dilations: [1, 1],
            pads: [0; 4],
            groups: 1,
            activation: None,
            prelu: false,
        }
    }
}

impl Conv2d {
    /// The index of the residual among `n` operands, if there is one.
    pub fn residual_index(&self, n: usize) -> Option<usize> {
        let with = if self.prelu { 5 } else { 4 };
        (n == with).then_some(3)
    }

    /// The index of the PReLU slope among `n` operands, if the activation is a PReLU.
    pub fn slope_index(&self, n: usize) -> Option<usize> {
        (self.prelu && n >= 4).then(|| n - 1)
    }
}

/// What a conv2d's `activation` attribute may name: a fused activation, or `prelu`.
enum ConvActivation {
    Act(Activation),
    Prelu,
}

impl FromStr for ConvActivation {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "prelu" => Ok(ConvActivation::Prelu),
            _ => s.parse().map(ConvActivation::Act),
        }
    }
}

/// 2-D transposed convolution (ONNX ConvTranspose on NCHW), the gradient of [`Conv2d`] with
/// respect to its input. Operands: input `[N, C, H, W]`, weight `[C, M/groups, kH, kW]`
/// (ONNX's layout: input channels first), optional bias `[M]`.
///
/// Input pixel `(iy, ix)` scatters into the full output at `(iy*sH + i*dH, ix*sW + j*dW)`;
/// the result is that full output with `pads` cropped from its borders and `output_padding`
/// rows and columns (bias only) added at its end, so an explicit output size (ONNX
/// `output_shape`, TFLite's `output_shape` input) is a choice of pads and `output_padding`
/// made at import.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvTranspose {
    pub strides: [u64; 2],
    pub dilations: [u64; 2],
    /// `[top, left, bottom, right]` cropped from the full output, as [`Conv2d::pads`].
    pub pads: [u64; 4],
    /// `[bottom, right]`: extra output rows and columns at the end (ONNX `output_padding`).
    pub output_padding: [u64; 2],
    pub groups: u64,
    pub activation: Option<Activation>,
}

impl Default for ConvTranspose {
    fn default() -> Self {
        ConvTranspose {
            strides: [1, 1],
            dilations: [1, 1],
            pads: [0; 4],
            output_padding: [0, 0],
            groups: 1,
            activation: None,
        }
    }
}

/// 2-D max or average pooling on NCHW.
#[derive(Clone, Debug, PartialEq)]
pub struct Pool2d {
    pub kernel: [u64; 2],
    pub strides: [u64; 2],
    pub pads: [u64; 4],
    /// Output size rounds up instead of down (ONNX `ceil_mode`).
    pub ceil_mode: bool,
    /// Average pooling only: padded cells count in the divisor.
    pub count_include_pad: bool,
}

/// General matrix multiply `alpha * op(A) op(B) + beta * C` (ONNX Gemm), rank-2 operands.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemm {
    pub trans_a: bool,
    pub trans_b: bool,
    pub alpha: f64,
    pub beta: f64,
    pub activation: Option<Activation>,
}

impl Default for Gemm {
    fn default() -> Self {
        Gemm {
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 1.0,
            activation: None,
        }
    }
}

/// ONNX Slice with every input folded to a static attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    pub starts: Vec<i64>,
    pub ends: Vec<i64>,
    /// Defaults to `0..starts.len()`.
    pub axes: Vec<i64>,
    /// Defaults to all ones.
    pub steps: Vec<i64>,
}

/// ONNX Resize on the two spatial axes of an NCHW tensor, to a static output size.
#[derive(Clone, Debug, PartialEq)]
pub struct Resize {
    /// Output `[H, W]` (`[0, 0]` when `scale` gives it).
    pub size: [u64; 2],
    /// Integer factors `[sh, sw]`: the output is `[H·sh, W·sw]` whatever the input's extent.
    /// What an importer writes for an input with symbolic spatial dims (`size` cannot name
    /// them); `None` in every static resize.
    pub scale: Option<[u64; 2]>,
    pub mode: ResizeMode,
    pub coord: CoordMode,
    pub nearest: NearestMode,
}

/// ONNX GridSample on NCHW: operands input `[N, C, H, W]` and grid `[N, Ho, Wo, 2]`, result
/// `[N, C, Ho, Wo]`. Grid entry `(x, y)` is a position normalised to `[-1, 1]`: with
/// `align_corners` -1 and 1 are the centres of the corner pixels (`x_in = (x + 1) / 2 · (W - 1)`),
/// without it their outer edges (`x_in = ((x + 1) · W - 1) / 2`).
#[derive(Clone, Debug, PartialEq)]
pub struct GridSample {
    pub mode: SampleMode,
    pub padding: GridPadding,
    pub align_corners: bool,
}

/// One entry of a `reshape` target.
#[derive(Clone, Debug, PartialEq)]
pub enum ReshapeDim {
    /// `-1`: what the element count leaves, inferred (at most one per target).
    Infer,
    /// A size: a literal (`120`), or an expression in the function's dims (`{n}`, `{h*w}`),
    /// which a dynamic model needs when more than one entry of its target is symbolic
    /// (`[n, 120, h, w]` to `[n, 120, h*w]`: `[{n}, 120, -1]`).
    Size(DimExpr),
}

impl ReshapeDim {
    /// ONNX's and the static IR's spelling: `-1` infers, any other value is a literal size.
    /// (Negative literals other than `-1` are refused where a target is read.)
    pub fn from_int(d: i64) -> ReshapeDim {
        if d == -1 {
            ReshapeDim::Infer
        } else {
            ReshapeDim::Size(DimExpr::constant(i128::from(d)))
        }
    }

    /// The literal, or `-1` for the inferred entry; `None` for a symbolic size.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            ReshapeDim::Infer => Some(-1),
            ReshapeDim::Size(e) => e.as_constant().and_then(|c| i64::try_from(c).ok()),
        }
    }
}

impl fmt::Display for ReshapeDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReshapeDim::Infer => f.write_str("-1"),
            ReshapeDim::Size(e) if e.is_constant() => write!(f, "{e}"),
            ReshapeDim::Size(e) => write!(f, "{{{e}}}"),
        }
    }
}

/// A reshape target as the text writes it: `[1, -1]`, `[{n}, 120, -1]`.
pub fn reshape_text(shape: &[ReshapeDim]) -> String {
    let items: Vec<String> = shape.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// One operation. The enum is closed: every pass matches on it exhaustively.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A weight: named tensor from the weights file, or generated from a seed when none is given.
    Const {
        name: String,
    },
    Conv2d(Conv2d),
    ConvTranspose(ConvTranspose),
    /// NumPy matmul semantics (batched, broadcast over leading dims).
    MatMul {
        activation: Option<Activation>,
    },
    Gemm(Gemm),
    Binary {
        op: BinaryOp,
        activation: Option<Activation>,
    },
    Unary(UnaryOp),
    Clip {
        min: f64,
        max: f64,
    },
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid {
        alpha: f64,
        beta: f64,
    },
    /// `x < 0 ? slope * x : x`, slope broadcast to x.
    Prelu,
    MaxPool(Pool2d),
    AvgPool(Pool2d),
    GlobalAvgPool,
    Concat {
        axis: i64,
    },
    /// Splits along `axis` into pieces of the given sizes; one result per piece.
    Split {
        axis: i64,
        sizes: Vec<u64>,
    },
    Slice(Slice),
    /// Target shape: sizes (literals, or expressions in the function's dims) and at most one
    /// `-1`, which is inferred. (ONNX's `0` is resolved at import.)
    Reshape {
        shape: Vec<ReshapeDim>,
    },
    Flatten {
        axis: i64,
    },
    Squeeze {
        axes: Vec<i64>,
    },
    Unsqueeze {
        axes: Vec<i64>,
    },
    Transpose {
        perm: Vec<u64>,
    },
    Softmax {
        axis: i64,
    },
    /// `x - max - ln(sum(exp(x - max)))` along `axis`: the logarithm of `softmax`, computed
    /// without forming the quotient (ONNX LogSoftmax), so tiny probabilities keep their digits.
    LogSoftmax {
        axis: i64,
    },
    /// `pads` is ONNX's `[x1_begin, x2_begin, ..., x1_end, x2_end, ...]`, 2 × rank values.
    Pad {
        pads: Vec<u64>,
        mode: PadMode,
        value: f64,
    },
    /// Inference batch normalisation. Operands: x, scale, bias, mean, var (each `[C]`).
    BatchNorm {
        epsilon: f64,
    },
    /// Normalisation over the axes from `axis` on. Operands: x, scale, optional bias.
    LayerNorm {
        axis: i64,
        epsilon: f64,
    },
    /// A reduction over `axes` (ONNX's Reduce* family), accumulated in f64.
    Reduce {
        kind: ReduceKind,
        axes: Vec<i64>,
        keepdims: bool,
    },
    Resize(Resize),
    /// The upper (`upper`) or lower triangle of every matrix in the last two axes, the other
    /// elements zero (ONNX Trilu): element `[.., i, j]` is kept when `j - i >= k` (upper) or
    /// `j - i <= k` (lower).
    Trilu {
        upper: bool,
        k: i64,
    },
    /// Element-wise conversion to `to` (ONNX Cast): float to integer truncates toward zero
    /// (saturating at the integer's range, NaN giving 0), integer to integer wraps, to `bool`
    /// is "not zero", from `bool` gives 0 or 1, float to float rounds to nearest even.
    Cast {
        to: crate::types::DType,
    },
    /// `a op b` with broadcasting; operands of one element type, result `bool`.
    Compare(CompareOp),
    /// `cond ? x : y` with three-way broadcasting (ONNX Where); `cond` is `bool`, `x` and `y`
    /// share the result's element type.
    Where,
    /// `a op b` on `bool` tensors with broadcasting.
    Logical(LogicalOp),
    /// Logical negation of a `bool` tensor.
    Not,
    /// The index (`i64`) of the largest (`max`) or smallest element along `axis` (ONNX ArgMax,
    /// ArgMin): the first such index, or the last with `select_last_index`; a NaN is the
    /// extreme (NumPy's choice).
    ArgReduce {
        max: bool,
        axis: i64,
        keepdims: bool,
        select_last_index: bool,
    },
    /// The remainder of `a / b` with broadcasting (ONNX Mod): with `fmod`, C's `fmod` (the
    /// sign of `a`; floats need it), else the sign of `b` (Python's `%`, integers only). An
    /// integer remainder by zero is 0.
    Mod {
        fmod: bool,
    },
    /// The arena every intermediate lives in after bufferization: `size` bytes aligned to
    /// `align`. Its value is `tensor<size x u8>`.
    AllocSlab {
        size: u64,
        align: u64,
    },
    /// A buffer at `offset` bytes inside its operand (the slab, or a larger buffer it is a part
    /// of: a view, or a slice of a concat's output). Its type is declared.
    AllocTensor {
        offset: u64,
    },
    GridSample(GridSample),
    /// The running sum along `axis` (ONNX CumSum), summed sequentially in the element type:
    /// `y[0] = x[0]`, `y[j] = y[j-1] + x[j]` (f32: one rounding per step, NumPy's
    /// `cumsum`; integers wrap). With `exclusive` element `j` leaves out `x[j]` (`y[0] = 0`,
    /// `y[j] = y[j-1] + x[j-1]`); with `reverse` the sum runs from the end of the axis.
    CumSum {
        axis: i64,
        exclusive: bool,
        reverse: bool,
    },
    /// The `k` largest (`largest`) or smallest elements along `axis` and their indices (ONNX
    /// TopK with a constant K): two results, the values (the operand's type) and the `i64`
    /// indices, in order, best first. Equal values keep the lower index first; a NaN is
    /// greater than every number (NumPy's sort order), so it comes first when `largest`.
    TopK {
        axis: i64,
        k: u64,
        largest: bool,
    },
}

/// How many operands an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    Exactly(usize),
    Range(usize, usize),
    AtLeast(usize),
}

impl Arity {
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Exactly(k) => n == k,
            Arity::Range(lo, hi) => (lo..=hi).contains(&n),
            Arity::AtLeast(k) => n >= k,
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        match *self {
            Arity::Exactly(k) => write!(f, "{k} operand{}", plural(k)),
            Arity::Range(lo, hi) => write!(f, "{lo} to {hi} operands"),
            Arity::AtLeast(k) => write!(f, "at least {k} operand{}", plural(k)),
        }
    }
}

/// What an op is to the passes that order ops and place their results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Computes its results from its operands: one step of the execution order, an
    /// *operator* of the seed paper's usage records.
    Operator,
    /// `const`: data that exists before the model runs, so it occupies no operator index
    /// and no slab bytes.
    Weight,
    /// `alloc_slab`, `alloc_tensor`: say where results live after bufferization and compute
    /// nothing; the interpreter skips them and the passes that order ops refuse them.
    Buffer,
}

/// Which bytes an operator's result may occupy besides a buffer of its own: what buffer
/// sharing (`plan{sharing=true}`) and the buffer checker rely on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alias {
    /// Only a buffer of its own (or a slice of a concat's output, which `concat` itself
    /// decides).
    Own,
    /// A view: the result reinterprets its first operand's bytes (same data, new shape).
    View,
    /// Element-wise: output element `i` depends only on element `i` of a same-typed operand,
    /// so writing the output over that operand is safe.
    InPlace,
}

/// The properties of an op that passes and backends decide by, from [`Op::props`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpProps {
    pub role: Role,
    pub alias: Alias,
    /// The result type is written in the text and checked, not inferred by a shape rule.
    pub declared_type: bool,
}

/// Every op name the text accepts, for "unknown op" hints and docs.
pub const OP_NAMES: &[&str] = &[
    "const",
    "conv2d",
    "conv_transpose",
    "matmul",
    "gemm",
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "max",
    "min",
    "relu",
    "relu6",
    "sigmoid",
    "tanh",
    "hard_swish",
    "gelu",
    "exp",
    "abs",
    "neg",
    "sqrt",
    "reciprocal",
    "log",
    "floor",
    "ceil",
    "round",
    "erf",
    "sin",
    "cos",
    "softplus",
    "softsign",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "sign",
    "clip",
    "hard_sigmoid",
    "prelu",
    "max_pool",
    "avg_pool",
    "global_avg_pool",
    "concat",
    "split",
    "slice",
    "reshape",
    "flatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "softmax",
    "log_softmax",
    "pad",
    "batch_norm",
    "layer_norm",
    "reduce_mean",
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_l1",
    "reduce_l2",
    "reduce_sum_square",
    "reduce_log_sum",
    "reduce_log_sum_exp",
    "resize",
    "trilu",
    "cast",
    "equal",
    "less",
    "less_or_equal",
    "greater",
    "greater_or_equal",
    "where",
    "and",
    "or",
    "xor",
    "not",
    "argmax",
    "argmin",
    "mod",
    "alloc_slab",
    "alloc_tensor",
    "grid_sample",
    "cumsum",
    "top_k",
];

impl Op {
    /// A `reshape` to literal sizes, `-1` inferring one entry: the static spelling.
    pub fn reshape(shape: Vec<i64>) -> Op {
        Op::Reshape {
            shape: shape.into_iter().map(ReshapeDim::from_int).collect(),
        }
    }

    /// The op's name as written in the text.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Const { .. } => "const",
            Op::Conv2d(_) => "conv2d",
            Op::ConvTranspose(_) => "conv_transpose",
            Op::MatMul { .. } => "matmul",
            Op::Gemm(_) => "gemm",
            Op::Binary { op, .. } => op.name(),
            Op::Unary(u) => u.name(),
            Op::Clip { .. } => "clip",
            Op::HardSigmoid { .. } => "hard_sigmoid",
            Op::Prelu => "prelu",
            Op::MaxPool(_) => "max_pool",
            Op::AvgPool(_) => "avg_pool",
            Op::GlobalAvgPool => "global_avg_pool",
            Op::Concat { .. } => "concat",
            Op::Split { .. } => "split",
            Op::Slice(_) => "slice",
            Op::Reshape { .. } => "reshape",
            Op::Flatten { .. } => "flatten",
            Op::Squeeze { .. } => "squeeze",
            Op::Unsqueeze { .. } => "unsqueeze",
            Op::Transpose { .. } => "transpose",
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::Pad { .. } => "pad",
            Op::BatchNorm { .. } => "batch_norm",
            Op::LayerNorm { .. } => "layer_norm",
            Op::Reduce { kind, .. } => kind.name(),
            Op::Resize(_) => "resize",
            Op::Trilu { .. } => "trilu",
            Op::Cast { .. } => "cast",
            Op::Compare(c) => c.name(),
            Op::Where => "where",
            Op::Logical(l) => l.name(),
            Op::Not => "not",
            Op::ArgReduce { max: true, .. } => "argmax",
            Op::ArgReduce { max: false, .. } => "argmin",
            Op::Mod { .. } => "mod",
            Op::AllocSlab { .. } => "alloc_slab",
            Op::AllocTensor { .. } => "alloc_tensor",
            Op::GridSample(_) => "grid_sample",
            Op::CumSum { .. } => "cumsum",
            Op::TopK { .. } => "top_k",
        }
    }

    pub fn arity(&self) -> Arity {
        match self {
            Op::Const { .. } | Op::AllocSlab { .. } => Arity::Exactly(0),
            Op::AllocTensor { .. } => Arity::Exactly(1),
            // conv2d's fourth operand is the residual (it needs the bias before it); a PReLU
            // activation's slope comes last, after the bias (and the residual, if any).
            Op::Conv2d(c) if c.prelu => Arity::Range(4, 5),
            Op::Conv2d(_) => Arity::Range(2, 4),
            Op::ConvTranspose(_) | Op::Gemm(_) => Arity::Range(2, 3),
            Op::MatMul { .. } | Op::Binary { .. } | Op::Prelu => Arity::Exactly(2),
            Op::LayerNorm { .. } => Arity::Range(2, 3),
            Op::BatchNorm { .. } => Arity::Exactly(5),
            Op::Compare(_) | Op::Logical(_) | Op::Mod { .. } => Arity::Exactly(2),
            Op::Where => Arity::Exactly(3),
            Op::GridSample(_) => Arity::Exactly(2),
            Op::Cast { .. } | Op::Not | Op::ArgReduce { .. } => Arity::Exactly(1),
            Op::Concat { .. } => Arity::AtLeast(1),
            Op::Unary(_)
            | Op::Clip { .. }
            | Op::HardSigmoid { .. }
            | Op::MaxPool(_)
            | Op::AvgPool(_)
            | Op::GlobalAvgPool
            | Op::Split { .. }
            | Op::Slice(_)
            | Op::Reshape { .. }
            | Op::Flatten { .. }
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Transpose { .. }
            | Op::Softmax { .. }
            | Op::LogSoftmax { .. }
            | Op::Pad { .. }
            | Op::Reduce { .. }
            | Op::Resize(_)
            | Op::Trilu { .. }
            | Op::CumSum { .. }
            | Op::TopK { .. } => Arity::Exactly(1),
        }
    }

    /// Number of results; only `split` and `top_k` (values, indices) have more than one.
    pub fn num_results(&self) -> usize {
        match self {
            Op::Split { sizes, .. } => sizes.len(),
            Op::TopK { .. } => 2,
            Op::Const { .. }
            | Op::Conv2d(_)
            | Op::ConvTranspose(_)
            | Op::MatMul { .. }
            | Op::Gemm(_)
            | Op::Binary { .. }
            | Op::Unary(_)
            | Op::Clip { .. }
            | Op::HardSigmoid { .. }
            | Op::Prelu
            | Op::MaxPool(_)
            | Op::AvgPool(_)
            | Op::GlobalAvgPool
            | Op::Concat { .. }
            | Op::Slice(_)
            | Op::Reshape { .. }
            | Op::Flatten { .. }
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Transpose { .. }
            | Op::Softmax { .. }
            | Op::LogSoftmax { .. }
            | Op::Pad { .. }
            | Op::BatchNorm { .. }
            | Op::LayerNorm { .. }
            | Op::Reduce { .. }
            | Op::Resize(_)
            | Op::Trilu { .. }
            | Op::Cast { .. }
            | Op::Compare(_)
            | Op::Where
            | Op::Logical(_)
            | Op::Not
            | Op::ArgReduce { .. }
            | Op::Mod { .. }
            | Op::AllocSlab { .. }
            | Op::AllocTensor { .. }
            | Op::GridSample(_)
            | Op::CumSum { .. } => 1,
        }
    }

    /// The fused activation, for the ops that carry one.
    pub fn activation(&self) -> Option<Activation> {
        match self {
            Op::Conv2d(c) => c.activation,
            Op::ConvTranspose(c) => c.activation,
            Op::Gemm(g) => g.activation,
            Op::MatMul { activation } | Op::Binary { activation, .. } => *activation,
            Op::Const { .. }
            | Op::Unary(_)
            | Op::Clip { .. }
            | Op::HardSigmoid { .. }
            | Op::Prelu
            | Op::MaxPool(_)
            | Op::AvgPool(_)
            | Op::GlobalAvgPool
            | Op::Concat { .. }
            | Op::Split { .. }
            | Op::Slice(_)
            | Op::Reshape { .. }
            | Op::Flatten { .. }
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Transpose { .. }
            | Op::Softmax { .. }
            | Op::LogSoftmax { .. }
            | Op::Pad { .. }
            | Op::BatchNorm { .. }
            | Op::LayerNorm { .. }
            | Op::Reduce { .. }
            | Op::Resize(_)
            | Op::Trilu { .. }
            | Op::Cast { .. }
            | Op::Compare(_)
            | Op::Where
            | Op::Logical(_)
            | Op::Not
            | Op::ArgReduce { .. }
            | Op::Mod { .. }
            | Op::AllocSlab { .. }
            | Op::AllocTensor { .. }
            | Op::GridSample(_)
            | Op::CumSum { .. }
            | Op::TopK { .. } => None,
        }
    }

    /// The op's properties: the one table every pass and backend asks, so that a new op
    /// cannot compile without saying whether it is an operator, a view or element-wise (a
    /// default would silently keep it out of buffer sharing, or out of the execution order).
    pub fn props(&self) -> OpProps {
        use Alias::{InPlace, Own, View};
        use Role::{Buffer, Operator, Weight};
        let (role, alias, declared_type) = match self {
            Op::Const { .. } => (Weight, Own, true),
            Op::Conv2d(_) => (Operator, Own, false),
            // Every output pixel sums many input pixels: never written over its input.
            Op::ConvTranspose(_) => (Operator, Own, false),
            Op::MatMul { .. } => (Operator, Own, false),
            Op::Gemm(_) => (Operator, Own, false),
            Op::Binary { .. } => (Operator, InPlace, false),
            Op::Unary(_) => (Operator, InPlace, false),
            Op::Clip { .. } => (Operator, InPlace, false),
            Op::HardSigmoid { .. } => (Operator, InPlace, false),
            Op::Prelu => (Operator, InPlace, false),
            Op::MaxPool(_) => (Operator, Own, false),
            Op::AvgPool(_) => (Operator, Own, false),
            Op::GlobalAvgPool => (Operator, Own, false),
            Op::Concat { .. } => (Operator, Own, false),
            Op::Split { .. } => (Operator, Own, false),
            Op::Slice(_) => (Operator, Own, false),
            Op::Reshape { .. } => (Operator, View, false),
            Op::Flatten { .. } => (Operator, View, false),
            Op::Squeeze { .. } => (Operator, View, false),
            Op::Unsqueeze { .. } => (Operator, View, false),
            Op::Transpose { .. } => (Operator, Own, false),
            Op::Softmax { .. } | Op::LogSoftmax { .. } => (Operator, Own, false),
            Op::Pad { .. } => (Operator, Own, false),
            // Element-wise in `x`; scale, bias, mean and variance are read per channel.
            Op::BatchNorm { .. } => (Operator, InPlace, false),
            Op::LayerNorm { .. } => (Operator, Own, false),
            Op::Reduce { .. } => (Operator, Own, false),
            Op::Resize(_) => (Operator, Own, false),
            // Element `i` of the result is element `i` of `x` or zero.
            Op::Trilu { .. } => (Operator, InPlace, false),
            // The result's element type differs from the operands' (or, for `where`, the
            // condition's), so it never overwrites them.
            Op::Cast { .. } | Op::Compare(_) | Op::Where => (Operator, Own, false),
            Op::ArgReduce { .. } => (Operator, Own, false),
            Op::Logical(_) | Op::Not => (Operator, InPlace, false),
            Op::Mod { .. } => (Operator, InPlace, false),
            Op::AllocSlab { .. } => (Buffer, Own, false),
            Op::AllocTensor { .. } => (Buffer, Own, true),
            // An output pixel reads input pixels anywhere in its image.
            Op::GridSample(_) => (Operator, Own, false),
            // Element `j` reads every earlier element of its line.
            Op::CumSum { .. } => (Operator, Own, false),
            // Each result element may come from anywhere along the axis.
            Op::TopK { .. } => (Operator, Own, false),
        };
        OpProps {
            role,
            alias,
            declared_type,
        }
    }

    pub fn role(&self) -> Role {
        self.props().role
    }

    /// Whether the op counts in the execution order (weights and buffer ops are data).
    pub fn is_operator(&self) -> bool {
        self.role() == Role::Operator
    }

    /// `alloc_slab` or `alloc_tensor`.
    pub fn is_buffer_op(&self) -> bool {
        self.role() == Role::Buffer
    }

    /// Whether the result only reinterprets its first operand's bytes (same data, new shape).
    pub fn is_view(&self) -> bool {
        self.props().alias == Alias::View
    }

    /// Whether the result may be written over a same-typed operand (see [`Alias::InPlace`]).
    pub fn is_elementwise(&self) -> bool {
        self.props().alias == Alias::InPlace
    }

    /// Builds an op from its name and attribute dictionary, reporting every bad attribute.
    /// Returns `Ok(None)` for a name that is not an op.
    pub fn from_parts(
        name: &str,
        attrs: &[Attr],
        span: Span,
    ) -> Result<Option<Op>, Vec<AttrError>> {
        let Some(&name) = OP_NAMES.iter().find(|n| **n == name) else {
            return Ok(None);
        };
        let mut r = AttrReader::new(name, attrs, span);
        let (op, known): (Op, &[&str]) = match name {
            "const" => (
                Op::Const {
                    name: r.string_req("name"),
                },
                &["name"],
            ),
            "conv2d" => {
                let d = Conv2d::default();
                let strides = r.uints_n("strides", d.strides);
                let dilations = r.uints_n("dilations", d.dilations);
                let pads = r.uints_n("pads", d.pads);
                let groups = r.uint("groups", d.groups);
                let act = r.word("activation", CONV_ACTIVATIONS);
                let c = Conv2d {
                    strides,
                    dilations,
                    pads,
                    groups,
                    activation: match act {
                        Some(ConvActivation::Act(a)) => Some(a),
                        _ => None,
                    },
                    prelu: matches!(act, Some(ConvActivation::Prelu)),
                };
                positive(&mut r, "strides", &c.strides);
                positive(&mut r, "dilations", &c.dilations);
                if c.groups == 0 {
                    r.bad("groups", "must be positive");
                }
                (
                    Op::Conv2d(c),
                    &["strides", "dilations", "pads", "groups", "activation"],
                )
            }
            "conv_transpose" => {
                let d = ConvTranspose::default();
                let c = ConvTranspose {
                    strides: r.uints_n("strides", d.strides),
                    dilations: r.uints_n("dilations", d.dilations),
                    pads: r.uints_n("pads", d.pads),
                    output_padding: r.uints_n("output_padding", d.output_padding),
                    groups: r.uint("groups", d.groups),
                    activation: r.word("activation", ACTIVATIONS),
                };
                positive(&mut r, "strides", &c.strides);
                positive(&mut r, "dilations", &c.dilations);
                if c.groups == 0 {
                    r.bad("groups", "must be positive");
                }
                (
                    Op::ConvTranspose(c),
                    &[
                        "strides",
                        "dilations",
                        "pads",
                        "output_padding",
                        "groups",
                        "activation",
                    ],
                )
            }
            "matmul" => (
                Op::MatMul {
                    activation: r.word("activation", ACTIVATIONS),
                },
                &["activation"],
            ),
            "gemm" => {
                let d = Gemm::default();
                let g = Gemm {
                    trans_a: r.bool("trans_a", d.trans_a),
                    trans_b: r.bool("trans_b", d.trans_b),
                    alpha: r.float("alpha", d.alpha),
                    beta: r.float("beta", d.beta),
                    activation: r.word("activation", ACTIVATIONS),
                };
                (
                    Op::Gemm(g),
                    &["trans_a", "trans_b", "alpha", "beta", "activation"],
                )
            }
            _ if BinaryOp::ALL.iter().any(|b| b.name() == name) => {
                let op = *BinaryOp::ALL
                    .iter()
                    .find(|b| b.name() == name)
                    .expect("matched above");
                (
                    Op::Binary {
                        op,
                        activation: r.word("activation", ACTIVATIONS),
                    },
                    &["activation"],
                )
            }
            _ if UnaryOp::ALL.iter().any(|u| u.name() == name) => {
                let u = *UnaryOp::ALL
                    .iter()
                    .find(|u| u.name() == name)
                    .expect("matched above");
                (Op::Unary(u), &[])
            }
            "clip" => {
                let min = r.float("min", f64::NEG_INFINITY);
                let max = r.float("max", f64::INFINITY);
                if min > max {
                    r.bad("min", format!("min ({min}) is greater than max ({max})"));
                }
                (Op::Clip { min, max }, &["min", "max"])
            }
            "hard_sigmoid" => (
                Op::HardSigmoid {
                    alpha: r.float("alpha", 0.2),
                    beta: r.float("beta", 0.5),
                },
                &["alpha", "beta"],
            ),
            "prelu" => (Op::Prelu, &[]),
            "max_pool" | "avg_pool" => {
                let kernel = r.uints_n_req("kernel");
                let p = Pool2d {
                    kernel,
                    strides: r.uints_n("strides", [1, 1]),
                    pads: r.uints_n("pads", [0; 4]),
                    ceil_mode: r.bool("ceil_mode", false),
                    count_include_pad: if name == "avg_pool" {
                        r.bool("count_include_pad", false)
                    } else {
                        false
                    },
                };
                positive(&mut r, "strides", &p.strides);
                if name == "max_pool" {
                    (Op::MaxPool(p), &["kernel", "strides", "pads", "ceil_mode"])
                } else {
                    (
                        Op::AvgPool(p),
                        &[
                            "kernel",
                            "strides",
                            "pads",
                            "ceil_mode",
                            "count_include_pad",
                        ],
                    )
                }
            }
            "global_avg_pool" => (Op::GlobalAvgPool, &[]),
            "concat" => (
                Op::Concat {
                    axis: r.int_req("axis"),
                },
                &["axis"],
            ),
            "split" => {
                let axis = r.int_req("axis");
                let sizes = r.ints_req("sizes");
                let mut ok = Vec::with_capacity(sizes.len());
                for s in sizes {
                    if s <= 0 {
                        r.bad("sizes", format!("sizes must be positive, got {s}"));
                    } else {
                        ok.push(s as u64);
                    }
                }
                if ok.is_empty()
                    && !r.errors.iter().any(|e| {
                        matches!(
                            e,
                            AttrError::BadValue { .. }
                                | AttrError::Missing { .. }
                                | AttrError::WrongType { .. }
                        )
                    })
                {
                    r.bad("sizes", "must name at least one piece");
                }
                (Op::Split { axis, sizes: ok }, &["axis", "sizes"])
            }
            "slice" => {
                let starts = r.ints_req("starts");
                let ends = r.ints_req("ends");
                let axes = r
                    .ints_opt("axes")
                    .unwrap_or_else(|| (0..starts.len() as i64).collect());
                let steps = r.ints_opt("steps").unwrap_or_else(|| vec![1; starts.len()]);
                if ends.len() != starts.len()
                    || axes.len() != starts.len()
                    || steps.len() != starts.len()
                {
                    r.bad(
                        "ends",
                        "starts, ends, axes and steps must have the same length",
                    );
                }
                if steps.contains(&0) {
                    r.bad("steps", "steps must not be zero");
                }
                (
                    Op::Slice(Slice {
                        starts,
                        ends,
                        axes,
                        steps,
                    }),
                    &["starts", "ends", "axes", "steps"],
                )
            }
            "reshape" => {
                let shape = r.reshape_dims("shape");
                if shape.iter().filter(|d| **d == ReshapeDim::Infer).count() > 1 {
                    r.bad("shape", "at most one dimension may be -1");
                }
                (Op::Reshape { shape }, &["shape"])
            }
            "flatten" => (
                Op::Flatten {
                    axis: r.int("axis", 1),
                },
                &["axis"],
            ),
            "squeeze" => (
                Op::Squeeze {
                    axes: r.ints_req("axes"),
                },
                &["axes"],
            ),
            "unsqueeze" => (
                Op::Unsqueeze {
                    axes: r.ints_req("axes"),
                },
                &["axes"],
            ),
            "transpose" => {
                let perm = r.ints_req("perm");
                let mut ok = Vec::with_capacity(perm.len());
                for p in perm {
                    if p < 0 {
                        r.bad("perm", format!("entries must not be negative, got {p}"));
                    } else {
                        ok.push(p as u64);
                    }
                }
                (Op::Transpose { perm: ok }, &["perm"])
            }
            "softmax" => (
                Op::Softmax {
                    axis: r.int("axis", -1),
                },
                &["axis"],
            ),
            "log_softmax" => (
                Op::LogSoftmax {
                    axis: r.int("axis", -1),
                },
                &["axis"],
            ),
            "pad" => {
                let pads = r.ints_req("pads");
                let mut ok = Vec::with_capacity(pads.len());
                for p in pads {
                    if p < 0 {
                        r.bad(
                            "pads",
                            format!("negative padding is not supported, got {p}"),
                        );
                    } else {
                        ok.push(p as u64);
                    }
                }
                let mode = r
                    .word("mode", "`constant`, `reflect` or `edge`")
                    .unwrap_or(PadMode::Constant);
                let value = r.float("value", 0.0);
                (
                    Op::Pad {
                        pads: ok,
                        mode,
                        value,
                    },
                    &["pads", "mode", "value"],
                )
            }
            "batch_norm" => (
                Op::BatchNorm {
                    epsilon: r.float("epsilon", 1e-5),
                },
                &["epsilon"],
            ),
            "layer_norm" => (
                Op::LayerNorm {
                    axis: r.int("axis", -1),
                    epsilon: r.float("epsilon", 1e-5),
                },
                &["axis", "epsilon"],
            ),
            _ if ReduceKind::ALL.iter().any(|k| k.name() == name) => (
                Op::Reduce {
                    kind: *ReduceKind::ALL
                        .iter()
                        .find(|k| k.name() == name)
                        .expect("matched above"),
                    axes: r.ints_req("axes"),
                    keepdims: r.bool("keepdims", true),
                },
                &["axes", "keepdims"],
            ),
            "resize" => {
                // `scale = [sh, sw]` instead of `size` (a resize of symbolic extent).
                let scale = r.has("scale").then(|| r.uints_n_req("scale"));
                let size = if scale.is_some() {
                    [0, 0]
                } else {
                    r.uints_n_req("size")
                };
                let mode = r
                    .word("mode", "`nearest` or `bilinear`")
                    .unwrap_or(ResizeMode::Nearest);
                let coord = r
                    .word(
                        "coordinate_transformation_mode",
                        "a coordinate transformation mode",
                    )
                    .unwrap_or(CoordMode::HalfPixel);
                let nearest = r
                    .word("nearest_mode", "a nearest mode")
                    .unwrap_or(NearestMode::RoundPreferFloor);
                (
                    Op::Resize(Resize {
                        size,
                        scale,
                        mode,
                        coord,
                        nearest,
                    }),
                    &[
                        "size",
                        "scale",
                        "mode",
                        "coordinate_transformation_mode",
                        "nearest_mode",
                    ],
                )
            }
            "trilu" => (
                Op::Trilu {
                    upper: r.bool("upper", true),
                    k: r.int("k", 0),
                },
                &["upper", "k"],
            ),
            "cast" => {
                let to = r.word(
                    "to",
                    "an element type (`f32`, `f16`, `bf16`, `i8`, `u8`, `i32`, `i64`, `bool`)",
                );
                if to.is_none() && !r.has("to") {
                    r.string_req("to");
                }
                (
                    Op::Cast {
                        to: to.unwrap_or(crate::types::DType::F32),
                    },
                    &["to"],
                )
            }
            _ if CompareOp::ALL.iter().any(|c| c.name() == name) => {
                let c = *CompareOp::ALL
                    .iter()
                    .find(|c| c.name() == name)
                    .expect("matched above");
                (Op::Compare(c), &[])
            }
            "where" => (Op::Where, &[]),
            _ if LogicalOp::ALL.iter().any(|l| l.name() == name) => {
                let l = *LogicalOp::ALL
                    .iter()
                    .find(|l| l.name() == name)
                    .expect("matched above");
                (Op::Logical(l), &[])
            }
            "not" => (Op::Not, &[]),
            "mod" => (
                Op::Mod {
                    fmod: r.bool("fmod", false),
                },
                &["fmod"],
            ),
            "argmax" | "argmin" => (
                Op::ArgReduce {
                    max: name == "argmax",
                    axis: r.int("axis", 0),
                    keepdims: r.bool("keepdims", true),
                    select_last_index: r.bool("select_last_index", false),
                },
                &["axis", "keepdims", "select_last_index"],
            ),
            "alloc_slab" => {
                let size = r.uint("size", 0);
                let align = r.uint("align", 1);
                if !r.has("size") {
                    r.int_req("size");
                }
                if align == 0 || !align.is_power_of_two() {
                    r.bad("align", format!("must be a power of two, got {align}"));
                }
                (Op::AllocSlab { size, align }, &["size", "align"])
            }
            "alloc_tensor" => {
                if !r.has("offset") {
                    r.int_req("offset");
                }
                (
                    Op::AllocTensor {
                        offset: r.uint("offset", 0),
                    },
                    &["offset"],
                )
            }
            "grid_sample" => (
                Op::GridSample(GridSample {
                    mode: r
                        .word("mode", "`bilinear`, `nearest` or `bicubic`")
                        .unwrap_or(SampleMode::Bilinear),
                    padding: r
                        .word("padding_mode", "`zeros`, `border` or `reflection`")
                        .unwrap_or(GridPadding::Zeros),
                    align_corners: r.bool("align_corners", false),
                }),
                &["mode", "padding_mode", "align_corners"],
            ),
            "cumsum" => (
                Op::CumSum {
                    axis: r.int_req("axis"),
                    exclusive: r.bool("exclusive", false),
                    reverse: r.bool("reverse", false),
                },
                &["axis", "exclusive", "reverse"],
            ),
            "top_k" => {
                if !r.has("k") {
                    r.int_req("k");
                }
                let k = r.uint("k", 1);
                if k == 0 {
                    r.bad("k", "must be positive");
                }
                (
                    Op::TopK {
                        axis: r.int("axis", -1),
                        k,
                        largest: r.bool("largest", true),
                    },
                    &["axis", "k", "largest"],
                )
            }
            _ => unreachable!("every name in OP_NAMES is handled"),
        };
        let errors = r.finish(known);
        if errors.is_empty() {
            Ok(Some(op))
        } else {
            Err(errors)
        }
    }

    /// The canonical attribute list: declared order, defaults omitted.
    pub fn attrs(&self) -> Vec<(&'static str, String)> {
        let mut w = AttrWriter::default();
        let act = |w: &mut AttrWriter, a: &Option<Activation>| {
            if let Some(a) = a {
                w.word("activation", a);
            }
        };
        match self {
            Op::Const { name } => w.string("name", name),
            Op::Conv2d(c) => {
                let d = Conv2d::default();
                w.ints("strides", &c.strides, Some(&d.strides));
                w.ints("dilations", &c.dilations, Some(&d.dilations));
                w.ints("pads", &c.pads, Some(&d.pads));
                w.int("groups", c.groups as i64, Some(1));
                act(&mut w, &c.activation);
                if c.prelu {
                    w.word("activation", "prelu");
                }
            }
            Op::ConvTranspose(c) => {
                let d = ConvTranspose::default();
                w.ints("strides", &c.strides, Some(&d.strides));
                w.ints("dilations", &c.dilations, Some(&d.dilations));
                w.ints("pads", &c.pads, Some(&d.pads));
                w.ints("output_padding", &c.output_padding, Some(&d.output_padding));
                w.int("groups", c.groups as i64, Some(1));
                act(&mut w, &c.activation);
            }
            Op::MatMul { activation } | Op::Binary { activation, .. } => act(&mut w, activation),
            Op::Gemm(g) => {
                w.bool("trans_a", g.trans_a, false);
                w.bool("trans_b", g.trans_b, false);
                w.float("alpha", g.alpha, Some(1.0));
                w.float("beta", g.beta, Some(1.0));
                act(&mut w, &g.activation);
            }
            Op::Unary(_) | Op::Prelu | Op::GlobalAvgPool => {}
            Op::Clip { min, max } => {
                w.float("min", *min, Some(f64::NEG_INFINITY));
                w.float("max", *max, Some(f64::INFINITY));
            }
            Op::HardSigmoid { alpha, beta } => {
                w.float("alpha", *alpha, Some(0.2));
                w.float("beta", *beta, Some(0.5));
            }
            Op::MaxPool(p) | Op::AvgPool(p) => {
                w.ints("kernel", &p.kernel, None);
                w.ints("strides", &p.strides, Some(&[1, 1]));
                w.ints("pads", &p.pads, Some(&[0; 4]));
                w.bool("ceil_mode", p.ceil_mode, false);
                if matches!(self, Op::AvgPool(_)) {
                    w.bool("count_include_pad", p.count_include_pad, false);
                }
            }
            Op::Concat { axis } => w.int("axis", *axis, None),
            Op::Split { axis, sizes } => {
                w.int("axis", *axis, None);
                w.ints("sizes", sizes, None);
            }
            Op::Slice(s) => {
                w.ints("starts", &s.starts, None);
                w.ints("ends", &s.ends, None);
                let default_axes: Vec<i64> = (0..s.starts.len() as i64).collect();
                w.ints("axes", &s.axes, Some(&default_axes));
                w.ints("steps", &s.steps, Some(&vec![1; s.starts.len()]));
            }
            Op::Reshape { shape } => w.reshape_dims("shape", shape),
            Op::Flatten { axis } => w.int("axis", *axis, Some(1)),
            Op::Squeeze { axes } | Op::Unsqueeze { axes } => w.ints("axes", axes, None),
            Op::Transpose { perm } => w.ints("perm", perm, None),
            Op::Softmax { axis } | Op::LogSoftmax { axis } => w.int("axis", *axis, Some(-1)),
            Op::Pad { pads, mode, value } => {
                w.ints("pads", pads, None);
                if *mode != PadMode::Constant {
                    w.word("mode", mode);
                }
                w.float("value", *value, Some(0.0));
            }
            Op::BatchNorm { epsilon } => w.float("epsilon", *epsilon, Some(1e-5)),
            Op::LayerNorm { axis, epsilon } => {
                w.int("axis", *axis, Some(-1));
                w.float("epsilon", *epsilon, Some(1e-5));
            }
            Op::Reduce { axes, keepdims, .. } => {
                w.ints("axes", axes, None);
                w.bool("keepdims", *keepdims, true);
            }
            Op::Cast { to } => w.word("to", to),
            Op::Compare(_) | Op::Where | Op::Logical(_) | Op::Not => {}
            Op::Mod { fmod } => w.bool("fmod", *fmod, false),
            Op::ArgReduce {
                axis,
                keepdims,
                select_last_index,
                ..
            } => {
                w.int("axis", *axis, Some(0));
                w.bool("keepdims", *keepdims, true);
                w.bool("select_last_index", *select_last_index, false);
            }
            Op::AllocSlab { size, align } => {
                w.int("size", *size as i64, None);
                w.int("align", *align as i64, Some(1));
            }
            Op::AllocTensor { offset } => w.int("offset", *offset as i64, None),
            Op::Trilu { upper, k } => {
                w.bool("upper", *upper, true);
                w.int("k", *k, Some(0));
            }
            Op::Resize(r) => {
                match r.scale {
                    Some(s) => w.ints("scale", &s, None),
                    None => w.ints("size", &r.size, None),
                }
                if r.mode != ResizeMode::Nearest {
                    w.word("mode", r.mode);
                }
                if r.coord != CoordMode::HalfPixel {
                    w.word("coordinate_transformation_mode", r.coord);
                }
                if r.nearest != NearestMode::RoundPreferFloor {
                    w.word("nearest_mode", r.nearest);
                }
            }
            Op::GridSample(g) => {
                if g.mode != SampleMode::Bilinear {
                    w.word("mode", g.mode);
                }
                if g.padding != GridPadding::Zeros {
                    w.word("padding_mode", g.padding);
                }
                w.bool("align_corners", g.align_corners, false);
            }
            Op::CumSum {
                axis,
                exclusive,
                reverse,
            } => {
                w.int("axis", *axis, None);
                w.bool("exclusive", *exclusive, false);
                w.bool("reverse", *reverse, false);
            }
            Op::TopK { axis, k, largest } => {
                w.int("axis", *axis, Some(-1));
                w.int("k", *k as i64, None);
                w.bool("largest", *largest, true);
            }
        }
        w.items
    }
}

const CONV_ACTIVATIONS: &str =
    "an activation (`relu`, `relu6`, `relu_n1_to_1`, `tanh`, `sigmoid`, `hard_swish`, `prelu`)";
const ACTIVATIONS: &str =
    "an activation (`relu`, `relu6`, `relu_n1_to_1`, `tanh`, `sigmoid`, `hard_swish`)";

fn positive(r: &mut AttrReader<'_>, name: &'static str, v: &[u64]) {
    if v.contains(&0) {
        r.bad(name, "values must be positive");
    }
}
