//! NASNet-A mobile (4 @ 1056) at 224×224 (Zoph et al. 2018), TF-slim's `nasnet_a_mobile`.

use crate::nn::{Conv, Net, NetResult, Padding};
use crate::ModelSpec;
use tir_ir::{Module, UnaryOp, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "nasnet_a_mobile",
        file: "nasnet_a_mobile.tir",
        architecture: "NASNet-A mobile 4@1056 (12 normal + 2 reduction cells, 2 stem cells, 44 filters)",
        paper: "Zoph et al., \"Learning Transferable Architectures for Scalable Image Recognition\", 2018",
        input: "224x224x3",
        notes: &[
            "TF-slim nasnet_a_mobile: 3x3/2 VALID stem conv 32, two reduction stem cells (filter",
            "scaling 1/4, 1/2), three stacks of 4 normal cells with reduction cells between",
            "(44, 88, 176 filters per branch), ReLU, global average pool, fully connected 1001,",
            "softmax. Cells follow nasnet_utils: each cell 1x1-projects its inputs (factorized",
            "reduction when the previous input is larger), builds 5 blocks from the NASNet-A",
            "operations (two stacked ReLU + separable conv layers, 3x3 pools, identity) and",
            "concatenates the unused hidden states. Batch norm is folded; ReLUs are ops because",
            "they precede the convs (pre-activation). No auxiliary head (inference).",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the last cells run at 4x4
        // after the VALID stem; below, a tap of the 5x5/7x7 separable convs of reduction_cell_1
        // reads only padding.
        test_size: 99,
        build,
    }
}

