//! Constant tensors: initializers, `Constant` nodes, and everything folded from them.
//!
//! The data is kept as little-endian bytes in the IR's element type, which is what the
//! safetensors file stores; folding reads it as `i64` (integer and bool types, exact) or `f64`
//! (every type).

use crate::error::{DTypeError, Oversized, TensorError};
use crate::proto::{tensor_proto, TensorProto};
use std::path::Path;
use tir_ir::DType;

/// Folding refuses to build a tensor larger than this (a `ConstantOfShape` of a huge shape in
/// a corrupt or hostile file must not exhaust memory).
pub const MAX_FOLDED_BYTES: u64 = 1 << 30;

/// No imported tensor (graph input, constant, op result) may be larger than this, 1 TiB: far
/// past any device an inference graph runs on, so a larger shape can only come from a corrupt
/// or hostile file, and small enough that slab offsets summed over many tensors stay far from
/// overflowing 64 bits. Checked by [`Oversized::check`].
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// `numel * dtype.byte_size()` little-endian bytes, row-major.
    pub data: Vec<u8>,
}

/// The IR element type of an ONNX `TensorProto.DataType`, or why there is none.
pub fn dtype_from_onnx(code: i64) -> Result<DType, DTypeError> {
    use tensor_proto::DataType as D;
    // The code is an `int32` in `TensorProto` but an `int64` in Cast's `to` attribute: a value
    // past `i32` is unknown, not truncated into some other type.
    let d = i32::try_from(code)
        .ok()
        .and_then(|c| D::try_from(c).ok())
        .ok_or(DTypeError::Unknown { code })?;
    Ok(match d {
        D::Float => DType::F32,
        D::Uint8 => DType::U8,
        D::Int8 => DType::I8,
        D::Int32 => DType::I32,
        D::Int64 => DType::I64,
        D::Bool => DType::Bool,
        D::Float16 => DType::F16,
        D::Bfloat16 => DType::BF16,
        other => {
            return Err(DTypeError::Unsupported {
                name: other.as_str_name(),
            })
        }
    })
}

