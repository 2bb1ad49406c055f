//! One small model per supported op (or op family), imported and snapshotted as `.tir` text
//! that parses and verifies again.

mod common;
use common::*;
use tir_onnx::proto::tensor_proto::DataType;

fn snap(name: &str, m: &tir_onnx::proto::ModelProto) {
    insta::assert_snapshot!(name, text(m));
}

#[test]
fn conv() {
    let m = model(
        13,
        vec![input("x", &[1, 4, 9, 7])],
        &["a", "b", "c"],
        vec![
            tseq("w", &[6, 2, 3, 3]),
            tseq("bias", &[6]),
            tseq("w1", &[4, 4, 1, 1]),
        ],
        vec![
            // Grouped, strided, dilated, asymmetric padding.
            node(
                "Conv",
                &["x", "w", "bias"],
                &["a"],
                vec![
                    ai("group", 2),
                    ais("strides", &[2, 1]),
                    ais("dilations", &[1, 2]),
                    ais("pads", &[1, 0, 2, 2]),
                ],
            ),
            node(
                "Conv",
                &["x", "w"],
                &["b"],
                vec![
                    ai("group", 2),
                    as_("auto_pad", "SAME_UPPER"),
                    ais("strides", &[2, 2]),
                ],
            ),
            node(
                "Conv",
                &["x", "w1"],
                &["c"],
                vec![ais("kernel_shape", &[1, 1]), as_("auto_pad", "VALID")],
            ),
        ],
    );
    snap("conv", &m);
}

#[test]
fn matmul_gemm() {
    let m = model(
        13,
        vec![input("x", &[2, 3, 4]), input("v", &[1, 4])],
        &["a", "b"],
        vec![tseq("w", &[4, 5]), tseq("wt", &[5, 4]), tseq("c", &[5])],
        vec![
            node("MatMul", &["x", "w"], &["a"], vec![]),
            node(
                "Gemm",
                &["v", "wt", "c"],
                &["b"],
                vec![ai("transB", 1), af("alpha", 0.5), af("beta", 2.0)],
            ),
        ],
    );
    snap("matmul_gemm", &m);
}

#[test]
fn binary_broadcast() {
    let m = model(
        13,
        vec![input("x", &[1, 3, 4, 4]), input("y", &[4])],
        &["d"],
        vec![tseq("k", &[3, 1, 1]), tf32("half", &[], &[0.5])],
        vec![
            node("Add", &["x", "k"], &["a"], vec![]),
            node("Sub", &["a", "y"], &["b"], vec![]),
            node("Mul", &["b", "half"], &["c"], vec![]),
            node("Div", &["c", "k"], &["d"], vec![]),
        ],
    );
    snap("binary_broadcast", &m);
}

#[test]
fn unary() {
    let m = model(
        20,
        vec![input("x", &[1, 3, 5])],
        &["r", "s", "t", "e", "h", "hs", "g", "p"],
        vec![tseq("slope", &[3, 1])],
        vec![
            node("Relu", &["x"], &["r"], vec![]),
            node("Sigmoid", &["x"], &["s"], vec![]),
            node("Tanh", &["x"], &["t"], vec![]),
            node("Exp", &["x"], &["e"], vec![]),
            node("HardSigmoid", &["x"], &["h"], vec![af("alpha", 0.25)]),
            node("HardSwish", &["x"], &["hs"], vec![]),
            node("Gelu", &["x"], &["g"], vec![]),
            node("PRelu", &["x", "slope"], &["p"], vec![]),
        ],
    );
    snap("unary", &m);
}

#[test]
fn clip() {
    let m = model(
        13,
        vec![input("x", &[2, 3])],
        &["a", "b", "c"],
        vec![tf32("lo", &[], &[-1.5]), tf32("hi", &[], &[2.0])],
        vec![
            node("Clip", &["x", "lo", "hi"], &["a"], vec![]),
            node("Clip", &["x", "", "hi"], &["b"], vec![]),
            node("Clip", &["x"], &["c"], vec![]),
        ],
    );
    snap("clip", &m);
}

