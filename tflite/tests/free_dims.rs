//! Free dims (a `-1` in `shape_signature`) through the operators whose IR ops have symbolic
//! shape rules: a free height and width through SAME stride-1 and VALID strided convolutions
//! and pools and CONCATENATION, a free batch through FULLY_CONNECTED. At every shape the
//! symbolic import, specialised, gives bitwise the outputs of the static import of the same
//! model at that shape; SAME padding with a stride on a free axis is refused (its pads would
//! depend on the dim).

mod common;

use common::*;
use tir_tflite::schema::{ActivationFunctionType as Act, BuiltinOperator as B, Padding};
use tir_tflite::ImportOptions;

fn import(bytes: &[u8]) -> Result<tir_tflite::Imported, String> {
    tir_tflite::import_bytes(bytes, &ImportOptions::default()).map_err(|e| e.to_string())
}

/// Runs `imported` on the interpreter at the input `shape` (specialised at `dims` first when
/// dynamic); the output's shape and bits.
fn run(
    imported: &tir_tflite::Imported,
    dims: &[(&str, u64)],
    shape: &[u64],
    x: &[f32],
) -> (Vec<u64>, Vec<u32>) {
    let module = if imported.module.funcs[0].is_dynamic() {
        let mut b = tir_ir::Bindings::new();
        for &(n, v) in dims {
            b.insert(n.to_string(), v);
        }
        tir_ir::specialize(&imported.module, &b).unwrap_or_else(|e| panic!("{e:?}"))
    } else {
        imported.module.clone()
    };
    let st = imported.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&module, &st).unwrap();
    let input = tir_interp::Tensor::f32(shape.to_vec(), x.to_vec()).unwrap();
    let out = tir_interp::run(&module, &weights, &[input]).unwrap_or_else(|e| panic!("{e}"));
    let bits = out[0]
        .as_f32()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    (out[0].shape().to_vec(), bits)
}

#[test]
fn a_free_height_and_width_stay_symbolic() {
    let imported = import(&free_hw_model(8, 8, true)).unwrap();
    let text = tir_ir::print(&imported.module);
    assert!(imported.module.funcs[0].is_dynamic(), "{text}");
    assert!(
        text.contains("%x: tensor<1x{x.d1}x{x.d2}x3xf32>"),
        "the input keeps its free H and W:\n{text}"
    );
    for op in ["conv2d", "max_pool", "avg_pool", "concat"] {
        assert!(text.contains(op), "{op} imported:\n{text}");
    }
    for stat in ["x8x8x", "x3x3x8"] {
        assert!(!text.contains(stat), "nothing at the file's 8×8:\n{text}");
    }
}

#[test]
fn every_height_and_width_match_the_static_import() {
    let free = import(&free_hw_model(8, 8, true)).unwrap();
    for (h, w) in [(8u64, 8u64), (3, 3), (5, 11), (12, 7)] {
        let shape = [1, h, w, 3];
        let x = values((h * w * 3) as usize, 30 + h * w);
        let stat = import(&free_hw_model(h as i32, w as i32, false)).unwrap();
        let want = run(&stat, &[], &shape, &x);
        assert_eq!(want.0, [1, (h - 3) / 2 + 1, (w - 3) / 2 + 1, 8]);
        let got = run(&free, &[("x.d1", h), ("x.d2", w)], &shape, &x);
        assert_eq!(got, want, "{h}×{w}: the symbolic import");
    }
}

#[test]
fn fully_connected_takes_a_free_batch() {
    let free = import(&free_batch_fc_model(1, true)).unwrap();
    let text = tir_ir::print(&free.module);
    assert!(text.contains("%x: tensor<{x.d0}x2x2x3xf32>"), "{text}");
    assert!(text.contains("gemm"), "{text}");
    for batch in [1u64, 2, 5] {
        let shape = [batch, 2, 2, 3];
        let x = values(batch as usize * 12, 40 + batch);
        let want = run(
            &import(&free_batch_fc_model(batch as i32, false)).unwrap(),
            &[],
            &shape,
            &x,
        );
        assert_eq!(want.0, [batch, 5]);
        let got = run(&free, &[("x.d0", batch)], &shape, &x);
        assert_eq!(got, want, "batch {batch}");
    }
}

/// CONV_2D or a pool, SAME, stride 2 on a free height: refused naming the operator, the
/// stride and the dim; pinned, it imports.
#[test]
fn same_padding_with_a_stride_on_a_free_dim_is_refused() {
    for pool in [false, true] {
        let mut m = Spec::default();
        let tx = m.input("x", &[1, 8, 8, 3]);
        m.tensors[tx as usize].signature = Some(vec![1, -1, 8, 3]);
        let ty = m.act("y", &[1, 4, 4, 3]);
        let name = if pool {
            m.op(
                B::MAX_POOL_2D,
                &[tx],
                &[ty],
                Opts::Pool {
                    padding: Padding::SAME,
                    stride: [2, 2],
                    filter: [3, 3],
                    act: Act::NONE,
                },
            );
            "MAX_POOL_2D"
        } else {
            let tf = m.f32("f", &[3, 3, 3, 3], &values(81, 1));
            m.op(
                B::CONV_2D,
                &[tx, tf],
                &[ty],
                Opts::Conv {
                    padding: Padding::SAME,
                    stride: [2, 2],
                    dilation: [1, 1],
                    act: Act::NONE,
                },
            );
            "CONV_2D"
        };
        m.outputs.push(ty);
        let bytes = m.build();
        assert_eq!(
            import(&bytes).expect_err("refused"),
            format!(
                "operator 0 ({name}): tensor 0 `x` depends on the free dim `x.d1` (a `-1` in the \
                 input's `shape_signature`), and {name} pads a free H by SAME with stride 2, so \
                 its pads depend on the dim (tir's pads are static; only stride 1 or VALID keeps \
                 them fixed): tir's TFLite importer cannot express it for every value of `x.d1`; \
                 `--dim x.d1=8` (the extent of the file's static shapes) pins it"
            )
        );
        let opts = ImportOptions {
            dims: vec![("x.d1".into(), 8)],
            ..Default::default()
        };
        let pinned = tir_tflite::import_bytes(&bytes, &opts).expect("pinned, it imports");
        assert!(!pinned.module.funcs[0].is_dynamic());
    }
}
