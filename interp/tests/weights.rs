//! Weights: seeded generation (determinism, scale per role) and safetensors files.

mod common;
use common::*;
use tir_interp::weights::{generate_values, role_of, Role, SplitMix64};
use tir_interp::{run, Weights, WeightsError};
use tir_ir::builder::Builder;
use tir_ir::op::{Conv2d, Op};
use tir_ir::{Module, TensorType};

/// conv(x, w, b) -> batch_norm(scale, bias, mean, var).
fn conv_bn() -> Module {
    let mut b = Builder::new("m");
    let x = b.input("x", TensorType::f32([1, 2, 4, 4]));
    let w = b.weight("conv.weight", TensorType::f32([8, 2, 3, 3]));
    let bias = b.weight("conv.bias", TensorType::f32([8]));
    let y = b.op(Op::Conv2d(Conv2d::default()), &[x, w, bias]).unwrap();
    let p: Vec<_> = ["bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]
        .iter()
        .map(|n| b.weight(*n, TensorType::f32([8])))
        .collect();
    let z = b
        .op(
            Op::BatchNorm { epsilon: 1e-5 },
            &[y, p[0], p[1], p[2], p[3]],
        )
        .unwrap();
    b.finish(&[z])
}

#[test]
fn generated_values_are_pinned() {
    // Integer arithmetic and exact f32 steps only: these bits are the same on every machine.
    let v = generate_values("conv0.weight", 4, Role::Uniform, 0);
    let bits: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
    assert_eq!(bits, PINNED);
    let mut rng = SplitMix64(0);
    assert_eq!(
        rng.next_u64(),
        0xe220_a839_7b1d_cdaf,
        "SplitMix64 reference output for state 0"
    );
}

const PINNED: [u32; 4] = [3_209_619_658, 3_208_389_476, 3_200_216_528, 3_211_608_048];

#[test]
fn generation_is_deterministic_and_depends_on_name_and_seed() {
    let m = conv_bn();
    assert_eq!(
        Weights::generate(&m, 7).unwrap(),
        Weights::generate(&m, 7).unwrap()
    );
    assert_ne!(
        Weights::generate(&m, 7).unwrap(),
        Weights::generate(&m, 8).unwrap()
    );
    assert_ne!(
        generate_values("a", 8, Role::Uniform, 0),
        generate_values("b", 8, Role::Uniform, 0)
    );
}

#[test]
fn roles_come_from_the_first_use() {
    let m = conv_bn();
    let f = m.entry().unwrap();
    let by_name = |n: &str| f.values.iter().find(|(_, d)| d.name == n).unwrap().0;
    assert_eq!(
        role_of(f, by_name("conv.weight")),
        Role::Weight { fan_in: 18 }
    );
    assert_eq!(role_of(f, by_name("conv.bias")), Role::Bias);
    assert_eq!(role_of(f, by_name("bn.weight")), Role::Scale);
    assert_eq!(role_of(f, by_name("bn.running_mean")), Role::Bias);
    assert_eq!(role_of(f, by_name("bn.running_var")), Role::Variance);
}

#[test]
fn generated_weights_have_the_scale_of_their_role() {
    let m = conv_bn();
    let w = Weights::generate(&m, 3).unwrap();
    let get = |n: &str| values(w.get(n).unwrap()).to_vec();
    let bound = (3.0f32 / 18.0).sqrt();
    assert!(get("conv.weight").iter().all(|v| v.abs() <= bound));
    assert!(get("conv.weight").iter().any(|v| v.abs() > bound / 2.0));
    assert!(get("conv.bias").iter().all(|v| v.abs() <= 0.05));
    assert!(get("bn.weight").iter().all(|v| (0.9..=1.1).contains(v)));
    assert!(get("bn.running_var")
        .iter()
        .all(|v| (1.0..=1.2).contains(v)));
}

fn to_file(tensors: &[(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: Vec<_> = tensors
        .iter()
        .map(|(n, d, s, b)| {
            (
                n.to_string(),
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, &None).unwrap()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn tiny_gemm() -> Module {
    let mut b = Builder::new("g");
    let x = b.input("x", TensorType::f32([1, 2]));
    let w = b.weight("fc.weight", TensorType::f32([3, 2]));
    let y = b
        .op(
            Op::Gemm(tir_ir::op::Gemm {
                trans_b: true,
                ..Default::default()
            }),
            &[x, w],
        )
        .unwrap();
    b.finish(&[y])
}

#[test]
fn safetensors_file_written_by_the_crate_loads_and_runs() {
    let m = tiny_gemm();
    let bytes = to_file(&[
        (
            "fc.weight",
            safetensors::Dtype::F32,
            vec![3, 2],
            f32_bytes(&[1., 2., 3., 4., 5., 6.]),
        ),
        ("unused", safetensors::Dtype::I64, vec![1], vec![0; 8]),
    ]);
    let w = Weights::from_safetensors(&m, &bytes).unwrap();
    assert_eq!(w.len(), 1);
    assert_close(
        w.get("fc.weight").unwrap(),
        &[3, 2],
        &[1., 2., 3., 4., 5., 6.],
        0.0,
    );
    let y = run(&m, &w, &[t(&[1, 2], &[1., 1.])]).unwrap();
    assert_close(&y[0], &[1, 3], &[3., 7., 11.], 0.0);
}

#[test]
fn generated_weights_round_trip_through_safetensors() {
    let m = conv_bn();
    let w = Weights::generate(&m, 1).unwrap();
    let bytes = w.to_safetensors().unwrap();
    assert_eq!(Weights::from_safetensors(&m, &bytes).unwrap(), w);
}

#[test]
fn a_missing_weight_names_the_const() {
    let m = tiny_gemm();
    let bytes = to_file(&[("other", safetensors::Dtype::F32, vec![1], f32_bytes(&[1.]))]);
    let e = Weights::from_safetensors(&m, &bytes).unwrap_err();
    assert_eq!(
        e,
        WeightsError::Missing {
            value: "%fc.weight".into(),
            name: "fc.weight".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "`%fc.weight`: the weight `fc.weight` is not in the weights file"
    );
}

#[test]
fn a_wrong_shape_names_the_const_and_both_types() {
    let m = tiny_gemm();
    let bytes = to_file(&[(
        "fc.weight",
        safetensors::Dtype::F32,
        vec![2, 3],
        f32_bytes(&[0.; 6]),
    )]);
    let e = Weights::from_safetensors(&m, &bytes)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "`%fc.weight`: the weight `fc.weight` is tensor<2x3xf32> in the weights file, but the IR declares tensor<3x2xf32>"
    );
}

#[test]
fn a_wrong_dtype_is_a_mismatch() {
    let m = tiny_gemm();
    let bytes = to_file(&[(
        "fc.weight",
        safetensors::Dtype::F16,
        vec![3, 2],
        vec![0; 12],
    )]);
    let e = Weights::from_safetensors(&m, &bytes)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor<3x2xf16> in the weights file") && e.contains("tensor<3x2xf32>"),
        "{e}"
    );
    let bytes = to_file(&[(
        "fc.weight",
        safetensors::Dtype::F64,
        vec![3, 2],
        vec![0; 48],
    )]);
    let e = Weights::from_safetensors(&m, &bytes).unwrap_err();
    assert!(matches!(e, WeightsError::UnsupportedDType { .. }), "{e}");
}

#[test]
fn a_corrupt_file_is_an_error() {
    let m = tiny_gemm();
    for bytes in [&b""[..], b"\x10\0\0\0\0\0\0\0{not json}", &[0xff; 64]] {
        assert!(matches!(
            Weights::from_safetensors(&m, bytes),
            Err(WeightsError::Safetensors(_))
        ));
    }
}

#[test]
fn weights_of_the_wrong_type_are_rejected_by_run() {
    let m = tiny_gemm();
    let mut w = Weights::new();
    w.insert("fc.weight", t(&[6], &[0.; 6]));
    let e = run(&m, &w, &[t(&[1, 2], &[1., 1.])])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("%fc.weight") && e.contains("tensor<3x2xf32>"),
        "{e}"
    );
    assert_eq!(w.check(&m).map_err(|e| e.to_string()), Err(e));
}