#[test]
fn pools() {
    let m = model(
        13,
        vec![input("x", &[1, 2, 7, 8])],
        &["a", "b", "c", "d"],
        vec![],
        vec![
            node(
                "MaxPool",
                &["x"],
                &["a"],
                vec![
                    ais("kernel_shape", &[3, 3]),
                    ais("strides", &[2, 2]),
                    ais("pads", &[1, 1, 1, 1]),
                ],
            ),
            node(
                "MaxPool",
                &["x"],
                &["b"],
                vec![
                    ais("kernel_shape", &[2, 3]),
                    ais("strides", &[2, 2]),
                    ai("ceil_mode", 1),
                ],
            ),
            node(
                "AveragePool",
                &["x"],
                &["c"],
                vec![
                    ais("kernel_shape", &[3, 3]),
                    ais("pads", &[1, 1, 1, 1]),
                    ai("count_include_pad", 1),
                ],
            ),
            node("GlobalAveragePool", &["x"], &["d"], vec![]),
        ],
    );
    snap("pools", &m);
}

#[test]
fn concat_split() {
    let m13 = model(
        13,
        vec![input("x", &[1, 6, 2]), input("y", &[1, 2, 2])],
        &["c", "p", "q", "r"],
        vec![ti64("sizes", &[3], &[1, 2, 5])],
        vec![
            node("Concat", &["x", "y"], &["c"], vec![ai("axis", 1)]),
            node(
                "Split",
                &["c", "sizes"],
                &["p", "q", "r"],
                vec![ai("axis", -2)],
            ),
        ],
    );
    snap("split_input", &m13);
    let m11 = model(
        11,
        vec![input("x", &[4, 6])],
        &["p", "q", "r", "s"],
        vec![],
        vec![
            node(
                "Split",
                &["x"],
                &["p", "q"],
                vec![ai("axis", 1), ais("split", &[2, 4])],
            ),
            node("Split", &["x"], &["r", "s"], vec![]),
        ],
    );
    snap("split_attr", &m11);
    let m18 = model(
        18,
        vec![input("x", &[1, 7])],
        &["p", "q", "r"],
        vec![],
        vec![node(
            "Split",
            &["x"],
            &["p", "q", "r"],
            vec![ai("axis", 1), ai("num_outputs", 3)],
        )],
    );
    snap("split_num_outputs", &m18);
}

#[test]
fn slice() {
    let m = model(
        13,
        vec![input("x", &[2, 10, 6])],
        &["a", "b"],
        vec![
            ti64("st", &[2], &[1, -1]),
            ti64("en", &[2], &[9, i64::MIN]),
            ti64("ax", &[2], &[1, 2]),
            ti64("sp", &[2], &[3, -2]),
            ti64("st1", &[1], &[1]),
            ti64("en1", &[1], &[i64::MAX]),
        ],
        vec![
            node("Slice", &["x", "st", "en", "ax", "sp"], &["a"], vec![]),
            node("Slice", &["x", "st1", "en1"], &["b"], vec![]),
        ],
    );
    snap("slice", &m);
}

#[test]
fn views() {
    let m = model(
        13,
        vec![input("x", &[2, 3, 1, 4])],
        &["r", "f", "s", "s0", "u", "t", "tp"],
        vec![
            ti64("shape", &[3], &[0, -1, 2]),
            ti64("sq", &[1], &[2]),
            ti64("uq", &[2], &[0, -1]),
        ],
        vec![
            node("Reshape", &["x", "shape"], &["r"], vec![]),
            node("Flatten", &["x"], &["f"], vec![ai("axis", 2)]),
            node("Squeeze", &["x", "sq"], &["s"], vec![]),
            node("Squeeze", &["x"], &["s0"], vec![]),
            node("Unsqueeze", &["x", "uq"], &["u"], vec![]),
            node("Transpose", &["x"], &["t"], vec![]),
            node(
                "Transpose",
                &["x"],
                &["tp"],
                vec![ais("perm", &[0, 2, 3, 1])],
            ),
        ],
    );
    snap("views", &m);
    let m11 = model(
        11,
        vec![input("x", &[3, 1, 4])],
        &["s", "u"],
        vec![],
        vec![
            node("Squeeze", &["x"], &["s"], vec![ais("axes", &[1])]),
            node("Unsqueeze", &["x"], &["u"], vec![ais("axes", &[0, 4])]),
        ],
    );
    snap("views_opset11", &m11);
}

