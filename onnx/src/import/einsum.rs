//! Einsum on f32 as a composition of IR ops: `reduce_sum` for the labels one operand alone
//! carries and the output drops, then a left fold over the operands, each step one batched
//! `matmul` (operands transposed to `[batch, rows, contracted]` and `[batch, contracted,
//! columns]` and reshaped to rank 3, or rank 2 without batch labels) or, when the step
//! contracts nothing, one broadcasting `mul`; finally a `transpose` to the output's label
//! order. Every label a later operand or the output needs survives each step; every other is
//! contracted by the matmul that first meets it in two operands.
//!
//! Ellipses (`...`) stand for the same dims in every operand that has them (aligned on the
//! right, equal extents: broadcasting a 1 against a larger extent is refused). A label
//! repeated within one operand (a diagonal, `ii->i`) is refused.

use super::attrs::Attrs;
use super::{Importer, Val, R};
use crate::error::{AttrError, NodeError, Oversized};
use crate::proto::NodeProto;
use tir_ir::{BinaryOp, DType, Op, ReduceKind, Value};

fn refuse(problem: impl Into<String>) -> NodeError {
    NodeError::Composite {
        op: "Einsum",
        problem: problem.into(),
    }
}

/// One operand's (or the output's) labels as written: letters, and where `...` stood.
struct Term {
    labels: Vec<char>,
    /// The position of `...` among `labels`, if any.
    ellipsis: Option<usize>,
}

fn parse_term(s: &str) -> R<Term> {
    let mut labels = Vec::new();
    let mut ellipsis = None;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("...") {
            if ellipsis.is_some() {
                return Err(refuse(format!("the term `{s}` has two ellipses")));
            }
            ellipsis = Some(labels.len());
            rest = r;
        } else if c.is_ascii_alphabetic() {
            labels.push(c);
            rest = &rest[1..];
        } else {
            return Err(refuse(format!(
                "the term `{s}` holds `{}`; labels are letters (and one `...`)",
                c.escape_debug()
            )));
        }
    }
    Ok(Term { labels, ellipsis })
}

/// The equation's input terms and its output term (`None` in implicit mode).
fn parse_equation(eq: &str) -> R<(Vec<Term>, Option<Term>)> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let inputs = lhs.split(',').map(parse_term).collect::<R<Vec<_>>>()?;
    let output = rhs.map(parse_term).transpose()?;
    Ok((inputs, output))
}

/// The labels of the dims an ellipsis stands for: `'0'`, `'1'`, ... (never letters), the last
/// `count` of the `total` the widest ellipsis has.
fn ellipsis_labels(total: usize, count: usize) -> Vec<char> {
    (total - count..total)
        .map(|i| char::from_digit(i as u32 % 10, 10).unwrap_or('0'))
        .collect()
}

impl Importer {
    fn einsum_step(&mut self, op: Op, operands: &[Value]) -> R<Value> {
        let name = self.em.fresh();
        let v = self.em.push(op, operands, vec![name])?[0];
        let ty = self.em.ty(v)?;
        Oversized::check(&ty.shape, ty.dtype).map_err(|problem| NodeError::Oversized {
            output: "an Einsum intermediate".into(),
            problem,
        })?;
        Ok(v)
    }

