//! The graph walk: ONNX nodes in order → folded constants or IR ops.
//!
//! This file holds the entry points, the importer's state and the dispatcher ([`Importer::node`]);
//! each op family lives in its own module: [`conv`] (convolution, pooling), [`linear`] (MatMul,
//! Gemm), [`elementwise`] (binary, unary, activations, the erf-GELU pattern), [`shape`]
//! (reshape, views, concat, split, slice, pad), [`norm`] (normalisations, softmax, reductions),
//! [`resize`], and [`fold`] (evaluating nodes whose inputs are all constants, which is how the
//! shape subgraphs PyTorch exports disappear).

mod attention;
mod attrs;
mod compose;
mod conv;
mod decompose;
mod einsum;
mod elementwise;
mod fold;
mod grid;
mod linear;
mod norm;
mod quant;
mod recurrent;
mod resize;
mod scan;
mod shape;
mod symshape;

use crate::error::{ImportError, InputError, NodeError, Oversized};
use crate::proto::{ModelProto, NodeProto};
use crate::tensor::{self, Tensor};
use crate::{Imported, Weights};
use attrs::Attrs;
use prost::Message;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tir_ir::sym::{derived_name, is_symbol_name, Dim};
use tir_ir::{
    DType, DimExpr, Function, Module, Op, ReduceKind, SymTensorType, TensorType, UnaryOp, Value,
};

/// The opsets whose semantics the importer follows. Opsets 22 to 24 (what onnx 1.19 writes)
/// changed no attribute, input or output of an op the importer maps: their new versions only
/// widen type constraints (bfloat16, float8, 4-bit types; Cast-24's `round_mode` concerns
/// float8e8m0 only), which element-type checks refuse anyway.
pub const MIN_OPSET: i64 = 11;
pub const MAX_OPSET: i64 = 24;

/// The opset from which an op's semantics (attributes, inputs, outputs, and behaviour on the
/// element types tir holds) are those the importer follows, for the ops that have not changed
/// since before [`MIN_OPSET`]: a graph of an older opset made only of them imports.
fn stable_since(op_type: &str) -> Option<i64> {
    match op_type {
        // Logic on bool: unchanged since broadcasting arrived (opset 7); Not since opset 1.
        "And" | "Or" | "Xor" => Some(7),
        "Not" => Some(1),
        // Shrink has one version (9); Scatter's (9, removed in 11) is ScatterElements-11
        // without negative indices, which only widen what it accepts.
        "Shrink" | "Scatter" => Some(9),
        // One version each since their introduction in opset 10.
        "MatMulInteger" | "ConvInteger" | "ReverseSequence" => Some(10),
        _ => None,
    }
}

#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Values for symbolic input dimensions (`--dim name=value`). A symbolic first dimension
    /// without a value is the batch and becomes 1.
    pub dims: Vec<(String, u64)>,
    /// Where external-data files are looked up (the model's directory).
    pub base_dir: Option<PathBuf>,
    /// The module name (default: the graph's name, else `model`).
    pub name: Option<String>,
    /// Skip the import-time cleanup (activation fusion, BatchNormalization folding).
    pub no_cleanup: bool,
    /// Graph inputs fixed to a value at import time (`--bind NAME=FILE.npy`): each becomes a
    /// constant, as if it were an initializer, so that a shape, axes, pads or scales operand
    /// that a model takes as an input folds like one it holds. The declared shape is ignored.
    pub bound: Vec<(String, Tensor)>,
    /// Keep the input dims that no `--dim` pins symbolic (`tirc import`): a `dim_param` becomes
    /// a symbol of that name (sanitised), an unnamed, `?` or `-1` dim the derived name
    /// `input.dN`, and the module is dynamic. Off, a symbolic first dim is the batch and
    /// becomes 1, and any other is refused (`tirc compile MODEL.onnx`).
    pub keep_symbols: bool,
}

