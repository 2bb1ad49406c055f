//! DeepLab v3 with a MobileNet v2 backbone at 257×257, as TFLite's `deeplabv3_257_mv_gpu`.

use super::mobilenet_v2;
use crate::nn::{Conv, Net, NetResult, Padding};
use crate::{ModelSpec, PaperFigures};
use tir_ir::Module;

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "deeplab_v3",
        file: "deeplab_v3.tir",
        architecture: "DeepLab v3, MobileNet v2 (depth 0.5) backbone, output stride 8, 21 classes",
        paper: "Chen et al., \"Rethinking Atrous Convolution for Semantic Image Segmentation\", 2017",
        input: "257x257x3",
        notes: &[
            "As TFLite's deeplabv3_257_mv_gpu (PASCAL VOC segmentation): MobileNet v2 with depth",
            "multiplier 0.5 up to the last bottleneck (160 channels), atrous from output stride 8",
            "(rates 2 and 4); ASPP as DeepLab builds it for MobileNet: image pooling (33x33 average",
            "pool, 1x1 conv 256, bilinear resize back) and a 1x1 conv 256 branch, concat, 1x1",
            "projection 256, 1x1 logits (21), bilinear resize to 257x257 (the graph output).",
            "Remaining difference: both lower bounds match the paper exactly, but the naive total is",
            "1.441 MiB (about 3%) above it. The bounds pin down the tensors around the peaks (the",
            "129x129 stem, the head); the surplus lies in tensors that are never at a peak, most",
            "likely the 33x33 tail of the backbone, which the converted file must hold in fewer",
            "tensors (e.g. fused residual adds); the exact graph of the TFLite file is not public.",
        ],
        reference: Some(PaperFigures {
            naive: 48.642,
            offsets: 4.320,
            shared_objects: 6.105,
        }),
        size: 257,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): the atrous features are
        // 5x5; at 32 they are 4x4 and the rate-4 3x3 depthwise block14_dw has a tap that reads
        // only padding.
        test_size: 33,
        build,
    }
}

fn build(size: u64) -> NetResult<Module> {
    let mut net = Net::new("deeplab_v3");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = mobilenet_v2::backbone(&mut net, input, 0.5, Some(8))?;
    let [h, w] = net.hw(x);
    let pool = net.avg_pool("image_pooling.pool", x, h, 1, Padding::Valid)?;
    let pool = net.conv("image_pooling", pool, &Conv::new(256, 1).relu())?;
    let pool = net.resize_bilinear("image_pooling.resize", pool, [h, w], true)?;
    let aspp0 = net.conv("aspp0", x, &Conv::new(256, 1).relu())?;
    let x = net.concat("aspp.concat", &[pool, aspp0], 1)?;
    let x = net.conv("concat_projection", x, &Conv::new(256, 1).relu())?;
    let x = net.conv("logits", x, &Conv::new(21, 1))?;
    let y = net.resize_bilinear("logits.resize", x, [size, size], true)?;
    Ok(net.finish(&[y]))
}