    /// `x` (labelled `have`) transposed to the label order `want` (a permutation of `have`).
    fn einsum_permute(&mut self, x: Value, have: &[char], want: &[char]) -> R<Value> {
        if have == want {
            return Ok(x);
        }
        let perm = want
            .iter()
            .map(|c| have.iter().position(|h| h == c).map(|p| p as u64))
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| refuse("internal: a permutation of missing labels"))?;
        self.einsum_step(Op::Transpose { perm }, &[x])
    }

    fn einsum_reshape(&mut self, x: Value, shape: Vec<u64>) -> R<Value> {
        if self.em.ty(x)?.shape == shape {
            return Ok(x);
        }
        let shape = shape.iter().map(|&d| d as i64).collect();
        self.einsum_step(Op::reshape(shape), &[x])
    }

    /// `x` with the labels outside `keep` summed away; returns the remaining labels in order.
    fn einsum_sum_out(
        &mut self,
        x: Value,
        labels: Vec<char>,
        keep: &dyn Fn(char) -> bool,
    ) -> R<(Value, Vec<char>)> {
        let axes: Vec<i64> = (0..labels.len())
            .filter(|&i| !keep(labels[i]))
            .map(|i| i as i64)
            .collect();
        if axes.is_empty() {
            return Ok((x, labels));
        }
        let rest: Vec<char> = labels.into_iter().filter(|&c| keep(c)).collect();
        let y = self.einsum_step(
            Op::Reduce {
                kind: ReduceKind::Sum,
                axes,
                keepdims: false,
            },
            &[x],
        )?;
        Ok((y, rest))
    }

    pub(super) fn einsum(&mut self, node: &NodeProto, a: &Attrs) -> R<()> {
        let eq = a
            .string("equation")?
            .ok_or(AttrError::Missing { name: "equation" })?;
        let (terms, out_term) = parse_equation(&eq)?;
        if terms.len() != node.input.len() {
            return Err(refuse(format!(
                "the equation has {} input term(s) for {} input(s)",
                terms.len(),
                node.input.len()
            )));
        }
        // Operands, their shapes, and each one's labels with its ellipsis spelled out.
        let mut ops = Vec::with_capacity(terms.len());
        let mut shapes = Vec::with_capacity(terms.len());
        for i in 0..terms.len() {
            let x = self.req_in(node, i)?;
            let d = self.dtype_of(&x);
            if d != DType::F32 {
                return Err(refuse(format!(
                    "operand {i} has element type {d}; Einsum is supported on f32 only"
                )));
            }
            shapes.push(self.shape_of(&x)?);
            ops.push(self.in_value(node, i)?);
        }
        let mut widest = 0;
        for (t, s) in terms.iter().zip(&shapes) {
            let named = t.labels.len();
            match t.ellipsis {
                None if named != s.len() => {
                    return Err(refuse(format!(
                        "the term `{}` has {named} label(s) for an operand of rank {}",
                        t.labels.iter().collect::<String>(),
                        s.len()
                    )))
                }
                Some(_) if named > s.len() => {
                    return Err(refuse(format!(
                        "the term `{}` has more labels than its operand's rank {}",
                        t.labels.iter().collect::<String>(),
                        s.len()
                    )))
                }
                Some(_) => widest = widest.max(s.len() - named),
                None => {}
            }
        }
        if widest > 10 {
            return Err(refuse("an ellipsis of more than 10 dims is not supported"));
        }
        let spell = |t: &Term, rank: usize| -> Vec<char> {
            match t.ellipsis {
                None => t.labels.clone(),
                Some(at) => {
                    let mut l = t.labels[..at].to_vec();
                    l.extend(ellipsis_labels(widest, rank - t.labels.len()));
                    l.extend(&t.labels[at..]);
                    l
                }
            }
        };
        let labels: Vec<Vec<char>> = terms
            .iter()
            .zip(&shapes)
            .map(|(t, s)| spell(t, s.len()))
            .collect();
        // Every label's extent, equal wherever it appears.
        let mut extent: Vec<(char, u64)> = Vec::new();
        for (l, s) in labels.iter().zip(&shapes) {
            for (i, (&c, &d)) in l.iter().zip(s).enumerate() {
                if l[..i].contains(&c) {
                    return Err(refuse(format!(
                        "the label `{c}` repeats within one operand (a diagonal), which is not supported"
                    )));
                }
                match extent.iter().find(|(e, _)| *e == c) {
                    Some(&(_, have)) if have != d => {
                        let what = if c.is_ascii_digit() {
                            "the dims of `...`".to_string()
                        } else {
                            format!("the label `{c}`")
                        };
                        return Err(refuse(format!(
                            "{what} stand(s) for extents {have} and {d} (broadcasting is not supported)"
                        )));
                    }
                    Some(_) => {}
                    None => extent.push((c, d)),
                }
            }
        }
        let output: Vec<char> = match &out_term {
            Some(t) => {
                let mut l = t.labels.clone();
                // An explicit output without `...` sums the ellipsis dims away (NumPy).
                if let Some(at) = t.ellipsis {
                    l.splice(at..at, ellipsis_labels(widest, widest));
                }
                for (i, &c) in l.iter().enumerate() {
                    if l[..i].contains(&c) {
                        return Err(refuse(format!("the output repeats the label `{c}`")));
                    }
                    if !labels.iter().any(|x| x.contains(&c)) {
                        return Err(refuse(format!(
                            "the output label `{c}` is in no input term"
                        )));
                    }
                }
                l
            }
            // Implicit: the ellipsis dims, then the letters used once, alphabetically.
            None => {
                let mut once: Vec<char> = extent
                    .iter()
                    .map(|&(c, _)| c)
                    .filter(|c| c.is_ascii_alphabetic())
                    .filter(|&c| labels.iter().flatten().filter(|&&x| x == c).count() == 1)
                    .collect();
                once.sort_unstable();
                let mut l = ellipsis_labels(widest, widest);
                l.extend(once);
                l
            }
        };
        let size = |c: char| extent.iter().find(|(e, _)| *e == c).map_or(1, |e| e.1);

        // Labels one operand alone carries and the output drops: summed first.
        let mut cur: Vec<(Value, Vec<char>)> = Vec::with_capacity(ops.len());
        for (i, (&x, l)) in ops.iter().zip(&labels).enumerate() {
            let elsewhere = |c: char| {
                output.contains(&c)
                    || labels
                        .iter()
                        .enumerate()
                        .any(|(j, o)| j != i && o.contains(&c))
            };
            cur.push(self.einsum_sum_out(x, l.clone(), &elsewhere)?);
        }
        let mut rest = cur.into_iter();
        let (mut acc, mut acc_l) = rest
            .next()
            .ok_or_else(|| refuse("the equation has no input term"))?;
        let later: Vec<Vec<char>> = labels.iter().skip(1).cloned().collect();
        for (step, (b, b_l)) in rest.enumerate() {
            // Labels needed after this step: the output's and those of later operands.
            let keep =
                |c: char| output.contains(&c) || later[step + 1..].iter().any(|l| l.contains(&c));
            let batch: Vec<char> = acc_l
                .iter()
                .copied()
                .filter(|c| b_l.contains(c) && keep(*c))
                .collect();
            let contracted: Vec<char> = acc_l
                .iter()
                .copied()
                .filter(|c| b_l.contains(c) && !keep(*c))
                .collect();
            let a_only: Vec<char> = acc_l.iter().copied().filter(|c| !b_l.contains(c)).collect();
            let b_only: Vec<char> = b_l.iter().copied().filter(|c| !acc_l.contains(c)).collect();
            let prod = |ls: &[char]| ls.iter().map(|&c| size(c)).product::<u64>();
            let (bt, m, k, n) = (
                prod(&batch),
                prod(&a_only),
                prod(&contracted),
                prod(&b_only),
            );
            let dims = |ls: &[char]| ls.iter().map(|&c| size(c)).collect::<Vec<u64>>();
            let result_l: Vec<char> = [batch.clone(), a_only.clone(), b_only.clone()].concat();
            let y = if contracted.is_empty() {
                // No sum: a broadcasting product, [batch, a_only, 1...] · [batch, 1..., b_only].
                let xa =
                    self.einsum_permute(acc, &acc_l, &[batch.clone(), a_only.clone()].concat())?;
                let xb = self.einsum_permute(b, &b_l, &[batch.clone(), b_only.clone()].concat())?;
                let mut sa = dims(&batch);
                sa.extend(dims(&a_only));
                sa.extend(vec![1; b_only.len()]);
                let mut sb = dims(&batch);
                sb.extend(vec![1; a_only.len()]);
                sb.extend(dims(&b_only));
                let xa = self.einsum_reshape(xa, sa)?;
                let xb = self.einsum_reshape(xb, sb)?;
                self.einsum_step(
                    Op::Binary {
                        op: BinaryOp::Mul,
                        activation: None,
                    },
                    &[xa, xb],
                )?
            } else {
                let xa = self.einsum_permute(
                    acc,
                    &acc_l,
                    &[batch.clone(), a_only.clone(), contracted.clone()].concat(),
                )?;
                let xb = self.einsum_permute(
                    b,
                    &b_l,
                    &[batch.clone(), contracted.clone(), b_only.clone()].concat(),
                )?;
                let (sa, sb) = if batch.is_empty() {
                    (vec![m, k], vec![k, n])
                } else {
                    (vec![bt, m, k], vec![bt, k, n])
                };
                let xa = self.einsum_reshape(xa, sa)?;
                let xb = self.einsum_reshape(xb, sb)?;
                let p = self.einsum_step(Op::MatMul { activation: None }, &[xa, xb])?;
                self.einsum_reshape(p, dims(&result_l))?
            };
            acc = y;
            acc_l = result_l;
        }
        // What the last operand left that the output drops, then the output's order.
        let (acc, acc_l) = self.einsum_sum_out(acc, acc_l, &|c| output.contains(&c))?;
        let y = self.einsum_permute(acc, &acc_l, &output)?;
        if let Some(out) = node.output.first() {
            self.env.insert(out.clone(), Val::Ir(y));
        }
        Ok(())
    }
}
