//! The egg language of tir programs and its shape analysis.
//!
//! Every IR op becomes `Op(name, [attrs, operands...])`: the head is the op's textual name, so
//! patterns read like the IR (`(conv2d ?c (concat ?k ?a ?b) ?w)`), and the first child is an
//! e-class holding one `Attr` leaf, an index into [`TirAnalysis::attrs`]. Attributes are
//! e-classes rather than part of the head (as in TENSAT, Yang et al., MLSys 2021) so one
//! pattern matches a conv of any stride; conditions read them from the analysis. `concat`
//! is binary here (an n-ary concat enters left-nested), which lets fixed-arity patterns split
//! any concat piece by piece; the way back to the IR flattens the nesting again.
//!
//! The analysis gives every value e-class its tensor type (from `tir_ir::shape::infer`, the
//! IR's one shape rule per op family) and whether it is a weight (a `const` or a slice of
//! one), which the rules that slice weights need.

use egg::{Id, Language, Symbol};
use std::collections::HashMap;
use std::fmt;
use tir_ir::{Op, TensorType};

/// One e-node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TirNode {
    /// A function parameter or a `const`, by its value name (`%x`).
    Leaf(Symbol),
    /// Attributes: an index into [`TirAnalysis::attrs`] (`#3`).
    Attr(u32),
    /// An op by its textual name; `children[0]` is its `Attr` class.
    Op(Symbol, Vec<Id>),
}

impl Language for TirNode {
    fn matches(&self, other: &Self) -> bool {
        match (self, other) {
            (TirNode::Leaf(a), TirNode::Leaf(b)) => a == b,
            (TirNode::Attr(a), TirNode::Attr(b)) => a == b,
            (TirNode::Op(a, x), TirNode::Op(b, y)) => a == b && x.len() == y.len(),
            _ => false,
        }
    }

    fn children(&self) -> &[Id] {
        match self {
            TirNode::Op(_, c) => c,
            _ => &[],
        }
    }

    fn children_mut(&mut self) -> &mut [Id] {
        match self {
            TirNode::Op(_, c) => c,
            _ => &mut [],
        }
    }
}

impl fmt::Display for TirNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TirNode::Leaf(s) => write!(f, "%{s}"),
            TirNode::Attr(i) => write!(f, "#{i}"),
            TirNode::Op(s, _) => write!(f, "{s}"),
        }
    }
}

/// Why a pattern's text names no node.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a tir node: write an op name, `%value` or `#attrs`")]
pub struct BadNode(pub String);

impl egg::FromOp for TirNode {
    type Error = BadNode;
    fn from_op(op: &str, children: Vec<Id>) -> Result<Self, BadNode> {
        if let Some(name) = op.strip_prefix('%') {
            if children.is_empty() && !name.is_empty() {
                return Ok(TirNode::Leaf(Symbol::from(name)));
            }
        } else if let Some(i) = op.strip_prefix('#') {
            if let (true, Ok(i)) = (children.is_empty(), i.parse()) {
                return Ok(TirNode::Attr(i));
            }
        } else if tir_ir::op::OP_NAMES.contains(&op) || op == RESULT {
            return Ok(TirNode::Op(Symbol::from(op), children));
        }
        Err(BadNode(op.to_string()))
    }
}

/// The head of the node that picks one result of a multi-result op (`split`): its attribute
/// is [`Attrs::Result`].
pub const RESULT: &str = "result";

/// What an `Attr` leaf stands for.
#[derive(Clone, Debug, PartialEq)]
pub enum Attrs {
    /// The op itself, operands aside.
    Op(Op),
    /// The index of a result of a multi-result op.
    Result(usize),
}

/// What the analysis knows about a value e-class. Attribute classes, and multi-result ops
/// before their `result`, have none.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    pub ty: TensorType,
    /// A `const`, or a slice of one: data known at compile time, which a rule may slice into
    /// new consts.
    pub weight: bool,
}

impl Meta {
    /// Size in bytes (saturating; the IR's verifier rejects overflowing types).
    pub fn bytes(&self) -> u64 {
        self.ty.byte_size().unwrap_or(u64::MAX)
    }
}

