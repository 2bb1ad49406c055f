//! DARTS (V2 genotype) ImageNet network, mobile setting (Liu et al. 2019).

use crate::nn::{Conv, Net, NetResult, Padding};
use crate::ModelSpec;
use tir_ir::{Module, UnaryOp, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "darts_imagenet",
        file: "darts_imagenet.tir",
        architecture: "DARTS-V2 ImageNet network (14 cells, C = 48, reductions at cells 4 and 9)",
        paper: "Liu et al., \"DARTS: Differentiable Architecture Search\", 2019",
        input: "224x224x3",
        notes: &[
            "The authors' NetworkImageNet with the DARTS_V2 genotype: stem0 (3x3/2 conv C/2,",
            "ReLU, 3x3/2 conv C), stem1 (ReLU, 3x3/2 conv C), 14 cells of 4 nodes each (a node",
            "adds two operations on earlier states; the cell concatenates its 4 nodes), 7x7",
            "average pool, fully connected 1000, softmax. Operations: sep_conv_3x3 (twice ReLU,",
            "depthwise 3x3, pointwise), dil_conv_3x3 (ReLU, dilated depthwise, pointwise),",
            "max_pool_3x3, skip_connect (identity, or factorized reduce when strided).",
            "Batch norm folded; no auxiliary head (inference).",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the last cells run at
        // 3x3; below, either a tap of their 5x5 dilated convs reads only padding or the
        // factorized-reduce paths of odd-sized maps no longer line up (the model cannot be built).
        test_size: 93,
        build,
    }
}

