//! ResNet-50 at 224×224 (He et al. 2016), torchvision layout (stride on the 3×3, "v1.5").

use crate::nn::{Conv, Net, NetResult, Padding};
use crate::ModelSpec;
use tir_ir::{Activation, BinaryOp, Module, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "resnet50",
        file: "resnet50.tir",
        architecture: "ResNet-50 (bottleneck blocks [3, 4, 6, 3], batch norm folded, ReLU fused)",
        paper: "He et al., \"Deep Residual Learning for Image Recognition\", 2016",
        input: "224x224x3",
        notes: &[
            "torchvision layout: the stride of a downsampling block sits on its 3x3 conv (v1.5);",
            "projection shortcuts (1x1 conv) on the first block of each stage; the residual add",
            "carries the ReLU; global average pool, fully connected 1000, softmax (the output).",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): layer4 runs at 2x2; at 32
        // it is 1x1 and the 3x3 conv of layer4.0 reads only padding off its centre tap.
        test_size: 33,
        build,
    }
}

fn bottleneck(net: &mut Net, name: &str, x: Value, width: u64, stride: u64) -> NetResult<Value> {
    let out = width * 4;
    let h = net.conv(&format!("{name}.conv1"), x, &Conv::new(width, 1).relu())?;
    let h = net.conv(
        &format!("{name}.conv2"),
        h,
        &Conv::new(width, 3).stride(stride).pad(1).relu(),
    )?;
    let h = net.conv(&format!("{name}.conv3"), h, &Conv::new(out, 1))?;
    let skip = if stride != 1 || net.channels(x) != out {
        net.conv(
            &format!("{name}.downsample"),
            x,
            &Conv::new(out, 1).stride(stride).valid(),
        )?
    } else {
        x
    };
    net.binary(
        &format!("{name}.add"),
        BinaryOp::Add,
        h,
        skip,
        Some(Activation::Relu),
    )
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("resnet50");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = net.conv("conv1", input, &Conv::new(64, 7).stride(2).pad(3).relu())?;
    let mut x = net.max_pool("maxpool", x, 3, 2, Padding::Explicit([1; 4]))?;
    for (stage, &(width, blocks, stride)) in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]
        .iter()
        .enumerate()
    {
        for b in 0..blocks {
            let s = if b == 0 { stride } else { 1 };
            x = bottleneck(&mut net, &format!("layer{}.{b}", stage + 1), x, width, s)?;
        }
    }
    let x = net.global_avg_pool("avgpool", x)?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let x = net.dense("fc", x, 1000, None)?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
