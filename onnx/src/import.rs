//! The graph walk: ONNX nodes in order → folded constants or IR ops.

use crate::proto::{attribute_proto::AttributeType, AttributeProto, ModelProto, NodeProto};
use crate::tensor::{self, numel, strides, Num, Tensor};
use crate::{ImportError, Imported, Weights};
use prost::Message;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tir_ir::op::{
    BinaryOp, Conv2d, CoordMode, Gemm, NearestMode, PadMode, Pool2d, Resize, ResizeMode, Slice,
    UnaryOp,
};
use tir_ir::{DType, Function, Module, Op, TensorType, Value};

/// The opsets whose semantics the importer follows.
pub const MIN_OPSET: i64 = 11;
pub const MAX_OPSET: i64 = 21;

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
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| ImportError::Model("the model has no graph".into()))?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        .and_then(|o| o.version)
        .ok_or_else(|| ImportError::Model("the model imports no default-domain opset".into()))?;
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(ImportError::Model(format!(
            "opset {opset} is not supported (supported: {MIN_OPSET} to {MAX_OPSET})"
        )));
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
        let t = Tensor::from_proto(init, base_dir).map_err(|message| ImportError::Initializer {
            name: iname.clone(),
            message,
        })?;
        imp.env.insert(iname, Val::Const(Rc::new(t)));
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(ImportError::Model(
            "sparse initializers are not supported".into(),
        ));
    }

    // Graph inputs (those that are not initializers: before IR version 4 every initializer
    // was listed as an input too).
    let mut dims_used = HashSet::new();
    for input in &graph.input {
        let iname = input.name.clone().unwrap_or_default();
        if imp.env.contains_key(&iname) {
            continue;
        }
        let fail = |message: String| ImportError::Input {
            name: iname.clone(),
            message,
        };
        let ty = input_type(input, opts, &mut dims_used).map_err(fail)?;
        let vname = imp.em.unique(&iname);
        let v = imp.em.func.add_param(vname.clone(), ty);
        imp.em.names.insert(vname);
        imp.env.insert(iname, Val::Ir(v));
    }
    for (d, _) in &opts.dims {
        if !dims_used.contains(d) {
            return Err(ImportError::Model(format!(
                "--dim `{d}` names no symbolic dimension of the graph inputs"
            )));
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
                let x = imp.value(&x).map_err(ImportError::Model)?;
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
        imp.node(node).map_err(|message| ImportError::Node {
            index,
            name: node.name.clone().unwrap_or_default(),
            op_type: node.op_type.clone().unwrap_or_default(),
            message,
        })?;
    }

    let mut returns = Vec::new();
    for out in &graph.output {
        let oname = out.name.clone().unwrap_or_default();
        let v = imp
            .value(&oname)
            .map_err(|message| ImportError::Model(format!("graph output `{oname}`: {message}")))?;
        returns.push(v);
    }
    let mut func = imp.em.func;
    func.result_types = returns
        .iter()
        .map(|&v| func.ty(v).cloned().unwrap_or_else(|| TensorType::f32([])))
        .collect();
    func.returns = returns;
    let mut module = Module::new(sanitize_symbol(&name));
    let producer = model.producer_name.as_deref().unwrap_or("");
    let version = model.producer_version.as_deref().unwrap_or("");
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
        let msgs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        return Err(ImportError::Model(format!(
            "internal error: the imported module does not verify: {}",
            msgs.join("; ")
        )));
    }
    Ok(Imported { module, weights })
}

fn input_type(
    input: &crate::proto::ValueInfoProto,
    opts: &ImportOptions,
    dims_used: &mut HashSet<String>,
) -> Result<TensorType, String> {
    use crate::proto::tensor_shape_proto::dimension::Value as Dim;
    use crate::proto::type_proto::Value as Ty;
    let Some(Ty::TensorType(tt)) = input.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err("only tensor inputs are supported".into());
    };
    let dtype = tensor::dtype_from_onnx(tt.elem_type.unwrap_or(0))?;
    let shape = tt
        .shape
        .as_ref()
        .ok_or("the input has no shape (its rank is unknown)")?;
    let mut dims = Vec::new();
    for (axis, d) in shape.dim.iter().enumerate() {
        let v = match &d.value {
            Some(Dim::DimValue(v)) if *v >= 0 => *v as u64,
            Some(Dim::DimValue(v)) => return Err(format!("dimension {axis} is negative ({v})")),
            Some(Dim::DimParam(p)) => {
                if let Some((_, v)) = opts.dims.iter().find(|(n, _)| n == p) {
                    dims_used.insert(p.clone());
                    *v
                } else if axis == 0 {
                    1
                } else {
                    return Err(format!(
                        "dimension {axis} is symbolic (`{p}`); give it a value with --dim {p}=N"
                    ));
                }
            }
            None if axis == 0 => 1,
            None => return Err(format!("dimension {axis} is unknown")),
        };
        dims.push(v);
    }
    Ok(TensorType::new(dims, dtype))
}

/// An ONNX value: a tensor computed by IR ops, or a constant known at import time.
#[derive(Clone, Debug)]
enum Val {
    Ir(Value),
    Const(Rc<Tensor>),
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

