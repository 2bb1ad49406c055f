//! The graph walk: subgraph 0's operators in order → IR ops, with the layout of every rank-4
//! activation tracked (NHWC as in the file, or NCHW as tir's ops want it).

// Names follow the ONNX importer's rules, so both front ends name values alike.
use crate::schema::{self, ActivationFunctionType, BuiltinOperator, Padding, TensorType as TT};
use crate::sparse;
use crate::{ImportError, Imported, Weights};
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use tir_ir::op::{
    Activation, BinaryOp, Conv2d, ConvTranspose, CoordMode, Gemm, NearestMode, Pool2d, Resize,
    ResizeMode, Slice, UnaryOp,
};
use tir_ir::sym::{derived_name, Dim, DimExpr};
use tir_ir::{DType, Function, Module, Op, ReduceKind, SymTensorType, TensorType, Value};
use tir_onnx::Tensor as WTensor;
use tir_onnx::{identifier_chars, sanitize_symbol};

#[path = "mediapipe.rs"]
mod mediapipe;

/// NHWC → NCHW: NCHW dimension `i` is NHWC dimension `TO_NCHW[i]`.
const TO_NCHW: [usize; 4] = [0, 3, 1, 2];
/// NCHW → NHWC.
const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// Where NHWC axis `a` sits in NCHW.
const NCHW_POS: [usize; 4] = [0, 2, 3, 1];

/// A constant larger than this is refused (a corrupt shape must not exhaust memory).
const MAX_CONST_ELEMS: u64 = 1 << 30;

#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// The module name (default: the file's stem, else `model`).
    pub name: Option<String>,
    /// Skip the import-time cleanup (fusing standalone activations, dropping dead ops).
    pub no_cleanup: bool,
    /// Values for the free input dims (`--dim NAME=N`): a graph input whose `shape_signature`
    /// has `-1` at an axis gets the symbolic dim `INPUT.dAXIS` there (as ONNX import names an
    /// unnamed dim), unless this pins it.
    pub dims: Vec<(String, u64)>,
}

/// Reads and imports a `.tflite` file.
pub fn import_file(path: &Path, opts: &ImportOptions) -> Result<Imported, ImportError> {
    let bytes = std::fs::read(path).map_err(|e| ImportError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let mut opts = opts.clone();
    if opts.name.is_none() {
        opts.name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    }
    import_bytes(&bytes, &opts)
}

/// Imports a serialized TFLite model (a `Model` flatbuffer).
pub fn import_bytes(bytes: &[u8], opts: &ImportOptions) -> Result<Imported, ImportError> {
    let verifier = flatbuffers::VerifierOptions {
        max_depth: 64,
        max_tables: 100_000_000,
        max_apparent_size: 1 << 40,
        ignore_missing_null_terminator: false,
    };
    let model = schema::root_as_model_with_opts(&verifier, bytes)
        .map_err(|e| ImportError::Decode(e.to_string()))?;
    if !schema::model_buffer_has_identifier(bytes) {
        return Err(ImportError::Decode(
            "the file identifier is not `TFL3`".into(),
        ));
    }
    let version = model.version();
    if version != 3 {
        return Err(ImportError::Model(format!(
            "schema version {version} is not supported (tir reads version 3)"
        )));
    }
    let subgraphs = model
        .subgraphs()
        .ok_or_else(|| ImportError::Model("the model has no subgraph".into()))?;
    if subgraphs.is_empty() {
        return Err(ImportError::Model("the model has no subgraph".into()));
    }
    let sg = subgraphs.get(0);
    let name = opts
        .name
        .clone()
        .or_else(|| sg.name().filter(|n| !n.is_empty()).map(str::to_string))
        .unwrap_or_else(|| "model".into());
    let mut imp = Importer {
        model,
        sg,
        vals: HashMap::new(),
        cache: HashMap::new(),
        em: Emitter::new(),
        weights: Weights::default(),
        free: Vec::new(),
        past_gate: false,
    };
    let pins = imp.inputs(&opts.dims)?;
    let ops = sg.operators().map(|o| o.len()).unwrap_or(0);
    for index in 0..ops {
        let op = sg.operators().unwrap().get(index);
        let opname = imp.op_name(&op);
        imp.operator(&op, &opname)
            .map_err(|message| ImportError::Operator {
                index,
                op: opname.clone(),
                message,
            })?;
    }
    let mut returns = Vec::new();
    for t in sg.outputs().into_iter().flatten() {
        if t < 0 {
            return Err(ImportError::Model(format!(
                "graph output tensor {t}: negative index"
            )));
        }
        let v = imp
            .value(t as usize, Some(false))
            .map_err(|message| ImportError::Model(format!("graph output tensor {t}: {message}")))?;
        returns.push(v.0);
    }
    if returns.is_empty() {
        return Err(ImportError::Model("the subgraph has no outputs".into()));
    }
    let mut func = imp.em.func;
    if !func.is_dynamic() {
        func.result_types = returns
            .iter()
            .map(|&v| func.ty(v).cloned().unwrap_or_else(|| TensorType::f32([])))
            .collect();
    }
    func.returns = returns;
    let mut module = Module::new(sanitize_symbol(&name));
    module.doc.push(format!(
        "Imported from TFLite by `tirc import` (schema version {version}, {ops} operators{}).",
        model
            .description()
            .filter(|d| !d.is_empty())
            .map(|d| format!(", {}", d.replace('\n', " ")))
            .unwrap_or_default()
    ));
    module.funcs.push(func);
    let mut weights = imp.weights;
    if !opts.no_cleanup {
        tir_onnx::cleanup(&mut module, &mut weights);
    }
    if let Err(errors) = tir_ir::verify(&mut module) {
        let first = errors
            .first()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "unknown error".into());
        return Err(ImportError::Model(format!(
            "the imported module does not verify: {first}"
        )));
    }
    // A dim pinned at another extent than the file's was imported symbolically (every op
    // then holds for every value of it), and is fixed here.
    if !pins.is_empty() {
        module = tir_ir::specialize(&module, &pins).map_err(|errors| {
            ImportError::Model(format!(
                "cannot pin the dims: {}",
                errors
                    .first()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "unknown error".into())
            ))
        })?;
    }
    Ok(Imported { module, weights })
}

/// A constant: float data (float32, or float16 widened) or integers (shapes, axes, paddings).
#[derive(Clone, Debug)]
struct Const {
    shape: Vec<u64>,
    data: CData,
}

#[derive(Clone, Debug)]
enum CData {
    F32(Vec<f32>),
    F16(Vec<f32>),
    Int(Vec<i64>),
}

impl Const {
    fn ints(&self) -> R<&[i64]> {
        match &self.data {
            CData::Int(v) => Ok(v),
            _ => Err("expected an integer constant".into()),
        }
    }

    fn floats(&self) -> R<&[f32]> {
        match &self.data {
            CData::F32(v) => Ok(v),
            CData::F16(_) => Err(
                "a float16 constant is used without DEQUANTIZE (tir folds float16 weights only behind DEQUANTIZE)"
                    .into(),
            ),
            CData::Int(_) => Err("expected a float32 constant".into()),
        }
    }
}

#[derive(Clone, Debug)]
enum Val {
    Const(Rc<Const>),
    /// An IR value; `nchw` is true when it holds a rank-4 NHWC tensor transposed to NCHW.
    Ir {
        v: Value,
        nchw: bool,
    },
}

type R<T> = Result<T, String>;

struct Emitter {
    func: Function,
    names: std::collections::HashSet<String>,
    next: usize,
}

impl Emitter {
    fn new() -> Self {
        Emitter {
            func: Function::new("main"),
            names: Default::default(),
            next: 0,
        }
    }

    fn ty(&self, v: Value) -> &TensorType {
        self.func.values[v]
            .known_type()
            .expect("emitted values are typed (symbolic ones go through `sym_ty`)")
    }

    /// The type of `v`, symbolic dims included.
    fn sym_ty(&self, v: Value) -> SymTensorType {
        self.func.values[v]
            .sym_type()
            .expect("emitted values are typed")
    }

    /// Whether `v`'s type has a symbolic dim.
    fn is_sym(&self, v: Value) -> bool {
        self.func.values[v].known_type().is_none()
    }

    fn rank(&self, v: Value) -> usize {
        self.sym_ty(v).rank()
    }

    /// A parameter; one with a symbolic dim makes the function dynamic (as ONNX import does).
    fn add_param(&mut self, name: String, ty: SymTensorType) -> Value {
        let v = self.func.add_sym_param(name.clone(), ty);
        self.names.insert(name);
        v
    }

    fn shape(&self, v: Value) -> Vec<u64> {
        self.ty(v).shape.clone()
    }

    fn fresh(&mut self) -> String {
        loop {
            let n = self.next.to_string();
            self.next += 1;
            if self.names.insert(n.clone()) {
                return n;
            }
        }
    }

    /// A valid, unused value name derived from a TFLite tensor name (its first `;`-separated
    /// part: the converter joins the names of fused ops with `;`).
    fn unique(&mut self, hint: &str) -> String {
        let hint = hint.split(';').next().unwrap_or("");
        let mut base = identifier_chars(hint);
        if base.is_empty() {
            return self.fresh();
        }
        if base.len() > 64 {
            base = base[base.len() - 64..].to_string();
        }
        let mut name = base.clone();
        let mut k = 1;
        while self.names.contains(&name) || name.bytes().all(|b| b.is_ascii_digit()) {
            name = format!("{base}${k}");
            k += 1;
        }
        self.names.insert(name.clone());
        name
    }

    fn push(&mut self, op: Op, operands: &[Value], names: Vec<String>) -> R<Vec<Value>> {
        if operands.iter().any(|&v| self.is_sym(v)) {
            return self.push_sym(op, operands, names);
        }
        let ins: Vec<&TensorType> = operands.iter().map(|&v| self.ty(v)).collect();
        let tys = tir_ir::shape::infer(&op, &ins).map_err(|e| e.message)?;
        let id = self.func.push_op(
            op,
            operands.to_vec(),
            names.into_iter().map(|n| (n, None)).collect(),
        );
        let results = self.func.ops[id].results.clone();
        for (&r, t) in results.iter().zip(tys) {
            self.func.values[r].ty = Some(t);
        }
        Ok(results)
    }

