//! Host tensors: a [`TensorType`] and its elements, in row-major (C) order.
//!
//! Every element type of the IR has a representation here, so that weights files and `.npy`
//! files of any dtype can be read and written; the interpreter itself computes on `f32`
//! (see [`crate::eval`]).

use half::{bf16, f16};
use tir_ir::{DType, TensorType};

/// The elements of a tensor, one variant per IR element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    /// One byte per element in files; any non-zero byte reads as `true`.
    Bool(Vec<bool>),
}

impl Data {
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F16(_) => DType::F16,
            Data::BF16(_) => DType::BF16,
            Data::I8(_) => DType::I8,
            Data::U8(_) => DType::U8,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::F16(v) => v.len(),
            Data::BF16(v) => v.len(),
            Data::I8(v) => v.len(),
            Data::U8(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as little-endian bytes (the layout of `.npy`, safetensors and the slab).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        fn flat<T, const N: usize>(v: &[T], f: impl Fn(&T) -> [u8; N]) -> Vec<u8> {
            let mut out = Vec::with_capacity(v.len() * N);
            for x in v {
                out.extend_from_slice(&f(x));
            }
            out
        }
        match self {
            Data::F32(v) => flat(v, |x| x.to_le_bytes()),
            Data::F16(v) => flat(v, |x| x.to_le_bytes()),
            Data::BF16(v) => flat(v, |x| x.to_le_bytes()),
            Data::I8(v) => flat(v, |x| x.to_le_bytes()),
            Data::U8(v) => v.clone(),
            Data::I32(v) => flat(v, |x| x.to_le_bytes()),
            Data::I64(v) => flat(v, |x| x.to_le_bytes()),
            Data::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        }
    }

    /// Reads `bytes.len() / dtype.byte_size()` elements of `dtype`; `big_endian` swaps each
    /// element. Returns `None` when the length is not a whole number of elements.
    pub fn from_bytes(dtype: DType, bytes: &[u8], big_endian: bool) -> Option<Data> {
        fn read<T, const N: usize>(
            bytes: &[u8],
            big_endian: bool,
            f: impl Fn([u8; N]) -> T,
        ) -> Option<Vec<T>> {
            if bytes.len() % N != 0 {
                return None;
            }
            Some(
                bytes
                    .chunks_exact(N)
                    .map(|c| {
                        let mut a = [0u8; N];
                        a.copy_from_slice(c);
                        if big_endian {
                            a.reverse();
                        }
                        f(a)
                    })
                    .collect(),
            )
        }
        Some(match dtype {
            DType::F32 => Data::F32(read(bytes, big_endian, f32::from_le_bytes)?),
            DType::F16 => Data::F16(read(bytes, big_endian, f16::from_le_bytes)?),
            DType::BF16 => Data::BF16(read(bytes, big_endian, bf16::from_le_bytes)?),
            DType::I8 => Data::I8(read(bytes, big_endian, i8::from_le_bytes)?),
            DType::U8 => Data::U8(bytes.to_vec()),
            DType::I32 => Data::I32(read(bytes, big_endian, i32::from_le_bytes)?),
            DType::I64 => Data::I64(read(bytes, big_endian, i64::from_le_bytes)?),
            DType::Bool => Data::Bool(bytes.iter().map(|&b| b != 0).collect()),
        })
    }

    /// `f32` values converted to `dtype`: floats rounded to nearest, integers rounded to
    /// nearest and saturated, `bool` true when non-zero.
    pub fn from_f32(dtype: DType, v: &[f32]) -> Data {
        match dtype {
            DType::F32 => Data::F32(v.to_vec()),
            DType::F16 => Data::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
            DType::BF16 => Data::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
            DType::I8 => Data::I8(v.iter().map(|&x| x.round() as i8).collect()),
            DType::U8 => Data::U8(v.iter().map(|&x| x.round() as u8).collect()),
            DType::I32 => Data::I32(v.iter().map(|&x| x.round() as i32).collect()),
            DType::I64 => Data::I64(v.iter().map(|&x| x.round() as i64).collect()),
            DType::Bool => Data::Bool(v.iter().map(|&x| x != 0.0).collect()),
        }
    }
}

/// A tensor on the host. Invariant (checked by [`Tensor::new`], and again by every consumer
/// that receives one from outside): `data.dtype() == ty.dtype` and `data.len()` is the element
/// count of `ty`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub ty: TensorType,
    pub data: Data,
}

impl Tensor {
    /// A tensor, or `None` when `data` does not fit `ty` (wrong dtype or element count).
    pub fn new(ty: TensorType, data: Data) -> Option<Tensor> {
        let t = Tensor { ty, data };
        t.is_consistent().then_some(t)
    }

    /// An `f32` tensor, or `None` when `data.len()` is not the product of `shape`.
    pub fn f32(shape: impl Into<Vec<u64>>, data: Vec<f32>) -> Option<Tensor> {
        Tensor::new(TensorType::f32(shape), Data::F32(data))
    }

    /// Whether the data has the type's dtype and element count.
    pub fn is_consistent(&self) -> bool {
        self.data.dtype() == self.ty.dtype
            && self
                .ty
                .num_elements()
                .is_some_and(|n| u64::try_from(self.data.len()) == Ok(n))
    }

    pub fn shape(&self) -> &[u64] {
        &self.ty.shape
    }

    /// The elements, if the tensor is `f32`.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            Data::F32(v) => Some(v),
            _ => None,
        }
    }

    /// Every element converted to `f64` (for summaries and comparisons).
    pub fn to_f64(&self) -> Vec<f64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            Data::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            Data::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
            Data::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
        }
    }
}