    fn ty(&self, v: Value) -> &TensorType {
        // Every value the emitter creates is typed when it is created.
        self.func.values[v]
            .known_type()
            .expect("emitted values are typed")
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

    fn push(
        &mut self,
        op: Op,
        operands: &[Value],
        names: Vec<String>,
    ) -> Result<Vec<Value>, String> {
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

type R<T> = Result<T, String>;

fn to_u64s(name: &str, v: &[i64]) -> R<Vec<u64>> {
    v.iter()
        .map(|&x| u64::try_from(x).map_err(|_| format!("`{name}` must not be negative, got {v:?}")))
        .collect()
}

fn two<T: Copy>(name: &str, v: &[T]) -> R<[T; 2]> {
    match v {
        [a, b] => Ok([*a, *b]),
        _ => Err(format!(
            "`{name}` has {} values; only 2-D (two spatial axes) is supported",
            v.len()
        )),
    }
}

fn norm_axis(axis: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

impl Importer {
    fn lookup(&self, name: &str) -> R<&Val> {
        self.env.get(name).ok_or_else(|| {
            format!("input `{name}` is not defined by any earlier node, initializer or graph input")
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
        self.opt_in(node, i)?
            .ok_or_else(|| format!("input {i} is required"))
    }

    /// A constant input (folded at import time), or `None` if absent.
    fn const_in(&self, node: &NodeProto, i: usize, what: &str) -> R<Option<Rc<Tensor>>> {
        match self.opt_in(node, i)? {
            None => Ok(None),
            Some(Val::Const(t)) => Ok(Some(t)),
            Some(Val::Ir(_)) => Err(format!(
                "{what} (input {i}) must be a constant, but it is computed at run time"
            )),
        }
    }

    fn shape_of(&self, v: &Val) -> Vec<u64> {
        match v {
            Val::Ir(v) => self.em.ty(*v).shape.clone(),
            Val::Const(t) => t.shape.clone(),
        }
    }

    fn dtype_of(&self, v: &Val) -> DType {
        match v {
            Val::Ir(v) => self.em.ty(*v).dtype,
            Val::Const(t) => t.dtype,
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
            Val::Const(t) => {
                if let Some(&v) = self.materialized.get(name) {
                    return Ok(v);
                }
                let mut key = name.to_string();
                let mut k = 1;
                while self.weight_keys.contains(&key) {
                    key = format!("{name}${k}");
                    k += 1;
                }
                self.weight_keys.insert(key.clone());
                self.weights.tensors.insert(key.clone(), (**t).clone());
                let vname = self.em.unique(name);
                let v = self
                    .em
                    .konst(vname, key, TensorType::new(t.shape.clone(), t.dtype));
                self.materialized.insert(name.to_string(), v);
                Ok(v)
            }
        }
    }

    fn in_value(&mut self, node: &NodeProto, i: usize) -> R<Value> {
        let name = node
            .input
            .get(i)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("input {i} is required"))?
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

    /// Emits `op` for `node` and binds its outputs.
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
        for (i, r) in results.into_iter().enumerate() {
            if let Some(out) = node.output.get(i) {
                self.env.insert(out.clone(), Val::Ir(r));
            }
        }
        Ok(())
    }

    fn bind_const(&mut self, node: &NodeProto, t: Tensor) {
        if let Some(out) = node.output.first() {
            self.env.insert(out.clone(), Val::Const(Rc::new(t)));
        }
    }

    /// Refuses a node whose optional extra outputs (beyond the first `keep`) are used.
    fn only_first_outputs(&self, node: &NodeProto, keep: usize) -> R<()> {
        for (i, out) in node.output.iter().enumerate().skip(keep) {
            if !out.is_empty() && self.used.contains(out) {
                return Err(format!(
                    "output {i} (`{out}`) is used, but only the first {keep} output(s) are supported"
                ));
            }
        }
        Ok(())
    }

    fn node(&mut self, node: &NodeProto) -> R<()> {
        let domain = node.domain.as_deref().unwrap_or("");
        let op_type = node.op_type.as_deref().unwrap_or("");
        if !matches!(domain, "" | "ai.onnx") {
            return Err(format!(
                "ops of domain `{domain}` are not supported (only the default ONNX domain)"
            ));
        }
        let a = Attrs(&node.attribute);
        // Fold when every present input is a constant and the op is one we can evaluate.
        let inputs: Vec<Option<Val>> = (0..node.input.len())
            .map(|i| self.opt_in(node, i))
            .collect::<R<_>>()?;
        let all_const = inputs.iter().all(|v| !matches!(v, Some(Val::Ir(_))));
        if all_const && !node.input.is_empty() {
            if let Some(t) = self.fold(node, op_type, &a, &inputs)? {
                self.bind_const(node, t);
                return Ok(());
            }
        }
        match op_type {
            "Constant" => {
                let t = constant_attr(&a)?;
                self.bind_const(node, t);
            }
            "Identity" => {
                let x = self.req_in(node, 0)?;
                self.alias(node, x);
            }
            "Dropout" => {
                self.only_first_outputs(node, 1)?;
                if let Some(t) = self.const_in(node, 2, "training_mode")? {
                    if t.ints().first().copied().unwrap_or(0) != 0 {
                        return Err("training_mode must be false for inference".into());
                    }
                }
                let x = self.req_in(node, 0)?;
                self.alias(node, x);
            }
            "Shape" => {
                let x = self.req_in(node, 0)?;
                let t = shape_tensor(&self.shape_of(&x), &a)?;
                self.bind_const(node, t);
            }
            "Cast" => {
                let x = self.req_in(node, 0)?;
                let to = tensor::dtype_from_onnx(
                    a.int("to")?.ok_or("attribute `to` is required")? as i32,
                )?;
                if self.dtype_of(&x) != to {
                    return Err(format!(
                        "a run-time Cast from {} to {to} is not supported (the IR has no cast op)",
                        self.dtype_of(&x)
                    ));
                }
                self.alias(node, x);
            }
            "Conv" => self.conv(node, &a)?,
            "MatMul" => {
                let x = self.in_value(node, 0)?;
                let y = self.in_value(node, 1)?;
                self.emit(node, Op::MatMul { activation: None }, &[x, y])?;
            }
            "Gemm" => {
                let g = Gemm {
                    trans_a: a.int("transA")?.unwrap_or(0) != 0,
                    trans_b: a.int("transB")?.unwrap_or(0) != 0,
                    alpha: a.float("alpha")?.unwrap_or(1.0),
                    beta: a.float("beta")?.unwrap_or(1.0),
                    activation: None,
                };
                let x = self.in_value(node, 0)?;
                let y = self.in_value(node, 1)?;
                let mut ops = vec![x, y];
                ops.extend(self.opt_in_value(node, 2)?);
                self.emit(node, Op::Gemm(g), &ops)?;
            }
            "Add" | "Sub" | "Mul" | "Div" => {
                let op = binary_op(op_type);
                let x = self.in_value(node, 0)?;
                let y = self.in_value(node, 1)?;
                self.emit(
                    node,
                    Op::Binary {
                        op,
                        activation: None,
                    },
                    &[x, y],
                )?;
            }
            "Relu" | "Sigmoid" | "Tanh" | "Exp" | "HardSwish" | "Gelu" => {
                let u = match op_type {
                    "Relu" => UnaryOp::Relu,
                    "Sigmoid" => UnaryOp::Sigmoid,
                    "Tanh" => UnaryOp::Tanh,
                    "Exp" => UnaryOp::Exp,
                    "HardSwish" => UnaryOp::HardSwish,
                    _ => {
                        let approx = a.string("approximate")?.unwrap_or_else(|| "none".into());
                        if approx != "none" {
                            return Err(format!(
                                "attribute `approximate` = \"{approx}\" is not supported (only \"none\", the exact erf form)"
                            ));
                        }
                        UnaryOp::Gelu
                    }
                };
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::Unary(u), &[x])?;
            }
            "Clip" => {
                let scalar = |t: Option<Rc<Tensor>>, what: &str| -> R<Option<f64>> {
                    match t {
                        None => Ok(None),
                        Some(t) if t.numel() == 1 => Ok(Some(scalar_of(&t))),
                        Some(t) => Err(format!("{what} must be a scalar, got shape {:?}", t.shape)),
                    }
                };
                let min = scalar(self.const_in(node, 1, "min")?, "min")?
                    .or(a.float("min")?)
                    .unwrap_or(f64::NEG_INFINITY);
                let max = scalar(self.const_in(node, 2, "max")?, "max")?
                    .or(a.float("max")?)
                    .unwrap_or(f64::INFINITY);
                if min > max || min.is_nan() || max.is_nan() {
                    return Err(format!("min ({min}) is greater than max ({max})"));
                }
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::Clip { min, max }, &[x])?;
            }
            "HardSigmoid" => {
                let op = Op::HardSigmoid {
                    alpha: a.float("alpha")?.unwrap_or(0.2),
                    beta: a.float("beta")?.unwrap_or(0.5),
                };
                let x = self.in_value(node, 0)?;
                self.emit(node, op, &[x])?;
            }
            "PRelu" => {
                let x = self.in_value(node, 0)?;
                let s = self.in_value(node, 1)?;
                self.emit(node, Op::Prelu, &[x, s])?;
            }
            "MaxPool" | "AveragePool" => self.pool(node, op_type, &a)?,
            "GlobalAveragePool" => {
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::GlobalAvgPool, &[x])?;
            }
            "Concat" => {
                let axis = a.int("axis")?.ok_or("attribute `axis` is required")?;
                let mut ops = Vec::new();
                for i in 0..node.input.len() {
                    ops.push(self.in_value(node, i)?);
                }
                self.emit(node, Op::Concat { axis }, &ops)?;
            }
            "Split" => self.split(node, &a)?,
            "Slice" => {
                let x = self.req_in(node, 0)?;
                let s = self.slice_params(node, &self.shape_of(&x))?;
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::Slice(s), &[x])?;
            }
            "Reshape" => {
                let x = self.req_in(node, 0)?;
                let shape = self.reshape_target(node, &a, &self.shape_of(&x))?;
                let x = self.in_value(node, 0)?;
                let shape = shape.iter().map(|&d| d as i64).collect();
                self.emit(node, Op::Reshape { shape }, &[x])?;
            }
            "Flatten" => {
                let axis = a.int("axis")?.unwrap_or(1);
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::Flatten { axis }, &[x])?;
            }
            "Squeeze" => {
                let x = self.req_in(node, 0)?;
                let axes = self.squeeze_axes(node, &a, &self.shape_of(&x))?;
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::Squeeze { axes }, &[x])?;
            }
            "Unsqueeze" => {
                let axes = self
                    .axes_param(node, &a, 13)?
                    .ok_or("the axes are required")?;
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::Unsqueeze { axes }, &[x])?;
            }
            "Transpose" => {
                let x = self.req_in(node, 0)?;
                let perm = transpose_perm(&a, self.shape_of(&x).len())?;
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::Transpose { perm }, &[x])?;
            }
            "Softmax" => self.softmax(node, &a)?,
            "Pad" => self.pad(node, &a)?,
            "BatchNormalization" => {
                self.only_first_outputs(node, 1)?;
                if a.int("training_mode")?.unwrap_or(0) != 0 {
                    return Err("training_mode must be 0 for inference".into());
                }
                let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
                let mut ops = Vec::new();
                for i in 0..5 {
                    ops.push(self.in_value(node, i)?);
                }
                self.emit(node, Op::BatchNorm { epsilon }, &ops)?;
            }
            "LayerNormalization" => {
                self.only_first_outputs(node, 1)?;
                let axis = a.int("axis")?.unwrap_or(-1);
                let epsilon = a.float("epsilon")?.unwrap_or(1e-5);
                let x = self.in_value(node, 0)?;
                let s = self.in_value(node, 1)?;
                let mut ops = vec![x, s];
                ops.extend(self.opt_in_value(node, 2)?);
                self.emit(node, Op::LayerNorm { axis, epsilon }, &ops)?;
            }
            "ReduceMean" => {
                let x = self.req_in(node, 0)?;
                let rank = self.shape_of(&x).len();
                let keepdims = a.int("keepdims")?.unwrap_or(1) != 0;
                let axes = self.axes_param(node, &a, 18)?.unwrap_or_default();
                let axes = if axes.is_empty() {
                    if a.int("noop_with_empty_axes")?.unwrap_or(0) != 0 {
                        self.alias(node, x);
                        return Ok(());
                    }
                    (0..rank as i64).collect()
                } else {
                    axes
                };
                let x = self.in_value(node, 0)?;
                self.emit(node, Op::ReduceMean { axes, keepdims }, &[x])?;
            }
            "Resize" => self.resize(node, &a)?,
            "Gather" | "ConstantOfShape" | "Expand" | "Equal" | "Where" => {
                return Err(format!(
                    "`{op_type}` is supported only on constants (shape computations); here an input is computed at run time and the IR has no such op"
                ));
            }
            "" => return Err("the node has no op type".into()),
            other => {
                return Err(format!("the IR has no `{other}` op (not supported)"));
            }
        }
        Ok(())
    }

    /// Recognises `Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)` (either operand order, the
    /// `0.5` applied to `x` first, or `Mul(x, 1/sqrt 2)` for the division) around the `Erf` at
    /// `erf`, where every intermediate has exactly one consumer and is not a graph output.
    /// Returns `x`, the pattern's output and the later nodes it covers.
    fn erf_gelu(&self, nodes: &[NodeProto], erf: usize) -> Option<(String, String, Vec<usize>)> {
        let op = |i: usize| nodes[i].op_type.as_deref().unwrap_or("");
        let scalar = |name: &str| match self.env.get(name) {
            Some(Val::Const(t)) if t.numel() == 1 => Some(t.floats()[0]),
            _ => None,
        };
        let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 1e-4);
        let producer = |name: &str| {
            nodes
                .iter()
                .position(|n| n.output.iter().any(|o| o == name))
        };
        let consumers = |name: &str| -> Vec<usize> {
            nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.input.iter().any(|i| i == name))
                .map(|(i, _)| i)
                .collect()
        };
        let private = |name: &str| -> Option<usize> {
            let c = consumers(name);
            (c.len() == 1 && !self.graph_outputs.contains(name)).then(|| c[0])
        };
        let other = |n: &NodeProto, this: &str| -> Option<String> {
            match n.input.as_slice() {
                [a, b] if a == this => Some(b.clone()),
                [a, b] if b == this => Some(a.clone()),
                _ => None,
            }
        };
        let erf_in = nodes[erf].input.first()?;
        let d = producer(erf_in)?;
        let [x, c] = nodes[d].input.as_slice() else {
            return None;
        };
        let scaled = match op(d) {
            "Div" => near(scalar(c), std::f64::consts::SQRT_2),
            "Mul" => near(scalar(c), std::f64::consts::FRAC_1_SQRT_2),
            _ => false,
        };
        if !scaled || private(erf_in)? != erf {
            return None;
        }
        let e_out = nodes[erf].output.first()?;
        let add = private(e_out)?;
        if op(add) != "Add" || !near(scalar(&other(&nodes[add], e_out)?), 1.0) {
            return None;
        }
        let a_out = nodes[add].output.first()?;
        let m1 = private(a_out)?;
        if op(m1) != "Mul" {
            return None;
        }
        let partner = other(&nodes[m1], a_out)?;
        let m1_out = nodes[m1].output.first()?.clone();
        if &partner == x {
            // 0.5 * (x * (1 + erf)).
            let m2 = private(&m1_out)?;
            if op(m2) != "Mul" || !near(scalar(&other(&nodes[m2], &m1_out)?), 0.5) {
                return None;
            }
            return Some((
                x.clone(),
                nodes[m2].output.first()?.clone(),
                vec![add, m1, m2],
            ));
        }
        // (x * 0.5) * (1 + erf), the half computed before the Erf.
        let h = producer(&partner)?;
        if op(h) != "Mul"
            || private(&partner)? != m1
            || other(&nodes[h], x).as_deref().map(|c| near(scalar(c), 0.5)) != Some(true)
        {
            return None;
        }
        Some((x.clone(), m1_out, vec![add, m1]))
    }

    fn alias(&mut self, node: &NodeProto, x: Val) {
        if let Some(out) = node.output.first() {
            self.env.insert(out.clone(), x);
        }
    }

    fn conv(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let w = self.req_in(node, 1)?;
        let xs = self.shape_of(&x);
        let ws = self.shape_of(&w);
        if xs.len() != 4 || ws.len() != 4 {
            return Err(format!(
                "only 2-D convolution is supported (rank-4 input and weight), got ranks {} and {}",
                xs.len(),
                ws.len()
            ));
        }
        let kernel = [ws[2], ws[3]];
        if let Some(k) = a.ints("kernel_shape")? {
            if to_u64s("kernel_shape", &k)? != kernel {
                return Err(format!(
                    "kernel_shape {k:?} does not match the weight's {kernel:?}"
                ));
            }
        }
        let strides = two(
            "strides",
            &to_u64s("strides", &a.ints("strides")?.unwrap_or(vec![1, 1]))?,
        )?;
        let dilations = two(
            "dilations",
            &to_u64s("dilations", &a.ints("dilations")?.unwrap_or(vec![1, 1]))?,
        )?;
        if strides.contains(&0) || dilations.contains(&0) {
            return Err("strides and dilations must be positive".into());
        }
        let groups = a.int("group")?.unwrap_or(1);
        if groups <= 0 {
            return Err(format!("attribute `group` must be positive, got {groups}"));
        }
        let pads = self.spatial_pads(a, &xs, kernel, strides, dilations)?;
        let c = Conv2d {
            strides,
            dilations,
            pads,
            groups: groups as u64,
            activation: None,
        };
        let x = self.in_value(node, 0)?;
        let w = self.in_value(node, 1)?;
        let mut ops = vec![x, w];
        ops.extend(self.opt_in_value(node, 2)?);
        self.emit(node, Op::Conv2d(c), &ops)
    }

    /// `pads` or the padding `auto_pad` implies, as `[top, left, bottom, right]`.
    fn spatial_pads(
        &self,
        a: &Attrs,
        xs: &[u64],
        kernel: [u64; 2],
        strides: [u64; 2],
        dilations: [u64; 2],
    ) -> R<[u64; 4]> {
        let auto = a.string("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
        match auto.as_str() {
            "NOTSET" => {
                let p = to_u64s("pads", &a.ints("pads")?.unwrap_or(vec![0; 4]))?;
                match p.as_slice() {
                    [t, l, b, r] => Ok([*t, *l, *b, *r]),
                    _ => Err(format!("`pads` has {} values; 2-D needs 4", p.len())),
                }
            }
            "VALID" => Ok([0; 4]),
            "SAME_UPPER" | "SAME_LOWER" => {
                let mut p = [0u64; 4];
                for i in 0..2 {
                    let inp = xs[2 + i];
                    let out = inp.div_ceil(strides[i]);
                    let eff = dilations[i]
                        .saturating_mul(kernel[i].max(1) - 1)
                        .saturating_add(1);
                    let total = (out.saturating_sub(1))
                        .saturating_mul(strides[i])
                        .saturating_add(eff)
                        .saturating_sub(inp);
                    let small = total / 2;
                    let (begin, end) = if auto == "SAME_UPPER" {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                    p[i] = begin;
                    p[i + 2] = end;
                }
                Ok(p)
            }
            other => Err(format!(
                "attribute `auto_pad` has an unknown value \"{other}\""
            )),
        }
    }

    fn pool(&mut self, node: &NodeProto, op_type: &str, a: &Attrs) -> R<()> {
        self.only_first_outputs(node, 1)?;
        let x = self.req_in(node, 0)?;
        let xs = self.shape_of(&x);
        if xs.len() != 4 {
            return Err(format!(
                "only 2-D pooling is supported (rank-4 input), got rank {}",
                xs.len()
            ));
        }
        let kernel = two(
            "kernel_shape",
            &to_u64s(
                "kernel_shape",
                &a.ints("kernel_shape")?
                    .ok_or("attribute `kernel_shape` is required")?,
            )?,
        )?;
        if kernel.contains(&0) {
            return Err("kernel_shape must be positive".into());
        }
        let strides = two(
            "strides",
            &to_u64s("strides", &a.ints("strides")?.unwrap_or(vec![1, 1]))?,
        )?;
        if strides.contains(&0) {
            return Err("strides must be positive".into());
        }
        if let Some(d) = a.ints("dilations")? {
            if d.iter().any(|&v| v != 1) {
                return Err(format!("dilations {d:?} are not supported (only 1)"));
            }
        }
        if a.int("storage_order")?.unwrap_or(0) != 0 {
            return Err("storage_order = 1 is not supported".into());
        }
        let pads = self.spatial_pads(a, &xs, kernel, strides, [1, 1])?;
        let p = Pool2d {
            kernel,
            strides,
            pads,
            ceil_mode: a.int("ceil_mode")?.unwrap_or(0) != 0,
            count_include_pad: a.int("count_include_pad")?.unwrap_or(0) != 0,
        };
        let op = if op_type == "MaxPool" {
            Op::MaxPool(p)
        } else {
            Op::AvgPool(p)
        };
        let x = self.in_value(node, 0)?;
        self.emit(node, op, &[x])
    }

    fn split(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let xs = self.shape_of(&x);
        let axis = a.int("axis")?.unwrap_or(0);
        let ax = norm_axis(axis, xs.len())?;
        let d = xs[ax];
        let n_out = node.output.len() as u64;
        let sizes: Vec<i64> = if let Some(t) = self.const_in(node, 1, "split")? {
            t.ints()
        } else if let Some(s) = a.ints("split")? {
            s
        } else {
            let n = match a.int("num_outputs")? {
                Some(n) if n > 0 => n as u64,
                Some(n) => {
                    return Err(format!("attribute `num_outputs` must be positive, got {n}"))
                }
                None => n_out,
            };
            if n == 0 {
                return Err("Split has no outputs".into());
            }
            if n != n_out {
                return Err(format!("{n} pieces requested for {n_out} outputs"));
            }
            if a.int("num_outputs")?.is_some() {
                // Opset 18: pieces of ceil(d / n), the last one smaller.
                let piece = d.div_ceil(n);
                let mut left = d;
                (0..n)
                    .map(|_| {
                        let s = piece.min(left);
                        left -= s;
                        s as i64
                    })
                    .collect()
            } else {
                if !d.is_multiple_of(n) {
                    return Err(format!(
                        "axis {ax} of size {d} cannot be split evenly into {n} outputs"
                    ));
                }
                vec![(d / n) as i64; n as usize]
            }
        };
        if sizes.len() as u64 != n_out {
            return Err(format!("{} split sizes for {n_out} outputs", sizes.len()));
        }
        let sizes = to_u64s("split", &sizes)?;
        if sizes.contains(&0) {
            return Err(format!(
                "zero-size pieces ({sizes:?}) are not supported by the IR's split"
            ));
        }
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Split { axis, sizes }, &[x])
    }

    fn slice_params(&self, node: &NodeProto, xs: &[u64]) -> R<Slice> {
        let starts = self
            .const_in(node, 1, "starts")?
            .ok_or("input 1 (starts) is required")?
            .ints();
        let ends = self
            .const_in(node, 2, "ends")?
            .ok_or("input 2 (ends) is required")?
            .ints();
        let axes = match self.const_in(node, 3, "axes")? {
            Some(t) => t.ints(),
            None => (0..starts.len() as i64).collect(),
        };
        let steps = match self.const_in(node, 4, "steps")? {
            Some(t) => t.ints(),
            None => vec![1; starts.len()],
        };
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            return Err("starts, ends, axes and steps must have the same length".into());
        }
        if steps.contains(&0) {
            return Err("steps must not be zero".into());
        }
        let mut seen = HashSet::new();
        for &ax in &axes {
            if !seen.insert(norm_axis(ax, xs.len())?) {
                return Err(format!("axis {ax} is given twice"));
            }
        }
        Ok(Slice {
            starts,
            ends,
            axes,
            steps,
        })
    }

    /// The static target shape of a Reshape: ONNX's `0` (copy) and `-1` (infer) resolved.
    fn reshape_target(&self, node: &NodeProto, a: &Attrs, xs: &[u64]) -> R<Vec<u64>> {
        let target = self
            .const_in(node, 1, "shape")?
            .ok_or("input 1 (shape) is required")?
            .ints();
        let allowzero = a.int("allowzero")?.unwrap_or(0) != 0;
        resolve_reshape(&target, xs, allowzero)
    }

    fn squeeze_axes(&self, node: &NodeProto, a: &Attrs, xs: &[u64]) -> R<Vec<i64>> {
        match self.axes_param(node, a, 13)? {
            Some(ax) => Ok(ax),
            None => Ok(xs
                .iter()
                .enumerate()
                .filter(|(_, &d)| d == 1)
                .map(|(i, _)| i as i64)
                .collect()),
        }
    }

    /// `axes` as an attribute before `input_from`, as input 1 from that opset on.
    fn axes_param(&self, node: &NodeProto, a: &Attrs, input_from: i64) -> R<Option<Vec<i64>>> {
        if self.opset >= input_from {
            Ok(self.const_in(node, 1, "axes")?.map(|t| t.ints()))
        } else {
            a.ints("axes")
        }
    }

    fn softmax(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let xs = self.shape_of(&x);
        let legacy = self.opset < 13;
        let axis = a.int("axis")?.unwrap_or(if legacy { 1 } else { -1 });
        let ax = if xs.is_empty() {
            0
        } else {
            norm_axis(axis, xs.len())?
        };
        let xv = self.in_value(node, 0)?;
        if !legacy || ax + 1 >= xs.len() {
            return self.emit(node, Op::Softmax { axis }, &[xv]);
        }
        // Before opset 13, Softmax coerces its input to 2-D [prod(d[..axis]), prod(d[axis..])]
        // and normalises over the second axis: reshape, softmax, reshape back.
        let outer: u64 = xs[..ax].iter().product();
        let inner: u64 = xs[ax..].iter().product();
        let flat = self.em.fresh();
        let f = self.em.push(
            Op::Reshape {
                shape: vec![outer as i64, inner as i64],
            },
            &[xv],
            vec![flat],
        )?[0];
        let sm = self.em.fresh();
        let s = self.em.push(Op::Softmax { axis: -1 }, &[f], vec![sm])?[0];
        let shape = xs.iter().map(|&d| d as i64).collect();
        self.emit(node, Op::Reshape { shape }, &[s])
    }

    fn pad(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let rank = self.shape_of(&x).len();
        let raw = if self.opset >= 11 {
            self.const_in(node, 1, "pads")?
                .ok_or("input 1 (pads) is required")?
                .ints()
        } else {
            a.ints("pads")?.ok_or("attribute `pads` is required")?
        };
        let pads: Vec<i64> = match self.const_in(node, 3, "axes")? {
            None => raw,
            Some(axes) => {
                let axes = axes.ints();
                if raw.len() != 2 * axes.len() {
                    return Err(format!(
                        "{} pads for {} axes (expected {})",
                        raw.len(),
                        axes.len(),
                        2 * axes.len()
                    ));
                }
                let mut full = vec![0; 2 * rank];
                for (k, &ax) in axes.iter().enumerate() {
                    let ax = norm_axis(ax, rank)?;
                    full[ax] = raw[k];
                    full[rank + ax] = raw[axes.len() + k];
                }
                full
            }
        };
        if pads.iter().any(|&p| p < 0) {
            return Err(format!(
                "negative pads {pads:?} (cropping) are not supported"
            ));
        }
        let mode = match a.string("mode")?.as_deref().unwrap_or("constant") {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            "edge" => PadMode::Edge,
            other => return Err(format!("pad mode \"{other}\" is not supported")),
        };
        let value = match self.const_in(node, 2, "constant_value")? {
            Some(t) if t.numel() == 1 => scalar_of(&t),
            Some(t) if t.numel() == 0 => 0.0,
            Some(t) => {
                return Err(format!(
                    "constant_value must be a scalar, got shape {:?}",
                    t.shape
                ))
            }
            None => a.float("value")?.unwrap_or(0.0),
        };
        let pads = to_u64s("pads", &pads)?;
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Pad { pads, mode, value }, &[x])
    }

    fn resize(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req_in(node, 0)?;
        let xs = self.shape_of(&x);
        if xs.len() != 4 {
            return Err(format!(
                "only rank-4 (NCHW) inputs are supported, got rank {}",
                xs.len()
            ));
        }
        let mode = match a.string("mode")?.as_deref().unwrap_or("nearest") {
            "nearest" => ResizeMode::Nearest,
            "linear" | "bilinear" => ResizeMode::Bilinear,
            other => {
                return Err(format!(
                    "mode \"{other}\" is not supported (nearest or linear)"
                ))
            }
        };
        let coord = match a
            .string("coordinate_transformation_mode")?
            .as_deref()
            .unwrap_or("half_pixel")
        {
            "half_pixel" => CoordMode::HalfPixel,
            "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
            "align_corners" => CoordMode::AlignCorners,
            "asymmetric" => CoordMode::Asymmetric,
            other => {
                return Err(format!(
                    "coordinate_transformation_mode \"{other}\" is not supported"
                ))
            }
        };
        let nearest = match a
            .string("nearest_mode")?
            .as_deref()
            .unwrap_or("round_prefer_floor")
        {
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            other => return Err(format!("nearest_mode \"{other}\" is not supported")),
        };
        if a.int("antialias")?.unwrap_or(0) != 0 {
            return Err("antialias = 1 is not supported".into());
        }
        if a.int("exclude_outside")?.unwrap_or(0) != 0 {
            return Err("exclude_outside = 1 is not supported".into());
        }
        if let Some(p) = a.string("keep_aspect_ratio_policy")? {
            if p != "stretch" {
                return Err(format!("keep_aspect_ratio_policy \"{p}\" is not supported"));
            }
        }
        let axes: Vec<usize> = match a.ints("axes")? {
            Some(ax) => ax.iter().map(|&v| norm_axis(v, 4)).collect::<R<_>>()?,
            None => (0..4).collect(),
        };
        let nonempty = |t: Option<Rc<Tensor>>| t.filter(|t| t.numel() > 0);
        let scales = nonempty(self.const_in(node, 2, "scales")?);
        let sizes = nonempty(self.const_in(node, 3, "sizes")?);
        let mut out = xs.clone();
        match (scales, sizes) {
            (Some(_), Some(_)) => return Err("only one of scales and sizes may be given".into()),
            (None, None) => {
                return Err("one of scales (input 2) and sizes (input 3) is required".into())
            }
            (None, Some(s)) => {
                let s = s.ints();
                if s.len() != axes.len() {
                    return Err(format!("{} sizes for {} axes", s.len(), axes.len()));
                }
                for (&ax, &v) in axes.iter().zip(&s) {
                    out[ax] = u64::try_from(v).map_err(|_| format!("negative size {v}"))?;
                }
            }
            (Some(sc), None) => {
                let sc: Vec<f64> = if sc.dtype == DType::F32 {
                    sc.floats().iter().map(|&v| widen(v as f32)).collect()
                } else {
                    sc.floats()
                };
                if sc.len() != axes.len() {
                    return Err(format!("{} scales for {} axes", sc.len(), axes.len()));
                }
                for (&ax, &s) in axes.iter().zip(&sc) {
                    if !(s > 0.0 && s.is_finite()) {
                        return Err(format!("scale {s} must be positive"));
                    }
                    let exact = xs[ax] as f64 * s;
                    let o = exact.floor();
                    // The IR maps coordinates with the ratio O / I; ONNX uses the given scale.
                    // They agree when I * scale is (within float rounding) a whole number.
                    if coord != CoordMode::AlignCorners
                        && (exact - exact.round()).abs() > 1e-4 * exact.max(1.0)
                    {
                        return Err(format!(
                            "scale {s} on axis {ax} (size {}) gives the fractional size {exact}; only whole output sizes are supported (give sizes instead)",
                            xs[ax]
                        ));
                    }
                    out[ax] = if (exact - exact.round()).abs() <= 1e-4 * exact.max(1.0) {
                        exact.round() as u64
                    } else {
                        o as u64
                    };
                }
            }
        }
        if out[0] != xs[0] || out[1] != xs[1] {
            return Err(format!(
                "resizing the batch or channel axis ({:?} → {:?}) is not supported",
                &xs[..2],
                &out[..2]
            ));
        }
        if out[2] == 0 || out[3] == 0 {
            return Err(format!("the output size {:?} must be positive", &out[2..]));
        }
        let r = Resize {
            size: [out[2], out[3]],
            mode,
            coord,
            nearest,
        };
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Resize(r), &[x])
    }

    /// Evaluates a node whose inputs are all constants, if it is one that can be folded.
    fn fold(
        &mut self,
        node: &NodeProto,
        op_type: &str,
        a: &Attrs,
        inputs: &[Option<Val>],
    ) -> R<Option<Tensor>> {
        let c = |i: usize| -> R<Rc<Tensor>> {
            match inputs.get(i) {
                Some(Some(Val::Const(t))) => Ok(t.clone()),
                _ => Err(format!("input {i} is required")),
            }
        };
        let t = match op_type {
            "Identity" | "Dropout" => {
                if op_type == "Dropout" {
                    self.only_first_outputs(node, 1)?;
                }
                (*c(0)?).clone()
            }
            "Cast" => {
                let to = tensor::dtype_from_onnx(
                    a.int("to")?.ok_or("attribute `to` is required")? as i32,
                )?;
                let x = c(0)?;
                if x.is_int() {
                    Tensor::from_i64s(to, x.shape.clone(), &x.ints())
                } else {
                    Tensor::from_f64s(to, x.shape.clone(), &x.floats())
                }
            }
            "ConstantOfShape" => {
                let shape = to_u64s("shape", &c(0)?.ints())?;
                let value = match a.tensor("value")? {
                    Some(v) => v,
                    None => Tensor::from_f64s(DType::F32, vec![1], &[0.0]),
                };
                if value.numel() != 1 {
                    return Err("attribute `value` must hold one element".into());
                }
                let n = numel(&shape).ok_or("the shape overflows")?;
                if n.saturating_mul(value.dtype.byte_size()) > tensor::MAX_FOLDED_BYTES {
                    return Err(format!(
                        "the constant of shape {shape:?} is too large to fold"
                    ));
                }
                let mut data = Vec::with_capacity((n * value.dtype.byte_size()) as usize);
                for _ in 0..n {
                    data.extend_from_slice(&value.data);
                }
                Tensor {
                    dtype: value.dtype,
                    shape,
                    data,
                }
            }
            "Gather" => {
                let x = c(0)?;
                let idx = c(1)?;
                let axis = norm_axis(a.int("axis")?.unwrap_or(0), x.shape.len())?;
                let d = x.shape[axis] as i64;
                let ids: Vec<u64> = idx
                    .ints()
                    .iter()
                    .map(|&i| {
                        let j = if i < 0 { i + d } else { i };
                        if (0..d).contains(&j) {
                            Ok(j as u64)
                        } else {
                            Err(format!(
                                "index {i} is out of range for axis {axis} of size {d}"
                            ))
                        }
                    })
                    .collect::<R<_>>()?;
                let mut shape = x.shape[..axis].to_vec();
                shape.extend(&idx.shape);
                shape.extend(&x.shape[axis + 1..]);
                let st = x.strides();
                let ir = idx.shape.len();
                x.gather_elems(shape, |o| {
                    let mut off = 0;
                    for k in 0..axis {
                        off += o[k] as usize * st[k];
                    }
                    let flat_idx = o[axis..axis + ir]
                        .iter()
                        .zip(strides(&idx.shape))
                        .map(|(&v, s)| v as usize * s)
                        .sum::<usize>();
                    off += ids[flat_idx] as usize * st[axis];
                    for k in axis + 1..x.shape.len() {
                        off += o[k + ir - 1] as usize * st[k];
                    }
                    off
                })?
            }
            "Unsqueeze" => {
                let x = c(0)?;
                let axes = self
                    .axes_param(node, a, 13)?
                    .ok_or("the axes are required")?;
                let out = tir_ir::shape::infer(
                    &Op::Unsqueeze { axes },
                    &[&TensorType::new(x.shape.clone(), x.dtype)],
                )
                .map_err(|e| e.message)?;
                x.reshaped(out[0].shape.clone())
            }
            "Squeeze" => {
                let x = c(0)?;
                let axes = self.squeeze_axes(node, a, &x.shape)?;
                let out = tir_ir::shape::infer(
                    &Op::Squeeze { axes },
                    &[&TensorType::new(x.shape.clone(), x.dtype)],
                )
                .map_err(|e| e.message)?;
                x.reshaped(out[0].shape.clone())
            }
            "Flatten" => {
                let x = c(0)?;
                let out = tir_ir::shape::infer(
                    &Op::Flatten {
                        axis: a.int("axis")?.unwrap_or(1),
                    },
                    &[&TensorType::new(x.shape.clone(), x.dtype)],
                )
                .map_err(|e| e.message)?;
                x.reshaped(out[0].shape.clone())
            }
            "Reshape" => {
                let x = c(0)?;
                let shape = self.reshape_target(node, a, &x.shape)?;
                x.reshaped(shape)
            }
            "Concat" => {
                let axis = a.int("axis")?.ok_or("attribute `axis` is required")?;
                let parts: Vec<Rc<Tensor>> = (0..inputs.len()).map(c).collect::<R<_>>()?;
                let tys: Vec<TensorType> = parts
                    .iter()
                    .map(|t| TensorType::new(t.shape.clone(), t.dtype))
                    .collect();
                let refs: Vec<&TensorType> = tys.iter().collect();
                let out =
                    tir_ir::shape::infer(&Op::Concat { axis }, &refs).map_err(|e| e.message)?;
                let ax = norm_axis(axis, parts[0].shape.len())?;
                // Row-major concat: for each outer index, the parts' inner blocks in order.
                let outer: u64 = parts[0].shape[..ax].iter().product();
                let mut data = Vec::new();
                for o in 0..outer as usize {
                    for p in &parts {
                        let block = p.data.len() / outer.max(1) as usize;
                        data.extend_from_slice(&p.data[o * block..(o + 1) * block]);
                    }
                }
                Tensor {
                    dtype: parts[0].dtype,
                    shape: out[0].shape.clone(),
                    data,
                }
            }
            "Slice" => {
                let x = c(0)?;
                let s = self.slice_params(node, &x.shape)?;
                slice_const(&x, &s)?
            }
            "Transpose" => {
                let x = c(0)?;
                let perm = transpose_perm(a, x.shape.len())?;
                let shape: Vec<u64> = perm.iter().map(|&p| x.shape[p as usize]).collect();
                let st = x.strides();
                x.gather_elems(shape, |o| {
                    o.iter()
                        .zip(&perm)
                        .map(|(&v, &p)| v as usize * st[p as usize])
                        .sum()
                })?
            }
            "Add" | "Sub" | "Mul" | "Div" | "Equal" => {
                let (x, y) = (c(0)?, c(1)?);
                let opn = op_type.to_string();
                elementwise(
                    &[&x, &y],
                    |v| {
                        let r = match (v[0], v[1]) {
                            (Num::I(p), Num::I(q)) => Num::I(match opn.as_str() {
                                "Add" => p.wrapping_add(q),
                                "Sub" => p.wrapping_sub(q),
                                "Mul" => p.wrapping_mul(q),
                                "Div" => {
                                    if q == 0 {
                                        return Err("integer division by zero".into());
                                    }
                                    p.wrapping_div(q)
                                }
                                _ => i64::from(p == q),
                            }),
                            (p, q) => {
                                let (p, q) = (p.f64(), q.f64());
                                match opn.as_str() {
                                    "Add" => Num::F(p + q),
                                    "Sub" => Num::F(p - q),
                                    "Mul" => Num::F(p * q),
                                    "Div" => Num::F(p / q),
                                    _ => Num::I(i64::from(p == q)),
                                }
                            }
                        };
                        Ok(r)
                    },
                    if op_type == "Equal" {
                        Some(DType::Bool)
                    } else {
                        None
                    },
                )?
            }
            "Where" => {
                let (cond, x, y) = (c(0)?, c(1)?, c(2)?);
                elementwise(
                    &[&cond, &x, &y],
                    |v| Ok(if v[0].f64() != 0.0 { v[1] } else { v[2] }),
                    Some(x.dtype),
                )?
            }
            "Expand" => {
                let x = c(0)?;
                let shape = to_u64s("shape", &c(1)?.ints())?;
                let n = numel(&shape)
                    .filter(|&n| n <= tensor::MAX_FOLDED_BYTES)
                    .ok_or_else(|| {
                        format!("the constant of shape {shape:?} is too large to fold")
                    })?;
                let target = Tensor::from_i64s(DType::Bool, shape, &vec![0; n as usize]);
                elementwise(&[&x, &target], |v| Ok(v[0]), Some(x.dtype))?
            }
            _ => return Ok(None),
        };
        Ok(Some(t))
    }
}

