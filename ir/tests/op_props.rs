//! The op property table (`Op::props`), pinned for every op the text accepts: a change to
//! what any op is (operator, weight or buffer op; view; element-wise) shows as a snapshot diff.

use tir_ir::attr::{Attr, AttrValue};
use tir_ir::op::OP_NAMES;
use tir_ir::{Op, Span};

/// The smallest attribute dictionary `name` accepts (its required attributes).
fn required(name: &str) -> Vec<(&'static str, AttrValue)> {
    let ints = |v: &[i64]| AttrValue::Array(v.iter().map(|&i| AttrValue::Int(i)).collect());
    match name {
        "const" => vec![("name", AttrValue::Str("w".into()))],
        "max_pool" | "avg_pool" => vec![("kernel", ints(&[2, 2]))],
        "concat" => vec![("axis", AttrValue::Int(1))],
        "split" => vec![("axis", AttrValue::Int(1)), ("sizes", ints(&[1, 1]))],
        "slice" => vec![("starts", ints(&[0])), ("ends", ints(&[1]))],
        "reshape" => vec![("shape", ints(&[-1]))],
        "squeeze" | "unsqueeze" => vec![("axes", ints(&[0]))],
        n if n.starts_with("reduce_") => vec![("axes", ints(&[0]))],
        "transpose" => vec![("perm", ints(&[1, 0]))],
        "pad" => vec![("pads", ints(&[0, 0]))],
        "resize" => vec![("size", ints(&[2, 2]))],
        "alloc_slab" => vec![("size", AttrValue::Int(64))],
        "cast" => vec![("to", AttrValue::Word("i64".into()))],
        "alloc_tensor" => vec![("offset", AttrValue::Int(0))],
        "cumsum" => vec![("axis", AttrValue::Int(0))],
        "top_k" => vec![("k", AttrValue::Int(1))],
        _ => vec![],
    }
}

fn op(name: &str) -> Op {
    let attrs: Vec<Attr> = required(name)
        .into_iter()
        .map(|(n, value)| Attr {
            name: n.into(),
            value,
            name_span: Span::NONE,
            value_span: Span::NONE,
        })
        .collect();
    match Op::from_parts(name, &attrs, Span::NONE) {
        Ok(Some(op)) => op,
        other => panic!("`{name}` with its required attributes: {other:?}"),
    }
}

#[test]
fn every_op_has_its_pinned_properties() {
    let mut table = String::from("op               role      alias    declared type\n");
    for &name in OP_NAMES {
        let op = op(name);
        assert_eq!(op.name(), name);
        let p = op.props();
        table += &format!(
            "{name:<16} {:<9} {:<8} {}\n",
            format!("{:?}", p.role),
            format!("{:?}", p.alias),
            p.declared_type
        );
    }
    insta::assert_snapshot!("table", table);
}
