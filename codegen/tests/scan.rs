//! `cumsum` and `top_k` (`kernels::scan`): the generated kernels against the reference
//! interpreter, bit for bit, on every element type each takes, every axis, both directions,
//! and the awkward values (NaN, ±0, ±∞, ties, integer overflow); and the interpreter itself
//! against hand-computed results.

use tir_codegen::{jit_run_tensors, Bufferized};
use tir_interp::{Data, Tensor, Weights};
use tir_ir::{DType, TensorType};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

/// A small deterministic generator (an LCG; the tests need variety, not quality).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Values of `dtype` drawn from `pool` (converted as Cast converts f64).
fn tensor(dtype: DType, shape: &[u64], pool: &[f64], rng: &mut Rng) -> Tensor {
    let n: u64 = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| pool[rng.below(pool.len() as u64) as usize])
        .collect();
    let data = match dtype {
        DType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
        DType::I8 => Data::I8(v.iter().map(|&x| x as i8).collect()),
        DType::U8 => Data::U8(v.iter().map(|&x| x as u8).collect()),
        DType::I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
        DType::I64 => Data::I64(v.iter().map(|&x| x as i64).collect()),
        other => panic!("no test data for {other}"),
    };
    Tensor::new(TensorType::new(shape.to_vec(), dtype), data).unwrap()
}

/// Floats with ties, signed zeros, NaN, infinities and magnitudes whose sums round.
const FLOATS: &[f64] = &[
    1.5,
    -2.7,
    0.0,
    -0.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.1,
    1e8,
    -1e8,
    3.3333,
    1.5,
    7.0,
    -1.0,
];
const INTS: &[f64] = &[
    3.0,
    -7.0,
    0.0,
    1.0,
    -1.0,
    127.0,
    -128.0,
    100.0,
    2147483647.0,
    -2147483648.0,
    5.0,
    3.0,
];

/// Runs `text` on the interpreter and the generated code and asserts equal bytes; returns
/// the interpreter's results.
fn check(text: &str, inputs: &[Tensor]) -> Vec<Tensor> {
    let module = tir_ir::parse_and_verify(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    let weights = Weights::generate(&module, 0).unwrap();
    let expected = tir_interp::run(&module, &weights, inputs).unwrap();
    for sharing in [false, true] {
        let mut m = module.clone();
        let passes = parse_pipeline(&format!("plan{{sharing={sharing}}},bufferize")).unwrap();
        run_pipeline(&mut m, &passes, true, |_, _| {}).unwrap();
        let proof = Bufferized::new(&mut m).unwrap();
        let got = jit_run_tensors(&proof, &weights, inputs).unwrap();
        assert_eq!(got.len(), expected.len());
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g.ty, e.ty, "output {i}");
            assert_eq!(
                g.data.to_le_bytes(),
                e.data.to_le_bytes(),
                "output {i} of\n{text}\ninterpreter {:?}\ngenerated   {:?}",
                e.data,
                g.data
            );
        }
    }
    expected
}

fn ty(shape: &[u64], d: DType) -> String {
    TensorType::new(shape.to_vec(), d).to_string()
}

#[test]
fn cumsum_every_type_axis_and_direction_bitwise() {
    let mut rng = Rng(19);
    for dtype in [DType::F32, DType::I32, DType::I64] {
        let pool = if dtype == DType::F32 { FLOATS } else { INTS };
        for shape in [vec![7u64], vec![3, 5], vec![2, 3, 4], vec![1, 6, 1]] {
            for axis in -(shape.len() as i64)..shape.len() as i64 {
                for (exclusive, reverse) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let t = ty(&shape, dtype);
                    // The cumsum feeds an add so that its result is an intermediate in the
                    // slab too, not only a returned value.
                    let text = format!(
                        "module @m {{\n  func @main(%x: {t}) -> ({t}, {t}) {{\n    \
                         %y = cumsum(%x) {{axis = {axis}, exclusive = {exclusive}, reverse = {reverse}}} : {t}\n    \
                         %z = add(%y, %x) : {t}\n    \
                         return %y, %z\n  }}\n}}\n"
                    );
                    check(&text, &[tensor(dtype, &shape, pool, &mut rng)]);
                }
            }
        }
    }
}

