//! Element types and statically shaped tensor types.

use std::fmt;
use std::str::FromStr;

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

/// A statically shaped tensor type: `tensor<1x3x224x224xf32>`. A rank-0 tensor is `tensor<f32>`.
///
/// Dimensions may be zero (an empty tensor); they are never symbolic.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub shape: Vec<u64>,
    pub dtype: DType,
}

impl TensorType {
    pub fn new(shape: impl Into<Vec<u64>>, dtype: DType) -> Self {
        TensorType {
            shape: shape.into(),
            dtype,
        }
    }

    pub fn f32(shape: impl Into<Vec<u64>>) -> Self {
        TensorType::new(shape, DType::F32)
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements, or `None` on u64 overflow.
    pub fn num_elements(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    /// Size in bytes, or `None` on u64 overflow.
    pub fn byte_size(&self) -> Option<u64> {
        self.num_elements()?.checked_mul(self.dtype.byte_size())
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.dtype)
    }
}