    /// [`Emitter::push`] with a symbolic operand: the symbolic shape rule. Conditions it cannot
    /// decide are dropped here: the verifier derives them again as the module's run-time checks.
    fn push_sym(&mut self, op: Op, operands: &[Value], names: Vec<String>) -> R<Vec<Value>> {
        let ins: Vec<SymTensorType> = operands.iter().map(|&v| self.sym_ty(v)).collect();
        let refs: Vec<&SymTensorType> = ins.iter().collect();
        let mut checks = tir_ir::shape::Checks::new();
        let tys = tir_ir::shape::infer_sym(&op, &refs, &mut checks).map_err(|e| e.message)?;
        let id = self.func.push_op(
            op,
            operands.to_vec(),
            names.into_iter().map(|n| (n, None)).collect(),
        );
        let results = self.func.ops[id].results.clone();
        for (&r, t) in results.iter().zip(tys) {
            self.func.values[r].ty = t.to_static();
            self.func.values[r].sym = Some(t);
        }
        Ok(results)
    }

    fn push1(&mut self, op: Op, operands: &[Value]) -> R<Value> {
        let name = self.fresh();
        Ok(self.push(op, operands, vec![name])?[0])
    }

    fn konst(&mut self, vname: String, weight: String, ty: TensorType) -> Value {
        let id = self.func.push_op(
            Op::Const { name: weight },
            Vec::new(),
            vec![(vname, Some(ty.clone()))],
        );
        let v = self.func.ops[id].results[0];
        self.func.values[v].ty = Some(ty);
        v
    }
}

struct Importer<'a> {
    model: schema::Model<'a>,
    sg: schema::SubGraph<'a>,
    /// What each defined tensor is.
    vals: HashMap<usize, Val>,
    /// IR values already made for (tensor, wants NCHW).
    cache: HashMap<(usize, bool), Value>,
    em: Emitter,
    weights: Weights,
    /// The free input dims (symbols), each with the extent the file's static shapes assume:
    /// what [`Importer::define`] checks an inferred symbolic shape against.
    free: Vec<(String, u64)>,
    /// Set while [`Importer::operator_free`] has admitted the operator being imported.
    past_gate: bool,
}

fn builtin_name(code: BuiltinOperator) -> String {
    code.variant_name()
        .map(str::to_string)
        .unwrap_or_else(|| format!("builtin operator {}", code.0))
}

