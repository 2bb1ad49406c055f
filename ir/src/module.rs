//! Modules, functions, values and ops.
//!
//! Invariants (established by the parser or the builder, checked by the verifier):
//! - every value is defined exactly once, either as a parameter or as the result of one op;
//! - value names are unique within their function;
//! - in `layout` order, every operand is defined before the op that uses it;
//! - after verification, every value's `ty` is `Some`.

use crate::entity::{EntityVec, OpId, Value};
use crate::op::Op;
use crate::span::Span;
use crate::sym::{Cond, DimExpr};
use crate::types::{SymTensorType, TensorType};

/// A translation unit: named functions. `@main`, or the only function, is the entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    pub name: String,
    /// The `//` comment lines before `module`, without the slashes; printed back by `fmt`.
    pub doc: Vec<String>,
    pub funcs: Vec<Function>,
    pub span: Span,
}

impl Module {
    /// Whether some function has a symbolic dim.
    pub fn is_dynamic(&self) -> bool {
        self.funcs.iter().any(Function::is_dynamic)
    }

    pub fn new(name: impl Into<String>) -> Self {
        Module {
            name: name.into(),
            doc: Vec::new(),
            funcs: Vec::new(),
            span: Span::NONE,
        }
    }

    /// The function that runs the model: `@main`, or the only one.
    pub fn entry(&self) -> Option<&Function> {
        self.funcs
            .iter()
            .find(|f| f.name == "main")
            .or(match self.funcs.as_slice() {
                [only] => Some(only),
                _ => None,
            })
    }

    pub fn entry_mut(&mut self) -> Option<&mut Function> {
        let idx = self
            .funcs
            .iter()
            .position(|f| f.name == "main")
            .or(if self.funcs.len() == 1 { Some(0) } else { None })?;
        self.funcs.get_mut(idx)
    }
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// The n-th function parameter.
    Param(usize),
    /// The n-th result of an op.
    Result(OpId, usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ValueData {
    /// The name without `%`, unique within the function.
    pub name: String,
    pub def: ValueDef,
    /// The type written in the text, if any (parameters always have one).
    pub declared: Option<TensorType>,
    /// The type after shape inference; equal to `declared` when both exist.
    pub ty: Option<TensorType>,
    /// A written type with symbolic dims (then `declared` is `None`). Only in a dynamic
    /// function.
    pub declared_sym: Option<SymTensorType>,
    /// In a dynamic function after verification: the type, symbolic dims included (constant
    /// dims when there are none). `None` in a static function.
    pub sym: Option<SymTensorType>,
    /// Where the name is defined.
    pub span: Span,
}

impl ValueData {
    /// The known type: inferred if available, else declared.
    pub fn known_type(&self) -> Option<&TensorType> {
        self.ty.as_ref().or(self.declared.as_ref())
    }

    /// The type as the printer writes it: symbolic if the value has one, else the known type.
    pub fn type_text(&self) -> Option<String> {
        self.sym
            .as_ref()
            .or(self.declared_sym.as_ref())
            .map(ToString::to_string)
            .or_else(|| self.known_type().map(ToString::to_string))
    }

    /// The symbolic type: inferred, else declared (symbolic or static).
    pub fn sym_type(&self) -> Option<SymTensorType> {
        self.sym
            .clone()
            .or_else(|| self.declared_sym.clone())
            .or_else(|| self.known_type().map(TensorType::to_sym))
    }
}

/// What a dynamic function (one with a symbolic dim in some type) carries besides its values.
/// Dynamic functions are parsed, verified, printed and specialized (`crate::specialize`);
/// every other pass takes static functions only.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Dynamic {
    /// The result types: as written after `->`, or after verification as inferred.
    pub result_types: Vec<SymTensorType>,
    /// The conditions shape inference could not decide, in layout order; `specialize` checks
    /// them before anything else.
    pub checks: Vec<RuntimeCheck>,
}

/// A condition on dims that holds for a valid binding, recorded where shape inference could
/// not prove it (two symbolic dims that `add` needs equal, a window against a symbolic input).
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeCheck {
    pub cond: Cond<DimExpr>,
    /// The op that needs it.
    pub op: &'static str,
    /// The op's name in the text.
    pub span: Span,
}

/// Source locations of an op's parts, for diagnostics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpLoc {
    /// The op name.
    pub name: Span,
    /// Each operand reference.
    pub operands: Vec<Span>,
    /// Each `outs` reference.
    pub outs: Vec<Span>,
    /// Each declared result type.
    pub types: Vec<Span>,
    /// The whole statement.
    pub stmt: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OpData {
    pub op: Op,
    pub operands: Vec<Value>,
    pub results: Vec<Value>,
    /// After bufferization: the `alloc_tensor` each result is written into (destination-passing
    /// style, MLIR's `outs`). Empty before bufferization and for results the caller owns.
    pub outs: Vec<Value>,
    pub loc: OpLoc,
}

/// A function: parameters, an op arena, the execution order, and the returned values.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub params: Vec<Value>,
    pub result_types: Vec<TensorType>,
    pub values: EntityVec<Value, ValueData>,
    pub ops: EntityVec<OpId, OpData>,
    /// Execution order. Kept apart from `ops` (Cranelift's `Layout`) so that reordering passes
    /// move ops without touching operands.
    pub layout: Vec<OpId>,
    pub returns: Vec<Value>,
    pub span: Span,
    /// The `return` statement, or the closing brace where it is missing.
    pub return_span: Span,
    /// Each `return` operand.
    pub return_operand_spans: Vec<Span>,
    /// Each declared result type.
    pub result_type_spans: Vec<Span>,
    /// False when the text had no `return` (reported by the verifier).
    pub has_return: bool,
    /// Set when some type has a symbolic dim: the function is dynamic.
    pub dynamic: Option<Box<Dynamic>>,
}