/// Reads and imports an `.onnx` file; external data is read beside it.
pub fn import_file(path: &Path, opts: &ImportOptions) -> Result<Imported, ImportError> {
    let bytes = std::fs::read(path).map_err(|e| ImportError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let mut opts = opts.clone();
    if opts.base_dir.is_none() {
        opts.base_dir = Some(
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        );
    }
    if opts.name.is_none() {
        opts.name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    }
    import_bytes(&bytes, &opts)
}

/// Imports a serialized `ModelProto`.
pub fn import_bytes(bytes: &[u8], opts: &ImportOptions) -> Result<Imported, ImportError> {
    let model = ModelProto::decode(bytes).map_err(|e| ImportError::Decode(e.to_string()))?;
    import_model(&model, opts)
}

/// Imports a decoded model.
pub fn import_model(model: &ModelProto, opts: &ImportOptions) -> Result<Imported, ImportError> {
    let graph = model.graph.as_ref().ok_or(ImportError::NoGraph)?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        .and_then(|o| o.version)
        .ok_or(ImportError::NoDefaultOpset)?;
    let stable = |n: &NodeProto| {
        stable_since(n.op_type.as_deref().unwrap_or("")).is_some_and(|v| v <= opset)
    };
    let older_but_stable = opset < MIN_OPSET && graph.node.iter().all(stable);
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) && !older_but_stable {
        return Err(ImportError::Opset { opset });
    }
    let name = opts
        .name
        .clone()
        .or_else(|| graph.name.clone().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "model".into());
    let mut imp = Importer {
        opset,
        env: HashMap::new(),
        materialized: HashMap::new(),
        em: Emitter::new(),
        weights: Weights::default(),
        graph_outputs: graph.output.iter().filter_map(|o| o.name.clone()).collect(),
        used: HashSet::new(),
        weight_keys: HashSet::new(),
    };
    for n in &graph.node {
        imp.used
            .extend(n.input.iter().filter(|s| !s.is_empty()).cloned());
    }
    imp.used.extend(imp.graph_outputs.iter().cloned());

    let base_dir = opts.base_dir.as_deref();
    for init in &graph.initializer {
        let iname = init.name.clone().unwrap_or_default();
        let t = Tensor::from_proto(init, base_dir).map_err(|problem| ImportError::Initializer {
            name: iname.clone(),
            problem,
        })?;
        imp.env.insert(iname, Val::Const(Rc::new(t)));
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(ImportError::SparseInitializers);
    }

    // Graph inputs (those that are not initializers: before IR version 4 every initializer
    // was listed as an input too).
    let mut dims_used = HashSet::new();
    for input in &graph.input {
        let iname = input.name.clone().unwrap_or_default();
        if imp.env.contains_key(&iname) {
            continue;
        }
        if let Some((_, t)) = opts.bound.iter().find(|(n, _)| *n == iname) {
            imp.env.insert(iname, Val::Const(Rc::new(t.clone())));
            continue;
        }
        let vname = imp.em.unique(&iname);
        let ty = input_type(input, &vname, opts, &mut dims_used).map_err(|problem| {
            ImportError::Input {
                name: iname.clone(),
                problem,
            }
        })?;
        let v = imp.em.add_param(vname.clone(), ty);
        imp.env.insert(iname, Val::Ir(v));
    }
    for (name, _) in &opts.bound {
        let is_input = graph
            .input
            .iter()
            .any(|i| i.name.as_deref() == Some(name.as_str()));
        if !is_input
            || graph
                .initializer
                .iter()
                .any(|i| i.name.as_deref() == Some(name))
        {
            return Err(ImportError::UnboundName { name: name.clone() });
        }
    }
    for (d, _) in &opts.dims {
        if !dims_used.contains(d) {
            return Err(ImportError::UnusedDim { name: d.clone() });
        }
    }

    let mut skip = HashSet::new();
    for (index, node) in graph.node.iter().enumerate() {
        if skip.contains(&index) {
            continue;
        }
        if node.op_type.as_deref() == Some("Erf") {
            if let Some((x, out, covered)) = imp.erf_gelu(&graph.node, index) {
                // PyTorch's exact GELU before opset 20: 0.5 * x * (1 + erf(x / sqrt 2)).
                // (An `x` not yet defined leaves the Erf to the node walk, which names it.)
                if let Ok(x) = imp.value(&x) {
                    let vname = if imp.graph_outputs.contains(&out) {
                        imp.em.unique(&out)
                    } else {
                        imp.em.fresh()
                    };
                    let y = imp.em.push(Op::Unary(UnaryOp::Gelu), &[x], vec![vname]);
                    if let Ok(y) = y {
                        imp.env.insert(out, Val::Ir(y[0]));
                        skip.extend(covered);
                        continue;
                    }
                }
            }
        }
        imp.node(node).map_err(|problem| ImportError::Node {
            index,
            name: node.name.clone().unwrap_or_default(),
            op_type: node.op_type.clone().unwrap_or_default(),
            problem: Box::new(problem),
        })?;
    }

    let mut returns = Vec::new();
    for out in &graph.output {
        let oname = out.name.clone().unwrap_or_default();
        let v = imp
            .value(&oname)
            .map_err(|_| ImportError::UndefinedOutput { name: oname })?;
        returns.push(v);
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
    // The producer's strings go into a `//` line of the printed module: escaped, so that a
    // newline in them cannot end the comment and break the text.
    let producer = doc_text(model.producer_name.as_deref().unwrap_or(""));
    let version = doc_text(model.producer_version.as_deref().unwrap_or(""));
    module.doc.push(format!(
        "Imported from ONNX by `tirc import` (opset {opset}{}).",
        if producer.is_empty() {
            String::new()
        } else {
            format!(", produced by {producer} {version}")
                .trim_end()
                .to_string()
        }
    ));
    module.funcs.push(func);
    let mut weights = imp.weights;
    if !opts.no_cleanup {
        crate::cleanup(&mut module, &mut weights);
    }
    if let Err(errors) = tir_ir::verify(&mut module) {
        return Err(ImportError::Verify(
            errors.iter().map(|e| e.to_string()).collect(),
        ));
    }
    Ok(Imported { module, weights })
}

/// The parameter type of a graph input named `vname` in the IR.
fn input_type(
    input: &crate::proto::ValueInfoProto,
    vname: &str,
    opts: &ImportOptions,
    dims_used: &mut HashSet<String>,
) -> Result<SymTensorType, InputError> {
    use crate::proto::tensor_shape_proto::dimension::Value as Dim;
    use crate::proto::type_proto::Value as Ty;
    let Some(Ty::TensorType(tt)) = input.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(InputError::NotTensor);
    };
    let dtype = tensor::dtype_from_onnx(tt.elem_type.unwrap_or(0).into())?;
    let shape = tt.shape.as_ref().ok_or(InputError::NoShape)?;
    let mut dims = Vec::new();
    for (axis, d) in shape.dim.iter().enumerate() {
        if opts.keep_symbols {
            dims.push(symbolic_dim(
                d.value.as_ref(),
                vname,
                axis,
                opts,
                dims_used,
            )?);
            continue;
        }
        let v = match &d.value {
            Some(Dim::DimValue(v)) if *v >= 0 => *v as u64,
            Some(Dim::DimValue(v)) => return Err(InputError::NegativeDim { axis, dim: *v }),
            Some(Dim::DimParam(p)) => {
                if let Some((_, v)) = opts.dims.iter().find(|(n, _)| n == p) {
                    dims_used.insert(p.clone());
                    *v
                } else if axis == 0 {
                    1
                } else {
                    return Err(InputError::Symbolic {
                        axis,
                        param: p.clone(),
                    });
                }
            }
            None if axis == 0 => 1,
            None => return Err(InputError::UnknownDim { axis }),
        };
        dims.push(DimExpr::lit(v));
    }
    let ty = SymTensorType::new(dims, dtype);
    if let Some(t) = ty.to_static() {
        Oversized::check(&t.shape, dtype)?;
    }
    Ok(ty)
}

