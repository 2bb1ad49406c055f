//! Einsum on f32, imported as a composition of transposes, reshapes, `matmul`, `mul` and
//! `reduce_sum` (onnx/src/import/einsum.rs): each model is built here with prost, imported and
//! run through the reference interpreter, and checked against its sums written out as loops;
//! what the composition cannot express is refused with the reason.

mod common;
use common::*;
use tir_ir::DType;
use tir_onnx::proto::tensor_proto::DataType;
use tir_onnx::proto::ModelProto;

/// Imports `m` and runs it on f32 inputs; every output as (shape, values as f64, dtype).
fn run(m: &ModelProto, inputs: &[(&[u64], Vec<f32>)]) -> Vec<(Vec<u64>, Vec<f64>, DType)> {
    let imp = import(m).unwrap_or_else(|e| panic!("import failed: {e}"));
    let st = imp.weights.to_safetensors().unwrap();
    let weights = tir_interp::Weights::from_safetensors(&imp.module, &st).unwrap();
    let given: Vec<_> = inputs
        .iter()
        .map(|(s, v)| tir_interp::Tensor::f32(s.to_vec(), v.clone()).unwrap())
        .collect();
    tir_interp::run(&imp.module, &weights, &given)
        .unwrap()
        .into_iter()
        .map(|t| (t.shape().to_vec(), t.to_f64(), t.ty.dtype))
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// One Einsum node over f32 inputs of the given shapes, values `0.5·k - 3` for the `k`-th
/// element of each input, offset per input.
fn einsum(eq: &str, shapes: &[&[u64]]) -> (Vec<u64>, Vec<f64>, Vec<Vec<f32>>) {
    let names = ["a", "b", "c"];
    let ins: Vec<_> = shapes
        .iter()
        .zip(names)
        .map(|(s, n)| input(n, &s.iter().map(|&d| d as i64).collect::<Vec<_>>()))
        .collect();
    let m = model(
        12,
        ins,
        &["y"],
        vec![],
        vec![node(
            "Einsum",
            &names[..shapes.len()],
            &["y"],
            vec![as_("equation", eq)],
        )],
    );
    let data: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(j, s)| {
            let n: u64 = s.iter().product();
            (0..n).map(|k| 0.5 * k as f32 - 3.0 + j as f32).collect()
        })
        .collect();
    let given: Vec<(&[u64], Vec<f32>)> = shapes.iter().copied().zip(data.clone()).collect();
    let out = run(&m, &given);
    (out[0].0.clone(), out[0].1.clone(), data)
}

