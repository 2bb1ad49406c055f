//! GoogLeNet (Inception v1) at 224×224 (Szegedy et al. 2015).

use crate::nn::{Conv, Net, NetResult, Padding};
use crate::ModelSpec;
use tir_ir::{Module, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "googlenet",
        file: "googlenet.tir",
        architecture:
            "GoogLeNet / Inception v1 (9 inception modules, ReLU fused, no auxiliary heads)",
        paper: "Szegedy et al., \"Going Deeper with Convolutions\", 2015",
        input: "224x224x3",
        notes: &[
            "The paper's Table 1: 7x7/2 conv 64, 3x3/2 max pool, 1x1 conv 64, 3x3 conv 192, pool,",
            "inception 3a-3b, pool, 4a-4e, pool, 5a-5b (branches 1x1 | 1x1>3x3 | 1x1>5x5 |",
            "3x3 max pool>1x1, concatenated), global average pool, fully connected 1000, softmax.",
            "Pools are ceil-mode (Caffe); the auxiliary classifiers are training-only and omitted.",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the inception 5 blocks
        // run at 3x3; below, they are 2x2 and a tap of their 5x5 branch reads only padding.
        test_size: 95,
        build,
    }
}

/// `(1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj)` of the paper's Table 1.
type Inception = (u64, u64, u64, u64, u64, u64);

fn inception(net: &mut Net, n: &str, x: Value, c: Inception) -> NetResult<Value> {
    let b0 = net.conv(&format!("{n}.b1x1"), x, &Conv::new(c.0, 1).relu())?;
    let b1 = net.conv(&format!("{n}.b3x3_reduce"), x, &Conv::new(c.1, 1).relu())?;
    let b1 = net.conv(&format!("{n}.b3x3"), b1, &Conv::new(c.2, 3).pad(1).relu())?;
    let b2 = net.conv(&format!("{n}.b5x5_reduce"), x, &Conv::new(c.3, 1).relu())?;
    let b2 = net.conv(&format!("{n}.b5x5"), b2, &Conv::new(c.4, 5).pad(2).relu())?;
    let b3 = net.max_pool(&format!("{n}.pool"), x, 3, 1, Padding::Explicit([1; 4]))?;
    let b3 = net.conv(&format!("{n}.pool_proj"), b3, &Conv::new(c.5, 1).relu())?;
    net.concat(&format!("{n}.concat"), &[b0, b1, b2, b3], 1)
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("googlenet");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = net.conv("conv1", input, &Conv::new(64, 7).stride(2).pad(3).relu())?;
    let x = net.max_pool_ceil("pool1", x, 3, 2, 0)?;
    let x = net.conv("conv2_reduce", x, &Conv::new(64, 1).relu())?;
    let x = net.conv("conv2", x, &Conv::new(192, 3).pad(1).relu())?;
    let x = net.max_pool_ceil("pool2", x, 3, 2, 0)?;
    let x = inception(&mut net, "inception_3a", x, (64, 96, 128, 16, 32, 32))?;
    let x = inception(&mut net, "inception_3b", x, (128, 128, 192, 32, 96, 64))?;
    let x = net.max_pool_ceil("pool3", x, 3, 2, 0)?;
    let x = inception(&mut net, "inception_4a", x, (192, 96, 208, 16, 48, 64))?;
    let x = inception(&mut net, "inception_4b", x, (160, 112, 224, 24, 64, 64))?;
    let x = inception(&mut net, "inception_4c", x, (128, 128, 256, 24, 64, 64))?;
    let x = inception(&mut net, "inception_4d", x, (112, 144, 288, 32, 64, 64))?;
    let x = inception(&mut net, "inception_4e", x, (256, 160, 320, 32, 128, 128))?;
    let x = net.max_pool_ceil("pool4", x, 3, 2, 0)?;
    let x = inception(&mut net, "inception_5a", x, (256, 160, 320, 32, 128, 128))?;
    let x = inception(&mut net, "inception_5b", x, (384, 192, 384, 48, 128, 128))?;
    let x = net.global_avg_pool("avgpool", x)?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let x = net.dense("fc", x, 1000, None)?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