/// One input dim when unpinned dims stay symbolic: a value pinned by `--dim` (by its
/// `dim_param`, or by the derived name of an unnamed dim), else a constant, else a symbol.
fn symbolic_dim(
    d: Option<&crate::proto::tensor_shape_proto::dimension::Value>,
    vname: &str,
    axis: usize,
    opts: &ImportOptions,
    dims_used: &mut HashSet<String>,
) -> Result<DimExpr, InputError> {
    use crate::proto::tensor_shape_proto::dimension::Value as D;
    let derived = derived_name(vname, axis);
    let name = match d {
        Some(D::DimValue(v)) if *v >= 0 => return Ok(DimExpr::lit(*v as u64)),
        Some(D::DimParam(p)) => symbol_name(p).unwrap_or_else(|| derived.clone()),
        _ => derived.clone(),
    };
    let param = match d {
        Some(D::DimParam(p)) => Some(p.as_str()),
        _ => None,
    };
    for key in [param, Some(name.as_str()), Some(derived.as_str())]
        .into_iter()
        .flatten()
    {
        if let Some((_, v)) = opts.dims.iter().find(|(n, _)| n == key) {
            dims_used.insert(key.to_string());
            return Ok(DimExpr::lit(*v));
        }
    }
    Ok(DimExpr::sym(name))
}

