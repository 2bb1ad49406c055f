//! Import cleanup step 5: a residual `Add` (and the activation after it) fuses into the
//! convolution that produces one of its operands, `conv2d(x, w, b, skip) {activation}`,
//! where that is exact; the values are the unfused graph's bit for bit.

mod common;
use common::*;
use tir_ir::Op;
use tir_onnx::proto::ModelProto;
use tir_onnx::ImportOptions;

/// A ResNet bottleneck's tail, both ways the shortcut can come: the identity (`x`), and a
/// downsampling conv that the graph computes after the block's last conv (torchvision's
/// order), so the fused conv must move after it.
fn blocks() -> ModelProto {
    model(
        13,
        vec![input("x", &[1, 4, 6, 6])],
        &["y2"],
        vec![
            tseq("w1", &[4, 4, 3, 3]),
            tf32("b1", &[4], &[0.5, -0.25, 0.0, 1.0]),
            tseq("w2", &[8, 4, 1, 1]),
            tf32("b2", &[8], &[0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8]),
            tseq("wd", &[8, 4, 1, 1]),
        ],
        vec![
            // Identity shortcut, the skip as the add's first operand.
            node(
                "Conv",
                &["x", "w1", "b1"],
                &["c1"],
                vec![ais("pads", &[1, 1, 1, 1])],
            ),
            node("Add", &["x", "c1"], &["s1"], vec![]),
            node("Relu", &["s1"], &["y1"], vec![]),
            // Downsampling shortcut, computed after the conv it is added to.
            node("Conv", &["y1", "w2", "b2"], &["c2"], vec![]),
            node("Conv", &["y1", "wd"], &["d"], vec![]),
            node("Add", &["c2", "d"], &["s2"], vec![]),
            node("Relu", &["s2"], &["y2"], vec![]),
        ],
    )
}

#[test]
fn residual_adds_fuse_into_the_conv_with_the_relu() {
    let m = blocks();
    let imp = import(&m).unwrap();
    let f = imp.module.entry().unwrap();
    assert_eq!(count_ops(f, "add"), 0);
    assert_eq!(count_ops(f, "relu"), 0);
    let fused: Vec<_> = f
        .ops_in_order()
        .filter(|(_, o)| matches!(&o.op, Op::Conv2d(c) if o.operands.len() == 4 && c.activation.is_some()))
        .collect();
    assert_eq!(fused.len(), 2, "{}", tir_ir::print(&imp.module));
    // Every residual is defined before the conv that reads it: the downsampling conv's
    // result (a conv's) is the second fused conv's residual, so that conv moved after it.
    let text = tir_ir::print(&imp.module);
    let order: Vec<_> = f.ops_in_order().map(|(id, _)| id).collect();
    let at = |v| {
        let p = f.producer(v);
        p.map_or(0, |p| 1 + order.iter().position(|&o| o == p).unwrap())
    };
    let mut conv_residuals = 0;
    for (id, o) in &fused {
        let s = o.operands[3];
        let mine = 1 + order.iter().position(|o| o == id).unwrap();
        assert!(at(s) < mine, "{text}");
        if f.producer(s)
            .is_some_and(|p| f.ops[p].op.name() == "conv2d")
        {
            conv_residuals += 1;
        }
    }
    assert_eq!(conv_residuals, 1, "{text}");
    insta::assert_snapshot!("residual_fused", text);

    // The stats count them, on the module imported without cleanup.
    let mut raw_imp = import_with(&m, &no_cleanup()).unwrap();
    let stats = tir_onnx::cleanup(&mut raw_imp.module, &mut raw_imp.weights);
    assert_eq!(stats.fused_residuals, 2);
    assert_eq!(stats.fused_activations, 2);

    assert_eq!(
        run_bits(&m, &ImportOptions::default(), &[1, 4, 6, 6], 1.0),
        run_bits(&m, &no_cleanup(), &[1, 4, 6, 6], 1.0)
    );
}

#[test]
fn what_does_not_fuse() {
    let m = model(
        13,
        vec![input("x", &[1, 4, 5, 5]), input("row", &[1, 4, 1, 5])],
        &["a", "b", "c", "e", "g", "f"],
        vec![
            tseq("w", &[4, 4, 1, 1]),
            tf32("bias", &[4], &[0.5, -0.25, 0.0, 1.0]),
        ],
        vec![
            // The conv's own activation comes before the add.
            node("Conv", &["x", "w", "bias"], &["r0"], vec![]),
            node("Relu", &["r0"], &["r1"], vec![]),
            node("Add", &["r1", "x"], &["a"], vec![]),
            // No bias: the residual needs the bias operand before it.
            node("Conv", &["x", "w"], &["n0"], vec![]),
            node("Add", &["n0", "x"], &["b"], vec![]),
            // The conv's result has a second use.
            node("Conv", &["x", "w", "bias"], &["u0"], vec![]),
            node("Add", &["u0", "x"], &["c0"], vec![]),
            node("Mul", &["u0", "c0"], &["c"], vec![]),
            // A broadcast skip: not the result's shape.
            node("Conv", &["x", "w", "bias"], &["k0"], vec![]),
            node("Add", &["k0", "row"], &["e"], vec![]),
            // The conv's result is also returned.
            node("Conv", &["x", "w", "bias"], &["g"], vec![]),
            node("Add", &["g", "x"], &["f"], vec![]),
        ],
    );
    let imp = import(&m).unwrap();
    let f = imp.module.entry().unwrap();
    let text = tir_ir::print(&imp.module);
    assert_eq!(count_ops(f, "add"), 5, "{text}");
    assert!(
        f.ops_in_order()
            .all(|(_, o)| o.operands.len() < 4 || o.op.name() != "conv2d"),
        "{text}"
    );
    let mut raw_imp = import_with(&m, &no_cleanup()).unwrap();
    let stats = tir_onnx::cleanup(&mut raw_imp.module, &mut raw_imp.weights);
    assert_eq!(stats.fused_residuals, 0);
}

#[test]
fn a_dynamic_model_is_not_fused() {
    // The kernels with run-time extents have no residual epilogue: a model with a free dim
    // keeps its adds (and the static compile at the same shape gives the same bits, as the
    // fused epilogue adds in the unfused order).
    let imp = import_free_input(&blocks(), "x", &[D::S("n"), D::N(4), D::N(6), D::N(6)]);
    assert!(imp.module.is_dynamic());
    let f = imp.module.entry().unwrap();
    assert_eq!(count_ops(f, "add"), 2, "{}", tir_ir::print(&imp.module));
}
