//! Why a model cannot be imported: errors as data, rendered once by their `Display`.
//!
//! Every string that comes from the model file (value and node names, op types, domains,
//! attribute strings, symbolic dimension names, external-data locations) is stored as read and
//! shown through [`shown`], so a hostile name can neither put raw control bytes on a terminal
//! nor make a message megabytes long.

use crate::import::{MAX_OPSET, MIN_OPSET};
use crate::tensor::{MAX_FOLDED_BYTES, MAX_TENSOR_BYTES};
use std::fmt;
use tir_ir::shape::ShapeError;
use tir_ir::{DType, TensorType};

/// Why a model cannot be imported. Node errors name the node's index in the graph, its name
/// and its op type.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read `{}`: {message}", shown(.path))]
    Io { path: String, message: String },
    /// The protobuf decoder's message (it names fields, never the model's strings).
    #[error("not a valid ONNX model: {0}")]
    Decode(String),
    #[error("the model has no graph")]
    NoGraph,
    #[error("the model imports no default-domain opset")]
    NoDefaultOpset,
    #[error("opset {opset} is not supported (supported: {MIN_OPSET} to {MAX_OPSET})")]
    Opset { opset: i64 },
    #[error("sparse initializers are not supported")]
    SparseInitializers,
    /// A `--dim NAME=VALUE` whose name no graph input uses.
    #[error("--dim `{}` names no symbolic dimension of the graph inputs", shown(.name))]
    UnusedDim { name: String },
    /// A `--bind NAME=FILE` whose name is no graph input (an initializer is bound already).
    #[error("--bind `{}` names no graph input", shown(.name))]
    UnboundName { name: String },
    #[error("graph input `{}`: {problem}", shown(.name))]
    Input { name: String, problem: InputError },
    #[error("initializer `{}`: {problem}", shown(.name))]
    Initializer { name: String, problem: TensorError },
    #[error("node {index} {} ({}): {problem}", node_name(.name), shown(.op_type))]
    Node {
        index: usize,
        name: String,
        op_type: String,
        /// Boxed: the node's identity is what callers match on, and a large `Err` would
        /// make every `Result` of the importer as large.
        problem: Box<NodeError>,
    },
    #[error("graph output `{}` is not defined by any node, initializer or graph input", shown(.name))]
    UndefinedOutput { name: String },
    /// The importer built a module the verifier rejects: a bug in the importer, never the
    /// model's fault (every model problem is one of the other variants).
    #[error("internal error: the imported module does not verify: {}", .0.join("; "))]
    Verify(Vec<String>),
}

/// Why a graph input cannot become a function parameter.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("only tensor inputs are supported")]
    NotTensor,
    #[error(transparent)]
    ElemType(#[from] DTypeError),
    #[error("the input has no shape (its rank is unknown)")]
    NoShape,
    #[error("dimension {axis} is negative ({dim})")]
    NegativeDim { axis: usize, dim: i64 },
    #[error("dimension {axis} is symbolic (`{p}`); give it a value with --dim {p}=N", p = shown(.param))]
    Symbolic { axis: usize, param: String },
    #[error("dimension {axis} is unknown")]
    UnknownDim { axis: usize },
    #[error(transparent)]
    Oversized(#[from] Oversized),
}

/// An ONNX element type the IR has no counterpart for.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DTypeError {
    #[error("unknown ONNX element type {code}")]
    Unknown { code: i64 },
    #[error(
        "element type {name} is not supported (the IR has f32, f16, bf16, i8, u8, i32, i64, bool)"
    )]
    Unsupported { name: &'static str },
}

/// A shape past what an imported tensor may have (see [`MAX_TENSOR_BYTES`]); `axis` is the
/// dimension that takes it past the limit.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "dimension {axis} ({dim}) of {ty} is too large: the dimensions of an imported tensor times \
     its element size may multiply to at most {MAX_TENSOR_BYTES} (1 TiB)"
)]
pub struct Oversized {
    pub axis: usize,
    pub dim: u64,
    pub ty: TensorType,
}