/// A `dim_param` as a symbol name: characters a symbol cannot hold become `_`, and a name
/// that does not start like one gets a `_` in front; `None` for a name with no letter or digit
/// (`?`, MLIR's and some exporters' spelling of an unnamed dim).
fn symbol_name(param: &str) -> Option<String> {
    if !param.chars().any(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let mut s: String = param
        .chars()
        .map(|c| {
            if tir_ir::sym::is_symbol_char(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !is_symbol_name(&s) {
        s.insert(0, '_');
    }
    Some(s)
}

/// `xs` as static extents, or the error that `what` needs them static.
fn static_dims(xs: &[DimExpr], what: &'static str) -> R<Vec<u64>> {
    xs.iter()
        .map(Dim::known)
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| NodeError::SymbolicShape {
            what,
            shape: shape_text(xs),
        })
}

/// A shape as `[{n}, 3, {h}]`.
fn shape_text(xs: &[DimExpr]) -> String {
    let parts: Vec<String> = xs
        .iter()
        .map(|d| match d.known() {
            Some(k) => k.to_string(),
            None => format!("{{{d}}}"),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// An ONNX value: a tensor computed by IR ops, or a constant known at import time.
#[derive(Clone, Debug)]
enum Val {
    Ir(Value),
    Const(Rc<Tensor>),
    /// An integer shape vector (or scalar) some of whose elements are symbolic: what `Shape`
    /// of a dynamic value gives, folded through the shape subgraph ([`symshape`]). Never all
    /// constant (that is a `Const`).
    Dims(Rc<symshape::SymInts>),
}

/// Appends ops to one function, inferring each result type as it goes.
struct Emitter {
    func: Function,
    names: HashSet<String>,
    next: usize,
}

impl Emitter {
    fn new() -> Self {
        Emitter {
            func: Function::new("main"),
            names: HashSet::new(),
            next: 0,
        }
    }

    /// The static type of `v`, or the error that the node needs one.
    fn ty(&self, v: Value) -> R<&TensorType> {
        match self.func.values[v].known_type() {
            Some(t) => Ok(t),
            None => Err(NodeError::SymbolicShape {
                what: "the node",
                shape: shape_text(&self.sym_ty(v).shape),
            }),
        }
    }

    /// The type of `v`, symbolic dims included.
    fn sym_ty(&self, v: Value) -> SymTensorType {
        // Every value the emitter creates is typed when it is created.
        self.func.values[v]
            .sym_type()
            .expect("emitted values are typed")
    }

    /// A parameter; one with a symbolic dim makes the function dynamic.
    fn add_param(&mut self, name: String, ty: SymTensorType) -> Value {
        let v = self.func.add_sym_param(name.clone(), ty);
        self.names.insert(name);
        v
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

    /// A valid, unused value name derived from an ONNX name.
    fn unique(&mut self, onnx: &str) -> String {
        let mut base = identifier_chars(onnx);
        if base.is_empty() {
            base = "v".into();
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
        let all_static = operands
            .iter()
            .all(|&v| self.func.values[v].known_type().is_some());
        if !all_static {
            return self.push_sym(op, operands, names);
        }
        let ins: Vec<&TensorType> = operands.iter().map(|&v| self.ty(v)).collect::<R<_>>()?;
        let tys = tir_ir::shape::infer(&op, &ins)?;
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

    /// [`Emitter::push`] with a symbolic operand: the symbolic shape rule. Conditions it
    /// cannot decide are dropped here: the verifier derives them again as the module's
    /// run-time checks.
    fn push_sym(&mut self, op: Op, operands: &[Value], names: Vec<String>) -> R<Vec<Value>> {
        let ins: Vec<SymTensorType> = operands.iter().map(|&v| self.sym_ty(v)).collect();
        let refs: Vec<&SymTensorType> = ins.iter().collect();
        let mut checks = tir_ir::shape::Checks::new();
        let tys = tir_ir::shape::infer_sym(&op, &refs, &mut checks)?;
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

struct Importer {
    opset: i64,
    env: HashMap<String, Val>,
    /// Constants already emitted as `const` ops.
    materialized: HashMap<String, Value>,
    em: Emitter,
    weights: Weights,
    graph_outputs: HashSet<String>,
    /// Every name some node reads or the graph returns.
    used: HashSet<String>,
    weight_keys: HashSet<String>,
}

type R<T> = Result<T, NodeError>;

impl Importer {
    fn lookup(&self, name: &str) -> R<&Val> {
        self.env.get(name).ok_or_else(|| NodeError::UndefinedInput {
            name: name.to_string(),
        })
    }

    /// Input `i`, or `None` if it is absent or the empty name.
    fn opt_in(&self, node: &NodeProto, i: usize) -> R<Option<Val>> {
        match node.input.get(i) {
            Some(n) if !n.is_empty() => Ok(Some(self.lookup(n)?.clone())),
            _ => Ok(None),
        }
    }

    fn req_in(&self, node: &NodeProto, i: usize) -> R<Val> {
        self.opt_in(node, i)?.ok_or(NodeError::MissingInput {
            index: i,
            what: None,
        })
    }

    /// A constant input (folded at import time), or `None` if absent.
    fn const_in(&self, node: &NodeProto, i: usize, what: &'static str) -> R<Option<Rc<Tensor>>> {
        match self.opt_in(node, i)? {
            None => Ok(None),
            Some(Val::Const(t)) => Ok(Some(t)),
            Some(Val::Ir(_)) => Err(NodeError::NotConstant { index: i, what }),
            Some(Val::Dims(d)) => Err(NodeError::SymbolicValue {
                index: i,
                what,
                value: d.to_string(),
            }),
        }
    }

    /// A constant input that must be present.
    fn req_const_in(&self, node: &NodeProto, i: usize, what: &'static str) -> R<Rc<Tensor>> {
        self.const_in(node, i, what)?
            .ok_or(NodeError::MissingInput {
                index: i,
                what: Some(what),
            })
    }

    /// The static shape of `v`, or the error that the node needs one.
    fn shape_of(&self, v: &Val) -> R<Vec<u64>> {
        static_dims(&self.sym_shape_of(v), "the node")
    }

    /// The shape of `v`, symbolic dims included.
    fn sym_shape_of(&self, v: &Val) -> Vec<DimExpr> {
        match v {
            Val::Ir(v) => self.em.sym_ty(*v).shape,
            Val::Const(t) => t.shape.iter().map(|&d| DimExpr::lit(d)).collect(),
            Val::Dims(d) => d.shape.iter().map(|&d| DimExpr::lit(d)).collect(),
        }
    }

    fn rank_of(&self, v: &Val) -> usize {
        self.sym_shape_of(v).len()
    }

    fn dtype_of(&self, v: &Val) -> DType {
        match v {
            Val::Ir(v) => self.em.sym_ty(*v).dtype,
            Val::Const(t) => t.dtype,
            Val::Dims(d) => d.dtype,
        }
    }

    /// The IR value of an ONNX name: constants become `const` ops on first use.
    fn value(&mut self, name: &str) -> R<Value> {
        let val = self.lookup(name)?.clone();
        self.materialize(name, &val)
    }

    fn materialize(&mut self, name: &str, val: &Val) -> R<Value> {
        match val {
            Val::Ir(v) => Ok(*v),
            Val::Dims(d) => Err(NodeError::SymbolicOperand {
                name: name.to_string(),
                value: d.to_string(),
            }),
            Val::Const(t) => Ok(self.materialize_const(name, t)),
        }
    }

    fn materialize_const(&mut self, name: &str, t: &Tensor) -> Value {
        if let Some(&v) = self.materialized.get(name) {
            return v;
        }
        let mut key = name.to_string();
        let mut k = 1;
        while self.weight_keys.contains(&key) {
            key = format!("{name}${k}");
            k += 1;
        }
        self.weight_keys.insert(key.clone());
        self.weights.tensors.insert(key.clone(), t.clone());
        let vname = self.em.unique(name);
        let v = self
            .em
            .konst(vname, key, TensorType::new(t.shape.clone(), t.dtype));
        self.materialized.insert(name.to_string(), v);
        v
    }

    /// A constant made by the importer (not in the model), as a `const` op named after `hint`.
    fn const_value(&mut self, hint: &str, t: Tensor) -> Value {
        let mut name = hint.to_string();
        let mut k = 1;
        while self.env.contains_key(&name) || self.materialized.contains_key(&name) {
            name = format!("{hint}${k}");
            k += 1;
        }
        self.materialize_const(&name, &t)
    }

    fn in_value(&mut self, node: &NodeProto, i: usize) -> R<Value> {
        let name = node
            .input
            .get(i)
            .filter(|n| !n.is_empty())
            .ok_or(NodeError::MissingInput {
                index: i,
                what: None,
            })?
            .clone();
        self.value(&name)
    }

    fn opt_in_value(&mut self, node: &NodeProto, i: usize) -> R<Option<Value>> {
        match node.input.get(i) {
            Some(n) if !n.is_empty() => {
                let n = n.clone();
                Ok(Some(self.value(&n)?))
            }
            _ => Ok(None),
        }
    }

    /// Emits `op` for `node` and binds its outputs, refusing a result too large to be a
    /// tensor (see [`tensor::MAX_TENSOR_BYTES`]).
    fn emit(&mut self, node: &NodeProto, op: Op, operands: &[Value]) -> R<()> {
        let count = op.num_results();
        let names: Vec<String> = (0..count)
            .map(|i| {
                let out = node.output.get(i).cloned().unwrap_or_default();
                if self.graph_outputs.contains(&out) {
                    self.em.unique(&out)
                } else {
                    self.em.fresh()
                }
            })
            .collect();
        let results = self.em.push(op, operands, names)?;
        for (i, &r) in results.iter().enumerate() {
            // (A symbolic size is checked when the dims have values.)
            let Ok(ty) = self.em.ty(r) else { continue };
            Oversized::check(&ty.shape, ty.dtype).map_err(|problem| NodeError::Oversized {
                output: node.output.get(i).cloned().unwrap_or_default(),
                problem,
            })?;
        }
        for (i, r) in results.into_iter().enumerate() {
            if let Some(out) = node.output.get(i) {
                self.env.insert(out.clone(), Val::Ir(r));
            }
        }
        Ok(())
    }

    /// Binds a folded constant to the node's output; folding keeps data within
    /// [`tensor::MAX_FOLDED_BYTES`], but an empty constant can still have huge dimensions.
    fn bind_const(&mut self, node: &NodeProto, t: Tensor) -> R<()> {
        if let Some(out) = node.output.first() {
            Oversized::check(&t.shape, t.dtype).map_err(|problem| NodeError::Oversized {
                output: out.clone(),
                problem,
            })?;
            self.env.insert(out.clone(), Val::Const(Rc::new(t)));
        }
        Ok(())
    }

    fn alias(&mut self, node: &NodeProto, x: Val) {
        if let Some(out) = node.output.first() {
            self.env.insert(out.clone(), x);
        }
    }

    /// Refuses a node whose optional extra outputs (beyond the first `keep`) are used.
    fn only_first_outputs(&self, node: &NodeProto, keep: usize) -> R<()> {
        for (i, out) in node.output.iter().enumerate().skip(keep) {
            if !out.is_empty() && self.used.contains(out) {
                return Err(NodeError::ExtraOutputUsed {
                    index: i,
                    name: out.clone(),
                    keep,
                });
            }
        }
        Ok(())
    }

    /// The dispatcher: a node whose inputs are all constants is folded if it can be; anything
    /// else goes to its op family.
    fn node(&mut self, node: &NodeProto) -> R<()> {
        let domain = node.domain.as_deref().unwrap_or("");
        let op_type = node.op_type.as_deref().unwrap_or("");
        if !matches!(domain, "" | "ai.onnx") {
            return Err(NodeError::Domain {
                domain: domain.to_string(),
            });
        }
        let a = Attrs(&node.attribute);
        let inputs: Vec<Option<Val>> = (0..node.input.len())
            .map(|i| self.opt_in(node, i))
            .collect::<R<_>>()?;
        let all_const = inputs.iter().all(|v| !matches!(v, Some(Val::Ir(_))));
        if all_const && inputs.iter().any(|v| matches!(v, Some(Val::Dims(_)))) {
            if let Some(v) = self.fold_sym(node, op_type, &a, &inputs)? {
                self.alias(node, v);
                return Ok(());
            }
        } else if all_const && !node.input.is_empty() {
            if let Some(t) = self.fold(node, op_type, &a, &inputs)? {
                return self.bind_const(node, t);
            }
        }
        match op_type {
            "Constant" => {
                let t = attrs::constant_attr(&a)?;
                self.bind_const(node, t)
            }
            "Identity" | "Dropout" => self.pass_through(node, op_type),
            "Cast" => {
                let to = cast_target(&a)?;
                self.cast(node, to)
            }
            "CastLike" => {
                let like = self.req_in(node, 1)?;
                let to = self.dtype_of(&like);
                self.cast(node, to)
            }
            "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" => {
                let c = match op_type {
                    "Equal" => tir_ir::CompareOp::Equal,
                    "Less" => tir_ir::CompareOp::Less,
                    "LessOrEqual" => tir_ir::CompareOp::LessOrEqual,
                    "Greater" => tir_ir::CompareOp::Greater,
                    _ => tir_ir::CompareOp::GreaterOrEqual,
                };
                let (x, y) = (self.in_value(node, 0)?, self.in_value(node, 1)?);
                self.emit(node, Op::Compare(c), &[x, y])
            }
            "And" | "Or" | "Xor" => {
                let l = match op_type {
                    "And" => tir_ir::LogicalOp::And,
                    "Or" => tir_ir::LogicalOp::Or,
                    _ => tir_ir::LogicalOp::Xor,
                };
                let (x, y) = (self.in_value(node, 0)?, self.in_value(node, 1)?);
                self.emit(node, Op::Logical(l), &[x, y])
            }
            "Not" => {
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::Not, &[x])
            }
            "Where" => {
                let c = self.in_value(node, 0)?;
                let (x, y) = (self.in_value(node, 1)?, self.in_value(node, 2)?);
                self.emit(node, Op::Where, &[c, x, y])
            }
            "ArgMax" | "ArgMin" => {
                let x = self.in_value(node, 0)?;
                let op = Op::ArgReduce {
                    max: op_type == "ArgMax",
                    axis: a.int("axis")?.unwrap_or(0),
                    keepdims: a.int("keepdims")?.unwrap_or(1) != 0,
                    select_last_index: a.int("select_last_index")?.unwrap_or(0) != 0,
                };
                self.emit(node, op, &[x])
            }
            "Shape" => {
                let x = self.req_in(node, 0)?;
                let dims = self.sym_shape_of(&x);
                match static_dims(&dims, "Shape") {
                    Ok(xs) => {
                        let t = shape::shape_tensor(&xs, &a)?;
                        self.bind_const(node, t)
                    }
                    Err(_) => {
                        let v = self.shape_value(&dims, &a)?;
                        self.alias(node, v);
                        Ok(())
                    }
                }
            }
            // Shapes are static: the element count is known at import.
            "Size" => {
                let x = self.req_in(node, 0)?;
                let n = self.shape_of(&x)?.iter().product::<u64>();
                let n = i64::try_from(n).map_err(|_| NodeError::Overflow { what: "Size" })?;
                self.bind_const(node, Tensor::from_i64s(DType::I64, vec![], &[n]))
            }
            "Conv" => self.conv(node, &a),
            "ConvTranspose" => self.conv_transpose(node, &a),
            "MaxPool" | "AveragePool" if self.rank_of_input(node) == Some(3) => {
                self.pool_1d(node, op_type, &a)
            }
            "MaxPool" | "AveragePool" => self.pool(node, op_type, &a),
            "GlobalAveragePool" => self.global_avg_pool(node),
            "MatMul" => self.matmul(node),
            "Gemm" => self.gemm(node, &a),
            "Add" | "Sub" | "Mul" | "Div" | "Pow" => self.binary(node, op_type),
            "Max" | "Min" => self.variadic(node, op_type),
            "Relu" | "Sigmoid" | "Tanh" | "Exp" | "HardSwish" | "Gelu" | "Abs" | "Neg" | "Sqrt"
            | "Reciprocal" | "Log" | "Floor" | "Ceil" | "Round" | "Erf" | "Sin" | "Cos"
            | "Softplus" | "Softsign" => self.unary(node, op_type, &a),
            "Tan" | "Asin" | "Acos" | "Atan" | "Sinh" | "Cosh" | "Asinh" | "Acosh" | "Atanh"
            | "Sign" => self.unary(node, op_type, &a),
            "Clip" => self.clip(node, &a),
            "HardSigmoid" => self.hard_sigmoid(node, &a),
            "PRelu" => self.prelu(node),
            "Concat" => self.concat(node, &a),
            "Split" => self.split(node, &a),
            "Slice" => self.slice(node),
            "Reshape" => self.reshape(node, &a),
            "Flatten" => self.flatten(node, &a),
            "Squeeze" => self.squeeze(node, &a),
            "Unsqueeze" => self.unsqueeze(node, &a),
            "Transpose" => self.transpose(node, &a),
            "Pad" => self.pad(node, &a),
            "Softmax" => self.softmax(node, &a, false),
            "LogSoftmax" => self.softmax(node, &a, true),
            "BatchNormalization" => self.batch_norm(node, &a),
            "LayerNormalization" => self.layer_norm(node, &a),
            "RMSNormalization" => self.rms_norm(node, &a),
            "Attention" => self.attention(node, &a),
            "ReduceMean" => self.reduce(node, &a, ReduceKind::Mean),
            "ReduceSum" => self.reduce(node, &a, ReduceKind::Sum),
            "ReduceMax" => self.reduce(node, &a, ReduceKind::Max),
            "ReduceMin" => self.reduce(node, &a, ReduceKind::Min),
            "ReduceProd" => self.reduce(node, &a, ReduceKind::Prod),
            "ReduceL1" => self.reduce(node, &a, ReduceKind::L1),
            "ReduceL2" => self.reduce(node, &a, ReduceKind::L2),
            "ReduceSumSquare" => self.reduce(node, &a, ReduceKind::SumSquare),
            "ReduceLogSum" => self.reduce(node, &a, ReduceKind::LogSum),
            "ReduceLogSumExp" => self.reduce(node, &a, ReduceKind::LogSumExp),
            "Resize" => self.resize(node, &a),
            "Mod" => {
                let (x, y) = (self.in_value(node, 0)?, self.in_value(node, 1)?);
                let fmod = a.int("fmod")?.unwrap_or(0) != 0;
                self.emit(node, Op::Mod { fmod }, &[x, y])
            }
            "ConstantOfShape" | "Range" => Err(NodeError::OnlyOnConstants {
                op_type: op_type.to_string(),
            }),
            // Compositions of existing IR ops (decompose.rs).
            "LeakyRelu" => self.leaky_relu(node, &a),
            "Elu" => self.elu(node, &a),
            "Selu" => self.selu(node, &a),
            "Celu" => self.celu(node, &a),
            "Mish" => self.mish(node),
            "Swish" => self.swish(node, &a),
            "Sum" => self.sum_mean(node, false),
            "Mean" => self.sum_mean(node, true),
            "GlobalMaxPool" => self.global_max_pool(node),
            "LpNormalization" => self.lp_normalization(node, &a),
            "InstanceNormalization" => self.instance_norm(node, &a),
            "GroupNormalization" => self.group_norm(node, &a),
            "MeanVarianceNormalization" => self.mean_variance_norm(node, &a),
            "DepthToSpace" => self.depth_space(node, &a, true),
            "SpaceToDepth" => self.depth_space(node, &a, false),
            "Tile" => self.tile(node),
            "Trilu" => self.trilu(node, &a),
            "ThresholdedRelu" => self.thresholded_relu(node, &a),
            "LRN" => self.lrn(node, &a),
            "NegativeLogLikelihoodLoss" => self.nll_loss(node, &a, false),
            "SoftmaxCrossEntropyLoss" => self.nll_loss(node, &a, true),
            "CenterCropPad" => self.center_crop_pad(node, &a),
            "RotaryEmbedding" => self.rotary_embedding(node, &a),
            "AffineGrid" => self.affine_grid(node, &a),
            "GridSample" => self.grid_sample(node, &a),
            // More compositions (compose.rs).
            "Hardmax" => self.hardmax(node, &a),
            "IsInf" => self.is_inf(node, &a),
            "IsNaN" => self.is_nan(node),
            "Shrink" => self.shrink(node, &a),
            "EyeLike" => self.eye_like(node, &a),
            "OneHot" => self.one_hot(node, &a),
            "Expand" => self.expand(node),
            "LpPool" => self.lp_pool(node, &a),
            "Gather" => self.gather(node, &a),
            "GatherElements" => self.gather_elements(node, &a),
            "GatherND" => self.gather_nd(node, &a),
            "ScatterElements" => self.scatter_elements(node, &a, "ScatterElements"),
            "Scatter" => self.scatter_elements(node, &a, "Scatter"),
            "ScatterND" => self.scatter_nd(node, &a),
            "Compress" => self.compress(node, &a),
            "ReverseSequence" => self.reverse_sequence(node, &a),
            "MaxUnpool" => self.max_unpool(node, &a),
            "RNN" => self.recurrent(node, &a, recurrent::Cell::Rnn),
            "GRU" => self.recurrent(node, &a, recurrent::Cell::Gru),
            "LSTM" => self.recurrent(node, &a, recurrent::Cell::Lstm),
            // Scans and selections (scan.rs).
            "CumSum" => self.cumsum(node, &a),
            "TopK" => self.top_k(node, &a),
            "NonZero" => self.non_zero(node),
            // A composition of transposes, reshapes, matmul and reduce_sum (einsum.rs).
            "Einsum" => self.einsum(node, &a),
            // Linear quantization (quant.rs).
            "DequantizeLinear" => self.dequantize_linear(node, &a),
            "QuantizeLinear" => self.quantize_linear(node, &a),
            "DynamicQuantizeLinear" => self.dynamic_quantize_linear(node),
            "QLinearMatMul" => self.qlinear_matmul(node),
            "MatMulInteger" => self.matmul_integer(node),
            "ConvInteger" => self.conv_integer(node, &a),
            "" => Err(NodeError::NoOpType),
            other => Err(NodeError::Unsupported {
                op_type: other.to_string(),
                opset: self.opset,
            }),
        }
    }

    /// Identity and inference-mode Dropout: the output is the input.
    fn pass_through(&mut self, node: &NodeProto, op_type: &str) -> R<()> {
        if op_type == "Dropout" {
            self.only_first_outputs(node, 1)?;
            if let Some(t) = self.const_in(node, 2, "training_mode")? {
                if t.ints().first().copied().unwrap_or(0) != 0 {
                    return Err(NodeError::Training { expected: "false" });
                }
            }
        }
        let x = self.req_in(node, 0)?;
        self.alias(node, x);
        Ok(())
    }

    /// Cast and CastLike: a cast to the type the value already has is the value; any other
    /// is a `cast` op (a constant input was folded before).
    fn cast(&mut self, node: &NodeProto, to: DType) -> R<()> {
        let x = self.req_in(node, 0)?;
        if self.dtype_of(&x) == to {
            self.alias(node, x);
            return Ok(());
        }
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Cast { to }, &[x])
    }
}

/// Cast's `to` attribute as an IR element type.
fn cast_target(a: &Attrs) -> R<DType> {
    Ok(tensor::dtype_from_onnx(a.req_int("to")?)?)
}

/// `name` with every character an IR identifier cannot hold replaced by `_`.
pub fn identifier_chars(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `name` as a module symbol: identifier characters, starting with a letter or `_`.
pub fn sanitize_symbol(name: &str) -> String {
    let mut s = identifier_chars(name);
    if !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        s.insert(0, '_');
    }
    s
}

/// A model string as it may appear in a `//` line: control characters escaped as Rust's
/// `escape_debug` does, everything else (quotes, non-ASCII text) as written.
fn doc_text(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
