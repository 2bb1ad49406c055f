//! Between the IR and the e-graph: a function enters as one e-class per value; a program
//! leaves by a choice of one e-node per e-class, reached from the returned values.

use super::lang::{attrs_of, op_of, Attrs, EGraph, TirAnalysis, TirNode};
use super::RewriteError;
use egg::{Id, Symbol};
use std::collections::{HashMap, HashSet};
use tir_ir::op::Slice;
use tir_ir::{EntityRef, Function, Op, TensorType, Value, ValueDef};

/// A function in an e-graph.
pub struct Entered {
    pub egraph: EGraph,
    /// The class of each returned value.
    pub roots: Vec<Id>,
    /// The e-node each original operator result entered as (before any rewrite).
    pub original: Vec<(Id, TirNode)>,
    /// The original value name of each class, for naming the program that leaves.
    pub names: HashMap<Id, String>,
}

/// Adds a verified, not bufferized function to a fresh e-graph.
pub fn enter(func: &Function) -> Result<Entered, RewriteError> {
    let mut analysis = TirAnalysis::default();
    for &p in &func.params {
        let ty = ty(func, p)?;
        analysis.leaf(&func.values[p].name, ty, false);
    }
    for (_, data) in func.ops_in_order() {
        if let Op::Const { .. } = data.op {
            let v = data.results[0];
            analysis.leaf(&func.values[v].name, ty(func, v)?, true);
        }
    }
    let mut egraph = EGraph::new(analysis);
    let mut class: Vec<Option<Id>> = vec![None; func.values.len()];
    for &p in &func.params {
        class[p.index()] = Some(egraph.add(TirNode::Leaf(Symbol::from(&func.values[p].name))));
    }
    let mut original = Vec::new();
    let mut names = HashMap::new();
    for (_, data) in func.ops_in_order() {
        if data.op.is_buffer_op() {
            return Err(RewriteError::Bufferized(func.name.clone()));
        }
        if let Op::Const { .. } = data.op {
            let v = data.results[0];
            let id = egraph.add(TirNode::Leaf(Symbol::from(&func.values[v].name)));
            class[v.index()] = Some(id);
            continue;
        }
        let operands = data
            .operands
            .iter()
            .map(|&x| {
                class[x.index()].ok_or_else(|| RewriteError::NotTopological(func.value_name(x)))
            })
            .collect::<Result<Vec<Id>, _>>()?;
        let name = Symbol::from(data.op.name());
        let attr = add_attrs(&mut egraph, Attrs::Op(data.op.clone()));
        let node = match (&data.op, operands.as_slice()) {
            // Left-nested binary concats; the way back flattens them.
            (Op::Concat { .. }, [first, rest @ ..]) if !rest.is_empty() => {
                let mut acc = *first;
                let mut node = None;
                for (i, &x) in rest.iter().enumerate() {
                    let n = TirNode::Op(name, vec![attr, acc, x]);
                    if i + 1 < rest.len() {
                        acc = egraph.add(n.clone());
                        original.push((acc, n));
                    } else {
                        node = Some(n);
                    }
                }
                node.expect("rest is not empty")
            }
            _ => {
                let mut ch = vec![attr];
                ch.extend(&operands);
                TirNode::Op(name, ch)
            }
        };
        let id = egraph.add(node.clone());
        if data.results.len() == 1 {
            let v = data.results[0];
            class[v.index()] = Some(id);
            original.push((id, node));
            names.insert(id, func.values[v].name.clone());
        } else {
            for (k, &v) in data.results.iter().enumerate() {
                let a = add_attrs(&mut egraph, Attrs::Result(k));
                let n = TirNode::Op(Symbol::from(super::lang::RESULT), vec![a, id]);
                let r = egraph.add(n.clone());
                class[v.index()] = Some(r);
                original.push((r, n));
                names.insert(r, func.values[v].name.clone());
            }
        }
    }
    let roots = func
        .returns
        .iter()
        .map(|&v| class[v.index()].ok_or_else(|| RewriteError::NotTopological(func.value_name(v))))
        .collect::<Result<Vec<Id>, _>>()?;
    egraph.rebuild();
    Ok(Entered {
        egraph,
        roots,
        original,
        names,
    })
}