#[test]
fn softmax() {
    let m13 = model(
        13,
        vec![input("x", &[2, 3, 4])],
        &["a", "b"],
        vec![],
        vec![
            node("Softmax", &["x"], &["a"], vec![]),
            node("Softmax", &["x"], &["b"], vec![ai("axis", 1)]),
        ],
    );
    snap("softmax", &m13);
    // Before opset 13 the input is coerced to 2-D at `axis` (default 1).
    let m11 = model(
        11,
        vec![input("x", &[2, 3, 4])],
        &["a", "b"],
        vec![],
        vec![
            node("Softmax", &["x"], &["a"], vec![]),
            node("Softmax", &["x"], &["b"], vec![ai("axis", -1)]),
        ],
    );
    snap("softmax_opset11", &m11);
}

#[test]
fn pad() {
    let m = model(
        18,
        vec![input("x", &[1, 2, 3, 4])],
        &["a", "b", "c"],
        vec![
            ti64("pads", &[8], &[0, 0, 1, 2, 0, 0, 3, 0]),
            tf32("v", &[], &[1.5]),
            ti64("p2", &[4], &[1, 1, 2, 2]),
            ti64("axes", &[2], &[2, -1]),
        ],
        vec![
            node("Pad", &["x", "pads", "v"], &["a"], vec![]),
            node(
                "Pad",
                &["x", "p2", "", "axes"],
                &["b"],
                vec![as_("mode", "reflect")],
            ),
            node("Pad", &["x", "pads"], &["c"], vec![as_("mode", "edge")]),
        ],
    );
    snap("pad", &m);
}

#[test]
fn norms_and_reduce() {
    let m = model(
        17,
        vec![input("x", &[2, 3, 4, 5])],
        &["bn", "ln", "rm", "rm2"],
        vec![
            tseq("g", &[3]),
            tseq("b", &[3]),
            tseq("mu", &[3]),
            tf32("var", &[3], &[1.0, 2.0, 0.5]),
            tseq("lg", &[4, 5]),
        ],
        vec![
            node(
                "BatchNormalization",
                &["x", "g", "b", "mu", "var"],
                &["bn"],
                vec![af("epsilon", 1e-3)],
            ),
            node(
                "LayerNormalization",
                &["x", "lg"],
                &["ln"],
                vec![ai("axis", -2)],
            ),
            node("ReduceMean", &["x"], &["rm"], vec![ais("axes", &[2, 3])]),
            node("ReduceMean", &["x"], &["rm2"], vec![ai("keepdims", 0)]),
        ],
    );
    snap("norms_and_reduce", &m);
    let m18 = model(
        18,
        vec![input("x", &[2, 3, 4])],
        &["a", "b"],
        vec![ti64("axes", &[1], &[-1]), ti64("none", &[0], &[])],
        vec![
            node(
                "ReduceMean",
                &["x", "axes"],
                &["a"],
                vec![ai("keepdims", 0)],
            ),
            node(
                "ReduceMean",
                &["x", "none"],
                &["b"],
                vec![ai("noop_with_empty_axes", 1)],
            ),
        ],
    );
    snap("reduce_mean_opset18", &m18);
}