/// Why a `TensorProto` (an initializer, a `Constant`'s value) or a folded constant cannot be
/// held.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TensorError {
    #[error(transparent)]
    ElemType(#[from] DTypeError),
    #[error("negative dimension {dim}")]
    NegativeDim { dim: i64 },
    #[error(transparent)]
    Oversized(#[from] Oversized),
    #[error("segmented tensors are not supported")]
    Segmented,
    #[error("raw_data has {got} bytes, but shape {shape:?} of {dtype} needs {want}")]
    RawDataLen {
        got: usize,
        shape: Vec<u64>,
        dtype: DType,
        want: u64,
    },
    #[error("holds {got} values, but shape {shape:?} needs {want}")]
    TypedDataLen {
        got: usize,
        shape: Vec<u64>,
        want: u64,
    },
    #[error("a constant of shape {shape:?} and type {dtype} is too large (limit {MAX_FOLDED_BYTES} bytes)")]
    TooLarge { shape: Vec<u64>, dtype: DType },
    #[error("external data `{}` is not a number: `{}`", shown(.key), shown(.value))]
    ExternalNotNumber { key: String, value: String },
    #[error("external data without a `location`")]
    ExternalNoLocation,
    #[error("external data location `{}` must be a relative path inside the model's directory", shown(.location))]
    ExternalOutside { location: String },
    #[error("external data length {length} does not match the {want} bytes the shape needs")]
    ExternalLength { length: u64, want: u64 },
    #[error("external data offset overflows")]
    ExternalOffsetOverflow,
    #[error("cannot read external data file `{}`: {message}", shown(.path))]
    ExternalRead { path: String, message: String },
    #[error("external data file `{}` has {file_len} bytes, but bytes {offset}..{end} are needed", shown(.path))]
    ExternalShort {
        path: String,
        file_len: u64,
        offset: u64,
        end: u64,
    },
}

/// Why an attribute cannot be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AttrError {
    #[error("attribute `{name}` is required")]
    Missing { name: &'static str },
    /// `found` is `None` for a type code the ONNX schema does not define.
    #[error("attribute `{name}` must be {want}, found {}", .found.unwrap_or("an unknown type"))]
    WrongType {
        name: &'static str,
        want: &'static str,
        found: Option<&'static str>,
    },
    #[error("attribute `{name}` is not valid UTF-8")]
    NotUtf8 { name: &'static str },
    #[error("attribute `{name}` holds no tensor")]
    NoTensor { name: &'static str },
    #[error("attribute `{name}`: {problem}")]
    Tensor {
        name: &'static str,
        problem: TensorError,
    },
    #[error("attribute `{name}` must be positive, got {value}")]
    NotPositive { name: &'static str, value: i64 },
}

/// Why a node cannot be imported. `what` fields name an input or attribute in ONNX's words.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NodeError {
    // The node as a whole.
    #[error("ops of domain `{}` are not supported (only the default ONNX domain)", shown(.domain))]
    Domain { domain: String },
    #[error("the node has no op type")]
    NoOpType,
    /// An op the IR has no counterpart for, in the opset the model imports.
    #[error("the IR has no `{}` op (not supported)", shown(.op_type))]
    Unsupported { op_type: String, opset: i64 },
    #[error("`{op}` is supported only on constants (shape computations); here an input is computed at run time and the IR has no such op", op = shown(.op_type))]
    OnlyOnConstants { op_type: String },
    /// An op whose result shape depends on the values of an input computed at run time
    /// (NonZero's count of non-zero elements): static memory planning sizes every buffer at
    /// compile time, so no plan can hold it.
    #[error("the shape of `{}`'s result depends on the values of input {index} ({what}), which are computed at run time; static memory planning needs every shape at compile time (a constant input is folded)", shown(.op_type))]
    ValueDependentShape {
        op_type: String,
        index: usize,
        what: &'static str,
    },
    #[error("input `{}` is not defined by any earlier node, initializer or graph input", shown(.name))]
    UndefinedInput { name: String },
    #[error("input {index}{} is required", .what.map(|w| format!(" ({w})")).unwrap_or_default())]
    MissingInput {
        index: usize,
        what: Option<&'static str>,
    },
    #[error("{what} (input {index}) must be a constant, but it is computed at run time")]
    NotConstant { index: usize, what: &'static str },
    #[error("output {index} (`{}`) is used, but only the first {keep} output(s) are supported", shown(.name))]
    ExtraOutputUsed {
        index: usize,
        name: String,
        keep: usize,
    },
    #[error("output `{}`: {problem}", shown(.output))]
    Oversized { output: String, problem: Oversized },
    #[error(transparent)]
    Attr(#[from] AttrError),
    #[error(transparent)]
    ElemType(#[from] DTypeError),
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// The IR's shape rule refuses the operands (its message says why).
    #[error("{}", .0.message)]
    Shape(ShapeError),
    #[error("Attention: {problem}")]
    Attention { problem: String },
    /// RMSNormalization/LayerNormalization statistics in another type than float32.
    #[error("stash_type = {value} is not supported (only 1: statistics in float32)")]
    StashType { value: i64 },
    #[error("training_mode must be {expected} for inference")]
    Training { expected: &'static str },
    /// An operator imported as a composition of IR ops, refused for the reason given.
    #[error("{op}: {problem}")]
    Composite { op: &'static str, problem: String },

    // Values of attributes and constant inputs.
    #[error("`{what}` must not be negative, got {values:?}")]
    Negative {
        what: &'static str,
        values: Vec<i64>,
    },
    #[error("`{what}` has {count} values; only 2-D (two spatial axes) is supported")]
    NotTwoD { what: &'static str, count: usize },
    #[error("{what} must be positive")]
    NotPositive { what: &'static str },
    #[error("axis {axis} is out of range for rank {rank}")]
    AxisOutOfRange { axis: i64, rank: usize },
    #[error("axis {axis} is given twice")]
    AxisTwice { axis: i64 },
    #[error("the axes are required")]
    AxesRequired,
    #[error("{what} must be a scalar, got shape {shape:?}")]
    NotScalar { what: &'static str, shape: Vec<u64> },
    #[error("{what} overflows")]
    Overflow { what: &'static str },
    /// `{attribute} = 1` where only 0 is supported.
    #[error("{attribute} = 1 is not supported")]
    FlagSet { attribute: &'static str },
    /// A string attribute with a value the importer does not implement; `text` is the message
    /// after the value.
    #[error("{what} \"{}\" is not supported{text}", shown(.value))]
    StringValue {
        what: &'static str,
        value: String,
        text: &'static str,
    },

    // Element-wise.
    #[error("attribute `approximate` = \"{}\" is not supported (only \"none\", the exact erf form, and \"tanh\")", shown(.value))]
    GeluApproximate { value: String },
    #[error("min ({min}) is greater than max ({max})")]
    ClipRange { min: f64, max: f64 },

    // Convolution and pooling.
    #[error("only 2-D convolution is supported (rank-4 input and weight), got ranks {input} and {weight}")]
    ConvRank { input: usize, weight: usize },
    #[error("kernel_shape {attribute:?} does not match the weight's {weight:?}")]
    KernelShape {
        attribute: Vec<i64>,
        weight: [u64; 2],
    },
    #[error("`pads` has {count} values; 2-D needs 4")]
    PadsCount { count: usize },
    #[error("attribute `auto_pad` has an unknown value \"{}\"", shown(.value))]
    AutoPad { value: String },
    #[error("only 2-D pooling is supported (rank-4 input), got rank {rank}")]
    PoolRank { rank: usize },
    #[error("dilations {dilations:?} are not supported (only 1)")]
    PoolDilations { dilations: Vec<i64> },
    #[error("the output size {out} on spatial axis {axis} needs padding the IR cannot express: the full transposed convolution there is {full}, and the output cannot start before it")]
    ConvTransposeOutput { axis: usize, full: i128, out: i128 },

    // Shape and layout.
    #[error("Split has no outputs")]
    SplitNoOutputs,
    #[error("{pieces} pieces requested for {outputs} outputs")]
    SplitPieces { pieces: u64, outputs: u64 },
    #[error("axis {axis} of size {size} cannot be split evenly into {outputs} outputs")]
    SplitUneven {
        axis: usize,
        size: u64,
        outputs: u64,
    },
    #[error("{sizes} split sizes for {outputs} outputs")]
    SplitSizes { sizes: usize, outputs: u64 },
    #[error("zero-size pieces ({sizes:?}) are not supported by the IR's split")]
    SplitZero { sizes: Vec<u64> },
    #[error("starts, ends, axes and steps must have the same length")]
    SliceLengths,
    #[error("steps must not be zero")]
    SliceStepZero,
    #[error("shape entry {entry} is 0 (copy), but the input has rank {rank}")]
    ReshapeCopy { entry: usize, rank: usize },
    #[error("the shape has more than one -1")]
    ReshapeInferTwice,
    #[error("shape entry {entry} is {value}")]
    ReshapeEntry { entry: usize, value: i64 },
    /// `target_elements` is `None` when the target has a `-1` that no whole number fills.
    #[error("cannot reshape {from:?} ({elements} elements) to {target:?}{}", .target_elements.map(|n| format!(" ({n} elements)")).unwrap_or_default())]
    Reshape {
        from: Vec<u64>,
        elements: u64,
        target: Vec<i64>,
        target_elements: Option<u64>,
    },
    #[error("{pads} pads for {axes} axes (expected {})", 2 * .axes)]
    PadAxes { pads: usize, axes: usize },
    #[error("negative pads {pads:?} (cropping) are not supported")]
    NegativePads { pads: Vec<i64> },

    // Resize.
    #[error("only rank-4 (NCHW) inputs are supported, got rank {rank}")]
    ResizeRank { rank: usize },
    #[error("only one of scales and sizes may be given")]
    ScalesAndSizes,
    #[error("one of scales (input 2) and sizes (input 3) is required")]
    NoScalesNorSizes,
    #[error("{count} {what} for {axes} axes")]
    ResizeCount {
        what: &'static str,
        count: usize,
        axes: usize,
    },
    #[error("negative size {size}")]
    NegativeSize { size: i64 },
    #[error("scale {scale} must be positive")]
    ScaleNotPositive { scale: f64 },
    #[error("scale {scale} on axis {axis} (size {size}) gives the fractional size {exact}; only whole output sizes are supported (give sizes instead)")]
    FractionalScale {
        scale: f64,
        axis: usize,
        size: u64,
        exact: f64,
    },
    #[error("resizing the batch or channel axis ({from:?} → {to:?}) is not supported")]
    ResizeBatchOrChannel { from: [u64; 2], to: [u64; 2] },
    #[error("the output size {size:?} must be positive")]
    ResizeEmpty { size: [u64; 2] },

    // Folding constants.
    #[error("a Constant needs one of the attributes value, value_float(s), value_int(s) (strings and sparse tensors are not supported)")]
    ConstantValue,
    #[error("attribute `value` must hold one element")]
    FillValue,
    #[error("Range's delta must not be zero")]
    RangeDelta,
    #[error("Range's start, limit and delta must be scalars of one type, got {start}, {limit} and {delta}")]
    RangeOperands {
        start: DType,
        limit: DType,
        delta: DType,
    },
    #[error("the constant of shape {shape:?} is too large to fold")]
    FoldTooLarge { shape: Vec<u64> },
    #[error("index {index} is out of range for axis {axis} of size {size}")]
    GatherIndex { index: i64, axis: usize, size: i64 },
    #[error("integer division by zero")]
    DivisionByZero,
    // Symbolic dims (inputs kept dynamic at import).
    /// What the node needs a static extent for, and the operand's symbolic type.
    #[error("{what} needs a static shape, but the input's shape is {shape}; give its dims values with --dim NAME=N")]
    SymbolicShape { what: &'static str, shape: String },
    #[error("{what} (input {index}) is a shape computed from symbolic dims ({value}); the IR needs it constant here")]
    SymbolicValue {
        index: usize,
        what: &'static str,
        value: String,
    },
    #[error("`{}` is a shape computed from symbolic dims ({value}): it can feed shape parameters (Reshape's target), not be a tensor at run time", shown(.name))]
    SymbolicOperand { name: String, value: String },
}

impl From<ShapeError> for NodeError {
    fn from(e: ShapeError) -> Self {
        NodeError::Shape(e)
    }
}

/// The longest a name from the model is shown, in characters of its escaped form: the same
/// window the `.tir` diagnostics show of a long source line (`tir_ir::diag`).
pub const MAX_SHOWN: usize = 100;

/// `s` as a message shows it: escaped as Rust's `escape_debug` escapes (control characters,
/// backslash, unprintable characters; quotes are left alone since messages delimit names with
/// backticks), and, past [`MAX_SHOWN`] characters, its head and tail around `...` — the tail
/// is kept because exporters' names differ mostly at their end (`/layer4/conv2/Conv_output_0`).
pub fn shown(s: &str) -> Shown<'_> {
    Shown(s)
}

/// See [`shown`].
pub struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pieces: Vec<String> = self.0.chars().map(escape_char).collect();
        let width = |p: &[String]| p.iter().map(|s| s.chars().count()).sum::<usize>();
        if width(&pieces) <= MAX_SHOWN {
            return pieces.iter().try_for_each(|p| f.write_str(p));
        }
        // Two thirds of the window for the head, the rest (less the `...`) for the tail; whole
        // escapes only, so a cut never splits `\u{1b}`.
        let budget = MAX_SHOWN - 3;
        let mut head = 0;
        let mut used = 0;
        while head < pieces.len() && used + pieces[head].chars().count() <= budget * 2 / 3 {
            used += pieces[head].chars().count();
            head += 1;
        }
        let mut tail = pieces.len();
        while tail > head && used + pieces[tail - 1].chars().count() <= budget {
            used += pieces[tail - 1].chars().count();
            tail -= 1;
        }
        pieces[..head].iter().try_for_each(|p| f.write_str(p))?;
        f.write_str("...")?;
        pieces[tail..].iter().try_for_each(|p| f.write_str(p))
    }
}

fn escape_char(c: char) -> String {
    match c {
        '"' | '\'' => c.to_string(),
        c => c.escape_debug().to_string(),
    }
}

fn node_name(name: &str) -> String {
    if name.is_empty() {
        "<unnamed>".into()
    } else {
        format!("`{}`", shown(name))
    }
}

impl Oversized {
    /// The first dimension of `shape` that takes a tensor of `dtype` past
    /// [`MAX_TENSOR_BYTES`], counting a zero dimension as one so that no dimension of an
    /// empty tensor is unbounded either (strides are products of the dimensions).
    pub fn check(shape: &[u64], dtype: DType) -> Result<(), Oversized> {
        let mut bytes = dtype.byte_size();
        for (axis, &dim) in shape.iter().enumerate() {
            bytes = bytes.saturating_mul(dim.max(1));
            if bytes > MAX_TENSOR_BYTES {
                return Err(Oversized {
                    axis,
                    dim,
                    ty: TensorType::new(shape.to_vec(), dtype),
                });
            }
        }
        Ok(())
    }
}