type Genotype = [(&'static str, usize); 8];

const NORMAL: Genotype = [
    ("sep_conv_3x3", 0),
    ("sep_conv_3x3", 1),
    ("sep_conv_3x3", 0),
    ("sep_conv_3x3", 1),
    ("sep_conv_3x3", 1),
    ("skip_connect", 0),
    ("skip_connect", 0),
    ("dil_conv_3x3", 2),
];

const REDUCE: Genotype = [
    ("max_pool_3x3", 0),
    ("max_pool_3x3", 1),
    ("skip_connect", 2),
    ("max_pool_3x3", 1),
    ("max_pool_3x3", 0),
    ("skip_connect", 2),
    ("skip_connect", 2),
    ("max_pool_3x3", 1),
];

/// `FactorizedReduce`: ReLU, two stride-2 1x1 convs (the second on the input shifted by one
/// pixel), concatenated.
fn factorized_reduce(net: &mut Net, n: &str, x: Value, out: u64) -> NetResult<Value> {
    let h = net.unary(&format!("{n}.relu"), x, UnaryOp::Relu)?;
    let a = net.conv(
        &format!("{n}.conv1"),
        h,
        &Conv::new(out / 2, 1).stride(2).valid(),
    )?;
    let [hh, ww] = net.hw(h);
    let shifted = net.op(
        &format!("{n}.shift"),
        tir_ir::Op::Slice(tir_ir::op::Slice {
            starts: vec![1, 1],
            ends: vec![hh as i64, ww as i64],
            axes: vec![2, 3],
            steps: vec![1, 1],
        }),
        &[h],
    )?;
    let b = net.conv(
        &format!("{n}.conv2"),
        shifted,
        &Conv::new(out - out / 2, 1).stride(2).valid(),
    )?;
    net.concat(&format!("{n}.concat"), &[a, b], 1)
}

fn relu_conv(net: &mut Net, n: &str, x: Value, out: u64) -> NetResult<Value> {
    let h = net.unary(&format!("{n}.relu"), x, UnaryOp::Relu)?;
    net.conv(&format!("{n}.conv"), h, &Conv::new(out, 1))
}

fn operation(net: &mut Net, n: &str, x: Value, op: &str, stride: u64, c: u64) -> NetResult<Value> {
    match op {
        "sep_conv_3x3" => {
            let mut h = x;
            let mut s = stride;
            for layer in 1..=2 {
                h = net.unary(&format!("{n}.relu{layer}"), h, UnaryOp::Relu)?;
                h = net.conv(
                    &format!("{n}.dw{layer}"),
                    h,
                    &Conv::depthwise(3).stride(s).pad(1).no_bias(),
                )?;
                h = net.conv(&format!("{n}.pw{layer}"), h, &Conv::new(c, 1))?;
                s = 1;
            }
            Ok(h)
        }
        "dil_conv_3x3" => {
            let h = net.unary(&format!("{n}.relu"), x, UnaryOp::Relu)?;
            let h = net.conv(
                &format!("{n}.dw"),
                h,
                &Conv::depthwise(3)
                    .stride(stride)
                    .dilation(2)
                    .pad(2)
                    .no_bias(),
            )?;
            net.conv(&format!("{n}.pw"), h, &Conv::new(c, 1))
        }
        "max_pool_3x3" => net.max_pool(
            &format!("{n}.pool"),
            x,
            3,
            stride,
            Padding::Explicit([1; 4]),
        ),
        _ if stride == 1 => Ok(x),
        _ => factorized_reduce(net, n, x, c),
    }
}

fn cell(
    net: &mut Net,
    n: &str,
    s0: Value,
    s1: Value,
    c: u64,
    reduction: bool,
    reduction_prev: bool,
) -> NetResult<Value> {
    let s0 = if reduction_prev {
        factorized_reduce(net, &format!("{n}.preprocess0"), s0, c)?
    } else {
        relu_conv(net, &format!("{n}.preprocess0"), s0, c)?
    };
    let s1 = relu_conv(net, &format!("{n}.preprocess1"), s1, c)?;
    let genotype = if reduction { &REDUCE } else { &NORMAL };
    let mut states = vec![s0, s1];
    for node in 0..4 {
        let mut pair = [s1; 2];
        for (side, slot) in pair.iter_mut().enumerate() {
            let (op, idx) = genotype[2 * node + side];
            let stride = if reduction && idx < 2 { 2 } else { 1 };
            *slot = operation(
                net,
                &format!("{n}.node{node}.op{side}"),
                states[idx],
                op,
                stride,
                c,
            )?;
        }
        states.push(net.add(&format!("{n}.node{node}"), pair[0], pair[1])?);
    }
    net.concat(&format!("{n}.concat"), &states[2..], 1)
}

fn build(size: u64) -> NetResult<Module> {
    const C: u64 = 48;
    const LAYERS: usize = 14;
    let mut net = Net::new("darts_imagenet");
    let input = net.input("input", &[1, 3, size, size])?;
    let s = net.conv(
        "stem0.conv1",
        input,
        &Conv::new(C / 2, 3).stride(2).pad(1).relu(),
    )?;
    let s0 = net.conv("stem0.conv2", s, &Conv::new(C, 3).stride(2).pad(1))?;
    let h = net.unary("stem1.relu", s0, UnaryOp::Relu)?;
    let s1 = net.conv("stem1.conv", h, &Conv::new(C, 3).stride(2).pad(1))?;
    let (mut s0, mut s1) = (s0, s1);
    let mut c = C;
    let mut reduction_prev = true;
    for i in 0..LAYERS {
        let reduction = i == LAYERS / 3 || i == 2 * LAYERS / 3;
        if reduction {
            c *= 2;
        }
        let out = cell(
            &mut net,
            &format!("cell{i}"),
            s0,
            s1,
            c,
            reduction,
            reduction_prev,
        )?;
        reduction_prev = reduction;
        s0 = s1;
        s1 = out;
    }
    // 7x7 at 224: the whole final map.
    let [h, _] = net.hw(s1);
    let x = net.avg_pool("global_pooling", s1, h, 1, Padding::Valid)?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let x = net.dense("classifier", x, 1000, None)?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
