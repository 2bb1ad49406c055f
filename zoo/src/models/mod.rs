//! One file per model family. Each exposes `spec()`; [`all`] lists them, the seed paper's six
//! networks first.

pub mod bert;
pub mod blazeface;
pub mod darts;
pub mod deeplab_v3;
pub mod densenet;
pub mod efficientnet;
pub mod googlenet;
pub mod inception_v3;
pub mod mobilenet_v1;
pub mod mobilenet_v2;
pub mod mobilenet_v3;
pub mod nasnet;
pub mod posenet;
pub mod randwire;
pub mod resnet;
pub mod squeezenet;
pub mod unet;

use crate::ModelSpec;

pub fn all() -> Vec<ModelSpec> {
    vec![
        mobilenet_v1::spec(),
        mobilenet_v2::spec(),
        deeplab_v3::spec(),
        inception_v3::spec(),
        posenet::spec(),
        blazeface::spec(),
        resnet::spec(),
        squeezenet::spec(),
        googlenet::spec(),
        densenet::spec(),
        mobilenet_v3::spec(),
        efficientnet::spec(),
        bert::spec(),
        unet::spec(),
        randwire::spec(),
        nasnet::spec(),
        darts::spec(),
    ]
}
