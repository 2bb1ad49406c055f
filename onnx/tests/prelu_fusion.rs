//! Import cleanup step 6: a PReLU (or a LeakyRelu, imported as a PReLU with a one-value
//! slope) fuses into the convolution that produces its operand, after the residual add has
//! fused (mediapipe's `conv → add → prelu` becomes one `conv2d(x, w, b, s, slope)
//! {activation = prelu}`), where that is exact; the values are the unfused graph's bit for
//! bit. Where it is not (no bias, a slope that is not per channel, another use of the conv,
//! a dynamic model) the prelu stays.

mod common;
use common::*;
use tir_ir::{Function, Op};
use tir_onnx::proto::ModelProto;
use tir_onnx::ImportOptions;

/// A mediapipe residual block (`conv → add → prelu` with a `[C, 1, 1]` slope), a conv with a
/// one-value `[1]` PReLU slope, and a LeakyRelu after a depthwise conv.
fn blocks() -> ModelProto {
    model(
        13,
        vec![input("x", &[1, 4, 6, 6])],
        &["y3"],
        vec![
            tseq("w1", &[4, 4, 3, 3]),
            tf32("b1", &[4], &[0.5, -0.25, 0.0, 1.0]),
            tf32("a1", &[4, 1, 1], &[0.25, -0.5, 2.0, 0.0]),
            tseq("w2", &[8, 4, 1, 1]),
            tf32("b2", &[8], &[0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8]),
            tf32("a2", &[1], &[0.125]),
            tseq("w3", &[8, 1, 3, 3]),
            tf32("b3", &[8], &[-0.3; 8]),
        ],
        vec![
            node(
                "Conv",
                &["x", "w1", "b1"],
                &["c1"],
                vec![ais("pads", &[1, 1, 1, 1])],
            ),
            node("Add", &["c1", "x"], &["s1"], vec![]),
            node("PRelu", &["s1", "a1"], &["y1"], vec![]),
            node("Conv", &["y1", "w2", "b2"], &["c2"], vec![]),
            node("PRelu", &["c2", "a2"], &["y2"], vec![]),
            node(
                "Conv",
                &["y2", "w3", "b3"],
                &["c3"],
                vec![ais("pads", &[1, 1, 1, 1]), ai("group", 8)],
            ),
            node("LeakyRelu", &["c3"], &["y3"], vec![af("alpha", 0.2)]),
        ],
    )
}

fn prelu_convs(f: &Function) -> usize {
    f.ops_in_order()
        .filter(|(_, o)| matches!(&o.op, Op::Conv2d(c) if c.prelu))
        .count()
}

#[test]
fn prelus_fuse_into_their_convs_after_the_residual() {
    let m = blocks();
    let imp = import(&m).unwrap();
    let f = imp.module.entry().unwrap();
    let text = tir_ir::print(&imp.module);
    assert_eq!(count_ops(f, "prelu"), 0, "{text}");
    assert_eq!(count_ops(f, "add"), 0, "{text}");
    assert_eq!(prelu_convs(f), 3, "{text}");
    assert!(
        text.contains("conv2d(%x, %w1, %b1, %x, %a1) {pads = [1, 1, 1, 1], activation = prelu}"),
        "{text}"
    );

    // The stats count them, on the module imported without cleanup.
    let mut raw_imp = import_with(&m, &no_cleanup()).unwrap();
    let stats = tir_onnx::cleanup(&mut raw_imp.module, &mut raw_imp.weights);
    assert_eq!(stats.fused_prelus, 3);
    assert_eq!(stats.fused_residuals, 1);

    assert_eq!(
        run_bits(&m, &ImportOptions::default(), &[1, 4, 6, 6], 3.0),
        run_bits(&m, &no_cleanup(), &[1, 4, 6, 6], 3.0)
    );
}

#[test]
fn what_does_not_fuse() {
    let m = model(
        13,
        vec![input("x", &[1, 4, 5, 5])],
        &["a", "b", "c", "e", "f", "h"],
        vec![
            tseq("w", &[4, 4, 1, 1]),
            tf32("bias", &[4], &[0.5, -0.25, 0.0, 1.0]),
            tf32("slope", &[4, 1, 1], &[0.25, 0.5, 0.75, 1.5]),
            // Per column (W = 5): not one value per channel.
            tf32("cols", &[5], &[0.1, 0.2, 0.3, 0.4, 0.5]),
        ],
        vec![
            // No bias (a zero bias would turn a −0 sum into +0).
            node("Conv", &["x", "w"], &["n0"], vec![]),
            node("PRelu", &["n0", "slope"], &["a"], vec![]),
            // A slope per column.
            node("Conv", &["x", "w", "bias"], &["k0"], vec![]),
            node("PRelu", &["k0", "cols"], &["b"], vec![]),
            // The conv's result has a second use.
            node("Conv", &["x", "w", "bias"], &["u0"], vec![]),
            node("PRelu", &["u0", "slope"], &["u1"], vec![]),
            node("Mul", &["u0", "u1"], &["c"], vec![]),
            // The conv's own activation comes first.
            node("Conv", &["x", "w", "bias"], &["r0"], vec![]),
            node("Relu", &["r0"], &["r1"], vec![]),
            node("PRelu", &["r1", "slope"], &["e"], vec![]),
            // The conv's result is also returned.
            node("Conv", &["x", "w", "bias"], &["f"], vec![]),
            node("PRelu", &["f", "slope"], &["g"], vec![]),
            node("Add", &["g", "f"], &["h"], vec![]),
        ],
    );
    let imp = import(&m).unwrap();
    let f = imp.module.entry().unwrap();
    let text = tir_ir::print(&imp.module);
    assert_eq!(count_ops(f, "prelu"), 5, "{text}");
    assert_eq!(prelu_convs(f), 0, "{text}");
    let mut raw_imp = import_with(&m, &no_cleanup()).unwrap();
    let stats = tir_onnx::cleanup(&mut raw_imp.module, &mut raw_imp.weights);
    assert_eq!(stats.fused_prelus, 0);
}

#[test]
fn a_dynamic_model_is_not_fused() {
    // The kernels with run-time extents have no PReLU epilogue.
    let imp = import_free_input(&blocks(), "x", &[D::S("n"), D::N(4), D::N(6), D::N(6)]);
    assert!(imp.module.is_dynamic());
    let f = imp.module.entry().unwrap();
    assert_eq!(count_ops(f, "prelu"), 3, "{}", tir_ir::print(&imp.module));
    assert_eq!(prelu_convs(f), 0);
}