/// The element count of `shape`, if it fits in `u64`.
pub fn numel(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

fn checked_bytes(dtype: DType, shape: &[u64]) -> Result<usize, TensorError> {
    numel(shape)
        .and_then(|n| n.checked_mul(dtype.byte_size()))
        .filter(|&b| b <= MAX_FOLDED_BYTES)
        .map(|b| b as usize)
        .ok_or_else(|| TensorError::TooLarge {
            shape: shape.to_vec(),
            dtype,
        })
}

impl Tensor {
    pub fn numel(&self) -> usize {
        self.data.len() / self.dtype.byte_size() as usize
    }

    /// Reads an ONNX tensor. External data is read relative to `base_dir`.
    pub fn from_proto(t: &TensorProto, base_dir: Option<&Path>) -> Result<Tensor, TensorError> {
        let code = t.data_type.unwrap_or(0);
        let dtype = dtype_from_onnx(code.into())?;
        let mut shape = Vec::with_capacity(t.dims.len());
        for &d in &t.dims {
            if d < 0 {
                return Err(TensorError::NegativeDim { dim: d });
            }
            shape.push(d as u64);
        }
        // Before anything is allocated or read: external data could claim any size.
        Oversized::check(&shape, dtype)?;
        if t.segment.is_some() {
            return Err(TensorError::Segmented);
        }
        // Within MAX_TENSOR_BYTES, so neither product overflows.
        let n = numel(&shape).unwrap_or(0);
        let want = n * dtype.byte_size();
        let data = if t.data_location == Some(tensor_proto::DataLocation::External as i32) {
            read_external(t, base_dir, want)?
        } else if let Some(raw) = &t.raw_data {
            if raw.len() as u64 != want {
                return Err(TensorError::RawDataLen {
                    got: raw.len(),
                    shape,
                    dtype,
                    want,
                });
            }
            raw.clone()
        } else {
            let typed_len = match dtype {
                DType::F32 => t.float_data.len(),
                DType::I64 => t.int64_data.len(),
                _ => t.int32_data.len(),
            };
            if typed_len as u64 != n {
                return Err(TensorError::TypedDataLen {
                    got: typed_len,
                    shape,
                    want: n,
                });
            }
            let mut out = Vec::with_capacity(want as usize);
            match dtype {
                DType::F32 => t
                    .float_data
                    .iter()
                    .for_each(|v| out.extend(v.to_le_bytes())),
                DType::I64 => t
                    .int64_data
                    .iter()
                    .for_each(|v| out.extend(v.to_le_bytes())),
                DType::I32 => t
                    .int32_data
                    .iter()
                    .for_each(|v| out.extend(v.to_le_bytes())),
                DType::F16 | DType::BF16 => t
                    .int32_data
                    .iter()
                    .for_each(|&v| out.extend((v as u16).to_le_bytes())),
                DType::I8 | DType::U8 => t.int32_data.iter().for_each(|&v| out.push(v as u8)),
                DType::Bool => t
                    .int32_data
                    .iter()
                    .for_each(|&v| out.push(u8::from(v != 0))),
            }
            out
        };
        Ok(Tensor { dtype, shape, data })
    }

    /// A tensor of integers converted to `dtype`.
    pub fn from_i64s(dtype: DType, shape: Vec<u64>, vals: &[i64]) -> Tensor {
        let mut data = Vec::with_capacity(vals.len() * dtype.byte_size() as usize);
        for &v in vals {
            push_elem(&mut data, dtype, Num::I(v));
        }
        Tensor { dtype, shape, data }
    }

    /// A tensor of reals converted to `dtype` (integers truncate, bool is `!= 0`).
    pub fn from_f64s(dtype: DType, shape: Vec<u64>, vals: &[f64]) -> Tensor {
        let mut data = Vec::with_capacity(vals.len() * dtype.byte_size() as usize);
        for &v in vals {
            push_elem(&mut data, dtype, Num::F(v));
        }
        Tensor { dtype, shape, data }
    }

    pub fn is_int(&self) -> bool {
        !self.dtype.is_float()
    }

    /// The elements as integers (floats truncate toward zero).
    pub fn ints(&self) -> Vec<i64> {
        (0..self.numel())
            .map(|i| match self.get(i) {
                Num::I(v) => v,
                Num::F(v) => v as i64,
            })
            .collect()
    }

    /// The elements as reals.
    pub fn floats(&self) -> Vec<f64> {
        (0..self.numel()).map(|i| self.get(i).f64()).collect()
    }

    pub fn get(&self, i: usize) -> Num {
        let s = self.dtype.byte_size() as usize;
        let b = &self.data[i * s..(i + 1) * s];
        match self.dtype {
            DType::F32 => Num::F(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
            DType::F16 => Num::F(half::f16::from_le_bytes([b[0], b[1]]).to_f64()),
            DType::BF16 => Num::F(half::bf16::from_le_bytes([b[0], b[1]]).to_f64()),
            DType::I8 => Num::I(b[0] as i8 as i64),
            DType::U8 | DType::Bool => Num::I(b[0] as i64),
            DType::I32 => Num::I(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64),
            DType::I64 => Num::I(i64::from_le_bytes([
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
            ])),
        }
    }

    /// Builds a tensor of `shape` whose element at each (row-major) output index is the
    /// element `src(index)` of `self`.
    pub fn gather_elems(
        &self,
        shape: Vec<u64>,
        mut src: impl FnMut(&[u64]) -> usize,
    ) -> Result<Tensor, TensorError> {
        let bytes = checked_bytes(self.dtype, &shape)?;
        let s = self.dtype.byte_size() as usize;
        let mut data = Vec::with_capacity(bytes);
        for_each_index(&shape, |idx| {
            let i = src(idx);
            data.extend_from_slice(&self.data[i * s..(i + 1) * s]);
        });
        Ok(Tensor {
            dtype: self.dtype,
            shape,
            data,
        })
    }

    /// The same elements in a new shape with the same element count.
    pub fn reshaped(&self, shape: Vec<u64>) -> Tensor {
        Tensor {
            dtype: self.dtype,
            shape,
            data: self.data.clone(),
        }
    }

    /// Row-major strides of `self.shape`, in elements.
    pub fn strides(&self) -> Vec<usize> {
        strides(&self.shape)
    }
}

/// Row-major strides of `shape`, in elements.
pub fn strides(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as usize;
    }
    s
}

/// Calls `f` with every index of `shape` in row-major order.
pub fn for_each_index(shape: &[u64], mut f: impl FnMut(&[u64])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0u64; shape.len()];
    loop {
        f(&idx);
        let mut k = shape.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// One element read for folding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    I(i64),
    F(f64),
}

impl Num {
    pub fn f64(self) -> f64 {
        match self {
            Num::I(v) => v as f64,
            Num::F(v) => v,
        }
    }
}

fn push_elem(out: &mut Vec<u8>, dtype: DType, v: Num) {
    let i = || match v {
        Num::I(v) => v,
        Num::F(f) => f as i64,
    };
    match dtype {
        DType::F32 => out.extend((v.f64() as f32).to_le_bytes()),
        DType::F16 => out.extend(half::f16::from_f64(v.f64()).to_le_bytes()),
        DType::BF16 => out.extend(half::bf16::from_f64(v.f64()).to_le_bytes()),
        DType::I8 => out.push(i() as i8 as u8),
        DType::U8 => out.push(i() as u8),
        DType::Bool => out.push(u8::from(v.f64() != 0.0)),
        DType::I32 => out.extend((i() as i32).to_le_bytes()),
        DType::I64 => out.extend(i().to_le_bytes()),
    }
}

fn read_external(
    t: &TensorProto,
    base_dir: Option<&Path>,
    want: u64,
) -> Result<Vec<u8>, TensorError> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        let value = kv.value.as_deref().unwrap_or("");
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| TensorError::ExternalNotNumber {
                    key: kv.key().to_string(),
                    value: value.to_string(),
                })
        };
        match kv.key() {
            "location" => location = Some(value.to_string()),
            "offset" => offset = number()?,
            "length" => length = Some(number()?),
            _ => {}
        }
    }
    let location = location.ok_or(TensorError::ExternalNoLocation)?;
    let rel = Path::new(&location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(TensorError::ExternalOutside { location });
    }
    let path = base_dir.unwrap_or(Path::new(".")).join(rel);
    if let Some(len) = length {
        if len != want {
            return Err(TensorError::ExternalLength { length: len, want });
        }
    }
    let unreadable = |e: std::io::Error| TensorError::ExternalRead {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let file_len = std::fs::metadata(&path).map_err(unreadable)?.len();
    let end = offset
        .checked_add(want)
        .ok_or(TensorError::ExternalOffsetOverflow)?;
    if end > file_len {
        return Err(TensorError::ExternalShort {
            path: path.display().to_string(),
            file_len,
            offset,
            end,
        });
    }
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&path).map_err(unreadable)?;
    let mut buf = vec![0u8; want as usize];
    f.seek(SeekFrom::Start(offset))
        .and_then(|_| f.read_exact(&mut buf))
        .map_err(unreadable)?;
    Ok(buf)
}