struct CellDef {
    ops: [&'static str; 10],
    used: [bool; 7],
    indices: [usize; 10],
}

const NORMAL: CellDef = CellDef {
    ops: [
        "sep5", "sep3", "sep5", "sep3", "avg3", "none", "avg3", "avg3", "sep3", "none",
    ],
    used: [true, false, false, false, false, false, false],
    indices: [0, 1, 1, 1, 0, 1, 1, 1, 0, 0],
};

const REDUCTION: CellDef = CellDef {
    ops: [
        "sep5", "sep7", "max3", "sep7", "avg3", "sep5", "none", "avg3", "sep3", "max3",
    ],
    used: [true, true, true, false, false, false, false],
    indices: [0, 1, 0, 1, 0, 1, 3, 2, 2, 0],
};

/// slim `factorized_reduction`: two stride-2 1x1 paths, the second shifted by one pixel.
fn factorized_reduction(
    net: &mut Net,
    n: &str,
    x: Value,
    out: u64,
    stride: u64,
) -> NetResult<Value> {
    if stride == 1 {
        return net.conv(&format!("{n}.conv"), x, &Conv::new(out, 1).no_bias());
    }
    let p1 = net.avg_pool(&format!("{n}.path1.pool"), x, 1, 2, Padding::Valid)?;
    let p1 = net.conv(&format!("{n}.path1.conv"), p1, &Conv::new(out / 2, 1))?;
    let [h, w] = net.hw(x);
    let p2 = net.pad(&format!("{n}.path2.pad"), x, &[0, 0, 0, 0, 0, 0, 1, 1])?;
    let p2 = net.op(
        &format!("{n}.path2.shift"),
        tir_ir::Op::Slice(tir_ir::op::Slice {
            starts: vec![1, 1],
            ends: vec![h as i64 + 1, w as i64 + 1],
            axes: vec![2, 3],
            steps: vec![1, 1],
        }),
        &[p2],
    )?;
    let p2 = net.avg_pool(&format!("{n}.path2.pool"), p2, 1, 2, Padding::Valid)?;
    let p2 = net.conv(&format!("{n}.path2.conv"), p2, &Conv::new(out - out / 2, 1))?;
    net.concat(&format!("{n}.concat"), &[p1, p2], 1)
}

fn relu_conv1x1(net: &mut Net, n: &str, x: Value, out: u64) -> NetResult<Value> {
    let h = net.unary(&format!("{n}.relu"), x, UnaryOp::Relu)?;
    net.conv(&format!("{n}.conv"), h, &Conv::new(out, 1))
}

fn apply_op(
    net: &mut Net,
    n: &str,
    x: Value,
    op: &str,
    stride: u64,
    filters: u64,
) -> NetResult<Value> {
    let cin = net.channels(x);
    match op {
        "sep3" | "sep5" | "sep7" => {
            let k = match op {
                "sep3" => 3,
                "sep5" => 5,
                _ => 7,
            };
            let mut h = x;
            let mut s = stride;
            for layer in 1..=2 {
                h = net.unary(&format!("{n}.relu{layer}"), h, UnaryOp::Relu)?;
                h = net.conv(
                    &format!("{n}.sep{layer}.dw"),
                    h,
                    &Conv::depthwise(k).stride(s).no_bias(),
                )?;
                h = net.conv(&format!("{n}.sep{layer}.pw"), h, &Conv::new(filters, 1))?;
                s = 1;
            }
            Ok(h)
        }
        "avg3" | "max3" => {
            let h = if op == "avg3" {
                net.avg_pool(&format!("{n}.pool"), x, 3, stride, Padding::Same)?
            } else {
                net.max_pool(&format!("{n}.pool"), x, 3, stride, Padding::Same)?
            };
            if cin != filters {
                net.conv(&format!("{n}.proj"), h, &Conv::new(filters, 1))
            } else {
                Ok(h)
            }
        }
        _ => {
            if stride > 1 || cin != filters {
                let h = net.unary(&format!("{n}.relu"), x, UnaryOp::Relu)?;
                net.conv(
                    &format!("{n}.conv"),
                    h,
                    &Conv::new(filters, 1).stride(stride).valid(),
                )
            } else {
                Ok(x)
            }
        }
    }
}

fn cell(
    net: &mut Net,
    n: &str,
    def: &CellDef,
    x: Value,
    prev: Option<Value>,
    filters: u64,
    stride: u64,
) -> NetResult<Value> {
    // _reduce_prev_layer
    let prev = match prev {
        None => x,
        Some(p) if net.hw(p) != net.hw(x) => {
            let h = net.unary(&format!("{n}.prev.relu"), p, UnaryOp::Relu)?;
            factorized_reduction(net, &format!("{n}.prev.reduce"), h, filters, 2)?
        }
        Some(p) if net.channels(p) != filters => {
            relu_conv1x1(net, &format!("{n}.prev"), p, filters)?
        }
        Some(p) => p,
    };
    let cur = relu_conv1x1(net, &format!("{n}.base"), x, filters)?;
    let mut states = vec![cur, prev];
    for b in 0..5 {
        let mut pair = [cur; 2];
        for (side, slot) in pair.iter_mut().enumerate() {
            let i = 2 * b + side;
            let idx = def.indices[i];
            let s = if idx < 2 { stride } else { 1 };
            let side_name = if side == 0 { "left" } else { "right" };
            *slot = apply_op(
                net,
                &format!("{n}.comb{b}.{side_name}"),
                states[idx],
                def.ops[i],
                s,
                filters,
            )?;
        }
        states.push(net.add(&format!("{n}.comb{b}"), pair[0], pair[1])?);
    }
    // _combine_unused_states
    let last = states[states.len() - 1];
    let (final_hw, final_c) = (net.hw(last), net.channels(last));
    let mut unused = Vec::new();
    for (i, &h) in states.iter().enumerate() {
        if def.used[i] {
            continue;
        }
        let reduce_hw = net.hw(h) != final_hw;
        if reduce_hw || net.channels(h) != final_c {
            let s = if reduce_hw { 2 } else { 1 };
            unused.push(factorized_reduction(
                net,
                &format!("{n}.reduction{i}"),
                h,
                final_c,
                s,
            )?);
        } else {
            unused.push(h);
        }
    }
    net.concat(&format!("{n}.concat"), &unused, 1)
}

fn build(size: u64) -> NetResult<Module> {
    const FILTERS: f64 = 44.0;
    let mut net = Net::new("nasnet_a_mobile");
    let input = net.input("input", &[1, 3, size, size])?;
    let stem = net.conv("stem.conv", input, &Conv::new(32, 3).stride(2).valid())?;
    let mut outputs: Vec<Option<Value>> = vec![None, Some(stem)];
    let mut x = stem;
    let mut scaling = 0.25;
    for c in 0..2 {
        let prev = outputs[outputs.len() - 2];
        let f = (FILTERS * scaling) as u64;
        x = cell(
            &mut net,
            &format!("cell_stem_{c}"),
            &REDUCTION,
            x,
            prev,
            f,
            2,
        )?;
        outputs.push(Some(x));
        scaling *= 2.0;
    }
    let mut scaling = 1.0;
    for c in 0..12 {
        if c == 4 || c == 8 {
            scaling *= 2.0;
            let prev = outputs[outputs.len() - 2];
            let f = (FILTERS * scaling) as u64;
            x = cell(
                &mut net,
                &format!("reduction_cell_{}", c / 4 - 1),
                &REDUCTION,
                x,
                prev,
                f,
                2,
            )?;
            outputs.push(Some(x));
        }
        let prev = outputs[outputs.len() - 2];
        let f = (FILTERS * scaling) as u64;
        x = cell(&mut net, &format!("cell_{c}"), &NORMAL, x, prev, f, 1)?;
        outputs.push(Some(x));
    }
    let x = net.unary("head.relu", x, UnaryOp::Relu)?;
    let x = net.global_avg_pool("avgpool", x)?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let x = net.dense("logits", x, 1001, None)?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
