//! Element types and tensor types (static, and with symbolic dims).

use std::fmt;
use std::str::FromStr;

use crate::sym::{Dim, DimExpr};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    I8,
    U8,
    I32,
    I64,
    Bool,
}

impl DType {
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::U8,
        DType::I32,
        DType::I64,
        DType::Bool,
    ];

    /// Size of one element in bytes (`bool` is stored as one byte, as in ONNX and NumPy).
    pub fn byte_size(self) -> u64 {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::I64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl FromStr for DType {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        DType::ALL.into_iter().find(|d| d.name() == s).ok_or(())
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tensor type over dimensions of type `D`: [`TensorType`] (static, `u64` dims) or
/// [`SymTensorType`] (dims are [`DimExpr`]s, in a dynamic function).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorTypeOf<D> {
    pub shape: Vec<D>,
    pub dtype: DType,
}

/// A statically shaped tensor type: `tensor<1x3x224x224xf32>`. A rank-0 tensor is `tensor<f32>`.
///
/// Dimensions may be zero (an empty tensor); they are never symbolic.
pub type TensorType = TensorTypeOf<u64>;

/// A tensor type whose dims may be symbolic: `tensor<{batch}x3x{h}x{w}xf32>`. Used only in
/// dynamic functions (see [`crate::sym`]); [`crate::specialize`] turns it into a [`TensorType`].
pub type SymTensorType = TensorTypeOf<DimExpr>;

impl<D> TensorTypeOf<D> {
    pub fn new(shape: impl Into<Vec<D>>, dtype: DType) -> Self {
        TensorTypeOf {
            shape: shape.into(),
            dtype,
        }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

impl<D: Dim> TensorTypeOf<D> {
    /// Number of elements, or `None` on overflow.
    pub fn num_elements(&self) -> Option<D> {
        self.shape.iter().try_fold(D::lit(1), |acc, d| acc.mul(d))
    }

    /// Size in bytes, or `None` on overflow.
    pub fn byte_size(&self) -> Option<D> {
        self.num_elements()?.mul(&D::lit(self.dtype.byte_size()))
    }
}

impl TensorType {
    pub fn f32(shape: impl Into<Vec<u64>>) -> Self {
        TensorType::new(shape, DType::F32)
    }

    /// The same type with constant symbolic dims.
    pub fn to_sym(&self) -> SymTensorType {
        SymTensorType::new(
            self.shape
                .iter()
                .map(|&d| DimExpr::lit(d))
                .collect::<Vec<_>>(),
            self.dtype,
        )
    }
}

impl SymTensorType {
    /// The static type, when every dim is a constant.
    pub fn to_static(&self) -> Option<TensorType> {
        let shape: Option<Vec<u64>> = self.shape.iter().map(Dim::known).collect();
        Some(TensorType::new(shape?, self.dtype))
    }

    pub fn is_static(&self) -> bool {
        self.shape.iter().all(DimExpr::is_constant)
    }
}

/// `tensor<1x3x224x224xf32>`; symbolic dims in braces: `tensor<{batch}x{h / 2}x3xf32>`.
impl<D: Dim> fmt::Display for TensorTypeOf<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            d.write_in_type(f)?;
            f.write_str("x")?;
        }
        write!(f, "{}>", self.dtype)
    }
}