fn binary_op(op_type: &str) -> BinaryOp {
    match op_type {
        "Add" => BinaryOp::Add,
        "Sub" => BinaryOp::Sub,
        "Mul" => BinaryOp::Mul,
        _ => BinaryOp::Div,
    }
}

fn transpose_perm(a: &Attrs, rank: usize) -> R<Vec<u64>> {
    match a.ints("perm")? {
        Some(p) => to_u64s("perm", &p),
        None => Ok((0..rank as u64).rev().collect()),
    }
}

/// ONNX Reshape's target with `0` (copy the input's dimension, unless `allowzero`) and `-1`
/// (the remaining elements) resolved to a static shape.
fn resolve_reshape(target: &[i64], xs: &[u64], allowzero: bool) -> R<Vec<u64>> {
    let n = numel(xs).ok_or("the input's element count overflows")?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            0 if !allowzero => out.push(*xs.get(i).ok_or_else(|| {
                format!(
                    "shape entry {i} is 0 (copy), but the input has rank {}",
                    xs.len()
                )
            })?),
            -1 => {
                if infer.replace(i).is_some() {
                    return Err("the shape has more than one -1".into());
                }
                out.push(1);
            }
            d if d < 0 => return Err(format!("shape entry {i} is {d}")),
            d => out.push(d as u64),
        }
    }
    let known = numel(&out).ok_or("the target shape overflows")?;
    if let Some(i) = infer {
        if known == 0 || n % known != 0 {
            return Err(format!(
                "cannot reshape {xs:?} ({n} elements) to {target:?}"
            ));
        }
        out[i] = n / known;
    } else if known != n {
        return Err(format!(
            "cannot reshape {xs:?} ({n} elements) to {target:?} ({known} elements)"
        ));
    }
    Ok(out)
}

