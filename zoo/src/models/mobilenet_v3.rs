//! MobileNet v3 small at 224×224 (Howard et al. 2019).

use super::mobilenet_v2::make_divisible;
use crate::nn::{Conv, Net, NetResult};
use crate::ModelSpec;
use tir_ir::{Activation, Module, Op, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "mobilenet_v3_small",
        file: "mobilenet_v3_small.tir",
        architecture: "MobileNet v3 small 1.0 (11 bottlenecks, squeeze-and-excite, hard-swish)",
        paper: "Howard et al., \"Searching for MobileNetV3\", 2019",
        input: "224x224x3",
        notes: &[
            "The paper's Table 2: 3x3/2 conv 16 (h-swish), 11 bottlenecks (kernel, expansion,",
            "output, SE, activation, stride), 1x1 conv 576 (h-swish), global average pool, 1x1",
            "conv 1024 (h-swish), 1x1 conv 1000, reshape, softmax (output). Squeeze-and-excite:",
            "global average pool, 1x1 conv (ReLU) to expansion/4 (rounded to 8), 1x1 conv,",
            "hard-sigmoid (relu6(x + 3) / 6), multiply.",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the last bottlenecks run
        // at 3x3; below, they are 2x2 and a tap of their 5x5 depthwise conv (bneck9) reads only
        // padding.
        test_size: 65,
        build,
    }
}

/// (kernel, expansion, output, squeeze-excite, hard-swish, stride) of the paper's Table 2.
const BNECKS: [(u64, u64, u64, bool, bool, u64); 11] = [
    (3, 16, 16, true, false, 2),
    (3, 72, 24, false, false, 2),
    (3, 88, 24, false, false, 1),
    (5, 96, 40, true, true, 2),
    (5, 240, 40, true, true, 1),
    (5, 240, 40, true, true, 1),
    (5, 120, 48, true, true, 1),
    (5, 144, 48, true, true, 1),
    (5, 288, 96, true, true, 2),
    (5, 576, 96, true, true, 1),
    (5, 576, 96, true, true, 1),
];

/// Squeeze-and-excite as TFLite runs it: pool, two 1x1 convs, gate, multiply.
pub fn squeeze_excite(
    net: &mut Net,
    name: &str,
    x: Value,
    squeeze: u64,
    hard_gate: bool,
) -> NetResult<Value> {
    let c = net.channels(x);
    let s = net.global_avg_pool(&format!("{name}.pool"), x)?;
    let s = net.conv(&format!("{name}.reduce"), s, &Conv::new(squeeze, 1).relu())?;
    let gate = if hard_gate {
        let s = net.conv(&format!("{name}.expand"), s, &Conv::new(c, 1))?;
        let op = Op::HardSigmoid {
            alpha: 1.0 / 6.0,
            beta: 0.5,
        };
        net.op(&format!("{name}.gate"), op, &[s])?
    } else {
        net.conv(
            &format!("{name}.expand"),
            s,
            &Conv::new(c, 1).act(Activation::Sigmoid),
        )?
    };
    net.mul(&format!("{name}.scale"), x, gate)
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("mobilenet_v3_small");
    let input = net.input("input", &[1, 3, size, size])?;
    let hs = Activation::HardSwish;
    let mut x = net.conv("conv0", input, &Conv::new(16, 3).stride(2).act(hs))?;
    for (i, &(k, exp, out, se, hswish, s)) in BNECKS.iter().enumerate() {
        let n = format!("bneck{i}");
        let act = if hswish { hs } else { Activation::Relu };
        let cin = net.channels(x);
        let mut h = x;
        if exp != cin {
            h = net.conv(&format!("{n}.expand"), h, &Conv::new(exp, 1).act(act))?;
        }
        h = net.conv(
            &format!("{n}.dw"),
            h,
            &Conv::depthwise(k).stride(s).act(act),
        )?;
        if se {
            let sq = make_divisible(exp as f64 / 4.0, 8);
            h = squeeze_excite(&mut net, &format!("{n}.se"), h, sq, true)?;
        }
        h = net.conv(&format!("{n}.project"), h, &Conv::new(out, 1))?;
        if s == 1 && cin == out {
            h = net.add(&format!("{n}.add"), h, x)?;
        }
        x = h;
    }
    let x = net.conv("conv_last", x, &Conv::new(576, 1).act(hs))?;
    let x = net.global_avg_pool("avgpool", x)?;
    let x = net.conv("conv_head", x, &Conv::new(1024, 1).act(hs))?;
    let x = net.conv("logits", x, &Conv::new(1000, 1))?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
