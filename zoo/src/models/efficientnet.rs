//! EfficientNet-B0 at 224×224 (Tan & Le 2019).

use crate::nn::{Conv, Net, NetResult};
use crate::ModelSpec;
use tir_ir::{Activation, Module, UnaryOp, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "efficientnet_b0",
        file: "efficientnet_b0.tir",
        architecture: "EfficientNet-B0 (16 MBConv blocks, squeeze-and-excite, swish)",
        paper: "Tan & Le, \"EfficientNet: Rethinking Model Scaling for Convolutional Neural Networks\", 2019",
        input: "224x224x3",
        notes: &[
            "The paper's Table 1: 3x3/2 conv 32, MBConv stages (expansion, kernel, stride,",
            "channels, repeats) (1,3,1,16,1) (6,3,2,24,2) (6,5,2,40,2) (6,3,2,80,3)",
            "(6,5,1,112,3) (6,5,2,192,4) (6,3,1,320,1), 1x1 conv 1280, global average pool,",
            "fully connected 1000, softmax (output). Swish is x * sigmoid(x), two ops as TFLite",
            "runs it; squeeze-and-excite reduces to input/4 channels and gates with a sigmoid.",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the last stages run at
        // 3x3; below, they are 2x2 and a tap of their 5x5 depthwise conv (block12) reads only
        // padding.
        test_size: 65,
        build,
    }
}

const STAGES: [(u64, u64, u64, u64, u64); 7] = [
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
];

fn swish(net: &mut Net, name: &str, x: Value) -> NetResult<Value> {
    let s = net.unary(&format!("{name}.sigmoid"), x, UnaryOp::Sigmoid)?;
    net.mul(&format!("{name}.swish"), x, s)
}

/// Squeeze-and-excite with a swish on the reduction, as EfficientNet defines it.
fn squeeze_excite(net: &mut Net, name: &str, x: Value, squeeze: u64) -> NetResult<Value> {
    let c = net.channels(x);
    let s = net.global_avg_pool(&format!("{name}.pool"), x)?;
    let s = net.conv(&format!("{name}.reduce"), s, &Conv::new(squeeze, 1))?;
    let s = swish(net, &format!("{name}.reduce"), s)?;
    let gate = net.conv(
        &format!("{name}.expand"),
        s,
        &Conv::new(c, 1).act(Activation::Sigmoid),
    )?;
    net.mul(&format!("{name}.scale"), x, gate)
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("efficientnet_b0");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = net.conv("stem", input, &Conv::new(32, 3).stride(2))?;
    let mut x = swish(&mut net, "stem", x)?;
    let mut block = 0;
    for &(e, k, s, out, repeats) in &STAGES {
        for r in 0..repeats {
            let n = format!("block{block}");
            let stride = if r == 0 { s } else { 1 };
            let cin = net.channels(x);
            let mut h = x;
            if e != 1 {
                h = net.conv(&format!("{n}.expand"), h, &Conv::new(cin * e, 1))?;
                h = swish(&mut net, &format!("{n}.expand"), h)?;
            }
            h = net.conv(&format!("{n}.dw"), h, &Conv::depthwise(k).stride(stride))?;
            h = swish(&mut net, &format!("{n}.dw"), h)?;
            h = squeeze_excite(&mut net, &format!("{n}.se"), h, (cin / 4).max(1))?;
            h = net.conv(&format!("{n}.project"), h, &Conv::new(out, 1))?;
            if stride == 1 && cin == out {
                h = net.add(&format!("{n}.add"), h, x)?;
            }
            x = h;
            block += 1;
        }
    }
    let x = net.conv("head", x, &Conv::new(1280, 1))?;
    let x = swish(&mut net, "head", x)?;
    let x = net.global_avg_pool("avgpool", x)?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let x = net.dense("fc", x, 1000, None)?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