impl<'a> Importer<'a> {
    fn tensor(&self, t: usize) -> R<schema::Tensor<'a>> {
        let ts = self
            .sg
            .tensors()
            .ok_or_else(|| "the subgraph has no tensors".to_string())?;
        if t >= ts.len() {
            return Err(format!(
                "tensor index {t} is out of range ({} tensors)",
                ts.len()
            ));
        }
        Ok(ts.get(t))
    }

    fn tname(&self, t: usize) -> String {
        self.tensor(t)
            .ok()
            .and_then(|x| x.name().map(str::to_string))
            .unwrap_or_default()
    }

    fn describe(&self, t: usize) -> String {
        let n = self.tname(t);
        if n.is_empty() {
            format!("tensor {t}")
        } else {
            format!("tensor {t} `{n}`")
        }
    }

    /// The static shape of tensor `t`.
    fn shape_of(&self, t: usize) -> R<Vec<u64>> {
        let x = self.tensor(t)?;
        let mut out = Vec::new();
        for d in x.shape().into_iter().flatten() {
            if d < 0 {
                return Err(format!(
                    "{} has a dynamic dimension ({d}): tir needs static shapes",
                    self.describe(t)
                ));
            }
            out.push(d as u64);
        }
        Ok(out)
    }

    fn op_name(&self, op: &schema::Operator) -> String {
        match self.opcode(op) {
            Ok((code, custom)) if code == BuiltinOperator::CUSTOM => {
                format!("CUSTOM({})", custom.unwrap_or("?"))
            }
            Ok((code, _)) => builtin_name(code),
            Err(_) => format!("opcode {}", op.opcode_index()),
        }
    }

    fn opcode(&self, op: &schema::Operator) -> R<(BuiltinOperator, Option<&'a str>)> {
        let codes = self
            .model
            .operator_codes()
            .ok_or_else(|| "the model has no operator codes".to_string())?;
        let i = op.opcode_index() as usize;
        if i >= codes.len() {
            return Err(format!("opcode index {i} is out of range"));
        }
        let c = codes.get(i);
        // TFLite's rule: the larger of the two fields (the old one is a byte).
        let code = BuiltinOperator(c.builtin_code().0.max(c.deprecated_builtin_code() as i32));
        Ok((code, c.custom_code()))
    }

    /// The constant data of tensor `t`, if it has any.
    fn load_const(&self, t: usize) -> R<Option<Const>> {
        let x = self.tensor(t)?;
        let b = x.buffer() as usize;
        if b == 0 {
            return Ok(None);
        }
        let buffers = self
            .model
            .buffers()
            .ok_or_else(|| "the model has no buffers".to_string())?;
        if b >= buffers.len() {
            return Err(format!(
                "{} names buffer {b}, but the model has {}",
                self.describe(t),
                buffers.len()
            ));
        }
        let buf = buffers.get(b);
        let data = match buf.data() {
            Some(d) if !d.is_empty() => d.bytes(),
            _ => {
                if buf.offset() > 1 {
                    return Err(format!(
                        "{} is stored outside the flatbuffer (a model over 2 GB): not supported",
                        self.describe(t)
                    ));
                }
                return Ok(None);
            }
        };
        let shape = self.shape_of(t)?;
        let n = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= MAX_CONST_ELEMS)
            .ok_or_else(|| format!("{} is too large", self.describe(t)))? as usize;
        let ty = x.type_();
        let size = match ty {
            TT::FLOAT32 | TT::INT32 => 4,
            TT::FLOAT16 => 2,
            TT::INT64 => 8,
            _ => return Err(self.type_refusal(t, ty)),
        };
        if let Some(sp) = x.sparsity() {
            return self.load_sparse(t, shape, ty, size, data, sp).map(Some);
        }
        if data.len() != n * size {
            return Err(format!(
                "{} has {} bytes of data, but its shape {:?} needs {}",
                self.describe(t),
                data.len(),
                shape,
                n * size
            ));
        }
        let data = match ty {
            TT::FLOAT32 => CData::F32(f32_values(data)),
            TT::FLOAT16 => CData::F16(f16_values(data)),
            TT::INT32 => CData::Int(
                data.chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                    .collect(),
            ),
            _ => CData::Int(
                data.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            ),
        };
        Ok(Some(Const { shape, data }))
    }

    /// A sparse constant (the input of DENSIFY), densified: `data` holds the values of its
    /// stored positions only (`sparse::densify` says in what order).
    fn load_sparse(
        &self,
        t: usize,
        shape: Vec<u64>,
        ty: TT,
        size: usize,
        data: &[u8],
        sp: schema::SparsityParameters<'a>,
    ) -> R<Const> {
        let at = |e: String| format!("{}: {e}", self.describe(t));
        if !data.len().is_multiple_of(size) {
            return Err(at(format!(
                "{} bytes of data is not a whole number of values",
                data.len()
            )));
        }
        let ints = |v: Option<flatbuffers::Vector<'a, i32>>, what: &str| -> R<Vec<usize>> {
            v.into_iter()
                .flatten()
                .map(|x| {
                    usize::try_from(x).map_err(|_| at(format!("sparsity: negative {what} {x}")))
                })
                .collect()
        };
        let index_vector = |m: &schema::DimensionMetadata<'a>, segments: bool| -> R<Vec<usize>> {
            let (i32s, u16s, u8s) = if segments {
                (
                    m.array_segments_as_int_32_vector().map(|v| v.values()),
                    m.array_segments_as_uint_16_vector().map(|v| v.values()),
                    m.array_segments_as_uint_8_vector().map(|v| v.values()),
                )
            } else {
                (
                    m.array_indices_as_int_32_vector().map(|v| v.values()),
                    m.array_indices_as_uint_16_vector().map(|v| v.values()),
                    m.array_indices_as_uint_8_vector().map(|v| v.values()),
                )
            };
            match (i32s, u16s, u8s) {
                (Some(v), _, _) => ints(v, "index"),
                (_, Some(v), _) => Ok(v.into_iter().flatten().map(usize::from).collect()),
                (_, _, Some(v)) => Ok(v.into_iter().flatten().map(usize::from).collect()),
                _ => Err(at(
                    "sparsity: a SPARSE_CSR level without its index vectors".into()
                )),
            }
        };
        let mut levels = Vec::new();
        for m in sp.dim_metadata().into_iter().flatten() {
            levels.push(match m.format() {
                schema::DimensionType::DENSE => sparse::Level::Dense(
                    usize::try_from(m.dense_size())
                        .map_err(|_| at(format!("sparsity: dense size {}", m.dense_size())))?,
                ),
                schema::DimensionType::SPARSE_CSR => sparse::Level::Csr {
                    segments: index_vector(&m, true)?,
                    indices: index_vector(&m, false)?,
                },
                f => return Err(at(format!("sparsity: unknown dimension type {}", f.0))),
            });
        }
        let layout = sparse::Sparsity {
            traversal_order: ints(sp.traversal_order(), "traversal order entry")?,
            block_map: ints(sp.block_map(), "block map entry")?,
            levels,
        };
        let data = match ty {
            TT::FLOAT32 => {
                CData::F32(sparse::densify(&shape, &f32_values(data), &layout).map_err(at)?)
            }
            TT::FLOAT16 => {
                CData::F16(sparse::densify(&shape, &f16_values(data), &layout).map_err(at)?)
            }
            _ => {
                return Err(at(
                    "sparsity: only float32 and float16 weights may be sparse".into(),
                ))
            }
        };
        Ok(Const { shape, data })
    }

    fn type_refusal(&self, t: usize, ty: TT) -> String {
        let tn = ty.variant_name().unwrap_or("an unknown type");
        if matches!(ty, TT::INT8 | TT::UINT8 | TT::INT16 | TT::INT4) {
            format!(
                "{} is {tn}: quantized models are not supported (tir imports float32 models, with float16 weights behind DEQUANTIZE)",
                self.describe(t)
            )
        } else {
            format!(
                "{} is {tn}: tir imports float32 tensors (and float16 weights behind DEQUANTIZE) only",
                self.describe(t)
            )
        }
    }

    /// The graph inputs become the function's parameters, in the model's NHWC shapes. An axis
    /// whose `shape_signature` entry is `-1` gets the symbolic dim `INPUT.dAXIS` (ONNX import's
    /// name for an unnamed dim), unless `dims` pins it. Returns the pins that differ from the
    /// file's static extent: those dims are imported symbolically and fixed after the walk.
    fn inputs(&mut self, dims: &[(String, u64)]) -> Result<tir_ir::Bindings, ImportError> {
        let mut used = std::collections::HashSet::new();
        let mut pins = tir_ir::Bindings::new();
        for (index, t) in self.sg.inputs().into_iter().flatten().enumerate() {
            let fail = |message: String| ImportError::Input {
                index,
                name: self.tname(t.max(0) as usize),
                message,
            };
            if t < 0 {
                return Err(fail("negative tensor index".into()));
            }
            let t = t as usize;
            let x = self.tensor(t).map_err(fail)?;
            if x.type_() != TT::FLOAT32 {
                return Err(fail(self.type_refusal(t, x.type_())));
            }
            let shape = self.shape_of(t).map_err(fail)?;
            let name = self.em.unique(&self.tname(t));
            let name = if name.bytes().all(|b| b.is_ascii_digit()) {
                format!("input{name}")
            } else {
                name
            };
            self.em.names.insert(name.clone());
            let sig: Vec<i32> = x.shape_signature().into_iter().flatten().collect();
            let mut ty = Vec::with_capacity(shape.len());
            for (axis, &d) in shape.iter().enumerate() {
                if sig.len() != shape.len() || sig[axis] != -1 {
                    ty.push(DimExpr::lit(d));
                    continue;
                }
                let sym = derived_name(&name, axis);
                match dims.iter().find(|(n, _)| *n == sym) {
                    Some(&(_, n)) if n == d => {
                        used.insert(sym);
                        ty.push(DimExpr::lit(d));
                        continue;
                    }
                    Some(&(_, n)) => {
                        pins.insert(sym.clone(), n);
                        used.insert(sym.clone());
                    }
                    None => {}
                }
                self.free.push((sym.clone(), d));
                ty.push(DimExpr::sym(sym));
            }
            let v = self.em.add_param(name, SymTensorType::new(ty, DType::F32));
            self.vals.insert(t, Val::Ir { v, nchw: false });
        }
        for (d, _) in dims {
            if !used.contains(d) {
                let free: Vec<&str> = self.free.iter().map(|(n, _)| n.as_str()).collect();
                return Err(ImportError::Model(format!(
                    "--dim {d}: no graph input has a free dim (`-1` in its `shape_signature`) of that name{}",
                    if free.is_empty() {
                        String::new()
                    } else {
                        format!(" (the free dims: {})", free.join(", "))
                    }
                )));
            }
        }
        Ok(pins)
    }

    /// The free dims of the IR value of tensor `t` (none for a constant or a static value).
    fn free_dims(&self, t: usize) -> Vec<String> {
        match self.vals.get(&t) {
            Some(Val::Ir { v, .. }) if self.em.is_sym(*v) => {
                let mut out = Vec::new();
                for d in self.em.sym_ty(*v).shape {
                    for s in d.symbols() {
                        if !out.contains(&s) {
                            out.push(s);
                        }
                    }
                }
                out
            }
            _ => Vec::new(),
        }
    }

    /// The refusal of an operator that needs a static extent of tensor `t`, whose shape
    /// depends on the free dim `dim`.
    fn needs_static(&self, t: usize, dim: &str, what: &str) -> String {
        let fixed = self
            .free
            .iter()
            .find(|(n, _)| n == dim)
            .map(|(_, s)| *s)
            .unwrap_or(1);
        format!(
            "{} depends on the free dim `{dim}` (a `-1` in the input's `shape_signature`), and {what}: tir's TFLite importer cannot express it for every value of `{dim}`; `--dim {dim}={fixed}` (the extent of the file's static shapes) pins it",
            self.describe(t)
        )
    }

    fn val(&mut self, t: usize) -> R<Val> {
        if let Some(v) = self.vals.get(&t) {
            return Ok(v.clone());
        }
        match self.load_const(t)? {
            Some(c) => {
                let v = Val::Const(Rc::new(c));
                self.vals.insert(t, v.clone());
                Ok(v)
            }
            None => Err(format!(
                "{} is used before any operator produces it",
                self.describe(t)
            )),
        }
    }

    fn konst(&mut self, t: usize) -> R<Rc<Const>> {
        match self.val(t)? {
            Val::Const(c) => Ok(c),
            Val::Ir { .. } => Err(format!(
                "{} must be a constant (tir needs it at import time)",
                self.describe(t)
            )),
        }
    }

    fn is_nchw(&mut self, t: usize) -> R<bool> {
        Ok(matches!(self.val(t)?, Val::Ir { nchw: true, .. }))
    }

    /// A new float32 weight holding `data` in `shape`.
    fn weight(&mut self, hint: &str, shape: Vec<u64>, data: &[f32]) -> Value {
        let mut key = identifier_chars(hint.split(';').next().unwrap_or(""));
        if key.is_empty() {
            key = "w".into();
        }
        let base = key.clone();
        let mut k = 1;
        while self.weights.tensors.contains_key(&key) {
            key = format!("{base}${k}");
            k += 1;
        }
        let bytes = data.iter().flat_map(|f| f.to_le_bytes()).collect();
        self.weights.tensors.insert(
            key.clone(),
            WTensor {
                dtype: DType::F32,
                shape: shape.clone(),
                data: bytes,
            },
        );
        let vname = self.em.unique(hint);
        self.em.konst(vname, key, TensorType::f32(shape))
    }

    /// Tensor `t` as an IR value: in NCHW (`Some(true)`, rank 4 only), in the file's layout
    /// (`Some(false)`), or in whichever layout it has (`None`). Returns the value and whether it
    /// is NCHW.
    fn value(&mut self, t: usize, want: Option<bool>) -> R<(Value, bool)> {
        let val = self.val(t)?;
        match val {
            Val::Ir { v, nchw } => {
                let want = want.unwrap_or(nchw);
                if want == nchw {
                    return Ok((v, nchw));
                }
                if let Some(&c) = self.cache.get(&(t, want)) {
                    return Ok((c, want));
                }
                if self.em.rank(v) != 4 {
                    return Err(format!("{} is not rank 4", self.describe(t)));
                }
                let perm = if want { TO_NCHW } else { TO_NHWC };
                let c = self.permute(v, &perm)?;
                self.cache.insert((t, want), c);
                Ok((c, want))
            }
            Val::Const(c) => {
                let want = want.unwrap_or(false);
                if let Some(&v) = self.cache.get(&(t, want)) {
                    return Ok((v, want));
                }
                let data = c.floats()?.to_vec();
                let (shape, data) = if want {
                    if c.shape.len() != 4 {
                        return Err(format!("{} is not rank 4", self.describe(t)));
                    }
                    permute_data(&data, &c.shape, &TO_NCHW)
                } else {
                    (c.shape.clone(), data)
                };
                let v = self.weight(&self.tname(t), shape, &data);
                self.cache.insert((t, want), v);
                Ok((v, want))
            }
        }
    }

    /// An operand of an element-wise op whose result is NCHW (`nchw`) or in the file's layout:
    /// ranks below 4 are first aligned to rank 4 on the right, as broadcasting does.
    fn bcast_operand(&mut self, t: usize, nchw: bool) -> R<Value> {
        if !nchw {
            return Ok(self.value(t, Some(false))?.0);
        }
        match self.val(t)? {
            Val::Const(c) if c.shape.len() < 4 => {
                let mut shape = vec![1u64; 4 - c.shape.len()];
                shape.extend(&c.shape);
                let (shape, data) = permute_data(c.floats()?, &shape, &TO_NCHW);
                Ok(self.weight(&self.tname(t), shape, &data))
            }
            Val::Ir { v, .. } if self.em.rank(v) < 4 => {
                if self.em.is_sym(v) {
                    return Err(self.needs_static(
                        t,
                        &self.free_dims(t)[0],
                        "broadcasting it against a rank-4 NCHW operand needs its static shape",
                    ));
                }
                let s = self.em.shape(v);
                let mut shape = vec![1i64; 4 - s.len()];
                shape.extend(s.iter().map(|&d| d as i64));
                let r = self.em.push1(Op::reshape(shape), &[v])?;
                self.permute(r, &TO_NCHW)
            }
            _ => Ok(self.value(t, Some(true))?.0),
        }
    }

    /// `transpose(v, perm)`, or a `reshape` when only size-1 dimensions move.
    fn permute(&mut self, v: Value, perm: &[usize]) -> R<Value> {
        if self.em.is_sym(v) {
            // A symbolic extent may or may not be 1: only a transpose holds for every value.
            return self.em.push1(
                Op::Transpose {
                    perm: perm.iter().map(|&p| p as u64).collect(),
                },
                &[v],
            );
        }
        let s = self.em.shape(v);
        let out: Vec<u64> = perm.iter().map(|&p| s[p]).collect();
        let moved: Vec<usize> = perm.iter().copied().filter(|&p| s[p] != 1).collect();
        if moved.windows(2).all(|w| w[0] < w[1]) {
            let shape = out.iter().map(|&d| d as i64).collect();
            return self.em.push1(Op::reshape(shape), &[v]);
        }
        self.em.push1(
            Op::Transpose {
                perm: perm.iter().map(|&p| p as u64).collect(),
            },
            &[v],
        )
    }

    /// Records that IR value `v` (NCHW if `nchw`) is tensor `t`, after checking its shape
    /// against the one the file declares.
    fn define(&mut self, t: usize, v: Value, nchw: bool) -> R<()> {
        let declared = self.shape_of(t)?;
        let x = self.tensor(t)?;
        if x.type_() != TT::FLOAT32 {
            return Err(self.type_refusal(t, x.type_()));
        }
        let mut expect = declared.clone();
        if nchw {
            if declared.len() != 4 {
                return Err(format!("{} is not rank 4", self.describe(t)));
            }
            expect = TO_NCHW.iter().map(|&p| declared[p]).collect();
        }
        let got = if self.em.is_sym(v) {
            // The file's static shapes hold at the static extents of the free dims: the
            // symbolic shape evaluated there must give them.
            let env = |n: &str| self.free.iter().find(|(s, _)| s == n).map(|(_, d)| *d);
            self.em
                .sym_ty(v)
                .shape
                .iter()
                .map(|d| d.eval_dim(&env))
                .collect::<Result<Vec<u64>, _>>()
                .map_err(|e| format!("{}: {e}", self.describe(t)))?
        } else {
            self.em.shape(v)
        };
        if got != expect {
            return Err(format!(
                "tir infers shape {got:?}{} for {}, but the model declares {declared:?}",
                if nchw { " (NCHW)" } else { "" },
                self.describe(t)
            ));
        }
        // Give the value the tensor's name when it was a fresh number.
        self.vals.insert(t, Val::Ir { v, nchw });
        Ok(())
    }

    fn operator(&mut self, op: &schema::Operator<'a>, _name: &str) -> R<()> {
        let (code, custom) = self.opcode(op)?;
        // Mediapipe's transposed convolution is a custom operator tir implements.
        let mediapipe_transpose_conv =
            code == BuiltinOperator::CUSTOM && custom == Some(MEDIAPIPE_TRANSPOSE_CONV);
        // And face_landmark_with_attention's three (mediapipe.rs).
        let mediapipe_attention = match custom {
            Some(
                c @ (mediapipe::LANDMARKS_TO_MATRIX
                | mediapipe::TRANSFORM_TENSOR
                | mediapipe::TRANSFORM_LANDMARKS),
            ) if code == BuiltinOperator::CUSTOM => Some(c),
            _ => None,
        };
        if code == BuiltinOperator::CUSTOM
            && !mediapipe_transpose_conv
            && mediapipe_attention.is_none()
        {
            return Err("custom operators are not supported".into());
        }
        let ins: Vec<i32> = op.inputs().into_iter().flatten().collect();
        let outs: Vec<i32> = op.outputs().into_iter().flatten().collect();
        for &t in ins.iter().chain(&outs) {
            if t >= 0 {
                let x = self.tensor(t as usize)?;
                let ty = x.type_();
                if matches!(ty, TT::INT8 | TT::UINT8 | TT::INT16 | TT::INT4) {
                    return Err(self.type_refusal(t as usize, ty));
                }
                if x.is_variable() {
                    return Err(format!(
                        "{} is a variable: stateful models are not supported",
                        self.describe(t as usize)
                    ));
                }
                if x.sparsity().is_some() && x.buffer() == 0 {
                    return Err(format!(
                        "{} is sparse but not a constant: only sparse weights are supported (densified at import)",
                        self.describe(t as usize)
                    ));
                }
            }
        }
        let input = |i: usize| -> R<usize> {
            match ins.get(i) {
                Some(&t) if t >= 0 => Ok(t as usize),
                _ => Err(format!("input {i} is required")),
            }
        };
        let opt_input = |i: usize| -> Option<usize> {
            ins.get(i).copied().filter(|&t| t >= 0).map(|t| t as usize)
        };
        if outs.is_empty() || outs.iter().any(|&t| t < 0) {
            return Err("the operator has no (or a negative) output tensor".into());
        }
        let out = outs[0] as usize;
        let outs: Vec<usize> = outs.iter().map(|&t| t as usize).collect();
        type B = BuiltinOperator;
        // An operand whose shape depends on a free input dim: only the operators below are
        // imported for every value of it; the others would be specialised to the file's
        // static shapes, so they are refused.
        let free = ins.iter().filter(|&&t| t >= 0).find_map(|&t| {
            self.free_dims(t as usize)
                .first()
                .map(|d| (t as usize, d.clone()))
        });
        if let Some((t, dim)) = free.filter(|_| !self.past_gate) {
            return self.operator_free(op, code, _name, &ins, out, t, &dim);
        }
        self.past_gate = false;
        if let Some(custom) = mediapipe_attention {
            let ins: Vec<usize> = (0..ins.len()).map(input).collect::<R<_>>()?;
            return self.mediapipe_op(op, custom, &ins, out);
        }
        if mediapipe_transpose_conv {
            // Options: TfLiteTransposeConvParams's first three int32 fields, raw
            // (mediapipe reads `custom_initial_data` as that struct): padding (1 SAME,
            // 2 VALID), stride_w, stride_h. Inputs: input, weights [O, H, W, I], bias [O].
            let bytes: Vec<u8> = op
                .custom_options()
                .map(|v| v.bytes().to_vec())
                .unwrap_or_default();
            if bytes.len() < 12 {
                return Err(format!(
                    "the custom options hold {} bytes, not the 12 of (padding, stride_w, stride_h)",
                    bytes.len()
                ));
            }
            let word = |i: usize| {
                i32::from_le_bytes([
                    bytes[4 * i],
                    bytes[4 * i + 1],
                    bytes[4 * i + 2],
                    bytes[4 * i + 3],
                ])
            };
            let same = match word(0) {
                1 => true,
                2 => false,
                p => {
                    return Err(format!(
                        "unknown padding {p} in the custom options (1 SAME, 2 VALID)"
                    ))
                }
            };
            let (x, f) = (input(0)?, self.konst(input(1)?)?);
            let xs = self.shape_of(x)?;
            let strides = [word(2), word(1)];
            let k = self.transpose_conv_filter(&xs, &f)?;
            let pads = mediapipe_transpose_pads(&xs, k, strides, same)?;
            let attrs = ConvTranspose {
                strides: strides.map(|s| s as u64),
                pads,
                ..ConvTranspose::default()
            };
            let w = self.transpose_conv_weight(input(1)?, &f)?;
            return self.conv_transpose(out, x, w, Some(input(2)?), attrs);
        }
        match code {
            B::CONV_2D => {
                let o = op
                    .builtin_options_as_conv_2_doptions()
                    .ok_or("missing Conv2DOptions")?;
                let x = input(0)?;
                let f = self.konst(input(1)?)?;
                if f.shape.len() != 4 {
                    return Err(format!(
                        "the filter has shape {:?}, not [O, H, W, I]",
                        f.shape
                    ));
                }
                let xs = self.shape_of(x)?;
                if xs.len() != 4 {
                    return Err(format!("the input has shape {xs:?}, not NHWC"));
                }
                let (cin, fin) = (xs[3], f.shape[3]);
                if fin == 0 || !cin.is_multiple_of(fin) {
                    return Err(format!(
                        "the filter has {fin} input channels, which does not divide the input's {cin}"
                    ));
                }
                let (shape, data) = permute_data(f.floats()?, &f.shape, &[0, 3, 1, 2]);
                let w = self.weight(&self.tname(input(1)?), shape, &data);
                let attrs = self.conv_attrs(
                    &xs,
                    [f.shape[1], f.shape[2]],
                    o.padding(),
                    [o.stride_h(), o.stride_w()],
                    [o.dilation_h_factor(), o.dilation_w_factor()],
                    cin / fin,
                    o.fused_activation_function(),
                )?;
                self.conv(out, x, w, opt_input(2), attrs)
            }
            B::DEPTHWISE_CONV_2D => {
                let o = op
                    .builtin_options_as_depthwise_conv_2_doptions()
                    .ok_or("missing DepthwiseConv2DOptions")?;
                let x = input(0)?;
                let f = self.konst(input(1)?)?;
                let xs = self.shape_of(x)?;
                if xs.len() != 4 {
                    return Err(format!("the input has shape {xs:?}, not NHWC"));
                }
                if f.shape.len() != 4
                    || f.shape[0] != 1
                    || xs[3] == 0
                    || !f.shape[3].is_multiple_of(xs[3])
                {
                    return Err(format!(
                        "the filter has shape {:?}, not [1, H, W, C·M] for {} input channels",
                        f.shape, xs[3]
                    ));
                }
                let (shape, data) = permute_data(f.floats()?, &f.shape, &[3, 0, 1, 2]);
                let w = self.weight(&self.tname(input(1)?), shape, &data);
                let attrs = self.conv_attrs(
                    &xs,
                    [f.shape[1], f.shape[2]],
                    o.padding(),
                    [o.stride_h(), o.stride_w()],
                    [o.dilation_h_factor(), o.dilation_w_factor()],
                    xs[3],
                    o.fused_activation_function(),
                )?;
                self.conv(out, x, w, opt_input(2), attrs)
            }
            B::FULLY_CONNECTED => {
                let o = op.builtin_options_as_fully_connected_options();
                if o.is_some_and(|o| o.weights_format().0 != 0) {
                    return Err("shuffled weights are not supported".into());
                }
                let act = activation(
                    o.map(|o| o.fused_activation_function())
                        .unwrap_or(ActivationFunctionType::NONE),
                )?;
                let (x, _) = self.value(input(0)?, Some(false))?;
                let x0 = x;
                let (w, _) = self.value(input(1)?, Some(false))?;
                let ws = self.em.shape(w);
                if ws.len() != 2 {
                    return Err(format!("the weights have shape {ws:?}, not [out, in]"));
                }
                // The file's static shape (the free dims at their file extents) for the
                // divisibility check; a symbolic input is flattened with `-1` rows, which
                // tir's `reshape` resolves for every value of the free dims as TFLite does.
                let xs = self.shape_of(input(0)?)?;
                let n: u64 = xs.iter().product();
                if ws[1] == 0 || !n.is_multiple_of(ws[1]) {
                    return Err(format!(
                        "the input has {n} elements, not a multiple of the weights' {}",
                        ws[1]
                    ));
                }
                let x = if self.em.is_sym(x) {
                    let sym = self.em.sym_ty(x).shape;
                    if sym.len() == 2 && sym[1].known() == Some(ws[1]) {
                        x
                    } else {
                        let shape = vec![-1, ws[1] as i64];
                        self.em.push1(Op::reshape(shape), &[x])?
                    }
                } else if xs != [n / ws[1], ws[1]] {
                    let shape = vec![(n / ws[1]) as i64, ws[1] as i64];
                    self.em.push1(Op::reshape(shape), &[x])?
                } else {
                    x
                };
                let mut operands = vec![x, w];
                if let Some(b) = opt_input(2) {
                    operands.push(self.value(b, Some(false))?.0);
                }
                let g = Gemm {
                    trans_b: true,
                    activation: act,
                    ..Default::default()
                };
                let declared = self.shape_of(out)?;
                let mut y = self.result(out, Op::Gemm(g), &operands)?;
                if self.em.is_sym(y) {
                    // `keep_num_dims`: the input's leading dims (the free ones as `-1`; the
                    // gate let through at most one) and the output features.
                    let xsym = self.em.sym_ty(x0).shape;
                    if declared.len() != 2 {
                        let mut shape: Vec<i64> = xsym[..xsym.len() - 1]
                            .iter()
                            .map(|d| d.known().map_or(-1, |d| d as i64))
                            .collect();
                        shape.push(ws[0] as i64);
                        if shape.iter().filter(|&&d| d == -1).count() > 1
                            || shape.len() != declared.len()
                        {
                            return Err(format!(
                                "the output {declared:?} keeps more than one free dim of the input"
                            ));
                        }
                        y = self.em.push1(Op::reshape(shape), &[y])?;
                    }
                } else if self.em.shape(y) != declared {
                    let shape = declared.iter().map(|&d| d as i64).collect();
                    y = self.em.push1(Op::reshape(shape), &[y])?;
                }
                self.define(out, y, false)
            }
            B::ADD | B::SUB | B::MUL | B::DIV => {
                let (bop, act) = match code {
                    B::ADD => (
                        BinaryOp::Add,
                        op.builtin_options_as_add_options()
                            .map(|o| o.fused_activation_function()),
                    ),
                    B::SUB => (
                        BinaryOp::Sub,
                        op.builtin_options_as_sub_options()
                            .map(|o| o.fused_activation_function()),
                    ),
                    B::MUL => (
                        BinaryOp::Mul,
                        op.builtin_options_as_mul_options()
                            .map(|o| o.fused_activation_function()),
                    ),
                    _ => (
                        BinaryOp::Div,
                        op.builtin_options_as_div_options()
                            .map(|o| o.fused_activation_function()),
                    ),
                };
                let activation = activation(act.unwrap_or(ActivationFunctionType::NONE))?;
                let (a, b) = (input(0)?, input(1)?);
                let nchw = self.elementwise_nchw(&[a, b], out)?;
                let va = self.bcast_operand(a, nchw)?;
                let vb = self.bcast_operand(b, nchw)?;
                let y = self.result(
                    out,
                    Op::Binary {
                        op: bop,
                        activation,
                    },
                    &[va, vb],
                )?;
                self.define(out, y, nchw)
            }
            B::LOGISTIC | B::TANH | B::RELU | B::RELU6 | B::HARD_SWISH | B::RELU_N1_TO_1 => {
                let (x, nchw) = self.value(input(0)?, None)?;
                let op = match code {
                    B::LOGISTIC => Op::Unary(UnaryOp::Sigmoid),
                    B::TANH => Op::Unary(UnaryOp::Tanh),
                    B::RELU => Op::Unary(UnaryOp::Relu),
                    B::RELU6 => Op::Unary(UnaryOp::Relu6),
                    B::HARD_SWISH => Op::Unary(UnaryOp::HardSwish),
                    _ => Op::Clip {
                        min: -1.0,
                        max: 1.0,
                    },
                };
                let y = self.result(out, op, &[x])?;
                self.define(out, y, nchw)
            }
            B::LEAKY_RELU => {
                let alpha = op
                    .builtin_options_as_leaky_relu_options()
                    .map(|o| o.alpha())
                    .unwrap_or(0.0);
                let (x, nchw) = self.value(input(0)?, None)?;
                let hint = format!("{}.alpha", self.tname(out));
                let s = self.weight(&hint, vec![1], &[alpha]);
                let y = self.result(out, Op::Prelu, &[x, s])?;
                self.define(out, y, nchw)
            }
            B::PRELU => {
                let (x, a) = (input(0)?, input(1)?);
                let nchw = self.is_nchw(x)?;
                let (vx, _) = self.value(x, None)?;
                let va = self.bcast_operand(a, nchw)?;
                let y = self.result(out, Op::Prelu, &[vx, va])?;
                self.define(out, y, nchw)
            }
            B::SOFTMAX => {
                let beta = op
                    .builtin_options_as_softmax_options()
                    .map(|o| o.beta())
                    .unwrap_or(1.0);
                let (mut x, nchw) = self.value(input(0)?, None)?;
                if beta != 1.0 {
                    let hint = format!("{}.beta", self.tname(out));
                    let b = self.weight(&hint, vec![1], &[beta]);
                    x = self.em.push1(
                        Op::Binary {
                            op: BinaryOp::Mul,
                            activation: None,
                        },
                        &[x, b],
                    )?;
                }
                let axis = if nchw { 1 } else { -1 };
                let y = self.result(out, Op::Softmax { axis }, &[x])?;
                self.define(out, y, nchw)
            }
            B::MAX_POOL_2D | B::AVERAGE_POOL_2D => {
                let o = op
                    .builtin_options_as_pool_2_doptions()
                    .ok_or("missing Pool2DOptions")?;
                let x = input(0)?;
                let xs = self.shape_of(x)?;
                if xs.len() != 4 {
                    return Err(format!("the input has shape {xs:?}, not NHWC"));
                }
                let k = [o.filter_height(), o.filter_width()];
                if k.iter().any(|&k| k <= 0) {
                    return Err(format!("the filter size {k:?} is not positive"));
                }
                let k = [k[0] as u64, k[1] as u64];
                let (strides, pads) =
                    window(&xs, k, o.padding(), [o.stride_h(), o.stride_w()], [1, 1])?;
                let p = Pool2d {
                    kernel: k,
                    strides,
                    pads,
                    ceil_mode: false,
                    count_include_pad: false,
                };
                let act = activation(o.fused_activation_function())?;
                let (vx, _) = self.value(x, Some(true))?;
                let op = if code == B::MAX_POOL_2D {
                    Op::MaxPool(p)
                } else {
                    Op::AvgPool(p)
                };
                let y = self.result_act(out, op, &[vx], act)?;
                self.define(out, y, true)
            }
            B::CONCATENATION => {
                let o = op
                    .builtin_options_as_concatenation_options()
                    .ok_or("missing ConcatenationOptions")?;
                let act = activation(o.fused_activation_function())?;
                let ts: Vec<usize> = (0..ins.len()).map(input).collect::<R<_>>()?;
                let rank = self.shape_of(out)?.len();
                let axis = norm_axis(o.axis() as i64, rank)?;
                let mut nchw = rank == 4;
                if nchw {
                    let mut any = false;
                    for &t in &ts {
                        any |= self.is_nchw(t)?;
                    }
                    nchw = any;
                }
                let mut vs = Vec::new();
                for &t in &ts {
                    vs.push(self.value(t, Some(nchw))?.0);
                }
                let axis = if nchw { NCHW_POS[axis] } else { axis } as i64;
                let y = self.result_act(out, Op::Concat { axis }, &vs, act)?;
                self.define(out, y, nchw)
            }
            B::MEAN | B::SUM | B::REDUCE_MAX | B::REDUCE_MIN | B::REDUCE_PROD => {
                let kind = match code {
                    B::SUM => ReduceKind::Sum,
                    B::REDUCE_MAX => ReduceKind::Max,
                    B::REDUCE_MIN => ReduceKind::Min,
                    B::REDUCE_PROD => ReduceKind::Prod,
                    _ => ReduceKind::Mean,
                };
                let keep = op
                    .builtin_options_as_reducer_options()
                    .is_some_and(|o| o.keep_dims());
                let x = input(0)?;
                let axes_c = self.konst(input(1)?)?;
                let rank = self.shape_of(x)?.len();
                let mut axes = Vec::new();
                for &a in axes_c.ints()? {
                    let a = norm_axis(a, rank)?;
                    if !axes.contains(&a) {
                        axes.push(a);
                    }
                }
                let (vx, nchw) = self.value(x, None)?;
                if nchw {
                    let axes = axes.iter().map(|&a| NCHW_POS[a] as i64).collect();
                    let r = Op::Reduce {
                        kind,
                        axes,
                        keepdims: true,
                    };
                    if keep {
                        let y = self.result(out, r, &[vx])?;
                        return self.define(out, y, true);
                    }
                    let y = self.em.push1(r, &[vx])?;
                    let y = self.permute(y, &TO_NHWC)?;
                    let shape = self.shape_of(out)?.iter().map(|&d| d as i64).collect();
                    let y = self.result(out, Op::reshape(shape), &[y])?;
                    return self.define(out, y, false);
                }
                let r = Op::Reduce {
                    kind,
                    axes: axes.iter().map(|&a| a as i64).collect(),
                    keepdims: keep,
                };
                let y = self.result(out, r, &[vx])?;
                self.define(out, y, false)
            }
            B::RESHAPE | B::SQUEEZE | B::EXPAND_DIMS => {
                let (x, _) = self.value(input(0)?, Some(false))?;
                let shape = self.shape_of(out)?.iter().map(|&d| d as i64).collect();
                let y = self.result(out, Op::reshape(shape), &[x])?;
                self.define(out, y, false)
            }
            B::TRANSPOSE => {
                let (x, _) = self.value(input(0)?, Some(false))?;
                let p = self.konst(input(1)?)?;
                let rank = self.em.ty(x).rank();
                let perm = p
                    .ints()?
                    .iter()
                    .map(|&a| norm_axis(a, rank).map(|a| a as u64))
                    .collect::<R<Vec<_>>>()?;
                let y = self.result(out, Op::Transpose { perm }, &[x])?;
                self.define(out, y, false)
            }
            B::PAD | B::PADV2 => {
                let x = input(0)?;
                let p = self.konst(input(1)?)?;
                let value = match opt_input(2) {
                    Some(t) if code == B::PADV2 => {
                        let c = self.konst(t)?;
                        *c.floats()?.first().ok_or("the pad value is empty")? as f64
                    }
                    _ => 0.0,
                };
                let (vx, nchw) = self.value(x, None)?;
                let rank = self.em.ty(vx).rank();
                let pv = p.ints()?;
                if pv.len() != 2 * rank || pv.iter().any(|&v| v < 0) {
                    return Err(format!(
                        "the paddings {pv:?} are not {rank} non-negative [before, after] pairs"
                    ));
                }
                let mut pads = vec![0u64; 2 * rank];
                for j in 0..rank {
                    let src = if nchw { TO_NCHW[j] } else { j };
                    pads[j] = pv[2 * src] as u64;
                    pads[rank + j] = pv[2 * src + 1] as u64;
                }
                let op = Op::Pad {
                    pads,
                    mode: tir_ir::op::PadMode::Constant,
                    value,
                };
                let y = self.result(out, op, &[vx])?;
                self.define(out, y, nchw)
            }
            B::RESIZE_BILINEAR | B::RESIZE_NEAREST_NEIGHBOR => {
                let (align, half) = if code == B::RESIZE_BILINEAR {
                    op.builtin_options_as_resize_bilinear_options()
                        .map(|o| (o.align_corners(), o.half_pixel_centers()))
                } else {
                    op.builtin_options_as_resize_nearest_neighbor_options()
                        .map(|o| (o.align_corners(), o.half_pixel_centers()))
                }
                .unwrap_or((false, false));
                if align && half {
                    return Err(
                        "align_corners together with half_pixel_centers is not supported".into(),
                    );
                }
                let size = self.konst(input(1)?)?;
                let sz = size.ints()?;
                if sz.len() != 2 || sz.iter().any(|&d| d <= 0) {
                    return Err(format!("the output size {sz:?} is not two positive values"));
                }
                let coord = if align {
                    CoordMode::AlignCorners
                } else if half {
                    CoordMode::HalfPixel
                } else {
                    CoordMode::Asymmetric
                };
                let (mode, nearest) = if code == B::RESIZE_BILINEAR {
                    (ResizeMode::Bilinear, NearestMode::RoundPreferFloor)
                } else if align || half {
                    (ResizeMode::Nearest, NearestMode::RoundPreferCeil)
                } else {
                    (ResizeMode::Nearest, NearestMode::Floor)
                };
                let (vx, _) = self.value(input(0)?, Some(true))?;
                let r = Resize {
                    size: [sz[0] as u64, sz[1] as u64],
                    scale: None,
                    mode,
                    coord,
                    nearest,
                };
                let y = self.result(out, Op::Resize(r), &[vx])?;
                self.define(out, y, true)
            }
            B::SPLIT | B::SPLIT_V => {
                // SPLIT: (axis, input), equal pieces; SPLIT_V: (input, sizes, axis), one size
                // may be -1 (the rest).
                let (x, axis_t) = if code == B::SPLIT {
                    (input(1)?, input(0)?)
                } else {
                    (input(0)?, input(2)?)
                };
                let axis_c = self.konst(axis_t)?;
                let xs = self.shape_of(x)?;
                let axis = norm_axis(
                    *axis_c.ints()?.first().ok_or("the axis is empty")?,
                    xs.len(),
                )?;
                let n = outs.len() as u64;
                let sizes = if code == B::SPLIT {
                    if n == 0 || !xs[axis].is_multiple_of(n) {
                        return Err(format!(
                            "{} does not split into {n} equal pieces along axis {axis}",
                            xs[axis]
                        ));
                    }
                    vec![xs[axis] / n; outs.len()]
                } else {
                    let given = self.konst(input(1)?)?;
                    split_sizes(given.ints()?, xs[axis], outs.len())?
                };
                let (vx, nchw) = self.value(x, None)?;
                let ir_axis = if nchw { NCHW_POS[axis] } else { axis } as i64;
                let names = outs
                    .iter()
                    .map(|&t| self.em.unique(&self.tname(t)))
                    .collect();
                let ys = self.em.push(
                    Op::Split {
                        axis: ir_axis,
                        sizes,
                    },
                    &[vx],
                    names,
                )?;
                for (&t, &y) in outs.iter().zip(&ys) {
                    self.define(t, y, nchw)?;
                }
                Ok(())
            }
            B::SLICE | B::STRIDED_SLICE => self.slice(op, code, &ins, out),
            B::DEPTH_TO_SPACE => {
                let o = op
                    .builtin_options_as_depth_to_space_options()
                    .ok_or("missing DepthToSpaceOptions")?;
                let x = input(0)?;
                let xs = self.shape_of(x)?;
                let b = u64::try_from(o.block_size())
                    .ok()
                    .filter(|&b| b >= 1)
                    .ok_or_else(|| format!("block size {} is not positive", o.block_size()))?;
                let [n, h, w, c] = xs[..] else {
                    return Err(format!("the input has shape {xs:?}, not [N, H, W, C]"));
                };
                if !c.is_multiple_of(b * b) {
                    return Err(format!("{c} channels do not divide into blocks of {b}×{b}"));
                }
                // In NCHW, channel (i·b + j)·C' + c of pixel (y, x) goes to channel c of pixel
                // (y·b + i, x·b + j): split the channels into (i, j, c), move i after y and j
                // after x, merge.
                let cc = c / (b * b);
                let (vx, _) = self.value(x, Some(true))?;
                let dims = |d: &[u64]| d.iter().map(|&d| d as i64).collect();
                let split = self
                    .em
                    .push1(Op::reshape(dims(&[n, b, b, cc, h, w])), &[vx])?;
                let moved = self.em.push1(
                    Op::Transpose {
                        perm: vec![0, 3, 4, 1, 5, 2],
                    },
                    &[split],
                )?;
                let y = self.result(out, Op::reshape(dims(&[n, cc, h * b, w * b])), &[moved])?;
                self.define(out, y, true)
            }
            B::DEQUANTIZE => {
                let x = input(0)?;
                match self.val(x)? {
                    Val::Const(c) => match &c.data {
                        CData::F16(v) | CData::F32(v) => {
                            let folded = Const {
                                shape: c.shape.clone(),
                                data: CData::F32(v.clone()),
                            };
                            let declared = self.shape_of(out)?;
                            if declared != c.shape {
                                return Err(format!(
                                    "the output's shape {declared:?} differs from the input's {:?}",
                                    c.shape
                                ));
                            }
                            self.vals.insert(out, Val::Const(Rc::new(folded)));
                            Ok(())
                        }
                        CData::Int(_) => Err(self.type_refusal(x, self.tensor(x)?.type_())),
                    },
                    Val::Ir { .. } => Err(format!(
                        "{} is not a constant: only float16 weights are dequantized (folded at import)",
                        self.describe(x)
                    )),
                }
            }
            // The sparse input was densified when it was loaded: DENSIFY is the identity on it.
            B::DENSIFY => {
                let x = input(0)?;
                let c = self.konst(x)?;
                let declared = self.shape_of(out)?;
                if declared != c.shape {
                    return Err(format!(
                        "the output's shape {declared:?} differs from the input's {:?}",
                        c.shape
                    ));
                }
                self.vals.insert(out, Val::Const(c));
                Ok(())
            }
            B::TRANSPOSE_CONV => {
                let o = op.builtin_options_as_transpose_conv_options();
                let (padding, strides, act) = match o {
                    Some(o) => (
                        o.padding(),
                        [o.stride_h(), o.stride_w()],
                        o.fused_activation_function(),
                    ),
                    None => (Padding::SAME, [1, 1], ActivationFunctionType::NONE),
                };
                let (x, f) = (input(2)?, self.konst(input(1)?)?);
                let xs = self.shape_of(x)?;
                let k = self.transpose_conv_filter(&xs, &f)?;
                let os = self.konst(input(0)?)?;
                let os = os.ints()?;
                if os.len() != 4 || os.iter().any(|&d| d < 0) {
                    return Err(format!(
                        "the output shape {os:?} is not a non-negative [N, H, W, C]"
                    ));
                }
                if os[0] as u64 != xs[0] || os[3] as u64 != f.shape[0] {
                    return Err(format!(
                        "the output shape {os:?} does not match the input's batch {} and the filter's {} output channels",
                        xs[0], f.shape[0]
                    ));
                }
                let (pads, output_padding) =
                    transpose_conv_pads(&xs, k, strides, padding, [os[1] as u64, os[2] as u64])?;
                let attrs = ConvTranspose {
                    strides: strides.map(|s| s as u64),
                    pads,
                    output_padding,
                    activation: activation(act)?,
                    ..ConvTranspose::default()
                };
                let w = self.transpose_conv_weight(input(1)?, &f)?;
                self.conv_transpose(out, x, w, opt_input(3), attrs)
            }
            _ => Err("not supported by tir's TFLite importer".into()),
        }
    }

    /// An operator with an operand `t` whose shape depends on the free dim `dim`: imported
    /// when what it emits holds for every value of the dim, else refused naming both.
    #[allow(clippy::too_many_arguments)]
    fn operator_free(
        &mut self,
        op: &schema::Operator<'a>,
        code: BuiltinOperator,
        name: &str,
        ins: &[i32],
        out: usize,
        t: usize,
        dim: &str,
    ) -> R<()> {
        type B = BuiltinOperator;
        let sym_ty = |imp: &Self, t: i32| match imp.vals.get(&(t as usize)) {
            Some(Val::Ir { v, .. }) if t >= 0 && imp.em.is_sym(*v) => Some(imp.em.sym_ty(*v)),
            _ => None,
        };
        let refuse = |imp: &Self, what: String| Err(imp.needs_static(t, dim, &what));
        match code {
            // The IR's pads are static: a free batch is fine, and so is a free H or W where
            // the window's pads do not depend on it: VALID (none), or SAME with stride 1 on
            // that axis (`(in - 1)·1 + k_eff - in = k_eff - 1` in total for every `in`). SAME
            // with a larger stride pads by `in mod s`, which the IR cannot express: refused.
            B::CONV_2D | B::DEPTHWISE_CONV_2D | B::MAX_POOL_2D | B::AVERAGE_POOL_2D => {
                let (padding, strides) = match code {
                    B::CONV_2D => op
                        .builtin_options_as_conv_2_doptions()
                        .map(|o| (o.padding(), [o.stride_h(), o.stride_w()])),
                    B::DEPTHWISE_CONV_2D => op
                        .builtin_options_as_depthwise_conv_2_doptions()
                        .map(|o| (o.padding(), [o.stride_h(), o.stride_w()])),
                    _ => op
                        .builtin_options_as_pool_2_doptions()
                        .map(|o| (o.padding(), [o.stride_h(), o.stride_w()])),
                }
                .ok_or_else(|| format!("{name} has no options"))?;
                let ty = sym_ty(self, ins[0]);
                // The IR value is NHWC as the file has it, or already NCHW.
                let nchw = matches!(
                    self.vals.get(&(ins[0] as usize)),
                    Some(Val::Ir { nchw: true, .. })
                );
                let [c, hw] = if nchw { [1, 2] } else { [3, 1] };
                if ty.as_ref().is_some_and(|ty| ty.rank() != 4)
                    || ty.as_ref().is_some_and(|ty| ty.shape[c].known().is_none())
                    || ins.iter().skip(1).any(|&i| sym_ty(self, i).is_some())
                {
                    return refuse(
                        self,
                        format!("{name} needs static channels and a static filter"),
                    );
                }
                if let Some(ty) = ty {
                    for (i, axis) in ["H", "W"].into_iter().enumerate() {
                        if ty.shape[hw + i].known().is_none()
                            && padding == Padding::SAME
                            && strides[i] != 1
                        {
                            return refuse(
                                self,
                                format!(
                                    "{name} pads a free {axis} by SAME with stride {}, so its pads depend on the dim (tir's pads are static; only stride 1 or VALID keeps them fixed)",
                                    strides[i]
                                ),
                            );
                        }
                    }
                }
            }
            // `x` flattened to `[-1, in]` (a reshape that holds for every value), the weights
            // and bias static.
            B::FULLY_CONNECTED => {
                if ins.iter().skip(1).any(|&i| sym_ty(self, i).is_some()) {
                    return refuse(self, format!("{name} needs static weights and bias"));
                }
                if sym_ty(self, ins[0]).is_some_and(|ty| {
                    ty.shape.last().is_none_or(|d| d.known().is_none())
                        && op
                            .builtin_options_as_fully_connected_options()
                            .is_some_and(|o| o.keep_num_dims())
                }) {
                    return refuse(
                        self,
                        format!("{name} keeps the input's dims with a free last one"),
                    );
                }
            }
            // The symbolic rule adds the operands' extents along the axis and checks the
            // others equal at run time.
            B::CONCATENATION => {}
            // Broadcasting an operand of a lower rank goes through a static reshape.
            B::ADD | B::SUB | B::MUL | B::DIV => {
                let rank = self.shape_of(out)?.len();
                if ins
                    .iter()
                    .any(|&i| sym_ty(self, i).is_some_and(|ty| ty.rank() != rank))
                {
                    return refuse(
                        self,
                        format!(
                            "{name} broadcasts it from a lower rank, which needs its static shape"
                        ),
                    );
                }
            }
            B::LOGISTIC | B::TANH | B::RELU | B::RELU6 | B::HARD_SWISH | B::RELU_N1_TO_1 => {}
            // TFLite's RESHAPE resolves one `-1` in the new shape at run time, as tir's
            // `reshape` does: with one, the op holds for every value; without, the new shape
            // is the file's static one.
            B::RESHAPE => {
                let shape: Vec<i64> = match ins.get(1).filter(|&&i| i >= 0) {
                    Some(&s) => self.konst(s as usize)?.ints()?.to_vec(),
                    None => op
                        .builtin_options_as_reshape_options()
                        .and_then(|o| o.new_shape())
                        .map(|v| v.iter().map(i64::from).collect())
                        .unwrap_or_default(),
                };
                let minus = shape.iter().filter(|&&d| d == -1).count();
                if minus != 1 || shape.iter().any(|&d| d < -1) {
                    return refuse(
                        self,
                        format!("{name}'s new shape {shape:?} has no `-1` to take it"),
                    );
                }
                let (x, _) = self.value(t, Some(false))?;
                let y = self.result(out, Op::reshape(shape), &[x])?;
                return self.define(out, y, false);
            }
            _ => {
                return refuse(self, format!("{name} needs its static shape"));
            }
        }
        // The common path, now known to hold for every value of the free dims.
        self.past_gate = true;
        let r = self.operator(op, name);
        self.past_gate = false;
        r
    }

    /// The element-wise ops compute in NCHW when an operand already is NCHW and the result is
    /// rank 4 (every operand of rank at most 4).
    fn elementwise_nchw(&mut self, ts: &[usize], out: usize) -> R<bool> {
        if self.shape_of(out)?.len() != 4 {
            return Ok(false);
        }
        let mut any = false;
        for &t in ts {
            if self.shape_of(t)?.len() > 4 {
                return Ok(false);
            }
            any |= self.is_nchw(t)?;
        }
        Ok(any)
    }

    /// Pushes `op` with a result named after tensor `t`.
    fn result(&mut self, t: usize, op: Op, operands: &[Value]) -> R<Value> {
        let name = self.em.unique(&self.tname(t));
        Ok(self.em.push(op, operands, vec![name])?[0])
    }

    /// `result`, then a separate activation op (for ops without a fused activation in tir).
    fn result_act(
        &mut self,
        t: usize,
        op: Op,
        operands: &[Value],
        act: Option<Activation>,
    ) -> R<Value> {
        let Some(act) = act else {
            return self.result(t, op, operands);
        };
        let y = self.em.push1(op, operands)?;
        let op = match act {
            Activation::Relu => Op::Unary(UnaryOp::Relu),
            Activation::Relu6 => Op::Unary(UnaryOp::Relu6),
            Activation::Tanh => Op::Unary(UnaryOp::Tanh),
            Activation::Sigmoid => Op::Unary(UnaryOp::Sigmoid),
            Activation::HardSwish => Op::Unary(UnaryOp::HardSwish),
            Activation::ReluN1To1 => Op::Clip {
                min: -1.0,
                max: 1.0,
            },
        };
        self.result(t, op, &[y])
    }

    #[allow(clippy::too_many_arguments)]
    fn conv_attrs(
        &self,
        xs: &[u64],
        k: [u64; 2],
        padding: Padding,
        strides: [i32; 2],
        dilations: [i32; 2],
        groups: u64,
        act: ActivationFunctionType,
    ) -> R<Conv2d> {
        if dilations.iter().any(|&d| d <= 0) {
            return Err(format!("the dilations {dilations:?} are not positive"));
        }
        let d = [dilations[0] as u64, dilations[1] as u64];
        let (strides, pads) = window(xs, k, padding, strides, d)?;
        Ok(Conv2d {
            strides,
            dilations: d,
            pads,
            groups,
            activation: activation(act)?,
            prelu: false,
        })
    }

    /// The kernel size `[kH, kW]` of a transposed convolution's filter `[O, H, W, I]` on the
    /// NHWC input of shape `xs`, after checking the two agree.
    fn transpose_conv_filter(&self, xs: &[u64], f: &Const) -> R<[u64; 2]> {
        if xs.len() != 4 {
            return Err(format!("the input has shape {xs:?}, not NHWC"));
        }
        if f.shape.len() != 4 || f.shape[3] != xs[3] {
            return Err(format!(
                "the filter has shape {:?}, not [O, H, W, I] with I = the input's {} channels",
                f.shape, xs[3]
            ));
        }
        if f.shape[1] == 0 || f.shape[2] == 0 || xs[1] == 0 || xs[2] == 0 {
            return Err(format!(
                "empty spatial dimensions: filter {:?}, input {xs:?}",
                f.shape
            ));
        }
        Ok([f.shape[1], f.shape[2]])
    }

    /// A transposed convolution's filter `[O, H, W, I]` as the IR's `[I, O, H, W]` weight.
    fn transpose_conv_weight(&mut self, t: usize, f: &Const) -> R<Value> {
        let (shape, data) = permute_data(f.floats()?, &f.shape, &[3, 0, 1, 2]);
        Ok(self.weight(&self.tname(t), shape, &data))
    }

    fn conv_transpose(
        &mut self,
        out: usize,
        x: usize,
        w: Value,
        bias: Option<usize>,
        c: ConvTranspose,
    ) -> R<()> {
        let (vx, _) = self.value(x, Some(true))?;
        let mut operands = vec![vx, w];
        if let Some(b) = bias {
            operands.push(self.value(b, Some(false))?.0);
        }
        let y = self.result(out, Op::ConvTranspose(c), &operands)?;
        self.define(out, y, true)
    }

    fn conv(&mut self, out: usize, x: usize, w: Value, bias: Option<usize>, c: Conv2d) -> R<()> {
        let (vx, _) = self.value(x, Some(true))?;
        let mut operands = vec![vx, w];
        if let Some(b) = bias {
            operands.push(self.value(b, Some(false))?.0);
        }
        let y = self.result(out, Op::Conv2d(c), &operands)?;
        self.define(out, y, true)
    }

    fn slice(
        &mut self,
        op: &schema::Operator<'a>,
        code: BuiltinOperator,
        ins: &[i32],
        out: usize,
    ) -> R<()> {
        let input = |i: usize| -> R<usize> {
            match ins.get(i) {
                Some(&t) if t >= 0 => Ok(t as usize),
                _ => Err(format!("input {i} is required")),
            }
        };
        let x = input(0)?;
        let xs = self.shape_of(x)?;
        let rank = xs.len();
        let begin = self.konst(input(1)?)?.ints()?.to_vec();
        let second = self.konst(input(2)?)?.ints()?.to_vec();
        if begin.len() != rank || second.len() != rank {
            return Err(format!(
                "begin {begin:?} and {} {second:?} need {rank} values",
                if code == BuiltinOperator::SLICE {
                    "size"
                } else {
                    "end"
                }
            ));
        }
        let (mut starts, mut ends, mut steps) = (Vec::new(), Vec::new(), vec![1i64; rank]);
        let mut shrink = 0;
        if code == BuiltinOperator::SLICE {
            for a in 0..rank {
                starts.push(begin[a]);
                ends.push(if second[a] < 0 {
                    i64::MAX
                } else {
                    begin[a] + second[a]
                });
            }
        } else {
            let o = op
                .builtin_options_as_strided_slice_options()
                .ok_or("missing StridedSliceOptions")?;
            if o.ellipsis_mask() != 0 || o.new_axis_mask() != 0 || o.offset() {
                return Err("ellipsis_mask, new_axis_mask and offset are not supported".to_string());
            }
            steps = self.konst(input(3)?)?.ints()?.to_vec();
            if steps.len() != rank || steps.contains(&0) {
                return Err(format!(
                    "the strides {steps:?} are not {rank} non-zero values"
                ));
            }
            shrink = o.shrink_axis_mask();
            for a in 0..rank {
                let bit = 1 << a;
                let (mut s, mut e) = (begin[a], second[a]);
                if o.begin_mask() & bit != 0 {
                    s = if steps[a] > 0 { 0 } else { -1 };
                }
                if o.end_mask() & bit != 0 {
                    e = if steps[a] > 0 { i64::MAX } else { i64::MIN };
                }
                if shrink & bit != 0 {
                    if s < 0 {
                        s += xs[a] as i64;
                    }
                    e = s + 1;
                    steps[a] = 1;
                }
                starts.push(s);
                ends.push(e);
            }
        }
        let (vx, nchw) = self.value(x, None)?;
        let axes: Vec<i64> = (0..rank)
            .map(|a| if nchw { NCHW_POS[a] } else { a } as i64)
            .collect();
        let op = Op::Slice(Slice {
            starts,
            ends,
            axes,
            steps,
        });
        if shrink == 0 {
            let y = self.result(out, op, &[vx])?;
            return self.define(out, y, nchw);
        }
        let mut y = self.em.push1(op, &[vx])?;
        if nchw {
            y = self.permute(y, &TO_NHWC)?;
        }
        let shape = self.shape_of(out)?.iter().map(|&d| d as i64).collect();
        let y = self.result(out, Op::reshape(shape), &[y])?;
        self.define(out, y, false)
    }
}