/// Shapes and sizes of the e-classes, and the tables the nodes index.
#[derive(Clone, Debug, Default)]
pub struct TirAnalysis {
    /// Parameters and consts by value name.
    pub leaves: HashMap<Symbol, Meta>,
    pub attrs: Vec<Attrs>,
    /// Interning of `attrs` (ops hold `f64`s, so they are keyed by their `Debug` text).
    attr_index: HashMap<String, u32>,
}

pub type EGraph = egg::EGraph<TirNode, TirAnalysis>;
pub type Rewrite = egg::Rewrite<TirNode, TirAnalysis>;

impl TirAnalysis {
    /// Interns attributes, returning their index.
    pub fn intern(&mut self, a: Attrs) -> u32 {
        let key = format!("{a:?}");
        if let Some(&i) = self.attr_index.get(&key) {
            return i;
        }
        let i = self.attrs.len() as u32;
        self.attrs.push(a);
        self.attr_index.insert(key, i);
        i
    }

    pub fn leaf(&mut self, name: &str, ty: TensorType, weight: bool) {
        self.leaves.insert(Symbol::from(name), Meta { ty, weight });
    }
}

/// The attributes an e-class holds, if it is an attribute class.
pub fn attrs_of(egraph: &EGraph, id: Id) -> Option<&Attrs> {
    egraph[id].nodes.iter().find_map(|n| match n {
        TirNode::Attr(i) => egraph.analysis.attrs.get(*i as usize),
        _ => None,
    })
}

/// The op an attribute class holds.
pub fn op_of(egraph: &EGraph, id: Id) -> Option<&Op> {
    match attrs_of(egraph, id)? {
        Attrs::Op(op) => Some(op),
        Attrs::Result(_) => None,
    }
}

/// The type of a node from its children's, by the IR's own shape rule; `None` for attribute
/// nodes and for nodes the rule rejects (which the rules never build).
pub fn infer(egraph: &EGraph, enode: &TirNode) -> Option<Meta> {
    match enode {
        TirNode::Leaf(s) => egraph.analysis.leaves.get(s).cloned(),
        TirNode::Attr(_) => None,
        TirNode::Op(name, ch) => {
            let (&a, operands) = ch.split_first()?;
            match attrs_of(egraph, a)? {
                Attrs::Result(k) => {
                    // The op's class has no type; infer from the op node itself.
                    let multi = egraph[operands[0]].nodes.first()?;
                    let TirNode::Op(_, mch) = multi else {
                        return None;
                    };
                    let op = op_of(egraph, mch[0])?;
                    let tys = types(egraph, &mch[1..])?;
                    let refs: Vec<&TensorType> = tys.iter().collect();
                    let out = tir_ir::shape::infer(op, &refs).ok()?;
                    Some(Meta {
                        ty: out.get(*k)?.clone(),
                        weight: false,
                    })
                }
                Attrs::Op(op) => {
                    if op.num_results() != 1 {
                        return None;
                    }
                    let tys = types(egraph, operands)?;
                    let refs: Vec<&TensorType> = tys.iter().collect();
                    let out = tir_ir::shape::infer(op, &refs).ok()?;
                    let weight = name.as_str() == "slice"
                        && egraph[operands[0]].data.as_ref().is_some_and(|m| m.weight);
                    Some(Meta {
                        ty: out.into_iter().next()?,
                        weight,
                    })
                }
            }
        }
    }
}

fn types(egraph: &EGraph, ids: &[Id]) -> Option<Vec<TensorType>> {
    ids.iter()
        .map(|&i| egraph[i].data.as_ref().map(|m| m.ty.clone()))
        .collect()
}

impl egg::Analysis<TirNode> for TirAnalysis {
    type Data = Option<Meta>;

    fn make(egraph: &EGraph, enode: &TirNode) -> Self::Data {
        infer(egraph, enode)
    }

    fn merge(&mut self, to: &mut Self::Data, from: Self::Data) -> egg::DidMerge {
        // Equal classes have equal types (every rule preserves them); a class learns a type
        // only when one side had none (a multi-result op's class never does).
        if to.is_none() && from.is_some() {
            *to = from;
            egg::DidMerge(true, false)
        } else {
            egg::DidMerge(false, to.is_some() && from.is_none())
        }
    }
}
