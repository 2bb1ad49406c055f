//! The reduced input sizes the end-to-end tests run at (`ModelSpec::test_size`): at that size
//! every op of the architecture stays meaningful, and at every smaller size some op does not
//! (or the model cannot be built), so the tests run the smallest faithful version.
//!
//! "Meaningful": every tap of every convolution and pooling window reads real input (not only
//! padding) for at least one output position, and every global average pool averages more
//! than one position. A size below that leaves some weights or window positions unexercised.

use tir_ir::{Function, Op, Value};

/// Whether tap `t` of a window (kernel `k`, stride `s`, dilation `d`, leading pad `pad`) over
/// an input of extent `n` reads a real element for some of the `out` output positions.
fn tap_reads_input(t: u64, s: u64, d: u64, pad: u64, n: u64, out: u64) -> bool {
    (0..out).any(|o| {
        let i = (o * s + t * d) as i64 - pad as i64;
        0 <= i && i < n as i64
    })
}

fn dims(func: &Function, v: Value) -> Vec<u64> {
    func.ty(v).map(|t| t.shape.clone()).unwrap_or_default()
}

/// The first op that is not meaningful at this size, described.
fn degenerate_op(func: &Function) -> Option<String> {
    for (_, d) in func.ops_in_order() {
        let input = match d.operands.first() {
            Some(&v) => dims(func, v),
            None => continue,
        };
        let output = dims(func, d.results[0]);
        let name = || format!("{} {}", d.op.name(), func.value_name(d.results[0]));
        let window = match &d.op {
            Op::Conv2d(c) => {
                let w = dims(func, d.operands[1]);
                Some(([w[2], w[3]], c.strides, c.dilations, c.pads))
            }
            Op::MaxPool(p) | Op::AvgPool(p) => Some((p.kernel, p.strides, [1, 1], p.pads)),
            // Attention over one token weighs nothing (BERT's sequence).
            Op::Softmax { axis } => {
                let a = if *axis < 0 {
                    *axis + input.len() as i64
                } else {
                    *axis
                };
                if input[a as usize] < 2 {
                    return Some(format!("{} normalises over one element", name()));
                }
                None
            }
            Op::GlobalAvgPool => {
                if input[2] * input[3] < 2 {
                    return Some(format!("{} averages one position", name()));
                }
                None
            }
            _ => None,
        };
        if let Some((k, s, dil, pads)) = window {
            for axis in 0..2 {
                for t in 0..k[axis] {
                    if !tap_reads_input(
                        t,
                        s[axis],
                        dil[axis],
                        pads[axis],
                        input[2 + axis],
                        output[2 + axis],
                    ) {
                        return Some(format!(
                            "{}: tap {t} of axis {axis} reads only padding",
                            name()
                        ));
                    }
                }
            }
            // A pooling window over one position is an identity.
            if matches!(d.op, Op::MaxPool(_) | Op::AvgPool(_))
                && k[0] * k[1] > 1
                && input[2] * input[3] < 2
            {
                return Some(format!("{} pools one position", name()));
            }
        }
    }
    None
}

#[test]
fn every_op_is_meaningful_at_the_test_size_and_not_below() {
    for spec in tir_zoo::models() {
        assert!(spec.test_size <= spec.size, "{}", spec.name);
        let mut m = tir_zoo::build_at(&spec, spec.test_size)
            .unwrap_or_else(|e| panic!("{} at {}: {e}", spec.name, spec.test_size));
        tir_ir::verify(&mut m).unwrap_or_else(|e| panic!("{}: {e:?}", spec.name));
        if let Some(why) = degenerate_op(m.entry().unwrap()) {
            panic!("{} at its test size {}: {why}", spec.name, spec.test_size);
        }
        // Every smaller size builds into a degenerate model or is refused (an error, never a
        // panic). BERT's test size is deliberately above its minimum (see its spec).
        if spec.name == "bert_base_layer" {
            assert!(tir_zoo::build_at(&spec, 1)
                .map(|m| degenerate_op(m.entry().unwrap()).is_some())
                .unwrap_or(true));
            continue;
        }
        for size in 1..spec.test_size {
            if let Ok(m) = tir_zoo::build_at(&spec, size) {
                assert!(
                    degenerate_op(m.entry().unwrap()).is_some(),
                    "{} is still meaningful at {size}, below its test size {}",
                    spec.name,
                    spec.test_size
                );
            }
        }
    }
}

/// The published size is the default: `build` is `build_at` the published size, which is
/// what `examples/` holds (zoo/tests/up_to_date.rs compares the text).
#[test]
fn the_published_size_is_the_default() {
    for spec in tir_zoo::models() {
        let a = tir_zoo::build(&spec).unwrap();
        let b = tir_zoo::build_at(&spec, spec.size).unwrap();
        assert_eq!(tir_ir::print(&a), tir_ir::print(&b), "{}", spec.name);
        let input = dims(a.entry().unwrap(), a.entry().unwrap().params[0]);
        assert!(input.contains(&spec.size), "{}: {input:?}", spec.name);
    }
}