/// The Reduce* family: ReduceSum's axes an input from opset 13, the others' an attribute until
/// 18; LogSoftmax along an axis (opset 13) and with the 2-D coercion before it.
#[test]
fn reductions_and_log_softmax() {
    let m = model(
        13,
        vec![input("x", &[2, 3, 4])],
        &["sum", "max", "l2", "lse", "ls"],
        vec![ti64("axes", &[1], &[1])],
        vec![
            node(
                "ReduceSum",
                &["x", "axes"],
                &["sum"],
                vec![ai("keepdims", 0)],
            ),
            node("ReduceMax", &["x"], &["max"], vec![ais("axes", &[0, 2])]),
            node("ReduceL2", &["x"], &["l2"], vec![ai("keepdims", 0)]),
            node(
                "ReduceLogSumExp",
                &["x"],
                &["lse"],
                vec![ais("axes", &[-1])],
            ),
            node("LogSoftmax", &["x"], &["ls"], vec![ai("axis", 1)]),
        ],
    );
    snap("reductions_opset13", &m);
    let m11 = model(
        11,
        vec![input("x", &[2, 3, 4])],
        &["ls", "p"],
        vec![],
        vec![
            node("LogSoftmax", &["x"], &["ls"], vec![ai("axis", 1)]),
            node("ReduceProd", &["x"], &["p"], vec![ais("axes", &[1])]),
        ],
    );
    snap("log_softmax_opset11", &m11);
}

/// RMSNormalization decomposed (mul, reduce_mean over the axes from `axis` on, add epsilon,
/// sqrt, div, mul by scale); Size and Range folded on static shapes (the expanded form's
/// `Size → Range` axes computation).
#[test]
fn rms_norm_size_range() {
    let m = model(
        23,
        vec![input("x", &[2, 3, 4])],
        &["y", "r"],
        vec![
            tseq("scale", &[3, 4]),
            ti64("zero", &[], &[0]),
            ti64("two", &[], &[2]),
            ti64("twenty", &[], &[20]),
            ti64("minus_two", &[], &[-2]),
        ],
        vec![
            node(
                "RMSNormalization",
                &["x", "scale"],
                &["y"],
                vec![ai("axis", 1), af("epsilon", 1e-3)],
            ),
            node("Size", &["x"], &["n"], vec![]),
            // Range(0, 24, 2) has 12 elements, Range(24, 20, -2) two (24, 22): x as [12, 2].
            node("Range", &["zero", "n", "two"], &["up"], vec![]),
            node("Range", &["n", "twenty", "minus_two"], &["down"], vec![]),
            node("Shape", &["up"], &["a"], vec![]),
            node("Shape", &["down"], &["b"], vec![]),
            node("Concat", &["a", "b"], &["shape"], vec![ai("axis", 0)]),
            node("Reshape", &["x", "shape"], &["r"], vec![]),
        ],
    );
    snap("rms_norm_size_range", &m);
}

/// Attention (opset 23) decomposed: 3-D inputs split into heads, grouped-query KV heads
/// repeated, the KV cache concatenated and returned, the causal bias offset by the past length
/// folded into one constant, softcap, softmax, the output merged back to 3-D.
#[test]
fn attention_gqa_causal_with_cache() {
    let m = model(
        23,
        vec![
            input("q", &[1, 2, 8]),
            input("k", &[1, 2, 4]),
            input("v", &[1, 2, 4]),
            input("pk", &[1, 1, 3, 4]),
            input("pv", &[1, 1, 3, 4]),
        ],
        &["y", "present_k", "present_v"],
        vec![],
        vec![node(
            "Attention",
            &["q", "k", "v", "", "pk", "pv"],
            &["y", "present_k", "present_v"],
            vec![
                ai("q_num_heads", 2),
                ai("kv_num_heads", 1),
                ai("is_causal", 1),
                af("softcap", 2.0),
            ],
        )],
    );
    snap("attention_gqa_causal_with_cache", &m);
}