impl Function {
    pub fn new(name: impl Into<String>) -> Self {
        Function {
            name: name.into(),
            params: Vec::new(),
            result_types: Vec::new(),
            values: EntityVec::new(),
            ops: EntityVec::new(),
            layout: Vec::new(),
            returns: Vec::new(),
            span: Span::NONE,
            return_span: Span::NONE,
            return_operand_spans: Vec::new(),
            result_type_spans: Vec::new(),
            has_return: true,
            dynamic: None,
        }
    }

    /// Whether some type of the function has a symbolic dim.
    pub fn is_dynamic(&self) -> bool {
        self.dynamic.is_some()
    }

    /// `%name` as written in the text.
    pub fn value_name(&self, v: Value) -> String {
        format!("%{}", self.values[v].name)
    }

    /// The value's type. Only `None` before shape inference.
    pub fn ty(&self, v: Value) -> Option<&TensorType> {
        self.values[v].known_type()
    }

    /// The op that defines `v`, if it is not a parameter.
    pub fn producer(&self, v: Value) -> Option<OpId> {
        match self.values[v].def {
            ValueDef::Result(op, _) => Some(op),
            ValueDef::Param(_) => None,
        }
    }

    /// Ops in execution order.
    pub fn ops_in_order(&self) -> impl Iterator<Item = (OpId, &OpData)> + '_ {
        self.layout.iter().map(|&id| (id, &self.ops[id]))
    }

    /// Appends a parameter.
    pub fn add_param(&mut self, name: impl Into<String>, ty: TensorType) -> Value {
        let idx = self.params.len();
        let v = self.values.push(ValueData {
            name: name.into(),
            def: ValueDef::Param(idx),
            declared: Some(ty.clone()),
            ty: Some(ty),
            declared_sym: None,
            sym: None,
            span: Span::NONE,
        });
        self.params.push(v);
        v
    }

    /// Appends a parameter whose type may have symbolic dims (an importer's free input dims).
    /// A fully static type is an ordinary parameter; one with a symbolic dim is typed only
    /// symbolically and makes the function dynamic, so that shape inference and planning take
    /// the dynamic path.
    pub fn add_sym_param(&mut self, name: impl Into<String>, ty: SymTensorType) -> Value {
        let stat = ty.to_static();
        let v = self.add_param(name, stat.clone().unwrap_or_else(|| TensorType::f32([])));
        if stat.is_none() {
            let d = &mut self.values[v];
            d.declared = None;
            d.ty = None;
            d.declared_sym = Some(ty.clone());
            d.sym = Some(ty);
            self.dynamic.get_or_insert_with(Default::default);
        }
        v
    }

    /// Appends an op at the end of the layout, creating its result values with the given names
    /// and (optional) declared types.
    pub fn push_op(
        &mut self,
        op: Op,
        operands: Vec<Value>,
        results: Vec<(String, Option<TensorType>)>,
    ) -> OpId {
        let id = self.ops.push(OpData {
            op,
            operands,
            results: Vec::new(),
            outs: Vec::new(),
            loc: OpLoc::default(),
        });
        let mut vals = Vec::with_capacity(results.len());
        for (i, (name, declared)) in results.into_iter().enumerate() {
            vals.push(self.values.push(ValueData {
                name,
                def: ValueDef::Result(id, i),
                declared,
                ty: None,
                declared_sym: None,
                sym: None,
                span: Span::NONE,
            }));
        }
        self.ops[id].results = vals;
        self.layout.push(id);
        id
    }
}