#[test]
fn einsum_compositions_match_their_sums_written_out() {
    // Batch matmul: y[b,i,k] = Σj a[b,i,j]·c[b,j,k].
    let (s, y, d) = einsum("bij, bjk -> bik", &[&[2, 3, 4], &[2, 4, 5]]);
    assert_eq!(s, vec![2, 3, 5]);
    let mut want = vec![];
    for b in 0..2 {
        for i in 0..3 {
            for k in 0..5 {
                let mut acc = 0.0f64;
                for j in 0..4 {
                    acc += d[0][b * 12 + i * 4 + j] as f64 * d[1][b * 20 + j * 5 + k] as f64;
                }
                want.push(acc);
            }
        }
    }
    assert_close(&y, &want, "batch matmul");
    // Transpose.
    let (s, y, d) = einsum("ij->ji", &[&[2, 3]]);
    assert_eq!(s, vec![3, 2]);
    let want: Vec<f64> = (0..3)
        .flat_map(|j| (0..2).map(move |i| (i, j)))
        .map(|(i, j)| d[0][i * 3 + j] as f64)
        .collect();
    assert_eq!(y, want);
    // Sum over an axis, and everything (implicit output of a single repeated-free term).
    let (s, y, _) = einsum("ij->i", &[&[2, 3]]);
    assert_eq!(s, vec![2]);
    assert_close(&y, &[-7.5, -3.0], "row sums");
    let (s, y, _) = einsum("ij->", &[&[2, 3]]);
    assert_eq!(s, Vec::<u64>::new());
    assert_close(&y, &[-10.5], "total");
    // Inner product (implicit output: no label once, a scalar).
    let (s, y, _) = einsum("i,i", &[&[4], &[4]]);
    assert_eq!(s, Vec::<u64>::new());
    // a = [-3, -2.5, -2, -1.5], b = [-2, -1.5, -1, -0.5].
    assert_close(&y, &[6.0 + 3.75 + 2.0 + 0.75], "inner product");
    // Outer product.
    let (s, y, d) = einsum("i,j->ij", &[&[2], &[3]]);
    assert_eq!(s, vec![2, 3]);
    let want: Vec<f64> = (0..2)
        .flat_map(|i| (0..3).map(move |j| (i, j)))
        .map(|(i, j)| d[0][i] as f64 * d[1][j] as f64)
        .collect();
    assert_eq!(y, want);
    // Implicit output, alphabetical: `ba,bc` sums b and gives ac.
    let (s, y, d) = einsum("ba,bc", &[&[3, 2], &[3, 2]]);
    assert_eq!(s, vec![2, 2]);
    let mut want = vec![];
    for a in 0..2 {
        for c in 0..2 {
            want.push(
                (0..3)
                    .map(|b| d[0][b * 2 + a] as f64 * d[1][b * 2 + c] as f64)
                    .sum(),
            );
        }
    }
    assert_close(&y, &want, "implicit ac");
    // Three operands, a label only one carries (summed first), an ellipsis.
    let (s, y, d) = einsum("...ij,jk,kl->...il", &[&[2, 2, 3], &[3, 2], &[2, 2]]);
    assert_eq!(s, vec![2, 2, 2]);
    let mut want = vec![];
    for e in 0..2 {
        for i in 0..2 {
            for l in 0..2 {
                let mut acc = 0.0f64;
                for j in 0..3 {
                    for k in 0..2 {
                        acc += d[0][e * 6 + i * 3 + j] as f64
                            * d[1][j * 2 + k] as f64
                            * d[2][k * 2 + l] as f64;
                    }
                }
                want.push(acc);
            }
        }
    }
    assert_close(&y, &want, "chain with ellipsis");
    let (s, y, d) = einsum("ijk->ki", &[&[2, 3, 2]]);
    assert_eq!(s, vec![2, 2]);
    let mut want = vec![];
    for k in 0..2 {
        for i in 0..2 {
            want.push((0..3).map(|j| d[0][i * 6 + j * 2 + k] as f64).sum());
        }
    }
    assert_close(&y, &want, "sum and transpose");
}

#[test]
fn einsum_refuses_diagonals_mismatched_extents_and_other_types() {
    let one = |eq: &str, dims: &[i64]| {
        error(&model(
            12,
            vec![input("x", dims)],
            &["y"],
            vec![],
            vec![node("Einsum", &["x"], &["y"], vec![as_("equation", eq)])],
        ))
    };
    let e = one("ii->i", &[3, 3]);
    assert!(e.contains("repeats within one operand (a diagonal)"), "{e}");
    let e = one("ij,jk->ik", &[3, 3]);
    assert!(e.contains("2 input term(s) for 1 input(s)"), "{e}");
    let e = one("ijk->i", &[3, 3]);
    assert!(e.contains("3 label(s) for an operand of rank 2"), "{e}");
    let e = one("ij->k", &[3, 3]);
    assert!(
        e.contains("the output label `k` is in no input term"),
        "{e}"
    );
    let e = one("i2->i", &[3, 3]);
    assert!(e.contains("labels are letters"), "{e}");
    let e = error(&model(
        12,
        vec![input("x", &[2, 3]), input("z", &[4, 5])],
        &["y"],
        vec![],
        vec![node(
            "Einsum",
            &["x", "z"],
            &["y"],
            vec![as_("equation", "ij,jk->ik")],
        )],
    ));
    assert!(e.contains("stand(s) for extents 3 and 4"), "{e}");
    let e = error(&model(
        12,
        vec![input_sym("x", &[D::N(2)], DataType::Int32)],
        &["y"],
        vec![],
        vec![node(
            "Einsum",
            &["x"],
            &["y"],
            vec![as_("equation", "i->i")],
        )],
    ));
    assert!(e.contains("Einsum is supported on f32 only"), "{e}");
}