fn ty(func: &Function, v: Value) -> Result<TensorType, RewriteError> {
    func.ty(v)
        .cloned()
        .ok_or_else(|| RewriteError::Untyped(func.value_name(v)))
}

fn add_attrs(eg: &mut EGraph, a: Attrs) -> Id {
    let i = eg.analysis.intern(a);
    eg.add(TirNode::Attr(i))
}

/// A source const and the `(axis, start, end)` slices taken of it, in order.
type SlicedWeight = (String, Vec<(usize, u64, u64)>);

/// A const made by slicing another along axes, which the rewritten program names; its data
/// is `source[ranges]` (the weights of the original program sliced, never new numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedWeight {
    pub name: String,
    /// The `name` of the original const (what its weights are bound by).
    pub source: String,
    /// `(axis, start, end)`, applied in order.
    pub slices: Vec<(usize, u64, u64)>,
}

/// Builds the program a choice of e-nodes of `eg` (the e-graph `entered` grew into) describes: parameters and consts as in `func`, then
/// the chosen e-node of each class reached from the roots, operands first. Binary concats on
/// one axis flatten back into one n-ary concat; a slice of a weight becomes a new const.
pub fn leave(
    func: &Function,
    eg: &EGraph,
    entered: &Entered,
    choice: &dyn Fn(Id) -> TirNode,
) -> Result<(Function, Vec<DerivedWeight>), RewriteError> {
    let mut out = Builder {
        src: func,
        eg,
        names: &entered.names,
        choice,
        func: Function::new(func.name.clone()),
        value_of: HashMap::new(),
        leaf_of: HashMap::new(),
        weight_of: HashMap::new(),
        derived: Vec::new(),
        used: HashSet::new(),
        taken: HashSet::new(),
        src_names: func
            .values
            .iter()
            .map(|(v, d)| (d.name.clone(), v))
            .collect(),
        on_stack: HashSet::new(),
        fresh: 0,
    };
    for &p in &func.params {
        let d = &func.values[p];
        let v = out.func.add_param(d.name.clone(), ty(func, p)?);
        out.used.insert(d.name.clone());
        out.taken.insert(d.name.clone());
        out.leaf_of.insert(Symbol::from(&d.name), v);
    }
    for (_, data) in func.ops_in_order() {
        for &r in &data.results {
            out.used.insert(func.values[r].name.clone());
        }
    }
    let mut returns = Vec::new();
    for &r in &entered.roots {
        returns.push(out.value(r)?);
    }
    out.func.result_types = func.result_types.clone();
    out.func.returns = returns;
    Ok((out.func, out.derived))
}

struct Builder<'a> {
    src: &'a Function,
    eg: &'a EGraph,
    names: &'a HashMap<Id, String>,
    choice: &'a dyn Fn(Id) -> TirNode,
    func: Function,
    value_of: HashMap<Id, Value>,
    leaf_of: HashMap<Symbol, Value>,
    /// Weight slices already made, by (source const, slices).
    weight_of: HashMap<SlicedWeight, Value>,
    derived: Vec<DerivedWeight>,
    /// Every name of the original program and every name made since: fresh names avoid them.
    used: HashSet<String>,
    /// Names the new program has defined.
    taken: HashSet<String>,
    src_names: HashMap<String, Value>,
    on_stack: HashSet<Id>,
    fresh: usize,
}

