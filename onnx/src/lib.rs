//! ONNX import: an `.onnx` model becomes a verified tir [`Module`] plus a [`Weights`] store
//! (written as safetensors, which `const` ops name).
//!
//! The pipeline: decode the protobuf ([`proto`], prost types generated from the official
//! `onnx.proto`) → walk the graph in node order ([`import`]), resolving every shape statically
//! and folding every computation on constants (initializers, `Constant` nodes, and the
//! `Shape → Gather → Unsqueeze → Concat → Reshape` subgraphs that PyTorch exports) → emit one IR
//! op per remaining node (one module per op family, under `import/`) → [`cleanup`]: fuse activations into their producers and fold
//! BatchNormalization into a preceding convolution, as inference runtimes do.
//!
//! Why prost with checked-in generated code: prost is the maintained, widely used protobuf
//! crate; generating once (`onnx/proto/regen.sh`, protox instead of `protoc`) keeps the build
//! free of any code generator or system tool, and the ONNX crates that ship their own types
//! are either unmaintained or pull in a whole runtime.

pub mod cleanup;
pub mod error;
mod import;
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod proto;
pub mod tensor;

pub use cleanup::{cleanup, CleanupStats};
pub use error::{
    AttrError, DTypeError, ImportError, InputError, NodeError, Oversized, TensorError,
};
pub use import::{
    identifier_chars, import_bytes, import_file, import_model, sanitize_symbol, ImportOptions,
    MAX_OPSET, MIN_OPSET,
};
pub use tensor::Tensor;

use indexmap::IndexMap;
use std::borrow::Cow;
use tir_ir::{DType, Module};

/// A model and its weights.
#[derive(Clone, Debug)]
pub struct Imported {
    pub module: Module,
    pub weights: Weights,
}

/// The tensors that `const` ops name, in the order they are first used.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Weights {
    pub tensors: IndexMap<String, Tensor>,
}

impl Weights {
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    pub fn byte_size(&self) -> u64 {
        self.tensors.values().map(|t| t.data.len() as u64).sum()
    }

    /// The safetensors file holding every tensor.
    pub fn to_safetensors(&self) -> Result<Vec<u8>, safetensors::SafeTensorError> {
        struct View<'a>(&'a Tensor, Vec<usize>);
        impl safetensors::View for View<'_> {
            fn dtype(&self) -> safetensors::Dtype {
                use safetensors::Dtype as S;
                match self.0.dtype {
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
            fn shape(&self) -> &[usize] {
                &self.1
            }
            fn data(&self) -> Cow<'_, [u8]> {
                Cow::Borrowed(&self.0.data)
            }
            fn data_len(&self) -> usize {
                self.0.data.len()
            }
        }
        let views = self.tensors.iter().map(|(name, t)| {
            let shape = t.shape.iter().map(|&d| d as usize).collect();
            (name.as_str(), View(t, shape))
        });
        safetensors::tensor::serialize(views, &None)
    }
}
