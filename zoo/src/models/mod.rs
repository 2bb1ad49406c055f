//! One file per model family. Each exposes `spec()`; [`all`] lists them, the seed paper's six
//! networks first.

pub mod blazeface;
pub mod deeplab_v3;
pub mod inception_v3;
pub mod mobilenet_v1;
pub mod mobilenet_v2;
pub mod posenet;

use crate::ModelSpec;

pub fn all() -> Vec<ModelSpec> {
    vec![
        mobilenet_v1::spec(),
        mobilenet_v2::spec(),
        deeplab_v3::spec(),
        inception_v3::spec(),
        posenet::spec(),
        blazeface::spec(),
    ]
}
