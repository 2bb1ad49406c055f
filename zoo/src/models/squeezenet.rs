//! SqueezeNet 1.0 at 224×224 (Iandola et al. 2016).

use crate::nn::{Conv, Net, NetResult};
use crate::ModelSpec;
use tir_ir::{Module, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "squeezenet",
        file: "squeezenet.tir",
        architecture: "SqueezeNet 1.0 (8 fire modules, ReLU fused)",
        paper: "Iandola et al., \"SqueezeNet: AlexNet-level accuracy with 50x fewer parameters and <0.5MB model size\", 2016",
        input: "224x224x3",
        notes: &[
            "As the paper's Table 1 / torchvision squeezenet1_0: 7x7/2 conv 96, ceil-mode 3x3/2 max",
            "pools after conv1, fire4 and fire8; fire = 1x1 squeeze, then 1x1 and 3x3 expands",
            "concatenated; 1x1 conv 1000 with ReLU, global average pool, reshape, softmax (output).",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): fire9 runs at 3x3 after
        // the VALID stem and three ceil-mode pools; below, it is 2x2 or less and a tap of its 3x3
        // expand conv reads only padding.
        test_size: 37,
        build,
    }
}

fn fire(net: &mut Net, name: &str, x: Value, s: u64, e: u64) -> NetResult<Value> {
    let sq = net.conv(&format!("{name}.squeeze"), x, &Conv::new(s, 1).relu())?;
    let e1 = net.conv(&format!("{name}.expand1x1"), sq, &Conv::new(e, 1).relu())?;
    let e3 = net.conv(
        &format!("{name}.expand3x3"),
        sq,
        &Conv::new(e, 3).pad(1).relu(),
    )?;
    net.concat(&format!("{name}.concat"), &[e1, e3], 1)
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("squeezenet");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = net.conv("conv1", input, &Conv::new(96, 7).stride(2).valid().relu())?;
    let x = net.max_pool_ceil("maxpool1", x, 3, 2, 0)?;
    let x = fire(&mut net, "fire2", x, 16, 64)?;
    let x = fire(&mut net, "fire3", x, 16, 64)?;
    let x = fire(&mut net, "fire4", x, 32, 128)?;
    let x = net.max_pool_ceil("maxpool4", x, 3, 2, 0)?;
    let x = fire(&mut net, "fire5", x, 32, 128)?;
    let x = fire(&mut net, "fire6", x, 48, 192)?;
    let x = fire(&mut net, "fire7", x, 48, 192)?;
    let x = fire(&mut net, "fire8", x, 64, 256)?;
    let x = net.max_pool_ceil("maxpool8", x, 3, 2, 0)?;
    let x = fire(&mut net, "fire9", x, 64, 256)?;
    let x = net.conv("conv10", x, &Conv::new(1000, 1).relu())?;
    let x = net.global_avg_pool("avgpool", x)?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
