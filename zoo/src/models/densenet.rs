//! DenseNet-121 at 224×224 (Huang et al. 2017).

use crate::nn::{Conv, Net, NetResult, Padding};
use crate::ModelSpec;
use tir_ir::{Module, Op, UnaryOp, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "densenet121",
        file: "densenet121.tir",
        architecture: "DenseNet-121 (dense blocks [6, 12, 24, 16], growth 32, bottleneck 4x, compression 0.5)",
        paper: "Huang et al., \"Densely Connected Convolutional Networks\", 2017",
        input: "224x224x3",
        notes: &[
            "torchvision layout, concat-heavy as frameworks execute it: every dense layer",
            "concatenates all earlier feature maps of its block, then BN-ReLU-1x1 conv (128) -",
            "BN-ReLU-3x3 conv (32). The pre-activation BN and ReLU on each concat stay ops (they",
            "cannot fold into a producer); the BN after each 1x1 conv is folded and its ReLU fused.",
            "Transitions: BN, ReLU, 1x1 conv halving channels, 2x2/2 average pool.",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): dense block 4 runs at
        // 2x2; below, it is 1x1 and the 3x3 convs read only padding off their centre tap.
        test_size: 61,
        build,
    }
}

fn bn_relu(net: &mut Net, name: &str, x: Value) -> NetResult<Value> {
    let c = net.channels(x);
    let mut operands = vec![x];
    for p in ["weight", "bias", "running_mean", "running_var"] {
        operands.push(net.weight(&format!("{name}.{p}"), &[c])?);
    }
    let h = net.op(name, Op::BatchNorm { epsilon: 1e-5 }, &operands)?;
    net.unary(&format!("{name}.relu"), h, UnaryOp::Relu)
}

fn dense_block(net: &mut Net, name: &str, x: Value, layers: usize) -> NetResult<Value> {
    let mut features = vec![x];
    for l in 1..=layers {
        let n = format!("{name}.layer{l}");
        let input = if features.len() == 1 {
            features[0]
        } else {
            net.concat(&format!("{n}.concat"), &features, 1)?
        };
        let h = bn_relu(net, &format!("{n}.norm1"), input)?;
        let h = net.conv(&format!("{n}.conv1"), h, &Conv::new(128, 1).relu())?;
        let h = net.conv(&format!("{n}.conv2"), h, &Conv::new(32, 3).pad(1).no_bias())?;
        features.push(h);
    }
    net.concat(&format!("{name}.concat"), &features, 1)
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("densenet121");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = net.conv("conv0", input, &Conv::new(64, 7).stride(2).pad(3).relu())?;
    let mut x = net.max_pool("pool0", x, 3, 2, Padding::Explicit([1; 4]))?;
    let blocks = [6, 12, 24, 16];
    for (i, &layers) in blocks.iter().enumerate() {
        x = dense_block(&mut net, &format!("denseblock{}", i + 1), x, layers)?;
        if i + 1 < blocks.len() {
            let n = format!("transition{}", i + 1);
            let h = bn_relu(&mut net, &format!("{n}.norm"), x)?;
            let c = net.channels(h) / 2;
            let h = net.conv(&format!("{n}.conv"), h, &Conv::new(c, 1).no_bias())?;
            x = net.avg_pool(&format!("{n}.pool"), h, 2, 2, Padding::Valid)?;
        }
    }
    let x = bn_relu(&mut net, "norm5", x)?;
    let x = net.global_avg_pool("avgpool", x)?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let x = net.dense("classifier", x, 1000, None)?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