fn shape_tensor(shape: &[u64], a: &Attrs) -> R<Tensor> {
    let r = shape.len() as i64;
    let clamp = |v: i64| -> usize { (if v < 0 { v + r } else { v }).clamp(0, r) as usize };
    let start = clamp(a.int("start")?.unwrap_or(0));
    let end = clamp(a.int("end")?.unwrap_or(r));
    let dims: Vec<i64> = shape
        .get(start..end.max(start))
        .unwrap_or(&[])
        .iter()
        .map(|&d| d as i64)
        .collect();
    Ok(Tensor::from_i64s(
        DType::I64,
        vec![dims.len() as u64],
        &dims,
    ))
}

/// Folds ONNX Slice on a constant, with the IR's slice semantics (`docs/ir.md` 6.14).
fn slice_const(x: &Tensor, s: &Slice) -> R<Tensor> {
    let rank = x.shape.len();
    let mut start = vec![0i128; rank];
    let mut step = vec![1i128; rank];
    let mut shape = x.shape.clone();
    for k in 0..s.starts.len() {
        let ax = norm_axis(s.axes[k], rank)?;
        let d = x.shape[ax] as i128;
        let t = s.steps[k] as i128;
        let fix = |v: i64| {
            let v = v as i128;
            if v < 0 {
                v + d
            } else {
                v
            }
        };
        let (mut b, mut e) = (fix(s.starts[k]), fix(s.ends[k]));
        let len = if t > 0 {
            b = b.clamp(0, d);
            e = e.clamp(0, d);
            ((e - b + t - 1) / t).max(0)
        } else {
            b = b.clamp(-1, d - 1);
            e = e.clamp(-1, d - 1);
            ((b - e + (-t) - 1) / (-t)).max(0)
        };
        start[ax] = b;
        step[ax] = t;
        shape[ax] = len as u64;
    }
    let st = x.strides();
    x.gather_elems(shape, |o| {
        (0..rank)
            .map(|k| (start[k] + o[k] as i128 * step[k]) as usize * st[k])
            .sum()
    })
}

