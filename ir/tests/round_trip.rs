//! `parse(print(m))` gives back the same module, and `print` is a fixed point, for random
//! modules built in code.

use proptest::prelude::*;
use tir_ir::builder::Builder;
use tir_ir::op::{Conv2d, Pool2d};
use tir_ir::{Activation, BinaryOp, Module, Op, TensorType, UnaryOp, Value};

/// One step of a random network over NCHW tensors of 4 channels.
#[derive(Clone, Debug)]
enum Step {
    Unary(u8),
    Binary(u8, usize, Option<u8>),
    Conv {
        k: u64,
        stride: u64,
        dw: bool,
        act: Option<u8>,
    },
    Pool(bool),
    Concat(usize),
    Split,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..UnaryOp::ALL.len() as u8).prop_map(Step::Unary),
        (
            0u8..BinaryOp::ALL.len() as u8,
            0usize..8,
            proptest::option::of(0u8..6)
        )
            .prop_map(|(o, i, a)| Step::Binary(o, i, a)),
        (
            1u64..4,
            1u64..3,
            any::<bool>(),
            proptest::option::of(0u8..6)
        )
            .prop_map(|(k, stride, dw, act)| Step::Conv { k, stride, dw, act }),
        any::<bool>().prop_map(Step::Pool),
        (0usize..8).prop_map(Step::Concat),
        Just(Step::Split),
    ]
}

fn build(steps: &[Step]) -> Module {
    let mut b = Builder::new("random");
    b.doc("random network").doc("").doc("second line");
    let x = b.input("x", TensorType::f32(vec![1, 4, 9, 9]));
    let mut vals: Vec<Value> = vec![x];
    let unary = UnaryOp::ALL;
    let binary = BinaryOp::ALL;
    let mut nw = 0;
    for s in steps {
        let cur = *vals.last().expect("non-empty");
        let same_shape = |b: &Builder, i: usize| -> Value {
            let cands: Vec<Value> = vals
                .iter()
                .copied()
                .filter(|&v| b.ty(v) == b.ty(cur))
                .collect();
            cands[i % cands.len()]
        };
        let next = match s {
            Step::Unary(u) => b.op(Op::Unary(unary[*u as usize]), &[cur]),
            Step::Binary(o, i, a) => {
                let other = same_shape(&b, *i);
                let activation = a.map(|a| Activation::ALL[a as usize]);
                b.op(
                    Op::Binary {
                        op: binary[*o as usize],
                        activation,
                    },
                    &[cur, other],
                )
            }
            Step::Conv { k, stride, dw, act } => {
                let c = b.ty(cur).shape[1];
                let (m, cin, groups) = if *dw { (c, 1, c) } else { (4, c, 1) };
                nw += 1;
                let w = b.weight(format!("w{nw}"), TensorType::f32(vec![m, cin, *k, *k]));
                let p = (k - 1) / 2;
                let conv = Conv2d {
                    strides: [*stride, *stride],
                    pads: [p, p, k - 1 - p, k - 1 - p],
                    groups,
                    activation: act.map(|a| Activation::ALL[a as usize]),
                    ..Conv2d::default()
                };
                b.op(Op::Conv2d(conv), &[cur, w])
            }
            Step::Pool(max) => {
                let p = Pool2d {
                    kernel: [3, 3],
                    strides: [1, 1],
                    pads: [1, 1, 1, 1],
                    ceil_mode: false,
                    count_include_pad: false,
                };
                b.op(if *max { Op::MaxPool(p) } else { Op::AvgPool(p) }, &[cur])
            }
            Step::Concat(i) => {
                let other = same_shape(&b, *i);
                b.op(Op::Concat { axis: 1 }, &[cur, other])
            }
            Step::Split => {
                let c = b.ty(cur).shape[1];
                if c < 2 {
                    continue;
                }
                let parts = b
                    .op_multi(
                        Op::Split {
                            axis: 1,
                            sizes: vec![1, c - 1],
                        },
                        &[cur],
                    )
                    .expect("valid split");
                Ok(parts[1])
            }
        };
        vals.push(next.expect("generated ops are well typed"));
    }
    let out = *vals.last().expect("non-empty");
    b.finish(&[out])
}

/// Structural view of a module, without source spans.
fn shape_of(m: &Module) -> Vec<String> {
    let mut out = vec![m.name.clone(), m.doc.join("\n")];
    for f in &m.funcs {
        out.push(format!("func {} {:?}", f.name, f.result_types));
        for &p in &f.params {
            out.push(format!("param {} {:?}", f.values[p].name, f.values[p].ty));
        }
        for (_, op) in f.ops_in_order() {
            let operands: Vec<String> = op
                .operands
                .iter()
                .map(|&v| f.values[v].name.clone())
                .collect();
            let results: Vec<String> = op
                .results
                .iter()
                .map(|&v| format!("{}:{:?}", f.values[v].name, f.values[v].ty))
                .collect();
            out.push(format!("{:?} {:?} -> {:?}", op.op, operands, results));
        }
        out.push(format!(
            "return {:?}",
            f.returns
                .iter()
                .map(|&v| f.values[v].name.clone())
                .collect::<Vec<_>>()
        ));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn print_parse_round_trip(steps in proptest::collection::vec(step(), 1..25)) {
        let built = build(&steps);
        let text = tir_ir::print(&built);
        let parsed = tir_ir::parse_and_verify(&text).map_err(|d| TestCaseError::fail(format!("{d:?}\n{text}")))?;
        prop_assert_eq!(shape_of(&parsed), shape_of(&built));
        prop_assert_eq!(tir_ir::print(&parsed), text);
    }
}

#[test]
fn floats_print_back_bit_for_bit() {
    for v in [
        0.0,
        -0.0,
        1.0,
        6.0,
        0.1,
        1e-5,
        1e300,
        -2.5e-300,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        let text = format!(
            "module @m {{\n  func @main(%x: tensor<2xf32>) {{\n    %0 = pad(%x) {{pads = [1, 1], value = {}}}\n    return %0\n  }}\n}}\n",
            tir_ir::attr::fmt_float(v)
        );
        let m = tir_ir::parse_and_verify(&text).expect("parses");
        let f = m.entry().expect("main");
        let Op::Pad { value, .. } = &f.ops[f.layout[0]].op else {
            panic!("pad expected")
        };
        assert_eq!(
            value.to_bits(),
            v.to_bits(),
            "{v} printed as {}",
            tir_ir::attr::fmt_float(v)
        );
    }
}
