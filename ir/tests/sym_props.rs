//! Symbolic dimension expressions: simplification never changes a value. For random
//! expression trees and random bindings, the canonical form evaluates to what the tree
//! evaluates to directly; printing and parsing back gives the same canonical form; and equal
//! canonical forms (what the verifier relies on) really are equal under every binding tried.

use proptest::prelude::*;
use tir_ir::DimExpr;

const SYMS: [&str; 3] = ["h", "w", "x.d0"];

/// An expression tree, evaluated without any simplification.
#[derive(Clone, Debug)]
enum Tree {
    Const(i64),
    Sym(usize),
    Add(Box<Tree>, Box<Tree>),
    Sub(Box<Tree>, Box<Tree>),
    Mul(Box<Tree>, Box<Tree>),
    FloorDiv(Box<Tree>, Box<Tree>),
    CeilDiv(Box<Tree>, Box<Tree>),
    Max(Box<Tree>, Box<Tree>),
    Min(Box<Tree>, Box<Tree>),
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![
        (-6i64..12).prop_map(Tree::Const),
        (0usize..3).prop_map(Tree::Sym)
    ];
    leaf.prop_recursive(5, 24, 2, |inner| {
        let pair = (inner.clone(), inner);
        prop_oneof![
            pair.clone()
                .prop_map(|(a, b)| Tree::Add(Box::new(a), Box::new(b))),
            pair.clone()
                .prop_map(|(a, b)| Tree::Sub(Box::new(a), Box::new(b))),
            pair.clone()
                .prop_map(|(a, b)| Tree::Mul(Box::new(a), Box::new(b))),
            pair.clone()
                .prop_map(|(a, b)| Tree::FloorDiv(Box::new(a), Box::new(b))),
            pair.clone()
                .prop_map(|(a, b)| Tree::CeilDiv(Box::new(a), Box::new(b))),
            pair.clone()
                .prop_map(|(a, b)| Tree::Max(Box::new(a), Box::new(b))),
            pair.prop_map(|(a, b)| Tree::Min(Box::new(a), Box::new(b))),
        ]
    })
}

fn floor_div(a: i128, b: i128) -> Option<i128> {
    if b == 0 {
        return None;
    }
    let q = a / b;
    Some(if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

fn ceil_div(a: i128, b: i128) -> Option<i128> {
    if b == 0 {
        return None;
    }
    let q = a / b;
    Some(if a % b != 0 && ((a < 0) == (b < 0)) {
        q + 1
    } else {
        q
    })
}

/// The tree's value; `None` on a division by zero or an overflow.
fn eval(t: &Tree, env: &[u64; 3]) -> Option<i128> {
    Some(match t {
        Tree::Const(c) => i128::from(*c),
        Tree::Sym(i) => i128::from(env[*i]),
        Tree::Add(a, b) => eval(a, env)?.checked_add(eval(b, env)?)?,
        Tree::Sub(a, b) => eval(a, env)?.checked_sub(eval(b, env)?)?,
        Tree::Mul(a, b) => eval(a, env)?.checked_mul(eval(b, env)?)?,
        Tree::FloorDiv(a, b) => floor_div(eval(a, env)?, eval(b, env)?)?,
        Tree::CeilDiv(a, b) => ceil_div(eval(a, env)?, eval(b, env)?)?,
        Tree::Max(a, b) => eval(a, env)?.max(eval(b, env)?),
        Tree::Min(a, b) => eval(a, env)?.min(eval(b, env)?),
    })
}

/// The tree through the simplifying constructors; `None` for a division by the constant 0.
fn build(t: &Tree) -> Option<DimExpr> {
    Some(match t {
        Tree::Const(c) => DimExpr::constant(i128::from(*c)),
        Tree::Sym(i) => DimExpr::sym(SYMS[*i]),
        Tree::Add(a, b) => build(a)?.checked_add(&build(b)?)?,
        Tree::Sub(a, b) => build(a)?.checked_sub(&build(b)?)?,
        Tree::Mul(a, b) => build(a)?.checked_mul(&build(b)?)?,
        Tree::FloorDiv(a, b) => build(a)?.floor_div(&build(b)?)?,
        Tree::CeilDiv(a, b) => build(a)?.ceil_div(&build(b)?)?,
        Tree::Max(a, b) => build(a)?.maximum(&build(b)?),
        Tree::Min(a, b) => build(a)?.minimum(&build(b)?),
    })
}

fn env_fn(env: &[u64; 3]) -> impl Fn(&str) -> Option<u64> + '_ {
    move |s| SYMS.iter().position(|n| *n == s).map(|i| env[i])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn simplification_keeps_the_value(t in tree(), env in prop::array::uniform3(0u64..20)) {
        let Some(e) = build(&t) else { return Ok(()) };
        // Where the tree divides by zero the simplified form may have cancelled the division
        // (`0 * (1 / h)` is 0): only defined values are compared.
        if let Some(want) = eval(&t, &env) {
            let got = e.eval(&env_fn(&env));
            prop_assert_eq!(Ok(want), got.clone(), "{:?} simplified to {}", t, e);
        }
    }

    #[test]
    fn printing_parses_back(t in tree()) {
        let Some(e) = build(&t) else { return Ok(()) };
        let text = e.to_string();
        let back = DimExpr::parse(&text);
        prop_assert_eq!(back.as_ref(), Ok(&e), "{} printed as {}", format!("{t:?}"), text);
    }

    #[test]
    fn proven_order_holds(a in tree(), b in tree(), env in prop::array::uniform3(0u64..20)) {
        let (Some(x), Some(y)) = (build(&a), build(&b)) else { return Ok(()) };
        let (Ok(vx), Ok(vy)) = (x.eval(&env_fn(&env)), y.eval(&env_fn(&env))) else { return Ok(()) };
        if let Some(ord) = x.compare(&y) {
            prop_assert_eq!(vx.cmp(&vy), ord, "{} vs {}", x, y);
        }
        if let Some(ge) = x.provably_ge(&y) {
            prop_assert_eq!(vx >= vy, ge, "{} >= {}", x, y);
        }
    }

    #[test]
    fn monotone_means_non_decreasing(t in tree(), env in prop::array::uniform3(0u64..20), which in 0usize..3) {
        let Some(e) = build(&t) else { return Ok(()) };
        if !e.monotone() { return Ok(()) }
        let mut bigger = env;
        bigger[which] += 1;
        let (a, b) = (e.eval(&env_fn(&env)), e.eval(&env_fn(&bigger)));
        if let (Ok(a), Ok(b)) = (a, b) {
            prop_assert!(a <= b, "{} is {} at {:?} but {} at {:?}", e, a, env, b, bigger);
        }
    }
}