/// Constant subgraphs of comparisons, logic, Mod and CastLike fold at import.
#[test]
fn comparisons_logic_mod_castlike_fold() {
    let m = model(
        13,
        vec![input("x", &[2, 3, 4])],
        &["y"],
        vec![
            ti64("a", &[3], &[2, 7, -7]),
            ti64("b", &[3], &[3, 3, 3]),
            tf32("f", &[1], &[1.0]),
            ti64("c", &[3], &[0, 2, 2]),
        ],
        vec![
            // Mod (fmod 0: the divisor's sign): [2, 1, 2]; Less than b: [1, 1, 1].
            node("Mod", &["a", "b"], &["m"], vec![]),
            node("Less", &["m", "b"], &["lt"], vec![]),
            node("Not", &["lt"], &["nlt"], vec![]),
            node("Or", &["lt", "nlt"], &["all"], vec![]),
            node("CastLike", &["all", "a"], &["ones"], vec![]),
            // [2, 1, 2] * [1, 1, 1] + [0, 2, 2] = [2, 3, 4]: x's own shape, a reshape to itself.
            node("Mul", &["m", "ones"], &["m1"], vec![]),
            node("Add", &["m1", "c"], &["mm"], vec![]),
            node("GreaterOrEqual", &["m", "b"], &["ge"], vec![]),
            node("CastLike", &["f", "x"], &["ff"], vec![]),
            node("Reshape", &["x", "mm"], &["r"], vec![]),
            node("Mul", &["r", "ff"], &["y"], vec![]),
        ],
    );
    snap("comparisons_logic_mod_castlike_fold", &m);
}

#[test]
fn resize() {
    let m = model(
        13,
        vec![input("x", &[1, 2, 5, 6])],
        &["a", "b", "c"],
        vec![
            tf32("scales", &[4], &[1.0, 1.0, 2.0, 1.5]),
            ti64("sizes", &[4], &[1, 2, 7, 3]),
            tf32("empty", &[0], &[]),
        ],
        vec![
            node(
                "Resize",
                &["x", "", "scales"],
                &["a"],
                vec![
                    as_("coordinate_transformation_mode", "asymmetric"),
                    as_("nearest_mode", "floor"),
                ],
            ),
            node(
                "Resize",
                &["x", "", "empty", "sizes"],
                &["b"],
                vec![
                    as_("mode", "linear"),
                    as_("coordinate_transformation_mode", "align_corners"),
                ],
            ),
            node(
                "Resize",
                &["x", "", "", "sizes"],
                &["c"],
                vec![as_("mode", "linear")],
            ),
        ],
    );
    snap("resize", &m);
}

#[test]
fn aliases_and_constants() {
    let k = tf32("kv", &[2], &[1.0, 2.0]);
    let m = model(
        13,
        vec![input("x", &[3, 2])],
        &["y", "z"],
        vec![],
        vec![
            node("Identity", &["x"], &["i"], vec![]),
            node("Dropout", &["i"], &["d"], vec![]),
            node("Constant", &[], &["k"], vec![at("value", k)]),
            node("Add", &["d", "k"], &["y"], vec![]),
            node(
                "Constant",
                &[],
                &["z"],
                vec![afs("value_floats", &[3.0, 4.0])],
            ),
        ],
    );
    snap("aliases_and_constants", &m);
}

