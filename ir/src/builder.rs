//! Building modules in code. Each op's result type is inferred as it is added, so a builder
//! error names the op at fault immediately; the finished module verifies by construction.

use crate::entity::Value;
use crate::module::{Function, Module};
use crate::op::Op;
use crate::shape::{self, ShapeError};
use crate::types::TensorType;
use std::collections::HashSet;

/// An op added with operands whose types it does not accept.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{op} ({result}): {message}")]
pub struct BuildError {
    pub op: &'static str,
    pub result: String,
    pub message: String,
}

/// Builds one function (`@main` unless named otherwise) of a new module.
pub struct Builder {
    module: Module,
    func: Function,
    next_id: usize,
    names: HashSet<String>,
}

impl Builder {
    pub fn new(module: impl Into<String>) -> Self {
        Builder {
            module: Module::new(module),
            func: Function::new("main"),
            next_id: 0,
            names: HashSet::new(),
        }
    }

    /// Comment lines printed above `module` (the file header).
    pub fn doc(&mut self, line: impl Into<String>) -> &mut Self {
        self.module.doc.push(line.into());
        self
    }

    /// A graph input.
    pub fn input(&mut self, name: impl Into<String>, ty: TensorType) -> Value {
        let name = name.into();
        self.names.insert(name.clone());
        self.func.add_param(name, ty)
    }

    /// A weight: a `const` named `name`, bound to the SSA value `%name`.
    pub fn weight(&mut self, name: impl Into<String>, ty: TensorType) -> Value {
        let name = name.into();
        self.names.insert(name.clone());
        let id = self.func.push_op(
            Op::Const { name: name.clone() },
            Vec::new(),
            vec![(name, Some(ty.clone()))],
        );
        let v = self.func.ops[id].results[0];
        self.func.values[v].ty = Some(ty);
        v
    }

    /// The type of a value built so far.
    pub fn ty(&self, v: Value) -> &TensorType {
        self.func.values[v]
            .ty
            .as_ref()
            .expect("builder values are always typed")
    }

    /// Adds a single-result op with an automatic name (`%0`, `%1`, ...).
    pub fn op(&mut self, op: Op, operands: &[Value]) -> Result<Value, BuildError> {
        let name = self.fresh();
        self.op_named(name, op, operands)
    }

    /// Adds a single-result op whose result is called `%name`.
    pub fn op_named(
        &mut self,
        name: impl Into<String>,
        op: Op,
        operands: &[Value],
    ) -> Result<Value, BuildError> {
        Ok(self.add(vec![name.into()], op, operands)?[0])
    }

    /// Adds an op with several results (`split`), automatically named.
    pub fn op_multi(&mut self, op: Op, operands: &[Value]) -> Result<Vec<Value>, BuildError> {
        let names = (0..op.num_results()).map(|_| self.fresh()).collect();
        self.add(names, op, operands)
    }

    fn fresh(&mut self) -> String {
        loop {
            let name = self.next_id.to_string();
            self.next_id += 1;
            if !self.names.contains(&name) {
                return name;
            }
        }
    }

    fn add(
        &mut self,
        names: Vec<String>,
        op: Op,
        operands: &[Value],
    ) -> Result<Vec<Value>, BuildError> {
        let ins: Vec<&TensorType> = operands.iter().map(|&v| self.ty(v)).collect();
        let tys = shape::infer(&op, &ins).map_err(|ShapeError { message, .. }| BuildError {
            op: op.name(),
            result: names
                .iter()
                .map(|n| format!("%{n}"))
                .collect::<Vec<_>>()
                .join(", "),
            message,
        })?;
        self.names.extend(names.iter().cloned());
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

    /// Finishes the function returning `outputs`, and the module around it.
    pub fn finish(mut self, outputs: &[Value]) -> Module {
        self.func.returns = outputs.to_vec();
        self.func.result_types = outputs.iter().map(|&v| self.ty(v).clone()).collect();
        self.module.funcs.push(self.func);
        self.module
    }
}