#[test]
fn cumsum_matches_hand_computed_sums() {
    let text = "module @m {\n  func @main(%x: tensor<2x3xf32>, %i: tensor<5xi32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<5xi32>, tensor<5xi32>) {\n    \
                %a = cumsum(%x) {axis = 1} : tensor<2x3xf32>\n    \
                %b = cumsum(%x) {axis = 0, exclusive = true, reverse = true} : tensor<2x3xf32>\n    \
                %c = cumsum(%i) {axis = 0, exclusive = true} : tensor<5xi32>\n    \
                %d = cumsum(%i) {axis = -1, reverse = true} : tensor<5xi32>\n    \
                return %a, %b, %c, %d\n  }\n}\n";
    let x = Tensor::f32(vec![2, 3], vec![1.0, 2.0, 3.0, -0.0, 5.0, 6.0]).unwrap();
    let i = Tensor::new(
        TensorType::new(vec![5], DType::I32),
        Data::I32(vec![1, 2, 3, 4, i32::MAX]),
    )
    .unwrap();
    let out = check(text, &[x, i]);
    assert_eq!(out[0].data, Data::F32(vec![1.0, 3.0, 6.0, -0.0, 5.0, 11.0]));
    // Reverse exclusive along axis 0: the last row is 0, the first the last row's elements.
    assert_eq!(out[1].data, Data::F32(vec![-0.0, 5.0, 6.0, 0.0, 0.0, 0.0]));
    assert_eq!(out[2].data, Data::I32(vec![0, 1, 3, 6, 10]));
    // The sum wraps in i32.
    assert_eq!(
        out[3].data,
        Data::I32(vec![
            i32::MAX.wrapping_add(10),
            i32::MAX.wrapping_add(9),
            i32::MAX.wrapping_add(7),
            i32::MAX.wrapping_add(4),
            i32::MAX
        ])
    );
    // -0.0 first stays -0.0 (`y[0] = x[0]`, NumPy's cumsum), an exclusive first is +0.0.
    let Data::F32(a) = &out[0].data else { panic!() };
    assert!(a[3].is_sign_negative());
    let Data::F32(b) = &out[1].data else { panic!() };
    assert!(b[0].is_sign_negative() && b[3].is_sign_positive());
}

#[test]
fn top_k_every_type_axis_k_and_direction_bitwise() {
    let mut rng = Rng(7);
    for dtype in [DType::F32, DType::I8, DType::U8, DType::I32, DType::I64] {
        let pool = if dtype == DType::F32 { FLOATS } else { INTS };
        for shape in [vec![9u64], vec![4, 6], vec![2, 5, 3]] {
            for axis in 0..shape.len() {
                let n = shape[axis];
                for k in [1, 2, n / 2 + 1, n] {
                    for largest in [true, false] {
                        let mut rs = shape.clone();
                        rs[axis] = k;
                        let (t, tv, ti) = (ty(&shape, dtype), ty(&rs, dtype), ty(&rs, DType::I64));
                        let text = format!(
                            "module @m {{\n  func @main(%x: {t}) -> ({tv}, {ti}) {{\n    \
                             %v, %i = top_k(%x) {{axis = {axis}, k = {k}, largest = {largest}}} : {tv}, {ti}\n    \
                             return %v, %i\n  }}\n}}\n"
                        );
                        check(&text, &[tensor(dtype, &shape, pool, &mut rng)]);
                    }
                }
            }
        }
    }
}

#[test]
fn top_k_results_as_intermediates_bitwise() {
    // Both results feed later ops: they live in the slab, written through `outs`.
    let text = "module @m {\n  func @main(%x: tensor<3x8xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {\n    \
                %v, %i = top_k(%x) {k = 3} : tensor<3x3xf32>, tensor<3x3xi64>\n    \
                %f = cast(%i) {to = f32} : tensor<3x3xf32>\n    \
                %s = add(%v, %f) : tensor<3x3xf32>\n    \
                %n = neg(%v) : tensor<3x3xf32>\n    \
                return %s, %n\n  }\n}\n";
    let mut rng = Rng(3);
    check(text, &[tensor(DType::F32, &[3, 8], FLOATS, &mut rng)]);
}

#[test]
fn top_k_breaks_ties_by_lower_index_and_ranks_nan_highest() {
    let text = "module @m {\n  func @main(%x: tensor<7xf32>) -> (tensor<4xf32>, tensor<4xi64>, tensor<4xf32>, tensor<4xi64>) {\n    \
                %v, %i = top_k(%x) {axis = 0, k = 4} : tensor<4xf32>, tensor<4xi64>\n    \
                %s, %j = top_k(%x) {axis = 0, k = 4, largest = false} : tensor<4xf32>, tensor<4xi64>\n    \
                return %v, %i, %s, %j\n  }\n}\n";
    let x = Tensor::f32(vec![7], vec![2.0, f32::NAN, 5.0, 2.0, 5.0, -0.0, 0.0]).unwrap();
    let out = check(text, &[x]);
    let Data::F32(v) = &out[0].data else { panic!() };
    assert!(v[0].is_nan());
    assert_eq!(&v[1..], &[5.0, 5.0, 2.0]);
    assert_eq!(out[1].data, Data::I64(vec![1, 2, 4, 0]));
    // Smallest: -0 and +0 are equal, so index order decides; NaN is last.
    let Data::F32(s) = &out[2].data else { panic!() };
    assert!(s[0].is_sign_negative() && s[1].is_sign_positive());
    assert_eq!(out[3].data, Data::I64(vec![5, 6, 0, 3]));
}