/// SPLIT_V's piece sizes along an axis of length `len`: `given`, with at most one -1 standing
/// for what the others leave.
fn split_sizes(given: &[i64], len: u64, outputs: usize) -> R<Vec<u64>> {
    if given.len() != outputs {
        return Err(format!("{} split sizes for {outputs} outputs", given.len()));
    }
    let unknown = given.iter().filter(|&&s| s == -1).count();
    if unknown > 1 || given.iter().any(|&s| s < -1) {
        return Err(format!("bad split sizes {given:?}"));
    }
    let known = given
        .iter()
        .filter(|&&s| s >= 0)
        .try_fold(0u64, |a, &s| a.checked_add(s as u64));
    let rest = known
        .and_then(|k| len.checked_sub(k))
        .filter(|&r| unknown == 1 || r == 0);
    let Some(rest) = rest else {
        return Err(format!("split sizes {given:?} do not add up to {len}"));
    };
    Ok(given
        .iter()
        .map(|&s| if s == -1 { rest } else { s as u64 })
        .collect())
}

fn f32_values(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// float16 values, widened (exactly) to float32.
fn f16_values(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(2)
        .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

fn activation(a: ActivationFunctionType) -> R<Option<Activation>> {
    Ok(match a {
        ActivationFunctionType::NONE => None,
        ActivationFunctionType::RELU => Some(Activation::Relu),
        ActivationFunctionType::RELU6 => Some(Activation::Relu6),
        ActivationFunctionType::RELU_N1_TO_1 => Some(Activation::ReluN1To1),
        ActivationFunctionType::TANH => Some(Activation::Tanh),
        other => {
            return Err(format!(
                "the fused activation {} is not supported",
                other
                    .variant_name()
                    .map(str::to_string)
                    .unwrap_or_else(|| other.0.to_string())
            ))
        }
    })
}

/// Strides and `[top, left, bottom, right]` pads of a window op on an NHWC input, with
/// TFLite's SAME rule (the output is `ceil(in / stride)`, the extra padding at the end).
fn window(
    xs: &[u64],
    k: [u64; 2],
    padding: Padding,
    strides: [i32; 2],
    dil: [u64; 2],
) -> R<([u64; 2], [u64; 4])> {
    if strides.iter().any(|&s| s <= 0) {
        return Err(format!("the strides {strides:?} are not positive"));
    }
    let s = [strides[0] as u64, strides[1] as u64];
    let mut pads = [0u64; 4];
    match padding {
        Padding::SAME => {
            for i in 0..2 {
                let input = xs[1 + i];
                let keff = (k[i].max(1) - 1) * dil[i] + 1;
                let out = input.div_ceil(s[i]);
                let total = (out.saturating_sub(1) * s[i] + keff).saturating_sub(input);
                pads[i] = total / 2;
                pads[2 + i] = total - total / 2;
            }
        }
        Padding::VALID => {}
        other => return Err(format!("unknown padding {}", other.0)),
    }
    Ok((s, pads))
}

/// The custom code of mediapipe's transposed convolution with bias.
const MEDIAPIPE_TRANSPOSE_CONV: &str = "Convolution2DTransposeBias";

/// TRANSPOSE_CONV's crop: the output `out` (`[H, W]` of its `output_shape` input) is the full
/// transposed convolution `(in - 1)·s + k` cropped by the padding a forward convolution from
/// `out` to `in` would have (TFLite's `ComputePaddingHeightWidth`: SAME puts the odd pixel at
/// the end, VALID has none), its end padded with zeros (the bias) when `out` is larger.
/// Returns `[top, left, bottom, right]` pads and `[bottom, right]` output padding.
fn transpose_conv_pads(
    xs: &[u64],
    k: [u64; 2],
    strides: [i32; 2],
    padding: Padding,
    out: [u64; 2],
) -> R<([u64; 4], [u64; 2])> {
    if strides.iter().any(|&s| s <= 0) {
        return Err(format!("the strides {strides:?} are not positive"));
    }
    let mut pads = [0u64; 4];
    let mut extra = [0u64; 2];
    for i in 0..2 {
        let s = strides[i] as u64;
        let begin = match padding {
            Padding::SAME => {
                let conv_out = out[i].div_ceil(s);
                conv_out
                    .saturating_sub(1)
                    .saturating_mul(s)
                    .saturating_add(k[i])
                    .saturating_sub(out[i])
                    / 2
            }
            Padding::VALID => 0,
            other => return Err(format!("unknown padding {}", other.0)),
        };
        let full = (xs[1 + i] - 1)
            .checked_mul(s)
            .and_then(|v| v.checked_add(k[i]))
            .ok_or("the output size overflows")?;
        if begin > full {
            return Err(format!(
                "the padding {begin} is larger than the full output {full}"
            ));
        }
        let end = full - begin;
        pads[i] = begin;
        if end >= out[i] {
            pads[2 + i] = end - out[i];
        } else {
            extra[i] = out[i] - end;
        }
    }
    Ok((pads, extra))
}

/// Mediapipe's `Convolution2DTransposeBias` padding: the output is `(in - 1)·s + k - P`
/// with `P = max(0, k - (in - 1) mod s - 1)` under SAME (0 under VALID), `P / 2` cropped at the
/// start and the rest at the end.
fn mediapipe_transpose_pads(xs: &[u64], k: [u64; 2], strides: [i32; 2], same: bool) -> R<[u64; 4]> {
    if strides.iter().any(|&s| s <= 0) {
        return Err(format!("the strides {strides:?} are not positive"));
    }
    let mut pads = [0u64; 4];
    for i in 0..2 {
        let s = strides[i] as u64;
        let p = if same {
            k[i].saturating_sub((xs[1 + i] - 1) % s + 1)
        } else {
            0
        };
        pads[i] = p / 2;
        pads[2 + i] = p - p / 2;
    }
    Ok(pads)
}

fn norm_axis(a: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(format!("axis {a} is out of range for rank {rank}"));
    }
    Ok(if a < 0 { a + r } else { a } as usize)
}

/// `data` in `shape`, transposed: output dimension `i` is input dimension `perm[i]`.
fn permute_data(data: &[f32], shape: &[u64], perm: &[usize]) -> (Vec<u64>, Vec<f32>) {
    let out_shape: Vec<u64> = perm.iter().map(|&p| shape[p]).collect();
    let rank = shape.len();
    let mut in_strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * shape[i + 1] as usize;
    }
    let n = data.len();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0u64; rank];
    for _ in 0..n {
        let src: usize = (0..rank)
            .map(|i| idx[i] as usize * in_strides[perm[i]])
            .sum();
        out.push(data[src]);
        for i in (0..rank).rev() {
            idx[i] += 1;
            if idx[i] < out_shape[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    (out_shape, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_data_moves_axes() {
        // [2, 3] → [3, 2]
        let (s, d) = permute_data(&[0., 1., 2., 3., 4., 5.], &[2, 3], &[1, 0]);
        assert_eq!(s, vec![3, 2]);
        assert_eq!(d, vec![0., 3., 1., 4., 2., 5.]);
    }

    #[test]
    fn same_padding_puts_the_extra_at_the_end() {
        // in 7, k 3, s 2: out 4, total (3*2 + 3) - 7 = 2 → 1, 1; in 6: out 3, total 1 → 0, 1.
        let (_, p) = window(&[1, 7, 6, 1], [3, 3], Padding::SAME, [2, 2], [1, 1]).unwrap();
        assert_eq!(p, [1, 0, 1, 1]);
    }
}
