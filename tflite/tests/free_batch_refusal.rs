//! An operator that needs a static extent of a tensor whose shape depends on a free input dim
//! (a `-1` in `shape_signature`) is refused, naming the operator, the tensor and the dim, and
//! saying that `--dim` pins it; pinned, the model imports.

mod common;

use common::*;
use tir_tflite::schema::BuiltinOperator as B;
use tir_tflite::ImportOptions;

fn import(bytes: &[u8], dims: &[(&str, u64)]) -> Result<tir_tflite::Imported, String> {
    let opts = ImportOptions {
        dims: dims.iter().map(|&(n, v)| (n.to_string(), v)).collect(),
        ..Default::default()
    };
    tir_tflite::import_bytes(bytes, &opts).map_err(|e| e.to_string())
}

/// RELU → RESHAPE to the static `[1, 192]` (no `-1`): specialised to the file's batch.
fn static_reshape() -> Vec<u8> {
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 8, 8, 3]);
    m.tensors[tx as usize].signature = Some(vec![-1, 8, 8, 3]);
    let tr = m.act("r", &[1, 8, 8, 3]);
    m.op(B::RELU, &[tx], &[tr], Opts::None);
    let shape = m.i32("shape", &[2], &[1, 192]);
    let ty = m.act("flat", &[1, 192]);
    m.op(B::RESHAPE, &[tr, shape], &[ty], Opts::None);
    m.outputs.push(ty);
    m.build()
}

/// MEAN over the free batch (its reduction count depends on the dim).
fn mean_over_the_batch() -> Vec<u8> {
    let mut m = Spec::default();
    let tx = m.input("in:0", &[1, 4]);
    m.tensors[tx as usize].signature = Some(vec![-1, 4]);
    let axes = m.i32("axes", &[1], &[0]);
    let ty = m.act("y", &[4]);
    m.op(
        B::MEAN,
        &[tx, axes],
        &[ty],
        Opts::Reducer { keep_dims: false },
    );
    m.outputs.push(ty);
    m.build()
}

#[test]
fn a_static_reshape_of_a_free_batch_is_refused() {
    assert_eq!(
        import(&static_reshape(), &[]).expect_err("refused"),
        "operator 1 (RESHAPE): tensor 1 `r` depends on the free dim `x.d0` (a `-1` in the input's \
         `shape_signature`), and RESHAPE's new shape [1, 192] has no `-1` to take it: tir's \
         TFLite importer cannot express it for every value of `x.d0`; `--dim x.d0=1` (the \
         extent of the file's static shapes) pins it"
    );
    let pinned = import(&static_reshape(), &[("x.d0", 1)]).expect("pinned, it imports");
    assert!(!pinned.module.funcs[0].is_dynamic());
}

#[test]
fn mean_over_a_free_batch_is_refused() {
    assert_eq!(
        import(&mean_over_the_batch(), &[]).expect_err("refused"),
        "operator 0 (MEAN): tensor 0 `in:0` depends on the free dim `in_0.d0` (a `-1` in the \
         input's `shape_signature`), and MEAN needs its static shape: tir's TFLite importer \
         cannot express it for every value of `in_0.d0`; `--dim in_0.d0=1` (the extent of the \
         file's static shapes) pins it"
    );
    import(&mean_over_the_batch(), &[("in_0.d0", 1)]).expect("pinned at the file's batch");
    // Pinned at another batch, the operator is imported symbolically first, so it is refused
    // the same way (its static shapes hold at batch 1 only).
    assert!(import(&mean_over_the_batch(), &[("in_0.d0", 2)])
        .expect_err("refused")
        .starts_with("operator 0 (MEAN): "));
}
