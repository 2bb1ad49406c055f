//! A small U-Net at 128×128 (Ronneberger et al. 2015).

use crate::nn::{Conv, Net, NetResult, Padding};
use crate::ModelSpec;
use tir_ir::{Module, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "unet_small",
        file: "unet_small.tir",
        architecture: "Small U-Net (4 levels, 16 base channels, same-padded convs)",
        paper: "Ronneberger et al., \"U-Net: Convolutional Networks for Biomedical Image Segmentation\", 2015",
        input: "128x128x1",
        notes: &[
            "The paper's shape at a quarter of its width and with same padding: per level two",
            "3x3 convs (ReLU), 2x2 max pool; channels 16-32-64-128, bottleneck 256; the decoder",
            "upsamples (nearest x2 then 3x3 conv halving channels: the up-convolution), concatenates",
            "the skip connection, two 3x3 convs; a final 1x1 conv gives 2 class maps (the output).",
            "The long-lived skip tensors make the bounds order-sensitive.",
        ],
        reference: None,
        size: 128,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the bottleneck runs at
        // 2x2; below, the four 2x2 pools leave it 1x1 and its 3x3 convs read only padding off
        // their centre tap.
        test_size: 32,
        build,
    }
}

fn double_conv(net: &mut Net, name: &str, x: Value, c: u64) -> NetResult<Value> {
    let h = net.conv(&format!("{name}.conv1"), x, &Conv::new(c, 3).pad(1).relu())?;
    net.conv(&format!("{name}.conv2"), h, &Conv::new(c, 3).pad(1).relu())
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("unet_small");
    let input = net.input("input", &[1, 1, size, size])?;
    let mut x = input;
    let mut skips = Vec::new();
    for (i, c) in [16, 32, 64, 128].into_iter().enumerate() {
        let h = double_conv(&mut net, &format!("down{i}"), x, c)?;
        skips.push(h);
        x = net.max_pool(&format!("down{i}.pool"), h, 2, 2, Padding::Valid)?;
    }
    x = double_conv(&mut net, "bottleneck", x, 256)?;
    for (i, skip) in skips.into_iter().enumerate().rev() {
        let c = net.channels(skip);
        let hw = net.hw(skip);
        let up = net.resize_nearest(&format!("up{i}.upsample"), x, hw)?;
        let up = net.conv(&format!("up{i}.upconv"), up, &Conv::new(c, 3).pad(1).relu())?;
        let h = net.concat(&format!("up{i}.concat"), &[skip, up], 1)?;
        x = double_conv(&mut net, &format!("up{i}"), h, c)?;
    }
    let y = net.conv("classifier", x, &Conv::new(2, 1))?;
    Ok(net.finish(&[y]))
}
