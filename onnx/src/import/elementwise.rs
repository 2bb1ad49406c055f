//! Element-wise ops: Add/Sub/Mul/Div/Pow, Max/Min (folded pairwise), the unary functions,
//! Clip, HardSigmoid, PRelu, and the erf form of GELU that PyTorch exports before opset 20,
//! recognised as one op.

use super::attrs::{scalar_of, Attrs};
use super::{Importer, Val, R};
use crate::error::NodeError;
use crate::proto::NodeProto;
use crate::tensor::Tensor;
use std::rc::Rc;
use tir_ir::{BinaryOp, DType, Op, UnaryOp};

impl Importer {
    pub(super) fn binary(&mut self, node: &NodeProto, op_type: &str) -> R<()> {
        let op = match op_type {
            "Add" => BinaryOp::Add,
            "Sub" => BinaryOp::Sub,
            "Mul" => BinaryOp::Mul,
            "Pow" => BinaryOp::Pow,
            _ => BinaryOp::Div,
        };
        let x = self.in_value(node, 0)?;
        if op == BinaryOp::Pow && self.em.sym_ty(x).dtype == DType::F32 {
            // `x ^ 2` with a constant exponent of one element (the variance of a decomposed
            // LayerNorm, PyTorch's exports before opset 17): `x · x`, which is what LLVM makes
            // of `powf(x, 2.0)` once it sees the constant (the static kernel's bits), and
            // what a kernel with run-time extents, which reads its exponent, cannot.
            if let Val::Const(t) = self.req_in(node, 1)? {
                let rank = self.em.sym_ty(x).shape.len();
                if t.shape.len() <= rank && t.floats() == [2.0] {
                    let mul = Op::Binary {
                        op: BinaryOp::Mul,
                        activation: None,
                    };
                    return self.emit(node, mul, &[x, x]);
                }
            }
        }
        let y = match self.req_in(node, 1)? {
            // Pow's exponent may be an integer tensor; a constant one is the same f32 exponent.
            Val::Const(t)
                if op == BinaryOp::Pow
                    && t.is_int()
                    && self.dtype_of(&self.req_in(node, 0)?) == DType::F32 =>
            {
                let f = Tensor::from_f64s(DType::F32, t.shape.clone(), &t.floats());
                let v = Val::Const(Rc::new(f));
                let name = format!("{}$f32", node.input[1]);
                self.env.insert(name.clone(), v);
                self.value(&name)?
            }
            _ => self.in_value(node, 1)?,
        };
        let (dx, dy) = (self.em.sym_ty(x).dtype, self.em.sym_ty(y).dtype);
        if op == BinaryOp::Pow && dx != dy {
            // Pow's exponent may have another type; the reference computes in floating point
            // and converts to the base's type (`np.power(a, b).astype(a.dtype)`): here in
            // f32, both cast to it, the result cast back.
            let mut to_f32 = |v, d| -> R<_> {
                if d == DType::F32 {
                    return Ok(v);
                }
                let name = self.em.fresh();
                Ok(self
                    .em
                    .push(Op::Cast { to: DType::F32 }, &[v], vec![name])?[0])
            };
            let (fx, fy) = (to_f32(x, dx)?, to_f32(y, dy)?);
            let pow = Op::Binary {
                op,
                activation: None,
            };
            if dx == DType::F32 {
                return self.emit(node, pow, &[fx, fy]);
            }
            let name = self.em.fresh();
            let p = self.em.push(pow, &[fx, fy], vec![name])?[0];
            return self.emit(node, Op::Cast { to: dx }, &[p]);
        }
        self.emit(
            node,
            Op::Binary {
                op,
                activation: None,
            },
            &[x, y],
        )
    }

    /// Max and Min of one or more inputs, broadcast together: a chain of binary ops.
    pub(super) fn variadic(&mut self, node: &NodeProto, op_type: &str) -> R<()> {
        let op = if op_type == "Max" {
            BinaryOp::Max
        } else {
            BinaryOp::Min
        };
        if node.input.len() == 1 {
            let x = self.req_in(node, 0)?;
            self.alias(node, x);
            return Ok(());
        }
        let mut acc = self.in_value(node, 0)?;
        for i in 1..node.input.len() {
            let y = self.in_value(node, i)?;
            if i + 1 == node.input.len() {
                return self.emit(
                    node,
                    Op::Binary {
                        op,
                        activation: None,
                    },
                    &[acc, y],
                );
            }
            let name = self.em.fresh();
            acc = self.em.push(
                Op::Binary {
                    op,
                    activation: None,
                },
                &[acc, y],
                vec![name],
            )?[0];
        }
        Err(NodeError::MissingInput {
            index: 0,
            what: None,
        })
    }

