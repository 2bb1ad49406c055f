//! The kernels of non-f32 tensors (`kernels::typed`): every op on every element type it takes,
//! generated code against the reference interpreter, bit for bit (integers and bools have no
//! rounding to tolerate, and casts must agree exactly). Inputs include the awkward values:
//! NaN, ±∞, out-of-range floats, zero divisors, `MIN / -1`.

use tir_codegen::{jit_run_tensors, Bufferized};
use tir_interp::{Data, Tensor, Weights};
use tir_ir::{DType, TensorType};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

/// Values of `dtype` cycling through `pattern` (converted as Cast converts f64).
fn tensor(dtype: DType, shape: &[u64], pattern: &[f64]) -> Tensor {
    let n: u64 = shape.iter().product();
    let v: Vec<f64> = (0..n as usize)
        .map(|i| pattern[i % pattern.len()])
        .collect();
    let data = match dtype {
        DType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
        DType::I8 => Data::I8(v.iter().map(|&x| x as i8).collect()),
        DType::U8 => Data::U8(v.iter().map(|&x| x as u8).collect()),
        DType::I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
        DType::I64 => Data::I64(v.iter().map(|&x| x as i64).collect()),
        DType::Bool => Data::Bool(v.iter().map(|&x| x != 0.0).collect()),
        DType::F16 => Data::from_f32(DType::F16, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        other => panic!("no test data for {other}"),
    };
    Tensor::new(TensorType::new(shape.to_vec(), dtype), data).unwrap()
}

const FLOATS: &[f64] = &[
    1.5,
    -2.7,
    0.0,
    -0.0,
    f64::NAN,
    3e10,
    -3e10,
    f64::INFINITY,
    f64::NEG_INFINITY,
    127.9,
    -128.5,
    255.5,
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
];
const DIVISORS: &[f64] = &[2.0, -1.0, 0.0, 3.0, -4.0, 1.0, 7.0];

/// Runs `text` on the interpreter and the generated code and asserts equal bytes.
fn check(text: &str, inputs: &[Tensor]) {
    let module = tir_ir::parse_and_verify(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    let weights = Weights::generate(&module, 0).unwrap();
    let expected = tir_interp::run(&module, &weights, inputs).unwrap();
    let mut m = module.clone();
    let passes = parse_pipeline("plan{sharing=true},bufferize").unwrap();
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

const TYPES: [DType; 6] = [
    DType::F32,
    DType::I8,
    DType::U8,
    DType::I32,
    DType::I64,
    DType::Bool,
];

#[test]
fn cast_between_every_pair_of_types() {
    for from in TYPES {
        let pattern = if from == DType::F32 { FLOATS } else { INTS };
        let x = tensor(from, &[3, 5], pattern);
        for to in TYPES {
            let text = format!(
                "module @m {{ func @main(%x: tensor<3x5x{from}>) -> tensor<3x5x{to}> {{\n\
                 %y = cast(%x) {{to = {to}}} : tensor<3x5x{to}>\n return %y\n}} }}"
            );
            check(&text, std::slice::from_ref(&x));
        }
    }
}

#[test]
fn comparisons_broadcast_and_treat_nan_as_unordered() {
    for d in TYPES {
        let pattern = if d == DType::F32 { FLOATS } else { INTS };
        let a = tensor(d, &[4, 6], pattern);
        let b = tensor(d, &[6], &pattern[3..]);
        for c in [
            "equal",
            "less",
            "less_or_equal",
            "greater",
            "greater_or_equal",
        ] {
            let text = format!(
                "module @m {{ func @main(%a: tensor<4x6x{d}>, %b: tensor<6x{d}>) -> tensor<4x6xbool> {{\n\
                 %y = {c}(%a, %b) : tensor<4x6xbool>\n return %y\n}} }}"
            );
            check(&text, &[a.clone(), b.clone()]);
        }
    }
}

#[test]
fn where_selects_with_three_way_broadcasting() {
    let c = tensor(
        DType::Bool,
        &[2, 1, 5],
        &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0],
    );
    for d in TYPES {
        let pattern = if d == DType::F32 { FLOATS } else { INTS };
        let x = tensor(d, &[3, 1], pattern);
        let y = tensor(d, &[2, 3, 5], &pattern[2..]);
        let text = format!(
            "module @m {{ func @main(%c: tensor<2x1x5xbool>, %x: tensor<3x1x{d}>, %y: tensor<2x3x5x{d}>) -> tensor<2x3x5x{d}> {{\n\
             %r = where(%c, %x, %y) : tensor<2x3x5x{d}>\n return %r\n}} }}"
        );
        check(&text, &[c.clone(), x, y]);
    }
}

#[test]
fn logical_ops_and_not() {
    let a = tensor(DType::Bool, &[3, 4], &[1.0, 0.0, 1.0, 1.0, 0.0]);
    let b = tensor(DType::Bool, &[4], &[0.0, 1.0, 1.0]);
    for l in ["and", "or", "xor"] {
        let text = format!(
            "module @m {{ func @main(%a: tensor<3x4xbool>, %b: tensor<4xbool>) -> tensor<3x4xbool> {{\n\
             %y = {l}(%a, %b) : tensor<3x4xbool>\n %z = not(%y) : tensor<3x4xbool>\n return %z\n}} }}"
        );
        check(&text, &[a.clone(), b.clone()]);
    }
}

#[test]
fn integer_arithmetic_wraps_and_division_never_traps() {
    for d in [DType::I8, DType::U8, DType::I32, DType::I64] {
        let a = tensor(d, &[5, 7], INTS);
        let b = tensor(d, &[7], DIVISORS);
        for op in ["add", "sub", "mul", "div", "max", "min", "pow"] {
            let text = format!(
                "module @m {{ func @main(%a: tensor<5x7x{d}>, %b: tensor<7x{d}>) -> tensor<5x7x{d}> {{\n\
                 %y = {op}(%a, %b) : tensor<5x7x{d}>\n return %y\n}} }}"
            );
            check(&text, &[a.clone(), b.clone()]);
        }
        for op in ["relu", "relu6", "abs", "neg"] {
            let text = format!(
                "module @m {{ func @main(%a: tensor<5x7x{d}>) -> tensor<5x7x{d}> {{\n\
                 %y = {op}(%a) : tensor<5x7x{d}>\n return %y\n}} }}"
            );
            check(&text, std::slice::from_ref(&a));
        }
    }
}

#[test]
fn argmax_and_argmin_on_every_axis() {
    for d in [DType::F32, DType::I8, DType::U8, DType::I32, DType::I64] {
        // Repeated values, so select_last_index matters; NaNs among the floats.
        let pattern: &[f64] = if d == DType::F32 {
            &[1.0, 3.0, f64::NAN, 3.0, -2.0, 1.0, 0.0]
        } else {
            &[1.0, 3.0, 3.0, -2.0, 1.0, 0.0, 5.0, 5.0]
        };
        let x = tensor(d, &[3, 4, 5], pattern);
        for op in ["argmax", "argmin"] {
            for axis in [0i64, 1, -1] {
                for (keep, last) in [(true, false), (false, true)] {
                    let mut shape = vec![3u64, 4, 5];
                    let ax = axis.rem_euclid(3) as usize;
                    if keep {
                        shape[ax] = 1;
                    } else {
                        shape.remove(ax);
                    }
                    let s: Vec<String> = shape.iter().map(u64::to_string).collect();
                    let t = format!("tensor<{}xi64>", s.join("x"));
                    let text = format!(
                        "module @m {{ func @main(%x: tensor<3x4x5x{d}>) -> {t} {{\n\
                         %y = {op}(%x) {{axis = {axis}, keepdims = {keep}, select_last_index = {last}}} : {t}\n return %y\n}} }}"
                    );
                    check(&text, std::slice::from_ref(&x));
                }
            }
        }
    }
}

#[test]
fn views_and_returned_values_copy_bytes() {
    let x = tensor(DType::I64, &[2, 6], INTS);
    let text =
        "module @m { func @main(%x: tensor<2x6xi64>) -> (tensor<3x4xi64>, tensor<2x6xi64>) {\n\
                %y = reshape(%x) {shape = [3, 4]} : tensor<3x4xi64>\n return %y, %x\n} }";
    check(text, &[x]);
}

#[test]
fn argmax_results_match_numpy_on_a_known_case() {
    // The interpreter's own semantics, pinned: first NaN wins; ties by select_last_index.
    let text =
        "module @m { func @main(%x: tensor<6xf32>) -> (tensor<i64>, tensor<i64>, tensor<i64>) {\n\
                %a = argmax(%x) {keepdims = false} : tensor<i64>\n\
                %b = argmax(%x) {keepdims = false, select_last_index = true} : tensor<i64>\n\
                %c = argmin(%x) {keepdims = false} : tensor<i64>\n return %a, %b, %c\n} }";
    let module = tir_ir::parse_and_verify(text).unwrap();
    let x = Tensor::f32([6], vec![1.0, 4.0, -3.0, 4.0, -3.0, 2.0]).unwrap();
    let out = tir_interp::run(&module, &Weights::default(), &[x]).unwrap();
    let got: Vec<Vec<f64>> = out.iter().map(Tensor::to_f64).collect();
    assert_eq!(got, vec![vec![1.0], vec![3.0], vec![2.0]]);
    let y = Tensor::f32([6], vec![1.0, f32::NAN, 9.0, f32::NAN, 0.0, 2.0]).unwrap();
    let out = tir_interp::run(&module, &Weights::default(), &[y]).unwrap();
    let got: Vec<Vec<f64>> = out.iter().map(Tensor::to_f64).collect();
    assert_eq!(got, vec![vec![1.0], vec![3.0], vec![1.0]]);
}

#[test]
fn integer_clip_binds_only_finite_bounds() {
    for d in [DType::I8, DType::U8, DType::I32, DType::I64] {
        let a = tensor(d, &[4, 5], INTS);
        for attrs in ["min = -5.0, max = 100.0", "min = 0.0", "max = 3.0", ""] {
            let attrs = if attrs.is_empty() {
                String::new()
            } else {
                format!(" {{{attrs}}}")
            };
            let text = format!(
                "module @m {{ func @main(%a: tensor<4x5x{d}>) -> tensor<4x5x{d}> {{\n\
                 %y = clip(%a){attrs} : tensor<4x5x{d}>\n return %y\n}} }}"
            );
            check(&text, std::slice::from_ref(&a));
        }
    }
}

#[test]
fn f16_casts_round_to_nearest_even_through_f32() {
    let x = tensor(DType::F32, &[2, 7], FLOATS);
    let h = tensor(DType::F16, &[2, 7], FLOATS);
    for other in TYPES {
        let there = format!(
            "module @m {{ func @main(%x: tensor<2x7x{other}>) -> tensor<2x7xf16> {{\n\
             %y = cast(%x) {{to = f16}} : tensor<2x7xf16>\n return %y\n}} }}"
        );
        let input = if other == DType::F32 {
            x.clone()
        } else {
            tensor(other, &[2, 7], INTS)
        };
        check(&there, &[input]);
        let back = format!(
            "module @m {{ func @main(%x: tensor<2x7xf16>) -> tensor<2x7x{other}> {{\n\
             %y = cast(%x) {{to = {other}}} : tensor<2x7x{other}>\n return %y\n}} }}"
        );
        check(&back, std::slice::from_ref(&h));
    }
}

#[test]
fn f16_arithmetic_and_bf16_are_refused_by_code_generation_with_a_reason() {
    for (text, what) in [
        (
            "module @m { func @main(%x: tensor<4xf16>) -> tensor<4xf16> {\n\
             %y = add(%x, %x) : tensor<4xf16>\n return %y\n} }",
            "f16",
        ),
        (
            "module @m { func @main(%x: tensor<4xf32>) -> tensor<4xbf16> {\n\
             %y = cast(%x) {to = bf16} : tensor<4xbf16>\n return %y\n} }",
            "bf16",
        ),
    ] {
        let mut m = tir_ir::parse_and_verify(text).unwrap();
        let passes = parse_pipeline("plan{sharing=true},bufferize").unwrap();
        run_pipeline(&mut m, &passes, true, |_, _| {}).unwrap();
        let x = m.entry().unwrap().params[0];
        let ty = m.entry().unwrap().ty(x).unwrap().clone();
        let proof = Bufferized::new(&mut m).unwrap();
        let input = if ty.dtype == DType::F16 {
            tensor(DType::F16, &[4], &[1.0])
        } else {
            tensor(DType::F32, &[4], &[1.0])
        };
        let err = jit_run_tensors(&proof, &Weights::default(), &[input]).unwrap_err();
        assert!(err.to_string().contains(what), "{err}");
    }
}

#[test]
fn mod_takes_the_sign_of_the_divisor_or_with_fmod_of_the_dividend() {
    for d in [DType::F32, DType::I8, DType::U8, DType::I32, DType::I64] {
        let (pa, pb) = if d == DType::F32 {
            (
                FLOATS,
                &[2.5, -1.0, 0.0, f64::INFINITY, -4.0, 3.0, f64::NAN][..],
            )
        } else {
            (INTS, DIVISORS)
        };
        let a = tensor(d, &[5, 7], pa);
        let b = tensor(d, &[7], pb);
        for fmod in [true, false] {
            if d == DType::F32 && !fmod {
                continue;
            }
            let text = format!(
                "module @m {{ func @main(%a: tensor<5x7x{d}>, %b: tensor<7x{d}>) -> tensor<5x7x{d}> {{\n\
                 %y = mod(%a, %b) {{fmod = {fmod}}} : tensor<5x7x{d}>\n return %y\n}} }}"
            );
            check(&text, &[a.clone(), b.clone()]);
        }
    }
}

#[test]
fn interpreter_mod_follows_numpy() {
    // np.mod and np.fmod on int32: [5, -5, 5, -5] by [3, 3, -3, -3], and by zero.
    let text = "module @m { func @main(%a: tensor<5xi32>, %b: tensor<5xi32>) -> (tensor<5xi32>, tensor<5xi32>) {\n\
                %m = mod(%a, %b) : tensor<5xi32>\n %f = mod(%a, %b) {fmod = true} : tensor<5xi32>\n return %m, %f\n} }";
    let module = tir_ir::parse_and_verify(text).unwrap();
    let a = tensor(DType::I32, &[5], &[5.0, -5.0, 5.0, -5.0, 7.0]);
    let b = tensor(DType::I32, &[5], &[3.0, 3.0, -3.0, -3.0, 0.0]);
    let out = tir_interp::run(&module, &Weights::default(), &[a, b]).unwrap();
    assert_eq!(out[0].data, Data::I32(vec![2, 1, -1, -2, 0]));
    assert_eq!(out[1].data, Data::I32(vec![2, -2, 2, -2, 0]));
}
