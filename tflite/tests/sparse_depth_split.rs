//! The operators the pruned mediapipe detectors need (face_detection_full_range_sparse,
//! pose_detection): a sparse float16 weight behind DENSIFY and DEQUANTIZE, DEPTH_TO_SPACE, and
//! SPLIT_V; each run on tir's interpreter against the computation written out here.

mod common;

use common::*;
use tir_tflite::schema::{ActivationFunctionType as Act, BuiltinOperator as B, TensorType};

/// A float16 weight `[4, 6]` stored sparse (rows dense, columns CSR) → DENSIFY → DEQUANTIZE →
/// FULLY_CONNECTED.
#[test]
fn sparse_fp16_weight_densify_dequantize_fully_connected() {
    #[rustfmt::skip]
    let dense: [f32; 24] = [
        0.5, 0.0, 0.0, -1.0, 0.0, 0.0,
        0.0, 0.0, 0.0,  0.0, 0.0, 0.0,
        0.0, 2.0, 0.25, 0.0, 0.0, 1.5,
        -0.75, 0.0, 0.0, 0.0, 3.0, 0.0,
    ];
    let nonzero: Vec<f32> = dense.iter().copied().filter(|&v| v != 0.0).collect();
    let x = values(6, 31);
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 6]);
    let bytes = nonzero
        .iter()
        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    let tw = m.tensor("w_sparse", &[4, 6], TensorType::FLOAT16, Some(bytes));
    m.tensors[tw as usize].sparsity = Some(SparseSpec {
        traversal_order: vec![0, 1],
        block_map: vec![],
        levels: vec![
            SparseLevel::Dense(4),
            SparseLevel::Csr(vec![0, 2, 2, 5, 7], vec![0, 3, 1, 2, 5, 0, 4]),
        ],
    });
    let td = m.tensor("w_f16", &[4, 6], TensorType::FLOAT16, None);
    m.op(B::DENSIFY, &[tw], &[td], Opts::None);
    let tq = m.act("w", &[4, 6]);
    m.op(B::DEQUANTIZE, &[td], &[tq], Opts::None);
    let ty = m.act("y", &[1, 4]);
    m.op(
        B::FULLY_CONNECTED,
        &[tx, tq, -1],
        &[ty],
        Opts::Fc { act: Act::NONE },
    );
    m.outputs.push(ty);

    let out = run_tir(&m.build(), &[(vec![1, 6], x.clone())]);
    let want: Vec<f32> = (0..4)
        .map(|o| (0..6).map(|i| dense[o * 6 + i] * x[i]).sum())
        .collect();
    assert_eq!(out[0].0, vec![1, 4]);
    assert_close(&out[0].1, &want);
}

/// A sparse weight whose layout sends a value outside the tensor is refused, naming it.
#[test]
fn a_malformed_sparse_weight_is_a_diagnostic() {
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 2]);
    let tw = m.f32("w_sparse", &[2, 2], &[1.0, 2.0]);
    m.tensors[tw as usize].sparsity = Some(SparseSpec {
        traversal_order: vec![0, 1],
        block_map: vec![],
        levels: vec![
            SparseLevel::Dense(2),
            SparseLevel::Csr(vec![0, 1, 2], vec![0, 9]),
        ],
    });
    let td = m.act("w", &[2, 2]);
    m.op(B::DENSIFY, &[tw], &[td], Opts::None);
    let ty = m.act("y", &[1, 2]);
    m.op(
        B::FULLY_CONNECTED,
        &[tx, td, -1],
        &[ty],
        Opts::Fc { act: Act::NONE },
    );
    m.outputs.push(ty);
    let e = refusal(&m.build());
    assert!(e.contains("`w_sparse`"), "{e}");
    assert!(e.contains("outside the shape"), "{e}");
}

/// LOGISTIC → DEPTH_TO_SPACE (block 2): `out[n, y·b + i, x·b + j, c] = in[n, y, x, (i·b + j)·C' + c]`.
#[test]
fn depth_to_space() {
    let (h, w, c, b) = (2, 3, 8, 2);
    let cc = c / (b * b);
    let x = values(h * w * c, 32);
    let mut m = Spec::default();
    let tx = m.input("x", &[1, h as i32, w as i32, c as i32]);
    let ts = m.act("s", &[1, h as i32, w as i32, c as i32]);
    m.op(B::LOGISTIC, &[tx], &[ts], Opts::None);
    let ty = m.act("y", &[1, (h * b) as i32, (w * b) as i32, cc as i32]);
    m.op(
        B::DEPTH_TO_SPACE,
        &[ts],
        &[ty],
        Opts::DepthToSpace { block: b as i32 },
    );
    m.outputs.push(ty);

    let out = run_tir(
        &m.build(),
        &[(vec![1, h as u64, w as u64, c as u64], x.clone())],
    );
    let sig = |v: f32| 1.0 / (1.0 + (-v).exp());
    let mut want = vec![0.0; x.len()];
    for yy in 0..h * b {
        for xx in 0..w * b {
            for k in 0..cc {
                let (y, i, x0, j) = (yy / b, yy % b, xx / b, xx % b);
                let src = (y * w + x0) * c + (i * b + j) * cc + k;
                want[(yy * w * b + xx) * cc + k] = sig(x[src]);
            }
        }
    }
    assert_eq!(out[0].0, vec![1, (h * b) as u64, (w * b) as u64, cc as u64]);
    assert_close(&out[0].1, &want);
}

/// SPLIT_V along the channels with one size left to infer (-1).
#[test]
fn split_v_with_an_inferred_size() {
    let x = values(3 * 4 * 5, 33);
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 3, 4, 5]);
    let sizes = m.i32("sizes", &[2], &[2, -1]);
    let axis = m.i32("axis", &[], &[3]);
    let ta = m.act("a", &[1, 3, 4, 2]);
    let tb = m.act("b", &[1, 3, 4, 3]);
    m.op(
        B::SPLIT_V,
        &[tx, sizes, axis],
        &[ta, tb],
        Opts::SplitV { num: 2 },
    );
    m.outputs.extend([ta, tb]);

    let out = run_tir(&m.build(), &[(vec![1, 3, 4, 5], x.clone())]);
    let a: Vec<f32> = (0..12).flat_map(|p| x[p * 5..p * 5 + 2].to_vec()).collect();
    let b: Vec<f32> = (0..12)
        .flat_map(|p| x[p * 5 + 2..p * 5 + 5].to_vec())
        .collect();
    assert_eq!(out[0].0, vec![1, 3, 4, 2]);
    assert_eq!(out[0].1, a);
    assert_eq!(out[1].0, vec![1, 3, 4, 3]);
    assert_eq!(out[1].1, b);
}

/// SPLIT_V sizes that do not add up to the axis are refused with both numbers.
#[test]
fn split_v_sizes_must_add_up() {
    let mut m = Spec::default();
    let tx = m.input("x", &[1, 5]);
    let sizes = m.i32("sizes", &[2], &[2, 2]);
    let axis = m.i32("axis", &[], &[1]);
    let ta = m.act("a", &[1, 2]);
    let tb = m.act("b", &[1, 2]);
    m.op(
        B::SPLIT_V,
        &[tx, sizes, axis],
        &[ta, tb],
        Opts::SplitV { num: 2 },
    );
    m.outputs.extend([ta, tb]);
    let e = refusal(&m.build());
    assert!(e.contains("SPLIT_V"), "{e}");
    assert!(e.contains("[2, 2] do not add up to 5"), "{e}");
}