    pub(super) fn unary(&mut self, node: &NodeProto, op_type: &str, a: &Attrs) -> R<()> {
        let u = match op_type {
            "Abs" => UnaryOp::Abs,
            "Neg" => UnaryOp::Neg,
            "Sqrt" => UnaryOp::Sqrt,
            "Reciprocal" => UnaryOp::Reciprocal,
            "Log" => UnaryOp::Log,
            "Floor" => UnaryOp::Floor,
            "Ceil" => UnaryOp::Ceil,
            "Round" => UnaryOp::Round,
            "Erf" => UnaryOp::Erf,
            "Sin" => UnaryOp::Sin,
            "Cos" => UnaryOp::Cos,
            "Softplus" => UnaryOp::Softplus,
            "Softsign" => UnaryOp::Softsign,
            "Tan" => UnaryOp::Tan,
            "Asin" => UnaryOp::Asin,
            "Acos" => UnaryOp::Acos,
            "Atan" => UnaryOp::Atan,
            "Sinh" => UnaryOp::Sinh,
            "Cosh" => UnaryOp::Cosh,
            "Asinh" => UnaryOp::Asinh,
            "Acosh" => UnaryOp::Acosh,
            "Atanh" => UnaryOp::Atanh,
            "Sign" => UnaryOp::Sign,
            "Relu" => UnaryOp::Relu,
            "Sigmoid" => UnaryOp::Sigmoid,
            "Tanh" => UnaryOp::Tanh,
            "Exp" => UnaryOp::Exp,
            "HardSwish" => UnaryOp::HardSwish,
            _ => {
                let approx = a.string("approximate")?.unwrap_or_else(|| "none".into());
                if approx == "tanh" {
                    return self.gelu_tanh(node);
                }
                if approx != "none" {
                    return Err(NodeError::GeluApproximate { value: approx });
                }
                UnaryOp::Gelu
            }
        };
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Unary(u), &[x])
    }

    pub(super) fn clip(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let scalar = |t: Option<Rc<Tensor>>, what: &'static str| -> R<Option<f64>> {
            match t {
                None => Ok(None),
                Some(t) if t.numel() == 1 => Ok(Some(scalar_of(&t))),
                Some(t) => Err(NodeError::NotScalar {
                    what,
                    shape: t.shape.clone(),
                }),
            }
        };
        let min = scalar(self.const_in(node, 1, "min")?, "min")?
            .or(a.float("min")?)
            .unwrap_or(f64::NEG_INFINITY);
        let max = scalar(self.const_in(node, 2, "max")?, "max")?
            .or(a.float("max")?)
            .unwrap_or(f64::INFINITY);
        if min > max || min.is_nan() || max.is_nan() {
            return Err(NodeError::ClipRange { min, max });
        }
        let x = self.in_value(node, 0)?;
        self.emit(node, Op::Clip { min, max }, &[x])
    }

    pub(super) fn hard_sigmoid(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let op = Op::HardSigmoid {
            alpha: a.float("alpha")?.unwrap_or(0.2),
            beta: a.float("beta")?.unwrap_or(0.5),
        };
        let x = self.in_value(node, 0)?;
        self.emit(node, op, &[x])
    }

    pub(super) fn prelu(&mut self, node: &NodeProto) -> R<()> {
        let x = self.in_value(node, 0)?;
        let s = self.in_value(node, 1)?;
        self.emit(node, Op::Prelu, &[x, s])
    }

    /// Recognises `Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)` (either operand order, the
    /// `0.5` applied to `x` first, or `Mul(x, 1/sqrt 2)` for the division) around the `Erf` at
    /// `erf`, where every intermediate has exactly one consumer and is not a graph output.
    /// Returns `x`, the pattern's output and the later nodes it covers.
    pub(super) fn erf_gelu(
        &self,
        nodes: &[NodeProto],
        erf: usize,
    ) -> Option<(String, String, Vec<usize>)> {
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
}