/// Evaluates `f` element-wise over inputs broadcast together (NumPy rules).
fn elementwise(
    ins: &[&Tensor],
    mut f: impl FnMut(&[Num]) -> R<Num>,
    out_dtype: Option<DType>,
) -> R<Tensor> {
    let mut shape: Vec<u64> = Vec::new();
    for t in ins {
        shape = tir_ir::shape::broadcast(&shape, &t.shape).map_err(|e| e.message)?;
    }
    let n = numel(&shape).ok_or("the result shape overflows")?;
    // Folding is for shape computations and small constants; the element list is not compact.
    if n > 1 << 24 {
        return Err(format!(
            "the constant of shape {shape:?} is too large to fold"
        ));
    }
    let strs: Vec<Vec<usize>> = ins
        .iter()
        .map(|t| {
            // Strides aligned to the result's rank; broadcast axes get stride 0.
            let s = strides(&t.shape);
            let pad = shape.len() - t.shape.len();
            (0..shape.len())
                .map(|k| {
                    if k < pad || t.shape[k - pad] == 1 {
                        0
                    } else {
                        s[k - pad]
                    }
                })
                .collect()
        })
        .collect();
    let mut out = Vec::with_capacity(n as usize);
    let mut err = None;
    let mut args = vec![Num::I(0); ins.len()];
    tensor::for_each_index(&shape, |idx| {
        if err.is_some() {
            return;
        }
        for (j, t) in ins.iter().enumerate() {
            let off: usize = idx
                .iter()
                .zip(&strs[j])
                .map(|(&i, &s)| i as usize * s)
                .sum();
            args[j] = t.get(off);
        }
        match f(&args) {
            Ok(v) => out.push(v),
            Err(e) => err = Some(e),
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    let dtype = out_dtype.unwrap_or(ins[0].dtype);
    if out.iter().all(|v| matches!(v, Num::I(_))) {
        let v: Vec<i64> = out
            .iter()
            .map(|v| match v {
                Num::I(i) => *i,
                Num::F(f) => *f as i64,
            })
            .collect();
        Ok(Tensor::from_i64s(dtype, shape, &v))
    } else {
        let v: Vec<f64> = out.iter().map(|v| v.f64()).collect();
        Ok(Tensor::from_f64s(dtype, shape, &v))
    }
}

/// The value of a `Constant` node.
fn constant_attr(a: &Attrs) -> R<Tensor> {
    if let Some(t) = a.tensor("value")? {
        return Ok(t);
    }
    if let Some(f) = a.float("value_float")? {
        return Ok(Tensor::from_f64s(DType::F32, vec![], &[f]));
    }
    if let Some(v) = a.floats("value_floats")? {
        return Ok(Tensor::from_f64s(DType::F32, vec![v.len() as u64], &v));
    }
    if let Some(i) = a.int("value_int")? {
        return Ok(Tensor::from_i64s(DType::I64, vec![], &[i]));
    }
    if let Some(v) = a.ints("value_ints")? {
        return Ok(Tensor::from_i64s(DType::I64, vec![v.len() as u64], &v));
    }
    Err("a Constant needs one of the attributes value, value_float(s), value_int(s) (strings and sparse tensors are not supported)".into())
}

/// A node's attributes, read with their declared types checked.
struct Attrs<'a>(&'a [AttributeProto]);

impl Attrs<'_> {
    fn get(&self, name: &str, want: AttributeType) -> R<Option<&AttributeProto>> {
        let Some(at) = self.0.iter().find(|at| at.name.as_deref() == Some(name)) else {
            return Ok(None);
        };
        match at.r#type {
            Some(t) if t == want as i32 => Ok(Some(at)),
            // Before IR version 2 the type was not recorded; trust the field that is set.
            None | Some(0) => Ok(Some(at)),
            Some(t) => Err(format!(
                "attribute `{name}` must be {}, found {}",
                want.as_str_name(),
                AttributeType::try_from(t).map_or("an unknown type", |t| t.as_str_name())
            )),
        }
    }

    fn int(&self, name: &str) -> R<Option<i64>> {
        Ok(self
            .get(name, AttributeType::Int)?
            .map(|a| a.i.unwrap_or(0)))
    }

    fn ints(&self, name: &str) -> R<Option<Vec<i64>>> {
        Ok(self.get(name, AttributeType::Ints)?.map(|a| a.ints.clone()))
    }

    fn float(&self, name: &str) -> R<Option<f64>> {
        Ok(self
            .get(name, AttributeType::Float)?
            .map(|a| widen(a.f.unwrap_or(0.0))))
    }

    fn floats(&self, name: &str) -> R<Option<Vec<f64>>> {
        Ok(self
            .get(name, AttributeType::Floats)?
            .map(|a| a.floats.iter().map(|&f| widen(f)).collect()))
    }

    fn string(&self, name: &str) -> R<Option<String>> {
        match self.get(name, AttributeType::String)? {
            None => Ok(None),
            Some(a) => String::from_utf8(a.s.clone().unwrap_or_default())
                .map(Some)
                .map_err(|_| format!("attribute `{name}` is not valid UTF-8")),
        }
    }

    fn tensor(&self, name: &str) -> R<Option<Tensor>> {
        match self.get(name, AttributeType::Tensor)? {
            None => Ok(None),
            Some(a) => {
                let t =
                    a.t.as_ref()
                        .ok_or_else(|| format!("attribute `{name}` holds no tensor"))?;
                // A Constant's tensor never has external data relative to anything useful.
                Tensor::from_proto(t, None)
                    .map(Some)
                    .map_err(|e| format!("attribute `{name}`: {e}"))
            }
        }
    }
}

/// `name` with every character an IR identifier cannot hold replaced by `_`.
pub(crate) fn identifier_chars(name: &str) -> String {
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

fn sanitize_symbol(name: &str) -> String {
    let mut s = identifier_chars(name);
    if !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        s.insert(0, '_');
    }
    s
}

/// An f32 attribute as the f64 with the same shortest decimal form (`1e-3f32` becomes `0.001`,
/// not `0.0010000000474974513`), so printed attributes read as the exporter wrote them.
fn widen(f: f32) -> f64 {
    if f.is_finite() {
        f.to_string().parse().unwrap_or(f as f64)
    } else {
        f as f64
    }
}

/// The one element of a constant, widened like an attribute.
fn scalar_of(t: &Tensor) -> f64 {
    let v = t.floats()[0];
    if t.dtype == DType::F32 {
        widen(v as f32)
    } else {
        v
    }
}
