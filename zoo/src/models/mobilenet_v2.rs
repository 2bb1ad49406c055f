//! MobileNet v2 1.0 at 224×224 (Sandler et al. 2018), as TFLite's `mobilenet_v2_1.0_224`.

use crate::nn::{Conv, Net, NetResult, Padding};
use crate::{ModelSpec, PaperFigures};
use tir_ir::{Module, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "mobilenet_v2",
        file: "mobilenet_v2.tir",
        architecture: "MobileNet v2 1.0 (17 inverted-residual bottlenecks, ReLU6 fused)",
        paper: "Sandler et al., \"MobileNetV2: Inverted Residuals and Linear Bottlenecks\", 2018",
        input: "224x224x3",
        notes: &[
            "As TFLite's mobilenet_v2_1.0_224: bottlenecks per the paper's Table 2 (t, c, n, s),",
            "1x1 conv to 1280, 7x7 average pool, 1x1 logits conv (1001), reshape, softmax (output).",
        ],
        reference: Some(PaperFigures {
            naive: 26.313,
            offsets: 5.742,
            shared_objects: 6.604,
        }),
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the last stages run at
        // 2x2; at 32 they are 1x1 and the 3x3 depthwise block13_dw reads only padding off its
        // centre tap.
        test_size: 33,
        build,
    }
}

/// Table 2 of the paper: expansion t, output channels c, repeats n, first stride s.
pub const BOTTLENECKS: [(u64, u64, u64, u64); 7] = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
];

/// TF-slim's `_make_divisible`: round to a multiple of `d`, never below 90% of `v`.
pub fn make_divisible(v: f64, d: u64) -> u64 {
    let df = d as f64;
    let mut n = (((v + df / 2.0) / df).floor() as u64 * d).max(d);
    if (n as f64) < 0.9 * v {
        n += d;
    }
    n
}

/// The MobileNet v2 feature extractor up to the last bottleneck (320 × `depth_multiplier`
/// channels). With `output_stride`, later strides become atrous convolutions (DeepLab).
pub fn backbone(
    net: &mut Net,
    x: Value,
    depth_multiplier: f64,
    output_stride: Option<u64>,
) -> NetResult<Value> {
    let ch = |c: u64| make_divisible(c as f64 * depth_multiplier, 8);
    let mut x = net.conv("conv0", x, &Conv::new(ch(32), 3).stride(2).relu6())?;
    let mut stride = 2;
    let mut rate = 1;
    let mut block = 0;
    for &(t, c, n, s) in &BOTTLENECKS {
        let out = ch(c);
        for i in 0..n {
            let s = if i == 0 { s } else { 1 };
            // TF-slim mobilenet: once the output stride is reached, a stride becomes a rate.
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
            let name = format!("block{block}");
            let cin = net.channels(x);
            let mut h = x;
            if t != 1 {
                h = net.conv(&format!("{name}_expand"), h, &Conv::new(cin * t, 1).relu6())?;
            }
            h = net.conv(
                &format!("{name}_dw"),
                h,
                &Conv::depthwise(3)
                    .stride(layer_stride)
                    .dilation(layer_rate)
                    .relu6(),
            )?;
            h = net.conv(&format!("{name}_project"), h, &Conv::new(out, 1))?;
            if layer_stride == 1 && cin == out {
                h = net.add(&format!("{name}_add"), h, x)?;
            }
            x = h;
            block += 1;
        }
    }
    Ok(x)
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("mobilenet_v2");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = backbone(&mut net, input, 1.0, None)?;
    let x = net.conv("conv_last", x, &Conv::new(1280, 1).relu6())?;
    // 7x7 at 224: the whole final map.
    let [h, _] = net.hw(x);
    let x = net.avg_pool("avg_pool", x, h, 2, Padding::Valid)?;
    let x = net.conv("logits", x, &Conv::new(1001, 1))?;
    let x = net.reshape("logits.reshape", x, &[1, 1001])?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