/// `x.view(x.size(0), -1)` as PyTorch exports it, on a symbolic batch, plus
/// ConstantOfShape and Cast on constants.
#[test]
fn shape_subgraph_folding() {
    let m = model(
        13,
        vec![input_sym(
            "x",
            &[D::S("batch"), D::N(3), D::N(4), D::N(4)],
            DataType::Float,
        )],
        &["y", "z"],
        vec![
            ti64("zero", &[], &[0]),
            ti64("minus1", &[1], &[-1]),
            ti64("two", &[1], &[1]),
        ],
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["n"], vec![ai("axis", 0)]),
            node("Unsqueeze", &["n", "zero_axes"], &["n1"], vec![]),
            node(
                "Concat",
                &["n1", "minus1"],
                &["target"],
                vec![ai("axis", 0)],
            ),
            node("Reshape", &["x", "target"], &["y"], vec![]),
            node(
                "ConstantOfShape",
                &["two"],
                &["ones_i"],
                vec![at("value", ti64("v", &[1], &[1]))],
            ),
            node(
                "Cast",
                &["ones_i"],
                &["ones"],
                vec![ai("to", DataType::Float as i64)],
            ),
            node("Shape", &["y"], &["ys"], vec![]),
            node("Slice", &["ys", "minus1_start", "big"], &["last"], vec![]),
            node(
                "Cast",
                &["last"],
                &["lastf"],
                vec![ai("to", DataType::Float as i64)],
            ),
            node("Mul", &["ones", "lastf"], &["scale"], vec![]),
            node("Mul", &["y", "scale"], &["z"], vec![]),
        ],
    );
    let mut m = m;
    let g = m.graph.as_mut().unwrap();
    g.initializer.push(ti64("zero_axes", &[1], &[0]));
    g.initializer.push(ti64("minus1_start", &[1], &[-1]));
    g.initializer.push(ti64("big", &[1], &[i64::MAX]));
    snap("shape_subgraph_folding", &m);
    // A given batch size flows through the folded shapes.
    let opts = tir_onnx::ImportOptions {
        dims: vec![("batch".into(), 5)],
        ..Default::default()
    };
    insta::assert_snapshot!("shape_subgraph_folding_batch5", text_with(&m, &opts));
}

/// PyTorch's exact GELU before opset 20, in both orders it is exported in, becomes `gelu`.
#[test]
fn erf_gelu_pattern() {
    let consts = || {
        vec![
            tf32("sqrt2", &[], &[std::f32::consts::SQRT_2]),
            tf32("one", &[], &[1.0]),
            tf32("half", &[], &[0.5]),
        ]
    };
    let a = model(
        13,
        vec![input("x", &[2, 5])],
        &["y"],
        consts(),
        vec![
            node("Div", &["x", "sqrt2"], &["d"], vec![]),
            node("Erf", &["d"], &["e"], vec![]),
            node("Add", &["e", "one"], &["a"], vec![]),
            node("Mul", &["x", "a"], &["m"], vec![]),
            node("Mul", &["m", "half"], &["y"], vec![]),
        ],
    );
    snap("erf_gelu", &a);
    let b = model(
        13,
        vec![input("x", &[2, 5])],
        &["y"],
        consts(),
        vec![
            node("Mul", &["x", "half"], &["h"], vec![]),
            node("Div", &["x", "sqrt2"], &["d"], vec![]),
            node("Erf", &["d"], &["e"], vec![]),
            node("Add", &["one", "e"], &["a"], vec![]),
            node("Mul", &["h", "a"], &["y"], vec![]),
        ],
    );
    snap("erf_gelu_half_first", &b);
    // The Erf's output used elsewhere: no rewrite, the nodes are imported one by one.
    let mut c = a.clone();
    c.graph.as_mut().unwrap().output.push(output("e"));
    let t = text(&c);
    assert!(t.contains("erf(") && !t.contains("gelu("), "{t}");
}