impl Builder<'_> {
    fn value(&mut self, id: Id) -> Result<Value, RewriteError> {
        let id = self.eg.find(id);
        if let Some(&v) = self.value_of.get(&id) {
            return Ok(v);
        }
        if !self.on_stack.insert(id) {
            return Err(RewriteError::Cyclic);
        }
        let node = (self.choice)(id);
        let v = match &node {
            TirNode::Attr(_) => return Err(RewriteError::Cyclic),
            TirNode::Leaf(s) => self.leaf(*s)?,
            TirNode::Op(name, ch) => {
                if let Some((source, slices)) = self.weight_slice(&node) {
                    self.weight(source, slices)?
                } else {
                    let op = match attrs_of(self.eg, ch[0]) {
                        Some(Attrs::Op(op)) => op.clone(),
                        Some(Attrs::Result(k)) => {
                            let k = *k;
                            let multi = self.value(ch[1])?;
                            return self.finish(id, self.result_of(multi, k));
                        }
                        None => return Err(RewriteError::Cyclic),
                    };
                    let operands = if name.as_str() == "concat" {
                        let mut pieces = Vec::new();
                        self.concat_pieces(&op, &ch[1..], &mut pieces);
                        pieces
                    } else {
                        ch[1..].to_vec()
                    };
                    let mut vals = Vec::with_capacity(operands.len());
                    for x in operands {
                        vals.push(self.value(x)?);
                    }
                    let n = op.num_results();
                    let names: Vec<String> = (0..n).map(|_| self.name_for(id)).collect();
                    let opid =
                        self.func
                            .push_op(op, vals, names.into_iter().map(|s| (s, None)).collect());
                    self.type_op(opid)?;
                    if n == 1 {
                        self.func.ops[opid].results[0]
                    } else {
                        // A multi-result op stands for its results; `result` picks one.
                        self.func.ops[opid].results[0]
                    }
                }
            }
        };
        self.finish(id, v)
    }

    fn finish(&mut self, id: Id, v: Value) -> Result<Value, RewriteError> {
        self.on_stack.remove(&id);
        self.value_of.insert(id, v);
        Ok(v)
    }

    fn result_of(&self, first: Value, k: usize) -> Value {
        match self.func.values[first].def {
            ValueDef::Result(op, _) => self.func.ops[op].results[k],
            ValueDef::Param(_) => first,
        }
    }

    /// The operands of a flattened concat: chosen concat children on the same axis, unless
    /// they have a program value already, are opened up.
    fn concat_pieces(&self, op: &Op, ch: &[Id], out: &mut Vec<Id>) {
        for &x in ch {
            let x = self.eg.find(x);
            if !self.value_of.contains_key(&x) && !self.on_stack.contains(&x) {
                if let TirNode::Op(name, gc) = (self.choice)(x) {
                    if name.as_str() == "concat" && op_of(self.eg, gc[0]) == Some(op) {
                        self.concat_pieces(op, &gc[1..], out);
                        continue;
                    }
                }
            }
            out.push(x);
        }
    }

    /// `slice(...slice(const))` with every slice a single-axis unit-step one: the source
    /// const and the slices.
    fn weight_slice(&self, node: &TirNode) -> Option<SlicedWeight> {
        let TirNode::Op(name, ch) = node else {
            return None;
        };
        if name.as_str() != "slice" {
            return None;
        }
        let Some(Op::Slice(Slice {
            starts,
            ends,
            axes,
            steps,
        })) = op_of(self.eg, ch[0])
        else {
            return None;
        };
        let ([s], [e], [a], [1]) = (
            starts.as_slice(),
            ends.as_slice(),
            axes.as_slice(),
            steps.as_slice(),
        ) else {
            return None;
        };
        let inner = (self.choice)(self.eg.find(ch[1]));
        let (source, mut slices) = match &inner {
            TirNode::Leaf(l) => {
                let v = self.src_value(*l)?;
                if !matches!(
                    self.src.producer(v).map(|p| &self.src.ops[p].op),
                    Some(Op::Const { .. })
                ) {
                    return None;
                }
                (l.as_str().to_string(), Vec::new())
            }
            _ => self.weight_slice(&inner)?,
        };
        slices.push((
            usize::try_from(*a).ok()?,
            u64::try_from(*s).ok()?,
            u64::try_from(*e).ok()?,
        ));
        Some((source, slices))
    }

    fn src_value(&self, name: Symbol) -> Option<Value> {
        self.src_names.get(name.as_str()).copied()
    }

    fn leaf(&mut self, s: Symbol) -> Result<Value, RewriteError> {
        if let Some(&v) = self.leaf_of.get(&s) {
            return Ok(v);
        }
        let src = self
            .src_value(s)
            .ok_or_else(|| RewriteError::Untyped(format!("%{s}")))?;
        let op = self.src.producer(src).map(|p| self.src.ops[p].op.clone());
        let Some(op @ Op::Const { .. }) = op else {
            return Err(RewriteError::Untyped(format!("%{s}")));
        };
        let t = ty(self.src, src)?;
        let id = self
            .func
            .push_op(op, vec![], vec![(s.as_str().to_string(), Some(t.clone()))]);
        let v = self.func.ops[id].results[0];
        self.func.values[v].ty = Some(t);
        self.leaf_of.insert(s, v);
        Ok(v)
    }

    fn weight(
        &mut self,
        source: String,
        slices: Vec<(usize, u64, u64)>,
    ) -> Result<Value, RewriteError> {
        let key = (source.clone(), slices.clone());
        if let Some(&v) = self.weight_of.get(&key) {
            return Ok(v);
        }
        let src = self
            .src_value(Symbol::from(&source))
            .ok_or_else(|| RewriteError::Untyped(format!("%{source}")))?;
        let mut t = ty(self.src, src)?;
        for &(a, s, e) in &slices {
            t.shape[a] = e - s;
        }
        let mut name = format!("{source}.part");
        for &(a, s, e) in &slices {
            name.push_str(&format!("_{a}_{s}_{e}"));
        }
        let name = self.unique(name);
        let id = self.func.push_op(
            Op::Const { name: name.clone() },
            vec![],
            vec![(name.clone(), Some(t.clone()))],
        );
        let v = self.func.ops[id].results[0];
        self.func.values[v].ty = Some(t);
        // Weights are bound by the const's `name`, which need not be its value's name.
        let source = match self.src.producer(src).map(|p| &self.src.ops[p].op) {
            Some(Op::Const { name }) => name.clone(),
            _ => source,
        };
        self.derived.push(DerivedWeight {
            name,
            source,
            slices,
        });
        self.weight_of.insert(key, v);
        Ok(v)
    }

    fn type_op(&mut self, id: tir_ir::OpId) -> Result<(), RewriteError> {
        let data = &self.func.ops[id];
        let ins: Vec<&TensorType> = data
            .operands
            .iter()
            .map(|&x| {
                self.func
                    .ty(x)
                    .expect("operands are typed as they are made")
            })
            .collect();
        let tys = tir_ir::shape::infer(&data.op, &ins)
            .map_err(|e| RewriteError::Shape(data.op.name(), e.message))?;
        for (r, t) in data.results.clone().into_iter().zip(tys) {
            self.func.values[r].ty = Some(t);
        }
        Ok(())
    }

    /// The original name of the class, or a fresh one derived from it.
    fn name_for(&mut self, id: Id) -> String {
        let base = self.names.get(&id).cloned();
        match base {
            Some(b) if !self.taken.contains(&b) => {
                self.taken.insert(b.clone());
                b
            }
            Some(b) => self.unique(format!("{b}.rw")),
            None => self.unique("rw".to_string()),
        }
    }

    fn unique(&mut self, base: String) -> String {
        loop {
            let n = format!("{base}{}", self.fresh);
            self.fresh += 1;
            if self.used.insert(n.clone()) {
                self.taken.insert(n.clone());
                return n;
            }
        }
    }
}
