//! A graph input whose `shape_signature` is `[-1, 8, 8, 3]` (a free batch): imported with the
//! symbolic dim `x.d0`, pinned by `--dim x.d0=N`, and at every batch equal to the static import
//! of the same model at that batch.

mod common;

use common::*;
use tir_tflite::ImportOptions;

/// The shared free-batch model (`common::free_batch_model`).
fn model(batch: i32, signature: Option<&[i32]>) -> Vec<u8> {
    free_batch_model(batch, signature)
}

fn import(bytes: &[u8], dims: &[(&str, u64)]) -> tir_tflite::Imported {
    let opts = ImportOptions {
        dims: dims.iter().map(|&(n, v)| (n.to_string(), v)).collect(),
        ..Default::default()
    };
    tir_tflite::import_bytes(bytes, &opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `module` (specialised at `x.d0 = batch` when dynamic) on the interpreter.
fn run(imported: &tir_tflite::Imported, batch: u64, x: &[f32]) -> Vec<f32> {
    let module = if imported.module.funcs[0].is_dynamic() {
        let mut b = tir_ir::Bindings::new();
        b.insert("x.d0".to_string(), batch);
        tir_ir::specialize(&imported.module, &b).unwrap_or_else(|e| panic!("{e:?}"))
    } else {
        imported.module.clone()
    };
    let st = imported.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&module, &st).unwrap();
    let input = tir_interp::Tensor::f32(vec![batch, 8, 8, 3], x.to_vec()).unwrap();
    let out = tir_interp::run(&module, &weights, &[input]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out[0].shape(), &[batch, 256]);
    out[0].as_f32().unwrap().to_vec()
}

#[test]
fn free_batch_is_symbolic() {
    let imported = import(&model(1, Some(&[-1, 8, 8, 3])), &[]);
    let text = tir_ir::print(&imported.module);
    assert!(imported.module.funcs[0].is_dynamic(), "{text}");
    assert!(
        text.contains("%x: tensor<{x.d0}x8x8x3xf32>"),
        "the input keeps its free batch:\n{text}"
    );
    assert!(
        text.contains("tensor<{x.d0}x256xf32>"),
        "the reshape's result follows it:\n{text}"
    );
    for stat in [
        "tensor<1x8x8",
        "tensor<1x3x8",
        "tensor<1x4x8",
        "tensor<1x256",
    ] {
        assert!(!text.contains(stat), "nothing at the static batch:\n{text}");
    }
}

#[test]
fn dim_pins_the_batch() {
    let bytes = model(1, Some(&[-1, 8, 8, 3]));
    let pinned = import(&bytes, &[("x.d0", 3)]);
    let text = tir_ir::print(&pinned.module);
    assert!(!pinned.module.funcs[0].is_dynamic(), "{text}");
    assert!(text.contains("%x: tensor<3x8x8x3xf32>"), "{text}");
    assert!(text.contains("tensor<3x256xf32>"), "{text}");
    // Pinned at the file's own extent, the import is the static one.
    let at_file = tir_ir::print(&import(&bytes, &[("x.d0", 1)]).module);
    assert_eq!(at_file, tir_ir::print(&import(&model(1, None), &[]).module));
}

#[test]
fn an_unknown_dim_name_is_refused() {
    let opts = ImportOptions {
        dims: vec![("batch".into(), 2)],
        ..Default::default()
    };
    let e = tir_tflite::import_bytes(&model(1, Some(&[-1, 8, 8, 3])), &opts)
        .expect_err("an unused --dim is refused")
        .to_string();
    assert_eq!(
        e,
        "--dim batch: no graph input has a free dim (`-1` in its `shape_signature`) of that name (the free dims: x.d0)"
    );
}

#[test]
fn a_signature_without_minus_one_imports_as_before() {
    let with = tir_ir::print(&import(&model(1, Some(&[1, 8, 8, 3])), &[]).module);
    let without = tir_ir::print(&import(&model(1, None), &[]).module);
    assert_eq!(with, without);
}

/// At batch 1 and 3 the symbolic import, the pinned import and the static import of the same
/// model at that batch give bitwise the same outputs.
#[test]
fn every_batch_matches_the_static_import() {
    let free = import(&model(1, Some(&[-1, 8, 8, 3])), &[]);
    for batch in [1u64, 3] {
        let x = values(batch as usize * 8 * 8 * 3, 10 + batch);
        let want = run(&import(&model(batch as i32, None), &[]), batch, &x);
        let got = run(&free, batch, &x);
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "batch {batch}: symbolic import"
        );
        let pinned = import(&model(1, Some(&[-1, 8, 8, 3])), &[("x.d0", batch)]);
        let got = run(&pinned, batch, &x);
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "batch {batch}: pinned import"
        );
    }
}