/// The math functions of opset 22 (Sqrt … Softsign), Pow with an integer constant exponent
/// (converted to f32), Pow with a constant exponent of 2 (`x · x`, integer or f32, a scalar or
/// one element), and Max/Min of one, two and three inputs (a chain of binary ops).
#[test]
fn math_functions() {
    let unary = [
        "Abs",
        "Neg",
        "Sqrt",
        "Reciprocal",
        "Log",
        "Floor",
        "Ceil",
        "Round",
        "Erf",
        "Sin",
        "Cos",
        "Softplus",
        "Softsign",
        "Tan",
        "Asin",
        "Acos",
        "Atan",
        "Sinh",
        "Cosh",
        "Asinh",
        "Acosh",
        "Atanh",
        "Sign",
    ];
    let outs: Vec<String> = unary.iter().map(|u| u.to_lowercase()).collect();
    let mut nodes: Vec<_> = unary
        .iter()
        .zip(&outs)
        .map(|(u, o)| node(u, &["x"], &[o], vec![]))
        .collect();
    nodes.push(node("Pow", &["x", "three"], &["pw"], vec![]));
    nodes.push(node("Pow", &["x", "two"], &["sq"], vec![]));
    nodes.push(node("Pow", &["x", "two_f"], &["sqf"], vec![]));
    // An exponent of 2 that broadcasts `x` to a higher rank stays a `pow`.
    nodes.push(node("Pow", &["x", "two_3d"], &["sq3"], vec![]));
    nodes.push(node("Max", &["x", "y", "z"], &["mx"], vec![]));
    nodes.push(node("Min", &["x", "y"], &["mn"], vec![]));
    nodes.push(node("Max", &["x"], &["m1"], vec![]));
    let mut names: Vec<&str> = outs.iter().map(String::as_str).collect();
    names.extend(["pw", "sq", "sqf", "sq3", "mx", "mn", "m1"]);
    let m = model(
        22,
        vec![input("x", &[2, 3]), input("y", &[3]), input("z", &[2, 1])],
        &names,
        vec![
            ti64("three", &[], &[3]),
            ti64("two", &[], &[2]),
            tf32("two_f", &[1], &[2.0]),
            tf32("two_3d", &[1, 1, 1], &[2.0]),
        ],
        nodes,
    );
    let t = text(&m);
    for o in &outs {
        assert!(t.contains(&format!("= {o}(%x)")), "{o} missing:\n{t}");
    }
    assert!(t.contains("pow(%x, %three$f32) : tensor<2x3xf32>"), "{t}");
    assert!(
        t.contains("const {name = \"three$f32\"} : tensor<f32>"),
        "{t}"
    );
    assert_eq!(
        t.matches("= mul(%x, %x) : tensor<2x3xf32>").count(),
        2,
        "{t}"
    );
    assert!(t.contains("pow(%x, %two_3d) : tensor<1x2x3xf32>"), "{t}");
    assert_eq!(t.matches("= max(").count(), 2, "{t}");
    assert!(t.contains("min(%x, %y) : tensor<2x3xf32>"), "{t}");
    // Max of one input is that input: the last result returned is `%x` itself.
    let ret = t
        .lines()
        .find(|l| l.trim_start().starts_with("return"))
        .unwrap_or("");
    assert!(ret.trim_end().ends_with(", %x"), "{t}");
}

/// `--bind`: a shape given as a graph input is fixed at import and folds; a bound name that is
/// no graph input is refused.
#[test]
fn bound_inputs_fold_like_initializers() {
    let m = model(
        22,
        vec![
            input("x", &[2, 6]),
            input_sym("shape", &[D::N(2)], DataType::Int64),
        ],
        &["y"],
        vec![],
        vec![node("Reshape", &["x", "shape"], &["y"], vec![])],
    );
    let refused = error(&m);
    assert!(refused.contains("must be a constant"), "{refused}");
    let shape = tir_onnx::Tensor {
        dtype: tir_ir::DType::I64,
        shape: vec![2],
        data: [3i64, 4].iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let opts = tir_onnx::ImportOptions {
        bound: vec![("shape".into(), shape.clone())],
        ..Default::default()
    };
    let t = text_with(&m, &opts);
    assert!(
        t.contains("func @main(%x: tensor<2x6xf32>) -> tensor<3x4xf32>"),
        "{t}"
    );
    let opts = tir_onnx::ImportOptions {
        bound: vec![("nope".into(), shape)],
        ..Default::default()
    };
    let e = import_with(&m, &opts).map(|_| ()).unwrap_err().to_string();
    assert_eq!(e, "--bind `nope` names no graph input");
}
