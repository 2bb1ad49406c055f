//! MobileNet v1 1.0 at 224×224 (Howard et al. 2017), as TFLite's `mobilenet_v1_1.0_224`.

use crate::nn::{Conv, Net, NetResult, Padding};
use crate::{ModelSpec, PaperFigures};
use tir_ir::{Module, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "mobilenet_v1",
        file: "mobilenet_v1.tir",
        architecture: "MobileNet v1 1.0 (13 depthwise-separable blocks, ReLU6 fused)",
        paper: "Howard et al., \"MobileNets: Efficient Convolutional Neural Networks for Mobile Vision Applications\", 2017",
        input: "224x224x3",
        notes: &[
            "As TFLite's mobilenet_v1_1.0_224: 27 conv/depthwise outputs, 7x7 average pool, 1x1 logits",
            "conv (1001 classes), reshape, softmax (the graph output).",
        ],
        reference: Some(PaperFigures {
            naive: 19.248,
            offsets: 4.594,
            shared_objects: 4.594,
        }),
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the last stage runs at
        // 2x2; at 32 it is 1x1 and the 3x3 depthwise conv12_dw reads only padding off its centre
        // tap.
        test_size: 33,
        build,
    }
}

/// The 13 depthwise-separable blocks: (pointwise output channels, depthwise stride).
pub const BLOCKS: [(u64, u64); 13] = [
    (64, 1),
    (128, 2),
    (128, 1),
    (256, 2),
    (256, 1),
    (512, 2),
    (512, 1),
    (512, 1),
    (512, 1),
    (512, 1),
    (512, 1),
    (1024, 2),
    (1024, 1),
];

/// The MobileNet v1 feature extractor. With `output_stride`, strides beyond it become atrous
/// (dilated) convolutions as in DeepLab/PoseNet.
pub fn backbone(net: &mut Net, x: Value, output_stride: Option<u64>) -> NetResult<Value> {
    let mut x = net.conv("conv0", x, &Conv::new(32, 3).stride(2).relu6())?;
    let mut stride = 2;
    let mut rate = 1;
    for (i, &(c, s)) in BLOCKS.iter().enumerate() {
        let (layer_stride, layer_rate) = match output_stride {
            Some(os) if s > 1 && stride >= os => {
                let r = rate;
                rate *= s;
                (1, r)
            }
            _ => {
                stride *= s;
                (s, rate)
            }
        };
        let n = i + 1;
        x = net.conv(
            &format!("conv{n}_dw"),
            x,
            &Conv::depthwise(3)
                .stride(layer_stride)
                .dilation(layer_rate)
                .relu6(),
        )?;
        x = net.conv(&format!("conv{n}_pw"), x, &Conv::new(c, 1).relu6())?;
    }
    Ok(x)
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("mobilenet_v1");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = backbone(&mut net, input, None)?;
    // 7x7 at 224: the whole final map.
    let [h, _] = net.hw(x);
    let x = net.avg_pool("avg_pool", x, h, 2, Padding::Valid)?;
    let x = net.conv("logits", x, &Conv::new(1001, 1))?;
    let x = net.reshape("logits.reshape", x, &[1, 1001])?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
